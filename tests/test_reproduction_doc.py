"""docs/reproduction.md shows what the committed results give: every table block equals
the table `telapa report` computes from the results it belongs to (`results/table1/` for
the study-budget blocks; `results/table1-paper/` and `results/table1-paper-seeds5-7/`,
seeds 0-4 and 5-7, for the paper-budget blocks, whose ids read ``paper/ID``; the later
studies' scopes in `SCOPES`; regenerate each with the commands in the document), the
archive analyses' tables included; every figure block's image is committed; and the
baseline diagnosis's table is its committed evaluation CSV's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from telapa.continual.sweep import sweep_cells_dirs
from telapa.report.build import analysis_report_tables, curriculum_tables, load_archives, slug
from telapa.report.docsync import blocks, figure_folder, figure_name, stale_tables
from telapa.report.load import load_records
from telapa.report.mujoco import mujoco_results, mujoco_tables
from telapa.report.results import score

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reproduction.md"
SCOPES = {None: (("results/table1",), "out/table1-report"),
          "paper": (("results/table1-paper", "results/table1-paper-seeds5-7"),
                    "out/table1-paper-report"),
          "fresh": (("results/table1-paper", "results/table1-paper-seeds5-7",
                     "results/table1-paper-fresh"), "out/table1-paper-fresh-report"),
          "orders": (("results/alternative-curricula-paper",),
                     "out/alternative-curricula-paper-report")}
"""Each block scope of the document: the committed results it shows, the report folder
(``fresh``: TeLAPA-Fresh beside the five methods' eight seeds; ``orders``: the reverse and
scrambled curricula at the paper's budget)."""

INTRINSIC_METHODS = ("scratch", "scratch-reuse", "finetune", "telapa", "telapa-fresh")
"""The methods of the intrinsic-reward study (all three seeds of each): the doc's tables
are of these cells and their bonus-free partners."""
MUJOCO = (tuple(f"results/mujoco-paper/cells/halfcheetah-{m}-s[0-4]"
                for m in ("scratch", "scratch-reuse", "finetune", "finetune-reset", "telapa",
                          "telapa-fresh"))
          + tuple(f"results/mujoco-paper/cells/hopper-{m}-s[0-4]"
                  for m in ("scratch", "scratch-reuse", "finetune", "finetune-reset",
                            "telapa", "telapa-fresh")))
"""The MuJoCo study's cells the document shows so far: HalfCheetah's and Hopper's six
methods, five seeds each (the study commits more as they finish; the doc's tables are
of these until they are regenerated)."""
SCOPES["mujoco"] = (MUJOCO, "out/mujoco-paper-report")

BONUS_FREE = {"scratch": "results/table1-paper", "scratch-reuse": "results/table1-paper",
              "finetune": "results/table1-paper", "telapa": "results/table1-paper",
              "telapa-fresh": "results/table1-paper-fresh"}
"""Where each method's bonus-free partners (the same seeds) are."""
INTRINSIC = (tuple(f"results/intrinsic-reward-paper/cells/primary-{m}-s[0-2]"
                   for m in INTRINSIC_METHODS)
             + tuple(f"{BONUS_FREE[m]}/cells/primary-{m}-s[0-2]" for m in INTRINSIC_METHODS))
SCOPES["intrinsic"] = (INTRINSIC, "out/intrinsic-reward-paper-report")
INJECTION = ("results/elite-injection-paper/cells/primary-telapa-p_inj=0.[123]-s[0-2]",
             "results/table1-paper/cells/primary-telapa-s[0-2]")
"""The elite-injection study's cells (all 12: p_inj 0.1, 0.2 and 0.3, seeds 0-2) and their
p_inj = 0 partners (the same seeds)."""
SCOPES["injection"] = (INJECTION, "out/elite-injection-paper-report")
INJECTION_BONUS = tuple(f"{folder}/cells/primary-telapa{setting}-s[0-2]" for folder, setting in (
    ("results/elite-injection-intrinsic-paper", ""),
    ("results/elite-injection-paper", "-p_inj=0.2"),
    ("results/intrinsic-reward-paper", ""), ("results/table1-paper", "")))
"""The bonus row's cells (p_inj 0.2 with the count bonus, seeds 0-2) beside the other
three corners of their 2 x 2: injection alone, the bonus alone, neither (the same
seeds)."""
SCOPES["injection-bonus"] = (INJECTION_BONUS, "out/elite-injection-intrinsic-paper-report")
LONG = ("results/long-curriculum-paper/cells/long-scratch-s[0-2]",
        "results/long-curriculum-paper/cells/long-scratch-reuse-s[0-2]",
        "results/long-curriculum-paper/cells/long-finetune-s[0-2]",
        "results/long-curriculum-paper/cells/long-telapa-s[0-2]",
        "results/long-curriculum-paper/cells/long-telapa-fresh-s[0-2]")
"""The long curriculum's 15 cells (five methods, seeds 0-2; tau_T from its own Scratch
runs)."""
SCOPES["long"] = (LONG, "out/long-curriculum-paper-report")
TAU_FROM = {scope: ("results/table1-paper", "results/table1-paper-seeds5-7")
            for scope in ("intrinsic", "injection", "injection-bonus")}
"""Scopes scored against another study's Scratch runs (``telapa report --tau-from``)."""


def _runs(pattern: str) -> list[Path]:
    """The run directories of ``pattern``: a sweep directory's cells, or the run
    directories a glob of them names (in name order)."""
    cells = sweep_cells_dirs(ROOT / pattern)
    if cells is not None:
        return cells
    return sorted(ROOT.glob(pattern))


@pytest.mark.parametrize("scope", list(SCOPES), ids=lambda s: s or "study")
def test_the_documents_tables_are_the_reports_of_the_committed_results(scope):
    text = DOC.read_text()
    shown = [id_ for kind, id_, _ in blocks(text, scope) if kind == "table"]
    results_dirs, report_dir = SCOPES[scope]
    if scope is not None and not shown:
        pytest.skip(f"docs/reproduction.md shows no {scope} blocks yet")
    cells = []
    for results_dir in results_dirs:
        found = _runs(results_dir)
        assert found, f"{results_dir} holds no exported study cells"
        cells += found
    records = load_records(cells)
    bar = TAU_FROM.get(scope)
    results = score(records, tau_from=None if bar is None else load_records(
        [cell for folder in bar for cell in _runs(folder)]))
    tables = {t.id: t.to_markdown() for r in results.values()
              for t in curriculum_tables(r, prefix=slug(r.curriculum))}
    if mujoco := mujoco_results(results):  # the friction table, beside the paper's values
        tables |= {t.id: t.to_markdown() for t in mujoco_tables(mujoco)}
    if any(id_ not in tables for id_ in shown):  # archive analyses: only when shown
        archives = load_archives(records)
        tables |= {t.id: t.to_markdown() for r in results.values()
                   for t in analysis_report_tables(r, archives, prefix=slug(r.curriculum))}
    # the study's blocks are all there; a later study shows its tables as its methods
    # finish (the claims and runtime tables need TeLAPA's runs), its main table first
    if scope is None:
        assert {"primary-main", "primary-revisits", "primary-compute", "primary-runtime",
                "primary-claims"} <= set(shown)
    else:
        assert any(id_.endswith("-main") for id_ in shown), f"no main table of {scope}"
    flag = "" if scope is None else f" --doc-scope {scope}"
    if bar is not None:
        flag += f" --tau-from {' '.join(bar)}"
    assert stale_tables(text, tables, scope) == [], (
        f"docs/reproduction.md is out of date with {' and '.join(results_dirs)}: run "
        f"`telapa report {' '.join(results_dirs)} --out {report_dir} "
        f"--doc docs/reproduction.md{flag}`")
    for kind, id_, _ in blocks(text, scope):
        if kind == "figure":
            assert (figure_folder(DOC) / figure_name(id_, scope)).is_file(), id_


def _diagnosis_table():
    """experiments/baseline-diagnosis/table.py, loaded by path (its folder is no package)."""
    path = ROOT / "experiments" / "baseline-diagnosis" / "table.py"
    spec = importlib.util.spec_from_file_location("diagnosis_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_diagnosis_table_is_computed_by_hand_from_its_csv():
    table = _diagnosis_table()
    frame = pd.DataFrame({
        "task": ["MiniGrid-Fetch-6x6-N2-v0", "MiniGrid-GoToObject-8x8-N2-v0",
                 "MiniGrid-GoToObject-8x8-N2-v0", "MiniGrid-GoToObject-8x8-N2-v0"],
        "mission": ["hidden", "hidden", "shown", "shown"], "seed": [0, 0, 1, 0],
        "post_sr": [0.5, 0.3, 0.96, 0.9], "sampled_sr": [0.49, 0.31, 0.95, 0.91],
        "greedy_sr": [0.3, 0.2, 0.55, 0.5], "episodes": [200] * 4})
    rows = table.evaluation_table(frame).splitlines()
    # A before B, mission shown before hidden, seeds in order; mean (seed values)
    assert rows[2] == ("| A (MiniGrid-GoToObject-8x8-N2-v0) | shown | 2 | 0.930 (0.90, 0.96) "
                       "| 0.930 (0.91, 0.95) | 0.525 (0.50, 0.55) | 0.258 |")
    assert rows[3].startswith("| A (MiniGrid-GoToObject-8x8-N2-v0) | hidden | 1 | 0.300 (0.30)")
    assert rows[4].endswith("| 0.300 (0.30) | 0.480 |")
    assert "greedy, argmax (200)" in rows[0]
    with pytest.raises(ValueError, match="greedy_sr"):
        table.evaluation_table(frame.drop(columns="greedy_sr"))
    with pytest.raises(ValueError, match="mixes episode counts"):
        table.evaluation_table(frame.assign(episodes=[200, 200, 50, 200]))


def test_the_documents_diagnosis_table_is_the_committed_evaluation():
    text = DOC.read_text()
    if not [id_ for kind, id_, _ in blocks(text, "diagnosis") if kind == "table"]:
        pytest.skip("docs/reproduction.md shows no diagnosis table yet")
    csv = ROOT / "results" / "baseline-diagnosis-eval.csv"
    table = _diagnosis_table()
    expected = {table.BLOCK: table.evaluation_table(pd.read_csv(csv))}
    assert stale_tables(text, expected, table.SCOPE) == [], (
        "docs/reproduction.md is out of date with results/baseline-diagnosis-eval.csv: run "
        "`python experiments/baseline-diagnosis/table.py results/baseline-diagnosis-eval.csv "
        "--doc docs/reproduction.md`")
