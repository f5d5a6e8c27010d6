"""``telapa sweep``: every cell of a sweep file, on local processes, a Ray cluster or Slurm.

    telapa sweep FILE --out DIR [--workers N] [--threads T] [--retries R]
                 [--backend local|ray|slurm] [--address ADDR] [--batch-seeds]
                 [--partition P] [--time LIMIT] [--cpus N] [--mem M] [--gpus G]
                 [--account A] [--qos Q]
                 [--seeds-per-batch [METHOD=]N ...] [--export DEST] [--until WHEN]
                 [--set KEY=VALUE ...] [--import MODULE ...] [--track wandb|mlflow]
    telapa sweep status DIR
    telapa sweep export DIR DEST

Re-running the same command resumes the sweep: finished cells are skipped, partial ones
resume from their checkpoints, failed ones are tried again (Ctrl-C, exit 130, and
SIGTERM, 143, stop it in one line that says so); with ``--export DEST``, cells
DEST already holds are not run again even when DIR is new (a study resumed from its
committed results on another machine). ``--seeds-per-batch N`` splits each seed batch into
batches of at most N seeds, ``--seeds-per-batch METHOD=N`` (repeatable) those of one
method (a TeLAPA seed costs about twice a Finetune seed), e.g. so that each batch ends
within a working session; it implies ``--batch-seeds``. ``--until WHEN`` (a duration
such as ``2h30m``, or an ISO time with its offset; local workers) starts a job only if it
is expected to end by then, the longest that fits first, and stops with exit status 75
when the jobs left fit no more (`telapa.continual.sweep.deadline`). ``--set KEY=VALUE``
(repeatable) adds an override for every cell over the file's ``overrides``; the sweep
directory records the cells' settings, so re-running it with another ``--set`` is
refused. ``--import MODULE`` (repeatable) imports the user's module before the sweep file
is read, and in every worker before its cells (local processes and Ray tasks alike);
each cell's ``run.json`` records it. ``--track wandb`` / ``--track mlflow`` log every
cell to its own tracked run, grouped by curriculum and method (TensorBoard events are
always written to each cell's run directory). ``telapa metrics DIR`` and ``telapa
report DIR`` score a sweep directory's finished cells.

``--backend slurm`` submits each job (a cell, or a seed batch) as a task of a Slurm job
array through submitit (`telapa.continual.sweep.slurm_backend`), asking for the sweep
file's ``slurm`` section with ``--partition``, ``--time``, ``--cpus``, ``--mem``,
``--gpus``, ``--account`` and ``--qos`` over it; ``telapa sweep status DIR`` then shows
each cell's Slurm job and its state.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from telapa.cli.common import (
    CLIError,
    add_import_option,
    add_set_option,
    add_track_options,
    int_in,
    log_line,
    stdout_console,
    tracking_of,
)
from telapa.cli.run import Interrupted, Terminated
from telapa.config import ConfigError
from telapa.continual.rundir import RunDirError
from telapa.io.stop import Terminate, stop_on_signals

if TYPE_CHECKING:
    from telapa.continual.sweep.status import CellEstimate

MAX_WORKERS = 1024
"""Bound of ``--workers`` and ``--threads`` (each worker is a process, each thread a core)."""
MAX_SEEDS = 10_000
"""Bound of ``--seeds-per-batch`` (a sweep's seed bound)."""
MAX_RETRIES = 100
"""Bound of ``--retries``."""
SLURM_FLAGS = ("partition", "time", "cpus", "mem", "gpus", "account", "qos")
"""``--backend slurm``'s options: the keys of a sweep file's ``slurm`` section."""


def _cmd_sweep(ns: argparse.Namespace) -> None:
    if ns.args[0] == "status":
        if len(ns.args) != 2:
            raise CLIError("usage: telapa sweep status DIR")
        _status(Path(ns.args[1]))
        return
    if ns.args[0] == "export":
        if len(ns.args) != 3:
            raise CLIError("usage: telapa sweep export DIR DEST")
        _export(Path(ns.args[1]), Path(ns.args[2]))
        return
    if len(ns.args) != 1 or _misspelt_command(ns.args[0]):
        raise CLIError(_usage_error(ns.args))
    if ns.out is None:
        raise CLIError("--out DIR is required")
    tracking = tracking_of(ns)
    until = _until(ns.until, ns.backend)
    from telapa.continual.sweep import LocalBackend, RayBackend, load_sweep, run_sweep
    from telapa.continual.sweep.jobs import BackendError
    from telapa.overrides import parse_sets

    try:
        sweep = load_sweep(ns.args[0], parse_sets(ns.sets or []))
    except ConfigError as err:
        raise CLIError(str(err)) from None
    given = {k: getattr(ns, k) for k in SLURM_FLAGS if getattr(ns, k) is not None}
    if ns.backend != "slurm" and given:
        raise CLIError(f"--{next(iter(given))} needs --backend slurm")
    if ns.backend != "ray" and ns.address:
        raise CLIError("--address needs --backend ray")
    if ns.backend == "ray":
        backend = RayBackend(ns.address, threads=ns.threads or 1)
    elif ns.backend == "slurm":
        backend = _slurm_backend(ns, sweep, given)
    else:
        backend = LocalBackend(ns.workers, ns.threads)
    batch_seeds = _seeds_per_batch(ns.seeds_per_batch or []) or ns.batch_seeds
    # Ctrl-C and SIGTERM (a scheduler's stop, ``kill``) both unwind the sweep: the backend
    # stops its workers (each run at its last checkpoint) or cancels its Slurm jobs, the
    # sweep's lock is released, and the same line says how to resume, as `telapa run`'s
    with stop_on_signals():
        try:
            counts = run_sweep(sweep, ns.out, backend, retries=ns.retries,
                               batch_seeds=batch_seeds, export=ns.export, on_event=log_line,
                               imports=ns.imports or (), tracking=tracking, until=until)
        except (RunDirError, ConfigError, BackendError) as err:
            raise CLIError(str(err)) from None
        except Terminate:
            raise Terminated(f"terminated (SIGTERM); run the same command again to resume "
                             f"{ns.out}") from None
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted; run the same command again to resume "
                              f"{ns.out}") from None
    summary = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    stdout_console().print(f"sweep {sweep.name}: {summary} -> {ns.out}", markup=False)
    if counts["failed"]:
        raise CLIError(f"{counts['failed']} cell(s) failed; `telapa sweep status {ns.out}` "
                       "shows their errors; run the same command again to retry them")
    if until is not None and (left := counts["left"] + counts["partial"]):
        raise UntilReached(f"--until {ns.until}: {left} cell(s) left that would not end "
                           "in time; run the same command again with a later --until to "
                           "go on")


