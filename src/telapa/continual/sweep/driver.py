"""`run_sweep`: every cell of a sweep that is not done, on a backend, with retries,
status files and (optionally) an export as cells finish."""

from __future__ import annotations

import dataclasses
import json
import secrets
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.sweep.deadline import DeadlineQueue
from telapa.continual.sweep.export import check_export_dest, export_sweep, restore_exported
from telapa.continual.sweep.grammar import Cell, Sweep, check_batch_seeds, seed_jobs
from telapa.continual.sweep.jobs import BackendError
from telapa.continual.sweep.layout import (
    prepare_sweep_dir,
    read_status,
    stored_cells,
    write_status,
)
from telapa.continual.sweep.status import STATES, cell_estimates, cell_state, tries_ended
from telapa.continual.tracking import Tracking


def run_sweep(sweep: Sweep, out: str | Path, backend, *, retries: int = 0,
              batch_seeds: bool | int | Mapping[str, int] = False,
              export: str | Path | None = None,
              on_event: Callable[[str], None] = lambda text: None,
              imports: Sequence[str] = (), tracking: Tracking | None = None,
              until: float | None = None) -> dict[str, int]:
    """Runs every cell of ``sweep`` that is not done under ``out`` on ``backend``; a
    failed cell is tried up to ``retries`` more times (each error recorded in its status
    file). With ``batch_seeds`` the seeds of a cell run as one job, or as jobs of at most
    so many seeds (an int, or one per method: `seed_jobs`). With ``export``, the
    destination is checked before anything is written (`check_export_dest`: a non-empty
    folder that is not this sweep's export is refused before ``out`` is created), the
    done cells are exported there (`export_sweep`) before the first job, and again as
    each job with a done cell ends (a seed batch once every cell of it has recorded its
    end, so that each exported status file says done); an export that fails then is
    reported through ``on_event`` and does not stop the sweep. A cell the export already holds is
    not run again even where ``out`` lacks it (a study resumed on a fresh checkout, whose
    committed results are all that is left of its earlier sessions): it is copied back
    into ``out`` (`restore_exported`), or, where ``out`` has an unfinished run directory
    of it, left so and counted as done.
    ``imports`` (``--import``): modules every worker imports before it reads its cells
    (each cell's ``run.json`` records them); ``tracking`` (``--track``): one tracked run
    per cell, grouped by curriculum and method (`telapa.continual.tracking`).
    ``until`` (``--until``; seconds since the epoch, a backend that takes a `JobQueue`
    only): each job is started only if it is expected to end by then, the longest that
    fits first (`telapa.continual.sweep.deadline`); the jobs left stay for the next call,
    counted ``left`` (or ``partial``) in the counts returned.
    A backend that cannot start a round's jobs at all (`BackendError`: Slurm refused the
    submission) stops the sweep with its one line; when this call created the sweep in
    ``out`` and no job has ended there, ``out`` is removed (an empty directory that was
    there before is left empty; one that held the sweep before is kept).
    Returns the count of cells per state at the end."""
    out = Path(out)
    check_batch_seeds(sweep, batch_seeds)
    if until is not None and not getattr(backend, "takes_queue", False):
        raise ValueError(f"a deadline (--until) needs a backend that starts jobs one at a "
                         f"time (local), not {backend.describe}")
    runtime: dict[str, Any] = {}
    if imports:
        runtime["imports"] = list(dict.fromkeys(imports))
    if tracking is not None and tracking.trackers:
        runtime["tracking"] = {"trackers": list(tracking.trackers),
                               "project": tracking.project}
    if export is not None:  # before the sweep directory or anything else is written
        check_export_dest(out, export, sweep.name,
                          json.loads(json.dumps([c.payload() for c in sweep.cells])))
    existed = out.is_dir()  # empty, if prepare_sweep_dir creates the sweep in it
    created = prepare_sweep_dir(sweep, out)
    lock = RunDir(out)
    try:
        lock.lock()
    except RunDirError as err:
        raise RunDirError(f"sweep {out} is being run by another process: {err}") from None
    ran = False  # whether any job of this command ended (a result, or a failure)
    try:
        exported: set[str] = set()
        if export is not None:
            exported = set(export_sweep(out, export).kept)
            restored = restore_exported(out, export)
            if restored:
                on_event(f"restored {len(restored)} finished cell(s) from {export} into {out}")
        todo, elsewhere = [], []
        for cell in sweep.cells:
            state, status = cell_state(out, cell.name)
            if state == "running":
                raise RunDirError(f"cell {cell.name} of {out} is being run by another process")
            if state == "done" and status.get("state") != "done":  # it finished unrecorded
                write_status(out, cell.name, status | {
                    "state": "done", "attempts": tries_ended(state, status)})
            if state != "done":
                (elsewhere if cell.name in exported else todo).append(cell)
        if elsewhere:
            on_event(f"{len(elsewhere)} cell(s) done in {export} have an unfinished run "
                     f"directory in {out}; not run again")
        on_event(f"{len(sweep.cells) - len(todo)} of {len(sweep.cells)} cells done; running "
                 f"{len(todo)} on {backend.describe}"
                 + (f" in {len(seed_jobs(todo, batch_seeds))} seed batches"
                    if batch_seeds is not False else ""))
        tries = dict.fromkeys((c.name for c in todo), 0)
        while todo:
            token = secrets.token_hex(8)  # this round; a worker copies it when it starts
            for cell in todo:
                write_status(out, cell.name, read_status(out, cell.name)
                             | {"state": "queued", "queued_try": token})
            failed, unstarted, started = [], [], False
            jobs = [[dataclasses.replace(c, runtime=runtime) for c in job]
                    for job in seed_jobs(todo, batch_seeds)]
            job_of = {c.name: i for i, job in enumerate(jobs) for c in job}
            ended = [0] * len(jobs)  # each job's cells whose outcome has come back
            finished: set[int] = set()  # the jobs with a cell done, not yet exported
            for name, result in backend.run(out, _queue(out, jobs, until, on_event)):
                ran = True
                status = read_status(out, name)
                ran = status.get("started_try") == token
                if not result.get("ok") and cell_state(out, name)[0] == "done":
                    # its run ended complete and the worker died before reporting it
                    # (killed in that gap): done, not a failure to try again
                    on_event(f"{name}: its run is complete although its worker reported "
                             f"{result.get('error')!r}; counted done")
                    result = {"ok": True}
                started |= ran
                job = job_of.get(name, -1)
                if job >= 0:
                    ended[job] += 1
                if not result.get("ok") and not ran:  # e.g. its worker died with another cell
                    unstarted.append((name, result))
                else:
                    _record(out, name, status, result, on_event)
                    if not result.get("ok"):
                        tries[name] += 1
                        if tries[name] <= retries:
                            failed.append(sweep.cell(name))
                    else:
                        finished.add(job)
                if export is not None and job in finished and (
                        job < 0 or ended[job] == len(jobs[job])):
                    # once every cell of the job has recorded its end: a seed batch's
                    # cells finish together, and exporting at its first cell's record
                    # copied its partners' status files as they were, "queued"
                    finished.discard(job)
                    _export(out, export, on_event)
            if export is not None and finished:  # a job some of whose outcomes never came
                _export(out, export, on_event)
            for name, result in unstarted:
                if started:  # not charged: queued again for the next round
                    on_event(f"requeued {name}: it had not started ({result.get('error')})")
                    failed.append(sweep.cell(name))
                else:  # nothing started at all: charged, so that the sweep ends
                    _record(out, name, read_status(out, name), result, on_event)
                    tries[name] += 1
                    if tries[name] <= retries:
                        failed.append(sweep.cell(name))
            todo = [c for c in sweep.cells if c in failed]
    except BackendError as err:
        if not created or ran:
            raise BackendError(f"{err}; run the same command again to resume {out}") \
                from None
        # this command's own directory, and nothing ran in it: kept, it would only say
        # that the sweep once failed to start (removed while still locked: no other
        # process takes it up meanwhile)
        shutil.rmtree(out, ignore_errors=True)
        if existed:  # the user's empty directory: left empty, as it was
            out.mkdir(exist_ok=True)
        raise BackendError(f"{err}; nothing ran, and {out} was "
                           + ("left empty" if existed else "removed")) from None
    finally:
        lock.unlock()
    counts = dict.fromkeys(STATES, 0)
    for cell in sweep.cells:
        counts["done" if cell in elsewhere else cell_state(out, cell.name)[0]] += 1
    return counts


