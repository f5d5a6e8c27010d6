"""The ``telapa`` CLI: ``train --json`` output and run directory; errors before any work."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from telapa.cli import main
from telapa.config import load_config

SMALL = """\
ppo: {num_envs: 4, n_steps: 32, batch_size: 64, epochs: 2, lr: 1.0e-3}
eval: {episodes: 4}
"""


def test_train_json_and_run_dir(tmp_path, capsys):
    config = tmp_path / "small.yaml"
    config.write_text(SMALL)
    out = tmp_path / "run"
    argv = ["train", "--env", "CartPole-v1", "--backend", "gymnasium", "--steps", "300",
            "--seed", "3", "--config", str(config), "--out", str(out), "--json",
            "--set", "ppo.epochs=1", "--set", "eval.episodes=3"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    last = captured.out.strip().splitlines()[-1]
    summary = json.loads(last)
    # stderr is not a terminal: plain progress lines instead of a live bar
    assert "PPO CartPole-v1 train 384/384 steps" in captured.err
    assert "\x1b[" not in captured.err
    for field in ("steps", "wall_s", "compile_s", "steps_per_s", "eval_sr", "eval_return"):
        assert isinstance(summary[field], (int, float)), field
    assert summary["steps"] == 384  # 300 rounded up to whole 4x32 rollouts
    assert summary["steps_per_s"] > 0 and summary["wall_s"] > summary["compile_s"] > 0
    assert summary["eval_return"] > 0 and summary["eval_sr"] == 1.0  # CartPole: reward 1/step
    assert summary["eval_sr_name"] == "SR"

    resolved = load_config(out / "config.yaml")
    assert resolved.ppo.n_steps == 32 and resolved.ppo.epochs == 1  # the file, then --set
    assert summary["eval_episodes"] == 3
    assert summary["overrides"] == {"ppo.epochs": 1, "eval.episodes": 3}
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics["step"]) == [128, 256, 384]
    assert {"loss", "entropy", "episode_return", "time_s"} <= set(metrics.columns)
    assert list((out / "tb").glob("events.out.tfevents.*"))
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["seed"] == 3 and manifest["overrides"]["ppo.epochs"] == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--env", "MiniGrid-DoorKey-9x9-v0", "--backend", "jax"],
         "unknown env id 'MiniGrid-DoorKey-9x9-v0' for backend 'jax'"),
        # no port, no native batch: the default is gymnasium, which has Farama's ids
        (["--env", "MiniGrid-DoorKey-9x9-v0"],
         "for backend 'gymnasium'; did you mean MiniGrid-DoorKey-8x8-v0"),
        (["--env", "CartPol-v1", "--backend", "gymnasium"], "did you mean CartPole-v1"),
    ],
)
def test_unknown_env_fails_before_work(tmp_path, capsys, argv, message):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--steps", "100", "--out", str(out), *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_the_default_backend_is_the_envs_fastest_here():
    from telapa.envs.registry import default_backend

    assert default_backend("MiniGrid-DoorKey-8x8-v0") == "jax"  # a port, no native batch
    assert default_backend("MiniGrid-DoorKey-8x8-v0", platform="gpu") == "jax"
    # MuJoCo: the native batch on a CPU, MJX on an accelerator where it is ported
    assert default_backend("Hopper-v5", platform="cpu") == "native"
    assert default_backend("Hopper-v5", platform="gpu") == "jax"
    assert default_backend("Ant-v5", platform="gpu") == "native"  # no MJX port
    assert default_backend("CartPole-v1") == "gymnasium"


def test_train_without_backend_steps_mujoco_natively_on_a_cpu(tmp_path, capsys):
    """`telapa train --env Hopper-v5` ran MJX on the CPU (some 600 env steps/s against
    the native batch's 15k) once the MJX ports existed: the default is the native one."""
    out = tmp_path / "run"
    assert main(["train", "--env", "Hopper-v5", "--steps", "64", "--out", str(out), "--json",
                 "--set", "ppo.num_envs=2", "--set", "ppo.n_steps=32",
                 "--set", "ppo.batch_size=32", "--set", "ppo.epochs=1",
                 "--set", "eval.episodes=1"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["backend"] == "native" and summary["steps"] == 64
    assert summary["eval_sr_name"] == "SR~"  # a normalized return, not a success rate
    assert json.loads((out / "run.json").read_text())["backend"] == "native"


def test_bad_config_fails_before_work(tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text("ppo: {n_step: 64}\n")
    out = tmp_path / "run"
    with pytest.raises(SystemExit):
        main(["train", "--env", "CartPole-v1", "--backend", "gymnasium", "--steps", "100",
              "--config", str(config), "--out", str(out)])
    err = capsys.readouterr().err
    assert "unknown key 'ppo.n_step'" in err and str(config) in err
    assert not out.exists()


def test_a_bad_set_fails_before_work_naming_the_key(tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit):
        main(["train", "--env", "CartPole-v1", "--backend", "gymnasium", "--steps", "100",
              "--set", "ppo.batch_size=0", "--out", str(out)])
    assert "invalid value for 'ppo.batch_size' in --set" in capsys.readouterr().err
    assert not out.exists()


def test_steps_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--env", "CartPole-v1", "--steps", "0"])
    assert "must be a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize(("command", "model"), [("train", "ppo"), ("run", "run"),
                                                ("sweep", "run")])
def test_the_set_example_in_each_help_is_a_valid_key(command, model, capsys):
    """The --help example of --set names a setting of that command's preset (``telapa
    train`` takes a PPO preset: ``ppo.lr``; run and sweep take run presets:
    ``train.ppo.lr``)."""
    import re

    from telapa.config import preset_path
    from telapa.continual.preset import load_run_config
    from telapa.overrides import override, parse_sets

    with pytest.raises(SystemExit):
        main([command, "--help"])
    example = re.search(r"e\.g\.\s+--set\s+(\S+)", " ".join(capsys.readouterr().out.split()))
    config = (load_config(preset_path("minigrid")) if model == "ppo"
              else load_run_config("quick"))
    override(config, parse_sets([example.group(1)]))  # raises ConfigError if not a key
