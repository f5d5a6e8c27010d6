"""Absurd values: refused, with the key and the file named, before any work, fast
(issue 28, fault 3: ``--seeds 0-100000`` was a quadratic check, ``seeds: 1e11`` hung in
validation, ``steps_per_visit: 2e24`` grew memory while the phase list was built,
``eval_episodes: 1e11`` was an OverflowError traceback after the first visit). The bounds
are in docs/reliability.md, "Upper bounds"."""

from __future__ import annotations

from pathlib import Path

import pytest

from telapa.config import ConfigError, load_config
from telapa.continual.batch import MAX_BATCH_SEEDS, parse_seeds
from telapa.continual.curriculum import load_curriculum
from telapa.continual.preset import load_run_config

from .conftest import FAULT_RUN, ONE_TASK, RUN, deadline, fails

PRESET = FAULT_RUN.read_text()


def _preset(tmp_path: Path, old: str, new: str) -> Path:
    assert old in PRESET
    path = tmp_path / "preset.yaml"
    path.write_text(PRESET.replace(old, new))
    return path


@pytest.mark.parametrize(("old", "new", "message"), [
    ("steps_per_visit: 1024", "steps_per_visit: 2000000000000000000000000",
     "'steps_per_visit'.*less than or equal to 10000000000"),
    ("steps_per_visit: 1024", "steps_per_visit: 2.0e+24", "'steps_per_visit'"),
    ("steps_per_visit: 1024\neval_every: 512", "steps_per_visit: 2621440\neval_every: 256",
     "makes 10,240 evaluations per visit; at most 1,000"),
    ("\neval_episodes: 8", "\neval_episodes: 1.0e+11", "'eval_episodes'.*less than or "
                                                        "equal to 100000"),
    ("final_eval_episodes: 8", "final_eval_episodes: 1.0e+11", "'final_eval_episodes'"),
    ("num_envs: 8", "num_envs: 1000000000", "'train.ppo.num_envs'.*65536"),
    ("epochs: 2", "epochs: 1.0e+12", "'train.ppo.epochs'"),
    ("tau_min: 0.2", "tau_min: .nan", "'tau_min'"),
    ("tau_min: 0.2", "tau_min: -.inf", "'tau_min'"),
    ("fisher_steps: 256", "fisher_steps: true", "a boolean where a number belongs"),
])
def test_absurd_run_settings_are_refused_before_any_work(tmp_path, capsys, old, new, message):
    preset = _preset(tmp_path, old, new)
    with deadline(10), pytest.raises(ConfigError, match=message):
        load_run_config(preset)
    out = tmp_path / "out"
    line = fails([*RUN, "--preset", str(preset), "--out", str(out)], capsys, str(preset))
    assert not out.exists(), line


def test_an_evaluation_count_past_the_bound_is_refused_per_run(tmp_path, capsys):
    """Each visit within the bound, the whole run past it: refused before any work."""
    curriculum = tmp_path / "long.yaml"
    curriculum.write_text(ONE_TASK.read_text().replace("cycles: 2", "cycles: 1000"))
    preset = _preset(tmp_path, "eval_every: 512", "eval_every: 256").read_text()
    (tmp_path / "preset.yaml").write_text(preset.replace("steps_per_visit: 1024",
                                                         "steps_per_visit: 65536"))
    fails(["run", "--curriculum", str(curriculum), "--method", "ewc", "--preset",
           str(tmp_path / "preset.yaml"), "--out", str(tmp_path / "out")], capsys,
          "makes 256,000 evaluations in all; at most 100,000", within_s=20)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("cycles: 2", "cycles: 100000000000", "'cycles'.*less than or equal to 1000"),
    ("A: MiniGrid-Empty-5x5-v0", "A: {env_id: MiniGrid-Empty-5x5-v0, steps: 2.0e+24}",
     "'tasks.A.steps'"),
    ("order: [A]", "order: [" + ", ".join(["A"] * 20) + "]", None),
])
def test_absurd_curricula_are_refused(tmp_path, old, new, message):
    path = tmp_path / "c.yaml"
    text = ONE_TASK.read_text().replace(old, new)
    if message is None:  # 20 visits x 1000 cycles: past the visit bound
        text, message = text.replace("cycles: 2", "cycles: 1000"), "20,000 visits; at most"
    path.write_text(text)
    with deadline(10), pytest.raises(ConfigError, match=message):
        load_curriculum(path)


