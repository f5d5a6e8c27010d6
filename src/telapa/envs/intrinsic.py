"""Episodic count-based exploration bonus (paper App. "Episodic Intrinsic Reward Ablation").

During PPO training only, the env reward is augmented by an episodic count bonus
(eq. ``intrinsic_reward``):

    r_tot_t = r_ext_t + r_int_t,    r_int_t = beta_int / sqrt(N_ep(phi(s_t))),

where ``N_ep(phi(s))`` counts the visits to the hashed state ``phi(s)`` within the current
episode; the count table is reset at every env reset. Here ``s_t`` is the state the step
arrives in: `reset` counts the initial state once, and each step first increments the
count of its new state, then pays ``beta / sqrt(count)`` (a first visit earns ``beta``).
For MiniGrid ``phi(s) = (x, y, direction)``, hashed to ``(x * H + y) * 4 + direction``
in a table of ``W * H * 4`` counts.

`EpisodicCountBonus` wraps a `JaxEnv` (its counts live in the per-env state, so
`AutoReset` zeroes them at every episode start); `episodic_count_bonus_gym` wraps a Farama
MiniGrid gymnasium env the same way. Both keep the env's reward in
``info["extrinsic_reward"]`` and the bonus in ``info["intrinsic_reward"]``, and leave the
rest of ``info`` (``success``, ``features``) untouched. Evaluation uses the unwrapped env.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp

from telapa.envs.base import EnvSpec, JaxEnv, Obs
from telapa.envs.minigrid.constants import DIR_TO_VEC
from telapa.envs.minigrid.env import MiniGrid
from telapa.envs.minigrid.state import State

N_DIRECTIONS = len(DIR_TO_VEC)

HashFn = Callable[[Any], jax.Array]
"""``phi``: an inner env state -> an int32 scalar index into the count table."""


class CountState(NamedTuple):
    """`EpisodicCountBonus`'s state: the wrapped env's state and this episode's counts."""

    inner: Any
    counts: jax.Array  # int32 (table_size,)


def minigrid_hash(state: State) -> jax.Array:
    """``phi(s) = (x, y, dir)`` as the index ``(x * H + y) * 4 + dir`` (H from the grid)."""
    height = state.grid.shape[1]
    x, y = state.agent_pos[0], state.agent_pos[1]
    return ((x * height + y) * N_DIRECTIONS + state.agent_dir).astype(jnp.int32)


def _check_beta(beta: float) -> float:
    beta = float(beta)
    if not beta >= 0:  # also rejects NaN
        raise ValueError(f"the intrinsic reward scale beta must be >= 0, got {beta}")
    return beta


class EpisodicCountBonus:
    """``env`` with ``r_tot = r_ext + beta / sqrt(N_ep(phi(s_{t+1})))``; see the module doc.

    Jittable and vmappable; the state is a `CountState` ``(inner, counts)``. For a
    MiniGrid port ``phi`` is `minigrid_hash`; any other env needs ``hash_fn`` and
    ``table_size`` (``hash_fn`` must return indices in ``[0, table_size)``).
    """

    def __init__(
        self,
        env: JaxEnv,
        beta: float = 0.005,
        hash_fn: HashFn | None = None,
        table_size: int | None = None,
    ):
        self.beta = _check_beta(beta)
        if hash_fn is None:
            if not isinstance(env, MiniGrid):
                raise ValueError(
                    f"EpisodicCountBonus has no state hash for {type(env).__name__} "
                    f"({env.spec.env_id}); only MiniGrid ports have a default, pass hash_fn "
                    "and table_size"
                )
            if table_size is not None:
                raise ValueError("table_size is taken from the MiniGrid grid; pass hash_fn too")
        elif table_size is None or table_size < 1:
            raise ValueError(f"hash_fn needs a table_size >= 1, got {table_size}")
        self.env = env
        self.spec: EnvSpec = env.spec
        self.hash_fn: HashFn = hash_fn or minigrid_hash
        self.table_size = table_size

    def _table_size(self, inner: Any) -> int:
        if self.table_size is not None:
            return self.table_size
        width, height = inner.grid.shape[:2]  # static under jit
        return width * height * N_DIRECTIONS

    def start(self, inner: Any) -> CountState:
        """The wrapper's state at the start of an episode in ``inner``: phi(s_0) counted once."""
        counts = jnp.zeros(self._table_size(inner), jnp.int32)
        return CountState(inner, counts.at[self.hash_fn(inner)].add(1))

    def reset(self, key: jax.Array) -> tuple[CountState, Obs]:
        inner, obs = self.env.reset(key)
        return self.start(inner), obs

    def step(
        self, state: CountState, action: jax.Array
    ) -> tuple[CountState, Obs, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
        inner, obs, reward, terminated, truncated, info = self.env.step(state.inner, action)
        index = self.hash_fn(inner)
        counts = state.counts.at[index].add(1)
        bonus = self.beta / jnp.sqrt(counts[index].astype(jnp.float32))
        info = {**info, "intrinsic_reward": bonus, "extrinsic_reward": reward}
        return CountState(inner, counts), obs, reward + bonus, terminated, truncated, info


class EpisodicCountBonusGym(gym.Wrapper):
    """`EpisodicCountBonus` for a Farama MiniGrid gymnasium env (counts in a dict).

    Wrap it around `wrap_farama`'s env, not inside: `wrap_farama` reads success off a
    positive reward, which the bonus would fake.
    """

    def __init__(self, env: gym.Env, beta: float = 0.005):
        base = env.unwrapped
        missing = [a for a in ("agent_pos", "agent_dir", "width", "height") if not hasattr(base, a)]
        if missing:
            raise ValueError(
                f"episodic_count_bonus_gym needs a Farama MiniGrid env; {type(base).__name__} "
                f"has no {', '.join(missing)}"
            )
        super().__init__(env)
        self.beta = _check_beta(beta)
        self.counts: dict[tuple[int, int, int], int] = {}

    def _visit(self) -> float:
        base = self.env.unwrapped
        x, y = base.agent_pos
        key = (int(x), int(y), int(base.agent_dir))
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.beta / math.sqrt(self.counts[key])

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self.counts = {}
        self._visit()
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        bonus = self._visit()
        info = {**info, "intrinsic_reward": bonus, "extrinsic_reward": reward}
        return obs, reward + bonus, terminated, truncated, info


def episodic_count_bonus_gym(env: gym.Env, beta: float = 0.005) -> EpisodicCountBonusGym:
    """``env`` (a Farama MiniGrid env, e.g. from `wrap_farama`) with the episodic bonus."""
    return EpisodicCountBonusGym(env, beta)


__all__ = [
    "CountState",
    "EpisodicCountBonus",
    "EpisodicCountBonusGym",
    "HashFn",
    "episodic_count_bonus_gym",
    "minigrid_hash",
]
