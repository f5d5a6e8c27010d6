"""``telapa run`` (one method on one curriculum, resumable) and ``telapa metrics``.

    telapa run --curriculum NAME|FILE --method NAME --seed S [--preset quick|paper|mujoco|FILE]
               [--backend jax|gymnasium|native] [--set KEY=VALUE ...] [--track wandb|mlflow]
               [--import MODULE ...] [--out DIR]
    telapa run --curriculum NAME|FILE --method NAME --seeds 0-7 [...] [--out PARENT]
    telapa run --resume RUN_DIR [RUN_DIR...] [options that agree with the run]
    telapa metrics RUN_DIR|SWEEP_DIR... [--skip-incomplete] [--json]

``--seeds`` (``0-7``, ``0,2,5``) runs several seeds in one process (`SeedBatch`: on the
jax backend their PPO chunks train as one vmapped batch); each seed gets the run
directory ``--seed`` would give it (under ``runs/``, or ``PARENT/CURRICULUM-METHOD-sS``
with ``--out``). ``--resume`` with several run directories resumes them as one batch.
``--set train.ppo.lr=1e-3`` (repeatable) changes one setting of the preset
(`telapa.overrides`); ``run.json`` records it, and ``--resume`` refuses one that
contradicts the run's settings. Every run writes TensorBoard events into ``RUN_DIR/tb``;
``--track wandb`` / ``--track mlflow`` also log to Weights & Biases / MLflow, one tracked
run per seed (`telapa.continual.tracking`). ``--import MODULE`` (repeatable) imports the
user's module before anything is read (`telapa.plugins`: it may register env ids, env
families and methods); ``run.json`` records it and ``--resume`` imports it again.
``--backend jax|gymnasium|native`` runs the curriculum's envs on another backend than its
file names (a MuJoCo curriculum on MJX: ``--backend jax``); the run's ``curriculum.yaml``
records it, so ``--resume`` keeps it and refuses another.

When stderr is not a terminal (a cluster job's log), progress is printed as plain lines
(phase, steps, steps/s, ETA) every ``--log-interval`` seconds instead of live bars.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from telapa.cli.common import (
    CLIError,
    add_import_option,
    add_resample_option,
    add_set_option,
    add_tau_from_option,
    add_track_options,
    json_safe,
    load_runs,
    print_table,
    reads_results,
    rich_table,
    seed_int,
    stdout_console,
    tracking_of,
)
from telapa.config import ConfigError
from telapa.continual.batch import SeedBatch, parse_seeds
from telapa.continual.curriculum import Curriculum, Visit, load_curriculum, on_backend
from telapa.continual.memory import check_memory
from telapa.continual.preset import RUN_PRESET_DIR, load_run_config
from telapa.continual.progress import PlainProgress, score_symbol
from telapa.continual.registry import find_method, method_names
from telapa.continual.rundir import RunDirError, claim_new_dir
from telapa.continual.runner import ContinualRun, RunError
from telapa.continual.spec import SEED_LIMIT, RunSpec, resolve_spec
from telapa.continual.tracking import Tracking, TrackingError
from telapa.envs.registry import BACKENDS, common_family
from telapa.io import CheckpointError
from telapa.io.clock import running
from telapa.io.stop import Terminate, stop_on_signals
from telapa.metrics import format_cell
from telapa.metrics.stats import Resample
from telapa.overrides import differences, override, parse_sets
from telapa.report.aggregates import aggregates_table, improvement_table, profile_table
from telapa.report.compute import compute_table
from telapa.report.results import CurriculumResults, score
from telapa.report.scores import main_table, revisit_table
from telapa.report.tables import ReportTable


class RichProgress:
    """Draws a continual run: one bar per visit with steps/s and the latest eval SR.
    ``score``: the score's name, ``SR`` or ``SR~`` (as `PlainProgress`)."""

    def __init__(self, console: Console, score: str | None = None):
        self.console = console
        self.score = score
        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.completed:>11,.0f}/{task.total:,.0f}"),
            TextColumn("{task.fields[rate]:>8,.0f} steps/s"),
            TextColumn("{task.fields[score]} {task.fields[sr]}"),
            TimeRemainingColumn(),
            console=console,
        )
        self._tasks: dict[int, Any] = {}
        self._current: int | None = None
        self._clock: tuple[float, int] = (running(), 0)

    def __enter__(self) -> RichProgress:
        self.bars.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.__exit__(*exc)

    def visit(self, visit: Visit, budget: int, done: int) -> None:
        if visit.index not in self._tasks:
            self._tasks[visit.index] = self.bars.add_task(
                f"{visit.tag:<4} {visit.env_id}", total=budget, completed=done, rate=0.0, sr="-",
                score=self.score or score_symbol(visit))
        self._current = visit.index
        self._clock = (running(), done)

    def advance(self, steps: int, metrics: dict[str, float]) -> None:
        start, done = self._clock
        rate = (steps - done) / max(running() - start, 1e-9)
        self.bars.update(self._tasks[self._current], completed=steps, rate=rate)

    def evaluated(self, visit: Visit, step: int, sr: float) -> None:
        self.bars.update(self._tasks[visit.index], sr=f"{sr:.2f}")

    def note(self, text: str) -> None:
        self.console.print(text)

    def phase(self, name: str, done: int, total: int) -> None:
        if self._current is not None:
            self.bars.update(self._tasks[self._current], sr=f"{name} {done}/{total}")


