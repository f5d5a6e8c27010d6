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

Every SR is scored as the k successes of n episodes it is (`telapa.metrics.rates`): a
run's tables carry the counts (`telapa.continual.runtables.COUNT_COLUMNS`); for a run
written before they did, `load_run` recovers k = round(sr x n) with n from its config
(``eval_episodes``, ``final_eval_episodes``) and refuses a value that does not read back.

A mean over runs that a table shows is taken exactly and rounded once (`exact_mean`): the
main table's means, the aggregates' mean and the claims' values show one value one way
(Scratch's Mean SR over the paper-budget study's 8 seeds is 1479/2000 = 0.7395 exactly,
0.740; a float sum of its 40 revisit SRs gave 0.73949999..., 0.739).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.runtables import COUNT_COLUMNS
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
from telapa.metrics.rates import as_exact, recover_successes
from telapa.metrics.summary import EXTRA_METRICS, SUMMARY_METRICS, TTT_UNIT
from telapa.provenance import UNRECORDED

if TYPE_CHECKING:
    from telapa.continual.curriculum import Curriculum

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
    graded: bool = False
    """Whether its ``sr`` is a graded score, SR~ (some task's competence is no count:
    `Curriculum.score_symbol`, what the command line printed while it ran), rather than a
    success rate k / n."""




def exact_mean(values: Iterable[Fraction | float]) -> float:
    """The mean of ``values`` computed exactly and rounded once to the nearest float:
    rationals as they are, floats read as `as_exact` reads them (0.98 is 49/50); NaN
    values left out; NaN when none is left. Every table shows a mean over runs this way,
    so one quantity reads the same in each (a float sum rounds at every term)."""
    exact = [as_exact(v) for v in values
             if isinstance(v, Fraction) or not math.isnan(float(v))]
    return float(sum(exact, Fraction(0)) / len(exact)) if exact else math.nan


def run_values(runs: Iterable[RunMetrics], key: str) -> list[Fraction | float]:
    """Each run's ``key`` (a `RunMetrics` field or ``revisit:TAG``), exact where the run
    has it (`RunMetrics.exact`), else its float (NaN where it has none)."""
    out: list[Fraction | float] = []
    for r in runs:
        exact = r.exact.get(key)
        if exact is not None:
            out.append(exact)
        elif key.startswith("revisit:"):
            out.append(r.revisit_sr.get(key.split(":", 1)[1], math.nan))
        else:
            out.append(getattr(r, key))
    return out


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
    spec = run_dir.complete_manifest()
    config = run_dir.config()
    curriculum = run_dir.curriculum()
    settings = flatten_settings(run_dir.config_data())
    settings["curriculum"] = json.dumps(curriculum.model_dump(mode="json"), sort_keys=True)
    return RunRecord(
        path=run_dir.path,
        curriculum=spec["curriculum"],
        method=spec["method"],
        seed=int(spec["seed"]),
        tau_min=config.tau_min,
        tables=with_counts(run_dir.tables(), run_dir, config, curriculum),
        accounting=run_dir.accounting(),
        settings=settings,
        code=tuple(spec.get("code") or (UNRECORDED,)),
        graded=curriculum.score_symbol() == "SR~",
    )


