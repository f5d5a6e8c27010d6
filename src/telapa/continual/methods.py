"""Continual-learning methods as small objects with hooks (paper Sec. 4, App. B).

The continual loop (`telapa.continual.runner`) carries one `PPOState` (parameters,
optimizer state, regulariser data) across task visits and calls, per visit,

    state = method.start_task(state, ctx)   # choose the initialisation
    ... PPO training with ``method.penalty`` added to the loss ...
    method.end_task(state, ctx)             # store, estimate, snapshot

and at the end evaluates ``method.eval_params(task, state)`` on every task. A batch of
seeds calls the class's `Method.start_tasks` and `Method.end_tasks` with the S seeds'
methods, states and contexts at once: the methods whose hooks are device maths
(optimizer resets, Scratch's initialisation, Shrink & Perturb, EWC's Fisher estimate)
run them as one program ``vmap``ped over the seeds; the others call the per-seed hook
one seed after the other. A method's
persistent state (policy bank, Fisher, anchors) is a pytree returned by ``state()`` and
reloaded by ``load_state``; its size is the "stored method state" of the paper's compute
table. TeLAPA plugs in through the same hooks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Literal

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
from pydantic import BaseModel

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


def _stack(trees: Sequence[Any]) -> Any:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def _unstack(tree: Any, size: int) -> list[Any]:
    return [jax.tree.map(lambda x, i=i: x[i], tree) for i in range(size)]


def _seed_program(agent: Agent, name: str, fn: Callable) -> Callable:
    """``jit(vmap(fn))`` over the seeds of a batch, cached on ``agent`` under ``name``."""
    return agent.program(("method", name), lambda: jax.jit(jax.vmap(fn)))


def _seed_inits(agent: Agent, init: Callable[[jax.Array], Params]) -> Callable:
    """``init`` of each key of a ``(S,)`` key array as ONE jitted program: a ``lax.map``
    (a loop over the seeds), not a ``vmap``. Networks draw orthogonal kernels through a
    QR decomposition, and a ``vmap``ped init turns each into a batched QR, which
    jaxlib's CPU LAPACK kernel splits over XLA's intra-op thread pool and waits for
    (``ParallelBatchMap``): two such QRs running at once on a two-thread pool each hold a
    thread while waiting for the other's work, and the program never ends (seen in a
    sweep worker on 2 cores, tests/continual/test_methods.py). The loop gives every seed
    an unbatched QR, computed as its own `Policy.init` computes it."""
    return agent.program(("method", "seed-inits"),
                         lambda: jax.jit(lambda keys: jax.lax.map(init, keys)))


def _with_fresh_optimizers(agent: Agent, states: Sequence[PPOState],
                           params: Sequence[Params]) -> list[PPOState]:
    """``states`` with ``params`` and fresh optimizer states, made by one program."""
    opt = _seed_program(agent, "fresh-optimizer", agent.optimizer.init)(_stack(params))
    return [s.replace(params=p, opt_state=o) for s, p, o in
            zip(states, params, _unstack(opt, len(states)), strict=True)]


class Method:
    """Finetune: one PPO instance across the sequence, optimizer state kept.

    A new method is one subclass with its ``name`` (and ``section``, if it has settings),
    listed in `telapa.continual.registry.METHODS`, or a plug-in (`telapa.plugins`)."""

    name: ClassVar[str] = "finetune"
    section: ClassVar[str | None] = None
    """The section of `MethodsConfig` (``methods.<section>`` in a run preset) holding this
    method's settings, given to it as ``self.settings``; None: it has none. Runs are
    grouped by the settings of their own method's section only
    (`telapa.continual.results`), and a sweep's ``methods.<section>.*`` grid multiplies
    only the cells of the methods that declare that section."""
    settings_model: ClassVar[type[BaseModel] | None] = None
    """The pydantic model of ``section`` when it is the method's own (a plug-in's: the
    built-in sections are fields of `MethodsConfig`); None: a built-in section."""
    reset_optimizer: ClassVar[bool] = False
    observes_features: ClassVar[bool] = False
    """Whether `observe` reads the evaluations' per-step features (else the runner's
    chunk evaluations keep none: they would be the largest transfer of a chunk)."""

    def __init__(self, config: RunConfig, *, key: jax.Array | None = None):
        self.config = config
        self.settings: Any = None if self.section is None else config.methods.section(
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

    @classmethod
    def start_tasks(cls, methods: Sequence[Method], states: Sequence[PPOState],
                    ctxs: Sequence[TaskContext]) -> list[PPOState]:
        """`start_task` of S runs of this method at one visit (one method, state and
        context per seed): here one seed after the other; a method whose start is device
        maths runs it as one program over the seeds (with S = 1: `start_task`)."""
        return [m.start_task(s, c) for m, s, c in zip(methods, states, ctxs, strict=True)]

    @classmethod
    def end_tasks(cls, methods: Sequence[Method], states: Sequence[PPOState],
                  ctxs: Sequence[TaskContext]) -> None:
        """`end_task` of S runs of this method at one visit; see `start_tasks`."""
        for method, state, ctx in zip(methods, states, ctxs, strict=True):
            method.end_task(state, ctx)

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

    @classmethod
    def start_tasks(cls, methods, states, ctxs) -> list[PPOState]:
        if len(methods) == 1:
            return super().start_tasks(methods, states, ctxs)
        return _with_fresh_optimizers(ctxs[0].agent, states, [s.params for s in states])


class Scratch(Method):
    """Every visit starts from a fresh random initialisation."""

    name = "scratch"

    def start_task(self, state: PPOState, ctx: TaskContext) -> PPOState:
        params = ctx.init_params(ctx.key)
        return state.replace(params=params, opt_state=ctx.fresh_optimizer(params))

    @classmethod
    def start_tasks(cls, methods, states, ctxs) -> list[PPOState]:
        if len(methods) == 1:
            return super().start_tasks(methods, states, ctxs)
        agent = ctxs[0].agent
        keys = jnp.stack([c.key for c in ctxs])
        params = _seed_inits(agent, ctxs[0].init_params)(keys)
        return _with_fresh_optimizers(agent, states, _unstack(params, len(states)))


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

    @classmethod
    def start_tasks(cls, methods, states, ctxs) -> list[PPOState]:
        """One seed after the other (each seed's bank decides its start)."""
        return [m.start_task(s, c) for m, s, c in zip(methods, states, ctxs, strict=True)]

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
    gradients are taken ``chunk`` states at a time. On jax one compiled program (the
    sampling rollout and a ``lax.scan`` over the chunks, `fisher_program`); on gymnasium
    the states are sampled on the host and the gradients taken by the same scan."""
    if agent.backend == "jax":
        fisher = agent.program(("fisher", steps, chunk, False),
                               lambda: jax.jit(fisher_program(agent, steps, chunk)))
        return fisher(params, key)
    obs_key, action_key = jax.random.split(key)
    obs = agent.sample_observations(params, steps, obs_key)
    of_observations = agent.program(
        ("fisher-of-observations", steps, chunk),
        lambda: jax.jit(partial(_fisher_of_observations, agent.policy, chunk=chunk)))
    return of_observations(params, obs, action_key)


def fisher_program(agent: Agent, steps: int, chunk: int = 256,
                   batch_axes: tuple[str, ...] = ()) -> Callable[[Params, jax.Array], Params]:
    """The pure ``fisher(params, key)`` of `diagonal_fisher` on the jax backend:
    ``obs_key, action_key = split(key)``, the states of `Agent.observation_sampler`
    with ``obs_key``, state j's action drawn with ``split(action_key, steps)[j]``;
    ``batch_axes``: the ``vmap`` axes it runs under."""
    sample = agent.observation_sampler(steps, batch_axes)

    def fisher(params: Params, key: jax.Array) -> Params:
        obs_key, action_key = jax.random.split(key)
        return _fisher_of_observations(agent.policy, params, sample(params, obs_key),
                                       action_key, chunk=chunk)

    return fisher


def _fisher_of_observations(policy, params: Params, obs, action_key: jax.Array, *,
                            chunk: int) -> Params:
    """The mean squared per-sample score over the states ``obs`` (leading axis N), the
    sum taken ``chunk`` states at a time in order by a ``lax.scan`` (a last partial chunk
    is filled with repeated states whose gradients are zeroed)."""
    steps = len(jax.tree.leaves(obs)[0])
    keys = jax.random.split(action_key, steps)
    chunks = -(-steps // chunk)
    if chunks * chunk > steps:  # repeat states to whole chunks, weight 0
        rows = np.arange(chunks * chunk) % steps
        obs, keys = jax.tree.map(lambda x: x[rows], (obs, keys))
    valid = jnp.asarray(np.arange(chunks * chunk) < steps)

    def log_prob(p: Params, single_obs, k: jax.Array) -> jax.Array:
        dist, _ = policy(p, jax.tree.map(lambda x: x[None], single_obs))
        return dist.log_prob(jax.lax.stop_gradient(dist.sample(k)))[0]

    def add_chunk(total: Params, i: jax.Array) -> tuple[Params, None]:
        part = jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, i * chunk, chunk),
                            (obs, keys, valid))
        batch, batch_keys, ok = part
        grads = jax.vmap(jax.grad(log_prob), in_axes=(None, 0, 0))(params, batch, batch_keys)
        if chunks * chunk > steps:
            grads = jax.tree.map(
                lambda g: jnp.where(ok.reshape((-1,) + (1,) * (g.ndim - 1)), g, 0.0), grads)
        sums = jax.tree.map(lambda g: jnp.sum(g**2, axis=0), grads)
        return jax.tree.map(jnp.add, total, sums), None

    total, _ = jax.lax.scan(add_chunk, jax.tree.map(jnp.zeros_like, params),
                            jnp.arange(chunks))
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

    @classmethod
    def start_tasks(cls, methods, states, ctxs) -> list[PPOState]:
        started = super().start_tasks(methods, states, ctxs)
        return [s.replace(penalty=m._data) for m, s in zip(methods, started, strict=True)]

    def end_task(self, state: PPOState, ctx: TaskContext) -> None:
        steps = self.settings.fisher_steps
        self._accumulate(diagonal_fisher(ctx.agent, state.params, steps, ctx.key), state)

    @classmethod
    def end_tasks(cls, methods, states, ctxs) -> None:
        """The S seeds' Fisher estimates as one program ``vmap``ped over the seeds (jax
        backend; the same samples and results as `end_task` seed after seed, up to float
        reassociation)."""
        agent = ctxs[0].agent
        if len(methods) == 1 or agent.backend != "jax":
            return super().end_tasks(methods, states, ctxs)
        steps = methods[0].settings.fisher_steps
        axis = "seeds"
        fisher = agent.program(("fisher", steps, 256, True), lambda: jax.jit(jax.vmap(
            fisher_program(agent, steps, batch_axes=(axis,)), axis_name=axis)))
        fishers = fisher(_stack([s.params for s in states]), jnp.stack([c.key for c in ctxs]))
        for method, state, new in zip(methods, states, _unstack(fishers, len(states)),
                                      strict=True):
            method._accumulate(new, state)

    def _accumulate(self, fisher: Params, state: PPOState) -> None:
        """``F <- decay F + F_new``, ``theta* <- theta`` after the Fisher of a task."""
        self.extra_env_steps += self.settings.fisher_steps
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

    @classmethod
    def start_tasks(cls, methods, states, ctxs) -> list[PPOState]:
        if len(methods) == 1 or ctxs[0].visit.index == 0:
            return super().start_tasks(methods, states, ctxs)
        settings = methods[0].settings

        def shrink_perturb(params: Params, key: jax.Array) -> Params:
            leaves, treedef = jax.tree.flatten(params)
            keys = jax.random.split(key, len(leaves))
            return jax.tree.unflatten(treedef, [
                settings.alpha * p + settings.noise * jax.random.normal(k, p.shape, p.dtype)
                for p, k in zip(leaves, keys, strict=True)])

        agent = ctxs[0].agent
        params = _seed_program(agent, f"shrink-perturb-{settings.alpha}-{settings.noise}",
                               shrink_perturb)(_stack([s.params for s in states]),
                                               jnp.stack([c.key for c in ctxs]))
        return _with_fresh_optimizers(agent, states, _unstack(params, len(states)))
