"""The paper's MuJoCo results (App. "Continuous-Control Dynamics-Shift Evaluation in
MuJoCo"): Table "Continuous-control friction-shift results" (environment x method: Mean
SR~, BWT, TR, mean ± 95% CI over seeds, each beside the paper's value) from every
curriculum whose tasks belong to the MuJoCo env family, and learning curves in return
units.

SR~ = clip(E[R] / R*, 0, 1) is what the runs record as ``sr`` for MuJoCo envs (the env
family's competence), so Mean SR~, BWT and TR are the ordinary metrics of those runs. Our
TR is the paper's threshold retention; the paper's MuJoCo TR column ("transfer
recovery", undefined there) is another quantity, and the caption says so.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from telapa.envs.registry import family_of
from telapa.report.results import NORMALIZED_RETURN, CurriculumResults, score_name
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
    """The MuJoCo env id of a curriculum's runs (None: not a single MuJoCo env)."""
    ids = {e for rs in result.runs.values() for r in rs
           for e in r.tables["visits"]["env_id"].unique()}
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


def mujoco_table(results: Mapping[str, CurriculumResults], *, prefix: str = "mujoco"
                 ) -> ReportTable:
    """(environment, method) x (Mean SR~, BWT, TR), mean ± 95% CI over seeds. No cell
    is bold: the paper marks the best method per environment, and a column's best
    across environments would compare different R*."""
    rows = []
    for name, result in results.items():
        env_id = environment(result)
        summary = result.summary()
        order = [m for m in PAPER_METHODS if m in summary.index] + sorted(
            set(summary.index) - set(PAPER_METHODS))
        for method in order:
            row = {"environment": f"{env_id} ({name})", "method": method,
                   "runs": summary.loc[method, "runs"]}
            paper = PAPER_VALUES.get((env_id, method), (float("nan"),) * len(MUJOCO_METRICS))
            for m, value in zip(MUJOCO_METRICS, paper, strict=True):
                row[m], row[f"{m}_ci"] = summary.loc[method, m], summary.loc[method, f"{m}_ci"]
                row[f"{m}_paper"] = value
            rows.append(row)
    values = pd.DataFrame(rows)
    values.index = pd.Index([f"{r.environment} · {r.method}" for r in values.itertuples()],
                            name="environment · method")
    values = values.drop(columns=["environment", "method"])
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
