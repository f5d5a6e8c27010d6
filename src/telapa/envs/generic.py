"""The generic env family (`telapa.envs.family`): any gymnasium env with a Box
observation that no other family claims (CartPole, Pendulum, ...).

The observation, flattened to ``{"obs": float32 vector}``, is also the per-step feature
vector (D = observation size); competence is by default the success rate with a positive
return counting as a success (SR = mean_e [R_e > 0]), which suits sparse 0/1 rewards
only: CartPole would always succeed and Pendulum never. A curriculum sets the target of
its own tasks, ``success: {return_at_least: X}`` or ``success: {normalized_return: {low:
R_0, high: R*}}`` (`telapa.continual.curriculum.Success`). Trajectories are stored as
float16; PPO preset ``configs/ppo/mujoco.yaml``. No JAX ports. Task options go to
``gymnasium.make``, which names a bad keyword itself; D is the observation's size as the
task's options make the env (`GenericFamily.feature_dim`). An observation space that is
not a Box, or an observation of another size than its space's, is a one-line
``ValueError`` naming the env (`box_size`, `VectorObsFeatures`).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from telapa.config import ConfigError
from telapa.envs.family import EnvFamily


def box_size(env_id: str, space: spaces.Space) -> int:
    """The size of the observation space ``space`` of ``env_id``, a Box; a ``ValueError``
    (one line naming the env, its space and what it needs) otherwise."""
    if not isinstance(space, spaces.Box):
        raise ValueError(
            f"{env_id}: its observation space {space} is not a Box: an env of the generic "
            "env family needs a Box observation (wrap it in gymnasium.wrappers."
            "FlattenObservation, or give it an env family of its own)")
    return int(np.prod(space.shape))


class VectorObsFeatures(gymnasium.ObservationWrapper):
    """Box observation -> ``{"obs": float32 vector}``; ``info["features"]`` = that vector.
    An observation space that is not a Box (`box_size`), or an observation whose size is
    not its space's, is a ``ValueError`` naming the env and both shapes."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.env_id = env.spec.id if env.spec else type(env.unwrapped).__name__
        self.box = env.observation_space
        self.size = box_size(self.env_id, self.box)
        self.observation_space = spaces.Dict(
            {"obs": spaces.Box(-np.inf, np.inf, (self.size,), np.float32)}
        )

    def observation(self, observation: Any) -> dict[str, np.ndarray]:
        values = np.asarray(observation, np.float32)
        if values.size != self.size:
            raise ValueError(
                f"{self.env_id}: the env gave an observation of shape {values.shape}, but "
                f"its observation space {self.box} has shape {self.box.shape}: the env "
                "must give observations of its observation space's shape")
        return {"obs": values.reshape(-1)}

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

    def feature_dim(self, env_id: str, options: dict[str, Any] | None = None) -> int:
        """D, the observation's size, of ``env_id`` made with the task ``options`` (None:
        its registered keyword arguments alone): what `make_single` makes, so that an
        option that sets the observation's size sets D. An env that cannot be made so
        is a `ConfigError` naming it, the options and the constructor's error; a space
        that is not a Box is one naming the space (`box_size`)."""
        options = dict(options or {})
        try:
            env = gymnasium.make(env_id, **options)
        except Exception as err:  # noqa: BLE001 - whatever the env's constructor raises
            given = (f"with options {options}" if options else "without task options (the "
                     "generic env family makes it to size its sketch, D = the observation's "
                     "size)")
            raise ConfigError(f"{env_id} cannot be made {given}: {type(err).__name__}: "
                              f"{err}") from None
        try:
            return box_size(env_id, env.observation_space)
        except ValueError as err:  # one line where the caller expects a ConfigError
            raise ConfigError(str(err)) from None
        finally:
            env.close()


__all__ = ["GenericFamily", "VectorObsFeatures", "box_size"]
