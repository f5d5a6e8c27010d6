"""Watching a policy: episodes of a finished run's policy as frames (``telapa play``).

Which policy (`load_policy`), from a finished run's directory:

* the run's **final policy for a task** (``task``; default the last visit's task): what
  the end-of-sequence evaluation uses, ``Method.eval_params`` (Scratch-Reuse's stored
  network of that task, TeLAPA's and the single-model methods' last parameters);
* the **policy a visit ended with** (``visit``: its index or tag, e.g. ``3`` or ``"B'"``),
  which every run keeps as ``RUN_DIR/policies/NN-end.npz`` (`RunDir.save_policy`);
* an **archive elite** (``elite``: ``TASK:N``, the N-th elite of task TASK's archive, as
  ``telapa inspect`` lists them) of a method with archives, from its last checkpoint.

It plays on the env of ``task`` (default: the visit's task, the elite's archive's task,
or the last visit's), with the run's own settings (the task's env options, the run's
evaluation mode unless ``deterministic`` says otherwise).

**Episodes** (`play`): on the jax backend, episode e of K starts from
``env.reset(split(reset_key, K)[e])`` and samples its action at step t with
``fold_in(split(act_key, K)[e], t)``, ``reset_key, act_key = split(key)``, until it
terminates, is truncated or reaches the env's step limit: exactly the episodes of the
run's own evaluation (`telapa.rl.evaluate.make_population_evaluator`) with the same key,
so their SR is ``agent.evaluate(params, K, key).sr``. The frames are the ports' MiniGrid
picture (`telapa.envs.minigrid.render`). On the gymnasium backend (MuJoCo) episode e
resets with seed ``seed + e`` and draws frames through MuJoCo's headless renderer
(`telapa.envs.mujoco.render`). The key is ``jax.random.key(seed)``: the same seed, the
same episodes and frames.

`write_video` writes the episodes one after another as a GIF or an MP4 (by the file's
suffix), each frame with a caption strip: the episode, the step, the return so far and,
on the last frame, whether the episode succeeded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from telapa.continual.curriculum import Visit
from telapa.continual.rundir import RunDir
from telapa.continual.runner import ContinualRun
from telapa.qd.archive import elite_id_offset
from telapa.rl.agent import Agent
from telapa.rl.networks import Params, flatten_params

ELITE = re.compile(r"^(?P<task>[^:]+):(?P<number>\d+)$")
"""``--elite TASK:N``."""

VIDEO_SUFFIXES = (".gif", ".mp4")
CAPTION_PX = 24
"""Height of the caption strip under each frame (two lines of Pillow's default font)."""


class PlayError(ValueError):
    """The policy or the episodes asked for cannot be played (names what is wrong)."""


@dataclass(frozen=True)
class Policy:
    """A policy to play and where it came from."""

    params: Params
    agent: Agent
    """The agent of the env it plays on (its env, network and evaluation settings)."""
    label: str
    """What it is, e.g. ``"scratch seed 0: final policy for B"``."""


@dataclass(frozen=True)
class Episode:
    frames: np.ndarray
    """uint8 (T + 1, H, W, 3): the start, then the state after each step."""
    rewards: np.ndarray
    """(T,) rewards."""

    @property
    def length(self) -> int:
        return len(self.rewards)

    @property
    def ret(self) -> float:
        return float(self.rewards.sum())


def open_finished(path: str | Path) -> ContinualRun:
    """The finished run in ``path`` at its last checkpoint (its lock released). A run
    that is not complete is refused before it is opened, so nothing in it changes (a
    resume would record the code of this segment)."""
    run_dir = RunDir(path)
    status = run_dir.spec().get("status")  # RunDirError names a missing or foreign run
    if status != "complete":
        raise PlayError(f"{path} has not finished (status {status!r}); play a finished run, "
                        f"or finish it with `telapa run --resume {path}`")
    run = ContinualRun.resume(path)
    run.dir.unlock()
    return run


def _visit(run: ContinualRun, which: str) -> Visit:
    for v in run.visits:
        if which in (str(v.index), v.tag):
            return v
    tags = ", ".join(v.tag for v in run.visits)
    raise PlayError(f"{run.dir.path} has no visit {which!r}; its visits: {tags} (or 0-"
                    f"{len(run.visits) - 1})")


def _task_visit(run: ContinualRun, task: str | None) -> Visit:
    """The last visit of ``task`` (default: the last visit)."""
    if task is None:
        return run.visits[-1]
    found = [v for v in run.visits if v.task == task]
    if not found:
        tasks = ", ".join(dict.fromkeys(v.task for v in run.visits))
        raise PlayError(f"{run.dir.path} has no task {task!r}; its tasks: {tasks}")
    return found[-1]


def load_policy(run: ContinualRun, *, task: str | None = None, visit: str | None = None,
                elite: str | None = None, when: str = "end") -> Policy:
    """The policy of `run` named by ``visit`` or ``elite`` (else the final policy for
    ``task``), with the agent of the env it plays on (module docstring); with ``visit``,
    ``when="start"`` gives the parameters the visit started from (its transfer's origin)
    instead of those it ended with."""
    if visit is not None and elite is not None:
        raise PlayError("give --visit or --elite, not both")
    name = f"{run.spec.method} seed {run.spec.seed}"
    if visit is not None:
        ended = _visit(run, visit)
        params = run.dir.load_policy(ended.index, run.learner.params, when)
        where = _task_visit(run, task) if task is not None else ended
        moment = "end" if when == "end" else "start"
        return Policy(params, run.agent(where), f"{name}: policy at the {moment} of visit "
                                                f"{ended.tag}")
    if elite is not None:
        params, archive_task = _elite(run, elite)
        where = _task_visit(run, task or archive_task)
        return Policy(params, run.agent(where), f"{name}: elite {elite}")
    where = _task_visit(run, task)
    params = run.method.eval_params(where.task, run.learner)
    return Policy(params, run.agent(where), f"{name}: final policy for {where.task}")


def _elite(run: ContinualRun, label: str) -> tuple[Params, str]:
    archives = getattr(run.method, "archives", None)
    if archives is None:
        raise PlayError(f"{run.dir.path} is a {run.spec.method} run: it keeps no archive "
                        "elites (play its final policy, or a visit's with --visit)")
    match = ELITE.match(label)
    if match is None:
        raise PlayError(f"--elite {label!r}: expected TASK:N, e.g. B:0, as `telapa inspect` "
                        "lists elites")
    task, number = match["task"], int(match["number"])
    if task not in archives:
        raise PlayError(f"--elite {label}: no archive of task {task!r}; archives: "
                        f"{', '.join(archives)}")
    archive = archives[task]
    wanted = elite_id_offset(int(archive.tag)) + number
    ids = np.asarray(archive.elites.elite_id)
    slots = np.flatnonzero((ids == wanted) & np.asarray(archive.valid))
    if not slots.size:
        raise PlayError(f"--elite {label}: the {task} archive holds no elite {number} "
                        "(it may have been replaced; `telapa inspect` lists the current ones)")
    _, unravel = flatten_params(run.learner.params)
    return unravel(jnp.asarray(archive.elites.params[int(slots[0])])), task


def play(policy: Policy, *, episodes: int, seed: int, deterministic: bool | None = None,
         tile_size: int = 32) -> list[Episode]:
    """``episodes`` episodes of ``policy`` from ``seed`` (module docstring); the run's
    evaluation mode unless ``deterministic`` is given; MiniGrid frames ``tile_size``
    pixels a cell."""
    if episodes < 1:
        raise PlayError(f"--episodes must be at least 1, got {episodes}")
    agent = policy.agent
    greedy = agent.config.eval.deterministic if deterministic is None else deterministic
    if agent.backend == "jax":
        return _play_jax(agent, policy.params, episodes, jax.random.key(seed), greedy,
                         tile_size)
    return _play_gym(agent, policy.params, episodes, seed, greedy)


def _play_jax(agent: Agent, params: Params, episodes: int, key: jax.Array,
              deterministic: bool, tile_size: int) -> list[Episode]:
    from telapa.envs.minigrid.render import render

    env = agent.env
    task = getattr(env, "task", None)
    if task is None:
        raise PlayError(f"{agent.spec.env_id}: no renderer for this JAX env (MiniGrid ports "
                        "draw their frames; MuJoCo runs on the gymnasium backend)")
    states, rewards, lengths = _rollouts(agent, params, episodes, key, deterministic)
    frames = np.asarray(render(states, see_through_walls=task.see_through_walls,
                               tile_size=tile_size))
    rewards, lengths = np.asarray(rewards), np.asarray(lengths)
    return [Episode(frames[e, :lengths[e] + 1], rewards[e, :lengths[e]])
            for e in range(episodes)]


def _rollouts(agent: Agent, params: Params, episodes: int, key: jax.Array,
              deterministic: bool) -> tuple[Any, jax.Array, jax.Array]:
    """Every episode's states (E, max_steps + 1, ...), rewards (E, max_steps) and length
    (E,): the evaluator's episodes (module docstring), each held at its last state."""
    env, policy, max_steps = agent.env, agent.policy, agent.spec.max_steps

    def episode(reset_key: jax.Array, act_key: jax.Array):
        state, obs = env.reset(reset_key)

        def step(carry, t):
            state, obs, done = carry
            one = jax.tree.map(lambda x: x[None], obs)
            action = policy.act(params, one, jax.random.fold_in(act_key, t),
                                deterministic).env_action[0]
            nxt, next_obs, reward, terminated, truncated, _ = env.step(state, action)
            keep = jax.tree.map(lambda old, new: jnp.where(done, old, new), state, nxt)
            ended = done | terminated | truncated | (t + 1 >= max_steps)
            return (keep, next_obs, ended), (keep, jnp.where(done, 0.0, reward), done)

        _, (states, rewards, was_done) = jax.lax.scan(
            step, (state, obs, jnp.bool_(False)), jnp.arange(max_steps))
        states = jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]),
                              state, states)
        return states, rewards, jnp.sum(~was_done)

    reset_key, act_key = jax.random.split(key)
    run = jax.jit(jax.vmap(episode))
    return run(jax.random.split(reset_key, episodes), jax.random.split(act_key, episodes))


