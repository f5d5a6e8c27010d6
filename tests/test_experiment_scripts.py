"""The long-experiment scripts run each sweep the way its design fixes it: every
``pinned-sweep.sh NAME [options]`` of a chain names a committed sweep, with the options
its sweep file's header gives ("Run it with ...")."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAINS = ("appendix-studies.sh", "paper-studies.sh")


def _commands(text: str, comment: bool) -> list[list[str]]:
    """``pinned-sweep.sh`` calls in ``text`` (continued lines joined; in ``#`` comment
    lines when ``comment``), each as ``[NAME, *options]``."""
    lines = [line.lstrip("# ") if comment else line for line in text.splitlines()
             if line.lstrip().startswith("#") == comment]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [shlex.split(m.group(1))
            for m in re.finditer(r"pinned-sweep\.sh\"? ([A-Za-z0-9-][^\n]*)", joined)]


def _sweep_file(name: str) -> Path:
    path = ROOT / "configs" / "sweeps" / f"{name}.yaml"
    return path if path.exists() else ROOT / "experiments" / name / "sweep.yaml"


@pytest.mark.parametrize("chain", CHAINS)
def test_chains_run_each_sweep_as_its_header_says(chain: str) -> None:
    calls = _commands((ROOT / "experiments" / chain).read_text(), comment=False)
    assert calls, f"{chain} runs no pinned sweep"
    for name, *options in calls:
        sweep = _sweep_file(name)
        assert sweep.exists(), f"{chain}: no sweep file for {name}"
        header = _commands(sweep.read_text(), comment=True)
        if header:  # the sweep's own "Run it with" line
            assert [name, *options] in header, (chain, name, options, header)


APPENDIX_ORDER = ["elite-injection-paper", "elite-injection-intrinsic-paper",
                  "long-curriculum-paper", "mujoco-paper", "mujoco-paper-seeds5-7"]
"""Injection without and with the bonus, then the long curriculum (the order
docs/reproduction.md gives), then the MuJoCo study (first until 2026-12-05, when the
shorter MiniGrid studies were put before its remaining 45 h), then its seeds 5-7."""


def test_appendix_chain_order() -> None:
    calls = _commands((ROOT / "experiments" / "appendix-studies.sh").read_text(),
                      comment=False)
    assert [c[0] for c in calls] == APPENDIX_ORDER


def _chain_copy(tmp_path: Path, fake_body: str) -> Path:
    """A copy of appendix-studies.sh under ``tmp_path/experiments``, beside a fake
    pinned-sweep.sh that appends its study's name to ``tmp_path/called`` and then runs
    ``fake_body`` (bash, the study's name in ``$1``)."""
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    chain = experiments / "appendix-studies.sh"
    chain.write_text((ROOT / "experiments" / "appendix-studies.sh").read_text())
    fake = experiments / "pinned-sweep.sh"
    fake.write_text(f'#!/usr/bin/env bash\necho "$1" >> "{tmp_path}/called"\n{fake_body}')
    for script in (chain, fake):
        script.chmod(0o755)
    return chain


def _called(tmp_path: Path) -> list[str]:
    return (tmp_path / "called").read_text().split()


def _run_chain(tmp_path: Path, statuses: dict[str, int]) -> tuple[int, list[str]]:
    """Runs a copy of the chain whose pinned-sweep.sh exits with ``statuses[name]``
    (default 0); returns the chain's exit status and the studies run, in order."""
    cases = "".join(f"  {name}) exit {code};;\n" for name, code in statuses.items())
    chain = _chain_copy(tmp_path, f'case "$1" in\n{cases}esac\nexit 0\n')
    done = subprocess.run([str(chain)], timeout=30)
    return done.returncode, _called(tmp_path)


def test_a_study_with_failed_cells_does_not_stop_the_chain(tmp_path: Path) -> None:
    status, called = _run_chain(tmp_path, {"mujoco-paper": 2})
    assert called == APPENDIX_ORDER
    assert status == 2  # the failure is still the chain's outcome
    assert "mujoco-paper: exit 2" in (tmp_path / "runs" / "appendix-studies.log").read_text()


def test_a_study_stopped_by_a_signal_stops_the_chain(tmp_path: Path) -> None:
    status, called = _run_chain(tmp_path, {APPENDIX_ORDER[1]: 143})
    assert called == APPENDIX_ORDER[:2] and status == 143


def test_editing_the_chain_while_it_runs_does_not_change_the_running_chain(tmp_path: Path
                                                                           ) -> None:
    """Bash reads a script as it runs it; the chain is one brace group, read whole before
    it starts, so a commit that rewrites the file mid-study leaves the running chain as
    it was."""
    go = tmp_path / "go"
    chain = _chain_copy(
        tmp_path,
        f'[ "$1" != {APPENDIX_ORDER[0]} ] || while [ ! -e "{go}" ]; do sleep 0.05; done\n')
    proc = subprocess.Popen([str(chain)])
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "called").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        # the first study is running: rewrite the file in place, as a checkout would
        garbage = f"echo edited >> {tmp_path}/called; exit 99\n"
        chain.write_text("#!/usr/bin/env bash\n" + garbage * 50)
        go.touch()
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
    assert _called(tmp_path) == APPENDIX_ORDER


