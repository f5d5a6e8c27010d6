"""`PPOTrainer`: the PPO learner the continual loop drives.

    trainer = PPOTrainer("MiniGrid-DoorKey-5x5-v0", config, key=0)
    trainer.train(200_000)            # resumable: a second call continues
    result = trainer.evaluate(episodes=50)
    result.sr, result.mean_return, result.lengths, result.features

One training iteration collects ``num_envs * n_steps`` env steps with the current policy
and applies one PPO update (`telapa.rl.ppo.make_learn`, shared by both backends). On the
jax backend ``iterations_per_call`` iterations (rollout ``lax.scan`` + update) run as one
jitted ``lax.scan``; on the gymnasium backend the rollout is a host loop. Given the key,
training and evaluation are deterministic.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from telapa.config import TrainConfig
from telapa.envs import AutoReset, Backend, make
from telapa.envs.base import EnvSpec, JaxEnv, Obs
from telapa.envs.family import family_of
from telapa.envs.gym_backend import GymVectorEnv
from telapa.envs.intrinsic import EpisodicCountBonus, episodic_count_bonus_gym
from telapa.rl.evaluate import EvalResult, evaluate_gym, make_jax_evaluator
from telapa.rl.networks import Params
from telapa.rl.policy import Policy
from telapa.rl.ppo import (
    EpisodeTracker,
    Penalty,
    PPOState,
    Trajectory,
    make_learn,
    make_optimizer,
)
from telapa.rl.rollout import gym_rollout, make_act, make_jax_rollout

Metrics = dict[str, float]
ProgressFn = Callable[[int, list[Metrics]], None]

MAX_GYM_EVAL_ENVS = 16


def _as_key(key: int | jax.Array) -> jax.Array:
    return jax.random.key(key) if isinstance(key, (int, np.integer)) else key


def _host_metrics(stacked: dict[str, jax.Array]) -> list[Metrics]:
    """(K,)-stacked device metrics -> K host dicts."""
    host = jax.device_get(stacked)
    k = len(next(iter(host.values())))
    return [{name: float(v[i]) for name, v in host.items()} for i in range(k)]


class _JaxLoop:
    """A batch of `AutoReset` envs; ``k`` rollout+update iterations per jitted call."""

    def __init__(self, env: JaxEnv, policy: Policy, learn, config: TrainConfig):
        ppo = config.ppo
        self.env = AutoReset(env, ppo.num_envs)
        self.num_envs, self.k = ppo.num_envs, ppo.iterations_per_call
        self.steps_per_call = ppo.rollout_size * self.k
        rollout = make_jax_rollout(self.env, policy, ppo.n_steps)

        def iteration(carry, _):
            state, tracker, env_state, obs, key = carry
            env_state, obs, key, traj = rollout(state.params, env_state, obs, key)
            key, learn_key = jax.random.split(key)
            state, tracker, metrics = learn(state, tracker, traj, obs, learn_key)
            return (state, tracker, env_state, obs, key), metrics

        self._iterate = jax.jit(lambda carry: jax.lax.scan(iteration, carry, None, self.k))
        self._reset = jax.jit(self.env.reset)
        self._compiled = None

    def reset(self, key: jax.Array) -> None:
        key, reset_key = jax.random.split(key)
        env_state, obs = self._reset(reset_key)
        self._carry = (EpisodeTracker.zeros(self.num_envs), env_state, obs, key)

    def compile(self, state: PPOState) -> None:
        self._compiled = self._iterate.lower((state, *self._carry)).compile()

    def run(self, state: PPOState) -> tuple[PPOState, list[Metrics]]:
        (state, *self._carry), metrics = self._compiled((state, *self._carry))
        return state, _host_metrics(metrics)

    @property
    def carry(self) -> tuple:
        """(episode tracker, env states, observations, key): the rollout in progress."""
        return tuple(self._carry)

    @carry.setter
    def carry(self, value: tuple) -> None:
        self._carry = tuple(value)


class _GymLoop:
    """Host `GymVectorEnv`; one rollout+update iteration per call."""

    def __init__(self, env: GymVectorEnv, policy: Policy, learn, config: TrainConfig):
        self.env = env
        self.n_steps = config.ppo.n_steps
        self.steps_per_call = config.ppo.rollout_size
        self._act = jax.jit(make_act(policy))
        self._learn = jax.jit(learn)

    def reset(self, key: jax.Array) -> None:
        reset_key, self._key = jax.random.split(key)
        _, self._obs = self.env.reset(reset_key)
        self._tracker = EpisodeTracker.zeros(self.env.num_envs)

    def compile(self, state: PPOState) -> None:
        """Compiles ``act`` and ``learn`` for the shapes a rollout produces."""
        obs = jax.tree.map(jnp.asarray, self._obs)
        action, key = jax.eval_shape(self._act, state.params, obs, self._key)
        self._act = self._act.lower(state.params, obs, self._key).compile()
        n = self.env.num_envs
        step = (obs, action.action, action.log_prob, action.value,
                jax.ShapeDtypeStruct((n,), jnp.float32), jax.ShapeDtypeStruct((n,), bool),
                jax.ShapeDtypeStruct((n,), bool), obs)
        traj = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct((self.n_steps, *x.shape), x.dtype), step
        )
        self._learn = self._learn.lower(
            state, self._tracker, Trajectory(*traj), obs, key
        ).compile()

    def run(self, state: PPOState) -> tuple[PPOState, list[Metrics]]:
        self._obs, self._key, traj = gym_rollout(
            self.env, self._act, state.params, self._obs, self._key, self.n_steps
        )
        self._key, learn_key = jax.random.split(self._key)
        state, self._tracker, metrics = self._learn(
            state, self._tracker, traj, self._obs, learn_key
        )
        return state, _host_metrics(jax.tree.map(lambda x: x[None], metrics))

    @property
    def carry(self) -> tuple:
        raise NotImplementedError(
            "the gymnasium backend cannot snapshot its envs mid-rollout; checkpoint "
            "after reset_rollout() instead"
        )


class PPOTrainer:
    """PPO on one environment; see the module docstring.

    Args:
        env: an env id (created on ``backend``), a `JaxEnv`, or a `GymVectorEnv` (its
            ``num_envs`` must equal ``config.ppo.num_envs``).
        config: the `TrainConfig` (network, PPO, evaluation).
        key: an int seed or a JAX key; everything random derives from it.
        backend: ``"jax"`` or ``"gymnasium"`` when ``env`` is an id.
        total_steps: the training horizon, needed only for ``ppo.anneal_lr``.
        env_options: options for `telapa.envs.make` when ``env`` is an id.
        penalty: a regulariser added to the PPO loss (`telapa.rl.ppo.make_learn`); its
            data is ``trainer.state.penalty``.
        intrinsic_beta: adds the episodic count bonus (`telapa.envs.intrinsic`) to the
            training rewards (never to evaluation); training-episode returns then
            include the bonus.
    """

    def __init__(
        self,
        env: str | JaxEnv | GymVectorEnv,
        config: TrainConfig,
        key: int | jax.Array = 0,
        *,
        backend: Backend = "jax",
        total_steps: int | None = None,
        env_options: dict[str, Any] | None = None,
        penalty: Penalty | None = None,
        intrinsic_beta: float | None = None,
    ):
        self.config = config
        ppo = config.ppo
        key = _as_key(key)
        init_key, env_key, self._reset_key, self._eval_key = jax.random.split(key, 4)
        self._env_options = dict(env_options or {})
        train_env = None
        if isinstance(env, str):
            if backend == "gymnasium":
                seed = int(jax.random.randint(env_key, (), 0, 2**31 - 1))
                bonus = intrinsic_beta and partial(episodic_count_bonus_gym, beta=intrinsic_beta)
                env = make(env, "gymnasium", num_envs=ppo.num_envs, seed=seed,
                           wrapper=bonus or None, **self._env_options)
            else:
                env = make(env, backend, **self._env_options)
                if intrinsic_beta:
                    train_env = EpisodicCountBonus(env, intrinsic_beta)
        elif intrinsic_beta:
            raise ValueError("intrinsic_beta needs an env id (the trainer wraps the env)")
        self.backend: Backend = "gymnasium" if isinstance(env, GymVectorEnv) else "jax"
        if self.backend == "gymnasium" and env.num_envs != ppo.num_envs:
            raise ValueError(f"env has {env.num_envs} copies but ppo.num_envs={ppo.num_envs}")
        self.env = env
        self.spec: EnvSpec = env.spec
        self.family = family_of(self.spec.env_id)
        """The env family (`telapa.envs.family`): competence, sketch, trajectory codec."""
        self.competence = self.family.competence(self.spec.env_id)
        self.policy = Policy.create(self.spec, config.network)

        total_updates = math.ceil(total_steps / ppo.rollout_size) if total_steps else None
        self.optimizer = make_optimizer(ppo, total_updates)
        learn = make_learn(self.policy, ppo, self.optimizer, penalty)
        loop_cls = _GymLoop if self.backend == "gymnasium" else _JaxLoop
        self._loop = loop_cls(train_env or env, self.policy, learn, config)

        params = self.policy.init(init_key)
        self.state = PPOState(params, self.optimizer.init(params))
        self.steps = 0
        """Env steps trained so far (all envs together)."""
        self.compile_s = 0.0
        """Seconds spent compiling the training step (excluded from throughput)."""
        self._compiled = False
        self._jax_evaluators: dict[tuple[int, bool, int], Callable] = {}
        self._gym_eval_acts: dict[bool, Callable] = {}
        self._gym_eval_env: GymVectorEnv | None = None
        self._samplers: dict[int, Callable] = {}
        self.reset_rollout()

    # --- training -------------------------------------------------------------------

    def compile(self) -> float:
        """Compiles the training step now (else the first `train` call does); seconds."""
        if not self._compiled:
            start = time.perf_counter()
            self._loop.compile(self.state)
            self.compile_s += time.perf_counter() - start
            self._compiled = True
        return self.compile_s

    def train(self, steps: int, progress: ProgressFn | None = None) -> list[Metrics]:
        """Trains for at least ``steps`` env steps (whole iterations); continues where the
        previous call stopped. Returns one metrics dict per iteration; ``progress(steps,
        metrics)`` is called after every jitted call."""
        self.compile()
        history: list[Metrics] = []
        target = self.steps + steps
        while self.steps < target:
            self.state, metrics = self._loop.run(self.state)
            per_iteration = self._loop.steps_per_call // len(metrics)
            for m in metrics:
                self.steps += per_iteration
                m["step"] = self.steps
                if m["episodes"] > 0:
                    m["success_rate"] = self.competence.of_stats(
                        m["episode_return"], m["success_rate"])
                self._check_finite(m)
            history.extend(metrics)
            if progress is not None:
                progress(self.steps, metrics)
        return history

    def _check_finite(self, metrics: Metrics) -> None:
        bad = [k for k in ("loss", "pg_loss", "v_loss", "grad_norm") if not np.isfinite(metrics[k])]
        if bad:
            raise FloatingPointError(
                f"PPO on {self.spec.env_id}: non-finite {', '.join(bad)} at step {self.steps}"
            )

    # --- state ----------------------------------------------------------------------

    def get_params(self) -> Params:
        return self.state.params

    def set_params(self, params: Params) -> None:
        """Replaces the policy parameters (same structure); the optimizer state is kept."""
        expected = jax.tree.structure(self.state.params)
        if jax.tree.structure(params) != expected:
            raise ValueError("set_params: parameter tree does not match the network")
        self.state = self.state.replace(params=jax.tree.map(jnp.asarray, params))

    def reset_optimizer(self) -> None:
        """Fresh Adam moments (and lr schedule), e.g. when loading archived weights."""
        self.state = self.state.replace(opt_state=self.optimizer.init(self.state.params))

    def reset_rollout(self) -> None:
        """Starts new episodes in every training env and forgets partial episode stats."""
        self._reset_key, key = jax.random.split(self._reset_key)
        self._loop.reset(key)

    def reseed(self, key: int | jax.Array) -> None:
        """Re-derives the rollout and default evaluation keys from ``key`` and starts new
        episodes; parameters, optimizer and ``steps`` are kept."""
        self._reset_key, self._eval_key = jax.random.split(_as_key(key))
        self.reset_rollout()

    def snapshot(self) -> dict[str, Any]:
        """Everything `train` depends on, as a pytree of arrays (for checkpoints): PPO
        state, the rollout in progress, keys and ``steps``. jax backend only."""
        return {
            "ppo": self.state,
            "rollout": self._loop.carry,
            "reset_key": self._reset_key,
            "eval_key": self._eval_key,
            "steps": np.int64(self.steps),
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Continues from a `snapshot` (same env, config and penalty); training then
        gives exactly what it would have given without the interruption."""
        self.state = snapshot["ppo"]
        self._loop.carry = snapshot["rollout"]
        self._reset_key, self._eval_key = snapshot["reset_key"], snapshot["eval_key"]
        self.steps = int(snapshot["steps"])

    def sample_observations(self, params: Params, steps: int, key: int | jax.Array) -> Obs:
        """Observations of ``steps`` env steps taken by ``params`` (sampled actions) in
        fresh episodes, e.g. for a Fisher estimate; the training rollout is untouched."""
        key = _as_key(key)
        n = self.config.ppo.num_envs
        n_steps = math.ceil(steps / n)
        if self.backend == "jax":
            if n_steps not in self._samplers:
                env = AutoReset(self.env, n)
                rollout = make_jax_rollout(env, self.policy, n_steps)

                def sample(params: Params, key: jax.Array) -> Obs:
                    reset_key, key = jax.random.split(key)
                    env_state, obs = env.reset(reset_key)
                    return rollout(params, env_state, obs, key)[3].obs

                self._samplers[n_steps] = jax.jit(sample)
            obs = self._samplers[n_steps](params, key)
        else:
            reset_key, key = jax.random.split(key)
            seed = int(jax.random.randint(reset_key, (), 0, 2**31 - 1))
            env = GymVectorEnv(self.spec.env_id, n, seed=seed, **self._env_options)
            _, first = env.reset(reset_key)
            obs = gym_rollout(env, self._gym_act(False), params, first, key, n_steps)[2].obs
            env.close()
        return jax.tree.map(lambda x: jnp.reshape(x, (-1, *x.shape[2:]))[:steps], obs)

    # --- evaluation -----------------------------------------------------------------

    def evaluate(
        self,
        params: Params | None = None,
        episodes: int | None = None,
        key: int | jax.Array | None = None,
        *,
        deterministic: bool | None = None,
        max_steps: int | None = None,
    ) -> EvalResult:
        """Evaluates ``params`` (default: the current ones) on fresh episodes.

        ``episodes`` and ``deterministic`` default to ``config.eval``; ``key`` defaults
        to a fixed key derived from the trainer's seed (the same episodes every call);
        ``max_steps`` defaults to the env's time limit.
        """
        params = self.state.params if params is None else params
        episodes = episodes or self.config.eval.episodes
        key = self._eval_key if key is None else _as_key(key)
        if deterministic is None:
            deterministic = self.config.eval.deterministic
        max_steps = max_steps or self.spec.max_steps
        if not max_steps:
            raise ValueError(f"{self.spec.env_id} has no time limit; pass max_steps")
        if self.backend == "jax":
            shape = (episodes, deterministic, max_steps)
            if shape not in self._jax_evaluators:
                self._jax_evaluators[shape] = jax.jit(
                    make_jax_evaluator(self.env, self.policy, episodes, max_steps, deterministic)
                )
            returns, lengths, feats = jax.device_get(self._jax_evaluators[shape](params, key))
            return EvalResult(returns, lengths, feats, self.competence)
        if self._gym_eval_env is None:
            n = self.config.eval.num_envs or min(self.config.eval.episodes, MAX_GYM_EVAL_ENVS)
            self._gym_eval_env = GymVectorEnv(self.spec.env_id, n, **self._env_options)
        act = self._gym_act(deterministic)
        result = evaluate_gym(self._gym_eval_env, act, params, episodes, key, max_steps)
        return dataclasses.replace(result, competence=self.competence)

    def _gym_act(self, deterministic: bool) -> Callable:
        if deterministic not in self._gym_eval_acts:
            self._gym_eval_acts[deterministic] = jax.jit(make_act(self.policy, deterministic))
        return self._gym_eval_acts[deterministic]

