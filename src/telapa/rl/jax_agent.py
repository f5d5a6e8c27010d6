"""`JaxAgent`: the `telapa.rl.agent.Agent` of a `JaxEnv`, whose envs are jitted.

Training, evaluation and observation sampling are pure functions of the env and the
policy, compiled once per shape into the agent's program cache (`Agent.program`):

- ``("reset",)``: the training envs' reset (`start`);
- ``("train-call", shapes)``: `iterations_per_call` PPO iterations (a rollout
  ``lax.scan`` of ``n_steps`` steps in every env, then one PPO update) as one
  ``lax.scan`` (`train`, the pure `training`);
- ``("chunk", S, iterations, episodes, features, shapes)``: `train_and_evaluate`'s
  program for S stacked states;
- ``("evaluate", episodes, deterministic, max_steps)`` and ``("evaluate-batch",
  episodes, deterministic, features)``: `evaluate` and `evaluate_batch`;
- ``("sample-observations", steps)``: `sample_observations`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from telapa.envs import AutoReset, Backend, make
from telapa.envs.base import JaxEnv, Obs
from telapa.envs.intrinsic import EpisodicCountBonus
from telapa.rl.agent import MEMBER_AXIS, Agent, first_steps, shape_key
from telapa.rl.evaluate import (
    EvalResult,
    check_positive,
    make_jax_evaluator,
    make_population_evaluator,
)
from telapa.rl.networks import Params
from telapa.rl.ppo import EpisodeTracker, PPOState
from telapa.rl.rollout import make_jax_rollout
from telapa.rl.train_state import LOSS_METRICS, TrainState


class JaxAgent(Agent, backend="jax"):
    """PPO on a `JaxEnv` (``Agent(env, config)`` with a `JaxEnv` or an id on
    ``backend="jax"``); see `telapa.rl.agent.Agent` for the arguments."""

    def _open(self, env: str | JaxEnv, backend: Backend, intrinsic_beta: float | None,
              gym_seed: int) -> JaxEnv:
        """Makes ``env`` from an id; the training envs are `num_envs` copies of it (with
        the count bonus of ``intrinsic_beta``) that reset when their episodes end."""
        train_env = None
        if isinstance(env, str):
            env = make(env, backend, **self.env_options)
            if intrinsic_beta:
                train_env = EpisodicCountBonus(env, intrinsic_beta)
        self._train_env = AutoReset(train_env or env, self.config.ppo.num_envs)
        return env

    def start(self, ppo: PPOState, key: jax.Array, *, steps: int = 0) -> TrainState:
        """`Agent.start`: ``key, reset_key = split(key)``, the training envs reset with
        ``reset_key``."""
        steps = jnp.asarray(steps, jnp.int32)
        tracker = EpisodeTracker.zeros(self.config.ppo.num_envs)
        key, reset_key = jax.random.split(key)
        reset = self.program(("reset",), lambda: jax.jit(self._train_env.reset))
        env_state, obs = reset(reset_key)
        return TrainState(ppo, tracker, env_state, obs, key, steps)

    # --- training -------------------------------------------------------------------

    def training(self, iterations: int, batch_axes: tuple[str, ...] = ()) -> Callable:
        """The pure ``train(state) -> (state, metrics)``: ``iterations`` PPO iterations (a
        rollout of ``n_steps`` steps in every env, then one PPO update) as one
        ``lax.scan``; ``batch_axes``: the ``vmap`` axes it runs under (`AutoReset.step`)."""
        rollout = make_jax_rollout(self._train_env, self.policy, self.config.ppo.n_steps,
                                   batch_axes=batch_axes)

        def iteration(state: TrainState, _) -> tuple[TrainState, dict[str, jax.Array]]:
            env_state, obs, key, traj = rollout(
                state.ppo.params, state.env_state, state.obs, state.key
            )
            key, learn_key = jax.random.split(key)
            ppo, tracker, metrics = self._learn(state.ppo, state.tracker, traj, obs, learn_key)
            steps = state.steps + self.config.ppo.rollout_size
            return TrainState(ppo, tracker, env_state, obs, key, steps), metrics

        return lambda state: jax.lax.scan(iteration, state, None, iterations)

    def _training_call(self, state: TrainState) -> Callable:
        return self.compiled(("train-call", *shape_key(state)),
                             lambda: self.training(self.iterations_per_call), state)

    def _chunk_program(self, states: TrainState, keys: jax.Array, iterations: int,
                       episodes: int, features: bool) -> Callable:
        size = len(keys)
        return self.compiled(("chunk", size, iterations, episodes, features, *shape_key(states)),
                             lambda: self._chunk(size, iterations, episodes, features),
                             states, keys)

    def _chunk(self, size: int, iterations: int, episodes: int, features: bool) -> Callable:
        """The pure program of `train_and_evaluate` for S = ``size`` states."""
        if size > 1:
            train = jax.vmap(self.training(iterations, (MEMBER_AXIS,)), axis_name=MEMBER_AXIS)
        else:
            one = self.training(iterations)

            def train(states: TrainState):
                state, metrics = one(jax.tree.map(lambda x: x[0], states))
                return jax.tree.map(lambda x: x[None], (state, metrics))

        evaluate = None
        if episodes:
            evaluate = make_population_evaluator(
                self.env, self.policy, episodes, self._time_limit(),
                self.config.eval.deterministic, feature_steps=None if features else 1,
            )

        def program(states: TrainState, keys: jax.Array):
            states, metrics = train(states)
            finite = jnp.stack([jnp.isfinite(metrics[k]) for k in LOSS_METRICS]).all(axis=(0, 2))
            out = {"metrics": metrics, "finite": finite, "steps": states.steps}
            if evaluate is not None:
                returns, lengths, feats = evaluate(states.ppo.params, keys)
                out["evaluation"] = (returns, lengths, feats if features else feats[:, :, :0])
            return states, out

        return program

    # --- evaluation -----------------------------------------------------------------

    def _time_limit(self) -> int:
        if not self.spec.max_steps:
            raise ValueError(f"{self.spec.env_id} has no time limit to evaluate with")
        return self.spec.max_steps

    def _evaluate(self, params: Params, episodes: int, key: jax.Array, deterministic: bool,
                  max_steps: int) -> EvalResult:
        run = self.program(("evaluate", episodes, deterministic, max_steps), lambda: jax.jit(
            make_jax_evaluator(self.env, self.policy, episodes, max_steps, deterministic)))
        returns, lengths, feats = jax.device_get(run(params, key))
        return EvalResult(returns, lengths, feats, self.competence)

    def evaluate_batch(
        self,
        params: Params,
        episodes: int,
        keys: jax.Array,
        *,
        features: bool = True,
        feature_steps: int | None = None,
    ) -> list[EvalResult]:
        """`Agent.evaluate_batch`: one population evaluation of the S parameter sets
        (`make_population_evaluator`) and one `fetch`."""
        deterministic = self.config.eval.deterministic
        max_steps = self._time_limit()
        keep = 1 if not features else (None if feature_steps is None else min(
            check_positive("feature_steps", feature_steps), max_steps))

        def build() -> Callable:
            population = make_population_evaluator(
                self.env, self.policy, episodes, max_steps, deterministic,
                feature_steps=keep)

            def evaluate(params: Params, keys: jax.Array):
                returns, lengths, feats = population(params, keys)
                return returns, lengths, feats if features else feats[:, :, :0]

            return jax.jit(evaluate)

        run = self.program(("evaluate-batch", episodes, deterministic, features, keep), build)
        returns, lengths, feats = self._fetch(run(params, keys))
        return [EvalResult(returns[i], lengths[i], feats[i], self.competence)
                for i in range(len(returns))]

    # --- observations ---------------------------------------------------------------

    def sample_observations(self, params: Params, steps: int, key: jax.Array) -> Obs:
        """`Agent.sample_observations` by the compiled `observation_sampler`."""
        sample = self.program(("sample-observations", steps),
                              lambda: jax.jit(self.observation_sampler(steps)))
        return sample(params, key)

    def observation_sampler(self, steps: int, batch_axes: tuple[str, ...] = ()
                            ) -> Callable[[Params, jax.Array], Obs]:
        """The pure ``sample(params, key) -> obs`` of `sample_observations`:
        ``ceil(steps / num_envs)`` steps of every env from fresh episodes (``reset_key,
        key = split(key)``), the first ``steps`` observations in (step, env) order;
        ``batch_axes``: the ``vmap`` axes it runs under (`AutoReset.step`)."""
        n = self.config.ppo.num_envs
        env = AutoReset(self.env, n)
        rollout = make_jax_rollout(env, self.policy, math.ceil(steps / n),
                                   batch_axes=batch_axes)

        def sample(params: Params, key: jax.Array) -> Obs:
            reset_key, key = jax.random.split(key)
            env_state, obs = env.reset(reset_key)
            return first_steps(rollout(params, env_state, obs, key)[3].obs, steps)

        return sample


__all__ = ["JaxAgent"]
