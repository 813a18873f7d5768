"""DMA lowering: (source, destination, stream) -> read, write and unified sequencers per engine.

Seed 002 "컴파일러 유도": the read sequencer projects the source mapping onto the stream, the
write sequencer the destination mapping, and the unified sequencer pairs them entry by entry
(both sides cut at the union of their digit boundaries, so loop counts are shared).  The
stream's Chip, Cluster and Slice mappings select the engines (docs/hardware.md R8): one engine
per (chip, cluster, DMN pair); their entries become per-engine base addresses.  When an
engine's part of the stream holds positions past the end of an axis (A = 15 streamed as
``A # 16``), its work is split into several commands that cover exactly the live part
(Example 6, docs/hardware.md R7); otherwise every engine runs the same descriptor template with
its own bases (a homogeneous aggregate).

Strides and bases are computed in elements and reported in bytes as well.  Address spaces:
HBM byte address per chip; DM virtual addresses per docs/hardware.md R10.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from typing import Any

from . import hardware as hw
from .rules import TcplanError, Violation, fail
from .sequencer import (Layout, _Piece, check_side, coalesce, layout_of_dims, merge_policy,
                        packet_violations, stream_pieces)
from .mapping import TOP, join, number
from .tiers import Tensor, placement_violations

#: address distance between two chips in the combined address space used for the Chip
#: dimension (larger than any per-chip address: 48 GB HBM, 2 GiB of DM virtual addresses)
CHIP_SPACE_BYTES = 2**36
SPATIAL = ("chip", "cluster", "slice")


@dataclass
class Side:
    """One side of a DMA (read or write) as the seed prints it."""

    tier: str
    entries: list[tuple[int, int]]  # elements
    packet: int  # elements
    elem_bytes: int

    @property
    def entries_bytes(self) -> list[tuple[int, int]]:
        return [(n, s * self.elem_bytes) for n, s in self.entries]


@dataclass
class Command:
    """One DMA command of one engine: unified entries and the two base addresses."""

    entries: list[tuple[int, int, int]]  # (size, read stride, write stride), elements
    read_base: int  # bytes, in the source tier's address space
    write_base: int  # bytes
    covers: dict[str, tuple[int, int]] = field(default_factory=dict)  # term -> [start, stop)
    packet: int = 1  # stride0 of this command, elements


@dataclass
class EngineWork:
    chip: int
    cluster: int
    pair: int
    read_base: int  # bytes: the engine's template base
    write_base: int
    commands: list[Command]
    read_chip: int = 0  # the chip whose memory is read (a Tensor DMA may cross chips)
    write_chip: int = 0

    @property
    def engine(self) -> tuple[int, int, int]:
        return (self.chip, self.cluster, self.pair)


@dataclass
class DmaPlan:
    source: Tensor
    destination: Tensor
    terms: list[str]  # stream term of each unified entry
    unified: list[tuple[int, int, int]]  # the descriptor template, elements
    packet: int  # stride0, elements
    read: Side
    write: Side
    engines: list[EngineWork]
    elem_bytes: int
    warnings: list[Violation] = field(default_factory=list)
    pcie: bool = False  # a PCIe DMA (host <-> HBM), not one of the 8 Tensor DMA engines
    default_stream: bool = False  # the problem gave no stream (see default_stream)
    stream_dims: dict = field(default_factory=dict)

    @property
    def homogeneous(self) -> bool:
        return all(len(e.commands) == 1 and not e.commands[0].covers for e in self.engines)

    @property
    def packet_bytes(self) -> int:
        return self.packet * self.elem_bytes

    def to_json(self) -> dict[str, Any]:
        eb = self.elem_bytes
        return {
            "engine_kind": "pcie" if self.pcie else "tensor",
            "default_stream": self.default_stream,
            "source": self.source.tier, "destination": self.destination.tier,
            "packet": self.packet, "packet_bytes": self.packet_bytes,
            "aggregate": "homogeneous" if self.homogeneous else "heterogeneous",
            "read": [list(e) for e in self.read.entries],
            "write": [list(e) for e in self.write.entries],
            "read_bytes": [list(e) for e in self.read.entries_bytes],
            "write_bytes": [list(e) for e in self.write.entries_bytes],
            "unified": [list(e) for e in self.unified],
            "unified_bytes": [[n, r * eb, w * eb] for n, r, w in self.unified],
            "terms": self.terms,
            "engines": [{
                "chip": e.chip, "cluster": e.cluster, "pair": e.pair,
                "read_chip": e.read_chip, "write_chip": e.write_chip,
                "read_base": e.read_base, "write_base": e.write_base,
                "commands": [{
                    "entries": [list(x) for x in c.entries],
                    "entries_bytes": [[n, r * eb, w * eb] for n, r, w in c.entries],
                    "read_base": c.read_base, "write_base": c.write_base,
                    "packet": c.packet,
                    "covers": {k: list(v) for k, v in c.covers.items()},
                } for c in e.commands],
            } for e in self.engines],
            "warnings": [v.to_json() for v in self.warnings],
            "hbm_bits": self.hbm_bits(),
        }

    def hbm_bits(self) -> dict[str, list[dict[str, Any]]]:
        """Per HBM side, the digit on each decoded address bit and whether this transfer
        varies it (:mod:`model.hbm_bits`)."""
        from .hbm_bits import bit_report, moved_by
        sides = (("source", self.source, self.destination),
                 ("destination", self.destination, self.source))
        return {name: bit_report(t, moved_by(other)) for name, t, other in sides
                if t.tier == "hbm"}


#: the last few tensors' layouts (a search lowers the same tensors many times)
_LAYOUTS: dict[int, tuple[Tensor, Layout]] = {}


def _layout(t: Tensor) -> Layout:
    """The tensor's address space in elements (Chip digits step by a whole chip space)."""
    hit = _LAYOUTS.get(id(t))
    if hit is not None and hit[0] is t:
        return hit[1]
    if len(_LAYOUTS) > 64:
        _LAYOUTS.clear()
    out = _layout_of(t)
    _LAYOUTS[id(t)] = (t, out)
    return out


