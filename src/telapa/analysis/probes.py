"""Few-shot probe outcomes per transfer (paper App. Algorithm "FewShotSelectElite"): could
the probes tell the candidates apart, and what did the visit make of the chosen origin?

For one transfer into visit t with probed candidates j = 1..K (``y_j`` = target SR at
the probe's end, ``sr_final``; ``auc_j`` the area under its probe curve; j* the chosen):

    best_y   = max_j y_j
    chosen_y = y_{j*}
    flat     = [y_j = 0 and auc_j = 0 for every j]

A flat transfer's probes saw SR 0 at every evaluation, so SR* = 0, the window
{j : y_j >= SR* - eps} holds every candidate and their scores tie: the tie-break (the
lowest index, i.e. the fittest elite of the pool, which candidate pooling takes first)
picks the origin, whatever the latent space says. A NaN ``auc`` (a log without it)
counts as 0, so ``flat`` then rests on ``y`` alone. ``pre_sr`` and ``post_sr`` are the
visit's SR before training (the chosen origin, 50 episodes) and after it, from
``visits.csv`` (NaN where the table lacks them).

A pool with a fresh network (``telapa-fresh``, `telapa.analysis.data.fresh_frame`) counts
it as one more probe j: ``best_y``, ``chosen_y`` and ``flat`` include it, ``origin`` says
where the visit started ("fresh" or "elite") and ``fresh_y`` is the fresh network's y.
The summary then also counts ``fresh_starts`` per target and averages ``fresh_y``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

OUTCOME_COLUMNS = ("target_visit", "target", "n_probes", "best_y", "chosen_y", "flat",
                   "pre_sr", "post_sr")
"""Columns of `probe_outcomes` (then ``origin`` and ``fresh_y`` with fresh probes)."""
SUMMARY_COLUMNS = ("transfers", "flat", "best_y", "chosen_y", "pre_sr", "post_sr")
"""Columns of `summarize_probe_outcomes` (indexed by target tag; then ``fresh_starts``
and ``fresh_y`` with fresh probes)."""
FRESH_OUTCOME_COLUMNS = ("origin", "fresh_y")


def probe_outcomes(candidates: pd.DataFrame, visits: pd.DataFrame,
                   fresh: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per transfer of one run (`OUTCOME_COLUMNS`), in visit order, from its
    `candidates_frame`, its visits table and, for a run with fresh starts, its
    `fresh_frame` (module docstring)."""
    missing = [c for c in ("target_visit", "target", "y", "auc", "chosen")
               if c not in candidates]
    if missing:
        raise ValueError(f"candidates frame is missing column(s) {missing}")
    with_fresh = fresh is not None and not fresh.empty
    fresh_by_visit = fresh.set_index("target_visit") if with_fresh else None
    by_visit = visits.set_index("visit")
    rows = []
    for (visit, target), group in candidates.groupby(["target_visit", "target"], sort=True):
        y = group["y"].to_numpy(float)
        auc = np.nan_to_num(group["auc"].to_numpy(float), nan=0.0)
        chosen = group["chosen"].to_numpy(bool)
        row: dict[str, object] = {}
        if fresh_by_visit is not None:
            if visit not in fresh_by_visit.index:
                raise ValueError(f"transfer into visit {visit} ({target}) has no fresh probe "
                                 "where the run's other transfers have one")
            probe = fresh_by_visit.loc[visit]
            y, auc = np.append(y, probe["y"]), np.append(auc, np.nan_to_num(probe["auc"]))
            chosen = np.append(chosen, bool(probe["chosen"]))
            row = {"origin": "fresh" if probe["chosen"] else "elite",
                   "fresh_y": float(probe["y"])}
        if chosen.sum() != 1:
            raise ValueError(f"transfer into visit {visit} ({target}) has {chosen.sum()} "
                             "chosen candidates, not one")
        rows.append({
            "target_visit": visit, "target": target, "n_probes": len(y),
            "best_y": y.max(), "chosen_y": y[chosen][0],
            "flat": bool((y == 0).all() and (auc == 0).all()),
            "pre_sr": _visit_value(by_visit, visit, "pre_sr"),
            "post_sr": _visit_value(by_visit, visit, "post_sr"),
            **row,
        })
    columns = [*OUTCOME_COLUMNS, *(FRESH_OUTCOME_COLUMNS if with_fresh else ())]
    return pd.DataFrame(rows, columns=columns)


def _visit_value(visits: pd.DataFrame, visit: int, column: str) -> float:
    if column not in visits.columns or visit not in visits.index:
        return float("nan")
    return float(visits.at[visit, column])


def summarize_probe_outcomes(outcomes: pd.DataFrame, rank: Mapping[str, int]) -> pd.DataFrame:
    """Per target tag (in ``rank`` order, e.g. curriculum order) over the transfers of
    every run: ``transfers``, ``flat`` (how many were flat) and the means of ``best_y``,
    ``chosen_y``, ``pre_sr`` and ``post_sr``; with fresh probes (an ``origin`` column)
    also ``fresh_starts`` (transfers that started from the fresh network) and the mean
    ``fresh_y``."""
    with_fresh = "origin" in outcomes.columns
    rows = {}
    for target, group in outcomes.groupby("target", sort=False):
        rows[target] = {
            "transfers": len(group), "flat": int(group["flat"].sum()),
            "best_y": group["best_y"].mean(), "chosen_y": group["chosen_y"].mean(),
            "pre_sr": group["pre_sr"].mean(), "post_sr": group["post_sr"].mean(),
        }
        if with_fresh:
            rows[target] |= {"fresh_starts": int((group["origin"] == "fresh").sum()),
                             "fresh_y": group["fresh_y"].mean()}
    order = sorted(rows, key=lambda tag: rank.get(tag, len(rank)))
    columns = [*SUMMARY_COLUMNS, *(("fresh_starts", "fresh_y") if with_fresh else ())]
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
    return frame.reindex(order).rename_axis("target")


__all__ = ["FRESH_OUTCOME_COLUMNS", "OUTCOME_COLUMNS", "SUMMARY_COLUMNS", "probe_outcomes",
           "summarize_probe_outcomes"]
