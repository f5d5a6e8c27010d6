"""Sweeps: curricula x methods x seeds x a grid of setting overrides, one run per cell.

A sweep file (YAML)::

    name: ewc-grid                 # optional; default: the file's stem
    preset: paper                  # run preset (configs/runs/NAME.yaml or a path)
    curricula: [primary]           # names in configs/curricula/ or paths
    methods: [ewc]
    seeds: 20                      # a count (0..19) or a list of seeds
    grid:                          # dotted keys into the run preset -> values to try
      methods.ewc.lam: [10, 25, 50, 100, 200, 500, 1000]
      methods.ewc.decay: [0.8, 0.9, 0.95, 0.99]
    overrides:                     # dotted keys -> one value, for every cell
      eval_episodes: 50
    order: seed                    # optional: run every cell of seed 0 before seed 1, ...

Cells are the product of the four lists, in file order with the seed varying fastest, or
(``order: seed``) seed-major: a study that stops early then holds whole seeds of every
method. A grid or override key under ``methods.X``
only applies to the methods that read section X (`continual.results.METHOD_SECTIONS`):
``methods.ewc.lam`` does not multiply the Finetune cells of the same sweep. Relative
paths in the file are relative to the file. Unknown keys, empty lists, unknown methods or
curricula, dotted keys that name no setting and values a setting rejects are errors that
name the file and the key, before any run starts (`load_sweep`).

The sweep directory::

    DIR/sweep.yaml          a copy of the sweep file
    DIR/cells.json          every cell's resolved spec (a re-run must give the same cells)
    DIR/cells/NAME/         one run directory per cell, NAME from the cell
                            (``primary-ewc-lam=10-decay=0.8-s3``)
    DIR/status/NAME.json    state (queued / done / failed), attempts (tries that ended, done
                            or failed), when the latest try started, and every error
    DIR/status/NAME.log     the cell's progress lines (every $TELAPA_LOG_INTERVAL s, 30)
    DIR/.lock               held by the process that runs the sweep

`export_sweep` (``telapa sweep export DIR DEST``) copies the small outputs of the finished
cells (no checkpoints) into a sweep directory of their own, e.g. to commit a study's
results while it still runs.

`run_sweep` runs every cell that is not done, on local worker processes
(`LocalBackend`) or a Ray cluster (`RayBackend`); a cell with a run directory resumes
from its checkpoint, a failed one is tried up to ``retries`` more times.

A backend runs jobs: one cell each, or with ``batch_seeds`` (``telapa sweep
--batch-seeds``) the seeds of one cell (same curriculum, method and settings) together,
as one `telapa.continual.batch.SeedBatch` in one worker (their PPO chunks as one
vmapped batch on the jax backend). Every cell keeps its own run directory, status and
log; when a batch fails, each of its cells that is not complete is failed with the error.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import re
import shutil
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, PositiveInt, field_validator

from telapa.config import (
    ConfigError,
    StrictModel,
    read_yaml,
    resolve_named,
    validate,
)
from telapa.continual.curriculum import CURRICULUM_DIR, SAFE_NAME, Curriculum, load_curriculum
from telapa.continual.preset import (
    RUN_PRESET_DIR,
    RunConfig,
    parse_run_config,
    read_run_preset,
)
from telapa.continual.results import METHOD_SECTIONS
from telapa.continual.rundir import RunDir, RunDirError, claim_new_dir
from telapa.io import read_json, write_json_atomic, write_text_atomic

SWEEP_FILE = "sweep.yaml"
CELLS_FILE = "cells.json"


class SweepFile(StrictModel):
    """The schema of a sweep file (see the module docstring)."""

    name: str | None = None
    preset: str = "quick"
    curricula: list[str] = Field(min_length=1)
    methods: list[str] = Field(min_length=1)
    seeds: PositiveInt | list[int] = 1
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    overrides: dict[str, Any] = Field(default_factory=dict)
    order: Literal["method", "seed"] = "method"

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
        return False
    if len(parts) == 1:
        return True
    annotation = info.annotation
    candidates = [annotation, *getattr(annotation, "__args__", ())]
    for sub in candidates:
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            return _schema_has(sub, parts[1:])
    return False


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"cannot set {key!r}: {part!r} is not a mapping")
    node[parts[-1]] = value


def _applies(key: str, method: str) -> bool:
    """A ``methods.X.*`` key only applies to the methods that read section X."""
    if not key.startswith("methods."):
        return True
    return METHOD_SECTIONS.get(method) == key.split(".")[1]


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
    file's own ``overrides``; a key of the file's ``grid`` cannot be set."""
    from telapa.continual.registry import METHODS

    path = Path(path)
    source = str(path)
    spec = validate(SweepFile, read_yaml(path, "sweep"), source)
    if sets:
        for key in sets:
            if not _schema_has(RunConfig, key.split(".")):
                raise ConfigError(f"unknown key {key!r} in --set: it names no setting of "
                                  "the run preset (see continual/preset.py)")
            if key in spec.grid:
                raise ConfigError(f"--set {key}: {source} varies it in its grid")
        spec = spec.model_copy(update={"overrides": {**spec.overrides, **sets}})
    name = spec.name or path.stem
    if not SAFE_NAME.fullmatch(name):
        raise ConfigError(f"invalid value for 'name' in {source}: {name!r} is not a plain "
                          "file name")
    for method in spec.methods:
        if method not in METHODS:
            raise ConfigError(f"invalid value for 'methods' in {source}: unknown method "
                              f"{method!r}; available: {', '.join(METHODS)}")
    if len(set(spec.methods)) != len(spec.methods):
        raise ConfigError(f"invalid value for 'methods' in {source}: a method is listed twice")
    for section, keys in (("grid", spec.grid), ("overrides", spec.overrides)):
        for key in keys:
            if not _schema_has(RunConfig, key.split(".")):
                raise ConfigError(f"unknown setting {section}.{key!r} in {source}: it names "
                                  "no key of the run preset (see continual/preset.py)")
    both = set(spec.grid) & set(spec.overrides)
    if both:
        raise ConfigError(f"{source}: {sorted(both)} both in grid and overrides")
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
    cells: dict[str, Cell] = {}
    for curriculum, method in itertools.product(curricula, spec.methods):
        keys = [k for k in grid_keys if _applies(k, method)]
        for values in itertools.product(*(spec.grid[k] for k in keys)):
            overrides = {k: v for k, v in spec.overrides.items() if _applies(k, method)}
            overrides.update(zip(keys, values, strict=True))
            data = json.loads(json.dumps(preset_data))
            if isinstance(data, dict) and isinstance(data.get("train"), str):
                data["train"] = {"preset": data["train"]}  # so train.* keys merge over it
            for key, value in overrides.items():
                _set_dotted(data, key, value)
            label = ", ".join(f"{k}={v!r}" for k, v in overrides.items())
            try:
                config = parse_run_config(data, f"{source} (preset {spec.preset} with "
                                                f"{label or 'no overrides'})")
            except ConfigError as err:
                raise ConfigError(str(err)) from None
            for seed in spec.seed_list:
                name_ = cell_name(curriculum.name, method, seed, overrides, grid_keys)
                cell = Cell(name_, curriculum, method, seed, overrides, config, spec.preset)
                cells[name_] = cell  # a methods.X key that does not apply: same cell
    ordered = list(cells.values())
    if spec.order == "seed":  # stable: file order within each seed
        ordered.sort(key=lambda c: spec.seed_list.index(c.seed))
    sweep = Sweep(path, name, spec, ordered)
    from telapa.continual.runner import RunSpec

    for cell in sweep.cells:  # budgets in whole PPO calls, seeds in range
        try:
            RunSpec(cell.curriculum, cell.method, cell.seed, cell.config,
                    cell.preset).check_budgets()
        except ConfigError as err:
            raise ConfigError(f"{source}, cell {cell.name}: {err}") from None
    return sweep


