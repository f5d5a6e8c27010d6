"""PPO learns (marked slow; still run by default, each well under 3 min on 2 cores).

Thresholds are honest: each budget is 2-4x what the seed used here needs, and the
thresholds are those the paper cares about (SR >= 0.9 on MiniGrid) or, for Pendulum, a
clear improvement over the untrained policy (about -1200 -> better than -500).
"""

from __future__ import annotations

import pytest

from telapa.config import load_config, preset_path
from telapa.rl import PPOTrainer

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "env_id, steps",
    [("MiniGrid-Empty-5x5-v0", 40_960), ("MiniGrid-DoorKey-5x5-v0", 122_880)],
)
def test_minigrid_jax(env_id, steps):
    trainer = PPOTrainer(env_id, load_config(preset_path("minigrid")), key=0)
    assert trainer.evaluate().sr < 0.9
    trainer.train(steps)
    result = trainer.evaluate()
    assert result.sr >= 0.9, f"{env_id}: SR {result.sr} after {trainer.steps} steps"


def test_minigrid_gymnasium_backend():
    trainer = PPOTrainer(
        "MiniGrid-Empty-5x5-v0", load_config(preset_path("minigrid")), key=0, backend="gymnasium"
    )
    trainer.train(20_480)
    assert trainer.evaluate(episodes=20).sr >= 0.9


def test_pendulum_gymnasium_backend():
    trainer = PPOTrainer("Pendulum-v1", load_config(preset_path("pendulum")), key=0,
                         backend="gymnasium")
    before = trainer.evaluate().mean_return
    trainer.train(81_920)
    after = trainer.evaluate().mean_return
    assert before < -900 and after > -500, (before, after)
