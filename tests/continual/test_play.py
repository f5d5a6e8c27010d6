"""`telapa play`: a finished run's final policy, a visit's policy and an archive elite
played as the run's own evaluation plays them, drawn with the MiniGrid renderer, written
as a GIF or an MP4 with captioned frames; bad requests named before any work."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import imageio.v3 as iio
import jax
import numpy as np
import pandas as pd
import psutil
import pytest

import telapa.play as play_module
from telapa.cli import main
from telapa.envs.family import NormalizedReturn, SuccessRate
from telapa.envs.minigrid.render import render
from telapa.play import (
    CAPTION_PX,
    Episode,
    PlayError,
    load_policy,
    open_finished,
    outcome,
    play,
    summary,
    write_video,
)
from telapa.rl.networks import flatten_params


@pytest.fixture(scope="module")
def telapa_run(quick_run):
    return open_finished(quick_run("telapa", 0))


def _episode(ret: float) -> Episode:
    return Episode(None, np.asarray([ret], np.float32))


def test_outcomes_count_successes_only_where_competence_is_a_count():
    """MiniGrid (SR: a positive return succeeds) counts k of n; MuJoCo (SR~ = clip(mean
    R / R*, 0, 1), R* = 3000) grades each episode and the set, and counts nothing."""
    from types import SimpleNamespace

    minigrid = SimpleNamespace(competence=SuccessRate())
    assert [outcome(minigrid, _episode(r)) for r in (0.5, 0.0)] == ["success", "failed"]
    assert summary(minigrid, np.array([0.5, 0.0, 0.9])) == "SR 0.667 (2/3 successes)"
    hopper = SimpleNamespace(competence=NormalizedReturn(3000.0))
    # 150 / 3000 = 0.05; 6000 / 3000 clipped to 1; -30 clipped to 0
    assert [outcome(hopper, _episode(r)) for r in (150.0, 6000.0, -30.0)] == [
        "SR~ 0.05", "SR~ 1.00", "SR~ 0.00"]
    # the mean return (150 + 300 + 6000) / 3 = 2150, 2150 / 3000 = 0.71667
    assert summary(hopper, np.array([150.0, 300.0, 6000.0])) == "SR~ 0.717 (normalized return)"


def _flat(params) -> np.ndarray:
    return np.asarray(flatten_params(params)[0])


def test_the_final_policy_plays_the_runs_own_evaluation_episodes(telapa_run):
    policy = load_policy(telapa_run, task="A")
    assert policy.label == "telapa seed 0: final policy for A"
    assert policy.agent.spec.env_id == "MiniGrid-Empty-5x5-v0"
    episodes = play(policy, episodes=4, seed=11)
    # the evaluator's episodes with the same key: the same returns and lengths
    result = policy.agent.evaluate(policy.params, 4, jax.random.key(11))
    assert [e.ret for e in episodes] == pytest.approx(result.returns.tolist())
    assert [e.length for e in episodes] == result.lengths.tolist()
    for e in episodes:
        assert e.frames.shape == (e.length + 1, 160, 160, 3) and e.frames.dtype == np.uint8
    # frame 0 is the start state Farama would draw; the same seed, the same frames
    state, _ = policy.agent.env.reset(jax.random.split(jax.random.split(
        jax.random.key(11))[0], 4)[0])
    np.testing.assert_array_equal(episodes[0].frames[0], np.asarray(render(
        state, see_through_walls=policy.agent.env.task.see_through_walls)))
    again = play(policy, episodes=4, seed=11)
    assert all(np.array_equal(a.frames, b.frames) for a, b in zip(episodes, again,
                                                                  strict=True))


def test_a_visit_and_an_elite_are_played_from_what_the_run_keeps(telapa_run, quick_run):
    path = quick_run("telapa", 0)
    visits = pd.read_csv(path / "visits.csv")
    assert sorted(p.name for p in (path / "policies").iterdir()) == sorted(
        [f"{v:02d}-{w}.npz" for v in visits["visit"] for w in ("start", "end")]
        + ["seal.json"])
    last = load_policy(telapa_run, visit=str(len(visits) - 1))
    # TeLAPA's final policy is the last visit's end
    np.testing.assert_array_equal(_flat(last.params), _flat(telapa_run.state.learner.params))
    by_tag = load_policy(telapa_run, visit="B'", task="A")
    assert by_tag.label.endswith("end of visit B'") and by_tag.agent.spec.env_id.startswith(
        "MiniGrid-Empty")
    elites = pd.read_csv(path / "elites.csv")
    first = elites[elites["task"] == "B"].iloc[0]
    label = f"B:{int(first['elite_id']) & 0xFFFFFF}"
    elite = load_policy(telapa_run, elite=label)
    assert elite.agent.spec.env_id == "MiniGrid-DoorKey-5x5-v0"
    archive = telapa_run.method.archives(telapa_run.state.method)["B"]
    slot = int(np.flatnonzero(np.asarray(archive.elites.elite_id) == first["elite_id"])[0])
    np.testing.assert_array_equal(_flat(elite.params), np.asarray(archive.elites.params[slot]))
    for kwargs, message in [({"visit": "Z"}, "no visit 'Z'; its visits: A, B, A', B'"),
                            ({"elite": "B"}, "expected TASK:N"),
                            ({"elite": "C:0"}, "no archive of task 'C'"),
                            ({"elite": "B:999"}, "holds no elite 999"),
                            ({"task": "Q"}, "no task 'Q'; its tasks: A, B"),
                            ({"visit": "0", "elite": "B:0"}, "not both")]:
        with pytest.raises(PlayError, match=message):
            load_policy(telapa_run, **kwargs)


FORKS_RUNNING_PYTHON: list[int] = []
os.register_at_fork(before=lambda: FORKS_RUNNING_PYTHON.append(os.getpid()))
"""Forks whose child runs Python (a ``preexec_fn``): CPython calls the at-fork hooks only
for those; a subprocess without one is started by vfork and exec, with no hook."""


def ffmpegs() -> list[psutil.Process]:
    """This process's ffmpeg children (an xdist worker has others: browsers, servers)."""
    def named(child: psutil.Process) -> bool:
        try:
            return "ffmpeg" in Path(child.cmdline()[0]).name
        except (psutil.Error, IndexError):
            return False

    return [child for child in psutil.Process().children() if named(child)]


