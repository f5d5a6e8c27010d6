"""Destinations that cannot take what is written there: a mount point (a report, a sweep
or an export is built next to its place and renamed there, and nothing can be renamed
onto a mount point) and a read-only export. Refused in one line before any work, and
nothing there is touched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from telapa.continual.sweep import export_sweep, load_sweep, prepare_sweep_dir

from .conftest import FAULT_RUN, ONE_TASK, fails, small_disk

SWEEP = f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\nseeds: [0]\n"


@pytest.fixture
def mount_point(tmp_path, monkeypatch) -> Path:
    """An empty directory that `os.path.ismount` says is a mount point (as a real one
    is: the real case is `test_a_real_read_only_mount_point_is_refused`)."""
    path = tmp_path / "mnt"
    path.mkdir()
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: Path(p) == path or real(p))
    return path


@pytest.fixture
def sweep_dir(tmp_path) -> tuple[Path, Path]:
    """A sweep file and its (new) sweep directory."""
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    out = tmp_path / "sweep"
    prepare_sweep_dir(load_sweep(path), out)
    return path, out


def test_a_mount_point_is_refused_as_a_report_destination(tmp_path, capsys, mount_point):
    """``report --out M`` (M a mount point) built the whole report, then "Device or
    resource busy". Refused first: the run given does not even exist."""
    fails(["report", str(tmp_path / "no-such-run"), "--out", str(mount_point)], capsys,
          f"{mount_point} is a mount point", f"--out {mount_point / 'report'}")
    assert list(mount_point.iterdir()) == []


def test_a_mount_point_is_refused_as_a_sweep_or_export_directory(sweep_dir, capsys,
                                                                 mount_point):
    """``sweep export SRC M`` and ``sweep FILE --out M``: one line naming M, M untouched
    (before, "Device or resource busy" once the directory was built)."""
    path, out = sweep_dir
    fails(["sweep", "export", str(out), str(mount_point)], capsys,
          f"export directory {mount_point} is a mount point", "inside it")
    fails(["sweep", str(path), "--out", str(mount_point)], capsys,
          f"sweep directory {mount_point} is a mount point", "inside it")
    assert list(mount_point.iterdir()) == []
    assert not [p for p in mount_point.parent.iterdir() if p.name.startswith(".mnt")]


def test_a_read_only_export_is_refused_before_copying(sweep_dir, capsys, monkeypatch):
    """An earlier export that can no longer be written (a read-only mount) is refused up
    front, not after the comparison of every cell."""
    _, out = sweep_dir
    dest = out.parent / "export"
    export_sweep(out, dest)
    before = sorted(p.name for p in dest.rglob("*"))
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != dest
                        and real(p, mode, **kw))
    fails(["sweep", "export", str(out), str(dest)], capsys,
          f"cannot write export directory {dest} (read-only)")
    assert sorted(p.name for p in dest.rglob("*")) == before


def test_a_real_read_only_mount_point_is_refused(tmp_path, capsys, sweep_dir):
    """A read-only tmpfs as ``--out`` of a report and as an export (root only; skipped
    elsewhere with the reason)."""
    _, out = sweep_dir
    with small_disk(tmp_path / "ro", "1m", read_only=True) as ro:
        fails(["report", str(tmp_path / "no-such-run"), "--out", str(ro)], capsys,
              f"{ro} is a mount point")
        fails(["sweep", "export", str(out), str(ro)], capsys,
              f"export directory {ro} is a mount point")
