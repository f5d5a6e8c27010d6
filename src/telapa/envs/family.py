"""What an environment family is: the `EnvFamily` base class and the `Competence` scores.

A family is what a run knows about the env ids it claims beyond gymnasium: how to make
one host env with the project's observation dict and per-step sketch
``info["features"]``, the sketch's dimension D, and, each with a default written once in
`EnvFamily`, its task options, its functional `JaxEnv` ports, its `Competence` score, how
its stored trajectories are compressed, its PPO and run presets and whether the MiniGrid
count bonus applies. A family subclasses `EnvFamily` and writes its ``name``, the three
abstract members (``matches``, ``make_single``, ``feature_dim``) and whatever else differs
from the defaults; each member's docstring says what it gives and when it is asked.

The families are MiniGrid (`telapa.envs.minigrid.family`), MuJoCo (`telapa.envs.mujoco`)
and a generic fallback for any other Box-observation gymnasium env
(`telapa.envs.generic`); `telapa.envs.registry` imports and asks them. A new family is
one module with a subclass of `EnvFamily`, one line in the registry, and its YAML
presets; or, outside telapa, a plug-in (`telapa.plugins`: the ``telapa.families`` entry
point, or `telapa.envs.registry.register_family` from a module given to ``--import``). A
plug-in class written before `EnvFamily` was a base class (a plain class with every
member) is still accepted as it is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from telapa.plugins import PluginError

if TYPE_CHECKING:
    import gymnasium

    from telapa.envs.base import EnvSpec, JaxEnv
    from telapa.envs.host import HostVectorEnv
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

    counts: ClassVar[bool] = False
    """Whether c is a count: the share k / n of n episodes that succeed (f is 0 or 1 and g
    the identity), so that a score is kept and compared as the rational k / n (`successes`)."""

    @property
    def symbol(self) -> str:
        """How tables and lines name c: ``"SR"`` for a count (`counts`), ``"SR~"`` for a
        graded score (MuJoCo's normalized return)."""
        return "SR" if self.counts else "SR~"

    def __call__(self, returns: Any) -> Any:
        """c of the episodes along the last axis of ``returns`` (numpy or JAX)."""
        xp = _xp(returns)
        return self.of_mean_score(xp.mean(self.episode_score(returns), axis=-1))

    def successes(self, returns: Any) -> int | None:
        """k, the episodes of ``returns`` (1-D) that succeed, when c is a count
        (`counts`); None otherwise (a normalized return has no count)."""
        if not self.counts:
            return None
        return int(np.count_nonzero(np.asarray(self.episode_score(np.asarray(returns))) > 0))


@dataclass(frozen=True)
class SuccessRate(Competence):
    """SR = mean_e [R_e > 0] (paper eq. SR; in MiniGrid a positive return is a success):
    f(R) = [R > 0], g = identity."""

    counts: ClassVar[bool] = True

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

    counts: ClassVar[bool] = True

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


class EnvFamily(ABC):
    """An env family (see the module docstring). A subclass writes ``name`` and the
    abstract `matches`, `make_single` and `feature_dim`; every other member has its
    default here. The registry makes a family once, with no arguments, and asks it about
    plain ids (a curriculum's ``module:Id`` reaches it as ``Id``, its module imported).
    Making a subclass that lacks an abstract member is a `telapa.plugins.PluginError`
    naming the class and the members."""

    name: ClassVar[str]
    """The family's name, required: unique among the families (a plug-in's must not be
    ``minigrid``, ``mujoco`` or ``generic``, and its ``telapa.families`` entry point has
    this name); `telapa.envs.registry.families` lists it and errors name it."""
    train_preset: ClassVar[str] = "mujoco"
    """The PPO preset ``configs/ppo/<train_preset>.yaml`` of the family's ids
    (`telapa.envs.registry.default_config`), checked when a plug-in registers. Default
    ``mujoco``: an MLP on a vector observation."""
    run_preset: ClassVar[str] = "mujoco-quick"
    """The run preset ``telapa run`` and ``telapa demo`` read when given no ``--preset``,
    ``configs/runs/<run_preset>.yaml`` or a path to a YAML file (quick budgets for trying
    the pipeline), checked when a plug-in registers. Default ``mujoco-quick``."""
    count_bonus: ClassVar[bool] = False
    """Whether the episodic count bonus (`telapa.envs.intrinsic`, which hashes MiniGrid
    states) applies: a run with ``intrinsic_beta`` set is refused, when its preset is
    bound to the curriculum's family, unless it does. Default False."""

    def __new__(cls, *args: Any, **kwargs: Any) -> EnvFamily:
        # what ABC would refuse with a TypeError, as the one-line error of a plug-in
        missing = sorted(getattr(cls, "__abstractmethods__", ()))
        if missing:
            raise PluginError(
                f"env family {cls.__module__}.{cls.__qualname__} does not write "
                f"{', '.join(missing)}: a subclass of telapa.envs.family.EnvFamily must "
                "(matches, make_single and feature_dim; the other members have defaults)")
        return super().__new__(cls)

    @abstractmethod
    def matches(self, env_id: str) -> bool:
        """Whether the family claims ``env_id``. `telapa.envs.registry.family_of` asks
        the built-in families, then the plug-ins, the first to claim an id owns it (the
        generic family takes the rest). It is asked about every id a curriculum, a run
        or ``make`` names: cheap, it makes no env."""

    def check_options(self, env_id: str, options: dict[str, Any]) -> None:
        """A ``ValueError`` naming ``env_id`` and the option unless ``options`` (a
        curriculum task's ``options``, the family's task parameters) are valid; called
        when a curriculum is read, before any work, and the same ``options`` then go to
        `make_single` or `make_jax`. Default: every option is accepted (a gymnasium
        env's ``gymnasium.make`` names a bad keyword itself, at the first env made)."""
        return

    @abstractmethod
    def make_single(self, env_id: str, options: dict[str, Any]) -> gymnasium.Env:
        """One host gymnasium env ``env_id`` with the task ``options``, whose
        observation is a dict of arrays and whose ``info["features"]`` is the per-step
        sketch (a float32 vector of `feature_dim`) after ``reset`` and every ``step``.
        Called for each env of the ``gymnasium`` backend's vector env
        (`telapa.envs.registry.make`), and once when a ``gymnasium`` curriculum is read
        unless the id's registration gives the time limit
        (`telapa.envs.registry.check_time_limit`)."""

    def jax_ids(self) -> tuple[str, ...]:
        """The ids the family has as functional `JaxEnv` ports, the ids that run on the
        ``jax`` backend (`telapa.envs.registry.jax_env_ids`, asked when a curriculum or
        ``make`` names that backend). Default: none."""
        return ()

    def make_jax(self, env_id: str, options: dict[str, Any]) -> JaxEnv:
        """The port of ``env_id``, one of `jax_ids`, with the task ``options``:
        `telapa.envs.registry.make` calls it on the ``jax`` backend and checks that its
        ``spec`` has the id and D = `feature_dim`. Default: a ``ValueError`` (no ports);
        a family that lists ids in `jax_ids` writes it."""
        if env_id in self.jax_ids():
            cls = type(self)
            raise ValueError(f"env family {self.name!r} ({cls.__module__}.{cls.__qualname__})"
                             f" lists {env_id!r} in jax_ids but does not write make_jax")
        raise ValueError(f"{env_id} has no JAX port (the {self.name} family has none; it "
                         "runs on the gymnasium backend)")

    def native_ids(self) -> tuple[str, ...]:
        """The ids the family steps itself as a batch, the ids that run on the
        ``native`` backend (`telapa.envs.registry.native_env_ids`). Default: none."""
        return ()

    def make_native(self, env_id: str, options: dict[str, Any], *, num_envs: int,
                    seed: int) -> HostVectorEnv:
        """The ``native`` backend's `telapa.envs.host.HostVectorEnv` of ``num_envs``
        envs of ``env_id`` (one of `native_ids`) with the task ``options``, seeded with
        ``seed``: the call shape, observations, rewards and sketch of the ``gymnasium``
        backend's vector env of `make_single`. Default: a ``ValueError`` (none)."""
        raise ValueError(f"unknown env id {env_id!r} for backend 'native' (the "
                         f"{self.name} family has no native envs; it runs on the "
                         "gymnasium backend)")

    @abstractmethod
    def feature_dim(self, env_id: str) -> int:
        """D, the dimension of ``env_id``'s sketch ``info["features"]``: the latent
        embedder's input, bound to the run's preset when the curriculum is read
        (`telapa.continual.preset.bind_env_family`: one D per run), and the ``spec``'s
        ``feature_dim`` of the env `telapa.envs.registry.make` gives. A family whose D
        depends on the task options writes ``feature_dim(self, env_id, options=None)``
        and is given each task's options (`telapa.envs.registry.feature_dim`; the
        generic family's D is the observation's size as they make the env)."""

    def competence(self, env_id: str) -> Competence:
        """The `Competence` score of a set of ``env_id``'s episode returns: what gates,
        anchors, few-shot selection, every metric and PPO's training statistics call SR
        (the return stays the fitness). The `telapa.rl.Agent` of a task asks for it when
        the curriculum task sets no ``success``, which replaces it for that task
        (`telapa.continual.curriculum.Success`). Default: `SuccessRate`, a positive
        return counts as a success."""
        return SuccessRate()

    def codec(self, spec: EnvSpec) -> FeatureCodec:
        """How stored trajectories of the env with `EnvSpec` ``spec`` are compressed
        (`telapa.qd.trajectories.FeatureCodec`; ``spec.feature_dim`` is `feature_dim`,
        ``spec.max_steps`` the time limit): asked by TeLAPA's illumination when a run
        stores trajectories. Default: float16 of the D features (lossy); a family whose
        sketch takes few values gives an exact codec."""
        from telapa.qd.trajectories import float16_codec

        return float16_codec(spec.feature_dim)


__all__ = ["Competence", "EnvFamily", "NormalizedReturn", "ReturnAtLeast", "SuccessRate"]