def with_counts(tables: dict[str, pd.DataFrame], run_dir: RunDir, config: Any,
                curriculum: Curriculum) -> dict[str, pd.DataFrame]:
    """``tables`` with the count columns (`COUNT_COLUMNS`) of every SR whose task's
    competence is a count: as written where the run kept them, else recovered from the
    SR and the episodes of its evaluation (`recover_successes`); `RunDirError` names the
    file, line, column and value that is no rate of that many episodes."""
    counting = {}
    for visit in curriculum.visits():
        counting[visit.task] = visit.scored_by().counts
    episodes = {"visits": config.eval_episodes, "curve": config.eval_episodes,
                "final": config.final_eval_episodes}
    out = {}
    for name, frame in tables.items():
        columns = COUNT_COLUMNS[name]
        if all(c in frame.columns for c in columns):
            out[name] = frame
            continue
        frame = frame.copy()
        prefixes = ("pre_", "post_") if name == "visits" else ("",)
        for prefix in prefixes:
            ks: list[int | None] = []
            for line, (task, sr) in enumerate(zip(frame["task"].astype(str),
                                                  frame[f"{prefix}sr"], strict=True), 2):
                counts = counting.get(task, False)
                k = recover_successes(sr, episodes[name]) if counts else None
                if counts and k is None:
                    raise RunDirError(
                        f"{run_dir.table_path(name)} line {line}, column {prefix}sr: {sr!r} "
                        f"is not k / {episodes[name]} for any k (the run's evaluations "
                        f"have {episodes[name]} episodes); the table was edited or is "
                        "foreign")
                ks.append(k)
            frame[f"{prefix}successes"] = pd.array(ks, dtype="Int64")
            frame[f"{prefix}episodes"] = pd.array(
                [episodes[name] if k is not None else None for k in ks], dtype="Int64")
        out[name] = frame
    return out


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
    curricula = curriculum_keys(records)
    by_method: dict[tuple[str, str], list[RunRecord]] = defaultdict(list)
    for r in records:
        by_method[(curricula[r.path], r.method)].append(r)
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
    """tau_T per task, the nearest floats of ``tau_exact`` (for display)."""
    tau_source: str
    runs: dict[str, list[RunRecord]] = field(default_factory=dict)
    metrics: dict[str, list[RunMetrics]] = field(default_factory=dict)
    tau_exact: dict[str, Fraction] = field(default_factory=dict)
    """tau_T per task, exactly: what every competence test compares with."""
    tau_floor: bool = False
    """True when no Scratch run gave tau_T: every tau_T is the floor ``tau_min``."""
    own_tau: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    """With ``--tau-from`` (`score`'s ``tau_from``): the tau_T each Scratch row of these
    runs would give (row label -> task -> tau_T, exactly), shown beside the one used and
    used by nothing (an ablated Scratch's own bar, e.g. the bonus study's)."""

    def tau_note(self) -> str:
        """Where tau_T is stated, a warning when it fell back to the floor (`tau_floor`);
        "" otherwise."""
        if not self.tau_floor:
            return ""
        floor = ", ".join(sorted({f"{v:g}" for v in self.tau.values()})) or "tau_min"
        return (f"Warning: no Scratch runs of curriculum {self.curriculum} were given, so "
                f"every tau_T is the floor tau_min = {floor}, not 0.9 x Scratch's mean best "
                "SR: TTT, Coverage, TR and nBWT are measured against that floor and differ "
                "from a report with the Scratch runs (give them, or --tau-from).")

    def summary(self) -> pd.DataFrame:
        """Methods x (Mean SR, TTT in M steps, BWT, Coverage, nBWT, TR), mean and 95% CI;
        each mean the exact mean over the runs rounded once (`exact_mean`)."""
        table = summarize(self.metrics)
        scale = Fraction(int(TTT_UNIT))
        for method, runs in self.metrics.items():
            for key in SUMMARY_METRICS + EXTRA_METRICS:
                values = run_values(runs, key)
                if key == "ttt":
                    values = [v / scale if isinstance(v, Fraction) else v / TTT_UNIT
                              for v in values]
                table.loc[method, key] = exact_mean(values)
        return table

    def revisits(self) -> pd.DataFrame:
        """Methods x revisit tags: mean post-training SR (paper Table "Revisit Mean SR")."""
        return revisit_table(self.metrics)

    def revisit_summary(self) -> pd.DataFrame:
        """`revisits` with 95% CIs over seeds (columns ``T``, ``T_ci``, ``T_n``); each
        mean the exact mean over the runs rounded once (`exact_mean`)."""
        table = revisit_summary(self.metrics)
        tags = [c for c in table.columns if f"{c}_ci" in table.columns]
        for method, runs in self.metrics.items():
            for tag in tags:
                table.loc[method, tag] = exact_mean(run_values(runs, f"revisit:{tag}"))
        return table

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


@dataclass(frozen=True)
class ScoreName:
    """How tables and figures name a curriculum's ``sr``."""

    symbol: str
    """In a metric's name: ``Mean SR``, ``IQM SR~``."""
    noun: str
    """In words: a figure's axis, a title."""
    plural: str


SUCCESS_RATE = ScoreName("SR", "success rate", "success rates")
NORMALIZED_RETURN = ScoreName("SR~", "SR~ (normalized return)", "SR~ (normalized returns)")


def score_name(result: CurriculumResults) -> ScoreName:
    """`NORMALIZED_RETURN` for a curriculum whose ``sr`` is graded (SR~ = clip(E[R] / R*,
    0, 1), not a share of episodes: `RunRecord.graded`, from its tasks' competences, as
    `Curriculum.score_symbol` decides for the command line), else `SUCCESS_RATE`. So a
    MuJoCo task scored by ``success: {return_at_least: X}`` reads "success rate", and a
    MiniGrid task scored by ``success: {normalized_return: ...}`` reads SR~."""
    graded = any(r.graded for records in result.runs.values() for r in records)
    return NORMALIZED_RETURN if graded else SUCCESS_RATE


def competence_name(result: CurriculumResults) -> str:
    """What a curriculum's ``sr`` is, for figure labels: ``"SR~ (normalized return)"``
    for a graded score, else ``"success rate"`` (`score_name`)."""
    return score_name(result).noun


