"""The phases of one run or of the seeds of a batch, each run for all of them together.

A phase is a function of the runs (seeds of one method, curriculum and settings: one
alone, or a `telapa.continual.batch.SeedBatch`'s) that stand at it, returning each run's
next `RunState` (`telapa.continual.state`) from its current one (``run.state``); the
loop (`telapa.continual.driver`) hands them to the runs, which commit them:

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
equally among the runs' timers. What a phase reads of a run is `PhaseRun`
(`telapa.continual.runner.ContinualRun` is one); what changes is its state only (the
method's hooks take and return the state's `MethodState`). What a hook returns is
checked where it is received (`telapa.continual.registry.checked`): a wrong value is a
`HookError` naming the method and the hook, not a failure further on.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import pandas as pd

from telapa.continual.curriculum import Visit
from telapa.continual.lockstep import run_hooks
from telapa.continual.methods import Method, TaskContext
from telapa.continual.progress import Progress
from telapa.continual.registry import checked, hook_name
from telapa.continual.rundir import RunDir
from telapa.continual.spec import Phase, RunSpec
from telapa.continual.state import RunState
from telapa.continual.tracking import RunTracker
from telapa.continual.trainlog import TRAIN_COLUMNS, visit_start
from telapa.io import PhaseTimer
from telapa.io.clock import running
from telapa.rl.agent import Agent, Metrics, TrainState, stack_states, unstack_states
from telapa.rl.evaluate import EvalResult


class RunError(RuntimeError):
    """A run stopped (NaN, env failure): the message names the phase, task and step."""


class PhaseRun(Protocol):
    """What a phase reads of a run (`telapa.continual.runner.ContinualRun`): its state,
    what is fixed for the run, and the helpers that take a phase's results into a
    state."""

    spec: RunSpec
    visits: list[Visit]
    method: Method
    dir: RunDir
    progress: Progress
    tracker: RunTracker
    state: RunState

    def agent(self, visit: Visit) -> Agent: ...
    def context(self, visit: Visit, agent: Agent, purpose: str) -> TaskContext: ...
    def visit_key(self, visit: int, purpose: str, index: int = 0) -> jax.Array: ...
    def episodes_key(self, visit: Visit) -> jax.Array: ...
    def eval_key(self, phase: Phase) -> jax.Array: ...
    def chunk_steps(self, phase: Phase) -> int: ...
    def on_progress(self, done: int, metrics: list[Metrics]) -> None: ...
    def record_start(self, state: RunState, visit: Visit, result: EvalResult
                     ) -> RunState: ...
    def finish_chunk(self, state: RunState, phase: Phase, trained: TrainState,
                     history: list[Metrics], result: EvalResult) -> RunState: ...
    def final_tasks(self) -> list[tuple[str, Visit, jax.Array]]: ...


def _share(states: list[RunState], phase: str, start: float) -> list[RunState]:
    """``states`` with the seconds since ``start`` shared equally in ``phase``."""
    share = (running() - start) / len(states)
    return [state.timed(phase, share) for state in states]


def _evaluate(agent: Agent, params: list[Any], episodes: int, keys: list[jax.Array],
              size: int | None, features: bool) -> list[EvalResult]:
    """One population evaluation of every run's ``params`` with its key, padded."""
    padding = (size or len(params)) - len(params)
    results = agent.evaluate_batch(stack_states(params + [params[0]] * padding), episodes,
                                   jnp.stack(keys + [keys[0]] * padding), features=features)
    return results[:len(params)]


def start_visit(runs: list[PhaseRun], phase: Phase, size: int | None = None
                ) -> list[RunState]:
    """The ``start`` phase: the method's start hooks, new training episodes, and the
    pre-evaluation (step 0) of every run."""
    lead = runs[0]
    visit = lead.visits[phase.visit]
    agent = lead.agent(visit)
    for run in runs:
        run.progress.visit(visit, run.spec.budget(visit), 0)
    start = running()
    timers = [PhaseTimer() for _ in runs]
    started = run_hooks(
        [partial(run.method.start_task, run.state.method, run.state.learner,
                 run.context(visit, agent, "start")) for run in runs], timers,
        [hook_name(run.method, "start_task") for run in runs])
    started = [checked(run.method, "start_task", value)
               for run, value in zip(runs, started, strict=True)]
    states = _share([run.state for run in runs], "method", start)
    states = [state.replace(learner=learner, method=mstate.timed_all(timer.totals),
                            train_state=agent.start(learner, run.episodes_key(visit)),
                            train_rows=())
              for run, state, (learner, mstate), timer
              in zip(runs, states, started, timers, strict=True)]
    for run, state in zip(runs, states, strict=True):
        run.dir.save_policy(visit.index, state.learner.params, "start")
    start = running()
    results = _evaluate(agent, [state.learner.params for state in states],
                        lead.spec.config.eval_episodes,
                        [run.visit_key(visit.index, "eval", 0) for run in runs], size,
                        features=lead.method.observes_features)
    states = _share(states, "eval", start)
    return [run.record_start(state, visit, result)
            for run, state, result in zip(runs, states, results, strict=True)]


