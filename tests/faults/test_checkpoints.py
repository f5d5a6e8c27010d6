"""Kills and damaged checkpoints: a run always resumes to exactly an uninterrupted run's
results, or ends in one line naming the damaged file (issue 28, fault 2: the two kept
checkpoints hard-linked the same method files, so one flipped byte took both)."""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from pathlib import Path

import pytest

from telapa.continual.rundir import RunDir
from telapa.continual.runner import ContinualRun

from .conftest import (
    PHASES,
    RUN,
    Killed,
    Notes,
    assert_same_results,
    copy_run,
    fails,
    flip_byte,
    kill,
    start_telapa,
    telapa,
    wait_for,
)

SEED = int(os.environ.get("TELAPA_FAULT_SEED", "28"))
"""The seed of the random kill moments (set ``TELAPA_FAULT_SEED`` to try others)."""


def _state(run: Path, folder: str) -> dict:
    return json.loads((run / folder / "state.json").read_text())


def test_the_kept_checkpoints_share_no_file(partial):
    newest, previous = RunDir(partial).checkpoints.newest_first()
    assert (_state(partial, newest.name)["next_phase"],
            _state(partial, previous.name)["next_phase"]) == (6, 5)
    parts = sorted(p.name for p in newest.glob("method-*.npz"))
    assert parts == ["method-anchor.npz", "method-weight.npz"]
    for name in parts:
        a, b = (newest / name).stat(), (previous / name).stat()
        assert (a.st_ino, a.st_nlink) != (b.st_ino, 2)  # copies, not one file twice
        assert (newest / name).read_bytes() == (previous / name).read_bytes()


def test_a_damaged_method_file_falls_back_to_the_previous_checkpoint(partial, reference,
                                                                     tmp_path):
    """Fault 2: flipping one byte of the newest checkpoint's EWC Fisher (then
    ``method-fisher.npz``, now ``method-weight.npz``) made resume fail ("cannot be read
    ... start the run again"): the previous checkpoint held the same file. It resumes
    from the previous one, with the same results."""
    run = copy_run(partial, tmp_path / "run")
    newest = RunDir(run).checkpoints.latest()
    flip_byte(newest / "method-weight.npz")
    notes = Notes()
    ContinualRun.resume(run, notes).run()
    assert any(f"{newest} cannot be read" in n and "falling back" in n for n in notes.notes)
    assert_same_results(run, reference)


@pytest.mark.parametrize("name", ["checkpoint.json", "state.json", "learner.npz",
                                  "train_state.npz", "method-anchor.npz", "train.csv",
                                  "files.json"])
def test_each_kind_of_checkpoint_file_damaged_resumes_identically(partial, reference,
                                                                  tmp_path, name):
    """One damaged file of the newest checkpoint (or its pointer): the run resumes (from
    the previous checkpoint, or the newest sealed one when the pointer is damaged) and
    ends with an uninterrupted run's results."""
    run = copy_run(partial, tmp_path / "run")
    target = run / name if name == "checkpoint.json" else RunDir(run).checkpoints.latest() / name
    assert target.is_file()
    flip_byte(target, at=0.3)
    ContinualRun.resume(run).run()
    assert_same_results(run, reference)


def test_both_checkpoints_damaged_is_one_line(partial, tmp_path, capsys):
    run = copy_run(partial, tmp_path / "run")
    for ckpt in RunDir(run).checkpoints.newest_first():
        flip_byte(ckpt / "learner.npz")
    fails(["run", "--resume", str(run)], capsys, "learner.npz", "start the run again")


def test_killed_inside_checkpoint_writes_resumes_identically(reference, tmp_path,
                                                             monkeypatch):
    """Death at random file writes, before or after a file lands (the learner, method
    parts, state, seal, pointer, tables): each time the run resumes, and it ends with an
    uninterrupted run's results."""
    import telapa.io.atomic as atomic

    rng = random.Random(SEED)
    replace = os.replace
    count = {"n": 0, "at": 0}

    def dying_replace(src, dst):
        count["n"] += 1
        if count["n"] == count["at"] and rng.random() < 0.5:
            raise Killed  # before the file lands
        replace(src, dst)
        if count["n"] == count["at"]:
            raise Killed  # just after

    monkeypatch.setattr(atomic.os, "replace", dying_replace)
    run = tmp_path / "run"
    kills = 0
    start = True
    while True:
        count.update(n=0, at=rng.randint(1, 40))
        try:
            if start:
                ContinualRun.start(_spec(), run).run()
            else:
                ContinualRun.resume(run).run()
            break
        except Killed:
            kills += 1
            start = start and not (run / "run.json").exists()
    assert kills >= 3, f"seed {SEED}: only {kills} kills"
    assert_same_results(run, reference)


