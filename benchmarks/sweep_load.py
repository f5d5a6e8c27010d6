"""A load test of the sweep machinery: many tiny cells on local workers while worker
processes are SIGKILLed at random, against a quiet sweep of the same cells.

Everything but the cells' work is telapa's own: `run_sweep` on a `LocalBackend` (its
worker pool, replacement of a dead worker, retries, rounds, status files, the sweep's
lock). The cells are stand-ins for runs (`tiny_job`, `tiny_cell`), small enough for
hundreds in a few minutes on 2 cores, with a run's contract: a cell takes its run
directory's lock, writes a manifest (``run.json``) and goes through ``--steps`` steps of
``--step-s`` seconds, each ending in a checkpoint written atomically: a hash chain over
the steps so far. It ends as a complete run, its result (the chain's end) in
``metrics.json``. A killed cell resumes from its checkpoint, so a resume that skipped,
repeated or lost a step would change its result; a cell the sweep ran again once
complete is noted in its ``again`` file.

Two sweep processes run one after the other (``--sweep-process``, a mode of this
script): a quiet one, then the chaos one, during which this process SIGKILLs a worker of
that sweep (a child of the sweep process it started, running multiprocessing's
``spawn_main``; never anything else) at random moments: at most ``--kills`` kills, drawn
uniformly over ``--kill-window-s`` seconds from the moment the first cell starts
(seeded: ``--seed``): a kill finds its worker running a cell, or starting after an
earlier kill. Every kill is on the loopback machine only; nothing listens.

Checks (each failure is listed in the report, and the exit status is 1):

- every cell done exactly once: its status ``done``, its run complete, ``attempts`` one
  more than its errors, every error a worker killed by SIGKILL, one ``done`` event, and
  never run again once complete; the errors no more than the kills;
- results identical: each cell's ``metrics.json`` byte for byte the quiet sweep's;
- nothing left behind: no process of either sweep's tree (workers, the resource tracker)
  alive 10 s after its sweep process ended, no temporary file in either sweep directory;
- both sweep processes end with status 0, every cell done.

Writes ``benchmarks/results/sweep_load.json`` (``--quick``: ``sweep_load.quick.json``;
``--out`` elsewhere): the settings, the machine, each sweep's wall time, the kills (when,
which process) and the outcome.

    python benchmarks/sweep_load.py            # 200 cells, 2 workers, up to 20 kills
    python benchmarks/sweep_load.py --quick    # smoke check: 6 cells, up to 2 kills
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from machine import cpu_model

from telapa.continual.rundir import RunDir
from telapa.continual.sweep import (
    LocalBackend,
    Outcome,
    load_sweep,
    mark_started,
    read_status,
    run_sweep,
)
from telapa.io import read_json, write_json_atomic

RESULTS = Path(__file__).resolve().parent / "results" / "sweep_load.json"
FULL = {"cells": 200, "workers": 2, "kills": 20, "kill_window_s": 60.0, "steps": 8,
        "step_s": 0.02, "poll_s": 0.01}
QUICK = {"cells": 6, "workers": 2, "kills": 2, "kill_window_s": 1.0, "steps": 8,
         "step_s": 0.05, "poll_s": 0.05}
"""``poll_s``: how often the controller looks at the sweep's processes (each look reads
every process's /proc entry twice). Every 10 ms it takes about a sixth of a core, which
the sweep's own processes miss on 2 cores: a quick check's two sweeps took 35-37 s
polling every 10 ms and 21-28 s every 50 ms (loaded machine; kills at the same times)."""
KILLED = "worker process died: killed by SIGKILL"
"""How the sweep records a cell whose worker was SIGKILLed (`LocalBackend`)."""


# --- the cells (run in the sweep's worker processes) ---------------------------------

def tiny_cell(path: Path, seed: int, steps: int, step_s: float) -> dict[str, Any]:
    """Runs, or resumes, the stand-in run of cell ``path`` to its end (as `run_cell`: a
    directory without a manifest is a start that died before it, and is cleared)."""
    run_dir = RunDir(path)
    if run_dir.exists():
        run_dir.lock()
    else:
        run_dir.clear_unstarted()
        run_dir.create({"seed": seed, "stand_in": "benchmarks/sweep_load.py"}, config={},
                       curriculum={})
    try:
        if run_dir.is_complete():  # the sweep ran a done cell again
            with open(path / "again", "a") as again:
                again.write(f"{os.getpid()}\n")
            return {"ok": True, "metrics": read_json(path / "metrics.json", "metrics")}
        checkpoint = path / "checkpoint.json"
        state = read_json(checkpoint, "checkpoint") if checkpoint.exists() else \
            {"step": 0, "chain": f"seed {seed}"}
        while state["step"] < steps:
            time.sleep(step_s)
            chain = hashlib.sha256(f"{state['chain']}/{state['step']}".encode()).hexdigest()
            state = {"step": state["step"] + 1, "chain": chain}
            write_json_atomic(checkpoint, state)
        metrics = {"chain": state["chain"], "steps": steps}
        write_json_atomic(path / "metrics.json", metrics)
        run_dir.set_status("complete")
        return {"ok": True, "metrics": metrics}
    finally:
        run_dir.unlock()


def tiny_job(sweep_dir: str, cells: list[dict[str, Any]]) -> list[Outcome]:
    """A worker's job (`LocalBackend(job=...)`), as `run_job` does it: the start recorded
    in each cell's status, then each cell to its end. ``TINY_STEPS`` and ``TINY_STEP_S``
    (environment, set by the sweep process before its workers start) size the cells."""
    mark_started(sweep_dir, cells)
    steps, step_s = int(os.environ["TINY_STEPS"]), float(os.environ["TINY_STEP_S"])
    return [(cell["name"], tiny_cell(Path(sweep_dir) / "cells" / cell["name"], cell["seed"],
                                     steps, step_s)) for cell in cells]


def sweep_process(args: argparse.Namespace) -> int:
    """``--sweep-process``: one sweep of the cells, its events on stdout."""
    os.environ.update(TINY_STEPS=str(args.steps), TINY_STEP_S=str(args.step_s))
    counts = run_sweep(load_sweep(args.sweep_file), args.sweep_process,
                       LocalBackend(args.workers, 1, job=tiny_job), retries=args.retries,
                       on_event=lambda text: print(text, flush=True))
    print(json.dumps({"counts": counts}), flush=True)
    return 0


# --- the controller ------------------------------------------------------------------

def _workers(sweep: psutil.Process) -> list[psutil.Process]:
    """The sweep's worker processes: its children that run multiprocessing's
    ``spawn_main`` (not its resource tracker)."""
    found = []
    for child in sweep.children():
        try:
            if any("spawn_main" in part for part in child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def run_one(name: str, work: Path, settings: dict[str, Any], *, kills: int,
            rng: random.Random, timeout_s: float) -> dict[str, Any]:
    """Runs one sweep process over the cells of ``work/sweep.yaml`` into ``work/NAME``,
    SIGKILLing at most ``kills`` of its workers; returns what happened."""
    out = work / name
    log = work / f"{name}.log"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--sweep-process", str(out),
           "--sweep-file", str(work / "sweep.yaml"), "--workers", str(settings["workers"]),
           "--retries", str(max(kills, 1)), "--steps", str(settings["steps"]),
           "--step-s", str(settings["step_s"])]
    start = time.monotonic()
    with open(log, "w") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    sweep = psutil.Process(proc.pid)
    seen: dict[int, psutil.Process] = {}
    plan = sorted(rng.uniform(0, settings["kill_window_s"]) for _ in range(kills))
    first_cell: float | None = None
    made: list[dict[str, Any]] = []
    while proc.poll() is None:
        now = time.monotonic()
        if now - start > timeout_s:
            proc.kill()
            proc.wait()
            break
        try:
            for child in sweep.children(recursive=True):
                seen.setdefault(child.pid, child)
            workers = _workers(sweep)
        except psutil.NoSuchProcess:  # it just ended
            continue
        if first_cell is None and (out / "cells").is_dir() and any(os.scandir(out / "cells")):
            first_cell = now
        if plan and first_cell is not None and workers and now - first_cell >= plan[0]:
            victim = rng.choice(sorted(workers, key=lambda p: p.pid))
            try:
                victim.kill()
                made.append({"t_s": round(now - first_cell, 3), "pid": victim.pid})
                plan.pop(0)
            except psutil.NoSuchProcess:  # ended meanwhile: the next poll draws again
                pass
        time.sleep(settings["poll_s"])
    wall_s = time.monotonic() - start
    _, alive = psutil.wait_procs(list(seen.values()), timeout=10)
    for process in alive:  # the sweep's own processes, left behind: ended, and reported
        process.kill()
    lines = log.read_text().splitlines()
    counts = json.loads(lines[-1])["counts"] if lines and lines[-1].startswith("{") else None
    return {"wall_s": round(wall_s, 2), "exit_status": proc.returncode, "counts": counts,
            "kills": made, "processes_seen": len(seen),
            "leaked": [p.pid for p in alive],
            "done_events": [line.split(" ", 1)[1] for line in lines
                            if line.startswith("done ")],
            "requeued": sum(line.startswith("requeued ") for line in lines)}


def reap_orphans() -> None:
    """Makes this process the reaper of its descendants' orphans (Linux's
    ``PR_SET_CHILD_SUBREAPER``; elsewhere nothing): a sweep process's resource tracker
    ends just after it, and `run_one` then waits for it until its new parent reaps it,
    which took init 1-2 s here. The leak check is the same: what is still running after
    10 s is still running whoever its parent is."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def check(work: Path, names: list[str], quiet: dict[str, Any], chaos: dict[str, Any]
          ) -> list[str]:
    """Every failed check, in words (none: the load test passed)."""
    failures = []
    for label, sweep in (("quiet", quiet), ("chaos", chaos)):
        if sweep["exit_status"] != 0 or sweep["counts"] != {
                "done": len(names), "running": 0, "partial": 0, "failed": 0, "left": 0}:
            failures.append(f"{label} sweep: exit status {sweep['exit_status']}, cells "
                            f"{sweep['counts']} (its events: {label}.log, kept with --keep)")
        if sweep["leaked"]:
            failures.append(f"{label} sweep: processes left running: {sweep['leaked']}")
        temporaries = [str(p) for p in (work / label).rglob(".*")
                       if p.name != ".lock" and p.is_file()]
        if temporaries:
            failures.append(f"{label} sweep: temporaries left: {temporaries[:5]}")
        if sorted(sweep["done_events"]) != sorted(names):
            extra = sorted({n for n in sweep["done_events"]
                            if sweep["done_events"].count(n) != 1})
            failures.append(f"{label} sweep: not one 'done' per cell: {extra[:5]}")
    errors = 0
    for name in names:
        ours, theirs = work / "chaos" / "cells" / name, work / "quiet" / "cells" / name
        for label in ("quiet", "chaos"):
            cell = work / label / "cells" / name
            status = read_status(work / label, name)
            if status.get("state") != "done" or not RunDir(cell).is_complete():
                failures.append(f"{label} {name}: status {status.get('state')}, run "
                                f"complete: {RunDir(cell).is_complete()}")
            wrong = [e["error"] for e in status.get("errors", [])
                     if not str(e.get("error")).startswith(KILLED)]
            if status.get("attempts") != 1 + len(status.get("errors", [])) or wrong:
                failures.append(f"{label} {name}: attempts {status.get('attempts')}, "
                                f"errors {[e.get('error') for e in status.get('errors', [])]}")
            if label == "quiet" and status.get("errors"):
                failures.append(f"quiet {name}: errors without a kill")
            if (cell / "again").exists():
                failures.append(f"{label} {name}: run again once complete")
        errors += len(read_status(work / "chaos", name).get("errors", []))
        if not (ours / "metrics.json").is_file() or (ours / "metrics.json").read_bytes() != \
                (theirs / "metrics.json").read_bytes():
            failures.append(f"{name}: result differs from the quiet sweep's")
    if errors > len(chaos["kills"]):
        failures.append(f"{errors} cells charged for {len(chaos['kills'])} kills")
    return failures


