"""The functional environment interface shared by every backend.

A `JaxEnv` is a pure, jittable, vmappable environment in the style of gymnax:

    state, obs = env.reset(key)
    state, obs, reward, terminated, truncated, info = env.step(state, action)

`step` never resets; wrap the env in `AutoReset` for rollouts that run past episode
ends. Every step's `info["features"]` holds the D-dimensional behaviour feature vector
of that step (paper App. "Trajectory features", eq. traj_feat_vector), so trajectories
for the latent space are recorded by the same rollouts that train and evaluate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import jax
import jax.numpy as jnp
from flax import struct

Obs = dict[str, jax.Array]
"""Observations are dicts of arrays; MiniGrid: ``image``, ``direction``, ``mission``."""


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one observation entry (without batch dimensions)."""

    shape: tuple[int, ...]
    dtype: Any


@dataclass(frozen=True)
class EnvSpec:
    """Static description of an environment: what a policy network needs to know.

    Exactly one of ``n_actions`` (discrete) or ``action_dim`` (continuous, actions in
    ``[action_low, action_high]``) is set.
    """

    env_id: str
    observation: dict[str, ArraySpec]
    n_actions: int | None = None
    action_dim: int | None = None
    action_low: float = -1.0
    action_high: float = 1.0
    max_steps: int = 0
    feature_dim: int = 0

    @property
    def discrete(self) -> bool:
        return self.n_actions is not None


class JaxEnv(Protocol):
    """A functional environment; see the module docstring."""

    spec: EnvSpec

    def reset(self, key: jax.Array) -> tuple[Any, Obs]: ...

    def step(
        self, state: Any, action: jax.Array
    ) -> tuple[Any, Obs, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]: ...


@struct.dataclass
class AutoResetState:
    env_state: Any
    key: jax.Array


class AutoReset:
    """Resets the wrapped env inside `step` when an episode ends.

    The returned observation is the first observation of the new episode; the last
    observation of the finished episode is kept in ``info["final_obs"]`` (for
    bootstrapping on truncation). Reward, termination flags and ``info["features"]``
    belong to the step that ended the episode.
    """

    def __init__(self, env: JaxEnv):
        self.env = env
        self.spec = env.spec

    def reset(self, key: jax.Array) -> tuple[AutoResetState, Obs]:
        key, reset_key = jax.random.split(key)
        env_state, obs = self.env.reset(reset_key)
        return AutoResetState(env_state, key), obs

    def step(self, state: AutoResetState, action: jax.Array):
        env_state, obs, reward, terminated, truncated, info = self.env.step(
            state.env_state, action
        )
        key, reset_key = jax.random.split(state.key)
        reset_state, reset_obs = self.env.reset(reset_key)
        done = jnp.logical_or(terminated, truncated)

        def pick(new, old):
            return jnp.where(done, new, old)

        env_state = jax.tree.map(pick, reset_state, env_state)
        info = {**info, "final_obs": obs}
        obs = jax.tree.map(pick, reset_obs, obs)
        return AutoResetState(env_state, key), obs, reward, terminated, truncated, info
