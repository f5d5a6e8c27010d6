"""Wall clock per PPO env step of the four calibration variants, side by side.

The paper-scale PPO calibration (docs/assumptions.md, "The MiniGrid PPO preset") breaks
ties by cost: this measures it for every variant in one process, on the path the study
takes (three seeds as one vmapped batch, `batch_training.train_batch`, jax backend) on
MiniGrid-DoorKey-8x8-v0, compilation excluded. The variants are measured in rounds,
alternating, and each reports its median over the rounds (the machine is shared and its
speed drifts). Writes ``benchmarks/results/calibration_cost.json``.

    python benchmarks/calibration_cost.py            # 3 rounds of ~65k steps per variant
    python benchmarks/calibration_cost.py --quick    # smoke check
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import jax
from batch_training import batch_call, train_batch
from machine import machine_info, package_versions

from telapa.config import load_config, preset_path
from telapa.rl.agent import Agent, stack_states

ENV_ID = "MiniGrid-DoorKey-8x8-v0"
RESULTS = Path(__file__).resolve().parent / "results" / "calibration_cost.json"
VARIANTS = [(p, g) for p in ("minigrid", "minigrid-sb3") for g in ("raw", "unit")]
SEEDS = 3


def make_agent(preset: str, grid_codes: str) -> Agent:
    config = load_config(preset_path(preset))
    network = config.network.model_copy(update={"grid_codes": grid_codes})
    return Agent(ENV_ID, config.model_copy(update={"network": network}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help=f"default: {RESULTS} (--quick: .quick.json)")
    args = parser.parse_args(argv)
    out = args.out or (RESULTS.with_suffix(".quick.json") if args.quick else RESULTS)
    steps = 16384 if args.quick else 65536
    rounds = 1 if args.quick else args.rounds
    agents, states = {}, {}
    for preset, codes in VARIANTS:
        agent = make_agent(preset, codes)
        keys = jax.random.split(jax.random.key(0), SEEDS)
        batch = stack_states([agent.start(agent.init_ppo(k), k) for k in keys])
        batch_call(agent, batch)  # compile before timing
        agents[preset, codes], states[preset, codes] = agent, batch
    seconds: dict[tuple[str, str], list[float]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        for variant in VARIANTS:
            start = time.perf_counter()
            states[variant], _ = train_batch(agents[variant], states[variant], steps)
            jax.block_until_ready(states[variant].steps)
            seconds[variant].append(time.perf_counter() - start)
            print(f"round {r} {variant}: {SEEDS * steps / seconds[variant][-1]:,.0f} steps/s",
                  file=sys.stderr)
    rows = []
    for (preset, codes), times in seconds.items():
        wall = statistics.median(times)
        rows.append({"preset": preset, "grid_codes": codes, "seeds": SEEDS,
                     "steps_per_seed": steps, "median_s": wall, "rounds_s": times,
                     "env_steps_per_s": SEEDS * steps / wall,
                     "us_per_step": 1e6 * wall / (SEEDS * steps),
                     "compile_s": agents[preset, codes].compile_s})
    cheapest = min(r["us_per_step"] for r in rows)
    for r in rows:
        r["cost_vs_cheapest"] = r["us_per_step"] / cheapest
    report = {"benchmark": "calibration_cost", "env_id": ENV_ID, "quick": args.quick,
              "machine": machine_info(), "versions": package_versions(("jax", "jaxlib")),
              "rows": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    for r in rows:
        print(f"{r['preset']:>13} {r['grid_codes']:>4}: {r['env_steps_per_s']:>9,.0f} steps/s "
              f"({r['cost_vs_cheapest']:.2f}x the cheapest)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
