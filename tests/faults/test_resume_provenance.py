"""Issue 50: ``run --resume`` checked neither the versions a run ran with nor ``--import``.

* ``run.json`` records the telapa and jax versions of each segment (``versions``, one
  entry per change, beside the start's ``telapa`` and ``jax``); a resume under other
  versions warns, naming them, that bit-identical results are only promised with the
  same versions (it resumes: refusing would strand a long run after an upgrade).
* ``--import`` given with ``--resume`` must name the run's own modules (``run.json``
  ``imports``): another set is refused by name, in one line, before any work.
"""

from __future__ import annotations

import json

import pytest

from telapa.cli.common import CLIError
from telapa.cli.run import check_resume_imports
from telapa.continual.runner import ContinualRun
from telapa.provenance import current_versions

from .conftest import Notes, copy_run, fails


def _killed_at_its_end(quick_run, tmp_path):
    """A copy of a quick run as if killed after its last checkpoint, before it was
    marked complete (status "running"): a resume opens it without training."""
    run = copy_run(quick_run("finetune", 0), tmp_path / "run")
    manifest = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**manifest, "status": "running"}))
    return run


def test_a_resume_under_other_versions_warns_and_records_them(quick_run, tmp_path):
    run = _killed_at_its_end(quick_run, tmp_path)
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["versions"] == [current_versions()]  # recorded at the start
    assert {k: manifest[k] for k in ("telapa", "jax")} == current_versions()
    old = {"telapa": "0.0.1", "jax": "0.4.0"}
    manifest.update(old, versions=[old])  # as if started under older versions
    (run / "run.json").write_text(json.dumps(manifest))
    notes = Notes()
    resumed = ContinualRun.resume(run, notes)
    resumed.dir.unlock()
    (warning,) = [n for n in notes.notes if "other versions" in n]
    now = current_versions()
    assert f"telapa 0.0.1 -> {now['telapa']}" in warning
    assert f"jax 0.4.0 -> {now['jax']}" in warning and "bit-identical" in warning
    assert json.loads((run / "run.json").read_text())["versions"] == [old, now]


def test_the_same_versions_resume_without_a_warning(quick_run, tmp_path):
    run = _killed_at_its_end(quick_run, tmp_path)
    notes = Notes()
    ContinualRun.resume(run, notes).dir.unlock()
    assert not [n for n in notes.notes if "versions" in n]
    assert json.loads((run / "run.json").read_text())["versions"] == [current_versions()]


def test_an_other_import_at_resume_is_refused_by_name(quick_run, tmp_path, capsys):
    run = _killed_at_its_end(quick_run, tmp_path)
    before = (run / "run.json").read_bytes()
    line = fails(["run", "--resume", str(run), "--import", "json"], capsys,
                 f"{run} was started with no --import", "--import json is not one of them",
                 "Leave --import out", within_s=60)
    assert line.count("telapa: error:") == 1
    assert (run / "run.json").read_bytes() == before  # nothing written


def test_imports_given_at_resume_are_compared_as_sets():
    check_resume_imports(None, ("a", "b"), "RUN")  # left out: the run's own
    check_resume_imports(["b", "a", "a"], ("a", "b"), "RUN")  # the same modules
    with pytest.raises(CLIError, match=r"RUN was started with --import a --import b "
                                       r"\(run.json imports\): --import c is not one of "
                                       r"them; b is left out\. Leave --import out"):
        check_resume_imports(["a", "c"], ("a", "b"), "RUN")
