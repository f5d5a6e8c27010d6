"""Reading finished run directories and scoring them together (paper Sec. 4, App. C, G).

Runs are grouped by curriculum, method and the run's resolved settings: runs of one
method whose ``config.yaml`` differ in a setting that method uses (an ablation's
``p_inj``, EWC's ``lam``, another budget) are separate rows, named ``method [label]``
where the label lists the settings that differ among that method's runs, shortened to
their last key (``ewc [lam=100]``). Seeds of one group are pooled; the same run twice
(same curriculum, method, settings and seed) is an error naming both directories.

The competence target of each task, ``tau_T = max(0.9 * mean best Scratch SR on T,
tau_min)``, comes from the Scratch runs of the same curriculum in the set; without any,
``tau_T = tau_min`` and the result says so and which value it used (``tau_source``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from telapa.continual.rundir import RunDir, RunDirError
from telapa.metrics import (
    RunMetrics,
    best_sr,
    competence_targets,
    mean_ci,
    revisit_summary,
    revisit_table,
    run_metrics,
    summarize,
)
from telapa.provenance import UNRECORDED

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
    settings: dict[str, str] = field(default_factory=dict)
    """The resolved ``config.yaml`` and curriculum as dotted key -> JSON text of the value
    (``methods.ewc.lam`` -> ``"10.0"``), for grouping runs by their settings."""
    code: tuple[str | None, ...] = ()
    """The code versions its segments ran with (``run.json`` ``code``, `telapa.provenance`);
    ``("unrecorded",)`` for a run made before runs recorded them."""




def flatten_settings(data: Any, prefix: str = "") -> dict[str, str]:
    """Nested mappings as dotted key -> JSON text of the leaf value."""
    if isinstance(data, dict) and data:
        out: dict[str, str] = {}
        for key, value in data.items():
            out.update(flatten_settings(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): json.dumps(data, sort_keys=True)}


def load_run(path: str | Path) -> RunRecord:
    """Loads a complete run directory (tables checked against its curriculum, see
    `RunDir.tables`); `RunDirError` names an incomplete, foreign or truncated one."""
    run_dir = RunDir(path)
    spec = run_dir.complete_spec()
    config = run_dir.config()
    settings = flatten_settings(run_dir.config_data())
    settings["curriculum"] = json.dumps(run_dir.curriculum().model_dump(mode="json"),
                                        sort_keys=True)
    return RunRecord(
        path=run_dir.path,
        curriculum=spec["curriculum"],
        method=spec["method"],
        seed=int(spec["seed"]),
        tau_min=config.tau_min,
        tables=run_dir.tables(),
        accounting=run_dir.accounting(),
        settings=settings,
        code=tuple(spec.get("code") or (UNRECORDED,)),
    )


def _relevant(record: RunRecord) -> dict[str, str]:
    """The settings ``record``'s method uses: all but other methods' sections (the
    section a method reads is the one it declares, `Method.section`)."""
    from telapa.continual.registry import method_section  # the methods load jax: on use

    own = method_section(record.method)
    return {k: v for k, v in record.settings.items()
            if not k.startswith("methods.") or (own and k.startswith(f"methods.{own}."))}


def _short_names(keys: list[str]) -> dict[str, str]:
    """Each dotted key by its shortest suffix that no other key in ``keys`` shares."""
    out = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            tail = ".".join(parts[-n:])
            if not any(o != key and (o == tail or o.endswith("." + tail)) for o in keys):
                break
        out[key] = tail
    return out


def _label_value(text: str) -> str:
    value = json.loads(text)
    return "none" if value is None else str(value) if not isinstance(value, dict) else text


def group_labels(records: Sequence[RunRecord]) -> dict[Path, str]:
    """Run path -> its row name: the method, plus ``[key=value, ...]`` of the settings
    that differ among the runs of the same method (and curriculum) in ``records``."""
    by_method: dict[tuple[str, str], list[RunRecord]] = defaultdict(list)
    for r in records:
        by_method[(r.curriculum, r.method)].append(r)
    labels = {}
    for (_, method), group in by_method.items():
        relevant = [_relevant(r) for r in group]
        keys = sorted({k for s in relevant for k in s})
        varying = [k for k in keys if len({s.get(k) for s in relevant}) > 1]
        names = _short_names(varying)
        for r, s in zip(group, relevant, strict=True):
            parts = [f"{names[k]}={_label_value(s[k]) if k in s else 'unset'}"
                     for k in varying]
            labels[r.path] = f"{method} [{', '.join(parts)}]" if parts else method
    return labels


def check_duplicates(records: Sequence[RunRecord]) -> None:
    """`RunDirError` naming both directories when two records are the same run (same
    curriculum, method, seed and settings), e.g. a directory passed twice or copied."""
    seen: dict[tuple[Any, ...], Path] = {}
    for r in records:
        key = (r.curriculum, r.method, r.seed, tuple(sorted(r.settings.items())))
        if key in seen:
            raise RunDirError(
                f"{seen[key]} and {r.path} are the same run ({r.method} on {r.curriculum}, "
                f"seed {r.seed}, same settings); pass each run once"
            )
        seen[key] = r.path


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

    def revisit_summary(self) -> pd.DataFrame:
        """`revisits` with 95% CIs over seeds (columns ``T``, ``T_ci``, ``T_n``)."""
        return revisit_summary(self.metrics)

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
    """Groups runs by curriculum, method and settings (`group_labels`; rows keyed by the
    label) and computes every run's metrics; `RunDirError` for a run given twice."""
    records = list(records)
    check_duplicates(records)
    labels = group_labels(records)
    by_curriculum: dict[str, list[RunRecord]] = defaultdict(list)
    for record in records:
        by_curriculum[record.curriculum].append(record)
    results = {}
    for curriculum, group in by_curriculum.items():
        tau, source = _targets(group)
        result = CurriculumResults(curriculum, tau, source)
        for record in sorted(group, key=lambda r: (labels[r.path], r.seed)):
            t = record.tables
            name = labels[record.path]
            result.runs.setdefault(name, []).append(record)
            result.metrics.setdefault(name, []).append(
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
    return ({task: tau_min for task in tasks},
            f"tau_min = {tau_min:g} (no scratch runs of this curriculum in the set)")
