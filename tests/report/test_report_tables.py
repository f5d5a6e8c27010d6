"""Report tables: best cells per column in the right direction, and Markdown and CSV
that hold the same table."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest

from telapa.metrics import format_cell
from telapa.report.mujoco import boundary_table, mujoco_results, mujoco_tables
from telapa.report.results import score
from telapa.report.scores import main_table, revisit_table
from telapa.report.tables import Column, ReportTable, ci_label, frame_table, interval_labels

from .records import record


def _table(values: dict[str, dict[str, float]]) -> ReportTable:
    frame = pd.DataFrame.from_dict(values, orient="index").rename_axis("method")
    return ReportTable("t", "title", "caption", frame, (
        Column("sr", "SR", "higher"), Column("ttt", "TTT", "lower"), Column("cost", "cost")))


def _markdown_cells(markdown: str) -> list[list[str]]:
    rows = [line.strip("|").split("|") for line in markdown.strip().splitlines()]
    return [[c.strip() for c in row] for row in rows[:1] + rows[2:]]


def test_best_cell_follows_each_columns_direction_and_ties_at_shown_precision():
    table = _table({
        "a": {"sr": 0.5, "sr_ci": 0.1, "ttt": 3.0, "ttt_ci": 1.0, "cost": 1.0, "cost_ci": 0.1},
        "b": {"sr": 0.7, "sr_ci": 0.2, "ttt": 5.0, "ttt_ci": 1.0, "cost": 0.5, "cost_ci": 0.1},
        "c": {"sr": math.nan, "sr_ci": math.nan, "ttt": 3.0004, "ttt_ci": 1.0, "cost": 9.0,
              "cost_ci": 0.1},
    })
    best = table.best()
    assert best["SR"].tolist() == [False, True, False]      # higher is better, NaN ignored
    assert best["TTT"].tolist() == [True, False, True]      # lower; 3.000 ties 3.000
    assert not best["cost"].any()                           # no direction: never marked


def test_a_column_with_one_value_marks_nothing():
    table = _table({"a": {"sr": 0.5, "sr_ci": 0.1, "ttt": 3.0, "ttt_ci": 1.0, "cost": 1.0,
                          "cost_ci": 0.0},
                    "b": {"sr": math.nan, "sr_ci": math.nan, "ttt": math.nan,
                          "ttt_ci": math.nan, "cost": 1.0, "cost_ci": 0.0}})
    assert not table.best().to_numpy().any()


def test_markdown_and_csv_hold_the_same_table_with_best_cells_in_bold():
    records = [record("finetune", s, [[0.1, 0.5, 0.9], [0.0, 0.3, 0.6], [0.0, 0.1, 1.0]])
               for s in range(3)]
    records += [record("telapa", s, [[0.2, 0.6, 0.8], [0.1, 0.2 + 0.1 * s, 0.7],
                                     [0.3, 0.9, 0.9]]) for s in range(3)]
    result = score(records)["toy"]
    for table in (main_table(result, prefix="toy"), revisit_table(result, prefix="toy")):
        md = _markdown_cells(table.to_markdown())
        csv = pd.read_csv(io.StringIO(table.to_csv()), index_col=0)
        assert md[0] == [table.index_label, *(c.label for c in table.columns)]
        best = table.best()
        for method, *cells in md[1:]:
            for col, cell in zip(table.columns, cells, strict=True):
                bold = cell.startswith("**") and cell.endswith("**")
                assert bold == best.at[method, col.label], (method, col.label)
                raw = csv.at[method, col.label]
                if isinstance(raw, str):  # a text column ("TTT censored": "1/3")
                    assert cell == raw
                    continue
                mean = float(raw)
                ci = float(csv.at[method, ci_label(col.label)]) if col.ci else None
                bounds = (tuple(float(csv.at[method, k]) for k in interval_labels(col.label))
                          if col.interval else None)
                shown = (format_cell(mean, ci, col.digits, interval=bounds) if col.ci
                         else f"{mean:.{col.digits}f}")
                assert cell.strip("*") == shown
    main = main_table(result, prefix="toy")
    assert [c.better for c in main.columns if c.key == "ttt"] == ["lower"]
    # each metric cell: mean ± t half width [bootstrap lo, hi]; censored revisits of all
    cells = main.cells()
    assert cells.at["finetune", "Mean SR ↑"] == "1.000 ± 0.000 [1.000, 1.000]"
    assert cells.at["finetune", "TTT censored"] == "0/3"
    assert "Coverage, last visit ↑" in cells.columns
    assert main.best().at["telapa", "TTT (M) ↓"] and not main.best().at["finetune", "TTT (M) ↓"]


def test_the_runs_competence_not_their_env_decides_whether_tables_say_sr_or_sr_tilde():
    # A MiniGrid-like task scored by a graded competence (``success: {normalized_return:
    # ...}``) reads SR~; a MuJoCo env scored by counted successes (``return_at_least``)
    # reads SR: as `Curriculum.score_symbol` decides for the command line.
    srs = [[0.1, 0.5, 0.9], [0.0, 0.3, 0.6], [0.0, 0.1, 1.0]]
    cases = {"SR~": {"graded": True}, "SR": {"env_id": "HalfCheetah-v5", "graded": False}}
    for symbol, kwargs in cases.items():
        result = score([record(m, s, srs, **kwargs) for m in ("scratch", "finetune")
                        for s in range(2)])["toy"]
        labels = [c.label for c in main_table(result, prefix="toy").columns]
        assert f"Mean {symbol} ↑" in labels, labels
        title = revisit_table(result, prefix="toy").title
        assert title == f"Revisit mean {symbol}", title
    # the paper's MuJoCo table compares SR~ only: a counted HalfCheetah curriculum stays out
    srs_of = {graded: score([record(m, s, srs, env_id="HalfCheetah-v5", graded=graded)
                             for m in ("scratch", "finetune") for s in range(2)])
              for graded in (True, False)}
    assert list(mujoco_results(srs_of[True])) == ["toy"]
    assert mujoco_results(srs_of[False]) == {}


def test_plain_frames_show_their_values_and_hide_a_bare_range_index():
    frame = pd.DataFrame({"run": ["s0", "s1"], "flag": [True, False], "y": [0.25, math.nan],
                          "big": [1.5e7, 2.0]})
    table = frame_table("x", "x", "", frame)
    assert _markdown_cells(table.to_markdown()) == [
        ["run", "flag", "y", "big"], ["s0", "True", "0.25", "1.5e+07"], ["s1", "False", "n/a", "2"]]
    assert pd.read_csv(io.StringIO(table.to_csv())).columns.tolist() == ["run", "flag", "y", "big"]
    matrix = pd.DataFrame([[1, 0], [2, 3]], index=pd.Index(["A", "B"], name="source"),
                          columns=pd.Index(["B", "A'"], name="target"))
    shown = _markdown_cells(frame_table("m", "m", "", matrix).to_markdown())
    assert shown[0] == ["source \\ target", "B", "A'"] and shown[2] == ["B", "2", "3"]


def test_code_note_counts_the_code_versions_of_the_runs():
    from types import SimpleNamespace

    from telapa.report.build import code_note

    a, b = "a" * 40, "b" * 40
    runs = [SimpleNamespace(code=(a,)), SimpleNamespace(code=(a,)),
            SimpleNamespace(code=("unrecorded", f"{b}+dirty")), SimpleNamespace(code=(None,)),
            SimpleNamespace(code=("telapa-0.1.0+src.0123456789ab",))]
    assert code_note(runs) == (f"Code: {a[:12]} (2 runs); not recorded (1 run); "
                               "telapa-0.1.0+src.0123456789ab (1 run); "
                               f"unrecorded -> {b[:12]}+dirty (1 run).")


def test_boundary_table_by_hand():
    # A B A', SRs at steps 0 (pre), mid and end (post) of each visit. A boundary's fall is
    # the post SR of the visit before minus the pre SR of the visit it leads into:
    #   finetune s0: B 0.8 - 0.6 = 0.2, A' 0.9 - 0.7 = 0.2 -> drop 0.2
    #   finetune s1: B 0.6 - 0.2 = 0.4, A' 0.7 - 0.6 = 0.1 -> drop 0.25
    #   telapa   s0: B 0.8 - 0.8 = 0.0, A' 0.9 - 1.0 = -0.1 -> drop -0.05
    #   telapa   s1: B 0.6 - 0.5 = 0.1, A' 0.7 - 0.7 = 0.0 -> drop 0.05
    runs = [record("finetune", 0, [[0.1, 0.5, 0.8], [0.6, 0.7, 0.9], [0.7, 0.8, 1.0]]),
            record("finetune", 1, [[0.0, 0.4, 0.6], [0.2, 0.5, 0.7], [0.6, 0.8, 0.9]]),
            record("telapa", 0, [[0.1, 0.5, 0.8], [0.8, 0.9, 0.9], [1.0, 1.0, 1.0]]),
            record("telapa", 1, [[0.0, 0.4, 0.6], [0.5, 0.6, 0.7], [0.7, 0.8, 0.9]])]
    table = boundary_table(score(runs)["toy"], prefix="toy")
    assert table is not None and table.id == "toy-boundaries"
    assert [c.label for c in table.columns] == ["B", "A'", "boundary drop ↓"]
    v = table.values
    assert v.loc["finetune", "B"] == pytest.approx(0.3)
    assert v.loc["finetune", "A'"] == pytest.approx(0.15)
    assert v.loc["finetune", "boundary_drop"] == pytest.approx(0.225)
    assert v.loc["telapa", "A'"] == pytest.approx(-0.05)
    assert v.loc["telapa", "boundary_drop"] == pytest.approx(0.0, abs=1e-12)
    # t half width, 2 seeds: t_{0.975, 1} * s / sqrt(2), s = |0.25 - 0.2| / sqrt(2)
    assert v.loc["finetune", "boundary_drop_ci"] == pytest.approx(12.7062047 * 0.025)
    # lower is smoother: TeLAPA's drop is marked, in every column
    assert table.best()["boundary drop ↓"].tolist() == [False, True]
    # one visit: no boundary, no table
    one = [record("finetune", 0, [[0.1, 0.5, 0.8], [0.6, 0.7, 0.9], [0.7, 0.8, 1.0]])]
    one[0].tables["visits"] = one[0].tables["visits"].iloc[:1]
    assert boundary_table(score(one)["toy"], prefix="toy") is None


def test_jumpstart_table_beside_the_papers_tr_by_hand():
    # A B A': the revisit A' starts at pre-SR~ p, the first visit of A started at q; the
    # revisit jump-start is p - q. scratch (fresh each visit): 0.1 - 0.1 = 0 and
    # 0.05 - 0.0 = 0.05; finetune 0.7 - 0.1 = 0.6 and 0.5 - 0.0 = 0.5
    srs = {("scratch", 0): [[0.1, 0.2, 0.3], [0.0, 0.2, 0.3], [0.1, 0.2, 0.3]],
           ("scratch", 1): [[0.0, 0.2, 0.3], [0.0, 0.2, 0.3], [0.05, 0.2, 0.3]],
           ("finetune", 0): [[0.1, 0.5, 0.8], [0.6, 0.7, 0.9], [0.7, 0.8, 1.0]],
           ("finetune", 1): [[0.0, 0.4, 0.6], [0.2, 0.5, 0.7], [0.5, 0.8, 0.9]]}
    results = mujoco_results(score([record(m, s, v, env_id="Hopper-v5", graded=True)
                                    for (m, s), v in srs.items()]))
    tables = mujoco_tables(results)
    assert [t.id for t in tables] == ["mujoco-friction", "mujoco-jumpstart"]
    v = tables[1].values
    # the paper's row order (scratch first), each beside the paper's Hopper TR
    assert list(v.index) == ["Hopper-v5 (toy) · scratch", "Hopper-v5 (toy) · finetune"]
    assert v["revisit_jumpstart"].tolist() == pytest.approx([0.025, 0.55])
    assert v["tr_paper"].tolist() == [-0.004, 0.394]
    assert v["runs"].tolist() == [2, 2]
