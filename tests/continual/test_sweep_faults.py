"""Faults of `telapa sweep` a probe of docs/running.md's "Sweeps" found, each fixed:

- Slurm's client installed with no cluster configured (every command: ``fatal: Could not
  establish a configuration source``): the sweep printed sbatch's errors and a
  traceback, and left the sweep directory it had created; now one line before the
  directory is created (``scontrol ping``), and a refused submission is one line naming
  sbatch's message, leaving no directory of its own and no submission files.
- A stopped sweep: SIGTERM ended it with no message; Ctrl-C was followed by the
  resource tracker's "leaked semaphore objects" warning (its worker killed outright
  held tensorboardX's queue). Both now end in the resume line, with nothing after it.
- ``telapa sweep status`` with nothing finished said "about 0 min" left, and a cell
  25 s into its run showed a wall of "0.00 h".
- A misspelled ``--set`` key got no "did you mean", where ``telapa run``'s does.

Slurm is faked by scripts on PATH (no cluster needed); a stop is a real sweep process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from telapa.cli import main
from telapa.config import ConfigError
from telapa.continual.sweep import load_sweep, prepare_sweep_dir
from telapa.continual.sweep.status import format_duration as _duration

HERE = Path(__file__).parent
TINY = HERE / "sweep_tiny" / "sweep.yaml"
NO_CONFIG = ("{name}: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
             "{name}: error: fetch_config: DNS SRV lookup failed\n"
             "{name}: fatal: Could not establish a configuration source")
"""What each of Slurm's commands says on a machine with no slurm.conf (Debian's client)."""


def _fake_slurm(folder: Path, monkeypatch, *, ping_ok: bool) -> None:
    """``sbatch``, ``srun``, ``squeue``, ``scontrol`` and ``scancel`` on PATH, each failing as
    on a machine with no cluster configured; with ``ping_ok``, ``scontrol ping`` answers
    (the controller went away between the check and the submission)."""
    folder.mkdir()
    for name in ("sbatch", "srun", "squeue", "scontrol", "scancel"):
        up = ('[ "$1" = ping ] && { echo "Slurmctld(primary) at ctl is UP"; exit 0; }\n'
              if ping_ok and name == "scontrol" else "")
        script = folder / name
        script.write_text(f"#!/bin/sh\n{up}cat >&2 <<'EOF'\n{NO_CONFIG.format(name=name)}\n"
                          "EOF\nexit 1\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_CONF", raising=False)


def _error(argv: list[str], capsys) -> str:
    """``telapa ARGV``'s one error line (it must fail with status 2 and print nothing else
    than its progress lines and that line: no traceback, no sbatch output)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines()
             if line.strip() and not line.startswith("[")]  # "[HH:MM:SS] ..." progress
    assert len(lines) == 1, lines
    return lines[0]


def _cli_error(argv: list[str]) -> str:
    """As `_error`, in a process of its own: submitit, imported in this one, would
    reconfigure logging under pytest's capture (``dictConfig`` closes absl's handler, and
    with it the stream pytest captured when absl was imported)."""
    done = subprocess.run([sys.executable, "-m", "telapa.cli", *argv], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines()
             if line.strip() and not line.startswith("[")]
    assert len(lines) == 1, lines
    return lines[0]


def test_slurm_without_a_cluster_is_one_line_before_the_sweep_directory(tmp_path,
                                                                       monkeypatch):
    _fake_slurm(tmp_path / "bin", monkeypatch, ping_ok=False)
    out = tmp_path / "sweeps" / "slurm1"
    err = _cli_error(["sweep", str(TINY), "--out", str(out), "--backend", "slurm", "--time",
                      "10"])
    assert err.startswith("telapa: error: --backend slurm: Slurm does not answer here")
    assert "scontrol: fatal: Could not establish a configuration source" in err
    assert not out.exists() and not out.parent.exists()


def test_a_refused_submission_is_one_line_and_leaves_no_sweep_directory_of_its_own(
        tmp_path, monkeypatch):
    _fake_slurm(tmp_path / "bin", monkeypatch, ping_ok=True)
    argv = ["sweep", str(TINY), "--backend", "slurm", "--time", "10", "--out"]
    refused = ("telapa: error: submitting 1 job(s) to Slurm failed: sbatch: fatal: Could not "
               "establish a configuration source")
    new = tmp_path / "new"
    assert _cli_error([*argv, str(new)]) == f"{refused}; nothing ran, and {new} was removed"
    assert not new.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".new")]  # no temporary
    empty = tmp_path / "empty"  # the user's: left as it was
    empty.mkdir()
    assert _cli_error([*argv, str(empty)]) == (f"{refused}; nothing ran, and {empty} was "
                                               "left empty")
    assert empty.is_dir() and not list(empty.iterdir())
    resumed = tmp_path / "resumed"  # a sweep that was there before: kept, as it was
    prepare_sweep_dir(load_sweep(TINY), resumed)
    before = sorted(p.relative_to(resumed) for p in resumed.rglob("*"))
    assert _cli_error([*argv, str(resumed)]) == (
        f"{refused}; run the same command again to resume {resumed}")
    after = sorted(p.relative_to(resumed) for p in resumed.rglob("*")
                   if p.relative_to(resumed).parts[0] not in ("slurm", ".lock"))
    assert [p for p in after if p.parts[0] != "status"] == [
        p for p in before if p.parts[0] != "status"]
    assert not list((resumed / "slurm").iterdir())  # no pickles, no batch script left


