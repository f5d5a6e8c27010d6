"""Job functions for `LocalBackend(job=...)` in the fault suite (module level, so that a
spawned worker imports them)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from telapa.continual.sweep import mark_started


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
