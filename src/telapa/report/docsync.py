"""A Markdown document whose tables and figures come from a report (``telapa report ...
--doc FILE``), e.g. ``docs/reproduction.md`` from ``telapa report results/table1``.

The document marks where each of the report's tables and figures goes, by its id (the
name of its file under the report's ``tables/`` or ``figures/``)::

    <!-- telapa:table primary-main -->
    | method | Mean SR ... |          <- replaced by tables/primary-main.md
    <!-- /telapa:table -->

    <!-- telapa:figure primary-curves -->
    ![primary-curves](reproduction/primary-curves.png)   <- replaced; the PNG is copied
    <!-- /telapa:figure -->                                  next to the document

Everything outside the blocks is the author's and is kept as written. `sync_document`
checks every id before it writes anything; `stale_tables` tells which blocks differ from
a given set of tables (the check that a committed document matches its results).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from telapa.io import write_text_atomic

BLOCK = re.compile(r"(<!-- telapa:(?P<kind>table|figure) (?P<id>[A-Za-z0-9_.-]+) -->\n)"
                   r"(?P<body>.*?)(<!-- /telapa:(?P=kind) -->)", re.S)


class DocSyncError(ValueError):
    """A document block names a table or figure the report does not have."""


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(kind, id, body) of every marked block of ``text``, in order."""
    return [(m["kind"], m["id"], m["body"]) for m in BLOCK.finditer(text)]


def figure_folder(doc: Path) -> Path:
    """Where the document's figures are copied: a folder named as the document, beside it
    (``docs/reproduction.md`` -> ``docs/reproduction/``)."""
    return doc.with_suffix("")


def fill(text: str, *, tables: Mapping[str, str], figures: Mapping[str, str],
         source: str = "the document") -> str:
    """``text`` with each table block replaced by ``tables[id]`` (Markdown) and each figure
    block by ``figures[id]`` (a Markdown image line). `DocSyncError` names every id that
    has no table or figure, before anything is replaced."""
    missing = [f"{kind} {id_}" for kind, id_, _ in blocks(text)
               if id_ not in (tables if kind == "table" else figures)]
    if missing:
        raise DocSyncError(f"{source} names {', '.join(missing)}, which the report does not "
                           f"have (tables: {', '.join(sorted(tables)) or 'none'})")

    def replace(m: re.Match) -> str:
        body = (tables if m["kind"] == "table" else figures)[m["id"]]
        return f"{m.group(1)}{body.rstrip(chr(10))}\n{m.group(5)}"

    return BLOCK.sub(replace, text)


def sync_document(doc: str | Path, report: str | Path) -> list[str]:
    """Fills ``doc``'s blocks from the written report in ``report`` (its ``tables/ID.md``
    and ``figures/ID.png``, the PNGs copied to `figure_folder`); writes ``doc`` only when
    every block was found. Returns the ids filled."""
    doc, report = Path(doc), Path(report)
    text = doc.read_text()
    tables = {p.stem: p.read_text() for p in sorted((report / "tables").glob("*.md"))}
    pngs = {p.stem: p for p in sorted((report / "figures").glob("*.png"))}
    folder = figure_folder(doc)
    figures = {id_: f"![{id_}]({folder.name}/{id_}.png)" for id_ in pngs}
    new = fill(text, tables=tables, figures=figures, source=str(doc))
    wanted = [(kind, id_) for kind, id_, _ in blocks(text)]
    if any(kind == "figure" for kind, _ in wanted):
        folder.mkdir(exist_ok=True)
        for kind, id_ in wanted:
            if kind == "figure":
                shutil.copyfile(pngs[id_], folder / f"{id_}.png")
    write_text_atomic(doc, new)
    return [id_ for _, id_ in wanted]


def stale_tables(text: str, tables: Mapping[str, str]) -> list[str]:
    """Ids of the table blocks of ``text`` whose body is not ``tables[id]`` (missing ids
    included)."""
    return [id_ for kind, id_, body in blocks(text)
            if kind == "table" and body.rstrip("\n") != tables.get(id_, "\0").rstrip("\n")]


__all__ = ["DocSyncError", "blocks", "figure_folder", "fill", "stale_tables", "sync_document"]
