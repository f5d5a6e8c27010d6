"""GymVectorEnv: spec, same-step autoreset with final obs/info, action checks."""

from __future__ import annotations

import numpy as np
import pytest

from telapa.envs import make


def test_vector_env_spec_and_autoreset():
    env = make("CartPole-v1", backend="gymnasium", num_envs=3, seed=1)
    spec = env.spec
    assert (spec.n_actions, spec.max_steps, spec.feature_dim) == (2, 500, 4)
    assert spec.observation["obs"].shape == (4,)
    _, obs = env.reset()
    _, again = make("CartPole-v1", "gymnasium", num_envs=3, seed=1).reset()
    np.testing.assert_array_equal(obs["obs"], again["obs"])  # seeded
    ended = 0
    for _ in range(60):  # always pushing right ends each episode within ~10 steps
        _, nxt, reward, term, trunc, info = env.step(None, np.ones(3, np.int64))
        done = term | trunc
        assert reward.shape == (3,) and info["features"].shape == (3, 4)
        # features (= the observation) belong to the step, final_obs to the ended episode
        np.testing.assert_array_equal(info["features"], info["final_obs"]["obs"])
        np.testing.assert_array_equal(info["final_obs"]["obs"][~done], nxt["obs"][~done])
        if done.any():
            assert not np.array_equal(info["final_obs"]["obs"][done], nxt["obs"][done])
            assert np.abs(nxt["obs"][done]).max() <= 0.05  # CartPole's reset range
        ended += int(done.sum())
    assert ended >= 3


def test_minigrid_ids_use_port_observations_and_final_info():
    env = make("MiniGrid-Empty-5x5-v0", "gymnasium", num_envs=2, seed=0)
    spec = env.spec
    assert spec.n_actions == 7 and spec.feature_dim == 11 and spec.max_steps == 100
    assert set(spec.observation) == {"image", "direction", "mission"}
    assert spec.observation["image"].shape == (7, 7, 3)
    _, obs = env.reset()
    assert obs["image"].shape == (2, 7, 7, 3) and obs["image"].dtype == np.uint8
    for t in range(1, 101):  # turning left forever: truncated at max_steps
        _, obs, reward, term, trunc, info = env.step(None, np.zeros(2, np.int64))
        # feature 3 is step_count / max_steps: the ended step's, not the reset's
        np.testing.assert_allclose(info["features"][:, 3], t / 100)
    assert trunc.all() and not term.any() and not info["success"].any()
    no_mission = make("MiniGrid-Empty-5x5-v0", "gymnasium", num_envs=1,
                      observe_mission=False)
    assert "mission" not in no_mission.spec.observation


def test_actions_out_of_range_are_rejected():
    env = make("MiniGrid-Empty-5x5-v0", "gymnasium", num_envs=2)
    env.reset()
    with pytest.raises(ValueError, match=r"action 7 for env 1 is out of range; valid "
                                         r"actions are integers 0\.\.6"):
        env.step(None, np.array([0, 7]))
    with pytest.raises(ValueError, match="out of range"):
        env.step(None, np.array([-1, 0]))
    with pytest.raises(ValueError, match=r"expected actions of shape \(2,\)"):
        env.step(None, np.array([0, 1, 2]))
    pendulum = make("Pendulum-v1", "gymnasium", num_envs=2)
    assert (pendulum.spec.action_dim, pendulum.spec.action_high) == (1, 2.0)
    pendulum.reset()
    with pytest.raises(ValueError, match=r"action \[2\.5\] for env 0 .* \[-2\.0, 2\.0\]"):
        pendulum.step(None, np.array([[2.5], [0.0]]))


def test_unknown_id_suggests_close_matches():
    with pytest.raises(ValueError, match="unknown env id 'Pendulm-v1'.*Pendulum-v1"):
        make("Pendulm-v1", "gymnasium")
