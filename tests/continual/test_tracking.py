"""`telapa run --track wandb|mlflow`: one tracked run per seed, grouped by curriculum and
method, with the run's curves; tested offline (W&B offline mode, an MLflow file store).
Plus ``--set`` as `telapa run` records it, and a resume that contradicts it."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from plugin_modules import import_route_module

from telapa.cli import main
from telapa.continual.tracking import RunTracker, Tracking, TrackingError, tracker_key

from .events import tensorboard_scalars

TINY = Path(__file__).with_name("tiny_run.yaml")
ONE_TASK = Path(__file__).with_name("one_task_curriculum.yaml")  # A, A': one env to compile
SETS = ["--set", "steps_per_visit=512", "--set", "train.ppo.lr=2e-3"]
HAVE = {name: importlib.util.find_spec(name) is not None for name in ("wandb", "mlflow")}
needs_wandb = pytest.mark.skipif(not HAVE["wandb"], reason="wandb is not installed "
                                 "(pip install 'telapa[tracking]')")
needs_mlflow = pytest.mark.skipif(not HAVE["mlflow"], reason="mlflow is not installed "
                                  "(pip install 'telapa[tracking]')")


def _offline(monkeypatch: pytest.MonkeyPatch, root: Path) -> str:
    """W&B offline, MLflow in a file store under ``root``; returns the MLflow URI."""
    uri = (root / "mlruns").as_uri()
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 prefers a database
    return uri


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """Two seeds of Finetune on the one-task curriculum, logged to every available
    tracker; W&B's runs are spied on (the real ones, their ``log`` calls recorded)."""
    root = tmp_path_factory.mktemp("tracked")
    trackers = [name for name, ok in HAVE.items() if ok]
    spied: list[tuple[dict, list]] = []
    with pytest.MonkeyPatch.context() as mp:
        uri = _offline(mp, root)
        if HAVE["wandb"]:
            import wandb

            real_init = wandb.init

            def spy_init(**kwargs):
                run = real_init(**kwargs)
                calls: list = []
                real_log = run.log
                mp.setattr(run, "log", lambda data, step: (calls.append((step, dict(data))),
                                                           real_log(data, step=step)))
                spied.append((kwargs, calls))
                return run

            mp.setattr(wandb, "init", spy_init)
        argv = ["run", "--curriculum", str(ONE_TASK), "--method", "finetune", "--preset",
                str(TINY), *SETS, "--seeds", "0-1", "--out", str(root / "runs"),
                "--track-project", "telapa-test"]
        for name in trackers:
            argv += ["--track", name]
        assert main(argv) == 0
    dirs = [root / "runs" / f"one-task-finetune-s{seed}" for seed in (0, 1)]
    return dirs, spied, uri


def _sr_curve(run_dir: Path, tag: str) -> pd.DataFrame:
    curve = pd.read_csv(run_dir / "curve.csv")
    return curve[curve["tag"] == tag]


def test_run_json_records_the_overrides_and_config_yaml_holds_them(tracked):
    dirs, _, _ = tracked
    for run_dir in dirs:
        manifest = json.loads((run_dir / "run.json").read_text())
        assert manifest["overrides"] == {"steps_per_visit": 512, "train.ppo.lr": 0.002}
        config = (run_dir / "config.yaml").read_text()
        assert "steps_per_visit: 512" in config and "lr: 0.002" in config
        visits = pd.read_csv(run_dir / "visits.csv")
        assert visits["train_steps"].tolist() == [512, 512]


def test_every_seed_writes_tensorboard_events(tracked):
    dirs, _, _ = tracked
    for run_dir in dirs:
        tb = tensorboard_scalars(run_dir / "tb")
        for tag in ("A", "A'"):
            rows = _sr_curve(run_dir, tag)
            assert [s for s, _ in tb[f"sr/{tracker_key(tag)}"]] == rows["global_step"].tolist()
        assert len(tb["train/loss"]) == 2 * 512 // 256  # tiny preset: 256 steps per call