def curriculum_keys(records: Sequence[RunRecord]) -> dict[Path, str]:
    """Run path -> the curriculum it is scored with: its name, told apart by content.
    Runs whose curricula share a name but not their definition (a copy of ``smoke.yaml``
    with other tasks) are different curricula, each with its own tau_T from its own
    Scratch runs: where a name is ambiguous in ``records``, each is keyed ``NAME@HASH``
    (the first 8 hex digits of the SHA-256 of its resolved definition)."""
    contents: dict[str, set[str]] = defaultdict(set)
    for r in records:
        contents[r.curriculum].add(r.settings.get("curriculum", ""))
    keys = {}
    for r in records:
        definition = r.settings.get("curriculum", "")
        keys[r.path] = r.curriculum if len(contents[r.curriculum]) == 1 else (
            f"{r.curriculum}@{hashlib.sha256(definition.encode()).hexdigest()[:8]}")
    return keys


def score(records: Iterable[RunRecord], *,
          tau_from: Iterable[RunRecord] | None = None) -> dict[str, CurriculumResults]:
    """Groups runs by curriculum, method and settings (`group_labels`; rows keyed by the
    label) and computes every run's metrics; `RunDirError` for a run given twice.

    tau_T comes from the Scratch runs among ``records`` of each curriculum, or, with
    ``tau_from``, from those among ``tau_from`` only (``telapa report --tau-from``: an
    ablation scored against the bar of the runs without it, so that an ablated Scratch
    does not move the bar the other methods are judged by); `RunDirError` when
    ``tau_from`` holds no Scratch run of a curriculum of ``records``. With ``tau_from``,
    the tau_T of each Scratch row of ``records`` is kept beside it, unused
    (`CurriculumResults.own_tau`)."""
    records = list(records)
    check_duplicates(records)
    labels = group_labels(records)
    bar = None if tau_from is None else list(tau_from)
    keys = curriculum_keys(records + (bar or []))
    by_curriculum: dict[str, list[RunRecord]] = defaultdict(list)
    for record in records:
        by_curriculum[keys[record.path]].append(record)
    results = {}
    for curriculum, group in by_curriculum.items():
        if bar is None:
            tau, source = _targets(group)
        else:
            own = [r for r in bar if keys[r.path] == curriculum and r.method == SCRATCH]
            if not own:
                raise RunDirError(f"--tau-from holds no scratch run of curriculum "
                                  f"{curriculum!r}, whose tau_T it is to give")
            tau, source = _targets(own)
            source = f"{source} of --tau-from"
        scratch_rows: dict[str, list[RunRecord]] = defaultdict(list)
        for record in group:
            if bar is not None and record.method == SCRATCH:
                scratch_rows[labels[record.path]].append(record)
        result = CurriculumResults(curriculum, {t: float(v) for t, v in tau.items()},
                                   source, tau_exact=tau,
                                   tau_floor=bar is None and not any(
                                       r.method == SCRATCH for r in group),
                                   own_tau={label: _targets(rows)[0] for label, rows
                                            in sorted(scratch_rows.items())})
        for record in sorted(group, key=lambda r: (labels[r.path], r.seed)):
            t = record.tables
            name = labels[record.path]
            result.runs.setdefault(name, []).append(record)
            result.metrics.setdefault(name, []).append(
                run_metrics(t["visits"], t["curve"], t["final"], tau)
            )
        results[curriculum] = result
    return results


def _targets(group: Sequence[RunRecord]) -> tuple[dict[str, Fraction], str]:
    """tau_T of one curriculum's runs; `RunDirError` when they disagree on tau_min (one
    curriculum is scored against one tau_T, so runs with another floor, a ``tau_min``
    ablation, are scored apart: a row labelled ``tau_min=0.9`` was scored at 0.2)."""
    floors = sorted({r.tau_min for r in group})
    if len(floors) > 1:
        examples = {f: next(str(r.path) for r in group if r.tau_min == f) for f in floors}
        raise RunDirError(
            f"runs of curriculum {group[0].curriculum!r} set different tau_min ("
            + ", ".join(f"{f:g} in {p}" for f, p in examples.items())
            + "); one curriculum is scored against one tau_T: score them apart")
    tau_min = as_exact(floors[0])
    scratch = [r for r in group if r.method == SCRATCH]
    if scratch:
        best = [best_sr(r.tables["visits"], r.tables["curve"]) for r in scratch]
        return competence_targets(best, tau_min), f"{len(scratch)} scratch run(s)"
    tasks = dict.fromkeys(t for r in group for t in r.tables["visits"]["task"])
    return ({task: tau_min for task in tasks},
            f"tau_min = {float(tau_min):g} (no scratch runs of this curriculum in the set)")
