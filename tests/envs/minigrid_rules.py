"""One jitted port step on a hand-built state, for the task rule tests."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax

from telapa.envs import make
from telapa.envs.minigrid import State


@functools.cache
def step(env_id: str) -> Callable:
    """The jitted ``step`` of the port of ``env_id``."""
    return jax.jit(make(env_id).step)


def outcome(env_id: str, state: State, action: int) -> tuple[bool, bool, float]:
    """``(success, terminated, reward)`` of one step of ``env_id`` from ``state``."""
    _, _, reward, terminated, _, info = step(env_id)(state, action)
    return bool(info["success"]), bool(terminated), float(reward)
