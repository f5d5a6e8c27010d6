"""Environments: one interface over three backends.

``make(env_id, backend="jax")`` returns a functional `JaxEnv` (a faithful JAX port of a
Farama MiniGrid task); ``make(env_id, backend="gymnasium", num_envs=N)`` returns a host
`GymVectorEnv` over ``gymnasium.vector`` for any registered gymnasium id (the reference
path for MiniGrid and MuJoCo); ``make(env_id, backend="native", num_envs=N)`` a host
`telapa.envs.mujoco.native.NativeVectorEnv` that steps MuJoCo's v5 locomotion envs as one
numpy batch (the path for MuJoCo). Both host envs are `telapa.envs.host.HostVectorEnv`.
All go through the env families of `telapa.envs.registry`. Importing this package
registers every port with gymnasium as ``telapa/<Id>`` (`telapa.envs.gym_vector`:
``gymnasium.make`` / ``make_vec``), and so the native MuJoCo batch
(`telapa.envs.mujoco.gym_vector`: ``make_vec("telapa/HalfCheetah-v5")``).
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
from telapa.envs.mujoco.gym_vector import register_envs as register_mujoco_envs
from telapa.envs.registry import (
    check_env_id,
    default_config,
    family_of,
    jax_env_ids,
    make,
    native_env_ids,
)

register_envs()  # gymnasium ids telapa/<Id> of every port (telapa.envs.gym_vector)
register_mujoco_envs()  # and of the native MuJoCo batch (telapa.envs.mujoco.gym_vector)

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
    "native_env_ids",
]
