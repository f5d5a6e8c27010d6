"""Evaluates the final policy of every run of the baseline-diagnosis sweep (Scratch on A or
B alone, the mission shown or hidden) both ways a paper could have: sampled from the
policy (ours) and greedy (argmax, SB3's ``evaluate_policy`` default), on the same fresh
episodes (docs/reproduction.md, "Why the paper's baselines differ from ours").

    python experiments/baseline-diagnosis/evaluate.py runs/baseline-diagnosis \
        --out results/baseline-diagnosis-eval.csv

One row per run: curriculum, task, mission, seed, the visit's own last evaluation
(``post_sr``, sampled, 50 episodes) and ``sampled_sr`` / ``greedy_sr`` over
``--episodes`` episodes drawn from key ``EVAL_KEY + seed`` (the same episodes for both);
then the mean over seeds per task and mission, printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import pandas as pd

from telapa.continual.runner import ContinualRun
from telapa.continual.sweep import expand_sweep_dirs

EVAL_KEY = 10_000
"""Evaluation episodes of seed s: ``jax.random.key(EVAL_KEY + s)`` (no run uses these)."""


def evaluate_run(path: Path, episodes: int) -> dict[str, object]:
    """The row of one finished single-visit run."""
    run = ContinualRun.resume(path)
    try:
        if run.next_phase < len(run.phases):
            raise SystemExit(f"error: {path} has not finished ({run.next_phase} of "
                             f"{len(run.phases)} phases); finish the sweep first")
        visit = run.visits[0]
        agent, params = run.agent(visit), run.learner.params
        key = jax.random.key(EVAL_KEY + run.spec.seed)
        sampled = agent.evaluate(params, episodes, key, deterministic=False)
        greedy = agent.evaluate(params, episodes, key, deterministic=True)
        post = run.dir.read_table("visits", columns=("post_sr",))["post_sr"].iloc[0]
        return {"curriculum": run.spec.curriculum.name, "task": visit.env_id,
                "mission": "hidden" if visit.options.get("observe_mission") is False
                else "shown", "seed": run.spec.seed, "post_sr": float(post),
                "sampled_sr": float(sampled.sr), "greedy_sr": float(greedy.sr),
                "episodes": episodes}
    finally:
        run.dir.unlock()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run or sweep directories")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--out", type=Path, required=True, help="CSV to write (new file)")
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"--out {args.out} exists; choose another file")
    rows = []
    paths = expand_sweep_dirs(args.runs)
    for i, path in enumerate(paths, start=1):
        rows.append(evaluate_run(Path(path), args.episodes))
        print(f"[{i}/{len(paths)}] {path}: {rows[-1]}", file=sys.stderr, flush=True)
    frame = pd.DataFrame(rows).sort_values(["task", "mission", "seed"])
    frame.to_csv(args.out, index=False)
    summary = frame.groupby(["task", "mission"])[["post_sr", "sampled_sr", "greedy_sr"]]
    print(summary.mean().round(3).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
