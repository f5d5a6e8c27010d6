"""Real runs for the report tests: Finetune and TeLAPA, seeds 0 and 1, on the smoke
curriculum (A B A' B') with the tiny run preset of the continual tests
(`tests/continual/tiny_run.yaml`: the whole pipeline, small budgets), made once per test
session.

With pytest-xdist the workers share them: the first worker that needs them makes them
under a file lock in the session's base temp folder, the others wait and reuse them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from telapa.cli import main
from telapa.continual.curriculum import load_curriculum
from telapa.continual.preset import load_run_config
from telapa.continual.runner import ContinualRun, RunSpec

TINY = Path(__file__).resolve().parents[1] / "continual" / "tiny_run.yaml"
METHODS = ("finetune", "telapa")
SEEDS = (0, 1)


def _once(tmp_path_factory: pytest.TempPathFactory, name: str,
          make: Callable[[Path], None]) -> Path:
    """The folder ``name`` filled by ``make(folder)`` once per session, across workers."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's base temp, shared by the workers
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".done").exists():
            shutil.rmtree(folder, ignore_errors=True)  # left by a worker that failed
            folder.mkdir()
            make(folder)
            (folder / ".done").touch()
    return folder


def _paths(folder: Path) -> dict[tuple[str, int], Path]:
    return {(m, s): folder / f"{m}-s{s}" for m in METHODS for s in SEEDS}


def _make_runs(folder: Path) -> None:
    curriculum, config = load_curriculum("smoke"), load_run_config(TINY)
    for (method, seed), path in _paths(folder).items():
        ContinualRun.start(RunSpec(curriculum, method, seed, config, "tiny"), path).run()


@pytest.fixture(scope="session")
def quick_runs(tmp_path_factory) -> dict[tuple[str, int], Path]:
    """(method, seed) -> run directory of a finished tiny-preset smoke run."""
    return _paths(_once(tmp_path_factory, "quick-runs", _make_runs))


@pytest.fixture(scope="session")
def report_dir(quick_runs, tmp_path_factory) -> Path:
    """`telapa report` of the four tiny runs."""
    def make(folder: Path) -> None:
        assert main(["report", *map(str, quick_runs.values()), "--out",
                     str(folder / "report")]) == 0
    return _once(tmp_path_factory, "quick-report", make) / "report"
