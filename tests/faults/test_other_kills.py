"""Kills of the commands that do not train a continual run: an export, a report and
``telapa train`` stopped part way end, on the next command, in the same files or a
one-line error (``telapa run`` and ``telapa sweep``: test_checkpoints.py and
test_sweep_faults.py; ``metrics``, ``inspect`` and ``sweep status`` only read)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import telapa.report.build as build
from telapa.continual.sweep import export_sweep, load_sweep, prepare_sweep_dir, write_status
from telapa.report.build import write_report
from telapa.report.document import Document

from .conftest import (
    FAULT_RUN,
    ONE_TASK,
    Killed,
    fails,
    kill,
    start_telapa,
    wait_for,
)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def finished_sweep(tmp_path) -> Path:
    """A sweep directory whose two cells are done (small stand-in results)."""
    file = tmp_path / "s.yaml"
    file.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n"
                    "seeds: 2\n")
    out = tmp_path / "sweep"
    prepare_sweep_dir(load_sweep(file), out)
    for seed in range(2):
        cell = out / "cells" / f"one-task-ewc-s{seed}"
        cell.mkdir()
        (cell / "run.json").write_text(json.dumps(
            {"format": "telapa-run", "version": 1, "status": "complete", "seed": seed}))
        for name in ("visits.csv", "curve.csv", "final.csv", "metrics.json"):
            (cell / name).write_text(f"{name} of seed {seed}\n" * 50)
        write_status(out, cell.name, {"state": "done", "attempts": 1, "errors": []})
    return out


@pytest.mark.parametrize("at", [1, 3, 5, 6])
def test_an_export_killed_part_way_is_completed_by_the_next(finished_sweep, tmp_path,
                                                            monkeypatch, at):
    whole = tmp_path / "whole"
    export_sweep(finished_sweep, whole)
    copy = shutil.copy2
    count = {"n": 0}

    def dying_copy(src, dst, **kwargs):
        count["n"] += 1
        if count["n"] == at:
            raise Killed
        return copy(src, dst, **kwargs)

    dest = tmp_path / "dest"
    monkeypatch.setattr("telapa.continual.sweep.export.shutil.copy2", dying_copy)
    with pytest.raises(Killed):
        export_sweep(finished_sweep, dest)
    monkeypatch.undo()
    assert export_sweep(finished_sweep, dest).left == []
    assert _files(dest) == {k: v.replace(str(whole).encode(), str(dest).encode())
                            for k, v in _files(whole).items()} | {
        "cells.json": (dest / "cells.json").read_bytes()}
    assert json.loads((dest / "cells.json").read_text())["cells"] == json.loads(
        (whole / "cells.json").read_text())["cells"]


@pytest.mark.parametrize("where", ["files", "between renames"])
def test_a_report_killed_part_way_is_replaced_by_the_next(tmp_path, monkeypatch, where):
    out = tmp_path / "report"
    write_report(Document("old", ["old"], []), out)
    earlier = _files(out)
    if where == "files":
        def dying(*args, **kwargs):
            raise Killed
        monkeypatch.setattr(build, "_write_files", dying)
    else:
        rename = Path.rename

        def dying_rename(self, target):
            result = rename(self, target)
            if str(target).endswith(".old"):
                raise Killed
            return result
        monkeypatch.setattr(Path, "rename", dying_rename)
    with pytest.raises(Killed):
        write_report(Document("new", ["new"], []), out)
    monkeypatch.undo()
    if where == "files":  # the earlier report is untouched
        assert _files(out) == earlier
    write_report(Document("new", ["new"], []), out)
    assert "new" in (out / "report.md").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".new")]


def test_a_killed_train_is_refused_in_one_line_on_rerun(tmp_path, capsys,
                                                        no_leaked_processes):
    """``telapa train`` is not resumable: killed, its directory is refused on the same
    command, naming what it holds (nothing is overwritten)."""
    out = tmp_path / "train"
    args = ["train", "--env", "MiniGrid-Empty-5x5-v0", "--steps", "2048", "--out", str(out)]
    proc = start_telapa(*args)
    wait_for((out / "config.yaml").exists, proc, what="the train directory")
    kill(proc)
    before = _files(out)
    fails(args, capsys, str(out), "is not empty")
    assert _files(out) == before
