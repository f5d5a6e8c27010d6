"""Continual-learning methods as small objects with hooks (paper Sec. 4, App. B).

The continual loop (`telapa.continual.runner`) carries one `PPOState` (parameters,
optimizer state, regulariser data) across task visits, and the method's state, a
`MethodState` value (policy bank, Fisher, anchors, TeLAPA's archives), beside it. Hooks
are functions of those values that return the next ones; a method object holds only its
settings and key and never changes:

    mstate = method.init(params)                               # the run's start
    learner, mstate = method.start_task(mstate, learner, ctx)  # choose the initialisation
    mstate = method.observe(mstate, visit, kind, result)       # every evaluation
    ... PPO training with ``method.penalty`` added to the loss ...
    mstate = method.end_task(mstate, learner, ctx)             # store, estimate, snapshot

and at the end evaluates ``method.eval_params(mstate, task, learner)`` on every task.
Hooks are written for one seed: a batch of seeds (``telapa run --seeds``) runs every
seed's hook in lockstep (`telapa.continual.lockstep`), and a hook with a step that has a
batched form (TeLAPA's probes, illumination and maintenance) yields that step as a
request, which the lockstep answers for all seeds at once. A checkpoint saves the
`MethodState` as it is (its parts' sizes are the "stored method state" of the paper's
compute table) and reads it back into `parts_like`'s structure. TeLAPA plugs in through
the same hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Literal

import jax
import jax.numpy as jnp
import optax
import pandas as pd
from flax import struct
from pydantic import BaseModel, NonNegativeFloat, PositiveInt

from telapa.config import NetworkConfig, StrictModel, UnitInterval
from telapa.continual.curriculum import Visit
from telapa.continual.state import MethodState
from telapa.rl.agent import Agent
from telapa.rl.evaluate import EvalResult
from telapa.rl.fisher import diagonal_fisher
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
    """Finetune: one PPO instance across the sequence, optimizer state kept.

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


class Finetune(Method):
    """One PPO learner through the whole curriculum (paper baseline (iii)): each visit
    starts from the parameters and the optimizer state the previous visit ended with, and
    the end-of-sequence evaluation uses the final parameters for every task. The base of
    the single-model baselines."""

    name = "finetune"


class FinetuneReset(Method):
    """Finetune with the optimizer reset at every visit: the parameters are carried on,
    Adam's moments and step count start from zero. (Every method starts a visit's
    rollout afresh, on the new task's envs; that is not what sets this one apart.)"""

    name = "finetune-reset"
    reset_optimizer = True


class Scratch(Method):
    """Every visit starts from a fresh random initialisation."""

    name = "scratch"
    competence_reference = True

    def start_task(self, mstate: MethodState, learner: PPOState, ctx: TaskContext
                   ) -> tuple[PPOState, MethodState]:
        params = ctx.init_params(ctx.key)
        return learner.replace(params=params, opt_state=ctx.fresh_optimizer(params)), mstate


class ScratchReuseConfig(StrictModel):
    """Scratch-Reuse's bank (``methods.scratch_reuse``)."""

    keep: Literal["first", "latest"] = "first"
    """Which policy of a task the bank keeps: its first visit's (the paper) or the latest."""


class ScratchReuse(Scratch):
    """Scratch on first visits; the stored policy of the task on revisits, and at the end.

    The bank keeps each task's first-visit policy (``keep="first"``, the paper) or its
    latest one (``keep="latest"``).
    """

    name = "scratch-reuse"
    competence_reference = False
    section = "scratch_reuse"
    settings_model = ScratchReuseConfig

    def init(self, params: Params) -> MethodState:
        return MethodState(parts={"bank": {}})

    def start_task(self, mstate: MethodState, learner: PPOState, ctx: TaskContext
                   ) -> tuple[PPOState, MethodState]:
        stored = mstate.parts["bank"].get(ctx.visit.task)
        if stored is None:
            return super().start_task(mstate, learner, ctx)
        return learner.replace(params=stored, opt_state=ctx.fresh_optimizer(stored)), mstate

    def end_task(self, mstate: MethodState, learner: PPOState, ctx: TaskContext
                 ) -> MethodState:
        bank, task = mstate.parts["bank"], ctx.visit.task
        if self.settings.keep == "first" and task in bank:
            return mstate
        return mstate.with_parts(bank={**bank, task: learner.params}).storing(task)

    def eval_params(self, mstate: MethodState, task: str, learner: PPOState) -> Params:
        return mstate.parts["bank"].get(task, learner.params)

    def parts_like(
        self, params: Params, tasks: list[str], agent_for: Callable[[str], Agent]
    ) -> dict[str, Any]:
        return {"bank": {task: params for task in tasks}}


