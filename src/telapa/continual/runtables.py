"""The tables of a run directory (``visits.csv``, ``curve.csv``, ``final.csv``, method
tables such as ``elites.csv``) and its JSON records (``accounting.json``,
``method_log.json``): their columns, how tables are written and read, and the checks
every read makes, each naming the file, and the line and column where one applies.
`telapa.continual.rundir.RunDir`'s typed readers read them through these."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from telapa.continual.runformat import RunDirError
from telapa.io import write_table_atomic

VISIT_COLUMNS = [
    "visit", "tag", "task", "env_id", "cycle", "budget", "pre_sr", "pre_return", "post_sr",
    "post_return", "train_steps", "start_global_step", "end_global_step",
]
CURVE_COLUMNS = ["visit", "tag", "task", "step", "global_step", "sr", "mean_return"]
FINAL_COLUMNS = ["task", "env_id", "sr", "mean_return"]
TABLE_COLUMNS = {"visits": VISIT_COLUMNS, "curve": CURVE_COLUMNS, "final": FINAL_COLUMNS}
COUNT_COLUMNS = {"visits": ["pre_successes", "pre_episodes", "post_successes", "post_episodes"],
                 "curve": ["successes", "episodes"], "final": ["successes", "episodes"]}
"""Each SR's evaluation as the counts it is: k successes of n episodes (``sr`` = k / n,
kept for reading), written after the table's other columns; a successes cell is empty
where the competence is not a count (MuJoCo's SR~). Runs written before them lack them:
`telapa.metrics.rates` recovers k from the SR and n."""
ELITE_REQUIRED = ("task", "archive_tag", "slot", "elite_id", "parent_id", "visit", "fitness",
                  "sr", "sigma", "lineage", "embedding_version", "d_min")
"""Leading columns of ``elites.csv`` (`telapa.qd.export.ELITE_COLUMNS`), then d_0.."""

COLUMN_KINDS = {
    "visit": "count", "cycle": "count", "budget": "count", "train_steps": "count",
    "start_global_step": "count", "end_global_step": "count", "step": "count",
    "global_step": "count", "pre_sr": "rate", "post_sr": "rate", "sr": "rate",
    "pre_return": "real", "post_return": "real", "mean_return": "real",
    **{c: "count" for columns in COUNT_COLUMNS.values() for c in columns},
}
"""What each numeric column of the run tables (and ``elites.csv``'s ``visit`` and ``sr``)
holds: ``count`` a non-negative integer, ``rate`` a success rate in [0, 1], ``real`` a
finite number. An empty cell (a visit still in progress) is allowed."""
_KIND_TEXT = {"count": "a non-negative integer", "rate": "a success rate in [0, 1]",
              "real": "a finite number"}


def records_tables(records: Mapping[str, list[dict[str, Any]]]) -> dict[str, pd.DataFrame]:
    """A run's ``visits``, ``curve`` and ``final`` tables from its record rows, each with
    its columns in order (an empty table keeps them)."""
    tables = {name: pd.DataFrame(records[name], columns=columns + COUNT_COLUMNS[name])
              for name, columns in (("visits", VISIT_COLUMNS), ("curve", CURVE_COLUMNS),
                                    ("final", FINAL_COLUMNS))}
    for name, frame in tables.items():  # counts stay integers beside empty cells
        for column in COUNT_COLUMNS[name]:
            frame[column] = pd.array(frame[column].tolist(), dtype="Int64")
    return tables


def write_tables(tables: dict[Path, pd.DataFrame]) -> None:
    """Writes each table to its path atomically."""
    for path, frame in tables.items():
        write_table_atomic(path, frame)


def read_table(path: Path, name: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The table ``name`` at ``path`` with its columns (``columns``, by default all of a
    run table's) and values (`check_values`) checked; `RunDirError` names a missing, empty
    or unparsable file."""
    if not path.is_file():
        raise RunDirError(f"{path} is missing (incomplete run?)")
    try:
        frame = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as err:
        raise RunDirError(f"{path} is not a readable CSV table: {err}") from None
    needed = TABLE_COLUMNS.get(name, ()) if columns is None else columns
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise RunDirError(f"{path} is missing column(s) {missing}; it has "
                          f"{list(frame.columns)} (truncated or foreign?)")
    check_values(frame, path)
    return frame


def check_values(frame: pd.DataFrame, path: Path) -> None:
    """`RunDirError` naming the file, line, column and value of the first cell of
    ``frame`` (read from ``path``) that is not what its column holds (`COLUMN_KINDS`)."""
    for column in frame.columns:
        kind = COLUMN_KINDS.get(column)
        if kind is None:
            continue
        raw = frame[column]
        given = raw.notna().to_numpy()
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            if kind == "count":
                ok = (values >= 0) & (values == np.floor(values))
            elif kind == "rate":
                ok = (values >= 0) & (values <= 1)
            else:
                ok = np.isfinite(values)
        bad = np.flatnonzero(given & ~ok)
        if bad.size:
            row = int(bad[0])
            value = str(raw.iloc[row])
            raise RunDirError(f"{path}, line {row + 2}, column {column}: {value!r} is not "
                              f"{_KIND_TEXT[kind]}")


def check_run_tables(tables: dict[str, pd.DataFrame], paths: dict[str, Path],
                     curriculum: Any, config: Any) -> None:
    """`RunDirError` naming the file unless the visits, curve and final ``tables`` (read
    from ``paths``) are those of a finished run of ``curriculum`` (a `Curriculum`) and
    ``config`` (a `RunConfig`): one visits row per visit of the sequence (tags in order,
    no missing values), one curve row per evaluation (pre-evaluation plus one per chunk of
    ``eval_every`` steps), one final row per task."""
    visits = curriculum.visits()
    path = paths["visits"]
    tags = [v.tag for v in visits]
    got = [str(x) for x in tables["visits"]["tag"]]
    if got != tags:
        raise RunDirError(f"{path} has visits {got}, the run's curriculum "
                          f"{curriculum.name!r} has {tags} (truncated?)")
    if tables["visits"][VISIT_COLUMNS].isna().any().any():
        raise RunDirError(f"{path} has missing values (truncated?)")
    path = paths["curve"]
    counts = tables["curve"].groupby("visit").size().to_dict()
    for v in visits:
        budget = v.steps or config.steps_per_visit
        expected = 1 + math.ceil(budget / config.eval_every)
        if counts.get(v.index, 0) != expected:
            raise RunDirError(
                f"{path} has {counts.get(v.index, 0)} evaluations of visit {v.index} "
                f"({v.tag}), expected {expected} (truncated?)")
    if tables["curve"][CURVE_COLUMNS].isna().any().any():
        raise RunDirError(f"{path} has missing values (truncated?)")
    path = paths["final"]
    tasks = list(curriculum.task_ids())
    final = tables["final"]
    if [str(x) for x in final["task"]] != tasks or final[FINAL_COLUMNS].isna().any().any():
        raise RunDirError(f"{path} does not hold one complete row per task {tasks} "
                          "(truncated?)")


def check_elites(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """``frame`` (``elites.csv``, read with `ELITE_REQUIRED`) when it has descriptor
    columns d_0.. and no missing values; `RunDirError` naming ``path`` otherwise."""
    descriptor = [c for c in frame.columns if re.fullmatch(r"d_\d+", c)]
    if not descriptor:
        raise RunDirError(f"{path} has no descriptor columns d_0.. (truncated?)")
    if frame[["task", "visit", "elite_id", *descriptor]].isna().any().any():
        raise RunDirError(f"{path} has missing values (truncated?)")
    return frame


ACCOUNTING_REQUIRED = ("wall_s", "extra_env_steps", "peak_rss_bytes", "method_state_bytes",
                       "run_dir_bytes")


def is_non_negative_number(value: Any) -> bool:
    """Whether ``value`` is a finite number >= 0 (an int or float, not a bool): what
    ``accounting.json`` records, times and sizes."""
    return (not isinstance(value, bool) and isinstance(value, int | float)
            and math.isfinite(value) and value >= 0)


def check_accounting(data: Any, path: Path) -> dict[str, Any]:
    """``data`` (``accounting.json``, read from ``path``) when it holds every one of
    `ACCOUNTING_REQUIRED` as a non-negative number; `RunDirError` naming ``path`` and the
    key otherwise."""
    if not isinstance(data, dict) or any(k not in data for k in ACCOUNTING_REQUIRED):
        raise RunDirError(f"{path} lacks one of {list(ACCOUNTING_REQUIRED)}")
    for key in ACCOUNTING_REQUIRED:
        if not is_non_negative_number(value := data[key]):
            raise RunDirError(f"{path}: {key} is {value!r}, not a non-negative number")
    return data


def check_method_log(log: Any, path: Path) -> list[dict[str, Any]]:
    """``log`` (``method_log.json``, read from ``path``) when it is a list of event
    objects; `RunDirError` naming ``path`` otherwise."""
    if not isinstance(log, list) or not all(isinstance(e, dict) and "event" in e
                                            for e in log):
        raise RunDirError(f"{path} must hold a JSON list of event objects")
    return log
