"""What an environment family is: the `EnvFamily` protocol and the `Competence` scores.

A family answers, for the ids it `matches`:

* ``make_single(env_id, options)``: one host gymnasium env with the project's
  observation dict and ``info["features"]`` (the per-step trajectory sketch) at every
  step; ``options`` are the family's task parameters (e.g. ``friction`` for MuJoCo,
  ``observe_mission`` for MiniGrid), checked by ``check_options`` before any work;
* ``jax_ids()`` / ``make_jax(env_id, options)``: the ids it has as functional `JaxEnv`
  ports (the ``jax`` backend), and one such env;
* ``feature_dim(env_id)``: D, the sketch's dimension (what the latent embedder reads);
* ``competence(env_id)``: the `Competence` score of a set of episode returns that drives
  gates, anchors, few-shot selection, every metric and PPO's training statistics (the
  return stays the fitness); a curriculum task's ``success`` replaces it for that task
  (`telapa.continual.curriculum.Success`);
* ``codec(spec)``: how stored trajectories of the env with `EnvSpec` ``spec`` are
  compressed (`telapa.qd.trajectories.FeatureCodec`);
* ``train_preset``: the default PPO preset, ``configs/ppo/<train_preset>.yaml``;
* ``run_preset``: the run preset ``telapa run`` and ``telapa demo`` use when none is
  given, ``configs/runs/<run_preset>.yaml`` (quick budgets for trying the pipeline);
* ``count_bonus``: whether the episodic count bonus (`telapa.envs.intrinsic`, which hashes
  MiniGrid states) applies.

The families are MiniGrid (`telapa.envs.minigrid.family`), MuJoCo (`telapa.envs.mujoco`)
and a generic fallback for any other Box-observation gymnasium env
(`telapa.envs.generic`); `telapa.envs.registry` imports and asks them. A new family is
one module with a class that follows `EnvFamily`, one line in the registry, and its YAML
presets; or, outside telapa, a plug-in (`telapa.plugins`: the ``telapa.families`` entry
point, or `telapa.envs.registry.register_family` from a module given to ``--import``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    import gymnasium

    from telapa.envs.base import EnvSpec, JaxEnv
    from telapa.qd.trajectories import FeatureCodec


def _xp(x: Any):
    import jax
    import jax.numpy as jnp

    return jnp if isinstance(x, jax.Array) else np


@dataclass(frozen=True)
class Competence:
    """Competence of a set of episodes from their returns R_e:

        c = g(mean_e f(R_e)),

    with ``f`` = `episode_score` (per episode) and ``g`` = `of_mean_score`. The form lets
    PPO's episode tracker score the episodes that end during a rollout inside the
    compiled update (`telapa.rl.ppo.episode_stats`) exactly as an evaluation scores its
    episodes (`__call__`)."""

    def episode_score(self, returns: Any) -> Any:
        """f, elementwise, as float32."""
        raise NotImplementedError

    def of_mean_score(self, mean: Any) -> Any:
        """g, of the mean of f over a set of episodes."""
        raise NotImplementedError

    def __call__(self, returns: Any) -> Any:
        """c of the episodes along the last axis of ``returns`` (numpy or JAX)."""
        xp = _xp(returns)
        return self.of_mean_score(xp.mean(self.episode_score(returns), axis=-1))


@dataclass(frozen=True)
class SuccessRate(Competence):
    """SR = mean_e [R_e > 0] (paper eq. SR; in MiniGrid a positive return is a success):
    f(R) = [R > 0], g = identity."""

    def episode_score(self, returns: Any) -> Any:
        xp = _xp(returns)
        return (xp.asarray(returns) > 0).astype(xp.float32)

    def of_mean_score(self, mean: Any) -> Any:
        return mean


@dataclass(frozen=True)
class ReturnAtLeast(Competence):
    """SR = mean_e [R_e >= X], the share of episodes whose return reaches the target X
    (a curriculum's ``success: {return_at_least: X}``): f(R) = [R >= X], g = identity."""

    threshold: float
    """X, the return that counts as a success."""

    def __post_init__(self) -> None:
        if not np.isfinite(self.threshold):
            raise ValueError(f"ReturnAtLeast: the threshold must be finite, got "
                             f"{self.threshold}")

    def episode_score(self, returns: Any) -> Any:
        xp = _xp(returns)
        return (xp.asarray(returns) >= xp.float32(self.threshold)).astype(xp.float32)

    def of_mean_score(self, mean: Any) -> Any:
        return mean


@dataclass(frozen=True)
class NormalizedReturn(Competence):
    """SR~ = clip((mean_e R_e - R_0) / (R* - R_0), 0, 1) (paper App. MuJoCo, normalized
    competence, where R_0 = 0): f(R) = R, g(m) = clip((m - R_0) / (R* - R_0), 0, 1)."""

    reference: float
    """R*, the return that counts as full competence (> ``low``)."""
    low: float = 0.0
    """R_0, the return that counts as none (0: the paper's SR~ = clip(mean R / R*, 0, 1))."""

    def __post_init__(self) -> None:
        if not (np.isfinite(self.low) and np.isfinite(self.reference)
                and self.reference > self.low):
            raise ValueError(f"NormalizedReturn: reference return must be > {self.low}, "
                             f"got {self.reference}")

    def episode_score(self, returns: Any) -> Any:
        xp = _xp(returns)
        return xp.asarray(returns, xp.float32)

    def of_mean_score(self, mean: Any) -> Any:
        xp = _xp(mean)
        span = xp.float32(self.reference - self.low)
        return xp.clip((mean - xp.float32(self.low)) / span, 0.0, 1.0).astype(xp.float32)


class EnvFamily(Protocol):
    """See the module docstring."""

    name: str
    train_preset: str
    run_preset: str
    count_bonus: bool

    def matches(self, env_id: str) -> bool: ...
    def check_options(self, env_id: str, options: dict[str, Any]) -> None: ...
    def make_single(self, env_id: str, options: dict[str, Any]) -> gymnasium.Env: ...
    def jax_ids(self) -> tuple[str, ...]: ...
    def make_jax(self, env_id: str, options: dict[str, Any]) -> JaxEnv: ...
    def feature_dim(self, env_id: str) -> int: ...
    def competence(self, env_id: str) -> Competence: ...
    def codec(self, spec: EnvSpec) -> FeatureCodec: ...


__all__ = ["Competence", "EnvFamily", "NormalizedReturn", "ReturnAtLeast", "SuccessRate"]
