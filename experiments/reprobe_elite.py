"""Probe a transfer's chosen elite again under other training-episode keys.

For a finished TeLAPA run made by the code of `results/alternative-curricula-paper.commit`
(run it with that worktree's ``src`` on ``PYTHONPATH``), finds the elite ``ELITE_ID`` in
the run's final archives and runs `probe` (the few-shot probe of FewShotSelectElite, 200k
steps, 5 points, 20 evaluation episodes) from its archived weights on visit ``VISIT``'s
task: with the run's probe key, with the visit's own training-episodes key (so the first
steps of the visit itself, from a fresh optimizer as the visit starts) and with ``N``
other keys. Works on a copy of the run directory; the run is not touched.

    PYTHONPATH=../worktrees/alternative-curricula-paper-82c4dde/src \
        .venv/bin/python experiments/reprobe_elite.py \
        runs/alternative-curricula-paper/cells/scrambled-telapa-s0 6 50331672 16
"""

import pathlib
import shutil
import sys
import tempfile
import time

import jax
import numpy as np

from telapa.continual.methods.telapa.transfer import probe
from telapa.continual.runner import ContinualRun
from telapa.rl.agent import episodes_key
from telapa.rl.networks import flatten_params


def main(run_dir: str, visit_index: int, elite_id: int, others: int, steps: int = 200_000) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / pathlib.Path(run_dir).name
        shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("tb", "train"))
        run = ContinualRun.resume(copy)
        visit = run.visits[visit_index]
        agent = run.agent(visit)
        _, unravel = flatten_params(agent.policy.init(jax.random.key(0)))
        found = [
            (task, int(row))
            for task, archive in run.method.archives.items()
            for row in np.nonzero(np.asarray(archive.elites.elite_id) == elite_id)[0]
        ]
        if not found:
            sys.exit(f"error: elite {elite_id} is not in the final archives of {run_dir}")
        task, row = found[0]
        params = unravel(run.method.archives[task].elites.params[row])
        ctx = run._context(visit, agent, "start")  # what the visit's transfer saw
        start_key = ctx.key
        keys = {
            "probe's": run.method._probe_rollout_key(ctx),
            "visit's": run._episodes_key(visit),
        }
        keys |= {
            f"other{i}": episodes_key(jax.random.fold_in(start_key, 100 + i)) for i in range(others)
        }
        print(
            f"elite {elite_id} (archive of {task}, slot {row}) on visit {visit.tag} "
            f"({visit.env_id}), {steps} probe steps",
            flush=True,
        )
        for name, rollout_key in keys.items():
            t = time.perf_counter()
            curve, _ = probe(
                agent,
                params,
                steps=steps,
                points=5,
                episodes=20,
                key=start_key,
                rollout_key=rollout_key,
            )
            print(
                f"{name:8s} SR at 0, 50k, 100k, 150k, 200k steps: {np.round(curve, 2)} "
                f"({time.perf_counter() - t:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
