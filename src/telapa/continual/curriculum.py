"""Curricula as data: which tasks a continual run visits, in which order, for how long.

The paper's curricula ship as ``configs/curricula/<name>.yaml`` (``primary``, ``reverse``,
``scrambled``, ``long``, plus ``smoke`` for fast tests); ``load_curriculum(name)`` loads one
by name, ``load_curriculum(path)`` loads any YAML file. A user curriculum::

    name: my-ladder
    backend: jax               # or gymnasium (any registered gymnasium id) or native;
                               # omitted: MiniGrid jax, MuJoCo native, others gymnasium
    tasks:
      A: MiniGrid-Empty-5x5-v0 # a plain id ...
      B:                       # ... or a task spec
        env_id: MiniGrid-DoorKey-5x5-v0
        options: {observe_mission: false}
        steps: 200000          # this task's budget per visit
    order: [A, B]
    cycles: 3                  # A B A' B' A'' B''
    steps_per_visit: 100000    # tasks without ``steps``; omit to use the run preset's budget

Options are the env family's task parameters (`telapa.envs.family`), checked when the
curriculum is loaded: MiniGrid ``observe_mission``; MuJoCo (``backend: native``, or the
reference ``gymnasium``) ``friction``, the friction regime (``{env_id: Hopper-v5,
options: {friction: 0.75}}``, see ``configs/curricula/hopper.yaml``). All tasks of a
curriculum belong to one family.

An env id may name the module that registers it, ``my_package.envs:Ring-v0``: the module
is imported when the curriculum is read (`telapa.plugins`). A task's ``success`` sets
the competence target of its env (`Success`), in place of its family's: MiniGrid and
the generic family count an episode with a positive return as a success (SR = mean_e
[R_e > 0]), MuJoCo scores the normalized return SR~ = clip(mean_e R_e / R*, 0, 1)::

    tasks:
      A: {env_id: CartPole-v1, success: {return_at_least: 195}}     # SR: share of R >= 195
      B: {env_id: Pendulum-v1, success: {normalized_return: {low: -1200, high: -200}}}

Tags are the keys of ``tasks``; ``order`` may repeat them. The n-th visit of task ``A`` is
tagged ``A`` followed by n-1 primes (``A``, ``A'``, ``A''``). Every env id is checked on the
curriculum's backend when it is loaded, before any work starts; on the gymnasium backend
its env must have a time limit (`telapa.envs.registry.check_time_limit`), on the native
backend one env is made with the task's options.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    Field,
    FiniteFloat,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from telapa.config import (
    CONFIG_DIR,
    EnvSteps,
    StrictModel,
    read_yaml,
    resolve_named,
    validate,
)
from telapa.envs.base import Backend
from telapa.envs.family import Competence, NormalizedReturn, ReturnAtLeast
from telapa.envs.registry import (
    check_env_id,
    check_time_limit,
    default_backend,
    family_of,
    make,
)
from telapa.plugins import import_env_module

SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")
"""Curriculum names (and other names that become one path component)."""
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,39}")
"""Task tags: they name files of a run directory (``train/NN-TAG.csv``), so one plain
path component (a revisit's primes are added by the curriculum)."""
MAX_CYCLES = 1_000
"""Repetitions of a curriculum's ``order`` (the paper: 3)."""
MAX_VISITS = 10_000
"""Visits of a whole curriculum (the paper: 15 to 25)."""
CURRICULUM_DIR = CONFIG_DIR / "curricula"
"""Where the named curricula live: ``configs/curricula/<name>.yaml``."""


class ReturnRange(StrictModel):
    """The returns of no competence (``low``, R_0) and of full competence (``high``, R*)."""

    low: FiniteFloat = 0.0
    high: FiniteFloat

    @model_validator(mode="after")
    def _ordered(self) -> ReturnRange:
        if not self.high > self.low:
            raise ValueError(f"high ({self.high}) must be greater than low ({self.low})")
        return self


class Success(StrictModel):
    """A task's competence target, in place of its env family's (exactly one form):

    * ``return_at_least: X``: SR = mean_e [R_e >= X], the share of evaluation episodes
      whose return reaches X (`telapa.envs.family.ReturnAtLeast`);
    * ``normalized_return: {low: R_0, high: R*}`` (or ``normalized_return: R*``, with
      R_0 = 0): SR~ = clip((mean_e R_e - R_0) / (R* - R_0), 0, 1)
      (`telapa.envs.family.NormalizedReturn`).

    The competence drives everything the family's would: gates, anchors, probes, every
    metric (SR, TTT, BWT, ...) and PPO's training success rate; the return stays the
    fitness."""

    return_at_least: FiniteFloat | None = None
    normalized_return: ReturnRange | None = None

    @field_validator("normalized_return", mode="before")
    @classmethod
    def _reference_only(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return {"high": value}
        return value

    @model_validator(mode="after")
    def _one_form(self) -> Success:
        given = [k for k in ("return_at_least", "normalized_return")
                 if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of return_at_least: X or normalized_return: "
                             f"{{low: R_0, high: R*}} (got {', '.join(given) or 'neither'})")
        return self

    @model_serializer(mode="wrap")
    def _given_form_only(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) \
            else data

    def competence(self) -> Competence:
        """The `Competence` score this target defines."""
        if self.return_at_least is not None:
            return ReturnAtLeast(self.return_at_least)
        target = self.normalized_return
        return NormalizedReturn(target.high, low=target.low)


class TaskSpec(StrictModel):
    """One task family: an env id, options for ``telapa.envs.make``, an optional budget
    and an optional competence target."""

    env_id: str
    options: dict[str, Any] = Field(default_factory=dict)
    steps: EnvSteps | None = None
    """Env steps per visit of this task; overrides `Curriculum.steps_per_visit`; at most
    `MAX_ENV_STEPS`."""
    success: Success | None = None
    """The competence target of this task (`Success`); None: its env family's."""

    @model_serializer(mode="wrap")
    def _without_default_success(self, handler: SerializerFunctionWrapHandler) -> Any:
        """No ``success: null``: a curriculum without targets dumps as it did before
        targets existed (a sweep's ``cells.json`` and a run's ``curriculum.yaml``)."""
        data = handler(self)
        if self.success is None and isinstance(data, dict):
            data.pop("success", None)
        return data


@dataclass(frozen=True)
class Visit:
    """One entry of a curriculum's sequence."""

    index: int
    """0-based position in the whole sequence."""
    task: str
    """The task's tag in ``Curriculum.tasks``, e.g. ``"A"``."""
    tag: str
    """``task`` plus one prime per earlier visit of it: ``"A"``, ``"A'"``, ``"A''"``."""
    env_id: str
    options: dict[str, Any]
    cycle: int
    """Number of earlier visits of this task."""
    steps: int | None
    """Env steps for this visit; None: use the run preset's budget."""
    competence: Competence | None = None
    """The task's competence score (its ``success``); None: its env family's."""

    def scored_by(self) -> Competence:
        """What scores this visit's SRs: its task's ``success`` target, else its env
        family's competence (`scored_by`)."""
        return scored_by(self.env_id, self.competence)


class Curriculum(StrictModel):
    """A sequence of task visits: ``order`` repeated ``cycles`` times."""


    name: str
    backend: Backend = "jax"
    """Where the tasks' envs run; omitted: the backend their ids share by
    `telapa.envs.registry.default_backend` on a CPU, the same on every machine (MiniGrid
    ``jax``, MuJoCo ``native``, other gymnasium ids ``gymnasium``; MJX is asked for with
    ``backend: jax``), else ``jax``. A run records it in its ``curriculum.yaml``."""
    tasks: dict[str, TaskSpec]
    order: list[str]
    cycles: Annotated[int, Field(gt=0, le=MAX_CYCLES)] = 1
    """Times ``order`` is repeated (at most `MAX_CYCLES`; the whole sequence holds at most
    `MAX_VISITS` visits)."""
    steps_per_visit: EnvSteps | None = None
    """Env steps per visit of the tasks without ``steps`` (at most `MAX_ENV_STEPS`)."""
    description: str = ""

    @model_validator(mode="before")
    @classmethod
    def _default_backend(cls, data: Any) -> Any:
        """``backend`` when the file gives none (see the field)."""
        if not (isinstance(data, dict) and "backend" not in data
                and isinstance(data.get("tasks"), dict) and data["tasks"]):
            return data
        ids = [spec.get("env_id") if isinstance(spec, dict) else spec
               for spec in data["tasks"].values()]
        if not all(isinstance(i, str) for i in ids):
            return data  # the tasks' own validation names what is wrong
        try:
            backends = {default_backend(i, platform="cpu") for i in ids}
        except ValueError:
            return data  # an id whose module does not import: named by the tasks' check
        return {**data, "backend": backends.pop()} if len(backends) == 1 else data

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        """The name becomes part of run directory names: one safe path component."""
        if not SAFE_NAME.fullmatch(name):
            raise ValueError(
                f"name {name!r} must be a plain file name: letters, digits, '.', '_' and '-', "
                "not starting with '.' or '-' (it names run directories)"
            )
        return name

    @field_validator("tasks", mode="before")
    @classmethod
    def _plain_ids(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: {"env_id": v} if isinstance(v, str) else v for k, v in value.items()}
        return value

    @field_validator("tasks")
    @classmethod
    def _check_tasks(cls, tasks: dict[str, TaskSpec], info: ValidationInfo) -> dict[str, TaskSpec]:
        if not tasks:
            raise ValueError("no tasks defined")
        for tag in tasks:
            if not TAG.fullmatch(tag):
                raise ValueError(f"task tag {tag!r} must be letters, digits, '_', '.' and '-' "
                                 "(not starting with '.' or '-', no prime ', at most 40 "
                                 "characters): it names files of the run directory")
        backend = info.data.get("backend")
        if backend is not None:
            for tag, spec in tasks.items():
                try:
                    check_env_id(spec.env_id, backend)
                    family_of(spec.env_id).check_options(import_env_module(spec.env_id),
                                                         spec.options)
                    if backend == "gymnasium":
                        check_time_limit(spec.env_id, spec.options)
                    elif backend == "native":  # one env, made now, names a bad option
                        make(spec.env_id, "native", num_envs=1, **spec.options).close()
                except ValueError as err:
                    raise ValueError(f"task {tag!r}: {err}") from None
        return tasks

    @field_validator("order")
    @classmethod
    def _check_order(cls, order: list[str], info: ValidationInfo) -> list[str]:
        if not order:
            raise ValueError("order is empty; list at least one task tag")
        tasks = info.data.get("tasks")
        if tasks is not None:
            for tag in order:
                if tag not in tasks:
                    raise ValueError(
                        f"order names undefined task {tag!r}; defined: {', '.join(tasks)}"
                    )
        return order

    @model_validator(mode="after")
    def _visits_bounded(self) -> Curriculum:
        visits = len(self.order) * self.cycles
        if visits > MAX_VISITS:
            raise ValueError(f"order x cycles makes {visits:,} visits; at most {MAX_VISITS:,}")
        return self

    def visits(self) -> list[Visit]:
        """The whole sequence, ``order`` repeated ``cycles`` times."""
        seen: dict[str, int] = {}
        visits = []
        for index, task in enumerate(self.order * self.cycles):
            spec = self.tasks[task]
            cycle = seen.get(task, 0)
            seen[task] = cycle + 1
            steps = spec.steps if spec.steps is not None else self.steps_per_visit
            tag = task + "'" * cycle
            competence = spec.success.competence() if spec.success is not None else None
            visits.append(Visit(index, task, tag, spec.env_id, dict(spec.options), cycle, steps,
                                competence))
        return visits

    def score_symbol(self) -> str:
        """``"SR"`` where every task's competence counts successes (`Competence.counts`),
        else ``"SR~"`` (a graded score: MuJoCo's normalized return), for what the command
        line prints."""
        counts = (scored_by(spec.env_id, spec.success and spec.success.competence()).counts
                  for spec in self.tasks.values())
        return "SR" if all(counts) else "SR~"

    def task_ids(self) -> dict[str, str]:
        """Task tag -> env id, in first-visit order (tasks never visited are left out)."""
        return {tag: self.tasks[tag].env_id for tag in dict.fromkeys(self.order)}


def scored_by(env_id: str, competence: Competence | None = None) -> Competence:
    """What scores a task's SRs: ``competence`` (its ``success`` target) or, None, its env
    family's (`EnvFamily.competence`)."""
    return competence or family_of(env_id).competence(import_env_module(env_id))


def parse_curriculum(data: dict[str, Any], source: str = "<dict>") -> Curriculum:
    """Validates a dict (as read from YAML) into a `Curriculum`; errors name key and source."""
    return validate(Curriculum, data, source)


def on_backend(curriculum: Curriculum, backend: str, source: str) -> Curriculum:
    """``curriculum`` with its tasks' envs on ``backend`` (``telapa run --backend``),
    validated as a file that gave it would be: a task whose id has no port there, or an
    option that backend refuses, is a `ConfigError` naming the task and ``source``."""
    if backend == curriculum.backend:
        return curriculum
    return parse_curriculum({**curriculum.model_dump(), "backend": backend}, source)


def curriculum_names() -> list[str]:
    """Names of the curricula in ``configs/curricula/``."""
    return sorted(p.stem for p in CURRICULUM_DIR.glob("*.yaml"))


def load_curriculum(name_or_path: str | Path) -> Curriculum:
    """Loads ``configs/curricula/<name>.yaml``, or a YAML file when given a path
    (a `Path`, or a string with a path separator or a ``.yaml``/``.yml`` suffix)."""
    path = resolve_named(name_or_path, CURRICULUM_DIR, "curriculum")
    return parse_curriculum(read_yaml(path, "curriculum"), source=str(path))
