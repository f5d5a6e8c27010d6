"""A document's report blocks: filled by id, the author's text kept, unknown ids refused
before any write, stale tables found."""

from __future__ import annotations

import pytest

from telapa.report.docsync import DocSyncError, blocks, fill, stale_tables, sync_document

DOC = """# Study

Intro stays.
<!-- telapa:table p-main -->
| old |
<!-- /telapa:table -->
Between stays.
<!-- telapa:figure p-curves -->
<!-- /telapa:figure -->
<!-- telapa:table p-revisit -->
<!-- /telapa:table -->
End.
"""


def test_fill_replaces_only_the_blocks():
    text = fill(DOC, tables={"p-main": "| a |\n|---|\n| 1 |\n", "p-revisit": "| r |\n"},
                figures={"p-curves": "![c](study/p-curves.png)"})
    assert text == DOC.replace("| old |\n", "| a |\n|---|\n| 1 |\n").replace(
        "<!-- telapa:figure p-curves -->\n",
        "<!-- telapa:figure p-curves -->\n![c](study/p-curves.png)\n").replace(
        "<!-- telapa:table p-revisit -->\n", "<!-- telapa:table p-revisit -->\n| r |\n")
    assert [(k, i) for k, i, _ in blocks(text)] == [
        ("table", "p-main"), ("figure", "p-curves"), ("table", "p-revisit")]
    # filling again is a fixed point
    assert fill(text, tables={"p-main": "| a |\n|---|\n| 1 |\n", "p-revisit": "| r |\n"},
                figures={"p-curves": "![c](study/p-curves.png)"}) == text


def _setup(tmp_path, tables: dict[str, str], figures: dict[str, bytes]):
    """The document ``DOC`` and a report folder with ``tables`` and ``figures``."""
    doc = tmp_path / "study.md"
    doc.write_text(DOC)
    report = tmp_path / "report"
    (report / "tables").mkdir(parents=True)
    (report / "figures").mkdir()
    for name, text in tables.items():
        (report / "tables" / f"{name}.md").write_text(text)
    for name, data in figures.items():
        (report / "figures" / f"{name}.png").write_bytes(data)
    return doc, report


def test_unknown_ids_are_named_and_nothing_is_written(tmp_path):
    doc, report = _setup(tmp_path, {"p-main": "| a |\n"}, {})
    with pytest.raises(DocSyncError, match=r"names figure p-curves, table p-revisit, which"):
        sync_document(doc, report)
    assert doc.read_text() == DOC
    assert not (tmp_path / "study").exists()


def test_sync_copies_figures_and_stale_tables_are_found(tmp_path):
    doc, report = _setup(tmp_path, {n: f"| {n} |\n" for n in ("p-main", "p-revisit")},
                         {"p-curves": b"png"})
    assert sync_document(doc, report) == ["p-main", "p-curves", "p-revisit"]
    assert (tmp_path / "study" / "p-curves.png").read_bytes() == b"png"
    text = doc.read_text()
    assert "![p-curves](study/p-curves.png)" in text and "Between stays." in text
    assert stale_tables(text, {"p-main": "| p-main |\n", "p-revisit": "| p-revisit |\n"}) == []
    assert stale_tables(text, {"p-main": "| p-main |\n", "p-revisit": "| new |\n"}) == [
        "p-revisit"]
    assert stale_tables(text, {"p-main": "| p-main |\n"}) == ["p-revisit"]
