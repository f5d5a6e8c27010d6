"""The native MuJoCo batch as a gymnasium vector env, for any library.

Importing `telapa.envs` registers ``telapa/<Id>`` for every id the native backend steps
(``HalfCheetah-v5``, ``Hopper-v5``, ``Walker2d-v5``, ``Ant-v5``; `register_envs`)::

    envs = gymnasium.make_vec("telapa/HalfCheetah-v5", num_envs=8)           # one batch
    envs = gymnasium.make_vec("telapa/Hopper-v5", num_envs=8, friction=0.75)  # a regime

``make_vec`` (``vectorization_mode`` ``None`` or ``"vector_entry_point"``) gives a
`MujocoVectorEnv`: the N envs of a `telapa.envs.mujoco.native.NativeVectorEnv`, stepped
in C on the process's cores, behind gymnasium's interface. It is what
``gymnasium.make_vec("<Id>", num_envs=N)`` gives (a ``SyncVectorEnv`` of gymnasium's v5
env with its default arguments), step for step and bit for bit, except for the infos
(tests/envs/test_mujoco_gym_vector.py):

- the spaces are gymnasium's own env's (observation ``Box(-inf, inf, (n,), float64)``,
  action the actuators' ``Box``), batched;
- ``reset(seed=s)`` seeds env i with ``s + i``, as ``SyncVectorEnv`` does (a sequence:
  ``seed[i]``, None entries not reseeded), and draws its reset noise from that generator
  as gymnasium's ``reset_model``; later resets, and ``reset()`` without a seed, continue
  each env's generator (fresh entropy before the first seed, as gymnasium's unseeded
  envs); ``options={"reset_mask": m}`` resets only the envs of ``m``, as
  ``SyncVectorEnv`` does (`MujocoVectorEnv.reset`);
- observations float64, rewards float64 (gymnasium's formulas: the native module), flags
  bool; any action is taken, as gymnasium's env takes it (MuJoCo clamps the control to
  the actuators' range, the control cost reads the action as given);
- autoreset is gymnasium's ``NEXT_STEP`` (``metadata["autoreset_mode"]``): the step after
  env i's episode ended resets it instead of stepping it (its action is ignored) and
  returns the new episode's first observation with reward 0 and both flags false;
- the time limit is the registration's 1000 steps (``max_episode_steps=`` changes it);
- infos are ``{}``: gymnasium's per-step reward terms (``x_velocity``, ``reward_ctrl``,
  ...) are not computed. Episode statistics come from gymnasium's vector wrappers
  (``gymnasium.wrappers.vector.RecordEpisodeStatistics``), which read rewards and flags.

``friction`` scales the sliding friction of every geom (`telapa.envs.mujoco.friction`;
one scale, or one per env), as the friction curricula do; ``threads`` as the native env's
(default: the process's cores). ``gymnasium.make("telapa/<Id>")`` gives one env of the
gymnasium backend with the same options (gymnasium's env, friction applied).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from telapa.envs.gym_vector import NAMESPACE, check_seed, register_ids, reset_mask
from telapa.envs.mujoco import _gymnasium_make, reference_return
from telapa.envs.mujoco.friction import FrictionScale
from telapa.envs.mujoco.v5 import NATIVE_IDS


def gymnasium_id(env_id: str) -> str:
    """``telapa/<Id>`` (or ``<Id>``) -> ``<Id>``."""
    return env_id.split("/", 1)[1] if env_id.startswith(f"{NAMESPACE}/") else env_id


@functools.cache
def _spaces(env_id: str) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    """Gymnasium's ``(observation_space, action_space)`` of ``env_id`` (made once)."""
    env = _gymnasium_make(env_id, {})
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def make_single(env_id: str, friction: float = 1.0, **kwargs: Any) -> gym.Env:
    """``gymnasium.make("telapa/<Id>")``: ``gymnasium.make("<Id>", **kwargs)`` (its time
    limit included) with the friction scale applied."""
    return FrictionScale(_gymnasium_make(gymnasium_id(env_id), kwargs), friction)


