"""The sweep file and its cells: what `load_sweep` validates before any run starts.

Cells are the product of curricula x methods x grid values x seeds, in file order with the
seed varying fastest, or (``order: seed``) seed-major. A ``methods.X.*`` grid or override
key only applies to the methods that read section X (`continual.registry.method_section`,
plug-in methods' own sections included). A string among the grid's and the overrides'
values is read as ``--set`` reads a value (`telapa.overrides.parse_value`: ``1e-3`` is a
number there, where PyYAML reads it as a string). Two grid points of a method that give
the same run (equal settings, e.g. ``[2, 2.0]``) and two cells that would share a name
(`cell_name`) are refused, before any run starts.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from telapa.config import (
    ConfigError,
    StrictModel,
    close_matches,
    read_yaml,
    resolve_named,
    validate,
)
from telapa.continual.curriculum import CURRICULUM_DIR, SAFE_NAME, Curriculum, load_curriculum
from telapa.continual.memory import check_memory
from telapa.continual.preset import (
    RUN_PRESET_DIR,
    MethodsConfig,
    RunConfig,
    bind_env_family,
    parse_run_config,
    plugin_section,
    read_run_preset,
    with_sets,
)
from telapa.overrides import parse_value

MAX_SEEDS = 10_000
"""Seeds of one sweep (the paper: 20)."""
MAX_CELLS = 10_000
"""Cells of one sweep (the paper's largest grid: 7 x 4 x 20 = 560). Where it works: a
10,000-cell sweep (10 methods x 1,000 seeds) validated in 7.5 s and its directory was
prepared in 8 s, with a 42 MB ``cells.json`` and 0.68 GB peak memory (2 cores, shared);
at the 100,000 this once allowed, a probe measured 24 s of validation, a 430 MB
``cells.json``, 3.8 GB in the coordinator and about 20 minutes before a cell started."""
MAX_CELL_NAME_BYTES = 255 - len(".NAME.json.4194304.01234567.tmp") + len("NAME")
"""The longest cell name (UTF-8 bytes): a cell's name names files, ``cells/NAME/``,
``status/NAME.json`` and the temporary an atomic write of it uses,
``.NAME.json.PID.TOKEN.tmp`` (the longest, with a 7-digit process id), and a file name
holds at most 255 bytes."""


SLURM_NAME = re.compile(r"[A-Za-z0-9_.,:+-]+")
"""A partition, account or QOS name as ``sbatch`` takes it (no spaces, no quotes)."""
SLURM_TIME = re.compile(r"(?:(?P<d>\d+)-)?(?:(?P<h>\d+):)?(?P<m>\d+)(?::(?P<s>\d+))?")
SLURM_MEMORY = re.compile(r"\d+[KMGT]?")


def slurm_minutes(value: int | str) -> int:
    """A time limit as whole minutes (at least 1): a count of minutes, or Slurm's
    ``[D-]HH:MM:SS``, ``D-HH[:MM]``, ``HH:MM:SS`` or ``MM[:SS]``; `ValueError` otherwise."""
    if isinstance(value, bool):
        raise ValueError("a time limit, not a boolean")
    if isinstance(value, int):
        minutes = value
    else:
        text = value.strip()
        match = SLURM_TIME.fullmatch(text)
        if match is None:
            raise ValueError(f"{value!r} is not a time limit (minutes, or [D-]HH:MM:SS)")
        d, h, m, sec = (int(match[k]) if match[k] else 0 for k in "dhms")
        if match["d"] and not match["h"] and ":" not in text:  # D-HH
            h, m = m, 0
        elif not match["d"] and match["h"] and match["s"] is None:  # MM:SS
            h, m, sec = 0, h, m
        minutes = d * 1440 + h * 60 + m + (1 if sec else 0)
    if not 1 <= minutes <= 366 * 1440:
        raise ValueError(f"{value!r}: a time limit of 1 minute to 366 days")
    return minutes


class SlurmOptions(StrictModel):
    """A sweep file's ``slurm`` section (and ``telapa sweep --backend slurm``'s options):
    what each job of the sweep's job array asks Slurm for."""

    partition: str | None = None
    time: int | str | None = None
    """The time limit of a job: minutes, or ``[D-]HH:MM:SS``; a job that reaches it stops
    at a phase boundary and is requeued (``signal_s``)."""
    cpus: int = Field(default=1, ge=1, le=1024)
    """CPUs of a job (``--cpus-per-task``), and its threads."""
    mem: int | str | None = None
    """Memory of a job: megabytes, or a number with K, M, G or T (``--mem``)."""
    gpus: int = Field(default=0, ge=0, le=64)
    account: str | None = None
    qos: str | None = None
    signal_s: int = Field(default=120, ge=10, le=3600)
    """Seconds before the time limit that Slurm warns a job (``--signal=USR2@N``): it stops
    at its next phase boundary and is requeued; longer than the longest phase."""
    parallel: int = Field(default=256, ge=1, le=100_000)
    """Jobs of the array running at once, at most (``--array=...%N``)."""

    @field_validator("partition", "account", "qos")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not SLURM_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a Slurm name (letters, digits, _.,:+-)")
        return value

    @field_validator("time")
    @classmethod
    def _time(cls, value: int | str | None) -> int | str | None:
        if value is not None:
            slurm_minutes(value)
        return value

    @field_validator("mem")
    @classmethod
    def _memory(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, bool) or (isinstance(value, int) and value < 1) or (
                isinstance(value, str) and not SLURM_MEMORY.fullmatch(value.strip())):
            raise ValueError(f"{value!r} is not an amount of memory (megabytes, or e.g. 4G)")
        return value

    @model_validator(mode="after")
    def _warning_before_limit(self) -> SlurmOptions:
        if self.minutes is not None and self.signal_s >= self.minutes * 60:
            raise ValueError(f"signal_s={self.signal_s} is not shorter than the time limit "
                             f"({self.minutes} min): the warning would come at the start")
        return self

    @property
    def minutes(self) -> int | None:
        """The time limit in minutes (None: the partition's default)."""
        return None if self.time is None else slurm_minutes(self.time)

    @property
    def memory(self) -> str | None:
        """``--mem``'s value (None: the partition's default)."""
        return None if self.mem is None else str(self.mem).strip()