def progress_for(console: Console, interval_s: float, score: str | None = None):
    """Live bars on a terminal, plain lines every ``interval_s`` seconds otherwise;
    ``score``: the name they give the evaluations (`Curriculum.score_symbol`; None: each
    visit's task's own)."""
    return RichProgress(console, score) if console.is_terminal else PlainProgress(
        console.file, interval_s, score)


def _default_out(curriculum: str, method: str, seed: int, stamp: str | None = None) -> Path:
    stamp = stamp or datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{curriculum}-{method}-s{seed}-{stamp}"


def batch_outs(curriculum: str, method: str, seeds: list[int], parent: str | None
               ) -> list[Path]:
    """The run directory of each seed of ``--seeds``: the one ``--seed`` would get (one
    time stamp for the batch), or ``PARENT/CURRICULUM-METHOD-sS`` with ``--out PARENT``."""
    if parent is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        return [_default_out(curriculum, method, seed, stamp) for seed in seeds]
    return [Path(parent) / f"{curriculum}-{method}-s{seed}" for seed in seeds]


def build_spec(
    curriculum: str, method: str, seed: int, preset: str | None,
    intrinsic_beta: float | None = None, sets: list[str] | None = None,
    imports: list[str] | None = None, backend: str | None = None,
) -> RunSpec:
    """Validates everything a run needs before any work starts. ``preset`` None: the run
    preset of the curriculum's env family (``quick`` for MiniGrid, ``mujoco-quick`` for
    MuJoCo), so that no family trains with another family's PPO settings by default.
    ``sets``: ``--set KEY=VALUE`` items, applied over the preset (`telapa.overrides`).
    ``imports``: the ``--import`` modules (already imported), recorded with the run.
    ``backend``: where the tasks' envs run instead of the curriculum's own backend
    (``--backend``; the run's ``curriculum.yaml`` records it, so a resume keeps it)."""
    try:
        find_method(method)
    except ConfigError as err:
        raise CLIError(str(err)) from None
    try:
        check_method_sets(method, parse_sets(sets or []))
    except ConfigError as err:
        raise CLIError(str(err)) from None
    if not 0 <= seed < SEED_LIMIT:
        raise CLIError(f"seed {seed} is out of range: use 0 <= seed < 2^32")
    try:
        cur = _curriculum(curriculum, backend)
        env_ids = list(cur.task_ids().values())
        if preset is None:
            try:
                preset = common_family(env_ids).run_preset
            except ValueError as err:
                raise ConfigError(f"curriculum {cur.name!r}: {err}") from None
        overrides = parse_sets(sets or [])
        beta = {} if intrinsic_beta is None else {"intrinsic_beta": intrinsic_beta}
        config = load_run_config(preset, {**beta, **overrides},
                                 option="--intrinsic-beta and --set" if beta else "--set")
        # the env family's latent D, options it rejects and the budgets: before any work
        return resolve_spec(RunSpec(cur, method, seed, config, preset, overrides,
                                    tuple(dict.fromkeys(imports or ()))))
    except ConfigError as err:
        raise CLIError(str(err)) from None


