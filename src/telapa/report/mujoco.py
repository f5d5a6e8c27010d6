"""The paper's MuJoCo results (App. "Continuous-Control Dynamics-Shift Evaluation in
MuJoCo"): Table "Continuous-control friction-shift results" (environment x method: Mean
SR~, BWT, TR, mean ± 95% CI over seeds) from every curriculum whose tasks belong to the
MuJoCo env family, and learning curves in return units.

SR~ = clip(E[R] / R*, 0, 1) is what the runs record as ``sr`` for MuJoCo envs (the env
family's competence), so Mean SR~, BWT and TR are the ordinary metrics of those runs.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from telapa.envs.registry import family_of
from telapa.report.results import CurriculumResults
from telapa.report.tables import Column, ReportTable

MUJOCO_METRICS = {"mean_sr": "Mean SR~ ↑", "bwt": "BWT ↑", "tr": "TR ↑"}
PAPER_METHODS = ("scratch", "scratch-reuse", "finetune", "finetune-reset", "telapa")
"""Row order of the paper's table; other methods follow by name."""


def environment(result: CurriculumResults) -> str | None:
    """The MuJoCo env id of a curriculum's runs (None: not a single MuJoCo env)."""
    ids = {e for rs in result.runs.values() for r in rs
           for e in r.tables["visits"]["env_id"].unique()}
    if len(ids) != 1:
        return None
    (env_id,) = ids
    return env_id if family_of(env_id).name == "mujoco" else None


def mujoco_results(results: Mapping[str, CurriculumResults]) -> dict[str, CurriculumResults]:
    """Curriculum name -> results, for the curricula on one MuJoCo env."""
    return {name: r for name, r in results.items() if environment(r) is not None}


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
            for m in MUJOCO_METRICS:
                row[m], row[f"{m}_ci"] = summary.loc[method, m], summary.loc[method, f"{m}_ci"]
            rows.append(row)
    values = pd.DataFrame(rows)
    values.index = pd.Index([f"{r.environment} · {r.method}" for r in values.itertuples()],
                            name="environment · method")
    values = values.drop(columns=["environment", "method"])
    columns = (Column("runs", "runs", ci=False, digits=0),
               *(Column(m, label) for m, label in MUJOCO_METRICS.items()))
    return ReportTable(
        f"{prefix}-friction", "Continuous-control friction-shift results",
        "Metrics over the two-cycle, five-friction MuJoCo curriculum of each environment: "
        "mean ± 95% CI over seeds. SR~ = clip(E[R]/R*, 0, 1) is the normalized-return "
        "competence (R* = 5000 / 3000 / 4000 / 6000 for HalfCheetah / Hopper / Walker2d / "
        "Ant), BWT measures retention across revisits, TR transfer recovery.",
        values, columns,
    )
