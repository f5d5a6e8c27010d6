"""MuJoCo throughput: telapa PPO vs Stable-Baselines3 PPO on HalfCheetah-v5, env stepping
(sync vs process-parallel), candidate evaluation, and the cost of one paper-budget visit.

Measured in one run on one machine:

- ``sb3``: Stable-Baselines3 PPO (MlpPolicy: separate 64x64 tanh actor and critic) on
  gymnasium's HalfCheetah-v5 in a ``DummyVecEnv`` of 8, n_steps 2048, batch 256, 10 epochs,
  lr 3e-4 (the paper's MuJoCo shapes; the reference);
- ``telapa``: telapa PPO on the gymnasium backend with the same shapes
  (``configs/ppo/mujoco.yaml``), on the MuJoCo env family's env (friction 1.00 and the
  24-dim sketch at every step);
- env stepping alone, 8 copies, zero actions: gymnasium's env in a ``SyncVectorEnv``, the
  family's env in a ``SyncVectorEnv`` and in an ``AsyncVectorEnv`` (one process per
  copy), and telapa's `GymVectorEnv`;
- candidate evaluation as illumination runs it (`evaluate_population`, 5 episodes per
  candidate on the gymnasium backend);
- the ``native`` backend (issue 53, `telapa.envs.mujoco.native`) beside them: telapa PPO
  on it (``telapa-native``, measured in the same rounds as the pair), its stepping alone
  at 8 and 64 envs (``native-8``, ``native-64``), and candidate evaluation on it batched
  (``candidates-native``: all candidates x 5 episodes as one batch of envs, as
  illumination runs it there) and one candidate after the other
  (``candidates-native-1by1``: `Agent.evaluate` per candidate), and batched with the
  jitted policy vmapped over the sets at every step (``candidates-native-jitact``, the
  evaluation before `telapa.rl.host_policy.HostActions` put the mean in numpy); and
  telapa PPO on it
  with the jitted policy called at every rollout step (``telapa-native-jitact``, the
  host rollout before `telapa.rl.host_policy` put the Gaussian mean in numpy), in the
  same rounds.

- ``--stages vector``: ``gymnasium.make_vec`` of gymnasium's env (``SyncVectorEnv``)
  against ``telapa/<Id>`` (`telapa.envs.mujoco.gym_vector`: the native batch behind
  gymnasium's vector interface, identical step for step) at 8 and 64 envs of
  HalfCheetah and Hopper, random actions, alternated over ``--repeats`` rounds (default
  3), medians in ``vector``.

- the native engine's two knobs (``--stages threads sketch``, on quiet cores): the batch's
  physics on 1 against 2 threads (``NativeVectorEnv.threads``), as `step` of 8, 16, 40
  and 64 HalfCheetahs with zero actions and no sketch, as a training env
  (``threads-<k>-<n>``), and as
  the batched evaluation of 8 mutants x 5 episodes sketching T_max = 256 steps as
  illumination does (``candidates-threads-<k>``); and the
  sketch's horizon, one candidate of 5 episodes at a time as illumination evaluates
  (the paper's batch of one) with the sketch of every step (``sketch-all``) against only
  the first T_max = 256 steps the embedder reads (``sketch-256``, `Agent.evaluate_batch`'s
  ``feature_steps``), one thread; each pair alternated over ``--repeats`` rounds (default
  3 for these stages), medians in ``engine``.

The pair (``sb3``, ``telapa``) is measured ``--repeats`` times, alternating, and the ratio
uses the medians. From the measured rates the script extrapolates what one visit at
the paper's budget costs per environment (``visit_cost``): the preset's PPO steps
(983,040, the whole iterations nearest the paper's 1e6), 21 evaluations of 5 episodes,
200 illumination candidates x 5 episodes, and the few-shot probes of
``configs/runs/mujoco.yaml``, all episodes at the 1000-step time limit (an upper bound:
Hopper, Walker2d and Ant episodes end early when the agent falls). PPO rates: the
HalfCheetah median, and one iteration on each other env; evaluation rates: the
candidate evaluation of an untrained policy on that env (whose Hopper and Walker2d
episodes last ~20 steps, so per-episode overhead weighs more than in a trained policy's
1000-step episodes: those rates, and the costs from them, are pessimistic). Writes
``benchmarks/results/mujoco_throughput.json``; ``visit_cost_native`` is the same
extrapolation from the native rates.

    python benchmarks/mujoco_throughput.py           # full (about 12 minutes)
    python benchmarks/mujoco_throughput.py --quick   # smoke check (256-step rollouts)
    python benchmarks/mujoco_throughput.py --stages threads sketch   # the engine's knobs
                                                     # alone (~2 min), into their own JSON
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from machine import machine_info, package_versions

from telapa.config import load_config, preset_path
from telapa.jaxcache import ENV_VAR as JAX_CACHE
from telapa.jaxcache import enable_persistent_cache

ENV_ID = "HalfCheetah-v5"
ENVS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5")
RESULTS = Path(__file__).resolve().parent / "results" / "mujoco_throughput.json"
CONFIG = load_config(preset_path("mujoco"))
SHAPES = dict(num_envs=8, n_steps=2048, batch_size=256, epochs=10)
EPISODE_OPTIONS: dict[str, int] = {}
"""Env options of the trainers whose policies train and are evaluated as candidates
(``--quick``: episodes of 200 steps, not 1000; the sketch stage keeps 1000, which its
256-step horizon needs)."""


def _quick() -> None:
    """``--quick``: 256-step rollouts instead of 2048 and 200-step episodes (a smoke check
    of the script)."""
    global CONFIG
    SHAPES["n_steps"] = 256
    EPISODE_OPTIONS["max_episode_steps"] = 200
    CONFIG = CONFIG.model_copy(update={"ppo": CONFIG.ppo.model_copy(update={"n_steps": 256})})


def bench_sb3(steps: int) -> dict:
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = DummyVecEnv([lambda: gym.make(ENV_ID)] * SHAPES["num_envs"])
    model = PPO(
        "MlpPolicy", env, n_steps=SHAPES["n_steps"], batch_size=SHAPES["batch_size"],
        n_epochs=SHAPES["epochs"], learning_rate=3e-4, seed=0, device="cpu", verbose=0,
    )
    model.set_logger(Logger(folder=None, output_formats=[]))  # no tempdir/SB3-<date>
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    train_s = time.perf_counter() - start
    return {"name": "sb3", "steps": int(model.num_timesteps), "train_s": train_s,
            "compile_s": 0.0, "steps_per_s": model.num_timesteps / train_s,
            "torch_threads": torch.get_num_threads(), **SHAPES}


def bench_telapa(steps: int, env_id: str = ENV_ID, keep: dict | None = None,
                 backend: str = "gymnasium", jitted_act: bool = False) -> dict:
    """telapa PPO for ``steps`` env steps on ``backend``; ``keep``: (env id, backend) ->
    the trainer, kept there. ``jitted_act``: rollouts call the jitted policy at every
    step (`telapa.rl.rollout.gym_rollout`, the host path before the numpy mean of
    `telapa.rl.host_policy`), named ``telapa-<backend>-jitact``."""
    from unittest import mock

    from telapa.rl import PPOTrainer, gym_agent

    trainer = PPOTrainer(env_id, CONFIG, key=0, backend=backend,
                         env_options=EPISODE_OPTIONS or None)
    with mock.patch.object(gym_agent, "host_mean", lambda policy: None) if jitted_act \
            else contextlib.nullcontext():
        compile_s = trainer.compile()
        start = time.perf_counter()
        trainer.train(steps)
        train_s = time.perf_counter() - start
    if keep is not None and not jitted_act:
        keep[env_id, backend] = trainer
    name = ("telapa" if backend == "gymnasium" else f"telapa-{backend}") + (
        "-jitact" if jitted_act else "")
    return {"name": name, "env_id": env_id, "steps": trainer.steps, "train_s": train_s,
            "compile_s": compile_s, "steps_per_s": trainer.steps / train_s, **SHAPES}


def bench_stepping(steps: int, env_id: str = ENV_ID) -> list[dict]:
    import gymnasium
    from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

    from telapa.envs import make
    from telapa.envs.registry import family_of

    family = family_of(env_id)
    n = SHAPES["num_envs"]
    calls = max(steps // n, 1)
    zeros = np.zeros((n, *gymnasium.make(env_id).action_space.shape), np.float32)

    def gym_raw():
        return gymnasium.make(env_id)

    def ours():
        return family.make_single(env_id, {})

    results = []
    for name, cls, factory in (("gymnasium-sync8", SyncVectorEnv, gym_raw),
                               ("family-sync8", SyncVectorEnv, ours),
                               ("family-async8", AsyncVectorEnv, ours)):
        vec = cls([factory] * n, autoreset_mode=AutoresetMode.SAME_STEP)
        vec.reset(seed=0)
        start = time.perf_counter()
        for _ in range(calls):
            vec.step(zeros)
        elapsed = time.perf_counter() - start
        vec.close()
        results.append({"name": name, "env_id": env_id, "num_envs": n, "steps": calls * n,
                        "steps_per_s": calls * n / elapsed})
    env = make(env_id, "gymnasium", num_envs=n, seed=0)
    env.reset(0)
    start = time.perf_counter()
    for _ in range(calls):
        env.step(None, zeros)
    elapsed = time.perf_counter() - start
    results.append({"name": "GymVectorEnv-sync8", "env_id": env_id, "num_envs": n,
                    "steps": calls * n, "steps_per_s": calls * n / elapsed})
    for size in (n, 64):
        native = make(env_id, "native", num_envs=size, seed=0)
        native.reset(0)
        results.append({"name": f"native-{size}", "env_id": env_id, "num_envs": size,
                        **_step_zeros(native, steps)})
    return results


def bench_vector(steps: int, rounds: int) -> list[dict]:
    """``gymnasium.make_vec`` of gymnasium's own env (``SyncVectorEnv``) against telapa's
    ``telapa/<Id>`` (the native batch behind gymnasium's interface,
    `telapa.envs.mujoco.gym_vector`) at 8 and 64 envs, random actions drawn beforehand,
    NEXT_STEP autoreset in both; each pair alternated over ``rounds``."""
    import gymnasium

    import telapa.envs  # noqa: F401  (registers telapa/<Id>)

    results = []
    for env_id in ("HalfCheetah-v5", "Hopper-v5"):
        for n in (8, 64):
            calls = max(steps // n, 1)
            for round_ in range(rounds):
                for name, make in (
                        ("vector-gymnasium", lambda e=env_id, n=n: gymnasium.make_vec(
                            e, num_envs=n, vectorization_mode="sync")),
                        ("vector-telapa", lambda e=env_id, n=n: gymnasium.make_vec(
                            f"telapa/{e}", num_envs=n))):
                    envs = make()
                    actions = np.random.default_rng(0).uniform(
                        -1, 1, (64, *envs.action_space.shape)).astype(np.float32)
                    envs.reset(seed=0)
                    start = time.perf_counter()
                    for k in range(calls):
                        envs.step(actions[k % 64])
                    elapsed = time.perf_counter() - start
                    envs.close()
                    results.append({"name": f"{name}-{n}", "env_id": env_id, "num_envs": n,
                                    "round": round_, "steps": calls * n,
                                    "steps_per_s": calls * n / elapsed})
    return results


def _step_zeros(env, steps: int) -> dict:
    """``steps`` (rounded down to whole batches, at least one) env steps of the host
    vector env ``env`` with zero actions: ``{"steps", "steps_per_s"}``."""
    zeros = np.zeros((env.num_envs, env.spec.action_dim), np.float32)
    calls = max(steps // env.num_envs, 1)
    start = time.perf_counter()
    for _ in range(calls):
        env.step(None, zeros)
    elapsed = time.perf_counter() - start
    return {"steps": calls * env.num_envs, "steps_per_s": calls * env.num_envs / elapsed}


def _mutants(trainer, candidates: int):
    """``(population (candidates, P), unravel)``: the trainer's flat policy plus
    N(0, 0.02^2) noise per candidate (illumination's sigma0), seeded."""
    import jax

    from telapa.rl.networks import flatten_params

    flat, unravel = flatten_params(trainer.params)
    noise = jax.random.normal(jax.random.key(1), (candidates, flat.shape[0])) * 0.02
    return flat[None] + noise, unravel


def bench_physics(steps: int) -> list[dict]:
    """The bound under every MuJoCo phase: ``mujoco.mj_step`` of one env of each id (its
    gymnasium model, ``frame_skip`` frames per env step, uniform random controls, a reset
    every 100 env steps) in a Python loop on one core, nothing else. Per frame, with the
    model's integrator: Hopper's and Walker2d's RK4 evaluates the dynamics four times a
    frame (Ant's too, with a larger step), HalfCheetah's Euler once."""
    import gymnasium
    import mujoco

    from telapa.envs.mujoco.native import model_warnings

    results = []
    for env_id in ENVS:
        with model_warnings():
            env = gymnasium.make(env_id).unwrapped
        model, data, skip = env.model, env.data, env.frame_skip
        controls = np.random.default_rng(0).uniform(-1, 1, (steps, model.nu))
        start = time.perf_counter()
        for k in range(steps):
            if k % 100 == 0:
                mujoco.mj_resetData(model, data)
            data.ctrl[:] = controls[k]
            mujoco.mj_step(model, data, nstep=skip)
        elapsed = time.perf_counter() - start
        results.append({"name": "physics-1env", "env_id": env_id, "steps": steps,
                        "steps_per_s": steps / elapsed, "frame_skip": skip,
                        "us_per_frame": elapsed / (steps * skip) * 1e6,
                        "integrator": mujoco.mjtIntegrator(model.opt.integrator).name})
    return results


def bench_candidates(candidates: int, env_id: str, trainer=None, backend: str = "gymnasium",
                     one_by_one: bool = False, jitted_act: bool = False) -> dict:
    """Illumination's candidate evaluation: ``candidates`` mutants x 5 episodes of the
    policy of ``trainer`` (default: a fresh `PPOTrainer`'s on ``backend``, untrained);
    ``one_by_one``: `Agent.evaluate` per candidate instead of `evaluate_population`;
    ``jitted_act`` (native): the jitted policy vmapped over the sets at every step, as
    before `HostActions` put the mean in numpy."""
    if jitted_act:
        from unittest import mock

        with mock.patch("telapa.rl.gym_agent.host_mean", lambda policy: None):
            result = bench_candidates(candidates, env_id, trainer, backend, one_by_one)
        return {**result, "name": result["name"] + "-jitact"}
    import jax

    from telapa.continual.methods.telapa.illumination import evaluate_population
    from telapa.rl import PPOTrainer

    if trainer is None:
        trainer = PPOTrainer(env_id, CONFIG, key=0, backend=backend,
                             env_options=EPISODE_OPTIONS or None)
    population, unravel = _mutants(trainer, candidates)
    if backend == "gymnasium":  # compile (the policy's shapes are the eval env's)
        evaluate_population(trainer.agent, population[:1], unravel, episodes=1,
                            key=jax.random.key(0))
    elif one_by_one:  # native: the policy compiles for the sets x episodes of a call
        trainer.agent.evaluate(unravel(population[0]), 5, jax.random.key(0))
    else:
        evaluate_population(trainer.agent, population, unravel, episodes=5,
                            key=jax.random.key(0))
    start = time.perf_counter()
    if one_by_one:
        keys = jax.random.split(jax.random.key(2), candidates)
        lengths = np.stack([trainer.agent.evaluate(unravel(population[b]), 5, keys[b]).lengths
                            for b in range(candidates)])
        steps = int(lengths.sum())
    else:
        ev = evaluate_population(trainer.agent, population, unravel, episodes=5,
                                 key=jax.random.key(2))
        lengths, steps = np.asarray(ev.lengths), ev.env_steps
    elapsed = time.perf_counter() - start
    name = "candidates" if backend == "gymnasium" else f"candidates-{backend}"
    return {"name": name + ("-1by1" if one_by_one else ""), "env_id": env_id,
            "candidates": candidates, "episodes": 5,
            "steps": steps, "eval_s": elapsed, "steps_per_s": steps / elapsed,
            "mean_episode_length": float(np.mean(lengths))}


THREAD_SIZES = (8, 16, 40, 64)
"""Batch sizes of the threads stage: PPO's 8 envs, 16, illumination's 8 x 5 and 64."""


def bench_threads(steps: int, rounds: int, candidates: int) -> list[dict]:
    """The batch's physics on 1 and 2 threads (module docstring), alternating within each
    round: `step` of ``THREAD_SIZES`` HalfCheetahs (zero actions, no sketch, as a
    training env) for about ``steps`` env steps each, and the batched evaluation of
    ``candidates`` mutants x 5 episodes, sketching the first T_max = 256 steps as
    illumination does (`evaluate_populations`)."""
    import jax

    from telapa.envs import make
    from telapa.rl import PPOTrainer

    envs = {}
    for size in THREAD_SIZES:
        env = envs[size] = make(ENV_ID, "native", num_envs=size, seed=0)
        env.sketch = False
        env.reset(0)
    trainer = PPOTrainer(ENV_ID, CONFIG, key=0, backend="native",
                         env_options=EPISODE_OPTIONS or None)
    population, unravel = _mutants(trainer, candidates)
    params = jax.vmap(unravel)(population)
    keys = jax.random.split(jax.random.key(2), candidates)
    agent = trainer.agent
    agent.evaluate_batch(params, 5, keys)  # compile; makes the batch's eval env
    results = []
    for round_ in range(rounds):
        for threads in (1, 2):
            for size, env in envs.items():
                env.threads = threads
                results.append({"name": f"threads-{threads}-{size}", "env_id": ENV_ID,
                                "num_envs": size, "threads": threads, "round": round_,
                                **_step_zeros(env, steps)})
            # the agent's evaluation envs (made once per batch size; private to the agent)
            for env in agent._eval_envs.values():
                env.threads = threads
            start = time.perf_counter()
            lengths = np.stack([r.lengths for r in agent.evaluate_batch(
                params, 5, keys, feature_steps=256)])  # illumination's T_max
            elapsed = time.perf_counter() - start
            results.append({"name": f"candidates-threads-{threads}", "env_id": ENV_ID,
                            "num_envs": candidates * 5, "threads": threads,
                            "round": round_, "steps": int(lengths.sum()),
                            "steps_per_s": int(lengths.sum()) / elapsed})
    return results


def bench_sketch(candidates: int, rounds: int, t_max: int = 256) -> list[dict]:
    """One candidate of 5 episodes at a time, ``candidates`` times (illumination's batch
    of one), on one thread: the sketch of every step (``sketch-all``) against the first
    ``t_max`` (``sketch-<t_max>``), alternating within each round."""
    import jax

    from telapa.rl import PPOTrainer

    trainer = PPOTrainer(ENV_ID, CONFIG, key=0, backend="native")
    agent = trainer.agent
    population, unravel = _mutants(trainer, candidates)
    params = [jax.vmap(unravel)(population[b:b + 1]) for b in range(candidates)]
    keys = jax.random.split(jax.random.key(2), candidates)
    agent.evaluate_batch(params[0], 5, keys[:1])  # compile; makes the eval env
    for env in agent._eval_envs.values():  # private to the agent: one thread, as a worker
        env.threads = 1
    results = []
    for round_ in range(rounds):
        for name, steps_kept in (("sketch-all", None), (f"sketch-{t_max}", t_max)):
            start = time.perf_counter()
            total = 0
            for b in range(candidates):
                (ev,) = agent.evaluate_batch(params[b], 5, keys[b:b + 1],
                                             feature_steps=steps_kept)
                total += int(np.sum(ev.lengths))
            elapsed = time.perf_counter() - start
            results.append({"name": name, "env_id": ENV_ID, "candidates": candidates,
                            "episodes": 5, "feature_steps": steps_kept, "round": round_,
                            "steps": total, "steps_per_s": total / elapsed})
    return results


def engine_summary(results: list[dict]) -> dict:
    """Medians of the threads and sketch stages, and the ratios of each pair."""
    rates: dict[str, list[float]] = {}
    for r in results:
        rates.setdefault(r["name"], []).append(r["steps_per_s"])
    med = {name: statistics.median(v) for name, v in rates.items()
           if name.startswith(("threads-", "candidates-threads-", "sketch-"))}
    ratios = {}
    for name, rate in med.items():
        if name.startswith(("threads-2-", "candidates-threads-2")):
            one = name.replace("-2", "-1", 1)
            ratios[f"{name} / {one}"] = rate / med[one]
        elif name.startswith("sketch-") and name != "sketch-all" and "sketch-all" in med:
            ratios[f"{name} / sketch-all"] = rate / med["sketch-all"]
    return {"median_steps_per_s": med, "ratios": ratios}


def vector_summary(results: list[dict]) -> dict:
    """Medians of the vector stage per env and size, and telapa's over gymnasium's."""
    rates: dict[tuple[str, str], list[float]] = {}
    for r in results:
        if r["name"].startswith("vector-"):
            rates.setdefault((r["env_id"], r["name"]), []).append(r["steps_per_s"])
    out: dict[str, dict] = {}
    for (env_id, name), v in rates.items():
        out.setdefault(env_id, {})[name] = statistics.median(v)
    for per_env in out.values():
        for name in [k for k in per_env if k.startswith("vector-telapa-")]:
            n = name.rsplit("-", 1)[1]
            per_env[f"ratio-{n}"] = per_env[name] / per_env[f"vector-gymnasium-{n}"]
    return out


def visit_cost(ppo_rate: float, eval_rate: float) -> dict:
    """Seconds of one paper-budget visit (module docstring), from measured rates."""
    from telapa.continual.preset import load_run_config

    run = load_run_config("mujoco")
    horizon = 1000
    transfer = run.methods.telapa.qd.transfer
    ill = run.methods.telapa.qd.illumination
    evals = (run.steps_per_visit // run.eval_every + 1) * run.eval_episodes * horizon
    illumination = (ill.iterations + 1) * ill.eval_episodes * horizon
    probe_ppo = transfer.k_pool * transfer.probe_steps
    probe_eval = transfer.k_pool * transfer.probe_points * transfer.probe_eval_episodes * horizon
    seconds = {
        "ppo": run.steps_per_visit / ppo_rate,
        "evaluation": evals / eval_rate,
        "illumination": illumination / eval_rate,
        "probes": probe_ppo / ppo_rate + probe_eval / eval_rate,
    }
    return {"env_steps": {"ppo": run.steps_per_visit, "evaluation": evals,
                          "illumination": illumination, "probes": probe_ppo + probe_eval},
            "seconds": seconds, "total_s": sum(seconds.values()),
            "scratch_total_s": seconds["ppo"] + seconds["evaluation"]}


STAGES = ("ppo", "stepping", "candidates", "threads", "sketch", "vector", "physics")
"""The measurements `main` can run (``--stages``), in the order it runs them."""

VERSIONS = ("jax", "jaxlib", "flax", "optax", "gymnasium", "mujoco", "torch",
            "stable-baselines3", "numpy")
"""Packages whose versions the results record."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument("--repeats", type=int, help="rounds of the reference pair (default 2)")
    parser.add_argument("--skip-sb3", action="store_true", help="no reference run")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES),
                        help="what to measure (default: all); a subset writes "
                             "mujoco_throughput-<stages>.json unless --out is given")
    parser.add_argument("--out", type=Path, help=f"default: {RESULTS} (--quick: .quick.json)")
    args = parser.parse_args(argv)
    stages = [s for s in STAGES if s in args.stages]
    if not args.out:
        out = RESULTS if stages == list(STAGES) else RESULTS.with_name(
            f"{RESULTS.stem}-{'-'.join(stages)}.json")
        args.out = out.with_suffix(".quick.json") if args.quick else out
    if args.quick:
        _quick()
        # the suite's smoke run: its programs compile once (three trainers of one PPO
        # program) and from the suite's cache; timed runs compile cold, as they report
        if os.environ.get(JAX_CACHE):
            enable_persistent_cache()
    rollout = SHAPES["num_envs"] * SHAPES["n_steps"]
    ppo_steps = rollout if args.quick else 3 * rollout
    repeats = args.repeats or (1 if args.quick else 2)
    engine_rounds = args.repeats or (1 if args.quick else 3)
    candidates = 2 if args.quick else 8
    # --quick: the candidates are the PPO run's policy, evaluated on its agent and envs
    # (a second trainer took 2-3 s to build); HalfCheetah's episodes last 1000 steps
    # whatever the policy
    trainers: dict | None = {} if args.quick else None

    results: list[dict] = []

    def record(result: dict) -> None:
        results.append(result)
        print(f"{result['name']:22s} {result.get('env_id', ENV_ID):15s} "
              f"{result['steps']:9d} {result['steps_per_s']:9.0f} steps/s", file=sys.stderr)

    for round_ in range(repeats if "ppo" in stages else 0):
        if not args.skip_sb3:
            try:
                record({**bench_sb3(ppo_steps), "round": round_})
            except ImportError as err:
                print(f"skipping SB3 ({err}); install the bench extra", file=sys.stderr)
        record({**bench_telapa(ppo_steps, keep=trainers), "round": round_})
        record({**bench_telapa(ppo_steps, keep=trainers, backend="native"), "round": round_})
        record({**bench_telapa(ppo_steps, backend="native", jitted_act=True),
                "round": round_})
    for result in bench_stepping(800 if args.quick else 16_000) if "stepping" in stages else ():
        record(result)
    for result in bench_threads(800 if args.quick else 16_000, engine_rounds,
                                candidates) if "threads" in stages else ():
        record(result)
    for result in bench_sketch(1 if args.quick else 10, engine_rounds) \
            if "sketch" in stages else ():
        record(result)
    for result in bench_vector(800 if args.quick else 16_000, engine_rounds) \
            if "vector" in stages else ():
        record(result)
    for result in bench_physics(500 if args.quick else 20_000) if "physics" in stages else ():
        record(result)
    eval_rates, ppo_rates, native_eval, native_ppo = {}, {}, {}, {}
    for env_id in ((ENV_ID,) if args.quick else ENVS) if "candidates" in stages else ():
        kept = trainers or {}
        result = bench_candidates(candidates, env_id, kept.get((env_id, "gymnasium")))
        record(result)
        eval_rates[env_id] = result["steps_per_s"]
        native = kept.get((env_id, "native"))
        result = bench_candidates(candidates, env_id, native, "native")
        record(result)
        native_eval[env_id] = result["steps_per_s"]
        record(bench_candidates(candidates, env_id, native, "native", one_by_one=True))
        record(bench_candidates(candidates, env_id, native, "native", jitted_act=True))
        # one PPO iteration on each other env (physics costs differ)
        if env_id != ENV_ID and "ppo" in stages:
            ppo = {**bench_telapa(rollout, env_id), "name": "telapa-env"}
            record(ppo)
            ppo_rates[env_id] = ppo["steps_per_s"]
            ppo = {**bench_telapa(rollout, env_id, backend="native"),
                   "name": "telapa-native-env"}
            record(ppo)
            native_ppo[env_id] = ppo["steps_per_s"]

    medians = {name: statistics.median(r["steps_per_s"] for r in results if r["name"] == name)
               for name in ("sb3", "telapa", "telapa-native", "telapa-native-jitact")
               if any(r["name"] == name for r in results)}
    sb3 = medians.get("sb3")
    ppo_rate = medians.get("telapa")
    if ppo_rate:
        ppo_rates[ENV_ID] = ppo_rate
        native_ppo[ENV_ID] = medians["telapa-native"]
    report = {
        "benchmark": "mujoco_throughput",
        "env": ENV_ID,
        "quick": args.quick,
        "stages": stages,
        "machine": machine_info(),
        "versions": package_versions(VERSIONS),
        "repeats": repeats,
        "summary": {name: {"median_steps_per_s": rate,
                           "ratio_vs_sb3": rate / sb3 if sb3 else None}
                    for name, rate in medians.items()},
        # the extrapolation needs both rates of an env: PPO and candidate evaluation
        "visit_cost": {env_id: {**visit_cost(ppo_rates[env_id], rate),
                                "ppo_steps_per_s": ppo_rates[env_id],
                                "eval_steps_per_s": rate}
                       for env_id, rate in eval_rates.items() if env_id in ppo_rates},
        "visit_cost_native": {env_id: {**visit_cost(native_ppo[env_id], rate),
                                       "ppo_steps_per_s": native_ppo[env_id],
                                       "eval_steps_per_s": rate}
                              for env_id, rate in native_eval.items() if env_id in native_ppo},
        "engine": engine_summary(results),
        "vector": vector_summary(results),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    if sb3 and ppo_rate:
        print(f"telapa: {ppo_rate / sb3:.2f}x SB3 (median)", file=sys.stderr)
    if ppo_rate:
        print(f"telapa native: {medians['telapa-native'] / ppo_rate:.2f}x telapa gymnasium "
              "(median)", file=sys.stderr)
    for pair, ratio in report["engine"]["ratios"].items():
        print(f"{pair}: {ratio:.2f}x (medians)", file=sys.stderr)
    for env_id, per_env in report["vector"].items():
        for key in sorted(k for k in per_env if k.startswith("ratio-")):
            print(f"{env_id} make_vec telapa/ over gymnasium's, {key[6:]} envs: "
                  f"{per_env[key]:.2f}x (medians)", file=sys.stderr)
    for backend, costs in (("gymnasium", report["visit_cost"]),
                           ("native", report["visit_cost_native"])):
        for env_id, cost in costs.items():
            print(f"{env_id} ({backend}): one paper visit ~{cost['total_s'] / 3600:.2f} h "
                  f"(scratch {cost['scratch_total_s'] / 3600:.2f} h)", file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
