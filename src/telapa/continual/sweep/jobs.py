"""What a worker runs: one job (a cell, or the seeds of one cell as a `SeedBatch`) to
the end in this process, its progress lines in the cell's log. Backends call `run_job`
in a worker process (`LocalBackend`) or a Ray task (`RayBackend`). A job's cells carry
what the sweep's command adds (`Cell.runtime`): the modules to import first, so that a
plug-in method or env is known in the worker too, and the trackers to log to."""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from typing import Any

from telapa import envvars
from telapa.continual.preset import parse_run_config
from telapa.continual.progress import PlainProgress
from telapa.continual.rundir import RunDirError
from telapa.continual.sweep.layout import cell_dir, log_path, read_status, write_status

Outcome = tuple[str, dict[str, Any]]
"""A cell's name and its result: ``{"ok": True, "metrics": ...}`` or ``{"ok": False,
"error": ..., "traceback": ...}``."""


class BackendError(RuntimeError):
    """A backend could not start a round's jobs at all (Slurm refused the submission):
    none of them ran. `run_sweep` stops with it, in one line, and removes the sweep
    directory it created when nothing ran."""


def thread_env(threads: int) -> dict[str, str]:
    """Environment that caps the CPU threads of one worker (the BLAS/OpenMP pools, and
    XLA's Eigen pool when one thread is asked for), so that N workers do not
    oversubscribe the cores; beyond that the worker's CPU affinity caps it (XLA's CPU
    client takes no thread-count flag). Every XLA flag starts with ``--``: XLA reads an
    ``XLA_FLAGS`` value that does not as the name of a flag file, and aborts."""
    flags = os.environ.get("XLA_FLAGS", "")
    flags = " ".join(f for f in flags.split() if "xla_cpu_multi_thread_eigen" not in f)
    if threads == 1:
        flags = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
    return {"XLA_FLAGS": flags, "OMP_NUM_THREADS": str(threads),
            "OPENBLAS_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            envvars.THREADS: str(threads)}


def _interval() -> float:
    """Seconds between a cell's progress lines (``$TELAPA_LOG_INTERVAL``, checked by the
    command that started the sweep: `telapa.envvars.check`)."""
    return envvars.seconds(envvars.LOG_INTERVAL)


def _failure(err: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": f"{type(err).__name__}: {err}",
            "traceback": traceback.format_exc(limit=8)}


def mark_started(sweep_dir: str, cells: list[dict[str, Any]]) -> None:
    """Records in each cell's status when it started and in which round of the sweep
    (``started_try``: the ``queued_try`` the sweep wrote when it queued it)."""
    with contextlib.suppress(OSError, ValueError):  # a status file is no reason to fail
        for cell in cells:
            status = read_status(sweep_dir, cell["name"])
            write_status(sweep_dir, cell["name"], status | {
                "started": time.time(), "started_try": status.get("queued_try")})


def _runtime(cells: list[dict[str, Any]]):
    """Imports the job's ``imports`` (the sweep's ``--import`` modules) and returns them
    with its `Tracking` (the sweep's ``--track``), both from its first cell (a job's cells
    share them: `telapa.continual.sweep.grammar.Cell.runtime`)."""
    from telapa.continual.tracking import Tracking
    from telapa.plugins import import_modules

    imports = import_modules(cells[0].get("imports") or (), source="the sweep's --import")
    tracking = cells[0].get("tracking")
    return imports, Tracking(tuple(tracking["trackers"]), tracking["project"]) \
        if tracking else None


def _spec(cell: dict[str, Any], imports: tuple[str, ...]):
    from telapa.continual.curriculum import parse_curriculum
    from telapa.continual.spec import RunSpec

    return RunSpec(parse_curriculum(cell["curriculum"], cell["name"]), cell["method"],
                   cell["seed"], parse_run_config(cell["config"], cell["name"]),
                   cell["preset"], imports=imports)


def run_job(sweep_dir: str, cells: list[dict[str, Any]]) -> list[Outcome]:
    """Runs (or resumes) the cells of one job to the end in this process: `run_cell` for
    one cell, a `SeedBatch` for several (seeds of one cell); returns ``(name, result)``
    per cell (never raises). Each cell's status file records when it started, and the
    sweep's round it started in (``started_try``: its ``queued_try``), so that a cell
    reported failed without having started is not charged a try."""
    mark_started(sweep_dir, cells)
    if len(cells) == 1:
        return [(cells[0]["name"], run_cell(sweep_dir, cells[0]))]
    logs = []
    try:
        from telapa.continual.batch import SeedBatch
        from telapa.jaxcache import enable_persistent_cache

        enable_persistent_cache()
        imports, tracking = _runtime(cells)
        entries = []
        for cell in cells:
            run_dir = cell_dir(sweep_dir, cell["name"])
            run_dir.clear_unstarted()  # a start that died before its manifest
            entries.append((_spec(cell, imports), run_dir.path))
            logs.append(open(log_path(sweep_dir, cell["name"]), "a"))  # noqa: SIM115
        batch = SeedBatch.open(entries, [PlainProgress(log, interval_s=_interval())
                                         for log in logs], tracking=tracking)
        metrics = batch.run()
        return [(c["name"], {"ok": True, "metrics": m}) for c, m in zip(cells, metrics,
                                                                         strict=True)]
    except BaseException as err:  # noqa: BLE001 - recorded in the sweep's status
        if isinstance(err, KeyboardInterrupt):
            raise
        failure = _failure(err)
        return [(c["name"], completed(sweep_dir, c["name"]) or failure) for c in cells]
    finally:
        for log in logs:
            log.close()


def completed(sweep_dir: str, name: str) -> dict[str, Any] | None:
    """The result of cell ``name`` if its run is complete (None otherwise)."""
    run_dir = cell_dir(sweep_dir, name)
    try:
        if run_dir.is_complete():
            return {"ok": True, "metrics": run_dir.metrics()}
    except (RunDirError, OSError):
        pass
    return None


def run_cell(sweep_dir: str, cell: dict[str, Any]) -> dict[str, Any]:
    """Runs (or resumes) one cell to the end in this process; returns ``{"ok": True,
    "metrics": ...}`` or ``{"ok": False, "error": ...}`` (never raises)."""
    try:
        from telapa.continual.runner import ContinualRun
        from telapa.jaxcache import enable_persistent_cache

        enable_persistent_cache()
        imports, tracking = _runtime([cell])
        run_dir = cell_dir(sweep_dir, cell["name"])
        with open(log_path(sweep_dir, cell["name"]), "a") as log:
            progress = PlainProgress(log, interval_s=_interval())
            if run_dir.exists():
                run = ContinualRun.resume(run_dir.path, progress, tracking=tracking)
            else:
                run_dir.clear_unstarted()  # a start that died before its manifest
                run = ContinualRun.start(_spec(cell, imports), run_dir.path, progress,
                                         tracking=tracking)
            return {"ok": True, "metrics": run.run()}
    except BaseException as err:  # noqa: BLE001 - recorded in the sweep's status
        if isinstance(err, KeyboardInterrupt):
            raise
        return _failure(err)


__all__ = ["BackendError", "Outcome", "completed", "mark_started", "run_cell", "run_job",
           "thread_env"]
