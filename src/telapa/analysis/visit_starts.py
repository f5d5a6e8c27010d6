"""How each visit's PPO training began: the policy's entropy at the start and early on, and
when its training episodes first succeeded (the evidence behind "a transferred start
cannot learn DoorKey", docs/reproduction.md).

From a visit's training log (``train/NN-TAG.csv`` of a run directory: one row per PPO
update u = 1..U, with the update's mean policy entropy H_u in nats, the env steps s_u
into the visit after it, and the success rate of the training episodes that ended in its
rollout, NaN when none ended):

    entropy_start     = H_1                       the starting policy, on its own rollout
    entropy_early_max = max_{u <= ceil(early U)} H_u
    entropy_end       = H_U
    first_success     = s_u of the first u with a training-episode success > 0 (NaN: none)
    success_updates   = #{u : success_u > 0} / U
    train_sr_end      = mean of success_u over the last ceil(early U) updates with
                        episodes (NaN: none ended)

A uniform policy over MiniGrid's 7 actions has entropy ln 7 = 1.95 nats. The training
logs stay in the run directories (``telapa sweep --export`` does not copy them), so this
reads run or sweep directories:

    python -m telapa.analysis.visit_starts RUN_OR_SWEEP_DIR... [--tags C "C'"] [--out CSV]

`summarize_visit_starts` counts, per method, over a set of visits (``--summary``; also of
committed tables, ``--csv FILE``): how many never saw a training success, the median
first success, the range of starting and early entropies, and how many ended with
``train_sr_end >= learned`` (0.5: the visits that end learning the task).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.sweep import expand_sweep_dirs

START_COLUMNS = ("entropy_start", "entropy_early_max", "entropy_end", "first_success",
                 "success_updates", "train_sr_end")
"""The statistics of `visit_start`, in order."""
TRAIN_COLUMNS = ("step", "entropy", "success_rate")
"""The training-log columns `visit_start` reads."""


def visit_start(train: pd.DataFrame, *, early: float = 0.25) -> dict[str, float]:
    """`START_COLUMNS` of one visit's training log (module docstring), its rows in update
    order; ``early`` in (0, 1] is the leading (and, for ``train_sr_end``, trailing)
    fraction of updates."""
    if not 0.0 < early <= 1.0:
        raise ValueError(f"early must be in (0, 1], got {early}")
    missing = [c for c in TRAIN_COLUMNS if c not in train]
    if missing:
        raise ValueError(f"training log is missing column(s) {missing}")
    if train.empty:
        raise ValueError("training log has no updates")
    entropy = train["entropy"].to_numpy(float)
    success = train["success_rate"].to_numpy(float)
    steps = train["step"].to_numpy(float)
    head = math.ceil(early * len(train))
    hits = np.flatnonzero(success > 0)  # NaN compares False: no episode ended
    ended = success[~np.isnan(success)]
    return {
        "entropy_start": float(entropy[0]),
        "entropy_early_max": float(entropy[:head].max()),
        "entropy_end": float(entropy[-1]),
        "first_success": float(steps[hits[0]]) if hits.size else math.nan,
        "success_updates": hits.size / len(train),
        "train_sr_end": float(ended[-head:].mean()) if ended.size else math.nan,
    }


def visit_starts(run_dir: str | Path, *, tags: Iterable[str] | None = None,
                 early: float = 0.25) -> pd.DataFrame:
    """One row per visit of a complete run (its method, seed, visit index and tag, then
    `START_COLUMNS`), only the visits tagged ``tags`` when given; `RunDirError` when the
    run is incomplete or a visit's training log is missing."""
    run = RunDir(run_dir)
    spec = run.complete_spec()
    wanted = None if tags is None else set(tags)
    rows = []
    for visit in run.curriculum().visits():
        if wanted is not None and visit.tag not in wanted:
            continue
        try:
            train = run.read_visit_train(visit.index, visit.tag)
        except FileNotFoundError:
            raise RunDirError(f"{run.path} has no training log of visit {visit.index} "
                              f"({visit.tag}): was it exported (the export drops them)?"
                              ) from None
        rows.append({"method": spec["method"], "seed": spec["seed"], "visit": visit.index,
                     "tag": visit.tag, **visit_start(train, early=early)})
    return pd.DataFrame(rows, columns=["method", "seed", "visit", "tag", *START_COLUMNS])


SUMMARY_COLUMNS = ("visits", "no_success", "first_success_median", "entropy_start_min",
                   "entropy_start_max", "entropy_early_max_min", "entropy_early_max_max",
                   "learning_at_end")
"""The columns of `summarize_visit_starts`, in order."""


def summarize_visit_starts(starts: pd.DataFrame, *, learned: float = 0.5) -> pd.DataFrame:
    """Per method (the index, sorted), over the rows of ``starts`` (`visit_starts`'s
    table, or several concatenated):

        visits               = #rows
        no_success           = #{first_success is NaN}       never a training success
        first_success_median = median of first_success over the others (NaN: none)
        entropy_start_min/max, entropy_early_max_min/max     their ranges
        learning_at_end      = #{train_sr_end >= learned}    (NaN counts as not)
    """
    missing = [c for c in ("method", *START_COLUMNS) if c not in starts]
    if missing:
        raise ValueError(f"visit starts are missing column(s) {missing}")
    rows = {}
    for method, group in starts.groupby("method", sort=True):
        rows[method] = {
            "visits": len(group),
            "no_success": int(group["first_success"].isna().sum()),
            "first_success_median": float(group["first_success"].median()),
            "entropy_start_min": float(group["entropy_start"].min()),
            "entropy_start_max": float(group["entropy_start"].max()),
            "entropy_early_max_min": float(group["entropy_early_max"].min()),
            "entropy_early_max_max": float(group["entropy_early_max"].max()),
            "learning_at_end": int((group["train_sr_end"] >= learned).sum()),
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(SUMMARY_COLUMNS))


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
    parser.add_argument("--early", type=float, default=0.25,
                        help="leading fraction of updates for entropy_early_max, and trailing "
                        "fraction for train_sr_end (0.25)")
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
            absent = [c for c in ("method", "seed", "visit", "tag", *START_COLUMNS)
                      if c not in frame]
            if absent:
                raise ValueError(f"{csv} is missing column(s) {absent}")
            frames.append(frame if args.tags is None else frame[frame["tag"].isin(args.tags)])
        for path in expand_sweep_dirs(args.runs):
            if args.skip_incomplete and not RunDir(path).is_complete():
                print(f"skipping {path}: not complete", file=sys.stderr)
                continue
            frames.append(visit_starts(path, tags=args.tags, early=args.early))
    except (RunDirError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not frames:
        print("error: no complete run to read", file=sys.stderr)
        return 2
    table = pd.concat(frames, ignore_index=True).sort_values(
        ["tag", "method", "seed"], kind="stable")
    if args.summary:
        print(summarize_visit_starts(table).to_string(float_format=lambda x: f"{x:.3g}"))
    else:
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    if args.out is not None:
        table.to_csv(args.out, index=False)
    return 0


__all__ = ["START_COLUMNS", "SUMMARY_COLUMNS", "main", "summarize_visit_starts",
           "visit_start", "visit_starts"]

if __name__ == "__main__":
    raise SystemExit(main())
