"""`pytest --timeline` (tests/timeline.py): each test phase's worker, start and stop, and
each worker's idle time and gaps, checked by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from timeline import Phase, main, read, summarize

HERE = Path(__file__).resolve().parent


def _phase(worker, nodeid, when, start, stop):
    return Phase(worker, nodeid, when, float(start), float(stop))


def test_idle_time_and_gaps_by_hand():
    """The suite spans 100 to 130. gw0 works 100-110 and 111-130 (a 1 s hand-off, not a
    gap at min_gap_s 2): busy 29, idle 1. gw1 waits 100-112 (a fixture being made
    elsewhere), works 112-120, then 119-125 overlapping (counted once), idle to 130:
    busy 13, idle 17, gaps 12 at its start and 5 at the end."""
    phases = [_phase("gw0", "a", "setup", 100, 110), _phase("gw0", "a", "call", 111, 130),
              _phase("gw1", "b", "setup", 112, 120), _phase("gw1", "b", "call", 119, 125)]
    summary = summarize(phases, min_gap_s=2.0)
    assert summary.wall_s == 30.0 and summary.begin == 100.0
    assert summary.busy_s == {"gw0": 29.0, "gw1": 13.0}
    assert summary.idle_s == {"gw0": 1.0, "gw1": 17.0}
    assert [(g.worker, g.start, g.seconds, g.before, g.after) for g in summary.gaps] == [
        ("gw1", 100.0, 12.0, "(the suite's start)", "b (setup)"),
        ("gw1", 125.0, 5.0, "b (call)", "(the suite's end)")]
    with pytest.raises(ValueError, match="no test phases"):
        summarize([])


def test_the_option_writes_every_phase_of_every_test(tmp_path, capsys):
    """A session of two tests with ``--timeline``: six lines (setup, call and teardown of
    each), in the order they ran, each inside the session's own clock; the summary
    prints the worker's busy time."""
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(HERE)!r})\n"
        "from timeline import add_option, configure\n"
        "def pytest_addoption(parser):\n    add_option(parser)\n"
        "def pytest_configure(config):\n    configure(config)\n")
    (tmp_path / "test_two.py").write_text(
        "import time\ndef test_a():\n    time.sleep(0.2)\ndef test_b():\n    pass\n")
    out = tmp_path / "timeline.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "--rootdir", str(tmp_path), str(tmp_path),
                           "--timeline", str(out)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    phases = read(out)
    assert [(p.nodeid.split("::")[1], p.when) for p in phases] == [
        (t, w) for t in ("test_a", "test_b") for w in ("setup", "call", "teardown")]
    assert all(p.worker == "main" and p.start <= p.stop for p in phases)
    assert all(a.stop <= b.start + 1e-3 for a, b in zip(phases, phases[1:], strict=False))
    assert phases[1].stop - phases[1].start >= 0.2  # test_a's call slept 0.2 s
    assert all(set(json.loads(line)) == {"worker", "nodeid", "when", "start", "stop"}
               for line in out.read_text().splitlines())
    assert main([str(out)]) == 0
    assert "main: busy" in capsys.readouterr().out


def _project(root: Path) -> Path:
    """A project whose tests pytest finds by ``testpaths`` (no path on the command line,
    as ``make test`` runs): two tests of 0.2 s each."""
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (root / "tests" / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(HERE)!r})\n"
        "from timeline import add_option, configure\n"
        "def pytest_addoption(parser):\n    add_option(parser)\n"
        "def pytest_configure(config):\n    configure(config)\n")
    (root / "tests" / "test_two.py").write_text(
        "import time\ndef test_a():\n    time.sleep(0.2)\ndef test_b():\n    time.sleep(0.2)\n")
    return root


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], capture_output=True, text=True, cwd=project, timeout=120)


def test_xdist_workers_write_with_the_path_after_a_space(tmp_path):
    """``pytest -n N --timeline PATH``, PATH outside the project: the workers' lines reach
    the file. When the file was made at the session's start, each worker took PATH for a
    test path, rooted itself in PATH's folder and stopped ("unrecognized arguments")."""
    project = _project(tmp_path / "project")
    out = tmp_path / "elsewhere" / "timeline.jsonl"
    done = _pytest(project, "-n", "1", "--timeline", str(out))  # one worker shows it
    assert done.returncode == 0, done.stdout + done.stderr
    phases = read(out)
    assert sorted((p.nodeid, p.when) for p in phases) == sorted(
        (f"tests/test_two.py::{t}", w) for t in ("test_a", "test_b")
        for w in ("setup", "call", "teardown"))
    assert {p.worker for p in phases} == {"gw0"}


def test_a_path_that_exists_is_refused_before_any_test_runs(tmp_path):
    project = _project(tmp_path / "project")
    out = tmp_path / "mine.txt"
    out.write_text("not a timeline\n")
    done = _pytest(project, "-p", "no:xdist", f"--timeline={out}")
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert f"--timeline {out}: the file exists" in done.stderr
    assert "passed" not in done.stdout and out.read_text() == "not a timeline\n"
