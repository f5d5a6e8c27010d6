"""GAE, the PPO loss, distributions and truncation bootstrapping against numbers worked
out by hand (the arithmetic is written next to each expected value)."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from telapa.config import PPOConfig
from telapa.envs.family import NormalizedReturn, SuccessRate
from telapa.rl.policy import Categorical, DiagGaussian
from telapa.rl.ppo import (
    EpisodeTracker,
    Trajectory,
    advantages,
    episode_stats,
    gae,
    make_optimizer,
    ppo_loss,
)

LN2 = math.log(2.0)


def test_gae_by_hand():
    # Column 0: gamma=0.9, lambda=0.5, episode ends at t=1.
    #   next V = [1.0, 0.0 (masked), 3.0 (last_value)]
    #   delta2 = 2 + 0.9*3.0 - 0.0 = 4.7            A2 = 4.7
    #   delta1 = 0 + 0 (done) - 1.0 = -1.0          A1 = -1.0 (done: no A2 term)
    #   delta0 = 1 + 0.9*1.0 - 0.5 = 1.4            A0 = 1.4 + 0.45*(-1.0) = 0.95
    # Column 1: no ends, zero values, reward 1 at the end:
    #   A2 = 1, A1 = 0.45*1 = 0.45, A0 = 0.45*0.45 = 0.2025
    rewards = jnp.array([[1.0, 0.0], [0.0, 0.0], [2.0, 1.0]])
    values = jnp.array([[0.5, 0.0], [1.0, 0.0], [0.0, 0.0]])
    dones = jnp.array([[False, False], [True, False], [False, False]])
    last_value = jnp.array([3.0, 0.0])
    adv, ret = gae(rewards, values, dones, last_value, gamma=0.9, gae_lambda=0.5)
    np.testing.assert_allclose(adv, [[0.95, 0.2025], [-1.0, 0.45], [4.7, 1.0]], atol=1e-6)
    np.testing.assert_allclose(ret, [[1.45, 0.2025], [0.0, 0.45], [4.7, 1.0]], atol=1e-6)


def test_gae_lambda_one_is_discounted_return_minus_value():
    # lambda=1, gamma=0.5, rewards [1, 1, 1], V = 0, last V = 8:
    # R2 = 1 + 0.5*8 = 5, R1 = 1 + 0.5*5 = 3.5, R0 = 1 + 0.5*3.5 = 2.75
    adv, ret = gae(jnp.ones((3, 1)), jnp.zeros((3, 1)), jnp.zeros((3, 1), bool),
                   jnp.array([8.0]), gamma=0.5, gae_lambda=1.0)
    np.testing.assert_allclose(ret[:, 0], [2.75, 3.5, 5.0], atol=1e-6)


class _FixedPolicy:
    """Policy whose logits and values are read straight from ``params``."""

    def __call__(self, params, obs):
        return Categorical(params["logits"]), params["value"]

    def value(self, params, obs):
        return obs["v"]


# Three samples, two actions.
#   s0: logits [0, 0]    -> pi(a=0) = 0.5;  old pi = 0.25 -> ratio 2.0 (clipped)
#   s1: logits [ln3, 0]  -> pi(a=0) = 0.75; old pi = 0.5  -> ratio 1.5 (clipped)
#   s2: logits [0, 0]    -> pi(a=1) = 0.5;  old pi = 0.5  -> ratio 1.0
PARAMS = {
    "logits": jnp.array([[0.0, 0.0], [math.log(3.0), 0.0], [0.0, 0.0]]),
    "value": jnp.array([1.0, 2.0, 0.0]),
}
BATCH = {
    "obs": {},
    "action": jnp.array([0, 0, 1]),
    "log_prob": jnp.log(jnp.array([0.25, 0.5, 0.5])),
    "advantage": jnp.array([1.0, -2.0, 3.0]),
    "value": jnp.array([0.5, 2.5, 0.0]),
    "return": jnp.array([2.0, 0.0, 0.0]),
}
# entropies: ln2 = 0.693147; -(0.75 ln0.75 + 0.25 ln0.25) = 0.215762 + 0.346574 = 0.562335
ENTROPY = (LN2 + 0.5623351 + LN2) / 3  # 0.649543


def _loss(**cfg):
    config = PPOConfig(num_envs=1, n_steps=3, batch_size=3, **cfg)
    return ppo_loss(_FixedPolicy(), PARAMS, BATCH, config)


def test_ppo_loss_by_hand():
    loss, aux = _loss(norm_adv=False, clip_coef=0.2, ent_coef=0.01, vf_coef=0.5)
    # s0: max(-1*2.0, -1*1.2) = -1.2;  s1: max(2*1.5, 2*1.2) = 3.0;  s2: -3*1 = -3.0
    assert aux["pg_loss"] == pytest.approx((-1.2 + 3.0 - 3.0) / 3, abs=1e-6)  # -0.4
    # 0.5 * mean([(1-2)^2, (2-0)^2, 0]) = 0.5 * 5/3
    assert aux["v_loss"] == pytest.approx(0.5 * 5.0 / 3.0, abs=1e-6)
    assert aux["entropy"] == pytest.approx(ENTROPY, abs=1e-6)
    # -0.4 - 0.01*0.649543 + 0.5*0.833333 = 0.0101712
    assert loss == pytest.approx(-0.4 - 0.01 * ENTROPY + 0.5 * 5.0 / 6.0, abs=1e-6)
    # k3 KL: (r - 1) - ln r = [1 - ln2, 0.5 - ln1.5, 0] -> mean 0.133796
    assert aux["approx_kl"] == pytest.approx((1 - LN2 + 0.5 - math.log(1.5)) / 3, abs=1e-6)
    assert aux["clipfrac"] == pytest.approx(2 / 3)


def test_ppo_value_clipping_by_hand():
    _, aux = _loss(norm_adv=False, clip_vloss=True, clip_coef=0.2)
    # clipped V = old + clip(V - old, +-0.2) = [0.7, 2.3, 0.0]
    # max([(1-2)^2, (0.7-2)^2], [2^2, 2.3^2], [0, 0]) = [1.69, 5.29, 0] -> 0.5 * 6.98/3
    assert aux["v_loss"] == pytest.approx(0.5 * 6.98 / 3, abs=1e-6)


def test_ppo_advantage_normalisation_by_hand():
    _, aux = _loss(norm_adv=True, clip_coef=0.2)
    # A = [1, -2, 3]: mean 2/3, std sqrt((1/9 + 64/9 + 49/9) / 3) = sqrt(114/27) = 2.054805
    # A_n = [0.162221, -1.297771, 1.135550]
    # s0: max(-0.324443, -0.194665) = -0.194665; s1: max(1.946657, 1.557325) = 1.946657
    # s2: -1.135550 -> mean 0.205481
    assert aux["pg_loss"] == pytest.approx(0.205481, abs=1e-5)


def test_categorical_by_hand():
    dist = Categorical(jnp.array([math.log(3.0), 0.0]))
    assert dist.log_prob(jnp.array(0)) == pytest.approx(math.log(0.75), abs=1e-6)
    assert dist.entropy() == pytest.approx(0.5623351, abs=1e-6)
    assert int(dist.mode()) == 0


def test_diag_gaussian_by_hand():
    # N(0, 1) per dim: log p(1) = -0.5 - 0.5 ln(2 pi) = -1.418939; two dims -> doubled.
    dist = DiagGaussian(jnp.zeros(2), jnp.zeros(2))
    assert dist.log_prob(jnp.array([1.0, 1.0])) == pytest.approx(2 * -1.4189385, abs=1e-5)
    # entropy 0.5 ln(2 pi e) = 1.418939 per dim; log_std = ln 2 adds ln 2 per dim
    assert dist.entropy() == pytest.approx(2 * 1.4189385, abs=1e-5)
    wide = DiagGaussian(jnp.zeros(2), jnp.full(2, LN2))
    assert wide.entropy() == pytest.approx(2 * (1.4189385 + LN2), abs=1e-5)
    # log p(2) under std 2: z = 1 -> -0.5 - ln2 - 0.918939 per dim
    assert wide.log_prob(jnp.array([2.0, 2.0])) == pytest.approx(2 * (-1.4189385 - LN2), abs=1e-5)


def test_truncation_bootstraps_from_final_obs_value():
    # T=2, N=2, gamma=0.5, lambda=1, reward_scale=2. V(s) is read from obs["v"].
    # env 0 is truncated at t=0 with V(final_obs)=10 -> r0 = 2*1 + 0.5*10 = 7 (terminal),
    #   then t=1: r1 = 2*1, bootstrap last V=4 -> R1 = 2 + 0.5*4 = 4.
    # env 1 is terminated at t=0 (V(final_obs)=10 must be ignored) -> R0 = 2*1 = 2,
    #   then R1 = 2 + 0.5*4 = 4.
    traj = Trajectory(
        obs={"v": jnp.zeros((2, 2))},
        action=jnp.zeros((2, 2), jnp.int32),
        log_prob=jnp.zeros((2, 2)),
        value=jnp.zeros((2, 2)),
        reward=jnp.ones((2, 2)),
        terminated=jnp.array([[False, True], [False, False]]),
        truncated=jnp.array([[True, False], [False, False]]),
        final_obs={"v": jnp.full((2, 2), 10.0)},
    )
    config = PPOConfig(num_envs=2, n_steps=2, batch_size=4, gamma=0.5, gae_lambda=1.0,
                       reward_scale=2.0)
    _, returns = advantages(_FixedPolicy(), {}, traj, {"v": jnp.full(2, 4.0)}, config)
    np.testing.assert_allclose(returns, [[7.0, 2.0], [4.0, 4.0]], atol=1e-6)


def test_linear_lr_annealing_reaches_zero():
    # 1 update x 2 epochs x 2 minibatches = 4 Adam steps; lr decays 1e-2 -> 0 linearly:
    # steps 0..3 use 1e-2, 7.5e-3, 5e-3, 2.5e-3; the 5th update uses lr 0.
    config = PPOConfig(num_envs=2, n_steps=2, batch_size=2, epochs=2, lr=1e-2, anneal_lr=True)
    opt = make_optimizer(config, total_updates=1)
    params = {"w": jnp.zeros(3)}
    grads = {"w": jnp.ones(3)}
    state = opt.init(params)
    sizes = []
    for _ in range(5):
        updates, state = opt.update(grads, state, params)
        sizes.append(float(jnp.abs(updates["w"][0])))
    # Adam's first steps on a constant gradient move by lr (m / sqrt(v) = 1)
    np.testing.assert_allclose(sizes, [1e-2, 7.5e-3, 5e-3, 2.5e-3, 0.0], rtol=1e-3, atol=1e-8)
    with pytest.raises(ValueError, match="anneal_lr needs"):
        make_optimizer(config)


def test_episode_stats_score_ended_episodes_with_the_familys_competence():
    # Two envs over T = 3 steps. Env 0: an episode in progress with return 1.0 ends at
    # t = 0 with reward 2.0 (return 3.0), the next one ends at t = 2 with -1.0 + 0.0
    # (return -1.0). Env 1: its episode in progress (return 0.5) ends at t = 1 with 0.0
    # (return 0.5). Ended returns 3.0, 0.5, -1.0: mean 2.5 / 3.
    tracker = EpisodeTracker(jnp.array([1.0, 0.5]), jnp.array([1, 0], jnp.int32))
    reward = jnp.array([[2.0, 0.0], [-1.0, 0.0], [0.0, 0.0]])
    done = jnp.array([[True, False], [False, True], [True, False]])
    left, sr = episode_stats(tracker, reward, done, SuccessRate())
    _, norm = episode_stats(tracker, reward, done, NormalizedReturn(2.0))
    assert int(sr["episodes"]) == 3
    np.testing.assert_allclose(sr["episode_return"], 2.5 / 3, rtol=1e-6)
    # lengths: env 0 ends at length 2 (1 + 1 step) and 2 (t = 1, 2); env 1 at 2 (t = 0, 1)
    np.testing.assert_allclose(sr["episode_length"], 2.0)
    # SR: 2 of 3 ended returns are positive; SR~ = clip((2.5 / 3) / 2, 0, 1) = 5 / 12
    np.testing.assert_allclose(sr["success_rate"], 2 / 3, rtol=1e-6)
    np.testing.assert_allclose(norm["success_rate"], 5 / 12, rtol=1e-6)
    np.testing.assert_array_equal(left.ret, [0.0, 0.0])
    np.testing.assert_array_equal(left.length, [0, 1])
    # no episode ended: every mean is NaN, whatever the competence
    _, none = episode_stats(tracker, reward, jnp.zeros_like(done), NormalizedReturn(2.0))
    assert int(none["episodes"]) == 0 and np.isnan(none["success_rate"])
