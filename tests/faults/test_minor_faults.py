"""Issue 50's remaining faults of a hostile-user probe, each at its mechanism.

* Raw HTML in a name (task tag, curriculum, method) was raw HTML in report.md and in a
  document filled by ``--doc``: Markdown output shows ``&`` and ``<`` as entities.
* ``telapa sweep FILE --export DIR`` to a non-empty folder was refused only after the
  sweep directory was created: the destination is checked before anything is written.
* Two ``telapa report`` runs to one ``--out`` both exited 0: the second is refused at
  once (a lock beside ``--out``), writing nothing.
* ``--elite B:\u0663`` (an Arabic-Indic digit) was read as B:3: command-line integers
  take ASCII digits only.
* ``MLFLOW_TRACKING_URI=file:...`` failed after the run directory was made, with
  MLflow's message about migrating an ``./mlruns`` nobody named: one line before any
  work, saying what to set.
* ``telapa play`` on a ``--seeds`` parent folder said "run.json does not exist": it is
  named a folder of runs, with its runs.
* ``telapa play``'s caption lost the lowest rows of its second line: the strip is as
  tall as the font draws two lines.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from telapa.cli import main
from telapa.report.document import Document, Section, to_markdown
from telapa.report.tables import frame_table

from .conftest import FAULT_RUN, ONE_TASK, fails

ARABIC_THREE = "\u0663"


# --- raw HTML in Markdown output -----------------------------------------------------------


def test_html_in_names_is_escaped_in_markdown_output():
    frame = pd.DataFrame({"<b>SR</b>": [0.5, 0.25]},
                         index=pd.Index(["<script>alert(1)</script>", "a & b"], name="method"))
    table = frame_table("t", "Scores of <b>bold</b>", "Curriculum <i>x</i>", frame)
    doc = Document("Report of <b>c</b>", ["note <img src=x>"], [
        Section("s", "Curriculum <script>x</script>", notes=["tag <b>B</b>"], tables=[table])])
    for text in (to_markdown(doc), table.to_markdown()):
        assert "<b>" not in text and "<script>" not in text and "<i>" not in text
        assert "<img" not in text
    shown = to_markdown(doc)
    assert "&lt;script>alert(1)&lt;/script>" in shown and "a &amp; b" in shown
    assert "&lt;b>SR&lt;/b>" in shown and "# Curriculum &lt;script>x&lt;/script>" in shown


# --- sweep --export to a non-empty folder ----------------------------------------------------


def test_sweep_export_to_a_non_empty_folder_is_refused_before_anything_is_written(
        tmp_path, capsys):
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n"
                          "seeds: [0]\n")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    out = tmp_path / "sweep"
    fails(["sweep", str(sweep_file), "--out", str(out), "--export", str(dest)], capsys,
          f"export directory {dest} is not empty", "notes.txt", within_s=30)
    assert not out.exists()  # no sweep directory was created
    assert sorted(p.name for p in dest.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest", "sweep.yaml"]


# --- two reports to one --out ----------------------------------------------------------------


def test_a_second_report_to_the_same_out_is_refused_while_the_first_writes(
        quick_run, tmp_path, capsys):
    from telapa.io.lock import lock_path

    out = tmp_path / "report"
    holder = subprocess.Popen(  # the first `telapa report`, holding --out's lock
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from telapa.io.lock import exclusive_lock
            with exclusive_lock({str(out)!r}, "report directory"):
                print("held", flush=True)
                sys.stdin.read()
            """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        line = fails(["report", str(quick_run("finetune", 0)), "--out", str(out)], capsys,
                     f"report directory {out} is being written by pid {holder.pid}",
                     str(lock_path(out)), within_s=30)
        assert "wait for it to finish" in line
        assert not out.exists()
        assert [p.name for p in tmp_path.iterdir()] == [lock_path(out).name]  # its lock only
    finally:
        holder.communicate("", timeout=30)
    assert holder.returncode == 0
    assert not lock_path(out).exists()  # removed by its holder


# --- ASCII digits only ----------------------------------------------------------------------


