"""Continual-transfer metrics (paper Sec. 4, App. "Forgetting and Plasticity Through BWT
Metrics"): per-run metrics, competence targets, and across-seed mean ± 95% CI tables."""

from telapa.metrics.continual import (
    RunMetrics,
    best_sr,
    competence_targets,
    run_metrics,
    time_to_threshold,
)
from telapa.metrics.stats import mean_ci, t_cdf, t_quantile
from telapa.metrics.summary import format_cell, revisit_summary, revisit_table, summarize

__all__ = [
    "RunMetrics",
    "best_sr",
    "competence_targets",
    "format_cell",
    "mean_ci",
    "revisit_summary",
    "revisit_table",
    "run_metrics",
    "summarize",
    "t_cdf",
    "t_quantile",
    "time_to_threshold",
]