def _curriculum(name: str, backend: str | None) -> Curriculum:
    """The curriculum ``name``, on ``backend`` when one is given (`on_backend`)."""
    cur = load_curriculum(name)
    if backend is None:
        return cur
    return on_backend(cur, backend, f"curriculum {cur.name!r} with --backend {backend}")


def check_method_sets(method: str, sets: dict[str, Any]) -> None:
    """Refuses a ``--set methods.<section>...`` for a section the method ``method`` does
    not read, before any work: such a key is recorded in ``run.json`` and ``config.yaml``
    but changes nothing (``--method finetune --set methods.ewc.lam=77``, or a mistyped
    ``--method``). A method reads exactly the section it declares (`Method.section`):
    `telapa.continual.registry.make_method` gives it that section only, built-ins and
    plug-ins alike (a plug-in may declare a built-in section), and the sweeps' grids
    and the reports' settings rely on the same rule. The one exception is a plug-in
    whose ``__init__`` still takes the whole run config (the former signature): it may
    read any section, so for it the key is only warned about, on stderr. A section no
    method declares is left to the preset's validation (an unknown key, with the keys
    spelled like it)."""
    from telapa.continual.preset import MethodsConfig, plugin_section
    from telapa.continual.registry import reads_whole_config

    keys = []
    for key, value in sets.items():
        parts = key.split(".")
        if parts[0] != "methods":
            continue
        if len(parts) > 1:
            keys.append((key, parts[1]))
        elif isinstance(value, dict):  # --set "methods={ewc: {lam: 1}}"
            keys.extend((f"methods.{name}", str(name)) for name in value)
    cls = find_method(method)
    own = cls.section
    reads = f"methods.{own}" if own else "no methods.* section"
    for key, section in keys:
        if section == own or (section not in MethodsConfig.model_fields
                              and plugin_section(section) is None):
            continue
        if reads_whole_config(cls):
            print(f"telapa: warning: --set {key}: method {method!r} declares {reads}, but "
                  "its __init__ takes the whole run config, so it may read methods."
                  f"{section} or not; check that the setting does what you mean",
                  file=sys.stderr, flush=True)
            continue
        raise ConfigError(f"--set {key}: method {method!r} does not read methods.{section} "
                          f"(it reads: {reads}); the setting would be recorded with the run "
                          "but change nothing. Check --method, or leave the key out")


class Interrupted(CLIError):
    """Ctrl-C: the run stopped at its last checkpoint (exit status 130)."""

    status = 130


class Terminated(CLIError):
    """SIGTERM (a scheduler's stop, ``kill``): as Ctrl-C, exit status 143 (128 + 15)."""

    status = 143


def execute(run_factory, console: Console, out: str | Path | Sequence[str | Path],
            interval_s: float = 30.0, score: str | None = None):
    """Creates the run (a `ContinualRun` or a `SeedBatch`) with ``run_factory(progress)``
    and runs it to the end; Ctrl-C or SIGTERM stops it with how to resume ``out`` (its
    run directory, or a batch's run directories, one path each). ``score``: the
    curriculum's `Curriculum.score_symbol`, so that the progress lines name the score as
    the summary table (`print_run`) does."""
    outs = [out] if isinstance(out, str | Path) else list(out)
    with progress_for(console, interval_s, score) as progress, stop_on_signals():
        try:
            run = run_factory(progress)
            run.run()
        except (RunDirError, CheckpointError, RunError, ConfigError, TrackingError) as err:
            raise CLIError(str(err)) from None
        except Terminate:
            raise Terminated(f"terminated (SIGTERM); {_resume_hint(outs)}") from None
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted; {_resume_hint(outs)}") from None
    return run