@needs_wandb
def test_wandb_gets_one_offline_run_per_seed_grouped_by_curriculum_and_method(tracked):
    dirs, spied, _ = tracked
    assert [kwargs["name"] for kwargs, _ in spied] == [d.name for d in dirs]
    for (kwargs, calls), run_dir in zip(spied, dirs, strict=True):
        assert kwargs["group"] == "one-task-finetune" and kwargs["project"] == "telapa-test"
        assert kwargs["config"]["seed"] == int(run_dir.name[-1])
        assert kwargs["config"]["settings"]["steps_per_visit"] == 512
        logged = [(step, data["sr/Ap"]) for step, data in calls if "sr/Ap" in data]
        rows = _sr_curve(run_dir, "A'")
        assert [s for s, _ in logged] == rows["global_step"].tolist()
        np.testing.assert_allclose([v for _, v in logged], rows["sr"])
        steps = [step for step, _ in calls]
        assert steps == sorted(steps)  # W&B drops steps that go back
        record = json.loads((run_dir / "tracking.json").read_text())
        offline = list((run_dir / "wandb").glob(f"offline-run-*-{record['wandb']['id']}"))
        assert len(offline) == 1 and list(offline[0].glob("run-*.wandb"))


@needs_mlflow
def test_mlflow_gets_one_finished_run_per_seed_with_the_curves(tracked):
    from mlflow.tracking import MlflowClient

    dirs, _, uri = tracked
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("telapa-test")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(runs) == sorted(d.name for d in dirs)
    for run_dir in dirs:
        run = runs[run_dir.name]
        assert run.info.status == "FINISHED"
        assert run.data.tags["group"] == "one-task-finetune"
        assert run.data.tags["seed"] == run_dir.name[-1]
        assert json.loads(run.data.params["overrides"])["train.ppo.lr"] == 0.002
        history = client.get_metric_history(run.info.run_id, "sr/Ap")
        rows = _sr_curve(run_dir, "A'")
        assert [m.step for m in history] == rows["global_step"].tolist()
        np.testing.assert_allclose([m.value for m in history], rows["sr"])
        mean_sr = json.loads((run_dir / "metrics.json").read_text())["mean_sr"]
        assert run.data.metrics["metrics/mean_sr"] == pytest.approx(mean_sr)


@needs_mlflow
def test_a_resumed_run_logs_to_the_same_mlflow_run(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    uri = _offline(monkeypatch, tmp_path)
    spec = {"curriculum": "c", "method": "m", "seed": 3, "preset": "p", "overrides": {}}
    first = RunTracker.open(tmp_path / "run", spec=spec, config={}, tracking=Tracking(
        ("mlflow",), "resume-test"))
    first.log({"sr/A": 0.25}, 10)
    first.close("stopped")
    again = RunTracker.open(tmp_path / "run", spec=spec, config={}, tracking=None,
                            resume_step=10)
    again.log({"sr/A": 0.5}, 20)
    again.close("complete")
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("resume-test")
    (run,) = client.search_runs([experiment.experiment_id])
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "sr/A")] \
        == [(10, 0.25), (20, 0.5)]
    assert run.info.status == "FINISHED"


def test_a_resumed_run_hides_the_killed_segments_events_after_its_checkpoint(tmp_path):
    spec = {"curriculum": "c", "method": "m", "seed": 0, "preset": "p", "overrides": {}}
    first = RunTracker.open(tmp_path, spec=spec, config={}, tracking=None)
    for step in (10, 20, 30):  # the checkpoint was at 20; 30 was logged, then a kill
        first.log({"sr/A'": step / 100}, step)
    first.close("stopped")
    again = RunTracker.open(tmp_path, spec=spec, config={}, tracking=None, resume_step=20)
    again.log({"sr/A'": 0.33}, 30)
    again.log({"sr/A'": 0.4}, 40)
    again.close("complete")
    assert tensorboard_scalars(tmp_path / "tb")["sr/Ap"] == [
        (10, pytest.approx(0.1)), (20, pytest.approx(0.2)), (30, pytest.approx(0.33)),
        (40, pytest.approx(0.4))]
    assert not (tmp_path / "tracking.json").exists()  # TensorBoard alone: nothing to reopen


