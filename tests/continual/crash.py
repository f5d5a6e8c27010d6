"""Crashes for the resume tests: a progress sink that simulates one in-process, and a
`telapa` subprocess killed with SIGKILL once a given checkpoint exists."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


class Crash(Exception):
    """The simulated crash."""


class CrashAfter:
    """Raises ``error`` (`Crash`) after ``n`` training progress reports (one per chunk);
    keeps the run's notes (``notes``) and ignores everything else."""

    error: type[BaseException] = Crash

    def __init__(self, n: int):
        self.n = n
        self.notes: list[str] = []

    def visit(self, visit, budget, done):
        pass

    def advance(self, steps, metrics):
        self.n -= 1
        if self.n < 0:
            raise self.error

    def evaluated(self, visit, step, sr):
        pass

    def note(self, text):
        self.notes.append(text)

    def phase(self, name, done, total):
        pass


def telapa_process(*args: str) -> subprocess.Popen:
    """``python -m telapa.cli ARGS`` with stdout and stderr piped (text)."""
    return subprocess.Popen([sys.executable, "-m", "telapa.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def checkpoint_phase(run_dir: Path) -> int:
    """``next_phase`` of the latest committed checkpoint (-1 if none yet)."""
    try:
        latest = json.loads((run_dir / "checkpoint.json").read_text())["latest"]
        return json.loads((run_dir / latest / "state.json").read_text())["next_phase"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return -1


def kill_at_checkpoint(proc: subprocess.Popen, run_dir: Path, phase: int,
                       timeout_s: float = 600) -> int:
    """SIGKILLs ``proc`` as soon as ``run_dir`` has a checkpoint at ``phase`` or later
    (the process must still be running then); returns the phase it was killed at."""
    deadline = time.monotonic() + timeout_s
    while checkpoint_phase(run_dir) < phase:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return checkpoint_phase(run_dir)
