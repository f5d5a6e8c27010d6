"""Compute tables of one curriculum: Table "Compute and memory overhead" and TeLAPA's
runtime breakdown (paper App. "Compute and Memory Overhead").

The breakdown has one row per method whose runs timed method phases (``method_phase_s``
in accounting.json: TeLAPA's illumination, few_shot, maintenance); "other" is the run's
wall clock minus those phases. Values in hours, mean ± 95% CI over seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from telapa.metrics import mean_ci
from telapa.report.results import COMPUTE_LABELS, CurriculumResults, RunRecord
from telapa.report.tables import Column, ReportTable

PHASE_LABELS = {"illumination": "illumination (h)", "few_shot": "few-shot selection (h)",
                "maintenance": "embedder maintenance (h)"}
OTHER, TOTAL = "other", "total"
OTHER_LABEL, TOTAL_LABEL = "other (h)", "wall clock (h)"


def compute_table(result: CurriculumResults, *, prefix: str) -> ReportTable:
    """Methods x (extra env steps, wall clock, time vs Finetune, peak RAM, stored state,
    run dir size), mean ± 95% CI; no best marking (it is a cost table)."""
    return ReportTable(
        f"{prefix}-compute", "Compute and memory overhead",
        "Mean ± 95% CI over seeds. Extra env steps count method-specific interactions beyond "
        "the PPO budget; time relative to the mean Finetune wall clock of this set (n/a "
        "without Finetune runs).",
        result.compute(), tuple(Column(k, label) for k, label in COMPUTE_LABELS.items()),
    )


def runtime_breakdown(runs: Mapping[str, Sequence[RunRecord]]) -> pd.DataFrame:
    """Methods with method phases x (each phase, other, total) in hours, with ``_ci``
    columns; phases in `PHASE_LABELS` order, then any others by name."""
    timed = {m: rs for m, rs in runs.items() if any(r.accounting["method_phase_s"] for r in rs)}
    seen = {p for rs in timed.values() for r in rs for p in r.accounting["method_phase_s"]}
    phases = [p for p in PHASE_LABELS if p in seen] + sorted(seen - set(PHASE_LABELS))
    rows = {}
    for method, records in timed.items():
        hours: dict[str, list[float]] = {p: [] for p in (*phases, OTHER, TOTAL)}
        for record in records:
            spent = record.accounting["method_phase_s"]
            wall = record.accounting["wall_s"]
            for p in phases:
                hours[p].append(spent.get(p, 0.0) / 3600)
            hours[OTHER].append((wall - sum(spent.values())) / 3600)
            hours[TOTAL].append(wall / 3600)
        row: dict[str, float] = {}
        for name, values in hours.items():
            row[name], row[f"{name}_ci"], _ = mean_ci(values)
        rows[method] = row
    columns = [f"{p}{s}" for p in (*phases, OTHER, TOTAL) for s in ("", "_ci")]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns).rename_axis("method")


def runtime_table(result: CurriculumResults, *, prefix: str) -> ReportTable | None:
    """TeLAPA's runtime breakdown as a table; None when no run timed method phases."""
    values = runtime_breakdown(result.runs)
    if values.empty:
        return None
    keys = [c for c in values.columns if not c.endswith("_ci")]
    labels = {**PHASE_LABELS, OTHER: OTHER_LABEL, TOTAL: TOTAL_LABEL}
    return ReportTable(
        f"{prefix}-runtime", "TeLAPA runtime breakdown",
        "Wall clock of TeLAPA's archive illumination, few-shot origin selection and "
        "embedder maintenance in hours (mean ± 95% CI over seeds); other = the run's wall "
        "clock minus these (PPO training, evaluation, checkpoints).",
        values, tuple(Column(k, labels.get(k, f"{k} (h)")) for k in keys),
    )