class UntilReached(CLIError):
    """``--until``: the sweep stopped with cells left that would not end by its deadline
    (exit status 75, sysexits' EX_TEMPFAIL: the same command later goes on)."""

    status = 75


def _until(text: str | None, backend: str) -> float | None:
    """``--until``'s deadline (seconds since the epoch), checked before any work."""
    if text is None:
        return None
    if backend != "local":
        raise CLIError(f"--until needs --backend local (a {backend} sweep hands its jobs to "
                       "the cluster at once" + ("; give each job --time instead)"
                                                if backend == "slurm" else ")"))
    import time

    from telapa.continual.sweep.deadline import parse_until

    try:
        return parse_until(text, now=time.time())
    except ValueError as err:
        raise CLIError(f"--until: {err}") from None


COMMANDS = ("status", "export")
"""The words ``telapa sweep`` takes in place of a sweep file."""
USAGE = ("telapa sweep FILE --out DIR, telapa sweep status DIR or telapa sweep export DIR "
         "DEST")


def _misspelt_command(first: str) -> bool:
    """Whether ``first``, given alone where a sweep file goes, is no file but a word close
    to one of `COMMANDS` (``telapa sweep statsu``: not "--out DIR is required")."""
    import difflib

    return not Path(first).exists() and bool(difflib.get_close_matches(first, COMMANDS, n=1))


def _usage_error(args: list[str]) -> str:
    """The one line for arguments that are neither a sweep file alone nor a command of
    `COMMANDS` with its arguments: it names the word that is wrong and, as the other
    commands' parsers do, the command spelt like it ("did you mean 'status'?")."""
    import difflib

    first, rest = args[0], args[1:]
    close = difflib.get_close_matches(first, COMMANDS, n=1)
    if close:
        return f"unknown sweep command {first!r}; did you mean {close[0]!r}? (usage: {USAGE})"
    if Path(first).exists():
        return f"a sweep file takes no other arguments: {' '.join(rest)} (usage: {USAGE})"
    return (f"{first!r} is not a sweep command ({', '.join(COMMANDS)}), and a sweep file "
            f"takes no other arguments (usage: {USAGE})")