def test_an_elite_number_in_other_digits_is_refused_naming_the_argument(tmp_path, capsys):
    # refused as the arguments are read, before the run is opened (none exists here)
    fails(["play", str(tmp_path / "no-run"), "--elite", f"A:{ARABIC_THREE}"], capsys,
          f"--elite 'A:{ARABIC_THREE}'", "ASCII digits", within_s=60)


@pytest.mark.parametrize("argv", [["play", "RUN", "--seed", ARABIC_THREE],
                                  ["play", "RUN", "--episodes", ARABIC_THREE],
                                  ["run", "--curriculum", str(ONE_TASK), "--method", "ewc",
                                   "--seeds", f"0-{ARABIC_THREE}"]])
def test_integers_of_other_scripts_are_refused_on_the_command_line(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and ARABIC_THREE in err
    assert ("ASCII digits" in err) or ("is not a seed" in err), err


# --- MLflow's file store ---------------------------------------------------------------------


def test_an_mlflow_file_store_without_its_opt_in_is_one_actionable_line_before_any_work(
        tmp_path, monkeypatch, capsys):
    pytest.importorskip("mlflow")
    store = (tmp_path / "store").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    out = tmp_path / "run"
    fails(["run", "--curriculum", str(ONE_TASK), "--method", "ewc", "--preset",
           str(FAULT_RUN), "--out", str(out), "--track", "mlflow"], capsys,
          f"MLFLOW_TRACKING_URI={store} is an MLflow file store",
          "MLFLOW_ALLOW_FILE_STORE=true", "unset MLFLOW_TRACKING_URI", "RUN_DIR/mlruns",
          within_s=30)
    assert not out.exists() and not (tmp_path / "store").exists()


# --- play on a folder of runs ----------------------------------------------------------------


def test_play_on_a_folder_of_seeds_names_its_runs(quick_run, capsys):
    folder = quick_run("finetune", 0).parent  # as `telapa run --seeds 0-1 --out FOLDER`
    line = fails(["play", str(folder)], capsys, f"{folder} is a folder of runs, not a run",
                 "finetune-s0, finetune-s1", f"e.g. {folder / 'finetune-s0'}", within_s=30)
    assert "does not exist" not in line


# --- play's caption --------------------------------------------------------------------------


def test_the_caption_strip_holds_both_lines_whole():
    from PIL import Image, ImageDraw

    from telapa.play import CAPTION_MARGIN, CAPTION_PX, captioned

    text = "ep 1000/1000 step 9999\nR -12.34 failed (gjpqy)"
    frame = np.zeros((160, 160, 3), np.uint8)
    strip = captioned(frame, text)[160:]
    assert strip.shape == (CAPTION_PX, 160, 3)
    tall = Image.new("RGB", (160, 200))  # the same text, nothing below it to clip
    ImageDraw.Draw(tall).text((CAPTION_MARGIN, CAPTION_MARGIN), text, fill=(255, 255, 255))
    whole = np.asarray(tall)
    inked = np.flatnonzero(whole.max(axis=(1, 2)))
    assert inked[-1] < CAPTION_PX - 1  # a blank row below the second line's lowest ink
    np.testing.assert_array_equal(strip, whole[:CAPTION_PX])


# --- play replays the final evaluation -------------------------------------------------------


@pytest.mark.parametrize("method", ["finetune", "telapa"])
def test_play_with_default_arguments_replays_the_final_evaluation(quick_run, method, capsys):
    """``telapa play RUN`` plays the final policy of the last visit's task on the final
    evaluation's own episodes (its key, all of its episodes): its SR is final.csv's."""
    run = quick_run(method, 0)
    final = pd.read_csv(run / "final.csv").set_index("task")
    task = pd.read_csv(run / "visits.csv")["task"].iloc[-1]
    k, n = int(final.loc[task, "successes"]), int(final.loc[task, "episodes"])
    capsys.readouterr()
    assert main(["play", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"final policy for {task}" in out
    assert f"(the final evaluation's episodes, {n} of {n})" in out
    assert f"SR {k / n:.3f} ({k}/{n} successes)" in out
    assert f"over {n} episodes" in out
