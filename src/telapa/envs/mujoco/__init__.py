"""The MuJoCo env family (`telapa.envs.family`): gymnasium's MuJoCo envs
(``HalfCheetah-v5``, ``Hopper-v5``, ``Walker2d-v5``, ``Ant-v5``, ...), stepped on the host
by ``mujoco`` on two backends:

* ``native`` (the curricula's default; ``HalfCheetah-v5``, ``Hopper-v5``, ``Walker2d-v5``
  and ``Ant-v5`` with gymnasium's default settings): a batch of envs stepped with
  ``mujoco`` directly and computed in numpy (`telapa.envs.mujoco.native`), bit-identical
  to the gymnasium backend for the same seeds and actions (tests/envs/
  test_mujoco_native.py); task options ``friction`` and ``max_episode_steps``;
* ``gymnasium`` (the reference; any MuJoCo id and any ``gymnasium.make`` keyword): each
  env through gymnasium's wrappers in a ``SyncVectorEnv`` (`telapa.envs.gym_backend`).

On both:

* task option ``friction`` (default 1.0): the friction regime F_s, sliding friction of
  every geom x s (`telapa.envs.mujoco.friction`); on ``gymnasium`` any other option goes
  to ``gymnasium.make`` (e.g. ``max_episode_steps``);
* sketch: the D = 24 per-step summary of `telapa.envs.mujoco.sketch`;
* competence: SR~ = clip(E[R] / R*, 0, 1) with R* from `REFERENCE_RETURNS` (the paper's
  5000 / 3000 / 4000 for HalfCheetah / Hopper / Walker2d; Ant 6000, our choice), else
  gymnasium's registered ``reward_threshold`` when it is positive;
* trajectories stored as float16; PPO preset ``configs/ppo/mujoco.yaml``;
* frames: `telapa.envs.mujoco.render` (headless OpenGL, EGL or OSMesa).

On the ``jax`` backend, ``HalfCheetah-v5``, ``Hopper-v5`` and ``Walker2d-v5`` are MJX
ports (`telapa.envs.mujoco.mjx_env`: the native backend's equations in ``jax.numpy``,
float32; task options ``friction`` and ``max_episode_steps``), the device path: one
compiled program per visit with its seeds vmapped, for accelerators (on a CPU the native
backend is faster).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import gymnasium

from telapa.envs.family import Competence, EnvFamily, NormalizedReturn
from telapa.envs.mujoco.friction import FrictionScale
from telapa.envs.mujoco.v5 import MJX_IDS, NATIVE_IDS, check_native_options

if TYPE_CHECKING:
    from telapa.envs.base import JaxEnv
    from telapa.envs.host import HostVectorEnv
from telapa.envs.mujoco.sketch import SKETCH_DIM, MujocoSketch, sketch

REFERENCE_RETURNS: dict[str, float] = {
    "HalfCheetah": 5000.0,
    "Hopper": 3000.0,
    "Walker2d": 4000.0,
    "Ant": 6000.0,
}
"""R* per environment name (the id without ``-vN``). Paper: HalfCheetah, Hopper, Walker2d.
Ant (paper silent): 6000, gymnasium's ``reward_threshold`` for Ant-v5, i.e. the return at
which gymnasium calls Ant solved (docs/assumptions.md)."""


def _entry_module(env_id: str) -> str:
    spec = gymnasium.registry.get(env_id)
    if spec is None:
        return ""
    entry = spec.entry_point
    return entry if isinstance(entry, str) else getattr(entry, "__module__", "")


def reference_return(env_id: str) -> float:
    """R* of ``env_id``: `REFERENCE_RETURNS` by name, else gymnasium's positive
    ``reward_threshold``; a ``ValueError`` naming the id when neither exists."""
    name = env_id.split("-v")[0]
    if name in REFERENCE_RETURNS:
        return REFERENCE_RETURNS[name]
    spec = gymnasium.registry.get(env_id)
    threshold = spec.reward_threshold if spec is not None else None
    if threshold is not None and threshold > 0:
        return float(threshold)
    raise ValueError(
        f"{env_id}: no reference return R* for the normalized competence; add "
        f"{name!r} to telapa.envs.mujoco.REFERENCE_RETURNS"
    )


UPSTREAM_WARNINGS = (r"MuJoCo: compiler attribute 'settotalmass' is deprecated",)
"""The warnings (message patterns) that `telapa.envs.mujoco.native.model_warnings` gives
when gymnasium's own envs (the ``gymnasium`` backend) load its v5 XML files: upstream's,
nothing a user of telapa can act on. The ``native`` and ``jax`` backends compile the same
models without them (`telapa.envs.mujoco.native.load_model`)."""


@contextmanager
def quiet_model_loads() -> Iterator[None]:
    """Hides `UPSTREAM_WARNINGS` inside: for commands that only read results, which load
    a MuJoCo run's models only to check its curriculum (its env ids and options), so that
    the deprecation of gymnasium's XML is no line in a researcher's tables. Commands that
    build gymnasium-backend envs give it once per process
    (`telapa.envs.mujoco.native.model_warnings`)."""
    with warnings.catch_warnings():
        for message in UPSTREAM_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=RuntimeWarning)
        yield


def _gymnasium_make(env_id: str, options: dict[str, Any]) -> gymnasium.Env:
    """``gymnasium.make(env_id, **options)`` with MuJoCo's model-load warnings as Python
    warnings (`telapa.envs.mujoco.native.model_warnings`), as the native backend loads
    its models, instead of a stderr line at every env made."""
    from telapa.envs.mujoco.native import model_warnings  # imports mujoco, as make does

    with model_warnings():
        return gymnasium.make(env_id, **options)


class MujocoFamily(EnvFamily):
    """See the module docstring; no JAX ports, float16 trajectories, the ``mujoco``
    presets and no count bonus are `EnvFamily`'s defaults."""

    name = "mujoco"

    def matches(self, env_id: str) -> bool:
        return _entry_module(env_id).startswith("gymnasium.envs.mujoco")

    def check_options(self, env_id: str, options: dict[str, Any]) -> None:
        friction = options.get("friction", 1.0)
        if isinstance(friction, bool) or not isinstance(friction, (int, float)) \
                or not friction > 0:
            raise ValueError(f"{env_id}: option friction must be a number > 0, got "
                             f"{friction!r}")
        reference_return(env_id)
        rest = {k: v for k, v in options.items() if k != "friction"}
        if rest:  # gymnasium.make's keywords: make one env now to name a bad one early
            try:
                _gymnasium_make(env_id, rest).close()
            except TypeError as err:
                raise ValueError(f"{env_id}: bad option(s) {', '.join(rest)} "
                                 f"(valid: friction and gymnasium.make's keywords): {err}"
                                 ) from None

    def make_single(self, env_id: str, options: dict[str, Any]) -> gymnasium.Env:
        options = dict(options)
        friction = options.pop("friction", 1.0)
        env = _gymnasium_make(env_id, options)
        time_limit = env.spec.max_episode_steps if env.spec else None
        if not time_limit:
            raise ValueError(f"{env_id}: the MuJoCo sketch needs a time limit "
                             "(max_episode_steps)")
        env = FrictionScale(env, friction)
        return MujocoSketch(env, reference_return=reference_return(env_id),
                            time_limit=int(time_limit))

    def jax_ids(self) -> tuple[str, ...]:
        return MJX_IDS

    def make_jax(self, env_id: str, options: dict[str, Any]) -> JaxEnv:
        from telapa.envs.mujoco.mjx_env import make_mjx  # imports mujoco and MJX

        return make_mjx(env_id, options, reference_return=reference_return(env_id))

    def native_ids(self) -> tuple[str, ...]:
        return NATIVE_IDS

    def make_native(self, env_id: str, options: dict[str, Any], *, num_envs: int,
                    seed: int) -> HostVectorEnv:
        check_native_options(env_id, options)
        from telapa.envs.mujoco.native import NativeVectorEnv  # imports mujoco

        return NativeVectorEnv(env_id, num_envs=num_envs, seed=seed,
                               reference_return=reference_return(env_id), **options)

    def feature_dim(self, env_id: str) -> int:
        return SKETCH_DIM

    def competence(self, env_id: str) -> Competence:
        return NormalizedReturn(reference_return(env_id))


__all__ = [
    "REFERENCE_RETURNS",
    "SKETCH_DIM",
    "FrictionScale",
    "MujocoFamily",
    "MujocoSketch",
    "NATIVE_IDS",
    "reference_return",
    "sketch",
]
