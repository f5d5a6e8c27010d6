"""``telapa play``: watch a finished run's policy.

    telapa play RUN_DIR [--task T] [--visit N | --elite TASK:N] [--episodes K]
                [--seed S] [--greedy | --sampled] [--out FILE.gif|FILE.mp4]

Plays K episodes (default 3) of the run's final policy for task T (default: the last
visit's task; Scratch-Reuse's stored network of T), of the policy visit N ended with
(``--visit 3`` or ``--visit "B'"``), or of an archive elite as `telapa inspect` lists
it (``--elite B:0``), on the env of T, and prints each episode's return and length and
the episodes' SR. With ``--out`` it also writes them as a GIF or an MP4, each frame
captioned with the episode, the step, the return so far and whether it succeeded
(`telapa.continual.play`). The same seed gives the same episodes (default: the run's
seed); actions are sampled or greedy as in the run's evaluations unless ``--greedy`` or
``--sampled`` says otherwise.
"""

from __future__ import annotations

import argparse

import numpy as np

from telapa.cli.common import CLIError, positive_int, seed_int, stdout_console
from telapa.continual.rundir import RunDirError


def _cmd_play(ns: argparse.Namespace) -> None:
    from telapa.continual.play import (
        PlayError,
        check_video_path,
        load_policy,
        open_finished,
        play,
        success,
        write_video,
    )

    try:
        if ns.out is not None:
            check_video_path(ns.out)  # before any work
        run = open_finished(ns.run)
        policy = load_policy(run, task=ns.task, visit=ns.visit, elite=ns.elite)
        seed = run.spec.seed if ns.seed is None else ns.seed
        episodes = play(policy, episodes=ns.episodes, seed=seed, deterministic=ns.greedy)
        written = write_video(ns.out, policy.agent, episodes) if ns.out else None
    except (PlayError, RunDirError) as err:
        raise CLIError(str(err)) from None
    console = stdout_console()
    console.print(f"{policy.label} on {policy.agent.spec.env_id} (seed {seed})", markup=False,
                  soft_wrap=True)
    for i, episode in enumerate(episodes, start=1):
        mark = "success" if success(policy.agent, episode) else "failed"
        console.print(f"  episode {i}: return {episode.ret:.3f}, {episode.length} steps, "
                      f"{mark}", markup=False, soft_wrap=True)
    returns = np.asarray([e.ret for e in episodes])
    console.print(f"SR {float(policy.agent.competence(returns)):.3f}, mean return "
                  f"{returns.mean():.3f} over {len(episodes)} episodes"
                  + (f" -> {written}" if written else ""), markup=False, soft_wrap=True)


def add_parser(sub: argparse._SubParsersAction) -> None:
    play = sub.add_parser("play", help="play a finished run's policy or archive elite "
                                       "(SR, returns; a GIF or MP4 with --out)")
    play.add_argument("run", metavar="RUN_DIR")
    play.add_argument("--task", metavar="T", help="the task to play on (default: the "
                                                  "visit's, the elite's or the last one)")
    which = play.add_mutually_exclusive_group()
    which.add_argument("--visit", metavar="N|TAG",
                       help="the policy this visit ended with (index or tag, e.g. B')")
    which.add_argument("--elite", metavar="TASK:N",
                       help="an archive elite as `telapa inspect` lists it, e.g. B:0")
    play.add_argument("--episodes", type=positive_int, default=3)
    play.add_argument("--seed", type=seed_int, help="episodes' seed (default: the run's)")
    mode = play.add_mutually_exclusive_group()
    mode.add_argument("--greedy", dest="greedy", action="store_const", const=True,
                      help="take the most likely action (default: as the run evaluates)")
    mode.add_argument("--sampled", dest="greedy", action="store_const", const=False,
                      help="sample actions from the policy")
    play.add_argument("--out", metavar="FILE.gif|FILE.mp4",
                      help="also write the episodes as a video (a new file)")
    play.set_defaults(func=_cmd_play, greedy=None)
