"""Mapping expressions (``m![...]``): parsing, printing, cell evaluation and factor decomposition.

Grammar (docs/hardware.md section 1)::

    mapping := item ("," item)* [","]
    item    := atom (op NUMBER)*
    op      := "/" | "%" | "=" | "#" | "#{*}" | "#{0}" | "#{!}"
    atom    := AXIS | NUMBER | "(" mapping ")" | "[" mapping "]"

with or without the ``m![ ... ]`` wrapper.  Text is parsed once into a raw syntax tree of
tuples (cached per text); binding it to axis sizes checks the semantic rules.  The semantics
table of docs/hardware.md section 1 is then implemented twice, independently:

* on the typed tree of :class:`Node` values (:meth:`Mapping.cell`, :meth:`Mapping.evaluate`):
  the reference semantics, exact for every mapping the grammar admits;
* as a *factor decomposition* (:attr:`Mapping.factors`, computed from the raw tree): the
  mapping as a list of digit factors, outermost first, each ``coordinate contribution =
  lo * digit`` of one axis (or a broadcast).  The sequencer derivation works on factors.  A
  mapping whose positions are not a product of digit factors (e.g. ``(A, B) / 3``) has none
  and is rejected there with ``bad-mapping``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping as TMapping

import numpy as np

from . import limits
from .rules import fail

# ---------------------------------------------------------------------------------------
# Cell kinds
# ---------------------------------------------------------------------------------------
LIVE, TOP, ZERO, BOTTOM, OOB = 0, 1, 2, 3, 4
#: status code -> name used in cells and JSON
STATUS_NAMES = ("live", "top", "zero", "bottom", "oob")
#: padding operator spelling -> status code
PAD_KINDS = {"#": TOP, "#{*}": TOP, "#{0}": ZERO, "#{!}": BOTTOM}
PAD_SPELLING = {TOP: "#", ZERO: "#{0}", BOTTOM: "#{!}"}


@dataclass(frozen=True)
class Cell:
    """What one buffer position holds: a live tensor index, a padding cell, or out of bounds."""

    status: str  # "live", "top", "zero", "bottom", "oob"
    index: TMapping[str, int] | None = None  # axis -> coordinate, only when live

    @property
    def live(self) -> bool:
        return self.status == "live"

    def __repr__(self) -> str:
        if self.live and self.index is not None:
            return "Cell({" + ", ".join(f"{k}: {v}" for k, v in self.index.items()) + "})"
        return f"Cell({self.status})"


# ---------------------------------------------------------------------------------------
# Typed tree (built from the raw syntax on first use).  Nodes are immutable by convention.
# ---------------------------------------------------------------------------------------
_NODE = dict(eq=True, unsafe_hash=True, slots=True)  # immutable by convention; fast to build


@dataclass(**_NODE)
class Node:
    size: int


@dataclass(**_NODE)
class Axis(Node):
    name: str


@dataclass(**_NODE)
class Num(Node):
    """A number ``n``: n positions that all map to the empty index (broadcast)."""


@dataclass(**_NODE)
class Pair(Node):
    items: tuple[Node, ...]


@dataclass(**_NODE)
class Div(Node):
    inner: Node
    by: int


@dataclass(**_NODE)
class Mod(Node):
    inner: Node
    by: int


@dataclass(**_NODE)
class Resize(Node):
    inner: Node
    to: int


@dataclass(**_NODE)
class Pad(Node):
    inner: Node
    to: int
    kind: int  # TOP, ZERO or BOTTOM


# ---------------------------------------------------------------------------------------
# Tokenizer and parser
# ---------------------------------------------------------------------------------------
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<pad>\#\s*\{\s*[*0!]\s*\}|\#)
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*'*)
    | (?P<num>[0-9][0-9_]*)
    | (?P<punct>[(),\[\]/%=])
    | (?P<bad>\S)
    )""",
    re.VERBOSE,
)


def _describe(tok: tuple[str, str, int]) -> str:
    return "end of input" if tok[0] == "end" else repr(tok[1])


_OPS = frozenset("/%=")
#: deepest mapping accepted (parentheses plus postfix operators along one path); a tool limit
#: that keeps every recursion over mappings far below Python's stack limit
MAX_DEPTH = 64
#: largest number or axis size accepted (no tier comes near it)
MAX_SIZE = 2**62


