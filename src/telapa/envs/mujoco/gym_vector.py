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

``render_mode="rgb_array"`` (``width``, ``height``: gymnasium's, default 480): ``render()``
returns each env's frame, a tuple of n uint8 ``(height, width, 3)`` arrays, as
``SyncVectorEnv.render`` does and the MiniGrid vector env: the frames of gymnasium's env
in the same state, drawn by gymnasium's renderer of one env of ``<Id>`` into which each
native env's ``MjData`` is copied in turn (`MujocoVectorEnv.render`). Other modes
(``human``, ``depth_array``) are a ValueError naming the supported ones.
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
from telapa.envs.mujoco import _gymnasium_make, quiet_model_loads, reference_return
from telapa.envs.mujoco.friction import FrictionScale
from telapa.envs.mujoco.render import FRAME_SIZE, gl_backend
from telapa.envs.mujoco.v5 import NATIVE_IDS


def gymnasium_id(env_id: str) -> str:
    """``telapa/<Id>`` (or ``<Id>``) -> ``<Id>``."""
    return env_id.split("/", 1)[1] if env_id.startswith(f"{NAMESPACE}/") else env_id


@functools.cache
def _spaces(env_id: str) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    """Gymnasium's ``(observation_space, action_space)`` of ``env_id`` (made once, only
    to read them: without the deprecation gymnasium's XML gives at its load, as the
    batch's own models load without it)."""
    with quiet_model_loads():
        env = _gymnasium_make(env_id, {})
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def make_single(env_id: str, friction: float = 1.0, **kwargs: Any) -> gym.Env:
    """``gymnasium.make("telapa/<Id>")``: ``gymnasium.make("<Id>", **kwargs)`` (its time
    limit included) with the friction scale applied."""
    return FrictionScale(_gymnasium_make(gymnasium_id(env_id), kwargs), friction)


RENDER_MODES = ("rgb_array",)
"""The render modes of `MujocoVectorEnv` (besides None)."""


def check_render_mode(env_id: str, render_mode: Any) -> str | None:
    """``render_mode`` when `MujocoVectorEnv` renders it (None or ``"rgb_array"``), else a
    ValueError naming ``env_id`` and the supported modes."""
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"{env_id}: render_mode {render_mode!r} is not supported by the "
                         f"vector env; supported: None, "
                         f"{', '.join(repr(m) for m in RENDER_MODES)}")
    return render_mode


