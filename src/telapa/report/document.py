"""The report as a document: sections of tables and figures, rendered as one
self-contained HTML page (inline CSS, PNGs as data URIs) and as Markdown."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field

from telapa.report.figures import ReportFigure
from telapa.report.tables import ReportTable, md_text


@dataclass
class Section:
    """A titled part of the report (one curriculum, or one method's archive analysis)."""

    id: str
    title: str
    notes: list[str] = field(default_factory=list)
    tables: list[ReportTable] = field(default_factory=list)
    figures: list[ReportFigure] = field(default_factory=list)
    children: list[Section] = field(default_factory=list)

    def walk(self) -> list[Section]:
        """This section and all below it, depth first."""
        return [self, *(s for child in self.children for s in child.walk())]


@dataclass
class Document:
    title: str
    notes: list[str]
    sections: list[Section]

    def tables(self) -> list[ReportTable]:
        return [t for top in self.sections for s in top.walk() for t in s.tables]

    def figures(self) -> list[ReportFigure]:
        return [f for top in self.sections for s in top.walk() for f in s.figures]


FOLD_ROWS = 20
"""Tables with more rows are folded (<details>) in the HTML page."""

CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 1180px;
       padding: 0 1rem; color: #1b1b1b; }
h1 { margin-bottom: .2rem; } h2 { border-bottom: 1px solid #ccc; margin-top: 2.5rem; }
nav ul { columns: 2; } .note { color: #444; margin: .2rem 0; }
h4 { margin: 1.4rem 0 .2rem; } .caption { color: #555; font-size: .9em; margin: 0 0 .3rem; }
.scroll { overflow-x: auto; margin-bottom: 1.2rem; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: .25rem .7rem; border-bottom: 1px solid #e3e3e3; text-align: right;
         white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
thead th { border-bottom: 2px solid #888; } td.best { font-weight: 700; background: #eef6ee; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; height: auto; }
figcaption { color: #444; font-size: .92em; } figcaption a { color: #2a5db0; }
summary { cursor: pointer; margin: .6rem 0; font-weight: 600; }
"""


def to_html(doc: Document) -> str:
    """One page, no external resources. Element ids: ``sec-ID`` for sections, ``tbl-ID``
    for tables (<table>), ``fig-ID`` for figures (<img>); best cells have class "best"."""
    toc = "".join(f'<li><a href="#sec-{_e(s.id)}">{_e(s.title)}</a></li>' for s in doc.sections)
    body = "".join(_section_html(s, level=2) for s in doc.sections)
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in doc.notes)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(doc.title)}</title><style>{CSS}</style></head>\n<body>"
            f"<h1>{_e(doc.title)}</h1>{notes}<nav><ul>{toc}</ul></nav>{body}</body></html>\n")


def to_markdown(doc: Document) -> str:
    """The whole report as Markdown; figures link to figures/ID.png."""
    parts = [f"# {md_text(doc.title)}\n", *(f"{md_text(n)}\n" for n in doc.notes)]
    for top in doc.sections:
        parts += _section_md(top, level=2)
    return "\n".join(parts)


def _section_html(section: Section, *, level: int) -> str:
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in section.notes)
    tables = "".join(_table_html(t) for t in section.tables)
    figures = "".join(_figure_html(f) for f in section.figures)
    children = "".join(_section_html(c, level=level + 1) for c in section.children)
    return (f'<section id="sec-{_e(section.id)}"><h{level}>{_e(section.title)}</h{level}>'
            f"{notes}{figures}{tables}{children}</section>\n")


def _table_html(table: ReportTable) -> str:
    lead = [table.index_label] if table.show_index else []
    head = "".join(f"<th>{_e(c)}</th>" for c in (*lead, *(c.label for c in table.columns)))
    rows = table.rows()
    body = "".join(
        "<tr>" + (f"<td>{_e(label)}</td>" if table.show_index else "")
        + "".join(f'<td class="best">{_e(v)}</td>' if b else f"<td>{_e(v)}</td>"
                  for v, b in zip(cells, best, strict=True))
        + "</tr>"
        for label, cells, best in rows)
    caption = f'<p class="caption">{_e(table.caption)}</p>' if table.caption else ""
    element = (f'<div class="scroll"><table id="tbl-{_e(table.id)}"><thead><tr>{head}</tr>'
               f"</thead><tbody>{body}</tbody></table></div>")
    if len(rows) > FOLD_ROWS:
        return (f"<details><summary>{_e(table.title)} ({len(rows)} rows)</summary>"
                f"{caption}{element}</details>\n")
    return f"<h4>{_e(table.title)}</h4>{caption}{element}\n"


def _figure_html(fig: ReportFigure) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    caption = f"{fig.title}. {fig.caption}".strip() if fig.caption else fig.title
    return (f'<figure><img id="fig-{_e(fig.id)}" alt="{_e(fig.title)}" '
            f'src="data:image/png;base64,{data}">'
            f'<figcaption>{_e(caption)} (<a href="figures/{_e(fig.id)}.svg">SVG</a>)'
            f"</figcaption></figure>\n")


def _section_md(section: Section, *, level: int) -> list[str]:
    parts = [f"{'#' * level} {md_text(section.title)}\n",
             *(f"{md_text(n)}\n" for n in section.notes)]
    for fig in section.figures:
        parts.append(f"![{md_text(fig.title)}](figures/{fig.id}.png)\n")
    for table in section.tables:
        parts += [f"{'#' * (level + 1)} {md_text(table.title)}\n",
                  *([f"{md_text(table.caption)}\n"] if table.caption else []),
                  table.to_markdown()]
    for child in section.children:
        parts += _section_md(child, level=level + 1)
    return parts


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)
