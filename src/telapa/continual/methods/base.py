"""The base of every continual method: `Method`, its hooks over a `MethodState` value,
and the `TaskContext` a hook sees (the package's docstring, `telapa.continual.methods`,
shows the loop that calls them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import jax
import optax
import pandas as pd
from pydantic import BaseModel

from telapa.config import NetworkConfig
from telapa.continual.curriculum import Visit
from telapa.continual.state import MethodState
from telapa.rl.agent import Agent
from telapa.rl.evaluate import EvalResult
from telapa.rl.networks import Params
from telapa.rl.ppo import Penalty, PPOState


@dataclass(frozen=True)
class TaskContext:
    """What a hook may use at a task boundary."""

    visit: Visit
    agent: Agent
    """The static agent of this visit's env (env, policy, optimizer, evaluation)."""
    key: jax.Array
    """Randomness for this visit's hook (derived from the run seed and the visit)."""
    init_params: Callable[[jax.Array], Params]
    """A fresh random initialisation of the policy."""
    progress: Callable[[str, int, int], None] | None = None
    """``progress(phase, done, total)`` for long method phases (the run's log)."""

    def report(self, phase: str) -> Callable[..., None] | None:
        """A callback ``(done, total, *rest)`` that reports ``phase`` to `progress`."""
        if self.progress is None:
            return None
        sink = self.progress
        return lambda done, total, *rest: sink(phase, int(done), int(total))

    def fresh_optimizer(self, params: Params) -> optax.OptState:
        return self.agent.optimizer.init(params)


class _Fixed(type):
    """Methods' metaclass: an object is fixed (`Method.__setattr__`) once the outermost
    ``__init__`` of its class has returned."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        method = super().__call__(*args, **kwargs)
        object.__setattr__(method, "_made", True)
        return method


class Method(metaclass=_Fixed):
    """The base of every method, and by itself Finetune: one PPO instance across the
    sequence, optimizer state kept.

    A new method is one subclass with its ``name`` (and ``section`` and ``settings_model``,
    if it has settings, declared beside it), listed in
    `telapa.continual.builtin.BUILTIN_METHODS`, or a plug-in (`telapa.plugins`). A run
    makes it as ``Method(settings, key=key, eval_episodes=n)``
    (`telapa.continual.registry.make_method`): its own settings section only, its
    randomness, and the episodes of each evaluation it will observe. What changes during
    a run is the method's `MethodState`, which every hook takes and returns; the object
    is fixed once made (a hook that assigns to ``self`` raises `AttributeError`)."""

    name: ClassVar[str] = "finetune"
    section: ClassVar[str | None] = None
    """The section of `MethodsConfig` (``methods.<section>`` in a run preset) holding this
    method's settings, given to it as ``self.settings``; None: it has none. Runs are
    grouped by the settings of their own method's section only
    (`telapa.report.results`), and a sweep's ``methods.<section>.*`` grid multiplies
    only the cells of the methods that declare that section."""
    settings_model: ClassVar[type[BaseModel] | None] = None
    """The pydantic model of ``section`` (every field with a default), built-in methods
    and plug-ins alike: the built-in methods' models are the fields of `MethodsConfig`
    (`telapa.continual.preset.methods_config`), a plug-in's is registered with its
    section. None: no section, or (a plug-in only) a built-in section read as it is."""
    reset_optimizer: ClassVar[bool] = False
    competence_reference: ClassVar[bool] = False
    """Whether a run's own best SRs are its competence targets tau_T when it is scored
    alone (`ContinualRun.metrics`; Scratch's, as the paper defines tau_T), else tau_min."""
    observes_features: ClassVar[bool] = False
    """Whether `observe` reads the evaluations' per-step features (else the runner's
    chunk evaluations keep none: they would be the largest transfer of a chunk)."""

    def __init__(self, settings: Any = None, *, key: jax.Array | None = None,
                 eval_episodes: int = 50):
        if hasattr(settings, "methods") and hasattr(settings, "eval_episodes"):
            # a plug-in written for the former signature, ``Method(config, *, key)``,
            # passes the whole run config on to its base (`make_method` warned)
            settings, eval_episodes = (
                None if self.section is None else settings.methods.section(self.section),
                settings.eval_episodes)
        if settings is None and self.settings_model is not None:
            settings = self.settings_model()
        self.settings: Any = settings
        """This method's settings: its section of the run preset, ``methods.<section>``,
        validated by ``settings_model`` (None without a section)."""
        self.eval_episodes = eval_episodes
        """Episodes of each evaluation the method observes (the run's ``eval_episodes``)."""
        self.key = jax.random.key(0) if key is None else key
        """The method's own randomness, drawn from the run seed by the runner (TeLAPA: the
        initial trajectory encoder)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_made", False):
            raise AttributeError(
                f"{type(self).__name__}.{name}: a method is fixed once made; its hooks "
                "return the next MethodState instead of assigning to the method")
        object.__setattr__(self, name, value)

    def network(self, network: NetworkConfig) -> NetworkConfig:
        """The network this method trains (DFF changes the activation)."""
        return network

    penalty: Penalty | None = None
    """Regulariser added to the PPO loss; its data is ``PPOState.penalty``."""

    def initial_penalty(self, params: Params) -> Any:
        """``PPOState.penalty`` at the start of the run (fixes its structure)."""
        return None

    def init(self, params: Params) -> MethodState:
        """The method's state at the start of the run (``params``: the run's initial
        policy): nothing stored, no decision logged."""
        return MethodState()

    def start_task(self, mstate: MethodState, learner: PPOState, ctx: TaskContext
                   ) -> tuple[PPOState, MethodState]:
        """The visit's initial PPO state, from the one the last visit ended with, and the
        method's next state. May be a generator that yields lockstep requests
        (`telapa.continual.lockstep`) and returns them."""
        if self.reset_optimizer:
            learner = learner.replace(opt_state=ctx.fresh_optimizer(learner.params))
        return learner, mstate

    def observe(self, mstate: MethodState, visit: Visit,
                kind: Literal["pre", "train", "post"], result: EvalResult) -> MethodState:
        """Sees every evaluation of a visit: before training, periodic, and the last one
        (TeLAPA stores these episode sets in its anchor and replay banks)."""
        return mstate

    def end_task(self, mstate: MethodState, learner: PPOState, ctx: TaskContext
                 ) -> MethodState:
        """The method's state after a visit (called after its post-evaluation). May be a
        generator that yields lockstep requests (`telapa.continual.lockstep`)."""
        return mstate

    def eval_params(self, mstate: MethodState, task: str, learner: PPOState) -> Params:
        """The policy evaluated on ``task`` at the end of the sequence."""
        return learner.params

    def parts_like(
        self, params: Params, tasks: list[str], agent_for: Callable[[str], Agent]
    ) -> dict[str, Any]:
        """The structure of the state's ``parts`` once ``tasks`` were stored (a
        checkpoint's parts are read into it); ``agent_for(task)`` gives the agent of a
        task's env. By default the parts of `init`, which storing does not change."""
        return dict(self.init(params).parts)

    def tables(self, mstate: MethodState) -> dict[str, pd.DataFrame]:
        """Method tables written beside the run's own (``NAME.csv``) at every checkpoint,
        e.g. TeLAPA's ``elites``: what reports and ``telapa inspect`` read."""
        return {}



__all__ = ["Method", "TaskContext"]
