"""telapa's environment variables (`telapa.envvars`): each reader's values and its one-line
error naming the variable, and ``telapa`` stopping on a bad one before any work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from telapa import envvars
from telapa.cli import main
from telapa.config import ConfigError
from telapa.envs.mujoco.native import physics_threads
from telapa.io import read_json, write_json_atomic

HERE = Path(__file__).parent / "continual"
NAMES = (envvars.LOG_INTERVAL, envvars.SLURM_POLL, envvars.SLURM_RESULT_WAIT,
         envvars.THREADS, envvars.FSYNC, envvars.CHECKPOINT_SHARE)


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("name", list(envvars.DEFAULT_SECONDS))
def test_seconds_default_when_unset_or_empty_and_parse_when_set(clean, name):
    default = {envvars.LOG_INTERVAL: 30.0, envvars.SLURM_POLL: 5.0,
               envvars.SLURM_RESULT_WAIT: 30.0}[name]
    assert envvars.seconds(name) == default
    clean.setenv(name, "")
    assert envvars.seconds(name) == default  # `VAR= telapa ...` means unset
    for text, value in (("2.5", 2.5), ("0", 0.0), (" 7 ", 7.0), ("1e1", 10.0)):
        clean.setenv(name, text)
        assert envvars.seconds(name) == value


@pytest.mark.parametrize("bad", ["soon", "-1", "nan", "inf", "-inf", "5s"])
def test_bad_seconds_are_one_error_naming_the_variable(clean, bad):
    clean.setenv(envvars.LOG_INTERVAL, bad)
    with pytest.raises(ConfigError, match=f"^TELAPA_LOG_INTERVAL={bad!r}: must be a number "
                                          "of seconds >= 0$"):
        envvars.seconds(envvars.LOG_INTERVAL)


def test_threads_are_an_integer_of_at_least_one(clean):
    assert envvars.threads() is None
    assert physics_threads(None, 64) == min(len(os.sched_getaffinity(0)), 16)
    clean.setenv(envvars.THREADS, "3")
    assert envvars.threads() == 3
    assert physics_threads(None, 64) == 3  # 4 envs a thread at least: 64 envs take 3
    assert physics_threads(None, 8) == 2
    for bad in ("0", "-2", "two", "1.5", "2 threads"):
        clean.setenv(envvars.THREADS, bad)
        with pytest.raises(ConfigError, match=f"^TELAPA_THREADS={bad!r}: must be an "
                                              "integer >= 1$"):
            physics_threads(None, 64)


def test_the_checkpoint_share_is_a_number_in_0_1(clean):
    assert envvars.checkpoint_share() == envvars.DEFAULT_CHECKPOINT_SHARE == 0.02
    clean.setenv(envvars.CHECKPOINT_SHARE, "")
    assert envvars.checkpoint_share() == 0.02
    for text, value in (("1", 1.0), ("0.1", 0.1), (" 1e-3 ", 0.001)):
        clean.setenv(envvars.CHECKPOINT_SHARE, text)
        assert envvars.checkpoint_share() == value
    for bad in ("0", "-0.5", "1.5", "nan", "inf", "2%", "often"):
        clean.setenv(envvars.CHECKPOINT_SHARE, bad)
        with pytest.raises(ConfigError, match=f"^TELAPA_CHECKPOINT_SHARE={bad!r}: must be "
                                              r"a number in \(0, 1\]$"):
            envvars.checkpoint_share()


def test_a_bad_fsync_setting_fails_the_write_and_leaves_the_old_file(clean, tmp_path):
    path = tmp_path / "a.json"
    write_json_atomic(path, {"x": 1})
    clean.setenv(envvars.FSYNC, "maybe")
    with pytest.raises(ConfigError, match="^TELAPA_FSYNC='maybe': must be one of on, 1, "
                                          "true, yes, off, 0, false, no$"):
        write_json_atomic(path, {"x": 2})
    assert read_json(path, "a") == {"x": 1}
    assert os.listdir(tmp_path) == ["a.json"]  # no temporary left


@pytest.mark.parametrize(("name", "value", "message"), [
    (envvars.LOG_INTERVAL, "often", "must be a number of seconds >= 0"),
    (envvars.SLURM_POLL, "-5", "must be a number of seconds >= 0"),
    (envvars.THREADS, "all", "must be an integer >= 1"),
    (envvars.FSYNC, "sometimes", "must be one of on, 1, true, yes, off, 0, false, no"),
    (envvars.CHECKPOINT_SHARE, "0", "must be a number in (0, 1]"),
])
def test_telapa_stops_on_a_bad_variable_before_any_work(clean, capsys, tmp_path, name,
                                                       value, message):
    sweep = tmp_path / "tiny.yaml"
    sweep.write_text(f"name: tiny\npreset: {HERE / 'tiny_run.yaml'}\n"
                     f"curricula: [{HERE / 'sweep_tiny' / 'curriculum.yaml'}]\n"
                     "methods: [scratch]\nseeds: [0]\n")
    out = tmp_path / "out"
    clean.setenv(name, value)
    with pytest.raises(SystemExit) as stop:
        main(["sweep", str(sweep), "--out", str(out)])
    assert stop.value.code == 2
    assert capsys.readouterr().err == f"telapa: error: {name}={value!r}: {message}\n"
    assert not out.exists()