def _slurm_backend(ns: argparse.Namespace, sweep, given: dict):
    """The `SlurmBackend` for the sweep file's ``slurm`` section with the command line's
    options over it, each validated (an error names the option); refused where submitit
    or Slurm is missing or Slurm does not answer (`unreachable_slurm`: its client
    installed with no cluster configured), before anything is written."""
    from telapa.config import validate
    from telapa.continual.sweep import SlurmBackend, SlurmOptions

    if ns.threads is not None:
        raise CLIError("--threads: with --backend slurm a job's threads are its CPUs; give "
                       "--cpus N (or cpus in the sweep file's slurm section)")
    try:
        validate(SlurmOptions, given, "the command line (--backend slurm)")
    except ConfigError as err:
        raise CLIError(str(err).replace("invalid value for '", "invalid value for '--")) \
            from None
    base = sweep.file.slurm.model_dump(exclude_unset=True) if sweep.file.slurm else {}
    try:
        return SlurmBackend(options=SlurmOptions(**{**base, **given}), on_event=log_line)
    except ConfigError as err:
        raise CLIError(str(err)) from None


def _seeds_per_batch(values: list[str]) -> int | dict[str, int] | None:
    """``--seeds-per-batch`` values ("N" for every method, "METHOD=N" for one) as
    `run_sweep`'s ``batch_seeds``: an int, or a mapping (its "*": the plain N)."""
    sizes: dict[str, int] = {}
    parse = int_in(1, MAX_SEEDS)
    for value in values:
        method, _, count = value.rpartition("=")
        key = method or "*"
        if key in sizes:
            raise CLIError(f"--seeds-per-batch: {value!r} repeats "
                           f"{'the plain count' if key == '*' else repr(method)}")
        try:
            sizes[key] = parse(count)
        except argparse.ArgumentTypeError as err:
            raise CLIError(f"--seeds-per-batch {value}: {err}") from None
    if not sizes:
        return None
    return sizes["*"] if list(sizes) == ["*"] else sizes


def _export(sweep_dir: Path, dest: Path) -> None:
    from telapa.continual.sweep import export_sweep

    try:
        summary = export_sweep(sweep_dir, dest)
    except (RunDirError, ValueError, OSError) as err:
        raise CLIError(str(err)) from None
    stdout_console().print(
        f"exported {len(summary.added)} new cell(s) to {dest} ({len(summary.kept)} already "
        f"there, {len(summary.left)} not done yet; {summary.bytes / 1e6:.2f} MB)",
        markup=False)


def _status(path: Path) -> None:
    try:
        _print_status(path)
    except (RunDirError, ValueError) as err:  # a status or lock file that cannot be read
        raise CLIError(str(err)) from None


