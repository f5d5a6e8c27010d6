"""The one registry of environments: every env family, asked in order, and what follows
from an env id (its family, its environments on both backends, its PPO preset).

Families are asked in `FAMILIES` order; the generic family (`telapa.envs.generic`) takes
any id no other family claims. The ``jax`` backend makes a family's functional port
(`telapa.envs.base.JaxEnv`); the ``gymnasium`` backend a host `GymVectorEnv` of the
family's single envs. A new family is one module (see `telapa.envs.family`) imported
here and added to `FAMILIES`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from telapa.config import TrainConfig, load_config, preset_path
from telapa.envs.base import Backend
from telapa.envs.family import EnvFamily
from telapa.envs.generic import GenericFamily
from telapa.envs.gym_backend import GymVectorEnv, check_gym_id
from telapa.envs.minigrid.family import MiniGridFamily
from telapa.envs.mujoco import MujocoFamily

FAMILIES: tuple[EnvFamily, ...] = (MiniGridFamily(), MujocoFamily())
"""The specific families, in the order they are asked."""
GENERIC: EnvFamily = GenericFamily()
"""The family of every id the others do not claim."""


def family_of(env_id: str) -> EnvFamily:
    """The family that owns ``env_id`` (the generic family if no other matches)."""
    return next((f for f in FAMILIES if f.matches(env_id)), GENERIC)


def families() -> list[str]:
    """Names of the families (generic last)."""
    return [f.name for f in FAMILIES] + [GENERIC.name]


def common_family(env_ids: list[str], where: str = "curriculum") -> EnvFamily:
    """The one family of all ``env_ids``; a ``ValueError`` naming the ids otherwise (a
    run's latent space has one feature dimension)."""
    found = {env_id: family_of(env_id) for env_id in env_ids}
    names = {f.name for f in found.values()}
    if len(names) != 1:
        detail = ", ".join(f"{i} ({f.name})" for i, f in found.items())
        raise ValueError(f"{where} mixes env families: {detail}; a run uses one family")
    return next(iter(found.values()))


def default_config(env_id: str) -> TrainConfig:
    """The PPO preset of ``env_id``'s family: ``configs/ppo/minigrid.yaml`` for MiniGrid
    ids, ``mujoco.yaml`` for MuJoCo and any other id."""
    return load_config(preset_path(family_of(env_id).train_preset))


def jax_env_ids() -> list[str]:
    """Ids available on the ``jax`` backend (every family's ports)."""
    return sorted(i for f in (*FAMILIES, GENERIC) for i in f.jax_ids())


def _unknown_jax_id(env_id: str, hint: str = "") -> ValueError:
    return ValueError(f"unknown env id {env_id!r} for backend 'jax'; available: "
                      f"{', '.join(jax_env_ids())}{hint}")


def check_env_id(env_id: str, backend: Backend) -> None:
    """Raises ``ValueError`` naming ``env_id`` and the alternatives unless it exists on
    ``backend`` (checked before any work starts)."""
    if backend == "jax":
        if env_id not in jax_env_ids():
            raise _unknown_jax_id(env_id, " (any gymnasium id runs with backend 'gymnasium')")
    elif backend == "gymnasium":
        check_gym_id(env_id)
    else:
        raise ValueError(f"unknown backend {backend!r}; expected 'jax' or 'gymnasium'")


def make(env_id: str, backend: Backend = "jax", **options: Any):
    """Creates ``env_id`` on ``backend``.

    ``jax``: the family's port with its task options (e.g. ``observe_mission=False``).
    ``gymnasium``: a `GymVectorEnv` of the family's single envs; ``num_envs`` (default 8),
    ``seed`` (0) and ``wrapper`` (applied to each single env) configure the vector env,
    every other option is a task option of the family.
    """
    if backend == "jax":
        family = family_of(env_id)
        if env_id not in family.jax_ids():
            raise _unknown_jax_id(env_id)
        return family.make_jax(env_id, options)
    if backend == "gymnasium":
        num_envs = options.pop("num_envs", 8)
        seed = options.pop("seed", 0)
        wrapper = options.pop("wrapper", None)
        check_gym_id(env_id)
        family = family_of(env_id)
        return GymVectorEnv(env_id, partial(family.make_single, env_id, options),
                            feature_dim=family.feature_dim(env_id), num_envs=num_envs,
                            seed=seed, wrapper=wrapper)
    raise ValueError(f"unknown backend {backend!r}; expected 'jax' or 'gymnasium'")


__all__ = ["FAMILIES", "GENERIC", "check_env_id", "common_family", "default_config",
           "families", "family_of", "jax_env_ids", "make"]