def test_a_study_out_of_time_hands_the_time_left_to_the_pinned_studies(tmp_path: Path
                                                                       ) -> None:
    """Exit 75 (`telapa sweep --until`: the cells left would not end by STUDY_UNTIL)
    passes the rest of the time to the studies after it that are already pinned, whose
    cells may be shorter (the long curriculum's TeLAPA cells against the MuJoCo study's
    Hopper baselines); one not yet pinned is not started, so no pin is taken for cells
    that cannot end, and the chain's outcome is 75."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / f"{APPENDIX_ORDER[3]}.commit").write_text("fd54865\n")
    status, called = _run_chain(tmp_path, {APPENDIX_ORDER[2]: 75})
    assert called == APPENDIX_ORDER[:4] and status == 75
    log = (tmp_path / "runs" / "appendix-studies.log").read_text()
    assert f"{APPENDIX_ORDER[4]}: not started (not pinned, and time ran short)" in log


def test_an_out_of_time_chain_still_ends_with_a_failure(tmp_path: Path) -> None:
    """A study whose cells failed is the chain's outcome, even after one out of time."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / f"{APPENDIX_ORDER[3]}.commit").write_text("fd54865\n")
    status, called = _run_chain(tmp_path, {APPENDIX_ORDER[2]: 75, APPENDIX_ORDER[3]: 2})
    assert called == APPENDIX_ORDER[:4] and status == 2


def _copy_script(root: Path, name: str) -> Path:
    """experiments/``name`` and the helper it sources, copied to ``root/experiments``."""
    for file in (name, "commit-results.sh"):
        (root / "experiments" / file).write_text((ROOT / "experiments" / file).read_text())
    script = root / "experiments" / name
    script.chmod(0o755)
    return script


def _pinned_copy(tmp_path: Path) -> Path:
    """pinned-sweep.sh in a bare copy of the repository's layout (no git, no venv), with a
    sweep file ``x``: what it does before it needs either."""
    (tmp_path / "experiments").mkdir()
    (tmp_path / "configs" / "sweeps").mkdir(parents=True)
    (tmp_path / "configs" / "sweeps" / "x.yaml").write_text("name: x\n")
    return _copy_script(tmp_path, "pinned-sweep.sh")


