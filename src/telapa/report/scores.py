"""The paper's result tables of one curriculum: Table "TeLAPA against single-model
baselines" (methods x metrics, mean ± 95% CI) and Table "Revisit Mean SR"."""

from __future__ import annotations

from telapa.continual.results import CurriculumResults
from telapa.metrics.summary import METRIC_LABELS, SUMMARY_METRICS
from telapa.report.tables import Column, ReportTable

LOWER_IS_BETTER = frozenset({"ttt"})
"""Summary metrics where lower is better; the others are higher-is-better."""


def main_table(result: CurriculumResults, *, prefix: str) -> ReportTable:
    """Methods x (runs, Mean SR, TTT, BWT, Coverage, nBWT, TR), best per column marked."""
    columns = (Column("runs", "runs", ci=False, digits=0),
               *(Column(m, METRIC_LABELS[m], "lower" if m in LOWER_IS_BETTER else "higher")
                 for m in SUMMARY_METRICS))
    return ReportTable(
        f"{prefix}-main", "Continual-transfer metrics",
        f"Mean ± 95% CI over seeds; tau_T from {result.tau_source}. Mean SR is the mean "
        "post-training SR over the revisits (the mean of the revisit table, as in the "
        "paper's Table 1). TTT in millions of env steps (lower is better); the other "
        "metrics are higher-is-better.",
        result.summary(), columns,
    )


def revisit_table(result: CurriculumResults, *, prefix: str) -> ReportTable:
    """Methods x revisit tags: post-training SR of each revisit, mean ± 95% CI over seeds
    (the paper gives the means), best mean marked."""
    revisits = result.revisit_summary()
    tags = result.revisits().columns
    return ReportTable(
        f"{prefix}-revisits", "Revisit mean SR",
        "Mean ± 95% CI over seeds of the success rate after training on each revisited "
        "task (the paper's revisit table gives the means).",
        revisits, tuple(Column(str(t), str(t), "higher") for t in tags),
    )
