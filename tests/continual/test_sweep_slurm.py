"""`telapa sweep --backend slurm` against a real one-node Slurm (tests/continual/
slurm_cluster.py: munged, slurmctld and slurmd started for the session): a 4-cell sweep
gives the local backend's results, and so does one whose tasks are cancelled
(``scancel``), requeued (``scontrol requeue``) and warned of their time limit (the
``--signal`` USR2: a stop at the next phase boundary and a requeue by the task), each cell
done exactly once. Without Slurm or submitit the command says what to install, before
anything is written; the options are validated up front, naming the key."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from telapa import envvars
from telapa.cli import main
from telapa.config import ConfigError
from telapa.continual.rundir import RunDir
from telapa.continual.sweep import SlurmOptions, load_sweep, read_status
from telapa.continual.sweep.slurm_backend import (
    POLL_ENV,
    RESULT_WAIT_ENV,
    RESULT_WAIT_S,
    read_jobs,
    task_states,
)
from telapa.io import stop

from .slurm_cluster import OneNodeSlurm, missing

HERE = Path(__file__).parent
CELLS = [f"tiny-scratch-s{s}" for s in range(4)]
RESULTS = ("metrics.json", "visits.csv", "curve.csv", "final.csv")
TIMEOUT_S = 600


def _sweep_file(folder: Path, extra: str = "") -> Path:
    """The sweep tests' tiny cell at seeds 0-3 (4 cells; 2 jobs of 2 seeds each with
    ``--seeds-per-batch 2``)."""
    path = folder / "tiny4.yaml"
    path.write_text(f"name: tiny4\npreset: {HERE / 'tiny_run.yaml'}\n"
                    f"curricula: [{HERE / 'sweep_tiny' / 'curriculum.yaml'}]\n"
                    "methods: [scratch]\nseeds: [0, 1, 2, 3]\n"
                    "overrides:\n  steps_per_visit: 512\n  eval_every: 256\n" + extra)
    return path


@pytest.fixture(scope="session")
def slurm():
    """A one-node Slurm cluster for the session (``SLURM_CONF`` points at it meanwhile);
    stopped after, with no daemon left."""
    if (why := missing()) is not None:
        pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="tslurm", dir="/tmp"))  # short: munge's socket
    root.chmod(0o755)
    cluster = OneNodeSlurm(root)
    saved = os.environ.get("SLURM_CONF")
    try:
        cluster.start()
        os.environ["SLURM_CONF"] = str(cluster.conf)
        yield cluster
    finally:
        cluster.stop()
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        left = subprocess.run(["pgrep", "-f", str(root)], capture_output=True, text=True)
        assert not left.stdout.strip(), f"daemons left: {left.stdout}"
        import shutil
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The 4 cells on the local backend: the results every Slurm sweep must give."""
    folder = tmp_path_factory.mktemp("local")
    out = folder / "out"
    assert main(["sweep", str(_sweep_file(folder)), "--out", str(out), "--threads", "1",
                 "--seeds-per-batch", "2"]) == 0
    return out


