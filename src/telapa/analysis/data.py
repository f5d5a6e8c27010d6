"""TeLAPA run directories as analysis tables: probed transfer candidates and archived elites.

A run of a method with archives (``telapa run --method telapa``) leaves ``elites.csv`` and
``method_log.json`` beside the run's own tables; `load_telapa_run` reads them and
`candidates_frame` flattens the transfer log to one row per probed candidate.

Visit tags name archives: an elite or candidate evaluated on visit ``v`` carries the tag of
visit ``v`` (``"B"``, ``"C'"``). Its *family* is the first-visit tag of the same task
(``"A"`` for both ``A`` and ``A'``), i.e. the per-task archive it belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from telapa.continual.rundir import RunDir, RunDirError
from telapa.qd.export import parse_lineage

CANDIDATE_KEYS = ("elite_id", "task", "fitness", "descriptor", "lineage", "sr0", "sr_final")
"""Keys every probed candidate of a transfer event must have."""
CANDIDATE_COLUMNS = (
    "target_visit", "target", "target_task", "target_family", "source_visit", "source",
    "source_task", "source_family", "elite_id", "fitness", "y", "sr0", "slope", "auc",
    "chosen", "lineage",
)
"""Leading columns of `candidates_frame`; the descriptor follows as z_0..z_{d-1}."""


@dataclass(frozen=True)
class TeLAPARun:
    """One complete TeLAPA run: its tables, archived elites and transfer events.

    ``elites.lineage`` holds lists of visit indices (decoded with `parse_lineage`).
    """

    path: Path
    curriculum: str
    method: str
    seed: int
    visits: pd.DataFrame
    final: pd.DataFrame
    elites: pd.DataFrame
    transfers: list[dict[str, Any]]

    @property
    def mean_final_sr(self) -> float:
        """Mean end-of-sequence SR over tasks (final.csv); NaN without final rows."""
        return float(self.final["sr"].mean()) if len(self.final) else float("nan")

    @property
    def label(self) -> str:
        return f"{self.method} seed {self.seed}"


def _check_transfer(event: Any, i: int, n_visits: int, dim: int, path: Path) -> None:
    where = f"{path}: transfer event {i}"
    if not isinstance(event.get("candidates"), list) or not isinstance(event.get("visit"), int):
        raise ValueError(f"{where} needs an integer 'visit' and a 'candidates' list")
    if not 0 <= event["visit"] < n_visits:
        raise ValueError(f"{where} targets visit {event['visit']}, not in visits.csv")
    fresh = event.get("fresh")
    if fresh is not None:
        missing = [k for k in ("sr0", "sr_final", "slope", "auc") if k not in fresh]
        if missing or event.get("origin") not in ("fresh", "elite"):
            raise ValueError(f"{where}: a fresh probe needs {missing or 'its keys'} and an "
                             "'origin' of 'fresh' or 'elite'")
    for j, cand in enumerate(event["candidates"]):
        missing = [k for k in CANDIDATE_KEYS if k not in cand]
        if missing:
            raise ValueError(f"{where}, candidate {j} is missing {missing}")
        visits = [cand["task"], *cand["lineage"]]
        if not all(isinstance(v, int) and 0 <= v < n_visits for v in visits):
            raise ValueError(f"{where}, candidate {j}: visit indices {visits} not in visits.csv")
        if len(cand["descriptor"]) != dim:
            raise ValueError(
                f"{where}, candidate {j}: descriptor has {len(cand['descriptor'])} values, "
                f"elites.csv has {dim}"
            )


def load_telapa_run(path: str | Path) -> TeLAPARun | None:
    """Loads a complete run directory with archives; None for a method without them.

    `RunDirError` names a missing, foreign or incomplete run, or a run of a method with
    archives (TeLAPA) without its ``elites.csv``, ValueError a malformed ``elites.csv``
    or ``method_log.json`` (naming the file).
    """
    run_dir = RunDir(path)
    spec = run_dir.complete_manifest()
    root = run_dir.path
    if not run_dir.has_elites():
        if keeps_archives(str(spec["method"])):  # not a method without archives: a
            raise RunDirError(  # run whose archives were lost would drop out unseen
                f"{run_dir.table_path('elites')} is missing (a {spec['method']} run keeps "
                "its archives there)")
        return None
    visits = run_dir.read_table("visits", columns=("visit", "tag", "task"))
    if list(visits["visit"]) != list(range(len(visits))):
        raise ValueError(f"{run_dir.table_path('visits')}: visits must be numbered "
                         f"0..{len(visits) - 1}")
    final = run_dir.read_table("final", columns=("task", "sr"))
    elites = run_dir.elites()
    elites_path = run_dir.table_path("elites")
    dim = len(descriptor_columns(elites, "d"))
    if dim == 0:
        raise ValueError(f"{elites_path} has no descriptor columns d_0..")
    if not elites["visit"].between(0, len(visits) - 1).all():
        raise ValueError(f"{elites_path}: elite visits outside visits.csv")
    elites["lineage"] = [parse_lineage(cell) for cell in elites["lineage"]]
    log_path = run_dir.method_log_path
    if not log_path.is_file():
        raise RunDirError(f"{log_path} is missing (elites.csv without its method log)")
    log = run_dir.method_log()
    transfers = [e for e in log if e.get("event") == "transfer"]
    for i, event in enumerate(transfers):
        _check_transfer(event, i, len(visits), dim, log_path)
    return TeLAPARun(
        path=root, curriculum=str(spec["curriculum"]), method=str(spec["method"]),
        seed=int(spec["seed"]), visits=visits, final=final, elites=elites, transfers=transfers,
    )


def keeps_archives(method: str) -> bool:
    """Whether the method registered as ``method`` keeps policy archives (`TeLAPA` or a
    subclass of it); an unknown method (a plug-in not imported) keeps none."""
    from telapa.continual.methods.telapa.method import TeLAPA  # imported here: jax
    from telapa.continual.registry import find_method
    from telapa.plugins import PluginError

    try:
        return issubclass(find_method(method), TeLAPA)
    except PluginError:
        return False


def descriptor_columns(frame: pd.DataFrame, prefix: str) -> list[str]:
    """``prefix_0, prefix_1, ...`` as far as ``frame`` has them consecutively."""
    cols = []
    while f"{prefix}_{len(cols)}" in frame.columns:
        cols.append(f"{prefix}_{len(cols)}")
    return cols


def visit_families(visits: pd.DataFrame) -> pd.Series:
    """Family of each visit (indexed by visit): the tag of the first visit of its task."""
    first = visits.groupby("task", sort=False)["tag"].first()
    return pd.Series(visits["task"].map(first).to_numpy(), index=visits["visit"].to_numpy())


def family_order(visits: pd.DataFrame) -> list[str]:
    """Families in curriculum order (order of their first visits)."""
    return list(dict.fromkeys(visit_families(visits)))


def candidates_frame(run: TeLAPARun) -> pd.DataFrame:
    """One row per probed candidate of every transfer (columns `CANDIDATE_COLUMNS`, z_*).

    ``target_visit`` is the transfer's visit, ``source_visit`` the visit on which the
    candidate elite was evaluated (its source archive visit), ``y`` its target SR after
    the few-shot probe (y^tgt = ``sr_final``), ``chosen`` whether it seeded the visit and
    ``z_*`` its normalized descriptor z~ at selection time.
    """
    tags = run.visits.set_index("visit")["tag"]
    tasks = run.visits.set_index("visit")["task"]
    families = visit_families(run.visits)
    dim = len(descriptor_columns(run.elites, "d"))
    rows, zs = [], []
    for event in run.transfers:
        t = event["visit"]
        for j, cand in enumerate(event["candidates"]):
            s = cand["task"]
            rows.append((
                t, tags[t], tasks[t], families[t], s, tags[s], tasks[s], families[s],
                cand["elite_id"], float(cand["fitness"]), float(cand["sr_final"]),
                float(cand["sr0"]), float(cand.get("slope", np.nan)),
                float(cand.get("auc", np.nan)), j == event.get("index"), list(cand["lineage"]),
            ))
            zs.append(cand["descriptor"])
    frame = pd.DataFrame(rows, columns=list(CANDIDATE_COLUMNS))
    z = np.asarray(zs, np.float64).reshape(len(zs), dim)
    for k in range(dim):
        frame[f"z_{k}"] = z[:, k]
    return frame


FRESH_COLUMNS = ("target_visit", "target", "y", "sr0", "slope", "auc", "chosen")
"""Columns of `fresh_frame`."""


def fresh_frame(run: TeLAPARun) -> pd.DataFrame:
    """One row per transfer whose pool held a fresh network (``telapa-fresh``): its probe
    (``y`` = SR^final, ``sr0``, ``slope``, ``auc``) and whether the visit started from it
    (``chosen``); empty for runs without fresh starts (`FRESH_COLUMNS`)."""
    tags = run.visits.set_index("visit")["tag"]
    rows = [(e["visit"], tags[e["visit"]], float(e["fresh"]["sr_final"]),
             float(e["fresh"]["sr0"]), float(e["fresh"]["slope"]), float(e["fresh"]["auc"]),
             e.get("origin") == "fresh")
            for e in run.transfers if e.get("fresh") is not None]
    return pd.DataFrame(rows, columns=list(FRESH_COLUMNS))


def elites_with_tags(run: TeLAPARun) -> pd.DataFrame:
    """``run.elites`` plus ``visit_tag`` (tag of the elite's visit) and ``family`` (the
    first-visit tag of the archive's task: its per-task archive, e.g. ``"A"``)."""
    out = run.elites.copy()
    out["visit_tag"] = out["visit"].map(run.visits.set_index("visit")["tag"])
    out["family"] = out["task"].map(run.visits.groupby("task", sort=False)["tag"].first())
    return out


__all__ = [
    "CANDIDATE_COLUMNS",
    "FRESH_COLUMNS",
    "TeLAPARun",
    "candidates_frame",
    "fresh_frame",
    "descriptor_columns",
    "elites_with_tags",
    "family_order",
    "load_telapa_run",
    "visit_families",
]
