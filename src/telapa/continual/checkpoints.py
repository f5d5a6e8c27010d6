"""The checkpoints of a run directory, and what a continual run saves in them.

    RUN_DIR/
      checkpoint.json     names the latest complete checkpoint and the one before it
      ckpt-NNNNNN/        state.json (phase, records), learner.npz (PPO state),
                          train_state.npz (after a chunk: the visit's `TrainState`),
                          method-PART.npz, train.csv (the current visit's iterations),
                          definition.json (what defines the run: run.json's method,
                          seed, curriculum, preset and overrides, config.yaml,
                          curriculum.yaml), files.json (the SHA-256 of each of these)

A checkpoint directory is complete before ``checkpoint.json`` names it (written
atomically), so a kill at any moment leaves the previous checkpoint usable; leftovers
of an interrupted write are removed on the next commit. The two newest checkpoints are
kept: when the newest is unreadable, damaged or gone (a folder or file deleted),
`CheckpointStore.newest_first` still offers the previous one, and any other sealed one.
They share no file (a part of the method state that did not change is copied, after its
SHA-256 is checked, not hard-linked), and ``files.json`` seals each checkpoint, so a
damaged or missing file is found (`CheckpointStore.verify`) and never takes the previous
checkpoint with it. Each checkpoint also holds what defines the run
(``definition.json``); a resume refuses a run whose run.json, config.yaml or
curriculum.yaml were edited since (`CheckpointStore.resume_from`).

`CheckpointStore` is the one owner of these files and of what its writes carry from one
checkpoint to the next; a `RunDir` holds it as ``run_dir.checkpoints``. A `ContinualRun`
is saved and restored as one value, its `RunState` (`telapa.continual.state`), with
`CheckpointStore.save_run` and `CheckpointStore.load_run`; the files are those runs of this
format version have always written.
Only runs of the current format version (`telapa.continual.runformat`) are resumed or
played: older checkpoints are in layouts no longer read (`CheckpointStore.check_format`).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from telapa.continual.runformat import MANIFEST, RUN_FORMAT, RUN_VERSION, RunDirError
from telapa.continual.state import MethodState, Records, RunState
from telapa.io import (
    atomic_open,
    load_pytree,
    read_json,
    save_pytree,
    write_json_atomic,
)
from telapa.rl.ppo import PPOState

_CKPT = re.compile(r"^ckpt-(\d{6})$")
POINTER = "checkpoint.json"
STATE = "state.json"
LEARNER = "learner.npz"
TRAIN_STATE = "train_state.npz"
TRAIN_ROWS = "train.csv"
DEFINITION = "definition.json"
"""In each checkpoint: what defines the run that wrote it (`RunDir.definition`), checked
when the run is resumed (`CheckpointStore.resume_from`)."""
SEAL = "files.json"
"""In each checkpoint: the SHA-256 of every other file of it (`CheckpointStore.commit`)."""
RUN_STATE_KEYS = ("next_phase", "phases", "global_step", "records", "stored_tasks",
                  "extra_env_steps", "method_log", "timer", "method_timer", "wall_s",
                  "segments", "peak_rss_bytes")
"""What ``state.json`` holds of a continual run (`CheckpointStore.save_run`); also
``tracked_ms`` (`RunTracker.mark`), which checkpoints written before it lack."""


class RunEdited(RunDirError):
    """A run's defining files (run.json, config.yaml, curriculum.yaml) were edited after
    its checkpoint was written: it cannot be resumed (`CheckpointStore.resume_from`)."""


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


class CheckpointStore:
    """The checkpoints of the run directory ``run``, the `RunDir` that holds the store (of
    which it reads ``path``, ``spec()`` and ``definition()``): module docstring."""

    def __init__(self, run: Any):
        self._run = run
        self._saved_parts: dict[str, tuple[Any, Path]] = {}
        """Method state parts of the last checkpoint written (see `save`)."""
        self._last: Path | None = None
        """The checkpoint this run goes on from: the last one committed, or the one it was
        resumed from (`resume_from`); the next commit keeps it as ``previous``."""
        self._definition: dict[str, Any] | None = None
        """What defines the run (`RunDir.definition`), recorded in every checkpoint
        written; set when the run is created (`start`) or resumed (`resume_from`)."""

    @property
    def path(self) -> Path:
        return self._run.path

    # --- which checkpoints there are -------------------------------------------------

    def check_format(self) -> None:
        """`RunDirError` in one line, naming the run directory, its format and the one
        supported, unless the run is of the format version this code resumes
        (`RUN_VERSION`): the checkpoints of older versions are in layouts no longer
        read. Their tables are read as ever (`RunDir.spec` accepts them)."""
        version = self._run.manifest().get("version")
        if version != RUN_VERSION:
            raise RunDirError(
                f"{self.path} is a run of format {RUN_FORMAT} version {version} (its "
                f"{MANIFEST}); this telapa resumes and plays runs of version {RUN_VERSION} "
                "only, whose checkpoints it can read: start the run again, or read its "
                "results with `telapa metrics` or `telapa report`")

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

    def newest_first(self) -> list[Path]:
        """The checkpoints a resume tries, newest first: the two ``checkpoint.json`` names
        (latest, then previous), then any other sealed checkpoint folder (one whose commit
        was cut short, or one left over); without a readable ``checkpoint.json``, the
        sealed folders alone. A named one may be gone or incomplete (its folder, its
        ``state.json`` or another file deleted) or damaged: `verify` tells, and a resume
        falls back to the next one. A run of an older format version is refused first
        (`check_format`)."""
        self.check_format()
        return self._listed()

    def _listed(self) -> list[Path]:
        try:
            data = self._pointer()
        except RunDirError:  # a damaged pointer: the sealed checkpoints, newest first
            sealed = self._sealed()
            if not sealed:
                raise
            return sealed
        named = [] if data is None else [self.path / name for name in (
            data["latest"], data.get("previous")) if name is not None]
        return named + [p for p in self._sealed() if p not in named]

    def _sealed(self) -> list[Path]:
        """Checkpoint folders with a seal (complete: the seal is written last), newest
        first (none when the run directory is not there yet)."""
        if not self.path.is_dir():
            return []
        found = [p for p in self.path.iterdir() if _CKPT.match(p.name)
                 and (p / SEAL).is_file() and (p / STATE).is_file()]
        return sorted(found, key=lambda p: p.name, reverse=True)

    def latest(self) -> Path | None:
        """The newest checkpoint that looks complete (its ``state.json`` is there; not
        verified): what `state` reads by default. Any format version: a sweep reads the
        progress of its cells from it."""
        return next((p for p in self._listed() if (p / STATE).is_file()), None)

    def state_json(self, folder: Path | None = None) -> dict[str, Any] | None:
        """``state.json`` of checkpoint ``folder`` (default: the latest; None when there
        is none yet): the JSON part of the `RunState` it saved (``next_phase``, ``phases``,
        ``wall_s``, the records, ...). `RunDirError`
        names the file when it is unreadable or not a checkpoint state."""
        folder = self.latest() if folder is None else folder
        if folder is None:
            return None
        path = folder / STATE
        try:
            state = read_json(path, "checkpoint state")
        except (FileNotFoundError, ValueError) as err:
            raise RunDirError(str(err)) from None
        if not isinstance(state, dict) or any(k not in state for k in ("phases", "next_phase")):
            raise RunDirError(f"{path} is not a checkpoint state")
        return state

    def verify(self, folder: Path) -> None:
        """`RunDirError` naming what makes checkpoint ``folder`` unusable: the folder, its
        ``state.json`` or its seal ``files.json`` missing, or the first file missing or
        differing from its SHA-256 in ``files.json``."""
        seal = folder / SEAL
        if not folder.is_dir():
            raise RunDirError(f"{folder} is missing")
        for path in (folder / STATE, seal):
            if not path.is_file():
                raise RunDirError(f"{path} is missing (an incomplete checkpoint)")
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

    # --- what defines the run (checked when it is resumed) ---------------------------

    def start(self) -> None:
        """A new run: its definition (`RunDir.definition`) goes into every checkpoint."""
        self._definition = self._run.definition()

    def resume_from(self, folder: Path | None) -> None:
        """Makes the checkpoint ``folder`` (None: there is none yet) the one this run goes
        on from: its next commit keeps it as ``previous``. First, `RunEdited` unless the
        run's files still define the run ``folder`` was written by (its
        ``definition.json``; `RunDirError` when it is missing or unreadable): an edited
        method, seed, setting or curriculum would continue into a mixed run. The
        definition is recorded in the checkpoints written from now on."""
        current = self._run.definition()
        if folder is not None:
            path = folder / DEFINITION
            try:
                recorded = read_json(path, "checkpoint definition")
            except FileNotFoundError:
                raise RunDirError(f"{path} is missing (an incomplete checkpoint)") from None
            except ValueError as err:
                raise RunDirError(str(err)) from None
            if not isinstance(recorded, dict):
                raise RunDirError(f"{path} is not a checkpoint definition")
            edits = _edits(recorded, current)
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

    # --- writing ---------------------------------------------------------------------

    def new_folder(self) -> Path:
        """An empty directory for the next checkpoint, numbered after every checkpoint
        folder there is and every one ``checkpoint.json`` names (a name is never used
        twice, so a folder the pointer names is never rewritten)."""
        names = [p.name for p in self.path.iterdir() if _CKPT.match(p.name)]
        try:
            data = self._pointer()
        except RunDirError:  # damaged: the folders stand for it
            data = None
        if data is not None:
            names += [n for n in (data["latest"], data.get("previous")) if n is not None]
        seq = 1 + max((int(_CKPT.match(n).group(1)) for n in names), default=-1)
        folder = self.path / f"ckpt-{seq:06d}"
        folder.mkdir()
        return folder

    def commit(self, folder: Path, known: dict[str, str] | None = None) -> None:
        """Makes ``folder`` the latest checkpoint, keeps the one this run went on from (the
        last one it committed, or the one it resumed from: `resume_from`) as ``previous``
        and removes every other one (a newer one that could not be read, leftovers of an
        interrupted write). The checkpoint's files are sealed first: ``files.json``
        records each one's SHA-256 (`verify`), taken from ``known`` (file name -> the
        SHA-256 of the bytes written to it, e.g. by `copy_intact`) where it names the
        file, else read from the file."""
        previous = self._last
        known = known or {}
        write_json_atomic(folder / SEAL, {
            f.name: known.get(f.name) or _sha256(f) for f in sorted(folder.iterdir())
            if f.is_file() and f.name != SEAL and not f.name.startswith(".")})
        keep = {folder.name} | ({previous.name} if previous is not None else set())
        write_json_atomic(self.path / POINTER, {
            "latest": folder.name, "previous": previous.name if previous is not None else None})
        self._last = folder
        for other in self.path.iterdir():
            if _CKPT.match(other.name) and other.name not in keep:
                shutil.rmtree(other, ignore_errors=True)

    def keep_latest_only(self) -> None:
        """Removes every checkpoint but the latest (``previous`` too): for a finished run,
        whose tables, accounting and policies hold what it is, so that a second
        checkpoint (hundreds of MB for TeLAPA) is not kept to recover a phase that will
        never run again. The pointer names no ``previous`` first, so a kill here leaves a
        run whose pointer is true."""
        data = self._pointer()
        if data is None:
            return
        write_json_atomic(self.path / POINTER, {"latest": data["latest"], "previous": None})
        for other in self.path.iterdir():
            if _CKPT.match(other.name) and other.name != data["latest"]:
                shutil.rmtree(other, ignore_errors=True)

    def copy_intact(self, source: Path, target: Path) -> str | None:
        """Copies ``source``, a file of a sealed checkpoint, to ``target`` if it is intact
        (its SHA-256 is the one its seal records), in one read that hashes what it
        writes; returns that SHA-256, the copy's (its seal takes it without reading the
        copy again: `commit`), or None, with nothing written, when the source is not
        intact or cannot be told. Two checkpoints never share a file (a damaged file
        would take both), and a damaged one is never carried forward."""
        seal = source.parent / SEAL
        try:
            digest = read_json(seal, "checkpoint seal").get(source.name)
        except (OSError, ValueError, AttributeError):
            return None
        if not isinstance(digest, str):
            return None
        hasher = hashlib.sha256()
        try:
            with source.open("rb") as src, atomic_open(target) as dst:
                while chunk := src.read(1 << 20):
                    hasher.update(chunk)
                    dst.write(chunk)
                if hasher.hexdigest() != digest:
                    raise _Damaged
        except (_Damaged, FileNotFoundError):
            return None
        return digest

    def save(self, state: dict[str, Any], *, learner: Any, method: dict[str, Any],
             train_state: Any = None, train_rows: list[dict[str, Any]]) -> Path:
        """Writes a new checkpoint and commits it (`commit`); returns its folder.

        ``state`` (JSON: at least ``phases`` and ``next_phase``) goes to ``state.json``,
        written last, so a folder with it is complete; ``learner`` (the carried
        `PPOState`) to ``learner.npz``; ``train_state`` (None: not saved) to
        ``train_state.npz``; each ``method`` part to ``method-PART.npz``; ``train_rows``
        (none: not saved) to ``train.csv``; what defines the run (once it is started or
        resumed) to ``definition.json``. A method part that is the same object as at the
        previous checkpoint this store wrote is copied from there if that file is intact
        (`copy_intact`), else written again; the seal takes a copy's SHA-256 from the
        copying (a part the size of a TeLAPA archive is read once, not twice)."""
        folder = self.new_folder()
        if train_state is not None:
            save_pytree(folder / TRAIN_STATE, train_state)
        save_pytree(folder / LEARNER, learner)
        saved, copied = {}, {}
        for name, tree in method.items():
            target = folder / f"method-{name}.npz"
            previous = self._saved_parts.get(name)
            digest = (self.copy_intact(previous[1], target)
                      if previous is not None and previous[0] is tree else None)
            if digest is None:
                save_pytree(target, tree)
            else:
                copied[target.name] = digest
            saved[name] = (tree, target)
        self._saved_parts = saved
        if train_rows:
            pd.DataFrame(train_rows).to_csv(folder / TRAIN_ROWS, index=False)
        if self._definition is not None:
            write_json_atomic(folder / DEFINITION, self._definition)
        write_json_atomic(folder / STATE, state)
        self.commit(folder, known=copied)
        return folder

    # --- reading ---------------------------------------------------------------------

    def load(self, folder: Path, *, learner: Any, method: dict[str, Any]
             ) -> tuple[Any, dict[str, Any]]:
        """(learner, method state) of the checkpoint ``folder``, read into the structure
        of the templates ``learner`` and ``method`` (one per part) with
        `telapa.io.load_pytree`; `CheckpointError` names a file that does not match."""
        parts = {name: load_pytree(folder / f"method-{name}.npz", like)
                 for name, like in method.items()}
        return load_pytree(folder / LEARNER, learner), parts

    def train_state(self, folder: Path, like: Any) -> Any:
        """The visit's `TrainState` saved with the checkpoint ``folder`` (after a chunk),
        in the structure of ``like``; None when it holds none."""
        path = folder / TRAIN_STATE
        return load_pytree(path, like) if path.exists() else None

    def train_rows(self, folder: Path) -> list[dict[str, Any]]:
        """The current visit's PPO iteration rows saved with the checkpoint ``folder``."""
        path = folder / TRAIN_ROWS
        return pd.read_csv(path).to_dict("records") if path.exists() else []

    def learner_file(self, folder: Path | None = None) -> Path:
        """The file holding the carried `PPOState` of the checkpoint ``folder`` (default:
        the latest one); `RunDirError` when the run has no checkpoint or is of an older
        format version (`check_format`)."""
        self.check_format()
        if folder is None:
            folder = self.latest()
            if folder is None:
                raise RunDirError(f"{self.path} has no checkpoint")
        return folder / LEARNER

    # --- a continual run ---------------------------------------------------------------

    def save_run(self, state: RunState, *, phases: int, with_train_state: bool) -> Path:
        """Checkpoints ``state`` (a continual run of ``phases`` phases, after a phase) with
        `save`: all but its arrays in ``state.json`` (`RUN_STATE_KEYS`: the next phase,
        records, method log, timers, accounting), its carried `PPOState` and method
        parts, the visit's `TrainState` when ``with_train_state`` (after a chunk) and the
        visit's PPO iterations."""
        method = state.method
        manifest = {
            "next_phase": state.next_phase, "phases": phases,
            "global_step": state.global_step, "records": state.records.as_lists(),
            "stored_tasks": list(method.stored_tasks),
            "extra_env_steps": method.extra_env_steps,
            "method_log": [dict(event) for event in method.log], "timer": dict(state.timer),
            "method_timer": dict(method.timer), "wall_s": state.wall_s,
            "segments": state.segments, "peak_rss_bytes": state.peak_rss,
            "tracked_ms": state.tracked_ms,
        }
        return self.save(manifest, learner=state.learner, method=dict(method.parts),
                         train_state=state.train_state if with_train_state else None,
                         train_rows=[dict(row) for row in state.train_rows])

    def load_run(self, folder: Path, like: RunState, *, phases: int,
                 method_like: Callable[[list[str], PPOState], dict[str, Any]]) -> RunState:
        """The `RunState` `save_run` saved in ``folder``, but the visit's `TrainState`
        (`train_state`, read with the template of the visit's fresh start): arrays read
        into the structure of ``like`` (the run's state as made from its spec) and, for
        the method's parts, of ``method_like(stored_tasks, learner)``. `RunDirError`
        names a ``state.json`` that is not a continual run's or is another run's (its
        ``phases``), `CheckpointError` a file that does not match the templates."""
        saved = self.state_json(folder)
        missing = [key for key in RUN_STATE_KEYS if key not in saved]
        if missing:
            raise RunDirError(f"{folder / STATE} lacks {', '.join(missing)} (not a "
                              "checkpoint of a continual run)")
        if saved["phases"] != phases:
            raise RunDirError(f"{folder}: checkpoint does not match this run's phases "
                              f"({saved['phases']}, the run has {phases})")
        learner, parts = self.load(
            folder, learner=like.learner,
            method=method_like(saved["stored_tasks"], like.learner))
        tracked = saved.get("tracked_ms")
        method = MethodState(
            parts=parts, stored_tasks=tuple(saved["stored_tasks"]),
            log=tuple(saved["method_log"]), extra_env_steps=saved["extra_env_steps"],
            timer=dict(saved["method_timer"]))
        return RunState(
            learner=learner, next_phase=saved["next_phase"],
            global_step=saved["global_step"], train_state=None,
            train_rows=tuple(self.train_rows(folder)),
            records=Records.from_lists(saved["records"]), method=method,
            timer=dict(saved["timer"]), wall_s=saved["wall_s"], segments=saved["segments"],
            peak_rss=saved["peak_rss_bytes"],
            tracked_ms=tracked if isinstance(tracked, int) and not isinstance(tracked, bool)
            else None)
