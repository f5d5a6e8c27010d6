"""The phases of one run or of the seeds of a batch, each run for all of them together.

A phase takes the runs (seeds of one method, curriculum and settings: one alone, or a
`telapa.continual.batch.SeedBatch`'s) that stand at it:

* `start_visit`: the method's per-seed start hooks in lockstep
  (`telapa.continual.lockstep.run_hooks`), new training episodes, the pre-evaluation;
* `train_chunk`: on the jax backend a chunk as one program (`Agent.train_and_evaluate`:
  the chunk's PPO iterations as one ``lax.scan`` ``vmap``ped over the runs, then one
  population evaluation); on a host backend (gymnasium, native) PPO on the host-stepped
  envs, then an evaluation, run after run;
* `end_visit`: the method's per-seed end hooks in lockstep, the visit's training table;
* `final_evaluation`: every task evaluated with each run's ``eval_params``.

Evaluations are one population evaluation (`Agent.evaluate_batch`). ``size`` pads the
runs to the batch's size (copies of the first, results discarded), so that a batch whose
seeds lag after a resume runs the programs it has compiled. The elapsed time is shared
equally among the runs' timers. What a phase reads and writes of a run is `PhaseRun`
(`telapa.continual.runner.ContinualRun` is one).
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import pandas as pd

from telapa.continual.curriculum import Visit
from telapa.continual.lockstep import run_hooks
from telapa.continual.methods import Method, TaskContext
from telapa.continual.progress import Progress
from telapa.continual.rundir import RunDir
from telapa.continual.spec import Phase, RunSpec
from telapa.continual.tracking import RunTracker
from telapa.continual.trainlog import TRAIN_COLUMNS, visit_start
from telapa.io import PhaseTimer
from telapa.rl.agent import Agent, Metrics, TrainState, stack_states, unstack_states
from telapa.rl.evaluate import EvalResult
from telapa.rl.ppo import PPOState


class RunError(RuntimeError):
    """A run stopped (NaN, env failure): the message names the phase, task and step."""


class PhaseRun(Protocol):
    """What a phase reads and writes of a run (`telapa.continual.runner.ContinualRun`)."""

    spec: RunSpec
    visits: list[Visit]
    method: Method
    dir: RunDir
    progress: Progress
    tracker: RunTracker
    timer: PhaseTimer
    learner: PPOState
    train_state: TrainState | None
    train_rows: list[dict[str, Any]]
    records: dict[str, list[dict[str, Any]]]
    global_step: int

    def agent(self, visit: Visit) -> Agent: ...
    def context(self, visit: Visit, agent: Agent, purpose: str) -> TaskContext: ...
    def visit_key(self, visit: int, purpose: str, index: int = 0) -> jax.Array: ...
    def episodes_key(self, visit: Visit) -> jax.Array: ...
    def eval_key(self, phase: Phase) -> jax.Array: ...
    def chunk_steps(self, phase: Phase) -> int: ...
    def on_progress(self, done: int, metrics: list[Metrics]) -> None: ...
    def record_start(self, visit: Visit, result: EvalResult) -> None: ...
    def finish_chunk(self, phase: Phase, state: TrainState, history: list[Metrics],
                     result: EvalResult) -> None: ...
    def final_tasks(self) -> list[tuple[str, Visit, jax.Array]]: ...


def _share(runs: list[PhaseRun], phase: str, start: float) -> None:
    share = (time.perf_counter() - start) / len(runs)
    for run in runs:
        run.timer.add(phase, share)


def _evaluate(agent: Agent, params: list[Any], episodes: int, keys: list[jax.Array],
              size: int | None, features: bool) -> list[EvalResult]:
    """One population evaluation of every run's ``params`` with its key, padded."""
    padding = (size or len(params)) - len(params)
    results = agent.evaluate_batch(stack_states(params + [params[0]] * padding), episodes,
                                   jnp.stack(keys + [keys[0]] * padding), features=features)
    return results[:len(params)]


def start_visit(runs: list[PhaseRun], phase: Phase, size: int | None = None) -> None:
    """The ``start`` phase: the method's start hooks, new training episodes, and the
    pre-evaluation (step 0) of every run."""
    lead = runs[0]
    visit = lead.visits[phase.visit]
    agent = lead.agent(visit)
    for run in runs:
        run.progress.visit(visit, run.spec.budget(visit), 0)
    start = time.perf_counter()
    learners = run_hooks(
        [partial(run.method.start_task, run.learner, run.context(visit, agent, "start"))
         for run in runs], [run.method.timer for run in runs])
    _share(runs, "method", start)
    for run, learner in zip(runs, learners, strict=True):
        run.learner = learner
        run.train_state = agent.start(learner, run.episodes_key(visit))
        run.train_rows = []
        run.dir.save_policy(visit.index, learner.params, "start")
    start = time.perf_counter()
    results = _evaluate(agent, [run.learner.params for run in runs],
                        lead.spec.config.eval_episodes,
                        [run.visit_key(visit.index, "eval", 0) for run in runs], size,
                        features=lead.method.observes_features)
    _share(runs, "eval", start)
    for run, result in zip(runs, results, strict=True):
        run.record_start(visit, result)


