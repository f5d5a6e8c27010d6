"""``telapa play``: watch a finished run's policy.

    telapa play RUN_DIR [--task T] [--visit N | --elite TASK:N] [--episodes K]
                [--seed S] [--greedy | --sampled] [--out FILE.gif|FILE.mp4]

Plays K episodes (at most `MAX_EPISODES`) of the run's final policy for task T (default:
the last visit's task; Scratch-Reuse's stored network of T), of the policy visit N ended
with (``--visit 3`` or ``--visit "B'"``), or of an archive elite as `telapa inspect`
lists it (``--elite B:0``), on the env of T, and prints each episode's return and length
and the episodes' SR (successes of episodes; on MuJoCo, SR~ of their returns). With
``--out`` it also writes them as a GIF or an MP4, each frame captioned with the episode,
the step, the return so far and its outcome (`telapa.play`); without it no frame is
drawn. Actions
are sampled or greedy as in the run's evaluations unless ``--greedy`` or ``--sampled``
says otherwise.

Which episodes: without ``--seed``, the final policy (on the jax backend: MiniGrid)
replays the run's final evaluation of T, episode for episode (its key and episode
count): with the default K, all ``final_eval_episodes`` of them, so the SR printed is
final.csv's k/n for T; with ``--out`` the default K is 3, the evaluation's first 3
episodes; a K above ``final_eval_episodes`` plays all of them and then the others from
the evaluation's key, and the header says which are which. A visit's policy or an
elite, and any policy given ``--seed S``, play K (default 3) episodes of seed S
(default: the run's seed); the same seed gives the same episodes. On the host backends
(native, gymnasium) the evaluation ran vector env copies that share one action key stream, which
play does not replay: its episodes are seed S's.

It only reads the run (no lock, no file written in it). What is wrong is named before
any episode is played: a run that keeps no policies (a sweep export's cell), an
``--out`` that exists, is inside the run or would not fit in memory as a GIF
(`check_video_memory`). ``--out`` appears only complete: Ctrl-C (exit status 130) and
SIGTERM (143) stop the play in one line and leave nothing at ``--out``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import numpy as np

from telapa.cli.common import CLIError, seed_int, stdout_console
from telapa.cli.run import Interrupted, Terminated
from telapa.config import ascii_int
from telapa.continual.rundir import RunDir, RunDirError
from telapa.io.stop import Terminate, stop_on_signals
from telapa.play import ELITE, MAX_EPISODES


def _cmd_play(ns: argparse.Namespace) -> None:
    from telapa.play import (
        Episode,
        PlayError,
        check_video_memory,
        check_video_path,
        iter_episodes,
        load_policy,
        open_finished,
        summary,
        write_video,
    )

    episodes: list[Episode] = []
    count = ns.episodes or DEFAULT_EPISODES
    try:
        with stop_on_signals():  # SIGTERM unwinds as Ctrl-C: --out is removed
            if ns.elite is not None and ELITE.fullmatch(ns.elite) is None:  # before any work
                raise CLIError(f"--elite {ns.elite!r}: expected TASK:N with N in ASCII digits "
                               "0-9, e.g. B:0, as `telapa inspect` lists elites")
            RunDir(ns.run).manifest()  # a missing or foreign run first: what to play
            if ns.out is not None:
                check_video_path(ns.out, run=ns.run)  # before any work
            run = open_finished(ns.run)
            policy = load_policy(run, task=ns.task, visit=ns.visit, elite=ns.elite)
            replay = ns.seed is None and policy.replays  # the final evaluation's episodes
            count = ns.episodes or (min(policy.eval_episodes, MAX_EPISODES)
                                    if replay and ns.out is None else DEFAULT_EPISODES)
            if ns.out is not None:
                check_video_memory(ns.out, policy.agent, count)
            played = iter_episodes(policy, episodes=count, seed=ns.seed,
                                   deterministic=ns.greedy, frames=ns.out is not None)
            # what is played, before it plays: its first episode compiles the policy's
            # evaluation (about a minute for an MJX env on a CPU), which showed as nothing
            console = stdout_console()
            source = (_replayed(count, policy.eval_episodes) if replay
                      else f"seed {policy.seed if ns.seed is None else ns.seed}")
            if ns.greedy is not None and ns.greedy != policy.agent.config.eval.deterministic:
                source += (f", {'greedy' if ns.greedy else 'sampled'} actions, not the "
                           "run's evaluation mode")
            console.print(f"{policy.label} on {policy.agent.spec.env_id} ({source})",
                          markup=False, soft_wrap=True)

            def kept() -> Iterator[Episode]:  # the returns, not the frames, are kept
                for episode in played:
                    episodes.append(Episode(None, episode.rewards))
                    yield episode

            if ns.out is not None:
                written = write_video(ns.out, policy.agent, kept(), count=count)
            else:
                written = None
                for number, episode in enumerate(kept(), start=1):  # each as it ends
                    _say_episode(console, policy.agent, number, episode)
    except (PlayError, RunDirError) as err:
        raise CLIError(str(err)) from None
    except KeyboardInterrupt as err:
        stopped = (f"after {len(episodes)} of {count} episodes"
                   + (f"; nothing was written to --out {ns.out}" if ns.out is not None else ""))
        if isinstance(err, Terminate):
            raise Terminated(f"terminated (SIGTERM) {stopped}") from None
        raise Interrupted(f"interrupted {stopped}") from None
    if ns.out is not None:  # a video's episodes, said once it is written
        for i, episode in enumerate(episodes, start=1):
            _say_episode(console, policy.agent, i, episode)
    returns = np.asarray([e.ret for e in episodes])
    console.print(f"{summary(policy.agent, returns)}, mean return "
                  f"{returns.mean():.3f} over {len(episodes)} episodes"
                  + (f" -> {written}" if written else ""), markup=False, soft_wrap=True)


def _say_episode(console, agent, number: int, episode) -> None:
    """The line of episode ``number``: its return, length and outcome."""
    from telapa.play import outcome

    console.print(f"  episode {number}: return {episode.ret:.3f}, {episode.length} steps, "
                  f"{outcome(agent, episode)}", markup=False, soft_wrap=True)


def _replayed(count: int, evaluated: int) -> str:
    """What the header says of ``count`` episodes of a final evaluation of ``evaluated``:
    the first ``count`` of them, or, asked for more, all of them and then the extra ones,
    played on from the evaluation's key (`telapa.play.iter_episodes`). More are played
    rather than refused: a researcher who asks for 60 episodes of the final policy wants
    60, and the evaluation's own stay recognisable as the first ones; the SR line is then
    over all of them, not final.csv's."""
    if count <= evaluated:
        return f"the final evaluation's episodes, {count} of {evaluated}"
    def span(first: int, last: int) -> str:
        return f"episode {first}" if first == last else f"episodes {first}-{last}"

    extra = count - evaluated
    return (f"{span(1, evaluated)}: the final evaluation's, all {evaluated}; "
            f"{span(evaluated + 1, count)}: {extra} extra, from its key")


