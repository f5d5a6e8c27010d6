"""The MiniGrid PPO-preset choice of the paper-scale calibration, by its fixed rule.

The rule (docs/assumptions.md, "The MiniGrid PPO preset", written before the runs) reads
Scratch's learning only. For a variant ``v`` (a PPO preset and a way grid codes enter the
network), seeds ``s`` and tasks A..E with final SR ``F[v, T, s]`` (the last evaluation of
the visit) and learning curve ``SR[v, T, s, k]`` over the visit's evaluations ``k``:

1. ``v`` is eligible when (a) ``#{s : F[v, C, s] >= 0.9} = #seeds`` (DoorKey-8x8 solved on
   every seed), (b) ``mean_s F[v, D, s] <= 0.2`` (BlockedUnlockPickup not learned) and
   (c) ``#{s : F[v, E, s] >= 0.9} <= 1`` (ObstructedMaze-1Dlh solved rarely);
2. among the eligible, the cheapest by wall clock per PPO env step (``cost``, measured
   side by side by ``benchmarks/calibration_cost.py``); variants within 15% of the
   cheapest tie, and the tie goes to the highest area under the curve,
   ``AUC[v] = mean_{T, s, k} SR[v, T, s, k]``;
3. with no eligible variant, the one meeting most of (a) (counted in seeds solving C),
   (b) and (c), in that priority order, ties broken as in 2.

    python -m telapa.analysis.calibration results/calibration-paper

prints the evidence table and the choice, and writes ``selection.json`` beside the
results. Where Finetune A -> B -> C cells have finished (``finetune/cells``), it also
prints the transfer question, which the rule never reads: per variant and seed, the SR
of the Fetch-trained policy on DoorKey-8x8 before training on it, after the visit, and
the first step of the visit at which an evaluation reached ``SOLVED``, beside Scratch's
on the same seed (``transfer.json``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from telapa.continual.rundir import RunDir

SOLVED = 0.9
"""Final SR at which a visit counts as having solved its task."""
D_MAX_MEAN = 0.2
E_MAX_SOLVED_SEEDS = 1
COST_TIE = 1.15
"""Variants whose cost is within this factor of the cheapest count as equally cheap."""
TASKS = ("A", "B", "C", "D", "E")

_CELL = re.compile(r"-preset=(?P<preset>.+)-grid_codes=(?P<codes>[a-z]+)-s(?P<seed>\d+)$")


@dataclass(frozen=True)
class Verdict:
    """What the rule reads of one variant."""

    preset: str
    grid_codes: str
    seeds: int
    final: dict[str, list[float]]
    """Task tag -> the final SR of each seed."""
    auc: float
    cost: float
    """Wall seconds per PPO env step (relative units are enough)."""
    c_solved: int
    d_mean: float
    e_solved: int

    @property
    def eligible(self) -> bool:
        return (self.c_solved == self.seeds and self.d_mean <= D_MAX_MEAN
                and self.e_solved <= E_MAX_SOLVED_SEEDS)

    @property
    def merit(self) -> tuple[int, bool, bool]:
        """Rule 3's order: seeds solving C, then (b), then (c)."""
        return (self.c_solved, self.d_mean <= D_MAX_MEAN, self.e_solved <= E_MAX_SOLVED_SEEDS)


def verdict(*, preset: str, grid_codes: str, curves: pd.DataFrame, cost: float) -> Verdict:
    """The rule's reading of one variant from its Scratch curves (columns ``seed``,
    ``task``, ``step``, ``sr``; one row per evaluation, the last per task and seed is the
    final SR)."""
    missing = sorted(set(TASKS) - set(curves["task"]))
    if missing:
        raise ValueError(f"{preset}/{grid_codes}: no curve for tasks {missing}")
    ordered = curves.sort_values(["seed", "task", "step"])
    final_rows = ordered.groupby(["task", "seed"])["sr"].last()
    final = {t: [float(x) for x in final_rows[t].to_numpy()] for t in TASKS}
    seeds = {len(v) for v in final.values()}
    if len(seeds) != 1:
        raise ValueError(f"{preset}/{grid_codes}: tasks have different seed counts "
                         f"{ {t: len(v) for t, v in final.items()} }")
    return Verdict(
        preset=preset, grid_codes=grid_codes, seeds=seeds.pop(), final=final,
        auc=float(ordered.loc[ordered["task"].isin(TASKS), "sr"].mean()), cost=float(cost),
        c_solved=sum(x >= SOLVED for x in final["C"]),
        d_mean=float(np.mean(final["D"])),
        e_solved=sum(x >= SOLVED for x in final["E"]),
    )


def choose(verdicts: Sequence[Verdict]) -> Verdict:
    """The variant the rule picks (module docstring)."""
    if not verdicts:
        raise ValueError("no calibration variants to choose from")
    eligible = [v for v in verdicts if v.eligible]
    if not eligible:
        best = max(v.merit for v in verdicts)
        eligible = [v for v in verdicts if v.merit == best]
    cheapest = min(v.cost for v in eligible)
    tied = [v for v in eligible if v.cost <= COST_TIE * cheapest]
    return max(tied, key=lambda v: v.auc)


