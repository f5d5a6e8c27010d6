"""The MuJoCo v5 locomotion envs of the ``native`` backend (`telapa.envs.mujoco.native`):
their ids, their task options, and gymnasium's default keyword arguments, read from the
env classes' signatures (so the native backend follows gymnasium's defaults rather than
copying them). Imports no ``mujoco``: the classes are loaded through gymnasium's
registry when first asked for, so the family (and ``import telapa``) works where
``mujoco`` is not installed until a native env is made.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import gymnasium
import numpy as np
from gymnasium.envs.registration import load_env_creator

NATIVE_IDS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5")
"""The ids the native backend steps."""

MJX_IDS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5")
"""The ids with an MJX port on the ``jax`` backend (`telapa.envs.mujoco.mjx_env`; Ant is
not ported: MJX's contacts for its legs are not mujoco's, docs/assumptions.md)."""

OPTIONS = ("friction", "max_episode_steps")
"""The task options the native backend takes (the gymnasium backend takes any keyword of
``gymnasium.make``)."""


@functools.cache
def defaults(env_id: str) -> dict[str, Any]:
    """Gymnasium's default keyword arguments of ``env_id``'s env class (e.g.
    ``frame_skip``, ``ctrl_cost_weight``, ``healthy_z_range``, ``xml_file``)."""
    cls = load_env_creator(gymnasium.spec(env_id).entry_point)
    params = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p.default for p in params if p.default is not p.empty}


def check_native_options(env_id: str, options: dict[str, Any], *,
                         backend: str = "native") -> None:
    """One-line ``ValueError`` naming what is wrong unless ``env_id`` runs on ``backend``
    (``native``, or ``jax``: the MJX ports, `MJX_IDS`) with the task ``options``
    (friction is checked where the env is made)."""
    ids = NATIVE_IDS if backend == "native" else MJX_IDS
    if env_id not in ids:
        raise ValueError(f"unknown env id {env_id!r} for backend {backend!r}; available: "
                         f"{', '.join(sorted(ids))}")
    rest = sorted(set(options) - set(OPTIONS))
    if rest:
        raise ValueError(f"{env_id}: option(s) {', '.join(rest)} not supported by backend "
                         f"{backend!r} (valid: {', '.join(OPTIONS)}; any gymnasium.make "
                         "keyword runs on backend 'gymnasium')")
    limit = options.get("max_episode_steps", 1)
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise ValueError(f"{env_id}: max_episode_steps must be an integer >= 1, got "
                         f"{limit!r}")


__all__ = ["MJX_IDS", "NATIVE_IDS", "OPTIONS", "check_native_options", "defaults"]
