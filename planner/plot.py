"""Pictures of a DMA or PCIe plan (issue 17, item 5; docs/pictures.md): one home for drawing.

Three pictures, each a pure function of the plan's cycle breakdown (``CycleReport.to_json()``
of model/cost.py, what ``verify --json`` prints as ``breakdown``) and the two sides' tiers:

* :func:`hbm_figure`: per chip the transfer touches, three heatmaps of its HBM banks (rows:
  the banks used, by bank id) x its 32 channels (columns): requests, first row opens and row
  re-opens, every used cell with its number, and each channel's totals above its column;
* :func:`timeline_figure`: per DMA engine a row of its commands, back to back: start-up,
  then the read (upper half) and the write (lower half), side by side where they pipeline
  and one after the other where they serialize; a row for the busiest HBM channel; the
  total cycles, the bottleneck and (when given) the lower bound marked;
* :func:`dmn_figure`: the bytes each DMN moves and their cycles at 128 B/cycle.

:func:`figure` puts the three in one figure, :func:`save` writes it (.svg with text kept as
text, or .png), :func:`svg_text` gives the SVG for an HTML page (planner/report.py);
:func:`plot_result` draws a solve's or verify's plan (``--plot``).
matplotlib is an optional dependency (``pip install 'tcplan[plot]'``): it is imported when a
picture is drawn, never by ``import tcplan``, and drawn on the Agg canvas without pyplot (no
global state, no display).
"""

from __future__ import annotations

import functools
import io
import logging
import os
import pathlib
import re
import tempfile
from typing import Any

from tcplan.model import hardware as hw
from tcplan.model.rules import fail

from . import heatmap

SUFFIXES = (".svg", ".png")
INSTALL = "pip install 'tcplan[plot]'"
WHAT = ("a DMA or PCIe plan's HBM load per channel and bank, its DMA engines' timeline and "
        "its DMN load")
PLOT_WHAT = (WHAT + "; a Fetch's or Commit's DM bank accesses and cycles; or a graph's "
             "schedule and its DMA, Fetch and Commit ops' pictures")
DRAWING = ("--plot", "plot()")  # the flags that draw (--report writes a page)
#: Kind.pictures (planner/registry.py): what a kind's plan is drawn as
TRANSFER, TENSOR_UNIT = "transfer", "tensor unit"
WIDTH = 16.0  # inches, every picture
DPI = 100  # a .png is WIDTH x DPI pixels wide
#: while a figure is built and written: SVG text stays text; the hash salt is fixed so that
#: the same plan draws the same SVG byte for byte (clip-path ids); matplotlib's own font
#: first (the same metrics everywhere), with a short fallback list in the SVG; text is
#: never read as mathtext (a problem's name may hold `$`)
RC = {"svg.fonttype": "none", "svg.hashsalt": "tcplan", "font.size": 8,
      "font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial"],
      "text.parse_math": False}

_READ, _WRITE, _START, _HBM, _MARK = "#4878d0", "#ee854a", "#b0b0b0", "#956cb4", "#d62728"
_DMN = "#6acc64"  # the busiest DMN, when several engines share it
LOG = logging.getLogger("tcplan")  # (the command line's: planner/cli.py)


# ---- the checks a command makes before it works -------------------------------------------
def require_matplotlib():
    """The matplotlib module, or the ``bad-request`` error that says how to install it."""
    try:
        import matplotlib
        import matplotlib.backends.backend_agg  # the canvas we draw on
        import matplotlib.figure
    except ImportError:
        raise fail("bad-request", detail="pictures need matplotlib, which is not installed",
                   fix=f"{INSTALL} (or pip install 'matplotlib>=3.7')") from None
    return matplotlib


