"""Two sweeps sharing one directory over a network file system, simulated on one machine
(docs/reliability.md, "Faults that need more than one machine"): two processes
that share nothing but the directory (they meet through files, as two machines would),
each taking its locks as a Linux NFS client takes them. That client emulates ``flock`` with a POSIX
lock on the whole file, which the server arbitrates between clients: per process, not
per open file, and dropped when the process closes any descriptor of the file. Here
``fcntl.flock`` is replaced by ``fcntl.lockf`` (the same operations, as whole-file POSIX
locks) in every process of a case, so a sweep that relied on ``flock``'s own semantics,
or closed a lock file it holds, would show it."""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.sweep import (
    load_sweep,
    mark_started,
    prepare_sweep_dir,
    read_status,
    run_sweep,
)

from .conftest import FAULT_RUN, ONE_TASK, fails

SWEEP = f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\nseeds: [0, 1, 2]\n"
CELLS = [f"one-task-ewc-s{seed}" for seed in range(3)]
WORK_S = 0.05
"""How long a cell holds its run directory (the two sweeps overlap for several cells)."""


@pytest.fixture
def sweep_file(tmp_path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    return path


def nfs_locks() -> None:
    """Gives this process's ``flock`` the semantics of ``flock`` on a Linux NFS mount: a
    POSIX lock on the whole file (`fcntl.lockf` takes the same operations)."""
    fcntl.flock = fcntl.lockf


class Claimer:
    """A backend that runs each cell in the sweep's own process, as a worker does: it
    records the start (`mark_started`), holds the cell's run directory for `WORK_S`,
    appends its name to the cell's ``claims`` file and leaves a complete run."""

    describe = "claimer"

    def __init__(self, who: str):
        self.who = who

    def run(self, sweep_dir, jobs):
        for cell in (c for job in jobs for c in job):
            mark_started(str(sweep_dir), [cell.work()])
            run_dir = RunDir(sweep_dir / "cells" / cell.name)
            run_dir.path.mkdir(parents=True, exist_ok=True)
            with run_dir.locked():
                with open(run_dir.path / "claims", "a") as claims:
                    claims.write(f"{self.who}\n")
                time.sleep(WORK_S)
                (run_dir.path / "run.json").write_text(json.dumps(
                    {"format": "telapa-run", "version": 1, "status": "complete"}))
            yield cell.name, {"ok": True}


def _share(sweep_file: str, base: str, trials: int, who: int) -> None:
    """One of the two sweeps: in each trial, once both are ready (files, not shared
    memory), runs the sweep on the trial's directory and writes its outcome to a file."""
    nfs_locks()
    base_dir = Path(base)
    probe = base_dir / f"probe-{who}"
    probe.mkdir()
    first, second = RunDir(probe), RunDir(probe)
    first.lock()
    second.lock()  # POSIX locks are the process's: a second holder here is no conflict
    first.unlock()
    second.unlock()
    sweep = load_sweep(sweep_file)
    for i in range(trials):
        (base_dir / f"ready-{i}-{who}").touch()
        end = time.monotonic() + 60
        while not (base_dir / f"ready-{i}-{1 - who}").exists() and time.monotonic() < end:
            time.sleep(0.0005)
        try:
            counts = run_sweep(sweep, base_dir / f"t{i}", Claimer(f"sweep {who}"))
            outcome = f"ok {counts['done']}"
        except RunDirError as err:
            outcome = f"refused: {err}"
        (base_dir / f"outcome-{i}-{who}").write_text(outcome)


def test_two_sweeps_on_one_directory_run_each_cell_once(sweep_file, tmp_path):
    """Ten trials of two sweeps started together on one new directory: every cell is run
    exactly once; each sweep either runs (all cells done at its end, each with one
    attempt), finds the other's finished sweep and runs nothing, or is refused in words
    that say why (the lock's holder, by process id, or the directory being created)."""
    trials = 10
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_share, args=(str(sweep_file), str(tmp_path), trials, who))
             for who in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0]
    pids = {0: procs[0].pid, 1: procs[1].pid}
    refusals = 0
    for i in range(trials):
        out = tmp_path / f"t{i}"
        for cell in CELLS:
            claims = (out / "cells" / cell / "claims").read_text().splitlines()
            assert len(claims) == 1, (i, cell, claims)
            status = read_status(out, cell)
            assert (status["state"], status["attempts"], status["errors"]) == ("done", 1, [])
        for who in (0, 1):
            text = (tmp_path / f"outcome-{i}-{who}").read_text()
            if text.startswith("refused: "):
                refusals += 1
                assert text == (f"refused: sweep {out} is being run by another process: run "
                                f"directory {out} is in use by pid {pids[1 - who]} on "
                                f"{socket.gethostname()} ({out / '.lock'} is locked); wait "
                                "for it to finish or stop it first") \
                    or text == (f"refused: sweep directory {out} is being created by another "
                                "process; run the same command again to resume it once it "
                                "has started"), text
            else:
                assert text == "ok 3", text
    assert refusals, "the two sweeps never overlapped: the case tested nothing"


def test_a_second_sweep_on_a_running_one_is_one_line(sweep_file, tmp_path, capsys,
                                                       monkeypatch):
    """``telapa sweep`` on a directory whose sweep another process (another machine's,
    over NFS) runs: one line naming the holder, exit status 2, and nothing run or
    written."""
    out = tmp_path / "sweep"
    prepare_sweep_dir(load_sweep(sweep_file), out)
    release = tmp_path / "release"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, pathlib, sys, time\n"
         "fcntl.flock = fcntl.lockf\n"
         "from telapa.continual.rundir import RunDir\n"
         "held = RunDir(sys.argv[1])\n"
         "held.lock()\n"
         "pathlib.Path(sys.argv[2] + '.held').touch()\n"
         "while not pathlib.Path(sys.argv[2]).exists():\n"
         "    time.sleep(0.01)\n", str(out), str(release)])
    try:
        end = time.monotonic() + 60
        while not Path(f"{release}.held").exists():
            assert holder.poll() is None and time.monotonic() < end, "the holder did not lock"
            time.sleep(0.01)
        monkeypatch.setattr(fcntl, "flock", fcntl.lockf)
        before = sorted(p.name for p in (out / "status").iterdir())
        fails(["sweep", str(sweep_file), "--out", str(out)], capsys,
              f"sweep {out} is being run by another process", f"pid {holder.pid} on")
        assert sorted(p.name for p in (out / "status").iterdir()) == before
        assert not list((out / "cells").iterdir())
    finally:
        release.touch()
        holder.wait(timeout=30)
