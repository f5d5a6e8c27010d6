"""Issue 50: MLflow kept duplicate points after a kill and resume: the killed segment's
points past its last checkpoint stay (MLflow cannot delete a point) and the resume logged
those steps again. Now the resumed segment logs only the points the run does not hold:
those past the checkpoint's step, and those at its step logged after it (every phase is
logged before its checkpoint, whose mark orders the timestamps: `RunTracker.mark`)."""

from __future__ import annotations

import json

import pytest

from telapa.continual.tracking import RunTracker, Tracking

SPEC = {"curriculum": "c", "method": "m", "seed": 0, "preset": "p", "overrides": {}}
PHASES = [(0, "start"), (0, "method"), (10, "chunk"), (10, "method"), (20, "chunk"),
          (30, "chunk")]
"""(global step, kind) of a run's phases: a chunk trains, the others do not."""


def _phase(tracker: RunTracker, step: int, kind: str, segment: int) -> None:
    """What a run logs in one phase, then at its end (before its checkpoint)."""
    if kind != "method":
        tracker.evaluation("A'", 0.5 + step / 100, float(step), step)
    tracker.phase({"train": step + segment / 10}, [{"event": kind, "size": step}], step)


def _history(uri: str, run_id: str) -> dict[str, list[int]]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    return {key: sorted(p.step for p in client.get_metric_history(run_id, key))
            for key in client.get_run(run_id).data.metrics}


@pytest.mark.parametrize("resume_at", [1, 2, 3])
def test_a_resumed_run_logs_no_point_twice_to_mlflow(tmp_path, monkeypatch, resume_at):
    """Killed after its 5th phase (20 steps), resumed from the checkpoint of phase
    ``resume_at`` (at step 0 with a later phase at the same step, or at step 10): every
    curve has each point once, as an uninterrupted run logs it."""
    pytest.importorskip("mlflow")
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    folder = tmp_path / "run"
    folder.mkdir()
    first = RunTracker.open(folder, spec=SPEC, config={}, tracking=Tracking(("mlflow",)))
    marks = []
    for step, kind in PHASES[:5]:  # killed during the 6th phase: no close
        _phase(first, step, kind, 1)
        marks.append(first.mark())  # the phase's checkpoint
    first.sinks[0].close("stopped")  # TensorBoard's writer thread
    step, _ = PHASES[resume_at - 1]
    resumed = RunTracker.open(folder, spec=SPEC, config={}, tracking=None,
                              resume_step=step, resume_ms=marks[resume_at - 1])
    for step, kind in PHASES[resume_at:]:
        _phase(resumed, step, kind, 2)
        resumed.mark()
    resumed.close("complete")
    run_id = json.loads((folder / "tracking.json").read_text())["mlflow"]["id"]
    history = _history(uri, run_id)
    assert history["sr/Ap"] == [0, 10, 20, 30]
    assert history["time/train"] == [0, 0, 10, 10, 20, 30]  # one point per phase
    assert history["method/method/size"] == [0, 10]
