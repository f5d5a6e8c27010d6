"""Across-seed tables: the main results table (mean ± 95% CI per method) and the
per-revisit "Revisit Mean SR" table.

Choices where the paper is silent:
- Each cell is `mean_ci` over the method's runs: NaN runs (e.g. undefined nBWT) are dropped
  and the count actually used is the ``<m>_n`` column.
- TTT is reported in millions of env steps (column ``ttt``), as in the paper's table.
- Revisit table cells are plain means over the runs that have that tag (NaN ignored);
  `revisit_summary` adds their 95% CIs (the paper's revisit table gives means only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from telapa.metrics.continual import RunMetrics
from telapa.metrics.stats import mean_ci

SUMMARY_METRICS = ("mean_sr", "ttt", "bwt", "coverage", "nbwt", "tr")
METRIC_LABELS = {"mean_sr": "Mean SR ↑", "ttt": "TTT (M) ↓", "bwt": "BWT ↑",
                 "coverage": "Coverage ↑", "nbwt": "nBWT ↑", "tr": "TR ↑"}
"""Column headers of the summary table (arrows: which direction is better)."""
"""Metrics of the main table; each gives columns <m>, <m>_ci and <m>_n."""

TTT_UNIT = 1e6
"""The summary's ``ttt`` columns are in millions of env steps (RunMetrics.ttt / TTT_UNIT)."""


def summarize(
    runs: Mapping[str, Sequence[RunMetrics]], *, confidence: float = 0.95
) -> pd.DataFrame:
    """One row per method: <m> = mean over runs, <m>_ci = t half width, <m>_n = runs used.

    Also ``runs`` (number of runs given). ``ttt`` is in millions of env steps.
    """
    rows: dict[str, dict[str, float | int]] = {}
    for method, results in runs.items():
        row: dict[str, float | int] = {"runs": len(results)}
        for m in SUMMARY_METRICS:
            scale = TTT_UNIT if m == "ttt" else 1.0
            mean, ci, n = mean_ci([getattr(r, m) / scale for r in results], confidence)
            row.update({m: mean, f"{m}_ci": ci, f"{m}_n": n})
        rows[method] = row
    columns = ["runs"] + [f"{m}{s}" for m in SUMMARY_METRICS for s in ("", "_ci", "_n")]
    table = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
    table.index.name = "method"
    return table


def revisit_table(runs: Mapping[str, Sequence[RunMetrics]]) -> pd.DataFrame:
    """Methods x revisit tags (first-seen order): mean over runs of that revisit's post SR."""
    means: dict[str, pd.Series] = {}
    for method, results in runs.items():
        per_run = pd.DataFrame([r.revisit_sr for r in results], dtype=float)
        means[method] = per_run.mean(axis=0)
    tags = list(
        dict.fromkeys(t for results in runs.values() for r in results for t in r.revisit_sr)
    )
    table = pd.DataFrame(means).T.reindex(index=list(runs), columns=tags)
    table.index.name = "method"
    return table


def revisit_summary(
    runs: Mapping[str, Sequence[RunMetrics]], *, confidence: float = 0.95
) -> pd.DataFrame:
    """`revisit_table` with its spread: per revisit tag ``T`` the columns ``T`` (mean over
    the runs that have it), ``T_ci`` (t half width) and ``T_n`` (those runs)."""
    tags = list(
        dict.fromkeys(t for results in runs.values() for r in results for t in r.revisit_sr)
    )
    rows = {}
    for method, results in runs.items():
        row: dict[str, float | int] = {}
        for tag in tags:
            mean, ci, n = mean_ci([r.revisit_sr.get(tag, math.nan) for r in results],
                                  confidence)
            row.update({tag: mean, f"{tag}_ci": ci, f"{tag}_n": n})
        rows[method] = row
    columns = [f"{t}{s}" for t in tags for s in ("", "_ci", "_n")]
    table = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
    table.index.name = "method"
    return table


def format_cell(mean: float, ci: float, digits: int = 3, *, ci_digits: int | None = None) -> str:
    """ "0.706 ± 0.08"-style cell (``digits`` for the mean, ``ci_digits`` for the half width,
    default ``digits``); a NaN mean gives "n/a", a NaN half width "<mean> ± n/a"."""
    if math.isnan(mean):
        return "n/a"
    ci_digits = digits if ci_digits is None else ci_digits
    half = "n/a" if math.isnan(ci) else f"{ci:.{ci_digits}f}"
    return f"{mean:.{digits}f} ± {half}"
