"""A run's policy files are sealed like its checkpoints: a truncated ``policies/01-end.npz``
gave a CheckpointError traceback, and another run's ``02-end.npz`` copied in was played
silently. Each is now one line naming the file, from the CLI too."""

from __future__ import annotations

import shutil

import pytest

from telapa.cli import main
from telapa.continual.rundir import RunDir, RunDirError

from .conftest import RUN, fails


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("policies")
    for seed in (0, 1):
        assert main([*RUN, "--seed", str(seed), "--out", str(base / f"s{seed}")]) == 0
    return base / "s0", base / "s1"


def test_a_truncated_policy_is_named(two_runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(two_runs[0], run)
    policy = run / "policies" / "00-end.npz"
    policy.write_bytes(policy.read_bytes()[: policy.stat().st_size // 2])
    with pytest.raises(RunDirError, match=r"00-end.npz is not the policy this run saved "
                                          r"\(its SHA-256 differs"):
        RunDir(run).load_policy(0, None)
    fails(["play", str(run), "--visit", "0"], capsys, "00-end.npz is not the policy")


def test_another_runs_policy_copied_in_is_named(two_runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(two_runs[0], run)
    shutil.copy2(two_runs[1] / "policies" / "00-end.npz", run / "policies" / "00-end.npz")
    fails(["play", str(run), "--visit", "0"], capsys, "00-end.npz is not the policy")
    # the whole folder of the other run: its seal names the other run
    shutil.rmtree(run / "policies")
    shutil.copytree(two_runs[1] / "policies", run / "policies")
    fails(["play", str(run), "--visit", "0"], capsys, "seals another run's policies")
