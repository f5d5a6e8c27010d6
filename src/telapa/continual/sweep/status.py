"""What `telapa sweep status` shows: each cell's state, how far it got, and the cell
time still to go. Everything here only reads the sweep directory."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telapa.continual.rundir import RunDirError
from telapa.continual.sweep.layout import cell_dir, read_status

STATES = ("done", "running", "partial", "failed", "left")


def cell_state(sweep_dir: Path, name: str) -> tuple[str, dict[str, Any]]:
    """(state, status) of a cell: done, running (its run directory is locked by a live
    process), partial (a run directory, not running), failed, or left. Reads only: a
    read-only sweep directory is read correctly and no lock file is created."""
    status = read_status(sweep_dir, name)
    run_dir = cell_dir(sweep_dir, name)
    failed = status.get("state") == "failed"
    if not run_dir.exists():
        return ("failed" if failed else "left"), status
    if run_dir.is_complete():
        return "done", status
    if run_dir.is_locked():
        return "running", status
    return ("failed" if failed else "partial"), status


@dataclass(frozen=True)
class CellTime:
    """How long a cell has run and how far it got (`cell_time`)."""

    wall_s: float
    """Wall clock of the run so far (a seed batch's runs each count their share)."""
    phases_done: int
    phases: int

    @property
    def progress(self) -> str:
        """``phases done/phases`` for a started cell, ``complete`` for a finished one."""
        if self.phases_done >= self.phases:
            return "complete"
        return f"{self.phases_done}/{self.phases} phases"

    @property
    def left_s(self) -> float:
        """Wall clock still to go at the pace so far: ``wall_s (phases - done) / done``
        (the first visits of an archive method are cheaper than the later ones, so this
        runs low for them)."""
        if self.phases_done >= self.phases:
            return 0.0
        if self.phases_done == 0:
            return math.nan
        return self.wall_s * (self.phases - self.phases_done) / self.phases_done


def cell_time(sweep_dir: Path, name: str) -> CellTime | None:
    """A finished cell's wall clock (its accounting) or a started one's, from its latest
    checkpoint; None before the first checkpoint.

    Raises `RunDirError` naming the file when the cell's files are there but unreadable
    (`cell_times` maps such cells to None for the callers that only estimate)."""
    run_dir = cell_dir(sweep_dir, name)
    if not run_dir.exists():
        return None
    try:
        if run_dir.spec().get("status") == "complete":
            return CellTime(float(run_dir.accounting()["wall_s"]), 1, 1)
        state = run_dir.checkpoints.state()
        if state is None:
            return None
        return CellTime(float(state.get("wall_s", math.nan)), int(state["next_phase"]),
                        int(state["phases"]))
    except RunDirError as err:
        raise RunDirError(f"cell {name}: cannot read its progress: {err}") from None
    except (ValueError, TypeError) as err:
        raise RunDirError(f"cell {name}: cannot read its progress from {run_dir.path}: "
                          f"{type(err).__name__}: {err}") from None


def cell_times(sweep_dir: Path, cells: list[dict[str, Any]]
               ) -> tuple[dict[str, CellTime | None], dict[str, str]]:
    """`cell_time` of every cell, and the cells whose files are unreadable (name -> the
    error; their time is None, as for a cell not started)."""
    times: dict[str, CellTime | None] = {}
    unreadable: dict[str, str] = {}
    for cell in cells:
        try:
            times[cell["name"]] = cell_time(sweep_dir, cell["name"])
        except RunDirError as err:
            times[cell["name"]], unreadable[cell["name"]] = None, str(err)
    return times, unreadable


def time_left(sweep_dir: Path, cells: list[dict[str, Any]], *,
              times: dict[str, CellTime | None] | None = None
              ) -> tuple[float, list[str], list[str]]:
    """Cell time still to go for the sweep (seconds, one cell after another), the cells
    estimated from other methods' cells, and the cells it cannot estimate.

    A started cell counts `CellTime.left_s`. A cell not started counts the mean wall
    clock of the finished cells that differ from it only in their seed; with none, the
    mean of the finished cells of its curriculum and settings under any method (listed
    second: methods differ in cost, TeLAPA's cells several times a baseline's); with
    none of those either, it is not estimated (listed third). ``times``: each cell's
    `cell_time`, when the caller has read them already."""
    if times is None:
        times, _ = cell_times(sweep_dir, cells)

    def setting(cell: dict[str, Any]) -> str:
        return json.dumps([cell.get("curriculum"), cell.get("config")], sort_keys=True,
                          default=str)

    same_method: dict[tuple, list[float]] = {}
    same_setting: dict[str, list[float]] = {}
    for cell in cells:
        t = times[cell["name"]]
        if t is not None and t.phases_done >= t.phases and math.isfinite(t.wall_s):
            same_method.setdefault((cell.get("method"), setting(cell)), []).append(t.wall_s)
            same_setting.setdefault(setting(cell), []).append(t.wall_s)
    total, borrowed, unknown = 0.0, [], []
    for cell in cells:
        t = times[cell["name"]]
        walls = same_method.get((cell.get("method"), setting(cell)))
        if t is not None and t.phases_done > 0:
            left = t.left_s
        elif walls:
            left = sum(walls) / len(walls)
        elif walls := same_setting.get(setting(cell)):
            left = sum(walls) / len(walls)
            borrowed.append(cell["name"])
        else:
            left = math.nan
        if math.isfinite(left):
            total += left
        else:
            unknown.append(cell["name"])
    return total, borrowed, unknown


__all__ = ["STATES", "CellTime", "cell_state", "cell_time", "cell_times", "time_left"]
