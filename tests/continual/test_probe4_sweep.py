"""`telapa sweep status` and `telapa sweep export` on exports, as a new researcher's probe
found them (faults 4, 16, 17 and the sweep parts of 19):

- the status of an export still running elsewhere said "34 done ... 0 left", though its
  cells.json says the sweep has 90 cells; re-exporting an export wrote of_cells 34;
- a seed batch's partner cells were exported with the status file they had before the
  sweep recorded their end ("queued", 0 attempts), and status showed them done with 0
  attempts;
- a cell removed from an export was shown "left", with cell time left, not as damage;
- status of a path that does not exist said "no cells.json"; ``telapa sweep statsu DIR``
  printed a usage line that did not name ``statsu``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from telapa.cli import main
from telapa.continual.rundir import RunDirError
from telapa.continual.sweep import (
    export_sweep,
    exported_cell_state,
    load_sweep,
    read_status,
    run_sweep,
    tries_ended,
    write_status,
)

from .sweep_cells import complete_cell

HERE = Path(__file__).parent
BASE = (f"preset: {HERE / 'tiny_run.yaml'}\ncurricula: [smoke]\nmethods: [ewc]\n"
        "seeds: 3\n")
NAMES = ["smoke-ewc-s0", "smoke-ewc-s1", "smoke-ewc-s2"]


def _sweep(tmp_path: Path, seeds: int = 3):
    path = tmp_path / "s.yaml"
    path.write_text(BASE.replace("seeds: 3", f"seeds: {seeds}"))
    return load_sweep(path)


class Backend:
    """Completes every cell (without running anything); with ``batch``, as a seed batch
    does: every cell of a job finishes before any is reported."""

    describe = "fake"

    def __init__(self, skip: tuple[str, ...] = ()):
        self.skip = skip

    def run(self, sweep_dir, jobs):
        for job in jobs:
            outcomes = []
            for cell in job:
                if cell.name in self.skip:
                    outcomes.append((cell.name, {"ok": False, "error": "not run"}))
                    continue
                complete_cell(sweep_dir / "cells" / cell.name)
                outcomes.append((cell.name, {"ok": True}))
            yield from outcomes


def _rows(text: str) -> dict[str, list[str]]:
    """The status table's rows: cell name -> its cells (state, progress, wall, attempts,
    last error), the first line of each row."""
    rows = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("│")]
        if len(parts) > 2 and parts[1] in NAMES:
            rows[parts[1]] = parts[2:-1]
    return rows


def _status(path: Path, capsys) -> str:
    capsys.readouterr()
    assert main(["sweep", "status", str(path)]) == 0
    return " ".join(capsys.readouterr().out.split(" "))


def _partial_export(tmp_path: Path) -> tuple[Path, Path]:
    """A sweep of 3 cells of which 2 are done, and their export."""
    out, dest = tmp_path / "out", tmp_path / "results"
    run_sweep(_sweep(tmp_path), out, Backend(skip=("smoke-ewc-s2",)))
    export_sweep(out, dest)
    return out, dest


# --- fault 4: an export's status counts its sweep's cells ----------------------------


def test_status_of_a_partial_export_says_how_many_of_the_sweeps_cells_it_holds(
        tmp_path, capsys):
    """2 of a sweep's 3 cells exported: status says so, and that 1 is not exported; it
    does not count the export's cells as the whole sweep ("0 left") nor estimate the cell
    time left from what it cannot see."""
    out, dest = _partial_export(tmp_path)
    assert json.loads((dest / "cells.json").read_text())["of_cells"] == 3
    text = _status(dest, capsys)
    assert "2 of 3 cells exported, all done; 1 not exported" in text
    assert "0 left" not in text and "of cell time left" not in text
    assert "not estimated from an export" in text and str(out) in text
    assert [r[0] for r in _rows(text).values()] == ["done", "done"]
    nothing = tmp_path / "nothing"  # an export made before any cell was done
    run_sweep(_sweep(tmp_path), tmp_path / "new", Backend(skip=tuple(NAMES)))
    export_sweep(tmp_path / "new", nothing)
    text = _status(nothing, capsys)
    assert "0 of 3 cells exported; 3 not exported" in text and "all done" not in text
    # every cell exported: nothing said about cells not exported or time left
    (out / "status" / "smoke-ewc-s2.json").unlink()
    complete_cell(out / "cells" / "smoke-ewc-s2")
    export_sweep(out, dest)
    text = _status(dest, capsys)
    assert "3 of 3 cells exported, all done" in text
    assert "not exported" not in text and "cell time left" not in text


def test_re_exporting_an_export_keeps_its_sweeps_cell_count_and_directory(tmp_path, capsys):
    """`telapa sweep export EXPORT DEST`: DEST's of_cells is the sweep's (3), not the
    export's (2), and it names the sweep's directory, which the export's did."""
    out, dest = _partial_export(tmp_path)
    again = tmp_path / "again"
    assert main(["sweep", "export", str(dest), str(again)]) == 0
    meta = json.loads((again / "cells.json").read_text())
    assert meta["of_cells"] == 3 and meta["exported_from"] == str(out)
    assert [c["name"] for c in meta["cells"]] == NAMES[:2]
    assert "2 of 3 cells exported, all done; 1 not exported" in _status(again, capsys)


# --- fault 16: a seed batch's cells all record their end ------------------------------