def _queue(out: Path, jobs: list[list[Cell]], until: float | None,
           on_event: Callable[[str], None]) -> list[list[Cell]] | DeadlineQueue:
    """A round's jobs as the backend takes them: the list, or under ``until`` a
    `DeadlineQueue` whose estimates are read from ``out`` at each take."""
    if until is None:
        return jobs
    cells = stored_cells(out) or []  # fixed for the sweep; the cells' times are not

    return DeadlineQueue(jobs, until=until, estimates=lambda: cell_estimates(out, cells),
                         on_event=on_event)


def _record(out: Path, name: str, status: dict[str, Any], result: dict[str, Any],
            on_event: Callable[[str], None]) -> None:
    """Writes the end of a try (done, or failed with its error) to the cell's status."""
    status["attempts"] = status.get("attempts", 0) + 1
    if result.get("ok"):
        status.update(state="done", finished=time.time())
        on_event(f"done {name}")
    else:
        status.setdefault("errors", []).append(
            {"attempt": status["attempts"], "error": result.get("error"),
             "traceback": result.get("traceback", ""), "time": time.time()})
        status["state"] = "failed"
        on_event(f"failed {name}: {result.get('error')}")
    write_status(out, name, status)


def _export(out: Path, export: str | Path, on_event: Callable[[str], None]) -> None:
    try:
        added = export_sweep(out, export).added
        if added:  # a batch's first finished cell exports the others too
            on_event(f"exported {', '.join(added)} to {export}")
    except (RunDirError, ValueError, OSError) as err:
        on_event(f"export to {export} failed: {err}")


__all__ = ["run_sweep"]
