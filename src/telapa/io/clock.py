"""A clock that stands still while the process is stopped: the seconds a run's accounting
counts (``wall_s``, the seconds of each phase, a progress line's pace).

`time.perf_counter` keeps counting while a process is stopped (SIGSTOP, a shell's Ctrl-Z,
``scontrol suspend`` of a Slurm job, a study paused for a quiet test run), so a run
paused for 20 minutes would record 20 minutes of work it never did, and a sweep's
``--until`` would take that for its pace (`telapa.continual.sweep.deadline`). `running`
is `time.perf_counter` less the time the process was stopped, measured by a watcher
thread (started on first use, one per process) that wakes every `TICK_S`: a stopped
process runs none of its threads, so on resuming the watcher finds a gap g since its
last tick and counts max(0, g - `STOP_GAP_S`) as stopped. `running` counts the same of
the gap still open, so it is continuous and never runs backwards, stands still from
`STOP_GAP_S` into a stop until the resume, and each stop counts `STOP_GAP_S` short.

A gap this long cannot come from a running process: the watcher needs the GIL only for
a few bytecodes per tick, and the heaviest work of a run (XLA compiling and running its
programs, MuJoCo stepping its envs) releases the GIL; measured beside a cold TeLAPA run
compiling 224 programs with a study busy on both cores, its longest tick took 0.32 s
against `TICK_S` 0.05 (2026-12-06), far under `STOP_GAP_S`. A stop shorter than
`STOP_GAP_S` is not noticed, and counts as work.
"""

from __future__ import annotations

import os
import threading
import time

TICK_S = 0.5
"""How often the watcher wakes."""
STOP_GAP_S = 5.0
"""A gap between two of the watcher's ticks longer than this is a stop."""


class _Watcher:
    """The process's stopped seconds (`stopped`), kept by a daemon thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = 0.0
        self._last = time.perf_counter()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while True:
            time.sleep(TICK_S)
            with self._lock:
                now = time.perf_counter()
                gap = now - self._last
                self._stopped += max(0.0, gap - STOP_GAP_S)
                self._last = now

    def _start(self) -> None:
        if self._thread is None:
            self._last = time.perf_counter()
            self._thread = threading.Thread(target=self._run, name="telapa-clock",
                                             daemon=True)
            self._thread.start()

    def running(self) -> float:
        with self._lock:
            self._start()
            now = time.perf_counter()
            open_gap = now - self._last  # a stop the watcher has not counted yet
            return now - self._stopped - max(0.0, open_gap - STOP_GAP_S)

    def stopped(self) -> float:
        with self._lock:
            self._start()
            return self._stopped

    def after_fork(self) -> None:
        """In a forked child: no watcher thread survives a fork, so start afresh."""
        self._lock = threading.Lock()
        self._thread = None


_WATCHER = _Watcher()
os.register_at_fork(after_in_child=_WATCHER.after_fork)


def running() -> float:
    """Seconds, as `time.perf_counter`, less the time this process has been stopped: only
    differences between two readings mean anything."""
    return _WATCHER.running()


def stopped() -> float:
    """Seconds this process has been stopped, as counted so far (each stop less
    `STOP_GAP_S`; a stop still under way counts from its resume)."""
    return _WATCHER.stopped()


__all__ = ["STOP_GAP_S", "TICK_S", "running", "stopped"]
