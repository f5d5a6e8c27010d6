"""Across-seed tables: the main results table (mean ± 95% CI per method) and the
per-revisit "Revisit Mean SR" table, each interval beside a percentile bootstrap one.

Choices where the paper is silent:
- Each cell is `mean_ci` over the method's runs: NaN runs (e.g. undefined nBWT) are dropped
  and the count actually used is the ``<m>_n`` column.
- Beside it, ``<m>_lo`` and ``<m>_hi`` are the 95% percentile bootstrap interval of the
  same mean (`telapa.metrics.stats.bootstrap_interval`), resampling whole runs (seeds:
  the runs are the independent units of a continual study). ``resample="tasks"`` gives
  rliable's stratified bootstrap instead, each task's terms resampled over runs
  independently, where the metric averages per-task terms (`metric_scores`: Mean SR, TTT,
  BWT, Coverage, TR; nBWT, whose tasks differ from run to run, is resampled by runs). It
  stays within the values' range, so in [0, 1] for success rates and fractions.
- TTT is reported in millions of env steps (column ``ttt``), as in the paper's table;
  ``ttt_censored`` and ``revisits`` count, over all runs, the revisits that never reached
  tau_T (their TTT is the whole budget) and all revisits.
- Revisit table cells are plain means over the runs that have that tag (NaN ignored);
  `revisit_summary` adds their 95% t and bootstrap intervals (the paper's revisit table
  gives means only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal

import numpy as np
import pandas as pd

from telapa.metrics.continual import RunMetrics
from telapa.metrics.stats import BOOTSTRAP_RESAMPLES, Resample, bootstrap_interval, mean_ci

SUMMARY_METRICS = ("mean_sr", "ttt", "bwt", "coverage", "nbwt", "tr")
"""The paper's Table 1 metrics; each gives columns <m>, <m>_ci, <m>_n, <m>_lo, <m>_hi."""
EXTRA_METRICS = ("coverage_last",)
"""Labelled extras of the main table, with the same columns."""
METRIC_LABELS = {"mean_sr": "Mean SR ↑", "ttt": "TTT (M) ↓", "bwt": "BWT ↑",
                 "coverage": "Coverage ↑", "nbwt": "nBWT ↑", "tr": "TR ↑",
                 "coverage_last": "Coverage, last visit ↑",
                 "boundary_drop": "Boundary drop ↓"}
"""Column headers of the summary table (arrows: which direction is better); the boundary
drop, no column of it, names that value in the claims' tables."""

TTT_UNIT = 1e6
"""The summary's ``ttt`` columns are in millions of env steps (RunMetrics.ttt / TTT_UNIT)."""


def metric_scores(results: Sequence[RunMetrics], metric: str) -> np.ndarray:
    """The scores a bootstrap of ``metric`` resamples, over the runs where it is defined:
    the ``runs x tasks`` matrix of its per-task terms (`RunMetrics.task_terms`) when every
    such run has terms for the same tasks (each task a stratum), else the 1-D per-run
    values. TTT in millions of env steps."""
    scale = TTT_UNIT if metric == "ttt" else 1.0
    defined = [r for r in results if not math.isnan(getattr(r, metric))]
    terms = [r.task_terms.get(metric, {}) for r in defined]
    if defined and all(terms) and len({frozenset(t) for t in terms}) == 1:
        return np.array([[t[k] / scale for k in terms[0]] for t in terms], dtype=float)
    return np.array([getattr(r, metric) / scale for r in defined], dtype=float)


def _interval_row(values: Sequence[float], scores: np.ndarray, *, confidence: float,
                  n_resamples: int, resample: Resample, key: str) -> dict[str, float | int]:
    mean, ci, n = mean_ci(values, confidence)
    lo, hi = bootstrap_interval(scores, resample=resample, confidence=confidence,
                                n_resamples=n_resamples)
    return {key: mean, f"{key}_ci": ci, f"{key}_n": n, f"{key}_lo": lo, f"{key}_hi": hi}


