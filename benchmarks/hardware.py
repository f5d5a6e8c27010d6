"""How far each phase of a whole seed is from what this machine can do.

A phase's time is bounded below by its arithmetic at this machine's peak rates:

    t_min(phase) = env_steps / R_env  +  FLOPs / R_flop

- ``R_flop``: the best f32 matmul rate measured here, over a large square product (what
  XLA's CPU GEMM reaches on all cores) and products of the PPO minibatch's own shape
  (256 x 168 @ 168 x 64, 16 per call);
- ``R_env``: the JAX port's best measured rate for the task (random actions at batch
  4096, `benchmarks/results/env_throughput.json`): env stepping has no simpler bound,
  so our own fastest stepping stands for it;
- FLOPs per env step from the policy's weights W (actor + critic; 2 FLOPs per weight per
  sample forward, 6 forward + backward): PPO ``2 W + epochs * 6 W`` (rollout, then every
  sample in ``epochs`` updates), evaluation and illumination ``2 W``; few-shot probes are
  PPO runs plus evaluations and are bounded as PPO;
- maintenance: the embedder's training FLOPs per boundary, given by
  ``--maintenance-gflop`` (from `telapa.latent`'s own estimate), and its re-embedding.

``gap = measured / t_min`` is how many times slower than this bound a phase runs (1 is
the hardware; real code on small matrices and branchy env steps stays well above it).

    python benchmarks/hardware.py --seed-json benchmarks/results/paper_seed.json --json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jax
import numpy as np
from machine import machine_info, matmul_rate

from telapa.continual.preset import load_run_config
from telapa.rl import PPOTrainer

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PRIMARY = ["MiniGrid-GoToObject-8x8-N2-v0", "MiniGrid-Fetch-6x6-N2-v0",
           "MiniGrid-DoorKey-8x8-v0", "MiniGrid-BlockedUnlockPickup-v0",
           "MiniGrid-ObstructedMaze-1Dlh-v0"]


def policy_weights(preset: str) -> dict[str, int]:
    """Weights (actor + critic) of the preset's policy on each primary task."""
    config = load_run_config(preset).train
    out = {}
    for env_id in PRIMARY:
        params = PPOTrainer(env_id, config, key=0).agent.policy.init(jax.random.key(0))
        out[env_id] = int(sum(np.size(x) for x in jax.tree.leaves(params)))
    return out


def env_rates(path: Path) -> dict[str, float]:
    """Best measured port rate (env steps/s) of each primary task."""
    report = json.loads(path.read_text())
    rates: dict[str, float] = {}
    for r in report["results"]:
        if r["name"] == "port" and r["env_id"] in PRIMARY:
            rates[r["env_id"]] = max(rates.get(r["env_id"], 0.0), r["steps_per_s"])
    return rates


def bounds(seed: dict, *, flop_rate: float, env_rate: float, weights: float, epochs: int,
           maintenance_gflop: float | None) -> dict[str, dict[str, float]]:
    """t_min and gap per phase of one `paper_seed` entry (rates in GFLOP/s, steps/s)."""
    steps = seed["phase_env_steps"]
    per_step = {"train": (2 + 6 * epochs) * weights, "illumination": 2 * weights,
                "few_shot": (2 + 6 * epochs) * weights}
    out = {}
    for phase, flops_per_step in per_step.items():
        if phase not in steps or phase not in seed["phase_s"]:
            continue
        n = steps[phase]
        t_min = n / env_rate + n * flops_per_step / (flop_rate * 1e9)
        out[phase] = {"env_steps": n, "gflop": n * flops_per_step / 1e9, "t_min_s": t_min,
                      "measured_s": seed["phase_s"][phase],
                      "gap": seed["phase_s"][phase] / t_min}
    if maintenance_gflop and "maintenance" in seed["phase_s"]:
        t_min = maintenance_gflop / flop_rate
        out["maintenance"] = {"env_steps": 0, "gflop": maintenance_gflop, "t_min_s": t_min,
                              "measured_s": seed["phase_s"]["maintenance"],
                              "gap": seed["phase_s"]["maintenance"] / t_min}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--seed-json", type=Path, default=RESULTS / "paper_seed.json")
    parser.add_argument("--env-json", type=Path, default=RESULTS / "env_throughput.json")
    parser.add_argument("--maintenance-gflop", type=float, default=None,
                        help="embedder FLOPs of all boundaries of the seed, in GFLOP")
    parser.add_argument("--seconds", type=float, default=2.0, help="per matmul shape")
    parser.add_argument("--json", nargs="?", const=RESULTS / "hardware.json", type=Path)
    args = parser.parse_args(argv)
    if not args.env_json.exists():
        parser.error(f"--env-json: {args.env_json} does not exist")

    matmul = {"square_2048": matmul_rate(2048, 2048, 2048, seconds=args.seconds),
              "ppo_minibatch_256x168x64": matmul_rate(256, 168, 64, seconds=args.seconds)}
    weights = policy_weights(args.preset)
    rates = env_rates(args.env_json)
    missing = sorted(set(PRIMARY) - set(rates))
    if missing:
        parser.error(f"--env-json: {args.env_json} has no port rate for {missing}")
    # Equal steps on every task: the mean step time is the mean of 1 / rate.
    env_rate = len(rates) / sum(1 / r for r in rates.values())
    report = {"benchmark": "hardware", "machine": machine_info(), "matmul_gflops": matmul,
              "policy_weights": weights, "env_rates": rates, "env_rate_primary": env_rate}
    epochs = load_run_config(args.preset).train.ppo.epochs
    if args.seed_json.exists():
        seeds = json.loads(args.seed_json.read_text())["runs"]
        report["bounds"] = {
            name: bounds(seed, flop_rate=max(matmul.values()), env_rate=env_rate,
                         weights=float(np.mean(list(weights.values()))), epochs=epochs,
                         maintenance_gflop=args.maintenance_gflop)
            for name, seed in seeds.items()}
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
