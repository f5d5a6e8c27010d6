"""Report tables: numeric values plus how to show them (labels, digits, which direction
is better), rendered as Markdown with the best cell of each column in bold and as CSV.

A column may show an interval beside its mean: the t half width (``key_ci``, "± 0.080")
and/or the bounds of another interval (``key_lo``, ``key_hi``, "[0.300, 0.900]": the
percentile bootstrap intervals of `telapa.metrics`).

Best cells: among the non-NaN means of a column with a direction, every row whose mean,
rounded to the shown digits, equals the best one (ties are all marked); a column with
fewer than two values marks nothing.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from telapa.metrics import fixed, format_cell

Better = Literal["higher", "lower"] | None


@dataclass(frozen=True)
class Column:
    """One shown column: ``key`` in the values frame (its half width in ``key_ci``, its
    interval bounds in ``key_lo`` and ``key_hi``)."""

    key: str
    label: str
    better: Better = None
    ci: bool = True
    interval: bool = False
    """Show [key_lo, key_hi] after the value (and its half width)."""
    digits: int | None = 3
    """Decimals shown; None: 4 significant digits (tables of mixed scales)."""


@dataclass(frozen=True)
class ReportTable:
    """A table of one report section; ``id`` names its files and its HTML element."""

    id: str
    title: str
    caption: str
    values: pd.DataFrame
    """Numeric values, one row per index label (e.g. method)."""
    columns: tuple[Column, ...]
    show_index: bool = True
    """False: the row labels are bare positions and are not shown."""

    @property
    def index_label(self) -> str:
        """Header of the row-label column ("rows \\ columns" for a labelled matrix)."""
        rows, cols = self.values.index.name, self.values.columns.name
        return f"{rows or ''} \\ {cols}" if cols else str(rows or "")

    def cells(self) -> pd.DataFrame:
        """The shown text of every cell ("0.706 ± 0.080", "n/a" for NaN)."""
        frame = pd.DataFrame(index=self.values.index)
        for col in self.columns:
            means = self.values[col.key].tolist()
            cis = self.values[f"{col.key}_ci"].tolist() if col.ci else [None] * len(means)
            bounds: list[tuple[float, float] | None] = (
                list(zip(self.values[f"{col.key}_lo"], self.values[f"{col.key}_hi"],
                         strict=True)) if col.interval else [None] * len(means))
            frame[col.label] = [_cell(m, c, col.digits, b)
                                for m, c, b in zip(means, cis, bounds, strict=True)]
        return frame

    def best(self) -> pd.DataFrame:
        """True where a cell holds its column's best value (see the module docstring)."""
        frame = pd.DataFrame(False, index=self.values.index,
                             columns=[c.label for c in self.columns])
        for col in self.columns:
            if col.better is None:
                continue
            means = pd.to_numeric(self.values[col.key], errors="coerce").round(col.digits)
            if means.notna().sum() < 2:
                continue
            target = means.max() if col.better == "higher" else means.min()
            frame[col.label] = (means == target).to_numpy()
        return frame

    def rows(self) -> list[tuple[str, list[str], list[bool]]]:
        """(row label, shown cells, best flags) of every row, in order."""
        cells, best = self.cells(), self.best()
        return [(str(label), cells.iloc[i].tolist(), best.iloc[i].tolist())
                for i, label in enumerate(self.values.index)]

    def to_markdown(self) -> str:
        """A GitHub Markdown table; best cells in bold; numbers right-aligned, text
        left-aligned."""
        lead = [self.index_label] if self.show_index else []
        align = [":---"] * len(lead) + [
            "---:" if pd.api.types.is_numeric_dtype(self.values[c.key]) else ":---"
            for c in self.columns]
        lines = [_md_row([*lead, *(c.label for c in self.columns)]), f"|{'|'.join(align)}|"]
        for label, cells, best in self.rows():
            shown = [f"**{v}**" if b else v for v, b in zip(cells, best, strict=True)]
            lines.append(_md_row([label, *shown] if self.show_index else shown))
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        """The numeric values: one column per shown column, its 95% CI half width and its
        interval bounds (`ci_label`, `interval_labels`)."""
        frame = pd.DataFrame(index=self.values.index)
        for col in self.columns:
            frame[col.label] = self.values[col.key]
            if col.ci:
                frame[ci_label(col.label)] = self.values[f"{col.key}_ci"]
            if col.interval:
                lo, hi = interval_labels(col.label)
                frame[lo], frame[hi] = self.values[f"{col.key}_lo"], self.values[f"{col.key}_hi"]
        buffer = io.StringIO()
        frame.to_csv(buffer, index=self.show_index, index_label=self.index_label)
        return buffer.getvalue()


def ci_label(label: str) -> str:
    """CSV header of a column's 95% CI half width."""
    return f"{label} ± 95% CI"


def interval_labels(label: str) -> tuple[str, str]:
    """CSV headers of a column's interval bounds."""
    return f"{label} interval lo", f"{label} interval hi"


def frame_table(table_id: str, title: str, caption: str, frame: pd.DataFrame) -> ReportTable:
    """A plain table of ``frame`` as is: every column shown, no CIs, no best marking; an
    unnamed range index is not shown."""
    positional = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    return ReportTable(table_id, title, caption, frame,
                       tuple(Column(c, str(c), ci=False, digits=None) for c in frame.columns),
                       show_index=not positional)


def _cell(mean: object, ci: object | None, digits: int | None,
          bounds: tuple[float, float] | None = None) -> str:
    if isinstance(mean, (bool, np.bool_, int, np.integer)) or not isinstance(
            mean, (float, np.floating)):
        return "n/a" if mean is None or mean is pd.NA else str(mean)
    value = float(mean)
    interval = None if bounds is None else (float(bounds[0]), float(bounds[1]))
    if ci is not None:
        return format_cell(value, float(ci), 3 if digits is None else digits,
                           interval=interval)
    if math.isnan(value):
        return "n/a"
    shown = f"{value:.4g}" if digits is None else fixed(value, digits)
    if interval is not None and not any(math.isnan(v) for v in interval):
        d = 3 if digits is None else digits
        shown += f" [{fixed(interval[0], d)}, {fixed(interval[1], d)}]"
    return shown


def md_text(text: object) -> str:
    """``text`` as Markdown shows it literally, never as HTML: ``&`` and ``<`` as entities
    (a task tag, curriculum name or method label such as ``<script>`` would otherwise be
    raw HTML in report.md and in a document filled by ``--doc``). ``>`` stays: it opens no
    tag, and the tables' headers use it (``SR > 0.5``)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;")


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(md_text(c).replace("|", "\\|") for c in cells) + " |"