def _print_status(path: Path) -> None:
    from telapa.continual.sweep import (
        EXPORT_STATES,
        STATES,
        cell_estimates,
        cell_state,
        cell_times,
        exported_cell_state,
        stored_sweep,
        time_left,
        tries_ended,
    )
    from telapa.continual.sweep.status import format_duration

    if not path.exists():
        raise CLIError(f"sweep directory {path} does not exist")
    data = stored_sweep(path)
    if data is None:
        raise CLIError(f"{path} is not a sweep directory (no cells.json)")
    cells = data["cells"]
    export = "exported_from" in data
    table = Table(title=f"sweep {path}" + (" (an export)" if export else ""))
    slurm = {} if export else _slurm_jobs(path)
    for name in ("cell", "state", "progress", "wall", *(() if export else ("left",)),
                 "attempts", *(("slurm job",) if slurm else ()), "last error"):
        table.add_column(name, overflow="fold")
    counts = dict.fromkeys(EXPORT_STATES if export else STATES, 0)
    times, unreadable = cell_times(path, cells)
    estimates = {} if export else cell_estimates(path, cells, times=times)
    left_cells, lost = [], []
    for cell in cells:
        state, status = cell_state(path, cell["name"])
        attempts = tries_ended(state, status)
        problem = ""
        if export:  # an export holds done cells only: any other is lost, not left
            state, problem = exported_cell_state(path, cell["name"])
            if state != "done":
                lost.append(cell["name"])
        elif state != "done":
            left_cells.append(cell["name"])
        counts[state] += 1
        errors = status.get("errors") or []
        spent = times[cell["name"]]
        if cell["name"] in unreadable:  # files there but unreadable: "?", not "not started"
            progress = wall = "?"
        else:  # a finished cell's CellTime reads "complete"
            progress = spent.progress if spent else ""
            wall = format_duration(spent.wall_s) if spent else ""
        job = slurm.get(cell["name"], "")
        left = () if export else (
            "?" if cell["name"] in unreadable else _left(estimates.get(cell["name"]), state),)
        table.add_row(cell["name"], state, progress, wall, *left, str(attempts),
                      *((job,) if slurm else ()),
                      problem or (errors[-1]["error"] if errors else ""))
    console = stdout_console()
    console.print(table)
    if export:
        _print_export_counts(data, counts, lost)
        return
    console.print(", ".join(f"{n} {state}" for state, n in counts.items()), markup=False)
    for error in unreadable.values():
        console.print(f"progress unknown (shown as ?): {error}", markup=False, soft_wrap=True)
    if left_cells:
        estimate = time_left(path, cells, times=times)
        if set(left_cells) <= set(estimate.unknown):  # their sum, 0 s, would read "done"
            console.print(f"cell time left: not estimated yet (the {len(left_cells)} "
                          "cell(s) left have no progress to go by, and nothing like them "
                          "has finished)", markup=False, soft_wrap=True)
            return
        notes = ["cells one after another: divide by the workers that run them"]
        if estimate.other_curricula:
            scaled = ", ".join(f"{name} x{factor:.2f}"
                               for name, factor in sorted(estimate.scales.items()))
            unscaled = ", ".join(sorted(estimate.unscaled))
            notes.append(f"{len(estimate.other_curricula)} cell(s) counted at their method's "
                         "pace per visit on other curricula" + (
                             f", scaled by their curriculum's cost measured on the methods "
                             f"that ran there too ({scaled})" if scaled else "") + (
                             ", each phase of their work by that phase's cost there where "
                             "the runs record their phases "
                             f"({', '.join(sorted(estimate.phase_scaled))})"
                             if estimate.phase_scaled else "") + (
                             f"{';' if scaled else ','} not scaled where no method has "
                             f"finished there and elsewhere yet ({unscaled}: x1, however "
                             f"{'its' if len(estimate.unscaled) == 1 else 'their'} tasks "
                             "differ in cost)" if unscaled else ""))
        if estimate.other_settings:
            notes.append(f"{len(estimate.other_settings)} cell(s) counted at the mean of "
                         "their method's cells on their curriculum under other settings")
        if estimate.other_methods:
            notes.append(f"{len(estimate.other_methods)} cell(s) of methods none of whose "
                         "cells has finished counted at the mean of the other methods' cells")
        if estimate.unknown:
            notes.append(f"{len(estimate.unknown)} cell(s) not estimated: nothing like them "
                         "has finished")
        console.print(f"about {format_duration(estimate.seconds)} of cell time left at the pace "
                      f"so far ({'; '.join(notes)})", markup=False, soft_wrap=True)


ESTIMATED_BY = {"started": "started", "same": "seeds", "other_curricula": "per visit",
                "other_settings": "other settings", "other_methods": "other methods"}
"""How the ``left`` column of `telapa sweep status` names the rule of
`telapa.continual.sweep.status.cell_estimates` behind a cell's estimate: its own pace
and its kind's time (``started``), its other seeds', its method's pace per visit on other
curricula, its method's cells under other settings, other methods' cells."""


def _left(estimate: CellEstimate | None, state: str) -> str:
    """A cell's wall clock still to go, as the ``left`` column writes it: the estimate
    and its rule (``2.4 h, started``), blank for a done cell or one not estimated."""
    from telapa.continual.sweep.status import format_duration

    if state == "done" or estimate is None or not math.isfinite(estimate.seconds):
        return ""
    return f"{format_duration(estimate.seconds)}, {ESTIMATED_BY[estimate.rule]}"


def _print_export_counts(data: dict, counts: dict[str, int], lost: list[str]) -> None:
    """`telapa sweep status` of an export (`export_sweep`): how many of its sweep's cells
    it holds (``of_cells``, the sweep's count), that the rest are not exported, and the
    cells it lists but has lost (missing or damaged: not work left). No cell time left
    is estimated: the cells not exported are not here to go by (the sweep's own
    directory, ``exported_from``, is)."""
    console = stdout_console()
    held = len(data["cells"])
    of = data.get("of_cells")
    of = of if isinstance(of, int) and not isinstance(of, bool) and of >= held else None
    line = (f"{held} of {of} cells exported" if of is not None else
            f"{held} cells exported (the export does not record its sweep's count)")
    if held and counts["done"] == held:
        line += ", all done"
    elif held:
        line += ": " + ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    if of is not None and of > held:
        line += f"; {of - held} not exported"
    console.print(line, markup=False, soft_wrap=True)
    if lost:
        console.print(f"damaged export: it lists {len(lost)} cell(s) it does not hold whole "
                      f"({', '.join(lost)}; see the last error column): restore them from "
                      "where the export was copied from (e.g. version control), or export "
                      "the sweep afresh into a new place", markup=False, soft_wrap=True)
    if of is not None and of > held:
        console.print(f"cell time left: not estimated from an export (its sweep's other "
                      f"{of - held} cell(s) are not in it); `telapa sweep status` of the "
                      f"sweep directory it was exported from ({data['exported_from']}) "
                      "estimates it", markup=False, soft_wrap=True)


