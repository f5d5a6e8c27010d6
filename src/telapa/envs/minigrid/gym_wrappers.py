"""Farama MiniGrid envs on the gymnasium backend, with the port's observations and info.

`wrap_farama` makes a Farama env emit what the JAX port emits: the observation dict
(``image``, ``direction``, ``mission`` indices) and, at every step,
``info["features"]`` / ``info["success"]``, computed from the Farama env's own state by
the same `features` functions, so both backends produce identical features.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from telapa.envs.base import Obs
from telapa.envs.minigrid.farama import encode_obj, parse_mission
from telapa.envs.minigrid.features import N_FLAGS, feature_vector, step_flags
from telapa.envs.minigrid.observation import observation_specs


def is_minigrid_id(env_id: str) -> bool:
    """Whether ``env_id`` is a gymnasium id of a Farama MiniGrid (or BabyAI) env."""
    import minigrid  # noqa: F401  (registers the MiniGrid ids)

    spec = gym.registry.get(env_id)
    if spec is None:
        return False
    entry_point = spec.entry_point
    module = entry_point if isinstance(entry_point, str) else entry_point.__module__
    return module.split(".")[0] == "minigrid"


def _space(spec: Any, name: str) -> gym.spaces.Box:
    high = {"image": 255, "direction": 3, "mission": np.array([5, 10])}[name]
    return gym.spaces.Box(low=0, high=high, shape=spec.shape, dtype=spec.dtype)


class MiniGridFeatures(gym.Wrapper):
    """See the module docstring; ``success`` is a positive reward (Farama's only kind).

    ``mission`` is parsed from Farama's mission string at reset (`parse_mission`).
    """

    def __init__(self, env: gym.Env, observe_mission: bool = True):
        super().__init__(env)
        self.observe_mission = observe_mission
        specs = observation_specs(observe_mission)
        self.telapa_observation = specs
        """The port's observation specs (with their code ``levels``) for `GymVectorEnv`."""
        self.observation_space = gym.spaces.Dict(
            {name: _space(spec, name) for name, spec in specs.items()}
        )
        self._flags = np.zeros(N_FLAGS, bool)
        self._mission = np.zeros(2, np.int32)

    def _obs(self, obs: dict[str, Any]) -> Obs:
        out = {
            "image": np.asarray(obs["image"], np.uint8),
            "direction": np.asarray(obs["direction"], np.int32),
        }
        if self.observe_mission:
            out["mission"] = self._mission
        return out

    def reset(self, **kwargs: Any) -> tuple[Obs, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._flags = np.zeros(N_FLAGS, bool)
        if self.observe_mission:
            self._mission = np.asarray(parse_mission(self.env.unwrapped.mission), np.int32)
        return self._obs(obs), info

    def step(self, action: Any) -> tuple[Obs, Any, bool, bool, dict[str, Any]]:
        base = self.env.unwrapped
        front_x, front_y = base.front_pos
        front_before = encode_obj(base.grid.get(front_x, front_y))
        obs, reward, terminated, truncated, info = self.env.step(action)
        success = bool(reward > 0)
        action = np.int32(action)
        self._flags = self._flags | step_flags(
            np,
            action,
            front_before,
            encode_obj(base.grid.get(front_x, front_y)),
            encode_obj(base.carrying),
            success,
        )
        features = feature_vector(
            np,
            np.asarray(base.agent_pos, np.int32),
            np.int32(base.agent_dir),
            np.int32(base.step_count),
            np.int32(base.max_steps),
            action,
            self._flags,
            base.width,
            base.height,
        )
        info = {**info, "features": features, "success": success}
        return self._obs(obs), reward, terminated, truncated, info


def wrap_farama(env: gym.Env, observe_mission: bool = True) -> gym.Env:
    """``env`` (a Farama MiniGrid env, wrapped or not) with the port's obs and info."""
    return MiniGridFeatures(env, observe_mission)
