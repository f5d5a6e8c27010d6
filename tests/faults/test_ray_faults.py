"""Faults of a Ray cluster, on one machine: a Ray worker killed in the middle of a cell,
then the head lost and the sweep resumed without it from its directory
(docs/reliability.md, "Faults that need more than one machine").

One real head on the loopback address serves both (starting one costs 10-20 s here): its
only CPU runs one cell at a time, so which worker runs which cell, and when, is known.
The head and the driver are hermetic as in tests/continual/test_sweep.py (a home of
their own, none of the caller's ``RAY_AUTH_*`` settings)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from telapa.continual.sweep import LocalBackend, load_sweep, read_status, run_sweep
from telapa.jaxcache import ENV_VAR

from .conftest import FAULT_RUN, ONE_TASK, assert_same_results, deadline, wait_for

S0, S1 = "one-task-ewc-s0", "one-task-ewc-s1"


@contextmanager
def ray_head(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], subprocess.Popen]]:
    """A Ray head on 127.0.0.1 with one CPU, in a session of its own; yields its address,
    the environment a driver needs, and the ``ray start --block`` process. Stopped at the
    end, with every process it started."""
    pytest.importorskip("ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tmp_path / "home"
    home.mkdir()
    temp = tempfile.mkdtemp(prefix="rayf", dir="/tmp")  # short: Ray's socket paths
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH_")},
           "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           ENV_VAR: os.environ.get(ENV_VAR) or str(Path.home() / ".cache" / "telapa" / "jax")}
    head = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block",
         "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=1", "--num-gpus=0",
         "--include-dashboard=false", "--disable-usage-stats",
         "--object-store-memory=80000000", f"--temp-dir={temp}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        end = time.monotonic() + 120
        while True:
            assert head.poll() is None, "the Ray head ended while starting"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < end, f"the Ray head did not open 127.0.0.1:{port}"
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", env, head
    finally:
        if head.poll() is None:
            tree = psutil.Process(head.pid).children(recursive=True)
            head.send_signal(signal.SIGTERM)  # --block: the head takes its processes down
            try:
                head.wait(timeout=60)
            except subprocess.TimeoutExpired:
                head.kill()
                head.wait()
            _, alive = psutil.wait_procs(tree, timeout=10)
            for process in alive:  # e.g. a worker a failed test left stopped
                process.kill()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def resource_tracker() -> None:
    """multiprocessing's resource tracker, which the local backend's first worker starts
    and which lives as long as this process: started before `no_leaked_processes` counts."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def _holder(out: Path, name: str, head: subprocess.Popen) -> psutil.Process:
    """The Ray worker that holds cell ``name``'s run directory (its lock file names it),
    checked to be one of the head's processes."""
    worker = psutil.Process(int((out / "cells" / name / ".lock").read_text().split()[1]))
    assert head.pid in {p.pid for p in worker.parents()}, \
        f"cell {name} is held by pid {worker.pid}, not by a worker of the head"
    return worker


def _latest(out: Path, name: str) -> str:
    return json.loads((out / "cells" / name / "checkpoint.json").read_text())["latest"]


def _stop_at_a_new_checkpoint(out: Path, name: str, after: str, head: subprocess.Popen
                              ) -> psutil.Process:
    """Stops (SIGSTOP) the worker running cell ``name`` as soon as it has committed a
    checkpoint other than ``after``: a warm worker runs the suite's run in about a second,
    so the test must not wait for a moment in the middle of it, it must make one."""
    end = time.monotonic() + 300
    while _latest(out, name) == after:
        assert time.monotonic() < end, f"cell {name} wrote no checkpoint after {after}"
        time.sleep(0.005)
    worker = _holder(out, name, head)
    worker.suspend()
    return worker


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in root.rglob("*")}


def test_a_killed_ray_worker_and_a_lost_head(tmp_path, reference, resource_tracker,
                                             no_leaked_processes):
    """Seeds 0 and 1 on a one-CPU head, ``--retries 1``. The Ray worker running seed 0 is
    SIGKILLed after its first checkpoint: its task fails (``max_retries=0``), seed 0 is
    charged that try, seed 1 runs, and seed 0 is retried in another worker from its
    checkpoint. Mid-way through that retry the head is lost (every process of the head
    and the driver SIGKILLed, as when its machine dies). The same sweep on the local
    backend then finds seed 1 done and leaves it untouched, resumes seed 0 from the
    retry's last checkpoint and ends with exactly an uninterrupted run's results: one
    segment per try, none started over."""
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n"
                          "seeds: [0, 1]\n")
    out = tmp_path / "sweep"
    log = tmp_path / "driver.log"  # a file, not a pipe: nobody reads it while it runs
    with ray_head(tmp_path) as (address, env, head), open(log, "w") as sink:
        driver = subprocess.Popen(
            [sys.executable, "-m", "telapa.cli", "sweep", str(sweep_file), "--out", str(out),
             "--backend", "ray", "--address", address, "--threads", "1", "--retries", "1"],
            env=env, stdout=sink, stderr=subprocess.STDOUT)

        def running(predicate):
            def check() -> bool:
                assert driver.poll() is None, f"the sweep ended: {log.read_text()[-3000:]}"
                return predicate()
            return check

        wait_for(running((out / "cells" / S0 / "checkpoint.json").exists), timeout_s=300,
                 what="seed 0's first checkpoint")
        first = _holder(out, S0, head)
        first_try = read_status(out, S0)["started_try"]
        first.kill()
        first.wait(timeout=30)
        killed_at = _latest(out, S0)

        def retried() -> bool:  # seed 0 charged, taken up again by another worker
            s0 = read_status(out, S0)
            return s0["attempts"] == 1 and s0.get("started_try") not in (None, first_try)

        wait_for(running(retried), timeout_s=300, what="seed 0's retry")
        assert read_status(out, S1)["state"] == "done"
        second = _stop_at_a_new_checkpoint(out, S0, killed_at, head)
        assert second.pid != first.pid
        tree = [*psutil.Process(head.pid).children(recursive=True), psutil.Process(head.pid)]
        # the driver first: killed after the head, it could see the node die and charge
        # seed 0 a second try in between (a race it once won); a machine's death takes both
        driver.kill()
        driver.wait()
        for process in tree:  # Ray's workers are in process groups of their own
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        _, alive = psutil.wait_procs(tree, timeout=30)
        assert not alive, f"processes of the lost head still running: {alive}"
    assert not (out / "cells" / S0 / "metrics.json").exists(), "seed 0 ended before the loss"
    s0 = read_status(out, S0)
    assert (s0["state"], s0["attempts"], len(s0["errors"])) == ("queued", 1, 1)
    assert s0["errors"][0]["error"].startswith("ray task failed: "), s0["errors"]
    done_before = _files(out / "cells" / S1)
    events: list[str] = []
    with deadline(300):
        counts = run_sweep(load_sweep(sweep_file), out, LocalBackend(1, 1),
                           on_event=events.append)
    assert (counts["done"], sum(counts.values())) == (2, 2), counts
    assert events[0].startswith("1 of 2 cells done; running 1 on local"), events
    assert _files(out / "cells" / S1) == done_before
    s0, s1 = read_status(out, S0), read_status(out, S1)
    assert (s0["state"], s0["attempts"], len(s0["errors"])) == ("done", 2, 1)
    assert (s1["state"], s1["attempts"], s1["errors"]) == ("done", 1, [])
    assert json.loads((out / "cells" / S0 / "accounting.json").read_text())["segments"] == 3
    assert_same_results(out / "cells" / S0, reference)
