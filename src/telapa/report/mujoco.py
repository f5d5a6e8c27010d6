"""The paper's MuJoCo results (App. "Continuous-Control Dynamics-Shift Evaluation in
MuJoCo"): Table "Continuous-control friction-shift results" (environment x method: Mean
SR~, BWT, TR, mean ± 95% CI over seeds, each beside the paper's value) from every
curriculum whose tasks belong to the MuJoCo env family, and learning curves in return
units.

Beside it, each friction curriculum's section shows the fall of SR~ at its task
boundaries (`boundary_table`), the measure of the paper's reading of its curves.

SR~ = clip(E[R] / R*, 0, 1) is what the runs record as ``sr`` for MuJoCo envs (the env
family's competence), so Mean SR~, BWT and TR are the ordinary metrics of those runs. Our
TR is the paper's threshold retention; the paper's MuJoCo TR column ("transfer
recovery", undefined there) is another quantity, and the caption says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import pandas as pd

from telapa.envs.registry import family_of
from telapa.metrics.stats import mean_ci
from telapa.report.results import (
    NORMALIZED_RETURN,
    CurriculumResults,
    exact_mean,
    run_values,
    score_name,
)
from telapa.report.tables import Column, ReportTable

MUJOCO_METRICS = {"mean_sr": "Mean SR~ ↑", "bwt": "BWT ↑", "tr": "TR ↑"}
PAPER_METHODS = ("scratch", "scratch-reuse", "finetune", "finetune-reset", "telapa")
"""Row order of the paper's table; other methods follow by name."""

PAPER_VALUES: dict[tuple[str, str], tuple[float, float, float]] = {
    ("HalfCheetah-v5", "scratch"): (0.234, -0.002, 0.000),
    ("HalfCheetah-v5", "scratch-reuse"): (0.292, 0.038, 0.228),
    ("HalfCheetah-v5", "finetune"): (0.379, 0.036, 0.396),
    ("HalfCheetah-v5", "finetune-reset"): (0.376, 0.031, 0.393),
    ("HalfCheetah-v5", "telapa"): (0.317, 0.051, 0.298),
    ("Hopper-v5", "scratch"): (0.618, -0.540, -0.004),
    ("Hopper-v5", "scratch-reuse"): (0.620, -0.612, 0.576),
    ("Hopper-v5", "finetune"): (0.603, -0.581, 0.394),
    ("Hopper-v5", "finetune-reset"): (0.593, -0.551, 0.352),
    ("Hopper-v5", "telapa"): (0.629, -0.179, 0.740),
    ("Walker2d-v5", "scratch"): (0.264, -0.094, -0.002),
    ("Walker2d-v5", "scratch-reuse"): (0.476, -0.212, 0.243),
    ("Walker2d-v5", "finetune"): (0.883, -0.395, 0.631),
    ("Walker2d-v5", "finetune-reset"): (0.872, -0.467, 0.653),
    ("Walker2d-v5", "telapa"): (0.779, 0.215, 0.763),
}
"""The paper's Table "Continuous-control friction-shift results": (env id, method) ->
(Mean SR~, BWT, TR), the means it reports (its ± is not defined in the paper)."""


def environment(result: CurriculumResults) -> str | None:
    """The MuJoCo env id of a curriculum's runs (None: not a single MuJoCo env, or a run
    whose visits table does not name its envs)."""
    visits = [r.tables["visits"] for rs in result.runs.values() for r in rs]
    if any("env_id" not in v.columns for v in visits):
        return None
    ids = {e for v in visits for e in v["env_id"].unique()}
    if len(ids) != 1:
        return None
    (env_id,) = ids
    return env_id if family_of(env_id).name == "mujoco" else None


