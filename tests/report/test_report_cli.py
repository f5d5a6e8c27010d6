"""`telapa report` and `telapa inspect` on real runs: errors name the run dir, incomplete
runs are skipped only when asked, an earlier report survives a failed one, and inspect
shows every archive and transfer of a TeLAPA run."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from telapa.cli import main
from telapa.continual.sweep import expand_sweep_dirs
from telapa.qd.export import parse_lineage
from telapa.report import build
from telapa.report.inspection import elite_label, inspect_run


def _fails(args, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


@pytest.fixture
def finetune(quick_runs):
    return [str(quick_runs["finetune", s]) for s in (0, 1)]


@pytest.fixture
def incomplete(quick_runs, tmp_path):
    path = tmp_path / "incomplete"
    shutil.copytree(quick_runs["finetune", 0], path)
    spec = json.loads((path / "run.json").read_text())
    (path / "run.json").write_text(json.dumps({**spec, "status": "running"}))
    return path


def test_a_missing_or_incomplete_run_dir_is_named(finetune, incomplete, tmp_path, capsys):
    missing = tmp_path / "missing"
    err = _fails(["report", *finetune, str(missing), "--out", str(tmp_path / "r")], capsys)
    # a typo is not to be skipped: --skip-incomplete is offered for incomplete runs only
    assert f"{missing} does not exist" in err and "--skip-incomplete" not in err
    err = _fails(["report", str(incomplete), *finetune, "--out", str(tmp_path / "r")], capsys)
    assert f"{incomplete} is not complete" in err
    assert not (tmp_path / "r").exists()


def test_skip_incomplete_leaves_them_out_with_a_warning(finetune, incomplete, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["report", str(incomplete), *finetune, "--out", str(out),
                 "--skip-incomplete"]) == 0
    captured = capsys.readouterr()
    assert f"skipping {incomplete} is not complete" in captured.err
    assert json.loads((out / "report.json").read_text())["runs"] == finetune
    err = _fails(["report", str(incomplete), "--out", str(out), "--skip-incomplete"], capsys)
    assert "no complete runs" in err


def test_an_earlier_report_survives_a_failed_one(finetune, tmp_path, capsys, monkeypatch):
    out = tmp_path / "r"
    assert main(["report", finetune[0], "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(build, "_write_files", crash)
    with pytest.raises(SystemExit):  # one line, no traceback (docs/reliability.md)
        main(["report", *finetune, "--out", str(out)])
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"telapa: error: cannot write report directory {out}: disk full; an earlier report "
        "there is kept whole")
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["r"]  # no staging left behind
    monkeypatch.undo()
    assert main(["report", *finetune, "--out", str(out)]) == 0
    assert json.loads((out / "report.json").read_text())["runs"] == finetune
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep")
    err = _fails(["report", *finetune, "--out", str(other)], capsys)
    assert "is not a telapa report" in err and (other / "notes.txt").read_text() == "keep"


def test_inspect_shows_every_archive_and_transfer(quick_runs, capsys):
    path = quick_runs["telapa", 0]
    elites = pd.read_csv(path / "elites.csv")
    log = json.loads((path / "method_log.json").read_text())
    tags = pd.read_csv(path / "visits.csv")["tag"].tolist()
    found = inspect_run(path)
    assert found.tasks == ["A", "B"]
    sizes = elites.groupby("task").size()
    assert dict(zip(found.archives["task"], found.archives["size"], strict=True)) == dict(sizes)
    for row in found.archives.itertuples():
        mine = elites[elites["task"] == row.task]
        assert row.d_min == pytest.approx(mine["d_min"].iloc[0])
        assert (row.fitness_min, row.fitness_max) == (mine["fitness"].min(),
                                                      mine["fitness"].max())
        foreign = sum(any(tags[v].rstrip("'") != row.task for v in parse_lineage(cell))
                      for cell in mine["lineage"])
        assert row.from_other_tasks == foreign
    transfers = [e for e in log if e["event"] == "transfer"]
    assert found.transfers["target"].tolist() == [tags[e["visit"]] for e in transfers]
    assert found.transfers["lineage"].tolist() == [
        " → ".join(tags[v] for v in sorted(e["lineage"])) for e in transfers]

    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    for row in found.archives.itertuples():
        assert f"│ {row.task} " in out and f"{row.d_min:.4f}" in out
    for lineage in found.transfers["lineage"]:
        assert lineage in out
    assert main(["inspect", str(path), "--task", "B"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│ ")]
    # B's archive, the transfers into B and B', then B's elites (what play --elite takes)
    b_labels = [f"B:{i & 0xFFFFFF}" for i in elites[elites["task"] == "B"]["elite_id"]]
    assert [r.split("│")[1].strip() for r in rows] == ["B", "B ←", "B' ←", *b_labels]
    # elites as TASK:N of their archive, e.g. id 16777216 = (1 << 24) + 0 -> B:0 when
    # archive tag 1 is task B
    archive_task = dict(zip(elites["archive_tag"], elites["task"], strict=False))
    assert found.transfers["elite"].tolist() == [
        f"{archive_task[e['elite_id'] >> 24]}:{e['elite_id'] & 0xFFFFFF}" for e in transfers]
    assert elite_label(16777216, {0: "A", 1: "B"}) == "B:0"
    assert elite_label(5, {0: "A"}) == "A:5" and elite_label(-1, {}) == "-"


def test_inspect_and_metrics_take_the_folder_of_a_seeds_run(quick_runs, tmp_path, capsys):
    """``telapa run --seeds 0-1 --out DIR`` leaves one run directory per seed in DIR:
    metrics, report and inspect take DIR for all of them."""
    folder = tmp_path / "seeds"
    folder.mkdir()
    for seed in (0, 1):
        shutil.copytree(quick_runs["telapa", seed], folder / f"smoke-telapa-s{seed}")
    (folder / "notes").mkdir()  # not a run: left out
    assert expand_sweep_dirs([folder]) == [folder / "smoke-telapa-s0",
                                           folder / "smoke-telapa-s1"]
    assert main(["metrics", str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["smoke"]["summary"]["telapa"]["runs"] == 2
    assert main(["inspect", str(folder)]) == 0
    assert capsys.readouterr().out.count("Transfers:") == 2


def test_inspect_errors_are_clear(quick_runs, capsys):
    err = _fails(["inspect", str(quick_runs["telapa", 0]), "--task", "C"], capsys)
    assert "unknown task tag 'C'; this run has: A, B" in err
    err = _fails(["inspect", str(quick_runs["finetune", 0])], capsys)
    assert "is a finetune run: it keeps no policy archives" in err