def check_path(path: str | os.PathLike, flag: str = "--plot") -> pathlib.Path:
    """A picture's path: its suffix says the format (.svg or .png)."""
    p = pathlib.Path(path)
    if p.suffix.lower() not in SUFFIXES:
        got = f"'{p.suffix}'" if p.suffix else "no suffix"
        raise fail("bad-request", detail=f"{flag} {str(path)[:200]}: a picture is written as "
                   f".svg or .png, and the file has {got}",
                   fix="name the file NAME.svg (text stays text) or NAME.png")
    return p


def check_problem(problem, flag: str = "--plot") -> None:
    """A problem whose plan can be drawn: a DMA or PCIe transfer, one hop; or (``--plot``,
    ``plot()``) a Fetch, a Commit, a graph's schedule."""
    from .kinds import kind_of
    kind = kind_of(problem)
    drawing = flag in DRAWING
    if drawing and (kind.has_schedule(problem) or kind.pictures == TENSOR_UNIT):
        return
    if kind.pictures == TENSOR_UNIT:
        raise fail("bad-request", detail=f"{flag} writes the page of {WHAT}; "
                   f"{problem.name} is a {problem.kind} problem",
                   fix="draw it with --plot FILE (its DM banks and cycles)")
    if kind.pictures != TRANSFER:
        raise fail("bad-request", detail=f"{flag} draws {PLOT_WHAT if drawing else WHAT}; "
                   f"{problem.name} is a {problem.kind} problem, which has none",
                   fix=f"use {flag} on a dma or pcie problem" + (
                       ", a fetch, a commit or a graph" if drawing else "")
                   + " (tcplan verify prints this kind's cycles)")
    from .dma_spec import DmaSpec
    hops = problem.spec.hops if isinstance(problem.spec, DmaSpec) else 1
    if hops > 1:
        raise fail("bad-request", detail=f"{flag} draws one transfer's plan; {problem.name} "
                   f"may go through an intermediate HBM layout (hops: {hops})",
                   fix="leave out hops to draw the direct transfer, or write a hop as its "
                   "own problem and draw that")


def check(problem, path: str | os.PathLike | None = None, flag: str = "--plot") -> None:
    """Everything a command checks before it works: the path's suffix (when a picture is
    asked for), matplotlib, and the problem's kind."""
    if path is not None:
        check_path(path, flag)
    require_matplotlib()
    check_problem(problem, flag)


def sides_of(problem, plan=None) -> tuple[str, str]:
    """The tiers a transfer reads and writes (the plan's where there is one)."""
    src = plan.source if plan is not None else problem.tensors["source"]
    dst = plan.destination if plan is not None else problem.tensors["destination"]
    return src.tier, dst.tier


def breakdown_of(result, flag: str = "--plot") -> dict[str, Any]:
    """The cycle breakdown of a verify or solve result (planner/api.py), or the error that
    says why there is nothing to draw."""
    b = result.breakdown
    if not b or "engines" not in b:
        why = result.reason.code if result.reason is not None else None
        raise fail("bad-request", detail=f"{flag}: {result.problem.name} has "
                   "no timed plan to draw" + (f" ([{why}])" if why else ""),
                   fix="draw a problem that verifies (its output says what stops it)")
    return b


