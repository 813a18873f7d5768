"""Fetch and Commit: a DM tensor read into the Tensor Unit's stream, and a stream written back.

The Fetch Engine of every slice reads its own DM through one sequencer (seed 000: Fetch and
Commit each address DM with one sequencer), producing the stream ``Time, Packet`` of that
slice; the Commit Engine writes a stream back the same way.  Both keep the tensor's Chip,
Cluster and Slice: each slice moves its own part, all slices at once (docs/hardware.md
section 4, "Fetch and Commit").  A move holds the same mathematical tensor on both sides,
broadcasts included (model/broadcast.py): a Fetch may read one element into many stream
positions (stride-0 entries), a Commit may not write one slot twice.

:func:`lower` derives the per-slice config with every sequencer rule of the engine's profile
(model/sequencer.py: entries, iterations, packet bytes, the innermost access, the write rules
for a Commit, ``unread-axis`` for a Fetch) and adds the rules of its own:

* ``tu-placement``: the stream's Chip, Cluster and Slice are the DM tensor's;
* ``commit-align``: a Commit writes whole 8-byte bank words (its loop strides, its packet and
  the tensor's address are multiples of 8 bytes);
* ``dm-bank-starvation``: no bank is accessed 64 or more times in a row
  (:func:`longest_bank_run`), which would starve a concurrent DMA past the NoC timeout.

Its cycle figure is per slice, every slice in parallel: one hardware access per cycle, a
packet taking ``packet / access`` accesses, an access being the largest power-of-two bytes
(at most 32) of the packet's contiguous run in the main context, 8 bytes in the sub context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import hardware as hw
from . import limits
from .rules import TcplanError, Violation
from .sequencer import SequencerConfig, coalesce, derive
from .tiers import DIM_TITLES, Tensor, dimension_overlap, placement_violations

SPATIAL = ("chip", "cluster", "slice")
MODE = {"fetch": "read", "commit": "write"}
RUN_CAP = limits.BANK_RUN_CAP


@dataclass
class TuPlan:
    """A lowered Fetch or Commit: the per-slice config, its accesses and its bank runs."""

    engine: str  # "fetch" or "commit"
    context: str  # "main" or "sub"
    memory: Tensor  # the DM tensor read or written
    stream: Tensor  # Chip, Cluster, Slice (the memory's), Time, Packet
    config: SequencerConfig
    access: int  # elements per hardware access
    bank_run: int  # the longest run of consecutive accesses to one bank

    @property
    def elem_bytes(self) -> int:
        return self.memory.elem_bytes

    @property
    def packets(self) -> int:
        """Packets per slice: the stream's time steps."""
        return self.stream.dims["time"].size

    @property
    def accesses_per_packet(self) -> int:
        return reads_per_packet(self.config.packet_size, self.access)

    @property
    def cycles(self) -> int:
        """Per slice, every slice in parallel: one access per cycle."""
        return self.packets * self.accesses_per_packet

    @property
    def slices(self) -> int:
        """The live units (chip, cluster, slice) that run the config."""
        n = 1
        for d in SPATIAL:
            n *= int((self.memory.dims[d].evaluate()[1] == 0).sum())
        return n

    def breakdown(self) -> dict[str, Any]:
        eb = self.elem_bytes
        return {"engine": self.engine, "context": self.context, "packets": self.packets,
                "packet_bytes": self.config.packet_size * eb,
                "access_bytes": self.access * eb,
                "accesses_per_packet": self.accesses_per_packet, "slices": self.slices,
                "bytes_per_cycle": round(self.config.packet_size * eb
                                         / self.accesses_per_packet, 3),
                "longest_bank_run": self.bank_run,
                "bank_run_limit": hw.DM_BANK_STARVATION_ACCESSES - 1,
                "cycles": self.cycles}

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "context": self.context,
                "memory": self.memory.describe(),
                "stream": {d: m.text() for d, m in self.stream.dims.items()},
                "config": self.config.to_json(), "breakdown": self.breakdown()}

    def text(self) -> str:
        b = self.breakdown()
        st = self.stream.dims
        rows = [f"{self.engine.title()} ({self.context} context): {self.memory.describe()}",
                f"  stream Time {st['time'].text()}, Packet {st['packet'].text()} "
                f"in each of {b['slices']} slice(s)",
                f"  config {self.config.text()} (elements)",
                f"  packet {b['packet_bytes']} B in {b['accesses_per_packet']} access(es) of "
                f"{b['access_bytes']} B; longest run on one DM bank {b['longest_bank_run']} "
                f"(at most {b['bank_run_limit']})",
                f"  cycles: {self.cycles:,} ({b['packets']:,} packets x "
                f"{b['accesses_per_packet']}, every slice in parallel)"]
        return "\n".join(rows)


