"""`tcplan solve --report DIR`: one self-contained HTML page of a DMA or PCIe plan
(issue 17, item 5; docs/pictures.md).

``DIR/index.html`` holds, in this order: the summary (status, cycles, lower bound, verified),
the chosen layouts (the plan's stream, and whichever source or destination layout, placement
or address the solve chose), the plan against its lower bound, the cycles with their
breakdown (start-up, read, write, bottleneck, penalties, the busiest HBM channel, every
engine), the three pictures of planner/plot.py inlined as SVG, and the lowered configs (what
``tcplan lower`` prints).  No external file, script, font or network access; everything taken
from the problem is HTML-escaped.  The page is deterministic: the same plan writes the same
bytes (it leaves out the solve's seconds, which ``--json`` reports).
"""

from __future__ import annotations

import html
import os
import pathlib
from typing import Any

from tcplan.model import hardware as hw
from tcplan.model.rules import fail

from . import heatmap, plot
from .kinds.dma import DmaSolved

#: the page is as wide as the pictures are shown (planner/heatmap.py: their numbers are
#: drawn to be read, or left out, at that width)
STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2em auto;
       max-width: REPORT_PXpx; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.7em; text-align: left;
         vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
code, pre { font-family: ui-monospace, 'DejaVu Sans Mono', Menlo, monospace; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 0.8em; overflow-x: auto;
      font-size: 0.85em; }
