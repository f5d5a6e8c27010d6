"""The continual loop end to end on the smoke curriculum (Empty-5x5, DoorKey-5x5, twice):
run layout, records, accounting, exact resume after a crash, and errors."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from telapa.cli import main
from telapa.continual import agents as agents_module
from telapa.continual import runner as runner_module
from telapa.continual.agents import PROCESS_AGENTS, process_agents
from telapa.continual.curriculum import load_curriculum
from telapa.continual.driver import Driver
from telapa.continual.methods import Finetune
from telapa.continual.preset import load_run_config
from telapa.continual.registry import METHODS
from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.runner import ContinualRun, RunError
from telapa.continual.spec import RunSpec
from telapa.continual.state import RunState
from telapa.envs import make
from telapa.io import clock
from telapa.io.stop import PhaseStop, stop_on_signals
from telapa.rl.agent import BatchMemberError
from telapa.rl.policy import Policy

from .crash import Crash, CrashAfter

TINY = Path(__file__).with_name("tiny_run.yaml")
CHUNKS = 8  # 4096 steps per visit / 512 between evaluations


def _spec(method: str = "ewc", seed: int = 3) -> RunSpec:
    return RunSpec(load_curriculum("smoke"), method, seed, load_run_config(TINY), "tiny")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    path = tmp_path_factory.mktemp("runs") / "ewc"
    metrics = ContinualRun.start(_spec(), path).run()
    return path, metrics


def test_run_directory_layout_and_records(finished):
    path, metrics = finished
    spec = json.loads((path / "run.json").read_text())
    assert spec["status"] == "complete" and spec["method"] == "ewc" and spec["seed"] == 3
    t = RunDir(path).tables()
    visits, curve, final = t["visits"], t["curve"], t["final"]
    assert list(visits["tag"]) == ["A", "B", "A'", "B'"]
    assert list(visits["env_id"]) == ["MiniGrid-Empty-5x5-v0", "MiniGrid-DoorKey-5x5-v0"] * 2
    assert (visits["train_steps"] == 4096).all()
    assert list(visits["start_global_step"]) == [0, 4096, 8192, 12288]
    assert list(visits["end_global_step"]) == [4096, 8192, 12288, 16384]
    # pre-evaluation at step 0, then one evaluation per chunk; the last one is "post"
    assert len(curve) == 4 * (1 + CHUNKS)
    for v, rows in curve.groupby("visit"):
        assert list(rows["step"]) == [512 * i for i in range(CHUNKS + 1)]
        assert rows["sr"].iloc[0] == visits.loc[v, "pre_sr"]
        assert rows["sr"].iloc[-1] == visits.loc[v, "post_sr"]
    assert list(final["task"]) == ["A", "B"]
    assert ((final["sr"] >= 0) & (final["sr"] <= 1)).all()
    train = pd.read_csv(path / "train" / "02-Ap.csv")
    assert len(train) == 4096 // 256 and train["global_step"].iloc[-1] == 12288
    assert {"loss", "penalty", "success_rate"} <= set(train.columns)
    # EWC's penalty is zero on the first task and active after it
    assert (pd.read_csv(path / "train" / "00-A.csv")["penalty"] == 0).all()
    assert (train["penalty"] > 0).any()
    on_disk = json.loads((path / "metrics.json").read_text())
    revisits = visits[visits["cycle"] >= 1]
    assert len(revisits) == 2
    assert on_disk["mean_sr"] == pytest.approx(revisits["post_sr"].mean())
    assert on_disk["mean_sr_all"] == pytest.approx(visits["post_sr"].mean())
    assert on_disk == json.loads(json.dumps(metrics))


def test_accounting(finished):
    path, _ = finished
    acc = json.loads((path / "accounting.json").read_text())
    assert acc["ppo_env_steps"] == 4 * 4096
    assert acc["extra_env_steps"] == 4 * 256  # one Fisher estimate per visit
    assert acc["segments"] == 1
    assert acc["peak_rss_bytes"] > 100e6
    assert acc["run_dir_bytes"] > 0
    # Fisher + anchor: two copies of the parameters, 4 bytes (float32) each
    network = load_run_config(TINY).train.network
    params = Policy.create(make("MiniGrid-Empty-5x5-v0").spec, network).init(jax.random.key(0))
    n_params = sum(x.size for x in jax.tree.leaves(params))
    assert acc["method_state_bytes"] == 2 * 4 * n_params
    assert {"train", "eval", "method", "final_eval", "checkpoint"} <= set(acc["phase_s"])
    assert acc["wall_s"] >= sum(acc["phase_s"].values()) * 0.9


def test_a_run_records_its_own_peak_memory_not_its_process_s(finished, tmp_path):
    """A sweep worker runs its cells one after another in one process, so the process's
    lifetime peak (``ru_maxrss``) may be an earlier cell's: a run records the peak of its
    own span. Here the earlier cell is a 1.5 GiB block allocated and freed before a run
    of one task (Empty-5x5, whose programs the module's run compiled); before the fix its
    accounting said the lifetime peak."""
    import resource

    block = bytearray(b"x") * (1536 << 20)
    lifetime = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # block resident
    del block
    spec = RunSpec(load_curriculum(Path(__file__).with_name("one_task_curriculum.yaml")),
                   "ewc", 3, load_run_config(TINY), "tiny")
    ContinualRun.start(spec, tmp_path / "after").run()
    peak = json.loads((tmp_path / "after" / "accounting.json").read_text())["peak_rss_bytes"]
    assert 100e6 < peak < lifetime - (1 << 30), (peak, lifetime)


class StopOnce(CrashAfter):
    """Stops this process (SIGSTOP) for ``seconds`` at the ``n``-th training progress
    report, as ``kill -STOP`` would; a helper process sends SIGCONT."""

    def __init__(self, n: int, seconds: float):
        super().__init__(n)
        self.seconds = seconds

    def advance(self, steps, metrics):
        self.n -= 1
        if self.n == 0:
            waker = subprocess.Popen(["sh", "-c", f"sleep {self.seconds}; "
                                                  f"kill -CONT {os.getpid()}"])
            os.kill(os.getpid(), signal.SIGSTOP)
            waker.wait()


def test_a_stopped_run_does_not_count_its_stop_as_run_time(finished, tmp_path,
                                                          monkeypatch):
    """telapa.io.clock: wall_s and the phases' seconds leave out the 3 s the process was
    stopped (less the clock's STOP_GAP_S, 0.5 here); the results are the run's."""
    monkeypatch.setattr(clock, "STOP_GAP_S", 0.5)
    monkeypatch.setattr(clock, "TICK_S", 0.05)
    start = time.perf_counter()
    metrics = ContinualRun.start(_spec(), tmp_path / "stopped", StopOnce(3, 3.0)).run()
    elapsed = time.perf_counter() - start
    assert metrics == finished[1]
    acc = json.loads((tmp_path / "stopped" / "accounting.json").read_text())
    assert acc["wall_s"] <= elapsed - 2.0, (acc["wall_s"], elapsed)
    assert acc["phase_s"]["train"] + acc["phase_s"]["eval"] <= elapsed - 2.0
    assert acc["wall_s"] >= sum(acc["phase_s"].values()) * 0.9


def test_resume_after_a_crash_gives_the_same_results(finished, tmp_path):
    path, metrics = finished
    crashed = tmp_path / "crashed"
    # 22 updates: inside visit 1 (16 updates per visit), between two checkpoints
    with pytest.raises(Crash):
        ContinualRun.start(_spec(), crashed, CrashAfter(22)).run()
    state = json.loads((crashed / "checkpoint.json").read_text())
    assert json.loads((crashed / state["latest"] / "state.json").read_text())["next_phase"] > 10
    resumed = ContinualRun.resume(crashed).run()
    assert json.dumps(resumed) == json.dumps(metrics)
    for name, table in RunDir(path).tables().items():
        pd.testing.assert_frame_equal(RunDir(crashed).tables()[name], table, obj=name)
    for f in sorted((path / "train").iterdir()):
        pd.testing.assert_frame_equal(pd.read_csv(crashed / "train" / f.name), pd.read_csv(f))
    assert json.loads((crashed / "accounting.json").read_text())["segments"] == 2


def _checkpointed_phases(monkeypatch) -> list[int]:
    """The ``next_phase`` of each checkpoint the runs of this test write, in order."""
    phases: list[int] = []
    save = ContinualRun._save_checkpoint

    def spy(self):
        phases.append(self.state.next_phase)
        save(self)
    monkeypatch.setattr(ContinualRun, "_save_checkpoint", spy)
    return phases


def test_checkpoints_spaced_by_their_cost_change_no_result(finished, tmp_path, monkeypatch):
    """TELAPA_CHECKPOINT_SHARE s: a phase is followed by a checkpoint once the time since
    the last is at least its cost x (1 / s - 1), and always the first phase a process
    runs and the last. With s ~ 0 a crash in visit 1 finds only the first phase's
    checkpoint, and the resumed run writes its own first and the last: the results are
    the uninterrupted run's."""
    monkeypatch.setenv("TELAPA_CHECKPOINT_SHARE", "1e-12")
    phases = _checkpointed_phases(monkeypatch)
    path, metrics = finished
    crashed = tmp_path / "crashed"
    with pytest.raises(Crash):
        ContinualRun.start(_spec(), crashed, CrashAfter(22)).run()
    assert phases == [1]
    resumed = ContinualRun.resume(crashed)
    last = len(resumed.phases)
    assert json.dumps(resumed.run()) == json.dumps(metrics)
    assert phases == [1, 2, last]
    for name, table in RunDir(path).tables().items():
        pd.testing.assert_frame_equal(RunDir(crashed).tables()[name], table, obj=name)
    for f in sorted((path / "train").iterdir()):  # the PPO iterations redone once each
        pd.testing.assert_frame_equal(pd.read_csv(crashed / "train" / f.name), pd.read_csv(f))


class StopAt(CrashAfter):
    """Sends this process SIGUSR1 at the ``n``-th training progress report: under
    `stop_on_signals` with it a boundary signal, as Slurm's ``--signal`` warns a job."""

    def advance(self, steps, metrics):
        self.n -= 1
        if self.n == 0:
            os.kill(os.getpid(), signal.SIGUSR1)


def test_a_stop_pending_at_a_phase_boundary_gets_its_checkpoint(finished, tmp_path,
                                                                monkeypatch):
    """However seldom checkpoints are due, the phase at whose end a stop is pending is
    followed by one before the stop is raised: a scheduler's warned stop loses nothing
    (the 5th chunk of A is phase 5; its checkpoint's next phase 6)."""
    monkeypatch.setenv("TELAPA_CHECKPOINT_SHARE", "1e-12")
    phases = _checkpointed_phases(monkeypatch)
    path, metrics = finished
    stopped = tmp_path / "stopped"
    with stop_on_signals(boundary_signals=(signal.SIGUSR1,)), pytest.raises(PhaseStop):
        ContinualRun.start(_spec(), stopped, StopAt(5)).run()
    assert phases == [1, 6]
    assert json.dumps(ContinualRun.resume(stopped).run()) == json.dumps(metrics)


def test_a_checkpoint_is_due_once_its_share_of_the_time_is_reached(tmp_path, monkeypatch):
    """s = 0.25 and a last checkpoint of 2 s ended at t = 100: the next is due from
    t = 100 + 2 (1 / 0.25 - 1) = 106, so that 2 / (6 + 2) = s; before any checkpoint,
    at the last phase and with a stop pending, at once."""
    monkeypatch.setenv("TELAPA_CHECKPOINT_SHARE", "0.25")
    run = ContinualRun(_spec(), RunDir(tmp_path / "run"))
    now = [105.99]
    monkeypatch.setattr(runner_module, "running", lambda: now[0])
    mid = run.state.replace(next_phase=3)
    assert run._checkpoint_due(mid)  # this process has written none yet
    run._last_checkpoint = (100.0, 2.0)
    assert not run._checkpoint_due(mid)
    now[0] = 106.0
    assert run._checkpoint_due(mid)
    now[0] = 101.0
    assert run._checkpoint_due(run.state.replace(next_phase=len(run.phases)))
    monkeypatch.setattr(runner_module, "stop_pending", lambda: True)
    assert run._checkpoint_due(mid)


def test_releasing_programs_at_every_change_of_task_changes_no_result(
        finished, tmp_path, monkeypatch):
    """Past `MAP_SHARE` of the map limit (here 0: always) each change of task releases
    the idle agents' programs and JAX's caches (`relieve_map_pressure`), so every
    program is compiled again when next used: the run is the one that kept them."""
    monkeypatch.setattr(agents_module, "MAP_SHARE", 0.0)
    path, metrics = finished
    notes = CrashAfter(10**9)  # keeps the notes
    again = ContinualRun.start(_spec(), tmp_path / "released", notes).run()
    released = [n for n in notes.notes if n.startswith("released the compiled programs")]
    assert len(released) >= 4  # A -> B -> A' -> B', and the final evaluation's A
    assert json.dumps(again) == json.dumps(metrics)
    for name, table in RunDir(path).tables().items():
        pd.testing.assert_frame_equal(RunDir(tmp_path / "released").tables()[name], table,
                                      obj=name)


def test_a_checkpoint_saves_and_restores_the_run_state_whole(tmp_path):
    """What a run is at a phase boundary is its `RunState`: the checkpoint of a phase
    restores exactly that value (mid-visit: with the visit's `TrainState`), but the
    seconds of the checkpoint's own write (added to ``timer`` after it)."""
    run = ContinualRun.start(_spec(), tmp_path / "run")
    try:
        driver = Driver([run], size=1)
        for _ in range(3):  # A's start, its first two chunks
            driver.step()
        again = ContinualRun(_spec(), RunDir(tmp_path / "run"))
        again.restore_checkpoint(run.dir.checkpoints.latest())
    finally:
        run.dir.unlock()
    saved, restored = run.state, again.state
    assert saved.next_phase == restored.next_phase == 3
    assert saved.train_state is not None and len(saved.train_rows) > 0
    for field in dataclasses.fields(RunState):
        a, b = getattr(saved, field.name), getattr(restored, field.name)
        if field.name == "timer":
            assert a.keys() == b.keys() | {"checkpoint"} and a["train"] == b["train"]
        elif field.name in ("learner", "train_state"):
            assert jax.tree.structure(a) == jax.tree.structure(b)
            for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
                assert np.array_equal(jax.random.key_data(x) if jnp.issubdtype(
                    x.dtype, jax.dtypes.prng_key) else x, jax.random.key_data(y)
                    if jnp.issubdtype(y.dtype, jax.dtypes.prng_key) else y)
        elif field.name == "method":
            assert (a.stored_tasks, a.log, a.extra_env_steps) == (
                b.stored_tasks, b.log, b.extra_env_steps)
            assert jax.tree.all(jax.tree.map(np.array_equal, dict(a.parts), dict(b.parts)))
        else:
            assert a == b, field.name


def test_resuming_a_complete_run_changes_nothing(finished):
    path, metrics = finished
    names = ("curve.csv", "accounting.json", "metrics.json", "run.json", "checkpoint.json")
    before = {name: (path / name).read_bytes() for name in names}
    assert ContinualRun.resume(path).run() == json.loads(json.dumps(metrics))
    assert {name: (path / name).read_bytes() for name in names} == before
    assert json.loads(before["accounting.json"])["segments"] == 1


def _copy_run(path, to):
    shutil.copytree(path, to, ignore=shutil.ignore_patterns(".lock"))
    return to


@pytest.mark.parametrize(("name", "cut", "message"), [
    ("visits", 1, r"visits.csv has visits \['A', 'B', \"A'\"\], the run's curriculum"),
    ("curve", 2, r"curve.csv has 7 evaluations of visit 3 \(B'\), expected 9"),
    ("final", 1, r"final.csv does not hold one complete row per task"),
])
def test_truncated_tables_are_named_on_load(finished, tmp_path, name, cut, message):
    path, _ = finished
    copy = _copy_run(path, tmp_path / "copy")
    lines = (copy / f"{name}.csv").read_text().splitlines(keepends=True)
    (copy / f"{name}.csv").write_text("".join(lines[:-cut]))
    with pytest.raises(RunDirError, match=message):
        RunDir(copy).tables()
    # a row cut in the middle (a partial write) is caught too
    (copy / f"{name}.csv").write_text("".join(lines[:-1]) + lines[-1][:15])
    with pytest.raises(RunDirError, match=f"{name}.csv"):
        RunDir(copy).tables()


def test_unreadable_newest_checkpoint_falls_back_to_the_previous(finished, tmp_path):
    path, metrics = finished
    copy = tmp_path / "crashed"
    with pytest.raises(Crash):  # inside visit 1, two checkpoints kept
        ContinualRun.start(_spec(), copy, CrashAfter(22)).run()
    pointer = json.loads((copy / "checkpoint.json").read_text())
    assert pointer["previous"] and (copy / pointer["previous"] / "state.json").is_file()
    previous = json.loads((copy / pointer["previous"] / "state.json").read_text())
    (copy / pointer["latest"] / "state.json").write_text('{"next_phase": 3')  # torn write
    sink = CrashAfter(10**9)  # keeps the notes
    run = ContinualRun.resume(copy, sink)
    assert any(f"{pointer['latest']}" in n and "falling back" in n
               for n in sink.notes), sink.notes
    assert run.state.next_phase == previous["next_phase"]
    assert json.dumps(run.run()) == json.dumps(metrics)
    # finished, it keeps one checkpoint; that one unreadable: a named error, no
    # traceback of json internals
    pointer = json.loads((copy / "checkpoint.json").read_text())
    assert pointer["previous"] is None and len(list(copy.glob("ckpt-*"))) == 1
    (copy / "run.json").write_text((copy / "run.json").read_text().replace(
        '"complete"', '"running"'))
    (copy / pointer["latest"] / "state.json").write_text("{")
    with pytest.raises(RunDirError, match=r"state.json (is corrupt|is damaged \(its "
                                          r"SHA-256 differs).*no earlier checkpoint"):
        ContinualRun.resume(copy)


def test_resume_refuses_options_that_contradict_the_run(finished, capsys):
    path, _ = finished
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--resume", str(path), "--method", "finetune", "--seed", "7"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--method finetune (the run's method is ewc)" in err
    assert "--seed 7 (the run's seed is 3)" in err
    # options that agree are accepted (the run is complete: nothing to do)
    assert main(["run", "--resume", str(path), "--method", "ewc", "--seed", "3",
                 "--preset", str(TINY), "--curriculum", "smoke", "--backend", "jax"]) == 0


def test_backend_option_moves_the_curriculum_and_its_run_keeps_it(tmp_path, capsys):
    """``telapa run --backend``: the curriculum's envs on another backend, checked before
    any work (a task without a port there is named, and no run directory is made); the
    run's curriculum.yaml records the backend, so ``--resume`` refuses another."""
    from telapa.cli.run import build_spec

    spec = build_spec("smoke", "finetune", 0, str(TINY), backend="gymnasium")
    assert load_curriculum("smoke").backend == "jax"
    assert spec.curriculum == dataclasses.replace(_spec(), curriculum=load_curriculum(
        "smoke").model_copy(update={"backend": "gymnasium"})).curriculum
    out = tmp_path / "native"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--curriculum", "smoke", "--method", "finetune", "--preset", str(TINY),
              "--backend", "native", "--out", str(out)])
    assert exit_info.value.code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert "curriculum 'smoke' with --backend native: task 'A': unknown env id " \
           "'MiniGrid-Empty-5x5-v0' for backend 'native'" in " ".join(err.split())
    path = tmp_path / "gym"
    ContinualRun.start(spec, path)  # the run directory as a kill right after its start
    assert RunDir(path).curriculum().backend == "gymnasium"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--resume", str(path), "--backend", "jax"])
    assert exit_info.value.code == 2
    assert "--backend jax (the run's envs run on 'gymnasium', as stored in its " \
           "curriculum.yaml)" in " ".join(capsys.readouterr().err.split())
    with pytest.raises(SystemExit):  # the curriculum by name is the file's, on jax
        main(["run", "--resume", str(path), "--curriculum", "smoke"])
    assert "--curriculum smoke (the run's curriculum is 'smoke' on backend 'gymnasium', as " \
           "stored" in " ".join(capsys.readouterr().err.split())


