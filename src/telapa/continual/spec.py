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
from dataclasses import dataclass
from typing import Any

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

    def bound(self) -> RunSpec:
        """This spec with its settings bound to its curriculum and method: the env
        family's latent feature dimension D written in (`bind_env_family`: `ConfigError`
        for a curriculum of several families or a preset that sets another D) and a
        plug-in method's settings section written out (`bind_method`). Idempotent."""
        config = bind_method(bind_env_family(
            self.config, list(self.curriculum.task_ids().values()),
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


def resolve_spec(spec: RunSpec) -> RunSpec:
    """``spec`` made ready for a new run: bound (`RunSpec.bound`) and checked
    (`RunSpec.check_budgets`: whole PPO calls, evaluation counts, this machine's memory).
    Raises `ConfigError` naming what is wrong and where, before anything is written."""
    spec = spec.bound()
    spec.check_budgets()
    return spec


__all__ = ["SEED_LIMIT", "RunSpec", "resolve_spec"]
