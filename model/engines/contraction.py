"""The Contraction Engine (book: computing-tensors/contraction-engine/; issue 29, item 2).

A contraction reads two operands: a stream from the Collect Engine (``Time``, ``Packet`` of
one 32-byte flit) and a TRF tensor (``Lane``, ``Element``), and runs four stages in a
pipeline, each named by the mapping it outputs (the op's options, as furiosa-opt's
``contract_outer::<OutTime, OutPacket>``, ``contract_packet::<OutPacket>``,
``contract_time::<OutTime>`` and ``contract_lane::<OutTime, OutPacket>(mode)`` name them):

* **Outer**: the Stream Adapter packs ``PackSize`` flits into one packet and broadcasts it
  over the TRF's lanes and, innermost in ``OutTime``, over the axes the stream lacks
  (:func:`stream_adapter`); the TRF Sequencer reads each lane's elements into the same
  ``[Lane, OutTime, OutPacket]`` (:func:`trf_reads`: ``ReadSize``, ``PacketBroadcast``); the
  Multiplier widens both (``i8`` to ``i32``, ``f8`` / ``bf16`` to ``f32``) and multiplies.
* **Packet Reducer**: a tree of depth ``d`` sums the innermost ``2^d`` elements of each
  lane's packet (:func:`packet_reducer`).
* **Time Reducer**: sums the ``Time`` terms absent from its ``OutTime`` into slots of a
  1,024-cell accumulator (:func:`time_reducer`, :func:`slot_capacity`).
* **Lane Folder**: moves ``Lane`` into the output packet or time (model/lane.py, seed 004).

Every function here is pure over mappings; :class:`Contraction` checks an op and gives its
cycles per stage and its MAC utilization; executor/contraction.py runs it on data.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model import limits
from tcplan.model.bytes_cache import BytesLRU, read_only
from tcplan.model.lane import LaneFold, fold
from tcplan.model.mapping import Mapping, held_indices, join, same_holding, split_inner
from tcplan.model.rules import TcplanError, Violation, fail
from tcplan.model.tiers import Tensor

from .base import SPATIAL, flit_elements, flit_violation, same_units

MODES = ("interleaved", "sequential")


# ---- Outer: the Stream Adapter, the TRF Sequencer, the Multiplier ------------------------
@dataclass(frozen=True)
class Packing:
    """The Stream Adapter's configuration, as its compiler derives it."""

    pack: int  # PackSize: flits per packet (1 or 2)
    lanes: int  # LaneBroadcast: the TRF's lanes
    tiling: int  # TimeBroadcast: copies of each packet, innermost in OutTime


def _cut(m: Mapping, n: int) -> tuple[Mapping, Mapping] | None:
    """``m`` cut into (outer, inner of ``n`` positions), or None where no digit boundary
    falls there."""
    if n < 1 or m.size % n:
        return None
    try:
        return split_inner(m, n)
    except TcplanError:
        return None


