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

import re

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


def _equal(got: dict, want: dict, which: np.ndarray) -> None:
    """The observations of the envs of ``which`` are equal (image, direction, mission)."""
    for name in ("image", "direction"):
        assert (got[name][which] == want[name][which]).all(), name
    assert list(np.asarray(got["mission"])[which]) == list(np.asarray(want["mission"])[which])


def test_reset_mask_resets_only_the_masked_envs_as_faramas_sync_vector_env():
    """``options["reset_mask"]``: the other envs keep their state, mission and pending
    autoreset, and return their last observation; the masked ones start anew and are no
    longer due to autoreset. Envs 0 and 1 are truncated at the third step, so the mask
    [0, 2] meets an ended env (0, whose autoreset it cancels) and leaves one (1, which
    autoresets at the next step), in lockstep with Farama's ``SyncVectorEnv``."""
    n = 4
    envs = gym.make_vec(f"telapa/{DOORKEY}", num_envs=n)
    farama = gym.make_vec(DOORKEY, num_envs=n, vectorization_mode="sync")
    obs, _ = farama.reset(seed=0)
    envs.reset(seed=0)
    for env in farama.envs[:2]:
        env.unwrapped.step_count = env.unwrapped.max_steps - 3
    _load(envs, farama, obs["mission"], None)
    rng = np.random.default_rng(2)
    for _ in range(3):
        actions = rng.choice(len(ACTION_PROBS), size=n, p=ACTION_PROBS)
        got, *got_rest = envs.step(actions)
        want, *want_rest = farama.step(actions)
        _equal(got, want, np.ones(n, bool))
        assert all((a == b).all() for a, b in zip(got_rest[:3], want_rest[:3], strict=True))
    assert list(want_rest[2]) == [True, True, False, False]  # truncated
    last = got
    mask = np.array([True, False, True, False])
    options = {"reset_mask": mask}
    got, info = envs.reset(options=options)
    want, _ = farama.reset(options={"reset_mask": mask.copy()})
    assert info == {} and "reset_mask" in options  # the caller's dict is left as it is
    _equal(got, want, ~mask)  # Farama's last observations ...
    _equal(got, last, ~mask)  # ... which are ours
    mine = jax.device_get(envs._state.env_state)
    assert list(mine.state.step_count[mask]) == [0, 0]  # new episodes
    assert list(mine.ended) == [False, True, False, False]
    # Farama's new levels into the masked envs (the port draws its own), ours elsewhere
    theirs = [from_farama(env) for env in farama.envs]
    states = [theirs[i] if mask[i] else jax.tree.map(lambda x, i=i: x[i], mine.state)
              for i in range(n)]
    missions = [want["mission"][i] if mask[i] else got["mission"][i] for i in range(n)]
    envs.set_state(jax.tree.map(lambda *x: np.stack(x), *states), missions,
                   ended=mine.ended)
    same = np.array([True, False, True, True])  # env 1 autoresets to a level of its own
    for t in range(4):
        actions = rng.choice(len(ACTION_PROBS), size=n, p=ACTION_PROBS)
        got, reward, terminated, truncated, _ = envs.step(actions)
        want, ref_reward, ref_terminated, ref_truncated, _ = farama.step(actions)
        assert (reward == ref_reward).all() and (terminated == ref_terminated).all()
        assert (truncated == ref_truncated).all() and not (terminated | truncated).any()
        _equal(got, want, same)
        if t == 0:  # env 1's NEXT_STEP autoreset, in both
            assert jax.device_get(envs._state.env_state.state.step_count)[1] == 0
            assert farama.envs[1].unwrapped.step_count == 0


@pytest.mark.parametrize("mask", [[True] * 4, np.ones(3, bool), np.ones(4, int),
                                  np.zeros(4, bool)], ids=["list", "shape", "dtype", "none"])
def test_a_bad_reset_mask_is_refused_as_sync_vector_env_refuses_it(mask):
    envs = gym.make_vec(f"telapa/{DOORKEY}", num_envs=4)
    farama = gym.make_vec(DOORKEY, num_envs=4, vectorization_mode="sync")
    with pytest.raises(gym.error.ResetNeeded, match=f"{DOORKEY}: call reset"):
        envs.reset(options={"reset_mask": np.ones(4, bool)})
    envs.reset(seed=0), farama.reset(seed=0)
    with pytest.raises((TypeError, ValueError)) as want:
        farama.reset(options={"reset_mask": mask})
    with pytest.raises(want.type, match=rf"{DOORKEY}: options\['reset_mask'\] must"):
        envs.reset(options={"reset_mask": mask})


def test_a_masked_reset_starts_what_a_reset_of_every_env_with_its_seed_starts():
    envs = _vector(DOORKEY)
    mask = np.arange(N_ENVS) % 3 == 0
    full, _ = envs.reset(seed=5)
    envs.reset(seed=9)
    _equal(envs.reset(seed=5, options={"reset_mask": mask})[0], full, mask)
    seeds = list(range(20, 20 + N_ENVS))
    full, _ = envs.reset(seed=seeds)
    envs.reset(seed=9)
    _equal(envs.reset(seed=seeds, options={"reset_mask": mask})[0], full, mask)


