"""The report of the shared tiny-preset smoke runs (`quick_runs` in tests/conftest.py:
Finetune and TeLAPA, seeds 0 and 1, on the smoke curriculum A B A' B'), made once per
test session and shared by the xdist workers."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_runs import made_once

from telapa.cli import main


@pytest.fixture(scope="session")
def report_dir(quick_runs, tmp_path_factory) -> Path:
    """`telapa report --clips` of the four tiny runs."""
    def make(folder: Path) -> None:
        assert main(["report", *map(str, quick_runs.values()), "--out",
                     str(folder / "report"), "--clips"]) == 0
    return made_once(tmp_path_factory, "quick-report", make) / "report"