def lower(engine: str, memory: Tensor, stream: Tensor, context: str, chips: int
          ) -> TuPlan:
    """Lower a Fetch (``memory`` read into ``stream``) or a Commit (``stream`` written into
    ``memory``), or raise :class:`TcplanError` naming every rule it breaks."""
    violations = static_violations(engine, memory, chips) + _placement(memory, stream)
    config = None
    try:
        config = derive(memory.dims["element"], stream.dims["time"], stream.dims["packet"],
                        memory.dtype, MODE[engine], engine)
    except TcplanError as err:
        violations += err.violations
    if config is None:
        raise TcplanError(violations)
    access = access_elements(config, engine, context)
    if engine == "commit":
        violations += _commit_align(config, memory)
    run = longest_bank_run(*access_walk(config, access), memory.address)
    if run >= hw.DM_BANK_STARVATION_ACCESSES:
        violations.append(Violation("dm-bank-starvation", (config.text(),), {
            "engine": engine.title(), "run": f"{run:,}" if run < RUN_CAP else "unbounded",
            "config": config.text()}))
    if violations:
        raise TcplanError(violations)
    return TuPlan(engine, context, memory, stream, config, access, run)


def _most(context: str) -> int:
    return hw.FETCH_MAX_READ_BYTES if context == "main" else hw.SUB_CONTEXT_ACCESS_BYTES