def test_metrics_json_is_valid_json(finished, capsys):
    path, _ = finished
    assert main(["metrics", str(path), "--json"]) == 0
    text = capsys.readouterr().out

    def no_constants(name):
        raise AssertionError(f"{name} in JSON output")

    payload = json.loads(text, parse_constant=no_constants)
    assert payload["smoke"]["summary"]["ewc"]["mean_sr_ci"] is None  # one seed: no CI


def test_refuses_to_overwrite_and_names_foreign_dirs(finished, tmp_path):
    path, _ = finished
    with pytest.raises(RunDirError, match="already holds a run.*--resume"):
        ContinualRun.start(_spec(), path)
    with pytest.raises(RunDirError, match="does not exist"):
        ContinualRun.resume(tmp_path / "nothing")
    (tmp_path / "run.json").write_text('{"format": "other"}')
    with pytest.raises(RunDirError, match="not a telapa run manifest"):
        ContinualRun.resume(tmp_path)


def test_corrupt_checkpoint_pointer_is_named(finished, tmp_path):
    path, _ = finished
    copy = tmp_path / "copy"
    for f in ("run.json", "config.yaml", "curriculum.yaml"):
        (copy / f).parent.mkdir(exist_ok=True)
        (copy / f).write_text((path / f).read_text())
    (copy / "checkpoint.json").write_text('{"latest": "ckpt-000099"}')
    with pytest.raises(RunDirError, match="ckpt-000099 cannot be read .*ckpt-000099 is "
                                          "missing.*no earlier checkpoint is left"):
        ContinualRun.resume(copy)