def _spec():
    from .conftest import spec

    return spec()


def test_sigkill_at_random_moments_then_resume(reference, tmp_path, no_leaked_processes):
    """``telapa run`` SIGKILLed twice at random moments (after a random checkpoint, plus a
    random delay: in training, an evaluation or a checkpoint write), then resumed: an
    uninterrupted run's results."""
    rng = random.Random(SEED + 1)
    run = tmp_path / "run"
    for leg in range(2):
        args = [*RUN, "--seed", "0", "--out", str(run)] if leg == 0 else [
            "run", "--resume", str(run)]
        proc = start_telapa(*args)
        phase = rng.randint(2 + 3 * leg, 4 + 3 * leg)
        wait_for(lambda p=phase: _committed(run) >= p, proc, what=f"checkpoint {phase}")
        time.sleep(rng.uniform(0, 0.3))
        kill(proc)
    done = telapa("run", "--resume", str(run))
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_results(run, reference)


def _committed(run: Path) -> int:
    try:
        latest = json.loads((run / "checkpoint.json").read_text())["latest"]
        return json.loads((run / latest / "state.json").read_text())["next_phase"]
    except (OSError, ValueError, KeyError):
        return -1


def test_two_resumes_at_once_one_runs(partial, reference, tmp_path, no_leaked_processes):
    """Two ``telapa run --resume`` of one run started together: one resumes it, the other
    is told in one line that another process has it (or, starting after the first ended,
    finds it complete); the results are an uninterrupted run's."""
    run = copy_run(partial, tmp_path / "run")
    procs = [start_telapa("run", "--resume", str(run)) for _ in range(2)]
    outcomes = [(p.wait(timeout=600), p.communicate()[1]) for p in procs]
    assert any(code == 0 for code, _ in outcomes), outcomes
    for code, err in outcomes:
        if code != 0:
            assert code == 2 and "Traceback" not in err and "is in use by pid" in err, err
    assert_same_results(run, reference)
    assert PHASES == _state(run, RunDir(run).checkpoints.latest().name)["next_phase"]


def _newest_gone(run: Path, what: str) -> str:
    """Makes the newest checkpoint of ``run`` incomplete as ``what`` says; returns the
    name of the checkpoint a resume must skip."""
    pointer = json.loads((run / "checkpoint.json").read_text())
    newest = run / pointer["latest"]
    if what == "pointer ahead":  # checkpoint.json names one that was never written
        (run / "checkpoint.json").write_text(json.dumps(
            {"latest": "ckpt-000099", "previous": pointer["previous"]}))
        return "ckpt-000099"
    if what == "folder":
        shutil.rmtree(newest)
    else:
        (newest / what).unlink()
    return newest.name


@pytest.mark.parametrize("what", ["folder", "state.json", "files.json", "train_state.npz",
                                  "pointer ahead"])
def test_a_missing_newest_checkpoint_falls_back_to_the_previous_one(partial, reference,
                                                                    tmp_path, what):
    """Issue 38, fault 2: deleting the newest checkpoint folder (or its ``state.json``)
    stopped resume ("checkpoint.json names 'ckpt-000008', which is not a complete
    checkpoint") although the previous one was intact. Whatever is missing (the folder,
    its state, its seal, a file, or the folder the pointer names never written), resume
    falls back with a warning naming what it skipped. Its first new checkpoint keeps the
    one it went on from as the previous one (not the skipped one, which is removed), and
    the run ends with an uninterrupted run's results."""
    run = copy_run(partial, tmp_path / "run")
    skipped = _newest_gone(run, what)
    notes = Notes()
    notes.n = 1  # killed in the second chunk, after the first one's checkpoint
    with pytest.raises(Killed):
        ContinualRun.resume(run, notes).run()
    warnings = [n for n in notes.notes if n.startswith("warning: ")]
    assert len(warnings) == 1, notes.notes
    assert f"{run / skipped} cannot be read" in warnings[0]
    assert "missing" in warnings[0] and "falling back to the previous checkpoint" in warnings[0]
    newest, previous = RunDir(run).checkpoints.newest_first()
    assert (_state(run, newest.name)["next_phase"], _state(run, previous.name)["next_phase"]
            ) == (6, 5)
    for ckpt in (newest, previous):
        RunDir(run).checkpoints.verify(ckpt)
    assert sorted(p.name for p in run.glob("ckpt-*")) == [previous.name, newest.name]
    assert skipped not in (previous.name, newest.name)
    notes = Notes()
    ContinualRun.resume(run, notes).run()
    assert not [n for n in notes.notes if n.startswith("warning: ")], notes.notes
    assert_same_results(run, reference)


