"""Watching a policy: episodes of a finished run's policy as frames (``telapa play``).

Which policy (`load_policy`), from a finished run's directory (`open_finished`):

* the run's **final policy for a task** (``task``; default the last visit's task): what
  the end-of-sequence evaluation uses, ``Method.eval_params`` (Scratch-Reuse's stored
  network of that task, TeLAPA's and the single-model methods' last parameters);
* the **policy a visit ended with** (``visit``: its index or tag, e.g. ``3`` or ``"B'"``),
  which every run keeps as ``RUN_DIR/policies/NN-end.npz`` (`RunDir.save_policy`);
* an **archive elite** (``elite``: ``TASK:N``, the N-th elite of task TASK's archive, as
  ``telapa inspect`` lists them) of a method with archives, from its last checkpoint.

The final policies and the archives are the run's last checkpoint's: a run without one
(a sweep export keeps only the result files, `telapa.continual.rundir.RESULT_FILES`) is
refused, naming what is missing and where the policies are (the sweep's own run
directory), as is a last checkpoint that is not the end of the run; nothing else is
played in their place. Playing only reads: no lock is taken and nothing is written
inside the run directory (a video inside it is refused, `check_video_path`).

It plays on the env of ``task`` (default: the visit's task, the elite's archive's task,
or the last visit's), with the run's own settings (the task's env options, the run's
evaluation mode unless ``deterministic`` says otherwise).

**Episodes** (`play`, `iter_episodes`): on the jax backend, episode e of K starts from
``env.reset(split(reset_key, K)[e])`` and samples its action at step t with
``fold_in(split(act_key, K)[e], t)``, ``reset_key, act_key = split(key)``, until it
terminates, is truncated or reaches the env's step limit: exactly the episodes of the
run's own evaluation (`telapa.rl.evaluate.make_population_evaluator`) with the same key,
so their SR is ``agent.evaluate(params, K, key).sr``. Without a seed the final policy
replays the run's final evaluation of its task (`LoadedPolicy.replays`): ``key`` is that
evaluation's (`ContinualRun.final_tasks`), the episodes' keys are split
``final_eval_episodes`` ways and the first K are played, so K = ``final_eval_episodes``
gives final.csv's successes exactly (a larger K plays all of them, then K -
``final_eval_episodes`` more from the same key, `_episode_keys`). They run `CHUNK` at a
time. The frames are the ports' MiniGrid picture (`telapa.envs.minigrid.render`), drawn one
episode at a time and only when asked for (``frames``). On the host backends
(gymnasium, and MuJoCo's native) the episodes are played on one env of the task as the
run's own env family makes it (`EnvFamily.make_single`: the env each copy of the run's
vector env is, whatever the family: MiniGrid, MuJoCo, the generic family or a plug-in's);
episode e resets with seed ``seed + e`` and, with ``frames``, draws its frames with the
env's own ``rgb_array`` render mode (MuJoCo: its headless renderer,
`telapa.envs.mujoco.render`). An env without that render mode (gymnasium's
``metadata["render_modes"]``) is refused, in one line, before any episode is played
(`_check_renderer`). The host backends'
evaluation (vector env copies sharing one action key stream) is not replayed. With a
seed (default, where nothing is replayed: the run's) the key is
``jax.random.key(seed)``: the same seed, the same episodes and frames. At most
`MAX_EPISODES` episodes are played.

`write_video` writes the episodes one after another as a GIF or an MP4 (by the file's
suffix), each frame with a caption strip: the episode, the step, the return so far and,
on the last frame, the episode's outcome (success or failure; MuJoCo: its SR~). It takes
the episodes as they are played (an iterator), so no more than one episode's frames are
drawn at once; the MP4 writer (ffmpeg) streams them, the GIF writer (Pillow) holds every
frame at a byte a pixel until it writes the file, which `check_video_memory` bounds
before any episode is played. The video is written to a temporary file beside ``--out``
(``.NAME.PID.TOKEN.tmp.SUFFIX``) and moved to ``--out`` only when complete, never over a
file that appeared there meanwhile; a write that fails or is interrupted (Ctrl-C, or
SIGTERM, which ``telapa play`` raises as an interrupt) removes it, and one left by a
killed process (SIGKILL) is removed by the next write of the same ``--out``.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from telapa.continual.checkpoints import POINTER
from telapa.continual.curriculum import Visit
from telapa.continual.memory import GIB, Part, shortfall
from telapa.continual.registry import checked
from telapa.continual.rundir import POLICIES_DIR, RunDir, RunDirError
from telapa.continual.runner import ContinualRun
from telapa.continual.spec import RunSpec
from telapa.envs.registry import family_of
from telapa.io import CheckpointError
from telapa.io.atomic import fsync, fsync_dir, remove_stale
from telapa.qd.archive import elite_id_offset
from telapa.rl.agent import Agent
from telapa.rl.networks import Params, flatten_params

ELITE = re.compile(r"(?P<task>[^:]+):(?P<number>[0-9]+)", re.ASCII)
"""``--elite TASK:N`` (N in ASCII digits: ``\\d`` and ``int`` also read other scripts'
digits, B:\u0663 as B:3), matched whole (`re.fullmatch`)."""

VIDEO_SUFFIXES = (".gif", ".mp4")
MAX_EPISODES = 1_000
"""The most episodes one play takes (``--episodes``): episodes to watch, each drawn and
captioned; a run's own evaluation measures more (``eval_episodes``)."""
CHUNK = 64
"""Episodes played at once on the jax backend (their states are kept to draw them)."""
CAPTION_MARGIN = 2
"""Pixels between the caption's text and the caption strip's edges."""
CAPTION_SAMPLE = "ep 1000/1000 step 99999 |gjpqy\nR -999.99 failed |gjpqy"
"""Two caption lines with the font's tallest and deepest glyphs, to measure the strip."""


