"""The functional environment interface shared by every backend.

A `JaxEnv` is a pure, jittable, vmappable environment in the style of gymnax:

    state, obs = env.reset(key)
    state, obs, reward, terminated, truncated, info = env.step(state, action)

`step` never resets; `AutoReset` steps a batch of envs that reset as episodes
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


def _where_done(done: jax.Array, new: Any, old: Any) -> Any:
    """Per-env select over batched pytrees: ``new[i]`` where ``done[i]``, else ``old[i]``."""

    def pick(n: jax.Array, o: jax.Array) -> jax.Array:
        return jnp.where(done.reshape(done.shape + (1,) * (o.ndim - 1)), n, o)

    return jax.tree.map(pick, new, old)


class AutoReset:
    """A batch of ``num_envs`` copies of ``env`` that reset inside `step` when an episode ends.

    ``reset`` and ``step`` work on the whole batch (leading axis ``num_envs``); do not
    vmap them. The observation returned for a finished env is the first observation of
    its new episode; the last observation of the finished episode is kept in
    ``info["final_obs"]`` (for bootstrapping on truncation). Reward, termination flags
    and ``info["features"]`` belong to the step that ended the episode.

    Fresh levels are drawn only when needed. A per-env reset under ``vmap`` would
    compute a new level for every env at every step (``where`` evaluates both
    branches), which costs more than the step itself for procedurally generated
    levels. Here each step draws ``pool_size`` fresh levels and hands them, in order,
    to the envs whose episode ended; when more than ``pool_size`` episodes end at once
    it draws one for every env instead, and when none ends it draws nothing (a batch
    level ``lax.switch``, so only the branch taken runs). Every episode starts from its
    own independent draw of ``env.reset``, so episodes follow the generator's
    distribution exactly and no two envs share a level.
    """

    def __init__(self, env: JaxEnv, num_envs: int, pool_size: int | None = None):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.env = env
        self.spec = env.spec
        self.num_envs = num_envs
        self.pool_size = min(num_envs, pool_size or max(1, num_envs // 8))
        self._reset = jax.vmap(env.reset)
        self._step = jax.vmap(env.step)

    def reset(self, key: jax.Array) -> tuple[AutoResetState, Obs]:
        key, reset_key = jax.random.split(key)
        env_state, obs = self._reset(jax.random.split(reset_key, self.num_envs))
        return AutoResetState(env_state, key), obs

    def step(self, state: AutoResetState, action: jax.Array):
        env_state, obs, reward, terminated, truncated, info = self._step(
            state.env_state, action
        )
        done = jnp.logical_or(terminated, truncated)
        key, reset_key = jax.random.split(state.key)
        current = (env_state, obs)

        def keep(_: jax.Array):
            return current

        def from_pool(k: jax.Array):
            pool = self._reset(jax.random.split(k, self.pool_size))
            slot = jnp.clip(jnp.cumsum(done) - 1, 0, self.pool_size - 1)
            return _where_done(done, jax.tree.map(lambda x: x[slot], pool), current)

        def all_fresh(k: jax.Array):
            return _where_done(done, self._reset(jax.random.split(k, self.num_envs)), current)

        n_done = done.sum()
        branch = jnp.where(n_done == 0, 0, jnp.where(n_done <= self.pool_size, 1, 2))
        env_state, next_obs = jax.lax.switch(branch, (keep, from_pool, all_fresh), reset_key)
        info = {**info, "final_obs": obs}
        return AutoResetState(env_state, key), next_obs, reward, terminated, truncated, info