def _play_gym(agent: Agent, params: Params, episodes: int, seed: int,
              deterministic: bool) -> list[Episode]:
    from telapa.envs.mujoco.render import make_rendering_env

    env = make_rendering_env(agent.spec.env_id, agent.env_options)
    key = jax.random.key(seed)
    out = []
    try:
        for e in range(episodes):
            obs, _ = env.reset(seed=seed + e)
            frames, rewards = [env.render()], []
            for t in range(agent.spec.max_steps):
                one = jax.tree.map(lambda x: np.asarray(x)[None], obs)
                action = agent.policy.act(params, one, jax.random.fold_in(key, e * 2**20 + t),
                                          deterministic).env_action[0]
                obs, reward, terminated, truncated, _ = env.step(np.asarray(action))
                frames.append(env.render())
                rewards.append(float(reward))
                if terminated or truncated:
                    break
            out.append(Episode(np.stack(frames), np.asarray(rewards, np.float32)))
    finally:
        env.close()
    return out


def success(agent: Agent, episode: Episode) -> bool:
    """Whether ``episode`` reached the env family's competence on its own (MiniGrid: a
    positive return)."""
    return bool(agent.competence(np.asarray([episode.ret])) >= 1.0)


def check_video_path(path: str | Path) -> Path:
    """``path`` as a new video file: a ``.gif`` or ``.mp4`` that does not exist (nothing a
    user has is overwritten) in an existing folder; `PlayError` naming what is wrong
    otherwise. Called before any episode is played, and again by `write_video`."""
    path = Path(path)
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise PlayError(f"--out {path}: give a .gif or .mp4 file")
    if path.exists() or path.is_symlink():
        raise PlayError(f"--out {path} exists; choose another file (nothing was "
                        "overwritten)")
    if not path.parent.is_dir():
        raise PlayError(f"--out {path}: folder {path.parent} does not exist")
    return path