def _caption_height() -> int:
    """Rows of the caption strip: two lines of Pillow's default font as
    ``ImageDraw.text`` lays them out (line height and spacing included), measured, with
    `CAPTION_MARGIN` above and below. Measured, not fixed: the default font is Pillow's
    (a FreeType font since Pillow 10.1, taller than the old bitmap font that a fixed 24
    rows was made for, which clipped the second line's lowest rows)."""
    from PIL import Image, ImageDraw

    draw = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    bottom = draw.multiline_textbbox((CAPTION_MARGIN, CAPTION_MARGIN), CAPTION_SAMPLE)[3]
    return bottom + CAPTION_MARGIN


CAPTION_PX = _caption_height()
"""Height of the caption strip under each frame (`_caption_height`)."""


class PlayError(ValueError):
    """The policy or the episodes asked for cannot be played (names what is wrong)."""


@dataclass(frozen=True)
class LoadedPolicy:
    """A policy of a run, loaded to play (`load_policy`), and where it came from (not
    `telapa.rl.policy.Policy`, the network's functions, which its ``agent`` holds)."""

    params: Params
    agent: Agent
    """The agent of the env it plays on (its env, network and evaluation settings)."""
    label: str
    """What it is, e.g. ``"scratch seed 0: final policy for B"``."""
    seed: int = 0
    """The run's seed: the episodes' seed when no other is given and the policy has no
    evaluation of its own to replay."""
    eval_key: jax.Array | None = None
    """The final policy's: the key of the run's final evaluation of the task, whose
    episodes play replays when no seed is given (`iter_episodes`)."""
    eval_episodes: int | None = None
    """The final policy's: the episodes of that evaluation (``final_eval_episodes``)."""

    @property
    def replays(self) -> bool:
        """Whether playing without a seed replays the final evaluation's episodes exactly
        (the final policy, on the jax backend)."""
        return self.eval_key is not None and self.agent.backend == "jax"


@dataclass(frozen=True)
class Episode:
    frames: np.ndarray | None
    """uint8 (T + 1, H, W, 3): the start, then the state after each step (None when the
    episode was played without frames)."""
    rewards: np.ndarray
    """(T,) rewards."""

    @property
    def length(self) -> int:
        return len(self.rewards)

    @property
    def ret(self) -> float:
        return float(self.rewards.sum())


def open_finished(path: str | Path) -> ContinualRun:
    """The finished run in ``path`` at its last checkpoint, read without taking its lock
    or writing anything in it. Refused (`PlayError`), before anything is loaded: a run
    that is not complete (finish it with ``telapa run --resume``), and a run that keeps
    no checkpoint, such as a cell of a sweep export (`_no_policies`); refused after: a
    last checkpoint that cannot be read, or does not hold the end of the run. No earlier
    checkpoint and no fresh network is played instead."""
    run_dir = RunDir(path)
    status = run_dir.manifest().get("status")  # RunDirError names a missing or foreign run
    if status != "complete":
        raise PlayError(f"{path} has not finished (status {status!r}); play a finished run, "
                        f"or finish it with `telapa run --resume {path}`")
    if not _keeps_checkpoints(run_dir.path):  # before the format: an exported result of
        raise PlayError(_no_policies(run_dir))  # any version has none to play
    store = run_dir.checkpoints
    checkpoints = store.newest_first()  # refuses a run of an older format version
    if not checkpoints:
        raise PlayError(_no_policies(run_dir))
    latest = checkpoints[0]
    spec = RunSpec.stored(path)
    run = ContinualRun(spec, run_dir)
    try:
        store.verify(latest)
        store.resume_from(latest)  # refuses a run edited since (RunEdited)
        run.restore_checkpoint(latest)
    except (RunDirError, CheckpointError, ValueError, KeyError, TypeError, OSError) as err:
        raise PlayError(f"{path}: its last checkpoint {latest.name} cannot be read ({err}); "
                        "nothing else is played in its place") from None
    if not run.complete:
        raise PlayError(f"{path}: its last checkpoint {latest.name} holds the run at phase "
                        f"{run.state.next_phase} of {len(run.phases)}, not its end; its final "
                        "policies are not kept (nothing else is played in their place)")
    return run


def _keeps_checkpoints(path: Path) -> bool:
    """Whether the run directory ``path`` has a checkpoint pointer or folder (readable or
    not: `open_finished` tells)."""
    return (path / POINTER).exists() or (path.is_dir() and any(
        p.name.startswith("ckpt-") and p.is_dir() for p in path.iterdir()))


