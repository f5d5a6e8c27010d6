"""The MuJoCo family on MJX: ``HalfCheetah-v5``, ``Hopper-v5`` and ``Walker2d-v5`` as
functional `telapa.envs.base.JaxEnv`s (``make(id, backend="jax", friction=F)``), so that
a MuJoCo visit can be one compiled program with its seeds ``vmap``ped on an accelerator,
as a MiniGrid visit is. On a CPU the ``native`` backend is the fast one (issue 53's
measurements); here MJX is tested only (tests/envs/test_mujoco_mjx.py), and its speed
is the MuJoCo stage of `benchmarks/gpu_study.sh` to measure on an accelerator.

The equations are the native backend's (`telapa.envs.mujoco.native`: gymnasium v5 with
its default settings, read from the env class), written in ``jax.numpy`` for one env:

    step:     ctrl <- a;  frame_skip x mjx.step            (dt = timestep * frame_skip)
    obs:      HalfCheetah [qpos[1:], qvel]; Hopper, Walker2d [qpos[1:], clip(qvel, -10, 10)]
    reward:   w_fwd v - w_ctrl |a|^2 (HalfCheetah); w_fwd v + h - w_ctrl |a|^2 (the others),
              v = (qpos'[0] - qpos[0]) / dt, h the healthy reward while healthy
    healthy:  Hopper: [qpos, qvel][2:] in (-100, 100), z in (0.7, inf), angle in (-0.2, 0.2);
              Walker2d: z in (0.8, 2), angle in (-1, 1)   (z = qpos[1], angle = qpos[2])
    episode:  terminated = not healthy (never for HalfCheetah); truncated = t + 1 >= T
    reset:    qpos0 + U(-c, c), qvel0 + c N(0, 1) (HalfCheetah) or U(-c, c), then mjx.forward

with the friction regime F_s (`telapa.envs.mujoco.friction`: every geom's sliding
friction x s) a parameter of each env's state (``MJXState.friction``: the env's
``friction`` option at `reset`, any scale at `start`), so that envs of several regimes
step in one compiled program, and ``info["features"]`` the 24-dim sketch of
`telapa.envs.mujoco.sketch` (`sketch_jax`, the same statistics in float32).

What differs from the native backend: MJX computes in float32 (``mujoco`` in float64),
so trajectories from one state and one action sequence agree to float32 precision over
short horizons and part where contacts amplify the difference; resets draw from the same
distributions with JAX's keys, not numpy's generators (episodes match in distribution,
not one by one). Ant is not ported: MJX 3.17 (its last release) builds other contacts
than mujoco 4.0 for Ant's leg capsules on the floor (another tangent frame, so another
pyramidal friction cone), so the two part at the first contact even in float64 and a
port's returns would not be the native Ant's (docs/assumptions.md, "The MJX ports",
gives the measurements); Ant runs on ``native``.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct
from gymnasium.envs.mujoco.mujoco_env import expand_model_path

from telapa.envs.base import ArraySpec, EnvSpec
from telapa.envs.gym_backend import scalar_bound
from telapa.envs.mujoco.friction import check_scale
from telapa.envs.mujoco.native import load_model
from telapa.envs.mujoco.sketch import SKETCH_DIM
from telapa.envs.mujoco.v5 import MJX_IDS, check_native_options, defaults

with contextlib.redirect_stdout(io.StringIO()):  # it prints that warp (its GPU path) is absent
    from mujoco import mjx


@struct.dataclass
class MJXState:
    """One env between steps: the physics, and what the reward and sketch carry."""

    data: mjx.Data
    t: jax.Array
    """Steps taken in the episode (int32)."""
    episode_return: jax.Array
    prev_obs: jax.Array
    prev_action: jax.Array
    """The previous step's scaled action a~ (zeros after a reset)."""
    friction: jax.Array
    """The scale s of every geom's sliding friction (float32)."""


