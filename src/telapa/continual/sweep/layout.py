"""The sweep directory: its files, each cell's status file, and its creation.

    DIR/sweep.yaml          a copy of the sweep file
    DIR/cells.json          every cell's resolved spec (a re-run must give the same cells)
    DIR/cells/NAME/         one run directory per cell (`telapa.continual.rundir.RunDir`)
    DIR/status/NAME.json    state, attempts, when the latest try started, every error
    DIR/status/NAME.log     the cell's progress lines
    DIR/.lock               held by the process that runs the sweep
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.sweep.grammar import Sweep
from telapa.io import read_json, write_bytes_atomic, write_json_atomic
from telapa.io.atomic import remove_stale
from telapa.io.destination import destination_problem

SWEEP_FILE = "sweep.yaml"
CELLS_FILE = "cells.json"


def cell_dir(sweep_dir: str | Path, name: str) -> RunDir:
    """The run directory of cell ``name``."""
    return RunDir(Path(sweep_dir) / "cells" / name)


def log_path(sweep_dir: str | Path, name: str) -> Path:
    """The file that collects cell ``name``'s progress lines."""
    return Path(sweep_dir) / "status" / f"{name}.log"


def _status_path(sweep_dir: Path, name: str) -> Path:
    return Path(sweep_dir) / "status" / f"{name}.json"


def read_status(sweep_dir: str | Path, name: str) -> dict[str, Any]:
    """Cell ``name``'s status file (``left, attempts 0`` before the first try)."""
    path = _status_path(Path(sweep_dir), name)
    if not path.exists():
        return {"state": "left", "attempts": 0, "errors": []}
    try:
        status = read_json(path, "cell status")
    except (OSError, ValueError) as err:
        raise RunDirError(f"{err} (remove it to start the cell's record afresh)") from None
    if not isinstance(status, dict):
        raise RunDirError(f"{path} is not a cell status (remove it to start the cell's "
                          "record afresh)")
    return status


def write_status(sweep_dir: str | Path, name: str, status: dict[str, Any]) -> None:
    write_json_atomic(_status_path(Path(sweep_dir), name), status)


def stored_sweep(sweep_dir: str | Path) -> dict[str, Any] | None:
    """The whole ``cells.json`` of a sweep directory: its name, its ``cells`` and, for an
    export, ``exported_from`` and ``of_cells`` (None if ``sweep_dir`` is not one)."""
    path = Path(sweep_dir) / CELLS_FILE
    if not path.is_file():
        return None
    try:
        data = read_json(path, "sweep cells")
    except (OSError, ValueError) as err:
        raise RunDirError(str(err)) from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise RunDirError(f"{path} is not a telapa sweep's cell list")
    return data


def stored_cells(sweep_dir: str | Path) -> list[dict[str, Any]] | None:
    """The cells recorded in a sweep directory (None if ``sweep_dir`` is not one)."""
    data = stored_sweep(sweep_dir)
    return None if data is None else data["cells"]


def sweep_cells_dirs(path: str | Path) -> list[Path] | None:
    """The run directories of the sweep directory ``path`` (None if it is not one)."""
    cells = stored_cells(path)
    return None if cells is None else [cell_dir(path, c["name"]).path for c in cells]


def expand_sweep_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """``paths`` with every sweep directory replaced by its cells' run directories
    (`sweep_cells_dirs`), and every folder that is neither a run nor a sweep but holds
    runs (``telapa run --seeds ... --out DIR``: one run directory per seed) by those runs,
    in name order; `RunDirError` for an unreadable cell list."""
    out: list[Path] = []
    for path in paths:
        cells = sweep_cells_dirs(path)
        if cells is None:
            cells = _runs_inside(Path(path)) or [Path(path)]
        out.extend(cells)
    return out


def _runs_inside(path: Path) -> list[Path]:
    """The run directories directly inside ``path`` when it is a folder but not itself a
    run directory; [] otherwise."""
    if not path.is_dir() or RunDir(path).exists():
        return []
    try:
        children = sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return []
    return [p for p in children if RunDir(p).exists()]


def prepare_sweep_dir(sweep: Sweep, out: Path) -> bool:
    """Creates ``out`` for ``sweep`` or checks that it holds the same sweep (re-running
    resumes it); refuses any other non-empty directory. Returns whether this call created
    it (`run_sweep` removes a directory it created when nothing could run in it).

    Creation is atomic (`create_dir_atomically`): a reader, or a second process starting
    the same sweep, sees no sweep directory or a whole one. Of two processes creating
    ``out`` at once, the one whose rename comes second finds the other's sweep (the same:
    it goes on, and the sweep's lock decides which runs) or is told another process is
    creating it."""
    out = Path(out)
    payloads = json.loads(json.dumps([c.payload() for c in sweep.cells]))
    stored = stored_cells(out)
    created = False
    if stored is None:
        def build(tmp: Path) -> None:
            (tmp / "cells").mkdir()
            (tmp / "status").mkdir()
            write_bytes_atomic(tmp / SWEEP_FILE, sweep.path.read_bytes())
            write_json_atomic(tmp / CELLS_FILE, {"format": "telapa-sweep", "name": sweep.name,
                                                 "cells": payloads})

        try:
            created = create_dir_atomically(out, build, what="sweep directory")
        except RunDirError:
            # another process's sweep may have been renamed into place between the look
            # above and create_dir_atomically's (a whole directory: its cells.json is there)
            if stored_cells(out) is None:
                raise
            created = False
        if not created and stored_cells(out) is None:
            raise RunDirError(f"sweep directory {out} is being created by another process; "
                              "run the same command again to resume it once it has started")
        stored = stored_cells(out)
    if payloads != stored:
        raise RunDirError(f"{out} holds another sweep (its {CELLS_FILE} differs from the "
                          f"cells of {sweep.path}); choose another --out")
    return created


def create_dir_atomically(out: Path, build: Callable[[Path], None], *, what: str) -> bool:
    """Creates the directory ``out`` whole: ``build`` fills a temporary directory next to
    it, which is then renamed into place (replacing an empty ``out``). Refuses, naming
    ``out``, a file and a non-empty directory; a place that cannot be written is a
    `RunDirError` too. Returns False, with nothing written, when another process created
    ``out`` meanwhile (the caller checks what it holds). A mount point is refused before
    anything is written: nothing can be renamed onto it (EBUSY, read-only or not)."""
    if problem := destination_problem(out, what=what, choose="choose another place",
                                      renamed_into_place=True):
        raise RunDirError(problem)
    if out.is_dir() and (entries := sorted(os.listdir(out))):
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise RunDirError(f"{what} {out} is not empty (holds {shown}); choose another place")
    tmp = out.parent / f".{out.name}.{os.getpid()}.{secrets.token_hex(4)}.new"
    remove_stale(out.parent, f".{out.name}", (".new",))  # left by a killed creator
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        build(tmp)
        try:
            os.rename(tmp, out)  # replaces an empty directory, fails on a non-empty one
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not out.is_dir():
                raise
            return False
    except OSError as err:
        raise RunDirError(f"cannot create {what} {out}: {err.strerror or err}"
                          + (f" ({err.filename})" if err.filename else "")) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return True


__all__ = ["CELLS_FILE", "SWEEP_FILE", "cell_dir", "create_dir_atomically",
           "expand_sweep_dirs", "log_path", "prepare_sweep_dir", "read_status", "stored_cells",
           "stored_sweep", "sweep_cells_dirs", "write_status"]