.summary { font-size: 1.1em; }
.bar { height: 1.1em; background: #4878d0; display: inline-block; vertical-align: middle; }
.bar.bound { background: #2ca02c; }
figure { margin: 1em 0; }
figure svg { max-width: 100%; height: auto; }
""".replace("REPORT_PX", str(heatmap.REPORT_PX))


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _num(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return _e(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.1f}" if v != int(v) else f"{int(v):,}"
    return _e(v)


def _table(rows: list[tuple[str, str]], head: tuple[str, str] | None = None) -> str:
    out = ["<table>"]
    if head:
        out.append(f"<tr><th>{_e(head[0])}</th><th>{_e(head[1])}</th></tr>")
    out += [f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows]
    return "\n".join(out + ["</table>"])


def _chosen(record: DmaSolved) -> list[tuple[str, str]]:
    """The plan's stream and every layout the solve chose, as (what, value) rows."""
    c = record.chosen
    rows: list[tuple[str, str]] = [("stream Time", c.time.text()),
                                   ("stream Packet", c.packet.text())]
    if c.split is not None:
        rows += [(f"stream {d.title()}", m.text()) for d, m in c.split.items()]
    rows += [(f"destination {d.title()}", m.text()) for d, m in c.destination.items()]
    if c.source_element is not None:
        rows.append(("source Element", c.source_element.text()))
    rows += [(f"{side} address (bytes)", f"{a:,}") for side, a in c.addresses.items()]
    return [(_e(what), f"<code>{_e(shown)}</code>") for what, shown in rows]


def _bound(record: DmaSolved) -> str:
    cycles, bound = record.cycles, record.lower_bound
    if not bound:
        return "<p>No lower bound for this plan.</p>"
    ratio = cycles / bound
    verdict = ("at its lower bound" if cycles == bound else
               f"{(ratio - 1) * 100:.1f}% above its lower bound")
    width = 600
    return "\n".join([
        f'<p class="summary">{cycles:,} cycles against a lower bound of {bound:,}: '
        f"cycles / lower bound = <b>{ratio:.3f}</b>, {verdict}.</p>",
        _table([("plan (full cycle model)", f'<span class="bar" style="width:{width}px">'
                 f"</span> {cycles:,}"),
                ("lower bound", f'<span class="bar bound" style="width:'
                 f'{round(width * bound / cycles)}px"></span> {bound:,}'),
                ("estimate (the planner's objective)", _num(record.estimate))]),
        "<p>The lower bound is the transfer's bytes over its bottleneck bandwidth plus one "
        f"start-up: the busiest engine at one {hw.DMA_REQUEST_BYTES}-byte request per cycle "
        f"and each DMN at {hw.DMN_BYTES_PER_CYCLE} B/cycle, each chip's HBM requests spread "
        "evenly over the channels its addresses can reach, and each HBM bank opening each of "
        f"its rows once, one per {hw.HBM_ROW_SWITCH_CYCLES} cycles "
        "(model/cost.py <code>lower_bound</code>). No layout of the same tensors with the "
        "same engines beats it.</p>"])


def _cycles(b: dict[str, Any]) -> str:
    from .render import _hbm_line
    rows = [("cycles", f"{b['cycles']:,}"),
            ("start-up (per engine, its commands')", f"{b['startup']:,}"),
            ("read (the slowest engine's)", _num(b["read"])),
            ("write (the slowest engine's)", _num(b["write"])),
            ("bottleneck", _e(b["bottleneck"]))]
    if b.get("hbm"):
        rows.append(("busiest HBM channel",
                     _e(_hbm_line(b["hbm"]).strip().removeprefix("HBM: "))))
    out = [_table(rows)]
    if b.get("penalties"):
        out.append("<p>Penalties:</p><ul>" + "".join(f"<li>{_e(p)}</li>"
                                                    for p in b["penalties"]) + "</ul>")
    out.append("<table><tr><th>engine (chip, cluster, DMN pair)</th><th>commands</th>"
               "<th>bytes</th><th>read cycles</th><th>write cycles</th><th>cycles</th></tr>")
    for e in b["engines"]:
        out.append(f"<tr><td>{_e(tuple(e['engine']))}</td><td class=n>{e['commands']:,}</td>"
                   f"<td class=n>{e['bytes']:,}</td><td class=n>{_num(e['read_cycles'])}</td>"
                   f"<td class=n>{_num(e['write_cycles'])}</td>"
                   f"<td class=n>{e['cycles']:,}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _verified(record: DmaSolved) -> str:
    v = record.verified
    if v is None:
        return "not verified (the plan was not executed)"
    if not v:
        err = record.error
        return (f"NOT verified [{_e(err.code if err else None)}]: "
                f"{_e(err.message if err else None)}")
    how = "a seeded sample of" if record.check == "sample" else "every one of"
    return f"verified: {how} {record.checked:,} destination elements"


def page(problem, record: DmaSolved, plan) -> str:
    """The report's HTML (a pure function of the problem, its solve record and plan)."""
    from .kinds import kind_of
    b = record.breakdown
    sides = plot.sides_of(problem, plan)
    name = problem.name
    lb = record.lower_bound
    pictures = [
        ("HBM load", "Per chip the transfer touches: requests, first row opens and row "
         "re-opens of each bank (rows, by bank id) on each channel (columns); each channel's "
         "totals above its column; the busiest channel outlined in red.",
         plot.hbm_figure(b)),
        ("DMA engines' timeline", "Each engine's commands back to back: start-up, then the "
         "read (upper half) and the write (lower half), overlapping where they pipeline; the "
         "busiest HBM channel's busy time; the total cycles and the bottleneck in red, the "
         "lower bound in green.", plot.timeline_figure(b, sides, lower_bound=lb)),
        ("DMN load", f"Bytes each DMN moves, and their cycles at {hw.DMN_BYTES_PER_CYCLE} "
         "B/cycle.",
         plot.dmn_figure(b))]
    tensors = [(f"{_e(n)}", f"<code>{_e(problem.tensors[n].describe())}</code>")
               for n in ("source", "destination") if n in problem.tensors]
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>tcplan: {_e(name)}</title>", f"<style>{STYLE}</style>", "</head>", "<body>",
        f"<h1>{_e(name)}</h1>",
        f'<p class="summary">{_e(problem.kind)}, {_e(sides[0].upper())} -&gt; '
        f"{_e(sides[1].upper())}; status <b>{_e(record.status)}</b>; "
        f"<b>{record.cycles:,} cycles</b>"
        + (f", lower bound {lb:,}" if lb else "") + f"; {_verified(record)}.</p>",
        f"<p>Problem file: <code>{_e(problem.path)}</code>. Axes: <code>"
        + _e(", ".join(f"{a}={n}" for a, n in problem.axes.items())) + "</code>.</p>",
        _table(tensors, ("tensor", "as given")),
        "<h2>Chosen layouts</h2>",
        _table(_chosen(record), ("choice", "value")),
        "<h2>Plan against its lower bound</h2>", _bound(record),
        "<h2>Cycles</h2>", _cycles(b),
        "<h2>Pictures</h2>"]
    for title, caption, fig in pictures:
        parts += [f"<h3>{_e(title)}</h3>", f"<p>{_e(caption)}</p>",
                  f"<figure>{plot.svg_text(fig)}</figure>"]
    parts += ["<h2>Lowered configs</h2>",
              "<p>What <code>tcplan lower</code> prints for this plan.</p>",
              f"<pre>{_e(kind_of(problem).render(problem, plan))}</pre>",
              "<p>Written by tcplan (docs/pictures.md).</p>", "</body>", "</html>", ""]
    return "\n".join(parts)


def write_report(result, directory: str | os.PathLike, flag: str = "--report") -> pathlib.Path:
    """Write ``DIR/index.html`` for a solve result (the folder is made if missing; the page
    is replaced atomically)."""
    from .inputs import os_reason
    plot.check(result.problem, None, flag)
    plot.breakdown_of(result, flag)
    text = page(result.problem, result.record, result.plan)
    folder = pathlib.Path(directory)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise fail("bad-request", detail=f"{flag} {str(directory)[:200]}: cannot make the "
                   f"folder ({os_reason(e)})",
                   fix="give a folder that can be created and written") from None
    return plot.write_file(folder / "index.html", text.encode("utf-8"), flag)