def mujoco_results(results: Mapping[str, CurriculumResults]) -> dict[str, CurriculumResults]:
    """Curriculum name -> results, for the curricula on one MuJoCo env scored by SR~ (the
    paper's table holds no other score: a task's own ``success: {return_at_least: X}``
    makes its ``sr`` a success rate, which the paper's values do not compare with)."""
    return {name: r for name, r in results.items()
            if environment(r) is not None and score_name(r) == NORMALIZED_RETURN}


def mujoco_tables(results: Mapping[str, CurriculumResults], *, prefix: str = "mujoco"
                  ) -> list[ReportTable]:
    """The report's MuJoCo section: the friction table (`mujoco_table`) and the revisit
    jump-start beside the paper's TR column (`jumpstart_table`)."""
    return [mujoco_table(results, prefix=prefix), jumpstart_table(results, prefix=prefix)]


def _rows(results: Mapping[str, CurriculumResults]
          ) -> Iterator[tuple[str, str | None, str, str]]:
    """(row label ``ENV (CURRICULUM) · METHOD``, env id, curriculum name, method) of the
    MuJoCo section's tables, each curriculum's methods in the paper's row order."""
    for name, result in results.items():
        env_id = environment(result)
        order = [m for m in PAPER_METHODS if m in result.metrics] + sorted(
            set(result.metrics) - set(PAPER_METHODS))
        for method in order:
            yield f"{env_id} ({name}) · {method}", env_id, name, method


def _paper(env_id: str | None, method: str) -> dict[str, float]:
    """The paper's value of each of `MUJOCO_METRICS` for ``method`` on ``env_id`` (NaN
    for a method or env its table does not have)."""
    values = PAPER_VALUES.get((env_id, method), (math.nan,) * len(MUJOCO_METRICS))
    return dict(zip(MUJOCO_METRICS, values, strict=True))


def jumpstart_table(results: Mapping[str, CurriculumResults], *, prefix: str = "mujoco"
                    ) -> ReportTable:
    """(environment, method) x (revisit jump-start, mean ± 95% CI over seeds; the paper's
    TR column): a candidate reading of that column, which the paper calls "transfer
    recovery" and does not define (`RunMetrics.revisit_jumpstart`: the mean over the
    revisits of pre-SR~(revisit) - pre-SR~(the task's first visit))."""
    rows = {}
    for label, env_id, name, method in _rows(results):
        values = run_values(results[name].metrics[method], "revisit_jumpstart")
        _, ci, n = mean_ci([float(v) for v in values])
        rows[label] = {"runs": n, "revisit_jumpstart": exact_mean(values),
                       "revisit_jumpstart_ci": ci, "tr_paper": _paper(env_id, method)["tr"]}
    values = pd.DataFrame.from_dict(rows, orient="index")
    values.index.name = "environment · method"
    return ReportTable(
        f"{prefix}-jumpstart", "The revisit jump-start beside the paper's TR column",
        "A candidate reading of the paper's MuJoCo TR column (\"transfer recovery\", "
        "which the paper does not define, and whose Scratch values, -0.004 and -0.002, "
        "no fraction of tasks can take): the revisit jump-start, the mean over the "
        "revisits of the SR~ a method starts a revisit from minus the SR~ it started the "
        "task's first visit from (each before training), mean ± 95% t-interval half width "
        "over seeds. A method that starts every visit from a fresh network has 0 in "
        "expectation, as the paper's Scratch nearly has. Ours, not the paper's: the "
        "paper's column is shown for comparison, not as the same quantity.",
        values, (Column("runs", "runs", ci=False, digits=0),
                 Column("revisit_jumpstart", "revisit jump-start ↑"),
                 Column("tr_paper", "TR (paper)", ci=False)),
    )


