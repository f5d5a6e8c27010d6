"""How each visit's PPO training began: the policy's entropy at the start and early on, and
when its training episodes first succeeded (the evidence behind "a transferred start
cannot learn DoorKey", docs/reproduction.md).

Per visit of a run, the statistics of `telapa.continual.trainlog.visit_start` (its
docstring has the formulas: entropy at the start, early and at the end, the first
training success, how often and how well it succeeded): computed from the visit's
training log (``train/NN-TAG.csv``), or, where the log is gone (``telapa sweep --export``
does not copy the logs; a cell restored from an export has none), read from the
``starts.csv`` the run wrote when the visit ended. This reads run or sweep directories:

    python -m telapa.analysis.visit_starts RUN_OR_SWEEP_DIR... [--tags C "C'"] [--out CSV]

Each row names its run's curriculum, method, seed and visit (a sweep of several curricula
repeats methods and seeds). `summarize_visit_starts` counts, per curriculum and method,
over a set of visits (``--summary``; also of committed tables, ``--csv FILE``): how many
never saw a training success, the median first success, the range of starting and early
entropies, and how many ended with ``train_sr_end >= learned`` (0.5: the visits that end
learning the task).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.sweep import expand_sweep_dirs
from telapa.continual.trainlog import DEFAULT_EARLY, START_COLUMNS, visit_start

ROW_COLUMNS = ("curriculum", "method", "seed", "visit", "tag", *START_COLUMNS)
"""The columns of `visit_starts` (and of the CSV ``--out`` writes), in order."""


class NoTrainingLog(RunDirError):
    """A visit of the run has neither its training log nor its row in ``starts.csv`` (a
    cell of a sweep export, which keeps no logs, of a run that wrote no starts.csv)."""


def visit_starts(run_dir: str | Path, *, tags: Iterable[str] | None = None,
                 early: float = DEFAULT_EARLY) -> pd.DataFrame:
    """One row per visit of a complete run (its curriculum, method, seed, visit index and
    tag, then `START_COLUMNS`: `ROW_COLUMNS`), only the visits tagged ``tags`` when given;
    `RunDirError` when the run is incomplete, or a visit has no training log and its row
    in ``starts.csv`` is missing or was computed with another ``early``."""
    run = RunDir(run_dir)
    spec = run.complete_manifest()
    kept = run.read_visit_starts()
    wanted = None if tags is None else set(tags)
    rows = []
    for visit in run.curriculum().visits():
        if wanted is not None and visit.tag not in wanted:
            continue
        try:
            start = visit_start(run.read_visit_train(visit.index, visit.tag), early=early)
        except FileNotFoundError:
            start = kept.get(visit.index)
            if start is None or early != DEFAULT_EARLY:
                raise NoTrainingLog(
                    f"{run.path} has no training log of visit {visit.index} ({visit.tag})"
                    + ("" if start is None else f", and its starts.csv holds early = "
                       f"{DEFAULT_EARLY} only, not {early}")
                    + ": was it exported from a run that kept none?") from None
        rows.append({"curriculum": spec["curriculum"], "method": spec["method"],
                     "seed": spec["seed"], "visit": visit.index, "tag": visit.tag, **start})
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS))


SUMMARY_COLUMNS = ("visits", "no_success", "first_success_median", "entropy_start_min",
                   "entropy_start_max", "entropy_early_max_min", "entropy_early_max_max",
                   "learning_at_end")
"""The columns of `summarize_visit_starts`, in order."""


def summarize_visit_starts(starts: pd.DataFrame, *, learned: float = 0.5) -> pd.DataFrame:
    """Per curriculum and method (the index, sorted), over the rows of ``starts``
    (`visit_starts`'s table, or several concatenated):

        visits               = #rows
        no_success           = #{first_success is NaN}       never a training success
        first_success_median = median of first_success over the others (NaN: none)
        entropy_start_min/max, entropy_early_max_min/max     their ranges
        learning_at_end      = #{train_sr_end >= learned}    (NaN counts as not)
    """
    missing = [c for c in ("curriculum", "method", "first_success", "entropy_start",
                           "entropy_early_max", "train_sr_end") if c not in starts]
    if missing:
        raise ValueError(f"visit starts are missing column(s) {missing}")
    rows = []
    for (curriculum, method), group in starts.groupby(["curriculum", "method"], sort=True):
        rows.append({
            "curriculum": curriculum, "method": method,
            "visits": len(group),
            "no_success": int(group["first_success"].isna().sum()),
            "first_success_median": float(group["first_success"].median()),
            "entropy_start_min": float(group["entropy_start"].min()),
            "entropy_start_max": float(group["entropy_start"].max()),
            "entropy_early_max_min": float(group["entropy_early_max"].min()),
            "entropy_early_max_max": float(group["entropy_early_max"].max()),
            "learning_at_end": int((group["train_sr_end"] >= learned).sum()),
        })
    return pd.DataFrame(rows, columns=["curriculum", "method", *SUMMARY_COLUMNS]).set_index(
        ["curriculum", "method"])


def _saved_starts(given: Path, run: Path) -> str:
    """Where the visit starts of a run without training logs are to be had: the CSV
    committed beside its sweep export (``results/NAME-visit-starts.csv`` beside
    ``results/NAME``, written with ``--out`` while the logs were there), read with
    ``--csv``."""
    sweeps = [given, run.parent.parent] if run.parent.name == "cells" else [given]
    for sweep in sweeps:
        csv = sweep.parent / f"{sweep.name}-visit-starts.csv"
        if csv.is_file():
            return (f"The visit starts of {sweep} were saved before its logs went, in "
                    f"{csv}: read them with --csv {csv} (in place of {given}).")
    return ("The visit starts of such runs are read from a CSV written with --out while "
            "their logs were there (e.g. the committed results/*-visit-starts.csv), with "
            "--csv FILE.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m telapa.analysis.visit_starts",
        description="How each visit's PPO training began: entropy and first successes "
                    "(module docstring of telapa.analysis.visit_starts).")
    parser.add_argument("runs", nargs="*", metavar="RUN_OR_SWEEP_DIR")
    parser.add_argument("--csv", nargs="+", type=Path, default=[], metavar="FILE",
                        help="also read visit starts written before with --out (e.g. the "
                        "committed results/*-visit-starts.csv, whose runs may be gone)")
    parser.add_argument("--tags", nargs="+", metavar="TAG",
                        help="only these visit tags (default: every visit)")
    parser.add_argument("--summary", action="store_true",
                        help="print the per-method summary (summarize_visit_starts) of the "
                        "visits read, instead of one row per visit")
    parser.add_argument("--early", type=float, default=DEFAULT_EARLY,
                        help="leading fraction of updates for entropy_early_max, and trailing "
                        f"fraction for train_sr_end ({DEFAULT_EARLY})")
    parser.add_argument("--skip-incomplete", action="store_true",
                        help="leave out runs that are not complete (with a warning)")
    parser.add_argument("--out", type=Path, help="also write the table as CSV here "
                        "(refused if the file exists)")
    args = parser.parse_args(argv)
    if not args.runs and not args.csv:
        parser.error("give run or sweep directories, or --csv files")
    if args.out is not None and args.out.exists():
        parser.error(f"--out {args.out} exists; choose a new file")
    missing = [str(p) for p in args.csv if not p.is_file()]
    if missing:
        parser.error(f"--csv: no such file: {', '.join(missing)}")
    frames = []
    try:
        for csv in args.csv:
            frame = pd.read_csv(csv)
            # bonus_share came later: a table written before it reads as NaN there
            absent = [c for c in ROW_COLUMNS if c not in frame and c != "bonus_share"]
            if absent:
                raise ValueError(f"{csv} is missing column(s) {absent}")
            frame = frame.reindex(columns=list(ROW_COLUMNS))
            frames.append(frame if args.tags is None else frame[frame["tag"].isin(args.tags)])
        for given in args.runs:
            for path in expand_sweep_dirs([given]):
                if args.skip_incomplete and not RunDir(path).is_complete():
                    print(f"skipping {path}: not complete", file=sys.stderr)
                    continue
                try:
                    frames.append(visit_starts(path, tags=args.tags, early=args.early))
                except NoTrainingLog as err:
                    raise NoTrainingLog(f"{err} {_saved_starts(Path(given), Path(path))}"
                                        ) from None
    except (RunDirError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not frames:
        print("error: no complete run to read", file=sys.stderr)
        return 2
    table = pd.concat(frames, ignore_index=True).sort_values(
        ["curriculum", "tag", "method", "seed"], kind="stable")
    if args.summary:
        print(summarize_visit_starts(table).to_string(
            sparsify=False, float_format=lambda x: f"{x:.3g}"))
    else:
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    if args.out is not None:
        table.to_csv(args.out, index=False)
    return 0


__all__ = ["ROW_COLUMNS", "START_COLUMNS", "SUMMARY_COLUMNS", "NoTrainingLog", "main",
           "summarize_visit_starts", "visit_start", "visit_starts"]

if __name__ == "__main__":
    raise SystemExit(main())
