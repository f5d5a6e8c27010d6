"""The continual loop (paper Sec. 3.1): one method over one curriculum, resumable.

For every visit of the curriculum:

1. ``start``: the method chooses the initialisation (`Method.start_task`), the visit's
   `TrainState` starts fresh episodes, and the policy is evaluated (pre-evaluation,
   step 0);
2. ``chunk`` i: PPO trains up to ``min((i + 1) * eval_every, budget)`` env steps, then
   the policy is evaluated on fresh seeds; the last chunk's evaluation is the visit's
   post-evaluation;
3. ``end``: the method's end-of-task hook (`Method.end_task`);

On the jax backend a chunk is one compiled program (`Agent.train_and_evaluate`): the
chunk's PPO iterations as one ``lax.scan`` and its evaluation, for one run or for the S
seeds of a batch (`train_chunk`), with one transfer of results to the host per chunk;
its time counts as ``train`` (``eval`` holds the pre-evaluations).

and after the last visit, ``final``: every task is evaluated with
``method.eval_params(task)``. A checkpoint is committed after every phase (on the
gymnasium backend, whose envs cannot be snapshotted, only after ``start`` and ``end``),
so a killed run resumes from its last phase and finishes with exactly the results of an
uninterrupted one: every random key derives from the seed and the phase, and the
rollout in progress is part of the checkpoint.

The run owns its state: the `PPOState` carried across visits (``learner``) and, inside a
visit, the `TrainState` that training threads through the visit env's static `Agent`
(agents are shared by every run of one process that has the same env, config and method:
see `telapa.continual.batch`). A phase is `step` (one phase and its checkpoint); a batch
of seeds runs the training of its chunk phases itself and calls `finish_chunk`.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import jax
import jax.numpy as jnp
import pandas as pd

from telapa import __version__
from telapa.config import ConfigError
from telapa.continual.checkpoints import RunEdited
from telapa.continual.curriculum import Visit
from telapa.continual.lockstep import run_hooks
from telapa.continual.methods import Method, TaskContext
from telapa.continual.progress import Progress, SilentProgress
from telapa.continual.registry import make_method
from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.runtables import CURVE_COLUMNS, FINAL_COLUMNS, VISIT_COLUMNS
from telapa.continual.spec import RunSpec, resolve_spec
from telapa.continual.tracking import RunTracker, Tracking
from telapa.io import (
    CheckpointError,
    MemoryMonitor,
    PhaseTimer,
    dir_size_bytes,
    tree_nbytes,
)
from telapa.metrics import best_sr, competence_targets, run_metrics
from telapa.provenance import current_code, extend_code
from telapa.rl.agent import (
    Agent,
    BatchMemberError,
    Metrics,
    TrainState,
    episodes_key,
    stack_states,
    unstack_states,
)
from telapa.rl.evaluate import EvalResult
from telapa.rl.ppo import PPOState

AgentKey = tuple[str, ...]
"""What an `Agent` and the programs it compiles are made of (`ContinualRun.agent`): the
env id, options and competence, the backend, the train config (the method's network), the
intrinsic bonus and, for a method with a penalty, the method (its penalty data has the
method's own structure, which the compiled programs fix: EWC's and L2Init's differ under
one penalty function). Runs with the same key share the agent when they share an
``agents`` dict (a seed batch, the demo's penalty-free methods)."""


@dataclass(frozen=True)
class Phase:
    kind: Literal["start", "chunk", "end", "final"]
    visit: int = -1
    chunk: int = 0

    def describe(self, visits: list[Visit]) -> str:
        if self.kind == "final":
            return "final evaluation"
        v = visits[self.visit]
        where = f"visit {self.visit} ({v.tag}, {v.env_id})"
        return f"{where}, chunk {self.chunk}" if self.kind == "chunk" else f"{where}, {self.kind}"


class RunError(RuntimeError):
    """A run stopped (NaN, env failure): the message names the phase, task and step."""


def _records_frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns)



class ContinualRun:
    """One method on one curriculum in a run directory; `run` goes to the end.

    Create with `ContinualRun.start(spec, run_dir)` or continue a killed run with
    `ContinualRun.resume(run_dir)`.
    """

    def __init__(self, spec: RunSpec, run_dir: RunDir, progress: Progress | None = None,
                 *, agents: dict[AgentKey, Agent] | None = None):
        spec = spec.bound()
        self.spec = spec
        self.dir = run_dir
        self.progress = progress or SilentProgress()
        self.visits = spec.curriculum.visits()
        self.phases = self._phases()
        config = spec.config
        root = jax.random.key(spec.seed)
        self._init_key, self._visit_root, method_key = jax.random.split(root, 3)
        self.method: Method = make_method(spec.method, config, key=method_key)
        self.train_config = config.train.model_copy(
            update={"network": self.method.network(config.train.network)}
        )
        self.agents: dict[AgentKey, Agent] = {} if agents is None else agents
        """The static agent of each env (shared with the other runs of a batch, or of
        whatever else passed the same ``agents``: the key holds all an agent is made of,
        so any runs may share one dict; ``compile_s`` then counts the shared agents')."""
        first = self.agent(self.visits[0])
        params = first.policy.init(self._init_key)
        self.learner: PPOState = first.fresh_ppo(params, self.method.initial_penalty(params))
        """The PPO state carried from visit to visit (inside a visit: ``train_state.ppo``
        as of the visit's last phase)."""
        self.train_state: TrainState | None = None
        """The visit in progress: its PPO state and rollout (None between visits)."""
        self.next_phase = 0
        self.global_step = 0
        self.records: dict[str, list[dict[str, Any]]] = {"visits": [], "curve": [], "final": []}
        self.train_rows: list[dict[str, Any]] = []
        self.timer = PhaseTimer()
        self.wall_s = 0.0
        self.segments = 0
        self.peak_rss = 0
        self.tracker = RunTracker()
        """Live curves (`telapa.continual.tracking`): TensorBoard in the run directory and
        the requested trackers, opened by `start` and `resume`."""
        self._tracked_events = 0

    # --- construction ---------------------------------------------------------------

    @classmethod
    def start(cls, spec: RunSpec, path: str | Path, progress: Progress | None = None, *,
              agents: dict[AgentKey, Agent] | None = None, tracking: Tracking | None = None):
        """A new run of ``spec`` in ``path`` (see `RunDir.create`); ``tracking``: external
        trackers besides TensorBoard (`telapa.continual.tracking`)."""
        spec = resolve_spec(spec)
        run_dir = RunDir(path)
        existed = run_dir.path.is_dir()  # empty: `RunDir.create` refuses any other
        run = cls(spec, run_dir, progress, agents=agents)
        spec = run.spec  # with the env family's latent D
        run_dir.create(
            {"curriculum": spec.curriculum.name, "method": spec.method, "seed": spec.seed,
             "preset": spec.preset, "overrides": spec.overrides,
             **({"imports": list(spec.imports)} if spec.imports else {}),
             "backend": spec.curriculum.backend,
             "telapa": __version__, "jax": jax.__version__,
             "code": extend_code(None, current_code(), resumed=False)},
            config=spec.config.model_dump(mode="json"),
            curriculum=spec.curriculum.model_dump(mode="json"),
        )
        try:
            run._open_tracker(tracking, resume_step=None)
        except BaseException:
            # nothing ran: leave no run marked "running", only what was there before
            shutil.rmtree(run_dir.path, ignore_errors=True)
            if existed:
                run_dir.path.mkdir(exist_ok=True)
            raise
        return run

    def _open_tracker(self, tracking: Tracking | None, resume_step: int | None) -> None:
        spec = self.spec
        try:
            self.tracker = RunTracker.open(
                self.dir.path, spec={"curriculum": spec.curriculum.name, "method": spec.method,
                                     "seed": spec.seed, "preset": spec.preset,
                                     "overrides": spec.overrides},
                config=spec.config.model_dump(mode="json"), tracking=tracking,
                resume_step=resume_step)
        except BaseException:
            self.dir.unlock()
            raise
        self._tracked_events = len(self.method.log)

    @staticmethod
    def stored_spec(path: str | Path) -> RunSpec:
        """The `RunSpec` a run directory was started with."""
        run_dir = RunDir(path)
        meta = run_dir.spec()
        try:
            return RunSpec(curriculum=run_dir.curriculum(), method=meta["method"],
                           seed=int(meta["seed"]), config=run_dir.config(),
                           preset=meta.get("preset", "custom"),
                           overrides=dict(meta.get("overrides") or {}),
                           imports=run_dir.import_plugins())
        except ConfigError as err:
            raise RunDirError(f"{run_dir.path}: {err}") from None

    @classmethod
    def resume(cls, path: str | Path, progress: Progress | None = None, *,
               agents: dict[AgentKey, Agent] | None = None,
               tracking: Tracking | None = None) -> ContinualRun:
        """Continues a run from its newest usable checkpoint: one that is gone, incomplete
        or damaged is skipped, with a warning naming it and why. Takes the run
        directory's lock. A run whose run.json, config.yaml or curriculum.yaml were
        edited since that checkpoint is refused (`RunEdited`), before anything is
        written. The run goes on logging to the trackers it had (and those of
        ``tracking``). A run of an older format version is refused first, in one line,
        with nothing written (`CheckpointStore.check_format`)."""
        run_dir = RunDir(path)
        run_dir.checkpoints.check_format()
        spec = cls.stored_spec(path)
        run_dir.lock()
        try:
            run = cls._from_checkpoints(spec, run_dir, progress, agents)
        except BaseException:
            run_dir.unlock()
            raise
        manifest = run_dir.spec()
        codes = extend_code(manifest.get("code"), current_code(), resumed=True)
        if manifest.get("status") != "complete" and codes != manifest.get("code"):
            run_dir.set_status(manifest["status"], code=codes)  # the code of this segment
        if manifest.get("status") != "complete":
            run._open_tracker(tracking, resume_step=run.global_step)
        return run

    @classmethod
    def _from_checkpoints(cls, spec: RunSpec, run_dir: RunDir, progress: Progress | None,
                          agents: dict[AgentKey, Agent] | None) -> ContinualRun:
        """The run of ``spec`` at the newest of ``run_dir``'s checkpoints that verifies and
        loads (the start of the run when it has none); a run of an older format version
        is refused in one line first (`CheckpointStore.check_format`)."""
        store = run_dir.checkpoints
        checkpoints = store.newest_first()  # refuses a run of an older format version
        run = cls(spec, run_dir, progress, agents=agents)
        if not checkpoints:
            store.resume_from(None)
        for i, ckpt in enumerate(checkpoints):
            try:
                store.verify(ckpt)
                store.resume_from(ckpt)
                run._load_checkpoint(ckpt)
                break
            except RunEdited:
                raise
            except (CheckpointError, RunDirError, ValueError, KeyError, TypeError,
                    OSError) as err:
                if i + 1 == len(checkpoints):
                    raise RunDirError(f"{ckpt} cannot be read ({err}) and no earlier "
                                      "checkpoint is left; start the run again") from None
                run.progress.note(f"warning: {ckpt} cannot be read ({err}); falling back to "
                                  f"the previous checkpoint {checkpoints[i + 1].name}")
                run = cls(spec, run_dir, progress, agents=agents)
        return run

    def _phases(self) -> list[Phase]:
        eval_every = self.spec.config.eval_every
        phases = []
        for v in self.visits:
            phases.append(Phase("start", v.index))
            n_chunks = math.ceil(self.spec.budget(v) / eval_every)
            phases.extend(Phase("chunk", v.index, i) for i in range(n_chunks))
            phases.append(Phase("end", v.index))
        phases.append(Phase("final"))
        return phases

    def agent(self, visit: Visit) -> Agent:
        """The static agent of ``visit``'s env (made on first use, kept in ``agents``)."""
        penalty = "" if self.method.penalty is None else self.spec.method
        key = (visit.env_id, repr(sorted(visit.options.items())), repr(visit.competence),
               self.spec.curriculum.backend, self.train_config.model_dump_json(),
               repr(self.spec.config.intrinsic_beta), penalty)
        if key not in self.agents:
            self.agents[key] = Agent(
                visit.env_id, self.train_config, backend=self.spec.curriculum.backend,
                env_options=visit.options, penalty=self.method.penalty,
                intrinsic_beta=self.spec.config.intrinsic_beta, competence=visit.competence,
            )
        return self.agents[key]

    def _agent_for_task(self, task: str) -> Agent:
        return self.agent(next(v for v in self.visits if v.task == task))

    # --- keys -----------------------------------------------------------------------

    def visit_key(self, visit: int, purpose: str, index: int = 0) -> jax.Array:
        """Keys by (visit, purpose, index): the same on every resume."""
        codes = {"trainer": 0, "start": 1, "end": 2, "eval": 3}
        key = jax.random.fold_in(self._visit_root, visit)
        return jax.random.fold_in(jax.random.fold_in(key, codes[purpose]), index)

    # --- the loop -------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        return self.next_phase >= len(self.phases)

    def run(self) -> dict[str, Any]:
        """Runs every remaining phase; returns the run's metrics (see `metrics`). A run
        that is already complete is left exactly as it is (nothing is rewritten)."""
        try:
            if self.complete and self.dir.spec().get("status") == "complete":
                return self.metrics()
            return self._run_remaining()
        finally:
            self.tracker.close("stopped")  # no-op after `finish`
            self.dir.unlock()

    def _run_remaining(self) -> dict[str, Any]:
        self.segments += 1
        segment_start = time.perf_counter()
        base_wall = self.wall_s
        with MemoryMonitor(initial_peak_bytes=self.peak_rss) as memory:
            while not self.complete:
                self.step(lambda: (base_wall + time.perf_counter() - segment_start,
                                   memory.peak_bytes))
        return self.finish()

    def step(self, clock: Callable[[], tuple[float, int]]) -> None:
        """Runs the next phase and commits its checkpoint; ``clock()`` gives the run's wall
        seconds and peak memory so far (read once the phase is done)."""
        phase = self.phases[self.next_phase]
        try:
            self._run_phase(phase)
        except FloatingPointError as err:
            raise RunError(f"{phase.describe(self.visits)}: {err}") from err
        self.commit_phase(clock)

    def commit_phase(self, clock: Callable[[], tuple[float, int]]) -> None:
        """Marks the current phase done and commits its checkpoint (see `step`)."""
        phase = self.phases[self.next_phase]
        self.next_phase += 1
        self.wall_s, peak = clock()
        self.peak_rss = max(self.peak_rss, peak)
        if self._checkpointable(phase):
            with self.timer.phase("checkpoint"):
                self._save_checkpoint()
        method_times = {f"method/{k}": v for k, v in self.method.timer.totals.items()}
        self.tracker.phase({**self.timer.totals, **method_times},
                           self.method.log[self._tracked_events:], self.global_step)
        self._tracked_events = len(self.method.log)
        self.tracker.flush()

    def finish(self) -> dict[str, Any]:
        """Writes the tables, metrics and accounting of a complete run and marks it
        complete (the tables again: a run killed between its last checkpoint and the
        tables written after it resumes with no phase left, `_write_records`)."""
        self._write_records()
        metrics = self.metrics()
        self.dir.write_metrics(metrics)
        self.dir.write_accounting(self.accounting())
        self.dir.set_status("complete")
        self.tracker.log({f"metrics/{k}": v for k, v in metrics.items()}, self.global_step)
        self.tracker.close("complete")
        return metrics

    def _checkpointable(self, phase: Phase) -> bool:
        return phase.kind != "chunk" or self.spec.curriculum.backend == "jax"

    def _run_phase(self, phase: Phase) -> None:
        if phase.kind == "final":
            final_evaluation([self])
        elif phase.kind == "start":
            start_visit([self], phase)
        elif phase.kind == "end":
            end_visit([self], phase)
        elif self.spec.curriculum.backend == "jax":
            try:
                train_chunk([self], phase)
            except BatchMemberError as err:
                raise err.error from None
        else:
            agent = self.agent(self.visits[phase.visit])
            steps = self.chunk_steps(phase)
            with self.timer.phase("train"):
                state, history = agent.train(self.train_state, steps,
                                             progress=self.on_progress)
            with self.timer.phase("eval"):
                result = agent.evaluate(state.ppo.params, self.spec.config.eval_episodes,
                                        self.eval_key(phase))
            self.finish_chunk(phase, state, history, result)

    def context(self, visit: Visit, agent: Agent, purpose: str) -> TaskContext:
        """What the method's ``purpose`` hook (``"start"`` or ``"end"``) of ``visit``
        sees: the agent, its key (`visit_key`) and the run's progress sink."""
        return TaskContext(visit, agent, self.visit_key(visit.index, purpose),
                           agent.policy.init, progress=self.progress.phase)

    def record_start(self, visit: Visit, result: EvalResult) -> None:
        """Takes the visit's pre-evaluation: `observe`, the visit record, the curve."""
        self.method.observe(visit, "pre", result)
        self.records["visits"].append({
            "visit": visit.index, "tag": visit.tag, "task": visit.task,
            "env_id": visit.env_id, "cycle": visit.cycle, "budget": self.spec.budget(visit),
            "pre_sr": result.sr, "pre_return": result.mean_return,
            "start_global_step": self.global_step,
        })
        self._add_curve_point(visit, 0, result)

    def episodes_key(self, visit: Visit) -> jax.Array:
        """The key of the visit's training episodes (`episodes_key` of its trainer key)."""
        return episodes_key(self.visit_key(visit.index, "trainer"))

    def chunk_span(self, phase: Phase) -> tuple[int, int]:
        """``(done, steps)`` of the chunk ``phase``: the visit's env steps trained before
        it, and the steps it trains: up to ``min((chunk + 1) * eval_every, budget)``, at
        least one PPO iteration, in whole iterations (host arithmetic: the step count of
        the state on the device is never read)."""
        budget = self.spec.budget(self.visits[phase.visit])
        iteration = self.spec.config.train.ppo.rollout_size
        done = 0
        for chunk in range(phase.chunk + 1):
            target = min((chunk + 1) * self.spec.config.eval_every, budget)
            steps = -(-max(target - done, 1) // iteration) * iteration
            if chunk == phase.chunk:
                return done, steps
            done += steps
        raise AssertionError("unreachable")  # pragma: no cover

    def chunk_steps(self, phase: Phase) -> int:
        """Env steps the chunk ``phase`` trains (`chunk_span`). Reports the chunk's start
        to the progress sink."""
        visit = self.visits[phase.visit]
        done, steps = self.chunk_span(phase)
        self.progress.visit(visit, self.spec.budget(visit), done)
        return steps

    def eval_key(self, phase: Phase) -> jax.Array:
        """The key of the evaluation that ends the chunk ``phase``."""
        return self.visit_key(phase.visit, "eval", phase.chunk + 1)

    def on_progress(self, done: int, metrics: list[Metrics]) -> None:
        """Reports a training call's progress (``done`` steps of the visit)."""
        self.progress.advance(done, metrics[-1])

    def finish_chunk(self, phase: Phase, state: TrainState, history: list[Metrics],
                     result: EvalResult) -> None:
        """Takes the chunk's trained state, metrics and evaluation: records, `observe`."""
        visit = self.visits[phase.visit]
        budget = self.spec.budget(visit)
        before, _ = self.chunk_span(phase)
        self.train_state = state
        steps = history[-1]["step"]
        self.learner = state.ppo
        self.global_step += steps - before
        for row in history:
            self.train_rows.append({"visit": visit.index, "tag": visit.tag,
                                    "global_step": self.global_step - steps + row["step"],
                                    **row})
        self.tracker.training(history, [self.global_step - steps + int(row["step"])
                                        for row in history])
        self._add_curve_point(visit, steps, result)
        self.method.observe(visit, "post" if steps >= budget else "train", result)
        row = self.records["visits"][-1]
        row.update(post_sr=result.sr, post_return=result.mean_return,
                   train_steps=steps, end_global_step=self.global_step)

    def _add_curve_point(self, visit: Visit, step: int, result) -> None:
        self.records["curve"].append({
            "visit": visit.index, "tag": visit.tag, "task": visit.task, "step": step,
            "global_step": self.global_step, "sr": result.sr,
            "mean_return": result.mean_return,
        })
        self.tracker.evaluation(visit.tag, result.sr, result.mean_return, self.global_step)
        self.progress.evaluated(visit, step, result.sr)

    def final_tasks(self) -> list[tuple[str, Visit, jax.Array]]:
        """Every task of the curriculum (first-visit order) with its first visit and the
        key of its final evaluation."""
        seen: dict[str, Visit] = {}
        for v in self.visits:
            seen.setdefault(v.task, v)
        final_key = jax.random.fold_in(self._visit_root, len(self.visits))
        return [(task, visit, jax.random.fold_in(final_key, i))
                for i, (task, visit) in enumerate(seen.items())]

    # --- results --------------------------------------------------------------------

    def tables(self) -> dict[str, pd.DataFrame]:
        return {
            "visits": _records_frame(self.records["visits"], VISIT_COLUMNS),
            "curve": _records_frame(self.records["curve"], CURVE_COLUMNS),
            "final": _records_frame(self.records["final"], FINAL_COLUMNS),
        }

    def metrics(self) -> dict[str, Any]:
        """The run's metrics with tau_T from this run alone: its own best SR if it is a
        Scratch run, else tau_min (cross-run tau comes from `telapa metrics`)."""
        t = self.tables()
        tasks = list(dict.fromkeys(t["visits"]["task"]))
        tau_min = self.spec.config.tau_min
        if self.spec.method == "scratch":
            tau = competence_targets([best_sr(t["visits"], t["curve"])], tau_min)
            source = "this scratch run"
        else:
            tau = {task: tau_min for task in tasks}
            source = "tau_min"
        metrics = run_metrics(t["visits"], t["curve"], t["final"], tau).as_dict()
        return {**metrics, "tau": tau, "tau_source": source}

    def accounting(self) -> dict[str, Any]:
        ppo_steps = int(sum(r.get("train_steps", 0) for r in self.records["visits"]))
        return {
            "ppo_env_steps": ppo_steps,
            "extra_env_steps": int(self.method.extra_env_steps),
            "wall_s": self.wall_s,
            "segments": self.segments,
            "peak_rss_bytes": int(self.peak_rss),
            "run_dir_bytes": dir_size_bytes(self.dir.path),
            "method_state_bytes": tree_nbytes(self.method.state()),
            "compile_s": sum(a.compile_s for a in self.agents.values()),
            "phase_s": self.timer.totals,
            "method_phase_s": self.method.timer.totals,
        }

    # --- checkpoints ----------------------------------------------------------------

    def _mid_visit(self) -> bool:
        return self.phases[self.next_phase].kind in ("chunk", "end") if not self.complete \
            else False

    def _save_checkpoint(self) -> None:
        chunk_done = self._mid_visit() and self.phases[self.next_phase - 1].kind == "chunk"
        self.dir.checkpoints.save_run(self, with_train_state=chunk_done)
        self._write_records()
        self.dir.write_accounting(self.accounting())

    def _write_records(self) -> None:
        """The run's tables and method log as of its last phase (after each checkpoint,
        and when it finishes)."""
        self.dir.write_tables({**self.tables(), **self.method.tables()})
        self.dir.write_method_log(self.method.log)

    def _load_checkpoint(self, folder: Path) -> None:
        store = self.dir.checkpoints
        store.load_run(folder, self, agent_for=self._agent_for_task)
        if self._mid_visit():
            visit = self.visits[self.phases[self.next_phase].visit]
            fresh = self.agent(visit).start(self.learner, self.episodes_key(visit))
            saved = store.train_state(folder, fresh)
            self.train_state = fresh if saved is None else saved
        self.progress.note(f"resumed at {self.phases[self.next_phase].describe(self.visits)}"
                           if not self.complete else "run already complete")


# --- phases of one run or of the seeds of a batch ---------------------------------------
#
# Each takes the runs (seeds of one method, curriculum and settings) that stand at the
# phase and runs it for all of them together: the method's per-seed hooks in lockstep
# (`telapa.continual.lockstep.run_hooks`), evaluations as one population
# evaluation (`Agent.evaluate_batch`), a chunk as one program (`Agent.train_and_evaluate`).
# ``size`` pads the seeds to the batch's size (copies of the first, results discarded), so
# that a batch whose seeds lag after a resume runs the programs it has compiled. The
# elapsed time is shared equally among the runs' timers.


def _share(runs: list[ContinualRun], phase: str, start: float) -> None:
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


def start_visit(runs: list[ContinualRun], phase: Phase, size: int | None = None) -> None:
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


def train_chunk(runs: list[ContinualRun], phase: Phase, size: int | None = None) -> None:
    """A ``chunk`` phase on the jax backend: every run's `TrainState` stacked, trained
    and evaluated with its evaluation key as one `Agent.train_and_evaluate` program,
    then each run's `ContinualRun.finish_chunk`. Raises `BatchMemberError` (the
    position in ``runs``) on a non-finite loss."""
    lead = runs[0]
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


def end_visit(runs: list[ContinualRun], phase: Phase) -> None:
    """The ``end`` phase: the method's end hooks, then each run's training table."""
    lead = runs[0]
    visit = lead.visits[phase.visit]
    agent = lead.agent(visit)
    start = time.perf_counter()
    run_hooks([partial(run.method.end_task, run.learner, run.context(visit, agent, "end"))
               for run in runs], [run.method.timer for run in runs])
    _share(runs, "method", start)
    for run in runs:
        run.train_state = None
        run.dir.write_visit_train(visit.index, visit.tag, pd.DataFrame(run.train_rows))
        run.dir.save_policy(visit.index, run.learner.params, "end")
        run.train_rows = []


def final_evaluation(runs: list[ContinualRun], size: int | None = None) -> None:
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
                                         "sr": result.sr, "mean_return": result.mean_return})
            run.tracker.log({f"final/sr/{task}": result.sr,
                             f"final/return/{task}": result.mean_return}, run.global_step)
    _share(runs, "final_eval", start)
    for run in runs:
        run.progress.note("final evaluation done")


__all__ = ["ContinualRun", "Phase", "Progress", "RunError", "end_visit",
           "final_evaluation", "start_visit", "train_chunk"]
