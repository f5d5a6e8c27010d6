"""telapa.analysis.visit_starts: a visit's start statistics computed by hand, and read from
finished run directories (the shared smoke runs)."""

from __future__ import annotations

import math
import shutil

import pandas as pd
import pytest

from telapa.analysis.visit_starts import (
    START_COLUMNS,
    SUMMARY_COLUMNS,
    main,
    summarize_visit_starts,
    visit_start,
    visit_starts,
)
from telapa.continual.rundir import RunDir, RunDirError

NAN = math.nan


def _log(entropy, success, step=2048):
    return pd.DataFrame({"step": [step * (i + 1) for i in range(len(entropy))],
                         "entropy": entropy, "success_rate": success})


def test_visit_start_by_hand():
    # 8 updates of 2048 steps; early = 0.25 -> the first (and last) ceil(2) updates.
    log = _log([0.1, 1.3, 1.5, 1.4, 1.2, 1.0, 0.5, 0.2],
               [NAN, 0.0, NAN, 0.25, 0.0, 0.5, NAN, 1.0])
    got = visit_start(log, early=0.25)
    # H_1 = 0.1; max(H_1, H_2) = 1.3; H_8 = 0.2; first success > 0 at update 4
    # (s = 4 x 2048); 3 of 8 updates had one; the last two updates with episodes
    # (6 and 8): mean(0.5, 1.0) = 0.75.
    # A log written before bonus_share was logged has it NaN.
    assert got == pytest.approx({"entropy_start": 0.1, "entropy_early_max": 1.3,
                                 "entropy_end": 0.2, "first_success": 8192.0,
                                 "success_updates": 3 / 8, "train_sr_end": 0.75,
                                 "bonus_share": NAN}, nan_ok=True)
    assert list(got) == list(START_COLUMNS)
    # bonus_share: the mean of the updates' shares, 5.0 / 8
    shares = [0.9, 0.8, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]
    assert visit_start(log.assign(bonus_share=shares))["bonus_share"] == pytest.approx(5 / 8)


def test_visit_start_never_succeeding_or_ending():
    got = visit_start(_log([1.9, 1.8, 1.7], [NAN, NAN, NAN]), early=1.0)
    assert got["entropy_early_max"] == 1.9
    assert math.isnan(got["first_success"]) and math.isnan(got["train_sr_end"])
    assert got["success_updates"] == 0.0
    assert visit_start(_log([1.0], [0.0]))["train_sr_end"] == 0.0


@pytest.mark.parametrize(("log", "early", "message"), [
    (_log([1.0], [0.0]), 0.0, "early must be in"),
    (_log([1.0], [0.0]), 1.5, "early must be in"),
    (_log([1.0], [0.0]).drop(columns="entropy"), 0.25, r"missing column\(s\) \['entropy'\]"),
    (_log([], []), 0.25, "no updates"),
])
def test_visit_start_rejects_bad_input(log, early, message):
    with pytest.raises(ValueError, match=message):
        visit_start(log, early=early)


def test_visit_starts_reads_each_visit_of_a_run(quick_run):
    path = quick_run("finetune", 0)
    run = RunDir(path)
    visits = run.curriculum().visits()
    table = visit_starts(path)
    assert list(table["tag"]) == [v.tag for v in visits]
    assert set(table["method"]) == {"finetune"} and set(table["seed"]) == {0}
    assert set(table["curriculum"]) == {run.manifest()["curriculum"]}
    for v, row in zip(visits, table.itertuples(index=False), strict=True):
        expected = visit_start(run.read_visit_train(v.index, v.tag))
        assert [getattr(row, c) for c in START_COLUMNS] == pytest.approx(
            list(expected.values()), nan_ok=True)
    last = visits[-1].tag
    assert list(visit_starts(path, tags=[last])["tag"]) == [last]


def test_every_run_keeps_its_visit_starts_where_an_export_drops_the_logs(quick_run, tmp_path):
    # the run wrote starts.csv as each visit ended: the statistics of its training log
    path = tmp_path / "run"
    shutil.copytree(quick_run("finetune", 0), path)
    from_logs = visit_starts(path)
    run = RunDir(path)
    kept = run.read_visit_starts()
    assert sorted(kept) == list(from_logs["visit"])
    for row in from_logs.itertuples(index=False):
        assert [kept[row.visit][c] for c in START_COLUMNS] == pytest.approx(
            [getattr(row, c) for c in START_COLUMNS], nan_ok=True)
    assert "starts.csv" in [p.name for p in run.result_files()]  # what an export copies
    # without the logs (an exported or restored cell) the same table comes from starts.csv
    shutil.rmtree(path / "train")
    pd.testing.assert_frame_equal(visit_starts(path), from_logs)
    with pytest.raises(RunDirError, match="holds early = 0.25 only, not 0.5"):
        visit_starts(path, early=0.5)


def test_visit_starts_names_a_missing_training_log(quick_run, tmp_path):
    path = tmp_path / "run"
    shutil.copytree(quick_run("finetune", 0), path)
    (path / "starts.csv").unlink()  # a run written before runs kept their starts
    first = RunDir(path).curriculum().visits()[0]
    RunDir(path).visit_train_path(first.index, first.tag).unlink()
    with pytest.raises(RunDirError, match=f"no training log of visit 0 \\({first.tag}\\)"):
        visit_starts(path)


