"""The run directory: what a continual run writes, and its checkpoints.

    RUN_DIR/
      run.json            spec (curriculum, method, seed, preset, overrides, imports)
                          and status
      config.yaml         the resolved `RunConfig`
      curriculum.yaml     the resolved `Curriculum`
      visits.csv          one row per visit (pre/post SR and return, steps, wall time)
      curve.csv           every evaluation (step 0 = pre-evaluation) with global steps
      final.csv           the end-of-sequence evaluation of every task
      train/NN-TAG.csv    PPO iteration metrics of each finished visit
      accounting.json     compute and memory (paper App. "Compute and Memory Overhead")
      method_log.json     the method's decisions (TeLAPA: transfers with every probed
                          candidate, illuminations, maintenance updates)
      elites.csv          method tables (TeLAPA: every archived elite, no weights)
      metrics.json        the run's metrics (written when it completes)
      tb/                 TensorBoard events (`telapa.continual.tracking`): SR curves,
                          PPO losses, phase times, method decisions (archive sizes)
      tracking.json       the W&B / MLflow runs it logs to (``telapa run --track``)
      checkpoint.json     names the latest complete checkpoint and the one before it
      ckpt-NNNNNN/        state.json (phase, records), learner.npz (PPO state),
                          train_state.npz (after a chunk: the visit's `TrainState`),
                          method-PART.npz, train.csv (the current visit's iterations),
                          definition.json (what defines the run: run.json's method,
                          seed, curriculum, preset and overrides, config.yaml,
                          curriculum.yaml), files.json (the SHA-256 of each of these)
      .lock               held (``flock``) by the one process working on the run

A checkpoint directory is complete before ``checkpoint.json`` names it (written
atomically), so a kill at any moment leaves the previous checkpoint usable; leftovers
of an interrupted write are removed on the next commit. The two newest checkpoints are
kept: when the newest is unreadable, damaged or gone (a folder or file deleted),
`checkpoints` still offers the previous one, and any other sealed one. They share no
file (a part of the method state that did not change is copied, after its SHA-256 is
checked, not hard-linked), and ``files.json`` seals each checkpoint, so a damaged or
missing file is found (`verify_checkpoint`) and never takes the previous checkpoint with
it. Each checkpoint also holds what defines the run (``definition.json``); a resume
refuses a run whose run.json, config.yaml or curriculum.yaml were edited since
(`resume_from`).

`RunDir` is the one owner of this layout, checkpoints included: no other code names a
file inside a run directory. The runner writes through it (`create`, `write_tables`,
`save_checkpoint`, ...), and `analysis`, `report`, `continual.results` and the sweeps read
through its typed readers (`spec`, `tables`, `accounting`, `method_log`, `elites`,
`metrics`, `checkpoint_state`, `load_checkpoint`), which check what they read (every
table against the run's curriculum) and name the file that is wrong.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
import yaml

from telapa.io import (
    atomic_open,
    load_pytree,
    read_json,
    save_pytree,
    write_json_atomic,
    write_table_atomic,
)
from telapa.io.atomic import broken_link

RUN_FORMAT = "telapa-run"
RUN_VERSION = 1
_CKPT = re.compile(r"^ckpt-(\d{6})$")
LOCK_NAME = ".lock"
TB_DIR = "tb"
"""TensorBoard event files of a run (``telapa train`` and continual runs)."""
POLICIES_DIR = "policies"
"""The start and end parameters of every visit (`RunDir.policy_path`)."""
TRACKING_FILE = "tracking.json"
"""The external tracked runs (W&B run id, MLflow run id) a run logs to, kept so that a
resumed run goes on logging to the same tracked run."""
MLFLOW_DIR = "mlruns"
"""The local MLflow store of a run tracked without ``MLFLOW_TRACKING_URI``."""
MANIFEST = "run.json"
POINTER = "checkpoint.json"
CKPT_STATE = "state.json"
CKPT_LEARNER = "learner.npz"
CKPT_TRAIN_STATE = "train_state.npz"
CKPT_TRAIN_ROWS = "train.csv"
CKPT_DEFINITION = "definition.json"
"""In each checkpoint: what defines the run that wrote it (`RunDir.definition`), checked
when the run is resumed (`RunDir.resume_from`)."""
DEFINING_KEYS = ("curriculum", "method", "seed", "preset", "overrides", "backend")
"""The keys of ``run.json`` that say what a run is. Its status and code versions change
as it runs and is resumed (with newer code too), and its ``imports`` name where plug-in
code lives, which may move as code does."""
RESULT_FILES = ("run.json", "config.yaml", "curriculum.yaml", "visits.csv", "curve.csv",
                "final.csv", "metrics.json", "accounting.json", "method_log.json", "elites.csv")
"""The files of a finished run that ``telapa report`` and ``telapa metrics`` read (never
checkpoints or per-update training logs): what a sweep export keeps (`result_files`)."""

VISIT_COLUMNS = [
    "visit", "tag", "task", "env_id", "cycle", "budget", "pre_sr", "pre_return", "post_sr",
    "post_return", "train_steps", "start_global_step", "end_global_step",
]
CURVE_COLUMNS = ["visit", "tag", "task", "step", "global_step", "sr", "mean_return"]
FINAL_COLUMNS = ["task", "env_id", "sr", "mean_return"]
TABLE_COLUMNS = {"visits": VISIT_COLUMNS, "curve": CURVE_COLUMNS, "final": FINAL_COLUMNS}
SEAL_NAME = "files.json"
"""In each checkpoint: the SHA-256 of every other file of it (`RunDir.commit_checkpoint`)."""


class _Damaged(Exception):
    """A file's content is not the one its seal records."""


