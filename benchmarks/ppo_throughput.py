"""PPO training throughput on MiniGrid-DoorKey-8x8-v0: telapa vs Stable-Baselines3.

Measured in one run on one machine:

- ``sb3``: Stable-Baselines3 PPO (MlpPolicy, 64x64 tanh actor and critic) on Farama
  MiniGrid through ``ImgObsWrapper`` + ``FlattenObservation``, ``DummyVecEnv`` of 8,
  n_steps 256, batch 256, 4 epochs (the reference);
- ``telapa-gymnasium``: telapa PPO with the same shapes on the gymnasium backend (the
  same Farama env stepped on the host);
- ``telapa-jax``: the same shapes on the jax backend (the JAX port, vmapped, jitted);
- ``telapa-jax-mission``: the same, also observing the mission;
- larger jax shapes (more envs, fewer epochs) and the MiniGrid preset (CNN).

Like SB3's ``ImgObsWrapper`` policy, the same-shape runs see the image (and the
direction, 4 more inputs) but not the mission (``observe_mission=False``): 151 inputs
against SB3's 147. Jax runs execute ``ITERATIONS_PER_CALL`` rollout+update iterations
per jitted call (an execution setting; the PPO shapes are unchanged).

The machine is shared and its speed drifts by 10-40% within minutes, so the reference
pair (``sb3``, ``telapa-jax``) is measured ``--repeats`` times, alternating, and the
ratios use the median SB3 rate. Steps/s counts env steps of training (rollout +
update), compilation excluded (reported separately). Writes
``benchmarks/results/ppo_throughput.json``.

    python benchmarks/ppo_throughput.py           # full (about 10 minutes)
    python benchmarks/ppo_throughput.py --quick   # smoke check (about a minute)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from machine import machine_info, package_versions

from telapa.config import NetworkConfig, PPOConfig, TrainConfig, load_config, preset_path

ENV_ID = "MiniGrid-DoorKey-8x8-v0"
RESULTS = Path(__file__).resolve().parent / "results" / "ppo_throughput.json"

# The reference shapes (SB3 defaults otherwise: lr 3e-4, gamma 0.99, lambda 0.95, ...).
SB3_SHAPES = dict(num_envs=8, n_steps=256, batch_size=256, epochs=4)
ITERATIONS_PER_CALL = 8
SAME = TrainConfig(
    ppo=PPOConfig(**SB3_SHAPES, lr=3e-4, ent_coef=0.0, iterations_per_call=ITERATIONS_PER_CALL),
    network=NetworkConfig(encoder="flat", hidden=(64, 64), activation="tanh"),
)
IMAGE_ONLY = {"observe_mission": False}
"""Env options of the same-shape runs: SB3 sees the image alone."""


def _larger(num_envs: int, n_steps: int, batch_size: int, epochs: int) -> TrainConfig:
    shapes = dict(num_envs=num_envs, n_steps=n_steps, batch_size=batch_size, epochs=epochs)
    ppo = PPOConfig(**{**SAME.ppo.model_dump(), **shapes})
    return TrainConfig(ppo=ppo, network=SAME.network)


def bench_sb3(steps: int) -> dict:
    import gymnasium as gym
    import minigrid  # noqa: F401
    import torch
    from minigrid.wrappers import ImgObsWrapper
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import DummyVecEnv

    def make_env():
        return gym.wrappers.FlattenObservation(ImgObsWrapper(gym.make(ENV_ID)))

    env = DummyVecEnv([make_env] * SB3_SHAPES["num_envs"])
    model = PPO(
        "MlpPolicy", env, n_steps=SB3_SHAPES["n_steps"], batch_size=SB3_SHAPES["batch_size"],
        n_epochs=SB3_SHAPES["epochs"], seed=0, device="cpu", verbose=0,
    )
    model.set_logger(Logger(folder=None, output_formats=[]))  # no tempdir/SB3-<date>
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    train_s = time.perf_counter() - start
    return {
        "name": "sb3", "steps": int(model.num_timesteps), "train_s": train_s,
        "compile_s": 0.0, "steps_per_s": model.num_timesteps / train_s,
        "torch_threads": torch.get_num_threads(), **SB3_SHAPES,
    }


def bench_telapa(
    name: str, config: TrainConfig, backend: str, steps: int, env_options: dict | None = None
) -> dict:
    from telapa.rl import PPOTrainer

    trainer = PPOTrainer(ENV_ID, config, key=0, backend=backend, env_options=env_options)
    compile_s = trainer.compile()
    start = time.perf_counter()
    trainer.train(steps)
    train_s = time.perf_counter() - start
    ppo = config.ppo
    return {
        "name": name, "backend": backend, "steps": trainer.steps, "train_s": train_s,
        "compile_s": compile_s, "steps_per_s": trainer.steps / train_s,
        "num_envs": ppo.num_envs, "n_steps": ppo.n_steps, "batch_size": ppo.batch_size,
        "epochs": ppo.epochs, "encoder": config.network.encoder,
        "observe_mission": (env_options or {}).get("observe_mission", True),
    }


VERSIONS = ("jax", "jaxlib", "flax", "optax", "gymnasium", "minigrid", "torch",
            "stable-baselines3", "numpy")
"""Packages whose versions the results record."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument(
        "--repeats", type=int, help="rounds of the reference pair (default 3; --quick: 1)"
    )
    parser.add_argument("--out", type=Path, help=f"default: {RESULTS} (--quick: .quick.json)")
    parser.add_argument(
        "--shapes", nargs="+", default=[], metavar="ENVSxSTEPSxEPOCHS",
        help="extra jax shapes, 4 minibatches each (e.g. 4096x32x1 on a GPU)",
    )
    args = parser.parse_args(argv)
    args.out = args.out or (RESULTS.with_suffix(".quick.json") if args.quick else RESULTS)

    host_steps = 8_192 if args.quick else 100_000
    jax_steps = 32_768 if args.quick else 500_000
    repeats = args.repeats or (1 if args.quick else 3)
    same = ("telapa-jax", SAME, "jax", jax_steps, IMAGE_ONLY)
    runs = [
        ("telapa-gymnasium", SAME, "gymnasium", host_steps, IMAGE_ONLY),
        ("telapa-jax-mission", SAME, "jax", jax_steps, None),
        ("telapa-jax-64x128-e2", _larger(64, 128, 2048, 2), "jax", jax_steps, None),
        ("telapa-jax-256x64-e1", _larger(256, 64, 4096, 1), "jax", jax_steps, None),
        ("telapa-jax-minigrid-preset", load_config(preset_path("minigrid")), "jax", jax_steps,
         None),
    ]
    for shape in args.shapes:
        num_envs, n_steps, epochs = (int(n) for n in shape.split("x"))
        config = _larger(num_envs, n_steps, num_envs * n_steps // 4, epochs)
        runs.append((f"telapa-jax-{shape}", config, "jax", max(jax_steps, 20 * num_envs * n_steps),
                     None))

    results = []

    def record(result: dict) -> None:
        results.append(result)
        print(f"{result['name']:30s} {result['steps']:9d} {result['compile_s']:9.1f} "
              f"{result['train_s']:8.1f} {result['steps_per_s']:9.0f}", file=sys.stderr)

    print(f"{'run':30s} {'steps':>9s} {'compile s':>9s} {'train s':>8s} {'steps/s':>9s}",
          file=sys.stderr)
    for round_ in range(repeats):  # the reference pair, alternating
        try:
            record({**bench_sb3(host_steps), "round": round_})
        except ImportError as err:
            print(f"skipping SB3 ({err}); install with: pip install torch==2.13.0 "
                  "stable-baselines3", file=sys.stderr)
        record({**bench_telapa(*same), "round": round_})
    for run in runs:
        record(bench_telapa(*run))

    medians = {
        name: statistics.median(r["steps_per_s"] for r in results if r["name"] == name)
        for name in dict.fromkeys(r["name"] for r in results)
    }
    sb3 = medians.get("sb3")
    for r in results:
        r["ratio_vs_sb3"] = r["steps_per_s"] / sb3 if sb3 else None
    summary = {
        name: {"median_steps_per_s": rate, "ratio_vs_sb3": rate / sb3 if sb3 else None}
        for name, rate in medians.items()
    }
    report = {
        "benchmark": "ppo_throughput",
        "env": ENV_ID,
        "quick": args.quick,
        "machine": machine_info(),
        "versions": package_versions(VERSIONS),
        "repeats": repeats,
        "iterations_per_call": ITERATIONS_PER_CALL,
        "summary": summary,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    if sb3:
        for name, row in summary.items():
            print(f"{name}: {row['ratio_vs_sb3']:.1f}x SB3 (median)", file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