def test_main_writes_csv_and_refuses_to_overwrite(quick_run, tmp_path, capsys):
    out = tmp_path / "starts.csv"
    assert main([str(quick_run("finetune", 0)), str(quick_run("finetune", 1)),
                 "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert set(table["seed"]) == {0, 1} and "entropy_start" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([str(quick_run("finetune", 0)), "--out", str(out)])
    assert "exists" in capsys.readouterr().err


def test_main_skips_or_refuses_an_incomplete_run(quick_run, tmp_path, capsys):
    path = tmp_path / "run"
    shutil.copytree(quick_run("finetune", 0), path)
    RunDir(path).set_status("running")
    assert main([str(path)]) == 2
    assert "is not complete" in capsys.readouterr().err
    assert main([str(path), str(quick_run("finetune", 1)), "--skip-incomplete"]) == 0
    captured = capsys.readouterr()
    assert f"skipping {path}: not complete" in captured.err
    assert main([str(path), "--skip-incomplete"]) == 2
    assert "no complete run" in capsys.readouterr().err


def _starts():
    """Five visits of two methods on one curriculum, as `visit_starts` writes them."""
    return pd.DataFrame({
        "curriculum": ["primary"] * 5,
        "method": ["telapa", "telapa", "telapa", "scratch", "scratch"],
        "seed": [0, 1, 2, 0, 1], "visit": [2, 2, 7, 2, 2], "tag": ["C", "C", "C'", "C", "C"],
        "entropy_start": [0.4, 0.1, 0.7, 1.94, 1.93],
        "entropy_early_max": [1.2, 0.3, 1.5, 1.94, 1.95],
        "entropy_end": [0.5, 0.2, 0.3, 0.4, 0.3],
        "first_success": [NAN, 6000.0, 2000.0, 4096.0, 8192.0],
        "success_updates": [0.0, 0.1, 0.9, 0.9, 0.8],
        "train_sr_end": [NAN, 0.2, 0.5, 0.9, 0.49]})


def test_summarize_visit_starts_by_hand():
    got = summarize_visit_starts(_starts()).loc["primary"]
    assert list(got.index) == ["scratch", "telapa"] and list(got.columns) == list(SUMMARY_COLUMNS)
    # telapa: 3 visits, one never succeeded; median of (6000, 2000) = 4000; entropy at the
    # start 0.1-0.7, early 0.3-1.5; train_sr_end >= 0.5: only 0.5 (NaN and 0.2 are not)
    assert got.loc["telapa"].to_dict() == pytest.approx({
        "visits": 3, "no_success": 1, "first_success_median": 4000.0,
        "entropy_start_min": 0.1, "entropy_start_max": 0.7, "entropy_early_max_min": 0.3,
        "entropy_early_max_max": 1.5, "learning_at_end": 1})
    # scratch: 0.49 is below the default 0.5, above 0.4
    assert got.loc["scratch", "learning_at_end"] == 1
    assert summarize_visit_starts(_starts(), learned=0.4).loc[
        ("primary", "scratch"), "learning_at_end"] == 2
    assert got.loc["scratch", "first_success_median"] == 6144.0
    with pytest.raises(ValueError, match=r"missing column\(s\) \['train_sr_end'\]"):
        summarize_visit_starts(_starts().drop(columns="train_sr_end"))
    with pytest.raises(ValueError, match=r"missing column\(s\) \['curriculum'\]"):
        summarize_visit_starts(_starts().drop(columns="curriculum"))


def test_summarize_visit_starts_keeps_curricula_apart():
    # a sweep of two curricula runs the same methods and seeds on each: telapa seed 0's
    # C visit on "reverse" is another run's visit, counted in its own row
    other = _starts().iloc[[0]].assign(curriculum="reverse", first_success=1000.0)
    got = summarize_visit_starts(pd.concat([_starts(), other]))
    assert list(got.index) == [("primary", "scratch"), ("primary", "telapa"),
                               ("reverse", "telapa")]
    assert got.loc[("primary", "telapa"), "visits"] == 3
    assert got.loc[("reverse", "telapa")][["visits", "no_success", "first_success_median"]] \
        .tolist() == [1, 0, 1000.0]
    assert summarize_visit_starts(_starts().iloc[:0]).empty


def test_main_summarizes_committed_tables(tmp_path, capsys):
    csv = tmp_path / "starts.csv"
    _starts().to_csv(csv, index=False)
    assert main(["--csv", str(csv), "--tags", "C", "--summary"]) == 0
    out = capsys.readouterr().out.splitlines()
    # only the C visits: telapa has 2, one without a success
    telapa = next(row for row in map(str.split, out) if row[:2] == ["primary", "telapa"])
    assert telapa[2:4] == ["2", "1"]
    with pytest.raises(SystemExit):
        main(["--summary"])
    assert "give run or sweep directories, or --csv files" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--csv", str(tmp_path / "none.csv")])
    assert "no such file" in capsys.readouterr().err
    _starts().drop(columns="entropy_start").to_csv(csv, index=False)
    assert main(["--csv", str(csv)]) == 2
    assert "missing column(s) ['entropy_start']" in capsys.readouterr().err
