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
from typing import Any, Literal, Protocol

import jax
import jax.numpy as jnp
from flax import struct

Obs = dict[str, jax.Array]
"""Observations are dicts of arrays; MiniGrid: ``image``, ``direction``, ``mission``."""

Backend = Literal["jax", "gymnasium"]
"""Where an env runs: ``jax`` (a functional `JaxEnv`, compiled with the policy) or
``gymnasium`` (host envs, `telapa.envs.gym_backend`)."""


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one observation entry (without batch dimensions).

    ``levels`` marks an entry of integer codes: element ``i`` along the last axis takes
    values ``0 .. levels[i] - 1`` (a scalar entry has one level count), and ``-1`` means
    "none". Networks one-hot small code entries and feed grids of codes as the network
    config says (`telapa.rl.networks.Encoder`); ``None``: real-valued."""

    shape: tuple[int, ...]
    dtype: Any
    levels: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.levels is not None:
            width = self.shape[-1] if self.shape else 1
            if len(self.levels) != width or min(self.levels) < 1:
                raise ValueError(f"levels {self.levels} do not fit shape {self.shape}: one "
                                 "positive count per element of the last axis")


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
    """A batch of ``num_envs`` copies of ``env`` that reset inside `step` when an episode ends.

    ``reset`` and ``step`` work on the whole batch (leading axis ``num_envs``); do not
    vmap them. The observation returned for a finished env is the first observation of
    its new episode; the last observation of the finished episode is kept in
    ``info["final_obs"]`` (for bootstrapping on truncation). Reward, termination flags
    and ``info["features"]`` belong to the step that ended the episode.

    Fresh levels are drawn only when needed. A per-env reset under ``vmap`` would
    compute a new level for every env at every step (``where`` evaluates both
    branches), which costs more than the step itself for procedurally generated
    levels. Here a step where ``k`` episodes end draws fresh levels in chunks, largest
    first: as many chunks of each of ``chunks`` (default ``num_envs / 2``, ``/ 8`` and
    ``/ 32``) as fit in what is left of ``k``, and enough of the smallest to cover the
    rest. Each chunk is written in place into the next finished envs by a loop, so a
    step draws about ``k`` levels, copies nothing else, and draws nothing when no
    episode ends. Every episode starts from its own independent draw of ``env.reset``,
    so episodes follow the generator's distribution exactly and no two envs share a
    level.
    """

    def __init__(self, env: JaxEnv, num_envs: int, chunks: tuple[int, ...] | None = None):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if chunks is not None and (not chunks or min(chunks) < 1):
            raise ValueError(f"chunks must be sizes >= 1, got {chunks}")
        self.env = env
        self.spec = env.spec
        self.num_envs = num_envs
        sizes = chunks or tuple(max(1, num_envs // d) for d in (2, 8, 32))
        self.chunks = tuple(sorted({min(n, num_envs) for n in sizes}, reverse=True))
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
        # The finished envs in order, then an out-of-range index whose writes are dropped.
        (finished,) = jnp.nonzero(
            done, size=self.num_envs + self.chunks[0], fill_value=self.num_envs
        )

        def refill(size: int):
            def draw(_: jax.Array, carry: tuple) -> tuple:
                drawn, current = carry
                targets = jax.lax.dynamic_slice(finished, (drawn,), (size,))
                keys = jax.random.split(jax.random.fold_in(reset_key, drawn), size)
                fresh = self._reset(keys)
                current = jax.tree.map(
                    lambda x, new: x.at[targets].set(new, mode="drop"), current, fresh
                )
                return drawn + size, current

            return draw

        left, carry = done.sum(), (jnp.int32(0), (env_state, obs))
        for n, size in enumerate(self.chunks):
            last = n == len(self.chunks) - 1
            count = (left + size - 1) // size if last else left // size
            carry = jax.lax.fori_loop(0, count, refill(size), carry)
            left = left - count * size
        env_state, next_obs = carry[1]
        info = {**info, "final_obs": obs}
        return AutoResetState(env_state, key), next_obs, reward, terminated, truncated, info
