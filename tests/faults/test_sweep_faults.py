"""Sweeps under abuse (issue 28, faults 1, 7, 8, 9): a killed sweep takes its workers
with it and its status follows what ran; two sweeps starting on one new directory;
``sweep status`` only reads; a cell is charged only for tries it started."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import signal
from pathlib import Path

import psutil
import pytest

from telapa.cli import main
from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.sweep import (
    LocalBackend,
    load_sweep,
    prepare_sweep_dir,
    read_status,
    run_sweep,
    write_status,
)

from .conftest import (
    FAULT_RUN,
    ONE_TASK,
    assert_same_results,
    kill,
    remount,
    small_disk,
    start_telapa,
    telapa,
    wait_for,
)
from .workers import die_on_seed_0

SWEEP = f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\nseeds: [0, 1]\n"
S0, S1 = "one-task-ewc-s0", "one-task-ewc-s1"


@pytest.fixture
def sweep_file(tmp_path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    return path


def _complete(cell: Path) -> None:
    cell.mkdir(parents=True, exist_ok=True)
    (cell / "run.json").write_text(json.dumps(
        {"format": "telapa-run", "version": 1, "status": "complete"}))


class Finisher:
    """A backend that ends every cell as a complete run (without training)."""

    describe = "finisher"

    def run(self, sweep_dir, jobs):
        for cell in (c for job in jobs for c in job):
            _complete(sweep_dir / "cells" / cell.name)
            yield cell.name, {"ok": True}


def test_a_killed_sweep_takes_its_workers_with_it(sweep_file, tmp_path, reference,
                                                  no_leaked_processes):
    """Fault 1: SIGKILL of ``telapa sweep`` left its worker running the next cell, that
    nobody records, then blocked forever on a pipe; a rerun meanwhile failed ("being run
    by another process") and status stayed ``queued``. The workers die with the sweep; the
    rerun finishes every cell with exactly an uninterrupted run's results."""
    out = tmp_path / "sweep"
    args = ["sweep", str(sweep_file), "--out", str(out), "--threads", "1"]
    proc = start_telapa(*args)
    ckpt = out / "cells" / S0 / "checkpoint.json"
    wait_for(ckpt.exists, proc, what="the first cell's first checkpoint")
    workers = psutil.Process(proc.pid).children(recursive=True)
    assert workers
    kill(proc)
    gone, alive = psutil.wait_procs(workers, timeout=15)
    for p in alive:
        p.kill()
    assert not alive, "a worker outlived the killed sweep"
    done = telapa(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 done" in done.stdout
    assert_same_results(out / "cells" / S0, reference)
    for name in (S0, S1):
        status = read_status(out, name)
        assert (status["state"], status["attempts"], status["errors"]) == ("done", 1, [])


def test_status_follows_a_cell_that_finished_unrecorded(sweep_file, tmp_path):
    """A cell whose run is complete while its status says ``queued`` (its try ended
    unrecorded) is recorded done, with the try counted, by the next sweep."""
    out = tmp_path / "sweep"
    sweep = load_sweep(sweep_file)
    prepare_sweep_dir(sweep, out)
    write_status(out, S0, {"state": "queued", "attempts": 0, "errors": [], "started": 1.0})
    _complete(out / "cells" / S0)
    run_sweep(sweep, out, Finisher())
    assert read_status(out, S0)["state"] == "done"
    assert read_status(out, S0)["attempts"] == 1


def test_a_bystander_cell_is_not_charged_when_a_worker_dies(sweep_file, tmp_path):
    """Fault 9: when one worker died, a cell that never started was failed with attempts 1.
    It is not touched (a new worker takes it up): only the cell that started and died
    has a try."""
    out = tmp_path / "sweep"
    events: list[str] = []
    counts = run_sweep(load_sweep(sweep_file), out, LocalBackend(1, 1, job=die_on_seed_0),
                       on_event=events.append)
    assert counts["done"] == 1 and counts["failed"] == 1
    s0, s1 = read_status(out, S0), read_status(out, S1)
    assert (s0["state"], s0["attempts"]) == ("failed", 1)
    assert "worker process died" in s0["errors"][0]["error"]
    assert (s1["state"], s1["attempts"], s1["errors"]) == ("done", 1, [])
    assert not any(e.startswith("requeued") for e in events), events


def _race(sweep_file: str, base: str, trials: int, barrier, results) -> None:
    sweep = load_sweep(sweep_file)
    for i in range(trials):
        barrier.wait()
        try:
            prepare_sweep_dir(sweep, Path(base) / f"t{i}")
            results.put((i, "ok"))
        except Exception as err:  # noqa: BLE001 - reported to the test
            results.put((i, f"{type(err).__name__}: {err}"))


def test_two_sweeps_starting_on_one_new_directory(sweep_file, tmp_path):
    """Fault 7: two sweeps creating one new directory raced: an uncaught FileExistsError,
    or a misleading "not empty (holds .sweep.yaml.PID.tmp)". Creation is atomic: each
    process finds a whole sweep directory (the same sweep: it goes on) or is told that
    another process is creating it; nothing else, and no temporary left behind."""
    trials = 12
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(sweep_file), str(tmp_path), trials, barrier,
                                             results)) for _ in range(2)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in range(2 * trials)]
    for p in procs:
        p.join(timeout=60)
    for _, text in outcomes:
        assert text == "ok" or (text.startswith("RunDirError: sweep directory")
                                and "is being created by another process" in text), text
    for i in range(trials):  # one of the two at least made (or found) the sweep
        assert (i, "ok") in outcomes
    cells = [c.payload() for c in load_sweep(sweep_file).cells]
    for i in range(trials):
        stored = json.loads((tmp_path / f"t{i}" / "cells.json").read_text())["cells"]
        assert stored == json.loads(json.dumps(cells))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def _partial_sweep(sweep_file: Path, out: Path) -> Path:
    prepare_sweep_dir(load_sweep(sweep_file), out)
    cell = out / "cells" / S0
    (cell / "ckpt-000000").mkdir(parents=True)
    (cell / "run.json").write_text(json.dumps(
        {"format": "telapa-run", "version": 1, "status": "running"}))
    (cell / "ckpt-000000" / "state.json").write_text(json.dumps(
        {"next_phase": 3, "phases": 9, "wall_s": 30.0, "records": {}}))
    (cell / "checkpoint.json").write_text(json.dumps({"latest": "ckpt-000000"}))
    return cell


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in root.rglob("*")}


