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
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

OUTCOME_COLUMNS = ("target_visit", "target", "n_probes", "best_y", "chosen_y", "flat",
                   "pre_sr", "post_sr")
"""Columns of `probe_outcomes`."""
SUMMARY_COLUMNS = ("transfers", "flat", "best_y", "chosen_y", "pre_sr", "post_sr")
"""Columns of `summarize_probe_outcomes` (indexed by target tag)."""


def probe_outcomes(candidates: pd.DataFrame, visits: pd.DataFrame) -> pd.DataFrame:
    """One row per transfer of one run (`OUTCOME_COLUMNS`), in visit order, from its
    `candidates_frame` and its visits table."""
    missing = [c for c in ("target_visit", "target", "y", "auc", "chosen")
               if c not in candidates]
    if missing:
        raise ValueError(f"candidates frame is missing column(s) {missing}")
    by_visit = visits.set_index("visit")
    rows = []
    for (visit, target), group in candidates.groupby(["target_visit", "target"], sort=True):
        y = group["y"].to_numpy(float)
        auc = np.nan_to_num(group["auc"].to_numpy(float), nan=0.0)
        chosen = group["chosen"].to_numpy(bool)
        if chosen.sum() != 1:
            raise ValueError(f"transfer into visit {visit} ({target}) has {chosen.sum()} "
                             "chosen candidates, not one")
        rows.append({
            "target_visit": visit, "target": target, "n_probes": len(group),
            "best_y": y.max(), "chosen_y": y[chosen][0],
            "flat": bool((y == 0).all() and (auc == 0).all()),
            "pre_sr": _visit_value(by_visit, visit, "pre_sr"),
            "post_sr": _visit_value(by_visit, visit, "post_sr"),
        })
    return pd.DataFrame(rows, columns=list(OUTCOME_COLUMNS))


def _visit_value(visits: pd.DataFrame, visit: int, column: str) -> float:
    if column not in visits.columns or visit not in visits.index:
        return float("nan")
    return float(visits.at[visit, column])


def summarize_probe_outcomes(outcomes: pd.DataFrame, rank: Mapping[str, int]) -> pd.DataFrame:
    """Per target tag (in ``rank`` order, e.g. curriculum order) over the transfers of
    every run: ``transfers``, ``flat`` (how many were flat) and the means of ``best_y``,
    ``chosen_y``, ``pre_sr`` and ``post_sr``."""
    rows = {}
    for target, group in outcomes.groupby("target", sort=False):
        rows[target] = {
            "transfers": len(group), "flat": int(group["flat"].sum()),
            "best_y": group["best_y"].mean(), "chosen_y": group["chosen_y"].mean(),
            "pre_sr": group["pre_sr"].mean(), "post_sr": group["post_sr"].mean(),
        }
    order = sorted(rows, key=lambda tag: rank.get(tag, len(rank)))
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(SUMMARY_COLUMNS))
    return frame.reindex(order).rename_axis("target")


__all__ = ["OUTCOME_COLUMNS", "SUMMARY_COLUMNS", "probe_outcomes", "summarize_probe_outcomes"]