@struct.dataclass
class QuadraticData:
    """``PPOState.penalty`` of the quadratic penalty (`quadratic_penalty`): the anchor
    ``a``, the per-parameter factors ``u`` (a pytree like the parameters whose leaves
    broadcast against them: a scalar per leaf for uniform weights) and the scale ``c``."""

    anchor: Params
    weight: Params
    scale: jax.Array


def quadratic_penalty(params: Params, data: QuadraticData) -> jax.Array:
    """``P(theta) = c sum_i u_i (theta_i - a_i)^2``, the regulariser of L2Init and EWC:
    the per-parameter weights ``w_i = c u_i`` of each method are a scale and a factor
    (`QuadraticPenalty`). Summed leaf by leaf in the parameters' order."""
    terms = jax.tree.map(lambda p, a, u: u * (p - a) ** 2, params, data.anchor, data.weight)
    return data.scale * sum(jnp.sum(t) for t in jax.tree.leaves(terms))


def accumulate_quadratic(data: QuadraticData, params: Params, fresh: Params, *,
                         decay: float) -> QuadraticData:
    """The boundary update of a moving anchor: ``u <- decay u + u_new``, ``a <- theta``
    (``fresh`` is ``u_new``, ``params`` is theta)."""
    weight = jax.tree.map(lambda old, new: decay * old + new, data.weight, fresh)
    return data.replace(anchor=params, weight=weight)


class QuadraticPenalty(FinetuneReset):
    """Transfer-style init with a quadratic pull towards an anchor,

        P(theta) = c sum_i u_i (theta_i - a_i)^2        (`quadratic_penalty`),

    the same function (and so the same compiled PPO update) for every subclass; they
    differ in their weights ``w_i = c u_i`` and anchor: `L2Init` (``c = lam``, ``u_i =
    1``, ``a = theta_0`` for the whole run) and `EWC` (``c = lam / 2``, ``u = F`` the
    online diagonal Fisher, ``a`` the last finished task's parameters). The data lives in
    ``PPOState.penalty`` (a `QuadraticData`) and the method state (parts ``anchor`` and
    ``weight``; ``c`` comes from the settings). A visit starts with the method's data."""

    penalty = staticmethod(quadratic_penalty)

    @property
    def scale(self) -> float:
        """``c``."""
        raise NotImplementedError

    def initial_weight(self, params: Params) -> Params:
        """``u`` at the start of the run."""
        raise NotImplementedError

    def _with(self, anchor: Params, weight: Params) -> QuadraticData:
        return QuadraticData(anchor=anchor, weight=weight,
                             scale=jnp.asarray(self.scale, jnp.float32))

    def _data(self, mstate: MethodState) -> QuadraticData:
        """The penalty's data of ``mstate`` (its parts ``anchor`` and ``weight``)."""
        return self._with(mstate.parts["anchor"], mstate.parts["weight"])

    def initial_penalty(self, params: Params) -> QuadraticData:
        return self._with(params, self.initial_weight(params))

    def init(self, params: Params) -> MethodState:
        return MethodState(parts={"anchor": params, "weight": self.initial_weight(params)})

    def start_task(self, mstate: MethodState, learner: PPOState, ctx: TaskContext
                   ) -> tuple[PPOState, MethodState]:
        learner, mstate = super().start_task(mstate, learner, ctx)
        return learner.replace(penalty=self._data(mstate)), mstate


class L2InitConfig(StrictModel):
    """L2 Init (Kumar et al. 2023): ``lam * ||theta - theta_0||^2``."""

    lam: NonNegativeFloat = 1e-3


