"""The sweep directory: its files, each cell's status file, and its creation.

    DIR/sweep.yaml          a copy of the sweep file
    DIR/cells.json          every cell's resolved spec (a re-run must give the same cells)
    DIR/cells/NAME/         one run directory per cell (`telapa.continual.rundir.RunDir`)
    DIR/status/NAME.json    state, attempts, when the latest try started, every error
    DIR/status/NAME.log     the cell's progress lines
    DIR/.lock               held by the process that runs the sweep
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from telapa.continual.rundir import RunDir, RunDirError, claim_new_dir
from telapa.continual.sweep.grammar import Sweep
from telapa.io import read_json, write_json_atomic, write_text_atomic

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
    return read_json(path, "cell status")


def write_status(sweep_dir: str | Path, name: str, status: dict[str, Any]) -> None:
    write_json_atomic(_status_path(Path(sweep_dir), name), status)


def stored_sweep(sweep_dir: str | Path) -> dict[str, Any] | None:
    """The whole ``cells.json`` of a sweep directory: its name, its ``cells`` and, for an
    export, ``exported_from`` and ``of_cells`` (None if ``sweep_dir`` is not one)."""
    path = Path(sweep_dir) / CELLS_FILE
    if not path.is_file():
        return None
    data = read_json(path, "sweep cells")
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


def prepare_sweep_dir(sweep: Sweep, out: Path) -> None:
    """Creates ``out`` for ``sweep`` or checks that it holds the same sweep (re-running
    resumes it); refuses any other non-empty directory."""
    payloads = [c.payload() for c in sweep.cells]
    stored = stored_cells(out)
    if stored is not None:
        if json.loads(json.dumps(payloads)) != stored:
            raise RunDirError(f"{out} holds another sweep (its {CELLS_FILE} differs from the "
                              f"cells of {sweep.path}); choose another --out")
        return
    claim_new_dir(out, what="sweep directory")
    (out / "cells").mkdir()
    (out / "status").mkdir()
    write_text_atomic(out / SWEEP_FILE, sweep.path.read_text())
    write_json_atomic(out / CELLS_FILE, {"format": "telapa-sweep", "name": sweep.name,
                                         "cells": payloads})


__all__ = ["CELLS_FILE", "SWEEP_FILE", "cell_dir", "log_path", "prepare_sweep_dir",
           "read_status", "stored_cells", "stored_sweep", "sweep_cells_dirs", "write_status"]