def train_chunk(runs: list[PhaseRun], phase: Phase, size: int | None = None) -> None:
    """A ``chunk`` phase. On the jax backend every run's `TrainState` stacked, trained
    and evaluated with its evaluation key as one `Agent.train_and_evaluate` program,
    then each run's `ContinualRun.finish_chunk`; raises `BatchMemberError` (the position
    in ``runs``) on a non-finite loss. On a host backend, `_host_chunk`."""
    lead = runs[0]
    if lead.spec.curriculum.backend != "jax":
        _host_chunk(runs, phase)
        return
    visit = lead.visits[phase.visit]
    agent = lead.agent(visit)
    steps = {run.chunk_steps(phase) for run in runs}
    if len(steps) != 1:  # pragma: no cover - same phase, same budget
        raise RunError(f"{phase.describe(lead.visits)}: seeds disagree on the steps")
    padding = (size or len(runs)) - len(runs)
    states = stack_states([run.train_state for run in runs] + [lead.train_state] * padding)
    keys = jnp.stack([run.eval_key(phase) for run in runs] + [lead.eval_key(phase)] * padding)
    start = time.perf_counter()
    states, result = agent.train_and_evaluate(
        states, steps.pop(), episodes=lead.spec.config.eval_episodes, keys=keys,
        features=lead.method.observes_features,
        progress=lambda done, rows: [run.on_progress(done, r)
                                     for run, r in zip(runs, rows, strict=False)])
    _share(runs, "train", start)
    members = (unstack_states(states) if len(states.steps) > 1
               else [jax.tree.map(lambda x: x[0], states)])
    for run, state, history, evaluation in zip(runs, members, result.metrics,
                                               result.evaluations, strict=False):
        run.finish_chunk(phase, state, history, evaluation)


def _host_chunk(runs: list[PhaseRun], phase: Phase) -> None:
    """A ``chunk`` phase on host-stepped envs, run after run with each run's own agent
    (its training state is tied to that agent's envs): PPO to the chunk's end
    (`Agent.train`), then the evaluation with the chunk's key. A non-finite loss raises
    the run's FloatingPointError."""
    for run in runs:
        agent = run.agent(run.visits[phase.visit])
        steps = run.chunk_steps(phase)
        with run.timer.phase("train"):
            state, history = agent.train(run.train_state, steps, progress=run.on_progress)
        with run.timer.phase("eval"):
            result = agent.evaluate(state.ppo.params, run.spec.config.eval_episodes,
                                    run.eval_key(phase))
        run.finish_chunk(phase, state, history, result)


def end_visit(runs: list[PhaseRun], phase: Phase, size: int | None = None) -> None:
    """The ``end`` phase: the method's end hooks, then each run's training table
    (``size`` is not used: no program of this phase is padded)."""
    lead = runs[0]
    visit = lead.visits[phase.visit]
    agent = lead.agent(visit)
    start = time.perf_counter()
    run_hooks([partial(run.method.end_task, run.learner, run.context(visit, agent, "end"))
               for run in runs], [run.method.timer for run in runs])
    _share(runs, "method", start)
    for run in runs:
        run.train_state = None
        train = pd.DataFrame(run.train_rows)
        run.dir.write_visit_train(visit.index, visit.tag, train)
        if not train.empty and all(c in train for c in TRAIN_COLUMNS):
            run.dir.write_visit_start(visit.index, visit.tag, visit_start(train))
        run.dir.save_policy(visit.index, run.learner.params, "end")
        run.train_rows = []


def final_evaluation(runs: list[PhaseRun], phase: Phase, size: int | None = None) -> None:
    """The ``final`` phase: every task evaluated with each run's ``eval_params``."""
    lead = runs[0]
    start = time.perf_counter()
    for i, (task, visit, _) in enumerate(lead.final_tasks()):
        results = _evaluate(
            lead.agent(visit), [run.method.eval_params(task, run.learner) for run in runs],
            lead.spec.config.final_eval_episodes, [run.final_tasks()[i][2] for run in runs],
            size, features=False)
        for run, result in zip(runs, results, strict=True):
            run.records["final"].append({"task": task, "env_id": visit.env_id,
                                         "sr": result.sr, "mean_return": result.mean_return,
                                         "successes": result.successes,
                                         "episodes": result.episodes})
            run.tracker.log({f"final/sr/{task}": result.sr,
                             f"final/return/{task}": result.mean_return}, run.global_step)
    _share(runs, "final_eval", start)
    for run in runs:
        run.progress.note("final evaluation done")


__all__ = ["PhaseRun", "RunError", "end_visit", "final_evaluation", "start_visit",
           "train_chunk"]
