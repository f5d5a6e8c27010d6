"""What ``telapa train`` and ``telapa run`` print: the budget they train (rounded up to
whole PPO iterations, said once), help that names only options the command has, the
score's name (SR or SR~) in every progress line, and undefined metrics as ``n/a``."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from telapa.cli import main
from telapa.cli.run import RichProgress, metric_text
from telapa.cli.train import rounded_budget, train_run
from telapa.continual.curriculum import Visit
from telapa.continual.progress import PlainProgress
from telapa.envs.family import NormalizedReturn

SMALL = """\
ppo: {num_envs: 4, n_steps: 32, batch_size: 64, epochs: 1, lr: 1.0e-3}
eval: {episodes: 2}
"""


def _visit(env_id: str = "MiniGrid-Empty-5x5-v0", competence=None) -> Visit:
    return Visit(0, "A", "A", env_id, {}, 0, None, competence)


# --- 1. the budget train trains -----------------------------------------------------


def test_rounded_budget_says_whole_iterations_or_calls():
    assert rounded_budget(256, 4, 32) == (256, None)  # whole already: nothing to say
    trained, note = rounded_budget(100, 16, 128)
    assert trained == 2048
    assert note == ("--steps 100 rounded up to 2,048 env steps (1 whole PPO iteration of "
                    "16 envs x 128 steps): PPO updates after whole rollouts only")
    trained, note = rounded_budget(2048, 8, 2048)  # the probe's plug-in env: 16,384
    assert trained == 16384 and "to 16,384 env steps (1 whole PPO iteration of 8 envs x " \
                                 "2048 steps)" in note
    trained, note = rounded_budget(10_000, 16, 128, iterations_per_call=4)  # jax calls
    assert trained == 16384
    assert "(2 whole PPO calls of 4 iterations (ppo.iterations_per_call) of 16 envs x " \
           "128 steps)" in note


def test_train_says_the_rounded_budget_once_and_counts_trained_steps(tmp_path, capsys):
    """``--steps 300`` with 4 x 32-step rollouts trains 384 steps: the command says so
    before training, and its progress line counts 384 of 384 (not 300 of 300)."""
    config = tmp_path / "small.yaml"
    config.write_text(SMALL)
    out = tmp_path / "run"
    assert main(["train", "--env", "CartPole-v1", "--backend", "gymnasium", "--steps", "300",
                 "--config", str(config), "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    err = captured.err
    note = ("--steps 300 rounded up to 384 env steps (3 whole PPO iterations of 4 envs x "
            "32 steps): PPO updates after whole rollouts only")
    assert err.count(note) == 1, err
    progress = err.index("PPO CartPole-v1 train ")
    assert err.index(note) < progress  # before training
    assert "PPO CartPole-v1 train 384/384 steps" in err
    assert "/300 steps" not in err
    # the stages without a step count say themselves in a log, in order
    compiling = err.index("compiling PPO for CartPole-v1 (gymnasium)\n")
    evaluating = err.index("evaluating 2 episodes of CartPole-v1\n")
    assert err.index(note) < compiling < progress < err.index("384/384") < evaluating
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["steps"] == 384 and summary["requested_steps"] == 300
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["steps"] == 384 and manifest["requested_steps"] == 300


def test_train_bar_counts_trained_steps_and_names_a_graded_score(tmp_path):
    """On a terminal: the live bar's total is the steps trained, and for a graded
    competence (MuJoCo's normalized return) its score column says SR~, as the summary's
    ``eval_sr_name`` does."""
    config = tmp_path / "small.yaml"
    config.write_text(SMALL)
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=200, color_system=None)
    summary = train_run("Hopper-v5", 100, backend="native", config_path=str(config),
                        out=str(tmp_path / "run"), console=console)
    shown = buffer.getvalue()
    assert summary["steps"] == 128 and summary["eval_sr_name"] == "SR~"
    assert "--steps 100 rounded up to 128 env steps" in shown
    assert "128/128 steps" in shown and "/100 steps" not in shown
    assert "SR~ " in shown and "SR -" not in shown
    assert "⠋ evaluating 2 episodes of Hopper-v5" in shown  # a spinner while it runs


# --- 2. --import help ---------------------------------------------------------------


def test_train_help_names_no_resume(capsys):
    """``train`` has no ``--resume``: its ``--import`` help must not promise one; ``run``,
    which has, keeps saying the module is imported again."""
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "recorded in run.json; repeatable" in help_text
    assert "--resume" not in help_text
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "imported again by --resume" in " ".join(capsys.readouterr().out.split())


# --- 3. the score's name in progress lines ------------------------------------------


def test_plain_progress_names_the_score_it_is_given():
    stream = io.StringIO()
    progress = PlainProgress(stream, interval_s=0.0, score="SR~")
    visit = _visit()  # MiniGrid counts successes, but the curriculum's symbol wins
    progress.visit(visit, 512, 0)
    progress.evaluated(visit, 0, 0.16)
    assert "eval at step 0: SR~ 0.16" in stream.getvalue()


@pytest.mark.parametrize(("competence", "symbol"), [(None, "SR"),
                                                     (NormalizedReturn(1.0), "SR~")])
def test_plain_progress_without_a_score_names_the_task_s_own(competence, symbol):
    """A sink told no symbol (a sweep cell's log) names each task's own: SR~ for a
    ``success: {normalized_return: ...}`` task."""
    stream = io.StringIO()
    progress = PlainProgress(stream, interval_s=0.0)
    visit = _visit(competence=competence)
    progress.visit(visit, 512, 0)
    progress.evaluated(visit, 512, 0.5)
    assert f"eval at step 512: {symbol} 0.50" in stream.getvalue()


def test_rich_progress_names_the_score():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=200, color_system=None)
    with RichProgress(console, "SR~") as progress:
        visit = _visit()
        progress.visit(visit, 512, 0)
        progress.evaluated(visit, 0, 0.16)
    assert "SR~ 0.16" in buffer.getvalue()


TINY = Path(__file__).parent / "continual" / "tiny_run.yaml"
GRADED = """\
name: graded
tasks:
  A: {env_id: MiniGrid-Empty-5x5-v0, success: {normalized_return: 1.0}}
order: [A]
cycles: 1
"""


def test_run_progress_and_summary_agree_on_sr_tilde_and_print_na(tmp_path, capsys):
    """A graded task without revisits (``cycles: 1``): every progress line says SR~, as
    the summary table does, and Mean SR~ and BWT (undefined) read ``n/a``, as
    ``telapa metrics`` prints them, not ``nan``."""
    curriculum = tmp_path / "graded.yaml"
    curriculum.write_text(GRADED)
    out = tmp_path / "run"
    assert main(["run", "--curriculum", str(curriculum), "--method", "finetune",
                 "--preset", str(TINY),
                 "--set", "steps_per_visit=256", "--set", "eval_every=256",
                 "--out", str(out)]) == 0
    captured = capsys.readouterr()
    evals = [line for line in captured.err.splitlines() if " eval at step " in line]
    assert evals and all(": SR~ " in line for line in evals), captured.err
    assert "pre SR~" in captured.out
    assert "Mean SR~ n/a  BWT n/a" in captured.out, captured.out
    assert "nan" not in captured.out


# --- 4. undefined metrics -----------------------------------------------------------


def test_metric_text_is_na_where_undefined():
    assert metric_text(math.nan) == "n/a"
    assert metric_text(0.5) == "0.500"
    assert metric_text(-0.25, 2) == "-0.25"
