"""The `telapa.rl.agent.Agent` of the host backends, whose envs live on the host:
`GymAgent` on a `telapa.envs.gym_backend.GymVectorEnv` (``gymnasium``) and `NativeAgent`
on a `telapa.envs.mujoco.native.NativeVectorEnv` (``native``).

The rollout is a host loop over the agent's vector env (`telapa.rl.rollout.gym_rollout`)
with a jitted policy; the PPO update is the jitted `telapa.rl.ppo.make_learn` of the jax
backend. A state has no env states (``env_state`` is None: they are the vector env's),
so it is valid only for the agent that produced it and only one state trains at a time:
one training call is one PPO iteration, and there is no batched program
(`Agent.train_and_evaluate`, `Agent.observation_sampler`). The program cache
(`Agent.program`) holds ``("act", deterministic)`` (the jitted policy of host rollouts,
`gym_act`) and ``("gym-train", shapes)`` (the rollout's policy and the PPO update,
compiled for a state's shapes). `NativeAgent` evaluates one or S parameter sets as one
batch of S * E native envs (`telapa.rl.evaluate.evaluate_native`): for a network whose
mean numpy computes (`telapa.rl.host_policy.host_mean`: the MuJoCo family's), with the
mean in numpy and every step's noise drawn up front (`HostActions`, program
``("eval-noise", S, T, shape)``), else with the jitted policy vmapped over the sets,
program ``("act-sets", deterministic)``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from telapa.envs import Backend, make
from telapa.envs.base import Obs
from telapa.envs.host import HostVectorEnv
from telapa.envs.intrinsic import episodic_count_bonus_gym
from telapa.rl.agent import Agent, first_steps, shape_key
from telapa.rl.evaluate import EvalResult, evaluate_gym, evaluate_native
from telapa.rl.host_policy import (
    HostActions,
    host_mean,
    host_rollout,
    make_eval_noise,
    make_noise,
    make_score,
)
from telapa.rl.networks import Params
from telapa.rl.ppo import EpisodeTracker, PPOState, Trajectory
from telapa.rl.rollout import gym_rollout, make_act
from telapa.rl.train_state import TrainState

if TYPE_CHECKING:
    from telapa.envs.mujoco.native import NativeVectorEnv

MAX_GYM_EVAL_ENVS = 16
"""The most env copies of the evaluation env (when ``eval.num_envs`` is unset)."""


class GymAgent(Agent, backend="gymnasium"):
    """PPO on a host vector env (``Agent(env, config)`` with a `GymVectorEnv` or an id on
    ``backend="gymnasium"``); see `telapa.rl.agent.Agent` for the arguments."""

    def _open(self, env: str | HostVectorEnv, backend: Backend, intrinsic_beta: float | None,
              gym_seed: int) -> HostVectorEnv:
        """Makes ``env`` from an id on the agent's backend: ``num_envs`` copies seeded
        with ``gym_seed``, each with the count bonus of ``intrinsic_beta`` (gymnasium)."""
        ppo = self.config.ppo
        if isinstance(env, str):
            options = dict(num_envs=ppo.num_envs, seed=gym_seed, **self.env_options)
            if intrinsic_beta:
                if self.backend != "gymnasium":
                    raise ValueError(f"{env}: the count bonus (intrinsic_beta) runs on the "
                                     "gymnasium backend only")
                options["wrapper"] = partial(episodic_count_bonus_gym, beta=intrinsic_beta)
            env = make(env, self.backend, **options)
        if env.num_envs != ppo.num_envs:
            raise ValueError(f"env has {env.num_envs} copies but ppo.num_envs={ppo.num_envs}")
        self._eval_env: HostVectorEnv | None = None
        return env

    def _iterations_per_call(self) -> int:
        return 1  # a host rollout between any two updates

    def start(self, ppo: PPOState, key: jax.Array, *, steps: int = 0) -> TrainState:
        """`Agent.start`: ``reset_key, key = split(key)``, the vector env reset here, on
        the host, with ``reset_key``."""
        steps = jnp.asarray(steps, jnp.int32)
        tracker = EpisodeTracker.zeros(self.config.ppo.num_envs)
        reset_key, key = jax.random.split(key)
        _, obs = self.env.reset(reset_key)
        return TrainState(ppo, tracker, None, obs, key, steps)

    # --- training -------------------------------------------------------------------

    def _training_call(self, state: TrainState) -> Callable:
        """One iteration: a host rollout of ``n_steps`` steps, then the compiled update."""
        rollout, learn = self.program(("gym-train", *shape_key(state)),
                                      lambda: self._timed(lambda: self._compile_step(state)))
        n_steps, rollout_size = self.config.ppo.n_steps, self.config.ppo.rollout_size

        def call(state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
            obs, key, traj = rollout(state.ppo.params, state.obs, state.key, n_steps)
            key, learn_key = jax.random.split(key)
            ppo, tracker, metrics = learn(state.ppo, state.tracker, traj, obs, learn_key)
            steps = jnp.asarray(int(state.steps) + rollout_size, jnp.int32)
            return (TrainState(ppo, tracker, None, obs, key, steps),
                    jax.tree.map(lambda x: x[None], metrics))

        return call

    def _compile_step(self, state: TrainState) -> tuple[Callable, Callable]:
        """``rollout(params, obs, key, n_steps) -> (obs, key, traj)`` and ``learn``,
        compiled for the shapes a rollout from ``state`` produces. The rollout samples
        with the Gaussian mean in numpy where the network allows
        (`telapa.rl.host_policy`: its noise and scores compiled here), else with the
        jitted ``act`` at every step (`gym_rollout`)."""
        obs = jax.tree.map(jnp.asarray, state.obs)
        act = jax.jit(make_act(self.policy))
        action, key = jax.eval_shape(act, state.ppo.params, obs, state.key)
        n, n_steps = self.config.ppo.num_envs, self.config.ppo.n_steps
        step = (obs, action.action, action.log_prob, action.value,
                jax.ShapeDtypeStruct((n,), jnp.float32), jax.ShapeDtypeStruct((n,), bool),
                jax.ShapeDtypeStruct((n,), bool), obs, jax.ShapeDtypeStruct((n,), jnp.float32))
        traj = jax.tree.map(lambda x: jax.ShapeDtypeStruct((n_steps, *x.shape), x.dtype), step)
        learn = jax.jit(self._learn).lower(
            state.ppo, state.tracker, Trajectory(*traj), obs, key).compile()
        mean = host_mean(self.policy)
        if mean is None:
            return partial(gym_rollout, self.env,
                           act.lower(state.ppo.params, obs, state.key).compile()), learn
        noise = jax.jit(make_noise(n_steps, action.action.shape)).lower(state.key).compile()
        score = jax.jit(make_score(self.policy)).lower(
            state.ppo.params, traj[0], traj[1]).compile()
        return partial(host_rollout, self.env, mean, noise, score, self.policy), learn

    # --- evaluation -----------------------------------------------------------------

    def gym_act(self, deterministic: bool) -> Callable:
        """The jitted ``act(params, obs, key)`` host rollouts use."""
        return self.program(("act", deterministic),
                            lambda: jax.jit(make_act(self.policy, deterministic)))

    def _evaluate(self, params: Params, episodes: int, key: jax.Array, deterministic: bool,
                  max_steps: int) -> EvalResult:
        """Episodes on the evaluation env (``eval.num_envs`` copies, by default as many
        as ``eval.episodes`` up to `MAX_GYM_EVAL_ENVS`, made on first use)."""
        if self._eval_env is None:
            n = self.config.eval.num_envs or min(self.config.eval.episodes, MAX_GYM_EVAL_ENVS)
            self._eval_env = make(self.spec.env_id, self.backend, num_envs=n,
                                  **self.env_options)
        return evaluate_gym(self._eval_env, self.gym_act(deterministic), params,
                            episodes, key, max_steps, self.competence)

    # --- observations ---------------------------------------------------------------

    def sample_observations(self, params: Params, steps: int, key: jax.Array) -> Obs:
        """`Agent.sample_observations` on a fresh vector env (``reset_key, key =
        split(key)``; its seed drawn from ``reset_key``)."""
        n = self.config.ppo.num_envs
        reset_key, key = jax.random.split(key)
        seed = int(jax.random.randint(reset_key, (), 0, 2**31 - 1))
        env = make(self.spec.env_id, self.backend, num_envs=n, seed=seed, **self.env_options)
        _, first = env.reset(reset_key)
        obs = gym_rollout(env, self.gym_act(False), params, first, key, -(-steps // n))[2].obs
        env.close()
        return first_steps(obs, steps)


class NativeAgent(GymAgent, backend="native"):
    """PPO on a `NativeVectorEnv` (``Agent(env, config)`` with a `NativeVectorEnv` or an
    id on ``backend="native"``): `GymAgent`'s training and observation sampling on the
    native env, and evaluation of S parameter sets x E episodes as one batch of S * E
    envs (`evaluate_native`; `evaluate` is the batch of one set)."""

    def _open(self, env: str | HostVectorEnv, backend: Backend, intrinsic_beta: float | None,
              gym_seed: int) -> HostVectorEnv:
        self._eval_envs: dict[int, NativeVectorEnv] = {}
        """The evaluation envs by size S * E (a run has a few)."""
        made = isinstance(env, str)
        env = super()._open(env, backend, intrinsic_beta, gym_seed)
        if made:  # PPO never reads the training env's sketch (evaluation envs keep it)
            env.sketch = False
        return env

    def _evaluate(self, params: Params, episodes: int, key: jax.Array, deterministic: bool,
                  max_steps: int) -> EvalResult:
        one = jax.tree.map(lambda x: jnp.asarray(x)[None], params)
        return self._evaluate_sets(one, episodes, key[None], deterministic, max_steps)[0]

    def evaluate_batch(self, params: Params, episodes: int, keys: jax.Array, *,
                       features: bool = True, feature_steps: int | None = None
                       ) -> list[EvalResult]:
        """`Agent.evaluate_batch` as ONE batch of S * E native envs (`evaluate_native`):
        set i equals ``evaluate(params_i, episodes, keys[i])`` (the same seeds and action
        keys; up to XLA's numerics of the policy vmapped over S sets); the sketch is
        computed only for the ``feature_steps`` kept."""
        return self._evaluate_sets(params, episodes, jnp.asarray(keys),
                                   self.config.eval.deterministic, self.spec.max_steps,
                                   features, feature_steps)

    def _evaluate_sets(self, params: Params, episodes: int, keys: jax.Array,
                       deterministic: bool, max_steps: int, features: bool = True,
                       feature_steps: int | None = None) -> list[EvalResult]:
        n = len(keys) * episodes
        env = self._eval_envs.get(n)
        if env is None:
            env = self._eval_envs[n] = make(self.spec.env_id, "native", num_envs=n,
                                            **self.env_options)
        mean = host_mean(self.policy)
        if mean is None:
            act = self.program(("act-sets", deterministic),
                               lambda: jax.jit(jax.vmap(make_act(self.policy, deterministic))))
            return evaluate_native(env, act, params, episodes, keys, max_steps,
                                   self.competence, features=features,
                                   feature_steps=feature_steps)
        # the mean in numpy, the noise of every step drawn up front (`HostActions`)
        noise = None if deterministic else self._eval_noise(
            len(keys), episodes, max(max_steps, env.spec.max_steps))

        def host(act_keys: jax.Array) -> HostActions:
            return HostActions(mean, self.policy, params,
                               None if noise is None else np.asarray(noise(act_keys)))

        return evaluate_native(env, None, params, episodes, keys, max_steps, self.competence,
                               features=features, feature_steps=feature_steps, host=host)

    def _eval_noise(self, sets: int, episodes: int, steps: int) -> Callable:
        """The jitted `make_eval_noise` of S sets x E episodes x T steps."""
        shape = (episodes, self.spec.action_dim)
        return self.program(("eval-noise", sets, steps, shape),
                            lambda: jax.jit(make_eval_noise(steps, shape)))


__all__ = ["MAX_GYM_EVAL_ENVS", "GymAgent", "NativeAgent"]