def write_video(path: str | Path, agent: Agent, episodes: Sequence[Episode], *,
                fps: int = 8) -> Path:
    """The episodes one after another, each frame captioned (module docstring), as a
    GIF or an MP4 by ``path``'s suffix (`check_video_path`)."""
    import imageio.v3 as iio

    path = check_video_path(path)
    frames = np.stack([captioned(frame, _caption(agent, len(episodes), i, t, episode))
                       for i, episode in enumerate(episodes)
                       for t, frame in enumerate(episode.frames)])
    if path.suffix.lower() == ".gif":
        iio.imwrite(path, frames, extension=".gif", duration=1000 / fps, loop=0)
    else:  # ffmpeg from the imageio-ffmpeg wheel; even sizes: H.264 needs them
        import imageio.v2 as iio2

        h, w = frames.shape[1:3]
        frames = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)))
        iio2.mimwrite(path, list(frames), fps=fps, macro_block_size=1)
    return path


def _caption(agent: Agent, n: int, i: int, t: int, episode: Episode) -> str:
    """Two lines: the episode and step; the return so far (and at the end, success)."""
    text = f"ep {i + 1}/{n} step {t}\nR {episode.rewards[:t].sum():.2f}"
    if t == episode.length:
        text += " success" if success(agent, episode) else " failed"
    return text


def captioned(frame: np.ndarray, text: str) -> np.ndarray:
    """``frame`` with a black strip of `CAPTION_PX` rows below it holding ``text`` (up to
    two lines) in white (Pillow's default bitmap font); the width is kept."""
    from PIL import Image, ImageDraw

    h, w, _ = frame.shape
    canvas = Image.new("RGB", (w, h + CAPTION_PX))
    canvas.paste(Image.fromarray(np.asarray(frame, np.uint8)), (0, 0))
    ImageDraw.Draw(canvas).text((2, h + 1), text, fill=(255, 255, 255))
    return np.asarray(canvas)


__all__ = ["Episode", "PlayError", "Policy", "captioned", "check_video_path", "load_policy",
           "open_finished",
           "play", "success", "write_video"]
