"""`telapa play` faults found by a probe.

* Fault 1: a sweep export's cell keeps no policies (`RESULT_FILES` only), yet play
  resumed it from no checkpoint, played the untrained network as "final policy for A"
  and left a ``.lock`` in the export. Now one line naming what is missing and where the
  policies are; play reads a run without writing anything in it, and plays no other
  policy than the one it names.
* Fault 7: ``--out`` was written in place: SIGTERM left a 0-byte GIF, Ctrl-C a GIF one
  frame short and a traceback, and the same ``--out`` was then refused. Now it appears
  only complete; a stop leaves nothing there, in one line (exit 130 or 143).
* Fault 8: ``--episodes`` had no bound and every episode's frames were drawn (even
  without ``--out``) and held at once (50 episodes with ``--out``: 4.2 GB). Now no
  frame without ``--out``, one episode's frames at a time with it, a GIF that cannot fit
  refused before any work, and at most `MAX_EPISODES` episodes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import telapa.continual.memory as memory_module
import telapa.envs.minigrid.render as render_module
import telapa.play as play_module
from telapa.cli import main
from telapa.continual.checkpoints import POINTER, SEAL, STATE
from telapa.continual.rundir import RunDir
from telapa.play import (
    MAX_EPISODES,
    PlayError,
    check_video_memory,
    load_policy,
    open_finished,
    play,
)

from .conftest import one_line_error


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too), by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _export_cell(run: Path, root: Path, *, source: str = "/data/sweeps/study") -> Path:
    """A sweep export's cell of ``run``, as `telapa sweep export` writes it: the run's
    result files (`RunDir.result_files`) in ``root/cells/NAME``, and the export's
    ``cells.json`` naming the sweep it was exported from."""
    cell = root / "cells" / run.name
    cell.mkdir(parents=True)
    for path in RunDir(run).result_files():
        shutil.copy2(path, cell / path.name)
    (root / "cells.json").write_text(json.dumps({
        "format": "telapa-sweep", "name": "study", "exported_from": source,
        "of_cells": 1, "cells": [{"name": run.name}]}))
    return cell


def _fails(argv: list[str], capsys, *fragments: str, code: int = 2) -> str:
    capsys.readouterr()
    with pytest.raises((SystemExit, KeyboardInterrupt)) as stop:
        main(argv)
    assert isinstance(stop.value, SystemExit), f"{stop.value!r} escaped main"
    assert stop.value.code == code
    return one_line_error(capsys.readouterr().err, *fragments)


# --- fault 1: a run that keeps no policies; play only reads ------------------------------


def test_a_sweep_export_cell_is_refused_naming_what_is_missing_and_where(
        quick_run, tmp_path, capsys):
    cell = _export_cell(quick_run("finetune", 0), tmp_path / "export")
    before = _files(cell)
    for extra in ([], ["--visit", "0"], ["--task", "A", "--out", str(tmp_path / "a.gif")]):
        _fails(["play", str(cell), *extra], capsys,
               f"{cell} keeps no policies to play", "no checkpoint (checkpoint.json",
               "no policies/", f"sweep export {tmp_path / 'export'}",
               "so it cannot be played: run it again")
        assert _files(cell) == before  # no .lock, nothing else
    assert not (tmp_path / "a.gif").exists()
    # a start policy left in the cell is not played as the final policy either
    (cell / "policies").mkdir()
    shutil.copy2(quick_run("finetune", 0) / "policies" / "00-start.npz", cell / "policies")
    with pytest.raises(PlayError, match="its policies/ holds only 00-start.npz; it is a "
                                        "cell of the sweep export"):
        open_finished(cell)
    assert not (cell / ".lock").exists()


def test_a_run_outside_an_export_without_checkpoints_says_where_policies_are(
        quick_run, tmp_path):
    run = tmp_path / "copy"
    run.mkdir()
    for path in RunDir(quick_run("finetune", 0)).result_files():
        shutil.copy2(path, run / path.name)
    with pytest.raises(PlayError, match=r"no policies/ .*so it cannot be played.*only "
                                        r"where the sweep ran it \(SWEEP/cells/NAME, unless "
                                        r"that cell was restored from the export too\); "
                                        "otherwise run it again"):
        open_finished(run)
    assert not (run / ".lock").exists()


def test_play_reads_a_run_without_writing_in_it(quick_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(quick_run("finetune", 0), run)
    (run / ".lock").unlink(missing_ok=True)
    before = _files(run)
    assert main(["play", str(run), "--episodes", "1"]) == 0
    assert "finetune seed 0: final policy for" in capsys.readouterr().out
    assert _files(run) == before  # no lock taken, nothing written
    _fails(["play", str(run), "--out", str(run / "clip.gif")], capsys,
           f"--out {run / 'clip.gif'} is inside the run directory {run}")
    assert _files(run) == before


def test_a_last_checkpoint_short_of_the_end_is_not_played_as_the_final_policy(
        quick_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(quick_run("finetune", 0), run)
    ckpt = run / json.loads((run / POINTER).read_text())["latest"]
    state = json.loads((ckpt / STATE).read_text())
    (ckpt / STATE).write_text(json.dumps({**state, "next_phase": state["phases"] - 1}))
    seal = json.loads((ckpt / SEAL).read_text())  # sealed again: a consistent checkpoint
    seal[STATE] = hashlib.sha256((ckpt / STATE).read_bytes()).hexdigest()
    (ckpt / SEAL).write_text(json.dumps(seal))
    with pytest.raises(PlayError, match=f"its last checkpoint {ckpt.name} holds the run at "
                                        f"phase {state['phases'] - 1} of {state['phases']}, "
                                        "not its end"):
        open_finished(run)


# --- fault 7: --out appears complete or not at all -------------------------------------

STOP_AT_FRAME = textwrap.dedent("""
    import os, signal, sys
    import PIL.GifImagePlugin as gif
    from telapa.cli import console_main

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    stop, write, calls = getattr(signal, sys.argv[1]), gif._write_frame_data, []

    def stop_at_the_third_frame(*args, **kwargs):  # while the file is being written
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), stop)
        return write(*args, **kwargs)

    gif._write_frame_data = stop_at_the_third_frame
    sys.argv = ["telapa", *sys.argv[2:]]
    console_main()