def _slurm_jobs(path: Path) -> dict[str, str]:
    """Each cell's Slurm job and its state (``--backend slurm``): ``squeue``'s, where it
    answers, else the state the sweep last recorded (marked "last seen")."""
    from telapa.continual.sweep.slurm_backend import read_jobs, task_states

    jobs = read_jobs(path)
    if not jobs:
        return {}
    live = None
    import shutil

    if shutil.which("squeue"):
        live = task_states(sorted({j["job"] for j in jobs.values() if "job" in j}))
    shown = {}
    for name, job in jobs.items():
        task = job.get("job", "?")
        if live is not None and task in live:
            shown[name] = f"{task} {live[task]}"
        else:
            shown[name] = f"{task} {job.get('state', '?')} (last seen)"
    return shown


def add_parser(sub: argparse._SubParsersAction) -> None:
    sweep = sub.add_parser("sweep", help="run a sweep file's cells (local processes, Ray or "
                                         "Slurm); "
                                         "`telapa sweep status DIR` shows progress; `telapa sweep "
                                         "export DIR DEST` copies finished cells' results")
    sweep.add_argument("args", nargs="+", metavar="FILE | status DIR | export DIR DEST")
    sweep.add_argument("--out", help="sweep directory (re-running the command resumes it)")
    add_set_option(sweep)
    add_import_option(sweep, recorded="passed to every cell, recorded in each cell's "
                                      "run.json; give it again when the sweep is run again")
    add_track_options(sweep, "one tracked run per cell")
    sweep.add_argument("--backend", choices=["local", "ray", "slurm"], default="local")
    sweep.add_argument("--address", help="Ray cluster address (default: a local Ray instance)")
    sweep.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=1,
                       help=f"local worker processes (default 1, at most {MAX_WORKERS})")
    sweep.add_argument("--threads", type=int_in(1, MAX_WORKERS),
                       help="CPU threads per cell (default: cores / workers; Ray: 1)")
    sweep.add_argument("--retries", type=int_in(0, MAX_RETRIES), default=0,
                       help=f"times a failed cell is tried again (default 0, at most "
                            f"{MAX_RETRIES})")
    sweep.add_argument("--batch-seeds", action="store_true",
                       help="run the seeds of each cell together in one worker (PPO of the "
                            "seeds as one vmapped batch on the jax backend)")
    sweep.add_argument("--seeds-per-batch", action="append", metavar="[METHOD=]N",
                       help="at most N seeds per seed batch, of every method or of METHOD "
                            "(repeatable; implies --batch-seeds; default: all the seeds of "
                            "a cell)")
    slurm = sweep.add_argument_group(
        "Slurm (--backend slurm; over the sweep file's slurm section)")
    slurm.add_argument("--partition", help="the partition of every job")
    slurm.add_argument("--time", help="time limit of a job: minutes or [D-]HH:MM:SS (a job "
                                      "reaching it stops at a phase boundary and is requeued)")
    slurm.add_argument("--cpus", type=int, help="CPUs (and threads) of a job (default 1)")
    slurm.add_argument("--mem", help="memory of a job: megabytes, or e.g. 4G")
    slurm.add_argument("--gpus", type=int, help="GPUs of a job (default 0)")
    slurm.add_argument("--account", help="the account charged")
    slurm.add_argument("--qos", help="the quality of service")
    sweep.add_argument("--until", metavar="WHEN",
                       help="start a job only if it is expected to end by WHEN (a duration "
                            "such as 2h30m, or an ISO time with its offset such as "
                            "2026-12-05T18:20Z), the longest that fits first; exit status 75 "
                            "when the jobs left fit no more (local workers)")
    sweep.add_argument("--export", metavar="DEST",
                       help="export each finished cell's small outputs to DEST as it "
                            "finishes (as `telapa sweep export DIR DEST`)")
    sweep.set_defaults(func=_cmd_sweep)
