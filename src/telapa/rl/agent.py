"""PPO as a static `Agent` and an explicit `TrainState` (the PureJaxRL / rejax split).

    agent = Agent("MiniGrid-DoorKey-5x5-v0", config)
    state = agent.start(agent.init_ppo(jax.random.key(0)), jax.random.key(1))
    state, history = agent.train(state, 200_000)        # pure in ``state``
    result = agent.evaluate(state.ppo.params, episodes=50, key=jax.random.key(2))

The agent holds what never changes during training: the env, its spec and family, the
policy, the optimizer and the compiled functions built from them. Everything that does
change is the `TrainState` pytree the caller owns: the PPO state (parameters, optimizer,
regulariser data), the rollout in progress (episode tracker, env states, observations,
rollout key) and the env steps trained since `start`. Given a state, `train` is
deterministic, so checkpointing a state and training it later gives exactly what training
it at once gives.

`Agent` is the interface and what both env backends share; ``Agent(env, config, ...)``
makes the implementation of the env's backend (`Agent.__new__`):

- `telapa.rl.jax_agent.JaxAgent` (an env id on ``backend="jax"``, or a `JaxEnv`): the
  envs are jitted. ``iterations_per_call`` training iterations (rollout ``lax.scan`` +
  PPO update) run as one jitted ``lax.scan``, and `train_and_evaluate`, the program of
  the continual runner's chunks and of its transfer probes, trains S stacked states
  (``vmap``ped over them) and evaluates them, as one jitted call whose results reach the
  host in one transfer (`fetch`).
- `telapa.rl.gym_agent.GymAgent` (an env id on ``backend="gymnasium"``, or a
  `GymVectorEnv`) and its `telapa.rl.gym_agent.NativeAgent` (``backend="native"``, or a
  `NativeVectorEnv`): the envs live on the host and the rollout is a host loop over the
  agent's `HostVectorEnv`, so a state has no env states (``env_state`` is None), it is
  valid only for the agent that produced it and only one state trains at a time. On
  native, `evaluate_batch` runs its S sets x E episodes as one batch of host envs.

One training iteration collects ``num_envs * n_steps`` env steps with the current policy
and applies one PPO update (`telapa.rl.ppo.make_learn`). Every compiled function an agent
keeps is in one cache, `Agent.program`, keyed by the program's name and shapes.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from telapa.config import TrainConfig
from telapa.envs import Backend
from telapa.envs.base import EnvSpec, JaxEnv, Obs
from telapa.envs.family import Competence
from telapa.envs.host import HostVectorEnv
from telapa.envs.registry import family_of
from telapa.io.clock import running
from telapa.rl.evaluate import EvalResult, check_positive
from telapa.rl.networks import Params
from telapa.rl.policy import Policy
from telapa.rl.ppo import Penalty, PPOState, make_learn, make_optimizer
from telapa.rl.train_state import (
    LOSS_METRICS,
    BatchMemberError,
    BatchProgressFn,
    ChunkResult,
    Metrics,
    ProgressFn,
    TrainState,
    check_finite,
    divergence_hint,
    episodes_key,
    metric_rows,
    stack_states,
    unstack_states,
)

MEMBER_AXIS = "members"
"""The name of the ``vmap`` axis over the states of a batch (`Agent.train_and_evaluate`):
`AutoReset` shares its level draws' branches over it."""


def fetch(tree: Any) -> Any:
    """Device arrays -> host arrays, in one transfer: the one place where
    `Agent.train_and_evaluate` and `Agent.evaluate_batch` read results back (tests count
    its calls)."""
    return jax.device_get(tree)


def shape_key(tree: Any) -> tuple:
    """A pytree's structure and its leaves' shapes and dtypes: the part of a program's
    cache key (`Agent.program`) that says which arguments it was compiled for."""
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, tuple((np.shape(x), str(getattr(x, "dtype", type(x)))) for x in leaves)


