"""TeLAPA's method phases at paper settings on one MiniGrid task: wall time, env steps and
peak RSS of illumination, few-shot origin selection and latent-space maintenance, beside
the cost per visit implied by the paper's runtime table; and candidate-evaluation
throughput against Farama MiniGrid stepped in Python (the DESIGN bar: >= 100x).

1. PPO trains a policy on the task (the illumination's base policy theta_t).
2. Candidate evaluation: B mutated copies of it, 50 episodes each with features, through
   `evaluate_population` (jax backend) at each batch size; references: the same policy
   evaluated on Farama's own env (gymnasium backend: Python stepping, jitted policy), and
   Farama stepped alone with random actions (no policy at all: an upper bound for any
   evaluator that steps Farama in Python). Env steps/s.
3. Illumination (BuildArchive, paper settings: 1000 candidates x 50 episodes, T 256) at
   batch size 1 (the paper's sequential loop) and at a larger batch, under the encoder
   with N_0 fit first on one visit's banked evaluations, as TeLAPA does before its first
   archive (`maintenance.fit_initial_normalizer`; timed as ``normalizer_fit``).
4. Few-shot origin selection over a library of five archives (the illuminated archive
   under five tags, as at the last boundary of the primary curriculum): K_pool 8 probes
   of 200k PPO steps with 5 evaluation points of 20 episodes.
5. Maintenance: banks holding 220 episode sets (about 22 evaluations per visit over ten
   visits), 700 Adam steps, normalizer refit and re-embedding of five full archives: the
   archive target size (256) of elites, each with its 50 stored episodes (mutants of the
   policy evaluated as in 2), as TeLAPA's archives hold late in a run (``--quick``: 64
   elites, 32 distinct mutants repeated, 50 Adam steps).

Paper (App. "Compute and Memory Overhead", Table "Breakdown of TeLAPA's runtime"): per
seed of ten visits, illumination 2.99 h, few-shot selection 2.23 h, maintenance 2.57 h,
i.e. 1076 s, 803 s and 925 s per visit; 53.33 GB peak RAM for the whole run.

    python benchmarks/telapa_phases.py            # paper settings (about 20 min on 2 cores)
    python benchmarks/telapa_phases.py --quick    # smoke run (a few minutes)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from env_throughput import FULL, QUICK, farama_throughput
from machine import machine_info

from telapa.continual.methods.telapa.banks import EpisodeBanks, fit_episodes, store
from telapa.continual.methods.telapa.embedding import EmbeddingState
from telapa.continual.methods.telapa.illumination import (
    PopulationEval,
    evaluate_population,
    illuminate,
)
from telapa.continual.methods.telapa.maintenance import fit_initial_normalizer, maintain
from telapa.continual.methods.telapa.transfer import select_transfer_origin
from telapa.continual.preset import load_run_config
from telapa.io import MemoryMonitor, write_json_atomic
from telapa.qd import float16_codec
from telapa.qd.archive import Archive
from telapa.qd.trajectories import Trajectories
from telapa.rl import PPOTrainer
from telapa.rl.networks import flatten_params

RESULTS = Path(__file__).resolve().parent / "results" / "telapa_phases.json"
PAPER_PER_VISIT_S = {"illumination": 2.99 * 3600 / 10, "few_shot": 2.23 * 3600 / 10,
                     "maintenance": 2.57 * 3600 / 10}
LIBRARY = 5
"""Archives in the library at the last boundary of the primary curriculum (A..E)."""
BANK_SETS = 220
VISITS = 10
"""Visits of the primary curriculum (the bank holds about BANK_SETS / VISITS sets each)."""


def measured(fn: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """``fn()`` with its wall time and the RSS before it and at its peak (sampled)."""
    with MemoryMonitor(interval_s=0.05, lifetime=False) as memory:
        before = memory.current_bytes()
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        wall = time.perf_counter() - start
    return out, {"wall_s": wall, "rss_before_GB": before / 1e9,
                 "peak_rss_GB": memory.peak_bytes / 1e9}


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def filled(archive: Archive, population: jax.Array, ev: PopulationEval, elites: int,
           key: jax.Array) -> Archive:
    """``archive`` with its first ``elites`` slots holding the members of ``population``
    (B, P), repeated in order when B < elites, with their evaluations ``ev`` (fitness,
    SR and stored episodes) and random descriptors (maintenance re-embeds them)."""
    idx = jnp.arange(elites) % population.shape[0]
    traj = archive.traj
    m, t = traj.lengths.shape[1], traj.u8.shape[2]
    f, n = jax.vmap(lambda f, n: fit_episodes(f, n, m, t))(ev.features[idx], ev.lengths[idx])
    slots = jnp.arange(elites)
    rows = Trajectories.encode(traj.codec, f, n)
    el = archive.elites
    el = el.replace(
        params=el.params.at[slots].set(population[idx]),
        fitness=el.fitness.at[slots].set(ev.fitness[idx]),
        sr=el.sr.at[slots].set(ev.sr[idx]),
        descriptor=el.descriptor.at[slots].set(
            jax.random.normal(key, (elites, el.descriptor.shape[1]))),
        elite_id=el.elite_id.at[slots].set(slots),
    )
    return archive.replace(
        elites=el, valid=archive.valid.at[slots].set(True),
        traj=jax.tree.map(lambda a, r: a.at[slots].set(r), traj, rows))


def candidate_throughput(agent, params, unravel, batch: int, episodes: int, t_max: int,
                         repeats: int) -> dict:
    """Env steps/s of `evaluate_population` on ``batch`` mutated copies of ``params``."""
    noise = jax.random.normal(jax.random.key(1), (batch, params.shape[0])) * 0.02
    population = params[None] + noise
    evaluate_population(agent, population, unravel, episodes=episodes, key=jax.random.key(0),
                        t_max=t_max)  # compile
    steps, start = 0, time.perf_counter()
    for r in range(repeats):
        ev = evaluate_population(agent, population, unravel, episodes=episodes,
                                 key=jax.random.key(10 + r), t_max=t_max)
        steps += ev.env_steps
    seconds = time.perf_counter() - start
    return {"name": "port", "batch": batch, "episodes": episodes, "steps": steps,
            "seconds": seconds, "steps_per_s": steps / seconds,
            "candidates_per_s": batch * repeats / seconds}


def farama_policy_throughput(env_id: str, config, params, episodes: int, repeats: int) -> dict:
    """The same policy evaluated on Farama's env, stepped in Python (gymnasium backend)."""
    trainer = PPOTrainer(env_id, config, key=0, backend="gymnasium")
    trainer.evaluate(params, episodes=2, key=jax.random.key(0))  # compile the policy
    steps, start = 0, time.perf_counter()
    for r in range(repeats):
        steps += int(trainer.evaluate(params, episodes=episodes,
                                      key=jax.random.key(10 + r)).lengths.sum())
    seconds = time.perf_counter() - start
    return {"name": "farama-policy", "batch": 1, "episodes": episodes, "steps": steps,
            "seconds": seconds, "steps_per_s": steps / seconds,
            "candidates_per_s": repeats / seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="MiniGrid-DoorKey-8x8-v0")
    parser.add_argument("--train-steps", type=int, default=2_000_000)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32, 128],
                        help="candidate-evaluation batch sizes")
    parser.add_argument("--illumination-batch", type=int, default=32,
                        help="the batched illumination run (besides batch 1)")
    parser.add_argument("--quick", action="store_true", help="small budgets (smoke run)")
    parser.add_argument("--out", type=Path, help=f"default: {RESULTS} (--quick: .quick.json)")
    args = parser.parse_args(argv)
    args.out = args.out or (RESULTS.with_suffix(".quick.json") if args.quick else RESULTS)

    config = load_run_config("paper")
    qd, latent = config.methods.telapa.qd, config.methods.telapa.latent
    if args.quick:
        qd = qd.model_copy(update={
            "illumination": qd.illumination.model_copy(update={"iterations": 32}),
            "transfer": qd.transfer.model_copy(update={"k_pool": 2, "probe_steps": 20_000}),
        })
        latent = latent.model_copy(update={"steps": 50})
        args.train_steps = min(args.train_steps, 200_000)
    ill = qd.illumination
    results: dict[str, Any] = {
        "benchmark": "telapa_phases", "env": args.env, "quick": args.quick,
        "settings": {"illumination": ill.model_dump(), "transfer": qd.transfer.model_dump(),
                     "latent": latent.model_dump(), "library_archives": LIBRARY,
                     "bank_sets": BANK_SETS},
        "machine": machine_info(), "phases": {}, "evaluation": [],
    }

    def save() -> None:
        """Writes what is measured so far (a later phase failing keeps the earlier ones)."""
        results["process_peak_rss_GB"] = MemoryMonitor().peak_bytes / 1e9
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(args.out, results)

    log(f"training PPO on {args.env} for {args.train_steps:,} steps")
    trainer = PPOTrainer(args.env, config.train, key=0)
    _, cost = measured(lambda: trainer.train(args.train_steps))
    base = trainer.params
    sr = trainer.evaluate(base, episodes=ill.eval_episodes, key=jax.random.key(2)).sr
    results["ppo"] = {"steps": trainer.steps, "sr": sr, **cost}
    log(f"PPO: SR {sr:.2f} in {cost['wall_s']:.0f} s")
    save()

    flat, unravel = flatten_params(base)
    repeats = 2 if args.quick else 5
    farama = farama_policy_throughput(args.env, config.train, base, ill.eval_episodes, repeats)
    raw = {"name": "farama-raw", **farama_throughput(args.env, QUICK if args.quick else FULL)}
    results["evaluation"] += [farama, raw]
    log(f"Farama: {farama['steps_per_s']:,.0f} steps/s evaluating the policy, "
        f"{raw['steps_per_s']:,.0f} stepped alone (random actions)")
    for batch in args.batch_sizes:
        r = candidate_throughput(trainer.agent, flat, unravel, batch, ill.eval_episodes,
                                 latent.t_max, repeats)
        r["ratio_vs_farama"] = r["steps_per_s"] / farama["steps_per_s"]
        r["ratio_vs_farama_raw"] = r["steps_per_s"] / raw["steps_per_s"]
        results["evaluation"].append(r)
        log(f"port @{batch}: {r['steps_per_s']:,.0f} steps/s ({r['ratio_vs_farama']:.0f}x "
            f"Farama evaluating, {r['ratio_vs_farama_raw']:.0f}x Farama alone; "
            f"{r['candidates_per_s']:.1f} candidates/s)")
        save()

    log(f"banks: {BANK_SETS} episode sets of mutants")
    banks = EpisodeBanks.create(float16_codec(latent.feature_dim), episodes=16,
                                t_max=latent.t_max)
    noise = jax.random.normal(jax.random.key(5), (BANK_SETS // 10, flat.shape[0]))
    sets = evaluate_population(
        trainer.agent, flat[None] + 0.02 * noise, unravel, episodes=ill.eval_episodes,
        key=jax.random.key(6), t_max=latent.t_max)
    first_visit = None
    for i in range(BANK_SETS):
        j = i % sets.sr.shape[0]
        banks = store(banks, sets.features[j], sets.lengths[j], float(sets.sr[j]), i // 22,
                      anchor_threshold=latent.anchor_sr_threshold)
        if i + 1 == BANK_SETS // VISITS:
            first_visit = banks

    embedding = EmbeddingState.create(jax.random.key(0), latent)
    embedding, cost = measured(lambda: fit_initial_normalizer(
        embedding, first_visit, config=latent, key=jax.random.key(8)))
    results["phases"]["normalizer_fit"] = {**cost, "bank_sets": BANK_SETS // VISITS}
    log(f"N_0 fit on {BANK_SETS // VISITS} sets: {cost['wall_s']:.1f} s")
    archive = None
    for batch in sorted({1, args.illumination_batch}):
        log(f"illumination: {ill.iterations} candidates at batch {batch}")

        def run(batch=batch):
            return illuminate(trainer.agent, base, visit=0, tag=0, embedding=embedding,
                              latent_config=latent, qd_config=qd, key=jax.random.key(3),
                              iterations=ill.iterations, batch_size=batch)

        (archive, ilog), cost = measured(run)
        results["phases"][f"illumination_b{batch}"] = {
            **cost, "env_steps": ilog.env_steps, "archive_size": int(archive.size),
            "candidates": ill.iterations, "batch_size": batch,
            "paper_s": PAPER_PER_VISIT_S["illumination"],
        }
        log(f"  {cost['wall_s']:.0f} s, archive {int(archive.size)}, "
            f"peak RSS {cost['peak_rss_GB']:.2f} GB")
        save()

    library = [archive.replace(tag=jax.numpy.int32(i)) for i in range(LIBRARY)]
    log(f"few-shot selection: {qd.transfer.k_pool} probes of {qd.transfer.probe_steps:,} steps")
    choice, cost = measured(lambda: select_transfer_origin(
        trainer.agent, library, config=qd.transfer, key=jax.random.key(4),
        rollout_key=jax.random.key(5)))
    results["phases"]["few_shot"] = {**cost, "env_steps": choice.env_steps,
                                     "candidates": len(choice.candidates),
                                     "paper_s": PAPER_PER_VISIT_S["few_shot"]}
    log(f"  {cost['wall_s']:.0f} s, {choice.env_steps:,} env steps")
    save()

    elites = 64 if args.quick else qd.archive.target_size
    mutants = 32 if args.quick else elites
    log(f"full archives: {elites} elites ({mutants} distinct mutants) x "
        f"{ill.eval_episodes} episodes")
    population = flat[None] + 0.02 * jax.random.normal(jax.random.key(9),
                                                       (mutants, flat.shape[0]))
    ev = evaluate_population(trainer.agent, population, unravel, episodes=ill.eval_episodes,
                             key=jax.random.key(10), t_max=latent.t_max)
    named = {f"task-{i}": filled(a, population, ev, elites, jax.random.key(11 + i))
             for i, a in enumerate(library)}
    results["maintenance_archives"] = {
        "archives": LIBRARY, "elites": elites, "distinct_mutants": mutants,
        "episodes": ill.eval_episodes,
        "mean_episode_length": float(jnp.mean(ev.lengths)),
        "bank_mean_episode_length": float(jnp.mean(sets.lengths))}
    log(f"maintenance: {BANK_SETS} bank sets, {latent.steps} steps, {LIBRARY} archives "
        f"of {elites} elites")
    for run in ("cold", "warm"):  # the first call compiles; later boundaries reuse it
        (_, _, mlog), cost = measured(lambda: maintain(embedding, banks, named, config=latent,
                                                       key=jax.random.key(7)))
        results["phases"][f"maintenance_{run}"] = {
            **cost, "updated": mlog.updated, "bank_sets": mlog.bank_sets,
            "reembedded": sum(a.reembedded for a in mlog.archives.values()),
            "seconds": mlog.seconds, "paper_s": PAPER_PER_VISIT_S["maintenance"]}
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in mlog.seconds.items())
        log(f"  {run}: {cost['wall_s']:.0f} s ({parts}), peak RSS "
            f"{cost['peak_rss_GB']:.2f} GB")
        save()

    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
