"""The pictures of a Fetch or a Commit (issue 31, item 5; docs/pictures.md, "A Fetch or a
Commit"): what one slice's engine does, every slice doing the same at once.

* the DM banks of a slice (a heatmap): its first :data:`WINDOW` hardware accesses
  (columns, one per cycle) over the slice's 16 DM banks (rows), each cell the bytes the access
  touches in the bank; the packets' ends marked; the longest run on one bank in view outlined;
* the cycles (a timeline): the slice's packets back to back, each ``accesses_per_packet``
  accesses of ``access_bytes``, the total and the lower bound marked.

:func:`picture_data` gathers what they draw from a lowered plan (model/tu.py): the cycle
breakdown ``TuPlan.breakdown()`` (what ``verify --json`` prints) and the first accesses'
addresses; :func:`draw` is a pure function of that dictionary.  planner/plot.py makes the
canvas, applies its style and writes the file (it imports this module, not the other way
round)."""

from __future__ import annotations

import math
from typing import Any

from tcplan.model import hardware as hw
from tcplan.model import tu

from . import heatmap

WINDOW = 64  # the accesses the heatmap shows, from the first
_COLOR = {"fetch": "#4878d0", "commit": "#ee854a"}  # planner/plot.py's read and write
_MARK, _BOUND = "#d62728", "#2ca02c"
BANKS_HEIGHT = 0.2 * hw.DM_BANKS_PER_SLICE + 1.6  # inches: the heatmap, its titles, its axis
TIMELINE_HEIGHT = 2.3  # inches: one row, its title, its axis and the legend below


def height() -> float:
    """The figure's height in inches (the two pictures)."""
    return BANKS_HEIGHT + TIMELINE_HEIGHT


def picture_data(plan: tu.TuPlan, window: int = WINDOW) -> dict[str, Any]:
    """What the pictures draw: the plan's breakdown, the DM tensor's address, and the first
    ``window`` accesses as ``[address, bytes]`` (each slice's own, from the tensor's address:
    model/tu.py's ``access_walk``, the walk ``longest_bank_run`` counts)."""
    entries, width = tu.access_walk(plan.config, plan.access)
    base = plan.memory.address
    total = math.prod(n for n, _ in entries)
    walk = []
    for i in range(min(total, window)):
        address, rest = base, i
        for n, step in reversed(entries):  # (innermost first)
            address += rest % n * step
            rest //= n
        walk.append([address, width])
    return {**plan.breakdown(), "address": base, "accesses": total, "walk": walk}