def sketch_jax(*, obs: jax.Array, prev_obs: jax.Array, action: jax.Array,
               prev_action: jax.Array, reward: jax.Array, episode_return: jax.Array,
               t: jax.Array, time_limit: int, reference_return: float) -> jax.Array:
    """The (24,) sketch x_t of `telapa.envs.mujoco.sketch.sketch` for one env, in
    float32: the same statistics (population std, rms, linearly interpolated quartiles)
    of o_t, dO, a~_t and dA, then r_t T / R*, G_t / R* and (t + 1) / T."""
    o, a = obs, action
    d_o, d_a = o - prev_obs, a - prev_action
    s = jnp.sort(o)
    q = jnp.quantile(o, jnp.array([0.25, 0.5, 0.75]))

    def rms(x: jax.Array) -> jax.Array:
        return jnp.sqrt(jnp.mean(x * x))

    return jnp.stack([
        jnp.mean(o), jnp.std(o), s[0], s[-1], jnp.mean(jnp.abs(o)), rms(o), *q,
        jnp.mean(d_o), jnp.std(d_o), jnp.mean(jnp.abs(d_o)), jnp.max(jnp.abs(d_o)),
        jnp.mean(a), jnp.std(a), jnp.min(a), jnp.max(a), jnp.mean(jnp.abs(a)), rms(a),
        jnp.mean(jnp.abs(d_a)), rms(d_a),
        reward * time_limit / reference_return, episode_return / reference_return,
        (t + 1) / time_limit,
    ]).astype(jnp.float32)


