"""The run directory: what a continual run writes, and its checkpoints.

    RUN_DIR/
      run.json            spec (curriculum, method, seed, preset) and status
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
      checkpoint.json     names the latest complete checkpoint
      ckpt-NNNNNN/        state.json (phase, records), learner.npz or trainer.npz,
                          method-PART.npz, train.csv (the current visit's iterations)

A checkpoint directory is complete before ``checkpoint.json`` names it (written
atomically), so a kill at any moment leaves the previous checkpoint usable; leftovers
of an interrupted write are removed on the next commit.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from telapa.io import read_json, write_json_atomic, write_table_atomic

RUN_FORMAT = "telapa-run"
RUN_VERSION = 1
_CKPT = re.compile(r"^ckpt-(\d{6})$")


class RunDirError(ValueError):
    """A run directory is missing, foreign, corrupt or already used."""


class RunDir:
    """Paths and atomic writes of one run directory."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    # --- spec -----------------------------------------------------------------------

    def create(self, spec: dict[str, Any], files: dict[str, str]) -> None:
        """Starts a new run here; refuses a directory that already holds one."""
        if (self.path / "run.json").exists():
            raise RunDirError(
                f"{self.path} already holds a run; resume it with "
                f"`telapa run --resume {self.path}` or choose another --out"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (self.path / name).write_text(text)
        write_json_atomic(self.path / "run.json", {"format": RUN_FORMAT, "version": RUN_VERSION,
                                                   **spec, "status": "running"})

    def spec(self) -> dict[str, Any]:
        if not self.path.is_dir():
            raise RunDirError(f"run directory {self.path} does not exist")
        try:
            spec = read_json(self.path / "run.json", "run manifest")
        except (FileNotFoundError, ValueError) as err:
            raise RunDirError(str(err)) from None
        if not isinstance(spec, dict) or spec.get("format") != RUN_FORMAT:
            raise RunDirError(f"{self.path / 'run.json'} is not a telapa run manifest")
        if spec.get("version") != RUN_VERSION:
            raise RunDirError(
                f"{self.path / 'run.json'}: run format version {spec.get('version')} is not "
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
        write_json_atomic(self.path / "run.json", spec)

    # --- tables ---------------------------------------------------------------------

    def write_tables(self, tables: dict[str, pd.DataFrame]) -> None:
        for name, frame in tables.items():
            write_table_atomic(self.path / f"{name}.csv", frame)

    def read_table(self, name: str) -> pd.DataFrame:
        path = self.path / f"{name}.csv"
        if not path.is_file():
            raise RunDirError(f"{path} is missing (incomplete run?)")
        return pd.read_csv(path)

    def write_visit_train(self, visit: int, tag: str, frame: pd.DataFrame) -> None:
        folder = self.path / "train"
        folder.mkdir(exist_ok=True)
        write_table_atomic(folder / f"{visit:02d}-{tag.replace(chr(39), 'p')}.csv", frame)

    # --- checkpoints ----------------------------------------------------------------

    def latest_checkpoint(self) -> Path | None:
        pointer = self.path / "checkpoint.json"
        if not pointer.exists():
            return None
        try:
            name = read_json(pointer, "checkpoint pointer")["latest"]
        except (ValueError, KeyError, TypeError) as err:
            raise RunDirError(f"{pointer} is corrupt: {err}") from None
        folder = self.path / name
        if not _CKPT.match(name) or not (folder / "state.json").is_file():
            raise RunDirError(f"{pointer} names {name!r}, which is not a complete checkpoint")
        return folder

    def new_checkpoint(self) -> Path:
        """An empty directory for the next checkpoint (after the latest one)."""
        latest = self.latest_checkpoint()
        seq = int(_CKPT.match(latest.name).group(1)) + 1 if latest else 0
        folder = self.path / f"ckpt-{seq:06d}"
        if folder.exists():  # left by a write that was interrupted
            shutil.rmtree(folder)
        folder.mkdir()
        return folder

    def commit_checkpoint(self, folder: Path) -> None:
        """Makes ``folder`` the latest checkpoint and removes the older ones."""
        write_json_atomic(self.path / "checkpoint.json", {"latest": folder.name})
        for other in self.path.iterdir():
            if _CKPT.match(other.name) and other != folder:
                shutil.rmtree(other, ignore_errors=True)