def _no_policies(run_dir: RunDir) -> str:
    """Why a finished run without a checkpoint cannot be played, and where policies are to
    be had: for a cell of a sweep export (the results only), its cell in the sweep's run
    directory where that exists and keeps them; else (also for a cell restored into a
    sweep from its export, and a run whose checkpoints are gone) only by running it
    again. Nothing is advised that cannot work: the sweep's run directory named in an
    export may be on another machine, or be a restored copy as bare as the export."""
    from telapa.continual.sweep.layout import read_status, stored_sweep

    path = run_dir.path
    policies = path / POLICIES_DIR
    kept = sorted(p.name for p in policies.iterdir()) if policies.is_dir() else []
    missing = (f"no checkpoint ({POINTER}, ckpt-NNNNNN/: the final policies and archives) "
               + (f"and its {POLICIES_DIR}/ holds only {', '.join(kept)}" if kept else
                  f"and no {POLICIES_DIR}/ (each visit's start and end policy)"))
    again = ("run it again to have policies to play (`telapa run` with the curriculum, "
             "method, seed and preset of its run.json, or its sweep)")
    sweep_dir = path.parent.parent if path.parent.name == "cells" else None
    try:
        sweep = stored_sweep(sweep_dir) if sweep_dir is not None else None
        restored = (read_status(sweep_dir, path.name).get("restored_from")
                    if sweep is not None else None)
    except RunDirError:
        sweep, restored = None, None
    if sweep is not None and sweep.get("exported_from"):
        source = Path(str(sweep["exported_from"])) / "cells" / path.name
        if (source.is_dir() and source.resolve() != path.resolve()
                and _keeps_checkpoints(source)):
            where = f"play the cell in the sweep's own run directory, {source}, which keeps them"
        else:
            where = again
        return (f"{path} keeps no policies to play: it has {missing}; it is a cell of the "
                f"sweep export {sweep_dir}, an exported result, which keeps only the result "
                f"files, so it cannot be played: {where}")
    if restored:
        return (f"{path} keeps no policies to play: it has {missing}; it was restored into "
                f"its sweep from the export {restored}, an exported result, which keeps "
                f"only the result files, so it cannot be played: {again}")
    return (f"{path} keeps no policies to play: it has {missing}, so it cannot be played. A "
            "sweep export's cell (or a copy of one) keeps only the result files: the "
            "policies are only where the sweep ran it (SWEEP/cells/NAME, unless that cell "
            f"was restored from the export too); otherwise {again}")


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
                elite: str | None = None, when: str = "end") -> LoadedPolicy:
    """The policy of `run` named by ``visit`` or ``elite`` (else the final policy for
    ``task``), with the agent of the env it plays on (module docstring); with ``visit``,
    ``when="start"`` gives the parameters the visit started from (its transfer's origin)
    instead of those it ended with."""
    if visit is not None and elite is not None:
        raise PlayError("give --visit or --elite, not both")
    name = f"{run.spec.method} seed {run.spec.seed}"
    seed = run.spec.seed
    if visit is not None:
        ended = _visit(run, visit)
        params = run.dir.load_policy(ended.index, run.state.learner.params, when)
        where = _task_visit(run, task) if task is not None else ended
        moment = "end" if when == "end" else "start"
        return LoadedPolicy(params, run.agent(where), f"{name}: policy at the {moment} of visit "
                                                f"{ended.tag}", seed)
    if elite is not None:
        params, archive_task = _elite(run, elite)
        where = _task_visit(run, task or archive_task)
        return LoadedPolicy(params, run.agent(where), f"{name}: elite {elite}", seed)
    where = _task_visit(run, task)
    params = checked(run.method, "eval_params",
                     run.method.eval_params(run.state.method, where.task, run.state.learner),
                     learner=run.state.learner)
    # the final evaluation's visit of the task (its first) and key
    first, key = next((v, k) for t, v, k in run.final_tasks() if t == where.task)
    return LoadedPolicy(params, run.agent(first), f"{name}: final policy for {where.task}", seed,
                  key, run.spec.config.final_eval_episodes)


def _elite(run: ContinualRun, label: str) -> tuple[Params, str]:
    archives_of = getattr(run.method, "archives", None)  # TeLAPA's: its state's archives
    if archives_of is None:
        raise PlayError(f"{run.dir.path} is a {run.spec.method} run: it keeps no archive "
                        "elites (play its final policy, or a visit's with --visit)")
    archives = archives_of(run.state.method)
    match = ELITE.fullmatch(label)
    if match is None:
        raise PlayError(f"--elite {label!r}: expected TASK:N with N in ASCII digits 0-9, "
                        "e.g. B:0, as `telapa inspect` lists elites")
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
    _, unravel = flatten_params(run.state.learner.params)
    return unravel(jnp.asarray(archive.elites.params[int(slots[0])])), task


def play(policy: LoadedPolicy, *, episodes: int, seed: int | None = None,
         deterministic: bool | None = None, tile_size: int = 32,
         frames: bool = True) -> list[Episode]:
    """``episodes`` episodes of ``policy`` from ``seed`` (module docstring), with their
    frames unless ``frames`` is False: `iter_episodes`, kept."""
    return list(iter_episodes(policy, episodes=episodes, seed=seed,
                              deterministic=deterministic, tile_size=tile_size,
                              frames=frames))


