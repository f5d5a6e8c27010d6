"""The single-file examples run as a user runs them (``python examples/<script>``), for
a few hundred steps: the CleanRL-style JAX PPO on ``gymnasium.make_vec("telapa/...")``
and SB3's PPO on the adapter (skipped where SB3 is not installed)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_cleanrl_style_script_trains_on_make_vec():
    out = _run("cleanrl_ppo_minigrid.py", "--total-timesteps", "512", "--num-envs", "8",
               "--num-steps", "32", "--update-epochs", "1")
    assert "iteration 2 step 512" in out, out


@pytest.mark.skipif(importlib.util.find_spec("stable_baselines3") is None,
                    reason="Stable-Baselines3 is not installed (pip install stable-baselines3)")
def test_the_sb3_script_trains_on_the_adapter():
    out = _run("sb3_ppo_minigrid.py", "--total-timesteps", "256", "--num-envs", "4",
               "--n-steps", "64")
    assert "total_timesteps | 256" in out, out