class MujocoVectorEnv(VectorEnv):
    """``num_envs`` native MuJoCo envs behind gymnasium's vector interface (module
    docstring)."""

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, env_id: str, num_envs: int = 1, *,
                 friction: float | Sequence[float] = 1.0,
                 max_episode_steps: int | None = None, threads: int | None = None):
        name = gymnasium_id(env_id)
        if name not in NATIVE_IDS:
            raise gym.error.Error(f"no native MuJoCo env {name!r}; native: "
                                  f"{', '.join(NATIVE_IDS)}")
        from telapa.envs.mujoco.native import NativeVectorEnv  # imports mujoco

        self.env_id = name
        # unseeded, as gymnasium's envs: generators from fresh entropy until reset(seed=)
        entropy = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
        self.native = NativeVectorEnv(name, num_envs=num_envs, seed=entropy,
                                      friction=friction,
                                      max_episode_steps=max_episode_steps,
                                      reference_return=reference_return(name),
                                      threads=threads)
        self.native.sketch = False  # the 24-dim sketch is telapa's, not gymnasium's
        self.num_envs = self.native.num_envs
        self.single_observation_space, self.single_action_space = _spaces(name)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._ended: np.ndarray | None = None
        """Envs whose episode ended at the last step (reset at the next); None before
        the first `reset`."""
        self._obs = np.zeros(self.observation_space.shape)
        """Each env's last observation (what a ``reset_mask`` returns for the others)."""

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None):
        """New episodes, in every env or in those of ``options["reset_mask"]``, seeded as
        ``SyncVectorEnv`` seeds them (`telapa.envs.gym_vector.check_seed`): env i with
        ``seed + i``, or ``seed[i]`` from a sequence (a None entry, or ``seed=None``: env
        i's generator goes on).

        ``options["reset_mask"]`` (checked as ``SyncVectorEnv`` checks it:
        `telapa.envs.gym_vector.reset_mask`) resets only the envs where it is True, which
        are then no longer due to autoreset; every other env keeps its state, its
        generator and a pending autoreset (one whose episode ended at the last step still
        resets at the next), and its observation is its last one, as ``SyncVectorEnv``
        returns it. A mask needs a reset of every env before it. Other options are
        ignored."""
        n = self.num_envs
        seed = check_seed(self.env_id, seed, n)
        mask = reset_mask(self.env_id, options, n)
        if mask is not None and self._ended is None:
            raise gym.error.ResetNeeded(f"{self.env_id}: call reset() without a reset_mask "
                                        "before resetting some envs")
        if isinstance(seed, int):
            self._np_random, self._np_random_seed = gym.utils.seeding.np_random(seed)
            seed = [seed + i for i in range(n)]
        seeds = [None] * n if seed is None else seed
        idx = np.arange(n) if mask is None else np.flatnonzero(mask)
        seeded = np.array([i for i in idx if seeds[i] is not None], int)
        going_on = np.array([i for i in idx if seeds[i] is None], int)
        if seeded.size:
            self._obs[seeded] = self.native.reset_envs(
                seeded, seeds=np.array([seeds[i] for i in seeded]))
        if going_on.size:
            self._obs[going_on] = self.native.reset_envs(going_on)
        if mask is None:
            self._ended = np.zeros(n, bool)
        else:
            self._ended[idx] = False
        return self._obs.copy(), {}

    def step(self, actions: Any):
        """Steps the envs whose episode goes on, resets those that ended at the last step
        (``NEXT_STEP``)."""
        if self._ended is None:
            raise gym.error.ResetNeeded("call reset before step")
        actions = np.asarray(actions)
        shape = (self.num_envs, *self.single_action_space.shape)
        if actions.shape != shape:
            raise ValueError(f"{self.env_id}: expected actions of shape {shape}, got "
                             f"{actions.shape}")
        n = self.num_envs
        obs = np.empty(self.observation_space.shape)
        reward = np.zeros(n)
        terminated, truncated = np.zeros(n, bool), np.zeros(n, bool)
        restart, live = np.flatnonzero(self._ended), np.flatnonzero(~self._ended)
        if restart.size:
            obs[restart] = self.native.reset_envs(restart)
        if live.size:
            obs[live], reward[live], terminated[live], truncated[live], _ = (
                self.native.advance(live, actions[live], check=False,
                                    reward_dtype=np.float64))
        self._ended = terminated | truncated
        self._obs[:] = obs
        return obs, reward, terminated, truncated, {}

    def close_extras(self, **kwargs: Any) -> None:
        self.native.close()
        self._ended = None


def register_envs() -> list[str]:
    """Registers ``telapa/<Id>`` for every native MuJoCo ``<Id>`` not yet registered;
    returns all of them. No ``max_episode_steps``: both envs keep gymnasium's limit of
    ``<Id>`` (``make`` through ``gymnasium.make("<Id>")``, ``make_vec`` in the native
    env), and ``max_episode_steps=`` changes it in either."""
    return register_ids(NATIVE_IDS, entry_point=f"{__name__}:make_single",
                        vector_entry_point=f"{__name__}:MujocoVectorEnv")

__all__ = ["MujocoVectorEnv", "gymnasium_id", "make_single", "register_envs"]
