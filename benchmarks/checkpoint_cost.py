"""What a TeLAPA run's checkpoints cost: one after every phase against checkpoints spaced
by their cost (``TELAPA_CHECKPOINT_SHARE``, `telapa.continual.runner`), side by side.

A TeLAPA checkpoint writes the learner, the visit's training state and the episode
banks, and copies every archive of the tasks seen so far (each part's SHA-256 checked
as it is copied: `telapa.continual.checkpoints.CheckpointStore.save`). Its cost grows
with the archives, about 106 MB a MiniGrid task at the paper's settings (384 elites of
30,472 weights and their stored episodes). This benchmark measures, on the real store
and with fsync as runs use it (``TELAPA_FSYNC`` on unless set):

1. the cost c(K) of a checkpoint holding K archives of that size (``--archives``), a
   changed bank part of 46 MB and the learner's 0.4 MB, over ``--repeats`` saves each
   (the first save of K writes every part; the others copy the archives, as a run's
   checkpoints within a visit do);
2. what that costs a whole run, by following the rule of each policy over the phases of
   a paper-preset TeLAPA seed of the primary curriculum (221 phases: per visit a start,
   20 chunks and an end; ``results/table1-paper``'s primary-telapa-s0 gives their
   seconds: few-shot / 10, (train + eval) / 200, (illumination + maintenance) / 10):
   after every phase, or once the time since the last checkpoint is c_last x (1 / s -
   1) (always after the first phase and the last). The archives held at visit v are
   min(v, 5), a new one added at each of A..E's ends.

The run-level numbers are a model on measured checkpoint costs, not a timed run; a
paper-preset seed under each policy would take an hour. The committed study cell that
gives the phase seconds also gives the real share of one-after-every-phase (215 s of
1,745, 12.3%), against which the model's is checked.

    python benchmarks/checkpoint_cost.py              # K = 0 2 4 8, 3 saves each
    python benchmarks/checkpoint_cost.py --quick      # smoke: small parts, 1 save each

Writes ``benchmarks/results/checkpoint_cost.json`` (``--quick``: ``checkpoint_cost.quick
.json``; ``--out`` elsewhere).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from machine import machine_info

from telapa import envvars
from telapa.continual.checkpoints import CheckpointStore
from telapa.continual.runner import checkpoint_due
from telapa.io import write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
CELL = ROOT / "results" / "table1-paper" / "cells" / "primary-telapa-s0"

ARCHIVE_BYTES = 105_935_131
"""A MiniGrid TeLAPA archive's checkpoint file at the paper's settings (the long
curriculum's TeLAPA seed 0, 2026-12-06)."""
BANKS_BYTES = 46_182_447
"""Its episode banks' file (256 replay and 256 anchor sets of 16 episodes x 256 steps)."""
LEARNER_BYTES = 372_247
"""Its learner's (the PPO state) file."""

VISITS, CHUNKS, TASKS = 10, 20, 5
"""The primary curriculum at the paper preset: 10 visits of 20 chunks, 5 tasks."""


def _part(nbytes: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A method-state part of about ``nbytes`` (random, so nothing compresses it)."""
    return {"data": rng.integers(0, 256, size=nbytes, dtype=np.uint8)}


def checkpoint_costs(archives: list[int], repeats: int, *, archive_bytes: int,
                     banks_bytes: int, learner_bytes: int, folder: Path) -> dict[int, dict]:
    """c(K) for each K of ``archives``: the seconds of each of ``repeats`` saves after a
    first one that writes every part, with the banks and learner changed at each."""
    rng = np.random.default_rng(0)
    parts = [_part(archive_bytes, rng) for _ in range(max(archives, default=0))]
    out = {}
    for k in archives:
        run = SimpleNamespace(path=folder / f"run-{k}")
        run.path.mkdir()
        store = CheckpointStore(run)
        method = {f"archive-{i}": parts[i] for i in range(k)}
        seconds = []
        for i in range(repeats + 1):
            method = {**method, "banks": _part(banks_bytes, rng)}
            learner = _part(learner_bytes, rng)
            start = time.perf_counter()
            store.save({"phases": 2 + repeats, "next_phase": i + 1}, learner=learner,
                       method=method, train_state=_part(learner_bytes, rng), train_rows=[])
            seconds.append(time.perf_counter() - start)
        out[k] = {"first_s": seconds[0], "copying_s": seconds[1:],
                  "median_s": statistics.median(seconds[1:])}
        print(f"K = {k}: first {seconds[0]:.2f} s, then "
              f"{', '.join(f'{s:.2f}' for s in seconds[1:])} s", file=sys.stderr)
    return out


def run_phases(acc: dict) -> list[tuple[float, int]]:
    """The paper-preset primary TeLAPA seed as (seconds, archives held after it) per phase,
    from its accounting ``acc`` (module docstring)."""
    phase, method = acc["phase_s"], acc["method_phase_s"]
    start = method["few_shot"] / VISITS
    chunk = (phase["train"] + phase["eval"]) / (VISITS * CHUNKS)
    end = (method["illumination"] + method["maintenance"]) / VISITS
    phases = []
    for v in range(VISITS):
        held = min(v, TASKS)
        phases += [(start, held)] + [(chunk, held)] * CHUNKS + [(end, min(v + 1, TASKS))]
    return phases + [(phase["final_eval"], TASKS)]


def checkpoint_share(phases: list[tuple[float, int]], cost: dict[int, float],
                     share: float) -> dict:
    """Follows the rule of `telapa.continual.runner` over ``phases`` with checkpoints of
    ``cost[K]`` seconds (K archives held, linear between the measured K): their count,
    seconds, and share of the run's wall clock."""
    ks = sorted(cost)

    def c(k: int) -> float:
        return float(np.interp(k, ks, [cost[x] for x in ks]))

    clock, spent, count, last = 0.0, 0.0, 0, None
    for i, (seconds, held) in enumerate(phases):
        clock += seconds
        due = (last is None or i == len(phases) - 1
               or checkpoint_due(clock - last[0], last[1], share))
        if due:
            c_k = c(held)
            clock += c_k
            spent += c_k
            count += 1
            last = (clock, c_k)
    return {"share": share, "checkpoints": count, "checkpoint_s": spent, "wall_s": clock,
            "checkpoint_share": spent / clock}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archives", type=int, nargs="+", default=[0, 2, 4, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shares", type=float, nargs="+",
                        default=[1.0, envvars.DEFAULT_CHECKPOINT_SHARE])
    parser.add_argument("--quick", action="store_true",
                        help="smoke check: parts 1/1000 of their size, one save each")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if any(k < 0 for k in args.archives) or args.repeats < 1:
        parser.error("--archives must be >= 0 and --repeats >= 1")
    if any(not 0 < s <= 1 for s in args.shares):
        parser.error(f"--shares must be in (0, 1], got {args.shares}")
    scale = 1000 if args.quick else 1
    repeats = 1 if args.quick else args.repeats
    out = args.out or ROOT / "benchmarks" / "results" / (
        "checkpoint_cost.quick.json" if args.quick else "checkpoint_cost.json")
    with tempfile.TemporaryDirectory(prefix="checkpoint-cost-") as tmp:
        costs = checkpoint_costs(sorted(set(args.archives)), repeats,
                                 archive_bytes=ARCHIVE_BYTES // scale,
                                 banks_bytes=BANKS_BYTES // scale,
                                 learner_bytes=LEARNER_BYTES // scale, folder=Path(tmp))
    median = {k: v["median_s"] for k, v in costs.items()}
    measured = json.loads((CELL / "accounting.json").read_text())
    phases = run_phases(measured)
    policies = [checkpoint_share(phases, median, s) for s in args.shares]
    report = {
        "benchmark": "checkpoint_cost",
        "machine": machine_info(),
        "fsync": envvars.fsync(),
        "quick": args.quick,
        "part_bytes": {"archive": ARCHIVE_BYTES // scale, "banks": BANKS_BYTES // scale,
                       "learner": LEARNER_BYTES // scale},
        "checkpoint_s": {str(k): v for k, v in costs.items()},
        "run": {"cell": str(CELL.relative_to(ROOT)), "phases": len(phases),
                "phase_s": sum(s for s, _ in phases),
                "measured_checkpoint_s": measured["phase_s"]["checkpoint"],
                "measured_wall_s": measured["wall_s"]},
        "policies": policies,
    }
    write_json_atomic(out, report)
    for p in policies:
        print(f"share {p['share']:g}: {p['checkpoints']} checkpoints, "
              f"{p['checkpoint_s']:.0f} s of {p['wall_s']:.0f} s "
              f"({100 * p['checkpoint_share']:.1f}%)", file=sys.stderr)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
