"""MuJoCo friction curricula in the continual loop with tiny budgets (episodes capped at
64 steps): TeLAPA end to end with D = 24 sketches and SR~ competence, `telapa run` killed
with SIGKILL and resumed with identical results; every method runs; the report's MuJoCo
table."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from telapa.continual.curriculum import parse_curriculum
from telapa.continual.preset import load_run_config
from telapa.continual.registry import METHODS
from telapa.continual.rundir import RunDir
from telapa.continual.runner import ContinualRun
from telapa.continual.spec import RunSpec
from telapa.envs.mujoco import reference_return

from .crash import kill_at_checkpoint, telapa_process

TINY = Path(__file__).with_name("tiny_mujoco_run.yaml")
CURRICULUM = Path(__file__).with_name("tiny_mujoco_curriculum.yaml")
R_STAR = reference_return("Hopper-v5")


def _curriculum(cycles: int = 2):
    data = yaml.safe_load(CURRICULUM.read_text())
    return parse_curriculum({**data, "cycles": cycles}, str(CURRICULUM))


def _spec(method: str = "telapa", cycles: int = 2) -> RunSpec:
    return RunSpec(_curriculum(cycles), method, 1, load_run_config(TINY), "tiny")


AGENTS: dict = {}
"""The agents of this file's in-process runs, shared where they are made of the same
(`telapa.continual.runner.AgentKey`): each program is traced and compiled once."""


@pytest.fixture(scope="module")
def telapa_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("mujoco") / "run"
    metrics = ContinualRun.start(_spec(), path, agents=AGENTS).run()
    return path, metrics


def test_telapa_on_friction_shifts_uses_the_family_sketch_and_competence(telapa_run):
    path, metrics = telapa_run
    tables = RunDir(path).tables()
    visits, curve = tables["visits"], tables["curve"]
    assert list(visits["tag"]) == ["F0.50", "F1.50", "F0.50'", "F1.50'"]
    # SR~ = clip(mean return / R*, 0, 1) everywhere, with the return kept alongside
    np.testing.assert_allclose(curve["sr"], np.clip(curve["mean_return"] / R_STAR, 0, 1),
                               rtol=1e-5)
    assert (curve["mean_return"] != 0).all()
    config = (path / "config.yaml").read_text()
    assert "feature_dim: 24" in config
    log = json.loads((path / "method_log.json").read_text())
    assert [e["visit"] for e in log if e["event"] == "illumination"] == [0, 1, 2, 3]
    assert [e["visit"] for e in log if e["event"] == "transfer"] == [1, 2, 3]
    elites = pd.read_csv(path / "elites.csv")
    assert set(elites["task"]) == {"F0.50", "F1.50"}
    assert ((elites["sr"] >= 0) & (elites["sr"] <= 1)).all()
    # fitness is the raw mean return (not clipped, not normalized)
    assert (elites["fitness"].abs() > 1.0).any()
    assert 0 <= metrics["mean_sr"] <= 1


def test_telapa_mujoco_run_resumes_exactly_after_sigkill(telapa_run, tmp_path):
    """`telapa run` killed with SIGKILL during visit 2 (after two archives exist), then
    `telapa run --resume`: the same tables, metrics and method log as the uninterrupted
    in-process run (so also the same across processes)."""
    path, metrics = telapa_run
    out = tmp_path / "killed"
    proc = telapa_process("run", "--curriculum", str(CURRICULUM), "--method", "telapa",
                          "--seed", "1", "--preset", str(TINY), "--out", str(out))
    # phases per visit: start, 1 chunk, end; a host backend (native) checkpoints after
    # start and end, so next_phase 7 = visit 2 has started (its training not yet kept)
    assert 7 <= kill_at_checkpoint(proc, out, 7) < 12
    assert json.loads((out / "run.json").read_text())["status"] == "running"
    resume = telapa_process("run", "--resume", str(out))
    _, err = resume.communicate(timeout=600)
    assert resume.returncode == 0, err
    assert re.search(r"resumed at visit [23] ", err), err  # 3: only if the poll lagged
    assert json.loads((out / "metrics.json").read_text()) == json.loads(json.dumps(metrics))
    for name, table in RunDir(path).tables().items():
        pd.testing.assert_frame_equal(RunDir(out).tables()[name], table, obj=name)
    strip = {"wall_s"}
    a = json.loads((path / "method_log.json").read_text())
    b = json.loads((out / "method_log.json").read_text())
    assert [{k: v for k, v in e.items() if k not in strip} for e in a] == [
        {k: v for k, v in e.items() if k not in strip} for e in b]


@pytest.mark.parametrize("method", sorted(set(METHODS) - {"telapa"}))
def test_every_method_runs_a_friction_curriculum(method, tmp_path):
    metrics = ContinualRun.start(_spec(method, cycles=1), tmp_path / method,
                                 agents=AGENTS).run()
    tables = RunDir(tmp_path / method).tables()
    assert list(tables["visits"]["tag"]) == ["F0.50", "F1.50"]
    # one cycle: no revisits, so Mean SR (the revisit mean) is undefined; SR~ of the visits
    assert math.isnan(metrics["mean_sr"]) and 0 <= metrics["mean_sr_all"] <= 1
    assert len(tables["final"]) == 2


def test_report_has_the_papers_mujoco_table_and_return_curves(telapa_run, tmp_path):
    from telapa.report.build import build_document
    from telapa.report.mujoco import mujoco_results, mujoco_table
    from telapa.report.results import load_run, score

    path, metrics = telapa_run
    finetune = tmp_path / "finetune"
    ContinualRun.start(_spec("finetune"), finetune).run()
    records = [load_run(path), load_run(finetune)]
    results = mujoco_results(score(records))
    assert list(results) == ["hopper-tiny"]
    table = mujoco_table(results)
    values = table.values
    assert list(values.index) == ["Hopper-v5 (hopper-tiny) · finetune",
                                  "Hopper-v5 (hopper-tiny) · telapa"]
    telapa = values.loc["Hopper-v5 (hopper-tiny) · telapa"]
    # one seed: the cell is that run's metric (tau from the set: no scratch -> tau_min)
    assert telapa["mean_sr"] == pytest.approx(metrics["mean_sr"])
    assert telapa["bwt"] == pytest.approx(metrics["bwt"])
    assert [c.label for c in table.columns] == [
        "runs", "Mean SR~ ↑", "Mean SR~ (paper)", "BWT ↑", "BWT (paper)", "TR ↑", "TR (paper)"]
    # beside ours, the paper's Hopper values (its friction table) of the same method
    assert (telapa["mean_sr_paper"], telapa["bwt_paper"], telapa["tr_paper"]) == (
        0.629, -0.179, 0.740)
    assert values.loc["Hopper-v5 (hopper-tiny) · finetune", "tr_paper"] == 0.394
    doc = build_document(records, {})
    assert doc.sections[0].id == "mujoco" and doc.sections[0].tables[0].id == "mujoco-friction"
    figures = {f.id: f for f in doc.figures()}
    assert {"hopper-tiny-curves", "hopper-tiny-return-curves"} <= set(figures)
    # the curves show SR~, and say so (not "success rate": a MuJoCo episode has none)
    for name in ("hopper-tiny-curves", "hopper-tiny-profile"):
        assert "SR~ (normalized return)" in figures[name].caption
        assert "success rate" not in figures[name].caption
    # and so do the curriculum's tables, in their titles, captions and headers
    section = next(s for s in doc.sections if s.id == "hopper-tiny")
    labels = {t.id: [c.label for c in t.columns] for t in section.tables}
    for t in section.tables:
        assert "success rate" not in " ".join([t.title, t.caption, *labels[t.id]]), t.id
    assert labels["hopper-tiny-main"][1] == "Mean SR~ ↑"
    assert labels["hopper-tiny-aggregates"][1:] == ["mean SR~", "IQM SR~"]
    assert labels["hopper-tiny-profile"][0] == "SR~ > 0"
    titles = {t.id: t.title for t in section.tables}
    assert titles["hopper-tiny-revisits"] == "Revisit mean SR~"
    # beside it, the fall of SR~ at the friction boundaries (a MuJoCo curriculum's own)
    assert titles["hopper-tiny-boundaries"] == "The fall of SR~ at the task boundaries"
    assert [t.id for t in section.tables][1:3] == ["hopper-tiny-revisits",
                                                  "hopper-tiny-boundaries"]


def test_play_writes_an_mp4_of_a_mujoco_policy(telapa_run, tmp_path, capsys):
    """`telapa play` on a MuJoCo run: frames from the headless renderer into an MP4,
    the episodes' returns printed; or, without any GL backend, the one-line error."""
    import imageio.v3 as iio

    from telapa.cli import main
    from telapa.envs.mujoco.render import GLBackendError, gl_backend
    from telapa.play import CAPTION_PX

    path, _ = telapa_run
    out = tmp_path / "hopper.mp4"
    try:
        gl_backend()
    except GLBackendError as err:
        with pytest.raises(SystemExit):
            main(["play", str(path), "--episodes", "1", "--out", str(out)])
        assert str(err) in capsys.readouterr().err
        return
    assert main(["play", str(path), "--task", "F1.50", "--episodes", "1",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    steps = int(re.search(r"episode 1: return [-0-9.]+, (\d+) steps", printed).group(1))
    assert 1 <= steps <= 64 and "on Hopper-v5" in printed
    # SR~ of a return, not successes: a MuJoCo episode has none to count
    assert re.search(r"episode 1: return [-0-9.]+, \d+ steps, SR~ [01]\.\d\d\n", printed)
    assert re.search(r"\nSR~ [01]\.\d{3} \(normalized return\), mean return", printed)
    assert "success" not in printed and "failed" not in printed
    frames = iio.imread(out, index=None)
    assert frames.shape[0] == steps + 1 and frames.shape[1] == 480 + CAPTION_PX
    assert frames[:, :480].std() > 0  # not a blank picture


def test_an_mjx_episode_is_drawn_by_posing_its_states_in_gymnasiums_env():
    """`telapa play --out` of a run on MJX (backend jax) poses each step's qpos, qvel in
    gymnasium's env of the task and draws it (`telapa.play._posed_pictures`): the pose
    of a reset state is the frame gymnasium draws after that reset, and the frames move
    with the states. (The MJX rollout that gives the states is the evaluator's; one
    episode of it compiles for some 50 s on a CPU, so it is not run here.)"""
    from telapa.envs.mujoco.render import GLBackendError, gl_backend, make_rendering_env
    from telapa.envs.registry import default_config
    from telapa.play import _check_renderer, _posed_pictures
    from telapa.rl.agent import Agent

    try:
        gl_backend()
    except GLBackendError as err:
        pytest.skip(str(err))
    options = {"friction": 0.5}
    reference = make_rendering_env("Hopper-v5", options, width=64, height=64)
    reference.reset(seed=3)
    sim = reference.unwrapped
    qpos, qvel, start = [sim.data.qpos.copy()], [sim.data.qvel.copy()], reference.render()
    for _ in range(6):
        reference.step(np.full(3, 0.5, np.float32))
        qpos.append(sim.data.qpos.copy())
        qvel.append(sim.data.qvel.copy())
    reference.close()
    poser = make_rendering_env("Hopper-v5", options, width=64, height=64)
    poser.reset(seed=0)  # another start: each pose replaces it
    frames = _posed_pictures(poser, np.array(qpos), np.array(qvel))
    poser.close()
    assert frames.shape == (7, 64, 64, 3) and frames.dtype == np.uint8
    np.testing.assert_array_equal(frames[0], start)
    assert not np.array_equal(frames[0], frames[-1])
    # and an MJX agent passes play's renderer check (it was refused before)
    agent = Agent("Hopper-v5", default_config("Hopper-v5"), backend="jax",
                  env_options={**options, "max_episode_steps": 8})
    _check_renderer(agent)
