"""The fault suite's shared pieces: hang guards, the one-line-error check, a reference
run of the suite's tiny EWC run, small disks, and process accounting.

Every case ends in identical results or a one-line error naming what is wrong, never a
traceback, a hang or a leaked process (docs/reliability.md, "What the fault suite covers")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import psutil
import pytest
from continual.crash import CrashAfter  # tests/ is on sys.path (pytest rootdir-less packages)
from shared_runs import made_once

from telapa.cli import main

HERE = Path(__file__).parent
TESTS = HERE.parent
FAULT_RUN = HERE / "fault_run.yaml"
ONE_TASK = TESTS / "continual" / "one_task_curriculum.yaml"
RUN = ["run", "--curriculum", str(ONE_TASK), "--method", "ewc", "--preset", str(FAULT_RUN)]
"""``telapa run`` of the suite's run (add ``--seed`` and ``--out``): 9 phases."""
PHASES = 9
RESULTS = ("visits.csv", "curve.csv", "final.csv", "metrics.json")
"""What must be identical between an interrupted-and-resumed run and an uninterrupted one
(``accounting.json`` holds wall clock, ``run.json`` the code of each segment)."""


class Hang(Exception):
    """A case ran past its deadline."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raises `Hang` in this (main) thread if the block runs longer than ``seconds``."""
    def expire(signum, frame):
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def one_line_error(stderr: str, *fragments: str) -> str:
    """The ``telapa: error: ...`` line that ends ``stderr``: one line, no traceback, and
    holding every fragment (what is wrong and where)."""
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("telapa: error: "), stderr[-3000:]
    assert sum(line.startswith("telapa: error: ") for line in lines) == 1, stderr[-3000:]
    for fragment in fragments:
        assert fragment in lines[-1], (fragment, lines[-1])
    return lines[-1]


def fails(args: list[str], capsys, *fragments: str, within_s: float = 60) -> str:
    """Runs ``telapa ARGS`` in this process, which must end in a one-line error (exit
    status 2) within ``within_s`` seconds; returns the error line."""
    capsys.readouterr()
    with deadline(within_s), pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    return one_line_error(capsys.readouterr().err, *fragments)


def telapa(*args: str, timeout_s: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """``telapa ARGS`` in a subprocess (text output), killed after ``timeout_s``."""
    return subprocess.run([sys.executable, "-m", "telapa.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, **kwargs)


def start_telapa(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "telapa.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def assert_same_results(ours: Path, reference: Path) -> None:
    """The tables and metrics of run directory ``ours`` are the reference's, byte for
    byte."""
    for name in RESULTS:
        assert (ours / name).read_bytes() == (reference / name).read_bytes(), name
    for name in ("visits", "curve", "final"):  # the same again, with a readable diff
        pd.testing.assert_frame_equal(pd.read_csv(ours / f"{name}.csv"),
                                      pd.read_csv(reference / f"{name}.csv"), obj=name)


@pytest.fixture(scope="session")
def reference(tmp_path_factory) -> Path:
    """The suite's run (seed 0), uninterrupted: what every fault must end in (once per
    session, shared by the xdist workers; tests copy it before they change anything)."""
    def make(folder: Path) -> None:
        assert main([*RUN, "--seed", "0", "--out", str(folder / "run")]) == 0
    return made_once(tmp_path_factory, "fault-reference", make) / "run"


@contextmanager
def small_disk(path: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (root and a kernel that allows it; the case
    is skipped with the reason elsewhere), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or 'mount failed'}"
                    "; needs root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)


@pytest.fixture
def no_leaked_processes() -> Iterator[None]:
    """Fails the test if a process it started (directly or not) outlives it by 10 s."""
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield
    new = [p for p in me.children(recursive=True) if p.pid not in before]
    gone, alive = psutil.wait_procs(new, timeout=10)
    for p in alive:
        p.kill()
    assert not alive, f"processes left running: {[p.pid for p in alive]}"


def wait_for(predicate, proc: subprocess.Popen | None = None, timeout_s: float = 300,
              what: str = "the condition") -> None:
    """Waits until ``predicate()`` (``proc``, if given, must still be running)."""
    end = time.monotonic() + timeout_s
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended before {what}: {proc.communicate()[1][-3000:]}")
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` and wait for it; its pipes are closed unread (a process it
    left behind may hold them open)."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


class Killed(BaseException):
    """A simulated death of the process (a BaseException: nothing catches it)."""


class KillAfter(CrashAfter):
    """A progress sink that kills the run (`Killed`) after ``n`` training progress
    reports (one per chunk)."""

    error = Killed


class Notes(KillAfter):
    """A progress sink that keeps the notes (warnings) the run prints."""

    def __init__(self):
        super().__init__(10**9)
        self.notes: list[str] = []

    def note(self, text):
        self.notes.append(text)


def spec(seed: int = 0):
    """The suite's run as a `RunSpec`."""
    from telapa.continual.curriculum import load_curriculum
    from telapa.continual.preset import load_run_config
    from telapa.continual.spec import RunSpec

    return RunSpec(load_curriculum(ONE_TASK), "ewc", seed, load_run_config(FAULT_RUN),
                   str(FAULT_RUN))


@pytest.fixture(scope="module")
def partial(tmp_path_factory) -> Path:
    """The suite's run killed in its second visit, after its first chunk (at the 4th of 4 chunks):
    two checkpoints, both holding EWC's state, the newest one mid-visit (``train_state.npz``,
    ``train.csv``)."""
    from telapa.continual.runner import ContinualRun

    out = tmp_path_factory.mktemp("partial") / "run"
    # progress is per chunk (2 a visit)
    run = ContinualRun.start(spec(), out, KillAfter(3))
    with pytest.raises(Killed):
        run.run()
    return out


def copy_run(source: Path, dest: Path) -> Path:
    """A copy of a run directory as ``cp -a`` makes it: files that are hard links of one
    another in ``source`` stay so in ``dest``."""
    subprocess.run(["cp", "-a", str(source), str(dest)], check=True)
    return dest


def flip_byte(path: Path, at: float = 0.5) -> None:
    """Flips the bits of one byte of ``path`` (at the fraction ``at`` of its length)."""
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0xFF
    path.write_bytes(bytes(data))
