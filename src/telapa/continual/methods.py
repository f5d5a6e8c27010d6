"""Continual-learning methods as small objects with hooks (paper Sec. 4, App. B).

The continual loop (`telapa.continual.runner`) carries one `PPOState` (parameters,
optimizer state, regulariser data) across task visits and calls, per visit,

    state = method.start_task(state, ctx)   # choose the initialisation
    ... PPO training with ``method.penalty`` added to the loss ...
    method.end_task(state, ctx)             # store, estimate, snapshot

and at the end evaluates ``method.eval_params(task, state)`` on every task. A batch of
seeds calls the class's `Method.start_tasks` and `Method.end_tasks` with the S seeds'
methods, states and contexts at once: the methods whose hooks are device maths
(optimizer resets, Scratch's initialisation, Shrink & Perturb, EWC's task end)
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
from flax import struct
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

    def legacy_layout(self, params: Params, tasks: list[str],
                      agent_for: Callable[[str], Agent]) -> LegacyLayout | None:
        """The checkpoint layout earlier versions of this method wrote, if it changed
        since (templates as `state_like`'s arguments give them), read when a checkpoint
        does not match today's; None: it never changed."""
        return None

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
        return _with_fresh_optimizers(agent, states, _fresh_params(ctxs))


def _fresh_params(ctxs: Sequence[TaskContext]) -> list[Params]:
    """``ctx.init_params(ctx.key)`` of every context, as one program over them
    (`_seed_inits`)."""
    keys = jnp.stack([c.key for c in ctxs])
    return _unstack(_seed_inits(ctxs[0].agent, ctxs[0].init_params)(keys), len(ctxs))


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
        """Each seed's bank decides its start, as in `start_task`; the seeds that start
        from scratch draw their initialisations as one program, and every seed's fresh
        optimizer is one program (with S = 1: `start_task`)."""
        if len(methods) == 1:
            return [methods[0].start_task(states[0], ctxs[0])]
        params = [m.bank.get(c.visit.task) for m, c in zip(methods, ctxs, strict=True)]
        fresh = [i for i, p in enumerate(params) if p is None]
        if fresh:
            drawn = _fresh_params([ctxs[i] for i in fresh])
            for i, p in zip(fresh, drawn, strict=True):
                params[i] = p
        return _with_fresh_optimizers(ctxs[0].agent, states, params)

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


@dataclass(frozen=True)
class LegacyLayout:
    """A checkpoint layout that earlier versions of a method wrote, and how it reads into
    today's: the templates of its ``PPOState.penalty`` (in ``learner.npz`` and
    ``train_state.npz``) and of its method parts, and their conversions."""

    penalty: Any
    parts: dict[str, Any]
    convert_penalty: Callable[[Any], Any]
    convert_parts: Callable[[dict[str, Any]], dict[str, Any]]


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

    def __init__(self, config: RunConfig, *, key: jax.Array | None = None):
        super().__init__(config, key=key)
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

    @classmethod
    def start_tasks(cls, methods, states, ctxs) -> list[PPOState]:
        started = super().start_tasks(methods, states, ctxs)
        return [s.replace(penalty=m._data) for m, s in zip(methods, started, strict=True)]

    def state(self) -> dict[str, Any]:
        return {"anchor": self._data.anchor, "weight": self._data.weight}

    def load_state(self, tree: dict[str, Any]) -> None:
        self._data = self._with(tree["anchor"], tree["weight"])

    def state_like(
        self, params: Params, tasks: list[str], agent_for: Callable[[str], Agent]
    ) -> dict[str, Any]:
        return {"anchor": params, "weight": self.initial_weight(params)}


class L2Init(QuadraticPenalty):
    """Transfer-style init with ``lam * ||theta - theta_0||^2`` (Kumar et al. 2023),
    theta_0 the run's initial parameters: `QuadraticPenalty` with ``c = lam`` and ``u_i =
    1`` (one scalar per leaf), whose anchor and weights never change."""

    name = "l2init"
    section = "l2init"

    @property
    def scale(self) -> float:
        return self.settings.lam

    def initial_weight(self, params: Params) -> Params:
        return jax.tree.map(lambda p: jnp.ones((), p.dtype), params)

    def legacy_layout(self, params: Params, tasks: list[str],
                      agent_for: Callable[[str], Agent]) -> LegacyLayout:
        """Before the quadratic penalty: ``{"anchor": theta_0}`` as penalty and state."""
        def convert(tree: dict[str, Any]) -> QuadraticData:
            return self._with(tree["anchor"], self.initial_weight(tree["anchor"]))
        return LegacyLayout(
            penalty={"anchor": params}, parts={"anchor": params},
            convert_penalty=convert,
            convert_parts=lambda parts: self.state_like(parts["anchor"], tasks, agent_for))


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


class EWC(QuadraticPenalty):
    """Transfer-style init with online EWC: ``(lam / 2) sum_i F_i (theta_i - theta*_i)^2``.

    At each task end the Fisher of the finished task's policy is estimated from
    ``fisher_steps`` extra env steps and accumulated as ``F <- decay F + F_new``;
    ``theta*`` becomes the finished task's parameters (Schwarz et al. 2018):
    `QuadraticPenalty` with ``c = lam / 2``, ``u = F`` (`accumulate_quadratic`).
    """

    name = "ewc"
    section = "ewc"

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

    @classmethod
    def end_tasks(cls, methods, states, ctxs, *, vmap: bool | None = None) -> None:
        """The S seeds' Fisher estimates and boundary updates as one program over the
        seeds (jax backend; the same samples and results as `end_task` seed after seed,
        up to float reassociation).

        ``vmap`` (default: on accelerators) batches the seeds; otherwise the program is a
        ``lax.map``, a loop over the seeds inside one call. The per-sample gradients of S
        different parameter sets are S x 256 small matrix products per chunk: batched
        on a 2-core CPU they ran 1.26x (S = 5) and 1.38x (S = 8) slower than the host loop
        they replaced, where the loop runs each seed's products as the single seed does
        (BENCHMARKS.md, "Visits as compiled programs")."""
        agent = ctxs[0].agent
        if len(methods) == 1 or agent.backend != "jax":
            return super().end_tasks(methods, states, ctxs)
        settings = methods[0].settings
        steps, decay, axis = settings.fisher_steps, settings.decay, "seeds"
        vmap = jax.default_backend() != "cpu" if vmap is None else vmap

        def build() -> Callable:
            fisher = fisher_program(agent, steps, batch_axes=(axis,) if vmap else ())

            def boundary(data: QuadraticData, params: Params, key: jax.Array):
                return accumulate_quadratic(data, params, fisher(params, key), decay=decay)
            if vmap:
                return jax.jit(jax.vmap(boundary, axis_name=axis))
            return jax.jit(lambda *seeds: jax.lax.map(lambda one: boundary(*one), seeds))

        boundary = agent.program(("ewc-boundary", steps, decay, vmap), build)
        data = boundary(_stack([m._data for m in methods]), _stack([s.params for s in states]),
                        jnp.stack([c.key for c in ctxs]))
        for method, new in zip(methods, _unstack(data, len(methods)), strict=True):
            method._data = new
            method.extra_env_steps += steps

    def legacy_layout(self, params: Params, tasks: list[str],
                      agent_for: Callable[[str], Agent]) -> LegacyLayout:
        """Before the quadratic penalty: ``{"fisher": F, "anchor": theta*}`` as penalty
        and state (read exactly: ``u`` is F)."""
        def convert(tree: dict[str, Any]) -> QuadraticData:
            return self._with(tree["anchor"], tree["fisher"])
        old = {"fisher": params, "anchor": params}
        return LegacyLayout(
            penalty=old, parts=old, convert_penalty=convert,
            convert_parts=lambda parts: {"anchor": parts["anchor"], "weight": parts["fisher"]})


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
