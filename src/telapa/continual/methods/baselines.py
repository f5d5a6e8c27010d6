"""The paper's baselines (Sec. 4, App. B) as `Method` subclasses: Finetune,
Finetune-Reset, Scratch, Scratch-Reuse, the quadratic penalties L2Init and EWC, DFF and
Shrink & Perturb. Each is its hooks over a `MethodState` and, where it has settings, its
settings model beside it."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Literal

import jax
import jax.numpy as jnp
from flax import struct
from pydantic import NonNegativeFloat, PositiveInt

from telapa.config import NetworkConfig, StrictModel, UnitInterval
from telapa.continual.methods.base import Method, TaskContext
from telapa.continual.state import MethodState
from telapa.rl.agent import Agent
from telapa.rl.fisher import diagonal_fisher
from telapa.rl.networks import Params
from telapa.rl.ppo import PPOState


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


__all__ = ["DFF", "EWC", "EWCConfig", "Finetune", "FinetuneReset", "L2Init",
           "L2InitConfig", "QuadraticData", "QuadraticPenalty", "Scratch", "ScratchReuse",
           "ScratchReuseConfig", "ShrinkPerturb", "ShrinkPerturbConfig",
           "accumulate_quadratic", "quadratic_penalty"]
