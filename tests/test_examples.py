"""The plug-in examples work as a user installs them: each example package goes into a
fresh virtual environment with telapa's wheel (tests/fresh_venv.py), and ``telapa run``
uses it from a directory outside the checkout.

* ``examples/finetune-l2``: a method found through its ``telapa.methods`` entry point,
  with its own settings section (``methods.finetune_l2``) and YAML preset: the section is
  recorded in ``config.yaml``, its ``lam`` scales the PPO loss's penalty, and ``telapa
  metrics`` groups the runs by it.
* ``examples/linewalk``: an env named ``module:Id`` in a curriculum that sets its success
  target (``return_at_least: 2``), and the same env through the package's env family
  (its ``telapa.families`` entry point) on the ``jax`` backend, with no success line:
  every LineWalk return is 1 (time out) or 2 (goal), so SR = mean return - 1 in every
  evaluation either way, where the generic family's target (a positive return) would
  give SR = 1 throughout. Both runs share one fresh environment (`linewalk_venv`); the
  family's JAX port is checked against the gymnasium env in tests/envs/test_linewalk_port.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from fresh_venv import ROOT, clean_env, make_venv

EXAMPLES = ROOT / "examples"
CARTPOLE = {"name": "cartpole", "backend": "gymnasium", "tasks": {"A": "CartPole-v1"},
            "order": ["A"], "cycles": 2}
"""One task visited twice, on the gymnasium backend (a PPO program compiles in seconds)."""
TINY = ["train.ppo={num_envs: 4, n_steps: 128, batch_size: 128, epochs: 2}",
        "train.eval={episodes: 4, num_envs: 4}", "steps_per_visit=1024", "eval_every=512",
        "eval_episodes=4", "final_eval_episodes=4"]


def _venv(wheel: Path, root: Path, example: str) -> Path:
    return make_venv(root / "env", wheel, EXAMPLES / example)


def _telapa(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = clean_env(TELAPA_JAX_CACHE=os.environ.get("TELAPA_JAX_CACHE", "off"))
    proc = subprocess.run([str(venv / "bin" / "telapa"), *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def method_runs(wheel, tmp_path_factory):
    """Finetune-L2 from its installed package, with its preset (lam = 1e-3) and with
    ``--set methods.finetune_l2.lam=2e-3``, on one CartPole task visited twice."""
    root = tmp_path_factory.mktemp("finetune-l2")
    venv = _venv(wheel, root, "finetune-l2")
    work = root / "work"  # outside the checkout
    work.mkdir()
    (work / "cartpole.yaml").write_text(yaml.safe_dump(CARTPOLE))
    preset = "telapa_finetune_l2:finetune-l2.yaml"  # shipped in the installed package
    sets = [a for s in TINY for a in ("--set", s)]
    runs = {}
    for lam, extra in ((1e-3, []), (2e-3, ["--set", "methods.finetune_l2.lam=2e-3"])):
        out = work / f"lam-{lam}"
        _telapa(venv, "run", "--curriculum", "cartpole.yaml", "--method", "finetune-l2",
                "--preset", preset, *sets, *extra, "--out", str(out), cwd=work)
        runs[lam] = out
    metrics = json.loads(_telapa(venv, "metrics", "--json", *map(str, runs.values()),
                                 cwd=work).stdout)
    return venv, runs, metrics


def test_a_method_from_an_entry_point_records_its_own_settings_section(method_runs):
    venv, runs, _ = method_runs
    for lam, out in runs.items():
        manifest = json.loads((out / "run.json").read_text())
        assert manifest["method"] == "finetune-l2" and manifest["status"] == "complete"
        config = yaml.safe_load((out / "config.yaml").read_text())
        assert config["methods"]["finetune_l2"] == {"lam": lam}
    overrides = json.loads((runs[2e-3] / "run.json").read_text())["overrides"]
    assert overrides["methods.finetune_l2.lam"] == 2e-3
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import telapa, telapa_finetune_l2 as m; print(telapa.__file__); "
                            "print(m.__file__)"], capture_output=True, text=True, check=True,
                           env=clean_env(), cwd=venv).stdout.split()
    assert all(Path(p).is_relative_to(venv / "lib") for p in where), where


def test_the_method_s_setting_scales_its_penalty_in_training(method_runs):
    """penalty = lam ||theta||^2 with the same initial theta (same seed): the first PPO
    iteration's penalty doubles with lam (theta moves little in one iteration)."""
    _, runs, _ = method_runs
    first = {lam: pd.read_csv(out / "train" / "00-A.csv")["penalty"].iloc[0]
             for lam, out in runs.items()}
    assert first[1e-3] > 0
    assert first[2e-3] / first[1e-3] == pytest.approx(2.0, rel=0.02)
    for out in runs.values():
        curve = pd.read_csv(out / "curve.csv")
        assert len(curve) == 2 * 3 and np.isfinite(curve["mean_return"]).all()


