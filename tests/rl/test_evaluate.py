"""The lane-scheduled population evaluator (`telapa.rl.evaluate`, issue 15): every
episode counted once in its own slot, results independent of the lanes and the batch,
the documented keys, truncation, and loop iterations equal to the greedy schedule's
makespan (lanes do not wait for a batch's longest episode)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from telapa.config import NetworkConfig
from telapa.rl.evaluate import (
    CPU_LANE_TARGET,
    default_lanes,
    make_jax_evaluator,
    make_population_evaluator,
)
from telapa.rl.policy import Policy

from .toy_envs import Countdown

ENV = Countdown()  # lengths 1, 2, 3 or 40
POLICY = Policy.create(ENV.spec, NetworkConfig(hidden=(8,)))
E, MAX_STEPS, B = 12, 24, 3  # 40-step episodes are truncated at 24
KEYS = jax.random.split(jax.random.key(0), B)
# a loop, not a vmap: a vmapped orthogonal init is a batched QR, which can deadlock XLA's
# CPU thread pool
PARAMS = jax.lax.map(POLICY.init, jax.random.split(jax.random.key(1), B))


def evaluator(lanes=None, *, b=B, feature_steps=None, episodes=E):
    evaluate = make_population_evaluator(
        ENV, POLICY, episodes, MAX_STEPS, feature_steps=feature_steps, lanes=lanes,
        count_iterations=True,
    )
    params = jax.tree.map(lambda x: x[:b], PARAMS)
    return jax.tree.map(np.asarray, jax.jit(evaluate)(params, KEYS[:b]))


@pytest.fixture(scope="module")
def by_lanes():
    """(returns, lengths, features, iterations) for lanes 1, 2, 5 and E."""
    return {lanes: evaluator(lanes) for lanes in (1, 2, 5, E)}


def drawn_lengths(key, episodes=E):
    """Episode e's length as Countdown draws it from the documented level key."""
    reset_key, _ = jax.random.split(key)
    levels = jax.random.split(reset_key, episodes)
    return np.array([int(ENV.reset(k)[0].length) for k in levels])


def greedy_makespan(lengths, lanes):
    """Steps until ``lanes`` lanes have run ``lengths`` in order, each free lane (lowest
    first) taking the next episode."""
    free = [0] * lanes
    for n in lengths:
        lane = min(range(lanes), key=lambda i: (free[i], i))
        free[lane] += int(n)
    return max(free)


def test_every_episode_once_in_its_slot_and_truncated(by_lanes):
    returns, lengths, features, _ = by_lanes[2]
    assert returns.shape == lengths.shape == (B, E) and features.shape == (B, E, MAX_STEPS, 2)
    for b in range(B):
        expected = np.minimum(drawn_lengths(KEYS[b]), MAX_STEPS)
        np.testing.assert_array_equal(lengths[b], expected)
        assert (expected == MAX_STEPS).any() and (expected < 4).any()  # both kinds drawn
        for e, n in enumerate(expected):
            # row t of episode e is (its length, t + 1); zero past its end
            np.testing.assert_array_equal(features[b, e, :n, 1], np.arange(1, n + 1))
            assert (features[b, e, :n, 0] == drawn_lengths(KEYS[b])[e]).all()
            assert not features[b, e, n:].any()
        # reward = action in {0, 1}: each return counts the episode's own steps only
        assert ((returns[b] >= 0) & (returns[b] <= expected)).all()
    assert 0 < returns.sum() < lengths.sum()  # sampled actions, not constant


def test_results_do_not_depend_on_the_lanes(by_lanes):
    reference = by_lanes[E]
    for lanes in (1, 2, 5):
        for got, want in zip(by_lanes[lanes][:3], reference[:3], strict=True):
            np.testing.assert_array_equal(got, want)


def test_batch_and_single_candidate_agree(by_lanes):
    """Candidate b of a batch is `make_jax_evaluator` with ``keys[b]`` (other lanes too)."""
    single = jax.jit(make_jax_evaluator(ENV, POLICY, E, MAX_STEPS, lanes=3))
    for b in range(B):
        params = jax.tree.map(lambda x, b=b: x[b], PARAMS)
        for got, want in zip(single(params, KEYS[b]), by_lanes[2][:3], strict=True):
            np.testing.assert_array_equal(got, want[b])
    one = evaluator(2, b=1)
    for got, want in zip(one[:3], by_lanes[2][:3], strict=True):
        np.testing.assert_array_equal(got[0], want[0])


