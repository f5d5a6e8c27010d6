"""Faults a probe of docs/running.md and docs/reliability.md found in `telapa run` and
`telapa play`: a stopped ``--seeds`` run or batch resume said there was nothing to
resume (its run directories were joined into one path); ``--out`` given with
``--resume`` was ignored without a word; ``play --episodes`` above the final
evaluation's count called every episode the evaluation's; ``--log-interval`` took -5,
nan and inf. Only the play test reads a finished run (the session's tiny one); the rest
stop before any training."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import jax
import numpy as np
import pytest

from telapa.cli import build_parser, main
from telapa.continual.curriculum import load_curriculum
from telapa.continual.preset import load_run_config
from telapa.continual.spec import RunSpec
from telapa.io.stop import Terminate
from telapa.play import _episode_keys

TINY = Path(__file__).parent / "continual" / "tiny_run.yaml"
SEEDS = ["run", "--curriculum", "smoke", "--method", "finetune", "--seeds", "0-1",
         "--preset", str(TINY)]


def _stopped(argv: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return exit_info.value.code, err


def _made(*paths: Path) -> None:
    for path in paths:
        path.mkdir(parents=True, exist_ok=True)  # claimed by the command already
        (path / "run.json").write_text("{}")


@pytest.mark.parametrize("stop, status, said", [(KeyboardInterrupt, 130, "interrupted"),
                                                (Terminate, 143, "terminated (SIGTERM)")])
def test_a_stopped_seeds_run_names_each_seeds_directory_to_resume(
        stop, status, said, tmp_path, capsys, monkeypatch):
    """The hint once checked the seeds' directories joined by a space, which is no
    directory, and said there was nothing to resume although both seeds had
    checkpoints."""
    parent = tmp_path / "ft2"
    dirs = [parent / f"smoke-finetune-s{s}" for s in (0, 1)]

    def started(spec, seeds, outs, progress=None, **_):
        _made(*map(Path, outs))
        raise stop

    monkeypatch.setattr("telapa.cli.run.SeedBatch.start", started)
    code, err = _stopped([*SEEDS, "--out", str(parent)], capsys)
    assert code == status and said in err
    assert "nothing to resume" not in err
    assert f"continue with `telapa run --resume {dirs[0]} {dirs[1]}`" in err

    # stopped before any seed's directory was created: nothing to resume, each named
    def stopped_early(spec, seeds, outs, progress=None, **_):
        raise stop

    monkeypatch.setattr("telapa.cli.run.SeedBatch.start", stopped_early)
    early = tmp_path / "early"
    code, err = _stopped([*SEEDS, "--out", str(early)], capsys)
    assert code == status
    assert (f"stopped before {early / 'smoke-finetune-s0'} {early / 'smoke-finetune-s1'} "
            "was created: nothing to resume") in err


def test_a_stopped_batch_resume_names_its_directories_to_resume(tmp_path, capsys,
                                                                monkeypatch):
    dirs = [tmp_path / f"smoke-finetune-s{s}" for s in (0, 1)]
    _made(*dirs)
    spec = RunSpec(load_curriculum("smoke"), "finetune", 0, load_run_config(TINY), "tiny")
    monkeypatch.setattr("telapa.cli.run.RunSpec.stored", lambda path: spec)

    def resumed(paths, progress=None, **_):
        raise KeyboardInterrupt

    monkeypatch.setattr("telapa.cli.run.SeedBatch.resume", resumed)
    code, err = _stopped(["run", "--resume", *map(str, dirs)], capsys)
    assert code == 130 and "nothing to resume" not in err
    assert f"`telapa run --resume {dirs[0]} {dirs[1]}`" in err


@pytest.mark.parametrize("resume", [["ec-bak"], ["s0", "s1"]])
def test_out_with_resume_is_refused_before_any_work(resume, tmp_path, capsys,
                                                    monkeypatch):
    """``--out`` with ``--resume`` was ignored (the run resumed where it was) unless
    another option came with it; docs/reliability.md says it is refused."""
    def no_work(*args, **kwargs):
        pytest.fail("--out with --resume reached the run")

    for name in ("RunSpec.stored", "ContinualRun.resume", "SeedBatch.resume"):
        monkeypatch.setattr(f"telapa.cli.run.{name}", no_work)
    runs = [str(tmp_path / name) for name in resume]
    out = tmp_path / "zz"
    code, err = _stopped(["run", "--resume", *runs, "--out", str(out)], capsys)
    assert code == 2
    assert (f"--out {out} cannot be combined with --resume {' '.join(runs)}: a run "
            "resumes in its own directory") in err
    assert not out.exists()


def _log_interval_commands() -> list[str]:
    """Every command with a ``--log-interval`` option."""
    sub = next(a for a in build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    return sorted(name for name, parser in sub.choices.items()
                  if "--log-interval" in parser._option_string_actions)


def test_run_has_a_log_interval():
    assert "run" in _log_interval_commands()


@pytest.mark.parametrize("command", _log_interval_commands())
@pytest.mark.parametrize("value", ["-5", "0", "nan", "inf", "-inf", "soon"])
def test_log_interval_must_be_a_finite_positive_number_of_seconds(command, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([command, f"--log-interval={value}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--log-interval: must be a" in err and value in err
    assert "finite number of seconds > 0" in err or value == "soon"
    ns = build_parser().parse_args([command, "--log-interval", "0.5"])
    assert ns.log_interval == 0.5


def _played(argv: list[str], capsys) -> tuple[str, list[str]]:
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    return lines[0], [line for line in lines if re.match(r"\s+episode \d+:", line)]


def test_more_episodes_than_the_final_evaluation_are_said_to_be_extra(quick_run, capsys):
    """``--episodes 10`` of a run whose final evaluation had 8 said "the final
    evaluation's episodes, 10 of 8"; the first 8 are its episodes, the other 2 extra."""
    path = str(quick_run("finetune", 0))
    header, episodes = _played(["play", path, "--episodes", "10"], capsys)
    assert ("(episodes 1-8: the final evaluation's, all 8; episodes 9-10: 2 extra, from "
            "its key)") in header, header
    assert "10 of 8" not in header and len(episodes) == 10
    own_header, own = _played(["play", path], capsys)  # the evaluation's own 8
    assert "(the final evaluation's episodes, 8 of 8)" in own_header
    assert episodes[:8] == own
    nine_header, nine = _played(["play", path, "--episodes", "9"], capsys)
    assert "; episode 9: 1 extra, from its key)" in nine_header and nine[:8] == own


def test_the_evaluations_keys_come_first_under_either_threefry():
    """The first keys of a play past the evaluation are the evaluation's own, also when
    JAX's threefry is not the partitionable one (where splitting 10 ways and taking 8
    would give other keys than splitting 8 ways)."""
    key = jax.random.key(7)
    flag = jax.config.jax_threefry_partitionable
    try:
        for partitionable in (True, False):
            jax.config.update("jax_threefry_partitionable", partitionable)
            keys = jax.random.key_data(_episode_keys(key, 10, 8))
            assert keys.shape[0] == 10
            np.testing.assert_array_equal(keys[:8],
                                          jax.random.key_data(jax.random.split(key, 8)))
            np.testing.assert_array_equal(
                jax.random.key_data(_episode_keys(key, 3, 8)), keys[:3])
    finally:
        jax.config.update("jax_threefry_partitionable", flag)