def train_chunk(runs: list[PhaseRun], phase: Phase, size: int | None = None
                ) -> list[RunState]:
    """A ``chunk`` phase. On the jax backend every run's `TrainState` stacked, trained
    and evaluated with its evaluation key as one `Agent.train_and_evaluate` program,
    then taken into each run's state (`ContinualRun.finish_chunk`); raises
    `BatchMemberError` (the position in ``runs``) on a non-finite loss. On a host
    backend, `_host_chunk`."""
    lead = runs[0]
    if lead.spec.curriculum.backend != "jax":
        return _host_chunk(runs, phase)
    visit = lead.visits[phase.visit]
    agent = lead.agent(visit)
    steps = {run.chunk_steps(phase) for run in runs}
    if len(steps) != 1:  # pragma: no cover - same phase, same budget
        raise RunError(f"{phase.describe(lead.visits)}: seeds disagree on the steps")
    padding = (size or len(runs)) - len(runs)
    states = stack_states([run.state.train_state for run in runs]
                          + [lead.state.train_state] * padding)
    keys = jnp.stack([run.eval_key(phase) for run in runs] + [lead.eval_key(phase)] * padding)
    start = running()
    states, result = agent.train_and_evaluate(
        states, steps.pop(), episodes=lead.spec.config.eval_episodes, keys=keys,
        features=lead.method.observes_features,
        progress=lambda done, rows: [run.on_progress(done, r)
                                     for run, r in zip(runs, rows, strict=False)])
    before = _share([run.state for run in runs], "train", start)
    members = unstack_states(states)
    return [run.finish_chunk(state, phase, trained, history, evaluation)
            for run, state, trained, history, evaluation
            in zip(runs, before, members, result.metrics, result.evaluations, strict=False)]


def _host_chunk(runs: list[PhaseRun], phase: Phase) -> list[RunState]:
    """A ``chunk`` phase on host-stepped envs, run after run with each run's own agent
    (its training state is tied to that agent's envs): PPO to the chunk's end
    (`Agent.train`), then the evaluation with the chunk's key. A non-finite loss raises
    the run's FloatingPointError."""
    states = []
    for run in runs:
        agent = run.agent(run.visits[phase.visit])
        steps = run.chunk_steps(phase)
        start = running()
        trained, history = agent.train(run.state.train_state, steps,
                                       progress=run.on_progress)
        state = run.state.timed("train", running() - start)
        start = running()
        result = agent.evaluate(trained.ppo.params, run.spec.config.eval_episodes,
                                run.eval_key(phase))
        state = state.timed("eval", running() - start)
        states.append(run.finish_chunk(state, phase, trained, history, result))
    return states


def end_visit(runs: list[PhaseRun], phase: Phase, size: int | None = None
              ) -> list[RunState]:
    """The ``end`` phase: the method's end hooks, then each run's training table
    (``size`` is not used: no program of this phase is padded)."""
    lead = runs[0]
    visit = lead.visits[phase.visit]
    agent = lead.agent(visit)
    start = running()
    timers = [PhaseTimer() for _ in runs]
    ended = run_hooks([partial(run.method.end_task, run.state.method, run.state.learner,
                               run.context(visit, agent, "end")) for run in runs], timers,
                      [hook_name(run.method, "end_task") for run in runs])
    ended = [checked(run.method, "end_task", value)
             for run, value in zip(runs, ended, strict=True)]
    states = [state.replace(method=mstate.timed_all(timer.totals)) for state, mstate, timer
              in zip(_share([run.state for run in runs], "method", start), ended, timers,
                     strict=True)]
    for run, state in zip(runs, states, strict=True):
        train = pd.DataFrame([dict(row) for row in state.train_rows])
        run.dir.write_visit_train(visit.index, visit.tag, train)
        if not train.empty and all(c in train for c in TRAIN_COLUMNS):
            run.dir.write_visit_start(visit.index, visit.tag, visit_start(train))
        run.dir.save_policy(visit.index, state.learner.params, "end")
    return [state.replace(train_state=None, train_rows=()) for state in states]


def final_evaluation(runs: list[PhaseRun], phase: Phase, size: int | None = None
                     ) -> list[RunState]:
    """The ``final`` phase: every task evaluated with each run's ``eval_params``."""
    lead = runs[0]
    states = [run.state for run in runs]
    start = running()
    for i, (task, visit, _) in enumerate(lead.final_tasks()):
        results = _evaluate(
            lead.agent(visit),
            [checked(run.method, "eval_params",
                     run.method.eval_params(state.method, task, state.learner),
                     learner=state.learner)
             for run, state in zip(runs, states, strict=True)],
            lead.spec.config.final_eval_episodes, [run.final_tasks()[i][2] for run in runs],
            size, features=False)
        for j, (run, result) in enumerate(zip(runs, results, strict=True)):
            states[j] = states[j].replace(records=states[j].records.add("final", {
                "task": task, "env_id": visit.env_id, "sr": result.sr,
                "mean_return": result.mean_return, "successes": result.successes,
                "episodes": result.episodes}))
            run.tracker.log({f"final/sr/{task}": result.sr,
                             f"final/return/{task}": result.mean_return},
                            states[j].global_step)
    states = _share(states, "final_eval", start)
    for run in runs:
        run.progress.note("final evaluation done")
    return states


__all__ = ["PhaseRun", "RunError", "end_visit", "final_evaluation", "start_visit",
           "train_chunk"]
