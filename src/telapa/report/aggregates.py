"""rliable's aggregates of one curriculum's revisit scores (Agarwal et al. 2021): the mean
and IQM with percentile bootstrap intervals, the performance profile (its figure is
`telapa.report.curves.profile_figure`) and the probability of improvement between
methods. No matplotlib here: ``telapa metrics`` prints these tables.

The scores are the success rates after each revisit (the terms of Mean SR and the cells of
the revisit table): one ``runs x revisits`` matrix per method, the revisit tags as tasks.
A bootstrap resamples whole runs (seeds) by default: one seed's run makes all of its
revisit scores, so its revisits move together (`telapa.metrics.stats` on why not
rliable's stratified resampling); ``resample="tasks"`` (``--resample tasks``) resamples
each revisit's runs on their own, rliable's stratified bootstrap. It is seeded, so a
report is the same every time it is made.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from telapa.metrics.aggregates import (
    performance_profile,
    performance_profile_interval,
    probability_of_improvement,
    probability_of_improvement_interval,
)
from telapa.metrics.stats import BOOTSTRAP_RESAMPLES, Resample, aggregate, bootstrap_interval
from telapa.report.results import CurriculumResults, exact_mean, run_values, score_name
from telapa.report.tables import Column, ReportTable

PROFILE_TAUS = (0.0, 0.25, 0.5, 0.75, 0.9)
"""Thresholds of the profile table: the fraction of revisit scores above each."""

PROFILE_GRID = np.linspace(0.0, 1.0, 101)
"""Thresholds of the profile figure."""

IMPROVEMENT_RESAMPLES = 2_000
"""Resamples of each probability-of-improvement interval (rliable's default for it);
one per ordered pair of methods, so the fewer."""


def revisit_scores(result: CurriculumResults) -> dict[str, np.ndarray]:
    """Method -> ``runs x revisit tags`` success rates after each revisit (NaN where a run
    lacks a tag); the tags in first-seen order, the same columns for every method. Empty
    when no run has a revisit."""
    tags = _revisit_tags(result)
    if not tags:
        return {}
    return {m: np.array([[r.revisit_sr.get(t, math.nan) for t in tags] for r in runs],
                        dtype=float) for m, runs in result.metrics.items()}


def _revisit_tags(result: CurriculumResults) -> list[str]:
    """The revisit tags of ``result``'s runs, in first-seen order."""
    return list(dict.fromkeys(t for runs in result.metrics.values() for r in runs
                              for t in r.revisit_sr))


def exact_score_mean(result: CurriculumResults, method: str) -> float:
    """The mean of ``method``'s revisit scores (every run's SR after every revisit), taken
    over the exact SRs (k / n) and rounded once (`exact_mean`): the main table's Mean SR
    of a method whose runs all have every revisit, to the last digit. NaN scores (a run
    lacking a tag) are left out, as in `aggregate`."""
    runs = result.metrics[method]
    return exact_mean(v for tag in _revisit_tags(result)
                      for v in run_values(runs, f"revisit:{tag}"))


def scored_revisits(result: CurriculumResults) -> dict[str, np.ndarray]:
    """`revisit_scores` of the methods each of whose runs has a score on every revisit
    (whole runs are resampled)."""
    return {m: s for m, s in revisit_scores(result).items() if not np.isnan(s).any()}


def _resampled(resample: Resample) -> str:
    """What one bootstrap resample draws, for the tables' notes."""
    return ("whole runs: a seed's revisits are one run and move together" if resample ==
            "runs" else "each revisit's runs on their own: rliable's stratified bootstrap")


def aggregates_table(result: CurriculumResults, *, prefix: str,
                     n_resamples: int = BOOTSTRAP_RESAMPLES, resample: Resample = "runs"
                     ) -> ReportTable | None:
    """Methods x (mean and IQM of the revisit scores, each with its 95% percentile
    bootstrap interval over runs; the number of scores); None without revisits. The mean
    is the exact one rounded once (`exact_score_mean`), so it reads as the main table's
    Mean SR; the IQM and the intervals are of the float scores."""
    scores = scored_revisits(result)
    if not scores:
        return None
    rows = {}
    for method, s in scores.items():
        row: dict[str, float] = {"scores": float(np.count_nonzero(~np.isnan(s)))}
        for statistic in ("mean", "iqm"):
            lo, hi = bootstrap_interval(s, statistic=statistic, n_resamples=n_resamples,
                                        resample=resample)
            point = (exact_score_mean(result, method) if statistic == "mean" else
                     aggregate(s, statistic=statistic))
            row.update({statistic: point, f"{statistic}_lo": lo, f"{statistic}_hi": hi})
        rows[method] = row
    values = pd.DataFrame.from_dict(rows, orient="index").rename_axis("method")
    score = score_name(result)
    return ReportTable(
        f"{prefix}-aggregates", f"Aggregate revisit {score.noun} (rliable)",
        f"Over every run's {score.noun} after every revisit (runs x revisits scores): the "
        f"mean (the main table's Mean {score.symbol}) and the interquartile mean (IQM: the "
        "mean of the middle 50% of the scores, robust to a few outlying runs), each with its "
        f"95% percentile bootstrap interval ({n_resamples} resamples of "
        f"{_resampled(resample)}).",
        values, (Column("scores", "scores", ci=False, digits=0),
                 Column("mean", f"mean {score.symbol}", "higher", ci=False, interval=True),
                 Column("iqm", f"IQM {score.symbol}", "higher", ci=False, interval=True)))


def profile_table(result: CurriculumResults, *, prefix: str,
                  taus: Sequence[float] = PROFILE_TAUS,
                  n_resamples: int = BOOTSTRAP_RESAMPLES, resample: Resample = "runs"
                  ) -> ReportTable | None:
    """Methods x thresholds tau: the performance profile F(tau), the fraction of revisit
    scores above tau averaged over revisits, with its bootstrap interval over runs;
    None without revisits."""
    scores = scored_revisits(result)
    if not scores:
        return None
    keys = [f"sr>{tau:g}" for tau in taus]
    rows = {}
    for method, s in scores.items():
        point = performance_profile(s, taus=taus)
        lo, hi = performance_profile_interval(s, taus=taus, n_resamples=n_resamples,
                                              resample=resample)
        row: dict[str, float] = {}
        for key, p, a, b in zip(keys, point, lo, hi, strict=True):
            row.update({key: float(p), f"{key}_lo": float(a), f"{key}_hi": float(b)})
        rows[method] = row
    values = pd.DataFrame.from_dict(rows, orient="index").rename_axis("method")
    score = score_name(result)
    return ReportTable(
        f"{prefix}-profile", f"Performance profile of the revisit {score.plural}",
        f"Fraction of runs whose {score.noun} after a revisit is above tau, averaged over "
        "the revisits (rliable's performance profile), with its 95% percentile bootstrap "
        f"interval over {'runs' if resample == 'runs' else 'runs per revisit'}; the figure "
        "draws it for every tau.",
        values, tuple(Column(k, f"{score.symbol} > {tau:g}", "higher", ci=False, digits=2,
                             interval=True) for k, tau in zip(keys, taus, strict=True)))


def improvement_table(result: CurriculumResults, *, prefix: str,
                      n_resamples: int = IMPROVEMENT_RESAMPLES, resample: Resample = "runs"
                      ) -> ReportTable | None:
    """Methods x methods: P(row > column), the probability of improvement of the revisit
    scores (`telapa.metrics.aggregates.probability_of_improvement`) with its bootstrap
    interval (each method's runs resampled whole); None with fewer than two methods
    scored on every revisit."""
    scores = scored_revisits(result)
    if len(scores) < 2:
        return None
    methods = list(scores)
    rows = {}
    for x in methods:
        row: dict[str, float] = {}
        for y in methods:
            if x == y:
                row.update({y: math.nan, f"{y}_lo": math.nan, f"{y}_hi": math.nan})
                continue
            lo, hi = probability_of_improvement_interval(scores[x], scores[y],
                                                         n_resamples=n_resamples,
                                                         resample=resample)
            row.update({y: probability_of_improvement(scores[x], scores[y]),
                        f"{y}_lo": lo, f"{y}_hi": hi})
        rows[x] = row
    values = pd.DataFrame.from_dict(rows, orient="index")
    values.index.name, values.columns.name = "P(row > column)", None
    return ReportTable(
        f"{prefix}-improvement", "Probability of improvement",
        "P(row > column): the chance that a run of the row method scores above a run of "
        "the column method after the same revisit, averaged over the revisits (ties count "
        "one half; the Mann-Whitney U statistic over all pairs of runs, as rliable), with "
        f"its 95% percentile bootstrap interval ({n_resamples} resamples of each method's "
        f"{'runs' if resample == 'runs' else 'runs per revisit'}). 0.5: neither tends to "
        "score higher.",
        values, tuple(Column(m, m, ci=False, digits=2, interval=True) for m in methods))
