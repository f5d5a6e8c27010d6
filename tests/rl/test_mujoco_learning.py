"""PPO learns a MuJoCo task (marked slow; still run by default, ~20 s on 2 cores).

InvertedPendulum-v5 is the MuJoCo env that learns fastest: PPO holds the pole for
hundreds of steps after ~16k env steps, while uniformly random actions drop it within a
few steps (returns of about 4-10)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from telapa.config import parse_config
from telapa.rl.trainer import PPOTrainer

pytestmark = pytest.mark.slow

ENV = "InvertedPendulum-v5"
THRESHOLD = 150.0


def _random_returns(episodes: int) -> np.ndarray:
    env = gymnasium.make(ENV)
    env.action_space.seed(0)
    returns = []
    for e in range(episodes):
        env.reset(seed=e)
        total, done = 0.0, False
        while not done:
            _, r, terminated, truncated, _ = env.step(env.action_space.sample())
            total, done = total + r, terminated or truncated
        returns.append(total)
    return np.array(returns)


def test_ppo_learns_inverted_pendulum_beyond_any_random_return():
    random = _random_returns(100)
    assert random.max() < THRESHOLD / 3
    config = parse_config({
        "ppo": {"num_envs": 4, "n_steps": 256, "batch_size": 256, "epochs": 10, "lr": 1e-3,
                "ent_coef": 0.0},
        "eval": {"episodes": 8},
    })
    trainer = PPOTrainer(ENV, config, key=0, backend="gymnasium")
    before = trainer.evaluate(episodes=8, key=1)
    assert before.mean_return < THRESHOLD / 3
    history = trainer.train(20_480)
    # PPO's logged success rate is the family's competence of the training episodes
    ended = [m for m in history if m["episodes"] > 0]
    assert ended
    for m in ended:
        expected = min(max(m["episode_return"] / 950.0, 0.0), 1.0)
        assert m["success_rate"] == pytest.approx(expected, rel=1e-6), m
    after = trainer.evaluate(episodes=8, key=1)
    assert after.mean_return > THRESHOLD, after.returns
    # competence is SR~ = clip(mean return / R*, 0, 1), R* = 950 (gymnasium's threshold)
    assert after.sr == pytest.approx(min(after.mean_return / 950.0, 1.0), rel=1e-6)
