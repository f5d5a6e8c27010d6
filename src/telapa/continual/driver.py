"""The one loop of every run: a single run is a batch of one.

`drive` runs the remaining phases of ``runs`` (seeds of one method, curriculum and
settings; one alone or a `telapa.continual.batch.SeedBatch`'s) to the end::

    while some run is not complete:
        phase = the earliest phase a run stands at
        group = the runs standing at it
        states = phases.<phase.kind>(group, phase)   # one call: each run's next state
        each run of the group commits its state (its checkpoint)
    each run finishes (tables, metrics, accounting)

After a crash each seed resumes from its own latest checkpoint, so seeds may stand at
different phases: the loop always advances the earliest, so the laggards catch up and
the batch trains together again. ``size`` pads a group to the batch's size (copies of
the first member, results discarded), so a resumed batch runs the programs it compiled.

Host-stepped envs (gymnasium, native) cannot be ``vmap``ped and their training state is
tied to an agent's own envs: `SeedBatch` drives their seeds one after the other, each as
a batch of one, exactly as separate runs.

Time and memory. A run's ``wall_s`` grows by its share of the loop's elapsed time (the
elapsed seconds over the number of runs the loop drives, on `telapa.io.clock.running`,
which leaves out the time the process was stopped); its peak memory is the process's
(and its children's) over the loop, sampled through it (`telapa.io.MemoryMonitor` of the
loop's span: not what the process peaked at before, such as a sweep worker's earlier
cells).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from telapa.continual.phases import (
    PhaseRun,
    RunError,
    end_visit,
    final_evaluation,
    start_visit,
    train_chunk,
)
from telapa.continual.spec import Phase
from telapa.continual.state import RunState
from telapa.io import MemoryMonitor
from telapa.io.clock import running
from telapa.io.stop import raise_pending
from telapa.rl.agent import BatchMemberError

Clock = Callable[[], tuple[float, int]]
"""A run's wall seconds and the peak memory so far (read once a phase is done)."""


class DrivenRun(PhaseRun, Protocol):
    """What the loop reads and calls of a run, besides what its phases read (`PhaseRun`,
    whose ``state`` is the run's `RunState`; `telapa.continual.runner.ContinualRun` is
    one)."""

    phases: list[Phase]

    @property
    def complete(self) -> bool: ...
    def commit_phase(self, state: RunState, clock: Clock) -> None: ...
    def finish(self) -> dict[str, Any]: ...


PHASES = {"start": start_visit, "chunk": train_chunk, "end": end_visit,
          "final": final_evaluation}
"""Each phase kind's function of the group of runs standing at it, returning their next
states (`telapa.continual.phases`); every one takes ``size``, the batch's size."""


class Driver:
    """The loop over ``runs`` (not complete, or complete but not yet finished); ``size``:
    the batch's size, the number of programs' members (`drive` runs it to the end;
    `step` runs one phase)."""

    def __init__(self, runs: list[DrivenRun], size: int):
        self.runs, self.size = runs, size
        self._start = running()
        self._base_wall = {id(r): r.state.wall_s for r in runs}
        self._memory: MemoryMonitor | None = None

    def drive(self) -> list[dict[str, Any]]:
        """Every remaining phase, then each run's `finish`; returns their metrics."""
        self._start = running()
        for run in self.runs:
            run.state = run.state.replace(segments=run.state.segments + 1)
        peak = max([r.state.peak_rss for r in self.runs], default=0)
        # the run's own peak: a sweep worker's earlier cells are not this run's
        with MemoryMonitor(initial_peak_bytes=peak, lifetime=False) as self._memory:
            while self.step():
                # a stop dropped inside a callback, or one asked for at a phase boundary
                # (its checkpoint committed): telapa.io.stop
                raise_pending(boundary=True)
        return [run.finish() for run in self.runs]

    def clock(self, run: DrivenRun) -> Clock:
        """``run``'s wall seconds (its share of the loop's) and the peak memory."""
        def read() -> tuple[float, int]:
            share = (running() - self._start) / len(self.runs)
            peak = self._memory.peak_bytes if self._memory is not None else 0
            return self._base_wall[id(run)] + share, peak
        return read

    def step(self) -> bool:
        """Runs the earliest pending phase for every run that stands at it, in one call,
        and commits their checkpoints; False when every run is complete."""
        waiting = [r for r in self.runs if not r.complete]
        if not waiting:
            return False
        lead = min(r.state.next_phase for r in waiting)
        group = [r for r in waiting if r.state.next_phase == lead]
        phase = group[0].phases[lead]
        try:
            states = PHASES[phase.kind](group, phase, size=self.size)
        except BatchMemberError as err:
            run = group[err.member]
            raise RunError(f"{self._who([run])}{phase.describe(run.visits)}: {err.error}"
                           ) from err
        except FloatingPointError as err:
            raise RunError(f"{self._who(group)}{phase.describe(group[0].visits)}: {err}"
                           ) from err
        except RunError as err:
            if self.size == 1:
                raise
            raise RunError(f"{self._who(group)}{err}") from err
        for run, state in zip(group, states, strict=True):
            run.commit_phase(state, self.clock(run))
        return True

    def _who(self, group: list[DrivenRun]) -> str:
        """The seeds an error names (none for a run alone)."""
        if self.size == 1:
            return ""
        seeds = ", ".join(str(run.spec.seed) for run in group)
        return f"seed {seeds}, " if len(group) == 1 else f"seeds {seeds}, "


__all__ = ["PHASES", "Clock", "DrivenRun", "Driver"]
