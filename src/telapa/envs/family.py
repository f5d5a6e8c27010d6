"""Environment families: the one place that knows what an env id belongs to.

A family answers, for the ids it `matches`:

* ``make_single(env_id, options)``: one host gymnasium env with the project's
  observation dict and ``info["features"]`` (the per-step trajectory sketch) at every
  step; ``options`` are the family's task parameters (e.g. ``friction`` for MuJoCo,
  ``observe_mission`` for MiniGrid), checked by ``check_options`` before any work;
* ``feature_dim(env_id)``: D, the sketch's dimension (what the latent embedder reads);
* ``competence(env_id)``: the `Competence` score of a set of episode returns that drives
  gates, anchors, few-shot selection and every metric (the return stays the fitness);
* ``codec(agent)``: how stored trajectories are compressed;
* ``train_preset``: the default PPO preset, ``configs/ppo/<train_preset>.yaml``;
* ``run_preset``: the run preset ``telapa run`` and ``telapa demo`` use when none is
  given, ``configs/runs/<run_preset>.yaml`` (quick budgets for trying the pipeline);
* ``count_bonus``: whether the episodic count bonus (`telapa.envs.intrinsic`, which hashes
  MiniGrid states) applies.

Families: MiniGrid (`telapa.envs.minigrid.family`), MuJoCo (`telapa.envs.mujoco`), and
a generic fallback for any other Box-observation gymnasium env (features = the
observation, success = positive return: the behaviour before families existed).
A new family is one module that calls `register_family`, plus its YAML presets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    import gymnasium

    from telapa.qd.trajectories import FeatureCodec
    from telapa.rl.agent import Agent


def _xp(x: Any):
    import jax
    import jax.numpy as jnp

    return jnp if isinstance(x, jax.Array) else np


@dataclass(frozen=True)
class Competence:
    """Competence of a set of episodes from their returns, over the last axis."""

    def __call__(self, returns: Any) -> Any:
        raise NotImplementedError

    def of_stats(self, mean_return: Any, success_fraction: Any) -> Any:
        """The same score from a mean return and the fraction of positive returns (the
        statistics PPO's episode tracker keeps): floats or arrays (jax arrays inside a
        jitted program)."""
        raise NotImplementedError


@dataclass(frozen=True)
class SuccessRate(Competence):
    """SR = mean_e [R_e > 0] (paper eq. SR; in MiniGrid a positive return is a success)."""

    def __call__(self, returns: Any) -> Any:
        xp = _xp(returns)
        return xp.mean(returns > 0, axis=-1, dtype=xp.float32)

    def of_stats(self, mean_return: Any, success_fraction: Any) -> Any:
        return success_fraction


@dataclass(frozen=True)
class NormalizedReturn(Competence):
    """SR~ = clip(mean_e R_e / R*, 0, 1) (paper App. MuJoCo, normalized competence)."""

    reference: float
    """R*, the return that counts as full competence (> 0)."""

    def __post_init__(self) -> None:
        if not self.reference > 0:
            raise ValueError(f"NormalizedReturn: reference return must be > 0, got "
                             f"{self.reference}")

    def __call__(self, returns: Any) -> Any:
        xp = _xp(returns)
        mean = xp.mean(xp.asarray(returns, xp.float32), axis=-1)
        return xp.clip(mean / xp.float32(self.reference), 0.0, 1.0).astype(xp.float32)

    def of_stats(self, mean_return: Any, success_fraction: Any) -> Any:
        if isinstance(mean_return, (float, int, np.floating)):
            return float(np.clip(mean_return / self.reference, 0.0, 1.0))
        xp = _xp(mean_return)
        return xp.clip(mean_return / xp.float32(self.reference), 0.0, 1.0)


class EnvFamily(Protocol):
    """See the module docstring."""

    name: str
    train_preset: str
    run_preset: str
    count_bonus: bool

    def matches(self, env_id: str) -> bool: ...
    def check_options(self, env_id: str, options: dict[str, Any]) -> None: ...
    def make_single(self, env_id: str, options: dict[str, Any]) -> gymnasium.Env: ...
    def feature_dim(self, env_id: str) -> int: ...
    def competence(self, env_id: str) -> Competence: ...
    def codec(self, agent: Agent) -> FeatureCodec: ...


class GenericFamily:
    """Any other gymnasium env with a Box observation (CartPole, Pendulum, ...): the
    observation is the feature vector and success is a positive return."""

    name = "generic"
    train_preset = "mujoco"
    run_preset = "mujoco-quick"
    count_bonus = False

    def matches(self, env_id: str) -> bool:
        return True

    def check_options(self, env_id: str, options: dict[str, Any]) -> None:
        pass  # passed on to gymnasium.make, which names a bad keyword itself

    def make_single(self, env_id: str, options: dict[str, Any]) -> gymnasium.Env:
        import gymnasium

        from telapa.envs.gym_backend import VectorObsFeatures

        return VectorObsFeatures(gymnasium.make(env_id, **options))

    def feature_dim(self, env_id: str) -> int:
        import gymnasium

        space = gymnasium.spec(env_id).make().observation_space
        return int(np.prod(space.shape))

    def competence(self, env_id: str) -> Competence:
        return SuccessRate()

    def codec(self, agent: Agent) -> FeatureCodec:
        from telapa.qd.trajectories import float16_codec

        return float16_codec(agent.spec.feature_dim)


_FAMILIES: list[EnvFamily] = []
_GENERIC = GenericFamily()


def register_family(family: EnvFamily) -> None:
    """Adds ``family``; families are asked in registration order, the generic one last."""
    if any(f.name == family.name for f in _FAMILIES):
        raise ValueError(f"env family {family.name!r} is already registered")
    _FAMILIES.append(family)


def _load_families() -> None:
    import telapa.envs.minigrid.family  # noqa: F401  (registers "minigrid")
    import telapa.envs.mujoco  # noqa: F401  (registers "mujoco")


def family_of(env_id: str) -> EnvFamily:
    """The family that owns ``env_id`` (the generic family if no other matches)."""
    _load_families()
    return next((f for f in _FAMILIES if f.matches(env_id)), _GENERIC)


def families() -> list[str]:
    """Names of the registered families (generic last)."""
    _load_families()
    return [f.name for f in _FAMILIES] + [_GENERIC.name]


def common_family(env_ids: list[str], where: str = "curriculum") -> EnvFamily:
    """The one family of all ``env_ids``; a ``ValueError`` naming the ids otherwise (a
    run's latent space has one feature dimension)."""
    found = {env_id: family_of(env_id) for env_id in env_ids}
    names = {f.name for f in found.values()}
    if len(names) != 1:
        detail = ", ".join(f"{i} ({f.name})" for i, f in found.items())
        raise ValueError(f"{where} mixes env families: {detail}; a run uses one family")
    return next(iter(found.values()))


__all__ = [
    "Competence",
    "EnvFamily",
    "GenericFamily",
    "NormalizedReturn",
    "SuccessRate",
    "common_family",
    "families",
    "family_of",
    "register_family",
]