""")


@pytest.mark.parametrize(("name", "code", "what"), [("SIGINT", 130, "interrupted after"),
                                                    ("SIGTERM", 143, "terminated (SIGTERM)")])
def test_a_stopped_play_leaves_nothing_at_out_and_says_so_in_one_line(
        quick_run, tmp_path, capsys, name, code, what):
    out = tmp_path / "clips" / "a.gif"
    out.parent.mkdir()
    run = quick_run("finetune", 0)
    stopped = subprocess.run(
        [sys.executable, "-c", STOP_AT_FRAME, name, "play", str(run), "--task", "A",
         "--episodes", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=600)
    assert stopped.returncode == code, stopped.stderr[-3000:]
    line = one_line_error(stopped.stderr, what, f"nothing was written to --out {out}")
    assert stopped.stderr.strip() == line
    assert sorted(p.name for p in out.parent.iterdir()) == []  # no GIF, no temporary
    # the same --out is then free
    assert main(["play", str(run), "--task", "A", "--episodes", "1", "--out", str(out)]) == 0
    assert out.is_file() and sorted(p.name for p in out.parent.iterdir()) == ["a.gif"]


def test_ctrl_c_while_an_mp4_is_written_leaves_nothing(quick_run, tmp_path, capsys,
                                                       monkeypatch):
    out = tmp_path / "a.mp4"
    real, calls = play_module.captioned, []

    def ctrl_c_at_the_fifth_frame(frame, text):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(frame, text)

    monkeypatch.setattr(play_module, "captioned", ctrl_c_at_the_fifth_frame)
    _fails(["play", str(quick_run("finetune", 0)), "--task", "A", "--episodes", "2",
            "--out", str(out)], capsys, "interrupted after 1 of 2 episodes",
           f"nothing was written to --out {out}", code=130)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_file_that_appears_at_out_while_playing_is_not_overwritten(
        quick_run, tmp_path, capsys, monkeypatch):
    out = tmp_path / "a.gif"
    real = play_module.captioned

    def someone_writes_out(frame, text):
        if not out.exists():
            out.write_bytes(b"theirs")
        return real(frame, text)

    monkeypatch.setattr(play_module, "captioned", someone_writes_out)
    _fails(["play", str(quick_run("finetune", 0)), "--task", "A", "--episodes", "1",
            "--out", str(out)], capsys, f"--out {out} appeared while playing",
           "nothing was overwritten")
    assert out.read_bytes() == b"theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gif"]


# --- fault 8: frames only for --out, one episode at a time, bounded ---------------------


def test_without_out_no_frame_is_drawn(quick_run, capsys, monkeypatch):
    def no_render(*args, **kwargs):
        raise AssertionError("a frame was drawn without --out")

    monkeypatch.setattr(render_module, "render", no_render)
    assert main(["play", str(quick_run("finetune", 0)), "--episodes", "5"]) == 0
    assert "over 5 episodes" in capsys.readouterr().out
    policy = load_policy(open_finished(quick_run("finetune", 0)), task="A")
    assert all(e.frames is None for e in play(policy, episodes=3, seed=0, frames=False))


def test_with_out_the_frames_are_drawn_one_episode_at_a_time(quick_run, tmp_path,
                                                             monkeypatch):
    real, batches = render_module.render, []

    def recording(states, **kwargs):
        batches.append(states.grid.shape[:-3])
        return real(states, **kwargs)

    monkeypatch.setattr(render_module, "render", recording)
    run = quick_run("finetune", 0)
    assert main(["play", str(run), "--task", "A", "--episodes", "3",
                 "--out", str(tmp_path / "a.gif")]) == 0
    steps = load_policy(open_finished(run), task="A").agent.spec.max_steps
    assert batches == [(steps + 1,)] * 3  # each episode's states, not all episodes'


def test_episodes_are_bounded_before_any_work(quick_run, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["play", str(tmp_path / "no-run"), "--episodes", "100000"])
    err = capsys.readouterr().err
    assert f"argument --episodes: must be 1 to {MAX_EPISODES} (telapa play's bound), got " \
           "100000" in err
    policy = load_policy(open_finished(quick_run("finetune", 0)), task="A")
    with pytest.raises(PlayError, match=f"play takes 1 to {MAX_EPISODES} episodes"):
        play(policy, episodes=MAX_EPISODES + 1, seed=0, frames=False)


@pytest.mark.parametrize("where", ["missing", "folder of runs"])
def test_what_to_play_is_named_before_where_to_write(where, quick_run, tmp_path, capsys):
    """A path that is no run, with ``--out`` inside it: the error was about ``--out``
    ("inside the run directory"), as if the path were a run; it names the path."""
    folder = tmp_path / "runs"
    if where == "missing":
        fragment = f"run directory {folder} does not exist"
    else:
        folder.mkdir()
        shutil.copytree(quick_run("finetune", 0), folder / "finetune-s0")
        fragment = f"{folder} is a folder of runs, not a run"
    _fails(["play", str(folder), "--out", str(folder / "a.gif")], capsys, fragment)


def test_a_gif_that_cannot_fit_in_memory_is_refused_before_any_work(
        quick_run, tmp_path, capsys, monkeypatch):
    def no_render(*args, **kwargs):
        raise AssertionError("a frame was drawn before the memory check")

    monkeypatch.setattr(memory_module, "machine_memory", lambda: 256 * 2**20)
    monkeypatch.setattr(render_module, "render", no_render)
    out = tmp_path / "a.gif"
    line = _fails(["play", str(quick_run("finetune", 0)), "--task", "A", "--episodes", "200",
                   "--out", str(out)], capsys,
                  f"--out {out}: 200 episodes on MiniGrid-Empty-5x5-v0 may need",
                  "more than this machine's 0.25 GiB", "the largest part is the GIF's frames",
                  "--episodes 200 x up to 101 frames",
                  f"160x{160 + play_module.CAPTION_PX} pixels x 1 byte",
                  "play at most")
    fit = int(line.split("play at most ")[1].split()[0])
    assert 0 < fit < 200
    assert not out.exists()
    # what fits is played; an MP4 is streamed, so 200 episodes fit in the same memory
    policy = load_policy(open_finished(quick_run("finetune", 0)), task="A")
    check_video_memory(out, policy.agent, fit, memory=256 * 2**20)
    check_video_memory(tmp_path / "a.mp4", policy.agent, 200, memory=256 * 2**20)
    with pytest.raises(PlayError, match="may need"):
        check_video_memory(out, policy.agent, fit + 1, memory=256 * 2**20)