class L2Init(QuadraticPenalty):
    """Transfer-style init with ``lam * ||theta - theta_0||^2`` (Kumar et al. 2023),
    theta_0 the run's initial parameters: `QuadraticPenalty` with ``c = lam`` and ``u_i =
    1`` (one scalar per leaf), whose anchor and weights never change."""

    name = "l2init"
    section = "l2init"
    settings_model = L2InitConfig

    @property
    def scale(self) -> float:
        return self.settings.lam

    def initial_weight(self, params: Params) -> Params:
        return jax.tree.map(lambda p: jnp.ones((), p.dtype), params)


class EWCConfig(StrictModel):
    """Online EWC (Kirkpatrick et al. 2017; Schwarz et al. 2018), paper App. B grid."""

    lam: NonNegativeFloat = 10.0
    decay: UnitInterval = 0.8
    fisher_steps: PositiveInt = 2048
    """Env steps of the finished task's policy used to estimate the diagonal Fisher."""


class EWC(QuadraticPenalty):
    """Transfer-style init with online EWC: ``(lam / 2) sum_i F_i (theta_i - theta*_i)^2``.

    At each task end the Fisher of the finished task's policy is estimated from
    ``fisher_steps`` extra env steps and accumulated as ``F <- decay F + F_new``;
    ``theta*`` becomes the finished task's parameters (Schwarz et al. 2018):
    `QuadraticPenalty` with ``c = lam / 2``, ``u = F`` (`accumulate_quadratic`).
    """

    name = "ewc"
    section = "ewc"
    settings_model = EWCConfig

    @property
    def scale(self) -> float:
        return 0.5 * self.settings.lam

    def initial_weight(self, params: Params) -> Params:
        return jax.tree.map(jnp.zeros_like, params)

    def _accumulate(self, agent: Agent) -> Callable:
        """``accumulate(data, params, fisher) -> data`` (jitted)."""
        decay = self.settings.decay
        return agent.program(("ewc-accumulate", decay), lambda: jax.jit(
            partial(accumulate_quadratic, decay=decay)))

    def end_task(self, mstate: MethodState, learner: PPOState, ctx: TaskContext
                 ) -> MethodState:
        steps = self.settings.fisher_steps
        fisher = diagonal_fisher(ctx.agent, learner.params, steps, ctx.key)
        data = self._accumulate(ctx.agent)(self._data(mstate), learner.params, fisher)
        return mstate.with_parts(anchor=data.anchor, weight=data.weight).spent(steps)


class DFF(Finetune):
    """Finetune with Deep Fourier Features activations (Lewandowski et al. 2024)."""

    name = "dff"

    def network(self, network: NetworkConfig) -> NetworkConfig:
        return network.model_copy(update={"activation": "dff"})


class ShrinkPerturbConfig(StrictModel):
    """Shrink & Perturb (Ash & Adams 2020): ``theta <- alpha theta + noise * N(0, I)``."""

    alpha: UnitInterval = 0.99
    noise: NonNegativeFloat = 1e-3


class ShrinkPerturb(FinetuneReset):
    """Transfer-style init; at each boundary ``theta <- alpha theta + noise * eps``,
    ``eps ~ N(0, I)`` (Ash & Adams 2020)."""

    name = "shrink-perturb"
    section = "shrink_perturb"
    settings_model = ShrinkPerturbConfig

    def start_task(self, mstate: MethodState, learner: PPOState, ctx: TaskContext
                   ) -> tuple[PPOState, MethodState]:
        learner, mstate = super().start_task(mstate, learner, ctx)
        if ctx.visit.index == 0:
            return learner, mstate
        settings = self.settings
        leaves, treedef = jax.tree.flatten(learner.params)
        keys = jax.random.split(ctx.key, len(leaves))
        shrunk = [
            settings.alpha * p + settings.noise * jax.random.normal(k, p.shape, p.dtype)
            for p, k in zip(leaves, keys, strict=True)
        ]
        params = jax.tree.unflatten(treedef, shrunk)
        return learner.replace(params=params, opt_state=ctx.fresh_optimizer(params)), mstate
