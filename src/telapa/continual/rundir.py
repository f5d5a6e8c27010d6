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
      starts.csv          how each finished visit's training began, from its train/ log
                          (`telapa.continual.trainlog`: kept where an export drops train/)
      accounting.json     compute and memory (paper App. "Compute and Memory Overhead")
      method_log.json     the method's decisions (TeLAPA: transfers with every probed
                          candidate, illuminations, maintenance updates)
      elites.csv          method tables (TeLAPA: every archived elite, no weights)
      metrics.json        the run's metrics (written when it completes)
      tb/                 TensorBoard events (`telapa.continual.tracking`): SR curves,
                          PPO losses, phase times, method decisions (archive sizes)
      tracking.json       the W&B / MLflow runs it logs to (``telapa run --track``)
      checkpoint.json     names the latest complete checkpoint and the one before it
      ckpt-NNNNNN/        a checkpoint (`telapa.continual.checkpoints`)
      .lock               held (``flock``) by the one process working on the run
                          (`telapa.continual.runlock`)

`RunDir` is the one owner of this layout: no other code names a file inside a run
directory. It holds its parts: the checkpoints (``run_dir.checkpoints``, a
`telapa.continual.checkpoints.CheckpointStore`), the lock, and the tables' columns and
checks (`telapa.continual.runtables`); `telapa.continual.runformat` records the format
version (run.json ``version``): every version it reads is read, only the current one is
resumed.
The runner writes through it (`create`, `write_tables`, ``checkpoints.save_run``, ...),
and `analysis`, `report`, `report.results` and the sweeps read through its typed
readers (`manifest`, `tables`, `accounting`, `method_log`, `elites`, `metrics`,
``checkpoints.state_json``), which check what they read (every table against the run's
curriculum) and name the file that is wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from telapa.continual.checkpoints import CheckpointStore
from telapa.continual.runformat import (
    MANIFEST,
    READ_VERSIONS,
    RUN_FORMAT,
    RUN_VERSION,
    RunDirError,
    RunImportError,
)
from telapa.continual.runlock import RunLock
from telapa.continual.runtables import (
    ELITE_REQUIRED,
    check_accounting,
    check_elites,
    check_method_log,
    check_run_tables,
    read_table,
    write_tables,
)
from telapa.io import load_pytree, read_json, save_pytree, write_json_atomic, write_table_atomic
from telapa.io.checkpoint import CheckpointError
from telapa.io.destination import destination_problem

TB_DIR = "tb"
"""TensorBoard event files of a run (``telapa train`` and continual runs)."""
POLICIES_DIR = "policies"
POLICY_SEAL = "seal.json"
"""The start and end parameters of every visit (`RunDir.policy_path`)."""
TRACKING_FILE = "tracking.json"
"""The external tracked runs (W&B run id, MLflow run id) a run logs to, kept so that a
resumed run goes on logging to the same tracked run."""
MLFLOW_DIR = "mlruns"
"""The local MLflow store of a run tracked without ``MLFLOW_TRACKING_URI``."""
DEFINING_KEYS = ("curriculum", "method", "seed", "preset", "overrides", "backend")
"""The keys of ``run.json`` that say what a run is. Its status and code versions change
as it runs and is resumed (with newer code too), and its ``imports`` name where plug-in
code lives, which may move as code does."""
RESULT_FILES = ("run.json", "config.yaml", "curriculum.yaml", "visits.csv", "curve.csv",
                "final.csv", "metrics.json", "accounting.json", "method_log.json", "elites.csv",
                "starts.csv")
"""The files of a finished run that ``telapa report`` and ``telapa metrics`` read (never
checkpoints or per-update training logs): what a sweep export keeps (`result_files`)."""


def claim_new_dir(path: str | Path, *, what: str = "run directory",
                  resume_hint: str | None = None) -> Path:
    """Creates ``path`` (and its parents) for a new run, or accepts it if it is an empty
    directory. Refuses, naming ``path``, a file, a non-empty directory (nothing a user has
    is overwritten) and a place that cannot be written. ``resume_hint`` is added to the
    message when the directory already holds a run (``run.json``)."""
    path = Path(path)
    if problem := destination_problem(path, what=what, choose="choose another --out"):
        raise RunDirError(problem)
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


FOLDER_LISTED = 5
"""Runs a folder of runs names when it is given as one run (`_not_a_run`)."""