def test_seed_ranges_are_bounded_before_they_are_expanded(capsys, tmp_path):
    with deadline(5):
        with pytest.raises(ValueError, match="makes 100,001 seeds; one batch runs at most"):
            parse_seeds("0-100000")
        with pytest.raises(ValueError, match="makes 100,000,000,001 seeds"):
            parse_seeds("0-100000000000")
        assert parse_seeds(f"0-{MAX_BATCH_SEEDS - 1}") == list(range(MAX_BATCH_SEEDS))
    fails([*RUN, "--seeds", "0-100000", "--out", str(tmp_path / "o")], capsys,
          "--seeds", "100,001 seeds", within_s=10)
    assert not (tmp_path / "o").exists()


SWEEP = f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n"


@pytest.mark.parametrize(("extra", "message"), [
    ("seeds: 100000000000\n", "'seeds'.*100,000,000,000 seeds; give 1 to 10,000"),
    ("seeds: [" + ", ".join(map(str, range(10_001))) + "]\n", "'seeds'.*10,001 seeds"),
    ("seeds: 10000\ngrid:\n  methods.ewc.lam: [" + ", ".join(map(str, range(11))) + "]\n",
     "makes 110,000 cells; at most 10,000"),
    ("seeds: 5001\ngrid:\n  methods.ewc.lam: [1, 2]\n", "makes 10,002 cells; at most 10,000"),
])
def test_absurd_sweeps_are_refused_fast(tmp_path, capsys, extra, message):
    path = tmp_path / "s.yaml"
    path.write_text(SWEEP + extra)
    fails(["sweep", str(path), "--out", str(tmp_path / "out")], capsys, str(path),
          within_s=20)
    from telapa.continual.sweep import load_sweep

    with deadline(20), pytest.raises(ConfigError, match=message):
        load_sweep(path)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [
    ["train", "--env", "MiniGrid-Empty-5x5-v0", "--steps", "100000000000000000000"],
    ["train", "--env", "MiniGrid-Empty-5x5-v0", "--steps", "1e9"],
    ["run", "--curriculum", str(ONE_TASK), "--method", "ewc", "--seed", str(2**32)],
    ["sweep", "x.yaml", "--out", "o", "--workers", "0"],
    ["sweep", "x.yaml", "--out", "o", "--threads", "100000"],
    ["sweep", "x.yaml", "--out", "o", "--retries", "-1"],
    ["report", "r", "--out", "o", "--gamma", "1e300"],
])
def test_absurd_options_are_usage_errors(capsys, args):
    with deadline(10), pytest.raises(SystemExit) as exit_info:
        from telapa.cli import main

        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error: argument" in err


def test_network_and_ppo_bounds(tmp_path):
    path = tmp_path / "ppo.yaml"
    path.write_text("network: {hidden: [64, 1000000000]}\n")
    with deadline(5), pytest.raises(ConfigError, match=r"'network.hidden.1'.*65536"):
        load_config(path)


def test_a_diverging_learning_rate_is_named_when_the_loss_is_not_finite(tmp_path, capsys):
    """Issue 38: ``--set train.ppo.lr=1e30`` is valid until PPO's loss overflows, which
    ended in "non-finite loss" without a word on why. The error names the setting that
    most likely caused it, with its value (a CartPole run on the gymnasium backend: a
    small program, the second minibatch update diverges)."""
    from telapa.config import TrainConfig
    from telapa.rl.agent import divergence_hint

    curriculum = tmp_path / "c.yaml"
    curriculum.write_text("name: cartpole\nbackend: gymnasium\ntasks:\n  A: CartPole-v1\n"
                          "order: [A]\n")
    preset = tmp_path / "p.yaml"
    preset.write_text("train:\n  ppo: {num_envs: 2, n_steps: 16, batch_size: 32, epochs: 2}\n"
                      "  eval: {episodes: 2}\nsteps_per_visit: 32\neval_every: 32\n"
                      "eval_episodes: 2\nfinal_eval_episodes: 2\n")
    fails(["run", "--curriculum", str(curriculum), "--method", "finetune", "--preset",
           str(preset), "--set", "train.ppo.lr=1e30", "--out", str(tmp_path / "out")], capsys,
          "visit 0 (A, CartPole-v1), chunk 0: PPO on CartPole-v1: non-finite",
          "likely cause: ppo.lr=1e+30 (the learning rate; usually at most 0.01)",
          within_s=120)
    assert divergence_hint(TrainConfig()).startswith("no PPO setting is unusual; try a "
                                                     "smaller learning rate (ppo.lr=0.0005)")