def test_an_mp4_is_piped_to_ffmpeg_in_its_own_group_with_no_python_in_the_fork(tmp_path):
    """imageio's writer started ffmpeg with ``preexec_fn=os.setpgrp``: Python in the forked
    child of a JAX process (JAX warned of a deadlock at each); `_write_mp4` does not."""
    groups = []

    def frames():
        for i in range(6):  # odd sides: padded to even ones; one colour per frame
            if i == 3:  # ffmpeg runs now: its process group is its own, not telapa's
                child, = ffmpegs()
                groups.append((os.getpgid(child.pid), child.pid, os.getpgid(0)))
            yield np.full((33, 47, 3), 40 * i, np.uint8)

    before = len(FORKS_RUNNING_PYTHON)
    play_module._write_mp4(tmp_path / "a.mp4", frames(), fps=5, out=tmp_path / "a.mp4")
    assert len(FORKS_RUNNING_PYTHON) == before
    (group, pid, ours), = groups
    assert group == pid != ours
    video = iio.imread(tmp_path / "a.mp4", index=None)
    assert video.shape == (6, 34, 48, 3)
    np.testing.assert_allclose(video[:, :33, :47].mean(axis=(1, 2, 3)), 40 * np.arange(6),
                               atol=3)  # lossy, but each frame's colour kept
    for bad, message in [([], "no episodes to write"),
                         ([np.zeros((4, 4, 3), np.uint8), np.zeros((4, 6, 3), np.uint8)],
                          "a frame of 4x6 pixels among frames of 4x4")]:
        with pytest.raises(PlayError, match=message):
            play_module._write_mp4(tmp_path / "b.mp4", iter(bad), fps=5, out=tmp_path / "b.mp4")
    assert not ffmpegs()  # no ffmpeg left running after an error
    # ffmpeg's own failure (here: no folder for the file), with what it said
    nowhere = tmp_path / "no-folder" / "c.mp4"
    with pytest.raises(PlayError, match=r"ffmpeg failed \(exit status \d+\): .*No such file"):
        play_module._write_mp4(nowhere, (np.zeros((4, 4, 3), np.uint8) for _ in range(50)),
                               fps=5, out=nowhere)


