"""Environments: one interface over two backends.

``make(env_id, backend="jax")`` returns a functional `JaxEnv` (a faithful JAX port of a
Farama MiniGrid task); ``make(env_id, backend="gymnasium", num_envs=N)`` returns a host
`GymVectorEnv` over ``gymnasium.vector`` for any registered gymnasium id (the reference
path for MiniGrid, and the path for MuJoCo). Both go through the env families of
`telapa.envs.registry`. Importing this package registers every port with gymnasium as
``telapa/<Id>`` (`telapa.envs.gym_vector`: ``gymnasium.make`` / ``make_vec``).
"""

from __future__ import annotations

from telapa.envs.base import (
    ArraySpec,
    AutoReset,
    AutoResetState,
    Backend,
    EnvSpec,
    JaxEnv,
    Obs,
)
from telapa.envs.gym_vector import register_envs
from telapa.envs.registry import check_env_id, default_config, family_of, jax_env_ids, make

register_envs()  # gymnasium ids telapa/<Id> of every port (telapa.envs.gym_vector)

__all__ = [
    "ArraySpec",
    "AutoReset",
    "AutoResetState",
    "Backend",
    "EnvSpec",
    "JaxEnv",
    "Obs",
    "check_env_id",
    "default_config",
    "family_of",
    "jax_env_ids",
    "make",
]