class MJXEnv:
    """One env of ``env_id`` (one of `MJX_IDS`) on MJX, a `JaxEnv` (module docstring).
    ``friction``: the scale s of the sliding friction; ``max_episode_steps``: the time
    limit T (default: the registration's); ``reference_return``: R* of the sketch."""

    def __init__(self, env_id: str, *, friction: float = 1.0,
                 max_episode_steps: int | None = None, reference_return: float):
        if env_id not in MJX_IDS:
            raise ValueError(f"{env_id} has no MJX port (ported: {', '.join(MJX_IDS)}; "
                             "MJX's contacts are not mujoco's for Ant); run it on backend 'native'")
        try:
            scale = check_scale(friction)
        except ValueError as err:
            raise ValueError(f"{env_id}: {err}") from None
        self.name = env_id.split("-v")[0]
        self.kw = kw = defaults(env_id)
        model = load_model(expand_model_path(kw["xml_file"]))
        data = mujoco.MjData(model)
        self.friction = scale
        """The friction scale s of `reset`'s episodes."""
        self.model = mjx.put_model(model)
        """The model at s = 1 (`model_at` scales it)."""
        self._data0 = mjx.make_data(model)
        self._qpos0 = jnp.asarray(data.qpos, jnp.float32)
        self._qvel0 = jnp.asarray(data.qvel, jnp.float32)
        self.frame_skip = int(kw["frame_skip"])
        self.dt = float(model.opt.timestep) * self.frame_skip
        self.time_limit = int(max_episode_steps or gymnasium.spec(env_id).max_episode_steps)
        self.reference_return = float(reference_return)
        bounds = model.actuator_ctrlrange.astype(np.float32)
        self._low = jnp.asarray(bounds[:, 0])
        self._high = jnp.asarray(bounds[:, 1])
        self._act_scale = jnp.maximum(jnp.abs(self._low), jnp.abs(self._high))
        size = model.nq - 1 + model.nv
        self.spec = EnvSpec(
            env_id=env_id, observation={"obs": ArraySpec((size,), np.dtype(np.float32))},
            action_dim=model.nu, action_low=scalar_bound(bounds[:, 0], env_id),
            action_high=scalar_bound(bounds[:, 1], env_id), max_steps=self.time_limit,
            feature_dim=SKETCH_DIM)

    # --- the JaxEnv interface ---------------------------------------------------------

    def reset(self, key: jax.Array) -> tuple[MJXState, dict[str, jax.Array]]:
        c = self.kw["reset_noise_scale"]
        k_pos, k_vel = jax.random.split(key)
        qpos = self._qpos0 + jax.random.uniform(k_pos, self._qpos0.shape, minval=-c, maxval=c)
        if self.name == "HalfCheetah":
            qvel = self._qvel0 + c * jax.random.normal(k_vel, self._qvel0.shape)
        else:
            qvel = self._qvel0 + jax.random.uniform(k_vel, self._qvel0.shape, minval=-c,
                                                    maxval=c)
        return self.start(qpos, qvel)

    def start(self, qpos: jax.Array, qvel: jax.Array, friction: Any = None
              ) -> tuple[MJXState, dict[str, jax.Array]]:
        """The state of an episode that starts at ``qpos``, ``qvel`` under the friction
        scale ``friction`` (default: the env's), what `reset` does after its draw; the
        differential tests start both backends from one state."""
        friction = jnp.float32(self.friction if friction is None else friction)
        data = mjx.forward(self.model_at(friction),
                           self._data0.replace(qpos=qpos, qvel=qvel))
        obs = self.observe(data)
        nu = self.spec.action_dim
        state = MJXState(data=data, t=jnp.int32(0), episode_return=jnp.float32(0.0),
                         prev_obs=obs, prev_action=jnp.zeros(nu, jnp.float32),
                         friction=friction)
        return state, {"obs": obs}

    def model_at(self, friction: jax.Array) -> mjx.Model:
        """The model with every geom's sliding friction x ``friction``
        (`telapa.envs.mujoco.friction.scale_sliding_friction`)."""
        geom = self.model.geom_friction
        return self.model.replace(geom_friction=geom.at[:, 0].multiply(friction))

    def step(self, state: MJXState, action: jax.Array):
        action = jnp.asarray(action, jnp.float32)
        model = self.model_at(state.friction)
        data = state.data.replace(ctrl=action)
        data = jax.lax.fori_loop(0, self.frame_skip, lambda _, d: mjx.step(model, d), data)
        obs = self.observe(data)
        velocity = (data.qpos[0] - state.data.qpos[0]) / self.dt
        reward, healthy = self.reward(data, velocity, action)
        terminated = ~healthy if self.kw.get("terminate_when_unhealthy") else jnp.bool_(False)
        truncated = state.t + 1 >= self.time_limit
        episode_return = state.episode_return + reward
        scaled = jnp.clip(action, self._low, self._high) / self._act_scale
        features = sketch_jax(obs=obs, prev_obs=state.prev_obs, action=scaled,
                              prev_action=state.prev_action, reward=reward,
                              episode_return=episode_return, t=state.t,
                              time_limit=self.time_limit,
                              reference_return=self.reference_return)
        new = MJXState(data=data, t=state.t + 1, episode_return=episode_return,
                       prev_obs=obs, prev_action=scaled, friction=state.friction)
        return new, {"obs": obs}, reward, terminated, truncated, {"features": features}

    # --- the env's equations (module docstring) ---------------------------------------

    def observe(self, data: mjx.Data) -> jax.Array:
        qvel = data.qvel
        if self.name != "HalfCheetah":
            qvel = jnp.clip(qvel, -10, 10)
        return jnp.concatenate([data.qpos[1:], qvel]).astype(jnp.float32)

    def healthy(self, data: mjx.Data) -> jax.Array:
        kw, qpos = self.kw, data.qpos
        (z_low, z_high), (a_low, a_high) = kw["healthy_z_range"], kw["healthy_angle_range"]
        z, angle = qpos[1], qpos[2]
        ok = (z_low < z) & (z < z_high) & (a_low < angle) & (angle < a_high)
        if self.name == "Hopper":
            low, high = kw["healthy_state_range"]
            state = jnp.concatenate([qpos, data.qvel])[2:]
            ok &= jnp.all((low < state) & (state < high))
        return ok

    def reward(self, data: mjx.Data, velocity: jax.Array, action: jax.Array
               ) -> tuple[jax.Array, jax.Array]:
        """(float32 reward, healthy) after a step."""
        kw = self.kw
        forward = kw["forward_reward_weight"] * velocity
        ctrl = kw["ctrl_cost_weight"] * jnp.sum(jnp.square(action))
        if self.name == "HalfCheetah":
            return (forward - ctrl).astype(jnp.float32), jnp.bool_(True)
        healthy = self.healthy(data)
        reward = forward + healthy * kw["healthy_reward"] - ctrl
        return reward.astype(jnp.float32), healthy


def make_mjx(env_id: str, options: dict[str, Any], *, reference_return: float) -> MJXEnv:
    """`MJXEnv` of ``env_id`` with the task ``options`` (``friction``,
    ``max_episode_steps``), checked as the native backend's are
    (`telapa.envs.mujoco.v5.check_native_options`)."""
    check_native_options(env_id, options, backend="jax")
    return MJXEnv(env_id, reference_return=reference_return, **options)


__all__ = ["MJX_IDS", "MJXEnv", "MJXState", "make_mjx", "sketch_jax"]
