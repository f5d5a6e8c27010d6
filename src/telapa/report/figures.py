"""Report figures: a matplotlib figure rendered once to PNG and SVG bytes."""

from __future__ import annotations

import io
from dataclasses import dataclass

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

DPI = 110


@dataclass(frozen=True)
class ReportFigure:
    """A rendered figure of one report section; ``id`` names its files and HTML element."""

    id: str
    title: str
    caption: str
    png: bytes
    svg: bytes


def render(fig: Figure, *, figure_id: str, title: str, caption: str = "") -> ReportFigure:
    """Renders ``fig`` (Agg canvas) to PNG and SVG, then clears it to free its artists.
    Tick labels show plain values: no additive offset (an archive whose elites all sit
    at novelty 1.0 would otherwise be labelled "1e-8 + 9.99999e-1")."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            formatter = axis.get_major_formatter()
            if isinstance(formatter, ScalarFormatter):
                formatter.set_useOffset(False)
    FigureCanvasAgg(fig)
    png, svg = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=DPI)
    fig.savefig(svg, format="svg", metadata={"Date": None})
    fig.clear()
    return ReportFigure(figure_id, title, caption, png.getvalue(), svg.getvalue())
