"""Run directories that are safe to share: nothing a user has is overwritten, one process
per run, bad input ends in a named error (no traceback), logs that are not a terminal get
plain progress lines. None of these tests trains."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from telapa.cli import main
from telapa.cli.run import progress_for
from telapa.config import ConfigError
from telapa.continual.curriculum import Visit, load_curriculum, parse_curriculum
from telapa.continual.preset import load_run_config, parse_run_config
from telapa.continual.progress import PlainProgress
from telapa.continual.rundir import RunDir, RunDirError, claim_new_dir
from telapa.continual.runner import ContinualRun
from telapa.continual.spec import RunSpec

TINY = Path(__file__).with_name("tiny_run.yaml")
RUN = ["run", "--curriculum", "smoke", "--method", "finetune", "--preset", str(TINY)]


def _fails(args: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_run_refuses_a_non_empty_directory_without_run_json(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.yaml").write_text("my own config\n")
    err = _fails([*RUN, "--out", str(out)], capsys)
    assert f"{out} is not empty" in err and "config.yaml" in err
    assert (out / "config.yaml").read_text() == "my own config\n"
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml"]


def test_train_refuses_an_existing_run(tmp_path, capsys):
    out = tmp_path / "finished"
    out.mkdir()
    (out / "run.json").write_text('{"format": "telapa-run", "status": "complete"}')
    err = _fails(["train", "--env", "MiniGrid-Empty-5x5-v0", "--steps", "256",
                  "--out", str(out)], capsys)
    assert f"{out} is not empty" in err
    assert sorted(p.name for p in out.iterdir()) == ["run.json"]


def test_out_that_is_a_file_or_cannot_be_created(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    err = _fails([*RUN, "--out", str(afile)], capsys)
    assert f"{afile} exists and is not a directory" in err
    err = _fails([*RUN, "--out", str(afile / "sub")], capsys)
    assert f"cannot write run directory {afile / 'sub'}" in err
    assert afile.read_text() == "x"


@pytest.mark.parametrize("seed", ["-1", str(2**32), "1.5"])
def test_seeds_out_of_range_are_rejected(seed, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*RUN, "--seed", seed, "--out", str(tmp_path / "never")])
    assert exit_info.value.code == 2
    assert "--seed" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()
    with pytest.raises(ConfigError, match="seed .* out of range"):
        RunSpec(load_curriculum("smoke"), "finetune", 2**32, load_run_config(TINY))


def test_curriculum_name_must_be_one_path_component():
    data = {"name": "../../x", "tasks": {"A": "MiniGrid-Empty-5x5-v0"}, "order": ["A"]}
    with pytest.raises(ConfigError, match="invalid value for 'name'.*plain file name"):
        parse_curriculum(data, "evil.yaml")
    for bad in ("a/b", ".hidden", "", "-x"):
        with pytest.raises(ConfigError):
            parse_curriculum({**data, "name": bad}, "evil.yaml")
    assert parse_curriculum({**data, "name": "my-ladder_2.v1"}).name == "my-ladder_2.v1"


def test_budget_not_a_whole_number_of_ppo_calls_is_rejected(tmp_path):
    # tiny preset: 8 envs x 32 steps = 256 env steps per PPO call
    data = {"train": {"ppo": {"num_envs": 8, "n_steps": 32, "batch_size": 128}},
            "steps_per_visit": 4000, "eval_every": 512}
    smoke = load_curriculum("smoke")
    with pytest.raises(ConfigError, match=r"steps_per_visit=4000 is not a multiple of one "
                                          r"PPO call .*256.*use 3840 or 4096"):
        RunSpec(smoke, "finetune", 0, parse_run_config(data, "p.yaml")).check_budgets()
    with pytest.raises(ConfigError, match=r"steps_per_visit=100 is not .*; use 256$"):
        RunSpec(smoke, "finetune", 0, parse_run_config(
            {**data, "steps_per_visit": 100}, "p.yaml")).check_budgets()
    with pytest.raises(ConfigError, match="eval_every=600 is not a multiple"):
        RunSpec(smoke, "finetune", 0, parse_run_config(
            {**data, "steps_per_visit": 4096, "eval_every": 600})).check_budgets()
    curriculum = parse_curriculum({"name": "c", "tasks": {"A": {
        "env_id": "MiniGrid-Empty-5x5-v0", "steps": 1000}}, "order": ["A"]})
    with pytest.raises(ConfigError, match="task 'A' steps=1000 is not a multiple"):
        ContinualRun.start(RunSpec(curriculum, "finetune", 0, load_run_config(TINY)),
                           tmp_path / "never")
    assert not (tmp_path / "never").exists()
    # the CLI refuses before any work
    bad = tmp_path / "bad.yaml"
    bad.write_text(TINY.read_text().replace("steps_per_visit: 4096", "steps_per_visit: 4000"))
    with pytest.raises(SystemExit):
        main(["run", "--curriculum", "smoke", "--method", "finetune", "--preset", str(bad),
              "--out", str(tmp_path / "never")])
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("key", ["steps_per_visit", "tau_min", "eval_episodes"])
def test_booleans_where_numbers_belong_are_rejected(key):
    data = {"train": {"ppo": {"num_envs": 8, "n_steps": 32, "batch_size": 128}},
            "steps_per_visit": 4096, "eval_every": 512, key: True}
    with pytest.raises(ConfigError, match=f"'{key}' in p.yaml: a boolean where a number"):
        parse_run_config(data, "p.yaml")
    nested = {**data, key: 1, "train": {"ppo": {"num_envs": True}}}
    with pytest.raises(ConfigError, match="'train.ppo.num_envs'"):
        parse_run_config(nested, "p.yaml")


def test_claim_new_dir_accepts_missing_and_empty(tmp_path):
    assert claim_new_dir(tmp_path / "a" / "b").is_dir()
    (tmp_path / "empty").mkdir()
    assert claim_new_dir(tmp_path / "empty").is_dir()


HOLD = """
import sys, time
from telapa.continual.rundir import RunDir
held = RunDir(sys.argv[1])
held.lock()
print("locked", flush=True)
time.sleep(60)
"""


def test_lock_is_exclusive_and_a_dead_holder_is_taken_over(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirError, match=f"in use by pid {holder.pid} on .*locked"):
            RunDir(tmp_path).lock()
    finally:
        holder.kill()
        holder.wait()
    # the holder died without unlocking: its lock file is left, and taken over
    assert f"pid {holder.pid}" in (tmp_path / ".lock").read_text()
    run_dir = RunDir(tmp_path)
    run_dir.lock()
    assert f"pid {os.getpid()}" in (tmp_path / ".lock").read_text()
    run_dir.unlock()


def test_two_checkpoints_are_kept(tmp_path):
    run_dir = RunDir(tmp_path)
    run_dir.create({"curriculum": "smoke"}, config={}, curriculum={})
    store = run_dir.checkpoints
    names = []
    for i in range(3):
        folder = store.new_folder()
        (folder / "state.json").write_text(json.dumps({"i": i}))
        store.commit(folder)
        names.append(folder.name)
    run_dir.unlock()
    assert [p.name for p in store.newest_first()] == names[:0:-1]
    assert sorted(p.name for p in tmp_path.glob("ckpt-*")) == names[1:]


def test_checkpoint_contents_roundtrip_through_the_run_dir(tmp_path):
    import jax.numpy as jnp
    import numpy as np

    run_dir = RunDir(tmp_path)
    run_dir.create({"curriculum": "smoke"}, config={}, curriculum={})
    run_dir.unlock()
    store = run_dir.checkpoints
    state = {"phases": 5, "next_phase": 2, "records": {"visits": []}, "wall_s": 1.5}
    bank = {"A": jnp.arange(3.0)}
    first = store.save(state, learner={"w": jnp.ones(2)}, method={"bank": bank},
                       train_state={"obs": jnp.zeros(4)}, train_rows=[{"step": 8, "loss": 0.5}])
    # the same method part object again: copied (after its SHA-256 is checked), never
    # hard-linked, so that one damaged file cannot take both checkpoints; no train state
    second = store.save({**state, "next_phase": 3}, learner={"w": jnp.zeros(2)},
                        method={"bank": bank}, train_rows=[])
    assert store.newest_first() == [second, first]
    assert not os.path.samefile(first / "method-bank.npz", second / "method-bank.npz")
    assert (first / "method-bank.npz").read_bytes() == (second / "method-bank.npz").read_bytes()
    for folder in (first, second):  # sealed, with what defines the run
        store.verify(folder)
        assert json.loads((folder / "definition.json").read_text()) == run_dir.definition()
    assert store.state_json()["next_phase"] == 3
    assert store.state_json(first) == state
    learner, method = store.load(first, learner={"w": jnp.zeros(2)},
                                 method={"bank": {"A": jnp.zeros(3)}})
    np.testing.assert_array_equal(learner["w"], [1.0, 1.0])
    np.testing.assert_array_equal(method["bank"]["A"], [0.0, 1.0, 2.0])
    like = {"obs": jnp.ones(4)}
    np.testing.assert_array_equal(store.train_state(first, like)["obs"], 0.0)
    assert store.train_state(second, like) is None
    assert store.train_rows(first) == [{"step": 8, "loss": 0.5}]
    assert store.train_rows(second) == []
    assert store.learner_file() == second / "learner.npz"
    (second / "state.json").write_text(json.dumps({"phases": 5}))
    with pytest.raises(RunDirError, match=f"{second / 'state.json'} is not a checkpoint state"):
        store.state_json(second)
    assert RunDir(tmp_path / "other").checkpoints.state_json() is None  # not started yet


def test_a_copied_method_part_is_read_once_and_its_seal_is_its_sha256(tmp_path, monkeypatch):
    """A method part carried over unchanged is hashed as it is copied (`copy_intact`)
    and sealed with that digest: the seal does not read the copy again (a TeLAPA
    archive part is ~100 MB, copied at every mid-visit checkpoint), and the digest it
    records is the copy's SHA-256."""
    import hashlib

    import jax.numpy as jnp

    from telapa.continual import checkpoints

    run_dir = RunDir(tmp_path)
    run_dir.create({"curriculum": "smoke"}, config={}, curriculum={})
    run_dir.unlock()
    store = run_dir.checkpoints
    state = {"phases": 5, "next_phase": 2}
    archive = {"A": jnp.arange(1000.0)}
    store.save(state, learner={"w": jnp.ones(2)}, method={"archive": archive}, train_rows=[])
    hashed = []
    real = checkpoints._sha256
    monkeypatch.setattr(checkpoints, "_sha256", lambda path: hashed.append(path.name)
                        or real(path))
    second = store.save({**state, "next_phase": 3}, learner={"w": jnp.zeros(2)},
                        method={"archive": archive}, train_rows=[])
    assert "method-archive.npz" not in hashed and "learner.npz" in hashed
    seal = json.loads((second / "files.json").read_text())
    copy = (second / "method-archive.npz").read_bytes()
    assert seal["method-archive.npz"] == hashlib.sha256(copy).hexdigest()
    store.verify(second)
    # a part that changed is written and hashed from its file, as before
    hashed.clear()
    third = store.save({**state, "next_phase": 4}, learner={"w": jnp.zeros(2)},
                       method={"archive": {"A": jnp.zeros(1000)}}, train_rows=[])
    assert "method-archive.npz" in hashed
    store.verify(third)


