"""``telapa run`` (one method on one curriculum, resumable) and ``telapa metrics``.

    telapa run --curriculum NAME|FILE --method NAME --seed S [--preset quick|paper|mujoco|FILE]
               [--out DIR]
    telapa run --resume RUN_DIR
    telapa metrics RUN_DIR... [--skip-incomplete] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from telapa.cli.common import CLIError, load_runs, stdout_console
from telapa.config import ConfigError
from telapa.continual.curriculum import Visit, load_curriculum
from telapa.continual.preset import bind_env_family, load_run_config, parse_run_config
from telapa.continual.registry import METHODS
from telapa.continual.results import COMPUTE_LABELS, CurriculumResults, score
from telapa.continual.rundir import RunDirError
from telapa.continual.runner import ContinualRun, RunError, RunSpec
from telapa.io import CheckpointError
from telapa.metrics import format_cell
from telapa.metrics.summary import METRIC_LABELS, SUMMARY_METRICS


class RichProgress:
    """Draws a continual run: one bar per visit with steps/s and the latest eval SR."""

    def __init__(self, console: Console):
        self.console = console
        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.completed:>11,.0f}/{task.total:,.0f}"),
            TextColumn("{task.fields[rate]:>8,.0f} steps/s"),
            TextColumn("SR {task.fields[sr]}"),
            TimeRemainingColumn(),
            console=console,
        )
        self._tasks: dict[int, Any] = {}
        self._current: int | None = None
        self._clock: tuple[float, int] = (time.perf_counter(), 0)

    def __enter__(self) -> RichProgress:
        self.bars.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.__exit__(*exc)

    def visit(self, visit: Visit, budget: int, done: int) -> None:
        if visit.index not in self._tasks:
            self._tasks[visit.index] = self.bars.add_task(
                f"{visit.tag:<4} {visit.env_id}", total=budget, completed=done, rate=0.0, sr="-"
            )
        self._current = visit.index
        self._clock = (time.perf_counter(), done)

    def advance(self, steps: int, metrics: dict[str, float]) -> None:
        start, done = self._clock
        rate = (steps - done) / max(time.perf_counter() - start, 1e-9)
        self.bars.update(self._tasks[self._current], completed=steps, rate=rate)

    def evaluated(self, visit: Visit, step: int, sr: float) -> None:
        self.bars.update(self._tasks[visit.index], sr=f"{sr:.2f}")

    def note(self, text: str) -> None:
        self.console.print(text)


def _default_out(curriculum: str, method: str, seed: int) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{curriculum}-{method}-s{seed}-{stamp}"


def build_spec(
    curriculum: str, method: str, seed: int, preset: str, intrinsic_beta: float | None = None
) -> RunSpec:
    """Validates everything a run needs before any work starts."""
    if method not in METHODS:
        raise CLIError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
    try:
        config = load_run_config(preset)
        if intrinsic_beta is not None:
            data = config.model_dump()
            data["intrinsic_beta"] = intrinsic_beta
            config = parse_run_config(data, source="--intrinsic-beta")
        cur = load_curriculum(curriculum)
        # the env family's latent D, and options it rejects, are checked before any work
        bind_env_family(config, list(cur.task_ids().values()), f"curriculum {cur.name!r}")
        return RunSpec(cur, method, seed, config, preset)
    except ConfigError as err:
        raise CLIError(str(err)) from None


def execute(run_factory, console: Console) -> ContinualRun:
    """Creates the run with ``run_factory(progress)`` and runs it to the end."""
    with RichProgress(console) as progress:
        try:
            run = run_factory(progress)
            run.run()
        except (RunDirError, CheckpointError, RunError) as err:
            raise CLIError(str(err)) from None
    return run


def _cmd_run(ns: argparse.Namespace) -> None:
    console = Console(stderr=True)
    if ns.resume:
        run = execute(lambda p: ContinualRun.resume(ns.resume, p), console)
    else:
        missing = [f"--{a}" for a in ("curriculum", "method") if getattr(ns, a) is None]
        if missing:
            raise CLIError(f"{' and '.join(missing)} required (or --resume RUN_DIR)")
        spec = build_spec(ns.curriculum, ns.method, ns.seed, ns.preset, ns.intrinsic_beta)
        out = Path(ns.out) if ns.out else _default_out(spec.curriculum.name, ns.method, ns.seed)
        run = execute(lambda p: ContinualRun.start(spec, out, p), console)
    print_run(run, stdout_console())


def print_run(run: ContinualRun, console: Console) -> None:
    """The per-visit table and headline metrics of one finished run."""
    visits = run.tables()["visits"]
    table = Table(title=f"{run.spec.method} on {run.spec.curriculum.name} (seed {run.spec.seed})")
    for column in ("visit", "env", "steps", "pre SR", "post SR"):
        table.add_column(column, justify="left" if column == "env" else "right")
    for row in visits.itertuples():
        table.add_row(row.tag, row.env_id, f"{row.train_steps:,}", f"{row.pre_sr:.2f}",
                      f"{row.post_sr:.2f}")
    console.print(table)
    m = run.metrics()
    console.print(
        f"Mean SR {m['mean_sr']:.3f}  BWT {m['bwt']:.3f}  (tau from {m['tau_source']}; "
        f"`telapa metrics` scores runs together)  -> {run.dir.path}"
    )


def metrics_tables(result: CurriculumResults) -> list[Table]:
    """Rich tables: the main metrics table and the revisit table of one curriculum."""
    summary = result.summary()
    main = Table(title=f"{result.curriculum}: mean ± 95% CI over seeds "
                       f"(tau_T from {result.tau_source})")
    main.add_column("method")
    main.add_column("runs", justify="right")
    for m in SUMMARY_METRICS:
        main.add_column(METRIC_LABELS[m], justify="right")
    for method, row in summary.iterrows():
        main.add_row(method, str(int(row["runs"])),
                     *(format_cell(row[m], row[f"{m}_ci"], digits=3) for m in SUMMARY_METRICS))
    revisits = result.revisits()
    rev = Table(title="Revisit mean SR (post-training)")
    rev.add_column("method")
    for tag in revisits.columns:
        rev.add_column(tag, justify="right")
    for method, row in revisits.iterrows():
        rev.add_row(method, *("n/a" if math.isnan(v) else f"{v:.3f}" for v in row))
    compute = result.compute()
    cost = Table(title="Compute and memory (mean ± 95% CI)")
    cost.add_column("method")
    for label in COMPUTE_LABELS.values():
        cost.add_column(label, justify="right")
    for method, row in compute.iterrows():
        cost.add_row(method, *(format_cell(row[c], row[f"{c}_ci"], digits=2)
                               for c in COMPUTE_LABELS))
    return [main, rev, cost]


def _cmd_metrics(ns: argparse.Namespace) -> None:
    console = stdout_console()
    runs = load_runs(ns.runs, skip_incomplete=ns.skip_incomplete, console=Console(stderr=True))
    results = score(runs)
    if ns.json:
        payload = {name: {"tau": r.tau, "tau_source": r.tau_source,
                          "summary": _records(r.summary()), "revisits": _records(r.revisits()),
                          "compute": _records(r.compute())}
                   for name, r in results.items()}
        print(json.dumps(payload, default=float))
        return
    for result in results.values():
        for table in metrics_tables(result):
            console.print(table)


def _records(frame: pd.DataFrame) -> dict[str, dict[str, float]]:
    return {str(k): {c: float(v) for c, v in row.items()} for k, row in frame.iterrows()}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run one method on a curriculum (resumable)")
    run.add_argument("--curriculum", help="curriculum name in configs/curricula or a YAML file")
    run.add_argument("--method", help=f"one of: {', '.join(METHODS)}")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--preset", default="quick",
                     help="quick, paper, mujoco, mujoco-quick, or a YAML file")
    run.add_argument("--out", help="run directory (default: under runs/)")
    run.add_argument("--intrinsic-beta", type=float, metavar="BETA",
                     help="add the episodic count bonus to training rewards (paper App. F)")
    run.add_argument("--resume", metavar="RUN_DIR", help="continue a killed run")
    run.set_defaults(func=_cmd_run)

    metrics = sub.add_parser("metrics", help="score finished runs together (tables with 95%% CIs)")
    metrics.add_argument("runs", nargs="+", metavar="RUN_DIR")
    metrics.add_argument("--skip-incomplete", action="store_true")
    metrics.add_argument("--json", action="store_true", help="print the tables as JSON")
    metrics.set_defaults(func=_cmd_metrics)