# --- running one cell (in a worker process or a Ray task) ------------------------------

def thread_env(threads: int) -> dict[str, str]:
    """Environment that caps the CPU threads of one worker (the BLAS/OpenMP pools, and
    XLA's Eigen pool when one thread is asked for), so that N workers do not
    oversubscribe the cores; beyond that the worker's CPU affinity caps it (XLA's CPU
    client takes no thread-count flag). Every XLA flag starts with ``--``: XLA reads an
    ``XLA_FLAGS`` value that does not as the name of a flag file, and aborts."""
    flags = os.environ.get("XLA_FLAGS", "")
    flags = " ".join(f for f in flags.split() if "xla_cpu_multi_thread_eigen" not in f)
    if threads == 1:
        flags = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
    return {"XLA_FLAGS": flags, "OMP_NUM_THREADS": str(threads),
            "OPENBLAS_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "TELAPA_THREADS": str(threads)}


def run_job(sweep_dir: str, cells: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Runs (or resumes) the cells of one job to the end in this process: `run_cell` for
    one cell, a `SeedBatch` for several (seeds of one cell); returns ``(name, result)``
    per cell (never raises). Each cell's status file records when it started."""
    with contextlib.suppress(OSError, ValueError):  # a status file is no reason to fail
        for cell in cells:
            _write_status(Path(sweep_dir), cell["name"],
                          read_status(Path(sweep_dir), cell["name"]) | {"started": time.time()})
    if len(cells) == 1:
        return [(cells[0]["name"], run_cell(sweep_dir, cells[0]))]
    logs = []
    try:
        from telapa.continual.batch import SeedBatch
        from telapa.continual.curriculum import parse_curriculum
        from telapa.continual.runner import RunSpec
        from telapa.jaxcache import enable_persistent_cache

        enable_persistent_cache()
        from telapa.cli.run import PlainProgress

        interval = float(os.environ.get("TELAPA_LOG_INTERVAL", "30"))
        entries = []
        for cell in cells:
            path = Path(sweep_dir) / "cells" / cell["name"]
            if path.is_dir() and not (path / "run.json").exists():
                shutil.rmtree(path)  # a start that died before its manifest: ours to clear
            spec = RunSpec(parse_curriculum(cell["curriculum"], cell["name"]), cell["method"],
                           cell["seed"], parse_run_config(cell["config"], cell["name"]),
                           cell["preset"])
            entries.append((spec, path))
            logs.append(open(Path(sweep_dir) / "status" / f"{cell['name']}.log", "a"))  # noqa: SIM115
        batch = SeedBatch.open(entries, [PlainProgress(log, interval_s=interval)
                                         for log in logs])
        metrics = batch.run()
        return [(c["name"], {"ok": True, "metrics": m}) for c, m in zip(cells, metrics,
                                                                         strict=True)]
    except BaseException as err:  # noqa: BLE001 - recorded in the sweep's status
        if isinstance(err, KeyboardInterrupt):
            raise
        failure = {"ok": False, "error": f"{type(err).__name__}: {err}",
                   "traceback": traceback.format_exc(limit=8)}
        return [(c["name"], _completed(Path(sweep_dir) / "cells" / c["name"]) or failure)
                for c in cells]
    finally:
        for log in logs:
            log.close()


def _completed(path: Path) -> dict[str, Any] | None:
    """The result of the complete run in ``path`` (None when it is not complete)."""
    try:
        if RunDir(path).spec().get("status") == "complete":
            return {"ok": True, "metrics": read_json(path / "metrics.json", "run metrics")}
    except (RunDirError, ValueError, OSError):
        pass
    return None


def run_cell(sweep_dir: str, cell: dict[str, Any]) -> dict[str, Any]:
    """Runs (or resumes) one cell to the end in this process; returns ``{"ok": True,
    "metrics": ...}`` or ``{"ok": False, "error": ...}`` (never raises)."""
    try:
        from telapa.continual.runner import ContinualRun, RunSpec
        from telapa.jaxcache import enable_persistent_cache

        enable_persistent_cache()
        from telapa.cli.run import PlainProgress

        path = Path(sweep_dir) / "cells" / cell["name"]
        log = open(Path(sweep_dir) / "status" / f"{cell['name']}.log", "a")  # noqa: SIM115
        progress = PlainProgress(log, interval_s=float(os.environ.get("TELAPA_LOG_INTERVAL",
                                                                      "30")))
        if (path / "run.json").exists():
            run = ContinualRun.resume(path, progress)
        else:
            if path.is_dir() and not (path / "run.json").exists():
                shutil.rmtree(path)  # a start that died before its manifest: ours to clear
            from telapa.continual.curriculum import parse_curriculum

            spec = RunSpec(parse_curriculum(cell["curriculum"], cell["name"]), cell["method"],
                           cell["seed"], parse_run_config(cell["config"], cell["name"]),
                           cell["preset"])
            run = ContinualRun.start(spec, path, progress)
        with log:
            return {"ok": True, "metrics": run.run()}
    except BaseException as err:  # noqa: BLE001 - recorded in the sweep's status
        if isinstance(err, KeyboardInterrupt):
            raise
        return {"ok": False, "error": f"{type(err).__name__}: {err}",
                "traceback": traceback.format_exc(limit=8)}


def _payload(cell: Cell) -> dict[str, Any]:
    return {"name": cell.name, "method": cell.method, "seed": cell.seed,
            "preset": cell.preset, "curriculum": cell.curriculum.model_dump(mode="json"),
            "config": cell.config.model_dump(mode="json")}


# --- backends --------------------------------------------------------------------------

Outcome = tuple[str, dict[str, Any]]


def _init_worker(threads: int, cores: Any) -> None:
    os.environ.update(thread_env(threads))
    if cores is not None and hasattr(os, "sched_setaffinity"):
        try:
            chunk = cores.get_nowait()
            os.sched_setaffinity(0, chunk)
        except Exception:  # noqa: BLE001 - affinity is an optimisation only
            pass


class LocalBackend:
    """Cells in ``workers`` local processes (spawned, so each sets its thread caps before
    JAX starts); each worker gets ``threads`` threads and, where the OS allows, its own
    ``threads`` cores."""

    def __init__(self, workers: int = 1, threads: int | None = None):
        self.workers = workers
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else os.cpu_count() or 1
        self.threads = threads or max(1, cores // workers)
        self.describe = f"local, {workers} worker(s) x {self.threads} thread(s)"

    def run(self, sweep_dir: Path, jobs: list[list[Cell]]) -> Iterator[Outcome]:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        from concurrent.futures.process import BrokenProcessPool

        ctx = multiprocessing.get_context("spawn")
        available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else []
        queue = ctx.Queue()
        if len(available) >= self.workers * self.threads:
            for i in range(self.workers):
                queue.put(set(available[i * self.threads:(i + 1) * self.threads]))
        env = thread_env(self.threads)
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # spawned workers inherit it before importing JAX
        try:
            with ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_init_worker,
                                     initargs=(self.threads, queue)) as pool:
                futures = {pool.submit(run_job, str(sweep_dir), [_payload(c) for c in job]):
                           job for job in jobs}
                for future in as_completed(futures):
                    try:
                        yield from future.result()
                    except BrokenProcessPool as err:
                        for cell in futures[future]:
                            yield cell.name, {"ok": False,
                                              "error": f"worker process died: {err}"}
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class RayBackend:
    """Each cell a Ray task (``num_cpus=threads``) on the cluster at ``address``, or on a
    new local Ray instance without one. The sweep directory must be on a filesystem every
    node sees, and every node needs telapa installed (``pip install telapa[ray]``)."""

    def __init__(self, address: str | None = None, threads: int = 1):
        self.address = address
        self.threads = threads
        self.describe = f"ray ({address or 'local instance'}), {threads} thread(s) per cell"

    def run(self, sweep_dir: Path, jobs: list[list[Cell]]) -> Iterator[Outcome]:
        try:
            import ray
        except ImportError:
            raise ConfigError("--backend ray needs Ray: pip install 'telapa[ray]'") from None
        started = not ray.is_initialized()
        if started:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address:
                ray.init(address=self.address, **kwargs)
            else:
                ray.init(num_cpus=os.cpu_count(), **kwargs)
        try:
            task = ray.remote(num_cpus=self.threads, max_retries=0)(run_job).options(
                runtime_env={"env_vars": thread_env(self.threads)})
            refs = {task.remote(str(sweep_dir.resolve()), [_payload(c) for c in job]): job
                    for job in jobs}
            pending = list(refs)
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    try:
                        yield from ray.get(ref)
                    except Exception as err:  # noqa: BLE001 - a task or node died
                        for cell in refs[ref]:
                            yield cell.name, {"ok": False, "error": f"ray task failed: {err}"}
        finally:
            if started:
                ray.shutdown()


# --- the sweep directory -----------------------------------------------------------------

STATES = ("done", "running", "partial", "failed", "left")


def _status_path(sweep_dir: Path, name: str) -> Path:
    return sweep_dir / "status" / f"{name}.json"


def read_status(sweep_dir: Path, name: str) -> dict[str, Any]:
    path = _status_path(sweep_dir, name)
    if not path.exists():
        return {"state": "left", "attempts": 0, "errors": []}
    return read_json(path, "cell status")


def _write_status(sweep_dir: Path, name: str, status: dict[str, Any]) -> None:
    write_json_atomic(_status_path(sweep_dir, name), status)


def stored_sweep(sweep_dir: str | Path) -> dict[str, Any] | None:
    """The whole ``cells.json`` of a sweep directory: its name, its ``cells`` and, for an
    export, ``exported_from`` and ``of_cells`` (None if ``sweep_dir`` is not one)."""
    path = Path(sweep_dir) / CELLS_FILE
    if not path.is_file():
        return None
    data = read_json(path, "sweep cells")
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise RunDirError(f"{path} is not a telapa sweep's cell list")
    return data


def stored_cells(sweep_dir: str | Path) -> list[dict[str, Any]] | None:
    """The cells recorded in a sweep directory (None if ``sweep_dir`` is not one)."""
    data = stored_sweep(sweep_dir)
    return None if data is None else data["cells"]


def prepare_sweep_dir(sweep: Sweep, out: Path) -> None:
    """Creates ``out`` for ``sweep`` or checks that it holds the same sweep (re-running
    resumes it); refuses any other non-empty directory."""
    payloads = [_payload(c) for c in sweep.cells]
    stored = stored_cells(out)
    if stored is not None:
        if json.loads(json.dumps(payloads)) != stored:
            raise RunDirError(f"{out} holds another sweep (its {CELLS_FILE} differs from the "
                              f"cells of {sweep.path}); choose another --out")
        return
    claim_new_dir(out, what="sweep directory")
    (out / "cells").mkdir()
    (out / "status").mkdir()
    write_text_atomic(out / SWEEP_FILE, sweep.path.read_text())
    write_json_atomic(out / CELLS_FILE, {"format": "telapa-sweep", "name": sweep.name,
                                         "cells": payloads})


def cell_state(sweep_dir: Path, name: str) -> tuple[str, dict[str, Any]]:
    """(state, status) of a cell: done, running (its run directory is locked by a live
    process), partial (a run directory, not running), failed, or left."""
    status = read_status(sweep_dir, name)
    run_dir = RunDir(sweep_dir / "cells" / name)
    if (run_dir.path / "run.json").exists():
        try:
            if run_dir.spec().get("status") == "complete":
                return "done", status
        except RunDirError:
            pass
        try:
            run_dir.lock()
            run_dir.unlock()
        except RunDirError:
            return "running", status
        return ("failed" if status.get("state") == "failed" else "partial"), status
    return ("failed" if status.get("state") == "failed" else "left"), status


@dataclass(frozen=True)
class CellTime:
    """How long a cell has run and how far it got (`cell_time`)."""

    wall_s: float
    """Wall clock of the run so far (a seed batch's runs each count their share)."""
    phases_done: int
    phases: int

    @property
    def progress(self) -> str:
        """``phases done/phases`` for a started cell, ``complete`` for a finished one."""
        if self.phases_done >= self.phases:
            return "complete"
        return f"{self.phases_done}/{self.phases} phases"

    @property
    def left_s(self) -> float:
        """Wall clock still to go at the pace so far: ``wall_s (phases - done) / done``
        (the first visits of an archive method are cheaper than the later ones, so this
        runs low for them)."""
        if self.phases_done >= self.phases:
            return 0.0
        if self.phases_done == 0:
            return math.nan
        return self.wall_s * (self.phases - self.phases_done) / self.phases_done


def cell_time(sweep_dir: Path, name: str) -> CellTime | None:
    """A finished cell's wall clock (``accounting.json``) or a started one's, from its
    latest checkpoint; None before the first checkpoint.

    Raises `RunDirError` naming the file when the cell's files are there but unreadable
    (`cell_times` maps such cells to None for the callers that only estimate)."""
    path = Path(sweep_dir) / "cells" / name
    file = path / "run.json"
    if not file.exists():
        return None
    try:
        if RunDir(path).spec().get("status") == "complete":
            file = path / "accounting.json"
            wall = float(read_json(file, "accounting")["wall_s"])
            return CellTime(wall, 1, 1)
        ckpt = RunDir(path).latest_checkpoint()
        if ckpt is None:
            return None
        file = ckpt / "state.json"
        state = read_json(file, "checkpoint state")
        return CellTime(float(state.get("wall_s", math.nan)), int(state["next_phase"]),
                        int(state["phases"]))
    except RunDirError:
        raise
    except (ValueError, KeyError, TypeError, OSError) as err:
        raise RunDirError(f"cell {name}: cannot read its progress from {file}: "
                          f"{type(err).__name__}: {err}") from None


def cell_times(sweep_dir: Path, cells: list[dict[str, Any]]
               ) -> tuple[dict[str, CellTime | None], dict[str, str]]:
    """`cell_time` of every cell, and the cells whose files are unreadable (name -> the
    error; their time is None, as for a cell not started)."""
    times: dict[str, CellTime | None] = {}
    unreadable: dict[str, str] = {}
    for cell in cells:
        try:
            times[cell["name"]] = cell_time(sweep_dir, cell["name"])
        except RunDirError as err:
            times[cell["name"]], unreadable[cell["name"]] = None, str(err)
    return times, unreadable


def time_left(sweep_dir: Path, cells: list[dict[str, Any]], *,
              times: dict[str, CellTime | None] | None = None
              ) -> tuple[float, list[str], list[str]]:
    """Cell time still to go for the sweep (seconds, one cell after another), the cells
    estimated from other methods' cells, and the cells it cannot estimate.

    A started cell counts `CellTime.left_s`. A cell not started counts the mean wall
    clock of the finished cells that differ from it only in their seed; with none, the
    mean of the finished cells of its curriculum and settings under any method (listed
    second: methods differ in cost, TeLAPA's cells several times a baseline's); with
    none of those either, it is not estimated (listed third). ``times``: each cell's
    `cell_time`, when the caller has read them already."""
    if times is None:
        times, _ = cell_times(sweep_dir, cells)

    def setting(cell: dict[str, Any]) -> str:
        return json.dumps([cell.get("curriculum"), cell.get("config")], sort_keys=True,
                          default=str)

    same_method: dict[tuple, list[float]] = {}
    same_setting: dict[str, list[float]] = {}
    for cell in cells:
        t = times[cell["name"]]
        if t is not None and t.phases_done >= t.phases and math.isfinite(t.wall_s):
            same_method.setdefault((cell.get("method"), setting(cell)), []).append(t.wall_s)
            same_setting.setdefault(setting(cell), []).append(t.wall_s)
    total, borrowed, unknown = 0.0, [], []
    for cell in cells:
        t = times[cell["name"]]
        walls = same_method.get((cell.get("method"), setting(cell)))
        if t is not None and t.phases_done > 0:
            left = t.left_s
        elif walls:
            left = sum(walls) / len(walls)
        elif walls := same_setting.get(setting(cell)):
            left = sum(walls) / len(walls)
            borrowed.append(cell["name"])
        else:
            left = math.nan
        if math.isfinite(left):
            total += left
        else:
            unknown.append(cell["name"])
    return total, borrowed, unknown


def seed_jobs(cells: list[Cell], batch_seeds: bool) -> list[list[Cell]]:
    """The jobs of ``cells``: one cell each, or (``batch_seeds``) the cells that differ
    only in their seed together, in sweep order."""
    if not batch_seeds:
        return [[c] for c in cells]
    jobs: dict[tuple, list[Cell]] = {}
    for c in cells:
        key = (c.curriculum.name, c.method, json.dumps(c.overrides, sort_keys=True, default=str),
               c.preset)
        jobs.setdefault(key, []).append(c)
    return list(jobs.values())


def run_sweep(sweep: Sweep, out: str | Path, backend, *, retries: int = 0,
              batch_seeds: bool = False, export: str | Path | None = None,
              on_event: Callable[[str], None] = lambda text: None) -> dict[str, int]:
    """Runs every cell of ``sweep`` that is not done under ``out`` on ``backend``; a
    failed cell is tried up to ``retries`` more times (each error recorded in its status
    file). With ``batch_seeds`` the seeds of a cell run as one job (`seed_jobs`). With
    ``export``, the done cells are exported there (`export_sweep`) before the first job,
    which also checks the destination, and again as each cell finishes; an export that
    fails then is reported through ``on_event`` and does not stop the sweep.
    Returns the count of cells per state at the end."""
    out = Path(out)
    prepare_sweep_dir(sweep, out)
    lock = RunDir(out)
    lock.lock()
    try:
        if export is not None:
            export_sweep(out, export)
        todo = []
        for cell in sweep.cells:
            state, status = cell_state(out, cell.name)
            if state == "running":
                raise RunDirError(f"cell {cell.name} of {out} is being run by another process")
            if state != "done":
                todo.append(cell)
        on_event(f"{len(sweep.cells) - len(todo)} of {len(sweep.cells)} cells done; running "
                 f"{len(todo)} on {backend.describe}"
                 + (f" in {len(seed_jobs(todo, True))} seed batches" if batch_seeds else ""))
        tries = dict.fromkeys((c.name for c in todo), 0)
        while todo:
            for cell in todo:  # the worker records when a cell really starts (run_job)
                _write_status(out, cell.name, read_status(out, cell.name) | {"state": "queued"})
            failed = []
            for name, result in backend.run(out, seed_jobs(todo, batch_seeds)):
                status = read_status(out, name)
                status["attempts"] = status.get("attempts", 0) + 1
                if result.get("ok"):
                    status.update(state="done", finished=time.time())
                    on_event(f"done {name}")
                else:
                    status.setdefault("errors", []).append(
                        {"attempt": status.get("attempts"), "error": result.get("error"),
                         "traceback": result.get("traceback", ""), "time": time.time()})
                    status["state"] = "failed"
                    on_event(f"failed {name}: {result.get('error')}")
                    tries[name] += 1
                    if tries[name] <= retries:
                        failed.append(sweep.cell(name))
                _write_status(out, name, status)
                if export is not None and result.get("ok"):
                    try:
                        added = export_sweep(out, export).added
                        if added:  # a batch's first finished cell exports the others too
                            on_event(f"exported {', '.join(added)} to {export}")
                    except (RunDirError, ValueError, OSError) as err:
                        on_event(f"export to {export} failed: {err}")
            todo = failed
    finally:
        lock.unlock()
    counts = dict.fromkeys(STATES, 0)
    for cell in sweep.cells:
        counts[cell_state(out, cell.name)[0]] += 1
    return counts


EXPORT_FILES = ("run.json", "config.yaml", "curriculum.yaml", "visits.csv", "curve.csv",
                "final.csv", "metrics.json", "accounting.json", "method_log.json", "elites.csv")
"""What `export_sweep` keeps of a finished cell: everything `telapa report` and `telapa
metrics` read, never checkpoints or per-update training logs."""


@dataclass(frozen=True)
class ExportSummary:
    """What one `export_sweep` call did."""

    added: list[str]
    """Cells copied by this call."""
    kept: list[str]
    """Cells the destination already held (identical files)."""
    left: list[str]
    """Cells of the sweep not done yet (not exported)."""
    bytes: int
    """Size of the destination's files after the export."""


def _same_file(a: Path, b: Path) -> bool:
    return a.is_file() and b.is_file() and a.read_bytes() == b.read_bytes()


def export_sweep(sweep_dir: str | Path, dest: str | Path) -> ExportSummary:
    """Copies the small outputs (`EXPORT_FILES`) of every done cell of ``sweep_dir`` into
    ``dest``: a sweep directory of its own that holds only those cells, so that ``telapa
    report DEST``, ``telapa metrics DEST`` and ``telapa sweep status DEST`` read it.

    Re-exporting into the same ``dest`` adds the cells finished since (for a study that
    runs over several sessions). Nothing in ``dest`` is overwritten: a cell ``dest``
    already holds must be byte-identical to the source, and a ``dest`` that is not an
    export of the same sweep is refused, both before anything is written. Each cell is
    written to a temporary folder and renamed into place; ``cells.json`` (the exported
    cells, in sweep order) is written last.
    """
    sweep_dir, dest = Path(sweep_dir), Path(dest)
    source = stored_sweep(sweep_dir)
    if source is None:
        raise RunDirError(f"{sweep_dir} is not a sweep directory (no {CELLS_FILE})")
    if dest.resolve() == sweep_dir.resolve():
        raise RunDirError(f"cannot export {sweep_dir} into itself")
    cells = source["cells"]
    done = [c for c in cells if cell_state(sweep_dir, c["name"])[0] == "done"]
    meta = stored_sweep(dest) if dest.is_dir() else None
    if meta is None:
        claim_new_dir(dest, what="export directory")
        existing = []
    else:
        if meta.get("name") != source.get("name") or "exported_from" not in meta:
            raise RunDirError(f"{dest} is not an export of sweep {source.get('name')!r}; "
                              "choose another destination")
        existing = meta["cells"]
        by_name = {c["name"]: c for c in cells}
        for cell in existing:
            if json.loads(json.dumps(by_name.get(cell["name"]))) != cell:
                raise RunDirError(f"{dest} holds cell {cell['name']} with other settings than "
                                  f"{sweep_dir}; choose another destination")
    have = {c["name"] for c in existing}
    for cell in done:
        if cell["name"] not in have:
            final = dest / "cells" / cell["name"]
            if final.exists():
                raise RunDirError(f"{final} exists but is not listed in {dest / CELLS_FILE}; "
                                  "nothing was exported (move it aside)")
            continue
        for name in EXPORT_FILES:
            src = sweep_dir / "cells" / cell["name"] / name
            dst = dest / "cells" / cell["name"] / name
            if src.is_file() != dst.is_file() or (src.is_file() and not _same_file(src, dst)):
                raise RunDirError(f"{dst} differs from {src}; nothing was exported (move "
                                  f"{dest} aside to export afresh)")
    (dest / "cells").mkdir(exist_ok=True)
    (dest / "status").mkdir(exist_ok=True)
    if not (dest / SWEEP_FILE).exists():
        write_text_atomic(dest / SWEEP_FILE, (sweep_dir / SWEEP_FILE).read_text())
    added = []
    for cell in done:
        if cell["name"] in have:
            continue
        final = dest / "cells" / cell["name"]
        tmp = dest / "cells" / f".{cell['name']}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for name in EXPORT_FILES:
            src = sweep_dir / "cells" / cell["name"] / name
            if src.is_file():
                shutil.copy2(src, tmp / name)
        os.replace(tmp, final)
        status = read_status(sweep_dir, cell["name"])
        _write_status(dest, cell["name"], {k: status[k] for k in ("state", "attempts",
                                                                  "started", "finished")
                                           if k in status})
        added.append(cell["name"])
    exported = have | set(added)
    write_json_atomic(dest / CELLS_FILE, {
        "format": "telapa-sweep", "name": source.get("name"),
        "exported_from": str(sweep_dir), "of_cells": len(cells),
        "cells": [c for c in cells if c["name"] in exported]})
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    return ExportSummary(added=added, kept=sorted(have),
                         left=[c["name"] for c in cells if c["name"] not in exported],
                         bytes=size)


def sweep_cells_dirs(path: str | Path) -> list[Path] | None:
    """The run directories of the sweep directory ``path`` (None if it is not one)."""
    cells = stored_cells(path)
    return None if cells is None else [Path(path) / "cells" / c["name"] for c in cells]


__all__ = ["EXPORT_FILES", "Cell", "CellTime", "ExportSummary", "LocalBackend", "RayBackend",
           "Sweep", "SweepFile", "cell_state", "cell_time", "cell_times", "export_sweep",
           "load_sweep", "run_cell", "run_job", "run_sweep", "seed_jobs", "sweep_cells_dirs",
           "thread_env", "time_left"]