class SweepFile(StrictModel):
    """The schema of a sweep file (see `telapa.continual.sweep`)."""

    name: str | None = None
    preset: str = "quick"
    curricula: list[str] = Field(min_length=1)
    methods: list[str] = Field(min_length=1)
    seeds: int | list[int] = 1
    """A count (seeds 0..N-1) or a list of distinct seeds; at most `MAX_SEEDS`."""
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    """Dotted key -> the values to try; `load_sweep` reads a string among them as
    ``--set`` reads a value (`_as_set_value`)."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Dotted key -> one value for every cell, its strings read as the grid's."""
    order: Literal["method", "seed"] = "method"
    slurm: SlurmOptions | None = None
    """What ``--backend slurm`` asks for each job (the command line's options override it);
    not part of the cells: the same sweep runs on any backend."""

    @field_validator("seeds", mode="before")
    @classmethod
    def _seed_count(cls, seeds: Any) -> Any:
        """At most `MAX_SEEDS`, checked before a count is expanded or a list parsed."""
        count = seeds if isinstance(seeds, int) and not isinstance(seeds, bool) else (
            len(seeds) if isinstance(seeds, list) else None)
        if count is not None and not 0 < count <= MAX_SEEDS:
            raise ValueError(f"{count:,} seeds; give 1 to {MAX_SEEDS:,}")
        return seeds

    @field_validator("seeds")
    @classmethod
    def _seed_range(cls, seeds: int | list[int]) -> int | list[int]:
        values = range(seeds) if isinstance(seeds, int) else seeds
        if isinstance(seeds, list) and not seeds:
            raise ValueError("seeds is empty; give a count or at least one seed")
        bad = [s for s in values if not 0 <= s < 2**32]
        if bad:
            raise ValueError(f"seeds {bad} out of range (0 <= seed < 2^32)")
        if isinstance(seeds, list) and len(set(seeds)) != len(seeds):
            raise ValueError("seeds lists a seed twice")
        return seeds

    @field_validator("grid")
    @classmethod
    def _non_empty_grid(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in grid.items():
            if not values:
                raise ValueError(f"grid key {key!r} has no values")
        return grid

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)