class MujocoVectorEnv(VectorEnv):
    """``num_envs`` native MuJoCo envs behind gymnasium's vector interface (module
    docstring). ``render_mode`` None or ``"rgb_array"`` (`render`), ``width`` and
    ``height`` the frames' size, as gymnasium's env takes them."""

    metadata = {"render_modes": list(RENDER_MODES), "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, env_id: str, num_envs: int = 1, *,
                 friction: float | Sequence[float] = 1.0,
                 max_episode_steps: int | None = None, threads: int | None = None,
                 render_mode: str | None = None, width: int = FRAME_SIZE,
                 height: int = FRAME_SIZE):
        name = gymnasium_id(env_id)
        if name not in NATIVE_IDS:
            raise gym.error.Error(f"no native MuJoCo env {name!r}; native: "
                                  f"{', '.join(NATIVE_IDS)}")
        self.render_mode = check_render_mode(name, render_mode)
        if self.render_mode is not None:
            gl_backend()  # no OpenGL backend: a one-line GLBackendError now, not at render
        from telapa.envs.mujoco.native import NativeVectorEnv  # imports mujoco

        self.env_id = name
        self._frame_size = int(width), int(height)
        self._renderer: gym.Env | None = None
        """Gymnasium's env of ``<Id>`` that draws the frames (made at the first `render`)."""
        self._cameras: list[dict[str, np.ndarray] | None] = []
        """Each env's camera (`_camera`); None before its first frame."""
        # unseeded, as gymnasium's envs: generators from fresh entropy until reset(seed=)
        entropy = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
        self.native = NativeVectorEnv(name, num_envs=num_envs, seed=entropy,
                                      friction=friction,
                                      max_episode_steps=max_episode_steps,
                                      reference_return=reference_return(name),
                                      threads=threads)
        self.native.sketch = False  # the 24-dim sketch is telapa's, not gymnasium's
        self.num_envs = self.native.num_envs
        self.metadata = {**self.metadata, "render_fps": int(np.round(1.0 / self.native.dt))}
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

    def render(self) -> tuple[np.ndarray, ...] | None:
        """Each env's ``rgb_array`` frame, uint8 ``(height, width, 3)``, in a tuple as
        ``SyncVectorEnv.render`` returns them; None without a render mode or before the
        first `reset`. The frames of a ``SyncVectorEnv`` of gymnasium's env in the same
        states (tests/envs/test_gym_vector_faults.py compares them pixel for pixel).

        One env of ``<Id>`` of gymnasium's, and its renderer, draw every env in turn:
        env i's ``MjData`` is copied into it (``mj_copyData``: the state as gymnasium's env
        holds it after a step, kinematics included), and its camera is env i's own.
        Gymnasium's offscreen viewer sets its free camera up when it first renders, looking
        at the median of the geoms' positions then, before ``default_camera_config``
        (HalfCheetah and Ant, which have no ``lookat`` there, keep looking at where they
        were at that first frame): env i's camera is set up so at its first frame and kept
        (`_camera`)."""
        if self.render_mode is None or self._ended is None:
            return None
        import mujoco

        if self._renderer is None:
            width, height = self._frame_size
            self._renderer = _gymnasium_make(self.env_id, {
                "render_mode": self.render_mode, "width": width, "height": height})
            self._cameras = [None] * self.num_envs
        env = self._renderer.unwrapped
        renderer = env.mujoco_renderer
        frames = []
        for i, data in enumerate(self.native.datas):
            mujoco.mj_copyData(env.data, env.model, data)
            self._camera(renderer, i)
            frames.append(renderer.render(self.render_mode))
        return tuple(frames)

    _CAMERA = ("type", "fixedcamid", "trackbodyid", "lookat", "distance", "azimuth",
               "elevation", "orthographic")
    """The fields of an ``MjvCamera`` that `_camera` keeps per env."""

    def _camera(self, renderer: Any, i: int) -> None:
        """Points ``renderer``'s viewer (gymnasium's ``MujocoRenderer``, holding env i's
        data) with env i's camera: at env i's first frame, set up as a new viewer of
        gymnasium's sets it up (``OffScreenViewer._init_camera``, then the env's
        ``default_camera_config``) and kept; later, the kept one."""
        viewer = renderer._get_viewer(self.render_mode)
        cam = viewer.cam
        if self._cameras[i] is None:
            viewer._init_camera()
            renderer._set_cam_config()
            self._cameras[i] = {k: np.copy(getattr(cam, k)) for k in self._CAMERA}
            return
        for k, value in self._cameras[i].items():
            if k == "lookat":
                cam.lookat[:] = value
            else:
                setattr(cam, k, value.item())

    def close_extras(self, **kwargs: Any) -> None:
        self.native.close()
        self._ended = None
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


def register_envs() -> list[str]:
    """Registers ``telapa/<Id>`` for every native MuJoCo ``<Id>`` not yet registered;
    returns all of them. No ``max_episode_steps``: both envs keep gymnasium's limit of
    ``<Id>`` (``make`` through ``gymnasium.make("<Id>")``, ``make_vec`` in the native
    env), and ``max_episode_steps=`` changes it in either."""
    return register_ids(NATIVE_IDS, entry_point=f"{__name__}:make_single",
                        vector_entry_point=f"{__name__}:MujocoVectorEnv")

__all__ = ["RENDER_MODES", "MujocoVectorEnv", "check_render_mode", "gymnasium_id",
           "make_single", "register_envs"]
