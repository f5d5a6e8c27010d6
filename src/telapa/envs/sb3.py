"""telapa's MiniGrid ports and native MuJoCo batch as Stable-Baselines3 vector envs
(`VecEnv`: SB3 takes no gymnasium ``VectorEnv``)::

    from stable_baselines3 import PPO
    from telapa.envs.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env("telapa/MiniGrid-DoorKey-8x8-v0", num_envs=16, seed=0)
    PPO("MultiInputPolicy", venv, policy_kwargs=...).learn(100_000)
    venv = make_sb3_vec_env("telapa/Hopper-v5", num_envs=8, seed=0, friction=0.75)
    PPO("MlpPolicy", venv).learn(100_000)

Both follow SB3's conventions (those of its ``DummyVecEnv``): an env whose episode ends
is reset within the same step, its returned observation is the new episode's first one,
``infos[i]["terminal_observation"]`` holds the last one and
``infos[i]["TimeLimit.truncated"]`` is ``truncated and not terminated``; rewards are
float32, as ``DummyVecEnv`` stores them.

`TelapaVecEnv` (the MiniGrid ids) steps the whole batch as one jitted call of
`telapa.envs.base.AutoReset` over the port. Rewards are the port's (float32 of
Farama's), observations those of Farama's space with the ``obs_keys`` kept: ``("image",
"direction")`` (default) a ``Dict``, one key that space itself (``("image",)``, or the
string ``"image"``, is Farama's ``ImgObsWrapper``, for ``MlpPolicy``). The mission string
has no SB3 space and is not observed.

`TelapaMujocoVecEnv` (``HalfCheetah-v5``, ``Hopper-v5``, ``Walker2d-v5``, ``Ant-v5``)
steps the native batch of `telapa.envs.mujoco.gym_vector.MujocoVectorEnv` (its options
``friction``, ``max_episode_steps``, ``threads``): what SB3's ``DummyVecEnv`` of
gymnasium's v5 env gives, step for step and bit for bit (float64 ``Box`` observations,
float32 rewards; tests/envs/test_sb3_adapter.py), except that the infos hold only SB3's
two keys, not gymnasium's per-step reward terms.

SB3 is an optional dependency.
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
from telapa.envs.gym_vector import (
    blank_states,
    check_actions,
    check_num_envs,
    farama_id,
    farama_observation_space,
    port,
    seed_key,
)
from telapa.envs.minigrid.constants import N_ACTIONS
from telapa.envs.minigrid.tasks import all_tasks
from telapa.envs.mujoco.v5 import NATIVE_IDS

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


def _obs_keys(env_id: str, obs_keys: Any) -> tuple[str, ...]:
    """``obs_keys`` as a tuple of keys of `OBS_KEYS`; a string is one key (``"image"`` as
    ``("image",)``, not its letters). Else a ValueError naming ``env_id`` and the value."""
    keys = (obs_keys,) if isinstance(obs_keys, str) else obs_keys
    if not isinstance(keys, (Sequence, np.ndarray)) or not len(keys) \
            or not all(isinstance(k, str) and k in OBS_KEYS for k in keys) \
            or len(set(keys)) != len(keys):
        raise ValueError(f"{env_id}: obs_keys must be distinct keys of {OBS_KEYS} (a tuple, "
                         f"or one key as a string; SB3 has no space for the mission "
                         f"string), got {obs_keys!r}")
    return tuple(keys)


class _BatchVecEnv(VecEnv):
    """What SB3 asks of a `VecEnv` that has no per-env objects: one batch answers for
    every index."""

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


class TelapaVecEnv(_BatchVecEnv):
    """``num_envs`` ports of ``env_id`` as an SB3 `VecEnv` (module docstring). Actions
    not of ``Discrete(7)`` are a ValueError
    (`telapa.envs.gym_vector.check_actions`)."""

    def __init__(self, env_id: str, num_envs: int, *,
                 obs_keys: Sequence[str] | str = OBS_KEYS):
        self.env_id = farama_id(env_id)
        num_envs = check_num_envs(self.env_id, num_envs)
        self.obs_keys = _obs_keys(self.env_id, obs_keys)
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
        """Every env anew, from the key of ``seed`` (`telapa.envs.gym_vector.seed_key`,
        the whole integer; else a seed drawn afresh)."""
        seed = self._seeds[0]
        if seed is None:
            seed = int(np.random.default_rng().integers(2**31))
        self._state = AutoResetState(self._blank, seed_key(seed))
        self._reset_seeds()
        self.step_async(np.zeros(self.num_envs, np.int32))
        return self.step_wait()[0]

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = check_actions(self.env_id, actions, (self.num_envs,))

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


class TelapaMujocoVecEnv(_BatchVecEnv):
    """``num_envs`` native MuJoCo envs of ``env_id`` as an SB3 `VecEnv` (module
    docstring); ``kwargs``: `telapa.envs.mujoco.gym_vector.MujocoVectorEnv`'s
    (``friction``, ``max_episode_steps``, ``threads``).

    ``reset`` seeds env i with SB3's ``seed + i`` (`seed`), as ``DummyVecEnv`` passes
    its seeds to each env's ``reset`` (through `MujocoVectorEnv.reset`); without a seed
    each env's generator goes on. ``step_wait`` steps every env (any action, as
    gymnasium's env takes it), then resets those whose episode ended, their generators
    going on, as ``DummyVecEnv`` resets them."""

    def __init__(self, env_id: str, num_envs: int, **kwargs: Any):
        from telapa.envs.mujoco.gym_vector import MujocoVectorEnv  # imports mujoco

        self.gym_env = MujocoVectorEnv(env_id, num_envs, **kwargs)
        self.native = self.gym_env.native
        self.env_id = self.gym_env.env_id
        self.render_mode = None
        super().__init__(self.gym_env.num_envs, self.gym_env.single_observation_space,
                         self.gym_env.single_action_space)
        self._shape = (self.num_envs, *self.action_space.shape)
        self._actions: np.ndarray | None = None
        self._started = False

    def reset(self) -> np.ndarray:
        obs, _ = self.gym_env.reset(seed=list(self._seeds))
        self._reset_seeds()
        self._reset_options()
        self._started = True
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        actions = np.asarray(actions)
        if actions.shape != self._shape:
            raise ValueError(f"{self.env_id}: expected actions of shape {self._shape}, got "
                             f"{actions.shape}")
        self._actions = actions

    def step_wait(self):
        if not self._started:
            raise RuntimeError("call reset before step")
        everyone = np.arange(self.num_envs)
        obs, reward, terminated, truncated, _ = self.native.advance(
            everyone, self._actions, check=False, reward_dtype=np.float64)
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [
            {"TimeLimit.truncated": bool(t and not d)}  # every step, as DummyVecEnv
            for t, d in zip(truncated, terminated, strict=True)]
        ended = np.flatnonzero(dones)
        for i in ended:
            infos[i]["terminal_observation"] = obs[i].copy()
        if ended.size:
            obs[ended] = self.native.reset_envs(ended)
        return obs, reward.astype(np.float32), dones, infos

    def close(self) -> None:
        self.gym_env.close()
        self._started = False


def make_sb3_vec_env(env_id: str, num_envs: int, seed: int | None = None, *,
                     obs_keys: Sequence[str] | str | None = None, monitor: bool = True,
                     **kwargs: Any) -> VecEnv:
    """An SB3 `VecEnv` of ``env_id`` (``telapa/<Id>`` or ``<Id>``) seeded with ``seed``
    (an integer >= 0, or None), in SB3's ``VecMonitor`` unless ``monitor=False`` (episode
    returns and lengths in ``infos[i]["episode"]``, as ``make_vec_env``'s ``Monitor``
    records them): a `TelapaVecEnv` for a MiniGrid id (``obs_keys``: default
    `OBS_KEYS`), a `TelapaMujocoVecEnv` for a native MuJoCo id (``kwargs``:
    ``friction``, ``max_episode_steps``, ``threads``). Arguments of the wrong kind, or
    for the other family, are a ValueError naming the argument and the id."""
    name = farama_id(env_id)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or seed < 0):
        raise ValueError(f"{name}: seed must be an integer >= 0 or None, got {seed!r}")
    venv: VecEnv
    if name in NATIVE_IDS:
        if obs_keys is not None:
            raise ValueError(f"{name}: obs_keys selects keys of the MiniGrid ids' Dict "
                             f"observations; {name}'s observation is one Box")
        venv = TelapaMujocoVecEnv(name, num_envs, **kwargs)
    elif name in all_tasks():
        if kwargs:
            raise ValueError(f"{name}: {', '.join(sorted(kwargs))}: not an option of the "
                             "MiniGrid ids (friction, max_episode_steps and threads are "
                             "the MuJoCo ids')")
        venv = TelapaVecEnv(name, num_envs, obs_keys=OBS_KEYS if obs_keys is None
                            else obs_keys)
    else:
        raise gym.error.Error(f"make_sb3_vec_env: no telapa env {name!r}; supported: the "
                              f"MiniGrid ports ({', '.join(sorted(all_tasks()))}) and the "
                              f"native MuJoCo ids ({', '.join(NATIVE_IDS)})")
    venv.seed(seed)
    return VecMonitor(venv) if monitor else venv


__all__ = ["OBS_KEYS", "TelapaMujocoVecEnv", "TelapaVecEnv", "make_sb3_vec_env"]