def test_documented_keys():
    """Replays candidate 0 step by step with the documented keys: episode e starts from
    ``reset(split(reset_key, E)[e])`` and acts at step t with ``fold_in(split(act_key,
    E)[e], t)``."""
    params = jax.tree.map(lambda x: x[0], PARAMS)
    act = jax.jit(lambda o, k: POLICY.act(params, jax.tree.map(lambda x: x[None], o), k)
                  .env_action[0])
    step = jax.jit(ENV.step)
    reset_key, act_key = jax.random.split(KEYS[0])
    levels, acting = jax.random.split(reset_key, E), jax.random.split(act_key, E)
    returns, lengths = np.zeros(E, np.float32), np.zeros(E, np.int32)
    for e in range(E):
        state, obs = ENV.reset(levels[e])
        for t in range(MAX_STEPS):
            state, obs, reward, terminated, truncated, _ = step(
                state, act(obs, jax.random.fold_in(acting[e], t))
            )
            returns[e] += np.float32(reward)
            lengths[e] = t + 1
            if terminated or truncated:
                break
    got = jax.jit(make_jax_evaluator(ENV, POLICY, E, MAX_STEPS, lanes=4))(params, KEYS[0])
    np.testing.assert_array_equal(got[0], returns)
    np.testing.assert_array_equal(got[1], lengths)


def test_iterations_are_the_greedy_makespan(by_lanes):
    """Lanes never wait for the batch's longest episode: the loop runs exactly as long as
    the slowest candidate's greedy schedule, and with few lanes the lane-steps come close
    to the env steps, where E lanes idle behind each truncated episode."""
    lengths = by_lanes[E][1]
    steps = int(lengths.sum())
    lane_steps = {}
    for lanes, (_, _, _, iterations) in by_lanes.items():
        assert int(iterations) == max(greedy_makespan(row, lanes) for row in lengths)
        lane_steps[lanes] = B * lanes * int(iterations)
    assert lane_steps[E] == B * E * MAX_STEPS  # every candidate has a truncated episode
    assert lane_steps[1] <= B * steps and steps / lane_steps[2] > 0.8
    assert steps / lane_steps[E] < 0.5


@pytest.mark.parametrize("keep", [5, 30])
def test_feature_steps(by_lanes, keep):
    """Features keep the first ``feature_steps`` rows (zero beyond the time limit)."""
    _, lengths, features, _ = evaluator(2, feature_steps=keep)
    full = by_lanes[2][2]
    np.testing.assert_array_equal(lengths, by_lanes[2][1])
    assert features.shape == (B, E, keep, 2)
    np.testing.assert_array_equal(features[:, :, : min(keep, MAX_STEPS)], full[:, :, :keep])
    assert not features[:, :, MAX_STEPS:].any()


def test_default_lanes():
    assert default_lanes(50, 1, platform="cpu") == 13  # ceil(E / 4)
    assert default_lanes(50, 8, platform="cpu") == CPU_LANE_TARGET // 8 == 4
    assert default_lanes(50, 7, platform="cpu") == 5  # ceil(32 / 7)
    assert default_lanes(50, 32, platform="cpu") == default_lanes(50, 1000, platform="cpu") == 2
    assert default_lanes(3, 1, platform="cpu") == default_lanes(3, 64, platform="cpu") == 1
    assert default_lanes(50, 8, platform="gpu") == 50


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("lanes", 0, "lanes must be an integer >= 1"),
        ("lanes", E + 1, rf"lanes must be at most episodes \({E}\)"),
        ("lanes", 2.0, "lanes must be an integer"),
        ("episodes", 0, "episodes must be an integer >= 1"),
        ("max_steps", -1, "max_steps must be an integer >= 1"),
        ("feature_steps", 0, "feature_steps must be an integer >= 1"),
    ],
)
def test_bad_input(option, value, match):
    kwargs = {"episodes": E, "max_steps": MAX_STEPS, option: value}
    with pytest.raises(ValueError, match=match):
        make_population_evaluator(ENV, POLICY, **kwargs)
    with pytest.raises(ValueError, match="batch must be"):
        default_lanes(E, 0)


def test_deterministic_policy_is_lane_independent():
    evaluate = [
        jax.jit(make_jax_evaluator(ENV, POLICY, E, MAX_STEPS, deterministic=True, lanes=n))
        for n in (1, E)
    ]
    params = jax.tree.map(lambda x: x[1], PARAMS)
    a, b = (f(params, jnp.asarray(KEYS[1])) for f in evaluate)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
