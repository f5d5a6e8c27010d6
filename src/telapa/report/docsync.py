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
checks every id before it writes anything, and writes only what changed: the document
when some block's text differs, a figure's PNG when its bytes differ (matplotlib's PNG
of the same figure is the same bytes), so a fill that finds everything up to date
leaves every file as it was (`sync` says which blocks changed); `stale_tables` tells
which blocks differ from a given set of tables (the check that a committed document
matches its results).

One document can show several reports side by side (e.g. a study at two budgets): a
block whose id is ``SCOPE/ID`` belongs to the report filled with ``scope=SCOPE``
(``telapa report ... --doc FILE --doc-scope SCOPE``), and its figure is copied as
``SCOPE-ID.png``; a fill touches only the blocks of its own scope (unscoped ids: no
scope), so each report leaves the others' blocks as they are::

    <!-- telapa:table paper/primary-main -->     <- tables/primary-main.md of the report
    <!-- /telapa:table -->                          filled with --doc-scope paper
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from telapa.io import write_bytes_atomic, write_text_atomic

_NAME = r"[A-Za-z0-9_.-]+"
BLOCK = re.compile(rf"(<!-- telapa:(?P<kind>table|figure) (?P<id>{_NAME}(?:/{_NAME})?) -->\n)"
                   r"(?P<body>.*?)(<!-- /telapa:(?P=kind) -->)", re.S)
SCOPE = re.compile(_NAME)
"""A scope: a name without ``/``."""


class DocSyncError(ValueError):
    """A document block names a table or figure the report does not have."""


def _check_scope(scope: str | None) -> None:
    if scope is not None and not SCOPE.fullmatch(scope):
        raise DocSyncError(f"document scope {scope!r} must be letters, digits, '_', '.' or "
                           "'-' (no '/')")


def _in_scope(id_: str, scope: str | None) -> str | None:
    """The report id of block ``id_`` if it belongs to ``scope``, else None."""
    name, _, rest = id_.rpartition("/")
    return rest if (name or None) == scope else None


def blocks(text: str, scope: str | None = None) -> list[tuple[str, str, str]]:
    """(kind, id, body) of every marked block of ``text`` that belongs to ``scope``, in
    order; ids without their scope (``paper/primary-main`` -> ``primary-main``)."""
    _check_scope(scope)
    found = ((m["kind"], _in_scope(m["id"], scope), m["body"]) for m in BLOCK.finditer(text))
    return [(kind, id_, body) for kind, id_, body in found if id_ is not None]


def figure_folder(doc: Path) -> Path:
    """Where the document's figures are copied: a folder named as the document, beside it
    (``docs/reproduction.md`` -> ``docs/reproduction/``)."""
    return doc.with_suffix("")


def figure_name(id_: str, scope: str | None = None) -> str:
    """The file name of figure ``id_`` of ``scope`` in `figure_folder`."""
    return f"{id_}.png" if scope is None else f"{scope}-{id_}.png"


def fill(text: str, *, tables: Mapping[str, str], figures: Mapping[str, str],
         source: str = "the document", scope: str | None = None) -> str:
    """``text`` with each table block of ``scope`` replaced by ``tables[id]`` (Markdown)
    and each figure block by ``figures[id]`` (a Markdown image line); the blocks of other
    scopes are kept. `DocSyncError` names every id that has no table or figure, before
    anything is replaced."""
    missing = [f"{kind} {id_}" for kind, id_, _ in blocks(text, scope)
               if id_ not in (tables if kind == "table" else figures)]
    if missing:
        raise DocSyncError(f"{source} names {', '.join(missing)}"
                           f"{'' if scope is None else f' (scope {scope})'}, which the "
                           f"report does not have (tables: {', '.join(sorted(tables)) or 'none'})")

    def replace(m: re.Match) -> str:
        id_ = _in_scope(m["id"], scope)
        if id_ is None:
            return m.group(0)
        body = (tables if m["kind"] == "table" else figures)[id_]
        return f"{m.group(1)}{body.rstrip(chr(10))}\n{m.group(5)}"

    return BLOCK.sub(replace, text)


@dataclass(frozen=True)
class Synced:
    """What `sync` did to a document."""

    ids: list[str]
    """The ids of the blocks of the scope filled, in order."""
    changed: list[str]
    """Those whose text, or figure's PNG, differed and was written."""

    @property
    def unchanged(self) -> int:
        """How many blocks were already up to date."""
        return len(self.ids) - len(self.changed)


def sync(doc: str | Path, report: str | Path, scope: str | None = None) -> Synced:
    """Fills ``doc``'s blocks of ``scope`` from the written report in ``report`` (its
    ``tables/ID.md`` and ``figures/ID.png``, the PNGs copied to `figure_folder` as
    `figure_name`), once every block was found. Writes only what changed: ``doc`` when
    its text does, a PNG when its bytes differ from the copy there (or there is none).
    A block is changed when its text or its figure's bytes are."""
    doc, report = Path(doc), Path(report)
    text = doc.read_text()
    tables = {p.stem: p.read_text() for p in sorted((report / "tables").glob("*.md"))}
    pngs = {p.stem: p for p in sorted((report / "figures").glob("*.png"))}
    folder = figure_folder(doc)
    figures = {id_: f"![{id_}]({folder.name}/{figure_name(id_, scope)})" for id_ in pngs}
    new = fill(text, tables=tables, figures=figures, source=str(doc), scope=scope)
    before, after = blocks(text, scope), blocks(new, scope)
    changed = []
    for (kind, id_, old_body), (_, _, new_body) in zip(before, after, strict=True):
        moved = old_body != new_body
        if kind == "figure":
            target, png = folder / figure_name(id_, scope), pngs[id_].read_bytes()
            if not target.is_file() or target.read_bytes() != png:
                folder.mkdir(exist_ok=True)
                write_bytes_atomic(target, png)
                moved = True
        if moved:
            changed.append(id_)
    if new != text:
        write_text_atomic(doc, new)
    return Synced([id_ for _, id_, _ in before], changed)


def sync_document(doc: str | Path, report: str | Path, scope: str | None = None) -> list[str]:
    """`sync`; returns the ids filled (those changed and those already up to date)."""
    return sync(doc, report, scope).ids


def stale_tables(text: str, tables: Mapping[str, str], scope: str | None = None) -> list[str]:
    """Ids of the table blocks of ``scope`` in ``text`` whose body is not ``tables[id]``
    (missing ids included)."""
    return [id_ for kind, id_, body in blocks(text, scope)
            if kind == "table" and body.rstrip("\n") != tables.get(id_, "\0").rstrip("\n")]


__all__ = ["SCOPE", "DocSyncError", "Synced", "blocks", "figure_folder", "figure_name", "fill",
           "stale_tables", "sync", "sync_document"]