# ---- drawing -------------------------------------------------------------------------------
def _new(height: float):
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(WIDTH, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _styled(build):
    """Build a figure under :data:`RC`."""
    @functools.wraps(build)
    def styled(*args, **kwargs):
        with require_matplotlib().rc_context(RC):
            return build(*args, **kwargs)
    return styled


def _n(v: float) -> str:
    return f"{v:,.0f}"


def _hbm_chips(b: dict[str, Any]) -> list[int]:
    return sorted({r["chip"] for r in b.get("hbm_banks", [])})


def _hbm_height(b: dict[str, Any]) -> float:
    return sum(3 * (1.3 + 0.2 * len(_chip_banks(b, chip))) + 0.4 for chip in _hbm_chips(b))


def _chip_banks(b: dict[str, Any], chip: int) -> list[int]:
    return sorted({k for r in b["hbm_banks"] if r["chip"] == chip for k in r["banks"]})


QUANTITIES = (("requests", "requests", "Blues"), ("first_opens", "first row opens", "Greens"),
              ("reopens", "row re-opens", "Reds"))


def _draw_hbm(target, b: dict[str, Any]) -> list[heatmap.Panel]:
    """The HBM heatmaps on ``target``, per chip; the panels whose numbers
    :func:`heatmap.fit` then keeps or leaves out."""
    chips = _hbm_chips(b)
    if not chips:
        ax = target.subplots()
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no HBM side: this transfer makes no HBM requests", ha="center")
        return []
    heights = [3 * (1.3 + 0.2 * len(_chip_banks(b, c))) + 0.4 for c in chips]
    subs = target.subfigures(len(chips), 1, height_ratios=heights) if len(chips) > 1 else [
        target]
    channels = {(r["chip"], r["channel"]): r for r in b.get("hbm_channels", [])}
    panels = []
    for sub, chip in zip(subs, chips):
        banks = _chip_banks(b, chip)
        mine = [r for (c, _), r in channels.items() if c == chip]
        hot = max(mine, key=lambda r: (r["busy_cycles"], -r["channel"]))
        total = {key: sum(r[key] for r in mine) for key, _, _ in QUANTITIES}
        sub.suptitle(
            f"HBM of chip {chip}: {total['requests']:,} requests on {len(mine)} of "
            f"{hw.HBM_CHANNELS} channels and {len(banks)} of {hw.HBM_BANKS} banks; "
            f"{total['first_opens']:,} first row opens, {total['reopens']:,} re-opens; "
            f"busiest channel {hot['channel']}: {_n(hot['busy_cycles'])} cycles",
            fontsize=10, fontweight="bold")
        grids, used = _hbm_grids(b, chip, banks)
        for ax, quantity in zip(sub.subplots(3, 1), QUANTITIES):
            panels.append(_hbm_panel(sub, ax, quantity, grids[quantity[0]], used, banks,
                                     mine, hot["channel"]))
    return panels


def _hbm_grids(b: dict[str, Any], chip: int, banks: list[int]):
    """Per quantity, a (bank, channel) grid of the chip's numbers; which cells are used."""
    import numpy as np
    row_of = {k: i for i, k in enumerate(banks)}
    grids = {key: np.zeros((len(banks), hw.HBM_CHANNELS)) for key, _, _ in QUANTITIES}
    used = np.zeros((len(banks), hw.HBM_CHANNELS), bool)
    for r in b["hbm_banks"]:
        if r["chip"] != chip:
            continue
        for j, k in enumerate(r["banks"]):
            used[row_of[k], r["channel"]] = True
            for key, _, _ in QUANTITIES:
                grids[key][row_of[k], r["channel"]] = r[key][j]
    return grids, used


def _hbm_panel(sub, ax, quantity: tuple[str, str, str], grid, used, banks: list[int],
               mine: list[dict[str, Any]], hot: int) -> heatmap.Panel:
    """One quantity's heatmap: a cell per (bank, channel) with its number, the channels'
    totals above, the busiest channel outlined, the colour bar on the right."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import Normalize
    from matplotlib.ticker import MaxNLocator
    key, label, cmap = quantity
    norm = Normalize(0.0, max(1.0, float(grid.max())))
    # (interpolation "none": an SVG holds the cells at their own resolution, drawn
    # pixelated, so they stay sharp when zoomed)
    im = ax.imshow(np.ma.masked_array(grid, ~used), aspect="auto", norm=norm,
                   interpolation="none", cmap=colormaps[cmap].with_extremes(bad="#f4f4f4"))
    digits = heatmap.cell_font(heatmap.root(ax))  # (the numbers around the cells too)
    ax.set_xticks(range(hw.HBM_CHANNELS), [str(c) for c in range(hw.HBM_CHANNELS)],
                  fontsize=digits)
    ax.set_yticks(range(len(banks)), [str(k) for k in banks], fontsize=digits)
    ax.set_xlabel("HBM channel (16 x stack + channel)", fontsize=7)
    ax.set_ylabel("bank id", fontsize=7)
    panel = heatmap.Panel(ax, ax.set_title(f"{label} per bank", fontsize=9, loc="left"))
    for i, j in zip(*np.nonzero(used)):
        heatmap.number(panel, j, i, _n(grid[i, j]), norm(grid[i, j]) > 0.6)
    top = ax.secondary_xaxis("top")
    col = {r["channel"]: r[key] for r in mine}
    sums = [f"{col[c]:,}" if c in col else "-" for c in range(hw.HBM_CHANNELS)]
    top.set_xticks(range(hw.HBM_CHANNELS), sums, fontsize=digits,
                   rotation=0 if max(map(len, sums)) <= 6 else 90)
    top.set_xlabel(f"{label} per channel", fontsize=7)
    ax.add_patch(_outline(hot, len(banks)))
    bar = sub.colorbar(im, ax=ax, pad=0.005, fraction=0.015, aspect=10)
    bar.set_label(label, fontsize=7)
    bar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    bar.ax.yaxis.set_major_formatter(_comma())
    bar.ax.tick_params(labelsize=6.5)
    return panel


def _outline(channel: int, rows: int):
    from matplotlib.patches import Rectangle
    return Rectangle((channel - 0.5, -0.5), 1, rows, fill=False, edgecolor=_MARK, lw=1.2)


def _engine_name(engine: list[int], pcie: bool) -> str:
    if pcie:
        return f"PCIe engine, chip {engine[0]}"
    return f"engine chip {engine[0]}, cluster {engine[1]}, DMN pair {engine[2]}"


SHARED_DMN = "a DMN shared by several engines"  # (model/cost.py's bottleneck)


def _timeline_height(b: dict[str, Any]) -> float:
    return 1.9 + 0.34 * (len(b["engines"]) + (1 if b.get("hbm") else 0)
                         + (1 if b["bottleneck"] == SHARED_DMN else 0))


def _draw_timeline(target, b: dict[str, Any], sides: tuple[str, str],
                   lower_bound: int | None) -> None:
    from matplotlib.patches import Patch
    pcie = "host" in sides
    ax = target.subplots()
    engines = b["engines"]
    names = [_engine_name(e["engine"], pcie) for e in engines]
    ends = []
    startup = 0
    for y, e in enumerate(engines):
        t = 0.0
        for k, step in enumerate(e["timeline"]):
            startup = step["startup"]
            r, w = step["read"], step["write"]
            ax.barh(y, startup, left=t, height=0.8, color=_START)
            ax.barh(y - 0.2, r, left=t + startup, height=0.4, color=_READ)
            ax.barh(y + 0.2, w, left=t + startup + (r if step["serial"] else 0.0), height=0.4,
                    color=_WRITE)
            t += startup + (r + w if step["serial"] else max(r, w))
            if k < len(e["timeline"]) - 1:  # where the next command starts
                ax.plot([t, t], [y - 0.45, y + 0.45], color="black", lw=0.8)
        ends.append(t)
        ax.text(t, y, f"  {e['cycles']:,}" + (f" ({len(e['timeline'])} commands)"
                                                if len(e["timeline"]) > 1 else ""),
                va="center", fontsize=7)
    hot = b.get("hbm")
    if hot:  # the busiest HBM channel serves every engine of its chip
        y = len(engines)
        names.append(f"HBM chip {hot['chip']}, channel {hot['channel']} (busiest)")
        ax.barh(y, startup or hw.DMA_STARTUP_CYCLES, left=0, height=0.8, color=_START)
        ax.barh(y, hot["cycles"], left=startup or hw.DMA_STARTUP_CYCLES, height=0.8, color=_HBM)
        ends.append((startup or hw.DMA_STARTUP_CYCLES) + hot["cycles"])
        ax.text(ends[-1], y, f"  {_n(ends[-1])}", va="center", fontsize=7)
    if b["bottleneck"] == SHARED_DMN and b.get("dmns"):  # every engine's bytes in it
        d = max(b["dmns"], key=lambda x: x["bytes"])
        names.append(f"DMN {d['dmn']} of chip {d['chip']}, cluster {d['cluster']} "
                     "(busiest, shared)")
        ax.barh(len(names) - 1, startup or hw.DMA_STARTUP_CYCLES, left=0, height=0.8, color=_START)
        ax.barh(len(names) - 1, d["cycles"], left=startup or hw.DMA_STARTUP_CYCLES, height=0.8, color=_DMN)
        ends.append((startup or hw.DMA_STARTUP_CYCLES) + d["cycles"])
        ax.text(ends[-1], len(names) - 1, f"  {_n(ends[-1])}", va="center", fontsize=7)
    cycles = b["cycles"]
    if b["bottleneck"] == "HBM channels" and hot:
        marked = {len(engines)}
    elif b["bottleneck"] == SHARED_DMN and b.get("dmns"):
        marked = {len(names) - 1}
    else:
        most = max(e["cycles"] for e in engines) if engines else 0
        marked = {y for y, e in enumerate(engines) if e["cycles"] == most}
    ax.set_yticks(range(len(names)), names, fontsize=7)
    for y, label in enumerate(ax.get_yticklabels()):
        if y in marked:
            label.set_color(_MARK)
            label.set_fontweight("bold")
    ax.invert_yaxis()
    ax.axvline(cycles, color=_MARK, ls="--", lw=1.2)
    ax.text(cycles, -1.1, f"total {cycles:,} cycles (bottleneck: {b['bottleneck']}) ",
            color=_MARK, fontsize=8, ha="right", va="center")
    if lower_bound:
        ax.axvline(lower_bound, color="#2ca02c", ls=":", lw=1.2)
        ax.text(lower_bound, -0.65, f"lower bound {lower_bound:,} ", color="#2ca02c",
                fontsize=8, ha="right", va="center")
    right = max([cycles, lower_bound or 0, *ends])
    ax.set_xlim(0, right * 1.12)
    ax.set_ylim(len(names) - 0.4, -1.45)
    ax.set_xlabel("cycles", fontsize=8)
    ax.xaxis.set_major_formatter(_comma())
    ax.set_title(f"DMA engines' timeline: {cycles:,} cycles; bottleneck: {b['bottleneck']} "
                 "(marked in red)", fontsize=10, fontweight="bold", loc="left")
    read, write = sides
    handles = [Patch(color=_START, label=f"start-up {startup or hw.DMA_STARTUP_CYCLES} cycles per command"),
               Patch(color=_READ, label=f"read ({read.upper()})"),
               Patch(color=_WRITE, label=f"write ({write.upper()})")]
    if hot:
        handles.append(Patch(color=_HBM, label="busiest HBM channel busy"))
    if b["bottleneck"] == SHARED_DMN and b.get("dmns"):
        handles.append(Patch(color=_DMN, label="busiest DMN busy (all its engines)"))
    heatmap.legend_below(target, handles)
    ax.grid(axis="x", color="#e0e0e0", lw=0.5)
    ax.set_axisbelow(True)


DMN_HEIGHT = 4.8  # inches: the bars, their numbers above them, the DMNs' names below


def _dmn_height(b: dict[str, Any]) -> float:
    return DMN_HEIGHT if b.get("dmns") else 1.0


def _draw_dmns(target, b: dict[str, Any]) -> None:
    ax = target.subplots()
    dmns = b.get("dmns", [])
    if not dmns:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no DM side: this transfer moves no bytes through DMNs",
                ha="center", va="center")
        return
    xs = range(len(dmns))
    ax.bar(xs, [d["bytes"] for d in dmns], color=_READ, width=0.7)
    top = max(d["bytes"] for d in dmns)
    labels = [f"{d['bytes']:,} B, {_n(d['cycles'])} cycles" for d in dmns]
    for x, d, label in zip(xs, dmns, labels):
        ax.text(x, d["bytes"] + top * 0.02, label, rotation=90, ha="center", va="bottom",
                fontsize=6.5, in_layout=False)
    # room above the bars for the longest number (about 0.6 em a character, on an axes of
    # the figure's height less its names and title)
    room = max(map(len, labels)) * 6.5 * 0.6 / 72 / (DMN_HEIGHT - 2.2) + 0.06
    ax.set_ylim(0, top / max(0.2, 1.0 - room))
    ax.set_xticks(xs, [f"chip {d['chip']}, cluster {d['cluster']}, DMN {d['dmn']}"
                       for d in dmns], rotation=90, fontsize=6.5)
    ax.set_xlim(-0.6, len(dmns) - 0.4)
    ax.set_ylabel("bytes", fontsize=8)
    ax.yaxis.set_major_formatter(_comma())
    bpc = hw.DMN_BYTES_PER_CYCLE
    sec = ax.secondary_yaxis("right", functions=(lambda v: v / bpc, lambda v: v * bpc))
    sec.set_ylabel(f"cycles at {bpc} B/cycle", fontsize=8)
    sec.yaxis.set_major_formatter(_comma())
    busiest = max(d["cycles"] for d in dmns)
    ax.set_title(f"DMN load: {len(dmns)} DMNs, {sum(d['bytes'] for d in dmns):,} bytes; "
                 f"busiest {_n(busiest)} cycles at {bpc} B/cycle", fontsize=10,
                 fontweight="bold", loc="left")
    ax.grid(axis="y", color="#e0e0e0", lw=0.5)
    ax.set_axisbelow(True)


def _comma():
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda v, _: f"{v:,.0f}")


def _titled(height: float, title: str):
    """A new figure of ``height`` inches, with room for its title when it has one."""
    fig = _new(height + (0.4 if title else 0.0))
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


@_styled
def hbm_figure(breakdown: dict[str, Any], title: str = ""):
    """Per chip the transfer touches: requests, first row opens and re-opens per bank x
    channel, with per-channel totals; the busiest channel outlined in red."""
    fig = _titled(max(1.0, _hbm_height(breakdown)), title)
    heatmap.fit(fig, _draw_hbm(fig, breakdown))
    return fig


@_styled
def timeline_figure(breakdown: dict[str, Any], sides: tuple[str, str] = ("hbm", "dm"),
                    title: str = "", lower_bound: int | None = None):
    """Each DMA engine's commands (start-up, read, write) and the busiest HBM channel, in
    cycles, with the total, the bottleneck and the lower bound marked."""
    fig = _titled(_timeline_height(breakdown), title)
    _draw_timeline(fig, breakdown, sides, lower_bound)
    return fig


@_styled
def dmn_figure(breakdown: dict[str, Any], title: str = ""):
    """Bytes and cycles per DMN."""
    fig = _titled(_dmn_height(breakdown), title)
    _draw_dmns(fig, breakdown)
    return fig


@_styled
def figure(breakdown: dict[str, Any], sides: tuple[str, str] = ("hbm", "dm"),
           title: str = "", lower_bound: int | None = None):
    """The three pictures in one figure, one below the other: the HBM load, the engines'
    timeline, the DMN load."""
    heights = [max(1.0, _hbm_height(breakdown)), _timeline_height(breakdown),
               _dmn_height(breakdown)]
    fig = _new(sum(heights) + 0.6)
    fig.suptitle(title or f"{breakdown['cycles']:,} cycles", fontsize=12, fontweight="bold")
    hbm, timeline, dmns = fig.subfigures(3, 1, height_ratios=heights)
    panels = _draw_hbm(hbm, breakdown)
    _draw_timeline(timeline, breakdown, sides, lower_bound)
    _draw_dmns(dmns, breakdown)
    heatmap.fit(fig, panels)  # (once the whole figure is laid out)
    return fig


def title_of(name: str, b: dict[str, Any], sides: tuple[str, str]) -> str:
    return (f"{name}: {sides[0].upper()} -> {sides[1].upper()}, {b['cycles']:,} cycles, "
            f"bottleneck: {b['bottleneck']}")


# ---- writing ---------------------------------------------------------------------------------
def _render(fig, out, fmt: str) -> None:
    mpl = require_matplotlib()
    with mpl.rc_context(RC):
        fig.savefig(out, format=fmt, dpi=DPI,
                    metadata={"Date": None} if fmt == "svg" else {"Software": "tcplan"})


def save(fig, path: str | os.PathLike, flag: str = "--plot") -> pathlib.Path:
    """Write a figure to ``path`` (.svg or .png, from the suffix), atomically."""
    p = check_path(path, flag)
    fmt = p.suffix.lower()[1:]
    buf = io.BytesIO()
    _render(fig, buf, fmt)
    return write_file(p, buf.getvalue(), flag)


def write_file(path: pathlib.Path, data: bytes, flag: str) -> pathlib.Path:
    """Write ``data`` to ``path`` through a temporary file renamed into place: a failed
    write leaves no file behind and an old one as it was.  The file gets the mode ``open``
    would give it."""
    from .inputs import _file_mode, os_reason
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), _file_mode())
            out.write(data)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise fail("bad-request", detail=f"{flag} {str(path)[:200]}: cannot write it "
                   f"({os_reason(e)})",
                   fix="give a path in a folder that exists and can be written") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return path


def svg_text(fig) -> str:
    """A figure as an ``<svg>`` element, for inlining in an HTML page."""
    buf = io.StringIO()
    _render(fig, buf, "svg")
    text = buf.getvalue()
    return text[text.index("<svg"):]


def draw(path: str | os.PathLike, breakdown: dict[str, Any], sides: tuple[str, str],
         name: str, lower_bound: int | None = None, flag: str = "--plot") -> pathlib.Path:
    """Draw a plan's three pictures into one file."""
    check_path(path, flag)
    fig = figure(breakdown, sides, title_of(name, breakdown, sides), lower_bound)
    return save(fig, path, flag)


@_styled
def schedule_figure(schedule, title: str = ""):
    """A graph's schedule (planner/schedule_plot.py): a row per context."""
    from . import schedule_plot
    fig = _new(schedule_plot.height())
    schedule_plot.draw_schedule(fig, schedule, title)
    return fig


@_styled
def tu_figure(data: dict[str, Any], title: str = "", lower_bound: int | None = None):
    """A Fetch's or Commit's pictures (planner/tu_plot.py): its DM banks and its cycles;
    ``data`` is ``tu_plot.picture_data`` of its plan."""
    from . import tu_plot
    fig = _titled(tu_plot.height(), title)
    heatmap.fit(fig, tu_plot.draw(fig, data, lower_bound))
    return fig


def tu_title(name: str, d: dict[str, Any], lower_bound: int | None) -> str:
    side = "DM -> stream" if d["engine"] == "fetch" else "stream -> DM"
    return (f"{name}: {d['engine'].title()}, {side} ({d['context']} context), "
            f"{d['cycles']:,} cycles" + (f", lower bound {lower_bound:,}" if lower_bound
                                         else ""))


def op_figure(problem, plan, name: str, lower_bound: int | None):
    """The pictures of one plan as its kind draws them (``Kind.pictures``): a transfer's
    three, a Fetch's or Commit's two; None for a kind with none.  ``name`` heads them."""
    from .registry import kind_of
    what = kind_of(problem).pictures
    if what == TRANSFER:
        from tcplan.model.cost import dma_cycles
        b = dma_cycles(plan).to_json()
        sides = sides_of(problem, plan)
        return figure(b, sides, title_of(name, b, sides), lower_bound)
    if what == TENSOR_UNIT:
        from .tu_plot import picture_data
        d = picture_data(plan)
        return tu_figure(d, tu_title(name, d, lower_bound), lower_bound)
    return None


def graph_plan_of(plan):
    """The graph plan (planner/graph_plan.py) of a scheduled problem's plan: a graph's own,
    or a contraction's chosen candidate's (planner/contraction_moves.py ``Timed.plan``)."""
    return plan if hasattr(plan, "ops") else getattr(plan, "plan", None)


def op_path(path: pathlib.Path, op: str, taken: set[pathlib.Path]) -> pathlib.Path:
    """Where an op's pictures go beside a graph's ``FILE``: ``STEM.OP.SUFFIX``, the op's
    name kept to letters, digits, ``_`` and ``-`` (others become ``_``); a name that comes
    out as another's gets ``-2``, ``-3``..."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", op)[:80] or "op"
    out, k = path.with_name(f"{path.stem}.{safe}{path.suffix}"), 1
    while out in taken or out == path:
        k += 1
        out = path.with_name(f"{path.stem}.{safe}-{k}{path.suffix}")
    taken.add(out)
    return out


def op_pictures(name: str, gp, path: pathlib.Path):
    """Each op of a graph plan that has pictures (its kind's: a DMA, PCIe, Fetch or
    Commit), in the file's order: (its file beside ``path``, its figure), drawn one at a
    time."""
    from .registry import kind_of
    taken: set[pathlib.Path] = set()
    for row in gp.ops:
        problem = row.problem
        if not kind_of(problem).pictures or row.plan is None:
            continue
        bound = kind_of(problem).lower_bound(problem, row.plan)
        fig = op_figure(problem, row.plan, f"{name}, op {problem.name}", bound)
        if fig is not None:
            yield op_path(path, problem.name, taken), fig


def plot_graph(result, path: str | os.PathLike, flag: str = "--plot") -> pathlib.Path:
    """A scheduled plan's pictures: its schedule in ``path``, and beside it each DMA, PCIe,
    Fetch and Commit op's own (:func:`op_path`; each file written said on the log)."""
    p = check_path(path, flag)
    gp = graph_plan_of(result.plan)
    out = save(schedule_figure(gp.schedule, result.problem.name), p, flag)
    for where, fig in op_pictures(result.problem.name, gp, p):
        LOG.info("%s: wrote %s", flag, save(fig, where, flag))
    return out


def drawable(result) -> bool:
    """Has the result something to draw: a DMA's timed plan, a Fetch's or Commit's, or a
    graph's schedule?"""
    if getattr(graph_plan_of(result.plan), "schedule", None) is not None:
        return True
    b = result.breakdown or {}
    return bool(b.get("engines") or "packets" in b and result.reason is None)


def plot_result(result, path: str | os.PathLike, flag: str = "--plot") -> pathlib.Path:
    """Draw the plan of a ``SolveResult`` or ``VerifyResult`` (planner/api.py) to ``path``;
    a solve's lower bound is marked on the timeline.  A graph: :func:`plot_graph`."""
    check(result.problem, path, flag)
    from .kinds import kind_of
    kind = kind_of(result.problem)
    if kind.has_schedule(result.problem):
        return plot_graph(result, path, flag)
    if kind.pictures == TENSOR_UNIT:  # (a verify keeps no plan: lowered again, as it was)
        if not drawable(result):
            breakdown_of(result, flag)  # (the error that says why)
        plan = result.plan if result.plan is not None else kind.lower(result.problem)
        return save(op_figure(result.problem, plan, result.problem.name, result.lower_bound),
                    path, flag)
    b = breakdown_of(result, flag)
    return draw(path, b, sides_of(result.problem, result.plan), result.problem.name,
                result.lower_bound, flag)
