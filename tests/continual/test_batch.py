"""`telapa run --seeds`: several seeds of one method in one process, their PPO chunks
trained as one vmapped batch. Reruns are identical; a seed's first chunk matches its
separate run to float tolerance; each seed's directory is an ordinary run directory
(metrics, tables, resume); a batch killed with SIGKILL resumes to identical results."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest
from jax._src.array import ArrayImpl

from telapa.cli import main
from telapa.continual.batch import SeedBatch, parse_seeds
from telapa.continual.curriculum import load_curriculum
from telapa.continual.driver import Driver
from telapa.continual.preset import load_run_config
from telapa.continual.rundir import RunDir
from telapa.continual.runner import ContinualRun
from telapa.continual.spec import RunSpec
from telapa.rl import agent as agent_module

from .crash import kill_at_checkpoint, telapa_process

TINY = Path(__file__).with_name("tiny_run.yaml")
ONE_TASK = Path(__file__).with_name("one_task_curriculum.yaml")  # A, A': one env to compile
RUN = ["--curriculum", str(ONE_TASK), "--method", "ewc", "--preset", str(TINY)]
SEEDS = (1, 2)
RESULTS = ("metrics.json", "visits.csv", "curve.csv", "final.csv", "method_log.json")


def _dirs(parent: Path) -> list[Path]:
    return [parent / f"one-task-ewc-s{seed}" for seed in SEEDS]


def _same_results(a: Path, b: Path) -> None:
    for name in RESULTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), f"{a.name}/{name}"
    for f in sorted((a / "train").iterdir()):
        assert (b / "train" / f.name).read_bytes() == f.read_bytes(), f"{a.name}/{f.name}"


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    parent = tmp_path_factory.mktemp("batch") / "seeds"
    assert main(["run", *RUN, "--seeds", "1-2", "--out", str(parent)]) == 0
    return parent


def test_parse_seeds():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("0,2,5") == [0, 2, 5]
    assert parse_seeds("7, 0-1") == [7, 0, 1]
    for bad, message in [("3-1", "reversed"), ("1,x", "'x' is not a seed"),
                         ("0-2,2", r"\[2\] twice"), ("", "is not a seed")]:
        with pytest.raises(ValueError, match=message):
            parse_seeds(bad)


def test_every_seed_is_an_ordinary_run_directory(batch, capsys):
    for seed, path in zip(SEEDS, _dirs(batch), strict=True):
        spec = json.loads((path / "run.json").read_text())
        assert (spec["status"], spec["seed"], spec["method"]) == ("complete", seed, "ewc")
        tables = RunDir(path).tables()
        assert list(tables["visits"]["train_steps"]) == [4096] * 2
        accounting = json.loads((path / "accounting.json").read_text())
        assert accounting["segments"] == 1 and accounting["ppo_env_steps"] == 2 * 4096
        assert accounting["phase_s"]["train"] > 0
    a, b = (RunDir(p).tables()["curve"]["sr"] for p in _dirs(batch))
    assert not a.equals(b)  # two seeds, two runs
    assert main(["metrics", *map(str, _dirs(batch)), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["one-task"]["summary"]["ewc"]
    assert summary["runs"] == 2


def test_rerunning_the_command_gives_identical_results(batch, tmp_path):
    again = tmp_path / "again"
    assert main(["run", *RUN, "--seeds", "1-2", "--out", str(again)]) == 0
    for a, b in zip(_dirs(batch), _dirs(again), strict=True):
        _same_results(a, b)


def test_resuming_a_complete_batch_changes_nothing(batch):
    before = {p: {n: (p / n).read_bytes() for n in (*RESULTS, "accounting.json")}
              for p in _dirs(batch)}
    assert main(["run", "--resume", *map(str, _dirs(batch))]) == 0
    assert {p: {n: (p / n).read_bytes() for n in before[p]} for p in _dirs(batch)} == before


def _watch_transfers(monkeypatch) -> dict:
    """Counts `fetch` calls and records every read of a device array's value outside
    `fetch` and checkpoints (every device-to-host transfer reads ``ArrayImpl._value``;
    on CPU `jax.transfer_guard` does not see them)."""
    seen = {"fetch": 0, "outside": []}
    allowed = []
    value = ArrayImpl._value

    def read(array):
        if not allowed:
            seen["outside"].append(array.shape)
        return value.fget(array)

    def allowing(fn, count: int):
        def wrapper(*args, **kwargs):
            seen["fetch"] += count
            allowed.append(True)
            try:
                return fn(*args, **kwargs)
            finally:
                allowed.pop()
        return wrapper

    monkeypatch.setattr(ArrayImpl, "_value", property(read))
    monkeypatch.setattr(agent_module, "fetch", allowing(agent_module.fetch, 1))
    monkeypatch.setattr(ContinualRun, "_save_checkpoint",
                        allowing(ContinualRun._save_checkpoint, 0))
    return seen


def test_first_chunk_matches_the_separate_run_in_one_transfer(tmp_path, monkeypatch):
    """After the first chunk (2 PPO iterations) a batch member's parameters and metrics
    equal its separate run's to float tolerance. A visit, batched or alone, reads results
    back once per chunk plus once for its pre-evaluation (`fetch`; besides it only the
    checkpoints read arrays): the start, 8 chunks and the end (EWC's Fisher) of visit 0."""
    spec = RunSpec(load_curriculum(ONE_TASK), "ewc", SEEDS[0], load_run_config(TINY), "tiny")
    both = SeedBatch.start(spec, list(SEEDS), [tmp_path / "b1", tmp_path / "b2"])
    alone = ContinualRun.start(spec, tmp_path / "alone")
    alone_loop = Driver([alone], size=1)  # the loop `alone.run()` goes through
    try:
        seen = _watch_transfers(monkeypatch)
        both.step()  # the start phase: hooks, then one pre-evaluation of both seeds
        assert seen == {"fetch": 1, "outside": []}
        alone_loop.step()
        both.step()  # chunk 0 of both seeds
        assert seen == {"fetch": 3, "outside": []}
        alone_loop.step()
        assert seen == {"fetch": 4, "outside": []}
        monkeypatch.undo()
        member, other = both.runs
        assert int(member.state.train_state.steps) == int(alone.state.train_state.steps) == 512
        pairs = zip(jax.tree.leaves(alone.state.train_state.ppo),
                    jax.tree.leaves(member.state.train_state.ppo), strict=True)
        for a, b in pairs:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
        columns = ["loss", "pg_loss", "v_loss", "entropy", "approx_kl", "grad_norm"]
        pd.testing.assert_frame_equal(pd.DataFrame(list(member.state.train_rows))[columns],
                                      pd.DataFrame(list(alone.state.train_rows))[columns],
                                      rtol=1e-5, atol=1e-6)
        assert not np.allclose(jax.tree.leaves(other.state.train_state.ppo.params)[0],
                               jax.tree.leaves(member.state.train_state.ppo.params)[0])
        assert member.state.records == alone.state.records  # the same evaluations
        seen = _watch_transfers(monkeypatch)
        while member.phases[member.state.next_phase].visit == 0:  # chunks 1-7, then the end
            both.step()
        assert seen == {"fetch": 7, "outside": []}
    finally:
        for run in [*both.runs, alone]:
            run.dir.unlock()


def test_sigkill_then_resume_gives_the_uninterrupted_results(batch, tmp_path):
    parent = tmp_path / "killed"
    proc = telapa_process("run", *RUN, "--seeds", "1-2", "--out", str(parent))
    # phases 10-19 are visit 1 (A'); kill once seed 2 has a checkpoint inside its training
    # (seed 1 may then stand one phase further)
    killed_at = kill_at_checkpoint(proc, _dirs(parent)[1], 12)
    assert 12 <= killed_at < 19, killed_at
    resume = telapa_process("run", "--resume", *map(str, _dirs(parent)))
    _, err = resume.communicate(timeout=600)
    assert resume.returncode == 0, err
    assert "seed 2: resumed at visit 1 (A', MiniGrid-Empty-5x5-v0)" in err
    for a, b in zip(_dirs(batch), _dirs(parent), strict=True):
        _same_results(a, b)
        assert json.loads((b / "accounting.json").read_text())["segments"] == 2


@pytest.mark.parametrize(("args", "message"), [
    (["--seeds", "1-2", "--seed", "3"], "--seed or --seeds, not both"),
    (["--seeds", "2-1"], "--seeds: seeds '2-1': range '2-1' is reversed"),
    (["--seeds", "1,4294967296"], "seed 4294967296 is out of range"),
])
def test_bad_seeds_are_rejected_before_any_work(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", *RUN, *args, "--out", str(tmp_path / "never")])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


def test_resume_refuses_runs_of_different_methods(batch, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(_dirs(batch)[1], other, ignore=shutil.ignore_patterns(".lock"))
    manifest = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**manifest, "method": "finetune"}))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--resume", str(_dirs(batch)[0]), str(other)])
    assert exit_info.value.code == 2
    assert "not a run of the same method" in capsys.readouterr().err


