"""Faults of `telapa inspect`, `telapa report`, `telapa metrics` and the command line
found by a probe of docs/running.md and docs/reliability.md: a sweep with a method
without archives could not be inspected, ``report --doc`` wrote the report before it
refused an unknown block id, argparse's errors came with its usage block, errors of
``metrics`` and ``report`` began with an empty line, a folder that is no run was told to
``--skip-incomplete``, and a metric over fewer seeds than its row's runs did not say so."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from rich.console import Console

from telapa.cli import main
from telapa.cli.common import FEWER_RUNS_NOTE, rich_table
from telapa.report import build
from telapa.report.tables import Column, ReportTable


def _fails(args, capsys) -> str:
    """stderr of ``telapa ARGS``, which must exit with status 2."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def _no_empty_line(text: str) -> None:
    assert "" not in text.splitlines(), repr(text)


# --- inspect: a sweep or a folder of runs with a method without archives --------------


def _sweep(folder, runs):
    """A sweep directory whose cells are ``runs`` (name -> run directory, linked)."""
    (folder / "cells").mkdir(parents=True)
    (folder / "cells.json").write_text(json.dumps(
        {"format": "telapa-sweep", "name": "two", "cells": [{"name": n} for n in runs]}))
    for name, run in runs.items():
        (folder / "cells" / name).symlink_to(run, target_is_directory=True)
    return folder / "cells"


def _folder(folder, runs):
    """A folder of runs, as ``telapa run --seeds ... --out`` makes (linked)."""
    folder.mkdir()
    for name, run in runs.items():
        (folder / name).symlink_to(run, target_is_directory=True)
    return folder


@pytest.mark.parametrize("make", [_sweep, _folder], ids=["sweep", "seeds-folder"])
def test_inspect_skips_the_runs_without_archives_of_a_sweep(make, quick_runs, tmp_path,
                                                            capsys):
    runs = {"smoke-finetune-s0": quick_runs["finetune", 0],
            "smoke-telapa-s0": quick_runs["telapa", 0]}
    holder = make(tmp_path / "two", runs)
    assert main(["inspect", str(tmp_path / "two")]) == 0
    captured = capsys.readouterr()
    assert f"{holder / 'smoke-telapa-s0'}: telapa seed 0" in captured.out
    assert "finetune" not in captured.out
    assert captured.err.splitlines() == [
        f"skipping 1 run(s) without policy archives: {holder / 'smoke-finetune-s0'} (only "
        "telapa, telapa-static, telapa-fresh runs keep them)"]


def test_inspect_errs_when_no_run_keeps_archives(quick_runs, tmp_path, capsys):
    folder = _folder(tmp_path / "ft", {f"s{s}": quick_runs["finetune", s] for s in (0, 1)})
    err = _fails(["inspect", str(folder)], capsys)
    assert err == (f"telapa: error: no run of {folder} keeps policy archives (2 run(s): "
                   f"{folder / 's0'}, {folder / 's1'}; only telapa, telapa-static, "
                   "telapa-fresh runs keep them)\n")
    run = quick_runs["finetune", 0]  # a run given itself: its own error, as before
    err = _fails(["inspect", str(run)], capsys)
    assert err.startswith(f"telapa: error: {run} is a finetune run: it keeps no policy "
                          "archives")


# --- report --doc: every id checked before anything is written -------------------------


