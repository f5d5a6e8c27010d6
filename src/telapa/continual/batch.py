"""Several seeds of one method on one curriculum in one process (``telapa run --seeds``).

Every seed is a complete `ContinualRun` in its own run directory, with the checkpoints,
tables and metrics a separate ``telapa run --seed S`` writes (``telapa metrics``,
reports and ``--resume`` treat it as any other run). What the seeds share:

* the static agents (one per env of the curriculum), so every jitted function is
  compiled once for the batch;
* on the jax backend, every phase as one step of the batch
  (`telapa.continual.runner`'s phase functions): a chunk is one compiled program
  (`train_chunk`: a ``lax.scan`` over the chunk's PPO iterations ``vmap``ped over the
  seeds, then one population evaluation of the S policies) whose results reach the host
  in one transfer; the pre-evaluations and final evaluations are population evaluations
  of the S policies; the method's per-seed hooks run in lockstep
  (`telapa.continual.lockstep`): the steps with a batched form (TeLAPA's probes as one
  batch, its illuminations in lockstep, its boundary updates as one program) are
  answered for all seeds at once, the rest of each hook (the baselines' whole hooks)
  runs seed after seed, exactly as in a separate run.

What else runs seed after seed, in seed order: ``observe`` and the checkpoints. A seed's
results equal those of its separate run up to float reassociation inside the batched
programs (docs/assumptions.md, "Batches of seeds and probes").

Phases. All seeds have the same phases (one curriculum and preset). After a crash each
seed resumes from its own latest checkpoint, so they may stand at different phases: the
batch always advances the seeds at the earliest phase (`step`), so seeds that lag catch
up first and the batch trains together again once they reach the others. A chunk of
fewer seeds than the batch holds is padded to the batch's size with copies of one of
them (results discarded), so every chunk runs the same compiled program and a resumed
batch gives exactly the results of an uninterrupted one (when it is resumed with the
same seeds).

Accounting. A seed's ``wall_s`` is its share of the batch's wall time (elapsed seconds
over the number of seeds the batch runs) and its ``train`` phase time the same share of
each batched chunk; its peak memory is the process's.

Gymnasium. Host-stepped envs cannot be ``vmap``ped and a gymnasium `TrainState` is tied
to its agent's envs: on a gymnasium curriculum the seeds run one after the other, each
with its own agents, as separate runs would.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from telapa.config import ascii_int
from telapa.continual.memory import check_memory
from telapa.continual.phases import (
    RunError,
    end_visit,
    final_evaluation,
    start_visit,
    train_chunk,
)
from telapa.continual.progress import Progress, SilentProgress
from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.runner import ContinualRun
from telapa.continual.spec import Phase, RunSpec
from telapa.continual.tracking import Tracking
from telapa.io import MemoryMonitor
from telapa.io.stop import raise_pending
from telapa.rl.agent import Agent, BatchMemberError


class _SeedProgress:
    """One seed's view of the batch's progress sink: notes of every seed (prefixed with
    the seed), bars and phases of the lead seed only (the seeds move together)."""

    def __init__(self, sink: Progress, seed: int, lead: bool):
        self.sink, self.seed, self.lead = sink, seed, lead

    def visit(self, visit, budget: int, done: int) -> None:
        if self.lead:
            self.sink.visit(visit, budget, done)

    def advance(self, steps: int, metrics: dict[str, float]) -> None:
        if self.lead:
            self.sink.advance(steps, metrics)

    def evaluated(self, visit, step: int, sr: float) -> None:
        if self.lead:
            self.sink.evaluated(visit, step, sr)

    def note(self, text: str) -> None:
        self.sink.note(f"seed {self.seed}: {text}")

    def phase(self, name: str, done: int, total: int) -> None:
        if self.lead:
            self.sink.phase(name, done, total)


MAX_BATCH_SEEDS = 1_024
"""Seeds of one batch (``telapa run --seeds``): one process holds every seed's run."""


