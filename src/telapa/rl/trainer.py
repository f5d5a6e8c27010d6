"""`PPOTrainer`: a stateful convenience wrapper of `telapa.rl.agent.Agent` for scripts.

    trainer = PPOTrainer("MiniGrid-DoorKey-5x5-v0", config, key=0)
    trainer.train(200_000)            # resumable: a second call continues
    result = trainer.evaluate(episodes=50)
    result.sr, result.mean_return, result.lengths, result.features

The trainer owns one `TrainState` and threads it through its agent's pure functions
(``telapa train``, the benchmarks). Code that needs several states of one agent (the
continual runner, batches of seeds, transfer probes) uses the `Agent` and its states
directly. Given the key, training and evaluation are deterministic.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from telapa.config import TrainConfig
from telapa.envs import Backend
from telapa.envs.base import JaxEnv, Obs
from telapa.envs.gym_backend import GymVectorEnv
from telapa.rl.agent import Agent, Metrics, ProgressFn, TrainState
from telapa.rl.evaluate import EvalResult
from telapa.rl.networks import Params
from telapa.rl.ppo import Penalty, PPOState


def _as_key(key: int | jax.Array) -> jax.Array:
    return jax.random.key(key) if isinstance(key, (int, np.integer)) else key


class PPOTrainer:
    """PPO on one environment with its state inside; see the module docstring.

    ``env``, ``config``, ``backend``, ``total_steps``, ``env_options``, ``penalty`` and
    ``intrinsic_beta`` are as for `Agent`; ``key`` is an int seed or a JAX key, from which
    everything random derives (``init, env, reset, eval = split(key, 4)``).
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
        init_key, env_key, self._reset_key, self._eval_key = jax.random.split(_as_key(key), 4)
        self.agent = Agent(
            env, config, backend=backend, total_steps=total_steps, env_options=env_options,
            penalty=penalty, intrinsic_beta=intrinsic_beta,
            gym_seed=int(jax.random.randint(env_key, (), 0, 2**31 - 1)),
        )
        self.train_state: TrainState = self.agent.start(self.agent.init_ppo(init_key),
                                                        self._next_rollout_key())

    # --- the agent's static parts ---------------------------------------------------

    @property
    def config(self) -> TrainConfig:
        return self.agent.config

    @property
    def backend(self) -> Backend:
        return self.agent.backend

    @property
    def env(self):
        return self.agent.env

    @property
    def spec(self):
        return self.agent.spec

    @property
    def policy(self):
        return self.agent.policy

    @property
    def optimizer(self):
        return self.agent.optimizer

    @property
    def competence(self):
        return self.agent.competence

    @property
    def family(self):
        return self.agent.family

    @property
    def compile_s(self) -> float:
        """Seconds spent compiling the training step (excluded from throughput)."""
        return self.agent.compile_s

    # --- training -------------------------------------------------------------------

    @property
    def state(self) -> PPOState:
        return self.train_state.ppo

    @state.setter
    def state(self, value: PPOState) -> None:
        self.train_state = self.train_state.replace(ppo=value)

    @property
    def steps(self) -> int:
        """Env steps trained so far (all envs together)."""
        return int(self.train_state.steps)

    def compile(self) -> float:
        """Compiles the training step now (else the first `train` call does); seconds."""
        return self.agent.compile(self.train_state)

    def train(self, steps: int, progress: ProgressFn | None = None) -> list[Metrics]:
        """Trains for at least ``steps`` env steps (whole calls); continues where the
        previous call stopped (see `Agent.train`)."""
        self.train_state, history = self.agent.train(self.train_state, steps, progress)
        return history

    def get_params(self) -> Params:
        return self.state.params

    def set_params(self, params: Params) -> None:
        """Replaces the policy parameters (same structure); the optimizer state is kept."""
        if jax.tree.structure(params) != jax.tree.structure(self.state.params):
            raise ValueError("set_params: parameter tree does not match the network")
        self.state = self.state.replace(params=jax.tree.map(jnp.asarray, params))

    def reset_optimizer(self) -> None:
        """Fresh Adam moments (and lr schedule), e.g. when loading archived weights."""
        self.state = self.state.replace(opt_state=self.optimizer.init(self.state.params))

    def _next_rollout_key(self) -> jax.Array:
        self._reset_key, key = jax.random.split(self._reset_key)
        return key

    def reset_rollout(self) -> None:
        """Starts new episodes in every training env and forgets partial episode stats."""
        self.train_state = self.agent.start(self.state, self._next_rollout_key(),
                                            steps=self.steps)

    def reseed(self, key: int | jax.Array) -> None:
        """Re-derives the rollout and default evaluation keys from ``key`` and starts new
        episodes; parameters, optimizer and ``steps`` are kept."""
        self._reset_key, self._eval_key = jax.random.split(_as_key(key))
        self.reset_rollout()

    def snapshot(self) -> dict[str, Any]:
        """Everything `train` depends on, as a pytree of arrays: the `TrainState` and the
        keys. jax backend only (gymnasium envs live on the host)."""
        if self.backend != "jax":
            raise NotImplementedError("the gymnasium backend cannot snapshot its envs")
        return {"train": self.train_state, "reset_key": self._reset_key,
                "eval_key": self._eval_key}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Continues from a `snapshot` (same env, config and penalty)."""
        self.train_state = snapshot["train"]
        self._reset_key, self._eval_key = snapshot["reset_key"], snapshot["eval_key"]

    def sample_observations(self, params: Params, steps: int, key: int | jax.Array) -> Obs:
        return self.agent.sample_observations(params, steps, _as_key(key))

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
        """`Agent.evaluate` of ``params`` (default: the current ones); ``key`` defaults
        to a fixed key derived from the trainer's seed (the same episodes every call)."""
        return self.agent.evaluate(
            self.state.params if params is None else params, episodes,
            self._eval_key if key is None else _as_key(key),
            deterministic=deterministic, max_steps=max_steps,
        )