DEFAULT_EPISODES = 3
"""Episodes played with ``--out``, or of a policy with no evaluation to replay, by
default."""


def _episodes(text: str) -> int:
    try:
        value = ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an integer (ASCII digits), got {text!r}") from None
    if not 1 <= value <= MAX_EPISODES:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_EPISODES} (telapa play's "
                                         f"bound), got {text}")
    return value


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
    play.add_argument("--episodes", type=_episodes,
                      help="episodes to play (default: the final policy's whole final "
                           f"evaluation, {DEFAULT_EPISODES} with --out or another policy; "
                           f"at most {MAX_EPISODES})")
    play.add_argument("--seed", type=seed_int,
                      help="episodes' seed (default: the final policy replays the run's "
                           "final evaluation of the task, another policy uses the run's "
                           "seed)")
    mode = play.add_mutually_exclusive_group()
    mode.add_argument("--greedy", dest="greedy", action="store_const", const=True,
                      help="take the most likely action (default: as the run evaluates)")
    mode.add_argument("--sampled", dest="greedy", action="store_const", const=False,
                      help="sample actions from the policy")
    play.add_argument("--out", metavar="FILE.gif|FILE.mp4",
                      help="also write the episodes as a video (a new file, outside the "
                           "run directory)")
    play.set_defaults(func=_cmd_play, greedy=None)