def _flat(data: Any, prefix: str = "") -> dict[str, str]:
    """``data`` as dotted key -> its value as JSON text (a mapping's leaves)."""
    if isinstance(data, dict) and data:
        return {k: v for key, value in data.items()
                for k, v in _flat(value, f"{prefix}{key}.").items()}
    return {prefix[:-1]: json.dumps(data, sort_keys=True)}


def _edits(recorded: dict[str, Any], current: dict[str, Any]
           ) -> dict[str, dict[str, tuple[str, str]]]:
    """File -> dotted key -> (recorded, current) JSON text, for every value of a run's
    definition (`RunDir.definition`) that differs; "absent" for a key one side lacks."""
    edits = {}
    for name in current:
        old, new = _flat(recorded.get(name)), _flat(current[name])
        changed = {key: (old.get(key, "absent"), new.get(key, "absent"))
                   for key in dict.fromkeys([*old, *new]) if old.get(key) != new.get(key)}
        if changed:
            edits[name] = changed
    return edits


def _sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            hasher.update(chunk)
    return hasher.hexdigest()


ELITE_REQUIRED = ("task", "archive_tag", "slot", "elite_id", "parent_id", "visit", "fitness",
                  "sr", "sigma", "lineage", "embedding_version", "d_min")
"""Leading columns of ``elites.csv`` (`telapa.qd.export.ELITE_COLUMNS`), then d_0.."""


def _flock_exclusive(handle: IO[str], tries: int = 5, wait_s: float = 0.02) -> None:
    """``flock(LOCK_EX | LOCK_NB)``, tried again a few times over ~0.1 s: a reader's
    probe (`RunDir.is_locked`) holds a shared lock for a moment and is not a holder."""
    for attempt in range(tries):
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as err:
            if err.errno not in (errno.EAGAIN, errno.EACCES) or attempt == tries - 1:
                raise
            time.sleep(wait_s)


class RunDirError(ValueError):
    """A run directory is missing, foreign, corrupt, locked or already used."""


class RunEdited(RunDirError):
    """A run's defining files (run.json, config.yaml, curriculum.yaml) were edited after
    its checkpoint was written: it cannot be resumed (`RunDir.resume_from`)."""