def _fails(argv: list[str], capsys) -> str:
    """``telapa ARGV``'s error line (it must fail)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code != 0
    return capsys.readouterr().err.strip()


def _same_results(out: Path, reference: Path) -> None:
    for cell in CELLS:
        ours, theirs = out / "cells" / cell, reference / "cells" / cell
        assert json.loads((ours / "metrics.json").read_text()) == json.loads(
            (theirs / "metrics.json").read_text()), cell
        for name in RESULTS[1:]:
            pd.testing.assert_frame_equal(pd.read_csv(ours / name), pd.read_csv(theirs / name),
                                          obj=f"{cell}/{name}")


def _sweep(file: Path, out: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    """``telapa sweep FILE --backend slurm`` in the background, polling ``squeue`` every
    0.25 s (1 s made the file 13 s slower) and failing a task that ended without a result
    after 2 s, not 30 (nothing lags on one machine's disk: a cancelled task's cells waited
    30 s for nothing)."""
    return subprocess.Popen(
        [sys.executable, "-m", "telapa.cli", "sweep", str(file), "--out", str(out),
         "--backend", "slurm", "--seeds-per-batch", "2", "--cpus", "1", *extra],
        env={**os.environ, POLL_ENV: "0.25", RESULT_WAIT_ENV: "2", **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def _wait(what: str, ready, driver: subprocess.Popen, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if driver.poll() is not None:
            raise AssertionError(f"the sweep ended waiting for {what}: {driver.stderr.read()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


@pytest.mark.slurm
def test_a_slurm_sweep_gives_the_local_results(slurm, local, tmp_path, capsys):
    """Each seed batch a task of one array job; every cell done once, with the local
    backend's results; ``sweep status`` shows each cell's job and its state."""
    out = tmp_path / "out"
    driver = _sweep(_sweep_file(tmp_path), out)
    _, err = driver.communicate(timeout=TIMEOUT_S)
    assert driver.returncode == 0, err
    assert "in 2 seed batches" in err and "submitted 2 job(s) to Slurm as array job" in err
    _same_results(out, local)
    jobs = read_jobs(out)
    assert {jobs[c]["job"] for c in CELLS[:2]} != {jobs[c]["job"] for c in CELLS[2:]}
    for cell in CELLS:
        assert read_status(out, cell)["state"] == "done"
        assert read_status(out, cell)["attempts"] == 1
        assert jobs[cell]["state"] == "COMPLETED"
    tasks = sorted({jobs[c]["job"] for c in CELLS})
    deadline = time.monotonic() + 60  # squeue's state, live: a task's step may still end
    while set((task_states(tasks) or {}).values()) != {"COMPLETED"}:
        assert time.monotonic() < deadline, task_states(tasks)
        time.sleep(0.5)
    capsys.readouterr()
    assert main(["sweep", "status", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "slurm job" in shown and f"{jobs[CELLS[0]]['job']} COMPLETED" in shown, shown


@pytest.mark.slurm
def test_cancelled_requeued_and_warned_tasks_end_every_cell_once(slurm, local, tmp_path):
    """Task A is cancelled (``scancel``), task B requeued (``scontrol requeue``) and then,
    running again, warned of its time limit (USR2, as ``--signal`` sends it): B stops at
    its next phase boundary and requeues itself; both resume from their checkpoints. A's
    cells fail once (CANCELLED) and run again in the next round (``--retries 1``); B's
    end in their first try. Every cell ends done once, with the local results."""
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "hold").touch()
    out = tmp_path / "out"
    env = {"SLURM_GATE": str(gate), "PYTHONPATH": os.pathsep.join(
        [str(HERE), *(p for p in sys.path if p)])}
    driver = _sweep(_sweep_file(tmp_path), out, "--retries", "1", "--import", "slurm_gate",
                    env=env)
    try:
        _wait("both tasks held after a checkpoint",
              lambda: (gate / f"{CELLS[0]}.0").exists() and (gate / f"{CELLS[2]}.0").exists(),
              driver)
        jobs = read_jobs(out)
        a, b = jobs[CELLS[0]]["job"], jobs[CELLS[2]]["job"]
        subprocess.run(["scancel", a], check=True)
        subprocess.run(["scontrol", "requeue", b], check=True)

        def pending(task: str):
            def ready() -> bool:
                if (task_states([task]) or {}).get(task) != "PENDING":
                    return False
                # a requeued job waits for its BeginTime: start it now
                subprocess.run(["scontrol", "update", f"JobId={task}", "StartTime=now"],
                               capture_output=True)
                return True
            return ready

        _wait(f"{b} requeued", pending(b), driver)
        # resumed, the batch runs its seed behind first: either may reach the gate first
        _wait(f"{b} held again",
              lambda: any((gate / f"{c}.1").exists() for c in CELLS[2:]), driver)
        subprocess.run(["scancel", "--signal=USR2", b], check=True)
        _wait(f"{b} requeued by itself", pending(b), driver)
        (gate / "hold").unlink()
        _, err = driver.communicate(timeout=TIMEOUT_S)
    finally:
        if driver.poll() is None:
            driver.send_signal(signal.SIGINT)
            driver.communicate(timeout=60)
    assert driver.returncode == 0, err
    _same_results(out, local)
    for cell in CELLS[:2]:
        status = read_status(out, cell)
        assert (status["state"], status["attempts"]) == ("done", 2), status
        assert f"Slurm job {a} ended CANCELLED" in status["errors"][0]["error"]
    for cell in CELLS[2:]:
        status = read_status(out, cell)
        assert (status["state"], status["attempts"], status["errors"]) == ("done", 1, []), \
            status
    log = next((out / "slurm").glob(f"{b}/*_log.out")).read_text()
    assert "restart 2" in log and "stopped at a phase boundary" in log
    for cell in CELLS[2:]:  # resumed from its checkpoints, never started again (a seed
        # that committed nothing between the two requeues keeps its count: 2 or 3)
        assert RunDir(out / "cells" / cell).accounting()["segments"] >= 2
    # the task's own requeue named the task, not the array: A stayed cancelled
    assert task_states([a]) in ({a: "CANCELLED"}, {})


def test_a_missing_slurm_or_submitit_is_one_line_before_any_work(tmp_path, monkeypatch,
                                                                 capsys):
    file, out = _sweep_file(tmp_path), tmp_path / "out"
    argv = ["sweep", str(file), "--out", str(out), "--backend", "slurm"]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    err = _fails(argv, capsys)
    assert len(err.splitlines()) == 1, err
    assert "--backend slurm needs Slurm's sbatch on PATH" in err
    assert not out.exists()
    monkeypatch.setitem(sys.modules, "submitit", None)  # import submitit: ImportError
    err = _fails(argv, capsys)
    assert "submitit (pip install 'telapa[slurm]')" in err and len(err.splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(("extra", "message"), [
    ("slurm:\n  time: soon\n", "invalid value for 'slurm.time' in {file}"),
    ("slurm:\n  cpus: 0\n", "invalid value for 'slurm.cpus' in {file}"),
    ("slurm:\n  mem: lots\n", "invalid value for 'slurm.mem' in {file}"),
    ("slurm:\n  partition: a b\n", "invalid value for 'slurm.partition' in {file}"),
    ("slurm:\n  gpu: 1\n", "unknown key 'slurm.gpu' in {file}"),
    ("slurm:\n  time: 2\n  signal_s: 120\n", "invalid value for 'slurm' in {file}.*signal_s"),
])
def test_slurm_options_in_the_sweep_file_are_validated(tmp_path, extra, message):
    file = _sweep_file(tmp_path, extra)
    with pytest.raises(ConfigError, match=message.format(file=file)):
        load_sweep(file)


@pytest.mark.parametrize(("flags", "message"), [
    (["--time", "1:2:3:4"], "invalid value for '--time'"),
    (["--cpus", "0"], "invalid value for '--cpus'"),
    (["--threads", "2"], "--threads: with --backend slurm"),
])
def test_slurm_options_on_the_command_line_are_validated(tmp_path, capsys, flags, message):
    file, out = _sweep_file(tmp_path), tmp_path / "out"
    assert message in _fails(["sweep", str(file), "--out", str(out), "--backend", "slurm",
                              *flags], capsys)
    assert not out.exists()
    assert "--partition needs --backend slurm" in _fails(
        ["sweep", str(file), "--out", str(out), "--partition", "p"], capsys)


def test_the_waits_read_from_the_environment_are_checked(monkeypatch):
    """The backend reads its waits with `telapa.envvars.seconds` (tests/test_envvars.py
    has the reader's cases)."""
    monkeypatch.delenv(RESULT_WAIT_ENV, raising=False)
    assert envvars.seconds(RESULT_WAIT_ENV) == RESULT_WAIT_S == 30.0
    monkeypatch.setenv(RESULT_WAIT_ENV, "2.5")
    assert envvars.seconds(RESULT_WAIT_ENV) == 2.5
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv(RESULT_WAIT_ENV, bad)
        with pytest.raises(ConfigError, match=f"^{RESULT_WAIT_ENV}={bad!r}: must be a "
                                              "number of seconds >= 0$"):
            envvars.seconds(RESULT_WAIT_ENV)


@pytest.mark.parametrize(("time_limit", "minutes"), [
    (90, 90), ("90", 90), ("10:30", 11), ("01:30:00", 90), ("2-12", 3600),
    ("1-00:30", 1470), ("0-00:00:30", 1)])
def test_time_limits_read_as_slurm_reads_them(time_limit, minutes):
    assert SlurmOptions(time=time_limit, signal_s=10).minutes == minutes


def test_a_warning_signal_stops_at_the_next_phase_boundary_only():
    """`stop_on_signals(boundary_signals=...)`: the signal is recorded, the checks inside a
    phase let the run go on, the check at a phase boundary raises `PhaseStop` (a
    `Terminate`: the run unwinds as on SIGTERM, with its checkpoint)."""
    with stop.stop_on_signals(boundary_signals=(signal.SIGUSR2,)):
        os.kill(os.getpid(), signal.SIGUSR2)
        stop.raise_pending()  # inside a phase: goes on
        with pytest.raises(stop.PhaseStop):
            stop.raise_pending(boundary=True)
        assert issubclass(stop.PhaseStop, stop.Terminate)
    stop.raise_pending(boundary=True)  # cleared on exit


def test_the_batch_script_asks_for_the_options(tmp_path, monkeypatch):
    """What each task's batch script asks Slurm for (submitit writes it): the options, the
    requeue and the warning signal, the thread environment of its CPUs; no time limit
    unless one is given (submitit's own default is 5 minutes). No cluster runs here: the
    check that Slurm answers is skipped."""
    if missing() is not None:
        pytest.skip(missing())
    from telapa.continual.sweep import SlurmBackend, slurm_backend

    monkeypatch.setattr(slurm_backend, "unreachable_slurm", lambda: None)

    def script(options: SlurmOptions) -> list[str]:
        backend = SlurmBackend(options=options)
        text = backend._executor(tmp_path, "s")._make_submission_file_text("CMD", "u")
        return [line for line in text.splitlines() if line.startswith(("#SBATCH", "export"))]

    plain = script(SlurmOptions())
    assert not any(line.startswith("#SBATCH --time") for line in plain)
    assert {"#SBATCH --cpus-per-task=1", "#SBATCH --requeue", "#SBATCH --signal=USR2@120",
            "export OMP_NUM_THREADS=1"} <= set(plain)
    full = script(SlurmOptions(partition="gpu", time="1-00:00", cpus=4, mem="16G", gpus=2,
                               account="lab", qos="long", signal_s=600, parallel=8))
    assert {"#SBATCH --partition=gpu", "#SBATCH --time=1440", "#SBATCH --cpus-per-task=4",
            "#SBATCH --mem=16G", "#SBATCH --gpus-per-node=2", "#SBATCH --account=lab",
            "#SBATCH --qos=long", "#SBATCH --signal=USR2@600",
            "export OMP_NUM_THREADS=4"} <= set(full)