class _Parser:
    """Syntax only: text -> raw tree of tuples (no axis sizes), cached per text.

    Raw nodes: ``("ax", name, col)``, ``("num", n, col)``, ``("pair", (items...))``,
    ``("op", op, inner, n, opcol, ncol)`` with ``op`` one of ``/ % = # #{0} #{!}``.
    """

    def __init__(self, text: str, what: str):
        self.text = text
        self.what = what
        stripped = len(text) - len(text.lstrip())
        self.wrapped = text.startswith("m!", stripped)
        start = stripped + 2 if self.wrapped else 0
        self.toks: list[tuple[str, str, int]] = []
        for m in _TOKEN.finditer(text, start):
            kind = m.lastgroup
            if kind is None:  # trailing whitespace
                continue
            val = m.group(kind)
            col = m.start(kind) + 1
            if kind == "bad":
                raise fail("parse-error", what=what,
                           expected="an axis, a number, an operator, ',', '(' or '['",
                           column=col, found=repr(val))
            if kind == "pad" and len(val) > 1:
                val = re.sub(r"\s+", "", val)
            self.toks.append((kind, val, col))
        self.toks.append(("end", "", len(text) + 1))  # sentinel: peek never runs off
        self.i = 0
        self.nest = 0

    # -- helpers --------------------------------------------------------------------
    def error(self, expected: str) -> Exception:
        tok = self.toks[self.i]
        return fail("parse-error", what=self.what, expected=expected, column=tok[2],
                    found=_describe(tok))

    def expect(self, text: str) -> None:
        tok = self.toks[self.i]
        if tok[1] != text or tok[0] == "end":
            raise self.error(repr(text))
        self.i += 1

    # -- grammar --------------------------------------------------------------------
    def parse(self) -> tuple:
        if self.wrapped:  # m![ mapping ]
            self.expect("[")
            node, _ = self.mapping("]")
            self.expect("]")
        else:
            if self.toks[0][0] == "end":
                raise self.error("a mapping (m![1] is the identity)")
            node, _ = self.mapping(None)
        if self.toks[self.i][0] != "end":
            raise self.error("',' or end of input" if not self.wrapped else "end of input")
        return node

    # Each production returns (raw node, depth); depth bounds every later recursion.
    def mapping(self, closer: str | None) -> tuple[tuple, int]:
        items: list[tuple] = []
        depth = 1
        toks = self.toks
        end = closer or ""
        while True:
            tok = toks[self.i]
            if tok[1] == end:
                break  # empty mapping or trailing comma
            item, d = self.item()
            items.append(item)
            depth = max(depth, d)
            tok = toks[self.i]
            if tok[1] == ",":
                self.i += 1
                continue
            if tok[1] != end:
                raise self.error("an operator, ',' or " + (f"'{closer}'" if closer
                                                           else "end of input"))
            break
        if not items:
            return ("num", 1, toks[self.i][2]), 1
        if len(items) == 1:
            return items[0], depth
        flat: list[tuple] = []
        for it in items:  # pairing is associative: (A, B), C == A, B, C
            flat.extend(it[1] if it[0] == "pair" else (it,))
        return ("pair", tuple(flat)), depth + 1

    def atom(self) -> tuple[tuple, int]:
        kind, val, col = self.toks[self.i]
        if kind == "ident":
            self.i += 1
            return ("ax", val, col), 1
        if kind == "num":
            self.i += 1
            return ("num", self.number(val, col), col), 1
        if val in ("(", "[") and kind == "punct":
            self.nest += 1
            if self.nest > MAX_DEPTH:
                raise fail("parse-error", what=self.what, column=col, found=repr(val),
                           expected=f"at most {MAX_DEPTH} nested parentheses")
            self.i += 1
            closer = ")" if val == "(" else "]"
            node, depth = self.mapping(closer)
            self.expect(closer)
            self.nest -= 1
            return node, depth
        raise self.error("an axis, a number, '(' or '['")

    def item(self) -> tuple[tuple, int]:
        node, depth = self.atom()
        toks = self.toks
        while True:
            tok = toks[self.i]
            if tok[1] not in _OPS and tok[0] != "pad":
                return node, depth
            op, opcol = tok[1], tok[2]
            depth += 1
            if depth > MAX_DEPTH:
                raise fail("parse-error", what=self.what, column=opcol, found=repr(op),
                           expected=f"a mapping nested at most {MAX_DEPTH} levels deep")
            self.i += 1
            ntok = toks[self.i]
            if ntok[0] != "num":
                raise self.error(f"a number after {op!r}")
            self.i += 1
            node = ("op", op, node, self.number(ntok[1], ntok[2]), opcol, ntok[2])

    def number(self, text: str, col: int) -> int:
        try:
            n = int(limits.number_text(text).replace("_", ""))
        except limits.NumberTooLong as e:
            raise _bad(self.what, col, e.detail, e.fix) from None
        if n > MAX_SIZE:
            raise fail("bad-mapping", what=self.what,
                       detail=f"the number {text} at column {col} is larger than {MAX_SIZE:,}",
                       fix="sizes this large cannot be addressed; use a smaller size")
        return n


def _syntax(text: str, what: str) -> tuple:
    return _Parser(text, what).parse()


def _raw_text(raw: tuple, top: bool = False) -> str:
    """Canonical text of a raw syntax tree (the same text the bound tree prints)."""
    tag = raw[0]
    if tag == "ax":
        return raw[1]
    if tag == "num":
        return str(raw[1])
    if tag == "pair":
        body = ", ".join(_raw_text(i) for i in raw[1])
        return body if top else f"({body})"
    op = raw[1]
    if op in PAD_KINDS:
        op = PAD_SPELLING[PAD_KINDS[op]]
    return f"{_raw_text(raw[2])} {op} {raw[3]}"


