"""The ``native`` backend of the MuJoCo family: N envs of ``HalfCheetah-v5``,
``Hopper-v5``, ``Walker2d-v5`` or ``Ant-v5`` stepped with ``mujoco`` directly, and their
observations, rewards, episode ends and sketches computed for the whole batch in numpy.

`NativeVectorEnv` is a `telapa.envs.host.HostVectorEnv` (the call shape and same-step
autoreset of `telapa.envs.gym_backend.GymVectorEnv`) and reproduces, step for step and
bit for bit, what the gymnasium backend gives for the same initial state, actions and
seeds (tests/envs/test_mujoco_native.py): gymnasium's v5 env with its DEFAULT keyword
arguments (`telapa.envs.mujoco.v5.defaults`, read from the env class, not copied), the
``TimeLimit`` of its registration (or the ``max_episode_steps`` option), the friction
regime of `telapa.envs.mujoco.friction` and the sketch of `telapa.envs.mujoco.sketch`.

Physics. Env i has its own ``MjData`` of the ``MjModel`` of its friction scale s_i (one
model per distinct scale, loaded from the XML file gymnasium loads), and one step is

    ctrl <- a;  mj_step(model, data, nstep=frame_skip)   (dt = timestep * frame_skip)

followed, for Ant, by ``mj_rnePostConstraint`` (gymnasium calls it after every step; it
fills ``cfrc_ext``, which only Ant observes, and feeds nothing back into the dynamics).
The envs are stepped by a Python loop over their ``MjData``: measured on 2 cores, the
loop runs 30k steps/s with 8 envs, where ``mujoco.rollout`` (2 threads) gives 7.8k at
8 envs per call and 54k only at 64; rollout also returns no ``cfrc_ext`` and copies the
full physics state in and out of every call, and our batches (PPO's 8 envs) are small.
With ``threads`` > 1 the batch is cut into that many contiguous chunks, stepped at once
by the calling thread and persistent helper threads (``mj_step`` releases the GIL). Each env
is stepped by the same C calls on its own ``MjData`` whichever thread runs it, so the
results do not depend on ``threads`` (tested bit for bit).

Reset (gymnasium's ``reset_model``, c the env's ``reset_noise_scale``): ``mj_resetData``,
then qpos = qpos0 + U(-c, c)^nq and qvel = c N(0, 1)^nv (HalfCheetah, Ant) or U(-c, c)^nv
(Hopper, Walker2d), then ``mj_forward``. Env i draws from its own generator
``gymnasium.utils.seeding.np_random(seed + i)`` (gymnasium's vector seeding), so a seed
gives the gymnasium backend's episodes.

Observation (x, y: qpos[0], qpos[1]; the positions the default leaves out):

    HalfCheetah  [qpos[1:], qvel]                     (17)
    Hopper       [qpos[1:], clip(qvel, -10, 10)]      (11)
    Walker2d     [qpos[1:], clip(qvel, -10, 10)]      (17)
    Ant          [qpos[2:], qvel, clip(cfrc_ext[1:], -1, 1)]   (105)

Reward, with v = (x' - x) / dt the forward velocity over the step (Ant: of the torso's
``xpos``), C = w_ctrl sum_j a_j^2 (in the action's dtype, as gymnasium), h = 1 while
healthy and w_fwd = 1:

    HalfCheetah  r = w_fwd v - C                                   (w_ctrl 0.1)
    Hopper       r = (w_fwd v + h) - C                             (w_ctrl 1e-3)
    Walker2d     r = (w_fwd v + h) - C                             (w_ctrl 1e-3)
    Ant          r = (w_fwd v + h) - (C + w_c sum clip(cfrc_ext, -1, 1)^2)
                                                       (w_ctrl 0.5, w_c 5e-4, all bodies)

Healthy (terminated = not healthy; HalfCheetah never terminates; z = qpos[1], angle =
qpos[2] for Hopper and Walker2d, z = qpos[2] for Ant):

    Hopper    every entry of [qpos, qvel][2:] in (-100, 100), z in (0.7, inf),
              angle in (-0.2, 0.2)
    Walker2d  z in (0.8, 2.0), angle in (-1, 1)
    Ant       [qpos, qvel] finite and z in [0.2, 1.0]

and truncated = (t + 1 >= T) at the time limit T (1000 by registration).
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium
import mujoco
import numpy as np
from gymnasium.envs.mujoco.mujoco_env import expand_model_path
from gymnasium.utils import seeding

from telapa import envvars
from telapa.envs.base import ArraySpec, EnvSpec
from telapa.envs.gym_backend import scalar_bound
from telapa.envs.host import HostVectorEnv
from telapa.envs.mujoco.friction import check_scale, scale_sliding_friction
from telapa.envs.mujoco.sketch import SKETCH_DIM, sketch_batch
from telapa.envs.mujoco.v5 import check_native_options, defaults


@dataclass(frozen=True)
class _Env:
    """One id's constants: its gymnasium class's default keyword arguments."""

    name: str
    """The id without ``-v5``."""
    kw: dict[str, Any]

    @classmethod
    def of(cls, env_id: str) -> _Env:
        return cls(env_id.split("-v")[0], defaults(env_id))

    @property
    def skip(self) -> int:
        """The qpos entries the observation leaves out (x; Ant: x and y)."""
        return 2 if self.name == "Ant" else 1


MIN_ENVS_PER_THREAD = 4
"""A thread steps at least this many envs: below it the hand-off costs more than the
physics it moves (a HalfCheetah step is ~30 us). `advance` of HalfCheetahs (no sketch)
on the 2-core CPU, 1 thread against 2: 5 envs 18.0k against 14.5k env steps/s, 8 envs
26.1k against 28.3k, 16 envs 27.7k against 31.6k, 40 envs 24.6k against 39.4k (one
run, 2026-12-04, the study paused; with a `concurrent.futures` pool instead of
`_Helpers` 2 threads were slower at 8 envs, 24.2k against 25.7k)."""


def physics_threads(threads: int | None, num_envs: int) -> int:
    """Threads that step a batch of ``num_envs``: ``threads``, or by default the
    ``TELAPA_THREADS`` a sweep worker sets (`telapa.continual.sweep.jobs.thread_env`),
    else the cores this process may run on; at most one per `MIN_ENVS_PER_THREAD` envs."""
    if threads is None:
        threads = envvars.threads() or len(os.sched_getaffinity(0))
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    return max(1, min(int(threads), num_envs // MIN_ENVS_PER_THREAD))


@contextlib.contextmanager
def model_warnings() -> Iterator[None]:
    """MuJoCo's warnings while models load as Python `RuntimeWarning`s, each message once
    per process (`_warn`), instead of a line on stderr (and in ``MUJOCO_LOG.TXT`` in the
    working directory) at every load: gymnasium's own envs load half_cheetah.xml, whose
    ``settotalmass`` mujoco 4 calls deprecated (`load_model` does without it), and a
    sweep loads a model per visit and friction scale (some 1,600 lines in a study's log).
    Leaves a handler the user installed (`mujoco.set_mju_user_warning`) alone."""
    if mujoco.get_mju_user_warning() is not None:
        yield
        return
    mujoco.set_mju_user_warning(_warn)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(None)


def load_model(xml: str) -> mujoco.MjModel:
    """The model gymnasium compiles from the file ``xml``, bit for bit (every array of
    the ``MjModel``: tests/envs/test_mujoco_native.py), without the compiler attribute
    ``settotalmass``, which mujoco 4 deprecates with a warning at every load (gymnasium's
    half_cheetah.xml sets it to 14) and will remove. The file is compiled without it and
    its total mass M then set as the compiler sets it: every body's mass and inertia
    scaled by M / sum(mass) (``mj_setTotalmass``), then the constants that depend on them
    recomputed (``mj_setConst``). Any other warning while it compiles: `model_warnings`."""
    spec = mujoco.MjSpec.from_file(xml)
    total = spec.compiler.settotalmass
    spec.compiler.settotalmass = -1.0  # mujoco's "unset"
    with model_warnings():
        model = spec.compile()
    if total > 0:
        mujoco.mj_setTotalmass(model, total)
        mujoco.mj_setConst(model, mujoco.MjData(model))
    return model


_SHOWN: set[str] = set()
"""MuJoCo's messages already given as warnings in this process (`_warn`)."""


def _warn(message: str) -> None:
    """One Python warning per message per process. Python's own once-per-location rule
    is not enough: every ``warnings.catch_warnings`` (JAX and others enter them) clears
    what was shown, and a curriculum on two frictions showed the line at every visit."""
    message = f"MuJoCo: {message.strip()}"
    if message not in _SHOWN:
        _SHOWN.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=2)


