"""Symbolic links inside run and sweep directories are not followed (a probe: ``sweep
export`` copied an outside file linked as a cell's ``starts.csv`` into the export as a
regular file; with ``policies`` linked outside, a resume overwrote a user's file outside
the run). Each is refused in one line naming the link, and nothing outside is touched."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from telapa.cli import main
from telapa.continual.rundir import RunDir, RunDirError

from .conftest import FAULT_RUN, ONE_TASK, RUN, fails


def test_a_linked_policies_folder_is_never_written_through(tmp_path):
    run = tmp_path / "run"
    assert main([*RUN, "--seed", "0", "--out", str(run)]) == 0
    outside = tmp_path / "mine"
    outside.mkdir()
    (outside / "00-end.npz").write_bytes(b"a user's file")
    shutil.rmtree(run / "policies")
    (run / "policies").symlink_to(outside)
    with pytest.raises(RunDirError, match=r"policies is a symbolic link \(to .*mine\)"):
        RunDir(run).save_policy(0, {"w": np.zeros(2)})
    with pytest.raises(RunDirError, match="symbolic link"):
        RunDir(run).load_policy(0, {"w": np.zeros(2)})
    assert (outside / "00-end.npz").read_bytes() == b"a user's file"


def test_a_linked_result_file_is_not_exported(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n"
                     "seeds: [0]\n")
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "--out", str(out)]) == 0
    (cell,) = (out / "cells").iterdir()
    secret = tmp_path / "secret.csv"
    secret.write_text("visit,tag\n0,not yours\n")
    (cell / "starts.csv").unlink()
    (cell / "starts.csv").symlink_to(secret)
    dest = tmp_path / "export"
    fails(["sweep", "export", str(out), str(dest)], capsys,
          f"{cell / 'starts.csv'} is a symbolic link")
    assert not dest.exists()