def read_variants(results: Path, costs: Mapping[tuple[str, str], float]) -> list[Verdict]:
    """Every variant of the Scratch cells under ``results/scratch/cells``."""
    frames: dict[tuple[str, str], list[pd.DataFrame]] = {}
    for preset, codes, seed, curve in _complete_cells(results / "scratch" / "cells"):
        curve["seed"] = seed
        frames.setdefault((preset, codes), []).append(curve)
    out = []
    for (preset, codes), parts in sorted(frames.items()):
        if (preset, codes) not in costs:
            raise ValueError(f"no measured cost for {preset}/{codes} in cost.json")
        out.append(verdict(preset=preset, grid_codes=codes, curves=pd.concat(parts),
                           cost=costs[preset, codes]))
    return out


def solve_step(curve: pd.DataFrame, task: str) -> int | None:
    """The first step within ``task``'s visit at which an evaluation's SR reached
    `SOLVED` (columns ``task``, ``step``, ``sr``); None if none did."""
    rows = curve[(curve["task"] == task) & (curve["sr"] >= SOLVED)]
    return None if rows.empty else int(rows["step"].min())


@dataclass(frozen=True)
class Transfer:
    """One seed of a variant's Finetune A -> B -> C (the transfer question)."""

    preset: str
    grid_codes: str
    seed: int
    a_final: float
    b_final: float
    c_start: float
    """SR on C of the policy trained on A then B, before it trains on C."""
    c_final: float
    c_solve_step: int | None
    """Finetune's first step of the C visit with SR >= `SOLVED` (None: never)."""
    scratch_c_solve_step: int | None
    """The same for Scratch's C visit on the same seed and variant (None: never or no
    Scratch cell)."""


def _complete_cells(folder: Path):
    """(preset, grid codes, seed, curve) of each complete cell under ``folder``."""
    for cell in sorted(folder.iterdir()) if folder.is_dir() else []:
        match = _CELL.search(cell.name)
        run_dir = RunDir(cell)
        if match and run_dir.is_complete():
            yield (match["preset"], match["codes"], int(match["seed"]),
                   pd.read_csv(run_dir.table_path("curve")))


def read_transfer(results: Path) -> list[Transfer]:
    """Every finished Finetune cell under ``results/finetune/cells``, with Scratch's C
    solve step from ``results/scratch/cells``."""
    scratch = {(p, c, s): solve_step(curve, "C")
               for p, c, s, curve in _complete_cells(results / "scratch" / "cells")}
    out = []
    for preset, codes, seed, curve in _complete_cells(results / "finetune" / "cells"):
        ordered = curve.sort_values(["visit", "step"])
        by_task = ordered.groupby("task")["sr"]
        out.append(Transfer(
            preset=preset, grid_codes=codes, seed=seed,
            a_final=float(by_task.last()["A"]), b_final=float(by_task.last()["B"]),
            c_start=float(by_task.first()["C"]), c_final=float(by_task.last()["C"]),
            c_solve_step=solve_step(curve, "C"),
            scratch_c_solve_step=scratch.get((preset, codes, seed))))
    return out


def _steps(step: int | None) -> str:
    return "never" if step is None else f"{step / 1e6:.2f}M"


def read_costs(path: Path) -> dict[tuple[str, str], float]:
    """``(preset, grid_codes) -> seconds per env step`` from `calibration_cost`'s JSON."""
    rows = json.loads(path.read_text())["rows"]
    return {(r["preset"], r["grid_codes"]): 1e-6 * r["us_per_step"] for r in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="results/calibration-paper")
    args = parser.parse_args(argv)
    verdicts = read_variants(args.results, read_costs(args.results / "cost.json"))
    if not verdicts:
        print(f"error: no finished Scratch cells under {args.results}/scratch/cells",
              file=sys.stderr)
        return 1
    cheapest = min(v.cost for v in verdicts)
    print("| preset | grid codes | seeds | " + " | ".join(f"{t} final SR" for t in TASKS)
          + " | AUC | cost | eligible |")
    print("|---|---|---:|" + "---|" * len(TASKS) + "---:|---:|---|")
    for v in verdicts:
        finals = " | ".join(" ".join(f"{x:.2f}" for x in v.final[t]) for t in TASKS)
        print(f"| {v.preset} | {v.grid_codes} | {v.seeds} | {finals} | {v.auc:.3f} | "
              f"{v.cost / cheapest:.2f}x | {'yes' if v.eligible else 'no'} |")
    chosen = choose(verdicts)
    complete = all(v.seeds == 3 for v in verdicts) and len(verdicts) == 4
    print(f"\nchosen: {chosen.preset} with grid_codes={chosen.grid_codes}"
          + ("" if complete else " (PROVISIONAL: not every variant has 3 finished seeds)"))
    (args.results / "selection.json").write_text(json.dumps(
        {"complete": complete, "chosen": {"preset": chosen.preset,
                                          "grid_codes": chosen.grid_codes},
         "variants": [asdict(v) | {"eligible": v.eligible} for v in verdicts]},
        indent=2) + "\n")
    transfer = read_transfer(args.results)
    if transfer:
        print("\ntransfer (Finetune A -> B -> C; reported, not read by the rule):\n")
        print("| preset | grid codes | seed | A final | B final | C at start | C final | "
              "C solved at | Scratch C solved at |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for t in transfer:
            print(f"| {t.preset} | {t.grid_codes} | {t.seed} | {t.a_final:.2f} | "
                  f"{t.b_final:.2f} | {t.c_start:.2f} | {t.c_final:.2f} | "
                  f"{_steps(t.c_solve_step)} | {_steps(t.scratch_c_solve_step)} |")
        (args.results / "transfer.json").write_text(json.dumps(
            {"solved_at_sr": SOLVED, "seeds": [asdict(t) for t in transfer]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