class _Helpers:
    """Persistent helper threads that run one task each per call, handed over with two
    semaphores per thread (a `concurrent.futures` pool's queue and futures cost more
    than 4 HalfCheetah steps per hand-off: 2 threads were slower than one at 8 envs)."""

    def __init__(self, count: int):
        self._go = [threading.Semaphore(0) for _ in range(count)]
        self._done = [threading.Semaphore(0) for _ in range(count)]
        self._tasks: list[Callable[[], None] | None] = [None] * count
        self._errors: list[BaseException | None] = [None] * count
        self._lock = threading.Lock()
        for k in range(count):
            threading.Thread(target=self._serve, args=(k,), daemon=True,
                             name=f"telapa-mujoco-{k}").start()

    def _serve(self, k: int) -> None:
        while True:
            self._go[k].acquire()
            try:
                self._tasks[k]()
            except BaseException as err:  # re-raised in the caller's thread
                self._errors[k] = err
            self._done[k].release()

    def run(self, tasks: Sequence[Callable[[], None]]) -> None:
        """Runs ``tasks[0]`` here and the others on helper threads, returning when all
        are done; the first error of a helper is raised here."""
        with self._lock:  # one batch at a time per set of helpers
            helpers = range(len(tasks) - 1)
            for k in helpers:
                self._tasks[k], self._errors[k] = tasks[k + 1], None
                self._go[k].release()
            try:
                tasks[0]()
            finally:
                for k in helpers:
                    self._done[k].acquire()
            for k in helpers:
                if self._errors[k] is not None:
                    raise self._errors[k]