def test_play_writes_a_captioned_gif_and_mp4_and_prints_the_sr(quick_run, tmp_path, capsys,
                                                              monkeypatch):
    path = quick_run("finetune", 1)
    gif, mp4 = tmp_path / "a.gif", tmp_path / "a.mp4"
    assert main(["play", str(path), "--task", "A", "--episodes", "2", "--out", str(gif)]) == 0
    out = capsys.readouterr().out
    assert ("finetune seed 1: final policy for A on MiniGrid-Empty-5x5-v0 (the final "
            "evaluation's episodes, 2 of 8)") in out
    policy = load_policy(open_finished(path), task="A")
    episodes = play(policy, episodes=2)  # no seed: the final evaluation's first 2
    sr = np.mean([e.ret > 0 for e in episodes])
    assert f"SR {sr:.3f}" in out and f"-> {gif}" in out
    frames = iio.imread(gif, index=None)
    assert frames.shape[0] == sum(e.length + 1 for e in episodes)
    assert frames.shape[1:3] == (160 + CAPTION_PX, 160)
    np.testing.assert_array_equal(frames[0, :160, :, :3], episodes[0].frames[0])
    assert frames[0, 160:].any()  # the caption strip holds text
    assert main(["play", str(path), "--task", "A", "--episodes", "1", "--out", str(mp4),
                 "--greedy"]) == 0
    assert iio.imread(mp4, index=None).shape[1:3] == (160 + CAPTION_PX, 160)
    with pytest.raises(PlayError, match="exists; choose another file"):
        write_video(gif, policy.agent, episodes)
    # --out is checked before the run's policy is loaded or played
    with monkeypatch.context() as patch:
        patch.setattr(play_module, "open_finished", lambda *_: pytest.fail("loaded the run"))
        with pytest.raises(SystemExit):
            main(["play", str(path), "--task", "A", "--out", str(gif)])
    assert f"--out {gif} exists; choose another file" in capsys.readouterr().err
    for argv, message in [(["--out", str(tmp_path / "a.png")], "give a .gif or .mp4"),
                          (["--elite", "A:0"], "is a finetune run: it keeps no archive")]:
        with pytest.raises(SystemExit):
            main(["play", str(path), *argv])
        assert message in capsys.readouterr().err
    assert json.loads((path / "run.json").read_text())["status"] == "complete"


def test_an_unfinished_run_is_refused_and_left_as_it_was(quick_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(quick_run("finetune", 0), run)
    manifest = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**manifest, "status": "running"}))
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    with pytest.raises(PlayError, match="has not finished .*telapa run --resume"):
        open_finished(run)
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_what_is_played_is_said_before_it_plays_and_each_episode_as_it_ends(
        quick_run, capsys, monkeypatch):
    """The header line is out before the first episode runs (whose compile took about a
    minute on MJX, which showed as nothing), and each episode's line as it ends, not all
    at the end."""
    import telapa.play as play_module

    real = play_module.iter_episodes
    seen: list[str] = []

    def watched(*args, **kwargs):
        for episode in real(*args, **kwargs):
            seen.append(capsys.readouterr().out)  # printed before this episode was given
            yield episode

    monkeypatch.setattr(play_module, "iter_episodes", watched)
    assert main(["play", str(quick_run("finetune", 1)), "--task", "A", "--episodes",
                 "2"]) == 0
    seen.append(capsys.readouterr().out)
    assert seen[0] == ("finetune seed 1: final policy for A on MiniGrid-Empty-5x5-v0 (the "
                       "final evaluation's episodes, 2 of 8)\n")
    assert seen[1].startswith("  episode 1: return ") and "episode 2" not in seen[1]
    assert seen[2].startswith("  episode 2: return ") and "over 2 episodes" in seen[2]