@dataclass(frozen=True)
class Cell:
    """One run of a sweep."""

    name: str
    """Its run directory's name under ``DIR/cells/``."""
    curriculum: Curriculum
    method: str
    seed: int
    overrides: dict[str, Any]
    """Dotted key -> value, applied to the preset (grid values and fixed overrides)."""
    config: RunConfig
    preset: str
    runtime: dict[str, Any] = field(default_factory=dict, compare=False)
    """What a worker needs besides the cell's record, given by the command that runs the
    sweep (not in ``cells.json``: another ``--track`` is the same sweep): ``imports``,
    the modules to import before the cell is read (``--import``), and ``tracking``, the
    external trackers (``--track``: ``trackers``, ``project``)."""

    def payload(self) -> dict[str, Any]:
        """The cell as plain JSON data: what ``cells.json`` records."""
        return {"name": self.name, "method": self.method, "seed": self.seed,
                "preset": self.preset, "curriculum": self.curriculum.model_dump(mode="json"),
                "config": self.config.model_dump(mode="json")}

    def work(self) -> dict[str, Any]:
        """What a worker runs (`telapa.continual.sweep.jobs.run_job`): the `payload` and
        the `runtime` entries."""
        return {**self.payload(), **self.runtime}


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file and its cells."""

    path: Path
    name: str
    file: SweepFile
    cells: list[Cell] = field(default_factory=list)

    def cell(self, name: str) -> Cell:
        return next(c for c in self.cells if c.name == name)


def _schema_has(model: type[BaseModel], parts: list[str]) -> bool:
    """Whether ``parts`` (a dotted key split) names a setting of ``model``;
    ``train.preset`` (the PPO preset a run preset's ``train`` builds on) is one."""
    if model is RunConfig and parts == ["train", "preset"]:
        return True
    info = model.model_fields.get(parts[0])
    if info is None:
        plugin = plugin_section(parts[0]) if model is MethodsConfig else None
        return plugin is not None and (len(parts) == 1 or _schema_has(plugin, parts[1:]))
    if len(parts) == 1:
        return True
    annotation = info.annotation
    candidates = [annotation, *getattr(annotation, "__args__", ())]
    for sub in candidates:
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            return _schema_has(sub, parts[1:])
    return False


def _setting_hint(key: str) -> str:
    """`` (did you mean 'train.ppo.lr'?)`` for a dotted ``key`` that names no setting
    (`_schema_has`): the keys spelled like its first part that names nothing, among its
    section's, as ``telapa run --set`` suggests them (`close_matches`); else ""."""
    parts = key.split(".")
    model: type[BaseModel] | None = RunConfig
    for depth, part in enumerate(parts):
        if model is None:
            return ""
        info = model.model_fields.get(part)
        if info is None:
            plugin = plugin_section(part) if model is MethodsConfig else None
            if plugin is None:
                prefix = "".join(f"{p}." for p in parts[:depth])
                known = [*model.model_fields, *(["preset"] if prefix == "train." else [])]
                return close_matches(part, known, prefix=prefix)
            model = plugin
            continue
        annotation = info.annotation
        model = next((sub for sub in (annotation, *getattr(annotation, "__args__", ()))
                      if isinstance(sub, type) and issubclass(sub, BaseModel)), None)
    return ""


def _applies(key: str, method: str) -> bool:
    """A ``methods.X.*`` key only applies to the methods that read section X."""
    if not key.startswith("methods."):
        return True
    from telapa.continual.registry import method_section  # the methods load jax: on use

    return method_section(method) == key.split(".")[1]


def _short(key: str, keys: list[str]) -> str:
    parts = key.split(".")
    for n in range(1, len(parts) + 1):
        tail = ".".join(parts[-n:])
        if not any(o != key and (o == tail or o.endswith("." + tail)) for o in keys):
            return tail
    return key


def _value_text(value: Any) -> str:
    text = "none" if value is None else json.dumps(value) if isinstance(value, dict | list) \
        else str(value)
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", text)


def cell_name(curriculum: str, method: str, seed: int, overrides: dict[str, Any],
              grid_keys: list[str]) -> str:
    """``CURRICULUM-METHOD[-key=value...]-sSEED`` with the grid keys shortened to their
    last component(s) that tell them apart."""
    parts = [curriculum, method]
    for key in grid_keys:
        if key in overrides:
            parts.append(f"{_short(key, grid_keys)}={_value_text(overrides[key])}")
    parts.append(f"s{seed}")
    return "-".join(parts)


def _as_set_value(value: Any, *, source: str) -> Any:
    """``value`` (as read from a sweep file) with every string in it, at any depth of its
    lists and mappings (not the mappings' keys), read as ``--set`` reads its text
    (`parse_value`): ``"1e-3"`` -> ``0.001``, ``"true"`` -> True, ``"a/b"`` stays a
    string. So ``lr: [1e-3, 0.001]`` lists one value twice, as two ``--set`` would."""
    if isinstance(value, str):
        return parse_value(value, source)
    if isinstance(value, list):
        return [_as_set_value(v, source=source) for v in value]
    if isinstance(value, dict):
        return {k: _as_set_value(v, source=f"{source}.{k}") for k, v in value.items()}
    return value


def _given(*, keys: list[str], values: Mapping[str, Any]) -> str:
    """``values`` of ``keys`` as a sweep file gives them: one value, or a tuple of them."""
    shown = [repr(values[k]) for k in keys]
    return shown[0] if len(shown) == 1 else f"({', '.join(shown)})"


def _equal_values(*, source: str, keys: list[str], first: Mapping[str, Any],
                  second: Mapping[str, Any], what: str) -> str:
    """The message for two grid points (grid key -> value as the file gives it) that
    differ in ``keys`` yet make ``what``."""
    name = f"key {keys[0]} has" if len(keys) == 1 else f"keys {', '.join(keys)} have"
    return (f"{source}: grid {name} values {_given(keys=keys, values=first)} and "
            f"{_given(keys=keys, values=second)} that {what}")


def _name_clash(*, source: str, name: str, cell: Cell, point: Mapping[str, Any],
                curriculum: Curriculum, method: str, as_given: Mapping[str, Any]) -> str:
    """The message for a cell of ``method`` on ``curriculum`` at the grid point
    ``as_given`` whose name, ``name``, is already ``cell``'s (at ``point``)."""
    differ = [k for k in as_given if repr(point.get(k)) != repr(as_given[k])]
    if (cell.curriculum.name, cell.method) != (curriculum.name, method) or not differ:
        return (f"{source}: the cells of {cell.method} on {cell.curriculum.name} and of "
                f"{method} on {curriculum.name} share the name {name}; rename a curriculum")
    return _equal_values(source=source, keys=differ, first=point, second=as_given,
                         what=f"make the same cell name {name} (characters outside "
                              "[A-Za-z0-9._=+-] become _); change one of them")


def _resolve(name: str, base: Path, folder: Path, what: str) -> Path:
    """A named config in ``folder`` or a path (relative paths: to ``base``)."""
    path = resolve_named(name, folder, what)
    if not path.is_absolute() and not path.is_relative_to(folder):
        local = base / path
        if local.exists():
            return local
    return path


def load_sweep(path: str | Path, sets: dict[str, Any] | None = None) -> Sweep:
    """Validates a sweep file and every one of its cells (each cell's settings as a
    `RunConfig`); `ConfigError` names the file and the key. Nothing is run. ``sets``
    (``telapa sweep --set``: dotted key -> value) are overrides for every cell, over the
    file's own ``overrides``; a key of the file's ``grid`` cannot be set. The file's grid
    and override values are read as ``--set`` reads its own (`_as_set_value`). Two grid
    points of one method and curriculum that give the same run (the same settings once
    validated: ``epochs: [2, 2.0]``, ``lr: [1e-3, 0.001]``, a value listed twice) and two
    cells whose names would be one (`cell_name` replaces characters: ``a/b`` and ``a_b``)
    are `ConfigError`s naming the file, the grid key(s) and both values: each cell is
    one run in one directory, so neither is run twice nor dropped."""
    from telapa.continual.registry import find_method

    path = Path(path)
    source = str(path)
    spec = validate(SweepFile, read_yaml(path, "sweep"), source)
    given = spec.grid  # as the file gives them, for the errors below
    spec = spec.model_copy(update={
        "grid": {k: [_as_set_value(v, source=f"{source}, grid {k}") for v in values]
                 for k, values in spec.grid.items()},
        "overrides": {k: _as_set_value(v, source=f"{source}, overrides {k}")
                      for k, v in spec.overrides.items()}})
    if sets:
        for key in sets:
            if not _schema_has(RunConfig, key.split(".")):
                raise ConfigError(f"unknown key {key!r} in --set{_setting_hint(key)}: it "
                                  "names no setting of the run preset (see "
                                  "continual/preset.py)")
            if key in spec.grid:
                raise ConfigError(f"--set {key}: {source} varies it in its grid")
        spec = spec.model_copy(update={"overrides": {**spec.overrides, **sets}})
    name = spec.name or path.stem
    if not SAFE_NAME.fullmatch(name):
        raise ConfigError(f"invalid value for 'name' in {source}: {name!r} is not a plain "
                          "file name")
    for method in spec.methods:
        try:
            find_method(method)
        except ConfigError as err:
            raise ConfigError(f"invalid value for 'methods' in {source}: {err}") from None
    if len(set(spec.methods)) != len(spec.methods):
        raise ConfigError(f"invalid value for 'methods' in {source}: a method is listed twice")
    for section, keys in (("grid", spec.grid), ("overrides", spec.overrides)):
        for key in keys:
            if not _schema_has(RunConfig, key.split(".")):
                raise ConfigError(f"unknown setting {section}.{key!r} in {source}"
                                  f"{_setting_hint(key)}: it names no key of the run preset "
                                  "(see continual/preset.py)")
    both = set(spec.grid) & set(spec.overrides)
    if both:
        raise ConfigError(f"{source}: {sorted(both)} both in grid and overrides")
    for section, keys in (("grid", spec.grid), ("overrides", spec.overrides)):
        for key in keys:  # recorded in no cell, or changing nothing in those it is in
            if not any(_applies(key, method) for method in spec.methods):
                raise ConfigError(
                    f"{section}.{key!r} in {source}: no method of the sweep reads "
                    f"methods.{key.split('.')[1]} (its methods: {', '.join(spec.methods)}); "
                    "a methods.<section> key applies only to the methods that declare the "
                    "section")
    base = path.parent
    try:
        preset_file = _resolve(spec.preset, base, RUN_PRESET_DIR, "run preset")
        preset_data = read_run_preset(preset_file)
        curricula = [load_curriculum(_resolve(c, base, CURRICULUM_DIR, "curriculum"))
                     for c in spec.curricula]
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None
    if len({c.name for c in curricula}) != len(curricula):
        raise ConfigError(f"invalid value for 'curricula' in {source}: two curricula share "
                          "a name")
    grid_keys = list(spec.grid)
    count = len(curricula) * len(spec.methods) * len(spec.seed_list) * math.prod(
        len(v) for v in spec.grid.values())
    if count > MAX_CELLS:
        raise ConfigError(f"{source}: curricula x methods x grid x seeds makes {count:,} "
                          f"cells; at most {MAX_CELLS:,}")
    cells: dict[str, Cell] = {}
    points: dict[str, dict[str, Any]] = {}  # cell name -> its grid values, as given
    for curriculum, method in itertools.product(curricula, spec.methods):
        keys = [k for k in grid_keys if _applies(k, method)]
        runs: dict[str, tuple[int, ...]] = {}  # the settings -> the grid point giving them
        for point in itertools.product(*(range(len(spec.grid[k])) for k in keys)):
            overrides = {k: v for k, v in spec.overrides.items() if _applies(k, method)}
            overrides.update((k, spec.grid[k][i]) for k, i in zip(keys, point, strict=True))
            as_given = {k: given[k][i] for k, i in zip(keys, point, strict=True)}
            # the preset's mapping with the cell's keys, validated once below (as a run's)
            data = (with_sets(preset_data, overrides, str(source))
                    if isinstance(preset_data, dict) else preset_data)
            label = ", ".join(f"{k}={v!r}" for k, v in overrides.items())
            where = f"{source} (preset {spec.preset} with {label or 'no overrides'})"
            # the cell's settings with its env family's latent D, as its run will record
            # them: ``cells.json`` then holds what a worker validates again
            config = bind_env_family(parse_run_config(data, where),
                                     {tag: (curriculum.tasks[tag].env_id,
                                            curriculum.tasks[tag].options)
                                      for tag in curriculum.task_ids()},
                                     f"{where}, curriculum {curriculum.name!r}")
            settings = json.dumps(config.model_dump(mode="json"), sort_keys=True)
            if settings in runs:  # one run twice: its results would be counted twice
                other = runs[settings]
                differ = [k for k, i, j in zip(keys, other, point, strict=True) if i != j]
                first = {k: given[k][i] for k, i in zip(keys, other, strict=True)}
                raise ConfigError(_equal_values(
                    source=source, keys=differ, first=first, second=as_given,
                    what=f"give the same run of {method} on {curriculum.name} (equal "
                         "settings); list each value once"))
            runs[settings] = point
            for seed in spec.seed_list:
                name_ = cell_name(curriculum.name, method, seed, overrides, grid_keys)
                if len(name_.encode()) > MAX_CELL_NAME_BYTES:
                    raise ConfigError(
                        f"{source}: cell {name_} has a name of {len(name_.encode())} bytes; "
                        f"at most {MAX_CELL_NAME_BYTES} (it names the cell's files): "
                        "shorten the curriculum's name or the grid's values")
                if name_ in cells:  # another run's name: one of them would be dropped
                    raise ConfigError(_name_clash(
                        source=source, name=name_, cell=cells[name_], point=points[name_],
                        curriculum=curriculum, method=method, as_given=as_given))
                cells[name_] = Cell(name_, curriculum, method, seed, overrides, config,
                                    spec.preset)
                points[name_] = as_given
    ordered = list(cells.values())
    if spec.order == "seed":  # stable: file order within each seed
        ordered.sort(key=lambda c: spec.seed_list.index(c.seed))
    sweep = Sweep(path, name, spec, ordered)
    from telapa.continual.spec import RunSpec, resolve_spec

    for cell in sweep.cells:  # budgets in whole PPO calls, seeds in range, as a run checks
        try:
            resolve_spec(RunSpec(cell.curriculum, cell.method, cell.seed, cell.config,
                                 cell.preset))
        except ConfigError as err:
            raise ConfigError(f"{source}, cell {cell.name}: {err}") from None
    return sweep


def _batch_size(batch_seeds: bool | int | Mapping[str, int], method: str) -> int | None:
    """Seeds per job of ``method``'s cells under ``batch_seeds`` (`seed_jobs`); None: all."""
    size = batch_seeds
    if isinstance(batch_seeds, Mapping):
        size = batch_seeds.get(method, batch_seeds.get("*"))
        if size is None:
            return None
    elif size is True:
        return None
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ConfigError(f"batch_seeds must be True, False, a seed count >= 1 or a mapping "
                         f"of methods to seed counts, got {batch_seeds!r}")
    return size


def seed_jobs(cells: list[Cell], batch_seeds: bool | int | Mapping[str, int]
              ) -> list[list[Cell]]:
    """The jobs of ``cells``, in sweep order: one cell each (``False``); the cells that
    differ only in their seed together (``True``); those split into batches of at most
    ``batch_seeds`` seeds (an int >= 1, e.g. so that each job ends within a working
    session whose unfinished work would be lost); or, for a mapping, at most
    ``batch_seeds[method]`` seeds of a method's cells, its ``"*"`` entry (else all the
    seeds) for the methods it does not name (methods differ in cost per seed)."""
    if batch_seeds is False:
        return [[c] for c in cells]
    jobs: dict[tuple, list[Cell]] = {}
    for c in cells:
        key = (c.curriculum.name, c.method, json.dumps(c.overrides, sort_keys=True, default=str),
               c.preset)
        jobs.setdefault(key, []).append(c)
    out = []
    for job in jobs.values():
        size = _batch_size(batch_seeds, job[0].method) or len(job)
        out += [job[i:i + size] for i in range(0, len(job), size)]
    return out


def check_batch_seeds(sweep: Sweep, batch_seeds: bool | int | Mapping[str, int]) -> None:
    """Refuses a ``batch_seeds`` that `seed_jobs` would (ConfigError), a mapping naming
    a method the sweep does not run, or a batch of seeds that would not fit in this
    machine's memory (`check_memory`; each cell alone is checked by `load_sweep`),
    before any work."""
    if batch_seeds is False:
        return
    methods = sorted({c.method for c in sweep.cells})
    for method in methods:
        _batch_size(batch_seeds, method)
    if isinstance(batch_seeds, Mapping):
        unknown = sorted(set(batch_seeds) - set(methods) - {"*"})
        if unknown:
            raise ConfigError(f"seeds per batch given for {', '.join(map(repr, unknown))}, "
                             f"which sweep {sweep.name!r} does not run (its methods: "
                             f"{', '.join(methods)})")
    for job in seed_jobs(sweep.cells, batch_seeds):
        if len(job) > 1:
            check_memory(job[0].curriculum, job[0].method, job[0].config, seeds=len(job),
                         source=f"{sweep.path}, the batch of cells {job[0].name} to "
                                f"{job[-1].name}")


__all__ = ["MAX_CELLS", "MAX_CELL_NAME_BYTES", "MAX_SEEDS", "Cell", "SlurmOptions", "Sweep",
           "SweepFile", "cell_name", "check_batch_seeds", "load_sweep", "seed_jobs",
           "slurm_minutes"]