def test_per_env_seeds_start_each_env_as_the_single_env_with_that_seed():
    """``reset(seed=[...])``, as ``SyncVectorEnv`` takes it: env i starts as
    ``gym.make("telapa/<Id>").reset(seed=seed[i])`` (a SyncVectorEnv of them here, Fetch's
    phrasings included); a None entry is not reseeded; the run after it (autoresets
    included) is reproducible from the seeds."""
    n, seeds = 4, [4, 11, 7, 0]
    envs = gym.make_vec(f"telapa/{FETCH}", num_envs=n)
    singles = gym.make_vec(f"telapa/{FETCH}", num_envs=n, vectorization_mode="sync")
    got, _ = envs.reset(seed=seeds)
    want, _ = singles.reset(seed=seeds)
    _equal(got, want, np.ones(n, bool))
    again = gym.make_vec(f"telapa/{FETCH}", num_envs=n)
    _equal(again.reset(seed=np.array(seeds))[0], got, np.ones(n, bool))
    rng, ends = np.random.default_rng(0), 0
    for _ in range(60):  # pickups: Fetch's episodes end, and autoreset from the key
        actions = rng.choice(4, size=n, p=[0.15, 0.15, 0.4, 0.3])
        got, _, terminated, truncated, _ = envs.step(actions)
        _equal(again.step(actions)[0], got, np.ones(n, bool))
        ends += (terminated | truncated).sum()
    assert ends > 0
    got, _ = envs.reset(seed=[4, None, 7, None])
    _equal(got, want, np.array([True, False, True, False]))
    with pytest.raises(ValueError, match=f"{FETCH}: 3 seeds for 4 envs"):
        envs.reset(seed=[1, 2, 3])
    for bad in ([1, 2, "3", 4], [1, 2, -3, 4], [1.5, 2, 3, 4], "1234", 2.5):
        with pytest.raises(ValueError, match=f"{FETCH}: seed must be an integer >= 0"):
            envs.reset(seed=bad)


def test_actions_not_of_discrete_7_are_refused_as_farama_refuses_them():
    """Farama's env raises ``ValueError: Unknown action`` where the port would take 7 or
    -1 as a no-op and truncate 1.7; integers of any dtype, and integral floats, are
    actions."""
    n = 4
    envs = gym.make_vec(f"telapa/{DOORKEY}", num_envs=n)
    farama = gym.make_vec(DOORKEY, num_envs=n, vectorization_mode="sync")
    envs.reset(seed=0), farama.reset(seed=0)
    for bad, shown in [(np.full(n, 7), "action 7"), (np.full(n, -1), "action -1"),
                       (np.full(n, 1.7), "action 1.7"), (np.array([0, 9, 2, -2]),
                                                         "actions -2, 9")]:
        with pytest.raises(ValueError, match="Unknown action"):
            farama.step(bad)
        with pytest.raises(ValueError, match=f"{DOORKEY}: unknown {shown}: actions are "
                                             r"integers 0 to 6 \(Discrete\(7\)\)"):
            envs.step(bad)
    with pytest.raises(ValueError, match=rf"{DOORKEY}: expected 4 actions, got .* \(3,\)"):
        envs.step(np.zeros(3, int))
    results = []
    for actions in ([2, 1, 0, 2], np.array([2, 1, 0, 2], np.uint8),
                    np.array([2, 1, 0, 2], np.int8), np.array([2.0, 1.0, 0.0, 2.0])):
        envs.reset(seed=0)
        results.append(envs.step(actions)[0])
    assert all(_equal(r, results[0], np.ones(n, bool)) is None for r in results)
    env = gym.make(f"telapa/{DOORKEY}")
    env.reset(seed=0)
    for bad in (7, -1, 2.5, np.int64(7), np.nan):
        with pytest.raises(ValueError, match=f"{DOORKEY}: unknown action"):
            env.step(bad)
    env.step(np.int8(2)), env.step(2.0), env.step(np.array(1))


@pytest.mark.parametrize("num_envs", ["4", 2.5, True, 0])
def test_num_envs_of_the_wrong_kind_is_named(num_envs):
    with pytest.raises(ValueError, match=rf"{DOORKEY}: num_envs must be an integer >= 1, "
                                         rf"got {re.escape(repr(num_envs))}"):
        gym.make_vec(f"telapa/{DOORKEY}", num_envs=num_envs)


def test_set_state_takes_a_sequence_of_per_env_states():
    """A list of ``from_farama`` states is stacked (it was taken as is, and the next step
    failed inside vmap); states of the wrong number or shape are refused, naming the
    leaf."""
    n = 4
    farama = gym.make_vec(DOORKEY, num_envs=n, vectorization_mode="sync")
    obs, _ = farama.reset(seed=3)
    per_env = [from_farama(env) for env in farama.envs]
    envs, stacked = (gym.make_vec(f"telapa/{DOORKEY}", num_envs=n) for _ in range(2))
    envs.set_state(per_env, obs["mission"])
    stacked.set_state(jax.tree.map(lambda *x: np.stack(x), *per_env), obs["mission"])
    for actions in ([2, 1, 2, 0], [0, 2, 2, 1]):
        got = envs.step(actions)[0]
        _equal(got, stacked.step(actions)[0], np.ones(n, bool))
        _equal(got, farama.step(actions)[0], np.ones(n, bool))
    with pytest.raises(ValueError, match=f"{DOORKEY}: set_state got 3 states for 4 envs"):
        envs.set_state(per_env[:3], obs["mission"][:3])
    three = jax.tree.map(lambda *x: np.stack(x), *per_env[:3])
    with pytest.raises(ValueError, match=rf"{DOORKEY}: set_state: states\.\w+ has shape"):
        envs.set_state(three, obs["mission"])
    with pytest.raises(ValueError, match=rf"{DOORKEY}: set_state: states\.\w+ has shape"):
        envs.set_state(per_env[0], obs["mission"])
    with pytest.raises(ValueError, match=f"{DOORKEY}: set_state got 3 missions for 4 envs"):
        envs.set_state(per_env, obs["mission"][:3])