@pytest.mark.parametrize("until, status, says", [
    ("2000-01-01T00:00Z", 75, "STUDY_UNTIL=2000-01-01T00:00Z has passed: x not started"),
    ("tomorrowish", 2, "STUDY_UNTIL=tomorrowish is not a time"),
])
def test_a_study_past_its_until_takes_no_pin(tmp_path: Path, until: str, status: int,
                                             says: str) -> None:
    """A chain whose study ended after STUDY_UNTIL went on to the next study, whose pin
    was taken and whose cells started (a pin without --until ignores the deadline): the
    next study now exits 75 before it takes a pin; a time date cannot read is exit 2."""
    script = _pinned_copy(tmp_path)
    done = subprocess.run([str(script), "x"], env={**os.environ, "STUDY_UNTIL": until},
                          timeout=30)
    assert done.returncode == status
    assert says in (tmp_path / "runs" / "x.log").read_text()
    assert not (tmp_path / "results" / "x.commit").exists()
    assert not (tmp_path.parent / "worktrees").exists()


@pytest.mark.parametrize("recipe, made", [
    ("mkdir -p .venv/bin && printf '#!/bin/sh\\nexit 3\\n' > .venv/bin/python && "
     "chmod +x .venv/bin/python && touch made", True),
    ("exit 1", False),
])
def test_a_machine_without_the_venv_makes_it_before_the_study(tmp_path: Path, recipe: str,
                                                              made: bool) -> None:
    """A new machine keeps the checkout, not ``.venv``: the study runs ``make setup``
    first and goes on past it (here to the pin, which this copy without git cannot
    take); a setup that fails stops the study with exit 2 before it takes a pin."""
    script = _pinned_copy(tmp_path)
    (tmp_path / "Makefile").write_text(f"setup:\n\t{recipe}\n")
    done = subprocess.run([str(script), "x"], timeout=30)
    log = (tmp_path / "runs" / "x.log").read_text()
    assert ".venv/bin/python is missing: make setup" in log
    assert (tmp_path / "made").exists() == made
    if not made:
        assert done.returncode == 2 and "make setup failed; x not started" in log
        assert not (tmp_path / "results" / "x.commit").exists()
    else:
        assert "make setup failed" not in log and done.returncode != 0


