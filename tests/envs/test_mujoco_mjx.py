"""The MuJoCo family's MJX ports (`telapa.envs.mujoco.mjx_env`) against the native
backend, which is bit-identical to gymnasium (tests/envs/test_mujoco_native.py): from
one state and one action sequence both agree to float32 precision over a short horizon,
for every ported id and friction scales 0.5, 1 and 2 (the scale a parameter of the state:
one compiled step per id); the sketch is the numpy sketch's; resets draw gymnasium's
distributions; a fixed policy earns the same returns on both; ``make`` gives them on the
``jax`` backend and refuses Ant in one line."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from telapa.envs import make
from telapa.envs.mujoco import reference_return
from telapa.envs.mujoco.mjx_env import MJXEnv, sketch_jax
from telapa.envs.mujoco.native import NativeVectorEnv
from telapa.envs.mujoco.sketch import sketch
from telapa.envs.mujoco.v5 import MJX_IDS

STEPS = 8
SCALES = (0.5, 1.0, 2.0)


@functools.cache
def _programs(env_id: str):
    """``(env, start, step, reset)`` of ``env_id`` on MJX, jitted once for the module:
    each MJX program takes 4-17 s to compile on a 2-core CPU (a step 17), so the tests
    of one id share them (the fixed-policy test steps its episodes with the agreement
    test's programs)."""
    env = make(env_id, "jax")
    return env, jax.jit(env.start), jax.jit(env.step), jax.jit(env.reset)


def test_the_jax_sketch_is_the_numpy_sketch():
    rng = np.random.default_rng(0)
    for n, m in ((17, 6), (11, 3)):
        for _ in range(20):
            args = dict(obs=rng.normal(size=n), prev_obs=rng.normal(size=n),
                        action=rng.uniform(-1, 1, m), prev_action=rng.uniform(-1, 1, m),
                        reward=float(rng.normal()), episode_return=float(rng.normal() * 50),
                        t=int(rng.integers(0, 1000)))
            want = sketch(**args, time_limit=1000, reference_return=3000.0)
            got = sketch_jax(**{k: jnp.asarray(v, jnp.float32) for k, v in args.items()},
                             time_limit=1000, reference_return=3000.0)
            np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("env_id", MJX_IDS)
def test_mjx_follows_the_native_backend_from_one_state(env_id):
    env, start, step, _ = _programs(env_id)
    assert isinstance(env, MJXEnv) and env.spec.env_id == env_id
    rng = np.random.default_rng(1)
    for scale in SCALES:
        native = NativeVectorEnv(env_id, num_envs=1, seed=7, friction=scale,
                                 reference_return=reference_return(env_id))
        _, first = native.reset(None)
        state, obs = start(jnp.asarray(native._qpos[0], jnp.float32),
                           jnp.asarray(native._qvel[0], jnp.float32), scale)
        np.testing.assert_allclose(np.asarray(obs["obs"]), first["obs"][0], atol=1e-6)
        for t in range(STEPS):
            action = rng.uniform(-1, 1, (1, env.spec.action_dim)).astype(np.float32)
            want, reward, terminated, truncated, features = native.advance(
                np.arange(1), action)
            state, obs, got_reward, got_term, got_trunc, info = step(state, action[0])
            where = f"{env_id}, friction {scale}, step {t}"
            np.testing.assert_allclose(np.asarray(obs["obs"]), want[0], rtol=1e-3, atol=2e-3,
                                       err_msg=where)
            np.testing.assert_allclose(float(got_reward), reward[0], rtol=1e-3, atol=2e-3,
                                       err_msg=where)
            assert (bool(got_term), bool(got_trunc)) == (terminated[0], truncated[0]), where
            np.testing.assert_allclose(np.asarray(info["features"]), features[0],
                                       rtol=1e-2, atol=1e-2, err_msg=where)
    # the friction is the state's: from one state and actions, two scales part ways
    action = jnp.full(env.spec.action_dim, 0.7, jnp.float32)
    ends = []
    for scale in (0.5, 2.0):
        state, _ = start(env._qpos0, env._qvel0, scale)
        for _ in range(30):
            state, *_ = step(state, action)
        ends.append(np.asarray(state.data.qpos))
    assert np.abs(ends[1] - ends[0]).max() > 1e-2, ends


def test_resets_draw_gymnasiums_distributions():
    """HalfCheetah: qpos0 + U(-c, c), qvel0 + c N(0, 1); Hopper: U(-c, c) for both
    (Kolmogorov-Smirnov against the native backend's draws, 400 resets each)."""
    for env_id, velocity in (("HalfCheetah-v5", "normal"), ("Hopper-v5", "uniform")):
        env, *_, reset = _programs(env_id)
        states = [reset(key)[0].data for key in jax.random.split(jax.random.key(0), 400)]
        native = NativeVectorEnv(env_id, num_envs=400, seed=0, friction=1.0,
                                 reference_return=reference_return(env_id))
        native.reset(None)
        qvel = np.array([d.qvel[0] for d in states]) - np.asarray(env._qvel0)[0]
        qpos = np.array([d.qpos[0] for d in states]) - np.asarray(env._qpos0)[0]
        c = env.kw["reset_noise_scale"]
        assert np.abs(qpos).max() <= c
        assert stats.ks_2samp(qpos, native._qpos[:, 0] - np.asarray(env._qpos0)[0]
                              ).pvalue > 0.01
        assert stats.ks_2samp(qvel, native._qvel[:, 0] - np.asarray(env._qvel0)[0]
                              ).pvalue > 0.01
        if velocity == "uniform":
            assert np.abs(qvel).max() <= c
        else:
            assert np.abs(qvel).max() > c  # a normal's tails


def test_make_refuses_what_mjx_does_not_port_in_one_line():
    # the reason and the backend to use, not "unknown env id" (a MuJoCo id without a port)
    with pytest.raises(ValueError, match=r"^Ant-v5 has no port on backend 'jax' \(the MJX "
                                         r"ports: HalfCheetah-v5, Hopper-v5, Walker2d-v5; "
                                         r"MJX's contacts are not mujoco's for Ant\): run it "
                                         r"on backend 'native'$"):
        make("Ant-v5", "jax")
    with pytest.raises(ValueError, match=r"option\(s\) num_envs not supported by backend "
                                         "'jax'"):
        make("Hopper-v5", "jax", num_envs=4)
    with pytest.raises(ValueError, match="friction scale must be a finite number > 0"):
        make("Hopper-v5", "jax", friction=-1.0)
    for limit in (0, True, 2.5):  # checked as on native (0 once fell back to 1000)
        with pytest.raises(ValueError, match="max_episode_steps must be an integer >= 1"):
            make("Hopper-v5", "jax", max_episode_steps=limit)


def test_a_fixed_policy_earns_the_same_returns_on_both_backends():
    """A fixed linear policy a = tanh(W o), Hopper episodes of at most 50 steps (falls end
    them, all by step 31): 32 on MJX from its own resets, stepped one at a time by the
    programs the agreement test compiled (a batched loop of its own cost 25 s of compile
    and 25 s of running at the suite's XLA settings), and 128 on the native backend. The
    returns' distributions agree (Kolmogorov-Smirnov and Welch's t, p > 0.01), as do the
    episodes' lengths in mean (within 2 steps).

    How much it sees (measured 2026-12-06 with these episodes against native batches of
    three seeds): the same friction passes (KS p 0.16-0.19, Welch p 0.32-0.37), and
    the native backend at friction 0.5, 0.75, 0.9, 1.25 or 2.0 fails it (the closest,
    0.75: KS p 7e-7, Welch p 0.003), as do native returns scaled by 0.95 or 1.05 (p
    below 1e-16) or raised by 0.02 a step (p 3e-5): the returns of one policy spread
    little (sd 0.85 about a mean of 47.6), so 32 episodes tell apart what 128 did."""
    episodes, horizon = 32, 50
    env, _, step, reset = _programs("Hopper-v5")
    weights = np.random.default_rng(3).normal(scale=0.3,
                                              size=(env.spec.action_dim, 11))

    def act(obs):
        return np.tanh(obs @ weights.T).astype(np.float32)

    mjx_total, mjx_length = np.zeros(episodes), np.zeros(episodes, int)
    for i, key in enumerate(jax.random.split(jax.random.key(0), episodes)):
        state, obs = reset(key)
        for _ in range(horizon):
            state, obs, reward, terminated, truncated, _ = step(
                state, act(np.asarray(obs["obs"])))
            mjx_total[i] += float(reward)
            mjx_length[i] += 1
            if terminated or truncated:
                break
    native_episodes = 4 * episodes  # cheap on the native backend
    native = NativeVectorEnv("Hopper-v5", num_envs=native_episodes, seed=0,
                             max_episode_steps=horizon,
                             reference_return=reference_return("Hopper-v5"))
    _, obs = native.reset(None)
    obs = obs["obs"]
    total, length = np.zeros(native_episodes), np.zeros(native_episodes, int)
    live = np.ones(native_episodes, bool)
    for _ in range(horizon):
        idx = np.flatnonzero(live)
        if not idx.size:
            break
        obs_i, reward, terminated, truncated, _ = native.advance(idx, act(obs[idx]))
        obs[idx] = obs_i
        total[idx] += reward
        length[idx] += 1
        live[idx] = ~(terminated | truncated)
    assert mjx_length.max() < horizon and length.max() < horizon  # falls ended them all
    assert stats.ks_2samp(mjx_total, total).pvalue > 0.01
    assert stats.ttest_ind(mjx_total, total, equal_var=False).pvalue > 0.01
    assert abs(mjx_length.mean() - length.mean()) < 2
