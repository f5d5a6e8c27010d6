"""Helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.progress import track
from rich.table import Table
from rich.text import Text

from telapa import envs
from telapa.config import MAX_ENV_STEPS, ascii_int
from telapa.continual.rundir import RunDirError, RunImportError
from telapa.report.load import NotARunError, load_records
from telapa.report.results import RunRecord
from telapa.report.tables import ReportTable

T = TypeVar("T")


class CLIError(Exception):
    """A user error: printed as ``telapa: error: ...`` with exit status 2."""


def log_line(text: str) -> None:
    """One progress line on stderr, ``[HH:MM:SS] text``, as a run's plain progress writes
    them (`telapa.continual.progress.PlainProgress`): a sweep's events, a report's phases."""
    print(f"[{datetime.now():%H:%M:%S}] {text}", file=sys.stderr, flush=True)


def reads_results(command: Callable[[argparse.Namespace], T]
                  ) -> Callable[[argparse.Namespace], T]:
    """A command that only reads runs' results (``metrics``, ``report``, ``inspect``):
    MuJoCo's upstream deprecation of gymnasium's XML, given where reading a MuJoCo run's
    curriculum loads its models to check it, is not shown
    (`telapa.envs.mujoco.quiet_model_loads`)."""
    from telapa.envs.mujoco import quiet_model_loads

    @functools.wraps(command)
    def quiet(ns: argparse.Namespace) -> T:
        with quiet_model_loads():
            return command(ns)
    return quiet


def seed_int(text: str) -> int:
    """A seed: an integer with 0 <= seed < 2^32 (JAX keys take seeds modulo 2^32, so a
    negative or larger seed would collide with another one)."""
    try:
        value = ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an integer (ASCII digits), got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be in 0 .. 2^32 - 1, got {text}")
    return value


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, inf) replaced by None, so that
    ``json.dumps(..., allow_nan=False)`` writes valid JSON (``null``)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def positive_int(text: str) -> int:
    try:
        value = ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer (ASCII digits), got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def add_set_option(parser: argparse.ArgumentParser, *, example: str = "train.ppo.lr=1e-3"
                   ) -> None:
    """``--set KEY=VALUE`` (repeatable, into ``ns.sets``): one setting of the preset,
    validated by its model (`telapa.overrides`); ``example`` is a key of that model (a
    run preset's ``train.ppo.lr``, a PPO preset's ``ppo.lr``)."""
    parser.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                        help=f"change one setting of the preset, e.g. --set {example} "
                             "(a dotted key; the value is read as YAML; repeatable)")


def add_resample_option(parser: argparse.ArgumentParser) -> None:
    """``--resample runs|tasks`` (into ``ns.resample``): what the bootstrap intervals of
    the revisit aggregates draw (`telapa.report.aggregates`)."""
    parser.add_argument("--resample", choices=("runs", "tasks"), default="runs",
                        help="bootstrap of the revisit aggregates (IQM, profile, "
                             "improvement): whole runs (default: a seed's revisits move "
                             "together) or each revisit's runs on their own (rliable's "
                             "stratified bootstrap)")


def add_import_option(parser: argparse.ArgumentParser, *,
                      brings: str = "gymnasium ids, env families or methods",
                      recorded: str = "recorded in run.json, imported again by --resume"
                      ) -> None:
    """``--import MODULE`` (repeatable, into ``ns.imports``): a module imported before
    anything is validated (`telapa.plugins`), e.g. one that registers the user's envs or
    methods; `telapa.cli.main` imports it. The help says what the module may register
    for this command (``brings``) and what becomes of its name (``recorded``: only
    ``run`` has a ``--resume``)."""
    parser.add_argument("--import", dest="imports", action="append", metavar="MODULE",
                        help=f"import this module first (it may register {brings}: see "
                             f"'Extending telapa'); {recorded}; repeatable")


def import_plugins(modules: Sequence[str] | None) -> tuple[str, ...]:
    """Imports the ``--import`` modules; `CLIError` naming one that cannot be imported."""
    from telapa.plugins import PluginError, import_modules

    try:
        return import_modules(modules or ())
    except PluginError as err:
        raise CLIError(str(err)) from None


def add_track_options(parser: argparse.ArgumentParser, unit: str) -> None:
    """``--track wandb|mlflow`` (repeatable) and ``--track-project NAME``, read by
    `tracking_of`; ``unit`` says what one tracked run is (``one tracked run per seed``)."""
    from telapa.continual.tracking import TRACKERS

    parser.add_argument("--track", action="append", choices=TRACKERS,
                        help=f"also log the curves to Weights & Biases or MLflow ({unit}, "
                             "grouped by curriculum and method; needs telapa[tracking]; "
                             "repeatable). TensorBoard events are always written to "
                             "RUN_DIR/tb")
    parser.add_argument("--track-project", default="telapa", metavar="NAME",
                        help="the W&B project / MLflow experiment of --track (default "
                             "telapa)")


def tracking_of(ns: argparse.Namespace):
    """The ``--track`` trackers (a `telapa.continual.tracking.Tracking`), their packages
    checked before any work."""
    from telapa.continual.tracking import Tracking, TrackingError

    try:
        tracking = Tracking(tuple(dict.fromkeys(ns.track or ())), ns.track_project)
        tracking.check()
    except TrackingError as err:
        raise CLIError(str(err)) from None
    return tracking


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``low .. high``."""
    def parse(text: str) -> int:
        try:
            value = ascii_int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be an integer (ASCII digits), got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in {low} .. {high}, got {text}")
        return value
    parse.__name__ = "integer"
    return parse