def parse_seeds(text: str) -> list[int]:
    """``"0-7"``, ``"0,2,5"`` or a mix (``"0-3,8"``) -> the seeds in the given order;
    ValueError for an empty, malformed, reversed or repeated entry, or for more than
    `MAX_BATCH_SEEDS` seeds (counted before any range is expanded)."""
    ranges: list[tuple[int, int]] = []
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            first = ascii_int(low)
            last = ascii_int(high) if dash else first
        except ValueError:
            raise ValueError(f"seeds {text!r}: {part!r} is not a seed or a range A-B") from None
        if last < first:
            raise ValueError(f"seeds {text!r}: range {part!r} is reversed")
        ranges.append((first, last))
    count = sum(last - first + 1 for first, last in ranges)
    if count > MAX_BATCH_SEEDS:
        raise ValueError(f"seeds {text!r} makes {count:,} seeds; one batch runs at most "
                         f"{MAX_BATCH_SEEDS:,}")
    seeds = [s for first, last in ranges for s in range(first, last + 1)]
    repeated = sorted(s for s, n in collections.Counter(seeds).items() if n > 1)
    if repeated:
        raise ValueError(f"seeds {text!r} lists {repeated} twice")
    return seeds


class SeedBatch:
    """The runs of one batch; create with `SeedBatch.start` or `SeedBatch.resume`, then
    `run` to the end (see the module docstring)."""

    def __init__(self, runs: list[ContinualRun]):
        self.runs = runs
        self.batched = runs[0].spec.curriculum.backend == "jax"
        self._pending = [r for r in runs
                         if not (r.complete and r.dir.spec().get("status") == "complete")]
        self._start = time.perf_counter()
        self._base_wall = {id(r): r.wall_s for r in self._pending}
        self._memory: MemoryMonitor | None = None

    @classmethod
    def start(cls, spec: RunSpec, seeds: Sequence[int], paths: Sequence[str | Path],
              progress: Progress | None = None, *, tracking: Tracking | None = None
              ) -> SeedBatch:
        """New runs of ``spec`` with each of ``seeds`` (its own seed is ignored), seed i in
        ``paths[i]``; ``progress`` shows the first seed (and every seed's notes);
        ``tracking``: each seed's external trackers (`telapa.continual.tracking`)."""
        if len(paths) != len(seeds):
            raise ValueError(f"a batch needs one path per seed; got seeds {list(seeds)} and "
                             f"{len(paths)} paths")
        return cls.open([(dataclasses.replace(spec, seed=s), p) for s, p in
                         zip(seeds, paths, strict=True)], cls.shared_progress(progress, seeds),
                        tracking=tracking)

    @classmethod
    def resume(cls, paths: Sequence[str | Path], progress: Progress | None = None, *,
               tracking: Tracking | None = None) -> SeedBatch:
        """Continues the runs in ``paths`` (killed batch members, or separate runs of one
        method, curriculum and settings with different seeds), each from its own latest
        checkpoint."""
        seeds = [RunSpec.stored(p).seed for p in paths]
        return cls.open([(None, p) for p in paths], cls.shared_progress(progress, seeds),
                        tracking=tracking)

    @staticmethod
    def shared_progress(progress: Progress | None, seeds: Sequence[int]) -> list[Progress]:
        """One sink for a whole batch: the first seed's bars, every seed's notes."""
        sink = progress or SilentProgress()
        return [_SeedProgress(sink, seed, lead=i == 0) for i, seed in enumerate(seeds)]

    @classmethod
    def open(cls, entries: Sequence[tuple[RunSpec | None, str | Path]],
             progress: Sequence[Progress], *, tracking: Tracking | None = None) -> SeedBatch:
        """A batch of the runs ``(spec, path)``: resumed where ``path`` holds a run (with
        its stored spec; ``spec`` may then be None), else started with ``spec``; seed i
        reports to ``progress[i]``. The runs must be distinct seeds of one method,
        curriculum and settings (`RunDirError` otherwise, before any run is opened), and
        fit in this machine's memory together (`check_memory`: `ConfigError`)."""
        specs = []
        for spec, path in entries:
            if RunDir(path).exists():
                spec = RunSpec.stored(path)
            elif spec is None:
                raise RunDirError(f"{path} holds no run to resume")
            specs.append(spec)
        key = [(s.method, s.curriculum, s.bound().config) for s in specs]
        for (_, path), same in zip(entries, key, strict=True):
            if same != key[0]:
                raise RunDirError(f"{path} is not a run of the same method, curriculum and "
                                  f"settings as {entries[0][1]}; a batch runs seeds of one run")
        seeds = [s.seed for s in specs]
        if len(set(seeds)) != len(seeds):
            raise RunDirError(f"a batch needs distinct seeds, got {seeds}")
        check_memory(specs[0].curriculum, specs[0].method, specs[0].config,
                     seeds=len(specs), source=f"the batch (preset {specs[0].preset})")
        jax_backend = specs[0].curriculum.backend == "jax"
        agents: dict[Any, Agent] | None = {} if jax_backend else None
        runs: list[ContinualRun] = []
        try:
            for (spec, path), sink in zip(entries, progress, strict=True):
                if RunDir(path).exists():
                    runs.append(ContinualRun.resume(path, sink, agents=agents,
                                                    tracking=tracking))
                else:
                    runs.append(ContinualRun.start(spec, path, sink, agents=agents,
                                                   tracking=tracking))
        except BaseException:
            for run in runs:
                run.tracker.close("stopped")
                run.dir.unlock()
            raise
        return cls(runs)

    # --- the loop -------------------------------------------------------------------

    def run(self) -> list[dict[str, Any]]:
        """Runs every seed to the end; returns each seed's metrics (seed order)."""
        try:
            if not self.batched:
                return [run.run() for run in self.runs]
            return self._run_batched()
        finally:
            for run in self.runs:
                run.tracker.close("stopped")  # no-op for the runs that finished
                run.dir.unlock()

    def _run_batched(self) -> list[dict[str, Any]]:
        self._start = time.perf_counter()
        for run in self._pending:
            run.segments += 1
        peak = max([r.peak_rss for r in self._pending], default=0)
        with MemoryMonitor(initial_peak_bytes=peak) as self._memory:
            while self.step():
                # a stop dropped inside a callback, or one asked for at a phase boundary (its
                # checkpoint committed): telapa.io.stop
                raise_pending(boundary=True)
        for run in self._pending:
            run.finish()
        return [run.metrics() for run in self.runs]

    def _clock(self, run: ContinualRun):
        """``run``'s wall seconds (its share of the batch's) and the peak memory."""
        def clock() -> tuple[float, int]:
            share = (time.perf_counter() - self._start) / len(self._pending)
            peak = self._memory.peak_bytes if self._memory is not None else 0
            return self._base_wall[id(run)] + share, peak
        return clock

    def step(self) -> bool:
        """Runs the earliest pending phase for every seed that stands at it (one batched
        call for a chunk on jax, else seed after seed) and commits their checkpoints;
        False when every seed is complete."""
        waiting = [r for r in self._pending if not r.complete]
        if not waiting:
            return False
        lead = min(r.next_phase for r in waiting)
        group = [r for r in waiting if r.next_phase == lead]
        phase = group[0].phases[lead]
        if self.batched:
            self._batched_phase(group, phase)
            return True
        for run in group:
            try:
                run.step(self._clock(run))
            except RunError as err:
                raise RunError(f"seed {run.spec.seed}, {err}") from err
        return True

    def _batched_phase(self, group: list[ContinualRun], phase: Phase) -> None:
        """The phase ``phase`` of every run in ``group`` at once, padded to the batch's
        size (`telapa.continual.runner`'s phase functions, see the module docstring),
        then their checkpoints."""
        size = len(self.runs)
        try:
            if phase.kind == "chunk":
                train_chunk(group, phase, size=size)
            elif phase.kind == "start":
                start_visit(group, phase, size=size)
            elif phase.kind == "end":
                end_visit(group, phase)
            else:
                final_evaluation(group, size=size)
        except BatchMemberError as err:
            run = group[err.member]
            raise RunError(f"seed {run.spec.seed}, {phase.describe(run.visits)}: {err.error}"
                           ) from err
        except FloatingPointError as err:
            seeds = ", ".join(str(run.spec.seed) for run in group)
            raise RunError(f"seeds {seeds}, {phase.describe(group[0].visits)}: {err}"
                           ) from err
        for run in group:
            run.commit_phase(self._clock(run))


__all__ = ["SeedBatch", "parse_seeds"]