def lower_bound(plan: TuPlan, free: bool) -> int:
    """Cycles no plan of the problem beats: with the stream given, its packets at the widest
    access (32 bytes in the main context, 8 in the sub); with it free, every live element of
    a slice's part in such accesses."""
    eb, most = plan.elem_bytes, _most(plan.context)
    if not free:
        return plan.packets * -(-plan.config.packet_size * eb // most)
    live = 1
    for f in plan.memory.dims["element"].factors:
        if f.axis is not None:
            live *= f.count
    return -(-live * eb // most)


def binding(plan: TuPlan, free: bool) -> list[dict[str, Any]]:
    """What sets the plan's cycles, for `tcplan explain`."""
    eb, c = plan.elem_bytes, plan.config
    out: list[dict[str, Any]] = [
        {"rule": None, "title": f"the packet ({c.packet_size * eb} B) is contiguous in DM "
         f"over {c.max_access_size * eb} B: accesses of {plan.access * eb} B (at most "
         f"{_most(plan.context)} B in the {plan.context} context)"},
        {"rule": "dm-bank-starvation", "title": f"longest run on one DM bank "
         f"{plan.bank_run}, at most {hw.DM_BANK_STARVATION_ACCESSES - 1}"}]
    if not free:
        out.append({"rule": None, "title": "the stream is given: its Time steps are the "
                    "packets of every slice"})
    return out


def static_violations(engine: str, memory: Tensor, chips: int) -> list[Violation]:
    """The rules of a Fetch or Commit that no stream changes: the tensor's placement rules,
    and a Commit's tensor address on an 8-byte word."""
    out = list(placement_violations(memory, chips))
    if engine == "commit" and memory.address % hw.COMMIT_ALIGN_BYTES:
        out.append(Violation("commit-align", (f"address {memory.address}",), {
            "what": f"address {memory.address}"}))
    return out


def _placement(memory: Tensor, stream: Tensor) -> list[Violation]:
    """``tu-placement``: each slice moves its own part, so the stream's spatial mappings are
    the DM tensor's."""
    out = []
    overlap = dimension_overlap(stream)  # (Time or Packet taking the Slice's digits again)
    if overlap:
        out.append(Violation("overlapping-dimensions", (), {"tensor": "the stream",
                                                            "detail": overlap}))
    for d in SPATIAL:
        if not _same_cells(stream.dims[d], memory.dims[d]):
            out.append(Violation("tu-placement", (stream.dims[d].text(),), {
                "dim": DIM_TITLES[d], "stream": stream.dims[d].text(),
                "memory": memory.dims[d].text()}))
    return out


def _same_cells(a, b) -> bool:
    """Do two mappings give every position the same cell (``m![A / 2, A % 2]`` is
    ``m![A]``)?"""
    if a.size != b.size:
        return False
    (ca, sa), (cb, sb) = a.evaluate(), b.evaluate()
    return bool((sa == sb).all()) and set(ca) == set(cb) and all(
        bool((ca[k] == cb[k]).all()) for k in ca)


def access_elements(config: SequencerConfig, engine: str, context: str) -> int:
    """Elements of one hardware access of a lowered config (:func:`access_of` of its
    contiguous access, ``max_access_size``)."""
    return access_of(config.max_access_size, 8 * hw.DTYPE_BYTES[config.dtype], context)


def access_of(contiguous: int, bits: int, context: str) -> int:
    """Elements of one hardware access (the guide's ``read_size``): in the main context the
    largest divisor of the packet's ``contiguous`` access (elements of ``bits`` bits) whose
    bytes are 1, 2, 4, 8, 16 or 32; in the sub context the same, at most 8 bytes (book:
    moving-tensors/fetch-engine.md, 'Multi-Read Packet': "fixed at 8 bytes"; a run shorter
    than 8 bytes is read in its own reads, as in the main context).  A Commit's write, the
    gcd of its packet and its contiguous access, is the same number: its packet is
    contiguous.  In bits, so that the guide's ``i4`` examples are figures of the same
    function."""
    most = hw.FETCH_MAX_READ_BYTES if context == "main" else hw.SUB_CONTEXT_ACCESS_BYTES
    best = 1
    for d in range(1, contiguous + 1):
        if contiguous % d or (d * bits) % 8:
            continue
        if d * bits // 8 <= most and d * bits // 8 in hw.ACCESS_BYTES:
            best = d
    return best


def reads_per_packet(packet: int, access: int) -> int:
    """Hardware reads (or writes) of one packet of ``packet`` elements, ``access`` elements
    at a time: ``Packet::SIZE / read_size`` (book: fetch-engine.md, 'Multi-Read Packet')."""
    return -(-packet // access)


def _commit_align(config: SequencerConfig, memory: Tensor) -> list[Violation]:
    """``commit-align``: the Commit writes 8-byte words; every loop stride outside the packet,
    the packet and the tensor's address are multiples of 8 bytes."""
    eb = memory.elem_bytes
    align = hw.COMMIT_ALIGN_BYTES
    bad = []
    for (n, s), group in zip(config.entries, config.groups):
        if all(config.raw[g].side == "time" for g in group) and (s * eb) % align:
            bad.append(f"stride {s * eb} B of entry {n} : {s}")
    if config.packet_bytes % align:  # (the packet is written whole, padding lanes too)
        bad.append(f"packet {config.packet_bytes} B")
    if not bad:
        return []
    return [Violation("commit-align", tuple(bad[:4]), {"what": ", ".join(bad)})]


def access_walk(config: SequencerConfig, access: int) -> tuple[list[tuple[int, int]], int]:
    """The hardware accesses as a loop nest: (entries ``(count, step in bytes)``, outermost
    first; the bytes one access touches).  The packet's contiguous run is walked ``access``
    elements at a time; a stride-0 run is one element read again."""
    eb = hw.DTYPE_BYTES[config.dtype]
    entries, _ = coalesce(list(config.entries), limit=RUN_CAP)
    if not entries:
        return [], access * eb
    n, s = entries[-1]
    if s == 1:
        entries[-1] = (n // access, access)
        width = access * eb
    elif s == 0:
        entries[-1] = (n // access, 0)
        width = eb
    else:
        width = eb
    return [(k, st * eb) for k, st in entries if k > 1], width


# ---------------------------------------------------------------------------------------
# The longest run of accesses to one bank (a monoid over blocks of the loop nest)
# ---------------------------------------------------------------------------------------
@dataclass
class _Runs:
    """Per bank and per starting address (mod 128) of a block of consecutive accesses: its
    length, whether every access touches the bank, the runs touching it at the block's
    start and end, and its longest run."""

    length: int
    every: np.ndarray  # (banks, residues) bool
    head: np.ndarray  # int64
    tail: np.ndarray
    best: np.ndarray

    def shifted(self, by: int) -> "_Runs":
        """The same block started ``by`` bytes further."""
        idx = (np.arange(hw.DM_BANK_STRIPE) + by) % hw.DM_BANK_STRIPE
        return _Runs(self.length, self.every[:, idx], self.head[:, idx], self.tail[:, idx],
                     self.best[:, idx])


def _then(a: _Runs, b: _Runs) -> _Runs:
    """Block ``a`` followed by block ``b`` (b already at the address where a ends)."""
    cap = lambda x: np.minimum(x, RUN_CAP)  # noqa: E731
    return _Runs(min(a.length + b.length, RUN_CAP), a.every & b.every,
                 cap(np.where(a.every, a.length + b.head, a.head)),
                 cap(np.where(b.every, b.length + a.tail, b.tail)),
                 cap(np.maximum(np.maximum(a.best, b.best), a.tail + b.head)))


def _power(p: _Runs, q: int) -> _Runs:
    """``q`` copies of block ``p`` back to back, each at the same address mod 128."""
    length = min(p.length * q, RUN_CAP)
    whole = np.where(p.every, length, 0)
    best = p.best if q < 2 else np.maximum(p.best, np.minimum(p.tail + p.head, RUN_CAP))
    return _Runs(length, p.every, np.where(p.every, whole, p.head),
                 np.where(p.every, whole, p.tail), np.where(p.every, whole, best))


def _one_access(width: int) -> _Runs:
    r = np.arange(hw.DM_BANK_STRIPE)
    banks = ((r[None, :] + np.arange(width)[:, None]) % hw.DM_BANK_STRIPE) // hw.DM_BANK_BYTES
    hit = np.zeros((hw.DM_BANKS_PER_SLICE, hw.DM_BANK_STRIPE), bool)
    hit[banks, np.broadcast_to(r, banks.shape)] = True
    ones = hit.astype(np.int64)
    return _Runs(1, hit, ones, ones, ones)


def _repeat(block: _Runs, n: int, step: int) -> _Runs:
    """``n`` copies of ``block``, copy t starting ``t * step`` bytes after the first."""
    period = hw.DM_BANK_STRIPE // math.gcd(step % hw.DM_BANK_STRIPE, hw.DM_BANK_STRIPE)
    acc: _Runs | None = None
    part: _Runs | None = None
    for t in range(min(n, period)):
        acc = block if acc is None else _then(acc, block.shifted(t * step))
        if t + 1 == n % period:
            part = acc
    assert acc is not None  # (n >= 1: a loop of the nest runs at least once)
    q = n // period
    if q == 0:
        return acc
    out = _power(acc, q)
    return out if part is None else _then(out, part)


def longest_bank_run(entries: list[tuple[int, int]], width: int, base: int) -> int:
    """The longest run of consecutive accesses that all touch one DM bank: accesses of
    ``width`` bytes at ``base + sum(counter_k * step_k)`` over the loop nest ``entries``
    (count, step in bytes; outermost first).  Exact: every block of the nest is summarized
    per bank and per address mod 128 (a bank is address bits 3 to 6), a loop's copies fold
    with a period of at most 128, the rest in closed form (tested against a brute-force walk
    of every access)."""
    block = _one_access(width)
    for n, step in reversed(entries):
        block = _repeat(block, n, step)
    return int(block.best[:, base % hw.DM_BANK_STRIPE].max())
