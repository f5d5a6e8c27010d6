"""docs/reproduction.md shows what the committed results give: every table block equals
the table `telapa report` computes from the results it belongs to (`results/table1/` for
the study-budget blocks, `results/table1-paper/` for the paper-budget blocks, whose ids
read ``paper/ID``; regenerate both with the commands in the document), the archive
analyses' tables included, and every figure block's image is committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from telapa.continual.results import score
from telapa.continual.sweep import sweep_cells_dirs
from telapa.report.build import analysis_report_tables, curriculum_tables, load_archives, slug
from telapa.report.docsync import blocks, figure_folder, figure_name, stale_tables
from telapa.report.load import load_records

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reproduction.md"
SCOPES = {None: ("results/table1", "out/table1-report"),
          "paper": ("results/table1-paper", "out/table1-paper-report")}
"""Each block scope of the document: the committed results it shows, the report folder."""


@pytest.mark.parametrize("scope", list(SCOPES), ids=lambda s: s or "study")
def test_the_documents_tables_are_the_reports_of_the_committed_results(scope):
    text = DOC.read_text()
    shown = [id_ for kind, id_, _ in blocks(text, scope) if kind == "table"]
    results_dir, report_dir = SCOPES[scope]
    if scope is not None and not shown:
        pytest.skip(f"docs/reproduction.md shows no {scope} blocks yet")
    cells = sweep_cells_dirs(ROOT / results_dir)
    assert cells, f"{results_dir} holds no exported study cells"
    records = load_records(cells)
    results = score(records)
    tables = {t.id: t.to_markdown() for r in results.values()
              for t in curriculum_tables(r, prefix=slug(r.curriculum))}
    if any(id_ not in tables for id_ in shown):  # archive analyses: only when shown
        archives = load_archives(records)
        tables |= {t.id: t.to_markdown() for r in results.values()
                   for t in analysis_report_tables(r, archives, prefix=slug(r.curriculum))}
    # the study's blocks are all there; the paper-budget study shows its tables as its
    # methods finish (the claims and runtime tables need TeLAPA's runs)
    assert ({"primary-main", "primary-revisits", "primary-compute", "primary-runtime",
             "primary-claims"} if scope is None else {"primary-main"}) <= set(shown)
    flag = "" if scope is None else f" --doc-scope {scope}"
    assert stale_tables(text, tables, scope) == [], (
        f"docs/reproduction.md is out of date with {results_dir}: run `telapa report "
        f"{results_dir} --out {report_dir} --doc docs/reproduction.md{flag}`")
    for kind, id_, _ in blocks(text, scope):
        if kind == "figure":
            assert (figure_folder(DOC) / figure_name(id_, scope)).is_file(), id_