def iter_episodes(policy: LoadedPolicy, *, episodes: int, seed: int | None = None,
                  deterministic: bool | None = None, tile_size: int = 32,
                  frames: bool = True) -> Iterator[Episode]:
    """``episodes`` episodes of ``policy`` from ``seed`` (module docstring), one at a time
    as they are played: the run's evaluation mode unless ``deterministic`` is given;
    MiniGrid frames ``tile_size`` pixels a cell, drawn only with ``frames``. ``seed``
    None: the final evaluation's own episodes where the policy replays them
    (`LoadedPolicy.replays`: the first ``episodes`` of them; asked for more than it had,
    all of them and then as many more from its key, `_episode_keys`), else the run's
    seed. A count out of 1 .. `MAX_EPISODES`, or frames of an env without a renderer, is
    refused here, before any episode is played."""
    check_episodes(episodes)
    agent = policy.agent
    greedy = agent.config.eval.deterministic if deterministic is None else deterministic
    if frames:
        _check_renderer(agent)
    if agent.backend == "jax":
        if seed is None and policy.replays:
            return _play_jax(agent, policy.params, episodes, policy.eval_key, greedy,
                             tile_size if frames else None, of=policy.eval_episodes)
        return _play_jax(agent, policy.params, episodes,
                         jax.random.key(policy.seed if seed is None else seed), greedy,
                         tile_size if frames else None)
    return _play_gym(agent, policy.params, episodes, policy.seed if seed is None else seed,
                     greedy, frames)


def _check_renderer(agent: Agent) -> None:
    """`PlayError` when frames of ``agent``'s env cannot be drawn: a JAX env that is
    neither a MiniGrid port (drawn by the port's renderer) nor MuJoCo's MJX port (posed
    in gymnasium's env and drawn by MuJoCo's renderer, as the host backends are); a host
    env (gymnasium, native) whose family's env has no ``rgb_array`` render mode
    (`_host_render_modes`); and, for MuJoCo, `GLBackendError` when no OpenGL backend
    works."""
    if agent.backend == "jax" and getattr(agent.env, "task", None) is not None:
        return  # a MiniGrid port
    if _is_mujoco(agent):
        from telapa.envs.mujoco.render import gl_backend

        gl_backend()
        return
    if agent.backend == "jax":
        raise PlayError(f"{agent.spec.env_id}: no renderer for this JAX env (MiniGrid ports "
                        "and MuJoCo draw their frames); play it without --out")
    modes = _host_render_modes(agent)
    if "rgb_array" not in modes:
        raise PlayError(f"{agent.spec.env_id} has no rgb_array render mode (its "
                        f"{agent.family.name} family's env renders "
                        f"{', '.join(map(str, modes)) if modes else 'nothing'}: "
                        "metadata['render_modes']), so no frames can be drawn; play it "
                        "without --out")


def _is_mujoco(agent: Agent) -> bool:
    """Whether ``agent``'s env is of the MuJoCo family (drawn by MuJoCo's headless
    renderer, `telapa.envs.mujoco.render`, on every backend)."""
    return family_of(agent.spec.env_id).name == "mujoco"


def _host_env(agent: Agent, *, render: bool = False) -> Any:
    """One gymnasium env of ``agent``'s task as the run's env family makes each copy of
    the host backends' vector env (`EnvFamily.make_single` with the task's options:
    observation dict, sketch, the family's wrappers); with ``render``, drawing
    ``rgb_array`` frames on ``render()`` (MuJoCo: `make_rendering_env`, its headless
    renderer; any other family: its env made with ``render_mode="rgb_array"``, an
    option ``gymnasium.make`` takes, refused in one line where the family cannot make
    it so)."""
    env_id, options = agent.spec.env_id, dict(agent.env_options)
    if render and _is_mujoco(agent):
        from telapa.envs.mujoco.render import make_rendering_env

        return make_rendering_env(env_id, options)
    if not render:
        return agent.family.make_single(env_id, options)
    try:
        env = agent.family.make_single(env_id, {**options, "render_mode": "rgb_array"})
    except Exception as err:  # noqa: BLE001 - whatever the family's env raises
        raise PlayError(f"{env_id}: its {agent.family.name} family cannot make it with "
                        f"render_mode='rgb_array' ({type(err).__name__}: {err}); play it "
                        "without --out") from None
    if getattr(env, "render_mode", None) != "rgb_array":
        env.close()
        raise PlayError(f"{env_id}: its {agent.family.name} family's env ignores "
                        "render_mode='rgb_array' (it renders "
                        f"{getattr(env, 'render_mode', None)!r}); play it without --out")
    return env


def _host_render_modes(agent: Agent) -> list[Any]:
    """The render modes of ``agent``'s host env (gymnasium's ``metadata["render_modes"]``
    of the env its family makes, `_host_env`), read from an env made without one."""
    env = _host_env(agent)
    try:
        return list(env.metadata.get("render_modes") or ())
    finally:
        env.close()


def _host_frame_shape(agent: Agent) -> tuple[int, int, int]:
    """The shape (H, W, 3) of a frame of ``agent``'s host env (not MuJoCo's: its
    renderer draws `FRAME_SIZE` squares), drawn once after a reset; `PlayError` when
    ``render()`` gives no RGB picture."""
    env = _host_env(agent, render=True)
    try:
        env.reset(seed=0)
        frame = env.render()
    finally:
        env.close()
    shape = np.shape(frame) if frame is not None else ()
    if len(shape) != 3 or shape[2] != 3 or 0 in shape:
        raise PlayError(f"{agent.spec.env_id}: render() in rgb_array mode gave "
                        f"{type(frame).__name__} of shape {shape}, not an RGB picture "
                        "(height, width, 3); play it without --out")
    return (int(shape[0]), int(shape[1]), 3)


