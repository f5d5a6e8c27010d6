"""The paper's result tables of one curriculum: Table "TeLAPA against single-model
baselines" (methods x metrics, mean ± 95% CI) and Table "Revisit Mean SR"."""

from __future__ import annotations

from telapa.metrics.summary import EXTRA_METRICS, METRIC_LABELS, SUMMARY_METRICS
from telapa.report.results import CurriculumResults, score_name
from telapa.report.tables import Column, ReportTable

LOWER_IS_BETTER = frozenset({"ttt"})
"""Summary metrics where lower is better; the others are higher-is-better."""


def main_table(result: CurriculumResults, *, prefix: str) -> ReportTable:
    """Methods x (runs, Mean SR, TTT, censored revisits, BWT, Coverage, nBWT, TR, and
    Coverage on the last visits), each metric as mean ± t half width [bootstrap interval],
    best per column marked; the caption warns when tau_T fell back to its floor
    (`CurriculumResults.tau_note`)."""
    values = result.summary()
    values["ttt_censored_of"] = [f"{int(c)}/{int(r)}" for c, r in
                                 zip(values["ttt_censored"], values["revisits"], strict=True)]
    sr = score_name(result).symbol
    labels = {**METRIC_LABELS, "mean_sr": f"Mean {sr} ↑"}
    metric = {m: Column(m, labels[m], "lower" if m in LOWER_IS_BETTER else "higher",
                        interval=True) for m in SUMMARY_METRICS + EXTRA_METRICS}
    columns = (Column("runs", "runs", ci=False, digits=0), metric["mean_sr"], metric["ttt"],
               Column("ttt_censored_of", "TTT censored", ci=False),
               *(metric[m] for m in ("bwt", "coverage", "nbwt", "tr", "coverage_last")))
    return ReportTable(
        f"{prefix}-main", "Continual-transfer metrics",
        f"Mean ± 95% t-interval half width over seeds, then in brackets the 95% percentile "
        f"bootstrap interval over seeds (whole runs resampled; it stays within the values' "
        f"range, so in [0, 1] for {score_name(result).plural} and fractions). tau_T from "
        f"{result.tau_source}. Mean {sr} is the mean post-training {sr} over the revisits "
        "(the mean of the revisit table, as in the paper's Table 1). TTT in millions of env "
        "steps (lower is better); TTT censored: revisits that never reached tau_T, each "
        "counted as its whole budget, of all revisits. Coverage is the paper's: tasks "
        "whose first visit reached tau_T; the last column counts each task's last visit "
        "instead. The other metrics are higher-is-better."
        + (f" {note}" if (note := result.tau_note()) else ""),
        values, columns,
    )


def revisit_table(result: CurriculumResults, *, prefix: str) -> ReportTable:
    """Methods x revisit tags: post-training SR of each revisit, mean ± 95% CI over seeds
    (the paper gives the means), best mean marked."""
    revisits = result.revisit_summary()
    tags = result.revisits().columns
    score = score_name(result)
    return ReportTable(
        f"{prefix}-revisits", f"Revisit mean {score.symbol}",
        "Mean ± 95% t-interval half width over seeds, then in brackets the 95% percentile "
        f"bootstrap interval over seeds, of the {score.noun} after training on each "
        "revisited task (the paper's revisit table gives the means).",
        revisits, tuple(Column(str(t), str(t), "higher", interval=True) for t in tags),
    )
