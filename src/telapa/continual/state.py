"""A run's state: everything a continual run is at a phase boundary, as one value.

    run.state = RunState(learner=...)              # or a checkpoint's (`load_run`)
    while run.state.next_phase < len(phases):      # telapa.continual.driver
        phase = phases[run.state.next_phase]
        state = PHASES[phase.kind]([run], phase)[0]  # telapa.continual.phases
        run.commit_phase(state, clock)             # next_phase + 1, the accounting,
                                                   # the checkpoint saves run.state

`RunState` is immutable: a phase returns a new one (`dataclasses.replace`), and the
checkpoint of a phase (`telapa.continual.checkpoints.CheckpointStore.save_run`) saves
exactly this value and restores it (`load_run`). What a run holds besides (its spec, run
directory, agents, method object, progress sink and trackers) is fixed for the run, or
I/O: it is not state.

Its parts:

* where the run is: ``next_phase`` (index into `RunSpec.phases`), ``global_step``;
* the learner: ``learner``, the `PPOState` carried from visit to visit, and inside a
  visit ``train_state`` (the visit's `TrainState`: PPO state and rollout) and
  ``train_rows`` (its PPO iterations so far);
* ``records``: the rows of the run's ``visits``, ``curve`` and ``final`` tables;
* ``method``: the method's state (`MethodState`: its named parts, decisions log, extra
  env steps and phase times);
* the accounting: ``timer`` (seconds per run phase), ``wall_s``, ``segments`` (how many
  times the run was started or resumed), ``peak_rss`` and ``tracked_ms`` (when the
  trackers had logged what the state holds, `RunTracker.mark`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from telapa.rl.agent import TrainState
from telapa.rl.ppo import PPOState

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Records:
    """The rows of a run's tables (`telapa.continual.runtables.records_tables`): one per
    visit (``visits``, its pre- and post-evaluation), one per evaluation (``curve``), one
    per task of the final evaluation (``final``)."""

    visits: tuple[Row, ...] = ()
    curve: tuple[Row, ...] = ()
    final: tuple[Row, ...] = ()

    def as_lists(self) -> dict[str, list[dict[str, Any]]]:
        """The rows as JSON lists (a checkpoint's ``records``)."""
        return {name: [dict(row) for row in getattr(self, name)]
                for name in ("visits", "curve", "final")}

    @classmethod
    def from_lists(cls, lists: Mapping[str, list[dict[str, Any]]]) -> Records:
        return cls(*(tuple(lists[name]) for name in ("visits", "curve", "final")))

    def add(self, table: str, row: Row) -> Records:
        """These records with ``row`` appended to ``table``."""
        return dataclasses.replace(self, **{table: (*getattr(self, table), row)})

    def update_visit(self, **values: Any) -> Records:
        """These records with the last visit's row extended by ``values``."""
        *head, last = self.visits
        return dataclasses.replace(self, visits=(*head, {**last, **values}))


@dataclass(frozen=True)
class MethodState:
    """A method's state: the value its hooks take and return
    (`telapa.continual.methods.Method`; the method object itself holds only its
    settings and key). Its named ``parts`` are pytrees (a bank, a Fisher, an anchor,
    TeLAPA's archives), each replaced, never mutated, when it changes, so a checkpoint
    rewrites only what changed and their size is the "stored method state" of the
    paper's compute table; ``stored_tasks`` are the tasks it stored, in the order it
    first stored them; ``log`` its decisions (JSON records); ``extra_env_steps`` the env
    steps it spent outside the PPO budget (paper App. G); ``timer`` the seconds of its
    own phases."""

    parts: Mapping[str, Any] = field(default_factory=dict)
    stored_tasks: tuple[str, ...] = ()
    log: tuple[Mapping[str, Any], ...] = ()
    extra_env_steps: int = 0
    timer: Mapping[str, float] = field(default_factory=dict)

    def replace(self, **changes: Any) -> MethodState:
        return dataclasses.replace(self, **changes)

    def with_parts(self, **parts: Any) -> MethodState:
        """This state with the named ``parts`` set (the others kept)."""
        return self.replace(parts={**self.parts, **parts})

    def storing(self, task: str) -> MethodState:
        """This state with ``task`` among its stored tasks (appended if new)."""
        if task in self.stored_tasks:
            return self
        return self.replace(stored_tasks=(*self.stored_tasks, task))

    def logged(self, event: Mapping[str, Any]) -> MethodState:
        """This state with ``event`` appended to its log."""
        return self.replace(log=(*self.log, dict(event)))

    def spent(self, env_steps: int) -> MethodState:
        """This state with ``env_steps`` more spent outside the PPO budget."""
        return self.replace(extra_env_steps=self.extra_env_steps + int(env_steps))

    def timed(self, phase: str, seconds: float) -> MethodState:
        """This state with ``seconds`` more in the phase ``phase`` (as `RunState.timed`)."""
        return self.timed_all({phase: seconds})

    def timed_all(self, times: Mapping[str, float]) -> MethodState:
        """This state with the seconds of ``times`` (phase -> seconds, e.g. a
        `PhaseTimer`'s totals) added."""
        return self.replace(timer=_add_times(self.timer, times))


@dataclass(frozen=True)
class RunState:
    """Everything a continual run is at a phase boundary (module docstring)."""

    learner: PPOState
    next_phase: int = 0
    global_step: int = 0
    train_state: TrainState | None = None
    train_rows: tuple[Row, ...] = ()
    records: Records = Records()
    method: MethodState = MethodState()
    timer: Mapping[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    segments: int = 0
    peak_rss: int = 0
    tracked_ms: int | None = None

    def replace(self, **changes: Any) -> RunState:
        return dataclasses.replace(self, **changes)

    def timed(self, phase: str, seconds: float) -> RunState:
        """This state with ``seconds`` more in the run phase ``phase``."""
        return self.timed_all({phase: seconds})

    def timed_all(self, times: Mapping[str, float]) -> RunState:
        """This state with the seconds of ``times`` (phase -> seconds) added."""
        return self.replace(timer=_add_times(self.timer, times))


def _add_times(timer: Mapping[str, float], times: Mapping[str, float]) -> dict[str, float]:
    """``timer`` with the seconds of ``times`` added phase by phase."""
    out = dict(timer)
    for phase, seconds in times.items():
        out[phase] = out.get(phase, 0.0) + seconds
    return out


__all__ = ["MethodState", "Records", "RunState"]
