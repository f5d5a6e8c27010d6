"""Freshly generated MiniGrid levels, from the port and from Farama, as batched `State`s.

`port_levels` runs a generator over ``n`` keys in one jitted ``vmap``; `farama_levels`
resets a Farama env with seeds ``0 .. n-1`` and reads each level with `from_farama`.
Both return a `State` whose leaves are numpy arrays with a leading level axis, cached
per id for the test session (Farama resets take milliseconds each).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import gymnasium as gym
import jax
import minigrid  # noqa: F401  (registers the Farama ids)
import numpy as np

from telapa.envs.minigrid import State, all_tasks, from_farama

N_LEVELS = 2000
PORT_SEED = 20240611

Generator = Callable[[jax.Array], State]


def generate_levels(generate: Generator, n: int = N_LEVELS, seed: int = PORT_SEED) -> State:
    """``generate`` (e.g. `Task.generate`) over ``n`` keys, as numpy."""
    keys = jax.random.split(jax.random.PRNGKey(seed), n)
    return jax.device_get(jax.jit(jax.vmap(generate))(keys))


@functools.cache
def port_levels(env_id: str) -> State:
    """`N_LEVELS` levels of the port of ``env_id``."""
    return generate_levels(all_tasks()[env_id].generate)


@functools.cache
def farama_levels(env_id: str) -> State:
    """`N_LEVELS` levels of Farama's ``env_id``, reset with seeds ``0 .. N_LEVELS - 1``."""
    env = gym.make(env_id)
    levels = []
    for seed in range(N_LEVELS):
        env.reset(seed=seed)
        levels.append(jax.device_get(from_farama(env)))
    env.close()
    return jax.tree.map(lambda *leaves: np.stack(leaves), *levels)
