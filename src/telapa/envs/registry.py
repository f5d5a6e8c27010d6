"""The one registry of environments: every env family, asked in order, and what follows
from an env id (its family, its environments on both backends, its PPO preset).

Families are asked in order: the built-in `FAMILIES`, then the plug-in families, and
the generic family (`telapa.envs.generic`) takes any id no other family claims. The
``jax`` backend makes a family's functional port (`telapa.envs.base.JaxEnv`); the
``gymnasium`` backend a host `GymVectorEnv` of the family's single envs; the ``native``
backend the family's own batch of host envs (`EnvFamily.make_native`, MuJoCo's
`telapa.envs.mujoco.native`). A new family is
one module (see `telapa.envs.family`): built in, it is imported here and added to
`FAMILIES`; as a plug-in, an installed package names it under the ``telapa.families``
entry point (loaded the first time an id no built-in family claims is asked about), or a
module given to ``--import`` calls `register_family`.

An env id may name the module that registers it, ``module:Id`` (as ``gymnasium.make``
reads it): the module is imported, then ``Id`` is asked about and made; every function
here takes either form (`telapa.plugins.import_env_module`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from functools import partial
from typing import Any

import gymnasium
import jax

from telapa.config import (
    CONFIG_DIR,
    ConfigError,
    TrainConfig,
    load_config,
    preset_path,
    resolve_named,
)
from telapa.envs.base import Backend, EnvSpec
from telapa.envs.family import EnvFamily
from telapa.envs.generic import GenericFamily
from telapa.envs.gym_backend import GymVectorEnv, check_gym_id, time_limit
from telapa.envs.minigrid.family import MiniGridFamily
from telapa.envs.mujoco import MujocoFamily
from telapa.plugins import (
    FAMILIES_GROUP,
    PluginError,
    entry_point_origin,
    import_env_module,
    load_entry_points,
)

FAMILIES: tuple[EnvFamily, ...] = (MiniGridFamily(), MujocoFamily())
"""The specific families, in the order they are asked."""
GENERIC: EnvFamily = GenericFamily()
"""The family of every id the others do not claim."""


_PLUGINS: dict[str, EnvFamily] = {}
"""Plug-in families by name, in the order they were registered."""
_ENTRY_POINTS_LOADED = False


def _qualname(family: EnvFamily) -> str:
    return f"{type(family).__module__}.{type(family).__qualname__}"


def _check_presets(family: EnvFamily) -> None:
    """`PluginError` naming the family unless its ``train_preset`` names a PPO preset of
    ``configs/ppo/`` and its ``run_preset`` a run preset of ``configs/runs/`` (or a path
    to a YAML file), as `telapa.config.resolve_named` reads them."""
    for field, value, paths in (("train_preset", family.train_preset, False),
                                ("run_preset", family.run_preset, True)):
        folder = CONFIG_DIR / ("ppo" if field == "train_preset" else "runs")
        try:
            if not isinstance(value, str) or not value:
                raise ConfigError("not a name")
            path = resolve_named(value, folder, field)
            if not path.is_file() or (not paths and path.parent != folder):
                raise ConfigError("not a preset")
        except ConfigError:
            names = ", ".join(sorted(p.stem for p in folder.glob("*.yaml")))
            raise PluginError(f"env family {family.name!r} ({_qualname(family)}): "
                              f"{field} {value!r} is not a preset of telapa's "
                              f"configs/{folder.name}/ (available: {names})") from None


def register_family(family: EnvFamily | type) -> EnvFamily:
    """Adds a plug-in family (an `EnvFamily` object, or a class made with no arguments),
    asked after the built-in ones and before the generic one; returns the object. A
    name a built-in family has, or a ``train_preset``/``run_preset`` that names no
    preset, is a `PluginError`; registering the same family again is a no-op."""
    if isinstance(family, type):
        family = family()
    name = getattr(family, "name", None)
    missing = [m for m in ("matches", "check_options", "make_single", "jax_ids", "make_jax",
                           "feature_dim", "competence", "codec", "train_preset",
                           "run_preset", "count_bonus") if not hasattr(family, m)]
    if not isinstance(name, str) or not name or missing:
        raise PluginError(f"env family {_qualname(family)} does not follow telapa.envs.family."
                          f"EnvFamily (missing: {', '.join(missing) or 'name'})")
    builtin = {f.name for f in (*FAMILIES, GENERIC)}
    if name in builtin:
        raise PluginError(f"env family {name!r} ({_qualname(family)}) has the name of a "
                          f"built-in family ({', '.join(sorted(builtin))}); give it another "
                          "name")
    _check_presets(family)
    known = _PLUGINS.get(name)
    if known is not None and type(known) is not type(family):
        raise PluginError(f"two env families are named {name!r}: {_qualname(known)} and "
                          f"{_qualname(family)}")
    return _PLUGINS.setdefault(name, family)


def plugin_families() -> tuple[EnvFamily, ...]:
    """The plug-in families: the ``telapa.families`` entry points (loaded on the first
    call) and those registered by `register_family`."""
    global _ENTRY_POINTS_LOADED
    if not _ENTRY_POINTS_LOADED:
        for name, family in load_entry_points(FAMILIES_GROUP).items():
            registered = register_family(family)
            if registered.name != name:
                raise PluginError(f"{FAMILIES_GROUP} entry point {name!r} ("
                                  f"{entry_point_origin(FAMILIES_GROUP, name)}) gives the "
                                  f"family named {registered.name!r}; name the entry point "
                                  "after it")
        _ENTRY_POINTS_LOADED = True
    return tuple(_PLUGINS.values())


def family_of(env_id: str) -> EnvFamily:
    """The family that owns ``env_id`` (the generic family if no other matches)."""
    env_id = import_env_module(env_id)
    found = next((f for f in FAMILIES if f.matches(env_id)), None)
    if found is None:
        found = next((f for f in plugin_families() if f.matches(env_id)), GENERIC)
    return found


def families() -> list[str]:
    """Names of the families (built-in, plug-in, generic last)."""
    return [f.name for f in (*FAMILIES, *plugin_families())] + [GENERIC.name]


def common_family(env_ids: list[str], where: str = "curriculum") -> EnvFamily:
    """The one family of all ``env_ids``; a ``ValueError`` naming the ids otherwise (a
    run's latent space has one feature dimension)."""
    found = {env_id: family_of(env_id) for env_id in env_ids}
    names = {f.name for f in found.values()}
    if len(names) != 1:
        detail = ", ".join(f"{i} ({f.name})" for i, f in found.items())
        raise ValueError(f"{where} mixes env families: {detail}; a run uses one family")
    return next(iter(found.values()))


def feature_dim(env_id: str, options: Mapping[str, Any] | None = None) -> int:
    """D, the dimension of ``env_id``'s sketch with the task ``options``
    (`EnvFamily.feature_dim`): a family whose ``feature_dim`` takes ``options`` (the
    generic family's, whose D is the observation's size as the options make the env) is
    given them, any other is asked about the id alone. ``module:Id`` imports the module."""
    name = import_env_module(env_id)
    family = family_of(name)
    try:
        takes = "options" in inspect.signature(family.feature_dim).parameters
    except (TypeError, ValueError):  # a callable without a signature
        takes = False
    return family.feature_dim(name, dict(options or {})) if takes else family.feature_dim(name)


def default_config(env_id: str) -> TrainConfig:
    """The PPO preset of ``env_id``'s family: ``configs/ppo/minigrid.yaml`` for MiniGrid
    ids, ``mujoco.yaml`` for MuJoCo and any other id."""
    return load_config(preset_path(family_of(env_id).train_preset))


def jax_env_ids() -> list[str]:
    """Ids available on the ``jax`` backend (every family's ports)."""
    return sorted(i for f in (*FAMILIES, *plugin_families(), GENERIC) for i in f.jax_ids())


def native_env_ids() -> list[str]:
    """Ids available on the ``native`` backend (every family's `EnvFamily.native_ids`;
    a plug-in written before `EnvFamily` has none)."""
    return sorted(i for f in (*FAMILIES, *plugin_families(), GENERIC)
                  for i in getattr(f, "native_ids", tuple)())


BACKENDS: tuple[str, ...] = ("jax", "gymnasium", "native")
"""The backends (`telapa.envs.base.Backend`)."""


def default_backend(env_id: str, *, platform: str | None = None) -> Backend:
    """The fastest backend that has ``env_id`` on ``platform`` (default: JAX's,
    `jax.default_backend`): ``native`` where the id has a native batch and either no port
    or only a CPU to run the port on (MuJoCo on a CPU, where issue 53 measured MJX at
    3,650 env steps/s for 16 HalfCheetahs against 39,300 for one in a bare ``mj_step``
    loop, and `telapa train` on MJX ran 594 env steps/s beside the MuJoCo study against
    BENCHMARKS.md's 15k for native PPO), else ``jax`` where it has a port (MiniGrid;
    MuJoCo on an accelerator), else ``gymnasium``. ``module:Id`` imports the module."""
    name = import_env_module(env_id)
    on_cpu = (platform or jax.default_backend()) == "cpu"
    ported = name in jax_env_ids()
    if name in native_env_ids() and (on_cpu or not ported):
        return "native"
    return "jax" if ported else "gymnasium"


def _unknown_backend(backend: str) -> ValueError:
    return ValueError(f"unknown backend {backend!r}; expected one of "
                      f"{', '.join(map(repr, BACKENDS))}")


def _unknown_native_id(env_id: str) -> ValueError:
    return ValueError(f"unknown env id {env_id!r} for backend 'native'; available: "
                      f"{', '.join(native_env_ids())} (any gymnasium id runs with backend "
                      "'gymnasium')")


def _unknown_jax_id(env_id: str, hint: str = "") -> ValueError:
    """A MuJoCo id without an MJX port (Ant) is told why and where it runs; any other
    id (a plug-in family's native id too) gets the jax ids there are."""
    family = family_of(env_id)
    if family.name == "mujoco" and env_id in family.native_ids():
        return ValueError(f"{env_id} has no port on backend 'jax' (the MJX ports: "
                          f"{', '.join(family.jax_ids())}; MJX's contacts are not mujoco's "
                          "for Ant): run it on backend 'native'")
    return ValueError(f"unknown env id {env_id!r} for backend 'jax'; available: "
                      f"{', '.join(jax_env_ids())}{hint}")


def check_env_id(env_id: str, backend: Backend) -> None:
    """Raises ``ValueError`` naming ``env_id`` and the alternatives unless it exists on
    ``backend`` (checked before any work starts); for ``module:Id``, the module is
    imported first and the error names it."""
    if backend not in BACKENDS:
        raise _unknown_backend(backend)
    name = import_env_module(env_id)
    try:
        if backend == "jax":
            if name not in jax_env_ids():
                raise _unknown_jax_id(name, " (any gymnasium id runs with backend "
                                            "'gymnasium')")
        elif backend == "native":
            if name not in native_env_ids():
                raise _unknown_native_id(name)
        else:
            check_gym_id(name)
    except ValueError as err:
        if name == env_id:
            raise
        module = env_id[: -len(name) - 1]
        raise PluginError(f"env id {env_id!r}: module {module!r} was imported but {err}"
                          ) from None


_TIME_LIMITS: dict[tuple[str, str], int] = {}
"""`time_limit` by env id and task options (JSON), as `check_time_limit` found it."""


def check_time_limit(env_id: str, options: dict[str, Any]) -> None:
    """``ValueError`` naming ``env_id`` unless its gymnasium env, made with the task's
    ``options``, ends its episodes at a time limit (`time_limit`): evaluations run every
    episode to its end and PPO's statistics count ended episodes, so a run of an env
    without one fails at its first evaluation, every time it is tried. Checked when a
    curriculum is read, before any work; an id whose registration gives the limit is not
    made, any other is made once per process (per id and options)."""
    name = import_env_module(env_id)
    key = (name, json.dumps(options, sort_keys=True, default=repr))
    if key not in _TIME_LIMITS:
        _TIME_LIMITS[key] = _time_limit(name, options)
    if not _TIME_LIMITS[key]:
        raise ValueError(
            f"{env_id} has no time limit: its episodes must end for telapa to evaluate "
            "it; register it with max_episode_steps=N (gymnasium.register) or wrap it in "
            "gymnasium.wrappers.TimeLimit")


def _time_limit(env_id: str, options: dict[str, Any]) -> int:
    """`time_limit` of the gymnasium env ``env_id`` with the task ``options``."""
    registered = gymnasium.spec(env_id).max_episode_steps
    if registered and "max_episode_steps" not in options:
        return registered
    try:
        env = family_of(env_id).make_single(env_id, dict(options))
    except Exception as err:  # noqa: BLE001 - whatever the env's constructor raises
        raise ValueError(f"{env_id} cannot be made with options {options}: "
                         f"{type(err).__name__}: {err}") from None
    try:
        return time_limit(env)
    finally:
        env.close()


def _check_port(family: EnvFamily, env_id: str, env: Any) -> None:
    """``ValueError`` naming the family unless its port of ``env_id`` says it is that id
    and has the family's sketch dimension D (what the run's latent space reads)."""
    spec = getattr(env, "spec", None)
    if not isinstance(spec, EnvSpec):
        raise ValueError(f"env family {family.name!r} ({_qualname(family)}): make_jax"
                         f"({env_id!r}) gave {type(env).__name__}, not a JaxEnv with an "
                         "EnvSpec `spec`")
    dim = family.feature_dim(env_id)
    if spec.env_id != env_id or spec.feature_dim != dim:
        raise ValueError(f"env family {family.name!r} ({_qualname(family)}): make_jax"
                         f"({env_id!r}) gave spec env_id={spec.env_id!r}, feature_dim="
                         f"{spec.feature_dim}; expected {env_id!r} and feature_dim({env_id!r})"
                         f" = {dim}")


def make(env_id: str, backend: Backend = "jax", **options: Any):
    """Creates ``env_id`` on ``backend``.

    ``jax``: the family's port with its task options (e.g. ``observe_mission=False``).
    ``gymnasium``: a `GymVectorEnv` of the family's single envs; ``num_envs`` (default 8),
    ``seed`` (0) and ``wrapper`` (applied to each single env) configure the vector env,
    every other option is a task option of the family.
    ``native``: the family's `EnvFamily.make_native` batch of ``num_envs`` (default 8)
    envs seeded with ``seed`` (0); every other option is a task option. ``module:Id``: the module is
    imported, then ``Id`` is made (and is the env's ``spec.env_id``).
    """
    env_id = import_env_module(env_id)
    if backend == "jax":
        family = family_of(env_id)
        if env_id not in family.jax_ids():
            raise _unknown_jax_id(env_id)
        env = family.make_jax(env_id, options)
        _check_port(family, env_id, env)
        return env
    if backend == "gymnasium":
        num_envs = options.pop("num_envs", 8)
        seed = options.pop("seed", 0)
        wrapper = options.pop("wrapper", None)
        check_gym_id(env_id)
        family = family_of(env_id)
        return GymVectorEnv(env_id, partial(family.make_single, env_id, options),
                            feature_dim=feature_dim(env_id, options), num_envs=num_envs,
                            seed=seed, wrapper=wrapper)
    if backend == "native":
        num_envs = options.pop("num_envs", 8)
        seed = options.pop("seed", 0)
        if env_id not in native_env_ids():
            raise _unknown_native_id(env_id)
        return family_of(env_id).make_native(env_id, options, num_envs=num_envs, seed=seed)
    raise _unknown_backend(backend)


__all__ = ["BACKENDS", "FAMILIES", "GENERIC", "check_env_id", "check_time_limit",
           "common_family", "default_backend", "default_config", "families", "family_of",
           "feature_dim",
           "jax_env_ids", "make", "native_env_ids", "plugin_families", "register_family"]