def _resume_hint(outs: Sequence[str | Path]) -> str:
    """How to go on after a stop: resume the run directories of ``outs`` that were
    created (a batch's seeds each have their own, so each path is checked on its own:
    joined into one string they would name no directory and the hint would wrongly say
    there is nothing to resume), or, stopped before any was created, start again."""
    made = [p for p in outs if (Path(p) / "run.json").is_file()]
    if not made:
        return (f"stopped before {' '.join(map(str, outs))} was created: nothing to "
                "resume, start the run again")
    left = [p for p in outs if p not in made]
    named = " ".join(map(str, made))
    hint = (f"{named} {'keeps its' if len(made) == 1 else 'keep their'} last checkpoint: "
            f"continue with `telapa run --resume {' '.join(shlex.quote(str(p)) for p in made)}`")
    if left:  # a batch stopped while it created its run directories
        hint += (f"; {' '.join(map(str, left))} {'was' if len(left) == 1 else 'were'} "
                 "not created: start those seeds again")
    return hint


RESUME_OPTIONS = ("curriculum", "method", "seed", "preset", "intrinsic_beta", "sets",
                  "backend")


def check_resume_options(ns: argparse.Namespace, stored: RunSpec, path: str,
                         *, seed: bool = True) -> None:
    """Options given with ``--resume`` must agree with the run in ``path``; `CLIError`
    names each one that contradicts it (an option left out is taken from the run).
    ``seed=False`` (several runs resumed as a batch) refuses ``--seed``."""
    if not seed and ns.seed is not None:
        raise CLIError("--seed cannot be combined with several --resume run directories")
    check_resume_imports(ns.imports, stored.imports, path)
    given = {name: getattr(ns, name) for name in RESUME_OPTIONS
             if getattr(ns, name) is not None}
    if not given:
        return
    wrong = []
    if "method" in given and given["method"] != stored.method:
        wrong.append(f"--method {given['method']} (the run's method is {stored.method})")
    if "seed" in given and given["seed"] != stored.seed:
        wrong.append(f"--seed {given['seed']} (the run's seed is {stored.seed})")
    if "backend" in given and given["backend"] != stored.curriculum.backend:
        wrong.append(f"--backend {given['backend']} (the run's envs run on "
                     f"{stored.curriculum.backend!r}, as stored in its curriculum.yaml)")
    elif "curriculum" in given:
        try:
            curriculum = _curriculum(given["curriculum"], given.get("backend"))
        except ConfigError as err:
            raise CLIError(str(err)) from None
        if curriculum != stored.curriculum:
            on = (f" on backend {stored.curriculum.backend!r}"
                  if curriculum.backend != stored.curriculum.backend else "")
            wrong.append(f"--curriculum {given['curriculum']} (the run's curriculum is "
                         f"{stored.curriculum.name!r}{on}, as stored in its curriculum.yaml)")
    if "preset" in given or "intrinsic_beta" in given or "sets" in given:
        try:
            sets = parse_sets(given.get("sets", []))
            beta = ({"intrinsic_beta": given["intrinsic_beta"]} if "intrinsic_beta" in given
                    else {})
            config = (load_run_config(given["preset"], {**beta, **sets}) if "preset" in given
                      else override(stored.config, {**beta, **sets}))
            stored_config = stored.bound().config
            config = dataclasses.replace(stored, config=config).bound().config
        except ConfigError as err:
            raise CLIError(str(err)) from None
        changed = differences(stored_config, config, sets)
        wrong.extend(f"--set {key}={json.dumps(new)} (the run's {key} is {json.dumps(old)})"
                     for key, (old, new) in changed.items())
        if "preset" in given and config.model_copy(
                update={"intrinsic_beta": stored.config.intrinsic_beta}) != stored_config \
                and not changed:
            wrong.append(f"--preset {given['preset']} (the run's settings, in its config.yaml, "
                         f"differ; it was started with preset {stored.preset!r})")
        if "intrinsic_beta" in given and config.intrinsic_beta != stored.config.intrinsic_beta:
            wrong.append(f"--intrinsic-beta {given['intrinsic_beta']} (the run's is "
                         f"{stored.config.intrinsic_beta})")
    if wrong:
        raise CLIError(f"{path} was started with other settings; these options "
                       f"contradict it: {'; '.join(wrong)}. Leave them out to resume it")


