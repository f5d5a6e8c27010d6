"""Faults of the command line found by a probe of the paper-reproduction results, on
copies of the committed results (results/ is only read):

* 5: ``telapa metrics`` of two studies (long method labels with their settings) squeezed
  every metric column to nothing, so no number was shown;
* 6: a TeLAPA run without its elites.csv dropped out of the archive analyses unseen;
* 7, 9: ``telapa play`` of a committed (run-format 1) export cell gave the format error
  and "start the run again"; an export cell was sent to a sweep run directory that
  does not exist here, or keeps no policies either, and a restored cell to "the sweep's
  own run directory", where it already is;
* 8: ``report --clips`` of exported results said it made no clips only in report.md;
* 18: metrics, report and inspect of MuJoCo results gave MuJoCo's settotalmass
  deprecation (loading gymnasium's XML to check the curriculum);
* 19: a typo'd path was told "or pass --skip-incomplete", a typo under --tau-from was
  not said to be one, a mistyped --doc-scope pointed at a source file, a missing
  --doc-scope failed only after the report was built, and an export's incomplete cell
  was told to ``telapa run --resume``;
* 20: inspect printed "embedding version None" for TeLAPA-Static and cut values with
  "…" off a terminal;
* 22: visit_starts of an export did not point at the committed visit-starts CSV.
"""

from __future__ import annotations

import io
import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from telapa.analysis.data import load_telapa_run
from telapa.analysis.visit_starts import main as visit_starts_main
from telapa.cli import main
from telapa.cli.common import CLIError, print_table, rich_table
from telapa.cli.report import _check_unscoped
from telapa.continual.rundir import RunDirError
from telapa.play import PlayError, open_finished
from telapa.report.load import load_records
from telapa.report.tables import Column, ReportTable

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


