"""Atomic writes: content roundtrips, a crash at any point leaves the old file or the new one
and never a partial target, and leftovers of a killed writer are ignored then cleaned."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from telapa.io import (
    atomic_open,
    read_json,
    write_bytes_atomic,
    write_json_atomic,
    write_table_atomic,
    write_text_atomic,
)


def test_json_roundtrip(tmp_path):
    path = tmp_path / "m.json"
    obj = {
        "b": 1,
        "a": [1.5, float("nan"), float("inf")],
        "np": np.float32(0.5),
        "arr": np.arange(3),
        "nested": {"ok": True, "none": None},
        "path": tmp_path,
    }
    write_json_atomic(path, obj)
    text = path.read_text()
    assert text.endswith("}\n") and text.index('"b"') < text.index('"a"')  # keeps key order
    assert text.startswith('{\n  "b": 1,')  # indent 2
    back = read_json(path, "metrics")
    assert back["b"] == 1 and back["a"][0] == 1.5 and math.isnan(back["a"][1])
    assert back["a"][2] == math.inf and back["np"] == 0.5 and back["arr"] == [0, 1, 2]
    assert back["nested"] == {"ok": True, "none": None} and back["path"] == str(tmp_path)


def test_unserialisable_json_leaves_old_file(tmp_path):
    path = tmp_path / "m.json"
    write_json_atomic(path, {"v": 1})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"v": object()})
    assert read_json(path, "metrics") == {"v": 1}
    assert os.listdir(tmp_path) == ["m.json"]


def test_read_json_errors_name_the_file(tmp_path):
    missing = tmp_path / "run.json"
    with pytest.raises(FileNotFoundError, match=rf"run manifest file {missing} does not exist"):
        read_json(missing, "run manifest")
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": 1,')
    with pytest.raises(ValueError, match=rf"run manifest file {bad} is corrupt"):
        read_json(bad, "run manifest")
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="is corrupt"):
        read_json(bad, "run manifest")


def test_text_bytes_and_table(tmp_path):
    write_text_atomic(tmp_path / "t.txt", "héllo\nwörld\n")
    assert (tmp_path / "t.txt").read_text(encoding="utf-8") == "héllo\nwörld\n"
    write_bytes_atomic(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    df = pd.DataFrame({"task": ["A", "B"], "sr": [0.5, 1.0], "step": [10, 20]})
    write_table_atomic(tmp_path / "t.csv", df)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "t.csv"), df)
    write_table_atomic(tmp_path / "t.csv", df.iloc[:1])
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "t.csv"), df.iloc[:1])
    assert sorted(os.listdir(tmp_path)) == ["b.bin", "t.csv", "t.txt"]


def test_new_file_gets_default_permissions(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    write_text_atomic(tmp_path / "f", "x")
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o666 & ~umask


def _fail(*args, **kwargs):
    raise OSError("simulated crash")


@pytest.mark.parametrize("step", ["replace", "fsync"])
def test_crash_keeps_old_file(tmp_path, monkeypatch, step):
    path = tmp_path / "state.json"
    write_json_atomic(path, {"version": "old"})
    monkeypatch.setenv("TELAPA_FSYNC", "on")  # the suite runs with it off (conftest.py)
    monkeypatch.setattr(os, step, _fail)
    with pytest.raises(OSError, match="simulated crash"):
        write_json_atomic(path, {"version": "new", "big": list(range(10_000))})
    monkeypatch.undo()
    assert read_json(path, "state") == {"version": "old"}
    assert os.listdir(tmp_path) == ["state.json"]


@pytest.mark.parametrize(("setting", "synced"), [
    ("on", True), ("", True), ("1", True), ("YES", True), ("true", True),
    ("off", False), ("0", False), ("false", False), ("No", False)])
def test_telapa_fsync_off_skips_only_the_fsyncs(tmp_path, monkeypatch, setting, synced):
    calls = []
    monkeypatch.setenv("TELAPA_FSYNC", setting)
    monkeypatch.setattr(os, "fsync", calls.append)
    write_json_atomic(tmp_path / "a.json", {"x": 1})
    assert bool(calls) is synced  # the file, then its folder
    assert read_json(tmp_path / "a.json", "a") == {"x": 1}
    assert os.listdir(tmp_path) == ["a.json"]


def test_crash_without_old_file_leaves_no_target(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "replace", _fail)
    with pytest.raises(OSError):
        write_bytes_atomic(tmp_path / "new.bin", b"data")
    assert os.listdir(tmp_path) == []


def test_exception_inside_block_leaves_target(tmp_path):
    path = tmp_path / "x.bin"
    write_bytes_atomic(path, b"old")
    with pytest.raises(RuntimeError), atomic_open(path) as f:
        f.write(b"partial")
        raise RuntimeError("writer failed")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["x.bin"]


KILLED_WRITER = """
import os, signal, sys
from telapa.io import atomic_open
with atomic_open(sys.argv[1]) as f:
    f.write(b"partial new content")
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_killed_writer_leftover_is_ignored_then_cleaned(tmp_path):
    path = tmp_path / "state.json"
    write_json_atomic(path, {"version": "old"})
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], check=False)
    assert proc.returncode == -signal.SIGKILL
    leftovers = [n for n in os.listdir(tmp_path) if n != "state.json"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".state.json.")
    assert leftovers[0].endswith(".tmp")
    assert read_json(path, "state") == {"version": "old"}
    assert [p.name for p in tmp_path.glob("*.json")] == ["state.json"]  # hidden from globs
    # A leftover of a live process (ours) is kept; the dead writer's is removed.
    live = tmp_path / f".state.json.{os.getpid()}.0123abcd.tmp"
    live.write_bytes(b"in flight")
    write_json_atomic(path, {"version": "new"})
    assert read_json(path, "state") == {"version": "new"}
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, "state.json"])