def check_resume_imports(given: list[str] | None, recorded: tuple[str, ...], path: str
                         ) -> None:
    """``--import`` given with ``--resume`` must name the modules the run was started with
    (``run.json`` ``imports``, which the resume imports again anyway): `CLIError` naming
    each module that differs. A run's plug-ins define its methods and envs, so a resume
    with others would continue it under other code."""
    if given is None:
        return
    extra = [m for m in dict.fromkeys(given) if m not in recorded]
    missing = [m for m in recorded if m not in given]
    if not extra and not missing:
        return
    started = (f"--import {' --import '.join(recorded)}" if recorded else "no --import")
    wrong = ([f"--import {m} is not one of them" for m in extra]
             + [f"{m} is left out" for m in missing])
    raise CLIError(f"{path} was started with {started} (run.json imports): {'; '.join(wrong)}. "
                   "Leave --import out to resume it (the run imports its own modules again)")


def _cmd_run(ns: argparse.Namespace) -> None:
    if ns.resume and ns.out is not None:  # a resume never moves a run: it would be ignored
        raise CLIError(f"--out {ns.out} cannot be combined with --resume "
                       f"{' '.join(ns.resume)}: a run resumes in its own directory, so leave "
                       "--out off")
    console = Console(stderr=True)
    tracking = tracking_of(ns)
    if ns.resume and len(ns.resume) > 1:
        if ns.seeds is not None:
            raise CLIError("--seeds cannot be combined with --resume (each run directory "
                           "keeps its seed)")
        scores = []
        for path in ns.resume:
            try:
                stored = RunSpec.stored(path)
            except RunDirError as err:
                raise CLIError(str(err)) from None
            check_resume_options(ns, stored, path, seed=False)
            scores.append(stored.curriculum.score_symbol())
        batch = execute(lambda p: SeedBatch.resume(ns.resume, p, tracking=tracking), console,
                        ns.resume, ns.log_interval, scores[0])
        for run in batch.runs:
            print_run(run, stdout_console())
        return
    if ns.resume:
        resume = ns.resume[0]
        if ns.seeds is not None:
            raise CLIError("--seeds cannot be combined with --resume (each run directory "
                           "keeps its seed)")
        try:
            stored = RunSpec.stored(resume)
        except RunDirError as err:
            raise CLIError(str(err)) from None
        check_resume_options(ns, stored, resume)
        run = execute(lambda p: ContinualRun.resume(resume, p, tracking=tracking), console,
                      resume, ns.log_interval, stored.curriculum.score_symbol())
    elif ns.seeds is not None:
        _run_seeds(ns, console, tracking)
        return
    else:
        missing = [f"--{a}" for a in ("curriculum", "method") if getattr(ns, a) is None]
        if missing:
            raise CLIError(f"{' and '.join(missing)} required (or --resume RUN_DIR)")
        seed = 0 if ns.seed is None else ns.seed
        spec = build_spec(ns.curriculum, ns.method, seed, ns.preset, ns.intrinsic_beta,
                          ns.sets, ns.imports, ns.backend)
        out = Path(ns.out) if ns.out else _default_out(spec.curriculum.name, ns.method, seed)
        try:
            claim_new_dir(out, resume_hint=f"resume it with `telapa run --resume {out}`")
        except RunDirError as err:
            raise CLIError(str(err)) from None
        run = execute(lambda p: ContinualRun.start(spec, out, p, tracking=tracking), console,
                      out, ns.log_interval, spec.curriculum.score_symbol())
    print_run(run, stdout_console())


