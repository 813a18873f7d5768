"""Sequencer derivation: (Buf, Time, Packet) -> nested-loop config ``[n : s, ...] : packet``.

The derivation (seed 000 "아키텍처"; facts.md section 2) walks the stream ``Time, Packet`` term by
term, outermost first.  Each stream digit factor is cut at the digit boundaries of the buffer's
factors of the same axis (the *common refinement*); every piece becomes one entry whose stride
is the piece's position weight in the buffer (``0`` where the buffer does not carry the piece:
a broadcast).  Pieces of size 1 give no entry.  The raw entries are merged per decisions.md
item 2 and checked against the rules in :mod:`model.rules` that apply to the engine profile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from . import hardware as hw
from .mapping import Factor, Mapping, coalesce_factors, parse
from .rules import MODES, PROFILES, RULES, TcplanError, Violation, fail

INF = float("inf")


class Entry(NamedTuple):
    """One raw (term-by-term) loop entry and where it came from."""

    size: int
    stride: int
    term: str  # the stream term (as written, canonical spacing)
    side: str  # "time" or "packet"
    piece: str | None = None  # the piece of the term, when the term spans several buffer pieces
    buffer_term: str | None = None  # buffer term it strides over; None for a broadcast

    def pair(self) -> tuple[int, int]:
        return (self.size, self.stride)


@dataclass
class SequencerConfig:
    entries: list[tuple[int, int]]  # final entries, outermost first
    raw: list[Entry]
    groups: list[list[int]]  # raw entry indices merged into each final entry
    packet_size: int  # elements
    dtype: str
    mode: str
    engine: str
    contiguous_run: int = field(init=False)
    max_access_size: int = field(init=False)
    accesses_per_packet: int = field(init=False)

    def __post_init__(self) -> None:
        self.contiguous_run = contiguous_run(self.entries)
        self.max_access_size = math.gcd(self.packet_size, self.contiguous_run)
        self.accesses_per_packet = self.packet_size // self.max_access_size

    @property
    def packet_bytes(self) -> int:
        return self.packet_size * hw.DTYPE_BYTES[self.dtype]

    @property
    def raw_entries(self) -> list[tuple[int, int]]:
        return [e.pair() for e in self.raw]

    def text(self) -> str:
        return "[" + ", ".join(f"{n} : {s}" for n, s in self.entries) + f"] : {self.packet_size}"

    def to_json(self) -> dict[str, Any]:
        return {
            "entries": [list(e) for e in self.entries],
            "raw_entries": [list(e.pair()) for e in self.raw],
            "packet_size": self.packet_size,
            "contiguous_run": self.contiguous_run,
            "max_access_size": self.max_access_size,
            "accesses_per_packet": self.accesses_per_packet,
            "engine": self.engine,
            "mode": self.mode,
            "dtype": self.dtype,
            "packet_bytes": self.packet_bytes,
            "terms": [
                {"term": e.term, "side": e.side, "piece": e.piece, "buffer_term": e.buffer_term}
                for e in self.raw
            ],
            "merges": [g for g in self.groups if len(g) > 1],
        }


# ---------------------------------------------------------------------------------------
# Pure helpers on entry lists (the CuTe-style algebra)
# ---------------------------------------------------------------------------------------
def contiguous_run(entries: list[tuple[int, int]]) -> int:
    """Elements of the innermost physically contiguous run (seed 000 "접근 크기").

    As the seed's code, walking outward while ``s_outer == n_inner * s_inner``; unlike its
    literal code, an innermost entry that strides (``n : s`` with ``s`` not 0 or 1) is a run
    of 1 element, not ``n`` (docs/decisions.md item 17).  A stride-0 innermost entry is one
    element replicated: one access serves it (the seed's broadcasting read: max access 4).
    """
    if not entries:
        return 1
    if entries[-1][1] not in hw.CONTIGUOUS_INNERMOST_STRIDES:
        return 1
    run = entries[-1][0]
    for k in range(len(entries) - 1, 0, -1):
        (_, s_out), (n_in, s_in) = entries[k - 1], entries[k]
        if s_out == n_in * s_in:
            run *= entries[k - 1][0]
        else:
            break
    return run


def coalesce(entries: list[tuple[int, int]], limit: int = hw.MAX_ENTRY_ITERATIONS
             ) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """Merge every adjacent contiguous pair ``(n1 : s1), (n2 : s2)`` with ``s1 == n2 * s2``
    into ``(n1 * n2 : s2)`` unless the product would exceed ``limit``.

    Post-condition: the address sequence is unchanged (tested).  Returns the merged entries
    and, for each, the indices of the input entries it combines.
    """
    out: list[tuple[int, int]] = []
    groups: list[list[int]] = []
    for k in range(len(entries) - 1, -1, -1):
        n1, s1 = entries[k]
        if out:
            n2, s2 = out[-1]
            if s1 == n2 * s2 and n1 * n2 <= limit:
                out[-1] = (n1 * n2, s2)
                groups[-1].insert(0, k)
                continue
        out.append((n1, s1))
        groups.append([k])
    return out[::-1], groups[::-1]


# ---------------------------------------------------------------------------------------
# Derivation
# ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Piece:
    lo: int  # digit multiplier of the piece (0 for a number broadcast)
    n: int  # live values (full radix for inner pieces)
    positions: int  # loop iterations (>= n; the term's padding goes to its top piece)
    buf: int | None  # index of the buffer factor it lies in, None for a broadcast
    stride: int
    term: str
    side: str
    label: str | None
    hi: float  # exclusive digit bound, for overlap checks
    axis: str | None = None


def _digits(axis: str, lo: int, hi: float) -> str:
    return f"{axis} digits [{lo}, {'top' if hi == INF else hi})"


class _BufferView(NamedTuple):
    factors: tuple[Factor, ...]  # coalesced: ``A / 3, A % 3`` is the buffer ``A``
    weights: list[int]  # position weight of each factor
    labels: "_Labels"
    by_axis: dict[str, list[tuple[int, float, int]]]  # axis -> [(lo, hi or INF, index)]


def _buffer_view(buf: Mapping) -> _BufferView:
    """What the derivation needs of a buffer; computed once per (cached) buffer mapping."""
    view = buf.memo.get("sequencer")
    if view is not None:
        return view
    axes = buf.axes
    bf = coalesce_factors(buf.factors)
    nb = len(bf)
    weights = [1] * nb
    for j in range(nb - 2, -1, -1):
        weights[j] = weights[j + 1] * bf[j + 1].size
    blabels = _Labels(bf, axes)
    by_axis: dict[str, list[tuple[int, float, int]]] = {}
    for j, f in enumerate(bf):
        # a digit with one live value (``A = 1 # 4``) carries nothing, like ``m![A = 1]``
        if f.axis is not None and f.count > 1:
            hi = f.lo * f.radix
            by_axis.setdefault(f.axis, []).append(
                (f.lo, INF if hi >= axes[f.axis] else hi, j))
    for a, lst in by_axis.items():  # buffer digits of one axis must not overlap
        if len(lst) > 1:
            lst.sort()
            for (_, hx, x), (ly, hy, y) in zip(lst, lst[1:]):
                if hx > ly:
                    raise fail("incompatible-decomposition", terms=(blabels[x], blabels[y]),
                               detail=f"buffer terms {blabels[x]} and {blabels[y]} both carry "
                                      f"{_digits(a, ly, min(hx, hy))}",
                               fix="give every digit range of an axis to one buffer term")
    view = buf.memo["sequencer"] = _BufferView(bf, weights, blabels, by_axis)
    return view


def derive(buf: Mapping, time: Mapping, packet: Mapping, dtype: str = "i8",
           mode: str = "read", engine: str = "pseudo") -> SequencerConfig:
    """Derive the sequencer config, or raise :class:`TcplanError` naming the broken rules."""
    if dtype not in hw.DTYPE_BYTES:
        raise fail("bad-request", detail=f"unknown dtype {dtype!r}",
                   fix="use one of " + ", ".join(hw.DTYPE_BYTES))
    if mode not in MODES:
        raise fail("bad-request", detail=f"unknown mode {mode!r}", fix="use read or write")
    if engine not in PROFILES:
        raise fail("bad-request", detail=f"unknown engine {engine!r}",
                   fix="use one of " + ", ".join(PROFILES))
    if engine == "fetch" and mode != "read" or engine == "commit" and mode != "write":
        only = "reads" if engine == "fetch" else "writes"
        raise fail("bad-request", detail=f"the {engine} engine only {only}; got mode {mode}",
                   fix=f"use --mode {'read' if engine == 'fetch' else 'write'} or another engine")
    axes = buf.axes
    bf, weights, blabels, by_axis = _buffer_view(buf)

    pieces: list[_Piece] = []
    for side, mapping in (("time", time), ("packet", packet)):
        maxes = mapping.axes
        for term, factors in mapping.items():
            multi = len(factors) > 1
            for s in factors:
                lst = by_axis.get(s.axis) if s.axis is not None else None
                if lst is None:  # a broadcast: the buffer does not carry this axis
                    hi = INF if s.axis is None or s.hi >= maxes[s.axis] else s.hi
                    pieces.append(_Piece(s.lo, s.count, s.size, None, 0, term, side,
                                         s.label(maxes) if multi else None, hi, s.axis))
                else:
                    pieces.extend(_split(s, term, side, bf, lst, weights, blabels, maxes,
                                         multi))

    # stream digits of one axis must not overlap
    seen: dict[str, list[_Piece]] = {}
    for p in pieces:
        if p.axis is not None:
            seen.setdefault(p.axis, []).append(p)
    violations: list[Violation] = []
    for a, ps in seen.items():
        if len(ps) < 2:
            continue
        ps.sort(key=_lo)
        for x, y in zip(ps, ps[1:]):
            if x.hi > y.lo:
                raise fail("incompatible-decomposition", terms=(x.term, y.term),
                           detail=f"stream terms {x.term} and {y.term} both carry "
                                  f"{_digits(a, y.lo, min(x.hi, y.hi))}",
                           fix="give every digit range of an axis to one stream term")

    # what each buffer factor receives
    per_buf: dict[int, list[_Piece]] = {}
    for p in pieces:
        if p.buf is not None:
            per_buf.setdefault(p.buf, []).append(p)
    for j, ps in per_buf.items():
        f = bf[j]
        reach = 0
        for p in ps:
            reach += (p.n - 1) * (p.lo // f.lo)
        if reach >= f.count:
            terms = tuple(dict.fromkeys(p.term for p in ps))
            what = (f"stream term{'s' if len(terms) > 1 else ''} {', '.join(terms)} reach"
                    f"{'' if len(terms) > 1 else 'es'} digit {reach} of buffer term "
                    f"{blabels[j]}, which holds {f.count} live value"
                    f"{'s' if f.count > 1 else ''} (digits 0..{f.count - 1})")
            if mode == "write":
                violations.append(Violation("broadcast-write", terms,
                                            {"detail": "the write stream carries positions the "
                                                       "buffer does not: " + what}))
            else:
                violations.append(Violation("stream-outside-buffer", terms, {"detail": what}))

    applies = _APPLIES[engine, mode]
    if mode == "write":  # broadcast-write and write-coverage apply to every write
        for p in pieces:
            if p.buf is None and p.n > 1:
                what = (f"stream term {p.term}" + (f" (piece {p.label})" if p.label else "")
                        + f" has {p.n} live values but the buffer does not carry "
                        + ("it" if p.axis is None else f"axis {p.axis}"
                           if p.axis not in by_axis else _digits(p.axis, p.lo, p.hi))
                        + f": {p.n} stream positions would write the same slot")
                violations.append(Violation("broadcast-write", (p.term,), {"detail": what}))
        for j, f in enumerate(bf):
            if f.count <= 1:
                continue
            if f.axis is None:
                violations.append(Violation("write-coverage", (blabels[j],), {
                    "detail": f"buffer term {blabels[j]} replicates every value {f.count} "
                              f"times; one stream position cannot fill {f.count} slots"}))
                continue
            ps = sorted(per_buf.get(j, []), key=_lo)
            expect, covered = f.lo, 1
            gap = None
            for p in ps:
                if p.lo != expect:
                    gap = (expect, p.lo)
                    break
                covered *= p.n
                expect = p.lo * p.n
            if gap is not None or covered < f.count:
                if not ps:
                    why = "no stream term writes it"
                elif gap is not None:
                    have = "; ".join(f"{_digits(f.axis, p.lo, p.lo * p.n)} from {p.term}"
                                     for p in ps)
                    why = (f"the stream writes {have}, and nothing writes "
                           f"{_digits(f.axis, gap[0], gap[1])}")
                else:
                    why = f"the stream writes only {covered} of them"
                violations.append(Violation("write-coverage", (blabels[j],), {
                    "detail": f"buffer term {blabels[j]} has {f.count} live values but "
                              f"{why}; those slots would keep stale data"}))

    if applies["unread-axis"]:
        for j, f in enumerate(bf):
            if f.axis is not None and f.count > 1 and j not in per_buf:
                violations.append(Violation("unread-axis", (blabels[j],), {
                    "detail": f"buffer term {blabels[j]} ({f.digits(axes)}, {f.count} live "
                              f"values) is never read by the stream"}))

    raw = [Entry(p.positions, p.stride, p.term, p.side, p.label,
                 blabels[p.buf] if p.buf is not None else None)
           for p in pieces if p.positions > 1]
    pairs = [(e.size, e.stride) for e in raw]
    if len(pairs) <= hw.MAX_SEQUENCER_ENTRIES:
        final, groups = pairs, [[k] for k in range(len(pairs))]
    else:
        final, groups = coalesce(pairs)
        if len(final) > hw.MAX_SEQUENCER_ENTRIES:
            text = ", ".join(f"{n} : {s}" for n, s in final)
            violations.append(Violation("entry-limit", tuple(e.term for e in raw),
                                        {"count": len(final), "entries": f"[{text}]"}))
    for k, (n, _) in enumerate(final):
        if n > hw.MAX_ENTRY_ITERATIONS:
            term = " * ".join(dict.fromkeys(raw[g].term for g in groups[k]))
            violations.append(Violation("iteration-limit", (term,), {
                "entry": k, "term": term, "size": n, "hint": _split_hint(term, n)}))

    packet_size = packet.size
    elem = hw.DTYPE_BYTES[dtype]
    pbytes = packet_size * elem
    if applies["packet-bytes"] and pbytes not in hw.FETCH_COMMIT_PACKET_BYTES:
        fits = [b // elem for b in hw.FETCH_COMMIT_PACKET_BYTES if b % elem == 0]
        violations.append(Violation("packet-bytes", (packet.text(),), {
            "packet": packet_size, "elem_bytes": elem, "bytes": pbytes,
            "fix": f"make Packet {', '.join(map(str, fits))} elements of {dtype} "
                   f"(move terms into Time, or pad with #)"}))
    if applies["innermost-access"] and packet_size > 1:
        merged, _ = coalesce(pairs)
        n, s = merged[-1] if merged else (1, 0)
        if s not in hw.CONTIGUOUS_INNERMOST_STRIDES or n % packet_size:
            why = (f"stride {s} is neither 0 nor 1" if s not in
                   hw.CONTIGUOUS_INNERMOST_STRIDES else
                   f"{n} is not a multiple of the {packet_size}-element packet")
            violations.append(Violation("innermost-access", (f"{n} : {s}",), {
                "detail": f"innermost entry {n} : {s} (after merging contiguous entries) "
                          f"is not a contiguous access: {why}; a packet of more than one "
                          f"element must be contiguous in the buffer",
                "fix": "make the Packet terms the buffer's innermost terms in buffer order,"
                       " or use a 1-element packet (discrete access)"}))
    if applies["dma-packet-max"] and pbytes > hw.DMA_MAX_PACKET_BYTES:
        outer = packet.items()[0][0] if packet.items() else packet.text()
        violations.append(Violation("dma-packet-max", (packet.text(),), {
            "packet": packet_size, "elem_bytes": elem, "bytes": pbytes,
            "suggestion": f"Time m![..., {outer}] and drop {outer} from Packet"}))
    if violations:
        raise TcplanError(violations)
    return SequencerConfig(final, raw, groups, packet_size, dtype, mode, engine)


def _split_hint(term: str, n: int) -> str:
    """A concrete, valid way to bring an ``n``-iteration term under the limit."""
    limit = hw.MAX_ENTRY_ITERATIONS
    t = term if term.replace("_", "").isalnum() else f"({term})"
    d = limit
    while d > 1:  # largest power of two that splits n into two legal entries
        if n % d == 0 and n // d <= limit:
            return f"split the term into two, e.g. {t} / {d} and {t} % {d}"
        d //= 2
    if n <= limit * limit:
        padded = -(-n // limit) * limit
        return (f"pad it first and split: ({t} # {padded}) / {limit} and "
                f"({t} # {padded}) % {limit}")
    return f"split the term into three or more terms, each at most {limit:,}"


def _split(s: Factor, term: str, side: str, bf: tuple[Factor, ...],
           lst: list[tuple[int, float, int]], weights: list[int], blabels: "_Labels",
           axes: dict[str, int], multi: bool) -> list[_Piece]:
    """Cut one stream factor into pieces at the buffer's digit boundaries (outermost first).

    ``lst`` holds the buffer digits of the factor's axis as ``(lo, hi, index)``.
    """
    a = s.axis
    hi_s = s.lo * s.count
    cur = s.lo
    out: list[_Piece] = []  # low to high
    while cur < hi_s:
        owner = -1
        nxt, nxt_j = INF, -1  # the next buffer digit above cur
        gap_lo = 1  # where the uncarried region around cur starts
        for lo, hi, j in lst:
            if lo <= cur < hi:
                owner = j
                break
            if cur < lo < nxt:
                nxt, nxt_j = lo, j
            if gap_lo < hi <= cur:
                gap_lo = int(hi)
        if owner >= 0:
            base, region = bf[owner].lo, f"buffer term {blabels[owner]}"
            top = hi if hi < hi_s else hi_s
            cutter = region
        else:  # the buffer does not carry these digits: a broadcast piece
            base = gap_lo
            region = f"the part of {a} the buffer does not carry ({_digits(a, gap_lo, nxt)})"
            top = nxt if nxt < hi_s else hi_s
            cutter = f"buffer term {blabels[nxt_j]}" if nxt_j >= 0 else region
        if cur % base:
            raise _incompatible(term, a, s.lo, hi_s,
                                f"has a piece starting at {cur} inside {region}, whose digits "
                                f"step by {base}", cur, base)
        if top % cur:
            if top == hi_s:
                why = (f"ends at {hi_s}, not a multiple of {cur}, where it enters {region}")
            else:
                why = f"is cut at {int(top)} by {cutter}, not a multiple of the piece start {cur}"
            raise _incompatible(term, a, s.lo, hi_s, why, cur, int(top))
        n = int(top // cur)
        if owner >= 0:
            out.append(_Piece(cur, n, n, owner, weights[owner] * (cur // base), term, side, None,
                              top, a))
        else:
            out.append(_Piece(cur, n, n, None, 0, term, side, None, top, a))
        cur = int(top)
    if not out:  # a padding-only digit of an axis: no live values beyond 0
        return [_Piece(s.lo, s.count, s.size, None, 0, term, side,
                       s.label(axes) if multi else None, INF, a)]
    if len(out) == 1:
        p = out[0]
        p.positions = s.size
        if multi:
            p.label = _piece_label(a, p.lo, p.n, "top" if p.hi >= axes[a] else p.hi)
        return out
    inner = math.prod(p.n for p in out[:-1])
    if s.size % inner:
        raise fail("incompatible-decomposition", terms=(term,),
                   detail=f"stream term {term} has {s.size} positions but spans buffer pieces "
                          f"of {inner} inner values; {s.size} is not a multiple of {inner}",
                   fix=f"pad the term to a multiple of {inner}")
    out[-1].positions = s.size // inner
    for p in out:
        p.label = _piece_label(a, p.lo, p.n, "top" if p.hi >= axes[a] else p.hi)
    return out[::-1]


#: rules that only some engine profiles check; which ones is the registry's business
_PROFILE_RULES = ("unread-axis", "packet-bytes", "innermost-access", "dma-packet-max")
_APPLIES = {(e, m): {r: RULES[r].applies(e, m) for r in _PROFILE_RULES}
            for e in PROFILES for m in MODES}


def _lo(p: _Piece) -> int:
    return p.lo


class _Labels:
    """Buffer term labels, built on first use (only errors and entries need them)."""

    __slots__ = ("bf", "axes", "cache")

    def __init__(self, bf: tuple[Factor, ...], axes: dict[str, int]):
        self.bf, self.axes, self.cache = bf, axes, {}

    def __getitem__(self, j: int) -> str:
        text = self.cache.get(j)
        if text is None:
            text = self.cache[j] = self.bf[j].label(self.axes)
        return text


def _piece_label(a: str, lo: int, n: int, hi: object) -> str:
    text = a
    if lo > 1:
        text += f" / {lo}"
    if hi != "top":
        text += f" % {n}"
    return text


def _incompatible(term: str, a: str, lo: int, hi: int, why: str, x: int, y: int
                  ) -> TcplanError:
    return fail("incompatible-decomposition", terms=(term,),
                detail=f"stream term {term} ({_digits(a, lo, hi)}) {why}: the buffer and the "
                       f"stream split {a} with no common refinement "
                       f"(gcd({x}, {y}) = {math.gcd(x, y)})",
                fix=f"split {a} in the stream at the buffer's boundaries, pad the term (#) to "
                    f"a multiple of the buffer's pieces, or change the buffer's split of {a}")


def derive_text(axes: dict[str, int], buf: str, time: str, packet: str, dtype: str = "i8",
                mode: str = "read", engine: str = "pseudo") -> SequencerConfig:
    """Parse the three mappings over ``axes`` and derive."""
    return derive(parse(buf, axes, "buf"), parse(time, axes, "time"),
                  parse(packet, axes, "packet"), dtype, mode, engine)
