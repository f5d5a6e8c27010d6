"""The continual loop (paper Sec. 3.1): one method over one curriculum, resumable.

A run is a sequence of phases (`telapa.continual.spec.RunSpec.phases`): per visit,
``start`` (the method chooses the initialisation, `Method.start_task`; fresh training
episodes; the pre-evaluation), ``chunk`` i (PPO up to ``min((i + 1) * eval_every,
budget)`` env steps, then an evaluation on fresh seeds; the last one is the visit's
post-evaluation) and ``end`` (`Method.end_task`); after the last visit, ``final``: every
task evaluated with ``method.eval_params(task)``. What each phase does is
`telapa.continual.phases`, for one run or the seeds of a batch alike; the loop over them
is `telapa.continual.driver`'s, in which a run alone is a batch of one.

A checkpoint may follow any phase (on the gymnasium backend, whose envs cannot be
snapshotted, only ``start`` and ``end``), and a killed run resumes from its last one and
finishes with exactly the results of an uninterrupted one: every random key derives from
the seed and the phase, and the rollout in progress is part of the checkpoint. One
follows a phase once the time since the last one is at least that one's cost x (1 / s -
1), s = ``TELAPA_CHECKPOINT_SHARE`` (0.02: checkpoints take at most 2% of the wall
clock; `telapa.envvars`), and always the first phase a process runs, the last phase, and
a phase at whose end a stop is pending (`telapa.io.stop`): a TeLAPA run's checkpoint
copies every archive (100 MB a task on MiniGrid), and one after every phase took 10-12%
of its wall clock (`_checkpoint_due`).

What a run is at a phase boundary is one value, its `RunState` (``state``: the learner,
the visit in progress, the records, the method's state, the accounting;
`telapa.continual.state`), which each phase replaces and each checkpoint saves; the rest
of a `ContinualRun` is fixed for the run (spec, run directory, keys, the visit envs'
static `Agent`s, shared by the runs of a process: `telapa.continual.agents`) or I/O
(progress, trackers).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Literal

import jax
import pandas as pd

from telapa import envvars
from telapa.continual.agents import AgentKey, process_agents, shared_agent
from telapa.continual.checkpoints import RunEdited
from telapa.continual.curriculum import Visit
from telapa.continual.driver import Clock, Driver
from telapa.continual.lockstep import HookError
from telapa.continual.methods import Method, TaskContext
from telapa.continual.phases import RunError
from telapa.continual.progress import Progress, SilentProgress
from telapa.continual.registry import checked, make_method
from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.runtables import records_tables
from telapa.continual.spec import Phase, RunSpec, resolve_spec
from telapa.continual.state import MethodState, RunState
from telapa.continual.tracking import RunTracker, Tracking
from telapa.io import CheckpointError, dir_size_bytes, tree_nbytes
from telapa.io.clock import running
from telapa.io.stop import raise_pending, stop_pending
from telapa.metrics import best_sr, competence_targets, run_metrics
from telapa.metrics.rates import as_exact
from telapa.provenance import (
    current_code,
    current_versions,
    extend_code,
    extend_versions,
    version_change,
)
from telapa.rl.agent import Agent, Metrics, TrainState, episodes_key
from telapa.rl.evaluate import EvalResult


def checkpoint_due(since_s: float, cost_s: float, share: float) -> bool:
    """Whether a checkpoint is due by time alone: the running time since the last one,
    t = ``since_s``, has reached its cost c = ``cost_s`` x (1 / s - 1), s = ``share``,
    so that checkpoints take at most s of the wall clock, c / (t + c) <= s
    (`ContinualRun._checkpoint_due` adds the phases that always get one)."""
    return since_s >= cost_s * (1 / share - 1)


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
        self.phases = spec.phases()
        config = spec.config
        root = jax.random.key(spec.seed)
        self._init_key, self._visit_root, method_key = jax.random.split(root, 3)
        self.method: Method = make_method(spec.method, config, key=method_key)
        self.train_config = config.train.model_copy(
            update={"network": checked(self.method, "network",
                                       self.method.network(config.train.network))}
        )
        self.agents: dict[AgentKey, Agent] = (
            process_agents(spec.curriculum.backend) if agents is None else agents)
        """The static agent of each env, shared with every run given the same dict (by
        default the process's, `process_agents`: the key holds all an agent is made of,
        so any runs may share one)."""
        self._compile_before = {id(a): a.compile_s for a in self.agents.values()}
        self._used: dict[int, Agent] = {}
        """The agents this run took, and what they had compiled when it was made: its
        ``compile_s`` is what they compiled since (a seed batch's runs are all made
        before any compiles, so each counts the batch's)."""
        first = self.agent(self.visits[0])
        params = first.policy.init(self._init_key)
        learner = first.fresh_ppo(params, self.method.initial_penalty(params))
        self.state = RunState(learner=learner,
                              method=checked(self.method, "init", self.method.init(params)))
        """The run at its last phase boundary (`telapa.continual.state`)."""
        self.tracker = RunTracker()
        """Live curves (`telapa.continual.tracking`): TensorBoard in the run directory and
        the requested trackers, opened by `start` and `resume`."""
        self._tracked_events = 0
        self._checkpoint_share = envvars.checkpoint_share()
        self._last_checkpoint: tuple[float, float] | None = None
        """When this process's last checkpoint of the run ended (`running`) and what it
        cost in seconds; None before the first (`_checkpoint_due`)."""

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
            {**spec.manifest(), **current_versions(), "versions": [current_versions()],
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

    def _open_tracker(self, tracking: Tracking | None, resume_step: int | None,
                      resume_ms: int | None = None) -> None:
        spec = self.spec
        try:
            self.tracker = RunTracker.open(
                self.dir.path, spec=spec.identity(),
                config=spec.config.model_dump(mode="json"), tracking=tracking,
                resume_step=resume_step, resume_ms=resume_ms)
        except BaseException:
            self.dir.unlock()
            raise
        self._tracked_events = len(self.state.method.log)

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
        spec = RunSpec.stored(path)
        run_dir.lock()
        try:
            run = cls._from_checkpoints(spec, run_dir, progress, agents)
        except BaseException:
            run_dir.unlock()
            raise
        manifest = run_dir.manifest()
        if manifest.get("status") != "complete":
            versions = current_versions()
            changed = version_change(manifest, versions)
            if changed is not None:
                run.progress.note(
                    f"warning: {run_dir.path} ran with other versions until now ({changed}); "
                    "it resumes, but a resumed run is bit-identical to an uninterrupted one "
                    "only with the same telapa and jax versions (run.json records each "
                    "segment's under 'versions')")
            codes = extend_code(manifest.get("code"), current_code(), resumed=True)
            recorded = extend_versions(manifest, versions)
            if codes != manifest.get("code") or recorded != manifest.get("versions"):
                # the code and versions of this segment
                run_dir.set_status(manifest["status"], code=codes, versions=recorded)
            run._open_tracker(tracking, resume_step=run.state.global_step,
                              resume_ms=run.state.tracked_ms)
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
                run.restore_checkpoint(ckpt)
                break
            except (RunEdited, HookError):  # not the checkpoint's fault: another is no better
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

    def agent(self, visit: Visit) -> Agent:
        """The static agent of ``visit``'s env (made on first use, kept in ``agents``)."""
        agent = shared_agent(self.agents, visit, self.train_config, spec=self.spec,
                             penalty=self.method.penalty, settings=self.method.settings,
                             note=self.progress.note)
        self._used[id(agent)] = agent
        return agent

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
        return self.state.next_phase >= len(self.phases)

    def run(self) -> dict[str, Any]:
        """Runs every remaining phase (`telapa.continual.driver`: a batch of one);
        returns the run's metrics (see `metrics`). A run that is already complete is
        left exactly as it is (nothing is rewritten)."""
        try:
            if self.complete and self.dir.manifest().get("status") == "complete":
                return self.metrics()
            (metrics,) = Driver([self], size=1).drive()
            return metrics
        finally:
            self.tracker.close("stopped")  # no-op after `finish`
            self.dir.unlock()

    def commit_phase(self, state: RunState, clock: Clock) -> None:
        """Takes ``state``, the run after its current phase, as the run's: the phase
        marked done, the clock's reading (``clock()``: the run's
        wall seconds and peak memory so far, `telapa.continual.driver`) taken in, the
        phase logged to the trackers and its checkpoint committed."""
        phase = self.phases[state.next_phase]
        wall_s, peak = clock()
        state = state.replace(next_phase=state.next_phase + 1, wall_s=wall_s,
                              peak_rss=max(state.peak_rss, peak))
        # the phase is logged before its checkpoint: a resume from that checkpoint logs
        # again exactly what was logged after it (`RunTracker.mark`)
        method_times = {f"method/{k}": v for k, v in state.method.timer.items()}
        self.tracker.phase({**state.timer, **method_times},
                           [dict(e) for e in state.method.log[self._tracked_events:]],
                           state.global_step)
        self._tracked_events = len(state.method.log)
        self.tracker.flush()
        if not (self._checkpointable(phase) and self._checkpoint_due(state)):
            self.state = state
            return
        self.state = state.replace(tracked_ms=self.tracker.mark())
        start = running()
        self._save_checkpoint()
        end = running()
        self._last_checkpoint = (end, end - start)
        self.state = self.state.timed("checkpoint", end - start)

    def finish(self) -> dict[str, Any]:
        """Writes the tables, metrics and accounting of a complete run and marks it
        complete (the tables again: a run killed between its last checkpoint and the
        tables written after it resumes with no phase left, `_write_records`)."""
        self._write_records()
        metrics = self.metrics()
        self.dir.write_metrics(metrics)
        self.dir.write_accounting(self.accounting())
        self.dir.set_status("complete")
        self.tracker.log({f"metrics/{k}": v for k, v in metrics.items()},
                         self.state.global_step)
        self.tracker.close("complete")
        return metrics

    def _checkpointable(self, phase: Phase) -> bool:
        return phase.kind != "chunk" or self.spec.curriculum.backend == "jax"

    def _checkpoint_due(self, state: RunState) -> bool:
        """Whether the phase that ended in ``state`` is followed by a checkpoint: when the
        run is complete, a stop is pending, this process has not yet written one, or
        the running time t since the last one, of cost c, has reached c (1 / s - 1), so
        that checkpoints take at most s = ``TELAPA_CHECKPOINT_SHARE`` of the wall clock,
        c / (t + c) <= s."""
        if (state.next_phase >= len(self.phases) or stop_pending()
                or self._last_checkpoint is None):
            return True
        end, cost = self._last_checkpoint
        return checkpoint_due(running() - end, cost, self._checkpoint_share)

    def context(self, visit: Visit, agent: Agent, purpose: str) -> TaskContext:
        """What the method's ``purpose`` hook (``"start"`` or ``"end"``) of ``visit``
        sees: the agent, its key (`visit_key`) and the run's progress sink."""
        return TaskContext(visit, agent, self.visit_key(visit.index, purpose),
                           agent.policy.init, progress=self.progress.phase)

    def record_start(self, state: RunState, visit: Visit, result: EvalResult) -> RunState:
        """``state`` with the visit's pre-evaluation taken in: `observe`, the visit's
        record, its curve point."""
        state = state.replace(method=self._observe(state.method, visit, "pre", result))
        records = state.records.add("visits", {
            "visit": visit.index, "tag": visit.tag, "task": visit.task,
            "env_id": visit.env_id, "cycle": visit.cycle, "budget": self.spec.budget(visit),
            "pre_sr": result.sr, "pre_return": result.mean_return,
            "start_global_step": state.global_step,
            "pre_successes": result.successes, "pre_episodes": result.episodes,
        })
        return self._add_curve_point(state.replace(records=records), visit, 0, result)

    def episodes_key(self, visit: Visit) -> jax.Array:
        """The key of the visit's training episodes (`episodes_key` of its trainer key)."""
        return episodes_key(self.visit_key(visit.index, "trainer"))

    def chunk_steps(self, phase: Phase) -> int:
        """Env steps the chunk ``phase`` trains (`chunk_span`). Reports the chunk's start
        to the progress sink."""
        visit = self.visits[phase.visit]
        done, steps = self.spec.chunk_span(visit, phase.chunk)
        self.progress.visit(visit, self.spec.budget(visit), done)
        return steps

    def eval_key(self, phase: Phase) -> jax.Array:
        """The key of the evaluation that ends the chunk ``phase``."""
        return self.visit_key(phase.visit, "eval", phase.chunk + 1)

    def on_progress(self, done: int, metrics: list[Metrics]) -> None:
        """Reports a training call's progress (``done`` steps of the visit); raises a
        stop a signal asked for that was dropped on the way (`telapa.io.stop`)."""
        self.progress.advance(done, metrics[-1])
        raise_pending()

    def finish_chunk(self, state: RunState, phase: Phase, trained: TrainState,
                     history: list[Metrics], result: EvalResult) -> RunState:
        """``state`` with the chunk's trained state, PPO iterations and evaluation taken
        in: the records, the trackers' curves, `observe`."""
        visit = self.visits[phase.visit]
        budget = self.spec.budget(visit)
        before, _ = self.spec.chunk_span(visit, phase.chunk)
        steps = history[-1]["step"]
        global_step = state.global_step + steps - before
        first = global_step - steps
        rows = tuple({"visit": visit.index, "tag": visit.tag,
                      "global_step": first + row["step"], **row} for row in history)
        self.tracker.training(history, [first + int(row["step"]) for row in history])
        state = state.replace(train_state=trained, learner=trained.ppo,
                              global_step=global_step, train_rows=state.train_rows + rows)
        state = self._add_curve_point(state, visit, steps, result)
        state = state.replace(method=self._observe(
            state.method, visit, "post" if steps >= budget else "train", result))
        return state.replace(records=state.records.update_visit(
            post_sr=result.sr, post_return=result.mean_return, train_steps=steps,
            end_global_step=global_step, post_successes=result.successes,
            post_episodes=result.episodes))

    def _observe(self, mstate: MethodState, visit: Visit,
                 kind: Literal["pre", "train", "post"], result: EvalResult) -> MethodState:
        """The method's `observe` of an evaluation, its value checked (`checked`)."""
        return checked(self.method, "observe", self.method.observe(mstate, visit, kind, result))

    def _add_curve_point(self, state: RunState, visit: Visit, step: int,
                         result: EvalResult) -> RunState:
        records = state.records.add("curve", {
            "visit": visit.index, "tag": visit.tag, "task": visit.task, "step": step,
            "global_step": state.global_step, "sr": result.sr,
            "mean_return": result.mean_return, "successes": result.successes,
            "episodes": result.episodes,
        })
        self.tracker.evaluation(visit.tag, result.sr, result.mean_return, state.global_step)
        self.progress.evaluated(visit, step, result.sr)
        return state.replace(records=records)

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
        return records_tables(self.state.records.as_lists())

    def metrics(self) -> dict[str, Any]:
        """The run's metrics with tau_T from this run alone: its own best SR if it is a
        Scratch run, else tau_min (cross-run tau comes from `telapa metrics`)."""
        t = self.tables()
        tasks = list(dict.fromkeys(t["visits"]["task"]))
        tau_min = self.spec.config.tau_min
        if self.method.competence_reference:
            tau = competence_targets([best_sr(t["visits"], t["curve"])], tau_min)
            source = f"this {self.spec.method} run"
        else:
            tau = {task: tau_min for task in tasks}
            source = "tau_min"
        metrics = run_metrics(t["visits"], t["curve"], t["final"], tau).as_dict()
        metrics["exact"] = {k: str(v) for k, v in metrics["exact"].items()}
        return {**metrics, "tau": {k: float(v) for k, v in tau.items()},
                "tau_exact": {k: str(as_exact(v)) for k, v in tau.items()},
                "tau_source": source}

    def accounting(self) -> dict[str, Any]:
        state = self.state
        ppo_steps = int(sum(r.get("train_steps", 0) for r in state.records.visits))
        return {
            "ppo_env_steps": ppo_steps,
            "extra_env_steps": int(state.method.extra_env_steps),
            "wall_s": state.wall_s,
            "segments": state.segments,
            "peak_rss_bytes": int(state.peak_rss),
            "run_dir_bytes": dir_size_bytes(self.dir.path),
            "method_state_bytes": tree_nbytes(dict(state.method.parts)),
            "compile_s": sum(a.compile_s - self._compile_before.get(key, 0.0)
                             for key, a in self._used.items()),
            "phase_s": dict(state.timer),
            "method_phase_s": dict(state.method.timer),
        }

    # --- checkpoints ----------------------------------------------------------------

    def _mid_visit(self, state: RunState) -> bool:
        """Whether ``state`` stands inside a visit (its next phase a chunk or the end)."""
        return (state.next_phase < len(self.phases)
                and self.phases[state.next_phase].kind in ("chunk", "end"))

    def _save_checkpoint(self) -> None:
        state = self.state
        chunk_done = self._mid_visit(state) and self.phases[state.next_phase - 1].kind == "chunk"
        self.dir.checkpoints.save_run(state, phases=len(self.phases),
                                      with_train_state=chunk_done)
        if self.complete:  # a finished run keeps one checkpoint (docs/reliability.md)
            self.dir.checkpoints.keep_latest_only()
        self._write_records()
        self.dir.write_accounting(self.accounting())

    def _write_records(self) -> None:
        """The run's tables and method log as of its last phase (after each checkpoint,
        and when it finishes)."""
        method_tables = checked(self.method, "tables", self.method.tables(self.state.method))
        self.dir.write_tables({**self.tables(), **method_tables})
        self.dir.write_method_log([dict(event) for event in self.state.method.log])

    def restore_checkpoint(self, folder: Path) -> None:
        """Makes this run (as made from its spec) the one the checkpoint ``folder`` holds:
        its `RunState` (`CheckpointStore.load_run`; mid-visit, with the visit's
        `TrainState`). `RunDirError` and `CheckpointError` name
        what does not match; the run is unchanged then."""
        store = self.dir.checkpoints
        state = store.load_run(
            folder, self.state, phases=len(self.phases),
            method_like=lambda tasks, learner: checked(
                self.method, "parts_like",
                self.method.parts_like(learner.params, tasks, self._agent_for_task)))
        if self._mid_visit(state):
            visit = self.visits[self.phases[state.next_phase].visit]
            fresh = self.agent(visit).start(state.learner, self.episodes_key(visit))
            saved = store.train_state(folder, fresh)
            state = state.replace(train_state=fresh if saved is None else saved)
        self.state = state
        self.progress.note(
            f"resumed at {self.phases[state.next_phase].describe(self.visits)}"
            if not self.complete else "run already complete")


__all__ = ["ContinualRun", "Progress", "RunError", "RunState", "checkpoint_due"]