def _not_a_run(path: Path) -> str | None:
    """What ``path``, a folder without a run manifest, is instead, when it holds runs: a
    folder of runs (``telapa run --seeds --out PATH``'s ``CURRICULUM-METHOD-sS``, a
    sweep's ``cells/``) or a sweep directory; None otherwise."""
    folder = path / "cells" if (path / "cells.json").is_file() else path
    try:
        runs = sorted(p.name for p in folder.iterdir()
                      if not p.is_symlink() and p.is_dir() and (p / MANIFEST).is_file())
    except OSError:
        return None
    if not runs:
        return None
    shown = ", ".join(runs[:FOLDER_LISTED]) + (
        f" and {len(runs) - FOLDER_LISTED} more" if len(runs) > FOLDER_LISTED else "")
    what = ("a sweep directory" if folder != path else "a folder of runs") + \
        f", not a run: it holds {len(runs)} run(s) ({shown}); give one of them, e.g. " \
        f"{folder / runs[0]}"
    return f"{path} is {what}"


class RunDir:
    """Paths, atomic writes, typed reads and the lock of one run directory."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = RunLock(self.path)
        self.checkpoints = CheckpointStore(self)
        """The run's checkpoints (`telapa.continual.checkpoints`)."""

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
        self.checkpoints.start()

    def exists(self) -> bool:
        """Whether a run was started here (its manifest is written; it may be unreadable)."""
        return (self.path / MANIFEST).exists()

    def is_complete(self) -> bool:
        """Whether a readable manifest here says the run is complete."""
        try:
            return self.manifest().get("status") == "complete"
        except RunDirError:
            return False

    def clear_unstarted(self) -> bool:
        """Removes this directory when it holds no run manifest (what a start that died
        before writing it leaves); True if it removed one. A started run is kept."""
        if self.path.is_dir() and not self.exists():
            shutil.rmtree(self.path)
            return True
        return False

    def manifest(self) -> dict[str, Any]:
        """``run.json``: what defines the run (method, seed, curriculum, preset,
        overrides), its status and provenance. `RunDirError` names a missing directory, a
        folder that is not a run, or an unreadable file."""
        if not self.path.is_dir():
            raise RunDirError(f"run directory {self.path} does not exist")
        manifest = self.path / MANIFEST
        try:
            spec = read_json(manifest, "run manifest")
        except FileNotFoundError as err:
            raise RunDirError(_not_a_run(self.path) or str(err)) from None
        except ValueError as err:
            raise RunDirError(str(err)) from None
        if not isinstance(spec, dict) or spec.get("format") != RUN_FORMAT:
            raise RunDirError(f"{manifest} is not a telapa run manifest")
        if spec.get("version") not in READ_VERSIONS:
            raise RunDirError(
                f"{manifest}: run format version {spec.get('version')} is not "
                f"supported (supported: {', '.join(map(str, READ_VERSIONS))})"
            )
        return spec

    def spec(self) -> dict[str, Any]:
        """Deprecated: `manifest` (``spec`` names the `RunSpec`)."""
        warnings.warn("RunDir.spec() is now RunDir.manifest()", DeprecationWarning,
                      stacklevel=2)
        return self.manifest()

    def complete_manifest(self) -> dict[str, Any]:
        """`manifest` of a finished run; `RunDirError` (with how to finish it) otherwise."""
        spec = self.manifest()
        status = spec.get("status")
        if status != "complete":
            # "running" is recorded at the start and replaced only at the end: a run that
            # was stopped (Ctrl-C, SIGTERM, a lost machine) still says it
            state = ("it started and has not finished: stopped, or still running"
                     if status == "running" else f"status {status!r}")
            raise RunDirError(f"{self.path} is not complete ({state}); finish it with "
                              f"`telapa run --resume {self.path}`")
        return spec

    def set_status(self, status: str, **extra: Any) -> None:
        spec = self.manifest()
        spec.update(status=status, **extra)
        write_json_atomic(self.path / MANIFEST, spec)

    def import_plugins(self) -> tuple[str, ...]:
        """Imports the modules the run was started with (``run.json`` ``imports``, from
        ``--import``), so that its plug-in methods, env families and env ids are known
        before its curriculum and settings are read; returns them. `RunDirError` names
        the run and a module that cannot be imported."""
        from telapa.plugins import PluginError, import_modules

        names = self.manifest().get("imports") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise RunDirError(f"{self.path / MANIFEST}: 'imports' is not a list of module "
                              "names")
        try:
            return import_modules(names, source=f"{self.path} (run.json imports)")
        except PluginError as err:
            raise RunImportError(str(err)) from None

    def _import_recorded(self) -> None:
        """`import_plugins` when there is a readable manifest (a missing or damaged one
        is for the readers of the manifest to report)."""
        try:
            self.manifest()
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

    # --- the lock (`telapa.continual.runlock`) ----------------------------------------

    def lock(self) -> None:
        """Takes the run directory's lock for this process (`RunLock.take`); `RunDirError`
        names the holder (pid, host) when another process has it."""
        self._lock.take()

    def unlock(self) -> None:
        self._lock.release()

    @contextmanager
    def locked(self) -> Iterator[RunDir]:
        self.lock()
        try:
            yield self
        finally:
            self.unlock()

    def is_locked(self) -> bool:
        """Whether another process holds the lock (`RunLock.held_elsewhere`: writes
        nothing, so a sweep may ask of a read-only run directory)."""
        return self._lock.held_elsewhere()

    # --- tables ---------------------------------------------------------------------

    def own(self, path: Path) -> Path:
        """``path``, a place inside this run directory, when neither it nor a folder
        between it and the run directory is a symbolic link; `RunDirError` naming the
        link otherwise. A run directory holds its own files: telapa reads, writes and
        exports none through a link (a linked ``policies/`` once let a resume overwrite a
        user's file outside the run, and an export copied a linked file's target)."""
        place = self.path
        for part in path.relative_to(self.path).parts:
            place = place / part
            if place.is_symlink():
                raise RunDirError(
                    f"{place} is a symbolic link (to {os.readlink(place)}); a run directory "
                    "holds its own files, and telapa reads and writes none through a link: "
                    "replace the link by the file or folder itself")
        return path

    def table_path(self, name: str) -> Path:
        """Where the table ``name`` (``visits``, ``curve``, ``final``, a method table such
        as ``elites``) is: ``NAME.csv`` (`own`: not through a link)."""
        return self.own(self.path / f"{name}.csv")

    def write_tables(self, tables: dict[str, pd.DataFrame]) -> None:
        write_tables({self.table_path(name): frame for name, frame in tables.items()})

    def read_table(self, name: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """``NAME.csv`` with its columns checked (``columns``, by default all of a run
        table's: `telapa.continual.runtables.read_table`)."""
        return read_table(self.table_path(name), name, columns)

    def tables(self) -> dict[str, pd.DataFrame]:
        """visits, curve and final of a finished run, each checked against the run's
        curriculum and config (`telapa.continual.runtables.check_run_tables`):
        `RunDirError` names the file that does not match (a truncated or edited table)."""
        curriculum, config = self.curriculum(), self.config()
        names = ("visits", "curve", "final")
        t = {name: self.read_table(name) for name in names}
        check_run_tables(t, {name: self.table_path(name) for name in names}, curriculum,
                         config)
        return t

    def visit_train_path(self, visit: int, tag: str) -> Path:
        """``train/NN-TAG.csv``: the PPO training log of visit ``visit`` (tag ``tag``, a
        prime written ``p``), one row per update."""
        return self.own(self.path / "train" / f"{visit:02d}-{tag.replace(chr(39), 'p')}.csv")

    def write_visit_train(self, visit: int, tag: str, frame: pd.DataFrame) -> None:
        path = self.visit_train_path(visit, tag)
        path.parent.mkdir(exist_ok=True)
        write_table_atomic(path, frame)

    def read_visit_train(self, visit: int, tag: str) -> pd.DataFrame:
        """The training log `write_visit_train` wrote (`FileNotFoundError` if none)."""
        return pd.read_csv(self.visit_train_path(visit, tag))

    def write_visit_start(self, visit: int, tag: str, start: dict[str, float]) -> None:
        """Records how visit ``visit`` began (`telapa.continual.trainlog.visit_start` of its
        training log) in ``starts.csv``, one row per visit: a visit written again (a
        resumed run) replaces its row."""
        path = self.table_path("starts")
        rows = pd.read_csv(path) if path.is_file() else pd.DataFrame()
        if not rows.empty:
            rows = rows[rows["visit"] != visit]
        row = pd.DataFrame([{"visit": visit, "tag": tag, **start}])
        write_table_atomic(path, pd.concat([rows, row], ignore_index=True)
                           .sort_values("visit", kind="stable"))

    def read_visit_starts(self) -> dict[int, dict[str, float]]:
        """``starts.csv`` by visit index: each visit's statistics (without ``visit`` and
        ``tag``); empty when the run kept none (older runs)."""
        path = self.table_path("starts")
        if not path.is_file():
            return {}
        rows = pd.read_csv(path)
        return {int(r.pop("visit")): {k: float(v) for k, v in r.items() if k != "tag"}
                for r in rows.to_dict("records")}

    # --- the policies of the visits -------------------------------------------------

    def policy_path(self, visit: int, when: str = "end") -> Path:
        """``policies/NN-start.npz`` / ``NN-end.npz``: the parameters visit ``visit``
        started from (the method's chosen initialisation) and ended with. One network
        each (tens of kB for MiniGrid, a few hundred for MuJoCo), what ``telapa play
        --visit`` and the report's clips play."""
        if when not in ("start", "end"):
            raise ValueError(f"when must be 'start' or 'end', got {when!r}")
        return self.own(self.path / POLICIES_DIR / f"{visit:02d}-{when}.npz")

    @property
    def policy_seal_path(self) -> Path:
        """``policies/seal.json``: the SHA-256 of each policy file this run wrote, and of
        the run's definition (`definition`), so that a damaged policy, or another run's
        copied in, is named instead of played."""
        return self.own(self.path / POLICIES_DIR / POLICY_SEAL)

    def _definition_digest(self) -> str:
        return hashlib.sha256(json.dumps(self.definition(), sort_keys=True).encode()
                              ).hexdigest()

    def save_policy(self, visit: int, params: Any, when: str = "end") -> None:
        """Writes ``params`` (a parameter tree) as `policy_path` atomically, and seals it
        (`policy_seal_path`)."""
        path = self.policy_path(visit, when)
        path.parent.mkdir(exist_ok=True)
        save_pytree(path, params)
        seal = self.policy_seal_path
        files = read_json(seal, "policy seal").get("files", {}) if seal.is_file() else {}
        write_json_atomic(seal, {"run": self._definition_digest(),
                                 "files": {**files, path.name: _sha256(path)}})

    def load_policy(self, visit: int, like: Any, when: str = "end") -> Any:
        """The parameters `save_policy` wrote, in the structure of ``like``; `RunDirError`
        when the run kept none (runs made before runs kept their policies), or the file
        is not the one this run sealed (damaged, or another run's: `policy_seal_path`;
        a run written before policies were sealed is read as it is)."""
        path = self.policy_path(visit, when)
        if not path.is_file():
            raise RunDirError(f"{path} does not exist: this run kept no policy of visit "
                              f"{visit} (runs keep them from telapa 0.1 on; play its final "
                              "policy instead)")
        seal = self.policy_seal_path
        if seal.is_file():
            try:
                sealed = read_json(seal, "policy seal")
                run, digest = sealed["run"], sealed["files"].get(path.name)
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                raise RunDirError(f"{seal} is damaged ({err}); the run's policies cannot be "
                                  "told apart from others'") from None
            if run != self._definition_digest():
                raise RunDirError(f"{seal} seals another run's policies (its definition "
                                  f"differs from {self.path}'s): {POLICIES_DIR}/ was copied "
                                  "from elsewhere")
            if digest is None or digest != _sha256(path):
                raise RunDirError(
                    f"{path} is not the policy this run saved (" + (
                        "it is not in its seal" if digest is None else
                        "its SHA-256 differs from the one sealed") +
                    "): damaged, or another run's file copied in")
        try:
            return load_pytree(path, like)
        except CheckpointError as err:
            raise RunDirError(f"{path} cannot be read: {err}") from None

    # --- json records ---------------------------------------------------------------

    def _json(self, name: str, what: str) -> Any:
        try:
            return read_json(self.path / name, what)
        except (FileNotFoundError, ValueError) as err:
            raise RunDirError(str(err)) from None

    def accounting(self) -> dict[str, Any]:
        """``accounting.json``: compute and memory of the run (see `ContinualRun`)."""
        return check_accounting(self._json("accounting.json", "accounting"),
                                self.path / "accounting.json")

    def write_accounting(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.path / "accounting.json", data)

    @property
    def method_log_path(self) -> Path:
        return self.path / "method_log.json"

    def method_log(self) -> list[dict[str, Any]]:
        """``method_log.json``: the method's decisions, a list of event objects."""
        return check_method_log(self._json(self.method_log_path.name, "method log"),
                                self.method_log_path)

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
        return check_elites(self.read_table("elites", ELITE_REQUIRED),
                            self.table_path("elites"))

    def result_files(self) -> list[Path]:
        """The `RESULT_FILES` this run has, in that order (what a sweep export copies);
        `RunDirError` for one that is a symbolic link (`own`)."""
        return [self.own(self.path / name) for name in RESULT_FILES
                if (self.path / name).is_file() or (self.path / name).is_symlink()]

    # --- what defines a run (checked when it is resumed) -----------------------------

    def definition(self) -> dict[str, Any]:
        """What the run is, as its files say: the `DEFINING_KEYS` of ``run.json``, and
        ``config.yaml`` and ``curriculum.yaml`` as read (JSON values)."""
        spec = self.manifest()
        data = {MANIFEST: {key: spec.get(key) for key in DEFINING_KEYS},
                "config.yaml": self._yaml("config.yaml"),
                "curriculum.yaml": self._yaml("curriculum.yaml")}
        return json.loads(json.dumps(data))



def _sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False)
