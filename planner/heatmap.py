"""What keeps a picture legible in the report (issue 31, item 5; docs/pictures.md, "Legible at
report size"; docs/decisions.md item 117): a heatmap's numbers readable or left out, and a
legend below its picture, clear of every title.

The report shows each picture :data:`REPORT_PX` CSS pixels wide (planner/report.py).  A
heatmap's cell numbers are drawn at :func:`cell_font`, the size that renders
:data:`MIN_FONT_PX` pixels tall there.  Once the figure is laid out, :func:`fit` measures
each panel's numbers against its cells with matplotlib's renderer; a panel where one number
does not fit its cell loses all of them and keeps its colours and colour bar, and its title
says so.  Pure drawing helpers on matplotlib objects handed in (planner/plot.py makes the
canvas); nothing here imports matplotlib at module level."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

REPORT_PX = 1400  # the width the report shows a picture at (CSS pixels)
MIN_FONT_PX = 9.0  # a number's font at that width, at least: a digit 9 px tall
PAD_PX = 1.0  # room on each side of a number in its cell, at the report's width
DROPPED = ("; numbers left out: at {px:,} px wide they do not fit the cells (colour scale "
           "on the right)")


def report_scale(fig) -> float:
    """Report pixels per figure pixel: the figure shown :data:`REPORT_PX` wide."""
    return REPORT_PX / (fig.get_figwidth() * fig.dpi)


def cell_font(fig) -> float:
    """The cell numbers' font size in points: :data:`MIN_FONT_PX` at the report's width,
    rounded up to a tenth of a point."""
    pt = MIN_FONT_PX / report_scale(fig) * 72.0 / fig.dpi
    return math.ceil(pt * 10.0 - 1e-9) / 10.0


def root(artist):
    """The figure an artist is drawn on, through any subfigures."""
    fig = artist.figure
    while getattr(fig, "figure", fig) is not fig:  # (a subfigure's parent figure)
        fig = fig.figure
    return fig


@dataclass
class Panel:
    """One heatmap: its axes, its title's text, the numbers drawn in its cells."""

    ax: Any
    title: Any
    numbers: list[Any] = field(default_factory=list)


def number(panel: Panel, x: float, y: float, text: str, light: bool) -> None:
    """A cell's number at the cell's centre (white on a dark cell)."""
    ax = panel.ax
    panel.numbers.append(ax.text(x, y, text, ha="center", va="center",
                                 fontsize=cell_font(root(ax)),
                                 color="white" if light else "black", in_layout=False))


def fits(text, renderer) -> bool:
    """A cell's number is readable at the report's width (its font at least
    :data:`MIN_FONT_PX`) and lies inside its cell with :data:`PAD_PX` to spare on each side."""
    ax = text.axes
    fig = root(ax)
    scale = report_scale(fig)
    if text.get_fontsize() * fig.dpi / 72.0 * scale < MIN_FONT_PX - 1e-9:
        return False
    x, y = text.get_position()
    (x0, y0), (x1, y1) = ax.transData.transform([(x - 0.5, y - 0.5), (x + 0.5, y + 0.5)])
    box = text.get_window_extent(renderer)
    return (box.width * scale <= abs(x1 - x0) * scale - 2 * PAD_PX
            and box.height * scale <= abs(y1 - y0) * scale)


def fit(fig, panels: list[Panel]) -> None:
    """Lay ``fig`` out, then keep each panel's numbers only where every one fits its cell
    (:func:`fits`; the longest of them measured: digits are of one width)."""
    panels = [p for p in panels if p.numbers]
    if not panels:
        return
    fig.draw_without_rendering()  # (the constrained layout, as the file will have it)
    renderer = fig.canvas.get_renderer()
    for p in panels:
        longest = max(len(t.get_text()) for t in p.numbers)
        widest = {t.get_text(): t for t in p.numbers if len(t.get_text()) == longest}
        if all(fits(t, renderer) for t in widest.values()):
            continue
        for t in p.numbers:
            t.remove()
        p.numbers.clear()
        p.title.set_text(p.title.get_text() + DROPPED.format(px=REPORT_PX))


def legend_below(target, handles: list, fontsize: float = 7.0):
    """A legend under the picture's axes (and their label), outside them: never on a title
    or on what the axes draw.  As many columns as fit the figure's width."""
    per_row = max(1, min(len(handles), 5))
    return target.legend(handles=handles, loc="outside lower center", ncol=per_row,
                         fontsize=fontsize, frameon=False)
