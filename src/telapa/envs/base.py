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
    levels. Here a step where ``k`` episodes end draws a pool of fresh levels, the
    smallest of ``pool_sizes`` (default ``num_envs / 32, / 8, / 2`` and ``num_envs``)
    that holds ``k``, and hands them, in order, to the envs that finished; when none
    ends it draws nothing (a batch-level ``lax.switch``, so only the branch taken runs).
    Every episode starts from its own independent draw of ``env.reset``, so episodes
    follow the generator's distribution exactly and no two envs share a level.
    """

    def __init__(
        self, env: JaxEnv, num_envs: int, pool_sizes: tuple[int, ...] | None = None
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.env = env
        self.spec = env.spec
        self.num_envs = num_envs
        sizes = pool_sizes or tuple(num_envs // d for d in (32, 8, 2))
        self.pool_sizes = tuple(sorted({min(max(1, n), num_envs) for n in sizes} | {num_envs}))
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
        slot = jnp.cumsum(done) - 1  # the pool entry each finished env takes

        def keep(_: jax.Array):
            return current

        def from_pool(size: int):
            def draw(k: jax.Array):
                pool = self._reset(jax.random.split(k, size))
                fresh = jax.tree.map(lambda x: x[jnp.clip(slot, 0, size - 1)], pool)
                return _where_done(done, fresh, current)

            return draw

        sizes = jnp.asarray(self.pool_sizes)
        branch = jnp.where(done.any(), 1 + jnp.searchsorted(sizes, done.sum()), 0)
        branches = (keep, *(from_pool(size) for size in self.pool_sizes))
        env_state, next_obs = jax.lax.switch(branch, branches, reset_key)
        info = {**info, "final_obs": obs}
        return AutoResetState(env_state, key), next_obs, reward, terminated, truncated, info