def _raw_size(raw: tuple, axes: TMapping[str, int], what: str) -> int:
    """Size of a raw tree over ``axes``, with every semantic check of docs/hardware.md
    section 1."""
    tag = raw[0]
    if tag == "ax":
        size = axes.get(raw[1])
        if size is None:
            declared = ", ".join(axes) or "none"
            raise fail("unknown-axis", what=what, axis=raw[1], column=raw[2], declared=declared)
        return size
    if tag == "num":
        if raw[1] < 1:
            raise _bad(what, raw[2], f"the number {raw[1]} is not a size (sizes start at 1)",
                       "use 1 for the identity")
        return raw[1]
    if tag == "pair":
        size = 1
        for r in raw[1]:  # (held at MAX_SIZE + 1: a product of many terms is no number to
            size = min(size * _raw_size(r, axes, what), MAX_SIZE + 1)  # print or carry)
        if size > MAX_SIZE:  # positions and addresses are 64-bit integers
            text = _raw_text(raw)
            raise _bad(what, _first_col(raw), f"{text if len(text) <= 80 else text[:76] + '...)'}"
                       f" has more than {MAX_SIZE:,} positions", "use fewer or smaller terms")
        return size
    _, op, inner_raw, n, opcol, ncol = raw
    size = _raw_size(inner_raw, axes, what)
    if n < 1:
        raise _bad(what, ncol, f"'{op} {n}' needs a positive number", "use a size >= 1")
    if op == "/":
        if size % n:
            inner = _raw_text(inner_raw)
            raise _bad(what, opcol, f"{inner} / {n}: {n} does not divide the size {size} of "
                       f"{inner}", "divide by a divisor of the size, or pad first (X # n)")
        return size // n
    if op == "%":
        if size % n:
            inner = _raw_text(inner_raw)
            raise _bad(what, opcol, f"{inner} % {n}: {n} does not divide the size {size} of "
                       f"{inner}", "use a divisor of the size, or '= n' to keep the first n")
        return n
    if op == "=":
        if n > size:
            inner = _raw_text(inner_raw)
            raise _bad(what, opcol, f"{inner} = {n}: resize beyond the size {size} of {inner}",
                       f"pad instead: {inner} # {n}")
        return n
    if n < size:
        inner = _raw_text(inner_raw)
        raise _bad(what, opcol, f"{inner} {op} {n}: padding smaller than the inner size "
                   f"{size}", f"pad to at least {size}, or use '= {n}' to truncate")
    return n


def _first_col(raw: tuple) -> int:
    """The column where a raw tree starts."""
    while raw[0] not in ("ax", "num"):
        raw = raw[1][0] if raw[0] == "pair" else raw[2]
    return raw[2]


def _bad(what: str, col: int, detail: str, fix: str) -> Exception:
    """A ``bad-mapping`` error; column 0 is a mapping built by the operations below, not read
    from text, so it has no column to name."""
    where = f" (column {col})" if col else ""
    return fail("bad-mapping", what=what, detail=f"{detail}{where}", fix=fix)