def test_gymnasium_seeds_run_one_after_the_other_as_separate_runs(tmp_path):
    """Host-stepped envs are not vmapped: a gymnasium batch runs each seed as its separate
    run would, with its own agents (byte-identical results)."""
    curriculum = tmp_path / "gym.yaml"
    curriculum.write_text("name: gym-tiny\nbackend: gymnasium\n"
                          "tasks: {A: MiniGrid-Empty-5x5-v0}\norder: [A]\ncycles: 1\n")
    preset = tmp_path / "preset.yaml"
    preset.write_text(TINY.read_text().replace("steps_per_visit: 4096", "steps_per_visit: 512")
                      .replace("eval_every: 512", "eval_every: 256"))
    spec = RunSpec(load_curriculum(str(curriculum)), "finetune", 1, load_run_config(preset),
                   "tiny")
    both = SeedBatch.start(spec, list(SEEDS), [tmp_path / "b1", tmp_path / "b2"])
    assert not both.batched
    both.run()
    assert both.runs[0].agents is not both.runs[1].agents
    for seed in SEEDS:
        alone = tmp_path / f"alone{seed}"
        ContinualRun.start(RunSpec(spec.curriculum, "finetune", seed, spec.config, "tiny"),
                           alone).run()
        for name in ("curve.csv", "visits.csv", "metrics.json"):
            assert (alone / name).read_bytes() == (tmp_path / f"b{seed}" / name).read_bytes()