def env_steps(text: str) -> int:
    """A positive number of env steps, at most `telapa.config.MAX_ENV_STEPS`."""
    value = positive_int(text)
    if value > MAX_ENV_STEPS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_ENV_STEPS:.0e} env steps, "
                                         f"got {text}")
    return value


def check_env_id(env_id: str, backend: str) -> None:
    """Raises `CLIError` unless ``env_id`` exists on ``backend``."""
    try:
        envs.check_env_id(env_id, backend)
    except ValueError as err:
        raise CLIError(str(err)) from None


FEWER_RUNS_NOTE = "(n=K): the metric is defined for only K of the row's runs."
"""The caption's note on `rich_table`'s ``(n=K)`` cells."""


def rich_table(table: ReportTable, *, title: str | None = None) -> Table:
    """``table`` as a rich table: the same cells as its Markdown (best cells in bold),
    numbers right-aligned, its caption below; and, in a table with a ``runs`` column, a
    metric defined for fewer of a row's runs marked ``(n=K)`` (`runs_used`), as the
    table's ``runs`` would otherwise be read as every mean's n ("0.000 ± n/a" in a row of
    2 runs is one seed's value, not two that agree)."""
    rows = table.rows()
    counts = [[runs_used(table, col.key, i) for col in table.columns] for i in range(len(rows))]
    caption = table.caption
    if any(any(row) for row in counts):
        caption = f"{caption} {FEWER_RUNS_NOTE}".strip()
    shown = Table(title=title or table.title, caption=caption or None,
                  caption_justify="left")
    lead = [table.index_label] if table.show_index else []
    numeric = [pd.api.types.is_numeric_dtype(table.values[c.key]) for c in table.columns]
    names = [r[0].split()[0] for r in rows if r[0].split()]
    for label in lead:  # a long label (a method and its settings) wraps, at least as wide
        shown.add_column(label, overflow="fold",  # as a method's name: the numbers beside
                         min_width=max(map(cell_len, names), default=1))  # it keep theirs
    for col, right in zip(table.columns, numeric, strict=True):
        shown.add_column(col.label, justify="right" if right else "left")
    for (label, cells, best), row_counts in zip(rows, counts, strict=True):
        styled = [f"[bold]{escape(v + n)}[/bold]" if b else escape(v + n)
                  for v, b, n in zip(cells, best, row_counts, strict=True)]
        shown.add_row(*([escape(label)] if table.show_index else []), *styled)
    return shown


def _plain(cell: object) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return Text.from_markup(cell).plain if isinstance(cell, str) else ""


def keep_words(table: Table) -> Table:
    """``table`` with every column at least as wide as its longest word, header
    included (its longest line where it does not wrap; a column that folds keeps its
    own ``min_width``), so that rich wraps a cell between words but never cuts a value
    short with "…" nor squeezes a column to nothing, however narrow the console."""
    for column in table.columns:
        if column.overflow == "fold":  # cut anywhere, nothing lost
            continue
        texts = [_plain(column.header), *map(_plain, column.cells)]
        if column.no_wrap:
            words = [line for text in texts for line in text.splitlines()]
        else:
            words = [word for text in texts for word in text.split()]
        column.min_width = max(column.min_width or 0, *map(cell_len, words), 1)
    return table


