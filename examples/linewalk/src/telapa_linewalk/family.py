"""The LineWalk env family: what telapa knows about ``LineWalk-v0`` beyond what the
generic family can guess (a subclass of `telapa.envs.family.EnvFamily`, which has the
defaults of what it does not write).

The package names it under the ``telapa.families`` entry point (its ``pyproject.toml``),
so an installed telapa asks it about every id no built-in family claims; it claims
``LineWalk-v0``, and a curriculum that names that id gets, with no ``success`` line:

* competence: SR = mean_e [R_e >= 2], the share of episodes that reach the goal
  (`ReturnAtLeast` of the goal reward; a task's ``success`` still replaces it);
* sketch: the walker's position (D = 1, `telapa_linewalk.jax_port.sketch`), stored
  exactly by its codec (the position as an integer: uint8 up to a limit of 255, else
  uint16, up to `MAX_LIMIT`);
* task options ``length`` and ``limit``, checked when the curriculum is read;
* on the ``jax`` backend, the functional port `telapa_linewalk.jax_port.JaxLineWalk`;
  on ``gymnasium``, the gymnasium env with the same observation and sketch;
* presets: telapa's ``mujoco`` PPO preset and ``mujoco-quick`` run preset, an MLP on a
  vector observation with quick budgets (`EnvFamily`'s defaults, so not written here). A
  family names presets of telapa's own ``configs/`` (``configs/ppo/<train_preset>.yaml``,
  ``configs/runs/<run_preset>.yaml``), so a plug-in reuses built-in ones; a run may still
  give ``--preset`` and ``--set``;
* no episodic count bonus (telapa's hashes MiniGrid states; also the default).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from telapa.envs.base import EnvSpec
from telapa.envs.family import Competence, EnvFamily, ReturnAtLeast
from telapa.envs.generic import VectorObsFeatures
from telapa.qd.trajectories import FeatureCodec
from telapa_linewalk import GOAL_REWARD, ID, check_size
from telapa_linewalk.jax_port import FEATURE_DIM, JaxLineWalk, sketch

OPTIONS = {"length": 3, "limit": 8}
"""The task options and their defaults (`telapa_linewalk.LineWalk`'s keyword arguments)."""
MAX_LIMIT = 65_535
"""The longest time limit the codec stores exactly (the position as a uint16)."""


class LineWalkSketch(VectorObsFeatures):
    """The gymnasium env as the family gives it to the ``gymnasium`` backend: observation
    ``{"obs": [...]}`` and ``info["features"]`` = `sketch` of the walker's position, as
    the JAX port has them."""

    def reset(self, **kwargs):
        obs, info = super().reset(**kwargs)
        return obs, self._with_sketch(info)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, self._with_sketch(info)

    def _with_sketch(self, info: dict[str, Any]) -> dict[str, Any]:
        walker = self.unwrapped
        return {**info, "features": sketch(np.int32(walker.position), walker.limit)}


class LineWalkFamily(EnvFamily):
    """See the module docstring."""

    name = "linewalk"

    def matches(self, env_id: str) -> bool:
        return env_id == ID

    def check_options(self, env_id: str, options: dict[str, Any]) -> None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"{env_id}: unknown LineWalk task option(s) {', '.join(unknown)};"
                             f" valid: {', '.join(OPTIONS)}")
        for name, value in options.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{env_id}: option {name} must be an integer, got {value!r}")
        size = {**OPTIONS, **options}
        try:
            check_size(**size)
        except ValueError as err:
            raise ValueError(f"{env_id}: {err}") from None
        if size["limit"] > MAX_LIMIT:
            raise ValueError(f"{env_id}: option limit must be at most {MAX_LIMIT}, got "
                             f"{size['limit']}")

    def make_single(self, env_id: str, options: dict[str, Any]) -> gymnasium.Env:
        return LineWalkSketch(gymnasium.make(env_id, **options))

    def jax_ids(self) -> tuple[str, ...]:
        return (ID,)

    def make_jax(self, env_id: str, options: dict[str, Any]) -> JaxLineWalk:
        return JaxLineWalk(**options)

    def feature_dim(self, env_id: str) -> int:
        return FEATURE_DIM

    def competence(self, env_id: str) -> Competence:
        return ReturnAtLeast(GOAL_REWARD)

    def codec(self, spec: EnvSpec) -> FeatureCodec:
        """The position, exactly: the sketch is position * 1/limit, limit = the time limit."""
        return FeatureCodec((spec.max_steps,))


__all__ = ["LineWalkFamily", "LineWalkSketch", "OPTIONS"]
