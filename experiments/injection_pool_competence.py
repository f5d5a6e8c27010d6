"""How competent the elite-injection pool of a TeLAPA run is on the task it is injected into.

With cross-archive elite injection (p_inj > 0) a parent of illumination is sometimes an
elite of another task's archive (the pool). Its child enters the archive only if its
success rate reaches the visit's competence gate g (``method_log.json``'s illumination
event). This script evaluates the pool elites themselves on the visit's task, each for m
episodes (illumination's m, the run's ``qd.illumination.eval_episodes``), and writes one
row per elite: the visit, its task, the elite's own task and id, its successes k of m
episodes (a MiniGrid success is a positive return; counts, never a float rate) and the
gate as the exact count k_g = ceil(g m - 1e-6) a child needs.

The pool is rebuilt from the run's final checkpoint: the elites of the other tasks'
archives made on an earlier visit (an elite replaced since is gone, so the pool is a
subset of what the visit drew from). Reads a finished run directory with its checkpoint
(a sweep's cell, not an export) without writing in it:

    .venv/bin/python experiments/injection_pool_competence.py \
        "runs/elite-injection-paper/cells/primary-telapa-p_inj=0.1-s0" 1 2 5 6 7 \
        > results/elite-injection-paper-pool-competence.csv
"""

from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np

from telapa.continual.methods.telapa.illumination import evaluate_population
from telapa.play import open_finished
from telapa.rl.networks import flatten_params

BATCH = 64
"""Elites evaluated per call."""


def main(run_path: str, visits: list[int]) -> None:
    run = open_finished(run_path)
    archives = run.method.archives(run.state.method)
    _, unravel = flatten_params(run.state.learner.params)
    gates = {e["visit"]: e["gate"] for e in run.dir.method_log()
             if e.get("event") == "illumination"}
    episodes = run.spec.config.methods.telapa.qd.illumination.eval_episodes
    by_index = {v.index: v for v in run.visits}
    print("visit,task,elite_task,elite_id,successes,episodes,gate_successes")
    for index in visits:
        visit = by_index[index]
        rows = [(task, int(slot)) for task, archive in archives.items()
                if task != visit.task
                for slot in np.flatnonzero(np.asarray(archive.valid)
                                           & (np.asarray(archive.elites.task) < index))]
        if not rows:
            continue
        params = jnp.stack([archives[t].elites.params[s] for t, s in rows])
        agent = run.agent(visit)
        key = jax.random.fold_in(jax.random.key(20261205), index)
        wins = np.concatenate([
            np.asarray((evaluate_population(agent, params[i:i + BATCH], unravel,
                                            episodes=episodes,
                                            key=jax.random.fold_in(key, i)).returns > 0)
                       .sum(-1))
            for i in range(0, len(rows), BATCH)])
        needed = math.ceil(gates[index] * episodes - 1e-6)
        for (task, slot), k in zip(rows, wins, strict=True):
            elite_id = int(archives[task].elites.elite_id[slot])
            print(f"{index},{visit.task},{task},{elite_id},{int(k)},{episodes},{needed}")
        print(f"visit {index} ({visit.task}): {len(rows)} pool elites, "
              f"{int((wins >= needed).sum())} at the gate ({needed}/{episodes}), "
              f"best {int(wins.max())}/{episodes}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], [int(v) for v in sys.argv[2:]])
