"""The visit program against the path it replaced, side by side in one process (issue 25).

One evaluation chunk of the study preset (`configs/runs/study.yaml`: the MiniGrid PPO
shapes, 16 envs x 128 steps, 4 epochs, minibatch 256; ``eval_every`` = 73,728 PPO steps =
36 iterations, then a 50-episode evaluation) on one task (default DoorKey-8x8, the
primary curriculum's C), for each number of seeds S in ``--sizes`` (default 1 5 8):

- ``old``: the chunk as the runner ran it before issue 25: `AutoReset` with loops of
  data-dependent trip counts (`LegacyAutoReset`), `Agent.train` (S = 1) or
  `batch_training.train_batch` (one jitted call and one host round trip per
  ``iterations_per_call`` = 1 iteration, NaN and competence checks on the host), then
  `Agent.evaluate` seed after seed;
- ``new``: `Agent.train_and_evaluate`: the 36 iterations as one ``lax.scan`` vmapped over
  the seeds and one population evaluation, one program, one transfer;

and the other phases that left the host loop: the pre-evaluation (``evaluate``: seed after
seed against `Agent.evaluate_batch`), EWC's Fisher estimate (``fisher``: the host loop
over 256-state chunks seed after seed against each seed's `EWC.end_task`, one jitted
program per seed, as a batch's lockstep runs it) and
TeLAPA's BuildArchive (``illumination``: `illuminate` seed after seed against
`illuminate_seeds`: on accelerators the seeds in lockstep with one population evaluation
per MAP-Elites step, on CPU seed after seed; the preset's N_ME and batch size, each seed
its own policy, encoder and key) and
TeLAPA's BoundaryMaintenance (``maintenance``: `maintain` seed after seed against
`maintain_seeds`, the boundary updates one vmapped program on accelerators, seed after
seed on CPU; each seed's banks hold
``min_bank_sets`` evaluations of its policy, no archive to re-embed).
Each variant runs once to compile (``first_s``, compilation included) and then
``--repeats`` times (``s``: the fastest). ``env_steps_per_s`` counts PPO and evaluation
env steps together (evaluation steps as measured).

How far from the hardware: ``t_min = env_steps / R_env + FLOPs / R_flop`` (as
`benchmarks/hardware.py`): ``R_flop`` the best f32 matmul rate measured here (a 2048^3
product), ``R_env`` the best port rate of the task in
``benchmarks/results/env_throughput*.json`` when there is one, FLOPs from the policy's
weights W: ``(2 + 6 epochs) W`` per PPO step, ``2 W`` per evaluation step and ``2 W +
6 W`` per Fisher sample; ``gap = s / t_min``.

    python benchmarks/visit_program.py                  # S = 1 5 8 (minutes on 2 cores)
    python benchmarks/visit_program.py --quick          # smoke check: tiny chunk, S = 1 2
    python benchmarks/visit_program.py --quick --preset tests/continual/tiny_run.yaml
    python benchmarks/visit_program.py --new-only --sizes 1 8 64 256   # an accelerator

``--quick`` caps the preset's budgets (2 PPO iterations per chunk, 8 episodes, a 512-step
Fisher, 6 MAP-Elites steps, 5 boundary-update steps) and measures ``R_flop`` on 512^3
products, briefly; with the tests' tiny preset, which is under every cap, it runs the
programs the test suite's runs compile, and it uses the persistent compilation cache
where ``TELAPA_JAX_CACHE`` names one (the suite's), so a smoke check compiles little.
A measurement never uses the cache: its ``compile_s`` is the compiler's.

Writes ``benchmarks/results/visit_program.json`` (``--quick``: ``.quick.json``), rewritten
after every measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from batch_training import train_batch
from machine import machine_info, matmul_rate, package_versions

from telapa.continual.methods import TaskContext
from telapa.continual.methods.telapa.banks import EpisodeBanks, store
from telapa.continual.methods.telapa.embedding import EmbeddingState
from telapa.continual.methods.telapa.illumination import Illumination, illuminate, illuminate_seeds
from telapa.continual.methods.telapa.maintenance import maintain, maintain_seeds
from telapa.continual.preset import load_run_config
from telapa.continual.registry import make_method
from telapa.envs.base import AutoReset, AutoResetState
from telapa.jaxcache import ENV_VAR, enable_persistent_cache
from telapa.qd.trajectories import float16_codec
from telapa.rl.agent import Agent, stack_states

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "visit_program.json"
VERSIONS = ("jax", "jaxlib", "flax", "optax", "numpy")
PHASES = ("chunk", "evaluate", "fisher", "illumination", "maintenance")


class LegacyAutoReset(AutoReset):
    """`AutoReset.step` as it was before issue 25: the chunk loops' trip counts are the
    step's counts (under ``vmap``, a ``while_loop`` over the largest count of any member
    that selects the whole env state at every iteration). Same levels and keys."""

    def step(self, state: AutoResetState, action: jax.Array, *, batch_axes=()):
        env_state, obs, reward, terminated, truncated, info = self._step(
            state.env_state, action)
        done = jnp.logical_or(terminated, truncated)
        key, reset_key = jax.random.split(state.key)
        (finished,) = jnp.nonzero(done, size=self.num_envs + self.chunks[0],
                                  fill_value=self.num_envs)

        def refill(size: int):
            def draw(_, carry):
                drawn, current = carry
                targets = jax.lax.dynamic_slice(finished, (drawn,), (size,))
                keys = jax.random.split(jax.random.fold_in(reset_key, drawn), size)
                fresh = self._reset(keys)
                return drawn + size, jax.tree.map(
                    lambda x, new: x.at[targets].set(new, mode="drop"), current, fresh)
            return draw

        left, carry = done.sum(), (jnp.int32(0), (env_state, obs))
        for n, size in enumerate(self.chunks):
            count = (left + size - 1) // size if n == len(self.chunks) - 1 else left // size
            carry = jax.lax.fori_loop(0, count, refill(size), carry)
            left = left - count * size
        env_state, next_obs = carry[1]
        return (AutoResetState(env_state, key), next_obs, reward, terminated, truncated,
                {**info, "final_obs": obs})


def legacy_fisher(agent: Agent, params, steps: int, key: jax.Array, chunk: int = 256):
    """EWC's Fisher estimate as it was before issue 25: a jitted sampler, then a host
    loop over ``chunk``-state slices of a jitted per-sample gradient sum."""
    obs_key, action_key = jax.random.split(key)
    obs = agent.sample_observations(params, steps, obs_key)
    squared_grad_sum = agent.program("legacy-fisher", lambda: _squared_grad_sum(agent))
    keys = jax.random.split(action_key, steps)
    total = jax.tree.map(jnp.zeros_like, params)
    for start in range(0, steps, chunk):
        part = slice(start, start + chunk)
        batch = jax.tree.map(lambda x, part=part: x[part], obs)
        total = jax.tree.map(jnp.add, total, squared_grad_sum(params, batch, keys[part]))
    return jax.tree.map(lambda s: s / steps, total)


def _squared_grad_sum(agent: Agent) -> Callable:
    def log_prob(p, single_obs, k):
        dist, _ = agent.policy(p, jax.tree.map(lambda x: x[None], single_obs))
        return dist.log_prob(jax.lax.stop_gradient(dist.sample(k)))[0]

    @jax.jit
    def squared_grad_sum(params, batch, keys):
        grads = jax.vmap(jax.grad(log_prob), in_axes=(None, 0, 0))(params, batch, keys)
        return jax.tree.map(lambda g: jnp.sum(g**2, axis=0), grads)

    return squared_grad_sum



def block(tree: Any) -> Any:
    return jax.block_until_ready(tree)


def timed(fn: Callable[[], Any], repeats: int) -> dict[str, float]:
    """``first_s`` (compilation included) and the fastest of ``repeats`` further runs."""
    start = time.perf_counter()
    out = block(fn())
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = block(fn())
        times.append(time.perf_counter() - start)
    return {"first_s": first, "s": min(times) if times else first, "out": out}


def peak_memory_bytes() -> int:
    """The accelerator's peak bytes in use (its allocator's count), else the process's
    peak RSS."""
    stats = jax.devices()[0].memory_stats() if jax.default_backend() != "cpu" else None
    if stats and "peak_bytes_in_use" in stats:
        return int(stats["peak_bytes_in_use"])
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def env_rate(env_id: str) -> float | None:
    """The best measured port rate of ``env_id`` on this platform, if measured."""
    pattern = "env_throughput.json" if jax.default_backend() == "cpu" else \
        "env_throughput.gpu.json"
    path = ROOT / "benchmarks" / "results" / pattern
    if not path.exists():
        return None
    rates = [r["steps_per_s"] for r in json.loads(path.read_text())["results"]
             if r["name"] == "port" and r["env_id"] == env_id]
    return max(rates) if rates else None


def gap(row: dict, *, flops: float, env_steps: int, r_flop: float, r_env: float | None
        ) -> None:
    """Adds ``gflop``, ``t_min_s`` and ``gap`` (measured / t_min) to a measurement row."""
    t_min = flops / (r_flop * 1e9) + (env_steps / r_env if r_env else 0.0)
    row.update(gflop=flops / 1e9, t_min_s=t_min, gap=row["s"] / t_min,
               t_min_counts_env=r_env is not None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny chunk, S = 1 2")
    parser.add_argument("--sizes", type=int, nargs="+", help="seeds per batch (default 1 5 8)")
    parser.add_argument("--env", default="MiniGrid-DoorKey-8x8-v0")
    parser.add_argument("--preset", default="study")
    parser.add_argument("--repeats", type=int, help="timed runs after the first (default 2; "
                        "--quick 1)")
    parser.add_argument("--new-only", action="store_true",
                        help="only the new programs (large S on an accelerator)")
    parser.add_argument("--phases", nargs="+", default=list(PHASES), choices=PHASES)
    parser.add_argument("--out", type=Path, help=f"default: {RESULTS} (--quick: .quick.json)")
    args = parser.parse_args(argv)
    args.out = args.out or (RESULTS.with_suffix(".quick.json") if args.quick else RESULTS)
    sizes = args.sizes or ([1, 2] if args.quick else [1, 5, 8])
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 2)
    if min(sizes) < 1 or repeats < 0:
        parser.error("--sizes must be >= 1 and --repeats >= 0")

    config = load_run_config(args.preset)
    train = config.train
    chunk_steps, episodes = config.eval_every, config.eval_episodes
    fisher_steps = config.methods.ewc.fisher_steps
    if args.quick:
        chunk_steps = min(chunk_steps, 2 * train.ppo.rollout_size)
        episodes, fisher_steps = min(episodes, 8), min(fisher_steps, 512)
        if os.environ.get(ENV_VAR):
            enable_persistent_cache()
    new = Agent(args.env, train)
    old = Agent(args.env, train)
    old._train_env = LegacyAutoReset(old._train_env.env, train.ppo.num_envs)
    weights = sum(np.size(x) for x in jax.tree.leaves(new.policy.init(jax.random.key(0))))
    # --quick: 512^3 products (16 x 2048^3 is 275 GFLOP a call: 2 calls took 5-11 s)
    r_flop = matmul_rate(*[512 if args.quick else 2048] * 3, seconds=0.2 if args.quick else 2.0)
    r_env = env_rate(args.env)
    rows: list[dict] = []
    report = {"benchmark": "visit_program", "quick": args.quick, "machine": machine_info(),
              "versions": package_versions(VERSIONS), "device": str(jax.devices()[0]),
              "env_id": args.env, "preset": args.preset, "chunk_steps": chunk_steps,
              "iterations": chunk_steps // train.ppo.rollout_size, "eval_episodes": episodes,
              "fisher_steps": fisher_steps, "policy_weights": int(weights),
              "matmul_gflops": r_flop, "env_rate": r_env, "rows": rows}

    def write() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")

    def record(row: dict, result: dict, *, ppo_steps: int, eval_steps: int,
               flops: float) -> None:
        row.update(first_s=result["first_s"], s=result["s"], ppo_steps=ppo_steps,
                   eval_steps=eval_steps,
                   env_steps_per_s=(ppo_steps + eval_steps) / result["s"],
                   ppo_steps_per_s=ppo_steps / result["s"],
                   peak_memory_bytes=peak_memory_bytes())
        gap(row, flops=flops, env_steps=ppo_steps + eval_steps, r_flop=r_flop, r_env=r_env)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "out"}), file=sys.stderr)
        write()

    ppo_flops = (2 + 6 * train.ppo.epochs) * weights
    iterations = chunk_steps // train.ppo.rollout_size

    def measure_chunk(size: int, starts: list, states, keys) -> None:
        """The chunk: PPO iterations and the evaluation that ends them."""
        ppo_steps = size * chunk_steps

        def run_new():
            out, result = new.train_and_evaluate(states, chunk_steps, episodes=episodes,
                                                 keys=keys, features=False)
            return out, sum(int(e.lengths.sum()) for e in result.evaluations)

        def run_old():
            if size == 1:
                state, _ = old.train(starts[0], chunk_steps)
                params = [state.ppo.params]
            else:
                stacked, _ = train_batch(old, states, chunk_steps)
                params = [jax.tree.map(lambda x, i=i: x[i], stacked.ppo.params)
                          for i in range(size)]
            results = [old.evaluate(p, episodes, k) for p, k in zip(params, keys, strict=True)]
            return None, sum(int(r.lengths.sum()) for r in results)

        paths = [("new", new, run_new)] + ([] if args.new_only else [("old", old, run_old)])
        for path, agent, run in paths:
            compile_before = agent.compile_s
            result = timed(run, repeats)
            eval_steps = result["out"][1]
            row = {"phase": "chunk", "path": path, "seeds": size,
                   "compile_s": agent.compile_s - compile_before,
                   "iteration_s": result["s"] / iterations}
            record(row, result, ppo_steps=ppo_steps, eval_steps=eval_steps,
                   flops=ppo_steps * ppo_flops + eval_steps * 2 * weights)

    def measure_evaluate(size: int, states, keys) -> None:
        """The pre-evaluation: one population evaluation against seed after seed."""
        params = states.ppo.params
        result = timed(lambda: new.evaluate_batch(params, episodes, keys, features=False),
                       repeats)
        steps = sum(int(e.lengths.sum()) for e in result["out"])
        record({"phase": "evaluate", "path": "new", "seeds": size}, result, ppo_steps=0,
               eval_steps=steps, flops=steps * 2 * weights)
        if not args.new_only:
            result = timed(lambda: [old.evaluate(jax.tree.map(lambda x, i=i: x[i], params),
                                                 episodes, keys[i]) for i in range(size)],
                           repeats)
            record({"phase": "evaluate", "path": "old", "seeds": size}, result, ppo_steps=0,
                   eval_steps=steps, flops=steps * 2 * weights)

    def measure_fisher(size: int, starts: list, keys) -> None:
        """EWC's Fisher estimate at a task's end: each seed's `EWC.end_task` (one program
        per seed) against the host loop seed after seed."""
        ewc_config = config.model_copy(update={"methods": config.methods.model_copy(
            update={"ewc": config.methods.ewc.model_copy(
                update={"fisher_steps": fisher_steps})})})
        member_params = [s.ppo.params for s in starts]
        ctxs = [TaskContext(None, new, k, new.policy.init) for k in keys]

        def run_new():
            methods = [make_method("ewc", ewc_config) for _ in range(size)]
            return [method.end_task(method.init(p), start.ppo, ctx).parts
                    for method, p, start, ctx
                    in zip(methods, member_params, starts, ctxs, strict=True)]

        def run_old():
            return [legacy_fisher(old, p, fisher_steps, k)
                    for p, k in zip(member_params, keys, strict=True)]

        flops = size * fisher_steps * 8 * weights
        paths = [("new", run_new)] + ([] if args.new_only else [("old", run_old)])
        for path, run in paths:
            record({"phase": "fisher", "path": path, "seeds": size}, timed(run, repeats),
                   ppo_steps=0, eval_steps=size * fisher_steps, flops=flops)

    def measure_illumination(size: int, starts: list) -> None:
        """BuildArchive of every seed: seed after seed against the seeds in lockstep."""
        telapa = config.methods.telapa
        qd, latent = telapa.qd, telapa.latent
        if args.quick:
            ill = qd.illumination
            qd = qd.model_copy(update={"illumination": ill.model_copy(update={
                "iterations": min(ill.iterations, 6),
                "eval_episodes": min(ill.eval_episodes, 8)})})
        seeds = [dict(base_params=s.ppo.params, visit=0, tag=0,
                      embedding=EmbeddingState.create(jax.random.key(100 + i), latent),
                      latent_config=latent, qd_config=qd, key=jax.random.key(200 + i),
                      iterations=qd.illumination.iterations,
                      batch_size=qd.illumination.batch_size)
                 for i, s in enumerate(starts)]

        def run_new():
            runs = [Illumination(new, seed.pop("base_params"), **seed)
                    for seed in map(dict, seeds)]
            return [log.env_steps for _, log in illuminate_seeds(new, runs)]

        def run_old():
            return [illuminate(old, seed.pop("base_params"), **seed)[1].env_steps
                    for seed in map(dict, seeds)]

        paths = [("new", run_new)] + ([] if args.new_only else [("old", run_old)])
        for path, run in paths:
            result = timed(run, repeats)
            steps = sum(result["out"])
            record({"phase": "illumination", "path": path, "seeds": size,
                    "candidates": size * qd.illumination.iterations}, result,
                   ppo_steps=0, eval_steps=steps, flops=steps * 2 * weights)

    def measure_maintenance(size: int, starts: list) -> None:
        """The boundary update and refit of every seed: seed after seed against one
        vmapped update."""
        latent = config.methods.telapa.latent
        if args.quick:
            latent = latent.model_copy(update={
                "steps": min(latent.steps, 5), "min_bank_sets": min(latent.min_bank_sets, 4),
                "batch_size": min(latent.batch_size, 8),
                "min_anchors": min(latent.min_anchors, 2)})
        sets, per_set = latent.min_bank_sets, min(16, episodes)
        params = stack_states([s.ppo.params for s in starts])
        seeds, lengths = [], []
        for i in range(size):
            banks = EpisodeBanks.create(float16_codec(latent.feature_dim), episodes=per_set,
                                        t_max=latent.t_max)
            keys_i = jax.random.split(jax.random.key(300 + i), sets)
            member = jax.tree.map(lambda x, i=i: jnp.stack([x[i]] * sets), params)
            for j, result in enumerate(new.evaluate_batch(member, per_set, keys_i)):
                lengths.append(np.minimum(result.lengths, latent.t_max))
                banks = store(banks, result.features, result.lengths, result.sr, j,
                              anchor_threshold=0.0 if j % 3 == 0 else 1.01)
            seeds.append((EmbeddingState.create(jax.random.key(100 + i), latent), banks,
                          jax.random.key(400 + i)))

        # encoder FLOPs: 2 W per valid episode step forward, 3x that with the gradient;
        # per update step 3 B sequences (two views and the original), views 80% long on
        # average; the teacher embeds every bank episode once, the refit every set again
        enc_weights = sum(np.size(x) for x in jax.tree.leaves(seeds[0][0].encoder))
        mean_len = float(np.mean(np.concatenate(lengths)))
        per_seed = 2 * enc_weights * mean_len * (
            latent.steps * latent.batch_size * (2 * 0.8 + 1) * 3 + 2 * sets * per_set)
        flops = size * per_seed

        def run_new():
            out = maintain_seeds([e for e, _, _ in seeds], [b for _, b, _ in seeds],
                                 [{} for _ in seeds], config=latent,
                                 keys=[k for _, _, k in seeds])
            return [log.bank_sets for _, _, log in out]

        def run_old():
            return [maintain(e, b, {}, config=latent, key=k)[2].bank_sets
                    for e, b, k in seeds]

        paths = [("new", run_new)] + ([] if args.new_only else [("old", run_old)])
        for path, run in paths:
            result = timed(run, repeats)
            assert result["out"] == [sets] * size, result["out"]
            record({"phase": "maintenance", "path": path, "seeds": size,
                    "update_steps": latent.steps, "bank_sets": sets}, result,
                   ppo_steps=0, eval_steps=0, flops=flops)

    def measure(size: int) -> None:
        starts = [new.start(new.init_ppo(jax.random.key(s)), jax.random.key(1000 + s))
                  for s in range(size)]
        states = stack_states(starts)
        keys = jax.random.split(jax.random.key(7), size)
        if "chunk" in args.phases:
            measure_chunk(size, starts, states, keys)
        if "evaluate" in args.phases:
            measure_evaluate(size, states, keys)
        if "fisher" in args.phases:
            measure_fisher(size, starts, keys)
        if "illumination" in args.phases:
            measure_illumination(size, starts)
        if "maintenance" in args.phases:
            measure_maintenance(size, starts)

    for size in sizes:
        measure(size)
    write()
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