def _pinned_cell_copy(tmp_path: Path) -> tuple[Path, Path, Path]:
    """pinned-cell.sh in a git repository of its own (``tmp_path/repo``) whose sweep
    ``tiny`` (tests/continual/sweep_tiny: one Scratch cell of two PPO calls) has started
    once: its pin, its ``runs/tiny`` with ``cells.json``, and the pin's worktree (a link to
    this checkout, so that the pinned code is the code under test). Returns the script, the
    sweep directory and the export."""
    import sys

    from telapa.continual.sweep import load_sweep, prepare_sweep_dir

    repo = tmp_path / "repo"
    (repo / "experiments").mkdir(parents=True)
    script = _copy_script(repo, "pinned-cell.sh")
    (repo / ".venv" / "bin").mkdir(parents=True)
    python = repo / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    (repo / "results").mkdir()
    (repo / "results" / "tiny.commit").write_text("fd54865\n")
    (tmp_path / "worktrees").mkdir()
    (tmp_path / "worktrees" / "tiny-fd54865").symlink_to(ROOT)
    sweep_dir = repo / "runs" / "tiny"
    prepare_sweep_dir(load_sweep(ROOT / "tests" / "continual" / "sweep_tiny" / "sweep.yaml"),
                      sweep_dir)
    for command in (["init", "-q"], ["config", "user.email", "t@t"],
                    ["config", "user.name", "t"], ["commit", "-q", "--allow-empty", "-m", "0"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True)
    return script, sweep_dir, repo / "results" / "tiny"


def test_one_cell_runs_ahead_of_its_sweep_from_the_pin(tmp_path: Path) -> None:
    """A cell run alone (a long cell at a session's start, ahead of the sweep's order) runs
    from the pin as the sweep's worker would, is recorded done, exported and committed;
    the sweep run after it finds it done and runs nothing; running it again is refused, as
    are a cell the sweep does not have, a sweep being run, and a sweep never started."""
    from telapa.continual.rundir import RunDir
    from telapa.continual.sweep import load_sweep, read_status, run_sweep

    script, sweep_dir, export = _pinned_cell_copy(tmp_path)
    repo = script.parents[1]
    done = subprocess.run([str(script), "tiny", "nosuch-s0"], timeout=60)
    log = repo / "runs" / "tiny.log"
    assert done.returncode == 2 and "nosuch-s0 is not a cell of" in log.read_text()
    running = RunDir(sweep_dir)
    running.lock()  # the sweep itself running
    try:
        done = subprocess.run([str(script), "tiny", "tiny-scratch-s0"], timeout=60)
    finally:
        running.unlock()
    assert done.returncode == 2 and f"run directory {sweep_dir} is in use" in log.read_text()
    assert read_status(sweep_dir, "tiny-scratch-s0").get("state") != "done"
    done = subprocess.run([str(script), "tiny", "tiny-scratch-s0"], timeout=300)
    assert done.returncode == 0, log.read_text()
    assert f"at commit fd54865 in {tmp_path / 'worktrees' / 'tiny-fd54865'}" in log.read_text()
    assert read_status(sweep_dir, "tiny-scratch-s0")["state"] == "done"
    assert (export / "cells" / "tiny-scratch-s0" / "run.json").exists()
    assert f"exported 1 cell(s) to {export} (0 there before, 0 not done)" in log.read_text()
    committed = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%s", "--stat"],
                               capture_output=True, text=True, check=True).stdout
    assert committed.startswith("results/tiny: tiny-scratch-s0")
    assert "results/tiny/cells/tiny-scratch-s0/run.json" in committed

    class NoRuns:
        describe = "nothing"

        def run(self, out, jobs):
            raise AssertionError(f"the sweep ran {jobs}")

    counts = run_sweep(load_sweep(ROOT / "tests" / "continual" / "sweep_tiny" / "sweep.yaml"),
                       sweep_dir, NoRuns())
    assert counts["done"] == 1
    done = subprocess.run([str(script), "tiny", "tiny-scratch-s0"], timeout=60)
    assert done.returncode == 2 and "tiny-scratch-s0 is already done" in log.read_text()
    (repo / "results" / "tiny.commit").unlink()
    done = subprocess.run([str(script), "tiny", "tiny-scratch-s0"], timeout=60,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "tiny has no pin" in done.stderr


def test_commit_results_commits_only_the_paths_it_is_given(tmp_path: Path) -> None:
    """The studies' one commit helper (sourced by pinned-sweep.sh and pinned-cell.sh)
    commits a study's results and nothing else a session has changed in the checkout, and
    makes no commit when they did not change."""
    for command in (["init", "-q"], ["config", "user.email", "t@t"],
                    ["config", "user.name", "t"], ["commit", "-q", "--allow-empty", "-m", "0"]):
        subprocess.run(["git", "-C", str(tmp_path), *command], check=True)
    (tmp_path / "results" / "x").mkdir(parents=True)
    (tmp_path / "results" / "x" / "a.csv").write_text("1\n")
    (tmp_path / "results" / "x.commit").write_text("fd54865\n")
    (tmp_path / "work.py").write_text("a session's edit\n")
    helper = ROOT / "experiments" / "commit-results.sh"

    def commit(message: str) -> str:
        subprocess.run(["bash", "-c", f'ROOT={shlex.quote(str(tmp_path))}; . {helper}; '
                        f'commit_results "{message}" results/x results/x.commit'], check=True,
                       timeout=60)
        return subprocess.run(["git", "-C", str(tmp_path), "log", "--format=%s", "--name-only"],
                              capture_output=True, text=True, check=True).stdout

    log = commit("results/x: one")
    assert log.startswith("results/x: one\n\nresults/x.commit\nresults/x/a.csv\n")
    assert "work.py" not in log
    assert commit("results/x: again") == log  # nothing changed: no commit
    status = subprocess.run(["git", "-C", str(tmp_path), "status", "--porcelain"],
                            capture_output=True, text=True, check=True).stdout
    assert status == "?? work.py\n"
