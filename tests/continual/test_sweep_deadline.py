"""``telapa sweep --until``: only jobs expected to end by the deadline are started, the
longest that fits first (`telapa.continual.sweep.deadline`)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from telapa.cli import main
from telapa.continual.sweep import LocalBackend, load_sweep, prepare_sweep_dir, run_sweep
from telapa.continual.sweep.deadline import DeadlineQueue, JobQueue, parse_until
from telapa.continual.sweep.grammar import Cell
from telapa.continual.sweep.status import CellEstimate

from .sweep_cells import complete_cell

HERE = Path(__file__).parent
NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


@pytest.mark.parametrize("text, seconds", [
    ("2h30m", 9000), ("90m", 5400), ("1.5h", 5400), ("45s", 45), ("1d2h", 93600),
    (" 10m ", 600),
])
def test_until_as_a_duration(text, seconds):
    assert parse_until(text, now=NOW) == NOW + seconds


@pytest.mark.parametrize("text", ["2027-01-15T10:20Z", "2027-01-15T10:20:00+00:00",
                                  "2027-01-15T11:20+01:00"])
def test_until_as_an_iso_time(text):
    assert parse_until(text, now=NOW) == NOW + 2 * 3600 + 20 * 60


@pytest.mark.parametrize("text, says", [
    ("2027-01-15T10:20", "no UTC offset"),
    ("tomorrow", "neither a duration"),
    ("2h30", "neither a duration"),
    ("0m", "positive duration"),
    ("2027-01-15T07:59Z", "already past"),
])
def test_until_refuses(text, says):
    with pytest.raises(ValueError, match=says):
        parse_until(text, now=NOW)


def _cell(name: str) -> Cell:
    return Cell(name=name, curriculum=None, method="scratch", seed=0, overrides={},
                config=None, preset="p")


def _estimates(seconds: dict[str, float], started: tuple[str, ...] = ()
               ) -> dict[str, CellEstimate]:
    """Cells estimated by the finished cells like them (rule 1), or not at all (nan),
    or, those named in ``started``, by their own pace."""
    return {name: CellEstimate(s, "started" if name in started else
                               "unknown" if math.isnan(s) else "same")
            for name, s in seconds.items()}


def _queue(seconds: dict[str, float], *, left_s: float, events: list[str],
           now: list[float] | None = None, started: tuple[str, ...] = ()) -> DeadlineQueue:
    clock = now if now is not None else [NOW]
    estimates = _estimates(seconds, started)
    return DeadlineQueue([[_cell(n)] for n in seconds], until=NOW + left_s,
                         estimates=lambda: estimates, clock=lambda: clock[0],
                         on_event=events.append)


def test_the_longest_job_that_fits_goes_first():
    """Estimates 1 h, 3 h, 2 h, 0.5 h with 2.5 h left: 2 h first (3 h does not fit), then
    1 h, then 0.5 h; the 3 h job is never handed out."""
    events: list[str] = []
    q = _queue({"a": 3600, "b": 3 * 3600, "c": 2 * 3600, "d": 1800}, left_s=2.5 * 3600,
               events=events)
    assert [q.take()[0].name for _ in range(3)] == ["c", "a", "d"]
    assert q.take() is None and q.take() is None
    assert [job[0].name for job in q.pending] == ["b"]
    assert events[-1] == ("--until: 1 job(s) left, none fits: the shortest needs about "
                          "3.0 h, 2.5 h left")
    assert sum("none fits" in e for e in events) == 1  # said once, not at every take


def test_time_passing_shrinks_what_fits():
    """With 2 h left a 1.5 h job fits; an hour later (1 h left) it does not, a 0.75 h one
    does."""
    now = [NOW]
    q = _queue({"long": 1.5 * 3600, "short": 0.75 * 3600, "mid": 1.2 * 3600},
               left_s=2 * 3600, events=[], now=now)
    assert q.take()[0].name == "long"
    now[0] += 3600
    assert q.take()[0].name == "short"
    assert q.take() is None


def test_a_job_not_estimated_goes_first_in_the_sweeps_order():
    events: list[str] = []
    q = _queue({"a": 600, "x": math.nan, "b": 1200, "y": math.nan}, left_s=3600,
               events=events)
    assert [q.take()[0].name for _ in range(4)] == ["x", "y", "b", "a"]
    assert "x: not estimated yet, so it may not finish" in events[0]


def test_a_started_job_that_fits_goes_before_the_jobs_not_started():
    """Resumed with 2.5 h left: partial cells p (0.75 h to go) and q (0.5 h) before the
    unestimated x and the estimated 1 h a, so that the deadline leaves as few partial
    cells as it can (taking x first left three partial where one was needed, the sweep of
    2026-12-06); a started cell that does not fit (r, 3 h) is not started."""
    events: list[str] = []
    q = _queue({"x": math.nan, "a": 3600, "p": 0.75 * 3600, "r": 3 * 3600, "q": 1800},
               left_s=2.5 * 3600, events=events, started=("p", "q", "r"))
    assert [q.take()[0].name for _ in range(4)] == ["p", "q", "x", "a"]
    assert q.take() is None
    assert events[0] == "--until: resuming p: about 45 min, 2.5 h left"
    assert events[2].startswith("--until: starting x: not estimated yet")


def test_an_estimate_from_other_cells_says_what_it_rests_on():
    """A method's first cell, estimated from the other methods' cells (rule 4), says so:
    a long-curriculum TeLAPA cell was started as 'about 1.1 h' and took 1.6-1.9 h; a
    job with cells of several rules names the roughest."""
    events: list[str] = []
    estimates = {"t0": CellEstimate(3960, "other_methods"),
                 "c0": CellEstimate(1800, "other_curricula"),
                 "c1": CellEstimate(1800, "other_settings"),
                 "s0": CellEstimate(600, "same")}
    q = DeadlineQueue([[_cell("t0")], [_cell("c0"), _cell("c1")], [_cell("s0")]],
                      until=NOW + 3 * 3600, estimates=lambda: estimates,
                      clock=lambda: NOW, on_event=events.append)
    assert [q.take()[0].name for _ in range(3)] == ["t0", "c0", "s0"]
    assert events == [
        "--until: starting t0: about 1.1 h (other methods' mean: a method's first cell, "
        "a rough guess), 3.0 h left",
        "--until: starting c0, c1: about 1.0 h (its method under other settings), "
        "3.0 h left",
        "--until: starting s0: about 10 min, 3.0 h left"]


def test_a_seed_batch_counts_the_sum_of_its_cells():
    """A batch of two cells of 0.6 h each (1.2 h) does not fit in 1 h; a lone cell of
    0.9 h does."""
    estimates = _estimates({"s0": 0.6 * 3600, "s1": 0.6 * 3600, "t0": 0.9 * 3600})
    q = DeadlineQueue([[_cell("s0"), _cell("s1")], [_cell("t0")]], until=NOW + 3600,
                      estimates=lambda: estimates, clock=lambda: NOW)
    assert q.take()[0].name == "t0"
    assert q.take() is None


def test_a_plain_queue_hands_out_in_order():
    q = JobQueue([[_cell("a")], [_cell("b")]])
    assert [q.take()[0].name, q.take()[0].name, q.take()] == ["a", "b", None]


# --- a sweep under --until, with local workers ------------------------------------------

SWEEP = (f"preset: {HERE.parent / 'faults' / 'fault_run.yaml'}\n"
         f"curricula: [{HERE / 'one_task_curriculum.yaml'}]\nmethods: [ewc]\n"
         "seeds: [0, 1, 2]\n")
CELLS = ["one-task-ewc-s0", "one-task-ewc-s1", "one-task-ewc-s2"]


def finish_cells(sweep_dir: str, cells: list[dict[str, Any]]) -> list:
    """A job that ends its cells as complete runs of 10 s each, without training
    (module level, so that a spawned worker imports it)."""
    out = []
    for cell in cells:
        complete_cell(Path(sweep_dir) / "cells" / cell["name"], wall_s=10.0)
        out.append((cell["name"], {"ok": True}))
    return out


@pytest.fixture
def sweep_file(tmp_path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    return path


def test_a_sweep_starts_only_what_fits(sweep_file, tmp_path):
    """Seed 0 finished in 2 h, so seeds 1 and 2 are each estimated at 2 h (rule 1 of
    `cell_estimates`): under a 1 h deadline neither starts, the sweep ends at once with
    both left; under 3 h both run (one worker: the second starts after the first's 10 s,
    when 2 h still fit)."""
    out = tmp_path / "sweep"
    sweep = load_sweep(sweep_file)
    prepare_sweep_dir(sweep, out)
    complete_cell(out / "cells" / CELLS[0], wall_s=7200.0)
    events: list[str] = []
    backend = LocalBackend(1, 1, job=finish_cells)
    import time

    counts = run_sweep(sweep, out, backend, until=time.time() + 3600,
                       on_event=events.append)
    assert (counts["done"], counts["left"]) == (1, 2)
    assert any("2 job(s) left, none fits: the shortest needs about 2.0 h" in e
               for e in events), events
    counts = run_sweep(sweep, out, backend, until=time.time() + 3 * 3600,
                       on_event=events.append)
    assert (counts["done"], counts["left"]) == (3, 0)


def test_the_command_exits_75_with_cells_left(sweep_file, tmp_path, capsys):
    out = tmp_path / "sweep"
    prepare_sweep_dir(load_sweep(sweep_file), out)
    complete_cell(out / "cells" / CELLS[0], wall_s=7200.0)
    with pytest.raises(SystemExit) as stop:
        main(["sweep", str(sweep_file), "--out", str(out), "--until", "30m"])
    assert stop.value.code == 75
    err = capsys.readouterr().err
    assert "--until 30m: 2 cell(s) left that would not end in time" in err
    assert not (out / "cells" / CELLS[1]).exists()


@pytest.mark.parametrize("args, says", [
    (["--until", "soon"], "--until: 'soon' is neither a duration"),
    (["--until", "2h", "--backend", "ray"], "--until needs --backend local"),
    (["--until", "2h", "--backend", "slurm"], "give each job --time instead"),
])
def test_the_command_refuses_a_bad_until_before_any_work(sweep_file, tmp_path, capsys,
                                                         args, says):
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as stop:
        main(["sweep", str(sweep_file), "--out", str(out), *args])
    assert stop.value.code == 2
    assert says in capsys.readouterr().err
    assert not out.exists()


def test_the_deadline_is_an_instant(sweep_file):
    """An ISO time names one instant whatever the machine's zone: +01:00 is an hour
    before the same clock reading in UTC."""
    utc = parse_until("2030-01-01T12:00Z", now=0.0)
    assert utc == datetime(2030, 1, 1, 12, tzinfo=UTC).timestamp()
    assert parse_until("2030-01-01T12:00+01:00", now=0.0) == utc - 3600
