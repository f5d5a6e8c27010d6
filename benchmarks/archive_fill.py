"""How full an archive gets at the paper's settings: train a base policy on one task, then
illuminate it (BuildArchive: 1000 candidates x 50 episodes) and report the archive it
leaves. The size control should settle near N* = 256 (capacity 384) wherever the task's
behaviour space allows it (paper App. "MAP-Elites": "kept close to" the target).

1. PPO (the paper run preset's network and hyperparameters) trains from scratch in
   chunks of ``--eval-every`` env steps, evaluating 50 episodes after each, until
   ``--train-steps`` (about 2M) or SR >= ``--sr-target`` (0.9).
2. As TeLAPA does before its first archive: every evaluation's episodes are banked, the
   embedder E_0 is drawn from the seed and the normalizer N_0 is fit on the banked sets
   (`fit_initial_normalizer`), so descriptors are in the units every archive uses.
3. Illumination around the trained policy (paper: 1000 candidates of 50 episodes, batch 1,
   the sequential loop), then one JSON line:

       {"env", "seed", "archive_size", "d_min", "fitness_range", "sr_range", "candidates",
        "wall_s", ...}

``wall_s`` is the illumination's wall time; ``train_*`` describe step 1; ``outcomes``
counts the insertion statuses; ``mutant_distance_median`` is the median distance of the
competent candidates to their nearest elite (what the size control adapts to).

    python benchmarks/archive_fill.py --env MiniGrid-DoorKey-8x8-v0 --seed 0 --json
    python benchmarks/archive_fill.py --env MiniGrid-Empty-5x5-v0 --quick --json   # smoke
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import numpy as np

from telapa.continual.methods.telapa.banks import EpisodeBanks, store
from telapa.continual.methods.telapa.embedding import EmbeddingState
from telapa.continual.methods.telapa.illumination import illuminate
from telapa.continual.methods.telapa.maintenance import fit_initial_normalizer
from telapa.continual.methods.telapa.method import BANK_EPISODES
from telapa.continual.preset import load_run_config
from telapa.qd import InsertStatus, float16_codec
from telapa.rl import PPOTrainer


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help="env id, e.g. MiniGrid-DoorKey-8x8-v0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-steps", type=int, default=2_000_000)
    parser.add_argument("--eval-every", type=int, default=250_000)
    parser.add_argument("--sr-target", type=float, default=0.9)
    parser.add_argument("--batch-size", type=int, default=1,
                        help="illumination batch (1 = the paper's sequential loop)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 100k training steps, 48 candidates of 10 episodes")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args(argv)
    if args.seed < 0 or args.train_steps < 1 or args.eval_every < 1:
        parser.error("--seed must be >= 0, --train-steps and --eval-every >= 1")

    config = load_run_config("paper")
    qd, latent = config.methods.telapa.qd, config.methods.telapa.latent
    episodes = config.eval_episodes
    if args.quick:
        qd = qd.model_copy(update={"illumination": qd.illumination.model_copy(
            update={"iterations": 48, "eval_episodes": 10})})
        args.train_steps, args.eval_every, episodes = 100_000, 50_000, 10
    ill = qd.illumination
    key = jax.random.key(args.seed)
    k_train, k_eval, k_embed, k_norm, k_ill = jax.random.split(key, 5)

    trainer = PPOTrainer(args.env, config.train, key=k_train)
    banks = EpisodeBanks.create(float16_codec(latent.feature_dim),
                                episodes=min(BANK_EPISODES, episodes), t_max=latent.t_max)
    start = time.perf_counter()
    evaluations = []
    while True:
        result = trainer.evaluate(episodes=episodes,
                                  key=jax.random.fold_in(k_eval, len(evaluations)))
        banks = store(banks, result.features, result.lengths, result.sr, 0,
                      anchor_threshold=latent.anchor_sr_threshold)
        evaluations.append({"steps": trainer.steps, "sr": result.sr})
        log(f"{args.env}: {trainer.steps:,} steps, SR {result.sr:.2f}")
        if result.sr >= args.sr_target or trainer.steps >= args.train_steps:
            break
        trainer.train(min(args.eval_every, args.train_steps - trainer.steps))
    train_wall = time.perf_counter() - start

    embedding = EmbeddingState.create(k_embed, latent)
    embedding = fit_initial_normalizer(embedding, banks, config=latent, key=k_norm)
    log(f"illumination: {ill.iterations} candidates x {ill.eval_episodes} episodes, "
        f"batch {args.batch_size}")
    last = [0.0]

    def progress(done: int, total: int, size: int) -> None:
        if time.perf_counter() - last[0] > 30 or done == total:
            last[0] = time.perf_counter()
            log(f"  {done}/{total} candidates, archive {size}")

    archive, ilog = illuminate(
        trainer.agent, trainer.params, visit=0, tag=0, embedding=embedding,
        latent_config=latent, qd_config=qd, key=k_ill, iterations=ill.iterations,
        batch_size=args.batch_size, progress=progress,
    )
    slots = np.flatnonzero(np.asarray(archive.valid))  # the valid slots, ascending
    fitness = np.asarray(archive.elites.fitness)[slots]
    sr = np.asarray(archive.elites.sr)[slots]
    col = ilog.columns()
    competent = col["status"] != int(InsertStatus.REJECTED_GATE)
    out = {
        "benchmark": "archive_fill", "env": args.env, "seed": args.seed, "quick": args.quick,
        "archive_size": int(archive.size), "target_size": archive.spec.target_size,
        "capacity": archive.spec.capacity, "d_min": float(archive.d_min),
        "fitness_range": [float(fitness.min()), float(fitness.max())],
        "sr_range": [float(sr.min()), float(sr.max())],
        "candidates": ill.iterations, "eval_episodes": ill.eval_episodes,
        "batch_size": args.batch_size, "wall_s": ilog.wall_s, "env_steps": ilog.env_steps,
        "gate": ilog.gate, "base_sr": ilog.base.sr, "base_fitness": ilog.base.fitness,
        "outcomes": {s.name.lower(): int(np.sum(col["status"] == int(s)))
                     for s in InsertStatus},
        "mutant_distance_median": (float(np.median(col["distance"][competent]))
                                   if competent.any() else None),
        "size_after": {str(k): int(col["archive_size"][k - 1])
                       for k in (100, 250, 500, 750, 1000) if k <= len(col["archive_size"])},
        "activation": config.train.network.activation,
        "train_steps": trainer.steps, "train_sr": evaluations[-1]["sr"],
        "train_wall_s": train_wall, "evaluations": evaluations,
        "devices": [str(d) for d in jax.devices()],
    }
    if args.json:
        print(json.dumps(out), flush=True)
    else:
        log(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
