"""`telapa sweep`: sweep files validated before any run, one run directory per cell,
resume and retries, status, scoring a sweep directory, and the Ray backend against a real
Ray head on the loopback address (identical results to the local processes)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from telapa.cli import main
from telapa.config import CONFIG_DIR, ConfigError
from telapa.continual.batch import SeedBatch
from telapa.continual.preset import bind_env_family, parse_run_config
from telapa.continual.rundir import RunDirError
from telapa.continual.spec import RunSpec
from telapa.continual.sweep import (
    CellEstimate,
    CellTime,
    Estimate,
    cell_estimates,
    cell_time,
    cell_times,
    export_sweep,
    load_sweep,
    prepare_sweep_dir,
    read_status,
    run_job,
    run_sweep,
    seed_jobs,
    stored_cells,
    time_left,
)
from telapa.continual.sweep.status import phase_split
from telapa.jaxcache import ENV_VAR

HERE = Path(__file__).parent
TINY_SWEEP = HERE / "sweep_tiny" / "sweep.yaml"
CELL = "tiny-scratch-s0"


def _write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


BASE = f"preset: {HERE / 'tiny_run.yaml'}\ncurricula: [smoke]\nmethods: [ewc]\nseeds: 2\n"


@pytest.mark.parametrize(("extra", "message"), [
    ("colour: red\n", "unknown key 'colour' in {file}"),
    ("grid:\n  methods.ewc.lam: []\n", "invalid value for 'grid' in {file}.*"
                                        "'methods.ewc.lam' has no values"),
    ("grid:\n  methods.ewc.lamda: [1, 2]\n", r"unknown setting grid.'methods.ewc.lamda' "
                                             "in {file}"),
    ("overrides:\n  nope: 3\n", r"unknown setting overrides.'nope' in {file}"),
    ("grid:\n  methods.ewc.decay: [0.5, 2.0]\n",
     "invalid value for 'methods.ewc.decay' in {file}.*less than or equal to 1"),
    ("overrides:\n  steps_per_visit: 1000\n", "steps_per_visit=1000 is not a multiple"),
])
def test_sweep_file_errors_name_the_file_and_key(tmp_path, extra, message):
    path = _write(tmp_path, BASE + extra)
    with pytest.raises(ConfigError, match=message.format(file=path)):
        load_sweep(path)


def test_a_cell_records_its_env_family_s_latent_dimension(tmp_path):
    """A cell's settings hold its family's D, so that the worker validates again what
    the cell records (the MuJoCo and generic families' D is not the default 11)."""
    (tmp_path / "cart.yaml").write_text("name: cart\nbackend: gymnasium\n"
                                        "tasks: {A: CartPole-v1}\norder: [A]\n")
    sweep = load_sweep(_write(tmp_path, "preset: mujoco-quick\ncurricula: [cart.yaml]\n"
                                        "methods: [finetune]\n"))
    (cell,) = sweep.cells
    assert cell.config.methods.telapa.latent.feature_dim == 4  # CartPole's observation
    config = parse_run_config(cell.payload()["config"], "cells.json")
    assert bind_env_family(config, ["CartPole-v1"]) == config


@pytest.mark.parametrize(("text", "message"), [
    (BASE.replace("[ewc]", "[ewc, nope]"), "unknown method 'nope'"),
    (BASE.replace("[ewc]", "[]"), "invalid value for 'methods'"),
    (BASE.replace("seeds: 2", "seeds: [-1]"), "out of range"),
    (BASE.replace("[smoke]", "[nowhere]"), "unknown curriculum 'nowhere'"),
])
def test_bad_lists_are_named(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_sweep(_write(tmp_path, text))


def test_method_settings_only_multiply_their_method(tmp_path):
    path = _write(tmp_path, BASE.replace("[ewc]", "[ewc, finetune]")
                  + "grid:\n  methods.ewc.lam: [1, 10]\n  methods.ewc.decay: [0.9]\n")
    sweep = load_sweep(path)
    assert [c.name for c in sweep.cells] == [
        "smoke-ewc-lam=1-decay=0.9-s0", "smoke-ewc-lam=1-decay=0.9-s1",
        "smoke-ewc-lam=10-decay=0.9-s0", "smoke-ewc-lam=10-decay=0.9-s1",
        "smoke-finetune-s0", "smoke-finetune-s1",
    ]
    assert sweep.cells[2].config.methods.ewc.lam == 10.0
    assert sweep.cells[4].overrides == {}


def test_shipped_sweeps_are_valid():
    files = sorted((CONFIG_DIR / "sweeps").glob("*.yaml"))
    sweeps = {p.stem: load_sweep(p) for p in files}
    assert len(sweeps) >= 8
    table1 = sweeps["table1"]
    assert len(table1.cells) == 10 * 20
    assert {c.method for c in table1.cells} == {
        "scratch", "scratch-reuse", "finetune", "finetune-reset", "ewc", "l2init", "dff",
        "shrink-perturb", "telapa-static", "telapa"}
    study = sweeps["table1-study"]
    assert len(study.cells) == 10 * 5 and study.cells[1].name == "primary-telapa-s0"
    assert [c.seed for c in study.cells[:10]] == [0] * 10  # whole seeds first
    assert {c.method for c in study.cells} == {c.method for c in table1.cells}
    telapa = study.cells[1].config
    assert (telapa.steps_per_visit, telapa.train.network.activation) == (1_474_560, "tanh")
    assert telapa.methods.telapa.qd.illumination.iterations == 64
    assert telapa.methods.telapa.qd.transfer.probe_steps == 30_720
    assert len(sweeps["appb-ewc"].cells) == 7 * 4 * 20
    assert len(sweeps["appb-shrink-perturb"].cells) == 6 * 5 * 20
    assert len(sweeps["appb-l2init"].cells) == 8 * 20
    assert {c.config.methods.telapa.qd.injection.p_inj
            for c in sweeps["elite-injection"].cells} == {0.0, 0.1, 0.2, 0.3}
    assert {c.config.intrinsic_beta for c in sweeps["intrinsic-reward"].cells} == {None, 0.005}
    assert {c.curriculum.name for c in sweeps["alternative-curricula"].cells} == {
        "reverse", "scrambled", "long"}
    # MuJoCo seeds 5-7: seed-major, every env and method of seed 5 first (decided before
    # the study starts, docs/reproduction.md)
    late = sweeps["mujoco-paper-seeds5-7"].cells
    assert len(late) == 3 * 6 * 3 and [c.seed for c in late[:18]] == [5] * 18
    assert [c.name for c in late[:7:6]] == ["halfcheetah-scratch-s5", "hopper-scratch-s5"]


class FlakyBackend:
    """Fails each cell ``failures`` times, then succeeds (without running anything)."""

    describe = "flaky"

    def __init__(self, failures: int):
        self.failures = failures
        self.calls: list[str] = []

    def run(self, sweep_dir, jobs):
        for cell in (c for job in jobs for c in job):
            self.calls.append(cell.name)
            if self.calls.count(cell.name) <= self.failures:
                yield cell.name, {"ok": False, "error": f"boom {self.calls.count(cell.name)}"}
            else:
                (sweep_dir / "cells" / cell.name).mkdir()
                (sweep_dir / "cells" / cell.name / "run.json").write_text(json.dumps(
                    {"format": "telapa-run", "version": 1, "status": "complete"}))
                yield cell.name, {"ok": True}


def test_failures_are_recorded_and_retried(tmp_path):
    sweep = load_sweep(_write(tmp_path, BASE))
    out = tmp_path / "out"
    flaky = FlakyBackend(failures=2)
    counts = run_sweep(sweep, out, flaky, retries=1)
    assert counts["failed"] == 2 and counts["done"] == 0
    status = read_status(out, "smoke-ewc-s0")
    assert status["state"] == "failed" and status["attempts"] == 2
    assert [e["error"] for e in status["errors"]] == ["boom 1", "boom 2"]
    # the same command again: failed cells are tried again, done ones skipped
    counts = run_sweep(sweep, out, flaky, retries=1)
    assert counts["done"] == 2 and flaky.calls.count("smoke-ewc-s0") == 3
    assert read_status(out, "smoke-ewc-s0")["attempts"] == 3
    run_sweep(sweep, out, flaky)
    assert flaky.calls.count("smoke-ewc-s0") == 3


class LostReportBackend(FlakyBackend):
    """Runs each cell to a complete run, then its worker dies before it can report: the
    outcome the sweep gets is the death."""

    def run(self, sweep_dir, jobs):
        for name, _ in super().run(sweep_dir, jobs):
            yield name, {"ok": False, "error": "worker process died: killed by SIGKILL"}


def test_a_complete_run_whose_worker_died_before_reporting_is_done(tmp_path):
    """A worker killed between its cell's last write and its report: the run is
    complete, so the cell is done (one attempt, no error), not retried (which would run a
    complete run again)."""
    sweep = load_sweep(_write(tmp_path, BASE))
    out = tmp_path / "out"
    lost, events = LostReportBackend(failures=0), []
    counts = run_sweep(sweep, out, lost, retries=2, on_event=events.append)
    assert counts["done"] == 2 and counts["failed"] == 0
    assert lost.calls == ["smoke-ewc-s0", "smoke-ewc-s1"]  # each ran once
    status = read_status(out, "smoke-ewc-s0")
    assert status["state"] == "done" and status["attempts"] == 1 and not status.get("errors")
    assert sum(e == "done smoke-ewc-s0" for e in events) == 1


class KilledBackend(FlakyBackend):
    """Finishes the first cell, then the sweep process is killed (Ctrl-C)."""

    def run(self, sweep_dir, jobs):
        yield from itertools.islice(super().run(sweep_dir, jobs), 1)
        raise KeyboardInterrupt


def test_attempts_count_tries_that_ended_not_sweep_starts(tmp_path):
    """A cell still queued when the sweep is killed has had no attempt, however often
    the sweep was started; the worker stamps the start of the cells it runs."""
    sweep = load_sweep(_write(tmp_path, BASE))
    out = tmp_path / "out"
    for _ in range(2):
        with pytest.raises(KeyboardInterrupt):
            run_sweep(sweep, out, KilledBackend(0))
        shutil.rmtree(out / "cells" / "smoke-ewc-s0")  # as if it had not finished
    status = read_status(out, "smoke-ewc-s1")
    assert status["attempts"] == 0 and "started" not in status
    assert read_status(out, "smoke-ewc-s0")["attempts"] == 2
    assert main(["sweep", "status", str(out)]) == 0
    before = time.time()
    run_job(str(out), [json.loads((out / "cells.json").read_text())["cells"][1] | {
        "curriculum": {"broken": True}}])
    assert read_status(out, "smoke-ewc-s1")["started"] >= before


def _accounting(wall_s: float) -> dict[str, float]:
    return {"wall_s": wall_s, "extra_env_steps": 0, "peak_rss_bytes": 0,
            "method_state_bytes": 0, "run_dir_bytes": 0}


def _started(cell: Path, seed: int, state: str) -> None:
    """A cell's run directory as a run stopped at a checkpoint leaves it: running, with
    ``state`` (the text of its latest checkpoint's state.json)."""
    (cell / "ckpt-000002").mkdir(parents=True)
    (cell / "run.json").write_text(json.dumps(
        {"format": "telapa-run", "version": 1, "status": "running", "seed": seed}))
    (cell / "ckpt-000002" / "state.json").write_text(state)
    (cell / "checkpoint.json").write_text(json.dumps({"latest": "ckpt-000002"}))


def test_status_estimates_the_cell_time_left(tmp_path, capsys):
    """Started cells: their own pace (wall so far x phases left / phases done) and their
    kind's time less their wall, weighted by how far they are; alone where nothing
    finished estimates their kind. Cells not started: the mean wall clock of finished
    cells that differ only in their seed, else of the finished cells of other methods;
    with nothing finished, not estimated."""
    sweep = load_sweep(_write(tmp_path, BASE.replace("seeds: 2", "seeds: 3")
                              .replace("[ewc]", "[ewc, finetune]")))
    out = tmp_path / "out"
    prepare_sweep_dir(sweep, out)
    cells = out / "cells"
    for seed, wall in ((0, 100.0), (1, 140.0)):  # finished: 120 s on average
        (cells / f"smoke-ewc-s{seed}").mkdir()
        _finish(cells / f"smoke-ewc-s{seed}", seed)
        (cells / f"smoke-ewc-s{seed}" / "accounting.json").write_text(
            json.dumps(_accounting(wall)))
    started = cells / "smoke-finetune-s0"  # 3 of 12 phases in 60 s: 180 s at its pace
    _started(started, 0, json.dumps(
        {"next_phase": 3, "phases": 12, "wall_s": 60.0, "records": {}}))
    (started / "accounting.json").write_text(json.dumps(_accounting(5.0)))  # a past segment
    assert cell_time(out, "smoke-finetune-s0") == CellTime(60.0, 3, 12)
    assert cell_time(out, "smoke-ewc-s1") == CellTime(140.0, 1, 1)
    assert cell_time(out, "smoke-ewc-s2") is None
    estimate = time_left(out, stored_cells(out))
    left, borrowed, unknown = estimate.seconds, estimate.other_methods, estimate.unknown
    # finetune-s0 (started, a quarter through: 180 s / 4 + (120 s - 60 s) * 3 / 4), ewc-s2
    # (its method's mean), finetune-s1 and -s2 (no finetune cell finished: the mean of
    # every finished cell, 120 s)
    assert left == pytest.approx(90.0 + 120.0 + 2 * 120.0)
    assert borrowed == ["smoke-finetune-s1", "smoke-finetune-s2"] and unknown == []
    assert main(["sweep", "status", str(out)]) == 0
    text = capsys.readouterr().out
    assert "about 8 min of cell time left" in text
    # each cell's own estimate and the rule behind it, in the table's "left" column
    assert "2 min, started" in text and "2 min, seeds" in text
    assert text.count("2 min, other methods") == 2
    assert "3/12 phases" in text and CellTime(60.0, 3, 12).progress == "3/12 phases"
    assert "2 cell(s) of methods none of whose cells has finished" in text
    nothing_finished = {c["name"]: None for c in stored_cells(out)}
    nothing_finished["smoke-finetune-s0"] = CellTime(60.0, 3, 12)
    estimate = time_left(out, stored_cells(out), times=nothing_finished)
    left, borrowed, unknown = estimate.seconds, estimate.other_methods, estimate.unknown
    assert left == pytest.approx(180.0) and borrowed == []
    assert unknown == ["smoke-ewc-s0", "smoke-ewc-s1", "smoke-ewc-s2",
                       "smoke-finetune-s1", "smoke-finetune-s2"]


def test_a_started_cell_weighs_its_own_pace_and_its_kinds_time_by_how_far_it_is(tmp_path):
    """A started cell's own pace alone is unreliable early on, either way (an archive
    method's first visits are its cheapest; each run's compiles fall in its first
    phases): it counts f * own + (1 - f) * (kind - wall), f = phases done / phases. On
    2026-12-06 a long-curriculum TeLAPA cell 47 s into its first visit was resumed as
    'about 32 min' (it took 1.9 h), and the next, 14 of 353 phases in 17 min, was put at
    6.9 h, so --until started a fresh cell beside it."""
    sweep = load_sweep(_write(tmp_path, BASE.replace("seeds: 2", "seeds: 4")))
    out = tmp_path / "out"
    prepare_sweep_dir(sweep, out)
    cells = out / "cells"
    (cells / "smoke-ewc-s0").mkdir()
    _finish(cells / "smoke-ewc-s0", 0)
    (cells / "smoke-ewc-s0" / "accounting.json").write_text(json.dumps(_accounting(1000.0)))

    def start(seed, done, wall):
        _started(cells / f"smoke-ewc-s{seed}", seed, json.dumps(
            {"next_phase": done, "phases": 12, "wall_s": wall, "records": {}}))

    start(1, 1, 10.0)  # own 110 s, kind 990 s: 110/12 + 990 * 11/12 = 916.66.. s
    start(2, 6, 600.0)  # own 600 s, kind 400 s: (600 + 400) / 2 = 500 s
    start(3, 9, 1200.0)  # past its kind's 1000 s: its own pace, 1200 * 3 / 9 = 400 s
    estimates = cell_estimates(out, stored_cells(out))
    assert estimates["smoke-ewc-s1"].seconds == pytest.approx(110 / 12 + 990 * 11 / 12)
    assert estimates["smoke-ewc-s2"] == CellEstimate(500.0, "started")
    assert estimates["smoke-ewc-s3"] == CellEstimate(400.0, "started")
    assert estimates["smoke-ewc-s0"] == CellEstimate(0.0, "started")  # finished: none
    # with nothing of its kind finished, its own pace alone
    alone = {"smoke-ewc-s0": None, "smoke-ewc-s1": CellTime(10.0, 1, 12),
             "smoke-ewc-s2": None, "smoke-ewc-s3": None}
    assert cell_estimates(out, stored_cells(out), times=alone)["smoke-ewc-s1"] == \
        CellEstimate(110.0, "started")


def _two_curricula_sweep(tmp_path: Path) -> Path:
    """A prepared sweep directory of EWC, Finetune and L2-Init, seed 0, on smoke (4
    visits) and ``long`` (A B A, twice: 6 visits), nothing run."""
    (tmp_path / "long.yaml").write_text(
        "name: long\ntasks: {A: MiniGrid-Empty-5x5-v0, B: MiniGrid-DoorKey-5x5-v0}\n"
        "order: [A, B, A]\ncycles: 2\n")
    sweep = load_sweep(_write(tmp_path, BASE.replace("[smoke]", "[smoke, long.yaml]")
                              .replace("[ewc]", "[ewc, finetune, l2init]")
                              .replace("seeds: 2", "seeds: 1")))
    out = tmp_path / "out"
    prepare_sweep_dir(sweep, out)
    return out


def test_status_counts_a_method_new_to_a_curriculum_at_its_pace_elsewhere(tmp_path, capsys):
    """A cell not started whose method has finished only on other curricula counts that
    method's wall clock per visit times its own visits, before any other method's mean
    (methods differ several-fold in cost), scaled by its curriculum's cost per visit
    relative to the others, measured on the methods that finished on both (Hopper's RK4
    physics makes its visits 3x HalfCheetah's)."""
    out = _two_curricula_sweep(tmp_path)

    def finish(walls):
        for name, wall in walls:
            (out / "cells" / name).mkdir()
            _finish(out / "cells" / name, 0)
            (out / "cells" / name / "accounting.json").write_text(
                json.dumps(_accounting(wall)))

    finish((("smoke-ewc-s0", 400.0), ("smoke-finetune-s0", 40.0)))
    # long-ewc-s0: EWC took 400 s for smoke's 4 visits, 100 s a visit; long has 6, and no
    # method has run on both curricula: 600 s. long-finetune-s0: 10 s a visit, 60 s.
    # smoke-l2init-s0: no l2init cell finished, the mean of smoke's cells (220 s);
    # long-l2init-s0: nothing to go by.
    assert time_left(out, stored_cells(out)) == Estimate(
        600.0 + 60.0 + 220.0, ["long-ewc-s0", "long-finetune-s0"], [],
        ["smoke-l2init-s0"], ["long-l2init-s0"], {}, ("long",))
    assert main(["sweep", "status", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("2 cell(s) counted at their method's pace per visit on other curricula, not "
            "scaled where no method has finished there and elsewhere yet (long: x1, "
            "however its tasks differ in cost)") in text
    finish((("long-finetune-s0", 90.0), ("smoke-l2init-s0", 80.0),
            ("long-l2init-s0", 360.0)))
    # Per visit, finetune 10 s on smoke and 15 s on long (x1.5), l2init 20 s and 60 s (x3):
    # f_long = sqrt(1.5 x 3) = 2.1213; long-ewc-s0 = 100 s x 6 visits x 2.1213. The mean
    # of long's other methods (225 s) would say 225 s.
    factor = (1.5 * 3.0) ** 0.5
    estimate = time_left(out, stored_cells(out))
    assert estimate.seconds == pytest.approx(600.0 * factor)
    assert estimate.other_curricula == ["long-ewc-s0"]
    assert estimate.scales == {"long": pytest.approx(factor)} and estimate.unscaled == ()
    assert main(["sweep", "status", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "about 21 min of cell time left" in text
    assert ("1 cell(s) counted at their method's pace per visit on other curricula, scaled "
            "by their curriculum's cost measured on the methods that ran there too "
            "(long x2.12)") in text


def test_phase_split_parts_sum_to_the_wall_clock() -> None:
    """A run's wall clock by phase: the method's share split into its own phases, the
    rest of the wall clock as ``other``; nothing where a part is not a time."""
    accounting = {"wall_s": 100.0, "phase_s": {"train": 50.0, "method": 30.0},
                  "method_phase_s": {"illumination": 20.0, "maintenance": 9.0}}
    assert phase_split(accounting, 100.0) == (
        ("method.illumination", 20.0), ("method.maintenance", 9.0), ("other", 21.0),
        ("train", 50.0))
    assert phase_split({"phase_s": {"train": 50.0, "method": 30.0}}, 100.0) == (
        ("method", 30.0), ("other", 20.0), ("train", 50.0))
    assert phase_split({"wall_s": 100.0}, 100.0) == ()
    assert phase_split({"phase_s": {"train": float("nan")}}, 100.0) == ()
    assert phase_split({"phase_s": {"train": -1.0}}, 100.0) == ()
    assert phase_split({"phase_s": {"train": True}}, 100.0) == ()  # as check_accounting


def test_status_scales_each_phase_by_its_own_cost_on_a_curriculum(tmp_path, capsys):
    """A method new to a curriculum whose runs record their phases: each phase is scaled
    by that phase's cost there, measured on the methods that spent time in it on both
    curricula (2026-12-07: Hopper's PPO visits cost about twice HalfCheetah's, its TeLAPA
    maintenance and illumination less, and one factor put a TeLAPA-Fresh cell at 2.0 h
    where TeLAPA's took 0.88 h)."""
    out = _two_curricula_sweep(tmp_path)

    def finish(name, train, penalty=None):
        (out / "cells" / name).mkdir(exist_ok=True)
        _finish(out / "cells" / name, 0)
        accounting = _accounting(train + (penalty or 0.0))
        accounting["phase_s"] = {"train": train, "method": penalty or 0.0}
        if penalty is not None:
            accounting["method_phase_s"] = {"penalty": penalty}
        (out / "cells" / name / "accounting.json").write_text(json.dumps(accounting))

    # Per visit (smoke 4, long 6): finetune trains 10 s on smoke, 20 s on long; l2init
    # trains 10 s and 20 s and spends 10 s and 5 s in its penalty phase; EWC on smoke
    # trains 10 s and spends 90 s in its penalty phase.
    finish("smoke-finetune-s0", 40.0)
    finish("long-finetune-s0", 120.0)
    finish("smoke-l2init-s0", 40.0, 40.0)
    finish("long-l2init-s0", 120.0, 30.0)
    finish("smoke-ewc-s0", 40.0, 360.0)
    # f_long,train = (2 x 2)^(1/2) = 2 (finetune, l2init); f_long,penalty = 0.5 (l2init
    # alone); long-ewc-s0: 6 visits x (10 s x 2 + 90 s x 0.5) = 390 s. One factor would
    # scale EWC's 100 s a visit by f_long = (20/10 x 25/20)^(1/2) = 1.5811: 949 s.
    estimate = time_left(out, stored_cells(out))
    assert estimate.other_curricula == ["long-ewc-s0"]
    assert estimate.seconds == pytest.approx(390.0)
    assert estimate.scales == {"long": pytest.approx((2 * 1.25) ** 0.5)}
    assert estimate.phase_scaled == ("long",) and estimate.unscaled == ()
    assert main(["sweep", "status", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("scaled by their curriculum's cost measured on the methods that ran there too "
            "(long x1.58), each phase of their work by that phase's cost there where the "
            "runs record their phases (long)") in text
    # one of EWC's cells without its phases (an older run): one factor, as before
    (out / "cells" / "smoke-ewc-s0" / "accounting.json").write_text(
        json.dumps(_accounting(400.0)))
    estimate = time_left(out, stored_cells(out))
    assert estimate.seconds == pytest.approx(600.0 * (2 * 1.25) ** 0.5)
    assert estimate.phase_scaled == ()


def test_status_names_two_unscaled_curricula_in_the_plural(tmp_path, capsys):
    """Two curricula with no finished method in common with the others: "their tasks"."""
    for name in ("long", "other"):
        (tmp_path / f"{name}.yaml").write_text(
            f"name: {name}\ntasks: {{A: MiniGrid-Empty-5x5-v0}}\norder: [A]\ncycles: 2\n")
    sweep = load_sweep(_write(tmp_path, BASE.replace("[smoke]", "[smoke, long.yaml, other.yaml]")
                              .replace("seeds: 2", "seeds: 1")))
    out = tmp_path / "out"
    prepare_sweep_dir(sweep, out)
    (out / "cells" / "smoke-ewc-s0").mkdir()
    _finish(out / "cells" / "smoke-ewc-s0", 0)
    (out / "cells" / "smoke-ewc-s0" / "accounting.json").write_text(
        json.dumps(_accounting(400.0)))
    assert time_left(out, stored_cells(out)).unscaled == ("long", "other")
    assert main(["sweep", "status", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(long, other: x1, however their tasks differ in cost)" in text


def test_status_counts_a_new_setting_at_its_methods_pace_under_other_settings(tmp_path,
                                                                              capsys):
    """An ablation grid's cell not started, whose own setting has no finished cell, counts
    the mean wall clock of its method's finished cells on its curriculum under the other
    settings (rule 3), before any other method's (rule 4): with only TeLAPA in an
    injection sweep, its p_inj 0.2 cells were "not estimated" while p_inj 0.1's had
    finished."""
    sweep = load_sweep(_write(tmp_path, BASE.replace("[ewc]", "[ewc, finetune]")
                              .replace("seeds: 2", "seeds: 1")
                              + "grid:\n  methods.ewc.lam: [1, 10, 100]\n"))
    out = tmp_path / "out"
    prepare_sweep_dir(sweep, out)
    names = [c["name"] for c in stored_cells(out)]
    ewc = sorted(n for n in names if "ewc" in n)
    finetune = [n for n in names if "finetune" in n]
    assert len(ewc) == 3 and len(finetune) == 1
    for name, wall in ((ewc[0], 300.0), (ewc[1], 500.0), (finetune[0], 20.0)):
        (out / "cells" / name).mkdir()
        _finish(out / "cells" / name, 0)
        (out / "cells" / name / "accounting.json").write_text(json.dumps(_accounting(wall)))
    # ewc's third setting: the mean of ewc's two finished settings, 400 s; the mean of the
    # curriculum's cells under any method (273 s) would come only after it
    estimate = time_left(out, stored_cells(out))
    assert estimate.seconds == pytest.approx(400.0)
    assert estimate.other_settings == [ewc[2]]
    assert estimate.other_methods == [] and estimate.unknown == []
    assert main(["sweep", "status", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "about 7 min of cell time left" in text
    assert ("1 cell(s) counted at the mean of their method's cells on their curriculum "
            "under other settings") in text


def test_status_marks_a_cell_with_unreadable_progress(tmp_path, capsys):
    """A started cell whose checkpoint state is corrupt is "?" in the status table, with the
    file named, not shown as a cell that has not started; the estimate counts it unknown."""
    sweep = load_sweep(_write(tmp_path, BASE))
    out = tmp_path / "out"
    prepare_sweep_dir(sweep, out)
    _started(out / "cells" / "smoke-ewc-s0", 0, "{ not json")
    with pytest.raises(RunDirError, match=r"smoke-ewc-s0.*state\.json"):
        cell_time(out, "smoke-ewc-s0")
    times, unreadable = cell_times(out, stored_cells(out))
    assert times == {"smoke-ewc-s0": None, "smoke-ewc-s1": None}
    assert list(unreadable) == ["smoke-ewc-s0"]
    assert time_left(out, stored_cells(out)).unknown == ["smoke-ewc-s0", "smoke-ewc-s1"]
    assert main(["sweep", "status", str(out)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if "smoke-ewc-s0" in line)
    assert "?" in row
    assert "progress unknown (shown as ?)" in text and "state.json" in text


def test_batch_seeds_groups_the_seeds_of_each_cell(tmp_path):
    sweep = load_sweep(_write(tmp_path, BASE.replace("[ewc]", "[ewc, finetune]")
                              + "grid:\n  methods.ewc.lam: [1, 10]\n"))
    assert [[c.name for c in job] for job in seed_jobs(sweep.cells, True)] == [
        ["smoke-ewc-lam=1-s0", "smoke-ewc-lam=1-s1"],
        ["smoke-ewc-lam=10-s0", "smoke-ewc-lam=10-s1"],
        ["smoke-finetune-s0", "smoke-finetune-s1"],
    ]
    assert seed_jobs(sweep.cells, False) == [[c] for c in sweep.cells]


def test_seeds_per_batch_splits_each_seed_batch_in_sweep_order(tmp_path):
    sweep = load_sweep(_write(tmp_path, BASE.replace("[ewc]", "[ewc, finetune]")
                              .replace("seeds: 2", "seeds: 5")))
    assert [[c.seed for c in job] for job in seed_jobs(sweep.cells, 2)] == [
        [0, 1], [2, 3], [4], [0, 1], [2, 3], [4]]
    assert [{c.method for c in job} for job in seed_jobs(sweep.cells, 2)] == [
        {"ewc"}] * 3 + [{"finetune"}] * 3
    assert seed_jobs(sweep.cells, 5) == seed_jobs(sweep.cells, True)
    assert seed_jobs(sweep.cells, 1) == seed_jobs(sweep.cells, False)
    for bad in (0, -1, 2.0):
        with pytest.raises(ValueError, match="batch_seeds must be"):
            seed_jobs(sweep.cells, bad)
    by_method = seed_jobs(sweep.cells, {"ewc": 2, "*": 3})
    assert [[c.seed for c in job] for job in by_method] == [[0, 1], [2, 3], [4], [0, 1, 2],
                                                            [3, 4]]
    assert [[c.seed for c in job] for job in seed_jobs(sweep.cells, {"finetune": 1})] == [
        [0, 1, 2, 3, 4], [0], [1], [2], [3], [4]]
    for bad in (0, {"ewc": 0}, {"ewc": True}):
        backend = FlakyBackend(0)
        with pytest.raises(ConfigError, match="batch_seeds must be"):
            run_sweep(sweep, tmp_path / "out", backend, batch_seeds=bad)
        assert backend.calls == [] and not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="seeds per batch given for 'telapa', which sweep "
                                          "'s' does not run .its methods: ewc, finetune"):
        run_sweep(sweep, tmp_path / "out", FlakyBackend(0), batch_seeds={"telapa": 1})
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("flags", "batch_seeds"), [
    ([], False), (["--batch-seeds"], True), (["--seeds-per-batch", "2"], 2),
    (["--batch-seeds", "--seeds-per-batch", "3"], 3),
    (["--seeds-per-batch", "3", "--seeds-per-batch", "ewc=1"], {"*": 3, "ewc": 1})])
def test_cli_seeds_per_batch_reaches_the_sweep(tmp_path, monkeypatch, flags, batch_seeds):
    import telapa.continual.sweep as sweep_pkg

    seen = {}

    def fake_run_sweep(sweep, out, backend, **kw):
        seen.update(kw)
        return dict.fromkeys(("done", "failed"), 0)

    monkeypatch.setattr(sweep_pkg, "run_sweep", fake_run_sweep)
    assert main(["sweep", str(_write(tmp_path, BASE)), "--out", str(tmp_path / "o"),
                 *flags]) == 0
    assert seen["batch_seeds"] is batch_seeds or seen["batch_seeds"] == batch_seeds
    assert type(seen["batch_seeds"]) is type(batch_seeds)


def test_cli_refuses_a_seeds_per_batch_below_one(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["sweep", str(_write(tmp_path, BASE)), "--out", str(tmp_path / "o"),
              "--seeds-per-batch", "0"])
    assert "--seeds-per-batch 0: must be in 1 .. 10000, got 0" in capsys.readouterr().err
    for values, message in [(["ewc=x"], "--seeds-per-batch ewc=x: must be an integer"),
                            (["2", "3"], "'3' repeats the plain count"),
                            (["ewc=2", "ewc=1"], "'ewc=1' repeats 'ewc'"),
                            (["telapa=2"], "seeds per batch given for 'telapa'")]:
        with pytest.raises(SystemExit):
            main(["sweep", str(_write(tmp_path, BASE)), "--out", str(tmp_path / "o"),
                  *[f"--seeds-per-batch={v}" for v in values]])
        assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_seed_order_runs_whole_seeds_first(tmp_path):
    text = BASE.replace("[ewc]", "[ewc, finetune]")
    assert [c.name for c in load_sweep(_write(tmp_path, text)).cells] == [
        "smoke-ewc-s0", "smoke-ewc-s1", "smoke-finetune-s0", "smoke-finetune-s1"]
    seed_major = load_sweep(_write(tmp_path, text + "order: seed\n", "seed.yaml"))
    assert [c.name for c in seed_major.cells] == [
        "smoke-ewc-s0", "smoke-finetune-s0", "smoke-ewc-s1", "smoke-finetune-s1"]
    assert [[c.name for c in job] for job in seed_jobs(seed_major.cells, True)] == [
        ["smoke-ewc-s0", "smoke-ewc-s1"], ["smoke-finetune-s0", "smoke-finetune-s1"]]
    with pytest.raises(ConfigError, match="order"):
        load_sweep(_write(tmp_path, text + "order: random\n", "bad.yaml"))


def test_batched_sweep_cells_equal_a_seed_batch(tmp_path, capsys):
    """--batch-seeds runs the two seeds of the tiny cell as one SeedBatch: every cell is
    done, with exactly the results of `SeedBatch` on the same specs."""
    file = _write(tmp_path, TINY_SWEEP.read_text().replace("../tiny_run.yaml",
                                                           str(HERE / "tiny_run.yaml"))
                  .replace("curriculum.yaml", str(TINY_SWEEP.parent / "curriculum.yaml"))
                  .replace("seeds: [0]", "seeds: [0, 1]"))
    out = tmp_path / "out"
    assert main(["sweep", str(file), "--out", str(out), "--batch-seeds", "--threads", "1"]) == 0
    assert "running 2 on local, 1 worker(s) x 1 thread(s) in 1 seed batches" in \
        capsys.readouterr().err
    cells = load_sweep(file).cells
    alone = SeedBatch.open([(RunSpec(c.curriculum, c.method, c.seed, c.config, c.preset),
                             tmp_path / c.name) for c in cells], [None, None])
    alone.run()
    for c in cells:
        assert read_status(out, c.name)["state"] == "done"
        for name in ("curve.csv", "visits.csv", "metrics.json"):
            assert (out / "cells" / c.name / name).read_bytes() == \
                (tmp_path / c.name / name).read_bytes()
        assert "train 512/512 steps" in (out / "status" / f"{c.name}.log").read_text()


def test_another_sweep_or_a_foreign_directory_is_refused(tmp_path):
    sweep = load_sweep(_write(tmp_path, BASE))
    out = tmp_path / "out"
    run_sweep(sweep, out, FlakyBackend(0))
    other = load_sweep(_write(tmp_path, BASE.replace("seeds: 2", "seeds: 3"), "o.yaml"))
    with pytest.raises(ValueError, match="holds another sweep"):
        run_sweep(other, out, FlakyBackend(0))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="is not empty"):
        run_sweep(sweep, mine, FlakyBackend(0))


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "local"
    assert main(["sweep", str(TINY_SWEEP), "--out", str(out), "--workers", "1",
                 "--threads", "1", "--export", str(out.parent / "exported")]) == 0
    return out


def test_local_sweep_runs_every_cell_and_resumes(local_sweep, capsys):
    cell = local_sweep / "cells" / CELL
    assert json.loads((cell / "run.json").read_text())["status"] == "complete"
    assert read_status(local_sweep, CELL)["state"] == "done"
    log = (local_sweep / "status" / f"{CELL}.log").read_text()
    assert "visit 0 (A, MiniGrid-Empty-5x5-v0) train 512/512 steps" in log
    before = (cell / "metrics.json").read_bytes()
    capsys.readouterr()
    assert main(["sweep", str(TINY_SWEEP), "--out", str(local_sweep)]) == 0
    captured = capsys.readouterr()
    assert "1 of 1 cells done; running 0" in captured.err
    assert (cell / "metrics.json").read_bytes() == before
    assert main(["sweep", "status", str(local_sweep)]) == 0
    status = capsys.readouterr().out
    assert CELL in status and "done" in status and "1 done" in status


def test_report_takes_a_sweep_directory(local_sweep, tmp_path, capsys):
    """... and fills a document's table and figure blocks (--doc)."""
    out, doc = tmp_path / "report", tmp_path / "study.md"
    doc.write_text("# Ours\n<!-- telapa:table tiny-main -->\nold\n<!-- /telapa:table -->\n"
                   "text\n<!-- telapa:figure tiny-curves -->\n<!-- /telapa:figure -->\n")
    assert main(["report", str(local_sweep), "--out", str(out), "--doc", str(doc)]) == 0
    page = (out / "index.html").read_text()
    assert "Curriculum tiny" in page and "from 1 scratch run(s)" in page
    assert "updated 2 blocks of" in capsys.readouterr().out
    table = (out / "tables" / "tiny-main.md").read_text()
    assert doc.read_text() == (
        f"# Ours\n<!-- telapa:table tiny-main -->\n{table}<!-- /telapa:table -->\ntext\n"
        "<!-- telapa:figure tiny-curves -->\n![tiny-curves](study/tiny-curves.png)\n"
        "<!-- /telapa:figure -->\n")
    assert (tmp_path / "study" / "tiny-curves.png").read_bytes() == \
        (out / "figures" / "tiny-curves.png").read_bytes()
    # a second report's blocks in the same document (--doc-scope), the first's kept
    filled = doc.read_text()
    doc.write_text(filled + "<!-- telapa:table paper/tiny-main -->\n<!-- /telapa:table -->\n")
    for flags, message in [(["--doc-scope", "paper"], "--doc-scope needs --doc"),
                           (["--doc", str(doc), "--doc-scope", "other"],
                            "has no telapa:table or telapa:figure blocks of scope other"),
                           (["--doc", str(doc), "--doc-scope", "a/b"], "must be letters")]:
        with pytest.raises(SystemExit):
            main(["report", str(local_sweep), "--out", str(tmp_path / "r2"), *flags])
        assert message in capsys.readouterr().err
        assert not (tmp_path / "r2").exists()
    assert main(["report", str(local_sweep), "--out", str(tmp_path / "r2"), "--doc", str(doc),
                 "--doc-scope", "paper"]) == 0
    assert "updated 1 blocks of" in capsys.readouterr().out
    assert doc.read_text() == filled + (
        f"<!-- telapa:table paper/tiny-main -->\n{table}<!-- /telapa:table -->\n")


def test_metrics_take_a_sweep_directory(local_sweep, capsys):
    assert main(["metrics", str(local_sweep), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["tiny"]["tau_source"] == "1 scratch run(s)"
    assert payload["tiny"]["summary"]["scratch"]["runs"] == 1
    # the same run passed twice is refused, naming both directories
    cell = local_sweep / "cells" / CELL
    with pytest.raises(SystemExit):
        main(["metrics", str(local_sweep), str(cell)])
    assert f"{cell} and {cell} are the same run" in capsys.readouterr().err


def _finish(cell: Path, seed: int) -> None:
    """Makes ``cell`` a complete run with small outputs and a checkpoint."""
    (cell / "run.json").write_text(json.dumps(
        {"format": "telapa-run", "version": 1, "status": "complete", "seed": seed}))
    (cell / "curve.csv").write_text(f"visit,sr\n0,0.{seed}\n")
    (cell / "metrics.json").write_text(json.dumps({"mean_sr": seed}))
    (cell / "ckpt-000001").mkdir()
    (cell / "ckpt-000001" / "learner.npz").write_bytes(b"weights")
    (cell / "checkpoint.json").write_text("{}")


def test_export_copies_finished_cells_small_outputs_only(tmp_path, capsys):
    """`telapa sweep export`: done cells only, no checkpoints; a second export adds the
    cells finished since and keeps the others; nothing in the destination is overwritten."""
    sweep = load_sweep(_write(tmp_path, BASE))
    out, dest = tmp_path / "out", tmp_path / "results"
    run_sweep(sweep, out, FlakyBackend(0))
    s0, s1 = out / "cells" / "smoke-ewc-s0", out / "cells" / "smoke-ewc-s1"
    _finish(s0, 0)
    (s1 / "run.json").unlink()  # s1 not started yet
    assert main(["sweep", "export", str(out), str(dest)]) == 0
    assert "exported 1 new cell(s)" in capsys.readouterr().out
    assert sorted(p.name for p in (dest / "cells").iterdir()) == ["smoke-ewc-s0"]
    assert sorted(p.name for p in (dest / "cells" / "smoke-ewc-s0").iterdir()) == [
        "curve.csv", "metrics.json", "run.json"]
    assert [c["name"] for c in json.loads((dest / "cells.json").read_text())["cells"]] == [
        "smoke-ewc-s0"]
    assert main(["sweep", "status", str(dest)]) == 0
    assert "1 of 2 cells exported, all done; 1 not exported" in capsys.readouterr().out
    _finish(s1, 1)
    summary = export_sweep(out, dest)
    assert (summary.added, summary.kept, summary.left) == (["smoke-ewc-s1"], ["smoke-ewc-s0"], [])
    assert (dest / "cells" / "smoke-ewc-s1" / "curve.csv").read_text() == "visit,sr\n0,0.1\n"
    # an exported file that differs from its source stops the export before any write
    (dest / "cells" / "smoke-ewc-s0" / "curve.csv").write_text("mine")
    (s0 / "curve.csv").write_text("visit,sr\n0,0.5\n")
    with pytest.raises(ValueError, match="curve.csv differs from"):
        export_sweep(out, dest)
    assert (dest / "cells" / "smoke-ewc-s0" / "curve.csv").read_text() == "mine"
    # a destination that is not an export of this sweep is refused
    with pytest.raises(ValueError, match="into itself"):
        export_sweep(out, out)
    other = tmp_path / "other"
    run_sweep(load_sweep(_write(tmp_path, BASE, "o.yaml")), other, FlakyBackend(0))
    with pytest.raises(ValueError, match="is not an export of sweep 'o'"):
        export_sweep(other, dest)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit):
        main(["sweep", "export", str(out), str(mine)])
    assert "is not empty" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sweep", "export", str(mine), str(dest)])
    assert "is not a sweep directory" in capsys.readouterr().err


def test_export_refuses_an_unlisted_cell_folder_before_copying_any_cell(tmp_path):
    """A `cells/NAME` folder in the destination that its cells.json does not list (a
    hand-made or half-deleted one) stops the export before any cell is copied, even when
    it belongs to a cell later in sweep order than one that would be exported."""
    sweep = load_sweep(_write(tmp_path, BASE))
    out, dest = tmp_path / "out", tmp_path / "results"
    run_sweep(sweep, out, FlakyBackend(0))
    _finish(out / "cells" / "smoke-ewc-s0", 0)
    (out / "cells" / "smoke-ewc-s1" / "run.json").unlink()
    export_sweep(out, dest)
    cells_json = (dest / "cells.json").read_text()
    shutil.rmtree(dest / "cells" / "smoke-ewc-s0")  # listed but lost: would be re-copied
    cells = json.loads(cells_json)
    cells["cells"] = []
    (dest / "cells.json").write_text(json.dumps(cells))
    (dest / "cells" / "smoke-ewc-s1").mkdir()
    (dest / "cells" / "smoke-ewc-s1" / "mine.txt").write_text("mine")
    _finish(out / "cells" / "smoke-ewc-s1", 1)
    with pytest.raises(ValueError, match="smoke-ewc-s1 exists but is not listed"):
        export_sweep(out, dest)
    assert sorted(p.name for p in (dest / "cells").iterdir()) == ["smoke-ewc-s1"]
    assert (dest / "cells" / "smoke-ewc-s1" / "mine.txt").read_text() == "mine"
    assert json.loads((dest / "cells.json").read_text())["cells"] == []


def test_sweep_exports_each_cell_as_it_finishes(tmp_path):
    """run_sweep(export=DEST): every done cell is in DEST when the sweep returns, exported
    one by one; a DEST that is not an export of this sweep is refused before any job."""
    events: list[str] = []
    sweep = load_sweep(_write(tmp_path, BASE))
    out, dest = tmp_path / "out", tmp_path / "results"
    counts = run_sweep(sweep, out, FlakyBackend(0), export=dest, on_event=events.append)
    assert counts["done"] == 2
    assert [e for e in events if e.startswith("exported")] == [
        f"exported smoke-ewc-s0 to {dest}", f"exported smoke-ewc-s1 to {dest}"]
    assert [c["name"] for c in json.loads((dest / "cells.json").read_text())["cells"]] == [
        "smoke-ewc-s0", "smoke-ewc-s1"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    other = load_sweep(_write(tmp_path, BASE.replace("[ewc]", "[finetune]"), "o.yaml"))
    flaky = FlakyBackend(0)
    with pytest.raises(ValueError, match="is not empty"):
        run_sweep(other, tmp_path / "other", flaky, export=mine)
    assert flaky.calls == []


def test_cells_the_export_holds_are_not_run_again_from_a_new_sweep_dir(tmp_path, capsys):
    """A study resumed on a fresh checkout: its runs/ are gone, its committed export is
    all that is left. The cells the export holds are copied back into the new sweep
    directory as done cells (status and reports read them) and not run; the others run
    and are exported beside them; nothing exported is rewritten."""
    sweep = load_sweep(_write(tmp_path, BASE.replace("seeds: 2", "seeds: 3")))
    dest = tmp_path / "results"
    run_sweep(sweep, tmp_path / "lost", FlakyBackend(0), export=dest)
    cells_json = json.loads((dest / "cells.json").read_text())
    keep = cells_json["cells"][:2]  # as if the first session exported two cells only
    shutil.rmtree(dest / "cells" / "smoke-ewc-s2")
    (dest / "status" / "smoke-ewc-s2.json").unlink()
    (dest / "cells.json").write_text(json.dumps(cells_json | {"cells": keep}))
    before = {p: p.read_bytes() for p in (dest / "cells").rglob("*") if p.is_file()}
    events: list[str] = []
    fresh = tmp_path / "fresh"
    again = FlakyBackend(0)
    counts = run_sweep(sweep, fresh, again, export=dest, on_event=events.append)
    assert again.calls == ["smoke-ewc-s2"]
    assert counts == {"done": 3, "running": 0, "partial": 0, "failed": 0, "left": 0}
    assert f"restored 2 finished cell(s) from {dest} into {fresh}" in events
    assert "1 of 3 cells" not in " ".join(events) and any(
        e.startswith("2 of 3 cells done; running 1") for e in events)
    for name in ("smoke-ewc-s0", "smoke-ewc-s1"):
        assert (fresh / "cells" / name / "run.json").read_bytes() == \
            (dest / "cells" / name / "run.json").read_bytes()
        assert read_status(fresh, name)["state"] == "done"
        assert read_status(fresh, name)["restored_from"] == str(dest)
    assert [c["name"] for c in json.loads((dest / "cells.json").read_text())["cells"]] == [
        "smoke-ewc-s0", "smoke-ewc-s1", "smoke-ewc-s2"]
    assert all(p.read_bytes() == b for p, b in before.items())
    capsys.readouterr()
    assert main(["sweep", "status", str(fresh)]) == 0
    assert "3 done, 0 running, 0 partial, 0 failed, 0 left" in capsys.readouterr().out
    # an unfinished run directory of an exported cell is left as it is, and not run
    partial = tmp_path / "partial"
    run_sweep(sweep, partial, FlakyBackend(0))
    (partial / "cells" / "smoke-ewc-s0" / "run.json").write_text(json.dumps(
        {"format": "telapa-run", "version": 1, "status": "running"}))
    events.clear()
    third = FlakyBackend(0)
    counts = run_sweep(sweep, partial, third, export=dest, on_event=events.append)
    assert third.calls == [] and counts["done"] == 3
    assert f"1 cell(s) done in {dest} have an unfinished run directory in {partial}; " \
        "not run again" in events
    assert json.loads((partial / "cells" / "smoke-ewc-s0" / "run.json").read_text())[
        "status"] == "running"
    # without --export nothing tells the sweep, so every cell runs
    alone = FlakyBackend(0)
    run_sweep(sweep, tmp_path / "alone", alone)
    assert alone.calls == ["smoke-ewc-s0", "smoke-ewc-s1", "smoke-ewc-s2"]


class BatchBackend(FlakyBackend):
    """Finishes every cell of a job before reporting any (as a seed batch does)."""

    def run(self, sweep_dir, jobs):
        for job in jobs:
            outcomes = [super(BatchBackend, self).run(sweep_dir, [[c]]) for c in job]
            yield from [next(o) for o in outcomes]


def test_a_batchs_cells_are_exported_once_without_empty_messages(tmp_path):
    events: list[str] = []
    sweep = load_sweep(_write(tmp_path, BASE))
    dest = tmp_path / "results"
    run_sweep(sweep, tmp_path / "out", BatchBackend(0), batch_seeds=True, export=dest,
              on_event=events.append)
    assert [e for e in events if e.startswith("export")] == [
        f"exported smoke-ewc-s0, smoke-ewc-s1 to {dest}"]


def test_an_exported_sweep_is_scored_like_the_sweep(local_sweep, tmp_path, capsys):
    """... whether exported by `telapa sweep export` or by the sweep (--export)."""
    dest = tmp_path / "results"
    assert main(["sweep", "export", str(local_sweep), str(dest)]) == 0
    assert not list(dest.rglob("ckpt-*"))
    assert (local_sweep.parent / "exported" / "cells" / CELL / "metrics.json").read_bytes() \
        == (dest / "cells" / CELL / "metrics.json").read_bytes()
    capsys.readouterr()
    assert main(["metrics", str(dest), "--json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert main(["metrics", str(local_sweep), "--json"]) == 0
    assert exported == json.loads(capsys.readouterr().out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise AssertionError(f"Ray head did not open 127.0.0.1:{port}")


LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


class ListeningSockets:
    """Collects, every 0.2 s until stopped, the listening TCP sockets of the given
    processes and of every process they start (the kernel's table, via psutil)."""

    def __init__(self, *pids: int):
        import threading

        self.pids = pids
        self.found: dict[tuple[str, int], str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        import psutil

        while not self._stop.wait(0.2):
            procs = []
            for pid in self.pids:
                try:
                    root = psutil.Process(pid)
                    procs += [root, *root.children(recursive=True)]
                except psutil.Error:
                    continue
            for proc in procs:
                try:
                    for conn in proc.net_connections(kind="inet"):
                        if conn.status == psutil.CONN_LISTEN:
                            self.found[(conn.laddr.ip, conn.laddr.port)] = proc.name()
                except psutil.Error:
                    continue

    def stop(self) -> dict[tuple[str, int], str]:
        self._stop.set()
        self._thread.join()
        return self.found


def test_ray_backend_on_a_local_head_gives_identical_results(local_sweep, tmp_path):
    """docs/running.md's local recipe: a head on the loopback address. Every socket Ray opens
    (head, its workers, the driver) listens on 127.0.0.1 only, and the head advertises
    127.0.0.1 (issue 28, fault 12: ``--node-ip-address 127.0.0.1`` alone still advertised
    the machine's address and listened on every interface). The sweep's ``--import``
    module is imported by the Ray worker that runs the cell, not only by the driver, and
    the cell records it. Hermetic: Ray's home (``~/.ray``, where an earlier cluster leaves
    an ``auth_token`` that turns the head's token authentication on) is a new folder, and
    no ``RAY_AUTH_*`` setting of the caller's reaches the head or the driver; the JAX
    cache stays the one every other test uses."""
    ray_bin = Path(sys.executable).with_name("ray")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="rayt", dir="/tmp")  # short: Ray's socket paths
    site = tmp_path / "site"  # a user's module that notes every process importing it
    site.mkdir()
    (site / "sweep_marker.py").write_text(
        "import os, pathlib\n"
        "with open(pathlib.Path(os.environ['MARKER_DIR']) / 'imported', 'a') as f:\n"
        "    f.write(f'{os.getpid()}\\n')\n")
    home = tmp_path / "home"
    home.mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH_")},
           "HOME": str(home),
           ENV_VAR: os.environ.get(ENV_VAR) or str(Path.home() / ".cache" / "telapa" / "jax"),
           "RAY_USAGE_STATS_ENABLED": "0", "MARKER_DIR": str(tmp_path),
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "PYTHONPATH": os.pathsep.join([str(site), *(p for p in sys.path if p)])}
    head = subprocess.Popen(
        [str(ray_bin), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
         f"--port={port}", "--num-cpus=1", "--num-gpus=0", "--include-dashboard=false",
         "--disable-usage-stats", "--object-store-memory=80000000", f"--temp-dir={temp}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    sockets = ListeningSockets(head.pid, os.getpid())
    try:
        _wait_for_port(port, head)
        out = tmp_path / "ray"
        driver = subprocess.Popen(
            [sys.executable, "-m", "telapa.cli", "sweep", str(TINY_SWEEP), "--out", str(out),
             "--backend", "ray", "--address", f"127.0.0.1:{port}", "--threads", "1",
             "--import", "sweep_marker"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, stderr = driver.communicate(timeout=600)
        assert driver.returncode == 0, stderr
    finally:
        listening = sockets.stop()
        head.send_signal(signal.SIGTERM)  # --block: the head takes its processes down
        try:
            head_log = head.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head_log = head.communicate()[0]
        shutil.rmtree(temp, ignore_errors=True)
    assert "Local node IP: 127.0.0.1" in head_log, head_log[-2000:]
    names = set(listening.values())
    assert {"gcs_server", "raylet"} <= names, listening  # the table was read
    assert port in {p for _, p in listening}
    outside = {addr: name for addr, name in listening.items() if addr[0] not in LOOPBACK}
    assert not outside, f"Ray sockets not on the loopback address: {outside}"
    ours, theirs = local_sweep / "cells" / CELL, out / "cells" / CELL
    importers = {int(pid) for pid in (tmp_path / "imported").read_text().split()}
    assert importers - {driver.pid}, "no Ray worker imported the --import module"
    assert json.loads((theirs / "run.json").read_text())["imports"] == ["sweep_marker"]
    assert json.loads((theirs / "metrics.json").read_text()) == json.loads(
        (ours / "metrics.json").read_text())
    for name in ("visits", "curve", "final"):
        pd.testing.assert_frame_equal(pd.read_csv(theirs / f"{name}.csv"),
                                      pd.read_csv(ours / f"{name}.csv"), obj=name)


@pytest.mark.parametrize("threads", [1, 2])
def test_worker_thread_env_starts_jax(threads):
    # XLA reads an XLA_FLAGS value that does not start with "--" as a flag file name and
    # aborts the worker: `--workers 1` on 2 cores (2 threads) died that way.
    import subprocess
    import sys

    from telapa.continual.sweep import thread_env

    env = {**os.environ, **thread_env(threads)}
    assert all(flag.startswith("--") for flag in env["XLA_FLAGS"].split())
    done = subprocess.run(
        [sys.executable, "-c", "import jax.numpy as jnp; print(float(jnp.ones(3).sum()))"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "3.0", done.stderr[-500:]


def test_a_methods_key_no_method_of_the_sweep_reads_is_refused(tmp_path):
    """A grid or override key of a methods section none of the sweep's methods declares
    was accepted and changed nothing (a grid of it multiplied no cell); it is refused,
    naming the key and the sweep's methods, from the file and from ``--set``."""
    base = BASE.replace("[ewc]", "[finetune, scratch]")
    path = _write(tmp_path, base + "grid:\n  methods.ewc.lam: [1, 10]\n")
    with pytest.raises(ConfigError, match=r"grid.'methods.ewc.lam' in .*: no method of the "
                                          r"sweep reads methods.ewc \(its methods: "
                                          r"finetune, scratch\)"):
        load_sweep(path)
    path = _write(tmp_path, base)
    with pytest.raises(ConfigError, match=r"overrides.'methods.ewc.lam' in .*: no method"):
        load_sweep(path, sets={"methods.ewc.lam": 5})
    # a key some method of the sweep reads applies to that method's cells alone
    both = load_sweep(_write(tmp_path, BASE.replace("[ewc]", "[ewc, finetune]")),
                      sets={"methods.ewc.lam": 5})
    assert {c.method: c.overrides for c in both.cells} == {
        "ewc": {"methods.ewc.lam": 5}, "finetune": {}}
