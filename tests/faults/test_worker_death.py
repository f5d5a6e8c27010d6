"""A sweep worker that dies (an env calling ``os._exit``, the kernel's OOM killer) fails
only the cell it was running: with two workers, the cell running beside it goes on and
ends exactly as in a quiet sweep, its attempts untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from telapa.continual.sweep import LocalBackend, load_sweep, read_status, run_sweep

from .conftest import FAULT_RUN, ONE_TASK, assert_same_results, deadline
from .workers import die_on_seed_1_while_seed_0_runs

S0, S1 = "one-task-ewc-s0", "one-task-ewc-s1"


@pytest.fixture
def sweep_file(tmp_path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n"
                    "seeds: [0, 1]\n")
    return path


@pytest.fixture
def resource_tracker() -> None:
    """multiprocessing's resource tracker, which the first spawned worker starts and which
    lives as long as this process: started before `no_leaked_processes` counts."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def test_a_dying_worker_takes_only_its_own_cell(sweep_file, tmp_path, reference,
                                                resource_tracker, no_leaked_processes):
    """Two workers: seed 0 trains on one while the other, running seed 1, dies mid-way
    through seed 0's run (and again on its retry). A shared process pool broke: seed 0's
    worker was terminated with it and seed 0 ended ``failed``, attempts 2, "worker process
    died: A process in the process pool was terminated abruptly" twice. Now seed 1 alone
    is charged, with how its worker died, and seed 0 is done in one attempt with exactly
    an uninterrupted run's results."""
    out = tmp_path / "sweep"
    events: list[str] = []
    with deadline(600):
        counts = run_sweep(load_sweep(sweep_file), out,
                           LocalBackend(2, 1, job=die_on_seed_1_while_seed_0_runs),
                           retries=1, on_event=events.append)
    assert (counts["done"], counts["failed"]) == (1, 1)
    s0, s1 = read_status(out, S0), read_status(out, S1)
    assert (s0["state"], s0["attempts"], s0["errors"]) == ("done", 1, [])
    assert (s1["state"], s1["attempts"]) == ("failed", 2)
    assert [e["error"] for e in s1["errors"]] == ["worker process died: exit status 3"] * 2
    assert not any(S0 in e and not e.startswith(f"done {S0}") for e in events), events
    assert_same_results(out / "cells" / S0, reference)
