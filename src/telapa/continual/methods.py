"""Continual-learning methods as small objects with hooks (paper Sec. 4, App. B).

The continual loop (`telapa.continual.runner`) carries one `PPOState` (parameters,
optimizer state, regulariser data) across task visits and calls, per visit,

    state = method.start_task(state, ctx)   # choose the initialisation
    ... PPO training with ``method.penalty`` added to the loss ...
    method.end_task(state, ctx)             # store, estimate, snapshot

and at the end evaluates ``method.eval_params(task, state)`` on every task. A method's
persistent state (policy bank, Fisher, anchors) is a pytree returned by ``state()`` and
reloaded by ``load_state``; its size is the "stored method state" of the paper's compute
table. TeLAPA plugs in through the same hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import jax
import jax.numpy as jnp
import optax
import pandas as pd

from telapa.config import NetworkConfig
from telapa.continual.curriculum import Visit
from telapa.continual.preset import RunConfig
from telapa.io import PhaseTimer
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


class Method:
    """Finetune: one PPO instance across the sequence, optimizer state kept.

    A new method is one subclass with its ``name`` (and ``section``, if it has settings),
    listed in `telapa.continual.registry.METHODS`."""

    name: ClassVar[str] = "finetune"
    section: ClassVar[str | None] = None
    """The section of `MethodsConfig` (``methods.<section>`` in a run preset) holding this
    method's settings, given to it as ``self.settings``; None: it has none. Runs are
    grouped by the settings of their own method's section only
    (`telapa.continual.results`), and a sweep's ``methods.<section>.*`` grid multiplies
    only the cells of the methods that declare that section."""
    reset_optimizer: ClassVar[bool] = False

    def __init__(self, config: RunConfig, *, key: jax.Array | None = None):
        self.config = config
        self.settings: Any = None if self.section is None else getattr(config.methods,
                                                                       self.section)
        """This method's settings, ``config.methods.<section>`` (None without a section)."""
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
        if self.reset_optimizer:
            return state.replace(opt_state=ctx.fresh_optimizer(state.params))
        return state

    def observe(
        self, visit: Visit, kind: Literal["pre", "train", "post"], result: EvalResult
    ) -> None:
        """Sees every evaluation of a visit: before training, periodic, and the last one
        (TeLAPA stores these episode sets in its anchor and replay banks)."""

    def end_task(self, state: PPOState, ctx: TaskContext) -> None:
        """Called after a visit's post-evaluation."""

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
    name = "finetune"


class FinetuneReset(Method):
    """Parameters carried to the next task; optimizer and rollout state reset."""

    name = "finetune-reset"
    reset_optimizer = True


class Scratch(Method):
    """Every visit starts from a fresh random initialisation."""

    name = "scratch"

    def start_task(self, state: PPOState, ctx: TaskContext) -> PPOState:
        params = ctx.init_params(ctx.key)
        return state.replace(params=params, opt_state=ctx.fresh_optimizer(params))


class ScratchReuse(Scratch):
    """Scratch on first visits; the stored policy of the task on revisits, and at the end.

    The bank keeps each task's first-visit policy (``keep="first"``, the paper) or its
    latest one (``keep="latest"``).
    """

    name = "scratch-reuse"
    section = "scratch_reuse"

    def __init__(self, config: RunConfig, *, key: jax.Array | None = None):
        super().__init__(config, key=key)
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


def _squared_distance(params: Params, anchor: Params, weight: Params | None = None) -> jax.Array:
    diffs = jax.tree.map(lambda p, a: (p - a) ** 2, params, anchor)
    if weight is not None:
        diffs = jax.tree.map(jnp.multiply, weight, diffs)
    return sum(jnp.sum(d) for d in jax.tree.leaves(diffs))


class L2Init(FinetuneReset):
    """Transfer-style init with ``lam * ||theta - theta_0||^2`` (Kumar et al. 2023),
    theta_0 the run's initial parameters."""

    name = "l2init"
    section = "l2init"

    def __init__(self, config: RunConfig, *, key: jax.Array | None = None):
        super().__init__(config, key=key)
        lam = self.settings.lam
        self.penalty = lambda params, data: lam * _squared_distance(params, data["anchor"])
        self._anchor: Params | None = None

    def initial_penalty(self, params: Params) -> Any:
        self._anchor = params
        return {"anchor": params}

    def state(self) -> dict[str, Any]:
        return {"anchor": self._anchor}

    def load_state(self, tree: dict[str, Any]) -> None:
        self._anchor = tree["anchor"]

    def state_like(
        self, params: Params, tasks: list[str], agent_for: Callable[[str], Agent]
    ) -> dict[str, Any]:
        return {"anchor": params}


