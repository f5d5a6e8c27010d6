"""The single-file examples run for a few hundred steps, as ``python examples/<script>``
runs them (``runpy`` in this process, ``__name__ == "__main__"``, with the command
line's arguments; in process so that the worker's JAX, torch and compilation cache serve
them): the CleanRL-style JAX PPO on ``gymnasium.make_vec("telapa/...")`` (MiniGrid, and
MuJoCo's native batch) and SB3's PPO on the adapter (skipped where SB3 is not
installed)."""

from __future__ import annotations

import importlib.util
import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(script: str, *args: str, monkeypatch, capsys) -> str:
    monkeypatch.setattr(sys, "argv", [script, *args])
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    return capsys.readouterr().out


def test_the_cleanrl_style_script_trains_on_make_vec(monkeypatch, capsys):
    out = _run("cleanrl_ppo_minigrid.py", "--total-timesteps", "512", "--num-envs", "8",
               "--num-steps", "32", "--update-epochs", "1", monkeypatch=monkeypatch,
               capsys=capsys)
    assert "iteration 2 step 512" in out, out


def test_the_cleanrl_style_mujoco_script_trains_on_make_vec(monkeypatch, capsys):
    """Continuous actions through gymnasium's vector wrappers on the native batch;
    Hopper, whose untrained episodes end within some 20 steps, so episodes are counted."""
    out = _run("cleanrl_ppo_mujoco.py", "--env-id", "telapa/Hopper-v5", "--friction", "0.75",
               "--total-timesteps", "512", "--num-envs", "4", "--num-steps", "64",
               "--num-minibatches", "2", "--update-epochs", "1", monkeypatch=monkeypatch,
               capsys=capsys)
    last = out.strip().splitlines()[-1]
    assert last.startswith("iteration 2 step 512 episodes ") and "nan" not in last, out


@pytest.mark.skipif(importlib.util.find_spec("stable_baselines3") is None,
                    reason="Stable-Baselines3 is not installed (pip install stable-baselines3)")
def test_the_sb3_script_trains_on_the_adapter(monkeypatch, capsys):
    out = _run("sb3_ppo_minigrid.py", "--total-timesteps", "256", "--num-envs", "4",
               "--n-steps", "64", monkeypatch=monkeypatch, capsys=capsys)
    assert "total_timesteps | 256" in out, out
