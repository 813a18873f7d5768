"""Text renderings of lowered plans and cycle reports (`tcplan lower`, `verify`, `solve`):
one home for them, used by the problem kinds (planner/kinds/) and the CLI."""

from __future__ import annotations

from typing import Any

from tcplan.model import hardware as hw
from tcplan.model.rules import TcplanError
from tcplan.model.sequencer import SequencerConfig

#: exit codes: success; a hardware rule (or an unmet check) stops the request; bad input
EXIT_OK, EXIT_RULE, EXIT_INPUT = 0, 1, 2


def format_error(err: TcplanError) -> str:
    """Every violation of an error, with its fix."""
    out = []
    for v in err.violations:
        out.append(f"error [{v.rule}]: {v.message}")
        out.append(f"  fix: {v.fix}")
    return "\n".join(out)


def format_table(cfg: SequencerConfig, buf: str, time: str, packet: str) -> str:
    lines = [f"buffer {buf}   time {time}   packet {packet}",
             f"dtype {cfg.dtype}, mode {cfg.mode}, engine {cfg.engine}", ""]
    final_of: dict[int, int] = {}
    for k, g in enumerate(cfg.groups):
        for entry in g:
            final_of[entry] = k
    head = ("#", "side", "stream term", "piece", "buffer term", "size", "stride", "final")
    rows = [head]
    for k, e in enumerate(cfg.raw):
        rows.append((str(k), e.side, e.term, e.piece or "", e.buffer_term or "(broadcast)",
                     str(e.size), str(e.stride), str(final_of[k])))
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    right = {0, 5, 6, 7}
    for r in rows:
        lines.append("  ".join(x.rjust(w) if c in right else x.ljust(w)
                               for c, (x, w) in enumerate(zip(r, widths))).rstrip())
    if not cfg.raw:
        lines.append("(no entries: every term has size 1)")
    lines.append("")
    merged = [g for g in cfg.groups if len(g) > 1]
    if merged:
        lines.append(f"{len(cfg.raw)} raw entries exceed {hw.MAX_SEQUENCER_ENTRIES}; merged "
                     "physically contiguous pairs:")
        for g in merged:
            k = cfg.groups.index(g)
            parts = " + ".join(f"{cfg.raw[r].size} : {cfg.raw[r].stride}" for r in g)
            n, s = cfg.entries[k]
            lines.append(f"  raw {', '.join(map(str, g))}: {parts} -> {n} : {s}")
    else:
        lines.append(f"entries shown unmerged ({len(cfg.raw)} <= {hw.MAX_SEQUENCER_ENTRIES})")
    lines.append(f"config               {cfg.text()}")
    lines.append(f"packet size          {_elements(cfg.packet_size)} ({cfg.packet_bytes} B)")
    lines.append(f"contiguous run       {_elements(cfg.contiguous_run)}")
    lines.append(f"max access size      {_elements(cfg.max_access_size)}")
    lines.append(f"accesses per packet  {cfg.accesses_per_packet}")
    return "\n".join(lines)


def _elements(n: int) -> str:
    return f"{n} element{'' if n == 1 else 's'}"


def format_indexed(name: str, plan: Any) -> str:
    what = "byte offsets (row r at r * row_bytes)" if plan.variant == "scaled" else \
        "raw row positions"
    eb = plan.table.elem_bytes
    ent = ", ".join(f"{n} : {_sym(s * eb, 'dm')}" for n, s in plan.dm_entries)
    return "\n".join([
        f"{name}: {plan.variant} {plan.kind} over {plan.gather_axis} of "
        f"{plan.table.describe()}",
        f"  {plan.rows} rows of {plan.row.text()} = {plan.row_elements} elements "
        f"({plan.row_bytes} B); index {plan.index.describe()} holds {what}",
        f"  DM side {plan.rows_side.describe()}: [{ent}] : {plan.packet_bytes} B per packet"
        + (f" ({plan.packet.text()}: {plan.row_bytes // plan.packet_bytes} packets a row)"
           if plan.packet_bytes != plan.row_bytes else ""),
    ])


def format_redistribution(name: str, plan: Any) -> str:
    lines = [f"{name}: {plan.source.describe()}"]
    for s in plan.steps:
        if s.sources is not None:
            lines.append(f"  {s.op}({s.sources})")
        elif s.axis is not None:
            lines.append(f"  {s.op}::<{s.axis.text()}, {s.output.text()}>({s.indices})")
        else:
            lines.append(f"  {s.op}()")
    lines.append(f"-> {plan.result.describe()}")
    eb = plan.source.elem_bytes
    for d in plan.descriptors():
        ent = ", ".join(f"{n} : ({r * eb:,}, {w * eb:,})" for n, r, w in d["entries"])
        lines.append(f"  target chip {d['target'][0]} cluster {d['target'][1]}: read chip "
                     f"{d['read'][0]} @ {d['read'][1]:,}, write chip {d['write'][0]} @ "
                     f"{d['write'][1]:,}, [{ent}] : {d['packet'] * eb} B")
    if plan.source.tier == "hbm":
        lines.append("syncs: none derived (an HBM chip shuffle copies whole chips)")
    else:
        lines.append("syncs: " + (", ".join(plan.syncs) if plan.syncs else
                                  "none (local slicing only)"))
    return "\n".join(lines)


def plan_stream_text(plan: Any, dim: str) -> str:
    return plan.stream_dims[dim].text() if hasattr(plan, "stream_dims") else "?"