def _stopped_sweep(tmp_path: Path, signum: int) -> tuple[subprocess.CompletedProcess, Path]:
    """A real ``telapa sweep`` (one worker), sent ``signum`` once its cell's run has opened
    its trackers (TensorBoard's event queue: the semaphores); its end, stderr whole (the
    resource tracker writes to it too, and ends after the sweep)."""
    file = tmp_path / "long.yaml"  # minutes of PPO: the stop lands inside the run
    file.write_text(f"name: long\npreset: {HERE / 'tiny_run.yaml'}\n"
                    f"curricula: [{HERE / 'sweep_tiny' / 'curriculum.yaml'}]\n"
                    "methods: [scratch]\nseeds: [0]\n"
                    "overrides:\n  steps_per_visit: 1048576\n  eval_every: 4096\n")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "telapa.cli", "sweep", str(file), "--out",
                             str(out), "--workers", "1", "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not list(out.glob("cells/*/tb/events*")):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the cell's run did not start"
            time.sleep(0.2)
        time.sleep(1.0)
        os.kill(proc.pid, signum)  # the sweep process alone: its workers are its to stop
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err), out


@pytest.mark.parametrize(("signum", "status", "said"), [
    (signal.SIGINT, 130, "interrupted"),
    (signal.SIGTERM, 143, "terminated (SIGTERM)"),
], ids=["ctrl-c", "sigterm"])
def test_a_stopped_sweep_ends_in_its_resume_line_alone(tmp_path, signum, status, said):
    done, out = _stopped_sweep(tmp_path, signum)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("[")]
    assert done.returncode == status, done.stderr[-3000:]
    assert lines == [f"telapa: error: {said}; run the same command again to resume {out}"], \
        done.stderr[-3000:]  # nothing after it: no "leaked semaphore objects" warning
    assert main(["sweep", "status", str(out)]) == 0  # the cell's lock released: partial


def _started(cell: Path, *, wall_s: float, done: int, phases: int) -> None:
    """Makes ``cell`` a run stopped after ``done`` of ``phases`` phases in ``wall_s``."""
    (cell / "ckpt-000001").mkdir(parents=True)
    (cell / "run.json").write_text(json.dumps(
        {"format": "telapa-run", "version": 1, "status": "running", "seed": 0}))
    (cell / "ckpt-000001" / "state.json").write_text(json.dumps(
        {"next_phase": done, "phases": phases, "wall_s": wall_s, "records": {}}))
    (cell / "checkpoint.json").write_text(json.dumps({"latest": "ckpt-000001"}))


def test_status_with_nothing_to_go_by_says_not_estimated_and_short_walls_read(tmp_path,
                                                                              capsys):
    file = tmp_path / "s.yaml"
    file.write_text(f"preset: {HERE / 'tiny_run.yaml'}\ncurricula: [smoke]\n"
                    "methods: [ewc]\nseeds: 2\n")
    out = tmp_path / "out"
    prepare_sweep_dir(load_sweep(file), out)
    assert main(["sweep", "status", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cell time left: not estimated yet (the 2 cell(s) left" in text
    assert "about" not in text and "0 min" not in text
    _started(out / "cells" / "smoke-ewc-s0", wall_s=25.0, done=4, phases=17)
    assert main(["sweep", "status", str(out)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if "smoke-ewc-s0" in line)
    assert "4/17 phases" in row and "25 s" in row and " h " not in row
    # 25 s x 13 / 4 phases: 81 s, in minutes; the cell not started named as not estimated
    assert "about 1 min of cell time left" in text
    assert "1 cell(s) not estimated" in text
    assert [_duration(s) for s in (0.4, 25, 59.4, 59.6, 600, 3569, 3600, 7200)] == [
        "0 s", "25 s", "59 s", "1 min", "10 min", "59 min", "1.0 h", "2.0 h"]
    assert _duration(float("nan")) == ""


def test_a_misspelled_set_key_suggests_the_close_ones_as_run_does(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"unknown key 'train\.ppo\.lrr' in --set "
                                          r"\(did you mean 'train\.ppo\.lr'\?\)"):
        load_sweep(TINY, {"train.ppo.lrr": 1})
    out = tmp_path / "out"
    err = _error(["sweep", str(TINY), "--out", str(out), "--set", "methods.ewc.lamda=2"],
                 capsys)
    assert "(did you mean 'methods.ewc.lam'?)" in err
    assert not out.exists()
    file = tmp_path / "s.yaml"  # the file's own keys too
    file.write_text(TINY.read_text().replace("../tiny_run.yaml", str(HERE / "tiny_run.yaml"))
                    .replace("curriculum.yaml", str(HERE / "sweep_tiny" / "curriculum.yaml"))
                    .replace("eval_every:", "eval_evry:"))
    with pytest.raises(ConfigError, match=r"overrides\.'eval_evry' in .*"
                                          r"\(did you mean 'eval_every'\?\)"):
        load_sweep(file)