def bank_grid(walk: list[list[int]]) -> list[list[int]]:
    """Per DM bank (row) and access (column), the bytes the access touches in the bank."""
    grid = [[0] * len(walk) for _ in range(hw.DM_BANKS_PER_SLICE)]
    for col, (address, width) in enumerate(walk):
        for byte in range(address, address + width):
            grid[byte % hw.DM_BANK_STRIPE // hw.DM_BANK_BYTES][col] += 1
    return grid


def longest_run(grid: list[list[int]]) -> tuple[int, int, int]:
    """The longest run of consecutive accesses touching one bank: (bank, first access,
    length); the first such run, lowest bank first."""
    best = (0, 0, 0)
    for bank, row in enumerate(grid):
        start = 0
        for col, v in enumerate(row + [0]):
            if not v:
                if col - start > best[2]:
                    best = (bank, start, col - start)
                start = col + 1
    return best


def draw(fig, d: dict[str, Any], lower_bound: int | None = None) -> list[heatmap.Panel]:
    """Both pictures on ``fig`` (an empty figure of :func:`height`); the heatmap's panel,
    for :func:`heatmap.fit`."""
    banks, timeline = fig.subfigures(2, 1, height_ratios=[BANKS_HEIGHT, TIMELINE_HEIGHT])
    panel = _draw_banks(banks, d)
    _draw_timeline(timeline, d, lower_bound)
    return [panel]


def _draw_banks(target, d: dict[str, Any]) -> heatmap.Panel:
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import Normalize
    from matplotlib.patches import Rectangle
    grid = np.array(bank_grid(d["walk"]), dtype=float)
    shown = grid.shape[1]
    ax = target.subplots()
    norm = Normalize(0.0, float(hw.DM_BANK_BYTES))
    im = ax.imshow(np.ma.masked_equal(grid, 0), aspect="auto", norm=norm,
                   interpolation="none",
                   cmap=colormaps["Blues"].with_extremes(bad="#f4f4f4"))
    digits = heatmap.cell_font(heatmap.root(ax))
    ax.set_yticks(range(hw.DM_BANKS_PER_SLICE), [str(k) for k in range(
        hw.DM_BANKS_PER_SLICE)], fontsize=digits)
    step = max(1, -(-shown // 32))
    ax.set_xticks(range(0, shown, step), [str(c) for c in range(0, shown, step)],
                  fontsize=digits)
    ax.set_xlabel("access (one per cycle, from the slice's first)", fontsize=8)
    ax.set_ylabel(f"DM bank ({hw.DM_BANK_BYTES} B each, {hw.DM_BANK_STRIPE} B stripe)",
                  fontsize=8)
    per = d["accesses_per_packet"]
    if per > 1:  # where a packet ends (a packet per access: every column)
        for k in range(per, shown, per):
            ax.axvline(k - 0.5, color="black", lw=0.8)
    bank, first, n = longest_run(grid.tolist())
    if n > 1:
        ax.add_patch(Rectangle((first - 0.5, bank - 0.5), n, 1, fill=False, edgecolor=_MARK,
                               lw=1.5))
    panel = heatmap.Panel(ax, ax.set_title(_banks_title(d, shown, n), fontsize=9, loc="left"))
    for i, j in zip(*np.nonzero(grid)):
        heatmap.number(panel, j, i, f"{grid[i, j]:.0f}", norm(grid[i, j]) > 0.6)
    bar = target.colorbar(im, ax=ax, pad=0.005, fraction=0.015, aspect=10)
    bar.set_label("bytes in the bank", fontsize=7)
    bar.ax.tick_params(labelsize=6.5)
    return panel


def _banks_title(d: dict[str, Any], shown: int, run: int) -> str:
    which = (f"its {shown:,}" if shown == d["cycles"] else
             f"the first {shown:,} of its {d['cycles']:,}")
    return (f"{d['engine'].title()}'s DM banks in each slice: {which} accesses of "
            f"{d['access_bytes']} B, the bytes each touches per bank"
            + ("; packets end at the black lines" if d["accesses_per_packet"] > 1 else "")
            + f"; the longest run on one bank in view {run}"
            + (" (outlined in red)" if run > 1 else "")
            + f", in the whole walk {d['longest_bank_run']:,} (at most "
            f"{d['bank_run_limit']})")


def _most(context: str) -> int:
    return hw.FETCH_MAX_READ_BYTES if context == "main" else hw.SUB_CONTEXT_ACCESS_BYTES


def _draw_timeline(target, d: dict[str, Any], lower_bound: int | None) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter
    ax = target.subplots()
    cycles, per, packets = d["cycles"], d["accesses_per_packet"], d["packets"]
    engine = d["engine"]
    ax.barh(0, cycles, left=0, height=0.6, color=_COLOR[engine])
    handles: list[Any] = [Patch(color=_COLOR[engine], label=(
        f"{'reads' if engine == 'fetch' else 'writes'} of {d['access_bytes']} B, one per "
        "cycle")), Line2D([], [], color=_MARK, ls="--", label="total")]
    if per > 1 and packets <= 128:  # the packets' ends, while they stay apart
        for k in range(1, packets):
            ax.plot([k * per] * 2, [-0.3, 0.3], color="black", lw=0.6)
        handles.insert(1, Line2D([], [], color="black", lw=0.6, label="a packet's end"))
    ax.text(cycles, 0, f"  {cycles:,} ({packets:,} packet(s) x {per} access(es) of "
            f"{d['access_bytes']} B)", va="center", fontsize=7)
    ax.axvline(cycles, color=_MARK, ls="--", lw=1.2)
    if lower_bound:
        ax.axvline(lower_bound, color=_BOUND, ls=":", lw=1.2)
        handles.append(Line2D([], [], color=_BOUND, ls=":", label=(
            f"lower bound {lower_bound:,} (accesses of {_most(d['context'])} B)")))
    ax.set_yticks([0], [f"{engine.title()}, each of {d['slices']:,} slice(s) "
                        f"({d['context']} context)"], fontsize=7)
    ax.set_ylim(-0.6, 0.6)
    ax.set_xlim(0, max(cycles, lower_bound or 0) * 1.25)
    ax.set_xlabel("cycles", fontsize=8)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_title(f"{engine.title()}'s cycles: {cycles:,} in every slice at once; packets of "
                 f"{d['packet_bytes']} B at {d['bytes_per_cycle']:g} B/cycle", fontsize=10,
                 fontweight="bold", loc="left")
    heatmap.legend_below(target, handles)
    ax.grid(axis="x", color="#e0e0e0", lw=0.5)
    ax.set_axisbelow(True)
