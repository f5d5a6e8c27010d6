"""Analysis tables and figures of a set of TeLAPA runs (paper Sec. "Local transfer",
"Stepping-Stone Lineages" and App. "Geometry diagnostics").

Statistics are computed per run and pooled: pair and candidate tables gain a leading
``run`` column (the run's label, with its directory name when labels repeat), count
matrices are summed by archive tag, geometry ratios averaged cell-wise over runs.
Figures use matplotlib's object API (no pyplot state); a panel without data says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from telapa.analysis.data import (
    TeLAPARun,
    candidates_frame,
    elites_with_tags,
    family_order,
    fresh_frame,
)
from telapa.analysis.geometry import (
    centroid_distances,
    elementwise_mean,
    mean_separation,
    rms_radius,
    run_descriptors,
    tsne_embedding,
)
from telapa.analysis.lineage import ancestry_matrix, immediate_source_matrix, lineage_properties
from telapa.analysis.local_transfer import (
    local_deltas,
    pair_statistics,
    rank_bin_labels,
    summarize_pairs,
)
from telapa.analysis.novelty import archive_novelty
from telapa.analysis.probes import probe_outcomes, summarize_probe_outcomes
from telapa.metrics import mean_ci

DELTA_BINS = 4
"""Number of rho bins of (0, tau] in the delta_i panel and table."""
PROPERTIES = (
    ("breadth_rich", "breadth-rich", "breadth-poor", "Lineage breadth"),
    ("has_target_family", "has target family", "lacks target family",
     "Target-family membership"),
    ("non_adjacent", "non-adjacent ancestry", "adjacent only", "Non-adjacent ancestry"),
)
"""(column, True label, False label, panel title) of the lineage-utility panels."""


@dataclass(frozen=True)
class _RunFrames:
    run: TeLAPARun
    name: str
    candidates: pd.DataFrame
    elites: pd.DataFrame


def _names(runs: Sequence[TeLAPARun]) -> list[str]:
    labels = [r.label for r in runs]
    return [lab if labels.count(lab) == 1 else f"{lab} ({r.path.name})"
            for lab, r in zip(labels, runs, strict=True)]


def _frames(runs: Sequence[TeLAPARun]) -> list[_RunFrames]:
    if not runs:
        raise ValueError("the analysis needs at least one TeLAPA run")
    out = []
    for run, name in zip(runs, _names(runs), strict=True):
        elites = elites_with_tags(run)
        elites["nu_norm"] = archive_novelty(elites)
        out.append(_RunFrames(run, name, candidates_frame(run), elites))
    return out


def _pool(frames: Sequence[_RunFrames], tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    parts = [t.assign(run=f.name) for f, t in zip(frames, tables, strict=True)]
    pooled = pd.concat(parts, ignore_index=True)
    return pooled[["run", *[c for c in pooled.columns if c != "run"]]]


def _tag_rank(runs: Sequence[TeLAPARun]) -> dict[str, int]:
    rank: dict[str, int] = {}
    for run in runs:
        for visit, tag in zip(run.visits["visit"], run.visits["tag"], strict=True):
            rank.setdefault(str(tag), int(visit))
    return rank


def _families(runs: Sequence[TeLAPARun]) -> list[str]:
    return list(dict.fromkeys(f for run in runs for f in family_order(run.visits)))


def _sum_counts(tables: Sequence[pd.DataFrame], rank: dict[str, int]) -> pd.DataFrame:
    total = tables[0]
    for table in tables[1:]:
        total = total.add(table, fill_value=0)
    index = sorted(total.index, key=rank.__getitem__)
    columns = sorted(total.columns, key=rank.__getitem__)
    out = total.reindex(index=index, columns=columns).fillna(0).astype(int)
    out.index.name, out.columns.name = tables[0].index.name, tables[0].columns.name
    return out


def _utility(properties: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (visit, target), group in properties.groupby(["target_visit", "target"], sort=True):
        for column, yes, no, _ in PROPERTIES:
            for flag, label in ((True, yes), (False, no)):
                y = group.loc[group[column] == flag, "y"]
                rows.append({"target_visit": visit, "target": target, "property": column,
                             "group": label, "n": len(y), "mean_y": y.mean(),
                             "median_y": y.median()})
    columns = ["target_visit", "target", "property", "group", "n", "mean_y", "median_y"]
    return pd.DataFrame(rows, columns=columns)


def _novelty_summary(elites: pd.DataFrame, families: list[str]) -> pd.DataFrame:
    rows = {}
    for family in families:
        group = elites[elites["family"] == family]
        nu = group["nu_norm"].dropna()
        rows[family] = {
            "n_runs": group["run"].nunique(), "n_elites": len(group),
            "fitness_mean": group["fitness"].mean(), "fitness_median": group["fitness"].median(),
            "nu_norm_median": nu.median(), "nu_norm_max": nu.max(),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("task")


def _radius(runs: Sequence[TeLAPARun]) -> pd.DataFrame:
    per_run = [rms_radius(*run_descriptors(run)) for run in runs]
    rows = {}
    for family in _families(runs):
        mean, ci, n = mean_ci([r[family] for r in per_run if family in r.index])
        rows[family] = {"mean": mean, "ci95": ci, "n_runs": n}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("task")


def analysis_tables(
    runs: Sequence[TeLAPARun], *, gamma: float = 0.9, tau: float = 0.5
) -> dict[str, pd.DataFrame]:
    """Every analysis table of ``runs`` (at least one run).

    local_transfer_pairs (per run and pair s -> t), local_transfer_summary (per statistic),
    local_deltas (delta_i of B \\ {pi*}, rank bins of (0, tau]), separation_ratio and
    centroid_distance (cell-wise mean over runs), rms_radius (mean and 95% CI over runs),
    immediate_sources and ancestry (summed over runs), lineage_properties (per candidate),
    lineage_utility (n and y per target, property and group), novelty_summary (per task),
    probe_outcomes (per run and transfer) and probe_summary (per target tag).
    """
    return _tables(_frames(runs), gamma, tau)


def _tables(frames: Sequence[_RunFrames], gamma: float, tau: float) -> dict[str, pd.DataFrame]:
    runs = [f.run for f in frames]
    pairs = _pool(frames, [pair_statistics(f.candidates, gamma=gamma, tau=tau) for f in frames])
    deltas = _pool(frames, [local_deltas(f.candidates, gamma=gamma, tau=tau, bins=DELTA_BINS)
                            for f in frames])
    properties = _pool(frames, [lineage_properties(f.candidates, f.run.visits) for f in frames])
    rank = _tag_rank(runs)
    outcomes = _pool(frames, [probe_outcomes(f.candidates, f.run.visits, fresh_frame(f.run))
                              for f in frames])
    return {
        "local_transfer_pairs": pairs,
        "local_transfer_summary": summarize_pairs(pairs),
        "local_deltas": deltas,
        "separation_ratio": mean_separation(runs),
        "centroid_distance": elementwise_mean(
            [centroid_distances(*run_descriptors(run)) for run in runs]),
        "rms_radius": _radius(runs),
        "immediate_sources": _sum_counts(
            [immediate_source_matrix(f.candidates) for f in frames], rank),
        "ancestry": _sum_counts(
            [ancestry_matrix(f.candidates, f.run.visits) for f in frames], rank),
        "lineage_properties": properties,
        "lineage_utility": _utility(properties),
        "novelty_summary": _novelty_summary(
            _pool(frames, [f.elites for f in frames]), _families(runs)),
        "probe_outcomes": outcomes,
        "probe_summary": summarize_probe_outcomes(outcomes, rank),
    }


# --- figures --------------------------------------------------------------------------------


def _no_data(ax: Axes, what: str = "no data") -> None:
    ax.text(0.5, 0.5, what, transform=ax.transAxes, ha="center", va="center",
            fontsize=12, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _finite(x: pd.Series) -> np.ndarray:
    v = x.to_numpy(float)
    return v[np.isfinite(v)]


def _hist(ax: Axes, x: np.ndarray, *, title: str, xlabel: str, positive: bool) -> None:
    ax.set_title(title)
    if x.size == 0:
        _no_data(ax, "no pair with >= 2 candidates")
        return
    ax.hist(x, bins=20, color="tab:blue", alpha=0.8)
    ax.axvline(float(np.median(x)), color="k", ls="--", lw=1, label="median")
    note = f"n = {x.size}, median = {np.median(x):.3f}"
    if positive:
        note += f"\n{100 * (x > 0).mean():.1f}% of pairs > 0"
    ax.text(0.97, 0.95, note, transform=ax.transAxes, ha="right", va="top", fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("pairs s -> t")


def _delta_bins(ax: Axes, deltas: pd.DataFrame, *, tau: float) -> None:
    ax.set_title(f"delta_i by distance rank in B (rho <= {tau})")
    if deltas.empty:
        _no_data(ax, "no competent neighbour in any basin")
        return
    labels = rank_bin_labels(tau=tau, bins=DELTA_BINS)
    data = [deltas.loc[deltas["rank_bin"] == b, "delta"].to_numpy(float)
            for b in range(DELTA_BINS)]
    filled = [b for b in range(DELTA_BINS) if data[b].size]
    ax.boxplot([data[b] for b in filled], positions=filled, widths=0.6)
    ax.axhline(0.0, color="0.5", lw=1)
    ax.set_xticks(range(DELTA_BINS), [f"{lab}\nn={data[b].size}" for b, lab in
                                      enumerate(labels)], fontsize=8)
    ax.set_xlim(-0.6, DELTA_BINS - 0.4)
    ax.set_xlabel("normalized distance rank rho to the source-best elite")
    ax.set_ylabel("delta_i = y_i - y(pi*)")


def _local_transfer_figure(tables: dict[str, pd.DataFrame], gamma: float, tau: float) -> Figure:
    pairs, summary = tables["local_transfer_pairs"], tables["local_transfer_summary"]
    fig = Figure(figsize=(18, 4.5), layout="constrained")
    a, b, c, d = fig.subplots(1, 4)
    _hist(a, _finite(pairs["delta_good"]), title=f"Delta_good (gamma = {gamma})",
          xlabel="max_G y - y(pi*)", positive=True)
    _hist(b, _finite(pairs["span_75"]), title="Span_0.75 of the good-enough set",
          xlabel="Q_0.75(d_i, i in G) / max_C d_j", positive=False)
    _delta_bins(c, tables["local_deltas"], tau=tau)
    _hist(d, _finite(pairs["delta_local"]), title=f"Delta_local (tau = {tau})",
          xlabel="max_B y - y(pi*)", positive=True)
    fig.suptitle(
        f"Local transfer: source-best elite vs competent alternatives (gamma = {gamma}, "
        f"tau = {tau}; {len(pairs)} pairs, {int(summary['n_excluded'].iloc[0])} with one "
        "candidate excluded)"
    )
    return fig


def _qd_figure(elites: pd.DataFrame, families: list[str]) -> Figure:
    fig = Figure(figsize=(4.2 * max(len(families), 1), 4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, max(len(families), 1)))
    if not families:
        _no_data(axes[0], "no archived elites")
    for ax, family in zip(axes, families, strict=False):
        group = elites[(elites["family"] == family) & np.isfinite(elites["nu_norm"])]
        ax.set_title(f"Task {family} ({group['run'].nunique()} runs, {len(group)} elites)")
        if group.empty:
            _no_data(ax, "no archive with >= 2 elites")
            continue
        hb = ax.hexbin(group["nu_norm"], group["fitness"], gridsize=15, mincnt=1, cmap="viridis")
        fig.colorbar(hb, ax=ax, label="elites")
        ax.set_xlabel("normalized novelty nu_norm")
        ax.set_ylabel("fitness (source mean return)")
    fig.suptitle("Pooled QD structure: fitness vs normalized novelty per task archive")
    return fig


def _heatmap(ax: Axes, table: pd.DataFrame, *, title: str, fmt: str, xlabel: str,
             ylabel: str, empty: str) -> None:
    ax.set_title(title)
    if table.empty:
        _no_data(ax, empty)
        return
    values = table.to_numpy(float)
    image = ax.imshow(values, cmap="Blues", aspect="auto")
    ax.figure.colorbar(image, ax=ax)
    top = np.nanmax(values) if np.isfinite(values).any() else 0.0
    for (i, j), v in np.ndenumerate(values):
        text = "-" if not np.isfinite(v) else format(v, fmt)
        ax.text(j, i, text, ha="center", va="center", fontsize=8,
                color="white" if np.isfinite(v) and v > 0.6 * top else "black")
    ax.set_xticks(range(table.shape[1]), [str(c) for c in table.columns])
    ax.set_yticks(range(table.shape[0]), [str(r) for r in table.index])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def _lineage_figure(tables: dict[str, pd.DataFrame]) -> Figure:
    fig = Figure(figsize=(13, 5), layout="constrained")
    a, b = fig.subplots(1, 2)
    _heatmap(a, tables["immediate_sources"], title="(a) Immediate source archive -> target",
             fmt=".0f", xlabel="current target-task archive", ylabel="immediate source archive",
             empty="no transfer candidates")
    _heatmap(b, tables["ancestry"], title="(b) Archive tags in recorded lineage",
             fmt=".0f", xlabel="current target-task archive", ylabel="archive tag in lineage",
             empty="no recorded lineage")
    fig.suptitle("Stepping-stone lineages: evaluated transfer candidates (summed over runs)")
    return fig


def _utility_panel(ax: Axes, properties: pd.DataFrame, prop: tuple[str, str, str, str]) -> None:
    column, yes, no, title = prop
    ax.set_title(title)
    if properties.empty:
        _no_data(ax, "no transfer candidates")
        return
    targets = (properties[["target_visit", "target"]].drop_duplicates()
               .sort_values("target_visit")["target"].tolist())
    for offset, flag, color in ((-0.2, True, "tab:orange"), (0.2, False, "tab:blue")):
        for i, target in enumerate(targets):
            y = properties.loc[(properties["target"] == target) & (properties[column] == flag),
                               "y"].to_numpy(float)
            if y.size:
                box = ax.boxplot([y], positions=[i + offset], widths=0.35, patch_artist=True,
                                 showfliers=False, medianprops={"color": "k"})
                box["boxes"][0].set_facecolor(color)
                box["boxes"][0].set_alpha(0.6)
                ax.scatter(np.full(y.size, i + offset), y, s=8, color="k", zorder=3)
    ax.set_xticks(range(len(targets)), targets)
    ax.set_xlim(-0.6, len(targets) - 0.4)
    ax.set_xlabel("target visit")
    ax.set_ylabel("final transfer SR y")
    ax.legend(handles=[Patch(color="tab:orange", label=yes), Patch(color="tab:blue", label=no)],
              fontsize=8, loc="best")


def _utility_figure(properties: pd.DataFrame) -> Figure:
    fig = Figure(figsize=(16, 4.5), layout="constrained")
    for ax, prop in zip(fig.subplots(1, 3), PROPERTIES, strict=True):
        _utility_panel(ax, properties, prop)
    fig.suptitle("Lineage utility: target SR after the probe by lineage property")
    return fig


def _tsne_panel(ax: Axes, run: TeLAPARun, name: str, which: str, colors: dict[str, object],
                seed: int) -> None:
    ax.set_title(f"t-SNE, {which} run: {name}\n(mean final SR {run.mean_final_sr:.3f})")
    z, labels = run_descriptors(run)
    if not labels:
        _no_data(ax, "no archived elites")
        return
    xy = tsne_embedding(z, seed=seed)
    lab = np.asarray(labels, dtype=object)
    for family in dict.fromkeys(labels):
        pts = xy[lab == family]
        ax.scatter(pts[:, 0], pts[:, 1], s=14, alpha=0.7, color=colors[family],
                   label=f"task {family}")
        c = pts.mean(axis=0)
        ax.scatter([c[0]], [c[1]], marker="X", s=180, color=colors[family], edgecolors="k")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(fontsize=8, loc="best", title="X: centroid", title_fontsize=8)


def _geometry_figure(frames: Sequence[_RunFrames], separation: pd.DataFrame, seed: int) -> Figure:
    fig = Figure(figsize=(17, 5), layout="constrained")
    a, b, c = fig.subplots(1, 3)
    families = _families([f.run for f in frames])
    cmap = matplotlib.colormaps["tab10"]
    colors = {fam: cmap(i % 10) for i, fam in enumerate(families)}
    sr = np.array([f.run.mean_final_sr for f in frames])
    finite = np.isfinite(sr)
    best = int(np.argmax(np.where(finite, sr, -np.inf))) if finite.any() else 0
    worst = int(np.argmin(np.where(finite, sr, np.inf))) if finite.any() else 0
    for ax, i, which in ((a, best, "best"), (b, worst, "worst")):
        _tsne_panel(ax, frames[i].run, frames[i].name, which, colors, seed)
    _heatmap(c, separation, title=f"Mean separation ratio S_kl over {len(frames)} run(s)",
             fmt=".2f", xlabel="task archive", ylabel="task archive", empty="no archives")
    fig.suptitle("Cross-task geometry of archived elites in the shared latent space")
    return fig


def analysis_figures(
    runs: Sequence[TeLAPARun], *, gamma: float = 0.9, tau: float = 0.5, seed: int = 0
) -> dict[str, Figure]:
    """Figures "local_transfer", "qd_structure", "lineage", "lineage_utility" and
    "geometry" of ``runs`` (at least one run); ``seed`` seeds t-SNE."""
    return analysis_panels(runs, gamma=gamma, tau=tau, seed=seed)[1]


def analysis_panels(
    runs: Sequence[TeLAPARun], *, gamma: float = 0.9, tau: float = 0.5, seed: int = 0
) -> tuple[dict[str, pd.DataFrame], dict[str, Figure]]:
    """`analysis_tables` and `analysis_figures` of ``runs``, computed in one pass (the
    figures draw the tables)."""
    frames = _frames(runs)
    tables = _tables(frames, gamma, tau)
    figures = {
        "local_transfer": _local_transfer_figure(tables, gamma, tau),
        "qd_structure": _qd_figure(_pool(frames, [f.elites for f in frames]), _families(runs)),
        "lineage": _lineage_figure(tables),
        "lineage_utility": _utility_figure(tables["lineage_properties"]),
        "geometry": _geometry_figure(frames, tables["separation_ratio"], seed),
    }
    return tables, figures


__all__ = ["DELTA_BINS", "PROPERTIES", "analysis_figures", "analysis_panels", "analysis_tables"]