def _sym(nbytes: int, tier: str) -> str:
    """A DM stride in the seed's symbols (slice_stride, DMN_stride), else bytes."""
    if tier == "dm" and nbytes and nbytes % hw.DM_SLICE_STRIDE == 0:
        for name, unit in (("cluster_stride", hw.DM_CLUSTER_STRIDE),
                           ("DMN_stride", hw.DM_DMN_STRIDE),
                           ("slice_stride", hw.DM_SLICE_STRIDE)):
            if nbytes % unit == 0:
                k = nbytes // unit
                return name if k == 1 else f"{k}*{name}"
    return f"{nbytes:,}"


def format_dma(name: str, plan: Any) -> str:
    eb = plan.elem_bytes
    src, dst = plan.source.tier, plan.destination.tier
    n_cmd = sum(len(e.commands) for e in plan.engines)
    kind = "homogeneous" if plan.homogeneous else "heterogeneous"
    engine = "PCIe DMA" if plan.pcie else f"{kind} aggregate"
    lines = [f"{name}: {src.upper()} -> {dst.upper()}, {plan.source.dtype}, packet "
             f"{plan.packet} elements ({plan.packet_bytes} B); {engine}: "
             f"{len(plan.engines)} engine(s), {n_cmd} command(s)"]
    lines += [f"warning [{w.rule}] {w.message}\n  fix: {w.fix}" for w in plan.warnings]
    if plan.default_stream:
        lines.append("stream (default: destination order, innermost term as Packet): "
                     + ", ".join(f"{d} {plan_stream_text(plan, d)}" for d in ("time", "packet")))
    lines.append("")
    width = max((len(t) for t in plan.terms), default=0)
    for label, k, tier in (("read", 1, src), ("write", 2, dst)):
        lines.append(f"{label} = [")
        for t, e in zip(plan.terms, plan.unified):
            lines.append(f"  {t.ljust(width)} -> {e[0]} : {_sym(e[k] * eb, tier)},")
        lines.append(f"] : {plan.packet_bytes} B")
    lines.append("unified = [")
    for t, (n, r, w) in zip(plan.terms, plan.unified):
        lines.append(f"  {t.ljust(width)} -> {n} : ({_sym(r * eb, src)}, {_sym(w * eb, dst)}),")
    lines.append(f"] : {plan.packet_bytes} B   (strides in bytes)")
    lines.append("")
    for e in plan.engines:
        head = (f"PCIe engine of chip {e.chip}" if plan.pcie else
                f"engine chip {e.chip}, cluster {e.cluster}, DMN pair {e.pair}")
        if e.read_chip != e.chip or e.write_chip != e.chip:
            head += f" (reads chip {e.read_chip}, writes chip {e.write_chip})"
        if len(e.commands) == 1 and not e.commands[0].covers:
            lines.append(f"{head}: read {src.upper()} @ {e.read_base:,}, write {dst.upper()} "
                         f"@ {e.write_base:,}")
            continue
        lines.append(f"{head}: {len(e.commands)} commands")
        for i, c in enumerate(e.commands):
            cov = ", ".join(f"{k.split(':', 1)[1]} in [{a}, {b})" for k, (a, b) in
                            c.covers.items())
            ent = ", ".join(f"{n} : ({r * eb:,}, {w * eb:,})" for n, r, w in c.entries)
            lines.append(f"  exec #{i}: [{ent}] read @ {c.read_base:,}, write @ "
                         f"{c.write_base:,}; covers {cov}")
    from tcplan.model.hbm_bits import moved_by, report_lines
    for side, t, other in (("source", plan.source, plan.destination),
                           ("destination", plan.destination, plan.source)):
        if t.tier == "hbm":
            lines += report_lines(side, t, moved_by(other))
    return "\n".join(lines)


def _hbm_line(h: dict[str, Any]) -> str:
    """The hottest HBM channel of a cycle breakdown (docs/decisions.md item 73)."""
    return (f"  HBM: hottest channel {h['channel']} of chip {h['chip']}: {h['requests']:,} "
            f"requests, {h['first_opens']:,} first row opens (overlapped), {h['reopens']:,} "
            f"re-opens (40 cycles each); {h['cycles']:,.0f} cycles")


def format_explanation(name: str, rep: dict[str, Any]) -> str:
    """What `tcplan explain` says: the conflict, or what binds a feasible plan."""
    if not rep["feasible"]:
        lines = [f"{name}: no plan. " + (
            "These requirements conflict (no plan meets them all; "
            + ("without any one of them, the others can be met" if rep.get("minimal", True)
               else "the time limit stopped the search before it showed them minimal")
            + ")" + (f", over {rep['options']} options (source layouts, placements, "
                     "engine splits)" if rep.get("options", 1) > 1 else "")
            + (" (the search reached its time limit; these rules alone leave no plan)"
               if rep.get("method") == "rules" else "") + ":")]
        for it in rep["conflict"]:
            head = f"[{it['rule']}]" if it.get("rule") else "[bound]"
            lines.append(f"  {head} {it['message']}")
            lines.append(f"      fix: {it['fix']}")
    else:
        lines = [f"{name}: plannable, {rep['cycles']:,} cycles"
                 + (f" (lower bound {rep['lower_bound']:,})" if "lower_bound" in rep else "")]
        if "bottleneck" in rep:
            lines.append(f"  bottleneck: {rep['bottleneck']}")
        for pen in rep.get("penalties", []):
            lines.append(f"  penalty: {pen}")
        for b in rep.get("binding", []):
            lines.append("  binding: " + (f"[{b['rule']}] " if b.get("rule") else "")
                         + b["title"] + (f" ({b['candidates_rejected']} candidate(s) "
                                         "rejected)" if "candidates_rejected" in b else "")
                         + (f": {b['detail']}" if "detail" in b else ""))
    return "\n".join(lines)