def stream_adapter(lanes: int, time: Mapping, packet: Mapping, out_time: Mapping,
                   out_packet: Mapping, dtype: str) -> Packing:
    """The Stream Adapter's ``PackSize``, ``LaneBroadcast`` and ``TimeBroadcast`` for
    streaming ``[time, packet]`` as ``[out_time, out_packet]`` over ``lanes`` lanes, or
    ``TcplanError`` naming the constraint of the book's outer.md it breaks (as
    furiosa-opt's ``config_stream_adapter`` checks them)."""
    eb = hw.DTYPE_BYTES[dtype]
    if lanes not in hw.CONTRACT_LANES:
        raise fail("contract-lanes", (out_packet.text(),), lanes=lanes)
    nbytes = out_packet.size * eb
    if nbytes not in hw.CONTRACT_PACKET_BYTES:
        raise fail("contract-outer-packet", (out_packet.text(),), packet=out_packet.text(),
                   elements=out_packet.size, bytes=nbytes)
    pack = nbytes // hw.FLIT_BYTES
    t_cut, p_cut = _cut(time, pack), _cut(out_packet, flit_elements(dtype))
    if t_cut is None or p_cut is None or not same_holding(p_cut[1], packet) or \
            not same_holding(p_cut[0], t_cut[1]):
        inner = t_cut[1].text() if t_cut else f"the innermost {pack} of Time"
        raise fail("contract-pack", (out_packet.text(),), packet=out_packet.text(), pack=pack,
                   want=f"[{inner}, {packet.text()[3:-1]}]" if t_cut else inner)
    outer = t_cut[0]
    o_cut = _cut(out_time, out_time.size // outer.size) if out_time.size % outer.size == 0 \
        else None
    if o_cut is None or not same_holding(o_cut[0], outer):
        raise fail("contract-broadcast", (out_time.text(),), out_time=out_time.text(),
                   outer=outer.text())
    return Packing(pack, lanes, out_time.size // outer.size)


@dataclass(frozen=True)
class TrfReads:
    """The TRF Sequencer's reads, as its compiler derives them (outer.md 'TRF Sequencer')."""

    read_size: int  # elements one read takes from a lane's Element
    packet_broadcast: int  # copies of a read filling the packet
    banks: int  # TRF banks a read spans (1, or 2 past 32 bytes)


def trf_reads(element: Mapping, out_packet: Mapping, dtype: str) -> TrfReads:
    """The largest ``ReadSize`` with ``Element % ReadSize`` holding what ``OutPacket %
    ReadSize`` does and at most 64 bytes."""
    eb = hw.DTYPE_BYTES[dtype]
    r = hw.CONTRACT_PACKET_BYTES[-1] // eb
    while r > 1:
        e, p = _cut(element, r), _cut(out_packet, r)
        if e is not None and p is not None and same_holding(e[1], p[1]):
            break
        r //= 2
    return TrfReads(r, out_packet.size // r, 2 if r * eb > hw.FLIT_BYTES else 1)


def accumulator(stream: str, weight: str) -> str:
    """The Multiplier's output type for a pair of operand types (outer.md 'Operand types'),
    or ``contract-dtypes``."""
    acc = hw.CONTRACT_ACCUMULATOR.get(stream)
    if acc is None or weight != stream:
        raise TcplanError(Violation("contract-dtypes", (stream, weight), {
            "stream": stream, "weight": weight, "detail": ""}))
    return acc


# ---- the reducers ---------------------------------------------------------------------------
def packet_reducer(packet: Mapping, out_packet: Mapping) -> int:
    """The tree depth ``d`` whose ``ReducePacket = Packet / 2^d`` holds ``out_packet``
    (its outermost padding trimmed), or ``contract-packet-reduce`` (packet-reducer.md)."""
    n = out_packet.size
    if n > hw.CONTRACT_ACCUMULATOR_COLS or n & (n - 1):
        raise fail("contract-packet-reduce", (out_packet.text(),), packet=packet.text(),
                   out=out_packet.text(), why=f"OutPacket has {n} elements, not a power of "
                   f"two of at most {hw.CONTRACT_ACCUMULATOR_COLS}")
    d = 0
    while 1 << d <= packet.size:
        cut = _cut(packet, 1 << d)
        if cut is not None and same_units(cut[0], out_packet):
            return d
        d += 1
    raise fail("contract-packet-reduce", (out_packet.text(),), packet=packet.text(),
               out=out_packet.text(), why="no Packet / 2^d holds it (the tree sums the "
               "innermost 2^d elements; the padding it trims is outermost)")


def time_reducer(time: Mapping, out_time: Mapping) -> tuple[tuple[int, ...], int]:
    """The positions among ``time``'s terms of those ``out_time`` keeps (its terms, in
    order: the rest are summed away) and ``InnerTime``: the kept terms' size inner to the
    outermost summed term (1 where none is summed), or ``contract-time-reduce``
    (time-reducer.md)."""
    terms, want = time.terms, out_time.terms if out_time.size > 1 else ()
    kept: list[int] = []
    i = 0
    for w in want:
        while i < len(terms) and not same_holding(terms[i], w):
            i += 1
        if i == len(terms):
            raise fail("contract-time-reduce", (out_time.text(),), time=time.text(),
                       out=out_time.text())
        kept.append(i)
        i += 1
    summed = [k for k in range(len(terms)) if k not in kept and terms[k].size > 1]
    inner = 1
    if summed:
        for k in kept:
            if k > summed[0]:
                inner *= terms[k].size
    return tuple(kept), inner


def slot_capacity(mode: str, lanes: int, packet: int) -> int:
    """Slots of the Time Reducer's accumulator (time-reducer.md 'Constraints'): a slot is
    ``[Lane # 8, Packet]`` (interleaved) or ``[Lane, Packet # 32]`` (sequential)."""
    cells = (hw.LANE_FOLD_BUS * packet if mode == "interleaved"
             else lanes * hw.CONTRACT_ACCUMULATOR_COLS)
    return hw.CONTRACT_ACCUMULATOR_CELLS // cells


# ---- the engine ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Contraction:
    """The Contraction Engine configured: each stage's output (the op's options)."""

    outer_time: Mapping
    outer_packet: Mapping
    packet: Mapping  # the Packet Reducer's OutPacket
    time: Mapping  # the Time Reducer's OutTime
    mode: str  # the Lane Folder's LaneMode

    name = "contract"

    def lower(self, src: Tensor, trf: Tensor, out: Tensor,
              axes: dict[str, int]) -> "ContractionPlan":
        """The op checked stage by stage: its plan, or ``TcplanError`` naming every rule
        it breaks (a stage's input is the previous stage's output, so checking stops at
        the first stage that breaks one)."""
        bad = flit_violation("Contraction", "input", src, "collect the stream first (a "
                             "Collect op makes one flit per packet)")
        bad += _spatial(src, trf, out)
        try:
            acc = accumulator(src.dtype, trf.dtype)
        except TcplanError as e:
            bad += e.violations
            acc = hw.CONTRACT_ACCUMULATOR.get(src.dtype, "f32")
        if out.dtype != acc:
            bad.append(Violation("contract-dtypes", (out.dtype,), {
                "stream": src.dtype, "weight": trf.dtype,
                "detail": f"; the result is {acc}, not {out.dtype}"}))
        if bad:
            raise TcplanError(bad)
        lane, elem = trf.dims["lane"], trf.dims["element"]
        packing = stream_adapter(lane.size, src.dims["time"], src.dims["packet"],
                                 self.outer_time, self.outer_packet, src.dtype)
        reads = trf_reads(elem, self.outer_packet, trf.dtype)
        depth = packet_reducer(self.outer_packet, self.packet)
        kept, inner = time_reducer(self.outer_time, self.time)
        slots = slot_capacity(self.mode, lane.size, self.packet.size)
        if inner > slots:
            raise fail("contract-slots", (self.time.text(),), inner=inner, slots=slots,
                       mode=self.mode, lanes=lane.size, packet=self.packet.size)
        folded = fold(axes, lane, self.time, self.packet, self.mode,
                      out.dims["time"], out.dims["packet"])
        plan = ContractionPlan(self, src, trf, out, axes, packing, reads, depth, kept,
                               inner, folded)
        plan.check_operands()
        return plan


def _spatial(src: Tensor, trf: Tensor, out: Tensor) -> list[Violation]:
    """``engine-spatial``: the TRF and the result sit on the stream's units."""
    return [Violation("engine-spatial", (t.dims[d].text(),), {
        "engine": "Contraction", "dim": d.title(), "got": t.dims[d].text(),
        "want": src.dims[d].text()})
        for t in (trf, out) for d in SPATIAL if not same_units(src.dims[d], t.dims[d])]


@dataclass(frozen=True)
class ContractionPlan:
    """A checked contraction: its operands, result, each stage's derived configuration."""

    engine: Contraction
    src: Tensor
    trf: Tensor
    out: Tensor
    axes: dict[str, int]
    packing: Packing
    reads: TrfReads
    depth: int  # the Packet Reducer's tree depth
    kept: tuple[int, ...]  # the outer OutTime's terms the Time Reducer keeps
    inner_time: int  # InnerTime: slots the Time Reducer fills
    folded: LaneFold

    @property
    def joint(self) -> Mapping:
        """The Outer stage's product: ``[Lane, OutTime, OutPacket]``."""
        e = self.engine
        return join([self.trf.dims["lane"], e.outer_time, e.outer_packet])

    def check_operands(self) -> None:
        """``contract-trf``: every element of the TRF's axes the product reads at a lane
        is one that lane holds; ``contract-reduce-axes``: the digits the reducers sum are
        digits the result does not hold (it may hold other digits of their axes: partial
        sums), and what they keep is."""
        need, ok = self.trf_positions()
        if not ok.all():
            at = int(np.flatnonzero(~ok)[0])
            T, P = self.engine.outer_time.size, self.engine.outer_packet.size
            raise fail("contract-trf", (self.trf.dims["element"].text(),),
                       element=self.trf.dims["element"].text(), lane=at // (T * P),
                       time=at // P % T, packet=at % P)
        clash = sorted({a for a, lo, radix in self.summed_digits()
                        for f in (f for m in self.out.dims.values() for f in m.factors)
                        if f.axis == a and lo < f.lo * f.radix and f.lo < lo * radix})
        if clash:
            raise fail("contract-reduce-axes", (self.engine.time.text(),),
                       axes=", ".join(clash))

    def trf_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Per position of :attr:`joint` where it holds an index: the TRF element the lane
        reads there (-1 where the product holds nothing), and whether the TRF holds it
        (the TRF Sequencer's reads, derived once per plan)."""
        return self._trf_reads

    @cached_property
    def _trf_reads(self) -> tuple[np.ndarray, np.ndarray]:
        return trf_reads_table(self.joint, self.trf.dims["lane"], self.trf.dims["element"],
                               tuple(self.axes.items()))

    def summed_digits(self) -> set[tuple[str, int, int]]:
        """The digits ``(axis, lo, radix)`` the two reducers sum: the Packet Reducer's
        tree and the Time terms the Time Reducer leaves out.  The result may carry other
        digits of the same axis: its value there is a partial sum (a slice's share of a
        sum the Inter-Slice Reducer completes, docs/decisions.md item 105)."""
        e = self.engine
        cut = split_inner(e.outer_packet, 1 << self.depth)[1]
        terms = e.outer_time.terms
        gone = [t for k, t in enumerate(terms) if k not in self.kept and t.size > 1]
        return {(f.axis, f.lo, f.radix) for m in (cut, *gone) for f in m.factors
                if f.axis is not None}

    # ---- cycles and MAC utilization ----------------------------------------------------
    def stages(self) -> list[dict[str, Any]]:
        """Each stage's cycles per slice (one packet a cycle through each, the Stream
        Adapter taking one flit a cycle) and its fill latency."""
        e, src = self.engine, self.src
        packets = e.outer_time.size
        return [
            {"stage": "stream adapter", "cycles": max(src.dims["time"].size, packets),
             "latency": 0, "what": f"{src.dims['time'].size:,} flit(s) in, "
             f"{packets:,} packet(s) out (PackSize {self.packing.pack}, TimeBroadcast "
             f"{self.packing.tiling})"},
            {"stage": "multiplier", "cycles": packets, "latency": 0,
             "what": f"{self.packing.lanes} lane(s) x {e.outer_packet.size} products a "
             "cycle"},
            {"stage": "packet reducer", "cycles": packets, "latency": self.tree_latency,
             "what": f"tree depth {self.depth} (pipelined: {self.tree_latency} cycles to "
             "the first output)"},
            {"stage": "time reducer", "cycles": packets, "latency": 0,
             "what": f"{self.inner_time} slot(s) of "
             f"{slot_capacity(e.mode, self.packing.lanes, e.packet.size)}"},
            {"stage": "lane folder", "cycles": self.folded.cycles, "latency": 0,
             "what": f"{self.folded.cycles:,} flit(s) out ({e.mode})"},
        ]

    @property
    def tree_latency(self) -> int:
        """The adder tree's first-output latency: log2 of a 64-byte packet's elements (7
        for i4, 6 for i8 and f8, 5 for bf16: packet-reducer.md 'Performance')."""
        return (hw.CONTRACT_PACKET_BYTES[-1] // hw.DTYPE_BYTES[self.src.dtype]).bit_length() - 1

    @property
    def bottleneck(self) -> dict[str, Any]:
        return max(self.stages(), key=lambda s: s["cycles"])

    @property
    def cycles(self) -> int:
        """Cycles per slice: the slowest stage, plus the tree's fill latency."""
        return self.bottleneck["cycles"] + self.tree_latency

    @property
    def useful_products(self) -> int:
        """Products per slice of an element held by both operands (the Outer's positions
        that hold an index)."""
        return int(held_indices(self.joint)[1].sum())

    @property
    def mac_utilization(self) -> float:
        """Useful products over the multipliers' slots in the cycles they are busy: 8
        lanes of a 64-byte packet a cycle (the book's batched matmul: K in Time 1/32,
        M or V in Time 1)."""
        slots = hw.LANE_FOLD_BUS * (hw.CONTRACT_PACKET_BYTES[-1]
                                    // hw.DTYPE_BYTES[self.src.dtype])
        return self.useful_products / (self.engine.outer_time.size * slots)

    def derived(self) -> dict[str, int]:
        return {"PackSize": self.packing.pack, "LaneBroadcast": self.packing.lanes,
                "TimeBroadcast": self.packing.tiling, "ReadSize": self.reads.read_size,
                "PacketBroadcast": self.reads.packet_broadcast, "banks": self.reads.banks,
                "tree depth": self.depth, "InnerTime": self.inner_time}

    def breakdown(self) -> dict[str, Any]:
        b = self.bottleneck
        return {"engine": "contract", "cycles": self.cycles, "stages": self.stages(),
                "packets_in": self.src.dims["time"].size,
                "packets_out": self.out.dims["time"].size,
                "mac_utilization": round(self.mac_utilization, 6),
                "useful_products": self.useful_products,
                "bottleneck": f"the {b['stage']} ({b['cycles']:,} cycles per slice, every "
                              f"slice in parallel) plus the adder tree's {self.tree_latency}"
                              "-cycle fill"}

    def to_json(self) -> dict[str, Any]:
        e = self.engine
        return {"engine": "contract", "dtype": self.src.dtype, "result": self.out.dtype,
                "outer": {"time": e.outer_time.text(), "packet": e.outer_packet.text()},
                "packet": e.packet.text(), "time": e.time.text(), "lane_mode": e.mode,
                "output": {"time": self.out.dims["time"].text(),
                           "packet": self.out.dims["packet"].text()},
                "derived": self.derived(), "breakdown": self.breakdown()}

    def text(self) -> str:
        e, s = self.engine, self.src.dims
        util = self.mac_utilization
        lines = [
            f"contract: {self.src.dtype} x {self.trf.dtype} -> {self.out.dtype}",
            f"  stream: Time {s['time'].text()}, Packet {s['packet'].text()}; TRF Lane "
            f"{self.trf.dims['lane'].text()}, Element {self.trf.dims['element'].text()}",
            f"  outer: OutTime {e.outer_time.text()}, OutPacket {e.outer_packet.text()}",
            f"  packet reducer: OutPacket {e.packet.text()}; time reducer: OutTime "
            f"{e.time.text()}; lane folder ({e.mode}): Time "
            f"{self.out.dims['time'].text()}, Packet {self.out.dims['packet'].text()}",
            "  derived: " + ", ".join(f"{k} {v}" for k, v in self.derived().items()),
            *(f"  {st['stage']}: {st['cycles']:,} cycles ({st['what']})"
              for st in self.stages()),
            f"  cycles: {self.cycles:,} per slice, every slice in parallel (bottleneck: "
            f"{self.bottleneck['stage']})",
            f"  MAC utilization: {util:.4f} ({self.useful_products:,} useful products in "
            f"{e.outer_time.size:,} cycles of {hw.LANE_FOLD_BUS} lanes x "
            f"{hw.CONTRACT_PACKET_BYTES[-1] // hw.DTYPE_BYTES[self.src.dtype]} multipliers)"]
        return "\n".join(lines)


#: the TRF reads of recent plans, by what they depend on (:func:`trf_reads_table`): the
#: moves search lowers each candidate's contraction twice, as a candidate and as its graph's
#: op; bounded by the bytes of the arrays kept (``limits.TRF_READS_CACHE_BYTES``)
_TRF_READS: BytesLRU[tuple[np.ndarray, np.ndarray]] = BytesLRU(
    limits.TRF_READS_CACHE_BYTES, lambda v: v[0].nbytes + v[1].nbytes)


def trf_reads_table(joint: Mapping, lane: Mapping, elem: Mapping,
                    axes: tuple[tuple[str, int], ...]) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`ContractionPlan.trf_positions` of a plan whose product is ``joint`` and whose
    TRF holds ``lane`` x ``elem`` (read-only arrays, shared by every plan alike)."""
    def make() -> tuple[np.ndarray, np.ndarray]:
        got = _trf_reads(joint, lane, elem, dict(axes))
        read_only(*got)
        return got
    return _TRF_READS.get((joint, lane, elem, axes), make)


def _trf_reads(joint: Mapping, lane: Mapping, elem: Mapping, axes: dict[str, int]
               ) -> tuple[np.ndarray, np.ndarray]:
    """The TRF reads computed: each held (lane, index) key of the TRF sorted, each
    position of the product searched among them."""
    taxes = [a for a in axes if a in set(lane.used_axes) | set(elem.used_axes)]
    jc, jh = held_indices(joint)
    L, E = lane.size, elem.size
    N = limits.product(axes[a] for a in taxes)
    limits.check(N * L, limits.SIM_MAX_ELEMENTS, "the TRF operand's lanes over its axes",
                 "elements", {f"lane {lane.text()}": L, **{a: axes[a] for a in taxes}})
    lc, lh = held_indices(lane)
    ec, eh = held_indices(elem)
    key_t = np.zeros((L, E), np.int64)
    stride = 1
    key_j = np.zeros(jh.shape, np.int64)
    for a in reversed(taxes):
        key_t += (lc.get(a, np.zeros(L, np.int64))[:, None]
                  + ec.get(a, np.zeros(E, np.int64))[None]) * stride
        key_j += jc.get(a, np.zeros(jh.size, np.int64)) * stride
        stride *= axes[a]
    held_t = lh[:, None] & eh[None]
    for a in taxes:
        held_t &= (lc.get(a, np.zeros(L, np.int64))[:, None]
                   + ec.get(a, np.zeros(E, np.int64))[None]) < axes[a]
    # (a sorted index of the TRF's held (lane, index) keys, searched: no table of N)
    lanes = np.broadcast_to(np.arange(L)[:, None], (L, E))
    keys = (lanes * N + key_t)[held_t]
    order = np.argsort(keys, kind="stable")
    keys, elems = keys[order], (np.flatnonzero(held_t.reshape(-1)) % E)[order]
    jl = np.arange(jh.size) // (jh.size // L)
    want = jl * N + np.where(jh, key_j, 0)
    at = np.minimum(np.searchsorted(keys, want), max(keys.size - 1, 0))
    found = jh & (keys.size > 0) & (keys[at] == want) if keys.size else np.zeros_like(jh)
    pos = np.where(found, elems[at] if keys.size else 0, -1)
    return pos, ~jh | (pos >= 0)

