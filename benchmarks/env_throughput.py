"""Random-action env throughput: every JAX MiniGrid port vs Farama MiniGrid, one run.

Per id, in the same process on the same machine:

- ``port``: ``AutoReset(make(id), batch)`` (episodes reset inside ``step``) over a
  batch of 1, 64, 512 and 4096 envs, ``lax.scan`` over steps with uniform random
  actions, all in one ``jit``; the observations are summed into a checksum, as a
  policy would read them, so XLA cannot skip them; compile time (reset and rollout) is reported
  apart from the steady-state time of the compiled rollout;
- ``farama``: ``gymnasium.make(id)`` stepped in Python with uniform random actions,
  ``reset`` on episode end;
- ``farama-sync8``: ``gymnasium.vector.SyncVectorEnv`` of 8 such envs (autoreset).

Steps/s counts env steps (a batch of B envs stepped once is B steps). Writes
``benchmarks/results/env_throughput.json`` with the machine (CPU model, cores, load),
the versions, and one record per (id, runner, number of envs). ``--quick`` measures
batches 1 and 64 only, briefly, into ``env_throughput.quick.json``.

    python benchmarks/env_throughput.py                     # every id (tens of minutes)
    python benchmarks/env_throughput.py --quick --ids MiniGrid-Empty-5x5-v0
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import gymnasium as gym
import jax
import jax.numpy as jnp
import minigrid  # noqa: F401  (registers the Farama ids)
import numpy as np
from machine import machine_info

from telapa.envs import AutoReset, jax_env_ids, make

RESULTS = Path(__file__).resolve().parent / "results" / "env_throughput.json"


@dataclass(frozen=True)
class Settings:
    """How long each measurement runs."""

    batch_sizes: tuple[int, ...]
    scan_steps: int  # steps per compiled rollout call
    min_seconds: float  # steady state: repeat rollout calls at least this long
    host_steps: int  # Farama env steps per measurement (all envs of the vector env together)


FULL = Settings(batch_sizes=(1, 64, 512, 4096), scan_steps=256, min_seconds=3.0, host_steps=20_000)
QUICK = Settings(batch_sizes=(1, 64), scan_steps=32, min_seconds=0.2, host_steps=500)


def port_throughput(env_id: str, batch: int, settings: Settings) -> dict:
    """Steps/s of the jitted, vmapped port with random actions and auto-reset."""
    env = AutoReset(make(env_id), batch)
    n_actions = env.spec.n_actions

    def rollout(state, key):
        def step(carry, _):
            state, key, checksum = carry
            key, action_key = jax.random.split(key)
            actions = jax.random.randint(action_key, (batch,), 0, n_actions)
            state, obs, reward, *_ = env.step(state, actions)
            # Consume the observations, as a policy would, so XLA cannot skip them.
            checksum += reward.sum() + obs["image"].sum(dtype=jnp.float32)
            return (state, key, checksum), None

        carry = (state, key, jnp.float32(0))
        return jax.lax.scan(step, carry, length=settings.scan_steps)[0]

    reset_key, key = jax.random.split(jax.random.PRNGKey(0))
    start = time.perf_counter()
    reset = jax.jit(env.reset).lower(reset_key).compile()
    state, _ = jax.block_until_ready(reset(reset_key))
    reset_compile_s = time.perf_counter() - start
    start = time.perf_counter()
    compiled = jax.jit(rollout).lower(state, key).compile()
    compile_s = time.perf_counter() - start

    carry = jax.block_until_ready(compiled(state, key))  # warm-up
    calls, start = 0, time.perf_counter()
    while calls == 0 or time.perf_counter() - start < settings.min_seconds:
        carry = jax.block_until_ready(compiled(*carry[:2]))
        calls += 1
    seconds = time.perf_counter() - start
    steps = calls * settings.scan_steps * batch
    return {
        "reset_compile_s": reset_compile_s,
        "compile_s": compile_s,
        "steps": steps,
        "seconds": seconds,
        "steps_per_s": steps / seconds,
    }


def farama_throughput(env_id: str, settings: Settings) -> dict:
    """Steps/s of one Farama env stepped in Python, reset on episode end."""
    env = gym.make(env_id)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(settings.host_steps):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            env.reset()
    seconds = time.perf_counter() - start
    return {
        "steps": settings.host_steps,
        "seconds": seconds,
        "steps_per_s": settings.host_steps / seconds,
    }


def farama_vector_throughput(env_id: str, settings: Settings, num_envs: int) -> dict:
    """Steps/s of a ``SyncVectorEnv`` of ``num_envs`` Farama envs (autoreset)."""
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * num_envs)
    rng = np.random.default_rng(0)
    envs.reset(seed=0)
    n_actions = envs.single_action_space.n
    calls = settings.host_steps // num_envs
    start = time.perf_counter()
    for _ in range(calls):
        envs.step(rng.integers(n_actions, size=num_envs))
    seconds = time.perf_counter() - start
    envs.close()
    steps = calls * num_envs
    return {"steps": steps, "seconds": seconds, "steps_per_s": steps / seconds}



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run (batch 1 and 64)")
    parser.add_argument("--ids", nargs="+", help="ids to measure (default: every port)")
    parser.add_argument("--out", type=Path, help=f"default: {RESULTS} (--quick: .quick.json)")
    parser.add_argument(
        "--batch-sizes", type=int, nargs="+", help="port batch sizes (e.g. larger on a GPU)"
    )
    args = parser.parse_args(argv)
    ports = jax_env_ids()
    ids = args.ids or ports
    unknown = sorted(set(ids) - set(ports))
    if unknown:
        parser.error(f"no JAX port of {', '.join(unknown)}; ported: {', '.join(ports)}")
    settings = QUICK if args.quick else FULL
    if args.batch_sizes:
        settings = replace(settings, batch_sizes=tuple(args.batch_sizes))
    out = args.out or (RESULTS.with_suffix(".quick.json") if args.quick else RESULTS)

    results = []
    for env_id in ids:
        runs = [("farama", 1, farama_throughput(env_id, settings))]
        runs.append(("farama-sync8", 8, farama_vector_throughput(env_id, settings, 8)))
        runs += [("port", b, port_throughput(env_id, b, settings)) for b in settings.batch_sizes]
        for name, num_envs, result in runs:
            results.append({"env_id": env_id, "name": name, "num_envs": num_envs, **result})
            rate = result["steps_per_s"]
            print(f"{env_id:36s} {name:12s} {num_envs:5d} {rate:12.0f} steps/s", file=sys.stderr)

    report = {
        "benchmark": "env_throughput",
        "quick": args.quick,
        "settings": asdict(settings),
        "machine": machine_info(),
        "results": results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