def _fails(args: list[str], capsys) -> str:
    """The one stderr line of ``telapa ARGS``, which must exit with status 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and lines[-1].startswith("telapa: error: "), err
    return lines[-1]


def _export(folder: Path, study: str, names: list[str], *,
            exported_from: str | None = "/nowhere/sweeps/study") -> Path:
    """A sweep export in ``folder`` holding copies of committed cells ``names`` of
    ``results/STUDY``; ``exported_from``: the sweep run directory it names."""
    meta = json.loads((RESULTS / study / "cells.json").read_text())
    meta["cells"] = [c for c in meta["cells"] if c["name"] in names]
    if exported_from is None:
        meta.pop("exported_from", None)
    else:
        meta["exported_from"] = exported_from
    (folder / "cells").mkdir(parents=True)
    (folder / "cells.json").write_text(json.dumps(meta))
    for name in names:
        shutil.copytree(RESULTS / study / "cells" / name, folder / "cells" / name)
    return folder


# --- 5: the numbers of a metrics table are shown at any width -----------------------


def _long_label_table() -> ReportTable:
    labels = ["telapa [eval_every=499712, iterations=1000, probe_steps=200000, "
              "steps_per_visit=9994240, grid_codes=raw]",
              "telapa [eval_every=73728, iterations=64, probe_steps=30720, "
              "steps_per_visit=1474560, grid_codes=unset]"]
    values = pd.DataFrame({"runs": [5, 5]}, index=pd.Index(labels, name="method"))
    columns = [Column("runs", "runs", ci=False, digits=0)]
    for i in range(8):
        values[f"m{i}"] = [0.123 + i, -0.456 - i]
        values[f"m{i}_ci"] = [0.01, 0.02]
        values[f"m{i}_lo"] = [0.111 + i, -0.5 - i]
        values[f"m{i}_hi"] = [0.135 + i, -0.4 - i]
        columns.append(Column(f"m{i}", f"Metric {i} ↑", interval=True))
    return ReportTable("smoke-main", "Continual-transfer metrics", "", values, tuple(columns))


@pytest.mark.parametrize("width", [40, 80, 120, 250])
def test_long_method_labels_leave_every_number_whole(width):
    table = _long_label_table()
    buffer = io.StringIO()
    print_table(Console(file=buffer, width=width, color_system=None), rich_table(table))
    text = buffer.getvalue()
    assert "…" not in text
    words = text.split()
    for i in range(8):  # each mean, half width and bound whole
        for value in (f"{0.123 + i:.3f}", f"{-0.456 - i:.3f}", "0.010", "0.020",
                      f"[{0.111 + i:.3f},", f"{-0.4 - i:.3f}]"):
            assert value in words, (value, width)
    if width >= 120:  # the table fits the console when it can
        assert max(map(len, text.splitlines())) <= width


def test_metrics_of_two_studies_shows_the_numbers(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    runs = [str(RESULTS / "table1/cells/primary-telapa-static-s0"),
            str(RESULTS / "table1-paper/cells/primary-telapa-static-s0")]
    assert main(["metrics", *runs, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["primary"]["summary"]
    assert len(summary) == 2 and all(" [" in label for label in summary)  # with settings
    assert main(["metrics", *runs]) == 0
    text = capsys.readouterr().out
    for row in summary.values():
        assert f"{row['mean_sr']:.3f}" in text.split()


# --- 6: a TeLAPA run without elites.csv is an error -----------------------------------


def test_a_telapa_run_without_its_elites_is_named(tmp_path, capsys):
    run = tmp_path / "primary-telapa-s1"
    shutil.copytree(RESULTS / "table1-paper/cells/primary-telapa-s1", run)
    (run / "elites.csv").unlink()
    with pytest.raises(RunDirError, match=f"{run / 'elites.csv'} is missing"):
        load_telapa_run(run)
    scratch = RESULTS / "table1-paper/cells/primary-scratch-s1"
    assert load_telapa_run(scratch) is None  # a method without archives, as before
    line = _fails(["report", str(run), str(scratch), "--out", str(tmp_path / "r")], capsys)
    assert line == (f"telapa: error: {run / 'elites.csv'} is missing (a telapa run keeps "
                    "its archives there)")
    assert not (tmp_path / "r").exists()


# --- 7, 9: play of exported results says what is true ---------------------------------


def test_play_of_a_committed_export_cell_says_it_cannot_be_played(tmp_path, capsys):
    export = _export(tmp_path / "export", "table1-paper", ["primary-telapa-s0"])
    cell = export / "cells/primary-telapa-s0"
    assert json.loads((cell / "run.json").read_text())["version"] == 1  # an old format
    line = _fails(["play", str(cell), "--task", "B"], capsys)
    assert f"{cell} keeps no policies to play" in line
    assert f"cell of the sweep export {export}" in line and "cannot be played" in line
    assert "run it again to have policies to play" in line
    assert "start the run again" not in line and "telapa report" not in line
    assert "/nowhere/sweeps" not in line  # not a directory that is not there
    assert not (cell / ".lock").exists()


def test_play_names_the_sweep_run_directory_only_where_it_keeps_checkpoints(tmp_path):
    source = tmp_path / "sweep"
    export = _export(tmp_path / "export", "table1-paper", ["primary-scratch-s0"],
                     exported_from=str(source))
    cell = export / "cells/primary-scratch-s0"
    (source / "cells/primary-scratch-s0").mkdir(parents=True)  # restored there: bare
    with pytest.raises(PlayError) as bare:
        open_finished(cell)
    assert str(source) not in str(bare.value) and "run it again" in str(bare.value)
    (source / "cells/primary-scratch-s0/checkpoint.json").write_text("{}")
    with pytest.raises(PlayError, match=f"play the cell in the sweep's own run directory, "
                                        f"{source / 'cells/primary-scratch-s0'}"):
        open_finished(cell)


def test_play_of_a_cell_restored_from_an_export_does_not_send_it_to_itself(tmp_path):
    sweep = _export(tmp_path / "sweep", "intrinsic-reward-paper", ["primary-telapa-s0"],
                    exported_from=None)
    (sweep / "status").mkdir()
    (sweep / "status/primary-telapa-s0.json").write_text(json.dumps(
        {"state": "done", "attempts": 1, "restored_from": "/somewhere/results/study"}))
    cell = sweep / "cells/primary-telapa-s0"
    with pytest.raises(PlayError) as refused:
        open_finished(cell)
    message = str(refused.value)
    assert "restored into its sweep from the export /somewhere/results/study" in message
    assert "run it again" in message and "own run directory" not in message


def test_play_of_a_copy_without_checkpoints_is_not_told_to_go_where_it_is(tmp_path):
    run = tmp_path / "copy"
    shutil.copytree(RESULTS / "intrinsic-reward-paper/cells/primary-telapa-s0", run)
    with pytest.raises(PlayError) as refused:
        open_finished(run)
    message = str(refused.value)
    assert "so it cannot be played" in message and "run it again" in message
    assert "not in its export" not in message


# --- 8: report --clips says on stderr that no clips were made -------------------------


def test_report_clips_of_an_export_says_so_on_stderr(tmp_path, capsys):
    export = _export(tmp_path / "export", "table1-paper", ["primary-telapa-s0"])
    assert main(["report", str(export), "--out", str(tmp_path / "r"), "--clips"]) == 0
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("--clips: ")]
    assert f"No clips of {export / 'cells/primary-telapa-s0'}" in line
    assert "cannot be played" in line and "run it again" in line
    assert "telapa report" not in line and "start the run again" not in line


# --- 18: reading MuJoCo results gives no MuJoCo deprecation ----------------------------


@pytest.fixture
def unshown(monkeypatch):
    """A process in which no MuJoCo message has been given as a warning yet."""
    from telapa.envs.mujoco import native

    monkeypatch.setattr(native, "_SHOWN", set())


@pytest.mark.parametrize("command", [["metrics"], ["inspect"]])
def test_reading_mujoco_results_gives_no_model_deprecation(command, unshown, capsys):
    cell = RESULTS / "mujoco-paper/cells" / (
        "halfcheetah-telapa-s0" if command == ["inspect"] else "halfcheetah-finetune-s0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main([*command, str(cell)]) == 0
    assert not [w for w in caught if "settotalmass" in str(w.message)]
    assert "settotalmass" not in capsys.readouterr().err


def test_building_a_mujoco_env_still_warns_once(unshown):
    """gymnasium's own envs (the gymnasium backend) load the XML with the deprecated
    attribute: once per process; the native backend's models load without it."""
    from telapa.envs import make
    from telapa.envs.mujoco.native import NativeVectorEnv

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            NativeVectorEnv("HalfCheetah-v5", num_envs=1, reference_return=1.0)
        assert not caught
        for _ in range(2):
            make("HalfCheetah-v5", "gymnasium", num_envs=1, seed=0).close()
    assert sum("settotalmass" in str(w.message) for w in caught) == 1