def test_metrics_group_the_method_s_runs_by_its_section(method_runs):
    _, _, metrics = method_runs
    rows = set(metrics["cartpole"]["summary"])
    assert rows == {"finetune-l2 [lam=0.001]", "finetune-l2 [lam=0.002]"}


@pytest.fixture(scope="module")
def linewalk_venv(wheel, tmp_path_factory) -> tuple[Path, Path]:
    """The fresh environment with telapa's wheel and the linewalk example installed, and a
    working directory outside the checkout, shared by the linewalk tests."""
    root = tmp_path_factory.mktemp("linewalk")
    venv = _venv(wheel, root, "linewalk")
    work = root / "work"
    work.mkdir()
    return venv, work


def _sr_is_mean_return_minus_one(out: Path) -> pd.DataFrame:
    """Every return is 1 or 2: SR under "return >= 2" is mean return - 1, exactly, in every
    evaluation and in PPO's episode statistics; returns the curve."""
    curve = pd.read_csv(out / "curve.csv")
    final = pd.read_csv(out / "final.csv")
    for table in (curve, final):
        np.testing.assert_allclose(table["sr"], table["mean_return"] - 1.0, atol=1e-6)
    assert curve["mean_return"].min() >= 1.0  # the generic family would have said SR = 1
    train = pd.concat(pd.read_csv(p) for p in sorted((out / "train").glob("*.csv")))
    np.testing.assert_allclose(train["success_rate"], train["episode_return"] - 1.0,
                               atol=1e-5)  # PPO's episode statistics use the same target
    return curve


def test_an_env_from_a_module_id_is_scored_by_the_curriculum_s_success_target(linewalk_venv):
    venv, work = linewalk_venv
    out = work / "run"  # the curriculum shipped in the installed package
    _telapa(venv, "run", "--curriculum", "telapa_linewalk:linewalk.yaml", "--method", "finetune",
            "--set", "eval_episodes=8", "--out", str(out), cwd=work)
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "complete" and manifest["preset"] == "mujoco-quick"
    stored = yaml.safe_load((out / "curriculum.yaml").read_text())
    assert stored["tasks"]["A"]["env_id"] == "telapa_linewalk:LineWalk-v0"
    assert stored["tasks"]["A"]["success"] == {"return_at_least": 2.0}
    curve = _sr_is_mean_return_minus_one(out)
    assert curve["sr"].iloc[0] < 1.0  # the untrained policy misses the goal at times


def test_an_env_family_from_an_entry_point_runs_its_jax_port_with_its_own_competence(
        linewalk_venv):
    """linewalk-family.yaml names plain ``LineWalk-v0`` on the jax backend, with no success
    line: the installed package's family claims the id (entry point), makes its JAX port,
    sets D = 1 (its sketch) and scores with its competence (return >= 2)."""
    venv, work = linewalk_venv
    out = work / "family-run"
    _telapa(venv, "run", "--curriculum", "telapa_linewalk:linewalk-family.yaml",
            "--method", "finetune",
            *[a for s in TINY for a in ("--set", s)], "--out", str(out), cwd=work)
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "complete" and manifest["preset"] == "mujoco-quick"
    assert manifest["backend"] == "jax"
    stored = yaml.safe_load((out / "curriculum.yaml").read_text())
    assert {t["env_id"] for t in stored["tasks"].values()} == {"LineWalk-v0"}
    assert all(t.get("success") is None for t in stored["tasks"].values())
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["methods"]["telapa"]["latent"]["feature_dim"] == 1  # the family's sketch
    curve = _sr_is_mean_return_minus_one(out)
    assert len(curve) == 4 * 3 and (curve["sr"] < 1.0).any()


def test_the_slurm_example_is_a_valid_sweep():
    """examples/slurm/ewc-grid.yaml (docs/running.md, "Sweeps on Slurm") parses, with its
    slurm section, as `telapa sweep --backend slurm` reads it."""
    from telapa.continual.sweep import load_sweep

    sweep = load_sweep(EXAMPLES / "slurm" / "ewc-grid.yaml")
    assert len(sweep.cells) == 3 * 2 * 5
    slurm = sweep.file.slurm
    assert (slurm.partition, slurm.minutes, slurm.cpus, slurm.memory, slurm.gpus) == (
        "cpu", 720, 4, "16G", 0)