def check_episodes(episodes: int) -> int:
    """``episodes`` if it is 1 .. `MAX_EPISODES`; `PlayError` naming the bound otherwise."""
    if not 1 <= episodes <= MAX_EPISODES:
        raise PlayError(f"--episodes {episodes}: play takes 1 to {MAX_EPISODES} episodes "
                        "(MAX_EPISODES); the run's own evaluation measures more")
    return episodes


def _episode_keys(key: jax.Array, episodes: int, of: int) -> jax.Array:
    """The keys of ``episodes`` episodes, the first ``min(episodes, of)`` of them those of
    an evaluation of ``of`` episodes (``key`` split ``of`` ways) and the rest, played
    beyond it, ``key`` split ``episodes`` ways past the first ``of``. With JAX's
    partitionable threefry (the default) that is ``key`` split ``episodes`` ways; split
    in two, the evaluation's episodes stay its own under the other threefry too, so that
    ``telapa play`` may call them the final evaluation's."""
    keys = jax.random.split(key, of)[:episodes]
    if episodes <= of:
        return keys
    return jnp.concatenate([keys, jax.random.split(key, episodes)[of:]])


def _play_jax(agent: Agent, params: Params, episodes: int, key: jax.Array,
              deterministic: bool, tile_size: int | None, *, of: int | None = None
              ) -> Iterator[Episode]:
    """The episodes, `CHUNK` at a time (a last chunk filled up with copies of its last
    episode, which are dropped), each drawn on its own when ``tile_size`` is given
    (MiniGrid: the port's picture, ``tile_size`` pixels a cell; MuJoCo on MJX: each
    step's positions and velocities posed in gymnasium's env of the run's task and drawn
    by MuJoCo's renderer, `_posed_pictures`). ``of``: the episodes are the first
    ``episodes`` of an evaluation of ``of`` episodes with ``key`` (their keys split
    ``of`` ways; default ``episodes``)."""
    mjx = getattr(agent.env, "task", None) is None  # the MuJoCo family's MJX port
    draw = tile_size is not None
    reset_key, act_key = jax.random.split(key)
    resets, acts = (_episode_keys(k, episodes, of or episodes) for k in (reset_key, act_key))
    size = min(episodes, CHUNK)
    rollouts = _rollouts(agent, deterministic, keep_states=draw,
                         kept=(lambda s: (s.data.qpos, s.data.qvel)) if mjx else None)
    poser = None  # MJX: gymnasium's env of the task, its friction regime included
    if draw and mjx:
        from telapa.envs.mujoco.render import make_rendering_env

        poser = make_rendering_env(agent.spec.env_id, agent.env_options)
        poser.reset(seed=0)  # the render order gymnasium enforces; each pose replaces it
    try:
        for first in range(0, episodes, size):
            picks = np.minimum(np.arange(first, first + size), episodes - 1)
            states, rewards, lengths = rollouts(params, resets[picks], acts[picks])
            rewards, lengths = np.asarray(rewards), np.asarray(lengths)
            for j in range(min(size, episodes - first)):
                pictures = None
                if draw:  # one episode's states: its first length + 1 drawn
                    n = int(lengths[j]) + 1
                    one = jax.tree.map(lambda x, j=j: x[j], states)
                    pictures = (_posed_pictures(poser, *(np.asarray(x[:n]) for x in one))
                                if poser is not None
                                else _grid_pictures(agent, one, tile_size)[:n])
                yield Episode(pictures, rewards[j, :lengths[j]])
            del states
    finally:
        if poser is not None:
            poser.close()


def _grid_pictures(agent: Agent, states: Any, tile_size: int) -> np.ndarray:
    """A MiniGrid episode's port states (max_steps + 1, ...) as the port's pictures: all
    of them, one shape for every episode, so the renderer compiles once."""
    from telapa.envs.minigrid.render import render

    return np.asarray(render(states, see_through_walls=agent.env.task.see_through_walls,
                             tile_size=tile_size))


def _posed_pictures(env: Any, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """An MJX episode's frames (T + 1, H, W, 3): each step's ``qpos``, ``qvel`` (T + 1, n)
    set on gymnasium's env of the run's task (``set_state``: ``mj_forward``), then
    drawn by MuJoCo's renderer."""
    sim = env.unwrapped
    frames = []
    for q, v in zip(qpos, qvel, strict=True):
        sim.set_state(np.asarray(q, np.float64), np.asarray(v, np.float64))
        frames.append(env.render())
    return np.stack(frames)


def _rollouts(agent: Agent, deterministic: bool, *, keep_states: bool,
              kept: Callable[[Any], Any] | None = None):
    """``run(params, reset_keys, act_keys)``: the episodes of those keys (E of each):
    their states (E, max_steps + 1, ...) when ``keep_states`` (else None; ``kept``: only
    ``kept(state)`` of each, e.g. an MJX state's positions), rewards (E, max_steps) and
    lengths (E,): the evaluator's episodes (module docstring), each held at its last
    state."""
    env, policy, max_steps = agent.env, agent.policy, agent.spec.max_steps
    kept = kept or (lambda state: state)

    def episode(params: Params, reset_key: jax.Array, act_key: jax.Array):
        state, obs = env.reset(reset_key)

        def step(carry, t):
            state, obs, done = carry
            one = jax.tree.map(lambda x: x[None], obs)
            action = policy.act(params, one, jax.random.fold_in(act_key, t),
                                deterministic).env_action[0]
            nxt, next_obs, reward, terminated, truncated, _ = env.step(state, action)
            keep = jax.tree.map(lambda old, new: jnp.where(done, old, new), state, nxt)
            ended = done | terminated | truncated | (t + 1 >= max_steps)
            out = (kept(keep) if keep_states else None, jnp.where(done, 0.0, reward), done)
            return (keep, next_obs, ended), out

        _, (states, rewards, was_done) = jax.lax.scan(
            step, (state, obs, jnp.bool_(False)), jnp.arange(max_steps))
        if keep_states:
            states = jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]),
                                  kept(state), states)
        return states, rewards, jnp.sum(~was_done)

    return jax.jit(jax.vmap(episode, in_axes=(None, 0, 0)))