def machine() -> dict[str, Any]:
    return {"cpu_model": cpu_model(), "cores": len(os.sched_getaffinity(0)),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke check: " + ", ".join(f"{k} {v}" for k, v in QUICK.items()))
    parser.add_argument("--cells", type=int)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--kills", type=int, help="SIGKILLs of workers, at most")
    parser.add_argument("--kill-window-s", type=float,
                        help="the kills fall in this many seconds after the first cell starts")
    parser.add_argument("--steps", type=int, help="checkpointed steps of a cell")
    parser.add_argument("--step-s", type=float, help="seconds a step takes")
    parser.add_argument("--poll-s", type=float,
                        help="seconds between the controller's looks at the sweep's processes")
    parser.add_argument("--seed", type=int, default=0, help="draws the kills")
    parser.add_argument("--timeout-s", type=float, default=900, help="per sweep")
    parser.add_argument("--out", type=Path, help=f"default: {RESULTS} (--quick: .quick.json)")
    parser.add_argument("--keep", type=Path, help="run in this new folder and keep it")
    parser.add_argument("--sweep-process", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--sweep-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--retries", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sweep_process is not None:
        return sweep_process(args)
    settings = dict(QUICK if args.quick else FULL)
    if args.quick:  # a full run ends as it did (the sweeps' own times do not change)
        reap_orphans()
    for key in settings:
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    if args.keep is not None:
        args.keep.mkdir(parents=True)
        work = args.keep
    else:
        work = Path(tempfile.mkdtemp(prefix="sweep_load."))
    try:
        (work / "sweep.yaml").write_text(  # cells smoke-scratch-s0 .. (names and seeds only)
            f"preset: quick\ncurricula: [smoke]\nmethods: [scratch]\n"
            f"seeds: {settings['cells']}\n")
        names = [c.name for c in load_sweep(work / "sweep.yaml").cells]
        rng = random.Random(args.seed)
        started = time.monotonic()
        quiet = run_one("quiet", work, settings, kills=0, rng=rng, timeout_s=args.timeout_s)
        chaos = run_one("chaos", work, settings, kills=settings["kills"], rng=rng,
                        timeout_s=args.timeout_s)
        failures = check(work, names, quiet, chaos)
        report = {
            "benchmark": "sweep_load", "quick": args.quick, "seed": args.seed,
            "settings": settings, "machine": machine(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "wall_s": round(time.monotonic() - started, 2),
            "quiet": quiet, "chaos": chaos,
            "cells_charged": sum(len(read_status(work / "chaos", n).get("errors", []))
                                 for n in names),
            "outcome": "pass" if not failures else "fail", "failures": failures,
        }
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    out = args.out or (RESULTS.with_suffix(".quick.json") if args.quick else RESULTS)
    out.parent.mkdir(parents=True, exist_ok=True)
    for sweep in ("quiet", "chaos"):
        del report[sweep]["done_events"]  # checked above; a list per cell is no report
    out.write_text(json.dumps(report, indent=1) + "\n")
    kills = report["chaos"]["kills"]
    print(f"sweep_load: {settings['cells']} cells x {settings['workers']} workers, "
          f"{len(kills)} kills, {report['cells_charged']} cells charged, "
          f"{report['chaos']['requeued']} requeued; quiet {quiet['wall_s']} s, chaos "
          f"{chaos['wall_s']} s: {report['outcome'].upper()} -> {out}")
    for failure in failures:
        print(f"  {failure}", file=sys.stderr)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