EDITS = {
    "method": ("run.json", lambda d: {**d, "method": "finetune"}, "method is \"finetune\"",
               "was written with \"ewc\""),
    "seed": ("run.json", lambda d: {**d, "seed": 1}, "seed is 1", "was written with 0"),
    "lr": ("config.yaml", lambda d: {**d, "train": {**d["train"], "ppo": {
        **d["train"]["ppo"], "lr": 1.0}}}, "train.ppo.lr is 1.0", "was written with 0.001"),
    "curriculum": ("curriculum.yaml", lambda d: {**d, "cycles": 1}, "cycles is 1",
                   "was written with 2"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_run_is_refused_by_name(partial, tmp_path, capsys, edit):
    """Issue 38, fault 3: editing ``run.json``'s method or seed, or ``config.yaml``'s
    learning rate, and resuming silently continued into a mixed run. Each checkpoint
    holds what defines its run (``definition.json``); a resume compares, and refuses in
    one line naming the file and the key, with how to start a new run, before anything
    is written (not even the code of the refused segment in run.json)."""
    import yaml

    run = copy_run(partial, tmp_path / "run")
    name, change, now, before = EDITS[edit]
    path = run / name
    if name == "run.json":
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    else:
        path.write_text(yaml.safe_dump(change(yaml.safe_load(path.read_text())),
                                       sort_keys=False))
    files = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    line = fails(["run", "--resume", str(run)], capsys, f"{run} was edited after the run "
                 f"started: {name}: {now}", before, "start a new run", "--out NEW_DIR")
    assert "Traceback" not in line
    assert {p: p.read_bytes() for p in run.rglob("*")
            if p.is_file() and p.name != ".lock"} == files


def test_checkpoints_without_their_definition_are_refused_in_one_line(partial, tmp_path,
                                                                     capsys):
    """Every checkpoint of today's run format holds what defines its run: checkpoints
    without ``definition.json`` (resealed, so the seal does not tell) are incomplete, not
    resumed unchecked; with none left, one line names the file."""
    run = copy_run(partial, tmp_path / "run")
    for ckpt in RunDir(run).checkpoints.newest_first():
        (ckpt / "definition.json").unlink()
        seal = json.loads((ckpt / "files.json").read_text())
        del seal["definition.json"]
        (ckpt / "files.json").write_text(json.dumps(seal))
    fails(["run", "--resume", str(run)], capsys, "definition.json is missing",
          "start the run again")


def test_killed_between_the_last_checkpoint_and_its_tables_resumes_identically(reference,
                                                                              tmp_path):
    """Death after the final evaluation's checkpoint landed, before the tables written
    after it: the resume has no phase left, and still writes the run's tables (found with
    ``TELAPA_FAULT_SEED=4`` in killed_inside_checkpoint_writes_resumes_identically: the
    final rows were missing from final.csv)."""
    run = copy_run(reference, tmp_path / "run")
    manifest = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**manifest, "status": "running"}))
    (run / "metrics.json").unlink()
    for name in ("curve.csv", "final.csv"):
        (run / name).write_text((run / name).read_text().splitlines()[0] + "\n")
    ContinualRun.resume(run).run()
    assert_same_results(run, reference)


def test_a_finished_run_keeps_one_checkpoint(reference, partial, tmp_path):
    """A finished run kept its last two checkpoints (a tiny TeLAPA run: two of 216 MB),
    though no phase is left to recover: it keeps the latest only, the pointer names no
    previous one, and its accounting counts what is left. An unfinished run still keeps
    two (the fallback the tests above rely on)."""
    assert len(list(partial.glob("ckpt-*"))) == 2
    resumed = copy_run(partial, tmp_path / "run")
    ContinualRun.resume(resumed).run()
    for run in (reference, resumed):
        kept = sorted(p.name for p in run.glob("ckpt-*"))
        pointer = json.loads((run / "checkpoint.json").read_text())
        assert kept == [pointer["latest"]] and pointer["previous"] is None, run
        size = sum(f.stat().st_size for f in run.rglob("*") if f.is_file())
        recorded = json.loads((run / "accounting.json").read_text())["run_dir_bytes"]
        assert recorded <= size + 4096, run
