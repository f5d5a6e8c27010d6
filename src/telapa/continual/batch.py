"""Several seeds of one method on one curriculum in one process (``telapa run --seeds``).

Every seed is a complete `ContinualRun` in its own run directory, with the checkpoints,
tables and metrics a separate ``telapa run --seed S`` writes (``telapa metrics``,
reports and ``--resume`` treat it as any other run). What the seeds share:

* the static agents (one per env of the curriculum), so every jitted function is
  compiled once for the batch;
* on the jax backend, every phase as one step of the batch, through the one loop every
  run goes through (`telapa.continual.driver`; a single run is a batch of one): a chunk
  is one compiled program (`train_chunk`: a ``lax.scan`` over the chunk's PPO
  iterations ``vmap``ped over the seeds, then one population evaluation of the S
  policies) whose results reach the host
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
loop always advances the seeds at the earliest phase (`Driver.step`), so seeds that lag catch
up first and the batch trains together again once they reach the others. A chunk of
fewer seeds than the batch holds is padded to the batch's size with copies of one of
them (results discarded), so every chunk runs the same compiled program and a resumed
batch gives exactly the results of an uninterrupted one (when it is resumed with the
same seeds).

Accounting. A seed's ``wall_s`` is its share of the batch's wall time (elapsed seconds
over the number of seeds the batch runs) and its ``train`` phase time the same share of
each batched chunk; its peak memory is the process's.

Host backends. Host-stepped envs (gymnasium, native) cannot be ``vmap``ped and their
`TrainState` is tied to its agent's envs: on such a curriculum the seeds run one after
the other, each a batch of one with its own agents, as separate runs would.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from telapa.config import ascii_int
from telapa.continual.driver import Driver
from telapa.continual.memory import check_memory
from telapa.continual.progress import Progress, SilentProgress
from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.runner import ContinualRun
from telapa.continual.spec import RunSpec
from telapa.continual.tracking import Tracking


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
                         if not (r.complete and r.dir.manifest().get("status") == "complete")]
        self._drivers = ([Driver(self._pending, size=len(runs))] if self.batched else
                         [Driver([run], size=1) for run in self._pending])
        """The loops (`telapa.continual.driver`): on the jax backend one over the seeds
        together, on a host backend one per seed, run one after the other."""

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
        runs: list[ContinualRun] = []
        try:
            for (spec, path), sink in zip(entries, progress, strict=True):
                if RunDir(path).exists():
                    runs.append(ContinualRun.resume(path, sink, tracking=tracking))
                else:
                    runs.append(ContinualRun.start(spec, path, sink, tracking=tracking))
        except BaseException:
            for run in runs:
                run.tracker.close("stopped")
                run.dir.unlock()
            raise
        return cls(runs)

    # --- the loop -------------------------------------------------------------------

    def run(self) -> list[dict[str, Any]]:
        """Runs every seed to the end (see `_drivers`); returns each seed's metrics (seed
        order)."""
        try:
            for driver in self._drivers:
                driver.drive()
            return [run.metrics() for run in self.runs]
        finally:
            for run in self.runs:
                run.tracker.close("stopped")  # no-op for the runs that finished
                run.dir.unlock()

    def step(self) -> bool:
        """Runs the batch's next phase (`Driver.step`: the earliest phase of the seeds
        that stand at it; on a host backend, of the first seed not complete); False when
        every seed is complete."""
        return any(driver.step() for driver in self._drivers)


__all__ = ["SeedBatch", "parse_seeds"]
