"""``telapa inspect``: the policy archives of one run (elites.csv, method_log.json,
visits.csv) as summary tables; works on a finished run and on one still running.

Archives are named by their task tag (``A``); elites and lineages by visit tags (``A'``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from telapa.continual.methods.telapa.method import TeLAPA
from telapa.continual.registry import METHODS, find_method
from telapa.continual.rundir import RunDir, RunDirError
from telapa.plugins import PluginError
from telapa.qd.archive import split_elite_id
from telapa.qd.export import parse_lineage

ARCHIVE_COLUMNS = (
    "task", "env_id", "size", "d_min", "fitness_min", "fitness_median", "fitness_max",
    "sr_min", "sr_median", "sr_max", "embedding_version", "from_other_tasks", "visits",
)
TRANSFER_COLUMNS = (
    "target", "source", "elite_id", "evaluated_on", "lineage", "candidates", "in_window",
    "sr0", "sr_final", "env_steps", "target_task", "lineage_tasks", "elite",
)


ELITE_COLUMNS = ("task", "elite", "evaluated_on", "fitness", "sr")


def keeps_archives(method: str) -> bool:
    """Whether the method registered as ``method`` keeps policy archives: `TeLAPA` or a
    subclass of it (`telapa.continual.registry.find_method`; an unknown method keeps
    none)."""
    try:
        return issubclass(find_method(method), TeLAPA)
    except PluginError:
        return False


def archive_methods() -> tuple[str, ...]:
    """The registered methods that keep policy archives (`keeps_archives`), in
    registration order."""
    return tuple(name for name, cls in METHODS.items() if issubclass(cls, TeLAPA))


class NoArchivesError(ValueError):
    """The run keeps no policy archives (a single-model method)."""


@dataclass(frozen=True)
class Inspection:
    """The archives and transfers of one run."""

    path: Path
    method: str
    seed: int
    status: str
    tasks: list[str]
    """Every task tag of the curriculum, in order of first visit."""
    archives: pd.DataFrame
    """One row per archive (`ARCHIVE_COLUMNS`)."""
    transfers: pd.DataFrame
    """One row per transfer into a visit (`TRANSFER_COLUMNS`)."""
    latent: dict[str, Any]
    """Latest embedding maintenance: version, normalizer_id, updates (count)."""
    elites: pd.DataFrame = field(default_factory=pd.DataFrame)
    """One row per elite in the archives (`ELITE_COLUMNS`): what ``telapa play --elite``
    takes."""

    def only(self, task: str) -> Inspection:
        """The archive of ``task`` and the transfers into its visits; ValueError names the
        valid tags for an unknown one."""
        if task not in self.tasks:
            raise ValueError(f"unknown task tag {task!r}; this run has: {', '.join(self.tasks)}")
        return Inspection(
            self.path, self.method, self.seed, self.status, self.tasks,
            self.archives[self.archives["task"] == task].reset_index(drop=True),
            self.transfers[self.transfers["target_task"] == task].reset_index(drop=True),
            self.latent,
            self.elites[self.elites["task"] == task].reset_index(drop=True),
        )


def inspect_run(path: str | Path) -> Inspection:
    """Reads a run's archives; `NoArchivesError` for a run of a method without them,
    `RunDirError` for a missing or foreign directory."""
    run_dir = RunDir(path)
    spec = run_dir.manifest()
    root = run_dir.path
    if not run_dir.has_elites():
        if keeps_archives(spec["method"]):
            raise RunDirError(f"{root} has no {run_dir.table_path('elites').name} yet (no "
                              "archive illuminated so far)")
        raise NoArchivesError(
            f"{root} is a {spec['method']} run: it keeps no policy archives (only "
            f"{', '.join(archive_methods())} runs do)"
        )
    visits = run_dir.read_table("visits").sort_values("visit")
    elites = run_dir.elites()
    log = run_dir.method_log()
    tags = dict(zip(visits["visit"], visits["tag"].astype(str), strict=True))
    task_of = dict(zip(visits["visit"], visits["task"].astype(str), strict=True))
    archive_task = dict(zip(elites["archive_tag"], elites["task"].astype(str), strict=False))
    maintenance = [e for e in log if e["event"] == "maintenance"]
    latest = maintenance[-1] if maintenance else {}
    return Inspection(
        path=root, method=str(spec["method"]), seed=int(spec["seed"]),
        status=str(spec.get("status")), tasks=list(dict.fromkeys(visits["task"].astype(str))),
        archives=_archives(elites, visits, tags, task_of),
        transfers=_transfers(log, archive_task, tags, task_of),
        latent={"version": latest.get("version"), "normalizer_id": latest.get("normalizer_id"),
                "updates": sum(bool(e.get("updated")) for e in maintenance)},
        elites=_elites(elites, archive_task, tags),
    )


def _elites(elites: pd.DataFrame, archive_task: dict[int, str], tags: dict[int, str]
            ) -> pd.DataFrame:
    return pd.DataFrame({
        "task": elites["task"].astype(str),
        "elite": [elite_label(int(i), archive_task) for i in elites["elite_id"]],
        "evaluated_on": [tags[int(v)] for v in elites["visit"]],
        "fitness": elites["fitness"].astype(float), "sr": elites["sr"].astype(float),
    }, columns=list(ELITE_COLUMNS))


def _archives(elites: pd.DataFrame, visits: pd.DataFrame, tags: dict[int, str],
              task_of: dict[int, str]) -> pd.DataFrame:
    env_ids = dict(zip(visits["task"].astype(str), visits["env_id"], strict=False))
    rows = []
    for task, group in elites.groupby("task", sort=False):
        task = str(task)
        lineages = [parse_lineage(cell) for cell in group["lineage"]]
        foreign = sum(any(task_of[v] != task for v in lineage) for lineage in lineages)
        rows.append((
            task, env_ids.get(task, "?"), len(group), float(group["d_min"].iloc[0]),
            *(float(f(group["fitness"])) for f in (pd.Series.min, pd.Series.median,
                                                    pd.Series.max)),
            *(float(f(group["sr"])) for f in (pd.Series.min, pd.Series.median, pd.Series.max)),
            int(group["embedding_version"].iloc[0]), foreign,
            ", ".join(tags[v] for v in sorted(set(group["visit"]))),
        ))
    return pd.DataFrame(rows, columns=list(ARCHIVE_COLUMNS))


def elite_label(elite_id: int, archive_task: dict[int, str]) -> str:
    """``TASK:N`` for the N-th elite of task TASK's archive (``archive_task``: archive tag
    -> task), e.g. ``B:0`` for id 16777216 when archive tag 1 is task B; ``-`` for a start
    without an elite (-1)."""
    if elite_id < 0:
        return "-"
    tag, number = split_elite_id(elite_id)
    return f"{archive_task.get(tag, f'#{tag}')}:{number}"


def _transfers(log: list[dict[str, Any]], archive_task: dict[int, str],
               tags: dict[int, str], task_of: dict[int, str]) -> pd.DataFrame:
    rows = []
    for event in (e for e in log if e["event"] == "transfer"):
        if event["index"] is None:  # a fresh start (telapa-fresh): the fresh network's probe
            chosen, source, evaluated_on = event["fresh"], "fresh", "-"
        else:
            chosen = event["candidates"][event["index"]]
            source, evaluated_on = archive_task[event["tag"]], tags[chosen["task"]]
        rows.append((
            tags[event["visit"]], source, int(event["elite_id"]),
            evaluated_on, " → ".join(tags[v] for v in sorted(event["lineage"])),
            len(event["candidates"]), sum(bool(c["in_window"]) for c in event["candidates"]),
            float(chosen["sr0"]), float(chosen["sr_final"]), int(event["env_steps"]),
            task_of[event["visit"]], len({task_of[v] for v in event["lineage"]}),
            elite_label(int(event["elite_id"]), archive_task),
        ))
    return pd.DataFrame(rows, columns=list(TRANSFER_COLUMNS))