def _play_gym(agent: Agent, params: Params, episodes: int, seed: int,
              deterministic: bool, frames: bool) -> Iterator[Episode]:
    """The episodes on the host backends: on the env of the run's own family
    (`_host_env`), drawing its ``rgb_array`` frames only with ``frames``."""
    env = _host_env(agent, render=frames)
    return _gym_episodes(env, agent, params, episodes, seed, deterministic, frames)


def _gym_episodes(env: Any, agent: Agent, params: Params, episodes: int, seed: int,
                  deterministic: bool, frames: bool) -> Iterator[Episode]:
    key = jax.random.key(seed)
    try:
        for e in range(episodes):
            obs, _ = env.reset(seed=seed + e)
            pictures, rewards = [env.render()] if frames else [], []
            for t in range(agent.spec.max_steps):
                one = jax.tree.map(lambda x: np.asarray(x)[None], obs)
                action = agent.policy.act(params, one, jax.random.fold_in(key, e * 2**20 + t),
                                          deterministic).env_action[0]
                action = np.asarray(action)  # as the vector env gives it to each copy
                if agent.spec.discrete:
                    action = np.int64(action)
                obs, reward, terminated, truncated, _ = env.step(action)
                if frames:
                    pictures.append(env.render())
                rewards.append(float(reward))
                if terminated or truncated:
                    break
            yield Episode(np.stack(pictures) if frames else None,
                          np.asarray(rewards, np.float32))
    finally:
        env.close()


def success(agent: Agent, episode: Episode) -> bool:
    """Whether ``episode`` reached the env family's competence on its own (MiniGrid: a
    positive return; MuJoCo: a return of at least R*)."""
    return bool(agent.competence(np.asarray([episode.ret])) >= 1.0)


def outcome(agent: Agent, episode: Episode) -> str:
    """One episode's outcome in words: ``success`` or ``failed`` where competence counts
    successes (`Competence.counts`: MiniGrid), else the episode's own graded competence,
    ``SR~ c`` with c = `Competence` of its return alone (MuJoCo: clip(R / R*, 0, 1)),
    since such an episode has no success to count."""
    if agent.competence.counts:
        return "success" if success(agent, episode) else "failed"
    return f"SR~ {float(agent.competence(np.asarray([episode.ret]))):.2f}"


def summary(agent: Agent, returns: np.ndarray) -> str:
    """The competence of a set of episodes: ``SR k/n-as-decimal (k/n successes)`` where it
    counts, else ``SR~ c (normalized return)`` (`outcome`)."""
    returns = np.asarray(returns)
    score = float(agent.competence(returns))
    k = agent.competence.successes(returns)
    if k is None:
        return f"SR~ {score:.3f} (normalized return)"
    return f"SR {score:.3f} ({k}/{returns.size} successes)"


def check_video_path(path: str | Path, *, run: str | Path | None = None) -> Path:
    """``path`` as a new video file: a ``.gif`` or ``.mp4`` that does not exist (nothing a
    user has is overwritten) in an existing folder, outside the run directory ``run``
    (playing writes nothing into a run); `PlayError` naming what is wrong otherwise.
    Called before any episode is played, and again by `write_video`."""
    path = Path(path)
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise PlayError(f"--out {path}: give a .gif or .mp4 file")
    if path.exists() or path.is_symlink():
        raise PlayError(f"--out {path} exists; choose another file (nothing was "
                        "overwritten)")
    if not path.parent.is_dir():
        raise PlayError(f"--out {path}: folder {path.parent} does not exist")
    if run is not None and Path(run).is_dir() and path.parent.resolve().is_relative_to(
            Path(run).resolve()):
        raise PlayError(f"--out {path} is inside the run directory {run}; play writes "
                        "nothing into a run: choose a file outside it")
    return path


