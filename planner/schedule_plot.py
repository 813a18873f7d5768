"""The picture of a graph's schedule (issue 30, item 4; docs/pictures.md 'A schedule'): one
row per context (main, sub, DMA), each task a bar from its start to its end with its name,
an arrow per hazard from the end of the task written to the start of the task that waits,
the critical path's tasks outlined, the makespan marked.  A pure function of the
:class:`~planner.schedule.Schedule` and a figure (planner/plot.py makes the canvas, applies
its style and writes the file: it imports this module, not the other way round)."""

from __future__ import annotations

from typing import Any

from .schedule import CONTEXTS

_COLOR = {"main": "#4878d0", "sub": "#6acc64", "dma": "#ee854a"}
_CRITICAL, _ARROW = "#d62728", "#505050"


def height() -> float:
    """The figure's height in inches: a row per context."""
    return 1.2 + 0.9 * len(CONTEXTS)


def draw_schedule(fig, schedule, title: str = ""):
    """The schedule on ``fig`` (an empty figure of :func:`height`), one row per
    context."""
    ax = fig.add_subplot()
    row = {c: len(CONTEXTS) - 1 - k for k, c in enumerate(CONTEXTS)}
    critical = {w.task for w in schedule.critical}
    span = max(schedule.makespan, 1)
    for t in schedule.timed:
        y = row[t.task.context]
        on_path = t.task.name in critical
        ax.barh(y, max(t.cycles, span * 0.002), left=t.start, height=0.6,
                color=_COLOR[t.task.context], alpha=0.85,
                edgecolor=_CRITICAL if on_path else "white", linewidth=2 if on_path else 0.5)
        if t.cycles >= span * 0.06:
            ax.text(t.start + t.cycles / 2, y, _short(t.task.name, t.cycles / span),
                    ha="center", va="center", fontsize=7, color="white", clip_on=True)
    for h in schedule.hazards:
        a, b = schedule.timed[h.before], schedule.timed[h.after]
        ax.annotate("", xy=(b.start, row[b.task.context] + 0.3 * _side(a, b, row)),
                    xytext=(a.end, row[a.task.context] - 0.3 * _side(a, b, row)),
                    arrowprops={"arrowstyle": "->", "color": _ARROW, "lw": 0.8,
                                "shrinkA": 0, "shrinkB": 0})
    ax.axvline(schedule.makespan, color=_CRITICAL, lw=1, ls="--")
    ax.set_yticks([row[c] for c in CONTEXTS], [f"{c} context" for c in CONTEXTS])
    ax.set_ylim(-0.7, len(CONTEXTS) - 0.3)
    ax.set_xlim(0, span * 1.02)
    ax.set_xlabel("cycles (arrows: a task waiting for a tensor; outlined: the critical "
                  "path; dashed: the makespan)")
    busy = schedule.busy()
    ax.set_title((f"{title}: " if title else "") + f"makespan {schedule.makespan:,} cycles "
                 f"({schedule.status}); busy " + ", ".join(f"{c} {busy[c]:,}"
                                                           for c in CONTEXTS))
    return fig


def _side(a: Any, b: Any, row: dict[str, int]) -> int:
    """Arrows between rows leave and enter at the bars' facing edges."""
    ra, rb = row[a.task.context], row[b.task.context]
    return 0 if ra == rb else (1 if rb > ra else -1)


def _short(name: str, share: float) -> str:
    most = max(4, int(share * 160))
    return name if len(name) <= most else name[:most - 1] + "…"
