"""`PPOTrainer`: one `TrainState` of an `telapa.rl.agent.Agent`, trained in place.

    trainer = PPOTrainer("MiniGrid-DoorKey-5x5-v0", config, key=0)
    trainer.train(200_000)            # resumable: a second call continues
    result = trainer.evaluate(episodes=50)
    result.sr, result.mean_return, result.lengths, result.features

A facade for scripts (``telapa train``, the benchmarks): it threads ``state`` through the
agent's pure functions and holds nothing else. Code that needs several states of one
agent (the continual runner, batches of seeds, transfer probes) uses the `Agent` and its
states directly. Given the key, training and evaluation are deterministic.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from telapa.config import TrainConfig
from telapa.envs import Backend
from telapa.envs.base import JaxEnv
from telapa.envs.host import HostVectorEnv
from telapa.rl.agent import Agent, Metrics, ProgressFn, TrainState
from telapa.rl.evaluate import EvalResult
from telapa.rl.networks import Params
from telapa.rl.ppo import Penalty


def _as_key(key: int | jax.Array) -> jax.Array:
    return jax.random.key(key) if isinstance(key, (int, np.integer)) else key


class PPOTrainer:
    """PPO on one environment with its state inside; see the module docstring.

    ``env``, ``config``, ``backend``, ``total_steps``, ``env_options``, ``penalty`` and
    ``intrinsic_beta`` are as for `Agent`; ``key`` is an int seed or a JAX key, from which
    everything random derives: ``init, env, rollout, eval = split(key, 4)``, the training
    episodes from ``split(rollout)[1]``, the gymnasium envs' seed from ``env``.
    """

    def __init__(
        self,
        env: str | JaxEnv | HostVectorEnv,
        config: TrainConfig,
        key: int | jax.Array = 0,
        *,
        backend: Backend = "jax",
        total_steps: int | None = None,
        env_options: dict[str, Any] | None = None,
        penalty: Penalty | None = None,
        intrinsic_beta: float | None = None,
    ):
        init_key, env_key, rollout_key, self.eval_key = jax.random.split(_as_key(key), 4)
        self.agent = Agent(
            env, config, backend=backend, total_steps=total_steps, env_options=env_options,
            penalty=penalty, intrinsic_beta=intrinsic_beta,
            gym_seed=int(jax.random.randint(env_key, (), 0, 2**31 - 1)),
        )
        """The static agent: env, spec, family, policy, optimizer, compiled functions."""
        self.state: TrainState = self.agent.start(self.agent.init_ppo(init_key),
                                                  jax.random.split(rollout_key)[1])
        """What training changes (`Agent.train` threads it)."""

    @property
    def params(self) -> Params:
        """The current policy parameters."""
        return self.state.ppo.params

    @property
    def steps(self) -> int:
        """Env steps trained so far (all envs together)."""
        return int(self.state.steps)

    def compile(self) -> float:
        """Compiles the training call now (else the first `train` does); returns the
        seconds spent compiling (`Agent.compile_s`)."""
        return self.agent.compile(self.state)

    def train(self, steps: int, progress: ProgressFn | None = None) -> list[Metrics]:
        """Trains for at least ``steps`` env steps (whole calls); continues where the
        previous call stopped (`Agent.train`)."""
        self.state, history = self.agent.train(self.state, steps, progress)
        return history

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
            self.params if params is None else params, episodes,
            self.eval_key if key is None else _as_key(key),
            deterministic=deterministic, max_steps=max_steps,
        )
