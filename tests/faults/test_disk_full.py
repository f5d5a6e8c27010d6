"""A full disk: one line naming the file and what to do, nothing written before is
damaged, and the same command afterwards finishes with identical results (issue 28, fault
5: a full disk was a raw OSError traceback). Each case mounts a small tmpfs (skipped with
the reason where the machine does not allow it)."""

from __future__ import annotations

import json
import shutil

import pytest

from telapa.cli import main
from telapa.continual.sweep import export_sweep, load_sweep, prepare_sweep_dir, write_status
from telapa.report.build import write_report
from telapa.report.document import Document

from .conftest import FAULT_RUN, ONE_TASK, RUN, assert_same_results, fails, remount, small_disk


def test_a_run_on_a_full_disk_stops_in_one_line_and_resumes(reference, tmp_path, capsys):
    with small_disk(tmp_path / "disk", "1m") as disk:
        run = disk / "run"
        line = fails([*RUN, "--seed", "0", "--out", str(run)], capsys,
                     "No space left on device", str(run), "run the same command again",
                     within_s=600)
        assert "Traceback" not in line
        remount(disk, "size=32m")
        assert main(["run", "--resume", str(run)]) == 0
        assert_same_results(run, reference)


def test_an_export_to_a_full_disk_stops_and_completes_later(reference, tmp_path, capsys):
    file = tmp_path / "s.yaml"
    file.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n")
    sweep = tmp_path / "sweep"
    prepare_sweep_dir(load_sweep(file), sweep)
    shutil.copytree(reference, sweep / "cells" / "one-task-ewc-s0",
                    ignore=shutil.ignore_patterns("ckpt-*", ".lock"))
    write_status(sweep, "one-task-ewc-s0", {"state": "done", "attempts": 1, "errors": []})
    elsewhere = tmp_path / "elsewhere"
    export_sweep(sweep, elsewhere)
    with small_disk(tmp_path / "disk", "8k") as disk:
        dest = disk / "export"
        fails(["sweep", "export", str(sweep), str(dest)], capsys, "No space left on device")
        remount(disk, "size=4m")
        assert main(["sweep", "export", str(sweep), str(dest)]) == 0
        for path in elsewhere.rglob("*"):
            if path.is_file() and path.name != "cells.json":
                assert path.read_bytes() == (dest / path.relative_to(elsewhere)).read_bytes()
        stored = json.loads((dest / "cells.json").read_text())
        assert stored["cells"] == json.loads((elsewhere / "cells.json").read_text())["cells"]
        assert not [p for p in (dest / "cells").iterdir() if p.name.startswith(".")]


def test_a_report_on_a_full_disk_leaves_the_earlier_one_whole(tmp_path):
    doc = Document("t", ["x" * 4000], [])
    with small_disk(tmp_path / "disk", "32k") as disk:
        out = disk / "report"
        write_report(Document("t", ["short"], []), out)
        before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
        filler = disk / "filler"
        with pytest.raises(OSError), filler.open("wb") as f:  # noqa: PT012 - fill the disk
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        with pytest.raises(OSError, match="No space left"):
            write_report(doc, out)
        assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "report"]
        filler.unlink()
        write_report(doc, out)
        assert "x" * 4000 in (out / "report.md").read_text()


