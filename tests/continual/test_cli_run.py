"""`telapa run` / `telapa metrics` as a user runs them: a run killed with SIGKILL in the
middle of a task and resumed ends with exactly the results of an uninterrupted run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from telapa.cli import main

from .crash import kill_at_checkpoint, telapa_process

TINY = Path(__file__).with_name("tiny_run.yaml")
ONE_TASK = Path(__file__).with_name("one_task_curriculum.yaml")  # A, A': one env to compile
RUN = ["--curriculum", str(ONE_TASK), "--method", "scratch-reuse", "--seed", "5",
       "--preset", str(TINY)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "whole"
    proc = telapa_process("run", *RUN, "--out", str(out))
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return out


def test_sigkill_mid_task_then_resume_gives_identical_metrics(uninterrupted, tmp_path):
    out = tmp_path / "killed"
    proc = telapa_process("run", *RUN, "--out", str(out))
    # phases: visit 0 = start, 8 chunks, end (0-9); visit 1 (A') starts at phase 10.
    # Kill once a checkpoint inside visit 1's training exists (not at a boundary).
    killed_at = kill_at_checkpoint(proc, out, 12)
    assert 12 <= killed_at < 19, killed_at  # still inside visit 1
    assert json.loads((out / "run.json").read_text())["status"] == "running"

    resume = telapa_process("run", "--resume", str(out))
    stdout, err = resume.communicate(timeout=600)
    assert resume.returncode == 0, err
    assert "resumed at visit 1 (A', MiniGrid-Empty-5x5-v0)" in err
    # stderr is a pipe, not a terminal: plain progress lines, no live bars
    assert "visit 1 (A', MiniGrid-Empty-5x5-v0) train 4,096/4,096 steps" in err
    assert "steps/s, ETA" in err and "\x1b[" not in err
    assert json.loads((out / "metrics.json").read_text()) == json.loads(
        (uninterrupted / "metrics.json").read_text())
    for name in ("visits", "curve", "final"):
        pd.testing.assert_frame_equal(pd.read_csv(out / f"{name}.csv"),
                                      pd.read_csv(uninterrupted / f"{name}.csv"), obj=name)
    accounting = json.loads((out / "accounting.json").read_text())
    assert accounting["segments"] == 2
    assert accounting["ppo_env_steps"] == 2 * 4096


def test_metrics_command_scores_runs_together(uninterrupted, capsys):
    assert main(["metrics", str(uninterrupted), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    result = payload["one-task"]
    assert result["tau_source"].startswith("tau_min")
    assert result["tau"] == {"A": 0.2}
    row = result["summary"]["scratch-reuse"]
    metrics = json.loads((uninterrupted / "metrics.json").read_text())
    assert row["mean_sr"] == pytest.approx(metrics["mean_sr"])
    assert row["runs"] == 1
    assert set(result["revisits"]["scratch-reuse"]) == {"A'"}
    assert result["compute"]["scratch-reuse"]["stored_state_MB"] > 0


def test_metrics_names_an_incomplete_run(uninterrupted, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "run.json").write_text(
        (uninterrupted / "run.json").read_text().replace('"complete"', '"running"'))
    with pytest.raises(SystemExit) as exit_info:
        main(["metrics", str(broken)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"{broken} is not complete (it started and has not finished: stopped, or still " \
           "running)" in err, err  # not "(status 'running')" of a run a Ctrl-C stopped
    assert main(["metrics", str(broken), str(uninterrupted), "--skip-incomplete", "--json"]) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--curriculum", "smoke", "--method", "nope"], "unknown method 'nope'"),
        (["run", "--curriculum", "nope", "--method", "scratch"], "unknown curriculum 'nope'"),
        (["run", "--method", "scratch"], "--curriculum required"),
        (["run", "--curriculum", "smoke", "--method", "scratch", "--preset", "nope"],
         "unknown run preset 'nope'"),
    ],
)
def test_bad_arguments_are_rejected_before_any_work(args, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--out", str(tmp_path / "never")])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


def test_demo_runs_its_three_methods_and_scores_them(tmp_path, capsys):
    """`telapa demo` (the README's first command) end to end with the tiny preset, on one
    task and its revisit (`make demo` itself runs the smoke curriculum); it refuses an
    output that already holds something, before any work."""
    from telapa.cli import main

    tiny = Path(__file__).with_name("tiny_run.yaml")
    one_task = Path(__file__).with_name("one_task_curriculum.yaml")
    out = tmp_path / "demo"
    assert main(["demo", "--curriculum", str(one_task), "--preset", str(tiny), "--out",
                 str(out)]) == 0
    for method in ("finetune", "scratch-reuse", "telapa"):
        assert json.loads((out / method / "run.json").read_text())["status"] == "complete"
    printed = capsys.readouterr().out
    assert "scratch-reuse" in printed and "telapa" in printed and "Mean SR" in printed
    (tmp_path / "taken" / "telapa").mkdir(parents=True)
    (tmp_path / "taken" / "telapa" / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--curriculum", "smoke", "--preset", str(tiny), "--out",
              str(tmp_path / "taken")])
    assert exit_info.value.code == 2 and "not empty" in capsys.readouterr().err
    assert not (tmp_path / "taken" / "finetune").exists()
    assert (tmp_path / "taken" / "telapa" / "notes.txt").read_text() == "mine"