def _bind(raw: tuple, axes: TMapping[str, int]) -> Node:
    """Raw tree -> :class:`Node` tree (the raw tree was checked by :func:`_raw_size`)."""
    tag = raw[0]
    if tag == "ax":
        return Axis(axes[raw[1]], raw[1])
    if tag == "num":
        return Num(raw[1])
    if tag == "pair":
        items = tuple(_bind(r, axes) for r in raw[1])
        return Pair(math.prod(n.size for n in items), items)
    _, op, inner_raw, n, _, _ = raw
    node = _bind(inner_raw, axes)
    if op == "/":
        return Div(node.size // n, node, n)
    if op == "%":
        return Mod(n, node, n)
    if op == "=":
        return Resize(n, node, n)
    return Pad(n, node, n, PAD_KINDS[op])


def _used(raw: tuple, out: list[str]) -> list[str]:
    tag = raw[0]
    if tag == "ax":
        if raw[1] not in out:
            out.append(raw[1])
    elif tag == "pair":
        for r in raw[1]:
            _used(r, out)
    elif tag == "op":
        _used(raw[2], out)
    return out


@lru_cache(maxsize=65536)
def _syntax_info(text: str, what: str) -> tuple[tuple, tuple[str, ...]]:
    raw = _syntax(text, what)
    return raw, tuple(_used(raw, []))


@lru_cache(maxsize=65536)
def _parse_cached(text: str, sizes: tuple[tuple[str, int], ...], what: str) -> "Mapping":
    raw, _ = _syntax_info(text, what)
    axes = dict(sizes)
    return Mapping(raw, axes, _raw_size(raw, axes, what))


def clear_caches() -> None:
    """Forget every parsed mapping (benchmarks measure cold parsing with this)."""
    _syntax_info.cache_clear()
    _parse_cached.cache_clear()
    _same_holding.cache_clear()


def parse(text: str, axes: TMapping[str, int], what: str = "mapping") -> "Mapping":
    """Parse ``text`` (with or without ``m![...]``) over the declared ``axes``.

    Raises :class:`~model.rules.TcplanError` with code ``parse-error``, ``unknown-axis`` or
    ``bad-mapping``; ``what`` names the mapping in messages (e.g. ``"--buf"``).  The syntax
    is cached per text and the checked mapping per (text, sizes of the axes it uses).
    """
    if not isinstance(text, str):
        raise fail("bad-request", detail=f"{what}: expected a mapping string, got "
                   f"{type(text).__name__}", fix="pass the mapping as text, e.g. 'm![A, B]'")
    raw, used = _syntax_info(text, what)
    try:
        sizes = tuple((a, axes[a]) for a in used)
    except KeyError:  # an undeclared axis: report it against the full declaration
        _raw_size(raw, axes, what)
        raise  # pragma: no cover - _raw_size raised
    return _parse_cached(text, sizes, what)


def parse_axes(text: str, what: str = "--axes") -> dict[str, int]:
    """Parse an axis declaration ``N=4,C=3`` (also ``axes![N = 4, C = 3]``)."""
    body = text.strip()
    m = re.fullmatch(r"axes!\s*\[(.*)\]", body, re.S)
    if m:
        body = m.group(1)
    out: dict[str, int] = {}
    for part in body.split(","):
        if not part.strip():
            continue
        mm = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*'*)\s*=\s*([0-9][0-9_]*)\s*", part)
        if not mm:
            raise fail("bad-request", detail=f"{what}: cannot read {part.strip()!r} as NAME=SIZE",
                       fix="declare axes as NAME=SIZE pairs separated by commas, e.g. N=4,C=3")
        name = mm.group(1)
        try:
            size = int(limits.number_text(mm.group(2)).replace("_", ""))
        except limits.NumberTooLong as e:
            raise fail("bad-request", detail=f"{what}: axis {name}: {e.detail}",
                       fix=e.fix) from None
        if size > MAX_SIZE:
            raise fail("bad-request", detail=f"{what}: axis {name} is larger than {MAX_SIZE:,}",
                       fix="use a smaller axis size")
        if size < 1:
            raise fail("bad-request", detail=f"{what}: axis {name} has size {size}",
                       fix="axis sizes start at 1")
        if name in out:
            raise fail("bad-request", detail=f"{what}: axis {name} declared twice",
                       fix="declare every axis once")
        out[name] = size
    if not out:
        raise fail("bad-request", detail=f"{what}: no axes declared",
                   fix="declare axes as NAME=SIZE pairs separated by commas, e.g. N=4,C=3")
    return out


_AXIS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*'*")


def validate_axes(axes: object, what: str = "axes") -> dict[str, int]:
    """Check an axes object from JSON/YAML: names are identifiers, sizes positive ints."""
    if not isinstance(axes, dict) or not axes:
        raise fail("bad-request", detail=f"{what}: expected an object of axis sizes",
                   fix='give axes as {"N": 4, "C": 3}')
    out: dict[str, int] = {}
    for name, size in axes.items():
        if not isinstance(name, str) or not _AXIS_NAME.fullmatch(name):
            raise fail("bad-request", detail=f"{what}: {name!r} is not an axis name",
                       fix="axis names are identifiers")
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_SIZE:
            shown = (repr(size) if isinstance(size, bool) or not isinstance(size, int)
                     or size < 1 else "too large")
            raise fail("bad-request", detail=f"{what}: axis {name} has size {shown}",
                       fix=f"axis sizes are integers from 1 to {MAX_SIZE:,}")
        out[name] = size
    return out


# ---------------------------------------------------------------------------------------
# Reference semantics on the tree
# ---------------------------------------------------------------------------------------
def _cell(node: Node, i: int) -> tuple[int, dict[str, int]]:
    """Status and index of position ``i`` (``0 <= i < node.size``)."""
    if isinstance(node, Axis):
        return LIVE, {node.name: i}
    if isinstance(node, Num):
        return LIVE, {}
    if isinstance(node, Pair):
        status, index = LIVE, dict[str, int]()
        rest = node.size
        for item in node.items:
            rest //= item.size
            s, idx = _cell(item, (i // rest) % item.size)
            if status == LIVE and s != LIVE:
                status = s  # padding of the outer (major) part wins
            for k, v in idx.items():
                index[k] = index.get(k, 0) + v
        return status, index
    if isinstance(node, Div):
        return _cell(node.inner, i * node.by)
    if isinstance(node, (Mod, Resize)):
        return _cell(node.inner, i)  # i < size <= inner size, so i mod size(inner) == i
    if isinstance(node, Pad):
        if i < node.inner.size:
            return _cell(node.inner, i)
        return node.kind, {}
    raise TypeError(node)  # pragma: no cover


def _eval(node: Node, pos: np.ndarray, coords: dict[str, np.ndarray], status: np.ndarray
          ) -> None:
    """Vectorized :func:`_cell`: add coordinates into ``coords``, fold padding into ``status``."""
    if isinstance(node, Axis):
        c = coords.get(node.name)
        coords[node.name] = pos.copy() if c is None else c + pos
    elif isinstance(node, Num):
        return
    elif isinstance(node, Pair):
        rest = node.size
        for k, item in enumerate(node.items):
            rest //= item.size
            sub = pos // rest if rest > 1 else pos
            if k:  # the major item needs no reduction: pos < size
                sub = sub % item.size
            _eval(item, sub, coords, status)
    elif isinstance(node, Div):
        _eval(node.inner, pos * node.by, coords, status)
    elif isinstance(node, (Mod, Resize)):
        _eval(node.inner, pos, coords, status)
    elif isinstance(node, Pad):
        inside = pos < node.inner.size
        if inside.all():
            _eval(node.inner, pos, coords, status)
            return
        _eval(node.inner, np.where(inside, pos, 0), coords, status)
        np.copyto(status, np.uint8(node.kind), where=(~inside) & (status == LIVE))
    else:  # pragma: no cover
        raise TypeError(node)


def _axes_of(node: Node) -> list[str]:
    if isinstance(node, Axis):
        return [node.name]
    if isinstance(node, Num):
        return []
    if isinstance(node, Pair):
        out: list[str] = []
        for it in node.items:
            out += [a for a in _axes_of(it) if a not in out]
        return out
    return _axes_of(node.inner)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------
# Factor decomposition
# ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class Factor:
    """One digit of a mapping: positions ``d`` in ``[0, size)``.

    * ``axis`` is None for a broadcast number or a padding-only digit (``1 # 8``);
    * a live digit ``d < count`` contributes ``lo * d`` to ``axis`` (digit range
      ``[lo, lo * radix)``; ``count <= radix`` live values, fewer after ``=``);
    * positions ``count <= d < size`` are padding: ``pads`` lists ``(end, kind)`` segments
      tiling ``[count, size)``.
    """

    axis: str | None
    lo: int
    radix: int
    count: int
    size: int
    pads: tuple[tuple[int, int], ...] = ()

    @property
    def hi(self) -> int:
        return self.lo * self.radix

    def div(self, k: int) -> "Factor":
        return Factor(self.axis, self.lo * k if self.axis else 0, -(-self.radix // k),
                      -(-self.count // k), self.size // k,
                      _trim_pads(((-(-e // k), kind) for e, kind in self.pads),
                                 -(-self.count // k), self.size // k))

    def keep(self, k: int, shrink_range: bool) -> "Factor":
        """The first ``k`` positions (``%`` shrinks the digit range, ``=`` keeps it)."""
        count = min(self.count, k)
        radix = min(self.radix, k) if shrink_range else self.radix
        return Factor(self.axis, self.lo, radix, count, k,
                      _trim_pads(((min(e, k), kind) for e, kind in self.pads), count, k))

    def pad(self, size: int, kind: int) -> "Factor":
        pads = self.pads + ((size, kind),) if size > self.size else self.pads
        return Factor(self.axis, self.lo, self.radix, self.count, size, pads)

    def pad_kind(self, d: int) -> int:
        if d < self.count:
            return LIVE
        for end, kind in self.pads:
            if d < end:
                return kind
        return OOB

    def label(self, axes: TMapping[str, int]) -> str:
        """A readable ``m![...]``-style term for this factor (for tables and messages)."""
        if self.axis is None:
            text = str(self.count)
        else:
            text = self.axis
            if self.lo > 1:
                text += f" / {self.lo}"
            if self.hi < axes[self.axis]:
                text += f" % {self.radix}"
            if self.count < self.radix and self.count < self.size:
                text += f" = {self.count}"
        for end, kind in self.pads:
            text += f" {PAD_SPELLING[kind]} {end}"
        return text

    def digits(self, axes: TMapping[str, int]) -> str:
        if self.axis is None:
            return "broadcast"
        hi = self.hi if self.hi < axes[self.axis] else axes[self.axis]
        return f"{self.axis} digits [{self.lo}, {hi})"


def _trim_pads(pads: Iterable[tuple[int, int]], count: int, size: int
               ) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    prev = count
    for end, kind in pads:
        end = min(end, size)
        if end > prev:
            out.append((end, kind))
            prev = end
    return tuple(out)


class NotFactorable(Exception):
    pass


def coalesce_factors(factors: Iterable[Factor]) -> tuple[Factor, ...]:
    """Merge adjacent digits of one axis that are contiguous in both index and position.

    ``A / 3, A % 3`` (A = 12) becomes the single digit ``A``: the outer digit starts where the
    inner one ends (``outer.lo == inner.lo * inner.radix``) and the inner digit is full (every
    position live, no padding).  Post-condition: the same cells position by position (tested).
    """
    out: list[Factor] = []
    for f in factors:
        if out:
            x = out[-1]
            if (x.axis is not None and x.axis == f.axis and x.lo == f.lo * f.radix
                    and f.count == f.radix == f.size):
                out[-1] = Factor(f.axis, f.lo, x.radix * f.radix, x.count * f.size,
                                 x.size * f.size, tuple((e * f.size, k) for e, k in x.pads))
                continue
        out.append(f)
    return tuple(out)


def _factors(raw: tuple, axes: TMapping[str, int]) -> list[Factor]:
    """Digit factors of a raw tree whose sizes were checked (outermost first)."""
    tag = raw[0]
    if tag == "ax":
        size = axes[raw[1]]
        return [Factor(raw[1], 1, size, size, size)] if size > 1 else []
    if tag == "num":
        n = raw[1]
        return [Factor(None, 0, n, n, n)] if n > 1 else []
    if tag == "pair":
        out: list[Factor] = []
        for it in raw[1]:
            out += _factors(it, axes)
        return out
    op, n = raw[1], raw[3]
    fs = _factors(raw[2], axes)
    if op == "/":
        rem = n
        while rem > 1:
            f = fs[-1]
            if rem % f.size == 0:
                fs.pop()
                rem //= f.size
            elif f.size % rem == 0:
                fs[-1] = f.div(rem)
                rem = 1
            else:
                raise NotFactorable(f"'{_raw_text(raw)}' splits inside a digit of size "
                                    f"{f.size}")
        return fs
    if op == "%" or op == "=":
        keep, shrink = n, op == "%"
        out = []
        for f in reversed(fs):
            if keep == 1:
                break
            if keep % f.size == 0:
                out.append(f)
                keep //= f.size
            elif keep < f.size:
                out.append(f.keep(keep, shrink))
                keep = 1
            else:
                raise NotFactorable(f"'{_raw_text(raw)}' keeps {keep} positions across a "
                                    f"digit of size {f.size}")
        return out[::-1]
    kind = PAD_KINDS[op]
    inner_size = math.prod(f.size for f in fs)
    if n == inner_size:
        return fs
    if not fs:
        return [Factor(None, 0, 1, 1, n, ((n, kind),))]
    inner = inner_size // fs[0].size
    if n % inner:
        raise NotFactorable(f"'{_raw_text(raw)}' pads to {n}, not a multiple of the inner "
                            f"digits' {inner} positions")
    return [fs[0].pad(n // inner, kind)] + fs[1:]


# ---------------------------------------------------------------------------------------
# The mapping value
# ---------------------------------------------------------------------------------------
def _short(m: "Mapping") -> str:
    text = m.text()
    return text if len(text) <= 80 else text[:77] + "...]"


class Mapping:
    """A parsed mapping expression over the axes it uses.

    ``raw`` is the syntax tree (tuples); ``node`` the typed tree for the cell semantics, built
    on first use; ``factors`` / ``items`` the digit decomposition, also built on first use.
    """

    __slots__ = ("raw", "axes", "size", "_node", "_factors", "_items", "_text", "memo")

    def __init__(self, raw: tuple, axes: TMapping[str, int], size: int):
        self.raw = raw
        self.axes = dict(axes)
        self.size = size
        self._node: Node | None = None
        self._factors: tuple[Factor, ...] | None = None
        self._items: list[tuple[str, tuple[Factor, ...]]] | None = None
        self._text: str | None = None
        #: derived views other modules compute once per mapping (e.g. the sequencer's)
        self.memo: dict[str, object] = {}

    # -- basics -----------------------------------------------------------------------
    @property
    def node(self) -> Node:
        if self._node is None:
            self._node = _bind(self.raw, self.axes)
        return self._node

    @property
    def used_axes(self) -> list[str]:
        return _used(self.raw, [])

    def text(self) -> str:
        """Canonical text: ``m![...]``, single spaces, ``#{*}`` written ``#``."""
        if self._text is None:
            self._text = f"m![{self.body()}]"
        return self._text

    def body(self) -> str:
        """The canonical text between ``m![`` and ``]`` (a term as messages name it)."""
        return _raw_text(self.raw, top=True)

    __str__ = text

    def __repr__(self) -> str:
        return f"Mapping({self.text()!r})"

    def _key(self) -> tuple:
        return (self.text(), tuple(sorted(self.axes.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    # -- construction (the operations of the notation, as values) -----------------------
    def div(self, n: int) -> "Mapping":
        """``self / n``: every n-th position (the outer digits)."""
        return _op(self, "/", n)

    def mod(self, n: int) -> "Mapping":
        """``self % n``: the first n positions as a digit range (the inner digits)."""
        return _op(self, "%", n)

    def resize(self, n: int) -> "Mapping":
        """``self = n``: the first n positions, the digit range kept."""
        return _op(self, "=", n)

    def pad(self, n: int, kind: int = TOP) -> "Mapping":
        """``self # n`` (``#{0}``, ``#{!}`` by ``kind``): n positions, the rest padding."""
        return _op(self, PAD_SPELLING[kind], n)

    __truediv__ = div
    __mod__ = mod

    def unpadded(self) -> "Mapping":
        """The mapping with each top-level term's padding dropped (``m![A # 8, B]`` is
        ``m![A, B]``): the positions that hold data, in the same order."""
        pads = set(PAD_SPELLING.values())
        return join(_made(t.raw[2], t.axes) if t.raw[0] == "op" and t.raw[1] in pads
                    else t for t in self.terms)

    @property
    def terms(self) -> tuple["Mapping", ...]:
        """The top-level comma-separated terms, outermost first, each a mapping
        (``join(m.terms) == m``)."""
        raws = self.raw[1] if self.raw[0] == "pair" else (self.raw,)
        return tuple(_made(r, self.axes) for r in raws)

    def take(self, start: int, stop: int | None = None) -> "Mapping":
        """The terms ``[start, stop)`` joined (``m![1]`` when none)."""
        return join(self.terms[start:stop])

    def drop(self, term: "Mapping") -> "Mapping":
        """The terms without the first one equal to ``term`` (all of them when none is)."""
        terms = list(self.terms)
        if term in terms:
            terms.remove(term)
        return join(terms)

    # -- semantics --------------------------------------------------------------------
    def cell(self, i: int) -> Cell:
        """Position ``i`` -> live index / padding kind / out of bounds (docs/hardware.md
        section 1)."""
        if i < 0 or i >= self.size:
            return Cell("oob")
        status, index = _cell(self.node, i)
        if status != LIVE:
            return Cell(STATUS_NAMES[status])
        full = {a: 0 for a in self.used_axes}
        full.update(index)
        return Cell("live", full)

    def evaluate(self, positions: np.ndarray | None = None
                 ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """All positions at once: (axis -> int64 coordinates, uint8 status codes).

        ``positions`` defaults to ``arange(size)``; positions outside ``[0, size)`` get
        status :data:`OOB`.  Coordinates are 0 wherever the status is not :data:`LIVE`.
        """
        if positions is None:
            if self.size > limits.EVAL_MAX_POSITIONS:  # (the message only when it is over)
                raise limits.size_error(self.size, limits.EVAL_MAX_POSITIONS,
                                        f"the mapping {_short(self)}", "positions",
                                        {f"term {t}": n for t, n in self._term_sizes()},
                                        limits.EVALUATION)
            pos = np.arange(self.size, dtype=np.int64)
            oob = None
        else:
            pos = np.asarray(positions, dtype=np.int64)
            oob = (pos < 0) | (pos >= self.size)
            if oob.any():
                pos = np.where(oob, 0, pos)
            else:
                oob = None
        status = np.zeros(pos.shape, dtype=np.uint8)
        coords: dict[str, np.ndarray] = {}
        _eval(self.node, pos, coords, status)
        if oob is not None:
            status[oob] = OOB
        dead = status != LIVE
        any_dead = bool(dead.any())
        out: dict[str, np.ndarray] = {}
        for a in self.used_axes:
            c = coords.get(a)
            if c is None:
                c = np.zeros(pos.shape, dtype=np.int64)
            elif any_dead:
                c = np.where(dead, 0, c)
            out[a] = c
        return out, status

    # -- factor decomposition -----------------------------------------------------------
    @property
    def factors(self) -> tuple[Factor, ...]:
        """Digit factors, outermost first (size-1 digits omitted).

        Raises ``bad-mapping`` when the positions are not a product of digit factors.
        """
        if self._factors is None:
            self._factors = tuple(f for _, fs in self.items() for f in fs)
        return self._factors

    def _term_sizes(self) -> list[tuple[str, int]]:
        """Each top-level term's text and size (no factoring needed)."""
        raws = self.raw[1] if self.raw[0] == "pair" else (self.raw,)
        return [(_raw_text(r), _raw_size(r, self.axes, "")) for r in raws]

    def items(self) -> list[tuple[str, tuple[Factor, ...]]]:
        """Top-level comma-separated terms with their factors (for labelling entries)."""
        if self._items is None:
            raws = self.raw[1] if self.raw[0] == "pair" else (self.raw,)
            try:
                self._items = [(_raw_text(r), tuple(_factors(r, self.axes))) for r in raws]
            except NotFactorable as e:
                raise fail("bad-mapping", what=self.text(),
                           detail=f"not a product of digit factors: {e}",
                           fix="split the axes explicitly (A / s, A % s) so every term is "
                               "one digit range") from None
        return self._items

    def describe_factors(self) -> list[dict]:
        out = []
        for f in self.factors:
            hi = None
            if f.axis is not None:
                hi = min(f.hi, self.axes[f.axis]) if f.hi >= self.axes[f.axis] else f.hi
            out.append({
                "term": f.label(self.axes), "axis": f.axis,
                "lo": f.lo if f.axis else None, "hi": hi,
                "iterations": f.count, "size": f.size,
                "padding": [[end, STATUS_NAMES[k]] for end, k in f.pads],
            })
        return out


def equivalent(a: Mapping, b: Mapping) -> bool:
    """Same function position -> cell (exhaustive, vectorized)."""
    if a.size != b.size:
        return False
    ca, sa = a.evaluate()
    cb, sb = b.evaluate()
    if not np.array_equal(sa, sb):
        return False
    for ax in set(ca) | set(cb):
        x = ca.get(ax)
        y = cb.get(ax)
        x = np.zeros(a.size, np.int64) if x is None else x
        y = np.zeros(a.size, np.int64) if y is None else y
        if not np.array_equal(x, y):
            return False
    return True



def held_indices(m: Mapping) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every position's index (axis -> coordinate) and whether it holds one: live, and
    every coordinate inside its axis (``m![B # 64 / 32, B # 64 % 32]`` reaches ``B = 56``
    at position 56, past an axis of 56: that position holds nothing, as in ``B # 64``).
    The arrays are read-only: a mapping of at most :data:`HELD_MEMO_POSITIONS` positions
    keeps them (``memo``), the engines' checks asking for the same mappings' over and over."""
    got = m.memo.get("held")
    if got is None:
        coords, status = m.evaluate()
        held = status == LIVE
        for a, c in coords.items():
            held &= c < m.axes[a]
        for arr in (held, *coords.values()):
            arr.flags.writeable = False
        got = (coords, held)
        if m.size <= HELD_MEMO_POSITIONS:
            m.memo["held"] = got
    coords, held = got  # type: ignore[misc]
    return dict(coords), held


#: the largest mapping whose held indices :func:`held_indices` keeps on the mapping
HELD_MEMO_POSITIONS = 1 << 16


@lru_cache(maxsize=65536)
def _same_holding(a: Mapping, b: Mapping) -> bool:
    if a.size != b.size:
        return False
    (ca, ha), (cb, hb) = held_indices(a), held_indices(b)
    if not np.array_equal(ha, hb):
        return False
    zero = np.zeros(a.size, np.int64)
    return all(np.array_equal(np.where(ha, ca.get(k, zero), 0), np.where(hb, cb.get(k, zero), 0))
               for k in set(ca) | set(cb))


def same_holding(a: Mapping, b: Mapping) -> bool:
    """Do ``a`` and ``b`` hold the same index at every position, and nothing at the same
    positions (whatever the kind of padding there)?  Coarser than :func:`equivalent`:
    ``m![B # 64 / 32, B # 64 % 32]`` holds what ``m![B # 64]`` does.  (Remembered: a
    pure function of the two mappings' values.)"""
    return _same_holding(a, b)

# ---------------------------------------------------------------------------------------
# Construction: mappings built as values, never as text to parse (issue 28)
# ---------------------------------------------------------------------------------------
@lru_cache(maxsize=65536)
def _made_cached(raw: tuple, sizes: tuple[tuple[str, int], ...], what: str) -> Mapping:
    axes = dict(sizes)
    return Mapping(raw, axes, _raw_size(raw, axes, what))


def _made(raw: tuple, axes: TMapping[str, int], what: str = "mapping") -> Mapping:
    """The mapping of a raw tree built below, checked as parsed text is (the same rules and
    errors), over the axes it uses; one value per (tree, sizes), as :func:`parse` keeps one
    per text, so what modules memoize on a mapping (``memo``) is computed once."""
    sizes = tuple((a, axes[a]) for a in _used(raw, []))
    return _made_cached(raw, sizes, what)


def _op(m: Mapping, op: str, n: int) -> Mapping:
    return _made(("op", op, m.raw, n, 0, 0), m.axes)


def axis(name: str, size: int) -> Mapping:
    """``m![name]`` over an axis of ``size`` positions."""
    if not _AXIS_NAME.fullmatch(name):
        raise fail("bad-request", detail=f"{name!r} is not an axis name",
                   fix="axis names are identifiers")
    return _made(("ax", name, 0), {name: size})


def number(n: int) -> Mapping:
    """``m![n]``: n positions that all hold the empty index (``number(1)`` is the identity)."""
    return _made(("num", n, 0), {})


def join(parts: Iterable[Mapping]) -> Mapping:
    """The terms of ``parts`` side by side, outermost first (``m![[a], [b]]``; pairing is
    associative, so nested terms are flattened as the parser flattens them); ``m![1]`` when
    there are none.  The parts must agree on the size of every axis they share."""
    raws: list[tuple] = []
    axes: dict[str, int] = {}
    for p in parts:
        for a, n in p.axes.items():
            if axes.setdefault(a, n) != n:
                raise fail("bad-mapping", what=p.text(), detail=f"axis {a} has size {n} here "
                           f"and {axes[a]} in an earlier part", fix="join mappings over the "
                           "same axes")
        raws.extend(p.raw[1] if p.raw[0] == "pair" else (p.raw,))
    if not raws:
        return number(1)
    return _made(raws[0] if len(raws) == 1 else ("pair", tuple(raws)), axes)


def from_factor(f: Factor, axes: TMapping[str, int]) -> Mapping:
    """The one-term mapping whose single digit is ``f`` (post-condition, tested: its cells
    are the digit's, position by position).

    ``A / lo % radix`` with ``= count`` where the live values end inside the range and the
    padding segments after it; where the axis's size is no multiple of the digit's range
    (a digit of a padded axis), the axis is padded to the next multiple first
    (``(A # 16) / 4``), as the notation writes it."""
    if f.axis is None:
        m = number(f.count)
    else:
        size = axes[f.axis]
        m = axis(f.axis, size)
        step = f.hi if f.hi < size else f.lo
        if size % step:
            m = m.pad(-(-size // step) * step)
        if f.lo > 1:
            m = m.div(f.lo)
        if f.hi < m.size * f.lo:
            m = m.mod(f.radix)
        if f.count < m.size:
            m = m.resize(f.count)
    for end, kind in f.pads:
        m = m.pad(end, kind)
    return m


def from_factors(factors: Iterable[Factor], axes: TMapping[str, int]) -> Mapping:
    """The mapping of digits ``factors``, outermost first (``from_factors(m.factors)`` holds
    what ``m`` holds, position by position)."""
    return join(from_factor(f, axes) for f in factors)


def split_inner(m: Mapping, n: int) -> tuple[Mapping, Mapping]:
    """``m`` cut into (outer, inner) where ``inner`` holds the innermost ``n`` positions
    (a packet, a 32-byte flit): ``join((outer, inner))`` holds what ``m`` holds, position by
    position (tested).  A digit the cut falls inside is split into its outer and inner parts
    (``A`` at 4: ``A / 4, A % 4``); ``bad-mapping`` when ``n`` does not divide ``m``'s size
    or the cut falls inside a digit whose live values end part-way (``A = 5`` at 4)."""
    if n < 1 or m.size % n:
        raise fail("bad-mapping", what=m.text(), detail=f"{n} positions do not divide its "
                   f"{m.size}", fix="cut at a divisor of the size, or pad first (X # n)")
    outer: list[Factor] = []
    inner: list[Factor] = []
    rest = n
    for f in reversed(m.factors):
        if rest == 1:
            outer.append(f)
        elif f.size <= rest and rest % f.size == 0:
            inner.append(f)
            rest //= f.size
        elif f.size % rest == 0 and (f.count == f.size or f.count % rest == 0) and \
                all(end % rest == 0 for end, _ in f.pads):
            outer.append(f.div(rest))
            inner.append(f.keep(rest, shrink_range=True))
            rest = 1
        else:
            raise fail("bad-mapping", what=m.text(), detail=f"the innermost {n} positions "
                       f"end inside the digit {f.label(m.axes)}, whose values do not split "
                       f"there", fix="cut at a digit boundary, or pad the digit first")
    return (from_factors(reversed(outer), m.axes), from_factors(reversed(inner), m.axes))