def test_non_finite_loss_names_the_phase(tmp_path, monkeypatch):
    def explode(self, states, steps, **kwargs):  # what the chunk program raises
        raise BatchMemberError(0, FloatingPointError(
            "PPO on MiniGrid-Empty-5x5-v0: non-finite loss at step 256"))

    monkeypatch.setattr("telapa.rl.agent.Agent.train_and_evaluate", explode)
    with pytest.raises(RunError, match=r"visit 0 \(A, MiniGrid-Empty-5x5-v0\), chunk 0.*loss"):
        ContinualRun.start(_spec("finetune"), tmp_path / "nan").run()
    # the pre-evaluation checkpoint survives
    assert (tmp_path / "nan" / "checkpoint.json").exists()


def test_methods_see_every_evaluation(tmp_path, monkeypatch):
    seen = []

    class Recording(Finetune):
        name = "recording"

        def observe(self, mstate, visit, kind, result):
            seen.append((visit.tag, kind, len(result.returns)))
            return mstate

    monkeypatch.setitem(METHODS, "recording", Recording)
    ContinualRun.start(_spec("recording"), tmp_path / "r").run()
    first_visit = [("A", "pre", 8)] + [("A", "train", 8)] * (CHUNKS - 1) + [("A", "post", 8)]
    assert seen[: CHUNKS + 1] == first_visit
    assert len(seen) == 4 * (CHUNKS + 1)
    assert [s for s in seen if s[1] == "post"] == [(t, "post", 8) for t in ("A", "B", "A'", "B'")]


