"""Run presets: the shipped ones load with the paper's numbers; bad ones are named."""

from __future__ import annotations

import pytest

from telapa.config import ConfigError, load_config, preset_path
from telapa.continual.preset import load_run_config, parse_run_config


def test_shipped_presets():
    paper = load_run_config("paper")
    assert paper.steps_per_visit == 9_994_240 and paper.eval_every == 499_712
    assert paper.steps_per_visit % paper.call_steps == 0
    m = paper.methods
    assert (m.ewc.lam, m.ewc.decay, m.l2init.lam) == (10.0, 0.8, 0.001)
    assert (m.shrink_perturb.alpha, m.shrink_perturb.noise) == (0.99, 0.001)
    minigrid = load_config(preset_path("minigrid"))
    # the MiniGrid PPO preset itself, tanh units (ReLU went dormant in continual runs)
    assert paper.train == minigrid and paper.train.network.activation == "tanh"
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
    available = "available: calibration-paper, mujoco, mujoco-quick, paper, quick, study"
    with pytest.raises(ConfigError, match=f"unknown run preset 'nope'; {available}"):
        load_run_config("nope")


def test_train_preset_with_overrides_and_the_relu_network():
    # The paper's networks use ReLU (its DFF baseline "replaces the standard ReLU"): one
    # key selects it over the MiniGrid preset, and DFF then replaces it.
    from telapa.continual.registry import make_method

    base = load_config(preset_path("minigrid"))
    relu = parse_run_config({"train": {"preset": "minigrid", "network": {"activation": "relu"}},
                             "steps_per_visit": 4096, "eval_every": 4096}).train
    assert relu.network.activation == "relu" and base.network.activation == "tanh"
    assert relu.network.hidden == base.network.hidden and relu.ppo == base.ppo
    config = parse_run_config({"train": {"preset": "minigrid", "network": {"activation": "relu"}},
                               "steps_per_visit": 4096, "eval_every": 4096})
    assert make_method("dff", config).network(config.train.network).activation == "dff"
    with pytest.raises(ConfigError, match="activation"):
        parse_run_config({"train": {"preset": "minigrid", "network": {"activation": "gelu"}},
                          "steps_per_visit": 4096, "eval_every": 4096})


MINIGRID_CURRICULA = ("primary", "reverse", "scrambled", "long", "smoke")
MUJOCO_CURRICULA = ("halfcheetah", "hopper", "walker2d", "ant")


@pytest.mark.parametrize("preset, curricula", [
    ("quick", MINIGRID_CURRICULA), ("paper", MINIGRID_CURRICULA),
    ("mujoco", MUJOCO_CURRICULA), ("mujoco-quick", MUJOCO_CURRICULA),
])
def test_every_shipped_preset_starts_on_its_curricula(preset, curricula):
    # what `telapa run` checks before any work: family binding and whole-call budgets
    # (the paper's MuJoCo 1e6 / 5e4 were not whole PPO iterations of 16,384 steps)
    from telapa.cli.run import build_spec

    for curriculum in curricula:
        spec = build_spec(curriculum, "telapa", 0, preset, None)
        assert spec.config.steps_per_visit % spec.config.call_steps == 0
        assert spec.config.eval_every % spec.config.call_steps == 0


@pytest.mark.parametrize("curriculum, default", [("primary", "quick"),
                                                 ("hopper", "mujoco-quick")])
def test_a_run_without_preset_takes_its_env_familys_quick_preset(curriculum, default):
    """`telapa run` / `telapa demo` without --preset: MuJoCo curricula train with the
    MuJoCo PPO settings (tanh, lr 3e-4, no entropy bonus), never MiniGrid's."""
    from telapa.cli.run import build_spec

    spec = build_spec(curriculum, "finetune", 0, None)
    assert spec.preset == default
    assert spec.config == build_spec(curriculum, "finetune", 0, default).config
    if curriculum == "hopper":
        assert spec.config.train.ppo.ent_coef == 0.0
        assert spec.config.train != load_run_config("quick").train


def test_a_curriculum_mixing_env_families_is_refused_naming_them(tmp_path):
    from telapa.cli.common import CLIError
    from telapa.cli.run import build_spec

    path = tmp_path / "mixed.yaml"
    path.write_text("name: mixed\nbackend: gymnasium\n"
                    "tasks: {A: MiniGrid-Empty-5x5-v0, H: {env_id: Hopper-v5}}\n"
                    "order: [A, H]\n")
    with pytest.raises(CLIError, match="mixes env families") as err:
        build_spec(str(path), "finetune", 0, None)
    assert "MiniGrid-Empty-5x5-v0 (minigrid), Hopper-v5 (mujoco)" in str(err.value)
