"""Continual-transfer metrics (paper Sec. 4, App. "Forgetting and Plasticity Through BWT
Metrics"): per-run metrics, competence targets, across-seed tables with t and bootstrap
intervals, rliable's aggregates, and comparisons of methods over seeds.

    continual.py     per-run metrics (Mean SR, TTT, BWT, Coverage, nBWT, TR)
    stats.py         t interval, IQM, percentile bootstrap (whole runs or stratified)
    aggregates.py    performance profiles, probability of improvement
    comparisons.py   paired sign-flip and Welch tests, Holm, seeds to decide
    summary.py       the main and revisit tables

``scipy.stats`` is imported inside the functions that use it, not at module level: it
takes about 1 s to import, and every ``telapa`` process imports this package (a run
writes its metrics at the end), including the many short ones of a sweep and the tests.
"""

from telapa.metrics.aggregates import (
    performance_profile,
    performance_profile_interval,
    probability_of_improvement,
    probability_of_improvement_interval,
)
from telapa.metrics.comparisons import (
    Comparison,
    compare,
    holm,
    paired_seeds_to_decide,
    sign_flip_p,
    welch_p,
    welch_seeds_to_decide,
)
from telapa.metrics.continual import (
    RunMetrics,
    best_sr,
    competence_targets,
    run_metrics,
    time_to_threshold,
)
from telapa.metrics.stats import aggregate, bootstrap_interval, iqm, mean_ci
from telapa.metrics.summary import (
    fixed,
    format_cell,
    metric_scores,
    revisit_summary,
    revisit_table,
    summarize,
)

__all__ = [
    "Comparison",
    "RunMetrics",
    "aggregate",
    "best_sr",
    "bootstrap_interval",
    "compare",
    "competence_targets",
    "fixed",
    "format_cell",
    "holm",
    "iqm",
    "mean_ci",
    "metric_scores",
    "paired_seeds_to_decide",
    "performance_profile",
    "performance_profile_interval",
    "probability_of_improvement",
    "probability_of_improvement_interval",
    "revisit_summary",
    "revisit_table",
    "run_metrics",
    "sign_flip_p",
    "summarize",
    "time_to_threshold",
    "welch_p",
    "welch_seeds_to_decide",
]