def test_run_json_records_the_code_of_each_segment(finished, tmp_path, monkeypatch):
    """``code`` in run.json: the commit a run started on, and each other commit a later
    segment resumed on; a complete run is left as it is."""
    import telapa.continual.runner as runner
    from telapa.provenance import UNRECORDED, current_code

    path, _ = finished
    assert json.loads((path / "run.json").read_text())["code"] == [current_code()]
    crashed = tmp_path / "crashed"
    with pytest.raises(Crash):
        ContinualRun.start(_spec(), crashed, CrashAfter(2)).run()
    monkeypatch.setattr(runner, "current_code", lambda: "feedbeef")
    ContinualRun.resume(crashed).dir.unlock()
    assert json.loads((crashed / "run.json").read_text())["code"] == [current_code(),
                                                                     "feedbeef"]
    ContinualRun.resume(crashed).dir.unlock()  # the same code again: nothing added
    assert json.loads((crashed / "run.json").read_text())["code"] == [current_code(),
                                                                     "feedbeef"]
    manifest = json.loads((crashed / "run.json").read_text())  # a run from before `code`
    del manifest["code"]
    (crashed / "run.json").write_text(json.dumps(manifest))
    ContinualRun.resume(crashed).dir.unlock()
    assert json.loads((crashed / "run.json").read_text())["code"] == [UNRECORDED, "feedbeef"]
    before = (path / "run.json").read_bytes()
    ContinualRun.resume(path).dir.unlock()
    assert (path / "run.json").read_bytes() == before