# --- 19: bad input gets advice that can work --------------------------------------------


def test_a_typo_path_is_not_told_to_skip_it(capsys):
    typo = str(RESULTS / "table1-paper/cells/primary-telepa-s0")
    assert _fails(["metrics", typo], capsys) == (
        f"telapa: error: run directory {typo} does not exist")
    good = str(RESULTS / "table1-paper/cells/primary-scratch-s0")
    line = _fails(["metrics", good, "--tau-from", typo], capsys)
    assert line == f"telapa: error: --tau-from: run directory {typo} does not exist"


def test_an_incomplete_export_cell_is_not_told_to_resume(tmp_path, capsys):
    export = _export(tmp_path / "export", "table1-paper", ["primary-scratch-s0"])
    manifest = export / "cells/primary-scratch-s0/run.json"
    manifest.write_text(json.dumps(json.loads(manifest.read_text()) | {"status": "running"}))
    for args in (["metrics", str(export)], ["metrics", str(manifest.parent)]):
        line = _fails(args, capsys)
        assert "an incomplete export" in line and "telapa run --resume" not in line
        assert f"{manifest.parent} is a cell of the sweep export {export}" in line


DOC = """# Results
<!-- telapa:table primary-main -->
<!-- /telapa:table -->
<!-- telapa:table primary-telapa-probe-summary -->
<!-- /telapa:table -->
<!-- telapa:table paper/primary-main -->
<!-- /telapa:table -->
<!-- telapa:table mujoco/halfcheetah-main -->
<!-- /telapa:table -->
"""


def test_a_mistyped_doc_scope_lists_the_scopes(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    cell = str(RESULTS / "table1-paper/cells/primary-scratch-s0")
    line = _fails(["report", cell, "--out", str(tmp_path / "r"), "--doc", str(doc),
                   "--doc-scope", "mujuco"], capsys)
    assert "blocks of scope mujuco; its scopes: paper, mujoco" in line
    assert "docsync.py" not in line


def test_a_missing_doc_scope_is_refused_before_the_report_is_built(tmp_path, capsys,
                                                                   monkeypatch):
    import telapa.report.build as build

    def built(*args, **kwargs):
        raise AssertionError("the report was built")

    monkeypatch.setattr(build, "build_document", built)
    monkeypatch.setattr(build, "load_archives", built)
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    cell = str(RESULTS / "mujoco-paper/cells/halfcheetah-finetune-s0")
    line = _fails(["report", cell, "--out", str(tmp_path / "r"), "--doc", str(doc)], capsys)
    assert "choose this report's with --doc-scope; its scopes: paper, mujoco" in line
    assert len(line) < 400
    assert doc.read_text() == DOC and not (tmp_path / "r").exists()
    # the unscoped blocks of a report of those curricula and methods pass the check
    records = load_records([RESULTS / "table1-paper/cells/primary-telapa-s0"])
    _check_unscoped(doc, DOC, records)
    scratch = load_records([RESULTS / "table1-paper/cells/primary-scratch-s0"])
    with pytest.raises(CLIError, match="e.g. primary-telapa-probe-summary, 1 in all"):
        _check_unscoped(doc, DOC, scratch)


# --- 20: inspect --------------------------------------------------------------------------


def test_inspect_of_telapa_static_and_off_a_terminal(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["inspect", str(RESULTS / "table1-paper/cells/primary-telapa-static-s0")]) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())  # the title may wrap
    assert "None" not in out and "fixed random embedding (E_0; TeLAPA-Static never" in flat
    assert "…" not in out
    assert "MiniGrid-ObstructedMaze-1Dlh-v0" in out and "0.00/0.83/0.98" in out


# --- 22: visit_starts points at the committed CSV ---------------------------------------


def test_visit_starts_of_an_export_points_at_its_committed_csv(tmp_path, capsys):
    export = _export(tmp_path / "table1-paper", "table1-paper", ["primary-scratch-s0"])
    csv = tmp_path / "table1-paper-visit-starts.csv"
    shutil.copy2(RESULTS / "table1-paper-visit-starts.csv", csv)
    assert visit_starts_main([str(export)]) == 2
    err = capsys.readouterr().err
    assert "no training log of visit 0" in err and f"--csv {csv}" in err
    assert visit_starts_main(["--csv", str(csv), "--summary"]) == 0  # and that works
    csv.unlink()
    assert visit_starts_main([str(export)]) == 2
    assert "--csv FILE" in capsys.readouterr().err
