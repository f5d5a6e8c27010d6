"""The JAX MiniGrid ports as a Stable-Baselines3 `VecEnv` (SB3 takes no gymnasium
``VectorEnv``)::

    from stable_baselines3 import PPO
    from telapa.envs.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env("telapa/MiniGrid-DoorKey-8x8-v0", num_envs=16, seed=0)
    PPO("MultiInputPolicy", venv, policy_kwargs=...).learn(100_000)

`TelapaVecEnv` steps the whole batch as one jitted call of `telapa.envs.base.AutoReset`
over the port, with SB3's conventions: an env whose episode ends is reset within the
same step, its returned observation is the new episode's first one, and
``infos[i]["terminal_observation"]`` holds the last one and
``infos[i]["TimeLimit.truncated"]`` is ``truncated and not terminated``. Rewards are
float32 (the port's, float32 of Farama's), observations those of Farama's space with
the ``obs_keys`` kept: ``("image", "direction")`` (default) a ``Dict``, one key that
space itself (``("image",)`` is Farama's ``ImgObsWrapper``, for ``MlpPolicy``). The
mission string has no SB3 space and is not observed. SB3 is an optional dependency.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

try:
    from stable_baselines3.common.vec_env import VecEnv, VecMonitor
except ImportError as err:  # pragma: no cover - depends on the installation
    raise ImportError("telapa.envs.sb3 needs Stable-Baselines3: pip install "
                      "stable-baselines3") from err

from telapa.envs.base import AutoReset, AutoResetState
from telapa.envs.gym_vector import blank_states, farama_id, farama_observation_space, port
from telapa.envs.minigrid.constants import N_ACTIONS

OBS_KEYS = ("image", "direction")


@functools.cache
def _program(env_id: str, num_envs: int):
    """The jitted batched step of ``num_envs`` ports of ``env_id`` and its blank states
    (every episode at its time limit, so a step from them resets every env)."""
    auto = AutoReset(port(env_id), num_envs, (max(1, num_envs // 8),))

    @jax.jit
    def step(state: AutoResetState, actions: jax.Array):
        state, obs, reward, terminated, truncated, info = auto.step(state, actions)
        return state, obs, reward, terminated, truncated, info["final_obs"]

    return step, blank_states(auto.env, num_envs)


class TelapaVecEnv(VecEnv):
    """``num_envs`` ports of ``env_id`` as an SB3 `VecEnv` (module docstring)."""

    def __init__(self, env_id: str, num_envs: int, *, obs_keys: Sequence[str] = OBS_KEYS):
        unknown = set(obs_keys) - set(OBS_KEYS)
        if unknown or not obs_keys:
            raise ValueError(f"obs_keys {tuple(obs_keys)}: choose from {OBS_KEYS} (SB3 has "
                             "no space for the mission string)")
        self.env_id = farama_id(env_id)
        self.obs_keys = tuple(obs_keys)
        self.render_mode = None
        farama = farama_observation_space(env_id)
        space = (farama[self.obs_keys[0]] if len(self.obs_keys) == 1 else
                 gym.spaces.Dict({k: farama[k] for k in self.obs_keys}))
        self._step, self._blank = _program(self.env_id, num_envs)
        self._state: AutoResetState | None = None
        self._actions = np.zeros(num_envs, np.int32)
        super().__init__(num_envs, space, gym.spaces.Discrete(N_ACTIONS))

    def _obs(self, obs: dict[str, np.ndarray], index: Any = slice(None)) -> Any:
        out = {"image": np.array(obs["image"][index]),  # writable, as torch wants
               "direction": np.array(obs["direction"][index], np.int64)}
        return out[self.obs_keys[0]] if len(self.obs_keys) == 1 else {
            k: out[k] for k in self.obs_keys}

    def reset(self) -> Any:
        """Every env anew, from ``PRNGKey(seed)`` (`seed`; else a seed drawn afresh)."""
        seed = self._seeds[0]
        if seed is None:
            seed = int(np.random.default_rng().integers(2**31))
        self._state = AutoResetState(self._blank, jax.random.PRNGKey(seed))
        self._reset_seeds()
        self.step_async(np.zeros(self.num_envs, np.int32))
        return self.step_wait()[0]

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, np.int32).reshape(self.num_envs)

    def step_wait(self):
        if self._state is None:
            raise RuntimeError("call reset before step")
        self._state, obs, reward, terminated, truncated, final = self._step(
            self._state, jnp.asarray(self._actions))
        obs, reward, terminated, truncated, final = jax.device_get(
            (obs, reward, terminated, truncated, final))
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(dones):
            infos[i]["terminal_observation"] = self._obs(final, i)
            infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        # writable copies: SB3 adds the bootstrap value of a truncated episode in place
        return self._obs(obs), np.array(reward, np.float32), dones, infos

    def close(self) -> None:
        self._state = None

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any
                   ) -> list[Any]:
        raise NotImplementedError(f"{type(self).__name__} has no per-env objects to call "
                                  f"{method_name!r} on")

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]


def make_sb3_vec_env(env_id: str, num_envs: int, seed: int | None = None, *,
                     obs_keys: Sequence[str] = OBS_KEYS, monitor: bool = True) -> VecEnv:
    """A `TelapaVecEnv` of ``env_id`` (``telapa/<Id>`` or ``<Id>``) seeded with
    ``seed``, in SB3's ``VecMonitor`` unless ``monitor=False`` (episode returns and
    lengths in ``infos[i]["episode"]``, as ``make_vec_env``'s ``Monitor`` records them)."""
    venv: VecEnv = TelapaVecEnv(env_id, num_envs, obs_keys=obs_keys)
    venv.seed(seed)
    return VecMonitor(venv) if monitor else venv


__all__ = ["OBS_KEYS", "TelapaVecEnv", "make_sb3_vec_env"]