def video_memory(path: str | Path, agent: Agent, episodes: int, *,
                 tile_size: int = 32) -> list[Part]:
    """The parts of the memory writing ``episodes`` episodes of ``agent``'s env to the
    video ``path`` needs at most (`telapa.continual.memory.Part`; no episode is played,
    a host env other than MuJoCo's draws one frame after a reset to measure its frames,
    `_host_frame_shape`): each episode has up to max_steps + 1 frames; a GIF's writer
    keeps every frame, a byte a pixel, until it writes the file; one episode's frames are
    drawn at a time, and on the jax backend the states of `CHUNK` episodes are kept to
    draw them. Refused (`_check_renderer`) where no frame can be drawn."""
    _check_renderer(agent)
    frames = agent.spec.max_steps + 1
    parts = []
    if agent.backend == "jax":  # the states of a chunk of episodes are kept to draw them
        chunk = min(episodes, CHUNK)
        state = jax.eval_shape(lambda k: agent.env.reset(k)[0], jax.random.key(0))
        if _is_mujoco(agent):  # MJX: each step's qpos and qvel, drawn by MuJoCo's renderer
            from telapa.envs.mujoco.render import FRAME_SIZE

            kept = (state.data.qpos, state.data.qvel)
            shape = (FRAME_SIZE, FRAME_SIZE, 3)
        else:  # a MiniGrid frame: (H, W) cells of tile_size pixels
            kept = state
            width, height = state.grid.shape[-3:-1]  # the grid is (W, H, 3)
            shape = (height * tile_size, width * tile_size, 3)
        state_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(kept))
        parts.append(Part("the states of a chunk of episodes", chunk * frames * state_bytes,
                          f"{chunk} episodes x {frames} states x {state_bytes:,} bytes"))
    elif _is_mujoco(agent):  # MuJoCo's headless renderer
        from telapa.envs.mujoco.render import FRAME_SIZE

        shape = (FRAME_SIZE, FRAME_SIZE, 3)
    else:  # the host env's own rgb_array frames, one drawn to measure them
        shape = _host_frame_shape(agent)
    h, w = shape[0] + CAPTION_PX, shape[1]
    limit = f"{agent.spec.env_id}'s time limit, {agent.spec.max_steps} steps"
    parts.append(Part("one episode's frames", frames * shape[0] * shape[1] * 3,
                      f"{frames} frames ({limit}) x {shape[1]}x{shape[0]} pixels x 3 bytes"))
    if Path(path).suffix.lower() == ".gif":
        parts.append(Part(
            "the GIF's frames", episodes * frames * h * w,
            f"--episodes {episodes} x up to {frames} frames ({limit}) x {w}x{h} pixels x "
            "1 byte, which the GIF writer holds until it writes the file", kept=True))
    return parts


def check_video_memory(path: str | Path, agent: Agent, episodes: int, *,
                       tile_size: int = 32, memory: int | None = None) -> None:
    """`PlayError` in one line when writing the video `video_memory` describes may need
    more than ``memory`` bytes (default: the machine's, `machine_memory`): the estimate,
    the machine's memory, the largest part with what makes it, and how many episodes
    fit. Called before any episode is played."""
    parts = video_memory(path, agent, episodes, tile_size=tile_size)
    short = shortfall(parts, memory)
    if short is None:
        return
    need, have, largest = short
    kept = sum(p.bytes for p in parts if p.kept)
    each = kept / episodes
    fit = int((have - (need - kept)) // each) if each else 0
    hint = (f"play at most {fit} episodes into a GIF, or write an .mp4 (streamed)"
            if fit >= 1 else "write an .mp4 (streamed), or play on a machine with more memory")
    raise PlayError(
        f"--out {path}: {episodes} episodes on {agent.spec.env_id} may need "
        f"{need / GIB:,.2f} GiB of memory, more than this machine's {have / GIB:,.2f} GiB; "
        f"the largest part is {largest.name}, {largest.bytes / GIB:,.2f} GiB "
        f"({largest.settings}): {hint}")


def write_video(path: str | Path, agent: Agent, episodes: Iterable[Episode], *,
                count: int | None = None, fps: int = 8) -> Path:
    """The episodes one after another, each frame captioned (module docstring), as a
    GIF or an MP4 by ``path``'s suffix (`check_video_path`), taken as ``episodes``
    yields them (an iterator of `iter_episodes`: one episode's frames at a time).
    ``count``: how many episodes there are, for the captions (default ``len(episodes)``).
    The file appears at ``path`` complete or not at all (`_new_file`)."""
    path = check_video_path(path)
    n = len(episodes) if count is None else count  # type: ignore[arg-type]

    def frames() -> Iterator[np.ndarray]:
        for i, episode in enumerate(episodes):
            if episode.frames is None:
                raise PlayError("write_video needs episodes played with frames")
            for t, frame in enumerate(episode.frames):
                yield captioned(frame, _caption(agent, n, i, t, episode))

    with _new_file(path) as tmp:
        if path.suffix.lower() == ".gif":
            from PIL import Image

            pictures = (Image.fromarray(frame) for frame in frames())
            first = next(pictures, None)
            if first is None:
                raise PlayError(f"--out {path}: no episodes to write")
            with open(tmp, "xb") as f:
                first.save(f, format="GIF", save_all=True, append_images=pictures,
                           duration=1000 / fps, loop=0)
                f.flush()
                fsync(f.fileno())
        else:
            _write_mp4(tmp, frames(), fps=fps, out=path)
    return path


MP4_CRF = 25
"""H.264's constant rate factor for ``--out *.mp4`` (0-51, lower is better): 25 is what
imageio's ffmpeg writer makes of its default quality (5 of 10), the writer telapa used
before it piped frames to ffmpeg itself (`_write_mp4`)."""


def _write_mp4(tmp: Path, frames: Iterable[np.ndarray], *, fps: float, out: Path) -> None:
    """``frames`` (H x W x 3 uint8, one size) as an H.264 MP4 at ``tmp``, piped raw to the
    ffmpeg of the imageio-ffmpeg wheel, each frame padded to even sides (H.264's 4:2:0
    needs them). ffmpeg runs in a process group of its own, so a Ctrl-C reaches telapa
    alone, which stops and removes the partial file (`_new_file`). The group is set with
    ``process_group=0``, not imageio's ``preexec_fn=os.setpgrp``: a ``preexec_fn`` runs
    Python in the forked child of this multithreaded (JAX) process, which can deadlock
    there (JAX warns of it at every such fork); without one, Python forks with vfork and
    runs nothing but ``setpgid`` and ``exec`` in the child. ``out``: the path to name in
    errors."""
    import tempfile

    import imageio_ffmpeg

    ffmpeg, size, proc = imageio_ffmpeg.get_ffmpeg_exe(), None, None
    with tempfile.TemporaryFile() as log:  # ffmpeg's errors, never a full pipe
        try:
            for frame in frames:
                h, w = frame.shape[:2]
                if size is None:
                    size = (h, w)
                    proc = subprocess.Popen(
                        [ffmpeg, "-y", "-v", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
                         "-s", f"{w + w % 2}x{h + h % 2}",
                         "-r", str(Fraction(fps).limit_denominator()), "-i", "-", "-an",
                         "-vcodec", "libx264", "-pix_fmt", "yuv420p", "-crf", str(MP4_CRF),
                         "-f", "mp4", str(tmp)],
                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log,
                        process_group=0)
                elif (h, w) != size:
                    raise PlayError(f"--out {out}: a frame of {h}x{w} pixels among frames "
                                    f"of {size[0]}x{size[1]}; an MP4 has one size")
                padded = np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)))
                try:
                    proc.stdin.write(np.ascontiguousarray(padded, np.uint8).tobytes())
                except BrokenPipeError:
                    break  # ffmpeg stopped: its exit status and log say why, below
            if proc is None:
                raise PlayError(f"--out {out}: no episodes to write")
            try:
                proc.stdin.close()
            except BrokenPipeError:  # ffmpeg stopped before the last frames were flushed
                pass
            if proc.wait() != 0:
                log.seek(0)
                said = log.read().decode(errors="replace").strip()
                raise PlayError(f"--out {out}: ffmpeg failed (exit status {proc.returncode})"
                                + (f": {said.splitlines()[-1]}" if said else ""))
        finally:
            if proc is not None and proc.poll() is None:  # an error or Ctrl-C meanwhile
                proc.kill()
                proc.wait()


