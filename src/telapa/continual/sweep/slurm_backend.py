"""`SlurmBackend`: a sweep's jobs as the tasks of a Slurm job array, through submitit.

Each job (a cell, or a seed batch: `seed_jobs`) is one task of one array job per round of
the sweep, asking for the sweep's `SlurmOptions` (partition, time limit, CPUs, memory,
GPUs). A task runs `SlurmJob`: `run_job` as any backend's worker does, so a cell resumes
from its checkpoint wherever it stopped before and a cell's results are those of the local
backend.

Stops and requeues (`SlurmJob.__call__`):

- Slurm warns a task ``signal_s`` seconds before its time limit (``--signal=USR2@N``, as
  submitit asks): the run stops at its next phase boundary, its checkpoint committed
  (`telapa.io.stop.PhaseStop`), and the task requeues itself (``scontrol requeue``); when
  Slurm starts it again it resumes there.
- SIGTERM (``scancel``, ``scontrol requeue``, a pre-emption, the time limit itself) stops
  the run at once with its last checkpoint, as ``telapa run`` does; a requeued or
  pre-empted (``PreemptMode=REQUEUE``) task resumes from it. A task that ends otherwise
  without a result (cancelled, timed out, failed, its node lost) fails its unfinished
  cells with its Slurm state, each charged a try (``--retries``), and they run again in
  the next round's array.

The sweep process (the driver) follows its tasks with ``squeue`` (no accounting database
needed) and keeps ``DIR/slurm/jobs.json``: each cell's job id and its latest state, which
`telapa sweep status` shows. A task checks before it starts that its cells are still
queued by the round that submitted it (their ``queued_try``), so that a task left in the
queue by a sweep process that died does not run a cell a later round runs too; the cells'
run directories are locked while they run, as on every backend. Stopping the driver
(Ctrl-C, an error) cancels the tasks that have not ended; their cells resume from their
checkpoints at the next ``telapa sweep``.

Only ``sbatch``, ``squeue``, ``scontrol`` and ``scancel`` are called, and submitit's
``SlurmExecutor``; the sweep directory must be on a filesystem the nodes share, with
telapa installed in the same Python on them (``pip install 'telapa[slurm]'``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from telapa import envvars
from telapa.config import ConfigError
from telapa.continual.sweep.grammar import Cell, SlurmOptions
from telapa.continual.sweep.jobs import (
    BackendError,
    Outcome,
    completed,
    run_job,
    thread_env,
)
from telapa.continual.sweep.layout import read_status
from telapa.io import read_json, write_json_atomic
from telapa.io.stop import PhaseStop, stop_on_signals

SLURM_DIR = "slurm"
"""Under the sweep directory: submitit's folder (each task's pickles and its Slurm output,
``JOBID_log.out``/``.err``) and ``jobs.json``."""
JOBS_FILE = "jobs.json"
WARNING_SIGNAL = signal.SIGUSR2
"""The signal Slurm sends ``signal_s`` before the time limit (submitit's ``--signal``)."""
ACTIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED",
                    "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING",
                    "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "PREEMPTED"})
"""Task states that are not an end: a requeued or pre-empted task comes back (a
``PREEMPTED`` one only with ``PreemptMode=REQUEUE``; `SlurmBackend` gives it
``PREEMPT_SETTLE_S``)."""
PREEMPT_SETTLE_S = 120.0
POLL_ENV = envvars.SLURM_POLL
RESULT_WAIT_ENV = envvars.SLURM_RESULT_WAIT
RESULT_WAIT_S = envvars.DEFAULT_SECONDS[RESULT_WAIT_ENV]
"""How long an ended task's result file may take to appear (a shared filesystem's lag;
``$TELAPA_SLURM_RESULT_WAIT_S`` overrides it): a task that ends without one (cancelled,
failed, timed out) fails its cells only once this has passed."""
REQUEUE_WAIT_S = 120.0
"""How long a task that asked to be requeued waits for Slurm to stop it."""
PING_TIMEOUT_S = 60.0
"""How long ``scontrol ping`` may take before Slurm is taken not to answer
(`unreachable_slurm`)."""


def missing_slurm() -> str | None:
    """What ``--backend slurm`` lacks here, in one line (None: nothing)."""
    lacks = []
    try:  # not imported here: submitit's logger takes the stderr of the moment
        found = importlib.util.find_spec("submitit") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        lacks.append("submitit (pip install 'telapa[slurm]')")
    for program in ("sbatch", "srun", "squeue", "scontrol"):
        if shutil.which(program) is None:
            lacks.append(f"Slurm's {program} on PATH (run on a Slurm login node; Debian: "
                         "apt-get install slurm-client)")
            break
    if not lacks:
        return None
    return "--backend slurm needs " + " and ".join(lacks)


def unreachable_slurm() -> str | None:
    """Why Slurm's commands, although on PATH, cannot be used here, in one line (None:
    they can): ``scontrol ping`` finds no configuration (a machine with the Slurm client
    installed but no cluster: every command ends in ``fatal: Could not establish a
    configuration source``) or no controller that answers. Asked before the sweep
    directory is created, so that a sweep that could not submit anything leaves nothing."""
    try:
        ping = _run(["scontrol", "ping"], timeout=PING_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return (f"--backend slurm: Slurm does not answer here (`scontrol ping` still "
                f"waiting after {PING_TIMEOUT_S:.0f} s)")
    except OSError as err:
        return f"--backend slurm: cannot run `scontrol ping`: {err.strerror or err}"
    up = " is UP" in ping.stdout
    if ping.returncode == 0 or up:
        return None
    said = _last_line(ping.stderr) or _last_line(ping.stdout) or f"exit status {ping.returncode}"
    return (f"--backend slurm: Slurm does not answer here (`scontrol ping`: {said}); run on "
            "a login node of the cluster, or point SLURM_CONF at its slurm.conf")


def _last_line(text: str) -> str:
    """The last non-empty line of a command's output: Slurm's commands end with the one
    that says what went wrong (``sbatch: fatal: ...``), after the errors that led to it."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


class SubmissionError(BackendError):
    """Slurm refused a round's jobs (``sbatch`` failed): nothing of the round was
    submitted, so nothing of it runs. One line: the jobs and ``sbatch``'s own message."""


def _run(argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def task_states(ids: list[str]) -> dict[str, str] | None:
    """Each listed task's state from ``squeue`` (ids as ``ARRAYID_TASK`` or a plain job
    id); a task Slurm no longer knows (``MinJobAge`` after it ended) is left out. None
    when ``squeue`` could not say (slurmctld not answering)."""
    masters = sorted({i.split("_")[0] for i in ids})
    states: dict[str, str] = {}

    def ask(jobs: list[str]) -> bool | None:
        try:
            done = _run(["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T", "-j", ",".join(jobs)])
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return False if "Invalid job id" in done.stderr else None
        for line in done.stdout.splitlines():
            task, _, state = line.strip().partition("|")
            states[task] = state.split()[0] if state.strip() else "UNKNOWN"
        return True

    if masters and not (answer := ask(masters)):
        if answer is None:
            return None
        for master in masters:  # one of them unknown: each alone
            if ask([master]) is None:
                return None
    return {i: states[i] for i in ids if i in states}


def read_jobs(sweep_dir: str | Path) -> dict[str, dict[str, Any]]:
    """``DIR/slurm/jobs.json``: cell name -> ``{"job": id, "state": latest state}``."""
    path = Path(sweep_dir) / SLURM_DIR / JOBS_FILE
    if not path.is_file():
        return {}
    try:
        data = read_json(path, "Slurm jobs")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class SlurmJob:
    """What a task of the array runs (pickled by submitit): the cells of one job to the
    end, `run_job`, with the stops a scheduler asks for (see the module)."""

    def __init__(self, *, sweep_dir: str, cells: list[dict[str, Any]],
                 tokens: dict[str, Any]):
        self.sweep_dir = sweep_dir
        self.cells = cells
        self.tokens = tokens
        """Each cell's ``queued_try`` when the task was submitted."""

    def __call__(self) -> list[Outcome]:
        job = _task_id()  # ARRAY_TASK: the array's own id would requeue every task of it
        print(f"telapa: task {job} (job {os.environ.get('SLURM_JOB_ID', '?')}, restart "
              f"{os.environ.get('SLURM_RESTART_COUNT', '0')}) runs "
              f"{', '.join(c['name'] for c in self.cells)}", flush=True)
        stale = [c["name"] for c in self.cells
                 if read_status(self.sweep_dir, c["name"]).get("queued_try")
                 != self.tokens.get(c["name"])]
        if stale:  # a later round of the sweep queued them again: not this task's
            print(f"telapa: not running {', '.join(stale)}: queued again since", flush=True)
            return [(c["name"], {"ok": False, "error": "queued again by a later round of the "
                                 "sweep; this task ran nothing"}) for c in self.cells]
        with stop_on_signals(boundary_signals=(WARNING_SIGNAL,)):
            try:
                return run_job(self.sweep_dir, self.cells)
            except PhaseStop:
                print("telapa: stopped at a phase boundary before the time limit; requeueing",
                      flush=True)
                requeue = _run(["scontrol", "requeue", job]) if job != "?" else None
                if requeue is not None and requeue.returncode == 0:
                    time.sleep(REQUEUE_WAIT_S)  # Slurm stops it (SIGTERM) meanwhile
                    error = (f"stopped before the time limit and requeued job {job}, but "
                             f"Slurm did not stop it within {REQUEUE_WAIT_S:.0f} s")
                else:
                    error = (f"stopped before the time limit but could not requeue job "
                             f"{job}: {requeue.stderr.strip() if requeue else 'not in Slurm'}")
                return [(c["name"], completed(self.sweep_dir, c["name"])
                         or {"ok": False, "error": error}) for c in self.cells]


def _task_id() -> str:
    """This task's id as Slurm's commands take it: ``ARRAYID_TASK`` in an array (the
    array's id alone names all its tasks), else the job id; ``?`` outside Slurm."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID", "?")


class SlurmBackend:
    """Each job a task of a Slurm job array (submitit's ``SlurmExecutor``) asking for
    ``options``; see the module. ``on_event`` receives its progress lines (submissions,
    state changes). `ConfigError` at once when submitit or Slurm is missing
    (`missing_slurm`) or Slurm does not answer (`unreachable_slurm`): before the sweep
    directory is created."""

    def __init__(self, *, options: SlurmOptions, poll_s: float | None = None,
                 on_event: Callable[[str], None] = lambda text: None):
        if (lacks := missing_slurm() or unreachable_slurm()) is not None:
            raise ConfigError(lacks)
        self.options = options
        self.poll_s = poll_s if poll_s is not None else envvars.seconds(POLL_ENV)
        """Seconds between two ``squeue`` calls (``$TELAPA_SLURM_POLL_S``, default 5)."""
        self.result_wait_s = envvars.seconds(RESULT_WAIT_ENV)
        """`RESULT_WAIT_S`, or ``$TELAPA_SLURM_RESULT_WAIT_S``."""
        self.on_event = on_event
        asked = [f"partition {options.partition}" if options.partition else "default partition",
                 f"{options.cpus} CPU(s)"]
        if options.minutes is not None:
            asked.append(f"{options.minutes} min")
        if options.memory is not None:
            asked.append(f"mem {options.memory}")
        if options.gpus:
            asked.append(f"{options.gpus} GPU(s)")
        self.describe = f"slurm ({', '.join(asked)} per job)"

    def _executor(self, folder: Path, name: str):
        import submitit

        o = self.options
        executor = submitit.SlurmExecutor(folder=folder / "%j", max_num_timeout=0)
        parameters: dict[str, Any] = {
            "job_name": f"telapa-{name}", "cpus_per_task": o.cpus, "ntasks_per_node": 1,
            "signal_delay_s": o.signal_s, "array_parallelism": o.parallel,
            "additional_parameters": {"requeue": True},
            "setup": [f"export {k}={shlex.quote(v)}" for k, v in thread_env(o.cpus).items()]}
        parameters["time"] = o.minutes  # None: the partition's (submitit's default is 5)
        for key, value in (("partition", o.partition), ("mem", o.memory),
                           ("account", o.account), ("qos", o.qos)):
            if value is not None:
                parameters[key] = value
        if o.gpus:
            parameters["gpus_per_node"] = o.gpus
        executor.update_parameters(**parameters)
        return executor

    def run(self, sweep_dir: Path, jobs: list[list[Cell]]) -> Iterator[Outcome]:
        if not jobs:
            return
        sweep_dir = Path(sweep_dir).resolve()
        folder = sweep_dir / SLURM_DIR
        folder.mkdir(exist_ok=True)
        name = sweep_dir.name
        executor = self._executor(folder, name)
        calls = [SlurmJob(sweep_dir=str(sweep_dir), cells=[c.work() for c in job],
                          tokens={c.name: read_status(sweep_dir, c.name).get("queued_try")
                                  for c in job}) for job in jobs]
        submitted = self._submit(executor, folder, calls)
        tasks = {str(s.job_id): (s, job) for s, job in zip(submitted, jobs, strict=True)}
        record = read_jobs(sweep_dir)
        for task, (_, job) in tasks.items():
            for cell in job:
                record[cell.name] = {"job": task, "state": "PENDING"}
        self._save(sweep_dir, record)
        first = next(iter(tasks))
        self.on_event(f"submitted {len(tasks)} job(s) to Slurm as "
                      + (f"array job {first.split('_')[0]}" if "_" in first else f"job {first}")
                      + f"; their output in {folder}")
        pending = dict(tasks)
        ended_at: dict[str, float] = {}
        try:
            while pending:
                states = task_states(list(pending))
                changed = False
                for task, (submission, job) in list(pending.items()):
                    state = None if states is None else states.get(task, "GONE")
                    if state is not None and record[job[0].name]["state"] != state:
                        for cell in job:
                            record[cell.name] = {"job": task, "state": state}
                        changed = True
                        self.on_event(f"job {task} ({', '.join(c.name for c in job)}): "
                                      f"{state.lower()}")
                    outcomes = self._outcomes(sweep_dir, submission, job, state, ended_at,
                                              task, self.result_wait_s)
                    if outcomes is not None:
                        del pending[task]
                        if state in ACTIVE or state is None:  # its result came first
                            for cell in job:
                                record[cell.name] = {"job": task, "state": "COMPLETED"}
                            changed = True
                        yield from outcomes
                if changed:
                    self._save(sweep_dir, record)
                if pending:
                    time.sleep(self.poll_s)
        finally:
            left = list(pending)
            if left:
                self.on_event(f"cancelling {len(left)} Slurm job(s) not ended: "
                              f"{', '.join(left)}")
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    _run(["scancel", *left])
            self._save(sweep_dir, record)

    @staticmethod
    def _submit(executor, folder: Path, calls: list[SlurmJob]) -> list[Any]:
        """Submits ``calls`` as one array (submitit's batch). A refused submission (Slurm
        unreachable since the check in `__init__`, a partition or account it rejects) is
        a `SubmissionError` naming ``sbatch``'s message, with the files submitit wrote for
        it removed (their pickles, the batch script); submitit's own print of sbatch's
        errors is held back, so that the one line says it."""
        from submitit.core.utils import FailedJobError, FailedSubmissionError

        before = set(os.listdir(folder))
        held = io.StringIO()
        try:
            with contextlib.redirect_stderr(held), executor.batch():
                return [executor.submit(call) for call in calls]
        except (FailedJobError, FailedSubmissionError, OSError) as err:
            for name in set(os.listdir(folder)) - before:
                if name.endswith(".pkl") or name.startswith(".submission_file_"):
                    with contextlib.suppress(OSError):
                        (folder / name).unlink()
            text = str(err).strip()  # FailedJobError: sbatch's stderr, whole
            said = (_last_line(text) if isinstance(err, FailedJobError)
                    else text.splitlines()[0] if text else "") \
                or _last_line(held.getvalue()) or type(err).__name__
            raise SubmissionError(f"submitting {len(calls)} job(s) to Slurm failed: "
                                  f"{said}") from None

    @staticmethod
    def _outcomes(sweep_dir: Path, submission, job: list[Cell], state: str | None,
                  ended_at: dict[str, float], task: str, result_wait_s: float
                  ) -> list[Outcome] | None:
        """The job's outcomes once its task has ended (None while it has not): its result,
        or, without one after ``result_wait_s`` (a pre-empted task: `PREEMPT_SETTLE_S`),
        each cell failed with the task's state unless its run is complete."""
        result = submission.paths.result_pickle
        if result.exists():
            return SlurmBackend._read_result(result, job, task)
        if state is None or (state in ACTIVE and state != "PREEMPTED"):
            ended_at.pop(task, None)
            return None
        since = ended_at.setdefault(task, time.monotonic())
        wait = PREEMPT_SETTLE_S if state == "PREEMPTED" else result_wait_s
        if time.monotonic() - since < wait:
            return None
        if result.exists():
            return SlurmBackend._read_result(result, job, task)
        shown = "no longer known to Slurm" if state == "GONE" else state
        error = (f"Slurm job {task} ended {shown} without a result (its run keeps its last "
                 f"checkpoint; Slurm's output: {submission.paths.stderr})")
        return [(cell.name, completed(str(sweep_dir), cell.name)
                 or {"ok": False, "error": error}) for cell in job]

    @staticmethod
    def _read_result(path: Path, job: list[Cell], task: str) -> list[Outcome]:
        from submitit.core.utils import pickle_load

        try:
            kind, value = pickle_load(path)
        except Exception as err:  # noqa: BLE001 - a damaged file: the task's failure
            kind, value = "error", f"{type(err).__name__}: {err}"
        if kind == "success":
            return list(value)
        lines = [line for line in str(value).strip().splitlines() if line.strip()]
        error = f"Slurm job {task} failed: {lines[-1] if lines else value}"
        return [(cell.name, {"ok": False, "error": error, "traceback": str(value)})
                for cell in job]

    @staticmethod
    def _save(sweep_dir: Path, record: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            write_json_atomic(sweep_dir / SLURM_DIR / JOBS_FILE, record)


__all__ = ["ACTIVE", "JOBS_FILE", "POLL_ENV", "RESULT_WAIT_ENV", "SLURM_DIR", "SlurmBackend",
           "SlurmJob", "SubmissionError", "missing_slurm", "read_jobs", "task_states",
           "unreachable_slurm"]
