"""`telapa play` on the gymnasium backend of envs other than MuJoCo's: the episodes are
played on the env the run's own env family makes (MiniGrid's, the generic family's, a
plug-in's), not on MuJoCo's; ``--out`` draws the env's own ``rgb_array`` frames, or,
where the env has no such render mode, is refused in one line before any episode is
played.

A probe found every such play ending in a traceback: ``ValueError: MiniGrid-Empty-5x5-v0:
the MuJoCo sketch needs a time limit`` (the MuJoCo family made every host env), and with
``--out`` ``TypeError: LineWalk.__init__() got an unexpected keyword argument
'render_mode'``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import imageio.v3 as iio
import pytest

import telapa.play as play_module
from telapa.cli import main
from telapa.play import CAPTION_PX

PRESET = ("train:\n  ppo: {num_envs: 2, n_steps: 16, batch_size: 32, epochs: 1}\n"
          "  eval: {episodes: 2}\nsteps_per_visit: 32\neval_every: 32\n"
          "eval_episodes: 2\nfinal_eval_episodes: 2\n")
"""A run of one visit with one PPO update and two-episode evaluations."""

NO_RENDER_ENV = textwrap.dedent('''
    """A plug-in's env as a user writes one: a Box observation, no render modes."""
    import gymnasium
    import numpy as np
    from gymnasium import spaces


    class Walk(gymnasium.Env):
        def __init__(self, length=2):
            self.length = length
            self.observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
            self.action_space = spaces.Discrete(2)

        def _obs(self):
            return np.array([self.position / self.length, 0.5], np.float32)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.position = 0
            return self._obs(), {}

        def step(self, action):
            self.position = max(0, self.position + (1 if int(action) == 1 else -1))
            done = self.position >= self.length
            return self._obs(), float(done), done, False, {}


    gymnasium.register("PlayNoRenderWalk-v0", entry_point=Walk, max_episode_steps=6)
''')


def _run(tmp_path: Path, name: str, task: str) -> Path:
    """A finished Finetune run of ``task`` (one visit) on the gymnasium backend."""
    curriculum = tmp_path / f"{name}.yaml"
    curriculum.write_text(f"name: {name}\nbackend: gymnasium\ntasks:\n  A: {task}\n"
                          "order: [A]\n")
    preset = tmp_path / "preset.yaml"
    preset.write_text(PRESET)
    out = tmp_path / name
    assert main(["run", "--curriculum", str(curriculum), "--method", "finetune",
                 "--preset", str(preset), "--out", str(out)]) == 0
    return out


def _episode_lines(printed: str) -> list[str]:
    return [line for line in printed.splitlines() if line.strip().startswith("episode ")]


def _plays_two_episodes(run, env_id: str, capsys) -> str:
    """``telapa play RUN --episodes 2``: what it printed, after checking that it played
    two episodes of ``env_id``."""
    capsys.readouterr()
    assert main(["play", str(run), "--episodes", "2"]) == 0
    printed = capsys.readouterr().out
    assert f"on {env_id} (seed 0)" in printed, printed
    assert len(_episode_lines(printed)) == 2, printed
    return printed


def test_a_minigrid_run_on_the_gymnasium_backend_plays_and_renders(tmp_path, capsys):
    """MiniGrid on backend gymnasium: its episodes are played on the MiniGrid family's
    env (not MuJoCo's), and ``--out`` draws MiniGrid's own rgb_array frames."""
    run = _run(tmp_path, "mg", "MiniGrid-Empty-5x5-v0")
    printed = _plays_two_episodes(run, "MiniGrid-Empty-5x5-v0", capsys)
    assert "(2 successes)" in printed or "/2 successes)" in printed, printed

    gif = tmp_path / "mg.gif"
    assert main(["play", str(run), "--episodes", "1", "--out", str(gif)]) == 0
    printed = capsys.readouterr().out
    assert len(_episode_lines(printed)) == 1 and f"-> {gif}" in printed, printed
    frames = iio.imread(gif)
    steps = int(_episode_lines(printed)[0].split(", ")[1].split()[0])
    # MiniGrid's own picture of the 5x5 grid, 32 pixels a cell, over the caption strip
    assert frames.shape == (steps + 1, 5 * 32 + CAPTION_PX, 5 * 32, 3), frames.shape


def test_a_plug_in_env_without_rgb_array_plays_and_refuses_out_in_one_line(
        tmp_path, capsys, plugin_site, monkeypatch):
    """A plug-in env (``module:Id``, the generic family) plays its episodes; ``--out``
    is refused in one line naming the env and why, before any episode is played, and
    nothing is written."""
    (plugin_site / "play_norender_env.py").write_text(NO_RENDER_ENV)
    run = _run(tmp_path, "walk", "play_norender_env:PlayNoRenderWalk-v0")
    _plays_two_episodes(run, "PlayNoRenderWalk-v0", capsys)

    def no_episodes(*args, **kwargs):
        raise AssertionError("an episode was played before --out was refused")

    monkeypatch.setattr(play_module, "_gym_episodes", no_episodes)
    gif = tmp_path / "walk.gif"
    with pytest.raises(SystemExit) as stop:
        main(["play", str(run), "--out", str(gif)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("telapa: error: PlayNoRenderWalk-v0 has no rgb_array "
                               "render mode"), err
    assert lines[0].endswith("play it without --out"), err
    assert not gif.exists()
    assert not list(tmp_path.glob(".walk.gif*"))


def test_the_video_memory_of_an_mjx_run_counts_its_kept_positions():
    """`--out` of a MuJoCo run on the jax backend (MJX) is sized before any episode: the
    states kept to draw a chunk of episodes are each step's qpos and qvel (Hopper: 6 + 6
    float32), its frames MuJoCo's renderer's. It read a MiniGrid grid the MJX state has
    not (AttributeError)."""
    from telapa.config import TrainConfig
    from telapa.envs.mujoco.render import FRAME_SIZE, GLBackendError, gl_backend
    from telapa.play import video_memory
    from telapa.rl import Agent

    try:
        gl_backend()
    except GLBackendError as err:  # `make test` installs one (the Makefile's gl target)
        pytest.skip(str(err))
    agent = Agent("Hopper-v5", TrainConfig(), backend="jax")
    states, frames, gif = video_memory("x.gif", agent, 2)
    steps = agent.spec.max_steps + 1
    assert states.bytes == 2 * steps * (6 + 6) * 4
    assert frames.bytes == steps * FRAME_SIZE * FRAME_SIZE * 3
    assert gif.kept and gif.bytes > 0
