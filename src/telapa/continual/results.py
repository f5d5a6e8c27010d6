"""Reading finished run directories and scoring them together (paper Sec. 4, App. C, G).

Runs are grouped by curriculum and method. The competence target of each task,
``tau_T = max(0.9 * mean best Scratch SR on T, tau_min)``, comes from the Scratch runs
of the same curriculum in the set; without any, ``tau_T = tau_min`` and the result says
so (``tau_source``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from telapa.config import read_yaml
from telapa.continual.preset import parse_run_config
from telapa.continual.rundir import RunDir
from telapa.io import read_json
from telapa.metrics import (
    RunMetrics,
    best_sr,
    competence_targets,
    mean_ci,
    revisit_table,
    run_metrics,
    summarize,
)

SCRATCH = "scratch"
COMPUTE_LABELS = {"extra_env_steps_M": "extra env steps (M)", "wall_h": "wall clock (h)",
                  "rel_time_vs_finetune": "time vs Finetune", "peak_rss_GB": "peak RAM (GB)",
                  "stored_state_MB": "stored state (MB)", "run_dir_MB": "run dir (MB)"}
"""Columns of `CurriculumResults.compute` and their headers."""
FINETUNE = "finetune"


@dataclass(frozen=True)
class RunRecord:
    """One finished run directory: its spec, tables and compute accounting."""

    path: Path
    curriculum: str
    method: str
    seed: int
    tau_min: float
    tables: dict[str, pd.DataFrame]
    accounting: dict[str, Any]


def load_run(path: str | Path) -> RunRecord:
    """Loads a complete run directory; `RunDirError` names an incomplete or foreign one."""
    run_dir = RunDir(path)
    spec = run_dir.complete_spec()
    config_path = run_dir.path / "config.yaml"
    config = parse_run_config(read_yaml(config_path, "run config"), str(config_path))
    return RunRecord(
        path=run_dir.path,
        curriculum=spec["curriculum"],
        method=spec["method"],
        seed=int(spec["seed"]),
        tau_min=config.tau_min,
        tables={name: run_dir.read_table(name) for name in ("visits", "curve", "final")},
        accounting=read_json(run_dir.path / "accounting.json", "accounting"),
    )


@dataclass
class CurriculumResults:
    """Every method's runs on one curriculum, scored against one tau."""

    curriculum: str
    tau: dict[str, float]
    tau_source: str
    runs: dict[str, list[RunRecord]] = field(default_factory=dict)
    metrics: dict[str, list[RunMetrics]] = field(default_factory=dict)

    def summary(self) -> pd.DataFrame:
        """Methods x (Mean SR, TTT in M steps, BWT, Coverage, nBWT, TR), mean and 95% CI."""
        return summarize(self.metrics)

    def revisits(self) -> pd.DataFrame:
        """Methods x revisit tags: mean post-training SR (paper Table "Revisit Mean SR")."""
        return revisit_table(self.metrics)

    def compute(self) -> pd.DataFrame:
        """Methods x compute columns (paper Table "Compute and memory overhead")."""
        finetune = [r.accounting["wall_s"] for r in self.runs.get(FINETUNE, [])]
        base = float(np.mean(finetune)) if finetune else float("nan")
        rows = {}
        for method, records in self.runs.items():
            acc = [r.accounting for r in records]
            columns = {
                "extra_env_steps_M": [a["extra_env_steps"] / 1e6 for a in acc],
                "wall_h": [a["wall_s"] / 3600 for a in acc],
                "rel_time_vs_finetune": [a["wall_s"] / base for a in acc],
                "peak_rss_GB": [a["peak_rss_bytes"] / 1e9 for a in acc],
                "stored_state_MB": [a["method_state_bytes"] / 1e6 for a in acc],
                "run_dir_MB": [a["run_dir_bytes"] / 1e6 for a in acc],
            }
            row: dict[str, float] = {}
            for name, values in columns.items():
                mean, ci, _ = mean_ci(values)
                row[name], row[f"{name}_ci"] = mean, ci
            rows[method] = row
        return pd.DataFrame.from_dict(rows, orient="index").rename_axis("method")


def score(records: Iterable[RunRecord]) -> dict[str, CurriculumResults]:
    """Groups runs by curriculum and method and computes every run's metrics."""
    by_curriculum: dict[str, list[RunRecord]] = defaultdict(list)
    for record in records:
        by_curriculum[record.curriculum].append(record)
    results = {}
    for curriculum, group in by_curriculum.items():
        tau, source = _targets(group)
        result = CurriculumResults(curriculum, tau, source)
        for record in sorted(group, key=lambda r: (r.method, r.seed)):
            t = record.tables
            result.runs.setdefault(record.method, []).append(record)
            result.metrics.setdefault(record.method, []).append(
                run_metrics(t["visits"], t["curve"], t["final"], tau)
            )
        results[curriculum] = result
    return results


def _targets(group: Sequence[RunRecord]) -> tuple[dict[str, float], str]:
    tau_min = min(r.tau_min for r in group)
    scratch = [r for r in group if r.method == SCRATCH]
    if scratch:
        best = [best_sr(r.tables["visits"], r.tables["curve"]) for r in scratch]
        return competence_targets(best, tau_min), f"{len(scratch)} scratch run(s)"
    tasks = dict.fromkeys(t for r in group for t in r.tables["visits"]["task"])
    return {task: tau_min for task in tasks}, "tau_min (no scratch runs in the set)"