def test_run_dir_answers_whether_a_run_started_and_finished(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    assert not run_dir.exists() and not run_dir.is_complete()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "partial.txt").write_text("left by a start that died")
    assert run_dir.clear_unstarted() and not (tmp_path / "run").exists()
    run_dir.create({"curriculum": "smoke"}, config={"b": 1, "a": 2}, curriculum={"name": "x"})
    run_dir.unlock()
    assert run_dir.exists() and not run_dir.is_complete()
    assert not run_dir.clear_unstarted() and run_dir.exists()  # a started run is kept
    assert (tmp_path / "run" / "config.yaml").read_text() == "b: 1\na: 2\n"
    run_dir.write_metrics({"mean_sr": 1.0})
    run_dir.set_status("complete")
    assert run_dir.is_complete()
    assert [p.name for p in run_dir.result_files()] == ["run.json", "config.yaml",
                                                       "curriculum.yaml", "metrics.json"]


def test_truncated_elites_csv_in_inspect_is_named(tmp_path, capsys):
    (tmp_path / "run.json").write_text(json.dumps({
        "format": "telapa-run", "version": 1, "curriculum": "smoke", "method": "telapa",
        "seed": 0, "status": "running"}))
    (tmp_path / "visits.csv").write_text(
        "visit,tag,task,env_id,cycle,budget,pre_sr,pre_return,post_sr,post_return,"
        "train_steps,start_global_step,end_global_step\n"
        "0,A,A,MiniGrid-Empty-5x5-v0,0,512,0,0,1,0.9,512,0,512\n")
    header = ("task,archive_tag,slot,elite_id,parent_id,visit,fitness,sr,sigma,lineage,"
              "embedding_version,d_min,d_0,d_1\n")
    (tmp_path / "elites.csv").write_text(header + "A,0,0,1,-1,0,0.5,0.5,0.1,0,1,0.1,0.2,0.3\n"
                                         "A,0,1,2,1,0,0.5")
    (tmp_path / "method_log.json").write_text("[]")
    err = _fails(["inspect", str(tmp_path)], capsys)
    assert f"{tmp_path / 'elites.csv'} has missing values" in err


