"""Learning curves across a whole curriculum: success rate against global env steps, one
line per method (mean over seeds, shaded 95% CI), task boundaries and visit tags; and the
performance profile of the revisit success rates (`profile_figure`).

Seeds are aligned on (visit, global step): each point is the mean over the runs that
evaluated there (runs of one curriculum and preset evaluate at the same steps).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from telapa.metrics import mean_ci
from telapa.metrics.aggregates import performance_profile, performance_profile_interval
from telapa.metrics.stats import BOOTSTRAP_RESAMPLES
from telapa.report.aggregates import PROFILE_GRID, scored_revisits
from telapa.report.results import CurriculumResults, RunRecord

BAND_COLUMNS = ("method", "visit", "tag", "global_step", "sr", "sr_ci", "n")


def curve_bands(runs: Mapping[str, Sequence[RunRecord]], value: str = "sr") -> pd.DataFrame:
    """One row per method, visit and global step: mean ``value`` (a curve column: ``sr``
    or ``mean_return``) over seeds in column ``sr``, CI half width, n."""
    rows = []
    for method, records in runs.items():
        curves = pd.concat([r.tables["curve"] for r in records], ignore_index=True)
        for (visit, tag, step), group in curves.groupby(["visit", "tag", "global_step"],
                                                        sort=True):
            mean, ci, n = mean_ci(group[value])
            rows.append((method, int(visit), str(tag), int(step), mean, ci, n))
    return pd.DataFrame(rows, columns=list(BAND_COLUMNS))


def visit_spans(records: Sequence[RunRecord]) -> pd.DataFrame:
    """(visit, tag, start, end) global steps of every visit, from the first run given."""
    visits = records[0].tables["visits"].sort_values("visit")
    return pd.DataFrame({"visit": visits["visit"].to_numpy(), "tag": visits["tag"].to_numpy(),
                         "start": visits["start_global_step"].to_numpy(),
                         "end": visits["end_global_step"].to_numpy()})


def method_colors(methods: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """A fixed colour per method (tab10, in the given order)."""
    cmap = colormaps["tab10"]
    return {m: cmap(i % cmap.N) for i, m in enumerate(methods)}


def curve_figure(bands: pd.DataFrame, spans: pd.DataFrame, *, title: str,
                 ylabel: str = "success rate", unit_range: bool = True) -> Figure:
    """The learning-curve figure: each visit a separate segment, dotted task boundaries,
    visit tags on the top axis; with ``unit_range`` CI bands are clipped to the SR range
    [0, 1] (returns: no clipping)."""
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    ax = fig.add_subplot()
    methods = list(dict.fromkeys(bands["method"]))
    colors = method_colors(methods)
    for method in methods:
        mine = bands[bands["method"] == method]
        for i, (_, seg) in enumerate(mine.groupby("visit", sort=True)):
            x, y, ci = (seg[c].to_numpy(dtype=float) for c in ("global_step", "sr", "sr_ci"))
            ax.plot(x, y, color=colors[method], lw=1.6, marker=".", ms=4,
                    label=method if i == 0 else None)
            lo, hi = (y - ci, y + ci) if not unit_range else ((y - ci).clip(0, 1),
                                                               (y + ci).clip(0, 1))
            ax.fill_between(x, lo, hi, color=colors[method], alpha=0.18, lw=0)
    for start in spans["start"].iloc[1:]:
        ax.axvline(start, color="0.45", ls=":", lw=1)
    ax.set_xlim(spans["start"].min(), spans["end"].max())
    if unit_range:
        ax.set_ylim(-0.03, 1.03)
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_xlabel("global env steps (PPO training)")
    ax.set_ylabel(ylabel)
    top = ax.secondary_xaxis("top")
    top.set_xticks(((spans["start"] + spans["end"]) / 2).to_numpy(dtype=float),
                   labels=list(spans["tag"]))
    top.tick_params(length=0)
    ax.set_title(title, loc="left")
    ax.grid(alpha=0.25)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig


def learning_curves(runs: Mapping[str, Sequence[RunRecord]], *, title: str,
                    returns: bool = False, ylabel: str = "success rate") -> Figure:
    """`curve_figure` of every method's runs of one curriculum: the recorded competence
    ``sr`` (named ``ylabel``: a success rate, or MuJoCo's SR~), or with ``returns`` the
    mean evaluation return (MuJoCo's curves in return units)."""
    records = [r for rs in runs.values() for r in rs]
    if returns:
        return curve_figure(curve_bands(runs, "mean_return"), visit_spans(records),
                            title=title, ylabel="mean evaluation return", unit_range=False)
    return curve_figure(curve_bands(runs), visit_spans(records), title=title, ylabel=ylabel)


def profile_figure(result: CurriculumResults, *, title: str, score: str = "success rate",
                   n_resamples: int = BOOTSTRAP_RESAMPLES) -> Figure | None:
    """The performance profile of every method over tau in [0, 1] (shaded: the 95%
    percentile bootstrap band over runs); ``score`` names the competence on the x axis;
    None without revisits."""
    scores = scored_revisits(result)
    if not scores:
        return None
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    colors = method_colors(list(scores))
    for method, s in scores.items():
        lo, hi = performance_profile_interval(s, taus=PROFILE_GRID, n_resamples=n_resamples)
        ax.step(PROFILE_GRID, performance_profile(s, taus=PROFILE_GRID), where="post",
                color=colors[method], lw=1.6, label=method)
        ax.fill_between(PROFILE_GRID, lo, hi, step="post", color=colors[method], alpha=0.15,
                        lw=0)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(f"{score} after the revisit, tau")
    ax.set_ylabel("fraction of runs with score > tau")
    ax.set_title(title, loc="left")
    ax.grid(alpha=0.25)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig
