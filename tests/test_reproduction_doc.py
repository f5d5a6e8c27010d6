"""docs/reproduction.md shows what the committed study results give: every table block
equals the table `telapa report results/table1` computes from `results/table1/` (regenerate
both with the command in the document), and every figure block's image is committed."""

from __future__ import annotations

from pathlib import Path

from telapa.continual.results import score
from telapa.continual.sweep import sweep_cells_dirs
from telapa.report.build import curriculum_tables, slug
from telapa.report.docsync import blocks, figure_folder, stale_tables
from telapa.report.load import load_records

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "table1"
DOC = ROOT / "docs" / "reproduction.md"


def test_the_documents_tables_are_the_reports_of_the_committed_results():
    cells = sweep_cells_dirs(RESULTS)
    assert cells, f"{RESULTS} holds no exported study cells"
    results = score(load_records(cells))
    tables = {t.id: t.to_markdown() for r in results.values()
              for t in curriculum_tables(r, prefix=slug(r.curriculum))}
    text = DOC.read_text()
    shown = [id_ for kind, id_, _ in blocks(text) if kind == "table"]
    assert {"primary-main", "primary-revisits", "primary-compute", "primary-runtime",
            "primary-claims"} <= set(shown)
    assert stale_tables(text, tables) == [], (
        "docs/reproduction.md is out of date with results/table1: run `telapa report "
        "results/table1 --out out/table1-report --doc docs/reproduction.md`")
    for kind, id_, _ in blocks(text):
        if kind == "figure":
            assert (figure_folder(DOC) / f"{id_}.png").is_file(), id_
