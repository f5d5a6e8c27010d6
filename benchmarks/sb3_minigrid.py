"""Farama MiniGrid vs telapa's port through the library interfaces, in one run.

- ``vector``: random-action stepping of ``gymnasium.make_vec(id, n)``, Farama's
  ``SyncVectorEnv`` (``farama-sync``) vs telapa's ``telapa/<id>`` vector env
  (``telapa-vector``, one jitted step of the batch, NEXT_STEP autoreset), at 16, 64 and
  256 envs. Steps/s counts env steps (n per call); the first call (telapa: the compile)
  is timed apart.
- ``sb3-ppo``: Stable-Baselines3 PPO (``MlpPolicy``, the same hyperparameters and seed)
  on Farama's envs in SB3's ``DummyVecEnv`` (with ``ImgObsWrapper``) vs on telapa's
  adapter (`telapa.envs.sb3.make_sb3_vec_env`, ``obs_keys=("image",)``): wall time,
  steps/s and the mean return of the last 100 episodes.

Writes ``benchmarks/results/sb3_minigrid.json`` with the machine (CPU, cores, load) and
versions; ``--quick`` (a smoke run: 16 and 64 envs, 512 PPO steps) writes
``sb3_minigrid.quick.json``. Needs the ``bench`` extra (SB3, torch).

    python benchmarks/sb3_minigrid.py                   # DoorKey-8x8 (tens of minutes)
    python benchmarks/sb3_minigrid.py --quick
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import gymnasium as gym
import minigrid  # noqa: F401  (registers the Farama ids)
import numpy as np
from machine import machine_info, package_versions

import telapa.envs  # noqa: F401  (registers telapa/<id>)

RESULTS = Path(__file__).resolve().parent / "results" / "sb3_minigrid.json"


@dataclass(frozen=True)
class Settings:
    vector_sizes: tuple[int, ...]
    vector_steps: int
    """Calls of ``step`` per measurement, after the first."""
    ppo_envs: int
    ppo_steps: int
    ppo_n_steps: int


FULL = Settings(vector_sizes=(16, 64, 256), vector_steps=500, ppo_envs=16,
                ppo_steps=200_000, ppo_n_steps=128)
QUICK = Settings(vector_sizes=(16, 64), vector_steps=20, ppo_envs=8, ppo_steps=512,
                 ppo_n_steps=32)


def vector_throughput(env_id: str, num_envs: int, steps: int, ours: bool) -> dict:
    """Random-action steps/s of ``make_vec`` (telapa's vector env or Farama's sync)."""
    envs = (gym.make_vec(f"telapa/{env_id}", num_envs=num_envs) if ours else
            gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync"))
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 7, (steps + 1, num_envs))
    start = time.perf_counter()
    envs.reset(seed=0)
    envs.step(actions[0])
    first = time.perf_counter() - start
    start = time.perf_counter()
    for t in range(1, steps + 1):
        envs.step(actions[t])
    seconds = time.perf_counter() - start
    envs.close()
    return {"first_call_s": first, "seconds": seconds,
            "steps_per_s": num_envs * steps / seconds}


def sb3_ppo(env_id: str, settings: Settings, ours: bool, seed: int = 0) -> dict:
    """SB3 PPO for ``settings.ppo_steps`` steps on Farama's envs or telapa's adapter."""
    from minigrid.wrappers import ImgObsWrapper
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger

    from telapa.envs.sb3 import make_sb3_vec_env

    if ours:
        venv = make_sb3_vec_env(f"telapa/{env_id}", settings.ppo_envs, seed,
                                obs_keys=("image",))
    else:
        venv = make_vec_env(lambda: ImgObsWrapper(gym.make(env_id)),
                            n_envs=settings.ppo_envs, seed=seed)
    model = PPO("MlpPolicy", venv, n_steps=settings.ppo_n_steps, batch_size=256,
                ent_coef=0.01, seed=seed, device="cpu", verbose=0)
    model.set_logger(Logger(folder=None, output_formats=[]))  # no tempdir/SB3-<date>
    start = time.perf_counter()
    model.learn(settings.ppo_steps)
    seconds = time.perf_counter() - start
    returns = [info["r"] for info in model.ep_info_buffer]
    venv.close()
    return {"seconds": seconds, "steps_per_s": model.num_timesteps / seconds,
            "episodes_in_buffer": len(returns),
            "mean_return_last_100": float(np.mean(returns)) if returns else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument("--env-id", default="MiniGrid-DoorKey-8x8-v0")
    parser.add_argument("--out", type=Path, help=f"default: {RESULTS} (--quick: .quick.json)")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    out = args.out or (RESULTS.with_suffix(".quick.json") if args.quick else RESULTS)
    results = []
    for num_envs in settings.vector_sizes:
        for name, ours in (("farama-sync", False), ("telapa-vector", True)):
            result = vector_throughput(args.env_id, num_envs, settings.vector_steps, ours)
            results.append({"benchmark": "vector", "name": name, "num_envs": num_envs,
                            **result})
            print(f"vector {name:14s} {num_envs:4d} envs {result['steps_per_s']:10.0f} "
                  "steps/s", file=sys.stderr)
    for name, ours in (("farama-dummyvecenv", False), ("telapa-adapter", True)):
        result = sb3_ppo(args.env_id, settings, ours)
        results.append({"benchmark": "sb3-ppo", "name": name, "num_envs": settings.ppo_envs,
                        **result})
        print(f"sb3-ppo {name:19s} {result['steps_per_s']:8.0f} steps/s, mean return "
              f"{result['mean_return_last_100']}", file=sys.stderr)
    report = {"benchmark": "sb3_minigrid", "env_id": args.env_id, "quick": args.quick,
              "settings": asdict(settings),
              "machine": {**machine_info(),
                          "bench_versions": package_versions(("stable-baselines3", "torch"))},
              "results": results}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
