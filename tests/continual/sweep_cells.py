"""Sweep cells made by hand for the sweep tests (no training)."""

from __future__ import annotations

import json
from pathlib import Path


def complete_cell(cell: Path, wall_s: float = 120.0) -> None:
    """Makes ``cell`` a complete run with its accounting (what `sweep status` and the
    estimates of `--until` read as its wall clock)."""
    cell.mkdir(parents=True, exist_ok=True)
    (cell / "run.json").write_text(json.dumps(
        {"format": "telapa-run", "version": 1, "status": "complete"}))
    (cell / "accounting.json").write_text(json.dumps(
        {"wall_s": wall_s, "extra_env_steps": 0, "peak_rss_bytes": 0,
         "method_state_bytes": 0, "run_dir_bytes": 0}))