def test_ctrl_c_prints_how_to_resume(tmp_path, capsys, monkeypatch):
    def interrupted(spec, path, progress=None, **_):
        raise KeyboardInterrupt

    monkeypatch.setattr("telapa.cli.run.ContinualRun.start", interrupted)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main([*RUN, "--out", str(out)])
    assert exit_info.value.code == 130
    err = capsys.readouterr().err
    # stopped before the run directory existed: nothing to resume (the hint once said
    # to resume a run that was never written)
    assert f"stopped before {out} was created: nothing to resume" in err
    assert "Traceback" not in err
    # stopped once the run exists: how to resume it

    def interrupted_later(spec, path, progress=None, **_):
        Path(path).mkdir(exist_ok=True)
        (Path(path) / "run.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr("telapa.cli.run.ContinualRun.start", interrupted_later)
    later = tmp_path / "later"
    with pytest.raises(SystemExit) as exit_info:
        main([*RUN, "--out", str(later)])
    assert exit_info.value.code == 130
    assert f"telapa run --resume {later}" in capsys.readouterr().err


def _visit() -> Visit:
    return Visit(1, "B", "B", "MiniGrid-DoorKey-5x5-v0", {}, 0, None)


def test_plain_progress_lines_when_not_a_terminal():
    console = Console(file=io.StringIO())
    assert isinstance(progress_for(console, 5.0), PlainProgress)
    stream = io.StringIO()
    progress = PlainProgress(stream, interval_s=0.0)
    progress.visit(_visit(), 512, 0)
    progress.advance(256, {})
    progress.advance(512, {})
    for done in range(4):
        progress.phase("illumination", done, 3)
    progress.phase("probes", 1, 2)
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("] visit 1 (B, MiniGrid-DoorKey-5x5-v0) starts: 512 steps")
    assert "visit 1 (B, MiniGrid-DoorKey-5x5-v0) train 256/512 steps" in lines[1]
    assert "steps/s, ETA " in lines[1] and "\x1b" not in stream.getvalue()
    assert [line.split("] ", 1)[1].split(",")[0] for line in lines[3:]] == [
        "visit 1 (B", "visit 1 (B", "visit 1 (B", "visit 1 (B", "visit 1 (B"]
    assert [line.split(") ", 1)[1].split(",")[0] for line in lines[3:]] == [
        "illumination 0/3", "illumination 1/3", "illumination 2/3", "illumination 3/3",
        "probes 1/2"]


def test_plain_progress_keeps_a_steady_interval():
    stream = io.StringIO()
    progress = PlainProgress(stream, interval_s=3600.0)
    progress.visit(_visit(), 10_000, 0)
    for steps in range(256, 10_000, 256):
        progress.advance(steps, {})
    progress.advance(10_000, {})
    lines = stream.getvalue().splitlines()
    # the visit's start, the first update and the end of the phase; nothing in between
    # within the hour
    assert len(lines) == 3 and "10,000/10,000" in lines[2]


def test_plain_progress_says_when_a_visit_starts_or_goes_on():
    """One line as a visit starts, before its compiles and first evaluation (minutes on
    MJX); a resumed visit says where it goes on; the visit's next chunks add none."""
    stream = io.StringIO()
    progress = PlainProgress(stream, interval_s=3600.0)
    progress.visit(_visit(), 4096, 2048)  # a run resumed inside visit 1
    progress.visit(_visit(), 4096, 3072)  # its next chunk
    progress.visit(Visit(2, "A", "A'", "MiniGrid-Empty-5x5-v0", {}, 1, None), 4096, 0)
    assert [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()] == [
        "visit 1 (B, MiniGrid-DoorKey-5x5-v0) goes on at 2,048 of 4,096 steps",
        "visit 2 (A', MiniGrid-Empty-5x5-v0) starts: 4,096 steps"]
    time.sleep(0)  # no timing assertion: the interval is the only clock used
