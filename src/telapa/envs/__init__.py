"""Environments: one interface over two backends.

``make(env_id, backend="jax")`` returns a functional `JaxEnv` (a faithful JAX port of a
Farama MiniGrid task); ``make(env_id, backend="gymnasium", num_envs=N)`` returns a host
`GymVectorEnv` over ``gymnasium.vector`` for any registered gymnasium id (the reference
path for MiniGrid, and the path for MuJoCo).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from telapa.envs.base import ArraySpec, AutoReset, AutoResetState, EnvSpec, JaxEnv, Obs

Backend = Literal["jax", "gymnasium"]

_JAX_REGISTRY: dict[str, Callable[..., JaxEnv]] = {}


def register_jax(env_id: str, factory: Callable[..., JaxEnv]) -> None:
    """Registers a JAX port under its (Farama) id."""
    if env_id in _JAX_REGISTRY:
        raise ValueError(f"jax env {env_id!r} is already registered")
    _JAX_REGISTRY[env_id] = factory


def jax_env_ids() -> list[str]:
    """Ids available on the ``jax`` backend."""
    _load_ports()
    return sorted(_JAX_REGISTRY)


def _load_ports() -> None:
    import telapa.envs.minigrid  # noqa: F401  (registers the MiniGrid ports)


def check_env_id(env_id: str, backend: Backend) -> None:
    """Raises ``ValueError`` naming ``env_id`` and the alternatives unless it exists on
    ``backend`` (checked before any work starts)."""
    if backend == "jax":
        ids = jax_env_ids()
        if env_id not in ids:
            raise ValueError(
                f"unknown env id {env_id!r} for backend 'jax'; available: {', '.join(ids)} "
                "(any gymnasium id runs with backend 'gymnasium')"
            )
    elif backend == "gymnasium":
        from telapa.envs.gym_backend import check_gym_id

        check_gym_id(env_id)
    else:
        raise ValueError(f"unknown backend {backend!r}; expected 'jax' or 'gymnasium'")


def make(env_id: str, backend: Backend = "jax", **options: Any):
    """Creates ``env_id`` on ``backend``.

    Options are passed to the backend: for ``jax`` the port's options (e.g.
    ``observe_mission=False``); for ``gymnasium`` at least ``num_envs`` and ``seed``.
    """
    if backend == "jax":
        _load_ports()
        if env_id not in _JAX_REGISTRY:
            available = ", ".join(sorted(_JAX_REGISTRY))
            raise ValueError(
                f"unknown env id {env_id!r} for backend 'jax'; available: {available}"
            )
        return _JAX_REGISTRY[env_id](**options)
    if backend == "gymnasium":
        from telapa.envs.gym_backend import GymVectorEnv

        return GymVectorEnv(env_id, **options)
    raise ValueError(f"unknown backend {backend!r}; expected 'jax' or 'gymnasium'")


__all__ = [
    "ArraySpec",
    "AutoReset",
    "AutoResetState",
    "EnvSpec",
    "JaxEnv",
    "Obs",
    "check_env_id",
    "jax_env_ids",
    "make",
    "register_jax",
]