def test_report_refuses_an_unknown_doc_block_before_writing(quick_runs, tmp_path, capsys,
                                                            monkeypatch):
    real, built = build.build_document, []

    def once(*args, **kwargs):  # the same document each time: one build for the test
        if not built:
            built.append(real(*args, **kwargs))
        return built[0]

    monkeypatch.setattr(build, "build_document", once)
    run = str(quick_runs["finetune", 0])
    doc = tmp_path / "doc.md"
    doc.write_text("# d\n<!-- telapa:table smoke-main -->\n<!-- /telapa:table -->\n")
    earlier = tmp_path / "earlier"
    assert main(["report", run, "--out", str(earlier), "--doc", str(doc)]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()  # the build's phases, one line each; no empty lines
    assert lines and all(line.startswith("[") for line in lines), captured.err  # of bars
    assert "| finetune |" in doc.read_text()
    before = {p: p.read_bytes() for p in earlier.rglob("*") if p.is_file()}

    nope = tmp_path / "nope.md"
    nope.write_text("# d\n<!-- telapa:table smoke-nope -->\n<!-- /telapa:table -->\n")
    fresh = tmp_path / "fresh"
    for out in (fresh, earlier):
        err = _fails(["report", run, "--out", str(out), "--doc", str(nope)], capsys)
        assert err.splitlines()[-1].startswith(  # after the build's first phase line
            f"telapa: error: {nope} names table smoke-nope, which the report does not have "
            "(tables: ")
        assert "smoke-main" in err
        _no_empty_line(err)
    assert not fresh.exists()
    assert {p: p.read_bytes() for p in earlier.rglob("*") if p.is_file()} == before
    assert len(built) == 1


# --- the command line's own errors: one line, with the subcommand and a hint -----------


@pytest.mark.parametrize(("args", "command", "message"), [
    (["sweep", "x.yaml", "--out", "y", "--backend", "rey"], "sweep",
     "argument --backend: invalid choice: 'rey' (choose from 'local', 'ray', 'slurm'); "
     "did you mean 'ray'?"),
    (["sweep", "x.yaml", "--out", "y", "--workers", "0"], "sweep",
     "argument --workers: must be in 1 .. 1024, got 0"),
    (["run", "--seed", "-1"], "run", "argument --seed: must be in 0 .. 2^32 - 1, got -1"),
    (["run", "--curicullum", "smoke", "--method", "finetune"], "run",
     "unrecognized arguments: --curicullum smoke; did you mean --curriculum?"),
    (["metrics", "r", "--skip-incomplte"], "metrics",
     "unrecognized arguments: --skip-incomplte; did you mean --skip-incomplete?"),
    (["inspect", "a", "b"], "inspect", "unrecognized arguments: b"),
    ([], "", "the following arguments are required: command"),
    (["rnu"], "", "argument command: invalid choice: 'rnu' (choose from 'train', 'run', "
                  "'metrics', 'demo', 'report', 'inspect', 'play', 'sweep'); did you mean "
                  "'run'?"),
])
def test_parser_errors_are_one_line_naming_the_subcommand(args, command, message, capsys):
    prog = f"telapa {command}".strip()
    assert _fails(args, capsys) == f"{prog}: error: {message} (see {prog} --help)\n"


# --- metrics: no empty lines; a folder that is no run is told so -----------------------


def test_metrics_errors_have_no_empty_line(tmp_path, capsys):
    err = _fails(["metrics", str(tmp_path / "nope")], capsys)
    assert err == f"telapa: error: run directory {tmp_path / 'nope'} does not exist\n"


def test_a_folder_that_is_no_run_is_named_without_skip_incomplete(tmp_path, capsys):
    report = tmp_path / "smoke-report"
    (report / "tables").mkdir(parents=True)
    for name in ("index.html", "report.json", "report.md"):
        (report / name).write_text("{}")
    for command in ("metrics", "report"):
        extra = ["--out", str(tmp_path / "r")] if command == "report" else []
        err = _fails([command, str(report), *extra], capsys)
        assert err == (f"telapa: error: {report} is not a run directory: it holds no "
                       "run.json (index.html, report.json, report.md, ...); give run "
                       "directories, sweep directories or --seeds folders\n")
    started = tmp_path / "started"  # a run whose start died: incomplete, as before
    started.mkdir()
    (started / "config.yaml").write_text("{}")
    assert "(or pass --skip-incomplete)" in _fails(["metrics", str(started)], capsys)


# --- the metrics table says when a metric has fewer runs than its row ------------------


def test_a_metric_over_fewer_runs_than_its_row_says_so():
    values = pd.DataFrame(
        {"runs": [2, 2], "nbwt": [0.0, 0.5], "nbwt_ci": [float("nan"), 0.1],
         "nbwt_n": [1, 2], "nbwt_lo": [float("nan")] * 2, "nbwt_hi": [float("nan")] * 2,
         "bwt": [float("nan"), 0.1], "bwt_ci": [float("nan"), 0.2], "bwt_n": [0, 2],
         "bwt_lo": [float("nan")] * 2, "bwt_hi": [float("nan")] * 2},
        index=pd.Index(["telapa", "finetune"], name="method"))
    table = ReportTable("smoke-main", "Continual-transfer metrics", "Caption.", values,
                        (Column("runs", "runs", ci=False, digits=0),
                         Column("nbwt", "nBWT", interval=True),
                         Column("bwt", "BWT", interval=True)))
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(rich_table(table))
    text = console.export_text()
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in text.splitlines() if line.startswith("│")}
    assert rows == {"telapa": ["2", "0.000 ± n/a (n=1)", "n/a"],
                    "finetune": ["2", "0.500 ± 0.100", "0.100 ± 0.200"]}
    assert FEWER_RUNS_NOTE in " ".join(text.split())
    assert table.cells().iloc[0, 1] == "0.000 ± n/a"  # the report's cells: as they were
