"""`LocalBackend`: a sweep's jobs in local worker processes."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from telapa.continual.sweep.grammar import Cell
from telapa.continual.sweep.jobs import Outcome, run_job, thread_env

PARENT_CHECK_S = 1.0
"""How often a worker checks that the sweep process that started it is alive."""


def _die_with_parent(parent: int) -> None:
    """Ends this worker when the sweep process ``parent`` dies, however it dies (SIGKILL
    included): Linux sends it SIGKILL (``PR_SET_PDEATHSIG``), and everywhere a daemon
    thread exits the process once it has been handed to another parent. A worker that
    outlived its sweep would run cells nobody records and hold their locks."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux; absent elsewhere)
    if os.getppid() != parent:  # died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_S)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="telapa-parent-watch", daemon=True).start()


def _init_worker(threads: int, cores: Any, parent: int) -> None:
    _die_with_parent(parent)
    os.environ.update(thread_env(threads))
    if cores is not None and hasattr(os, "sched_setaffinity"):
        try:
            chunk = cores.get_nowait()
            os.sched_setaffinity(0, chunk)
        except Exception:  # noqa: BLE001 - affinity is an optimisation only
            pass


class LocalBackend:
    """Cells in ``workers`` local processes (spawned, so each sets its thread caps before
    JAX starts); each worker gets ``threads`` threads and, where the OS allows, its own
    ``threads`` cores. A worker ends when the sweep process dies (`_die_with_parent`)."""

    def __init__(self, workers: int = 1, threads: int | None = None, *,
                 job: Callable[[str, list[dict[str, Any]]], list[Outcome]] = run_job):
        self.workers = workers
        self.job = job
        """What a worker calls with (sweep directory, cells of a job): `run_job`."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else os.cpu_count() or 1
        self.threads = threads or max(1, cores // workers)
        self.describe = f"local, {workers} worker(s) x {self.threads} thread(s)"

    def run(self, sweep_dir: Path, jobs: list[list[Cell]]) -> Iterator[Outcome]:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        from concurrent.futures.process import BrokenProcessPool

        ctx = multiprocessing.get_context("spawn")
        available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else []
        queue = ctx.Queue()
        if len(available) >= self.workers * self.threads:
            for i in range(self.workers):
                queue.put(set(available[i * self.threads:(i + 1) * self.threads]))
        env = thread_env(self.threads)
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # spawned workers inherit it before importing JAX
        try:
            with ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_init_worker,
                                     initargs=(self.threads, queue, os.getpid())) as pool:
                futures = {pool.submit(self.job, str(sweep_dir), [c.work() for c in job]):
                           job for job in jobs}
                for future in as_completed(futures):
                    try:
                        yield from future.result()
                    except BrokenProcessPool as err:
                        for cell in futures[future]:
                            yield cell.name, {"ok": False,
                                              "error": f"worker process died: {err}"}
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


__all__ = ["LocalBackend"]
