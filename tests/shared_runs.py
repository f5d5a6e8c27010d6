"""Finished runs made once per test session and shared by the xdist workers: the first
worker that needs a folder makes it under a file lock in the session's base temp folder,
the others wait and reuse it (the fixtures are in tests/conftest.py). Each run has its
own lock, so two workers that need several runs make different ones at the same time."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from telapa.continual.curriculum import load_curriculum
from telapa.continual.preset import load_run_config
from telapa.continual.runner import ContinualRun
from telapa.continual.spec import RunSpec

TINY = Path(__file__).resolve().parent / "continual" / "tiny_run.yaml"
"""The tiny run preset of the continual tests: the whole pipeline, small budgets."""
QUICK_METHODS = ("finetune", "telapa")
QUICK_SEEDS = (0, 1)


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str,
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


class PhaseLog:
    """A progress sink that keeps the method phases a run reports (``phase``) and ignores
    the rest."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int]] = []

    def visit(self, visit, budget, done):
        pass

    def advance(self, steps, metrics):
        pass

    def evaluated(self, visit, step, sr):
        pass

    def note(self, text):
        pass

    def phase(self, name, done, total):
        self.seen.append((name, done, total))


def make_quick_runs(method: str) -> Callable[[Path], None]:
    """Makes the quick runs of ``method``, one seed after the other (`QUICK_SEEDS`) in
    this process (whose runs share their agents: `telapa.continual.agents`), as
    ``FOLDER/METHOD-sSEED``, each with the method phases it reported in
    ``FOLDER/METHOD-sSEED.phases.json``. The seeds
    of a method compile the same programs, so one worker compiles them once."""
    def make(folder: Path) -> None:
        for seed in QUICK_SEEDS:
            log = PhaseLog()
            spec = RunSpec(load_curriculum("smoke"), method, seed, load_run_config(TINY),
                           "tiny")
            run = folder / f"{method}-s{seed}"
            ContinualRun.start(spec, run, log).run()
            run.with_name(f"{run.name}.phases.json").write_text(json.dumps(log.seen))
    return make


def quick_phases(run: Path) -> list[tuple[str, int, int]]:
    """The method phases ``(name, done, total)`` a quick run reported, in order."""
    return [tuple(p) for p in json.loads(run.with_name(f"{run.name}.phases.json")
                                         .read_text())]
