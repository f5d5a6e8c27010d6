"""Imported (``telapa sweep --import slurm_gate``) by the Slurm tasks of
tests/continual/test_sweep_slurm.py: it holds a run after its first committed phase while
the file ``$SLURM_GATE/hold`` exists, so that the test stops or requeues a task that has
started and checkpointed, never one that has already finished. Each hold is announced by
the file ``$SLURM_GATE/CELL.RESTART`` (the cell, and ``SLURM_RESTART_COUNT``: 0 the first
time its task runs, 1 after one requeue); a hold ends when the file is removed, when the
task is told to stop at its next phase boundary (Slurm's warning signal), or on SIGTERM."""

from __future__ import annotations

import os
import time
from pathlib import Path

from telapa.continual.runner import ContinualRun
from telapa.io import stop

_commit = ContinualRun.commit_phase


def _gated(self, state, clock):
    _commit(self, state, clock)
    gate = Path(os.environ["SLURM_GATE"])
    if not (gate / "hold").exists() or getattr(self, "_gate_passed", False):
        return
    self._gate_passed = True
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    (gate / f"{self.dir.path.name}.{restart}").write_text(str(os.getpid()))
    while (gate / "hold").exists() and not stop._boundary:
        time.sleep(0.2)
        stop.raise_pending()


ContinualRun.commit_phase = _gated
