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


SCOPED = DOC + """<!-- telapa:table paper/p-main -->
| old paper |
<!-- /telapa:table -->
<!-- telapa:figure paper/p-curves -->
<!-- /telapa:figure -->
"""


def test_a_scope_fills_only_its_own_blocks(tmp_path):
    """Two reports in one document: each fill leaves the other's blocks as they are."""
    doc, report = _setup(tmp_path, {"p-main": "| paper main |\n"}, {"p-curves": b"paper"})
    doc.write_text(SCOPED)
    assert [(k, i) for k, i, _ in blocks(SCOPED, "paper")] == [
        ("table", "p-main"), ("figure", "p-curves")]
    assert [i for _, i, _ in blocks(SCOPED)] == ["p-main", "p-curves", "p-revisit"]
    assert blocks(SCOPED, "other") == []
    assert sync_document(doc, report, "paper") == ["p-main", "p-curves"]
    assert doc.read_text() == SCOPED.replace("| old paper |\n", "| paper main |\n").replace(
        "<!-- telapa:figure paper/p-curves -->\n",
        "<!-- telapa:figure paper/p-curves -->\n![p-curves](study/paper-p-curves.png)\n")
    assert (tmp_path / "study" / "paper-p-curves.png").read_bytes() == b"paper"
    assert not (tmp_path / "study" / "p-curves.png").exists()
    text = doc.read_text()
    assert stale_tables(text, {"p-main": "| paper main |\n"}, "paper") == []
    assert stale_tables(text, {"p-main": "| paper main |\n"}) == ["p-main", "p-revisit"]
    # the unscoped report: its blocks filled, the paper blocks kept
    unscoped = fill(text, tables={"p-main": "| s |\n", "p-revisit": "| r |\n"},
                    figures={"p-curves": "![c](study/p-curves.png)"})
    assert "| paper main |" in unscoped and "| old |" not in unscoped
    assert "study/paper-p-curves.png" in unscoped


def test_a_scopes_missing_ids_are_named_and_a_bad_scope_refused(tmp_path):
    doc, report = _setup(tmp_path, {"p-main": "| a |\n"}, {})
    doc.write_text(SCOPED)
    with pytest.raises(DocSyncError, match=r"names figure p-curves \(scope paper\), which"):
        sync_document(doc, report, "paper")
    assert doc.read_text() == SCOPED
    for bad in ("a/b", "", "x y"):
        with pytest.raises(DocSyncError, match="document scope .* must be letters"):
            blocks(SCOPED, bad)