def test_a_seed_batchs_cells_are_exported_with_their_end_recorded(tmp_path, capsys):
    """A seed batch finishes all its cells before reporting any: each exported status
    file says done with 1 attempt (the first cell's export copied its partners' as they
    were, queued with 0 attempts), and status shows 1 attempt for each."""
    out, dest = tmp_path / "out", tmp_path / "results"
    events: list[str] = []
    counts = run_sweep(_sweep(tmp_path), out, Backend(), batch_seeds=True, export=dest,
                       on_event=events.append)
    assert counts["done"] == 3
    for where in (out, dest):
        for name in NAMES:
            status = read_status(where, name)
            assert (status["state"], status["attempts"]) == ("done", 1), (where, name)
    assert [e for e in events if e.startswith("exported")] == [
        f"exported {', '.join(NAMES)} to {dest}"]
    assert {name: row[:1] + row[3:4] for name, row in _rows(_status(dest, capsys)).items()
            } == dict.fromkeys(NAMES, ["done", "1"])


def test_status_reads_an_older_exports_unrecorded_batch_cells_as_done_once(tmp_path,
                                                                          capsys):
    """Exports written before that fix hold partner cells whose status says queued with
    0 attempts although their run is complete: status shows them done, with the try that
    ended counted (1; a recorded earlier failure makes it 2), as `run_sweep` records
    such a cell."""
    _, dest = _partial_export(tmp_path)
    write_status(dest, "smoke-ewc-s0", {"state": "queued", "attempts": 0, "started": 1.0})
    write_status(dest, "smoke-ewc-s1", {"state": "queued", "attempts": 1, "errors": [
        {"attempt": 1, "error": "boom"}]})
    rows = _rows(_status(dest, capsys))
    assert rows["smoke-ewc-s0"][0] == "done" and rows["smoke-ewc-s0"][3] == "1"
    assert rows["smoke-ewc-s1"][0] == "done" and rows["smoke-ewc-s1"][3] == "2"
    assert tries_ended("done", {"state": "done", "attempts": 1}) == 1
    assert tries_ended("failed", {"state": "failed", "attempts": 2}) == 2
    assert tries_ended("left", {"state": "queued", "attempts": 0}) == 0


# --- fault 17: a cell an export has lost is damage, not work left -------------------


def test_an_exports_missing_or_damaged_cell_is_named_not_counted_left(tmp_path, capsys,
                                                                       monkeypatch):
    """An export holds done cells only: one it lists but has lost (its folder removed,
    or its run not complete) is named missing or damaged, with what is wrong, not "left"
    with cell time left to run it."""
    monkeypatch.setenv("COLUMNS", "400")  # the last error column unfolded
    out, dest = tmp_path / "out", tmp_path / "results"
    run_sweep(_sweep(tmp_path), out, Backend())
    export_sweep(out, dest)
    shutil.rmtree(dest / "cells" / "smoke-ewc-s1")
    (dest / "cells" / "smoke-ewc-s2" / "run.json").write_text(json.dumps(
        {"format": "telapa-run", "version": 1, "status": "running"}))
    assert exported_cell_state(dest, "smoke-ewc-s0") == ("done", "")
    state, problem = exported_cell_state(dest, "smoke-ewc-s1")
    assert state == "missing" and str(dest / "cells" / "smoke-ewc-s1") in problem
    state, problem = exported_cell_state(dest, "smoke-ewc-s2")
    assert state == "damaged" and "'running', not complete" in problem
    text = _status(dest, capsys)
    rows = _rows(text)
    assert [rows[n][0] for n in NAMES] == ["done", "missing", "damaged"]
    assert "is not there" in rows["smoke-ewc-s1"][4]
    assert "3 of 3 cells exported: 1 done, 1 missing, 1 damaged" in text
    assert ("damaged export: it lists 2 cell(s) it does not hold whole (smoke-ewc-s1, "
            "smoke-ewc-s2") in text
    assert "left" not in text.replace("last error", "")


# --- fault 19: a path that does not exist; a misspelt sweep command -----------------


def test_status_and_export_of_a_path_that_does_not_exist_say_so(tmp_path, capsys):
    missing = tmp_path / "results" / "table1-papr"
    with pytest.raises(SystemExit):
        main(["sweep", "status", str(missing)])
    err = capsys.readouterr().err
    assert f"sweep directory {missing} does not exist" in err and "cells.json" not in err
    with pytest.raises(RunDirError, match=f"sweep directory {missing} does not exist"):
        export_sweep(missing, tmp_path / "dest")
    (tmp_path / "plain").mkdir()  # there, but no sweep: as before
    with pytest.raises(SystemExit):
        main(["sweep", "status", str(tmp_path / "plain")])
    assert "is not a sweep directory (no cells.json)" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["statsu", "DIR"], "unknown sweep command 'statsu'; did you mean 'status'?"),
    (["statsu"], "unknown sweep command 'statsu'; did you mean 'status'?"),
    (["exprot", "DIR", "DEST"], "unknown sweep command 'exprot'; did you mean 'export'?"),
    (["frobnicate", "DIR"], "'frobnicate' is not a sweep command (status, export)"),
])
def test_a_misspelt_sweep_command_is_named_in_one_line(args, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["sweep", *args])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1
    assert message in err and "telapa sweep status DIR" in err