TMP_PART = ".tmp"
"""What the temporary video beside ``--out`` is named with: ``.NAME.PID.TOKEN.tmp.SUFFIX``
(its writer's process id, so that one a killed process left is removed by the next)."""


@contextmanager
def _new_file(path: Path) -> Iterator[Path]:
    """A temporary file beside the new file ``path`` (`TMP_PART`, its suffix kept, so
    writers that go by it do), for the block to write; moved to ``path`` when the block
    exits cleanly, by a hard link that fails rather than replace a file that appeared
    at ``path`` meanwhile (where a file system has no hard links, by a rename after a
    last check). Removed when the block raises: an error, Ctrl-C, or SIGTERM raised as
    an interrupt (``telapa play``). Leftovers of killed processes are removed first
    (`telapa.io.atomic.remove_stale`)."""
    folder, suffix = path.parent, f"{TMP_PART}{path.suffix}"
    remove_stale(folder, f".{path.name}", (suffix,))
    tmp = folder / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{suffix}"
    try:
        yield tmp
        with open(tmp, "rb+") as f:  # on disk before it is named
            fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise PlayError(f"--out {path} appeared while playing; choose another file "
                            "(nothing was overwritten)") from None
        except OSError:  # no hard links here
            if path.exists() or path.is_symlink():
                raise PlayError(f"--out {path} appeared while playing; choose another file "
                                "(nothing was overwritten)") from None
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(folder)


def _caption(agent: Agent, n: int, i: int, t: int, episode: Episode) -> str:
    """Two lines: the episode and step; the return so far (and at the end, its `outcome`)."""
    text = f"ep {i + 1}/{n} step {t}\nR {episode.rewards[:t].sum():.2f}"
    if t == episode.length:
        text += f" {outcome(agent, episode)}"
    return text


def captioned(frame: np.ndarray, text: str) -> np.ndarray:
    """``frame`` with a black strip of `CAPTION_PX` rows below it holding ``text`` (up to
    two lines) in white (Pillow's default bitmap font); the width is kept."""
    from PIL import Image, ImageDraw

    h, w, _ = frame.shape
    canvas = Image.new("RGB", (w, h + CAPTION_PX))
    canvas.paste(Image.fromarray(np.asarray(frame, np.uint8)), (0, 0))
    ImageDraw.Draw(canvas).text((CAPTION_MARGIN, h + CAPTION_MARGIN), text,
                                fill=(255, 255, 255))
    return np.asarray(canvas)


__all__ = ["CHUNK", "MAX_EPISODES", "Episode", "LoadedPolicy", "PlayError", "captioned",
           "check_episodes", "check_video_memory", "check_video_path", "iter_episodes",
           "load_policy", "open_finished", "play", "success", "video_memory", "write_video"]

