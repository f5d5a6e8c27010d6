"""telapa installs anywhere: its wheel ships the built-in configs as files, and installed
from the wheel into a fresh virtual environment outside the checkout, ``telapa run``
finds the built-in curriculum and preset from another directory.

The fresh environment gets only the wheel; the dependencies (JAX, gymnasium, ...) are
borrowed from the test's own environment through a ``.pth`` line, so the test takes
seconds, not a download of JAX. A ``.pth`` path line does not run the editable install's
finder, so the only telapa it can import is the wheel's (checked).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from fresh_venv import ROOT, clean_env, make_venv


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment outside the checkout with the wheel installed."""
    return make_venv(tmp_path_factory.mktemp("venv") / "env", wheel)


def test_the_wheel_ships_the_configs_as_files(wheel):
    with zipfile.ZipFile(wheel) as archive:
        infos = {i.filename: i for i in archive.infolist()}
    configs = [n for n in infos if n.startswith("telapa/configs/")]
    for name in ("runs/quick.yaml", "runs/paper.yaml", "ppo/minigrid.yaml",
                 "curricula/smoke.yaml", "curricula/primary.yaml", "sweeps/table1.yaml"):
        assert f"telapa/configs/{name}" in infos, name
    shipped = sorted(p.relative_to(ROOT / "src").as_posix()
                     for p in (ROOT / "src/telapa/configs").rglob("*.yaml"))
    assert sorted(configs) == shipped
    for name in configs:  # regular files, not links to the checkout
        mode = infos[name].external_attr >> 16
        assert not stat.S_ISLNK(mode) and infos[name].file_size > 0, name


def test_the_installed_wheel_runs_a_smoke_curriculum_from_another_directory(venv, tmp_path):
    python, telapa = venv / "bin" / "python", venv / "bin" / "telapa"
    env = clean_env(TELAPA_JAX_CACHE=os.environ.get("TELAPA_JAX_CACHE", "off"))
    where = subprocess.run(
        [str(python), "-c", "import telapa, telapa.config as c; print(telapa.__file__); "
                            "print(c.CONFIG_DIR)"],
        check=True, capture_output=True, text=True, env=env, cwd=tmp_path).stdout.split()
    site = venv / "lib"
    assert Path(where[0]).is_relative_to(site), where  # the wheel's telapa, not the checkout
    assert Path(where[1]).is_relative_to(site) and not Path(where[1]).is_symlink()
    out = tmp_path / "smoke-run"
    # the shapes of tests/continual/tiny_run.yaml: their programs are in the JAX cache
    sets = ["train.ppo={num_envs: 8, n_steps: 32, batch_size: 128, epochs: 2}",
            "train.eval.episodes=8", "steps_per_visit=512", "eval_every=512",
            "eval_episodes=8", "final_eval_episodes=8"]
    proc = subprocess.run(
        [str(telapa), "run", "--curriculum", "smoke", "--method", "finetune", "--preset",
         "quick", *[a for s in sets for a in ("--set", s)], "--out", str(out)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "complete" and manifest["preset"] == "quick"
    # no git tree: the version and a hash of the installed sources, not null
    assert re.fullmatch(r"telapa-.+\+src\.[0-9a-f]{12}", manifest["code"][0]), manifest["code"]
    assert manifest["overrides"]["steps_per_visit"] == 512
    assert manifest["overrides"]["train.ppo"]["num_envs"] == 8
    assert pd.read_csv(out / "visits.csv")["train_steps"].tolist() == [512] * 4
    assert (out / "metrics.json").is_file() and list((out / "tb").glob("events.out.*"))
    assert not (ROOT / "runs" / out.name).exists()
    # and the installed wheel plays the run's final policy into a GIF (MiniGrid renderer,
    # Pillow from the wheel's dependencies)
    gif = tmp_path / "a.gif"
    played = subprocess.run([str(telapa), "play", str(out), "--task", "A", "--episodes", "1",
                             "--out", str(gif)], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=600)
    assert played.returncode == 0, played.stderr[-3000:]
    assert "finetune seed 0: final policy for A" in played.stdout
    assert gif.read_bytes()[:6] == b"GIF89a"
