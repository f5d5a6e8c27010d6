"""Job functions for `LocalBackend(job=...)` in the fault suite (module level, so that a
spawned worker imports them)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from telapa.continual.sweep import mark_started, run_job


def die_on_seed_0(sweep_dir: str, cells: list[dict[str, Any]]) -> list:
    """Starts its cells; the worker of seed 0 dies (as if killed by the kernel), the
    others end as complete runs (without training)."""
    mark_started(sweep_dir, cells)
    if cells[0]["seed"] == 0:
        os._exit(3)
    out = []
    for cell in cells:
        path = Path(sweep_dir) / "cells" / cell["name"]
        path.mkdir(parents=True, exist_ok=True)
        (path / "run.json").write_text(json.dumps(
            {"format": "telapa-run", "version": 1, "status": "complete"}))
        out.append((cell["name"], {"ok": True}))
    return out


def die_on_seed_1_while_seed_0_runs(sweep_dir: str, cells: list[dict[str, Any]]) -> list:
    """Runs its cells (`run_job`), except that the worker of seed 1 dies (as if killed by
    the kernel) once seed 0, running on another worker, has written its first checkpoint:
    a death in the middle of a neighbour's cell."""
    if cells[0]["seed"] != 1:
        return run_job(sweep_dir, cells)
    mark_started(sweep_dir, cells)
    neighbour = Path(sweep_dir) / "cells" / cells[0]["name"].replace("-s1", "-s0")
    end = time.monotonic() + 600
    while not (neighbour / "checkpoint.json").exists() and time.monotonic() < end:
        time.sleep(0.02)
    os._exit(3)