def _layout_of(t: Tensor) -> Layout:
    eb = t.elem_bytes
    chip_unit = CHIP_SPACE_BYTES // eb
    if t.tier in ("hbm", "host"):
        dims = [("Chip", t.dims["chip"], chip_unit)] if "chip" in t.dims else []
        dims.append(("Element", t.dims["element"], 1))
        return layout_of_dims(dims)
    if t.tier == "dm":
        return layout_of_dims([
            ("Chip", t.dims["chip"], chip_unit),
            ("Cluster", t.dims["cluster"], hw.DM_CLUSTER_STRIDE // eb),
            ("Slice", t.dims["slice"], hw.DM_SLICE_STRIDE // eb),
            ("Element", t.dims["element"], 1),
        ])
    raise fail("bad-request", detail=f"DMA between {t.tier} tensors is not modelled",
               fix="DMA moves HBM and DM tensors (PCIe: host <-> HBM)")


def default_stream(source: Tensor, destination: Tensor) -> Tensor:
    """The stream tcplan uses when a problem gives none: the destination's terms in its own
    order, the innermost Element term as the Packet, the rest as Time; the Chip mapping of
    whichever side spreads over chips selects the engines' chips.  (The planner issue
    replaces this default with a searched stream.)"""
    chip = next((t.dims["chip"] for t in (destination, source)
                 if "chip" in t.dims and t.dims["chip"].used_axes), None)
    terms = [term for d in ("cluster", "slice", "element") if d in destination.dims
             for term in destination.dims[d].terms
             if any(f.axis is not None for f in term.factors)]
    packet = terms.pop() if terms else number(1)
    dims = {
        "chip": chip if chip is not None else number(1),
        "cluster": number(1),
        "slice": number(1),
        "time": join(terms),
        "packet": packet,
    }
    return Tensor("stream", "stream", source.dtype, dims, meta={"default": True})


def lower(source: Tensor, destination: Tensor, stream: Tensor, chips: int,
          engine_at: dict[str, int] | None = None, pcie: bool = False,
          relax: frozenset[str] = frozenset()) -> DmaPlan:
    """Lower one DMA transfer (``pcie``: a PCIe DMA between host and HBM), or raise
    :class:`TcplanError` naming every broken rule.  ``relax`` names rules to ignore: only
    the planner's diagnostics use it, to find which rules conflict."""
    violations = _Relaxed(relax)
    tiers = {source.tier, destination.tier}
    if pcie and not (tiers == {"host", "hbm"}):
        violations.append(Violation("dma-tiers", (source.tier, destination.tier), {
            "detail": f"PCIe DMA moves between host and HBM, not {source.tier} -> "
                      f"{destination.tier}", "fix": "use kind: dma for on-chip moves"}))
    if not pcie and not tiers <= {"hbm", "dm"}:
        violations.append(Violation("dma-tiers", (source.tier, destination.tier), {
            "detail": f"Tensor DMA moves among HBM and DM, not {source.tier} -> "
                      f"{destination.tier}",
            "fix": "use kind: pcie for host <-> HBM; TRF and VRF are filled by the Tensor Unit"}))
    if violations:
        raise TcplanError(violations)
    for t in (source, destination):
        violations += placement_violations(t, chips)
    violations.prune()
    violations += _stream_engine_violations(stream, chips)
    violations += _overlap(source, destination)
    if source.dtype != destination.dtype:
        violations.append(Violation("dma-dtype", (), {
            "src": source.dtype, "dst": destination.dtype}))
    violations.prune()
    if violations:
        raise TcplanError(violations)
    eb = source.elem_bytes
    rl, wl = _layout(source), _layout(destination)
    sides = [(d, stream.dims[d]) for d in SPATIAL] + [("time", stream.dims["time"]),
                                                      ("packet", stream.dims["packet"])]
    pieces = stream_pieces((rl, wl), sides)
    v_read, _ = check_side(rl, 0, pieces, "read", "dma")
    v_write, _ = check_side(wl, 1, pieces, "write", "dma")
    violations += v_read + v_write
    temporal = _temporal(pieces, rl, wl)
    violations += _chip_loops(temporal, source, destination)
    raw = [(p.positions, p.strides[0], p.strides[1]) for p in temporal]
    terms = [p.term for p in temporal]
    packet_elems = math.prod(p.positions for p in temporal if p.side == "packet")
    violations += packet_violations("dma", "read", source.dtype, stream.dims["packet"], [])
    final, final_terms, stride0, more = _entries(raw, terms, packet_elems)
    violations += more
    violations.prune()
    if violations:
        raise TcplanError(violations)
    engines = _engines(source, destination, stream, temporal, raw, terms, rl, wl, engine_at)
    if not pcie:
        for e in engines:
            for c in e.commands:
                violations += _alignment(source, destination, e, c)
    violations.prune()
    if violations:
        raise TcplanError(_dedupe(violations))
    read = Side(source.tier, [(n, r) for n, r, _ in final], stride0, eb)
    write = Side(destination.tier, [(n, w) for n, _, w in final], stride0, eb)
    plan = DmaPlan(source, destination, final_terms, final, stride0, read, write, engines, eb)
    plan.pcie = pcie
    plan.default_stream = bool(stream.meta.get("default"))
    plan.stream_dims = stream.dims
    return plan


def _temporal(pieces: list[_Piece], rl: Layout, wl: Layout) -> list[_Piece]:
    """The stream's loop pieces (Time and Packet, outermost first); stream padding is moved
    only where both sides have room for it."""
    for p in pieces:
        if p.side not in SPATIAL and p.positions > p.n and not (
                _room(p, pieces, rl, 0) and _room(p, pieces, wl, 1)):
            p.positions = p.n
    return [p for p in pieces if p.side not in SPATIAL and p.positions > 1]


def loop_pieces(source: Tensor, destination: Tensor, stream: Tensor) -> list[_Piece]:
    """The stream's loop pieces as :func:`lower` cuts them (positions, read and write strides
    in elements): what the layout planner reasons about."""
    rl, wl = _layout(source), _layout(destination)
    sides = [(d, stream.dims[d]) for d in SPATIAL] + [("time", stream.dims["time"]),
                                                      ("packet", stream.dims["packet"])]
    return _temporal(stream_pieces((rl, wl), sides), rl, wl)


class _Relaxed(list):
    """A violation list that drops the rules being relaxed."""

    def __init__(self, relax: frozenset[str]):
        super().__init__()
        self.relax = relax

    def prune(self) -> None:
        if self.relax:
            self[:] = [v for v in self if v.rule not in self.relax]


def _entries(raw: list[tuple[int, int, int]], terms: list[str], packet: int
             ) -> tuple[list, list[str], int, list[Violation]]:
    """Raw unified entries -> the merge policy, stride0 and the innermost entry cut to it."""
    final, groups, violations = merge_policy(raw, terms)
    final_terms = [" * ".join(dict.fromkeys(terms[g] for g in grp)) for grp in groups]
    stride0 = _stride0(final, packet)
    before = len(final)
    final, final_terms = _split_packet(final, final_terms, stride0)
    if len(final) > hw.MAX_SEQUENCER_ENTRIES and before <= hw.MAX_SEQUENCER_ENTRIES:
        # the packet cut a merged run in two: one entry too many
        text = ", ".join(f"{n} : ({r}, {w})" for n, r, w in final)
        violations.append(Violation("entry-limit", tuple(dict.fromkeys(terms)), {
            "count": len(final), "entries": f"[{text}] (the DMA packet splits the innermost "
                                            f"merged run)"}))
    return final, final_terms, stride0, violations


def _room(p: _Piece, pieces: list[_Piece], L: Layout, k: int) -> bool:
    """Do the padding positions of stream piece ``p`` land inside the same factor of side
    ``k`` (its padding), so that moving them touches no other data?"""
    j = p.bufs[k]
    if j is None:
        return k == 0  # a broadcast re-reads one address; a write would overwrite it
    f = L.factors[j]
    reach = (p.positions - 1) * (p.lo // f.lo)
    for q in pieces:
        if q is not p and q.bufs[k] == j:
            reach += (q.n - 1) * (q.lo // f.lo)
    if reach >= f.size:
        return False
    # a destination's padding must be Top (arbitrary) to take moved padding lanes: Zero padding
    # promises zeros and Bottom padding may not be touched
    return k == 0 or all(kind == TOP for _, kind in f.pads)


def _chip_loops(temporal: list[_Piece], src: Tensor, dst: Tensor) -> list[Violation]:
    """A command runs on one chip: Time and Packet must not step across chips."""
    out = []
    for p in temporal:
        for k, t in ((0, src), (1, dst)):
            if p.strides[k] >= CHIP_SPACE_BYTES // t.elem_bytes:
                out.append(Violation("dma-chip-loop", (p.term,), {
                    "term": p.term, "side": "source" if k == 0 else "destination",
                    "tensor": t.describe()}))
                break
    return out


def _dedupe(vs: list[Violation]) -> list[Violation]:
    seen, out = set(), []
    for v in vs:
        key = (v.rule, v.message)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def _units(t: Tensor) -> set[tuple[int, ...]]:
    """The (chip, cluster, slice) units a tensor occupies."""
    dims = [d for d in ("chip", "cluster", "slice") if d in t.dims]
    lives = [np.flatnonzero(t.dims[d].evaluate()[1] == 0).tolist() for d in dims]
    out: set[tuple[int, ...]] = {()}
    for lv in lives:
        out = {u + (x,) for u in out for x in lv}
    return out


def _overlap(src: Tensor, dst: Tensor) -> list[Violation]:
    """A transfer whose source and destination share bytes has no defined result."""
    if src.tier != dst.tier:
        return []
    s0, s1 = src.address, src.address + src.dims["element"].size * src.elem_bytes
    d0, d1 = dst.address, dst.address + dst.dims["element"].size * dst.elem_bytes
    if s0 >= d1 or d0 >= s1:
        return []
    shared = _units(src) & _units(dst)
    if not shared:
        return []
    return [Violation("dma-overlap", (), {
        "tier": src.tier.upper(), "src": f"[{s0:,}, {s1:,})", "dst": f"[{d0:,}, {d1:,})",
        "units": len(shared)})]


def _stream_engine_violations(stream: Tensor, chips: int) -> list[Violation]:
    out = []
    chip, cluster, sl = (stream.dims[d] for d in SPATIAL)
    if chip.size not in (1, chips):
        out.append(Violation("chip-count", (chip.text(),), {
            "tensor": "stream", "mapping": chip.text(), "size": chip.size, "chips": chips,
            "inner": chip.body()}))
    if cluster.size > hw.CLUSTERS_PER_CHIP:
        out.append(Violation("cluster-size", (cluster.text(),), {
            "tensor": "stream", "mapping": cluster.text(), "size": cluster.size}))
    if sl.size > hw.DMA_ENGINES_PER_CLUSTER:
        out.append(Violation("dma-engines", (sl.text(),), {
            "mapping": sl.text(), "size": sl.size}))
    return out


def _stride0(final: list[tuple[int, int, int]], packet: int) -> int:
    """The DMA packet: the part of the stream's packet contiguous on both sides."""
    run = 1
    if final and final[-1][1] == 1 and final[-1][2] == 1:
        run = final[-1][0]
        for k in range(len(final) - 1, 0, -1):
            (_, r1, w1), (n2, r2, w2) = final[k - 1], final[k]
            if r1 == n2 * r2 and w1 == n2 * w2:
                run *= final[k - 1][0]
            else:
                break
    return math.gcd(packet, run)


def _split_packet(final: list, terms: list[str], stride0: int) -> tuple[list, list[str]]:
    """Make the innermost entry exactly ``stride0`` elements long."""
    if not final or stride0 <= 1:
        return final, terms
    merged, groups = coalesce(final)
    n, r, w = merged[-1]
    if n == stride0 and final[-1][0] == stride0:
        return final, terms
    # the innermost merged run holds whole packets: re-express it as (n / stride0, stride0)
    head = sum(len(g) for g in groups[:-1])
    outer_terms = " * ".join(dict.fromkeys(terms[k] for k in groups[-1]))
    out = list(final[:head])
    t = list(terms[:head])
    if n > stride0:
        out.append((n // stride0, r * stride0, w * stride0))
        t.append(outer_terms)
    out.append((stride0, r, w))
    t.append(outer_terms)
    return out, t


def alignment_checks(src_tier: str, dst_tier: str) -> tuple[str, list[tuple[str, int, int]]]:
    """Which Tensor DMA sides must be aligned, and the rule that says so: the access width
    of the memory written binds (the spec's decision 19, furiosa-opt's
    ``assert_dma_layout``; docs/decisions.md item 115): a write into DM 8-byte aligned
    (its strides, its packet and its base), from HBM (``dma-hbm-dm-align``, seed 002
    "제약 조건") or from DM; a write into HBM 1 byte, no rule (what does not cover whole
    256-byte blocks is priced as read-modify-write).  Returns (rule id, [(side, entry
    index 1 read / 2 write, alignment)])."""
    checks = []
    if dst_tier == "dm":
        checks.append(("write", 2, hw.DMA_DM_WRITE_ALIGN))
    from_hbm = src_tier == "hbm"
    return ("dma-hbm-dm-align" if from_hbm else "dma-dm-write-align"), checks


def _alignment(src: Tensor, dst: Tensor, e: "EngineWork", c: "Command") -> list[Violation]:
    """The alignment rules (:func:`alignment_checks`) of one command."""
    eb = src.elem_bytes
    out: list[Violation] = []
    rule, sides = alignment_checks(src.tier, dst.tier)
    checks = [(side, k, c.write_base if k == 2 else c.read_base, align)
              for side, k, align in sides]
    for side, k, base, align in checks:
        bad = [f"stride {x[k] * eb} B of entry {x[0]}" for x in c.entries[:-1]
               if (x[k] * eb) % align]
        if (c.packet * eb) % align:
            bad.append(f"packet {c.packet * eb} B")
        if base % align:
            bad.append(f"{side} base {base}")
        if bad:
            where = f" (engine {e.engine}" + (", a boundary command" if c.covers else "") + ")"
            detail = {"side": side, "align": align, "what": ", ".join(bad[:4])
                      + (f" (and {len(bad) - 4} more)" if len(bad) > 4 else "") + where}
            out.append(Violation(rule, tuple(bad[:4]), detail))
    return out


def _engines(src: Tensor, dst: Tensor, stream: Tensor, temporal: list[_Piece], raw: list,
             terms: list[str], rl: Layout, wl: Layout, engine_at: dict[str, int] | None
             ) -> list[EngineWork]:
    eb = src.elem_bytes
    chip_m, cluster_m, slice_m = (stream.dims[d] for d in SPATIAL)
    ccoords, cstat = chip_m.evaluate()
    lcoords, lstat = cluster_m.evaluate()
    scoords, sstat = slice_m.evaluate()
    single = chip_m.size == cluster_m.size == slice_m.size == 1
    packet_side = [p.side == "packet" for p in temporal]
    out: list[EngineWork] = []
    for chip in range(chip_m.size):
        for cluster in range(cluster_m.size):
            for pair in range(slice_m.size):
                if cstat[chip] or lstat[cluster] or sstat[pair]:
                    continue  # a padding engine position: nothing to move
                index: dict[str, int] = {}
                for coords, pos in ((ccoords, chip), (lcoords, cluster), (scoords, pair)):
                    for a, c in coords.items():
                        index[a] = index.get(a, 0) + int(c[pos])
                rchip, rb = divmod(src.address + _address(rl, index) * eb, CHIP_SPACE_BYTES)
                wchip, wb = divmod(dst.address + _address(wl, index) * eb, CHIP_SPACE_BYTES)
                commands = _commands(index, temporal, raw, terms, packet_side, rb, wb, eb,
                                     stream)
                if not commands:
                    continue
                # the engine's chip: the stream's Chip position, else the source's chip
                eng = (chip if chip_m.size > 1 else rchip, cluster, pair)
                if single and engine_at:
                    eng = (engine_at.get("chip", eng[0]), engine_at.get("cluster", eng[1]),
                           engine_at.get("pair", eng[2]))
                elif single and src.tier == "dm":
                    eng = _local_engine(src, rchip)
                work = EngineWork(*eng, rb, wb, commands)
                work.read_chip, work.write_chip = rchip, wchip
                out.append(work)
    return out


def _local_engine(src: Tensor, chip: int) -> tuple[int, int, int]:
    """The DMA engine local to the source DM's first live slice (seed 002: the default)."""
    cl = src.dims["cluster"].evaluate()[1]
    sl = src.dims["slice"].evaluate()[1]
    cluster = int((cl != 0).argmin())
    first = int((sl != 0).argmin())
    return chip, cluster, first // (2 * hw.SLICES_PER_DMN)


def _address(L: Layout, index: dict[str, int]) -> int:
    """Address (elements) of the digits of ``index`` the layout carries."""
    addr = 0
    for f, w in zip(L.factors, L.weights):
        if f.axis is not None and f.lo:
            d = (index.get(f.axis, 0) // f.lo) % f.radix
            addr += d * w
    return addr


def _commands(index: dict[str, int], temporal: list[_Piece], raw: list, terms: list[str],
              packet_side: list[bool], rb: int, wb: int, eb: int, stream: Tensor
              ) -> list[Command]:
    """The engine's commands: one when its whole part is live, else boxes covering exactly
    the positions whose indices stay inside every axis (Example 6).  Each command gets the
    merge policy and its own packet (stride0)."""
    limits: dict[str, int] = {}
    for m in (stream.dims["time"], stream.dims["packet"]):
        for a, size in m.axes.items():
            limits[a] = size - index.get(a, 0)
    per_axis: dict[str, list[int]] = {}
    for k, p in enumerate(temporal):
        if p.axis is not None and p.lo:
            per_axis.setdefault(p.axis, []).append(k)
    boxes: list[dict[int, tuple[int, int]]] = [{}]
    for a, ks in per_axis.items():
        # live values only: padding a piece keeps (room on both sides) is not an index
        span = sum((temporal[k].n - 1) * temporal[k].lo for k in ks) + 1
        if span <= limits.get(a, span):
            continue  # every value fits
        if limits[a] <= 0:
            return []
        ks = sorted(ks, key=lambda k: -temporal[k].lo)
        axis_boxes = _prefix_boxes([(k, temporal[k].lo, temporal[k].positions) for k in ks],
                                   limits[a], a)
        boxes = [{**b, **ab} for b in boxes for ab in axis_boxes]
    commands = []
    for box in boxes:
        entries, ts = [], []
        r, w = rb, wb
        covers = {}
        packet = 1
        for k, (n, rs, ws) in enumerate(raw):
            lo_, hi_ = box.get(k, (0, n))
            r += lo_ * rs * eb
            w += lo_ * ws * eb
            if (lo_, hi_) != (0, n):
                covers[f"{k}:{terms[k]}"] = (lo_, hi_)
            if hi_ - lo_ > 1:
                entries.append((hi_ - lo_, rs, ws))
                ts.append(terms[k])
                if packet_side[k]:
                    packet *= hi_ - lo_
        final, _, stride0, _ = _entries(entries, ts, packet)
        commands.append(Command(final, r, w, covers, stride0))
    return commands


def _prefix_boxes(digits: list[tuple[int, int, int]], limit: int, axis: str
                  ) -> list[dict[int, tuple[int, int]]]:
    """Boxes covering the digit values whose offset ``sum(lo * d)`` is below ``limit``.

    ``digits`` are (entry index, lo, radix), most significant first, and must be a chain
    (``lo_i == lo_{i+1} * radix_{i+1}``, the least significant ``lo`` dividing the others).
    """
    for (_, lo1, _), (_, lo2, r2) in zip(digits, digits[1:]):
        if lo1 != lo2 * r2:
            raise fail("dma-split", detail=f"the stream digits of {axis} are not contiguous, "
                       f"so the boundary engine's live part is not a union of boxes",
                       fix=f"stream the digits of {axis} next to each other, or pad {axis} so "
                           "that every engine's part is whole")
    boxes: list[dict[int, tuple[int, int]]] = []
    fixed: dict[int, tuple[int, int]] = {}
    unit = digits[-1][1]
    rem = -(-limit // unit)  # offsets are multiples of the least significant lo
    for i, (k, lo, _r) in enumerate(digits):
        scale = lo // unit
        q, rem = divmod(rem, scale)
        if q:
            box = dict(fixed)
            box[k] = (0, q)
            boxes.append(box)
        if not rem and i < len(digits) - 1:
            break
        fixed[k] = (q, q + 1)
    return boxes


def rebased(plan: DmaPlan, read: int, write: int) -> DmaPlan:
    """The same plan with its source moved ``read`` bytes and its destination ``write``
    bytes: every command's and engine's base with them (a plan reused at another address:
    planner/op_cache.py)."""
    import dataclasses
    if not read and not write:
        return plan
    return dataclasses.replace(
        plan,
        source=dataclasses.replace(plan.source, address=plan.source.address + read),
        destination=dataclasses.replace(plan.destination,
                                        address=plan.destination.address + write),
        engines=[dataclasses.replace(
            e, read_base=e.read_base + read, write_base=e.write_base + write,
            commands=[dataclasses.replace(c, read_base=c.read_base + read,
                                          write_base=c.write_base + write)
                      for c in e.commands]) for e in plan.engines])