def test_runs_of_a_process_share_its_agents_and_count_their_own_compiling(tmp_path):
    """Runs given no ``agents`` take the process's on the jax backend (`process_agents`):
    a later run of a spec gets the agents an earlier one traced and compiled. Each run's
    ``compile_s`` is what its agents compiled since it was made; a host backend (whose
    agents hold live envs) gives every run a new dict."""
    one = ContinualRun.start(_spec(), tmp_path / "one")
    agent = one.agent(one.visits[0])
    agent.compile_s += 5.0  # as if it compiled a program for ``one``
    two = ContinualRun.start(_spec(seed=4), tmp_path / "two")
    try:
        assert one.agents is two.agents is PROCESS_AGENTS
        assert two.agent(two.visits[0]) is agent
        first, second = one.accounting()["compile_s"], two.accounting()["compile_s"]
        assert second == 0.0 and first >= 5.0
        agent.compile_s += 2.0  # a program both runs use
        assert one.accounting()["compile_s"] == first + 2.0
        assert two.accounting()["compile_s"] == 2.0
    finally:
        agent.compile_s -= 7.0
        one.dir.unlock()
        two.dir.unlock()
    assert process_agents("gymnasium") is not process_agents("gymnasium")
    assert process_agents("native") == {}


def test_runs_share_an_agent_only_when_it_is_made_of_the_same(tmp_path):
    """One ``agents`` dict for several runs (a batch, the demo): seeds of one method and
    methods without a penalty (Finetune, Scratch) share the agent of an env; a method with
    a penalty gets its own (EWC's and L2Init's penalty data differ in structure under one
    penalty function, and compiled programs fix it), as does another network (DFF)."""
    agents: dict = {}
    cases = [("ewc", "ewc", 3), ("ewc-4", "ewc", 4), ("l2init", "l2init", 3),
             ("finetune", "finetune", 3), ("scratch", "scratch", 3), ("dff", "dff", 3)]
    runs = {name: ContinualRun.start(_spec(method, seed), tmp_path / name, agents=agents)
            for name, method, seed in cases}
    try:
        visit = runs["ewc"].visits[0]
        agent = {name: run.agent(visit) for name, run in runs.items()}
        assert agent["ewc"] is agent["ewc-4"]
        assert agent["finetune"] is agent["scratch"]
        assert agent["l2init"] is not agent["ewc"]
        assert agent["finetune"] is not agent["ewc"]  # the penalty enters the loss
        assert agent["dff"] is not agent["finetune"]  # the network differs
        assert agent["dff"].config.network.activation == "dff"
        assert len(agents) == 4
    finally:
        for run in runs.values():
            run.dir.unlock()
