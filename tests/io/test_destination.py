"""`destination_problem`: the one destination check of runs, sweeps, exports and reports."""

from __future__ import annotations

import os

import pytest

from telapa.io.destination import destination_problem

CHOOSE = "choose another --out"


def test_a_new_or_existing_directory_is_no_problem(tmp_path):
    assert destination_problem(tmp_path / "new" / "deeper", what="run directory",
                               choose=CHOOSE) is None
    assert destination_problem(tmp_path, what="run directory", choose=CHOOSE,
                               renamed_into_place=True) is None


def test_a_file_is_named_with_what_to_do(tmp_path):
    (tmp_path / "f").write_text("mine")
    assert destination_problem(tmp_path / "f", what="sweep directory", choose=CHOOSE) == (
        f"sweep directory {tmp_path / 'f'} exists and is not a directory; {CHOOSE}")


@pytest.mark.parametrize("below", [False, True])
def test_a_link_that_leads_nowhere_is_named_also_above_the_place(tmp_path, below):
    os.symlink(tmp_path / "gone", tmp_path / "link")
    place = tmp_path / "link" / "run" if below else tmp_path / "link"
    problem = destination_problem(place, what="run directory", choose=CHOOSE)
    assert problem.startswith(f"cannot use run directory {place}: ")
    assert str(tmp_path / "link") in problem and problem.endswith(f"remove the link or {CHOOSE}")


def test_a_mount_point_only_where_the_directory_is_renamed_into_place(tmp_path, monkeypatch):
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: str(p) == str(tmp_path) or real(p))
    assert destination_problem(tmp_path, what="report directory", choose=CHOOSE) is None
    assert destination_problem(tmp_path, what="report directory", choose=CHOOSE,
                               renamed_into_place=True, example="--out X/report") == (
        f"report directory {tmp_path} is a mount point, which cannot be replaced by a "
        "directory renamed into place; choose a new directory inside it, e.g. --out X/report")