def claim_new_dir(path: str | Path, *, what: str = "run directory",
                  resume_hint: str | None = None) -> Path:
    """Creates ``path`` (and its parents) for a new run, or accepts it if it is an empty
    directory. Refuses, naming ``path``, a file, a non-empty directory (nothing a user has
    is overwritten) and a place that cannot be written. ``resume_hint`` is added to the
    message when the directory already holds a run (``run.json``)."""
    path = Path(path)
    if (link := broken_link(path)) is not None:
        raise RunDirError(f"cannot use {what} {path}: {link}; remove the link or choose "
                          "another --out")
    if path.exists() and not path.is_dir():
        raise RunDirError(f"{what} {path} exists and is not a directory; choose another --out")
    if path.is_dir():
        try:
            entries = sorted(e.name for e in os.scandir(path))
        except OSError as err:
            raise RunDirError(f"cannot read {what} {path}: {err.strerror}") from None
        if entries and resume_hint and MANIFEST in entries:
            raise RunDirError(f"{path} already holds a run; {resume_hint} or choose another "
                              "--out")
        if entries:
            hint = ""
            shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
            raise RunDirError(f"{what} {path} is not empty (holds {shown}); choose another "
                              f"--out{hint}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test.{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise RunDirError(f"cannot write {what} {path}: {err.strerror or err}") from None
    return path


def write_manifest(path: Path, data: dict[str, Any]) -> None:
    """Writes ``data`` as the manifest (`MANIFEST`, ``run.json``) of the directory
    ``path`` atomically: what ``telapa train`` records of a training run (a continual
    run's manifest is `RunDir.create`'s)."""
    write_json_atomic(Path(path) / MANIFEST, data)


class RunDir:
    """Paths, atomic writes, typed reads and the lock of one run directory."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock_file: IO[str] | None = None
        self._saved_parts: dict[str, tuple[Any, Path]] = {}
        """Method state parts of the last checkpoint written (see `save_checkpoint`)."""
        self._last: Path | None = None
        """The checkpoint this run goes on from: the last one committed, or the one it was
        resumed from (`resume_from`); the next commit keeps it as ``previous``."""
        self._definition: dict[str, Any] | None = None
        """What defines the run (`definition`), recorded in every checkpoint written; set
        when the run is created or resumed (`resume_from`)."""

    # --- spec -----------------------------------------------------------------------

    def create(self, spec: dict[str, Any], *, config: dict[str, Any],
               curriculum: dict[str, Any]) -> None:
        """Starts a new run here with the manifest ``spec`` and the resolved ``config``
        and ``curriculum`` (plain mappings, written as YAML). ``path`` must not exist or be
        an empty directory (a directory holding a run is refused with how to resume it;
        any other non-empty one, a file, or an unwritable place is refused too). Takes
        the lock."""
        claim_new_dir(self.path, resume_hint=f"resume it with `telapa run --resume "
                                             f"{self.path}`")
        self.lock()
        (self.path / "config.yaml").write_text(dump_yaml(config))
        (self.path / "curriculum.yaml").write_text(dump_yaml(curriculum))
        write_json_atomic(self.path / MANIFEST, {"format": RUN_FORMAT, "version": RUN_VERSION,
                                                 **spec, "status": "running"})
        self._definition = self.definition()

    def exists(self) -> bool:
        """Whether a run was started here (its manifest is written; it may be unreadable)."""
        return (self.path / MANIFEST).exists()

    def is_complete(self) -> bool:
        """Whether a readable manifest here says the run is complete."""
        try:
            return self.spec().get("status") == "complete"
        except RunDirError:
            return False

    def clear_unstarted(self) -> bool:
        """Removes this directory when it holds no run manifest (what a start that died
        before writing it leaves); True if it removed one. A started run is kept."""
        if self.path.is_dir() and not self.exists():
            shutil.rmtree(self.path)
            return True
        return False

    def spec(self) -> dict[str, Any]:
        if not self.path.is_dir():
            raise RunDirError(f"run directory {self.path} does not exist")
        manifest = self.path / MANIFEST
        try:
            spec = read_json(manifest, "run manifest")
        except (FileNotFoundError, ValueError) as err:
            raise RunDirError(str(err)) from None
        if not isinstance(spec, dict) or spec.get("format") != RUN_FORMAT:
            raise RunDirError(f"{manifest} is not a telapa run manifest")
        if spec.get("version") != RUN_VERSION:
            raise RunDirError(
                f"{manifest}: run format version {spec.get('version')} is not "
                f"supported (expected {RUN_VERSION})"
            )
        return spec

    def complete_spec(self) -> dict[str, Any]:
        """`spec` of a finished run; `RunDirError` (with how to finish it) otherwise."""
        spec = self.spec()
        if spec.get("status") != "complete":
            raise RunDirError(
                f"{self.path} is not complete (status {spec.get('status')!r}); finish it with "
                f"`telapa run --resume {self.path}`"
            )
        return spec

    def set_status(self, status: str, **extra: Any) -> None:
        spec = self.spec()
        spec.update(status=status, **extra)
        write_json_atomic(self.path / MANIFEST, spec)

    def import_plugins(self) -> tuple[str, ...]:
        """Imports the modules the run was started with (``run.json`` ``imports``, from
        ``--import``), so that its plug-in methods, env families and env ids are known
        before its curriculum and settings are read; returns them. `RunDirError` names
        the run and a module that cannot be imported."""
        from telapa.plugins import PluginError, import_modules

        names = self.spec().get("imports") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise RunDirError(f"{self.path / MANIFEST}: 'imports' is not a list of module "
                              "names")
        try:
            return import_modules(names, source=f"{self.path} (run.json imports)")
        except PluginError as err:
            raise RunDirError(str(err)) from None

    def _import_recorded(self) -> None:
        """`import_plugins` when there is a readable manifest (a missing or damaged one
        is for the readers of the manifest to report)."""
        try:
            self.spec()
        except RunDirError:
            return
        self.import_plugins()

    def _yaml(self, name: str) -> Any:
        from telapa.config import ConfigError, read_yaml

        try:
            return read_yaml(self.path / name, "run")
        except ConfigError as err:
            raise RunDirError(str(err)) from None

    def curriculum(self):
        """The run's resolved `Curriculum` (``curriculum.yaml``)."""
        from telapa.config import ConfigError
        from telapa.continual.curriculum import parse_curriculum

        self._import_recorded()
        try:
            return parse_curriculum(self._yaml("curriculum.yaml"),
                                    str(self.path / "curriculum.yaml"))
        except ConfigError as err:
            raise RunDirError(str(err)) from None

    def config(self):
        """The run's resolved `RunConfig` (``config.yaml``)."""
        from telapa.config import ConfigError
        from telapa.continual.preset import parse_run_config

        self._import_recorded()
        try:
            return parse_run_config(self._yaml("config.yaml"), str(self.path / "config.yaml"))
        except ConfigError as err:
            raise RunDirError(str(err)) from None

    def config_data(self) -> dict[str, Any]:
        """``config.yaml`` as a plain mapping (for grouping runs by their settings)."""
        data = self._yaml("config.yaml")
        if not isinstance(data, dict):
            raise RunDirError(f"{self.path / 'config.yaml'} is not a mapping")
        return data

    # --- the lock -------------------------------------------------------------------

    def lock(self) -> None:
        """Takes the exclusive lock of this run directory for this process (released by
        `unlock` or when the process ends, whatever the way: the kernel drops an
        ``flock`` of a dead process, so a lock file left behind is taken over).
        `RunDirError` names the holder (pid, host) when another process has it."""
        if self._lock_file is not None:
            return
        target = self.path / LOCK_NAME
        try:
            handle = open(target, "a+")  # noqa: SIM115 - held until unlock
        except OSError as err:
            raise RunDirError(f"cannot lock run directory {self.path}: {err.strerror}") from None
        try:
            _flock_exclusive(handle)
        except OSError as err:
            if err.errno not in (errno.EAGAIN, errno.EACCES):
                handle.close()
                raise RunDirError(f"cannot lock run directory {self.path}: {err}") from None
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise RunDirError(
                f"run directory {self.path} is in use by {holder} ({target} is locked); wait "
                "for it to finish or stop it first"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        self._lock_file = handle

    def unlock(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    @contextmanager
    def locked(self) -> Iterator[RunDir]:
        self.lock()
        try:
            yield self
        finally:
            self.unlock()

    # --- tables ---------------------------------------------------------------------

    def table_path(self, name: str) -> Path:
        """Where the table ``name`` (``visits``, ``curve``, ``final``, a method table such
        as ``elites``) is: ``NAME.csv``."""
        return self.path / f"{name}.csv"

    def write_tables(self, tables: dict[str, pd.DataFrame]) -> None:
        for name, frame in tables.items():
            write_table_atomic(self.table_path(name), frame)

    def read_table(self, name: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """``NAME.csv`` with its columns checked (``columns``, by default all of a run
        table's); `RunDirError` names a missing, empty or unparsable file."""
        path = self.table_path(name)
        if not path.is_file():
            raise RunDirError(f"{path} is missing (incomplete run?)")
        try:
            frame = pd.read_csv(path)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as err:
            raise RunDirError(f"{path} is not a readable CSV table: {err}") from None
        needed = TABLE_COLUMNS.get(name, ()) if columns is None else columns
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise RunDirError(f"{path} is missing column(s) {missing}; it has "
                              f"{list(frame.columns)} (truncated or foreign?)")
        check_values(frame, path)
        return frame

    def tables(self) -> dict[str, pd.DataFrame]:
        """visits, curve and final of a finished run, each checked against the run's
        curriculum and config: one visits row per visit of the sequence (tags in order,
        no missing values), one curve row per evaluation (pre-evaluation plus one per
        chunk of ``eval_every`` steps), one final row per task. `RunDirError` names the
        file that does not match (a truncated or edited table)."""
        curriculum, config = self.curriculum(), self.config()
        visits = curriculum.visits()
        t = {name: self.read_table(name) for name in ("visits", "curve", "final")}
        path = self.table_path("visits")
        tags = [v.tag for v in visits]
        got = [str(x) for x in t["visits"]["tag"]]
        if got != tags:
            raise RunDirError(f"{path} has visits {got}, the run's curriculum "
                              f"{curriculum.name!r} has {tags} (truncated?)")
        if t["visits"][VISIT_COLUMNS].isna().any().any():
            raise RunDirError(f"{path} has missing values (truncated?)")
        path = self.table_path("curve")
        counts = t["curve"].groupby("visit").size().to_dict()
        for v in visits:
            budget = v.steps or config.steps_per_visit
            expected = 1 + math.ceil(budget / config.eval_every)
            if counts.get(v.index, 0) != expected:
                raise RunDirError(
                    f"{path} has {counts.get(v.index, 0)} evaluations of visit {v.index} "
                    f"({v.tag}), expected {expected} (truncated?)")
        if t["curve"][CURVE_COLUMNS].isna().any().any():
            raise RunDirError(f"{path} has missing values (truncated?)")
        path = self.table_path("final")
        tasks = list(curriculum.task_ids())
        if [str(x) for x in t["final"]["task"]] != tasks or t["final"][FINAL_COLUMNS].isna(
                ).any().any():
            raise RunDirError(f"{path} does not hold one complete row per task {tasks} "
                              "(truncated?)")
        return t

    def visit_train_path(self, visit: int, tag: str) -> Path:
        """``train/NN-TAG.csv``: the PPO training log of visit ``visit`` (tag ``tag``, a
        prime written ``p``), one row per update."""
        return self.path / "train" / f"{visit:02d}-{tag.replace(chr(39), 'p')}.csv"

    def write_visit_train(self, visit: int, tag: str, frame: pd.DataFrame) -> None:
        path = self.visit_train_path(visit, tag)
        path.parent.mkdir(exist_ok=True)
        write_table_atomic(path, frame)

    def read_visit_train(self, visit: int, tag: str) -> pd.DataFrame:
        """The training log `write_visit_train` wrote (`FileNotFoundError` if none)."""
        return pd.read_csv(self.visit_train_path(visit, tag))

    # --- the policies of the visits -------------------------------------------------

    def policy_path(self, visit: int, when: str = "end") -> Path:
        """``policies/NN-start.npz`` / ``NN-end.npz``: the parameters visit ``visit``
        started from (the method's chosen initialisation) and ended with. One network
        each (tens of kB for MiniGrid, a few hundred for MuJoCo), what ``telapa play
        --visit`` and the report's clips play."""
        if when not in ("start", "end"):
            raise ValueError(f"when must be 'start' or 'end', got {when!r}")
        return self.path / POLICIES_DIR / f"{visit:02d}-{when}.npz"

    def save_policy(self, visit: int, params: Any, when: str = "end") -> None:
        """Writes ``params`` (a parameter tree) as `policy_path` atomically."""
        path = self.policy_path(visit, when)
        path.parent.mkdir(exist_ok=True)
        save_pytree(path, params)

    def load_policy(self, visit: int, like: Any, when: str = "end") -> Any:
        """The parameters `save_policy` wrote, in the structure of ``like``; `RunDirError`
        when the run kept none (runs made before runs kept their policies)."""
        path = self.policy_path(visit, when)
        if not path.is_file():
            raise RunDirError(f"{path} does not exist: this run kept no policy of visit "
                              f"{visit} (runs keep them from telapa 0.1 on; play its final "
                              "policy instead)")
        return load_pytree(path, like)

    # --- json records ---------------------------------------------------------------

    def _json(self, name: str, what: str) -> Any:
        try:
            return read_json(self.path / name, what)
        except (FileNotFoundError, ValueError) as err:
            raise RunDirError(str(err)) from None

    def accounting(self) -> dict[str, Any]:
        """``accounting.json``: compute and memory of the run (see `ContinualRun`)."""
        data = self._json("accounting.json", "accounting")
        needed = ("wall_s", "extra_env_steps", "peak_rss_bytes", "method_state_bytes",
                  "run_dir_bytes")
        if not isinstance(data, dict) or any(k not in data for k in needed):
            raise RunDirError(f"{self.path / 'accounting.json'} lacks one of {list(needed)}")
        for key in needed:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                    math.isfinite(value) and value >= 0):
                raise RunDirError(f"{self.path / 'accounting.json'}: {key} is {value!r}, not "
                                  "a non-negative number")
        return data

    def write_accounting(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.path / "accounting.json", data)

    @property
    def method_log_path(self) -> Path:
        return self.path / "method_log.json"

    def method_log(self) -> list[dict[str, Any]]:
        """``method_log.json``: the method's decisions, a list of event objects."""
        log = self._json(self.method_log_path.name, "method log")
        if not isinstance(log, list) or not all(isinstance(e, dict) and "event" in e
                                                for e in log):
            raise RunDirError(f"{self.method_log_path} must hold a JSON list of "
                              "event objects")
        return log

    def write_method_log(self, log: list[dict[str, Any]]) -> None:
        write_json_atomic(self.method_log_path, log)

    def metrics(self) -> dict[str, Any]:
        return self._json("metrics.json", "metrics")

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        write_json_atomic(self.path / "metrics.json", metrics)

    def has_elites(self) -> bool:
        """Whether the run keeps policy archives and has written them (``elites.csv``)."""
        return self.table_path("elites").is_file()

    def elites(self) -> pd.DataFrame:
        """``elites.csv``: every archived elite; `RunDirError` names a truncated file."""
        frame = self.read_table("elites", ELITE_REQUIRED)
        path = self.table_path("elites")
        descriptor = [c for c in frame.columns if re.fullmatch(r"d_\d+", c)]
        if not descriptor:
            raise RunDirError(f"{path} has no descriptor columns d_0.. (truncated?)")
        if frame[["task", "visit", "elite_id", *descriptor]].isna().any().any():
            raise RunDirError(f"{path} has missing values (truncated?)")
        return frame

    def result_files(self) -> list[Path]:
        """The `RESULT_FILES` this run has, in that order (what a sweep export copies)."""
        return [self.path / name for name in RESULT_FILES if (self.path / name).is_file()]

    # --- checkpoints ----------------------------------------------------------------

    def _pointer(self) -> dict[str, Any] | None:
        pointer = self.path / POINTER
        if not pointer.exists():
            return None
        try:
            data = read_json(pointer, "checkpoint pointer")
            names = [data["latest"], data.get("previous")]
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise RunDirError(f"{pointer} is corrupt: {err}") from None
        if not _CKPT.match(str(names[0])) or not (names[1] is None
                                                  or _CKPT.match(str(names[1]))):
            raise RunDirError(f"{pointer} is corrupt: it names {names}, not checkpoints")
        return data

    def checkpoints(self) -> list[Path]:
        """The checkpoints a resume tries, newest first: the two ``checkpoint.json`` names
        (latest, then previous), then any other sealed checkpoint folder (one whose commit
        was cut short, or one left over); without a readable ``checkpoint.json``, the
        sealed folders alone. A named one may be gone or incomplete (its folder, its
        ``state.json`` or another file deleted) or damaged: `verify_checkpoint` tells, and
        a resume falls back to the next one."""
        try:
            data = self._pointer()
        except RunDirError:  # a damaged pointer: the sealed checkpoints, newest first
            sealed = self._sealed_checkpoints()
            if not sealed:
                raise
            return sealed
        named = [] if data is None else [self.path / name for name in (
            data["latest"], data.get("previous")) if name is not None]
        return named + [p for p in self._sealed_checkpoints() if p not in named]

    def _sealed_checkpoints(self) -> list[Path]:
        """Checkpoint folders with a seal (complete: the seal is written last), newest
        first (none when the run directory is not there yet)."""
        if not self.path.is_dir():
            return []
        found = [p for p in self.path.iterdir() if _CKPT.match(p.name)
                 and (p / SEAL_NAME).is_file() and (p / CKPT_STATE).is_file()]
        return sorted(found, key=lambda p: p.name, reverse=True)

    def latest_checkpoint(self) -> Path | None:
        """The newest checkpoint that looks complete (its ``state.json`` is there; not
        verified): what `checkpoint_state` reads by default."""
        return next((p for p in self.checkpoints() if (p / CKPT_STATE).is_file()), None)

    def new_checkpoint(self) -> Path:
        """An empty directory for the next checkpoint, numbered after every checkpoint
        folder there is and every one ``checkpoint.json`` names (a name is never used
        twice, so a folder the pointer names is never rewritten)."""
        names = [p.name for p in self.path.iterdir() if _CKPT.match(p.name)]
        data = self._pointer_or_none()
        if data is not None:
            names += [n for n in (data["latest"], data.get("previous")) if n is not None]
        seq = 1 + max((int(_CKPT.match(n).group(1)) for n in names), default=-1)
        folder = self.path / f"ckpt-{seq:06d}"
        folder.mkdir()
        return folder

    def _pointer_or_none(self) -> dict[str, Any] | None:
        """`_pointer`, None when it is damaged (the sealed folders stand for it)."""
        try:
            return self._pointer()
        except RunDirError:
            return None

    def commit_checkpoint(self, folder: Path) -> None:
        """Makes ``folder`` the latest checkpoint, keeps the one this run went on from (the
        last one it committed, or the one it resumed from: `resume_from`) as ``previous``
        and removes every other one (a newer one that could not be read, leftovers of an
        interrupted write). The checkpoint's files are sealed first: ``files.json``
        records each one's SHA-256 (`verify_checkpoint`)."""
        previous = self._last
        write_json_atomic(folder / SEAL_NAME, {
            f.name: _sha256(f) for f in sorted(folder.iterdir())
            if f.is_file() and f.name != SEAL_NAME and not f.name.startswith(".")})
        keep = {folder.name} | ({previous.name} if previous is not None else set())
        write_json_atomic(self.path / POINTER, {
            "latest": folder.name, "previous": previous.name if previous is not None else None})
        self._last = folder
        for other in self.path.iterdir():
            if _CKPT.match(other.name) and other.name not in keep:
                shutil.rmtree(other, ignore_errors=True)

    # --- what defines a run (checked when it is resumed) -----------------------------

    def definition(self) -> dict[str, Any]:
        """What the run is, as its files say: the `DEFINING_KEYS` of ``run.json``, and
        ``config.yaml`` and ``curriculum.yaml`` as read (JSON values)."""
        spec = self.spec()
        data = {MANIFEST: {key: spec.get(key) for key in DEFINING_KEYS},
                "config.yaml": self._yaml("config.yaml"),
                "curriculum.yaml": self._yaml("curriculum.yaml")}
        return json.loads(json.dumps(data))

    def resume_from(self, folder: Path | None) -> None:
        """Makes the checkpoint ``folder`` (None: there is none yet) the one this run goes
        on from: its next commit keeps it as ``previous``. First, `RunEdited` unless the
        run's files still define the run ``folder`` was written by (its
        ``definition.json``): an edited method, seed, setting or curriculum would
        continue into a mixed run. A checkpoint written before definitions were kept is
        not checked. Either way the definition is recorded in the checkpoints written
        from now on."""
        current = self.definition()
        path = None if folder is None else folder / CKPT_DEFINITION
        if path is not None and path.exists():
            try:
                recorded = read_json(path, "checkpoint definition")
            except ValueError as err:
                raise RunDirError(str(err)) from None
            edits = _edits(recorded, current) if isinstance(recorded, dict) else {}
            if edits:
                changes = "; ".join(
                    f"{name}: " + ", ".join(f"{key} is {new} (its checkpoint {folder.name} "
                                            f"was written with {old})"
                                            for key, (old, new) in list(keys.items())[:3])
                    + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
                    for name, keys in edits.items())
                raise RunEdited(
                    f"{self.path} was edited after the run started: {changes}. A run cannot "
                    "change what it is; restore the file to resume it, or start a new run "
                    "with these settings in another directory (`telapa run ... --out "
                    "NEW_DIR`, with --set KEY=VALUE for a setting)")
        self._definition = current
        self._last = folder

    # --- what a sweep asks of a cell's run directory (reads only) ---------------------

    def is_locked(self) -> bool:
        """Whether another process holds this run directory's lock. Writes nothing: no
        lock file is created, and a read-only run directory is read correctly (a shared
        lock is tried and dropped at once; `lock` retries over such a probe)."""
        try:
            handle = open(self.path / LOCK_NAME, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return False
        except OSError as err:
            raise RunDirError(f"cannot read the lock of {self.path}: {err.strerror}") from None
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno in (errno.EAGAIN, errno.EACCES):
                    return True
                raise RunDirError(f"cannot read the lock of {self.path}: {err}") from None
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False

    def checkpoint_state(self, folder: Path | None = None) -> dict[str, Any] | None:
        """``state.json`` of checkpoint ``folder`` (default: the latest; None when there
        is none yet): ``next_phase``, ``phases``, ``wall_s``, the records, ... `RunDirError`
        names the file when it is unreadable or not a checkpoint state."""
        folder = self.latest_checkpoint() if folder is None else folder
        if folder is None:
            return None
        path = folder / "state.json"
        try:
            state = read_json(path, "checkpoint state")
        except (FileNotFoundError, ValueError) as err:
            raise RunDirError(str(err)) from None
        if not isinstance(state, dict) or any(k not in state for k in ("phases", "next_phase")):
            raise RunDirError(f"{path} is not a checkpoint state")
        return state

    def verify_checkpoint(self, folder: Path) -> None:
        """`RunDirError` naming what makes checkpoint ``folder`` unusable: the folder or its
        ``state.json`` missing, or the first file missing or differing from its SHA-256
        in ``files.json``. A checkpoint written before seals were kept passes (it has no
        ``files.json``, nor a ``definition.json``, which came later: one with a
        definition and no seal lost its seal)."""
        seal = folder / SEAL_NAME
        if not folder.is_dir():
            raise RunDirError(f"{folder} is missing")
        if not (folder / CKPT_STATE).is_file():
            raise RunDirError(f"{folder / CKPT_STATE} is missing (an incomplete checkpoint)")
        if not seal.exists():
            if (folder / CKPT_DEFINITION).exists():
                raise RunDirError(f"{seal} is missing (an incomplete checkpoint)")
            return
        try:
            digests = read_json(seal, "checkpoint seal")
        except ValueError as err:
            raise RunDirError(str(err)) from None
        if not isinstance(digests, dict):
            raise RunDirError(f"{seal} is not a checkpoint seal")
        for name, digest in digests.items():
            path = folder / str(name)
            if not path.is_file():
                raise RunDirError(f"{path} is missing from its checkpoint")
            if _sha256(path) != digest:
                raise RunDirError(f"{path} is damaged (its SHA-256 differs from {seal})")

    def copy_intact(self, source: Path, target: Path) -> bool:
        """Copies ``source``, a file of a sealed checkpoint, to ``target`` if it is intact
        (its SHA-256 is the one its seal records); False, with nothing written, when it
        is not or cannot be told. Two checkpoints never share a file (a damaged file
        would take both), and a damaged one is never carried forward."""
        seal = source.parent / SEAL_NAME
        try:
            digest = read_json(seal, "checkpoint seal").get(source.name)
        except (OSError, ValueError, AttributeError):
            return False
        if digest is None:
            return False
        hasher = hashlib.sha256()
        try:
            with source.open("rb") as src, atomic_open(target) as dst:
                while chunk := src.read(1 << 20):
                    hasher.update(chunk)
                    dst.write(chunk)
                if hasher.hexdigest() != digest:
                    raise _Damaged
        except (_Damaged, FileNotFoundError):
            return False
        return True

    def save_checkpoint(self, state: dict[str, Any], *, learner: Any,
                        method: dict[str, Any], train_state: Any = None,
                        train_rows: list[dict[str, Any]]) -> Path:
        """Writes a new checkpoint and commits it (`commit_checkpoint`); returns its folder.

        ``state`` (JSON: at least ``phases``, ``next_phase`` and ``records``) goes to
        ``state.json``, written last, so a folder with it is complete; ``learner`` (the
        carried `PPOState`) to ``learner.npz``; ``train_state`` (the visit's `TrainState`
        after a chunk; None: not saved) to ``train_state.npz``; each part of the
        ``method`` state to ``method-PART.npz``; ``train_rows`` (the current visit's PPO
        iterations; none: not saved) to ``train.csv``; what defines the run (once it is
        created or resumed: `resume_from`) to ``definition.json``. A method part that is
        the same object as at the previous checkpoint this `RunDir` wrote is copied from
        there if that file is intact (`copy_intact`; never hard-linked: two checkpoints
        share no file), else written again."""
        folder = self.new_checkpoint()
        if train_state is not None:
            save_pytree(folder / CKPT_TRAIN_STATE, train_state)
        save_pytree(folder / CKPT_LEARNER, learner)
        saved = {}
        for name, tree in method.items():
            target = folder / f"method-{name}.npz"
            previous = self._saved_parts.get(name)
            if not (previous is not None and previous[0] is tree
                    and self.copy_intact(previous[1], target)):
                save_pytree(target, tree)
            saved[name] = (tree, target)
        self._saved_parts = saved
        if train_rows:
            pd.DataFrame(train_rows).to_csv(folder / CKPT_TRAIN_ROWS, index=False)
        if self._definition is not None:
            write_json_atomic(folder / CKPT_DEFINITION, self._definition)
        write_json_atomic(folder / CKPT_STATE, state)
        self.commit_checkpoint(folder)
        return folder

    def load_checkpoint(self, folder: Path, *, learner: Any, method: dict[str, Any]
                        ) -> tuple[Any, dict[str, Any]]:
        """(learner, method state) of the checkpoint ``folder``, read into the structure
        of the templates ``learner`` and ``method`` (one per part) with
        `telapa.io.load_pytree`; `CheckpointError` names a file that does not match."""
        parts = {name: load_pytree(folder / f"method-{name}.npz", like)
                 for name, like in method.items()}
        return load_pytree(folder / CKPT_LEARNER, learner), parts

    def checkpoint_train_state(self, folder: Path, like: Any) -> Any:
        """The visit's `TrainState` saved with the checkpoint ``folder`` (after a chunk),
        in the structure of ``like``; None when it holds none."""
        path = folder / CKPT_TRAIN_STATE
        return load_pytree(path, like) if path.exists() else None

    def checkpoint_train_rows(self, folder: Path) -> list[dict[str, Any]]:
        """The current visit's PPO iteration rows saved with the checkpoint ``folder``."""
        path = folder / CKPT_TRAIN_ROWS
        return pd.read_csv(path).to_dict("records") if path.exists() else []

    def learner_file(self, folder: Path | None = None) -> Path:
        """The file holding the carried `PPOState` of the checkpoint ``folder`` (default:
        the latest one); `RunDirError` when the run has no checkpoint."""
        if folder is None:
            folder = self.latest_checkpoint()
            if folder is None:
                raise RunDirError(f"{self.path} has no checkpoint")
        return folder / CKPT_LEARNER


# --- the values of a run's tables (checked whenever `RunDir.read_table` reads one) -------

COLUMN_KINDS = {
    "visit": "count", "cycle": "count", "budget": "count", "train_steps": "count",
    "start_global_step": "count", "end_global_step": "count", "step": "count",
    "global_step": "count", "pre_sr": "rate", "post_sr": "rate", "sr": "rate",
    "pre_return": "real", "post_return": "real", "mean_return": "real",
}
"""What each numeric column of the run tables (and ``elites.csv``'s ``visit`` and ``sr``)
holds: ``count`` a non-negative integer, ``rate`` a success rate in [0, 1], ``real`` a
finite number. An empty cell (a visit still in progress) is allowed."""
_KIND_TEXT = {"count": "a non-negative integer", "rate": "a success rate in [0, 1]",
              "real": "a finite number"}


def check_values(frame: pd.DataFrame, path: Path) -> None:
    """`RunDirError` naming the file, line, column and value of the first cell of
    ``frame`` (read from ``path``) that is not what its column holds (`COLUMN_KINDS`)."""
    for column in frame.columns:
        kind = COLUMN_KINDS.get(column)
        if kind is None:
            continue
        raw = frame[column]
        given = raw.notna().to_numpy()
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            if kind == "count":
                ok = (values >= 0) & (values == np.floor(values))
            elif kind == "rate":
                ok = (values >= 0) & (values <= 1)
            else:
                ok = np.isfinite(values)
        bad = np.flatnonzero(given & ~ok)
        if bad.size:
            row = int(bad[0])
            value = str(raw.iloc[row])
            raise RunDirError(f"{path}, line {row + 2}, column {column}: {value!r} is not "
                              f"{_KIND_TEXT[kind]}")


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False)