def _run_seeds(ns: argparse.Namespace, console: Console, tracking: Tracking) -> None:
    """``telapa run --seeds``: validates everything and claims every run directory
    before any work, then runs the batch."""
    missing = [f"--{a}" for a in ("curriculum", "method") if getattr(ns, a) is None]
    if missing:
        raise CLIError(f"{' and '.join(missing)} required (or --resume RUN_DIR)")
    if ns.seed is not None:
        raise CLIError("give --seed or --seeds, not both")
    try:
        seeds = parse_seeds(ns.seeds)
    except ValueError as err:
        raise CLIError(f"--seeds: {err}") from None
    for seed in seeds:
        if not 0 <= seed < SEED_LIMIT:
            raise CLIError(f"--seeds: seed {seed} is out of range: use 0 <= seed < 2^32")
    spec = build_spec(ns.curriculum, ns.method, seeds[0], ns.preset, ns.intrinsic_beta,
                      ns.sets, ns.imports, ns.backend)
    try:  # the seeds run as one batch: they must fit in memory together
        check_memory(spec.curriculum, spec.method, spec.config, seeds=len(seeds),
                     source=f"the batch (preset {spec.preset})")
    except ConfigError as err:
        raise CLIError(str(err)) from None
    outs = batch_outs(spec.curriculum.name, ns.method, seeds, ns.out)
    for out in outs:
        try:
            claim_new_dir(out, resume_hint=f"resume it with `telapa run --resume {out}`")
        except RunDirError as err:
            raise CLIError(str(err)) from None
    batch = execute(lambda p: SeedBatch.start(spec, seeds, outs, p, tracking=tracking),
                    console, outs, ns.log_interval, spec.curriculum.score_symbol())
    for run in batch.runs:
        print_run(run, stdout_console())


def print_run(run: ContinualRun, console: Console) -> None:
    """The per-visit table and headline metrics of one finished run."""
    visits = run.tables()["visits"]
    table = Table(title=f"{run.spec.method} on {run.spec.curriculum.name} (seed {run.spec.seed})")
    sr = run.spec.curriculum.score_symbol()  # SR, or MuJoCo's SR~
    for column in ("visit", "env", "steps", f"pre {sr}", f"post {sr}"):
        table.add_column(column, justify="left" if column == "env" else "right")
    for row in visits.itertuples():
        table.add_row(row.tag, row.env_id, f"{row.train_steps:,}", f"{row.pre_sr:.2f}",
                      f"{row.post_sr:.2f}")
    console.print(table)
    m = run.metrics()
    console.print(
        f"Mean {sr} {metric_text(m['mean_sr'])}  BWT {metric_text(m['bwt'])}  "
        f"(tau from {m['tau_source']}; "
        f"`telapa metrics` scores runs together)  -> {run.dir.path}"
    )


def metric_text(value: float, digits: int = 3) -> str:
    """A headline metric of one run as `telapa metrics` prints it (`format_cell`, less
    the CI one run has not): ``n/a`` where it is undefined, e.g. Mean SR and BWT of a
    curriculum without revisits (``cycles: 1``), rather than ``nan``."""
    return format_cell(value, math.nan, digits).removesuffix(" ± n/a")


def metrics_tables(result: CurriculumResults, *, resample: Resample = "runs") -> list[Table]:
    """Rich tables of one curriculum: the main metrics table (mean ± t half width
    [bootstrap interval]), the revisit table, rliable's aggregates of the revisit scores
    (mean and IQM, performance profile, probability of improvement) and the compute
    table, as ``telapa report`` makes them."""
    return [rich_table(t, title=f"{result.curriculum}: {t.title}")
            for t in metrics_report_tables(result, resample=resample)]


def metrics_report_tables(result: CurriculumResults, *, resample: Resample = "runs"
                          ) -> list[ReportTable]:
    """The report tables `metrics_tables` shows (those that apply to ``result``);
    ``resample``: what the aggregates' bootstrap draws (`telapa.report.aggregates`)."""
    prefix = result.curriculum
    tables = [main_table(result, prefix=prefix), revisit_table(result, prefix=prefix),
              aggregates_table(result, prefix=prefix, resample=resample),
              profile_table(result, prefix=prefix, resample=resample),
              improvement_table(result, prefix=prefix, resample=resample),
              compute_table(result, prefix=prefix)]
    return [t for t in tables if t is not None]