def diagonal_fisher(
    agent: Agent, params: Params, steps: int, key: jax.Array, chunk: int = 256
) -> Params:
    """``F_i = E_{s ~ pi, a ~ pi(.|s)}[(d log pi(a|s) / d theta_i)^2]`` over ``steps`` states
    visited by ``params`` on the agent's env (Kirkpatrick et al. 2017, eq. 3); per-sample
    gradients are taken ``chunk`` states at a time."""
    obs_key, action_key = jax.random.split(key)
    obs = agent.sample_observations(params, steps, obs_key)
    policy = agent.policy

    def log_prob(p: Params, single_obs, k: jax.Array) -> jax.Array:
        dist, _ = policy(p, jax.tree.map(lambda x: x[None], single_obs))
        return dist.log_prob(jax.lax.stop_gradient(dist.sample(k)))[0]

    @jax.jit
    def squared_grad_sum(params: Params, batch, keys: jax.Array) -> Params:
        grads = jax.vmap(jax.grad(log_prob), in_axes=(None, 0, 0))(params, batch, keys)
        return jax.tree.map(lambda g: jnp.sum(g**2, axis=0), grads)

    keys = jax.random.split(action_key, steps)
    total = jax.tree.map(jnp.zeros_like, params)
    for start in range(0, steps, chunk):
        part = slice(start, start + chunk)
        batch = jax.tree.map(lambda x, part=part: x[part], obs)
        total = jax.tree.map(jnp.add, total, squared_grad_sum(params, batch, keys[part]))
    return jax.tree.map(lambda s: s / steps, total)


class EWC(FinetuneReset):
    """Transfer-style init with online EWC: ``(lam / 2) sum_i F_i (theta_i - theta*_i)^2``.

    At each task end the Fisher of the finished task's policy is estimated from
    ``fisher_steps`` extra env steps and accumulated as ``F <- decay F + F_new``;
    ``theta*`` becomes the finished task's parameters (Schwarz et al. 2018).
    """

    name = "ewc"
    section = "ewc"

    def __init__(self, config: RunConfig, *, key: jax.Array | None = None):
        super().__init__(config, key=key)
        lam = self.settings.lam
        self.penalty = lambda params, data: 0.5 * lam * _squared_distance(
            params, data["anchor"], data["fisher"]
        )
        self._data: dict[str, Params] | None = None

    def initial_penalty(self, params: Params) -> Any:
        self._data = {"fisher": jax.tree.map(jnp.zeros_like, params), "anchor": params}
        return self._data

    def start_task(self, state: PPOState, ctx: TaskContext) -> PPOState:
        return super().start_task(state, ctx).replace(penalty=self._data)

    def end_task(self, state: PPOState, ctx: TaskContext) -> None:
        steps = self.settings.fisher_steps
        fisher = diagonal_fisher(ctx.agent, state.params, steps, ctx.key)
        self.extra_env_steps += steps
        decay = self.settings.decay
        fisher = jax.tree.map(lambda old, new: decay * old + new, self._data["fisher"], fisher)
        self._data = {"fisher": fisher, "anchor": state.params}

    def state(self) -> dict[str, Any]:
        return dict(self._data)

    def load_state(self, tree: dict[str, Any]) -> None:
        self._data = dict(tree)

    def state_like(
        self, params: Params, tasks: list[str], agent_for: Callable[[str], Agent]
    ) -> dict[str, Any]:
        return {"fisher": params, "anchor": params}


class DFF(Finetune):
    """Finetune with Deep Fourier Features activations (Lewandowski et al. 2024)."""

    name = "dff"

    def network(self, network: NetworkConfig) -> NetworkConfig:
        return network.model_copy(update={"activation": "dff"})


class ShrinkPerturb(FinetuneReset):
    """Transfer-style init; at each boundary ``theta <- alpha theta + noise * eps``,
    ``eps ~ N(0, I)`` (Ash & Adams 2020)."""

    name = "shrink-perturb"
    section = "shrink_perturb"

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
