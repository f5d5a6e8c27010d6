"""Each kind of file the project reads, damaged: one line naming the file (and, for a
table, the line and column), never a traceback (issue 28, fault 6: ``post_sr=abc`` in
visits.csv was a traceback in ``telapa metrics``, ``post_sr=7.5`` was read and Mean SR
printed 3.75). Checkpoint files: test_checkpoints.py; YAML inputs: test_named_errors.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from telapa.cli import main
from telapa.continual.sweep import load_sweep, prepare_sweep_dir, write_status

from .conftest import FAULT_RUN, ONE_TASK, fails

RUN_FILES = ["run.json", "config.yaml", "curriculum.yaml", "visits.csv", "curve.csv",
             "final.csv", "accounting.json"]
"""What ``telapa metrics`` and ``telapa report`` read of a run directory."""
DAMAGE = {
    "empty": lambda data: b"",
    "truncated": lambda data: data[: len(data) // 2],
    "binary": lambda data: b"\x00\xff\xfe" + data[3:],
    "not utf-8": lambda data: data[:10] + b"\xc3\x28" + data[12:],
}


@pytest.fixture(scope="module")
def results(reference, tmp_path_factory) -> Path:
    """The reference run's results (no checkpoints), to copy and damage."""
    out = tmp_path_factory.mktemp("results") / "run"
    shutil.copytree(reference, out, ignore=shutil.ignore_patterns("ckpt-*", ".lock"))
    return out


@pytest.fixture(scope="module")
def scores(results) -> dict:
    import contextlib
    import io

    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert main(["metrics", str(results), "--json"]) == 0
    return json.loads(text.getvalue())


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("name", RUN_FILES)
def test_a_damaged_run_file_is_named(results, tmp_path, capsys, name, damage):
    run = tmp_path / "run"
    shutil.copytree(results, run)
    path = run / name
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    fails(["metrics", str(run)], capsys, name)


@pytest.mark.parametrize(("column", "value", "says"), [
    ("post_sr", "abc", "is not a success rate in [0, 1]"),
    ("post_sr", "7.5", "is not a success rate in [0, 1]"),
    ("pre_sr", "-0.1", "is not a success rate in [0, 1]"),
    ("train_steps", "-3", "is not a non-negative integer"),
    ("train_steps", "2.5", "is not a non-negative integer"),
    ("post_return", "inf", "is not a finite number"),
])
def test_table_values_are_range_checked(results, tmp_path, capsys, column, value, says):
    """Fault 6: values are checked when a table is read, naming file, line and column."""
    run = tmp_path / "run"
    shutil.copytree(results, run)
    visits = pd.read_csv(run / "visits.csv", dtype=str)
    visits.loc[1, column] = value
    visits.to_csv(run / "visits.csv", index=False)
    line = fails(["metrics", str(run)], capsys, f"{run / 'visits.csv'}, line 3, column "
                                                f"{column}: '{value}' {says}")
    assert "Traceback" not in line


def test_curve_and_final_values_are_checked(results, tmp_path, capsys):
    for name, column in (("curve", "sr"), ("final", "sr"), ("curve", "global_step")):
        run = tmp_path / f"{name}-{column}"
        shutil.copytree(results, run)
        table = pd.read_csv(run / f"{name}.csv", dtype=str)
        table.loc[0, column] = "1e9" if column == "sr" else "-1"
        table.to_csv(run / f"{name}.csv", index=False)
        fails(["metrics", str(run)], capsys, f"{name}.csv, line 2, column {column}")


def test_an_accounting_value_that_is_not_a_number_is_named(results, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(results, run)
    accounting = json.loads((run / "accounting.json").read_text())
    accounting["wall_s"] = "abc"
    (run / "accounting.json").write_text(json.dumps(accounting))
    fails(["metrics", str(run)], capsys, "accounting.json: wall_s is 'abc'")


def test_an_undamaged_copy_scores_the_same(results, tmp_path, scores, capsys):
    """The control: copying the results changes nothing."""
    run = tmp_path / "run"
    shutil.copytree(results, run)
    capsys.readouterr()
    assert main(["metrics", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == scores


@pytest.fixture
def sweep_dir(tmp_path) -> Path:
    """A sweep directory of the suite's run, one cell holding the reference's results."""
    file = tmp_path / "s.yaml"
    file.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n")
    out = tmp_path / "sweep"
    prepare_sweep_dir(load_sweep(file), out)
    return out


@pytest.mark.parametrize("damage", ["binary", "truncated", "empty"])
@pytest.mark.parametrize("name", ["cells.json", "status/one-task-ewc-s0.json"])
def test_damaged_sweep_files_are_named(sweep_dir, results, tmp_path, capsys, name, damage):
    shutil.copytree(results, sweep_dir / "cells" / "one-task-ewc-s0")
    write_status(sweep_dir, "one-task-ewc-s0", {"state": "done", "attempts": 1,
                                                "errors": []})
    path = sweep_dir / name
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    leaf = Path(name).name
    fails(["sweep", "status", str(sweep_dir)], capsys, leaf)
    fails(["sweep", "export", str(sweep_dir), str(tmp_path / "export")], capsys, leaf)
    if name == "cells.json":
        fails(["metrics", str(sweep_dir)], capsys, leaf)
        fails(["sweep", str(tmp_path / "s.yaml"), "--out", str(sweep_dir)], capsys, leaf)