def first_steps(obs: Obs, steps: int) -> Obs:
    """(T, N, ...) observations -> the first ``steps`` of them in (step, env) order."""
    return jax.tree.map(lambda x: jnp.reshape(x, (-1, *x.shape[2:]))[:steps], obs)


_IMPLEMENTATIONS: dict[str, type[Agent]] = {}
"""The `Agent` of each backend, by name (filled by ``class X(Agent, backend=...)``)."""


class Agent(abc.ABC):
    """PPO on one environment, without state; see the module docstring.

    Args:
        env: an env id (created on ``backend``), a `JaxEnv`, or a `HostVectorEnv` (its
            ``num_envs`` must equal ``config.ppo.num_envs``).
        config: the `TrainConfig` (network, PPO, evaluation).
        backend: ``"jax"``, ``"gymnasium"`` or ``"native"`` when ``env`` is an id.
        total_steps: the training horizon, needed only for ``ppo.anneal_lr``.
        env_options: options for `telapa.envs.make` when ``env`` is an id.
        penalty: a regulariser added to the PPO loss (`telapa.rl.ppo.make_learn`); its
            data is ``TrainState.ppo.penalty``.
        intrinsic_beta: adds the episodic count bonus (`telapa.envs.intrinsic`) to the
            training rewards (never to evaluation); training-episode returns then
            include the bonus.
        gym_seed: the seed a gymnasium vector env is created with (every training reset
            reseeds it from the state's key, so results do not depend on it).
        competence: the score of a set of returns (a curriculum task's ``success``);
            None: the env family's (`EnvFamily.competence`).
    """

    backend: ClassVar[Backend]
    """``"jax"``, ``"gymnasium"`` or ``"native"``: where the envs run."""

    def __init_subclass__(cls, backend: Backend | None = None, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if backend is not None:
            cls.backend = backend
            _IMPLEMENTATIONS[backend] = cls

    def __new__(cls, env: Any = None, *args: Any, backend: Backend = "jax", **kwargs: Any):
        """``Agent(...)`` makes the implementation of ``env``'s backend: for a host vector
        env (`HostVectorEnv`) its ``backend``'s (`GymAgent`, `NativeAgent`), for an id
        ``backend``'s, else `JaxAgent`."""
        if cls is Agent:
            if isinstance(env, HostVectorEnv):
                backend = env.backend
            elif not isinstance(env, str):
                backend = "jax"
            if backend not in _IMPLEMENTATIONS:
                raise ValueError(f"unknown backend {backend!r}; expected one of "
                                 f"{', '.join(map(repr, _IMPLEMENTATIONS))}")
            cls = _IMPLEMENTATIONS[backend]
        return super().__new__(cls)

    def __init__(
        self,
        env: str | JaxEnv | HostVectorEnv,
        config: TrainConfig,
        *,
        backend: Backend = "jax",
        total_steps: int | None = None,
        env_options: dict[str, Any] | None = None,
        penalty: Penalty | None = None,
        intrinsic_beta: float | None = None,
        gym_seed: int = 0,
        competence: Competence | None = None,
    ):
        self.config = config
        ppo = config.ppo
        self.env_options = dict(env_options or {})
        self.compile_s = 0.0
        """Seconds spent compiling training calls (excluded from throughput)."""
        self._programs: dict[Any, Callable] = {}
        if intrinsic_beta and not isinstance(env, str):
            raise ValueError("intrinsic_beta needs an env id (the agent wraps the env)")
        self.env = self._open(env, backend, intrinsic_beta, gym_seed)
        self.spec: EnvSpec = self.env.spec
        self.family = family_of(self.spec.env_id)
        """The env family (`telapa.envs.family`): competence, sketch, trajectory codec."""
        self.competence = competence or self.family.competence(self.spec.env_id)
        self.policy = Policy.create(self.spec, config.network)
        self.iterations_per_call = self._iterations_per_call()
        """PPO iterations of one training call."""
        self.steps_per_call = ppo.rollout_size * self.iterations_per_call
        """Env steps of one training call (`train` trains whole calls)."""
        self.total_updates = (math.ceil(total_steps / self.steps_per_call)
                              * self.iterations_per_call if total_steps else None)
        """PPO iterations the lr schedule (``ppo.anneal_lr``) spans: ``total_steps`` in
        the whole calls `train` trains for it, so that no iteration of the last call
        runs at lr 0 (``telapa train --steps 300`` with 4 iterations of 32 steps per
        call trains 512 steps, and all four iterations are on the schedule)."""
        self.optimizer = make_optimizer(ppo, self.total_updates)
        self.penalty = penalty
        self._learn = make_learn(self.policy, ppo, self.optimizer, penalty,
                                 competence=self.competence)

    @abc.abstractmethod
    def _open(self, env: str | JaxEnv | HostVectorEnv, backend: Backend,
              intrinsic_beta: float | None, gym_seed: int) -> JaxEnv | HostVectorEnv:
        """The agent's env (made from an id) and whatever training on it needs."""

    def _iterations_per_call(self) -> int:
        """PPO iterations of one training call (`iterations_per_call`)."""
        return self.config.ppo.iterations_per_call

    # --- the program cache ----------------------------------------------------------

    def program(self, key: Any, build: Callable[[], Callable]) -> Callable:
        """The agent's cached function ``key``, built by ``build()`` on first use: every
        compiled function of the agent (its own, keyed by a name and the shapes they were
        compiled for, and those other modules run on this agent's env and policy, e.g. a
        method's hooks vmapped over seeds)."""
        if key not in self._programs:
            self._programs[key] = build()
        return self._programs[key]

    @property
    def live_programs(self) -> int:
        """How many programs the agent holds (`program`): built and not `release`d."""
        return len(self._programs)

    def release(self) -> None:
        """Drops every program the agent holds, so that JAX frees their executables (and
        the memory maps of their compiled code) once nothing else holds them; a later
        call builds each again (from JAX's persistent cache where one is set,
        `telapa.jaxcache`). Results do not change: a program compiles to the same
        executable."""
        self._programs.clear()

    def compiled(self, key: Any, build: Callable[[], Callable], *args: Any) -> Callable:
        """Program ``key``: ``jit(build())`` compiled ahead of time for ``args`` on first
        use; the seconds go to `compile_s`."""
        return self.program(key, lambda: self._timed(
            lambda: jax.jit(build()).lower(*args).compile()))

    def _timed(self, build: Callable[[], Any]) -> Any:
        """``build()``, its seconds added to `compile_s`."""
        start = running()
        made = build()
        self.compile_s += running() - start
        return made

    # --- state ----------------------------------------------------------------------

    def init_ppo(self, key: jax.Array, penalty: Any = None) -> PPOState:
        """Fresh random parameters, fresh optimizer state and the regulariser ``penalty``."""
        return self.fresh_ppo(self.policy.init(key), penalty)

    def fresh_ppo(self, params: Params, penalty: Any = None) -> PPOState:
        """``params`` with fresh Adam moments (and lr schedule) and ``penalty`` data."""
        return PPOState(params, self.optimizer.init(params), penalty)

    @abc.abstractmethod
    def start(self, ppo: PPOState, key: jax.Array, *, steps: int = 0) -> TrainState:
        """A state that trains ``ppo`` from new episodes in every training env (drawn
        from ``key``); the tracker starts empty and the step count at ``steps``."""

    # --- training -------------------------------------------------------------------

    @abc.abstractmethod
    def _training_call(self, state: TrainState) -> Callable:
        """``call(state) -> (state, metrics)``, compiled for ``state``: one training call
        (`iterations_per_call` iterations; metrics stacked on a leading axis)."""

    def compile(self, state: TrainState) -> float:
        """Compiles the training call for ``state`` now (else the first `train` does);
        returns `compile_s`."""
        self._training_call(state)
        return self.compile_s

    def train(
        self, state: TrainState, steps: int, progress: ProgressFn | None = None
    ) -> tuple[TrainState, list[Metrics]]:
        """Trains ``state`` for at least ``steps`` env steps (whole calls); returns the new
        state and one metrics dict per iteration (with ``step``, the state's step count
        after the iteration). ``progress(steps, metrics)`` is called after every call.
        Raises FloatingPointError on a non-finite loss or gradient."""
        call = self._training_call(state)
        done = int(state.steps)
        target = done + steps
        history: list[Metrics] = []
        per_iteration = self.config.ppo.rollout_size
        while done < target:
            state, metrics = call(state)
            rows = metric_rows(metrics, done + per_iteration, per_iteration)
            check_finite(rows, self.spec.env_id, self.config)
            done = rows[-1]["step"]
            history.extend(rows)
            if progress is not None:
                progress(done, rows)
        return state, history

    def train_and_evaluate(
        self,
        states: TrainState,
        steps: int,
        *,
        episodes: int,
        keys: jax.Array,
        features: bool = True,
        progress: BatchProgressFn | None = None,
    ) -> tuple[TrainState, ChunkResult]:
        """Trains S stacked states (`stack_states`, all at the same step) for ``steps``
        env steps, then evaluates each one's parameters for ``episodes`` episodes with
        its key ``keys[i]`` (0: no evaluation), as ONE jitted call: a ``lax.scan`` over
        the PPO iterations, ``vmap``ped over the states when S > 1, followed by one
        population evaluation of the S parameter sets (`make_population_evaluator`).
        The check for non-finite losses runs on the device (the training episodes'
        competence is part of the PPO update's metrics); metrics, evaluations and step
        counts come back in one `fetch`, and ``progress(steps, metrics)`` is called once.

        ``steps`` is rounded up to whole PPO iterations (``num_envs * n_steps``; not to
        ``iterations_per_call``, which only sets the length of `train`'s calls: the
        iterations, their keys and their results are those of `train`). Member i equals
        `train` then `evaluate` of member i alone (with S = 1 up to XLA's fusion of the
        longer program; with S > 1 also up to float reassociation in the batched update,
        docs/assumptions.md "Batches of seeds and probes"). With ``features`` False the
        evaluations keep no per-step features (``features`` has 0 steps). jax backend
        only; a non-finite loss raises `BatchMemberError` naming the first such member."""
        size = len(keys)
        if len(jax.tree.leaves(states)[0]) != size:
            raise ValueError(f"train_and_evaluate: {len(jax.tree.leaves(states)[0])} states "
                             f"but {size} evaluation keys")
        iterations = max(1, -(-steps // self.config.ppo.rollout_size))
        program = self._chunk_program(states, keys, iterations, episodes, features)
        states, out = program(states, keys)
        out = fetch(out)
        per_iteration = self.config.ppo.rollout_size
        metrics: list[list[Metrics]] = []
        for i in range(size):
            first = int(out["steps"][i]) - (iterations - 1) * per_iteration
            rows = metric_rows({k: v[i] for k, v in out["metrics"].items()}, first,
                               per_iteration)
            if not out["finite"][i]:
                try:
                    check_finite(rows, self.spec.env_id, self.config)
                except FloatingPointError as err:
                    raise BatchMemberError(i, err) from None
            metrics.append(rows)
        evaluations = []
        if episodes:
            returns, lengths, feats = out["evaluation"]
            evaluations = [EvalResult(returns[i], lengths[i], feats[i], self.competence)
                           for i in range(size)]
        if progress is not None:
            progress(metrics[0][-1]["step"], metrics)
        return states, ChunkResult(metrics, evaluations)

    def _chunk_program(self, states: TrainState, keys: jax.Array, iterations: int,
                       episodes: int, features: bool) -> Callable:
        """The compiled ``program(states, keys) -> (states, out)`` of `train_and_evaluate`
        (``out``: metrics, finite, steps and evaluation, on the device)."""
        raise ValueError(f"{self.spec.env_id}: train_and_evaluate runs on the jax backend")

    # --- evaluation -----------------------------------------------------------------

    def evaluate(
        self,
        params: Params,
        episodes: int | None,
        key: int | jax.Array,
        *,
        deterministic: bool | None = None,
        max_steps: int | None = None,
    ) -> EvalResult:
        """Evaluates ``params`` on fresh episodes drawn from ``key``.

        ``episodes`` (when None) and ``deterministic`` default to ``config.eval``;
        ``max_steps`` defaults to the env's time limit.
        """
        episodes = episodes or self.config.eval.episodes
        key = jax.random.key(key) if isinstance(key, (int, np.integer)) else key
        if deterministic is None:
            deterministic = self.config.eval.deterministic
        max_steps = max_steps or self.spec.max_steps
        if not max_steps:
            raise ValueError(f"{self.spec.env_id} has no time limit; pass max_steps")
        return self._evaluate(params, episodes, key, deterministic, max_steps)

    @abc.abstractmethod
    def _evaluate(self, params: Params, episodes: int, key: jax.Array, deterministic: bool,
                  max_steps: int) -> EvalResult:
        """`evaluate` with its defaults filled in."""

    def evaluate_batch(
        self,
        params: Params,
        episodes: int,
        keys: jax.Array,
        *,
        features: bool = True,
        feature_steps: int | None = None,
    ) -> list[EvalResult]:
        """`evaluate` of S stacked parameter sets (leading axis S), set i with
        ``keys[i]``, on fresh episodes in the config's policy mode and the env's time
        limit: on jax one population evaluation (`make_population_evaluator`, whose
        results do not depend on S) and one `fetch`; on native one batch of S * E host
        envs (`telapa.rl.evaluate.evaluate_native`); on gymnasium one `evaluate` after the
        other. Without ``features`` the results keep no per-step features; with
        ``feature_steps`` only those of the first ``feature_steps`` steps (what a caller
        truncates to anyway, e.g. the embedder's T_max: a host env then skips the sketch
        of later steps). Returns and lengths do not depend on either."""
        results = [self.evaluate(jax.tree.map(lambda x, i=i: x[i], params), episodes, key)
                   for i, key in enumerate(keys)]
        keep = 0 if not features else (None if feature_steps is None
                                        else check_positive("feature_steps", feature_steps))
        if keep is None:
            return results
        return [dataclasses.replace(r, features=r.features[..., :keep, :]) for r in results]

    def _fetch(self, tree: Any) -> Any:
        """`fetch` (looked up at call time: tests replace it)."""
        return fetch(tree)

    # --- observations ---------------------------------------------------------------

    @abc.abstractmethod
    def sample_observations(self, params: Params, steps: int, key: jax.Array) -> Obs:
        """Observations of ``steps`` env steps taken by ``params`` (sampled actions) in
        fresh episodes, e.g. for a Fisher estimate: ``ceil(steps / num_envs)`` steps of
        every env from fresh episodes, the first ``steps`` in (step, env) order."""

    def observation_sampler(self, steps: int, batch_axes: tuple[str, ...] = ()
                            ) -> Callable[[Params, jax.Array], Obs]:
        """The pure ``sample(params, key) -> obs`` of `sample_observations` (jax backend
        only); ``batch_axes``: the ``vmap`` axes it runs under (`AutoReset.step`)."""
        raise ValueError(f"{self.spec.env_id}: observation_sampler runs on the jax backend")


__all__ = ["LOSS_METRICS", "MEMBER_AXIS", "Agent", "BatchMemberError", "BatchProgressFn",
           "ChunkResult", "Metrics", "ProgressFn", "TrainState", "divergence_hint",
           "episodes_key", "fetch", "first_steps", "shape_key", "stack_states",
           "unstack_states"]