def test_unknown_trackers_are_refused():
    with pytest.raises(TrackingError, match=r"unknown tracker\(s\) \['neptune'\]"):
        Tracking(("neptune",))


def test_resume_refuses_a_contradicting_set_in_one_line(tracked, capsys):
    dirs, _, _ = tracked
    with pytest.raises(SystemExit) as stop:
        main(["run", "--resume", str(dirs[0]), "--set", "steps_per_visit=2048"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "--set steps_per_visit=2048 (the run's steps_per_visit is 512)" in err
    with pytest.raises(SystemExit):
        main(["run", "--resume", str(dirs[0]), "--set", "train.ppo.lr=1e-3"])
    assert "--set train.ppo.lr=0.001 (the run's train.ppo.lr is 0.002)" in \
        capsys.readouterr().err
    # the run's own values agree: the complete run resumes (and stays as it is)
    before = (dirs[0] / "metrics.json").read_bytes()
    assert main(["run", "--resume", str(dirs[0]), "--set", "train.ppo.lr=0.002"]) == 0
    assert (dirs[0] / "metrics.json").read_bytes() == before


@pytest.mark.skipif(not any(HAVE.values()), reason="neither wandb nor mlflow is installed "
                    "(pip install 'telapa[tracking]')")
def test_a_sweep_tracks_each_cell_and_its_workers_import_the_plug_ins(plugin_site, tmp_path,
                                                                       monkeypatch):
    """``telapa sweep --import M --track ...``: the worker process imports M (which
    registers the cells' env and method) before it reads its cells, each cell's run.json
    records M, and each cell logs to its own tracked run, grouped by curriculum and
    method; neither option is part of the sweep's record, so the sweep is the same
    without them."""
    uri = _offline(monkeypatch, tmp_path)
    import_route_module(plugin_site, "plugmod_sweep", env_id="PlugSweep-v0",
                        method="plug-sweep", section="plug_sweep")
    (tmp_path / "cur.yaml").write_text(json.dumps({
        "name": "plug", "backend": "gymnasium", "tasks": {"A": "PlugSweep-v0"},
        "order": ["A"], "cycles": 2}))
    (tmp_path / "sweep.yaml").write_text(json.dumps({
        "name": "plug", "preset": "mujoco-quick", "curricula": ["cur.yaml"],
        "methods": ["plug-sweep"], "seeds": 1, "grid": {"methods.plug_sweep.lam": [0.1, 0.2]},
        "overrides": {"steps_per_visit": 1024, "eval_every": 1024}}))
    out = tmp_path / "out"
    trackers = [a for name, ok in HAVE.items() if ok for a in ("--track", name)]
    argv = ["sweep", str(tmp_path / "sweep.yaml"), "--out", str(out), "--workers", "1",
            "--import", "plugmod_sweep"]
    assert main([*argv, *trackers, "--track-project", "telapa-sweep"]) == 0
    cells = {f"plug-plug-sweep-lam={lam}-s0": lam for lam in (0.1, 0.2)}
    assert sorted(p.name for p in (out / "cells").iterdir()) == sorted(cells)
    for name, lam in cells.items():
        run_dir = out / "cells" / name
        manifest = json.loads((run_dir / "run.json").read_text())
        assert manifest["imports"] == ["plugmod_sweep"] and manifest["status"] == "complete"
        assert yaml.safe_load((run_dir / "config.yaml").read_text())["methods"][
            "plug_sweep"] == {"lam": lam}
        if HAVE["wandb"]:
            record = json.loads((run_dir / "tracking.json").read_text())
            assert len(list((run_dir / "wandb").glob(
                f"offline-run-*-{record['wandb']['id']}"))) == 1
    if HAVE["mlflow"]:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name("telapa-sweep")
        runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
        assert sorted(runs) == sorted(cells)
        for name, run in runs.items():
            assert run.info.status == "FINISHED"
            assert run.data.tags["group"] == "plug-plug-sweep"
            assert run.data.tags["method"] == "plug-sweep"
            rows = _sr_curve(out / "cells" / name, "A'")
            history = client.get_metric_history(run.info.run_id, "sr/Ap")
            assert [m.step for m in history] == rows["global_step"].tolist()
    assert "plugmod_sweep" not in (out / "cells.json").read_text()
    assert main(argv) == 0  # the same sweep without --track: every cell is done


@needs_mlflow
def test_mlflow_with_no_environment_logs_to_a_store_in_the_run_directory(tmp_path,
                                                                        monkeypatch):
    """With neither MLFLOW_TRACKING_URI nor MLFLOW_ALLOW_FILE_STORE set (MLflow 3's
    default SQLite store fails without SQLAlchemy), the run logs offline to
    RUN_DIR/mlruns, and a resume finds it there."""
    from mlflow.tracking import MlflowClient

    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE", "MLFLOW_REGISTRY_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    spec = {"curriculum": "c", "method": "m", "seed": 1, "preset": "p", "overrides": {}}
    run = tmp_path / "run"
    first = RunTracker.open(run, spec=spec, config={}, tracking=Tracking(("mlflow",)))
    first.log({"sr/A": 0.5}, 7)
    first.close("stopped")
    record = json.loads((run / "tracking.json").read_text())["mlflow"]
    assert record["store"] == "run directory" and "tracking_uri" not in record
    # moved, it resumes in its own store (an absolute URI once sent it to the old place)
    moved = tmp_path / "moved"
    run.rename(moved)
    again = RunTracker.open(moved, spec=spec, config={}, tracking=None, resume_step=7)
    again.log({"sr/A": 0.75}, 9)
    again.close("complete")
    assert not run.exists()
    client = MlflowClient(tracking_uri=(moved / "mlruns").resolve().as_uri())
    (found,) = client.search_runs([client.get_experiment_by_name("telapa").experiment_id])
    assert found.info.status == "FINISHED"
    assert [m.value for m in client.get_metric_history(found.info.run_id, "sr/A")] == \
        [0.5, 0.75]
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()


def test_an_unreachable_mlflow_server_is_one_line_at_once(tmp_path, monkeypatch):
    """``MLFLOW_TRACKING_URI=http://127.0.0.1:9`` (nothing listens) was silent for 252 s
    of MLflow's retries before its error: now one line within seconds."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    spec = {"curriculum": "c", "method": "m", "seed": 1, "preset": "p", "overrides": {}}
    started = time.monotonic()
    with pytest.raises(TrackingError, match=r"the MLflow server at http://127.0.0.1:9 is not "
                                            r"reachable"):
        RunTracker.open(tmp_path / "run", spec=spec, config={}, tracking=Tracking(("mlflow",)))
    assert time.monotonic() - started < 30


@needs_wandb
def test_wandb_dir_is_honoured(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    spec = {"curriculum": "c", "method": "m", "seed": 1, "preset": "p", "overrides": {}}
    tracker = RunTracker.open(tmp_path / "run", spec=spec, config={},
                              tracking=Tracking(("wandb",)))
    tracker.log({"sr/A": 0.5}, 1)
    tracker.close("complete")
    assert list((tmp_path / "elsewhere" / "wandb").glob("offline-run-*"))
    assert not (tmp_path / "run" / "wandb").exists()


def test_a_tracker_that_cannot_start_leaves_no_run_behind(tmp_path, monkeypatch, capsys):
    """The tracked run cannot be opened: the command fails naming the tracker, and what
    the run had just written is gone (nothing is left marked "running"): --out is left
    empty, whether the user made it or the command's check of --out did."""
    from telapa.continual import tracking

    def refuse(**kwargs):
        raise RuntimeError("the store refused the run")

    monkeypatch.setattr(tracking, "MLflowSink", refuse)
    monkeypatch.setattr(tracking, "_import", lambda name: None)
    for out, made in ((tmp_path / "new", False), (tmp_path / "empty", True)):
        if made:
            out.mkdir()
        argv = ["run", "--curriculum", str(ONE_TASK), "--method", "finetune", "--preset",
                str(TINY), *SETS, "--seed", "0", "--out", str(out), "--track", "mlflow"]
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code != 0
        assert "--track mlflow: cannot open a tracked run" in capsys.readouterr().err
        assert not out.exists() or not any(out.iterdir())
