"""Continual-learning methods as small objects with hooks (paper Sec. 4, App. B).

The continual loop (`telapa.continual.runner`) carries one `PPOState` (parameters,
optimizer state, regulariser data) across task visits and calls, per visit,

    state = method.start_task(state, ctx)   # choose the initialisation
    ... PPO training with ``method.penalty`` added to the loss ...
    method.end_task(state, ctx)             # store, estimate, snapshot

and at the end evaluates ``method.eval_params(task, state)`` on every task. Hooks are
written for one seed: a batch of seeds (``telapa run --seeds``) runs every seed's hook in
lockstep (`telapa.continual.lockstep`), and a hook with a step that has a batched form
(TeLAPA's probes, illumination and maintenance) yields that step as a request, which the
lockstep answers for all seeds at once. A method's
persistent state (policy bank, Fisher, anchors) is a pytree returned by ``state()`` and
reloaded by ``load_state``; its size is the "stored method state" of the paper's compute
table. TeLAPA plugs in through the same hooks.
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
from telapa.io import PhaseTimer
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


class Method:
    """Finetune: one PPO instance across the sequence, optimizer state kept.

    A new method is one subclass with its ``name`` (and ``section`` and ``settings_model``,
    if it has settings, declared beside it), listed in
    `telapa.continual.builtin.BUILTIN_METHODS`, or a plug-in (`telapa.plugins`). A run
    makes it as ``Method(settings, key=key, eval_episodes=n)``
    (`telapa.continual.registry.make_method`): its own settings section only, its
    randomness, and the episodes of each evaluation it will observe."""

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
        self.extra_env_steps = 0
        """Env steps the method spent outside the common PPO budget (paper App. G)."""
        self.timer = PhaseTimer()
        """The method's own phases (e.g. TeLAPA's illumination, probes, maintenance)."""
        self.log: list[dict[str, Any]] = []
        """JSON records of the method's decisions (e.g. TeLAPA's transfers), saved with
        every checkpoint and as ``method_log.json``."""

    def network(self, network: NetworkConfig) -> NetworkConfig:
        """The network this method trains (DFF changes the activation)."""
        return network

    penalty: Penalty | None = None
    """Regulariser added to the PPO loss; its data is ``PPOState.penalty``."""

    def initial_penalty(self, params: Params) -> Any:
        """``PPOState.penalty`` at the start of the run (fixes its structure)."""
        return None

    def start_task(self, state: PPOState, ctx: TaskContext) -> PPOState:
        """The visit's initial PPO state, from the state the last visit ended with. May be
        a generator that yields lockstep requests (`telapa.continual.lockstep`)."""
        if self.reset_optimizer:
            return state.replace(opt_state=ctx.fresh_optimizer(state.params))
        return state

    def observe(
        self, visit: Visit, kind: Literal["pre", "train", "post"], result: EvalResult
    ) -> None:
        """Sees every evaluation of a visit: before training, periodic, and the last one
        (TeLAPA stores these episode sets in its anchor and replay banks)."""

    def end_task(self, state: PPOState, ctx: TaskContext) -> None:
        """Called after a visit's post-evaluation. May be a generator that yields lockstep
        requests (`telapa.continual.lockstep`)."""

    def eval_params(self, task: str, state: PPOState) -> Params:
        """The policy evaluated on ``task`` at the end of the sequence."""
        return state.params

    # Persistent method state, for checkpoints and the compute table: named parts, each
    # a pytree replaced (not mutated) when it changes, so unchanged parts are not rewritten.
    def state(self) -> dict[str, Any]:
        return {}

    def load_state(self, tree: dict[str, Any]) -> None:
        """Inverse of `state` (``tree`` has the structure `state_like` gives)."""

    def state_like(
        self, params: Params, tasks: list[str], agent_for: Callable[[str], Agent]
    ) -> dict[str, Any]:
        """A template of `state` after ``tasks`` were stored (for loading checkpoints);
        ``agent_for(task)`` gives the agent of a task's env."""
        return {}

    def stored_tasks(self) -> list[str]:
        return []

    def tables(self) -> dict[str, pd.DataFrame]:
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

    def start_task(self, state: PPOState, ctx: TaskContext) -> PPOState:
        params = ctx.init_params(ctx.key)
        return state.replace(params=params, opt_state=ctx.fresh_optimizer(params))


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

    def __init__(self, settings: Any = None, **kwargs: Any):
        super().__init__(settings, **kwargs)
        self.keep = self.settings.keep
        self.bank: dict[str, Params] = {}

    def start_task(self, state: PPOState, ctx: TaskContext) -> PPOState:
        stored = self.bank.get(ctx.visit.task)
        if stored is None:
            return super().start_task(state, ctx)
        return state.replace(params=stored, opt_state=ctx.fresh_optimizer(stored))

    def end_task(self, state: PPOState, ctx: TaskContext) -> None:
        if self.keep == "latest" or ctx.visit.task not in self.bank:
            self.bank[ctx.visit.task] = state.params

    def eval_params(self, task: str, state: PPOState) -> Params:
        return self.bank.get(task, state.params)

    def state(self) -> dict[str, Any]:
        return {"bank": dict(self.bank)}

    def load_state(self, tree: dict[str, Any]) -> None:
        self.bank = dict(tree["bank"])

    def state_like(
        self, params: Params, tasks: list[str], agent_for: Callable[[str], Agent]
    ) -> dict[str, Any]:
        return {"bank": {task: params for task in tasks}}

    def stored_tasks(self) -> list[str]:
        return list(self.bank)


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

    def __init__(self, settings: Any = None, **kwargs: Any):
        super().__init__(settings, **kwargs)
        self._data: QuadraticData | None = None

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

    def initial_penalty(self, params: Params) -> QuadraticData:
        self._data = self._with(params, self.initial_weight(params))
        return self._data

    def start_task(self, state: PPOState, ctx: TaskContext) -> PPOState:
        return super().start_task(state, ctx).replace(penalty=self._data)

    def state(self) -> dict[str, Any]:
        return {"anchor": self._data.anchor, "weight": self._data.weight}

    def load_state(self, tree: dict[str, Any]) -> None:
        self._data = self._with(tree["anchor"], tree["weight"])

    def state_like(
        self, params: Params, tasks: list[str], agent_for: Callable[[str], Agent]
    ) -> dict[str, Any]:
        return {"anchor": params, "weight": self.initial_weight(params)}


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

    def end_task(self, state: PPOState, ctx: TaskContext) -> None:
        steps = self.settings.fisher_steps
        fisher = diagonal_fisher(ctx.agent, state.params, steps, ctx.key)
        self._data = self._accumulate(ctx.agent)(self._data, state.params, fisher)
        self.extra_env_steps += steps


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

    def start_task(self, state: PPOState, ctx: TaskContext) -> PPOState:
        state = super().start_task(state, ctx)
        if ctx.visit.index == 0:
            return state
        settings = self.settings
        leaves, treedef = jax.tree.flatten(state.params)
        keys = jax.random.split(ctx.key, len(leaves))
        shrunk = [
            settings.alpha * p + settings.noise * jax.random.normal(k, p.shape, p.dtype)
            for p, k in zip(leaves, keys, strict=True)
        ]
        params = jax.tree.unflatten(treedef, shrunk)
        return state.replace(params=params, opt_state=ctx.fresh_optimizer(params))