def _fit(table: Table, width: int) -> None:
    """Fixes the widths of ``table``'s columns where it is wider than ``width``: each
    column its ``min_width``, the rest shared in proportion to what each would take
    beyond it. Rich would cut every column by the same amount and then widen those
    below their ``min_width`` again, past ``width``."""
    _, right, _, left = table.padding
    columns = table.columns
    frame = ((len(columns) - 1 if table.box else 0) + (2 if table.box and table.show_edge else 0)
             + (left + right) * len(columns))
    natural = [max((cell_len(line) for cell in (column.header, *column.cells)
                    for line in _plain(cell).splitlines()), default=1) for column in columns]
    least = [min(column.min_width or 1, n) for column, n in zip(columns, natural, strict=True)]
    room = width - frame - sum(least)
    wanted = [n - m for n, m in zip(natural, least, strict=True)]
    if sum(natural) + frame <= width or room <= 0 or not sum(wanted):
        return
    share = [m + room * w // sum(wanted) for m, w in zip(least, wanted, strict=True)]
    for column, w in zip(columns, share, strict=True):
        column.width = w


def print_table(console: Console, table: Table) -> None:
    """Prints ``table`` (`keep_words`) as wide as the console, every value whole: a
    table that cannot be narrowed so far without cutting a value is printed wider,
    uncropped (a terminal wraps its long lines), where rich would cut its lines at the
    console's width."""
    keep_words(table)
    _fit(table, console.width)
    console.print(table, crop=False)


def runs_used(table: ReportTable, key: str, row: int) -> str:
    """`` (n=K)`` when the mean of column ``key`` in ``row`` is over K of the row's runs
    (``key_n`` below ``runs``: the metric is undefined, NaN, for the others), else ""
    (also for a table without ``runs`` or ``key_n``, and for K = 0: the cell reads
    n/a)."""
    values = table.values
    if "runs" not in values or f"{key}_n" not in values:
        return ""
    n, runs = values[f"{key}_n"].iloc[row], values["runs"].iloc[row]
    if pd.isna(n) or pd.isna(runs) or int(n) in (0, int(runs)):
        return ""
    return f" (n={int(n)})"


def stdout_console() -> Console:
    """A console for tables on stdout, wide enough for the metrics tables when piped."""
    console = Console()
    return console if console.is_terminal else Console(width=max(console.width, 120))


def tracker(console: Console, description: str) -> Callable[[Sequence[T]], Iterable[T]]:
    """Wraps an iteration in a transient progress bar on ``console``, when it is a
    terminal; otherwise (a file, a pipe, a test's capture) the bare iteration: rich's
    `track` then draws nothing but ends with an empty line, which put a blank line before
    every error of ``telapa metrics`` and three after a ``telapa report``."""

    def tracked(items: Sequence[T]) -> Iterable[T]:
        if not console.is_interactive:
            return items
        return track(items, description=description, console=console, transient=True)
    return tracked


def expand_sweeps(paths: Sequence[str]) -> list[str]:
    """``paths`` with every sweep directory replaced by its cells' run directories."""
    from telapa.continual.sweep import expand_sweep_dirs

    try:
        return [str(p) for p in expand_sweep_dirs(paths)]
    except (RunDirError, ValueError) as err:
        raise CLIError(str(err)) from None


def add_tau_from_option(parser: argparse.ArgumentParser) -> None:
    """``--tau-from RUN_DIR|SWEEP_DIR...``: tau_T from these runs' Scratch runs only."""
    parser.add_argument("--tau-from", nargs="+", metavar="RUN_DIR|SWEEP_DIR",
                        help="take tau_T from the Scratch runs of these runs only (e.g. "
                             "an ablation scored against the bar of the runs without it)")


def load_runs(paths: Sequence[str], *, skip_incomplete: bool, console: Console,
              option: str | None = None) -> list[RunRecord]:
    """Complete runs of ``paths`` with a progress bar on ``console``; a missing or
    incomplete one is a `CLIError` naming it, or (``skip_incomplete``) a warning. A sweep
    directory stands for all its cells' run directories. ``option``: the option the
    paths were given to (``--tau-from``), named in the error. Only a run that exists and
    is not complete is told of ``--skip-incomplete``: a path that does not exist (a
    typo) is not to be dropped, and an export's incomplete cell is no run to resume."""
    where = "" if option is None else f"{option}: "
    try:
        runs = expand_sweeps(paths)
        if not skip_incomplete:
            for path in runs:
                if not Path(path).exists():
                    raise CLIError(f"run directory {path} does not exist")
                _check_exported(Path(path))
        return load_records(
            runs, skip_incomplete=skip_incomplete,
            on_skip=lambda message: console.print(f"skipping {where}{message}", style="yellow",
                                                  markup=False, soft_wrap=True),
            track=tracker(console, "loading runs"),
        )
    except CLIError as err:
        raise CLIError(f"{where}{err}") from None
    except (RunImportError, NotARunError) as err:  # skipping would not help: the run
        raise CLIError(f"{where}{err}") from None  # may be complete, or there is no run
    except RunDirError as err:
        raise CLIError(f"{where}{err}" if skip_incomplete else
                       f"{where}{err} (or pass --skip-incomplete)") from None


def _check_exported(path: Path) -> None:
    """`CLIError` for a cell of a sweep export whose run.json is not complete: an export
    holds finished cells' results only, and has nothing to resume."""
    from telapa.continual.rundir import RunDir
    from telapa.continual.sweep.layout import stored_sweep

    if path.parent.name != "cells":
        return
    try:
        sweep = stored_sweep(path.parent.parent)
        status = RunDir(path).manifest().get("status") if sweep else None
    except (RunDirError, AttributeError):  # load_records names what is wrong
        return
    if not sweep or not sweep.get("exported_from") or status == "complete":
        return
    raise CLIError(f"{path} is a cell of the sweep export {path.parent.parent}, but its "
                   f"run.json is not complete (status {status!r}): an incomplete export, "
                   "which cannot be resumed (an export keeps no checkpoints); export the "
                   "finished cell again from the sweep's run directory (`telapa sweep "
                   "export`), or pass --skip-incomplete to leave it out")