def mujoco_table(results: Mapping[str, CurriculumResults], *, prefix: str = "mujoco"
                 ) -> ReportTable:
    """(environment, method) x (Mean SR~, BWT, TR), mean ± 95% CI over seeds. No cell
    is bold: the paper marks the best method per environment, and a column's best
    across environments would compare different R*."""
    summaries = {name: result.summary() for name, result in results.items()}
    rows = {}
    for label, env_id, name, method in _rows(results):
        summary = summaries[name].loc[method]
        row = {"runs": summary["runs"]}
        for m, value in _paper(env_id, method).items():
            row[m], row[f"{m}_ci"], row[f"{m}_paper"] = summary[m], summary[f"{m}_ci"], value
        rows[label] = row
    values = pd.DataFrame.from_dict(rows, orient="index")
    values.index.name = "environment · method"
    columns = (Column("runs", "runs", ci=False, digits=0),
               *(c for m, label in MUJOCO_METRICS.items()
                 for c in (Column(m, label),
                           Column(f"{m}_paper", f"{label.rstrip(' ↑')} (paper)", ci=False))))
    return ReportTable(
        f"{prefix}-friction", "Continuous-control friction-shift results",
        "Metrics over the two-cycle, five-friction MuJoCo curriculum of each environment: "
        "mean ± 95% CI over seeds, each beside the paper's value (its Table "
        "\"Continuous-control friction-shift results\"; n/a for a method it did not run). "
        "SR~ = clip(E[R]/R*, 0, 1) is the normalized-return competence (R* = 5000 / 3000 "
        "/ 4000 / 6000 for HalfCheetah / Hopper / Walker2d / Ant), BWT measures retention "
        "across revisits. Our TR is threshold retention (the paper's App. \"(D) Threshold "
        "retention\": the fraction of tasks whose SR~ at the curriculum's end is at least "
        "tau_T); the paper's column beside it, which its MuJoCo table calls \"transfer "
        "recovery\" and does not define, is a different quantity (it is negative for "
        "Scratch, so no fraction of tasks): the two TR columns do not compare.",
        values, columns,
    )


BOUNDARY = "boundary_drop"


def boundary_table(result: CurriculumResults, *, prefix: str) -> ReportTable | None:
    """Methods x task boundaries: how far SR~ falls where the task changes, the terms of
    `RunMetrics.boundary_drop`, post-SR~(k-1) - pre-SR~(k) for the boundary into visit k
    (named by its tag), mean ± 95% t half width over seeds, and their mean over the
    boundaries (the boundary drop). Lower is smoother, and the lowest mean of each
    column is marked. None when no run has a boundary (one visit, or no pre-visit SR)."""
    rows: dict[str, dict[str, float]] = {}
    tags: dict[str, None] = {}  # the boundaries in visit order, over every method
    for method, runs in result.metrics.items():
        terms = [r.task_terms.get(BOUNDARY) or {} for r in runs]
        if not any(terms):
            continue
        columns = {tag: [t.get(tag, math.nan) for t in terms]
                   for tag in dict.fromkeys(tag for t in terms for tag in t)}
        tags |= dict.fromkeys(columns)
        columns[BOUNDARY] = run_values(runs, BOUNDARY)  # exact where the runs have it
        row: dict[str, float] = {}
        for key, values in columns.items():
            row[key] = exact_mean(values)
            row[f"{key}_ci"] = mean_ci([float(v) for v in values])[1]
        rows[method] = row
    if not rows:
        return None
    values = pd.DataFrame.from_dict(rows, orient="index")
    values.index.name = "method"
    sr = score_name(result).symbol
    return ReportTable(
        f"{prefix}-boundaries", f"The fall of {sr} at the task boundaries",
        f"For each boundary, named by the visit it leads into, the {sr} at the end of the "
        f"visit before (on its task) minus the {sr} the method starts the next visit from "
        "(its starting parameters on the new task, before training): mean ± 95% t-interval "
        "half width over seeds; the last column is their mean, the boundary drop of the "
        "claims (docs/assumptions.md). Lower is smoother; a negative value is a start "
        "above where the last visit ended.",
        values, (*(Column(t, t, "lower") for t in tags),
                 Column(BOUNDARY, "boundary drop ↓", "lower")),
    )
