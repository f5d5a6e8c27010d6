"""`LocalBackend`: a sweep's jobs in local worker processes."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from telapa.continual.sweep.deadline import JobQueue
from telapa.continual.sweep.grammar import Cell
from telapa.continual.sweep.jobs import Outcome, run_job, thread_env
from telapa.io.stop import stop_on_signals

PARENT_CHECK_S = 1.0
"""How often a worker checks that the sweep process that started it is alive."""
STOP_WAIT_S = 30.0
"""How long a busy worker asked to stop (SIGTERM) has to unwind its run before it is
killed (`_Worker.stop`)."""


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


def _init_worker(threads: int, cores: set[int] | None, parent: int) -> None:
    _die_with_parent(parent)
    os.environ.update(thread_env(threads))
    if cores and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, cores)
        except OSError:  # affinity is an optimisation only
            pass


def _serve(conn: Connection, job: Callable[[str, list[dict[str, Any]]], list[Outcome]],
           threads: int, cores: set[int] | None, parent: int) -> None:
    """A worker's loop: runs each job ``(sweep directory, cells)`` it receives and sends
    back its outcomes, until it receives None (or its sweep stops it: SIGTERM, a closed
    pipe).

    Only the sweep process stops a worker (`_Worker.stop`: SIGTERM), so SIGINT is
    ignored here: Ctrl-C in a terminal signals the whole process group, and a worker
    unwinding on its own SIGINT would be cut short by the sweep's SIGTERM. SIGTERM
    unwinds the run as Ctrl-C does in ``telapa run`` (`stop_on_signals`: its last
    checkpoint kept, its lock released, its trackers closed), and the worker then ends
    by `_end_after_stop`. Killed outright instead (the sweep's SIGTERM with Python's
    default action), a worker left the three semaphores of tensorboardX's event queue to
    Python's resource tracker, which warned of them after the sweep's resume line
    ("There appear to be 3 leaked semaphore objects")."""
    _init_worker(threads, cores, parent)
    with stop_on_signals():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the sweep's to act on (above)
        try:
            while (work := conn.recv()) is not None:
                conn.send(job(*work))
        except KeyboardInterrupt:  # Terminate: SIGTERM
            _end_after_stop()
        except (EOFError, BrokenPipeError):
            pass


def _end_after_stop() -> None:
    """Ends a worker whose run a stop has unwound (everything it keeps written, its locks
    released) at once: what multiprocessing runs when a worker ends (its finalizers:
    the semaphores of tensorboardX's event queue handed back to the resource tracker),
    its streams flushed, then ``os._exit``. Not the interpreter's finalization, which
    tears JAX's runtime down under its interrupted threads: a worker stopped so died of
    SIGSEGV there, at times before its semaphores were handed back (the resource
    tracker's "3 leaked semaphore objects" after the sweep's resume line), as `telapa
    run` did before `telapa.cli.console_main` ended it the same way."""
    import multiprocessing.util
    import sys

    multiprocessing.util._exit_function()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(0)


def _death(exitcode: int | None) -> str:
    """How a worker process ended, for the error of the cells it was running: its exit
    status, or the signal that killed it (SIGKILL: the kernel's OOM killer, or a user)."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = ", e.g. out of memory" if name == "SIGKILL" else ""
        return f"worker process died: killed by {name}{hint}"
    return f"worker process died: exit status {exitcode}"


class _Worker:
    """One worker process, the pipe to it and the job it runs (None: idle)."""

    def __init__(self, ctx: Any, job: Callable, threads: int, cores: set[int] | None):
        self.conn, theirs = ctx.Pipe()
        self.process = ctx.Process(target=_serve, name="telapa-sweep-worker",
                                   args=(theirs, job, threads, cores, os.getpid()))
        self.process.start()
        theirs.close()
        self.cores = cores
        self.job: list[Cell] | None = None

    def stop(self) -> None:
        """Ends the process: an idle one is asked to (it finishes nothing), a busy one
        (the sweep stopped: Ctrl-C, SIGTERM, an error) is sent SIGTERM, which unwinds its
        run (`_serve`), and killed if it has not ended within `STOP_WAIT_S`; its cell
        resumes from its last checkpoint in the next sweep."""
        if self.job is None and self.process.is_alive():
            with contextlib.suppress(OSError):
                self.conn.send(None)
            self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=STOP_WAIT_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


class LocalBackend:
    """Cells in ``workers`` local processes (spawned, so each sets its thread caps before
    JAX starts); each worker gets ``threads`` threads and, where the OS allows, its own
    ``threads`` cores. A worker ends when the sweep process dies (`_die_with_parent`).

    Each worker has its own pipe and takes one job at a time, so the death of a worker
    (an env calling ``os._exit``, the kernel's OOM killer) fails only the job it was
    running, with how it died (`_death`): the other workers' cells run on untouched, and a
    new worker takes the dead one's place (and cores) for the jobs left. (A shared
    `concurrent.futures.ProcessPoolExecutor` is "broken" by one death and terminates
    every other worker with it, failing their cells too.)"""

    takes_queue = True
    """`run` takes a `JobQueue` (``--until``), starting each job as a worker comes free."""

    def __init__(self, workers: int = 1, threads: int | None = None, *,
                 job: Callable[[str, list[dict[str, Any]]], list[Outcome]] = run_job):
        self.workers = workers
        self.job = job
        """What a worker calls with (sweep directory, cells of a job): `run_job`."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else os.cpu_count() or 1
        self.threads = threads or max(1, cores // workers)
        self.describe = f"local, {workers} worker(s) x {self.threads} thread(s)"

    def run(self, sweep_dir: Path, jobs: list[list[Cell]] | JobQueue
            ) -> Iterator[Outcome]:
        """The outcome of every cell of ``jobs`` as each job ends; ``jobs``: a list, run in
        its order, or a `JobQueue` (a `DeadlineQueue` under ``--until``), whose jobs left
        when it hands out no more stay unrun."""
        import multiprocessing
        from multiprocessing.connection import wait

        ctx = multiprocessing.get_context("spawn")
        available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else []
        chunks: list[set[int] | None] = [None] * self.workers
        if len(available) >= self.workers * self.threads:
            chunks = [set(available[i * self.threads:(i + 1) * self.threads])
                      for i in range(self.workers)]
        env = thread_env(self.threads)
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # spawned workers inherit it before importing JAX
        queue = jobs if isinstance(jobs, JobQueue) else JobQueue(jobs)
        slots = chunks[:min(self.workers, len(queue))]
        pool: list[_Worker | None] = [None] * len(slots)  # started with its first job
        try:
            while True:
                for i, worker in enumerate(pool):
                    if (worker is None or worker.job is None) and \
                            (job := queue.take()) is not None:
                        if worker is None or not worker.process.is_alive():  # died
                            if worker is not None:
                                worker.stop()
                            pool[i] = worker = _Worker(ctx, self.job, self.threads,
                                                       slots[i])
                        worker.job = job
                        with contextlib.suppress(OSError):  # a death shows below
                            worker.conn.send((str(sweep_dir), [c.work() for c in job]))
                busy = [w for w in pool if w is not None and w.job is not None]
                if not busy:  # every job ran, or none of those left is to start (--until)
                    break
                wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
                for worker in busy:
                    if not worker.conn.poll() and worker.process.is_alive():
                        continue  # still running its job
                    outcomes = None
                    with contextlib.suppress(EOFError, OSError):  # EOF: it died
                        outcomes = worker.conn.recv()
                    job, worker.job = worker.job, None
                    if outcomes is not None:
                        yield from outcomes
                        continue
                    worker.process.join()  # replaced above when a job is left for it
                    error = _death(worker.process.exitcode)
                    for cell in job:
                        yield cell.name, {"ok": False, "error": error}
        finally:
            for worker in pool:
                if worker is not None:
                    worker.stop()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


__all__ = ["LocalBackend"]