def _row(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if name in line)


def test_sweep_status_only_reads(sweep_file, tmp_path, capsys):
    """Fault 8: ``sweep status`` created ``.lock`` files in a writable sweep and, on a
    read-only one, showed a partial cell as running. It only reads; a cell is running
    only while a process holds its lock."""
    out = tmp_path / "sweep"
    cell = _partial_sweep(sweep_file, out)
    before = _files(out)
    assert main(["sweep", "status", str(out)]) == 0
    assert "partial" in _row(capsys.readouterr().out, S0)
    assert _files(out) == before
    holder = RunDir(cell)
    holder.lock()  # another open file: as another process holding the run
    try:
        assert main(["sweep", "status", str(out)]) == 0
        assert "running" in _row(capsys.readouterr().out, S0)
        with pytest.raises(RunDirError, match="is being run by another process"):
            run_sweep(load_sweep(sweep_file), out, Finisher())
    finally:
        holder.unlock()
    with small_disk(tmp_path / "ro", "4m") as disk:
        shutil.copytree(out, disk / "sweep")
        remount(disk, "ro")
        assert main(["sweep", "status", str(disk / "sweep")]) == 0
        text = capsys.readouterr().out
        assert "partial" in _row(text, S0) and "3/9 phases" in _row(text, S0)


def test_a_sweep_interrupted_by_ctrl_c_is_resumable(sweep_file, tmp_path):
    """Ctrl-C while cells are queued: the sweep's lock is released and a rerun goes on
    (here with a backend that finishes cells without training)."""
    out = tmp_path / "sweep"
    sweep = load_sweep(sweep_file)

    class Interrupted:
        describe = "interrupted"

        def run(self, sweep_dir, jobs):
            signal.raise_signal(signal.SIGINT)
            yield from ()

    # Python's own Ctrl-C handling, as a `telapa sweep` process has it (a library an
    # earlier test in this worker started, e.g. Ray or wandb, may have replaced it)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_sweep(sweep, out, Interrupted())
    finally:
        signal.signal(signal.SIGINT, previous)
    counts = run_sweep(sweep, out, Finisher())
    assert counts["done"] == 2
