"""The ports as gymnasium envs (`telapa.envs.gym_vector`) against Farama's own.

The vector env is loaded with the states of Farama's ``SyncVectorEnv`` (`from_farama`)
and both step with the same actions: observations (image, direction, mission string),
rewards, terminations and truncations must be equal at every step, including the steps
where episodes end (by success, failure and time limit) and gymnasium's ``NEXT_STEP``
autoreset step after them. There the new levels are the port's own draws, so Farama's
are loaded again (the envs that did not reset keep stepping on their own state); the
levels' distribution is checked against Farama's separately.
"""

from __future__ import annotations

import gymnasium as gym
import jax
import minigrid  # noqa: F401  (registers the Farama ids)
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from level_statistics import compare, describe, rejections
from minigrid_levels import read_farama_levels
from minigrid_reference import ACTION_PROBS
from scipy.stats import chisquare

import telapa.envs  # noqa: F401  (registers telapa/<Id>)
from telapa.envs.gym_vector import MiniGridVectorEnv, mission_text
from telapa.envs.minigrid import all_tasks, from_farama
from telapa.envs.minigrid.farama import parse_mission

N_ENVS = 8
STEPS = 60
FETCH = "MiniGrid-Fetch-6x6-N2-v0"
DOORKEY = "MiniGrid-DoorKey-5x5-v0"


def _vector(env_id: str, **kwargs) -> MiniGridVectorEnv:
    envs = gym.make_vec(f"telapa/{env_id}", num_envs=N_ENVS, **kwargs)
    assert isinstance(envs, MiniGridVectorEnv)
    return envs


def test_every_port_is_registered_with_both_entry_points():
    for env_id in all_tasks():
        spec = gym.spec(f"telapa/{env_id}")
        assert spec.entry_point and spec.vector_entry_point and spec.max_episode_steps is None


def test_the_single_env_passes_gymnasiums_checker_with_faramas_spaces():
    env = gym.make(f"telapa/{FETCH}", render_mode="rgb_array")
    farama = gym.make(FETCH)
    assert env.observation_space == farama.observation_space
    assert env.action_space == farama.action_space
    check_env(env.unwrapped, skip_render_check=False)
    obs, _ = env.reset(seed=3)
    again, _ = env.reset(seed=3)
    assert obs["mission"] == again["mission"] and (obs["image"] == again["image"]).all()
    farama.reset(seed=3)
    assert env.render().shape == farama.unwrapped.get_frame().shape == (192, 192, 3)


@pytest.mark.parametrize("env_id", sorted(all_tasks()))
def test_mission_strings_are_faramas(env_id):
    """Farama's mission of seeds 0..4 is among the port's strings for its mission
    indices, and those are one string except where Farama draws a phrasing (Fetch)."""
    farama = gym.make(env_id)
    space, rng = farama.observation_space, np.random.default_rng(0)
    for seed in range(5):
        obs, _ = farama.reset(seed=seed)
        indices = np.asarray(parse_mission(obs["mission"]))
        texts = {mission_text(space, indices, rng) for _ in range(60)}
        assert obs["mission"] in texts
        assert len(texts) == (5 if env_id == FETCH else 1)


def _load(envs: MiniGridVectorEnv, farama: gym.vector.VectorEnv, missions, ended) -> None:
    states = [from_farama(env) for env in farama.envs]
    envs.set_state(jax.tree.map(lambda *x: np.stack(x), *states), list(missions), ended=ended)


EVENTS = {DOORKEY: ("truncated", "autoreset"),
          FETCH: ("terminated", "success", "truncated", "autoreset")}
"""Events the test's steps must see (random DoorKey episodes rarely reach the goal:
Fetch's pickups end them, rewarded or not)."""


@pytest.mark.parametrize("env_id", [DOORKEY, FETCH])
def test_the_vector_env_steps_as_faramas_sync_vector_env(env_id):
    envs = _vector(env_id, render_mode="rgb_array")
    farama = gym.make_vec(env_id, num_envs=N_ENVS, vectorization_mode="sync",
                          render_mode="rgb_array")
    assert envs.metadata["autoreset_mode"] == farama.metadata["autoreset_mode"]
    assert envs.observation_space == farama.observation_space
    assert envs.action_space == farama.action_space
    obs, _ = farama.reset(seed=0)
    envs.reset(seed=0)
    for i, env in enumerate(farama.envs[: N_ENVS // 2]):  # time limits within the test
        env.unwrapped.step_count = env.unwrapped.max_steps - 3 - 4 * i
    _load(envs, farama, obs["mission"], None)
    assert all((a == b).all() for a, b in zip(envs.render(), farama.render(), strict=True))
    rng = np.random.default_rng(1)
    seen = {"terminated": 0, "truncated": 0, "success": 0, "autoreset": 0}
    resetting = np.zeros(N_ENVS, bool)
    for _ in range(STEPS):
        actions = rng.choice(len(ACTION_PROBS), size=N_ENVS, p=ACTION_PROBS)
        want, reward, terminated, truncated, _ = farama.step(actions)
        got, got_reward, got_terminated, got_truncated, info = envs.step(actions)
        assert info == {}
        assert got_reward.dtype == reward.dtype and (got_reward == reward).all()
        assert (got_terminated == terminated).all() and (got_truncated == truncated).all()
        same = ~resetting  # the envs that reset now draw their own levels
        for name in ("image", "direction"):
            assert got[name].dtype == want[name].dtype
            assert (got[name][same] == want[name][same]).all(), name
        assert type(got["mission"]) is tuple and np.all(np.equal(got["mission"],
                                                                 want["mission"])[same])
        assert envs.observation_space.contains(got)
        if resetting.any():
            assert not (got_reward[resetting].any() or got_terminated[resetting].any())
            drawn = np.asarray(envs._state.env_state.state.mission)
            for i in np.flatnonzero(resetting):
                assert parse_mission(got["mission"][i]) == tuple(drawn[i])
            _load(envs, farama, want["mission"], terminated | truncated)
        seen["terminated"] += terminated.sum()
        seen["truncated"] += truncated.sum()
        seen["success"] += (reward > 0).sum()
        seen["autoreset"] += resetting.sum()
        resetting = terminated | truncated
    assert all(seen[event] for event in EVENTS[env_id]), seen


def test_the_vector_envs_levels_follow_faramas_distribution():
    """Fetch's levels drawn by 50 resets of the vector env (the program its autoreset
    runs) and 600 of Farama's: every level statistic of `level_statistics`, and the
    mission phrasing, which the vector env draws uniformly as Farama does."""
    envs = _vector(FETCH)
    states, phrasings = [], []
    for seed in range(50):
        obs, _ = envs.reset(seed=seed)
        states.append(jax.device_get(envs._state.env_state.state))
        phrasings += [m.rsplit(" ", 2)[0] for m in obs["mission"]]
    ours = jax.tree.map(lambda *x: np.concatenate(x), *states)
    results = compare(ours, read_farama_levels(FETCH, 600))
    assert not rejections(results), describe(results)
    assert len(results) > 10
    _, counts = np.unique(phrasings, return_counts=True)
    assert len(counts) == 5 and chisquare(counts).pvalue > 1e-3
