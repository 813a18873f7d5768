"""Sequencer derivation: (Buf, Time, Packet) -> nested-loop config ``[n : s, ...] : packet``.

The derivation (seed 000 "아키텍처"; docs/hardware.md section 2) walks the stream
``Time, Packet`` term by term, outermost first.  Each stream digit factor is cut at the digit
boundaries of the buffer's factors of the same axis (the *common refinement*); every piece
becomes one entry whose stride is the piece's position weight in the buffer (``0`` where the
buffer does not carry the piece: a broadcast).  Pieces of size 1 give no entry.  The raw
entries are merged per docs/hardware.md R2 and checked against the rules in
:mod:`model.rules` that apply to the engine profile.
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


def coalesce(entries: list[tuple], limit: int = hw.MAX_ENTRY_ITERATIONS
             ) -> tuple[list[tuple], list[list[int]]]:
    """Merge every adjacent contiguous pair ``(n1 : s1), (n2 : s2)`` with ``s1 == n2 * s2``
    into ``(n1 * n2 : s2)`` unless the product would exceed ``limit``.  Entries may carry
    several strides ``(n, s_a, s_b, ...)`` (a DMA's read and write): then every side must be
    contiguous.

    Post-condition: the address sequence is unchanged (tested).  Returns the merged entries
    and, for each, the indices of the input entries it combines.
    """
    out: list[tuple] = []
    groups: list[list[int]] = []
    for k in range(len(entries) - 1, -1, -1):
        e = entries[k]
        n1 = e[0]
        if out:
            inner = out[-1]
            n2 = inner[0]
            if n1 * n2 <= limit and all(e[i] == n2 * inner[i] for i in range(1, len(e))):
                out[-1] = (n1 * n2,) + inner[1:]
                groups[-1].insert(0, k)
                continue
        out.append(tuple(e))
        groups.append([k])
    return out[::-1], groups[::-1]


@dataclass(slots=True)
class _Piece:
    lo: int  # digit multiplier of the piece (0 for a number broadcast)
    n: int  # live values (full radix for inner pieces)
    positions: int  # loop iterations (>= n; the term's padding goes to its top piece)
    bufs: tuple  # per layout: index of the factor the piece lies in, None for a broadcast
    strides: tuple  # per layout
    term: str
    side: str
    label: str | None
    hi: float  # exclusive digit bound, for overlap checks
    axis: str | None = None


def _digits(axis: str, lo: int, hi: float) -> str:
    return f"{axis} digits [{lo}, {'top' if hi == INF else hi})"


class Layout(NamedTuple):
    """An address space as digit factors with position weights (what a derivation needs)."""

    factors: tuple[Factor, ...]  # coalesced within each dimension
    weights: tuple[int, ...]  # address step of each factor, in elements
    labels: "_Labels"
    by_axis: dict[str, list[tuple[int, float, int]]]  # axis -> [(lo, hi or INF, index)]
    axes: dict[str, int]


def layout_of(buf: Mapping) -> Layout:
    """The layout of a plain buffer mapping; computed once per (cached) mapping."""
    view = buf.memo.get("layout")
    if view is None:
        view = buf.memo["layout"] = layout_of_dims([("", buf, 1)])
    return view  # type: ignore[return-value]


def layout_of_dims(dims: list[tuple[str, Mapping, int]]) -> Layout:
    """A layout spread over several dimensions: ``(name, mapping, unit)``, where ``unit`` is the
    address step of the dimension's position 1 (e.g. a DM slice's 4 MiB window, in elements).
    Digits of one axis must not overlap, within or across dimensions."""
    factors: list[Factor] = []
    weights: list[int] = []
    names: list[str] = []
    axes: dict[str, int] = {}
    for name, mapping, unit in dims:
        fs = coalesce_factors(mapping.factors)
        w = unit
        ws = [0] * len(fs)
        for j in range(len(fs) - 1, -1, -1):
            ws[j] = w
            w *= fs[j].size
        factors.extend(fs)
        weights.extend(ws)
        names.extend([name] * len(fs))
        axes.update(mapping.axes)
    labels = _Labels(tuple(factors), axes, tuple(names))
    by_axis: dict[str, list[tuple[int, float, int]]] = {}
    for j, f in enumerate(factors):
        # a digit with one live value (``A = 1 # 4``) carries nothing, like ``m![A = 1]``
        if f.axis is not None and f.count > 1:
            hi = f.lo * f.radix
            by_axis.setdefault(f.axis, []).append((f.lo, INF if hi >= axes[f.axis] else hi, j))
    for a, lst in by_axis.items():  # digits of one axis must not overlap
        if len(lst) > 1:
            lst.sort()
            for (_, hx, x), (ly, hy, y) in zip(lst, lst[1:]):
                if hx > ly:
                    raise fail("incompatible-decomposition", terms=(labels[x], labels[y]),
                               detail=f"buffer terms {labels[x]} and {labels[y]} both carry "
                                      f"{_digits(a, ly, min(hx, hy))}",
                               fix="give every digit range of an axis to one buffer term")
    return Layout(tuple(factors), tuple(weights), labels, by_axis, axes)


def _check_args(dtype: str, mode: str, engine: str) -> None:
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


def stream_pieces(layouts: tuple[Layout, ...],
                  sides: list[tuple[str, Mapping]]) -> list[_Piece]:
    """Cut every stream factor (sides in order, outermost first) at the digit boundaries of
    every layout; raises ``incompatible-decomposition`` where no common refinement exists."""
    pieces: list[_Piece] = []
    nl = len(layouts)
    for side, mapping in sides:
        maxes = mapping.axes
        for term, factors in mapping.items():
            multi = len(factors) > 1
            for s in factors:
                a = s.axis
                if a is None or not any(a in L.by_axis for L in layouts):  # a broadcast
                    hi = INF if a is None or s.hi >= maxes[a] else s.hi
                    pieces.append(_Piece(s.lo, s.count, s.size, (None,) * nl, (0,) * nl, term,
                                         side, s.label(maxes) if multi else None, hi, a))
                else:
                    pieces.extend(_cut(s, term, side, layouts, maxes, multi))
    # stream digits of one axis must not overlap
    seen: dict[str, list[_Piece]] = {}
    for p in pieces:
        if p.axis is not None:
            seen.setdefault(p.axis, []).append(p)
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
    return pieces


def check_side(L: Layout, k: int, pieces: list[_Piece], mode: str, engine: str
               ) -> tuple[list[Violation], dict[int, list[_Piece]]]:
    """The read or write rules of one side (layout ``k`` of the pieces)."""
    violations: list[Violation] = []
    bf, blabels = L.factors, L.labels
    per_buf: dict[int, list[_Piece]] = {}
    for p in pieces:
        j = p.bufs[k]
        if j is not None:
            per_buf.setdefault(j, []).append(p)
    for j, ps in per_buf.items():
        f = bf[j]
        reach = 0
        for p in ps:
            reach += (p.n - 1) * (p.lo // f.lo)
        # digit values past a top digit's live count are indices past the axis: padding
        if reach >= f.count and f.axis is not None and f.lo * f.count < L.axes[f.axis]:
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
    if mode == "write":  # broadcast-write and write-coverage apply to every write
        for p in pieces:
            if p.bufs[k] is None and p.n > 1:
                what = (f"stream term {p.term}" + (f" (piece {p.label})" if p.label else "")
                        + f" has {p.n} live values but the buffer does not carry "
                        + ("it" if p.axis is None else f"axis {p.axis}"
                           if p.axis not in L.by_axis else _digits(p.axis, p.lo, p.hi))
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
    if _APPLIES[engine, mode]["unread-axis"]:
        for j, f in enumerate(bf):
            if f.axis is not None and f.count > 1 and j not in per_buf:
                violations.append(Violation("unread-axis", (blabels[j],), {
                    "detail": f"buffer term {blabels[j]} ({f.digits(L.axes)}, {f.count} live "
                              f"values) is never read by the stream"}))
    return violations, per_buf


def merge_policy(pairs: list[tuple], raw_terms: list[str]
                 ) -> tuple[list[tuple], list[list[int]], list[Violation]]:
    """docs/hardware.md R2 over entries ``(size, stride, ...)`` (several strides: all sides
    must be contiguous to merge); then the entry and iteration limits."""
    violations: list[Violation] = []
    if len(pairs) <= hw.MAX_SEQUENCER_ENTRIES:
        final, groups = pairs, [[k] for k in range(len(pairs))]
    else:
        final, groups = coalesce(pairs)
        if len(final) > hw.MAX_SEQUENCER_ENTRIES:
            text = ", ".join(_entry_text(e) for e in final)
            violations.append(Violation("entry-limit", tuple(dict.fromkeys(raw_terms)),
                                        {"count": len(final), "entries": f"[{text}]"}))
    for k, e in enumerate(final):
        n = e[0]
        if n > hw.MAX_ENTRY_ITERATIONS:
            term = " * ".join(dict.fromkeys(raw_terms[g] for g in groups[k]))
            violations.append(Violation("iteration-limit", (term,), {
                "entry": k, "term": term, "size": n, "hint": _split_hint(term, n)}))
    return final, groups, violations


def _entry_text(e: tuple) -> str:
    if len(e) == 2:
        return f"{e[0]} : {e[1]}"
    return f"{e[0]} : ({', '.join(str(x) for x in e[1:])})"


def derive(buf: Mapping, time: Mapping, packet: Mapping, dtype: str = "i8",
           mode: str = "read", engine: str = "pseudo") -> SequencerConfig:
    """Derive the sequencer config, or raise :class:`TcplanError` naming the broken rules."""
    _check_args(dtype, mode, engine)
    L = layout_of(buf)
    pieces = stream_pieces((L,), [("time", time), ("packet", packet)])
    violations, _ = check_side(L, 0, pieces, mode, engine)
    blabels = L.labels
    raw = [Entry(p.positions, p.strides[0], p.term, p.side, p.label,
                 blabels[p.bufs[0]] if p.bufs[0] is not None else None)
           for p in pieces if p.positions > 1]
    pairs = [(e.size, e.stride) for e in raw]
    final, groups, more = merge_policy(pairs, [e.term for e in raw])
    violations += more
    packet_size = packet.size
    violations += packet_violations(engine, mode, dtype, packet, pairs)
    if violations:
        raise TcplanError(violations)
    return SequencerConfig(final, raw, groups, packet_size, dtype, mode, engine)


def packet_violations(engine: str, mode: str, dtype: str, packet: Mapping,
                      pairs: list[tuple[int, int]]) -> list[Violation]:
    """The packet rules of the engine profile (registry decides which apply)."""
    violations: list[Violation] = []
    applies = _APPLIES[engine, mode]
    packet_size = packet.size
    elem = hw.DTYPE_BYTES[dtype]
    pbytes = packet_size * elem
    if applies["packet-bytes"] and pbytes not in hw.ACCESS_BYTES:
        fits = [b // elem for b in hw.ACCESS_BYTES if b % elem == 0]
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
    return violations


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


def _cut(s: Factor, term: str, side: str, layouts: tuple[Layout, ...], axes: dict[str, int],
         multi: bool) -> list[_Piece]:
    """Cut one stream factor into pieces at every layout's digit boundaries (outermost first)."""
    a = s.axis
    hi_s = s.lo * s.count
    cur = s.lo
    nl = len(layouts)
    if a is None:  # a broadcast or padding-only digit: no live values beyond 0
        return [_Piece(s.lo, s.count, s.size, (None,) * nl, (0,) * nl, term, side,
                       s.label(axes) if multi else None, INF, a)]
    if nl == 1:  # fast path: the whole term inside one buffer digit (the common case)
        L = layouts[0]
        for lo, hi, j in L.by_axis.get(a, ()):
            if lo <= cur < hi:
                if hi >= hi_s and cur % lo == 0:
                    p = _Piece(cur, s.count, s.size, (j,), (L.weights[j] * (cur // lo),), term,
                               side, None, hi_s, a)
                    if multi:
                        p.label = _piece_label(a, cur, s.count,
                                               "top" if hi_s >= axes[a] else hi_s)
                    return [p]
                break
    out: list[_Piece] = []  # low to high
    while cur < hi_s:
        top: float = hi_s
        owners: list = [None] * nl
        strides = [0] * nl
        cutter = ""
        for k, L in enumerate(layouts):
            owner = -1
            t: float
            nxt, nxt_j = INF, -1  # the next digit of this layout above cur
            gap_lo = 1  # where the uncarried region around cur starts
            for lo, hi, j in L.by_axis.get(a, ()):
                if lo <= cur < hi:
                    owner = j
                    break
                if cur < lo < nxt:
                    nxt, nxt_j = lo, j
                if gap_lo < hi <= cur:
                    gap_lo = int(hi)
            if owner >= 0:
                base = L.factors[owner].lo
                region = f"buffer term {L.labels[owner]}"
                t, who = hi, region
                owners[k] = owner
            else:  # this layout does not carry these digits: a broadcast piece
                base = gap_lo
                region = f"the part of {a} the buffer does not carry ({_digits(a, gap_lo, nxt)})"
                t = nxt
                who = f"buffer term {L.labels[nxt_j]}" if nxt_j >= 0 else region
            if cur % base:
                raise _incompatible(term, a, s.lo, hi_s,
                                    f"has a piece starting at {cur} inside {region}, whose "
                                    f"digits step by {base}", cur, base)
            if t < top:
                top, cutter = t, who
            if owner >= 0:
                strides[k] = L.weights[owner] * (cur // base)
        if top % cur:
            if top == hi_s:
                why = f"ends at {hi_s}, not a multiple of {cur}, where a buffer digit starts"
            else:
                why = f"is cut at {int(top)} by {cutter}, not a multiple of the piece start {cur}"
            raise _incompatible(term, a, s.lo, hi_s, why, cur, int(top))
        n = int(top // cur)
        out.append(_Piece(cur, n, n, tuple(owners), tuple(strides), term, side, None, top, a))
        cur = int(top)
    if not out:  # (a digit past its axis's live values: none beyond 0)
        return [_Piece(s.lo, s.count, s.size, (None,) * nl, (0,) * nl, term, side,
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

    __slots__ = ("bf", "axes", "dims", "cache")

    def __init__(self, bf: tuple[Factor, ...], axes: dict[str, int],
                 dims: tuple[str, ...] = ()):
        self.bf, self.axes, self.dims = bf, axes, dims
        self.cache: dict[int, str] = {}

    def __getitem__(self, j: int) -> str:
        text = self.cache.get(j)
        if text is None:
            text = self.bf[j].label(self.axes)
            if self.dims and self.dims[j]:
                text = f"{self.dims[j]} {text}"
            self.cache[j] = text
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