_HELPERS: dict[int, _Helpers] = {}
os.register_at_fork(after_in_child=_HELPERS.clear)  # a forked child has no helper threads


def _helpers(count: int) -> _Helpers:
    """The process's ``count`` physics helper threads (made once, shared)."""
    if count not in _HELPERS:
        _HELPERS[count] = _Helpers(count)
    return _HELPERS[count]


class NativeVectorEnv(HostVectorEnv):
    """``num_envs`` envs of ``env_id`` (module docstring). ``friction``: one scale s, or
    one per env; ``max_episode_steps``: the time limit T (default: the registration's);
    ``reference_return``: R* of the sketch; ``threads``: the threads that step a batch
    (`physics_threads`; the results do not depend on it). Made by
    `telapa.envs.registry.make` (``make(env_id, "native", num_envs=N, seed=S,
    friction=F)``)."""

    backend = "native"

    def __init__(self, env_id: str, *, num_envs: int = 8, seed: int = 0,
                 friction: float | Sequence[float] = 1.0,
                 max_episode_steps: int | None = None, reference_return: float,
                 threads: int | None = None):
        check_native_options(env_id, {} if max_episode_steps is None
                             else {"max_episode_steps": max_episode_steps})
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) \
                or num_envs < 1:
            raise ValueError(f"{env_id}: num_envs must be an integer >= 1, got {num_envs!r}")
        scales = [friction] * num_envs if np.ndim(friction) == 0 else list(friction)
        if len(scales) != num_envs:
            raise ValueError(f"{env_id}: {len(scales)} friction scales for {num_envs} envs")
        try:
            scales = [check_scale(s) for s in scales]
        except ValueError as err:
            raise ValueError(f"{env_id}: {err}") from None
        self.num_envs, self.seed = int(num_envs), int(seed)
        try:
            self.threads = physics_threads(threads, self.num_envs)
        except ValueError as err:
            raise ValueError(f"{env_id}: {err}") from None
        """Threads stepping a full batch (`physics_threads`)."""
        self.env = env = _Env.of(env_id)
        self.friction = np.array(scales)
        """(N,) the friction scale of each env."""
        xml = expand_model_path(env.kw["xml_file"])
        models: dict[float, mujoco.MjModel] = {}
        for s in dict.fromkeys(scales):
            models[s] = load_model(xml)
            scale_sliding_friction(models[s], s)
        self.models = [models[s] for s in scales]
        self.datas = [mujoco.MjData(m) for m in self.models]
        model = self.models[0]
        self.frame_skip = int(env.kw["frame_skip"])
        self.dt = model.opt.timestep * self.frame_skip
        self.time_limit = int(max_episode_steps or gymnasium.spec(env_id).max_episode_steps)
        self.reference_return = float(reference_return)
        self._init_qpos = self.datas[0].qpos.copy()
        self._init_qvel = self.datas[0].qvel.copy()
        main = env.kw.get("main_body", 1)
        self._main = model.body(main).id if isinstance(main, str) else int(main)
        bounds = model.actuator_ctrlrange.astype(np.float32)
        self._low, self._high = bounds[:, 0].astype(np.float64), bounds[:, 1].astype(np.float64)
        self._act_scale = np.maximum(np.abs(self._low), np.abs(self._high))
        n, nq, nv = num_envs, model.nq, model.nv
        self._qpos, self._qvel = np.zeros((n, nq)), np.zeros((n, nv))
        self._cfrc = np.zeros((n, model.nbody, 6))
        self._x = np.zeros(n)
        """The forward coordinate v is measured on (qpos[0]; Ant: the torso's xpos)."""
        self._rngs = [seeding.np_random(self.seed + i)[0] for i in range(n)]
        self._t = np.zeros(n, np.int64)
        self._return = np.zeros(n)
        self._prev_action = np.zeros((n, model.nu))
        self._obs = self._observe(np.arange(n))
        self.sketch = True
        """Whether `step` and `advance` compute the sketch (``info["features"]``; None
        when off). The sketch's running inputs (previous observation and action, return)
        are kept either way, so turning it on again mid-episode gives the same features.
        A training env turns it off (`telapa.rl.gym_agent.NativeAgent`): PPO never
        reads it, and it was 30% of a step (0.19 of 0.64 ms for 8 HalfCheetahs)."""
        size = self._obs.shape[1]
        self.spec = EnvSpec(
            env_id=env_id, observation={"obs": ArraySpec((size,), np.dtype(np.float32))},
            action_dim=model.nu, action_low=scalar_bound(bounds[:, 0], env_id),
            action_high=scalar_bound(bounds[:, 1], env_id), max_steps=self.time_limit,
            feature_dim=SKETCH_DIM)

    # --- the batch API of HostVectorEnv ---------------------------------------------

    def reset(self, key: Any = None) -> tuple[None, dict[str, np.ndarray]]:
        """Resets all envs: env i with seed ``seed_from(key) + i``."""
        seed = self.seed_from(key)
        everyone = np.arange(self.num_envs)
        self.reset_envs(everyone, seeds=seed + everyone)
        return None, {"obs": self._obs.astype(np.float32)}

    def step(self, state: None, action: Any):
        """Steps every env; see `telapa.envs.host` for the autoreset convention."""
        obs, reward, terminated, truncated, features = self.advance(
            np.arange(self.num_envs), np.asarray(action))
        done = np.flatnonzero(terminated | truncated)
        if done.size:
            self.reset_envs(done)
        info = {"features": features, "final_obs": {"obs": obs.astype(np.float32)}}
        return (None, {"obs": self._obs.astype(np.float32)}, reward, terminated, truncated,
                info)

    def close(self) -> None:
        """Drops the envs' ``MjData`` (the env cannot step afterwards)."""
        self.datas = []

    # --- envs by index --------------------------------------------------------------

    def reset_envs(self, idx: np.ndarray, seeds: np.ndarray | None = None) -> np.ndarray:
        """Starts new episodes in envs ``idx`` (their generators reseeded with ``seeds``
        when given, else continued); returns their (len(idx), n) float64 observations."""
        c = self.env.kw["reset_noise_scale"]
        normal = self.env.name in ("HalfCheetah", "Ant")
        for j, i in enumerate(idx.tolist()):
            if seeds is not None:
                self._rngs[i] = seeding.np_random(int(seeds[j]))[0]
            model, data, rng = self.models[i], self.datas[i], self._rngs[i]
            mujoco.mj_resetData(model, data)
            data.qpos[:] = self._init_qpos + rng.uniform(low=-c, high=c, size=model.nq)
            data.qvel[:] = self._init_qvel + (c * rng.standard_normal(model.nv) if normal
                                              else rng.uniform(low=-c, high=c, size=model.nv))
            mujoco.mj_forward(model, data)
            self._read(i, data)
        self._t[idx] = 0
        self._return[idx] = 0.0
        self._prev_action[idx] = 0.0
        self._obs[idx] = self._observe(idx)
        return self._obs[idx]

    def advance(self, idx: np.ndarray, action: np.ndarray, *, check: bool = True,
                reward_dtype: type = np.float32):
        """One step of envs ``idx`` with ``action`` (len(idx), m), without any reset;
        returns their ``(obs, reward, terminated, truncated, features)``: obs (float64)
        and features as the gymnasium backend's (the step's own, also at an episode's
        end; None when `sketch` is off), reward in ``reward_dtype`` (float64: gymnasium's
        own). ``check=False`` takes any action, as gymnasium's env does (MuJoCo clamps
        ``ctrl`` to the actuators' range; the control cost reads the action as given)."""
        if check:
            self.check_actions(action, len(idx))
        x_before = self._x[idx]
        rows = list(enumerate(idx.tolist()))
        chunks = physics_threads(self.threads, len(rows))
        if chunks == 1:
            self._physics(rows, action)
        else:
            cuts = [len(rows) * k // chunks for k in range(chunks + 1)]  # near-equal chunks
            _helpers(chunks - 1).run([partial(self._physics, rows[a:b], action)
                                      for a, b in zip(cuts[:-1], cuts[1:], strict=True)])
        obs = self._observe(idx)
        reward, healthy = self._reward(idx, (self._x[idx] - x_before) / self.dt, action)
        t = self._t[idx]
        self._return[idx] += reward
        scaled = np.clip(action.astype(np.float64), self._low, self._high) / self._act_scale
        features = sketch_batch(
            obs=obs, prev_obs=self._obs[idx], action=scaled,
            prev_action=self._prev_action[idx], reward=reward,
            episode_return=self._return[idx], t=t, time_limit=self.time_limit,
            reference_return=self.reference_return) if self.sketch else None
        self._obs[idx], self._prev_action[idx], self._t[idx] = obs, scaled, t + 1
        terminated = ~healthy if self.env.kw.get("terminate_when_unhealthy") \
            else np.zeros(len(idx), bool)
        truncated = t + 1 >= self.time_limit
        return obs, reward.astype(reward_dtype), terminated, truncated, features

    def _physics(self, rows: list[tuple[int, int]], action: np.ndarray) -> None:
        """Steps env i with ``action[j]`` for each ``(j, i)`` of ``rows`` (one thread's
        chunk; chunks share no env)."""
        post = self.env.name == "Ant"
        for j, i in rows:
            model, data = self.models[i], self.datas[i]
            data.ctrl[:] = action[j]
            mujoco.mj_step(model, data, nstep=self.frame_skip)
            if post:
                mujoco.mj_rnePostConstraint(model, data)
            self._read(i, data)

    # --- the env's equations (module docstring) --------------------------------------

    def _read(self, i: int, data: mujoco.MjData) -> None:
        """Copies what the equations read from env i's ``data``."""
        self._qpos[i], self._qvel[i] = data.qpos, data.qvel
        if self.env.name == "Ant":
            self._cfrc[i] = data.cfrc_ext
            self._x[i] = data.xpos[self._main, 0]
        else:
            self._x[i] = data.qpos[0]

    def _observe(self, idx: np.ndarray) -> np.ndarray:
        qpos, qvel = self._qpos[idx, self.env.skip:], self._qvel[idx]
        if self.env.name in ("Hopper", "Walker2d"):
            qvel = np.clip(qvel, -10, 10)
        parts = [qpos, qvel]
        if self.env.name == "Ant":
            parts.append(self._contact_forces(idx)[:, 1:].reshape(len(idx), -1))
        return np.concatenate(parts, axis=1)

    def _contact_forces(self, idx: np.ndarray) -> np.ndarray:
        low, high = self.env.kw["contact_force_range"]
        return np.clip(self._cfrc[idx], low, high)

    def _healthy(self, idx: np.ndarray) -> np.ndarray:
        kw, qpos = self.env.kw, self._qpos[idx]
        if self.env.name == "Ant":
            (low, high), z = kw["healthy_z_range"], qpos[:, 2]
            finite = np.isfinite(qpos).all(axis=1) & np.isfinite(self._qvel[idx]).all(axis=1)
            return finite & (low <= z) & (z <= high)
        (z_low, z_high), (a_low, a_high) = kw["healthy_z_range"], kw["healthy_angle_range"]
        z, angle = qpos[:, 1], qpos[:, 2]
        healthy = (z_low < z) & (z < z_high) & (a_low < angle) & (angle < a_high)
        if self.env.name == "Hopper":
            low, high = kw["healthy_state_range"]
            state = np.concatenate([qpos, self._qvel[idx]], axis=1)[:, 2:]
            healthy &= ((low < state) & (state < high)).all(axis=1)
        return healthy

    def _reward(self, idx: np.ndarray, velocity: np.ndarray, action: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """(float64 reward, healthy) of envs ``idx`` after their step."""
        kw = self.env.kw
        forward = kw["forward_reward_weight"] * velocity
        ctrl = kw["ctrl_cost_weight"] * np.sum(np.square(action), axis=1)
        if self.env.name == "HalfCheetah":
            return forward - ctrl, np.ones(len(idx), bool)
        healthy = self._healthy(idx)
        rewards = forward + healthy * kw["healthy_reward"]
        if self.env.name == "Ant":
            forces = self._contact_forces(idx).reshape(len(idx), -1)
            contact = kw["contact_cost_weight"] * np.sum(np.square(forces), axis=1)
            return rewards - (ctrl + contact), healthy
        return rewards - ctrl, healthy


__all__ = ["MIN_ENVS_PER_THREAD", "NativeVectorEnv", "physics_threads"]
