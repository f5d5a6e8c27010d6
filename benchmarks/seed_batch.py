"""Seeds per hour of ``telapa run --seeds`` batches against separate processes.

One method on one curriculum with the MiniGrid preset's PPO shapes (16 envs x 128 steps,
4 epochs, minibatch 256; `configs/ppo/minigrid.yaml`) and a visit budget small enough
for minutes: the ``quick`` run preset with ``--steps-per-visit`` PPO steps per visit,
one evaluation per visit. For every batch size S:

- ``batch``: one ``telapa run --seeds 0-(S-1)`` process (the S seeds' PPO chunks as one
  vmapped call, every other phase seed after seed);
- ``separate``: S ``telapa run --seed s`` processes one after the other (seeds 0..S-1;
  each separate run is measured once and shared by every S that includes it). With
  ``--separate N`` only seeds 0..N-1 run; for S > N the other S - N seeds are counted at
  the mean of the measured warm-cache seeds 1..N-1 (``separate_estimated`` in the row),
  so large S costs minutes, not S whole processes.

Both count the whole process (start, compilation, training, evaluations, checkpoints):
what a user running S seeds waits for. seeds/hour = S / wall seconds x 3600; the
speed-up is the separate wall time over the batch's. Writes
``benchmarks/results/seed_batch.json`` (``--quick``: ``seed_batch.quick.json``);
``--json`` also prints the report to stdout. The report is rewritten after every
measurement, so a run cut short (a device lease ending) keeps what it measured.

    python benchmarks/seed_batch.py            # S in 1 2 4 8 (tens of minutes on 2 cores)
    python benchmarks/seed_batch.py --quick    # smoke check: S in 1 2, a tiny budget
    python benchmarks/seed_batch.py --sizes 1 8 32 128 --separate 3   # on an accelerator
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from machine import machine_info, package_versions

RESULTS = Path(__file__).resolve().parent / "results" / "seed_batch.json"
QUICK_PRESET = Path(__file__).resolve().parents[1] / "configs" / "runs" / "quick.yaml"
VERSIONS = ("jax", "jaxlib", "flax", "optax", "numpy")


def preset(steps_per_visit: int, eval_episodes: int, iterations_per_call: int = 1) -> dict:
    """The quick run preset (MiniGrid PPO shapes) with a small visit budget; with
    ``iterations_per_call`` K > 1, K PPO iterations per jitted call (the same updates,
    one host round trip per K iterations)."""
    settings = yaml.safe_load(QUICK_PRESET.read_text())
    settings.update(steps_per_visit=steps_per_visit, eval_every=steps_per_visit,
                    eval_episodes=eval_episodes, final_eval_episodes=eval_episodes)
    if iterations_per_call > 1:
        settings["train"] = {"preset": settings["train"],
                             "ppo": {"iterations_per_call": iterations_per_call}}
    return settings


def telapa_run(args: list[str], out: Path) -> float:
    """Wall seconds of one ``telapa run`` process (fails loudly)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "telapa.cli", "run", *args, "--out", str(out)],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "120"})
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"telapa run {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return wall


def separate_seconds(measured: list[float], size: int) -> float:
    """Wall seconds of ``size`` separate processes: the measured ones, and for seeds past
    them the mean of the measured warm-cache seeds (all but seed 0, which compiles)."""
    if size <= len(measured):
        return sum(measured[:size])
    warm = measured[1:] or measured
    return sum(measured) + (size - len(measured)) * sum(warm) / len(warm)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument("--sizes", type=int, nargs="+", help="batch sizes (default 1 2 4 8; "
                        "--quick: 1 2)")
    parser.add_argument("--curriculum", default="smoke", help="default: smoke (4 visits)")
    parser.add_argument("--method", default="finetune")
    parser.add_argument("--iterations-per-call", type=int, default=1, metavar="K",
                        help="PPO iterations per jitted call (default 1, the presets'); "
                             "the visit budget must be a whole number of calls")
    parser.add_argument("--steps-per-visit", type=int,
                        help="PPO steps per visit, whole calls of 2048 (default 16384; "
                             "--quick: 2048)")
    parser.add_argument("--separate", type=int, metavar="N",
                        help="run only the first N separate seeds (>= 2) and count the rest "
                             "at the mean of seeds 1..N-1 (default: every seed up to max S)")
    parser.add_argument("--out", type=Path, help=f"default: {RESULTS} (--quick: .quick.json)")
    parser.add_argument("--json", action="store_true", help="also print the report")
    args = parser.parse_args(argv)
    args.out = args.out or (RESULTS.with_suffix(".quick.json") if args.quick else RESULTS)
    sizes = args.sizes or ([1, 2] if args.quick else [1, 2, 4, 8])
    steps = args.steps_per_visit or (2048 if args.quick else 16384)
    measured = min(args.separate or max(sizes), max(sizes))
    if measured < min(2, max(sizes)):
        parser.error(f"--separate {args.separate}: needs at least 2 separate seeds to "
                     "estimate the others (seed 0 compiles with a cold cache)")
    settings = preset(steps, 8 if args.quick else 20, args.iterations_per_call)

    separate: list[float] = []
    results: list[dict] = []
    report = {
        "benchmark": "seed_batch",
        "quick": args.quick,
        "machine": machine_info(),
        "versions": package_versions(VERSIONS),
        "curriculum": args.curriculum,
        "method": args.method,
        "preset": settings,
        "separate_s": separate,
        "results": results,
    }

    def write() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")

    with tempfile.TemporaryDirectory(prefix="seed-batch-") as tmp:
        root = Path(tmp)
        preset_file = root / "preset.yaml"
        preset_file.write_text(yaml.safe_dump(settings))
        common = ["--curriculum", args.curriculum, "--method", args.method,
                  "--preset", str(preset_file)]
        for seed in range(measured):
            separate.append(telapa_run([*common, "--seed", str(seed)], root / f"separate-{seed}"))
            print(f"separate seed {seed}: {separate[-1]:.1f} s", file=sys.stderr)
            write()
        for size in sizes:
            wall = telapa_run([*common, "--seeds", f"0-{size - 1}"], root / f"batch-{size}")
            sequential = separate_seconds(separate, size)
            row = {"seeds": size, "batch_s": wall, "separate_s": sequential,
                   "separate_estimated": size > len(separate),
                   "batch_seeds_per_hour": size / wall * 3600,
                   "separate_seeds_per_hour": size / sequential * 3600,
                   "speedup": sequential / wall}
            results.append(row)
            print(f"S={size}: batch {wall:.1f} s, separate {sequential:.1f} s"
                  f"{' (estimated)' if row['separate_estimated'] else ''}, "
                  f"{row['speedup']:.2f}x", file=sys.stderr)
            write()

    write()
    if args.json:
        print(json.dumps(report, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
