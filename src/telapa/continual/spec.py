"""What defines a run (`RunSpec`), and the one way to make a spec ready to run
(`resolve_spec`): the settings bound to the curriculum's env family and the method, then
every budget checked, before any work starts.

Every place that makes a run from parts (``telapa run``, a sweep's cells, a batch of
seeds, `telapa.continual.runner.ContinualRun.start`) goes through `resolve_spec`; a run
read back from its directory is bound again (`RunSpec.bound`) but not re-checked, as it
was checked when it started.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from telapa.config import ConfigError
from telapa.continual.curriculum import Curriculum, Visit
from telapa.continual.memory import check_memory
from telapa.continual.preset import (
    MAX_EVALUATIONS_PER_RUN,
    RunConfig,
    bind_env_family,
    check_whole_calls,
    evaluations_per_visit,
)
from telapa.continual.registry import bind_method
from telapa.continual.rundir import RunDir, RunDirError


@dataclass(frozen=True)
class Phase:
    """One step of a run, checkpointed after it: a visit's ``start``, its ``chunk``
    number ``chunk``, its ``end``, or the ``final`` evaluation."""

    kind: Literal["start", "chunk", "end", "final"]
    visit: int = -1
    chunk: int = 0

    def describe(self, visits: list[Visit]) -> str:
        if self.kind == "final":
            return "final evaluation"
        v = visits[self.visit]
        where = f"visit {self.visit} ({v.tag}, {v.env_id})"
        return f"{where}, chunk {self.chunk}" if self.kind == "chunk" else f"{where}, {self.kind}"


SEED_LIMIT = 2**32
"""Seeds are 0 <= seed < 2^32 (`jax.random.key` takes them modulo 2^32: a negative or
larger seed would silently collide with another one)."""


@dataclass(frozen=True)
class RunSpec:
    """What defines a run: it is deterministic given these."""

    curriculum: Curriculum
    method: str
    seed: int
    config: RunConfig
    preset: str = "custom"
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The ``--set`` settings (dotted key -> value) ``config`` has over ``preset``, as
    recorded in ``run.json`` (``config`` already holds them)."""
    imports: tuple[str, ...] = ()
    """Modules imported before the run's curriculum and settings are read (``--import``:
    its plug-ins), as recorded in ``run.json``; every later reader of the run directory
    imports them again (`RunDir.import_plugins`)."""

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not 0 <= self.seed < SEED_LIMIT:
            raise ConfigError(f"seed {self.seed!r} is out of range: use 0 <= seed < 2^32")

    @classmethod
    def stored(cls, path: str | Path) -> RunSpec:
        """The spec a run directory was started with (its run.json, config.yaml and
        curriculum.yaml, its plug-ins imported again); `RunDirError` names what is wrong."""
        run_dir = RunDir(path)
        meta = run_dir.manifest()
        try:
            return cls(curriculum=run_dir.curriculum(), method=meta["method"],
                       seed=int(meta["seed"]), config=run_dir.config(),
                       preset=meta.get("preset", "custom"),
                       overrides=dict(meta.get("overrides") or {}),
                       imports=run_dir.import_plugins())
        except ConfigError as err:
            raise RunDirError(f"{run_dir.path}: {err}") from None

    def identity(self) -> dict[str, Any]:
        """Curriculum, method, seed, preset and overrides: what names the run (trackers)."""
        return {"curriculum": self.curriculum.name, "method": self.method, "seed": self.seed,
                "preset": self.preset, "overrides": self.overrides}

    def manifest(self) -> dict[str, Any]:
        """What ``run.json`` records of the spec (besides versions and code): its identity,
        the ``--import`` modules and the backend."""
        return {**self.identity(), **({"imports": list(self.imports)} if self.imports else {}),
                "backend": self.curriculum.backend}

    def bound(self) -> RunSpec:
        """This spec with its settings bound to its curriculum and method: the env
        family's latent feature dimension D written in (`bind_env_family`: `ConfigError`
        for a curriculum of several families or a preset that sets another D) and a
        plug-in method's settings section written out (`bind_method`). Idempotent."""
        config = bind_method(bind_env_family(
            self.config, {tag: (self.curriculum.tasks[tag].env_id,
                                self.curriculum.tasks[tag].options)
                          for tag in self.curriculum.task_ids()},
            f"curriculum {self.curriculum.name!r}"), self.method)
        return dataclasses.replace(self, config=config)

    def check_budgets(self) -> None:
        """`ConfigError` unless every budget (the preset's ``steps_per_visit`` and
        ``eval_every``, each task's ``steps``) is a whole number of PPO calls: a budget is
        trained exactly, never rounded up; and unless the evaluations stay within
        `MAX_EVALUATIONS_PER_VISIT` per visit and `MAX_EVALUATIONS_PER_RUN` in all; and
        unless the run fits in this machine's memory (`check_memory`: sizes bounded one
        by one can still multiply past it). Checked before a new run starts."""
        call = self.config.call_steps
        try:
            self.config.check_budgets()
            evaluations = 0
            for v in self.curriculum.visits():
                name = f"curriculum {self.curriculum.name!r} task {v.task!r} steps"
                if v.steps is not None:
                    check_whole_calls(name, v.steps, call)
                evaluations += evaluations_per_visit(self.budget(v), self.config.eval_every,
                                                     name if v.steps else "steps_per_visit")
            if evaluations > MAX_EVALUATIONS_PER_RUN:
                raise ValueError(f"curriculum {self.curriculum.name!r} makes {evaluations:,} "
                                 f"evaluations in all; at most {MAX_EVALUATIONS_PER_RUN:,} "
                                 "(raise eval_every)")
        except ValueError as err:
            raise ConfigError(str(err)) from None
        check_memory(self.curriculum, self.method, self.config,
                     source=f"the run (preset {self.preset})")

    def budget(self, visit: Visit) -> int:
        return visit.steps or self.config.steps_per_visit

    def phases(self) -> list[Phase]:
        """The run's phases in order: per visit ``start``, its chunks (one per
        ``eval_every`` env steps of its budget, the last one shorter), ``end``; then
        ``final``."""
        phases = []
        for v in self.curriculum.visits():
            phases.append(Phase("start", v.index))
            n_chunks = math.ceil(self.budget(v) / self.config.eval_every)
            phases.extend(Phase("chunk", v.index, i) for i in range(n_chunks))
            phases.append(Phase("end", v.index))
        phases.append(Phase("final"))
        return phases

    def chunk_span(self, visit: Visit, chunk: int) -> tuple[int, int]:
        """``(done, steps)`` of chunk ``chunk`` of ``visit``: the visit's env steps trained
        before it, and the steps it trains: up to ``min((chunk + 1) * eval_every,
        budget)``, at least one PPO iteration, in whole iterations (host arithmetic: the
        step count of the state on the device is never read)."""
        budget = self.budget(visit)
        iteration = self.config.train.ppo.rollout_size
        done = 0
        for i in range(chunk + 1):
            target = min((i + 1) * self.config.eval_every, budget)
            steps = -(-max(target - done, 1) // iteration) * iteration
            if i == chunk:
                return done, steps
            done += steps
        raise AssertionError("unreachable")  # pragma: no cover


def resolve_spec(spec: RunSpec) -> RunSpec:
    """``spec`` made ready for a new run: bound (`RunSpec.bound`) and checked
    (`RunSpec.check_budgets`: whole PPO calls, evaluation counts, this machine's memory).
    Raises `ConfigError` naming what is wrong and where, before anything is written."""
    spec = spec.bound()
    spec.check_budgets()
    return spec


__all__ = ["SEED_LIMIT", "Phase", "RunSpec", "resolve_spec"]
