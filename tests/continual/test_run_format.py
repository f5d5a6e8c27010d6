"""A run directory of an older format version (``run.json`` ``"version": 1``, whose
checkpoints may be in layouts this code no longer reads) is refused in one line by
whatever opens its checkpoints (resume, play, the dormant analysis), naming the run
directory, its format and the supported one, before anything in it changes; what it
records besides its checkpoints is read as ever."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from telapa.cli import main
from telapa.continual.curriculum import load_curriculum
from telapa.continual.driver import Driver
from telapa.continual.preset import load_run_config
from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.runformat import READ_VERSIONS, RUN_VERSION
from telapa.continual.runner import ContinualRun
from telapa.continual.spec import RunSpec
from telapa.play import open_finished

TINY = Path(__file__).with_name("tiny_run.yaml")


def _files(path: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and p.name != ".lock"}


@pytest.fixture(scope="module")
def old_run(tmp_path_factory) -> Path:
    """A run of today's format at its first checkpoint, then marked format version 1."""
    path = tmp_path_factory.mktemp("format") / "run"
    spec = RunSpec(load_curriculum("smoke"), "finetune", 0, load_run_config(TINY), "tiny")
    run = ContinualRun.start(spec, path)
    Driver([run], size=1).step()  # visit 0's start phase and its checkpoint
    run.tracker.close("stopped")
    run.dir.unlock()
    manifest = json.loads((path / "run.json").read_text())
    assert manifest["version"] == RUN_VERSION == 2
    (path / "run.json").write_text(json.dumps({**manifest, "version": 1}))
    return path


def _refusal(path: Path) -> list[str]:
    return [str(path), "telapa-run version 1", f"runs of version {RUN_VERSION} only"]


def test_resuming_an_older_format_run_is_one_line(old_run, capsys):
    (old_run / ".lock").unlink()
    before = _files(old_run)
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--resume", str(old_run)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith("telapa: error: ")
    for fragment in _refusal(old_run):
        assert fragment in lines[0], (fragment, lines[0])
    with pytest.raises(RunDirError, match="version 1"):
        ContinualRun.resume(old_run)
    # nothing written: not the code of this segment, not even the lock file
    assert _files(old_run) == before and not (old_run / ".lock").exists()


def test_playing_an_older_format_run_is_refused(old_run, tmp_path):
    finished = tmp_path / "finished"
    shutil.copytree(old_run, finished)
    manifest = json.loads((finished / "run.json").read_text())
    (finished / "run.json").write_text(json.dumps({**manifest, "status": "complete"}))
    for opens in (lambda: open_finished(finished),
                  lambda: RunDir(finished).checkpoints.learner_file()):
        with pytest.raises(RunDirError) as err:
            opens()
        message = str(err.value)
        assert "\n" not in message
        for fragment in _refusal(finished):
            assert fragment in message, (fragment, message)


def test_an_older_format_run_is_still_read(old_run, tmp_path):
    run_dir = RunDir(old_run)
    assert 1 in READ_VERSIONS and run_dir.manifest()["version"] == 1
    with pytest.warns(DeprecationWarning, match=r"now RunDir.manifest\(\)"):
        assert run_dir.spec() == run_dir.manifest()  # the former name, one release
    assert run_dir.config().steps_per_visit == 4096
    assert run_dir.read_table("visits")["tag"].tolist() == ["A"]
    assert run_dir.checkpoints.state_json()["next_phase"] == 1  # a sweep's progress of a cell
    newer = tmp_path / "newer"
    newer.mkdir()
    manifest = json.loads((old_run / "run.json").read_text())
    (newer / "run.json").write_text(json.dumps({**manifest, "version": 3}))
    with pytest.raises(RunDirError, match="version 3 is not supported"):
        RunDir(newer).manifest()
