"""Host rollouts with the Gaussian mean in numpy (`telapa.rl.host_policy`): the mean is
the network's to float32 rounding, the noise is the jitted ``act``'s bit for bit, the
stored log-probabilities and values are the policy's own, and a rollout follows the
jitted rollout's actions."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from telapa.config import NetworkConfig
from telapa.envs import make
from telapa.rl.host_policy import (
    HostActions,
    host_mean,
    host_rollout,
    make_eval_noise,
    make_noise,
    make_score,
)
from telapa.rl.policy import Policy
from telapa.rl.rollout import gym_rollout, make_act


def _policy(env_id: str, activation: str = "tanh", hidden=(64, 64)) -> tuple:
    env = make(env_id, "native", num_envs=4, seed=3)
    policy = Policy.create(env.spec, NetworkConfig(hidden=hidden, activation=activation))
    params = policy.init(jax.random.key(1))
    # a trained-looking policy: larger weights and a log-std away from 0
    params = jax.tree.map(lambda x: x * 3.0, params)
    return env, policy, params


@pytest.mark.parametrize("activation", ["tanh", "relu", "dff"])
def test_the_numpy_mean_is_the_networks(activation):
    env, policy, params = _policy("Hopper-v5", activation, hidden=(32, 16, 8))
    obs = {"obs": np.random.default_rng(0).normal(0, 2, (64, 11)).astype(np.float32)}
    mean = host_mean(policy)(jax.device_get(params), obs)
    dist, _ = policy(params, obs)
    assert mean.dtype == np.float32 and mean.shape == (64, 3)
    np.testing.assert_allclose(mean, np.asarray(dist.mean), rtol=2e-5, atol=2e-6)


def test_networks_it_does_not_cover_keep_the_jitted_act():
    minigrid = make("MiniGrid-Empty-5x5-v0", "jax")
    assert host_mean(Policy.create(minigrid.spec, NetworkConfig())) is None  # codes
    assert host_mean(Policy.create(minigrid.spec, NetworkConfig(encoder="cnn"))) is None


def test_a_rollout_draws_the_jitted_noise_and_scores_with_the_policy():
    env, policy, params = _policy("HalfCheetah-v5")
    other, _, _ = _policy("HalfCheetah-v5")
    key = jax.random.key(7)
    _, first = env.reset(jax.random.key(0))
    other.reset(jax.random.key(0))
    n = 12
    noise = jax.jit(make_noise(n, (4, 6)))
    score = jax.jit(make_score(policy))
    obs, end_key, traj = host_rollout(env, host_mean(policy), noise, score, policy, params,
                                      first, key, n)
    # the same keys as the jitted act's: the same end key, and per step the same draws
    ref_obs, ref_key, ref = gym_rollout(other, jax.jit(make_act(policy)), params, first,
                                        key, n)
    assert (jax.random.key_data(end_key) == jax.random.key_data(ref_key)).all()
    np.testing.assert_allclose(traj.action, ref.action, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(traj.reward, ref.reward, rtol=1e-3, atol=1e-4)
    # the stored scores are the policy's own on the stored states and actions
    dist, value = policy(params, traj.obs)
    np.testing.assert_array_equal(traj.log_prob, score(params, traj.obs, traj.action)[0])
    np.testing.assert_allclose(traj.log_prob, dist.log_prob(traj.action), rtol=1e-5)
    np.testing.assert_allclose(traj.value, value, rtol=1e-5, atol=1e-6)
    assert traj.action.shape == (n, 4, 6) and traj.obs["obs"].shape == (n, 4, 17)
    assert set(obs) == set(ref_obs) == {"obs"}


def test_a_native_agent_trains_without_the_sketch_to_the_same_parameters():
    """The native training env computes no sketch (PPO never reads it); training with it
    on gives the same parameters bit for bit, and the evaluation envs keep it."""
    from telapa.config import TrainConfig
    from telapa.rl import PPOTrainer

    config = TrainConfig.model_validate({"ppo": {"num_envs": 4, "n_steps": 64,
                                                 "batch_size": 64, "epochs": 1}})
    off = PPOTrainer("Hopper-v5", config, key=3, backend="native")
    on = PPOTrainer("Hopper-v5", config, key=3, backend="native")
    assert off.agent.env.sketch is False
    on.agent.env.sketch = True
    off.train(256)
    on.train(256)
    for a, b in zip(jax.tree.leaves(off.state.ppo.params), jax.tree.leaves(on.state.ppo.params),
                    strict=True):
        np.testing.assert_array_equal(a, b)
    result = off.evaluate(episodes=2)
    assert result.features is not None and np.abs(np.asarray(result.features)).sum() > 0


def test_host_actions_are_the_jitted_acts_per_set():
    """Evaluation's numpy actions on S stacked parameter sets and (S, E, ...)
    observations (`HostActions`): set i's env actions at step t are the jitted act's on
    set i after t steps of its key (the same draws, drawn up front; the means to float32
    rounding), whatever the other sets; deterministic, the clipped means."""
    env, policy, params = _policy("Hopper-v5")
    sets = [jax.tree.map(lambda x, s=s: x * (1.0 + 0.5 * s), params) for s in range(3)]
    stacked = jax.tree.map(lambda *x: np.stack(x), *sets)
    obs = np.random.default_rng(1).normal(0, 3, (4, 3, 5, 11)).astype(np.float32)  # T, S, E
    keys = jax.random.split(jax.random.key(2), 3)
    eps = np.asarray(jax.jit(make_eval_noise(4, (5, 3)))(keys))
    assert eps.shape == (3, 4, 5, 3)
    mean = host_mean(policy)
    noisy = HostActions(mean, policy, stacked, eps)
    exact = HostActions(mean, policy, stacked, None)
    jitted = jax.jit(make_act(policy))
    deterministic = jax.jit(make_act(policy, deterministic=True))
    for i, one in enumerate(sets):
        key = keys[i]
        for t in range(4):
            want, key_next = jitted(one, {"obs": obs[t, i]}, key)
            got = noisy({"obs": obs[t]}, t)[i]
            np.testing.assert_allclose(got, want.env_action, rtol=2e-5, atol=2e-5)
            mode, _ = deterministic(one, {"obs": obs[t, i]}, key)
            np.testing.assert_allclose(exact({"obs": obs[t]}, t)[i], mode.env_action,
                                       rtol=2e-5, atol=2e-6)
            key = key_next
    assert np.abs(noisy({"obs": obs[0]}, 0)).max() == 1.0  # std 1: clipped to [-1, 1]
