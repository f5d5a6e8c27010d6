"""`telapa.envs.mujoco.gym_vector`: the native MuJoCo batch as ``gymnasium.make_vec(
"telapa/<Id>")``, step for step what gymnasium's own ``SyncVectorEnv`` of the v5 env gives
(its ``NEXT_STEP`` autoreset, seeding, dtypes, out-of-range actions), except the infos."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import telapa.envs  # noqa: F401  (registers telapa/<Id>)
from telapa.envs.mujoco import gym_vector, native
from telapa.envs.mujoco.gym_vector import MujocoVectorEnv
from telapa.envs.mujoco.v5 import NATIVE_IDS


def _lockstep(ours: gym.vector.VectorEnv, ref: gym.vector.VectorEnv, steps: int,
              seed: int = 3) -> int:
    """Steps both with the same seeded actions (a fifth of them outside the actuators'
    range) and requires the same observations, rewards and flags, dtypes included;
    returns how many episodes ended."""
    obs, _ = ours.reset(seed=seed)
    ref_obs, _ = ref.reset(seed=seed)
    np.testing.assert_array_equal(obs, ref_obs)
    rng = np.random.default_rng(seed)
    ends = 0
    for t in range(steps):
        action = (1.2 * rng.standard_normal(ours.action_space.shape)).astype(np.float32)
        got, want = ours.step(action)[:4], ref.step(action)[:4]
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"), got, want,
                              strict=True):
            assert a.dtype == b.dtype, (t, name, a.dtype, b.dtype)
            np.testing.assert_array_equal(a, b, err_msg=f"step {t}: {name}")
        ends += int((got[2] | got[3]).sum())
    return ends


@pytest.mark.parametrize("env_id", NATIVE_IDS)
def test_make_vec_is_gymnasiums_sync_vector_env_step_for_step(env_id):
    """Against gymnasium's own env (its default arguments), with truncation at 40 steps
    so that every env ends and restarts several times: NEXT_STEP autoreset, each env's
    generator going on from seed + i."""
    ours = gym.make_vec(f"telapa/{env_id}", num_envs=3, max_episode_steps=40)
    ref = gym.make_vec(env_id, num_envs=3, vectorization_mode="sync", max_episode_steps=40)
    assert isinstance(ours, MujocoVectorEnv)
    assert ours.metadata["autoreset_mode"] == ref.metadata["autoreset_mode"]
    assert ours.single_observation_space == ref.single_observation_space
    assert ours.single_action_space == ref.single_action_space
    assert ours.observation_space == ref.observation_space
    assert _lockstep(ours, ref, steps=130) >= 9  # at least three episodes an env
    # and a second reset with the same seed starts the same episodes again
    assert _lockstep(ours, ref, steps=5) >= 0
    ours.close(), ref.close()


def test_a_friction_regime_is_the_gymnasium_backends_env():
    """``friction=`` scales every geom's sliding friction, as the friction curricula:
    the same as gymnasium's env under `FrictionScale` (``gymnasium.make("telapa/<Id>")``,
    here in a SyncVectorEnv), and not the default env."""
    ours = gym.make_vec("telapa/Hopper-v5", num_envs=2, friction=0.5, max_episode_steps=30)
    ref = gym.make_vec("telapa/Hopper-v5", num_envs=2, vectorization_mode="sync",
                       friction=0.5, max_episode_steps=30)
    assert isinstance(ref, gym.vector.SyncVectorEnv)
    assert _lockstep(ours, ref, steps=70) > 0
    default = gym.make("Hopper-v5").unwrapped.model.geom_friction[:, 0]
    scaled = ref.envs[0].unwrapped.model.geom_friction[:, 0]
    np.testing.assert_allclose(scaled, 0.5 * default)


def test_reset_without_a_seed_goes_on_and_bad_calls_are_named():
    envs = gym.make_vec("telapa/HalfCheetah-v5", num_envs=2)
    with pytest.raises(gym.error.ResetNeeded):
        envs.step(np.zeros((2, 6), np.float32))
    first, _ = envs.reset(seed=1)
    again, _ = envs.reset()  # each env's generator goes on: new starts
    assert not np.array_equal(first, again)
    np.testing.assert_array_equal(envs.reset(seed=1)[0], first)
    per_env, _ = envs.reset(seed=[1, 2])  # a seed per env: env 1 as seed 1 + 1
    np.testing.assert_array_equal(per_env, first)
    with pytest.raises(ValueError, match=r"HalfCheetah-v5: expected actions of shape \(2, 6\)"):
        envs.step(np.zeros((2, 5), np.float32))
    with pytest.raises(gym.error.Error, match="no native MuJoCo env 'Humanoid-v5'"):
        MujocoVectorEnv("telapa/Humanoid-v5", num_envs=1)


def test_gymnasiums_episode_statistics_wrapper_reads_it():
    """Libraries take episode returns from gymnasium's vector wrappers, which read the
    rewards and flags (the infos of the env itself are empty)."""
    envs = gym.wrappers.vector.RecordEpisodeStatistics(
        gym.make_vec("telapa/Hopper-v5", num_envs=2, max_episode_steps=20))
    envs.reset(seed=0)
    total, returns = np.zeros(2), []
    for _ in range(25):
        _, reward, terminated, truncated, info = envs.step(np.zeros((2, 3), np.float32))
        total += reward
        for i in np.flatnonzero(terminated | truncated):
            assert info["episode"]["r"][i] == pytest.approx(total[i])
            returns.append(total[i])
            total[i] = 0.0
    assert len(returns) >= 2


def test_reset_mask_and_per_env_seeds_are_sync_vector_envs():
    """``options["reset_mask"]`` resets only the masked envs (the others keep their
    state, generator and pending autoreset, and return their last observation), with
    seeds in every form ``SyncVectorEnv`` takes (an integer: env i with seed + i; a list
    with None entries), in lockstep with gymnasium's ``SyncVectorEnv`` through
    truncations (limit 10) and terminations."""
    n = 4
    ours = gym.make_vec("telapa/Hopper-v5", num_envs=n, max_episode_steps=10)
    ref = gym.make_vec("Hopper-v5", num_envs=n, vectorization_mode="sync",
                       max_episode_steps=10)
    np.testing.assert_array_equal(ours.reset(seed=3)[0], ref.reset(seed=3)[0])
    rng = np.random.default_rng(0)
    cancelled = kept = 0
    for t in range(45):
        if t % 5 == 4:
            mask = np.array([t % 2 == 0, True, False, t % 3 == 0])
            seed = (None, 11, [None, 5, None, 9])[t % 3]
            options, due = {"reset_mask": mask}, ours._ended.copy()
            cancelled += int((due & mask).any())  # autoresets the mask replaces ...
            kept += int((due & ~mask).any())  # ... and those it leaves to the next step
            got, _ = ours.reset(seed=seed, options=options)
            want, _ = ref.reset(seed=seed, options={"reset_mask": mask.copy()})
            np.testing.assert_array_equal(got, want, err_msg=f"reset at {t}")
            assert "reset_mask" in options
        action = (1.2 * rng.standard_normal((n, 3))).astype(np.float32)
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"),
                              ours.step(action)[:4], ref.step(action)[:4], strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"step {t}: {name}")
    assert cancelled and kept, (cancelled, kept)
    with pytest.raises(TypeError, match=r"Hopper-v5: options\['reset_mask'\] must have "
                                        "dtype"):
        ours.reset(options={"reset_mask": np.ones(n, int)})
    with pytest.raises(ValueError, match="Hopper-v5: seed must be an integer >= 0"):
        ours.reset(seed=[1, None, "2", 3])


def test_make_vec_gives_no_model_warning(monkeypatch):
    """The batch's models load without gymnasium's deprecated ``settotalmass``
    (`telapa.envs.mujoco.native.load_model`), and the gymnasium env it makes to read the
    spaces hides the warning its load gives: HalfCheetah's batch gave it once."""
    import warnings

    monkeypatch.setattr(native, "_SHOWN", set())
    gym_vector._spaces.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gym.make_vec("telapa/HalfCheetah-v5", num_envs=2).close()
    assert not [w for w in caught if "MuJoCo" in str(w.message)], caught