@reads_results
def _cmd_metrics(ns: argparse.Namespace) -> None:
    console = stdout_console()
    runs = load_runs(ns.runs, skip_incomplete=ns.skip_incomplete, console=Console(stderr=True))
    bar = (None if ns.tau_from is None else load_runs(
        ns.tau_from, skip_incomplete=ns.skip_incomplete, console=Console(stderr=True),
        option="--tau-from"))
    try:
        results = score(runs, tau_from=bar)
    except RunDirError as err:
        raise CLIError(str(err)) from None
    if ns.json:
        payload = {}
        for name, r in results.items():
            tables = {t.id.removeprefix(f"{r.curriculum}-"): t
                      for t in metrics_report_tables(r, resample=ns.resample)}
            payload[name] = {
                "tau": r.tau, "tau_source": r.tau_source,
                "summary": _records(tables["main"].values.select_dtypes("number")),
                "revisits": _records(r.revisits()), "compute": _records(r.compute()),
                **{key: _records(tables[key].values)
                   for key in ("aggregates", "profile", "improvement") if key in tables}}
        print(json.dumps(json_safe(payload), allow_nan=False))
        return
    for result in results.values():
        for table in metrics_tables(result, resample=ns.resample):
            print_table(console, table)


def _records(frame: pd.DataFrame) -> dict[str, dict[str, float]]:
    return {str(k): {str(c): float(v) for c, v in row.items()} for k, row in frame.iterrows()}


def log_interval(text: str) -> float:
    """``--log-interval``: a finite number of seconds > 0. Zero or less would print a
    progress line at every update, NaN never one (every comparison with it is false),
    and inf only the last, none of which a cluster job's log asked for."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds > 0, got {text}")
    return value


def add_parsers(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run one method on a curriculum (resumable)")
    run.add_argument("--curriculum", help="curriculum name in configs/curricula or a YAML file")
    run.add_argument("--method", help=f"one of: {', '.join(method_names())} (or a "
                                      "plug-in's, see --import)")
    run.add_argument("--seed", type=seed_int, help="0 <= S < 2^32 (default 0)")
    run.add_argument("--seeds", metavar="SEEDS",
                     help="several seeds in one process, e.g. 0-7 or 0,2,5 (one run "
                          "directory each; PPO of the seeds batched on the jax backend)")
    presets = ", ".join(sorted(path.stem for path in RUN_PRESET_DIR.glob("*.yaml")))
    run.add_argument("--preset",
                     help=f"a run preset (configs/runs: {presets}) or a YAML file; default: "
                          "the curriculum's env family's quick preset (quick for MiniGrid, "
                          "mujoco-quick for MuJoCo)")
    run.add_argument("--backend", choices=BACKENDS,
                     help="where the tasks' envs run, instead of the curriculum's backend: "
                          "e.g. jax for a MuJoCo curriculum on MJX on an accelerator (a "
                          "visit one compiled program, --seeds vmapped); recorded in the "
                          "run's curriculum.yaml")
    add_set_option(run)
    add_import_option(run)
    run.add_argument("--out", help="run directory (default: under runs/); with --seeds "
                                   "the directory that holds the seeds' run directories")
    run.add_argument("--intrinsic-beta", type=float, metavar="BETA",
                     help="add the episodic count bonus to training rewards (paper App. F)")
    run.add_argument("--resume", metavar="RUN_DIR", nargs="+",
                     help="continue a killed run (other options must agree with it); "
                          "several run directories resume as one batch of seeds")
    add_track_options(run, "one tracked run per seed")
    run.add_argument("--log-interval", type=log_interval, default=30.0, metavar="SECONDS",
                     help="seconds between progress lines when stderr is not a terminal")
    run.set_defaults(func=_cmd_run)

    metrics = sub.add_parser("metrics", help="score finished runs together (tables with 95%% "
                                             "t and bootstrap intervals, IQM, performance "
                                             "profiles, probability of improvement)")
    metrics.add_argument("runs", nargs="+", metavar="RUN_DIR|SWEEP_DIR")
    metrics.add_argument("--skip-incomplete", action="store_true")
    metrics.add_argument("--json", action="store_true", help="print the tables as JSON")
    add_tau_from_option(metrics)
    add_resample_option(metrics)
    metrics.set_defaults(func=_cmd_metrics)
