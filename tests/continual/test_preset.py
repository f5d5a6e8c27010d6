"""Run presets: the shipped ones load with the paper's numbers; bad ones are named."""

from __future__ import annotations

import pytest

from telapa.config import ConfigError, load_config, preset_path
from telapa.continual.preset import load_run_config, parse_run_config


def test_shipped_presets():
    paper = load_run_config("paper")
    assert paper.steps_per_visit == 10_000_000 and paper.eval_every == 500_000
    m = paper.methods
    assert (m.ewc.lam, m.ewc.decay, m.l2init.lam) == (10.0, 0.8, 0.001)
    assert (m.shrink_perturb.alpha, m.shrink_perturb.noise) == (0.99, 0.001)
    assert paper.train == load_config(preset_path("minigrid"))
    quick = load_run_config("quick")
    assert quick.steps_per_visit < paper.steps_per_visit
    assert quick.intrinsic_beta is None


def test_errors_name_the_key_and_source(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: minigrid\nsteps_per_visit: 1000\neval_every: 4096\nepisodes: 3\n")
    with pytest.raises(ConfigError, match=f"unknown key 'episodes' in {bad}"):
        load_run_config(bad)
    with pytest.raises(ConfigError, match="eval_every=512 is shorter than one PPO call.*2048"):
        parse_run_config({"train": "minigrid", "steps_per_visit": 4096, "eval_every": 512})
    available = "available: mujoco, mujoco-quick, paper, quick"
    with pytest.raises(ConfigError, match=f"unknown run preset 'nope'; {available}"):
        load_run_config("nope")