def summarize(
    runs: Mapping[str, Sequence[RunMetrics]], *, confidence: float = 0.95,
    n_resamples: int = BOOTSTRAP_RESAMPLES, resample: Resample = "runs",
) -> pd.DataFrame:
    """One row per method: <m> = mean over runs, <m>_ci = t half width, <m>_n = runs used,
    <m>_lo and <m>_hi = percentile bootstrap interval (module docstring), for the metrics
    of `SUMMARY_METRICS` and `EXTRA_METRICS`.

    Also ``runs`` (number of runs given), ``ttt_censored`` and ``revisits`` (censored and
    all revisits, summed over runs). ``ttt`` is in millions of env steps.
    """
    metrics = SUMMARY_METRICS + EXTRA_METRICS
    rows: dict[str, dict[str, float | int]] = {}
    for method, results in runs.items():
        row: dict[str, float | int] = {"runs": len(results)}
        for m in metrics:
            scale = TTT_UNIT if m == "ttt" else 1.0
            row.update(_interval_row([getattr(r, m) / scale for r in results],
                                     metric_scores(results, m), confidence=confidence,
                                     n_resamples=n_resamples, resample=resample, key=m))
        row["ttt_censored"] = sum(r.ttt_censored for r in results)
        row["revisits"] = sum(r.revisits for r in results)
        rows[method] = row
    columns = (["runs"] + [f"{m}{s}" for m in metrics for s in ("", "_ci", "_n", "_lo", "_hi")]
               + ["ttt_censored", "revisits"])
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
    runs: Mapping[str, Sequence[RunMetrics]], *, confidence: float = 0.95,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
) -> pd.DataFrame:
    """`revisit_table` with its spread: per revisit tag ``T`` the columns ``T`` (mean over
    the runs that have it), ``T_ci`` (t half width), ``T_n`` (those runs) and ``T_lo``,
    ``T_hi`` (percentile bootstrap interval over those runs)."""
    tags = list(
        dict.fromkeys(t for results in runs.values() for r in results for t in r.revisit_sr)
    )
    rows = {}
    for method, results in runs.items():
        row: dict[str, float | int] = {}
        for tag in tags:
            values = np.array([r.revisit_sr.get(tag, math.nan) for r in results], dtype=float)
            row.update(_interval_row(values, values, confidence=confidence,
                                     n_resamples=n_resamples, resample="runs", key=tag))
        rows[method] = row
    columns = [f"{t}{s}" for t in tags for s in ("", "_ci", "_n", "_lo", "_hi")]
    table = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
    table.index.name = "method"
    return table


def fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, rounded as a decimal: the shortest decimal that
    reads back as the float (``repr``, as `telapa.metrics.rates.as_exact` reads it) is
    rounded half to even. A mean computed exactly and rounded once to a float (0.8975,
    359/400, a float just below it) reads 0.898, where ``f"{value:.3f}"`` rounds the
    binary float and reads 0.897; 0.7585 reads 0.758 (half to even, as Python's
    ``round``). NaN and infinities as ``format`` writes them."""
    if not math.isfinite(value):
        return f"{value:.{digits}f}"
    exact = Decimal(repr(float(value)))
    return f"{exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_EVEN):f}"


def format_cell(mean: float, ci: float, digits: int = 3, *, ci_digits: int | None = None,
                interval: tuple[float, float] | None = None) -> str:
    """ "0.706 ± 0.08"-style cell (``digits`` for the mean, ``ci_digits`` for the half width,
    default ``digits``); a NaN mean gives "n/a", a NaN half width "<mean> ± n/a". With
    ``interval`` (lo, hi), e.g. a bootstrap interval, it follows in brackets:
    "0.600 ± 0.680 [0.200, 1.000]" (nothing when lo or hi is NaN)."""
    if math.isnan(mean):
        return "n/a"
    ci_digits = digits if ci_digits is None else ci_digits
    half = "n/a" if math.isnan(ci) else fixed(ci, ci_digits)
    cell = f"{fixed(mean, digits)} ± {half}"
    if interval is not None and not any(math.isnan(v) for v in interval):
        cell += f" [{fixed(interval[0], ci_digits)}, {fixed(interval[1], ci_digits)}]"
    return cell
