"""Faults of the gymnasium vector envs (`telapa.envs.gym_vector`,
`telapa.envs.mujoco.gym_vector`) found by a probe, one test each: a masked reset's
mission phrasing, large integer seeds, the MuJoCo vector env's ``render_mode``, and
pickling the MiniGrid envs."""

from __future__ import annotations

import pickle

import gymnasium as gym
import jax
import numpy as np
import pytest

import telapa.envs  # noqa: F401  (registers telapa/<Id>)
from telapa.envs.gym_vector import farama_observation_space
from telapa.envs.minigrid import all_tasks

FETCH = "MiniGrid-Fetch-6x6-N2-v0"
DOORKEY = "MiniGrid-DoorKey-5x5-v0"
EMPTY = "MiniGrid-Empty-5x5-v0"


def _same(a: dict, b: dict, rows: np.ndarray) -> bool:
    return (np.array_equal(a["image"][rows], b["image"][rows])
            and np.array_equal(a["direction"][rows], b["direction"][rows])
            and [a["mission"][i] for i in rows] == [b["mission"][i] for i in rows])


def test_a_masked_reset_with_an_int_seed_gives_the_full_resets_missions():
    """Fetch's phrasing ("get a", ..., "you must fetch a") is drawn per env: a masked
    reset with seed s gives each masked env the full reset's mission string, and leaves
    ``np_random`` where the full reset leaves it (the next autoresets' phrasings)."""
    free = [name for name in all_tasks() if len(
        farama_observation_space(name)["mission"].ordered_placeholders or []) > 2]
    assert free == [FETCH]  # the only port whose mission has a free placeholder
    n = 3
    envs = gym.make_vec(f"telapa/{FETCH}", num_envs=n)
    mask = np.array([False, True, True])
    for seed in range(4):
        full, _ = envs.reset(seed=seed)
        after_full = envs.np_random.integers(2**31)
        envs.step(np.full(n, 2))
        masked, _ = envs.reset(seed=seed, options={"reset_mask": mask})
        assert _same(masked, full, np.flatnonzero(mask)), (seed, full["mission"],
                                                           masked["mission"])
        assert envs.np_random.integers(2**31) == after_full
    envs.close()


def test_large_int_seeds_keep_every_bit_and_small_ones_keep_their_keys():
    """``reset(seed=s)`` takes any integer >= 0, as gymnasium's seeding and the single env
    do: 0 and 2**32 start different levels (PRNGKey kept only the low 32 bits), 2**63 and
    2**64 are seeds (PRNGKey raised OverflowError), reproducibly; seeds < 2**32 keep the
    keys ``jax.random.PRNGKey`` gives them."""
    envs = gym.make_vec(f"telapa/{DOORKEY}", num_envs=8)
    levels = {}
    for s in (0, 2**32, 2**63, 2**64):
        obs, _ = envs.reset(seed=s)
        again, _ = envs.reset(seed=s)
        assert np.array_equal(obs["image"], again["image"])
        levels[s] = obs["image"]
    assert not np.array_equal(levels[0], levels[2**32])
    assert not np.array_equal(levels[2**63], levels[2**64])
    envs.reset(seed=[2**63, 2**64, 0, 1, 2, 3, 4, 5])  # the list form took them already
    with pytest.raises(ValueError, match=f"{DOORKEY}: seed must be an integer >= 0"):
        envs.reset(seed=-1)
    envs.close()
    from telapa.envs.gym_vector import seed_key

    for s in (0, 1, 7, 2**31 - 1, 2**31, 2**32 - 1):
        assert np.array_equal(seed_key(s), jax.random.PRNGKey(s))
    keys = [tuple(np.asarray(seed_key(s)).tolist())
            for s in (0, 2**32, 2**33, 2**63, 2**64, 2**64 + 2**32, 2**96)]
    assert len(set(keys)) == len(keys)


def test_the_mujoco_vector_env_renders_gymnasiums_frames():
    """``render_mode="rgb_array"``: a tuple of each env's frame, gymnasium's own (a
    ``SyncVectorEnv`` of gymnasium's env in the same states), pixel for pixel, through
    steps; HalfCheetah's free camera looks where each env was at its first frame.
    Other modes are a ValueError naming the supported ones."""
    with pytest.raises(ValueError, match=r"Hopper-v5: render_mode 'human' .*'rgb_array'"):
        gym.make_vec("telapa/Hopper-v5", num_envs=2, render_mode="human")
    from telapa.envs.mujoco.render import GLBackendError, gl_backend

    try:
        gl_backend()
    except GLBackendError as err:
        pytest.skip(str(err))
    size = {"width": 40, "height": 32}
    envs = gym.make_vec("telapa/HalfCheetah-v5", num_envs=2, render_mode="rgb_array", **size)
    assert envs.metadata["render_modes"] == ["rgb_array"]
    assert envs.render() is None  # before the first reset
    ref = gym.make_vec("HalfCheetah-v5", num_envs=2, vectorization_mode="sync",
                       render_mode="rgb_array", **size)
    envs.reset(seed=3), ref.reset(seed=3)
    assert envs.metadata["render_fps"] == ref.metadata["render_fps"]
    rng = np.random.default_rng(0)
    for _ in range(3):
        got, want = envs.render(), ref.render()
        assert isinstance(got, tuple) and len(got) == 2
        assert got[0].shape == (32, 40, 3) and got[0].dtype == np.uint8
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
        assert not np.array_equal(got[0], got[1])
        actions = rng.uniform(-1, 1, envs.action_space.shape)
        envs.step(actions), ref.step(actions)
    envs.close(), ref.close()


def test_the_minigrid_envs_pickle_and_go_on_from_where_they_were():
    envs = gym.make_vec(f"telapa/{EMPTY}", num_envs=2)
    envs.reset(seed=0)
    envs.step(np.array([2, 1]))
    loaded = pickle.loads(pickle.dumps(envs))
    rng = np.random.default_rng(0)
    for _ in range(12):
        actions = rng.integers(3, size=2)
        got, want = loaded.step(actions), envs.step(actions)
        for g, w in zip(got, want, strict=True):
            if isinstance(w, dict):
                assert all(np.array_equal(g[k], w[k]) for k in w)
            else:
                assert np.array_equal(g, w)
    assert pickle.loads(pickle.dumps(gym.make_vec(f"telapa/{EMPTY}", 2))).num_envs == 2
    env = gym.make(f"telapa/{EMPTY}")
    env.reset(seed=1)
    copy = pickle.loads(pickle.dumps(env))
    assert np.array_equal(copy.step(2)[0]["image"], env.step(2)[0]["image"])
