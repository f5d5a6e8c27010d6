"""The generic env family (`telapa.envs.family`): any gymnasium env with a Box
observation that no other family claims (CartPole, Pendulum, ...).

The observation, flattened to ``{"obs": float32 vector}``, is also the per-step feature
vector (D = observation size); competence is by default the success rate with a positive
return counting as a success (SR = mean_e [R_e > 0]), which suits sparse 0/1 rewards
only: CartPole would always succeed and Pendulum never. A curriculum sets the target of
its own tasks, ``success: {return_at_least: X}`` or ``success: {normalized_return: {low:
R_0, high: R*}}`` (`telapa.continual.curriculum.Success`). Trajectories are stored as
float16; PPO preset ``configs/ppo/mujoco.yaml``. No JAX ports. Task options go to
``gymnasium.make``, which names a bad keyword itself.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from telapa.envs.family import EnvFamily


class VectorObsFeatures(gymnasium.ObservationWrapper):
    """Box observation -> ``{"obs": float32 vector}``; ``info["features"]`` = that vector."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        box = env.observation_space
        if not isinstance(box, spaces.Box):
            raise ValueError(
                f"{env.spec.id if env.spec else env}: only Box observations are supported "
                f"for non-MiniGrid envs, got {box}"
            )
        size = int(np.prod(box.shape))
        self.observation_space = spaces.Dict(
            {"obs": spaces.Box(-np.inf, np.inf, (size,), np.float32)}
        )

    def observation(self, observation: Any) -> dict[str, np.ndarray]:
        return {"obs": np.asarray(observation, np.float32).reshape(-1)}

    def reset(self, **kwargs):
        obs, info = super().reset(**kwargs)
        return obs, {**info, "features": obs["obs"]}

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "features": obs["obs"]}


class GenericFamily(EnvFamily):
    """See the module docstring: all but the id, the env and D are `EnvFamily`'s
    defaults (options unchecked, no JAX ports, `SuccessRate`, float16 trajectories, the
    ``mujoco`` presets, no count bonus)."""

    name = "generic"

    def matches(self, env_id: str) -> bool:
        return True

    def make_single(self, env_id: str, options: dict[str, Any]) -> gymnasium.Env:
        return VectorObsFeatures(gymnasium.make(env_id, **options))

    def feature_dim(self, env_id: str) -> int:
        space = gymnasium.spec(env_id).make().observation_space
        return int(np.prod(space.shape))


__all__ = ["GenericFamily", "VectorObsFeatures"]
