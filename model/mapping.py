"""Mapping expressions (``m![...]``): parsing, printing, cell evaluation and factor decomposition.

Grammar (facts.md section 1)::

    mapping := item ("," item)* [","]
    item    := atom (op NUMBER)*
    op      := "/" | "%" | "=" | "#" | "#{*}" | "#{0}" | "#{!}"
    atom    := AXIS | NUMBER | "(" mapping ")" | "[" mapping "]"

with or without the ``m![ ... ]`` wrapper.  The semantics table of facts.md section 1 is
implemented twice, independently:

* on the syntax tree (:meth:`Mapping.cell`, :meth:`Mapping.evaluate`): the reference semantics,
  exact for every mapping the grammar admits;
* as a *factor decomposition* (:attr:`Mapping.factors`): the mapping as a list of digit factors,
  outermost first, each ``coordinate contribution = lo * digit`` of one axis (or a broadcast).
  The sequencer derivation works on factors.  A mapping whose positions are not a product of
  digit factors (e.g. ``(A, B) / 3``) has none and is rejected there with ``bad-mapping``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping as TMapping, Sequence

import numpy as np

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
        if self.live:
            return "Cell({" + ", ".join(f"{k}: {v}" for k, v in self.index.items()) + "})"
        return f"Cell({self.status})"


# ---------------------------------------------------------------------------------------
# Syntax tree.  Nodes are immutable and hashable; equality is structural.
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Node:
    size: int


@dataclass(frozen=True)
class Axis(Node):
    name: str


@dataclass(frozen=True)
class Num(Node):
    """A number ``n``: n positions that all map to the empty index (broadcast)."""


@dataclass(frozen=True)
class Pair(Node):
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Div(Node):
    inner: Node
    by: int


@dataclass(frozen=True)
class Mod(Node):
    inner: Node
    by: int


@dataclass(frozen=True)
class Resize(Node):
    inner: Node
    to: int


@dataclass(frozen=True)
class Pad(Node):
    inner: Node
    to: int
    kind: int  # TOP, ZERO or BOTTOM


def _node_text(node: Node, top: bool = False) -> str:
    if isinstance(node, Axis):
        return node.name
    if isinstance(node, Num):
        return str(node.size)
    if isinstance(node, Pair):
        body = ", ".join(_node_text(i) for i in node.items)
        return body if top else f"({body})"
    if isinstance(node, Div):
        return f"{_node_text(node.inner)} / {node.by}"
    if isinstance(node, Mod):
        return f"{_node_text(node.inner)} % {node.by}"
    if isinstance(node, Resize):
        return f"{_node_text(node.inner)} = {node.to}"
    if isinstance(node, Pad):
        return f"{_node_text(node.inner)} {PAD_SPELLING[node.kind]} {node.to}"
    raise TypeError(node)  # pragma: no cover


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


def _describe(tok: tuple[str, str, int] | None) -> str:
    if tok is None:
        return "end of input"
    kind, text, _ = tok
    return f"{text!r}"


class _Parser:
    def __init__(self, text: str, axes: TMapping[str, int], what: str):
        self.text = text
        self.axes = axes
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
            if kind == "pad":
                val = re.sub(r"\s+", "", val)
            self.toks.append((kind, val, col))
        self.i = 0

    # -- helpers --------------------------------------------------------------------
    def peek(self) -> tuple[str, str, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def col(self) -> int:
        tok = self.peek()
        return tok[2] if tok else len(self.text) + 1

    def error(self, expected: str) -> Exception:
        return fail("parse-error", what=self.what, expected=expected, column=self.col(),
                    found=_describe(self.peek()))

    def expect(self, text: str) -> None:
        tok = self.peek()
        if tok is None or tok[1] != text:
            raise self.error(repr(text))
        self.i += 1

    def bad(self, col: int, detail: str, fix: str) -> Exception:
        return fail("bad-mapping", what=self.what, detail=f"{detail} (column {col})", fix=fix)

    # -- grammar --------------------------------------------------------------------
    def parse(self) -> Node:
        if self.wrapped:  # m![ mapping ]
            self.expect("[")
            node = self.mapping("]")
            self.expect("]")
        else:
            node = self.mapping(None)
        if self.peek() is not None:
            raise self.error("',' or end of input" if not self.wrapped else "end of input")
        return node

    def mapping(self, closer: str | None) -> Node:
        items: list[Node] = []
        while True:
            tok = self.peek()
            if tok is None or tok[1] == closer:
                break  # empty mapping or trailing comma
            items.append(self.item())
            tok = self.peek()
            if tok is not None and tok[1] == ",":
                self.i += 1
                continue
            if tok is not None and tok[1] != closer:
                raise self.error("an operator, ',' or " + (f"'{closer}'" if closer
                                                           else "end of input"))
            break
        if not items:
            return Num(1)
        if len(items) == 1:
            return items[0]
        flat: list[Node] = []
        for it in items:  # pairing is associative: (A, B), C == A, B, C
            flat.extend(it.items if isinstance(it, Pair) else (it,))
        return Pair(math.prod(n.size for n in flat), tuple(flat))

    def atom(self) -> Node:
        tok = self.peek()
        if tok is None:
            raise self.error("an axis, a number, '(' or '['")
        kind, val, col = tok
        if kind == "ident":
            self.i += 1
            if val not in self.axes:
                declared = ", ".join(self.axes) or "none"
                raise fail("unknown-axis", what=self.what, axis=val, column=col,
                           declared=declared)
            return Axis(self.axes[val], val)
        if kind == "num":
            self.i += 1
            n = int(val.replace("_", ""))
            if n < 1:
                raise self.bad(col, f"the number {n} is not a size (sizes start at 1)",
                               "use 1 for the identity")
            return Num(n)
        if val in ("(", "["):
            self.i += 1
            closer = ")" if val == "(" else "]"
            node = self.mapping(closer)
            self.expect(closer)
            return node
        raise self.error("an axis, a number, '(' or '['")

    def number(self, op: str) -> tuple[int, int]:
        tok = self.peek()
        if tok is None or tok[0] != "num":
            raise self.error(f"a number after {op!r}")
        self.i += 1
        return int(tok[1].replace("_", "")), tok[2]

    def item(self) -> Node:
        node = self.atom()
        while True:
            tok = self.peek()
            if tok is None or tok[1] not in ("/", "%", "=") and tok[0] != "pad":
                return node
            op, opcol = tok[1], tok[2]
            self.i += 1
            n, ncol = self.number(op)
            inner = _node_text(node)
            if n < 1:
                raise self.bad(ncol, f"'{op} {n}' needs a positive number", "use a size >= 1")
            if op == "/":
                if node.size % n:
                    raise self.bad(opcol, f"{inner} / {n}: {n} does not divide the size "
                                   f"{node.size} of {inner}",
                                   "divide by a divisor of the size, or pad first (X # n)")
                node = Div(node.size // n, node, n)
            elif op == "%":
                if node.size % n:
                    raise self.bad(opcol, f"{inner} % {n}: {n} does not divide the size "
                                   f"{node.size} of {inner}",
                                   "use a divisor of the size, or '= n' to keep the first n")
                node = Mod(n, node, n)
            elif op == "=":
                if n > node.size:
                    raise self.bad(opcol, f"{inner} = {n}: resize beyond the size {node.size} "
                                   f"of {inner}", f"pad instead: {inner} # {n}")
                node = Resize(n, node, n)
            else:
                if n < node.size:
                    raise self.bad(opcol, f"{inner} {op} {n}: padding smaller than the inner "
                                   f"size {node.size}",
                                   f"pad to at least {node.size}, or use '= {n}' to truncate")
                node = Pad(n, node, n, PAD_KINDS[op])


@lru_cache(maxsize=65536)
def _parse_cached(text: str, axes_key: tuple[tuple[str, int], ...], what: str) -> "Mapping":
    axes = dict(axes_key)
    node = _Parser(text, axes, what).parse()
    return Mapping(node, axes)


def parse(text: str, axes: TMapping[str, int], what: str = "mapping") -> "Mapping":
    """Parse ``text`` (with or without ``m![...]``) over the declared ``axes``.

    Raises :class:`~model.rules.TcplanError` with code ``parse-error``, ``unknown-axis`` or
    ``bad-mapping``; ``what`` names the mapping in messages (e.g. ``"--buf"``).
    """
    if not isinstance(text, str):
        raise fail("bad-request", detail=f"{what}: expected a mapping string, got "
                   f"{type(text).__name__}", fix="pass the mapping as text, e.g. 'm![A, B]'")
    return _parse_cached(text, tuple(axes.items()), what)


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
        name, size = mm.group(1), int(mm.group(2).replace("_", ""))
        if size < 1:
            raise fail("bad-request", detail=f"{what}: axis {name} has size {size}",
                       fix="axis sizes start at 1")
        if name in out:
            raise fail("bad-request", detail=f"{what}: axis {name} declared twice",
                       fix="declare every axis once")
        out[name] = size
    return out


def validate_axes(axes: object, what: str = "axes") -> dict[str, int]:
    """Check an axes object from JSON/YAML: names are identifiers, sizes positive ints."""
    if not isinstance(axes, dict) or not axes:
        raise fail("bad-request", detail=f"{what}: expected an object of axis sizes",
                   fix='give axes as {"N": 4, "C": 3}')
    out: dict[str, int] = {}
    for name, size in axes.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*'*", name):
            raise fail("bad-request", detail=f"{what}: {name!r} is not an axis name",
                       fix="axis names are identifiers")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise fail("bad-request", detail=f"{what}: axis {name} has size {size!r}",
                       fix="axis sizes are positive integers")
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
        status, index = LIVE, {}
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
@dataclass(frozen=True)
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
        if self.size > self.count:
            kind = self.pads[0][1] if self.pads else TOP
            text += f" {PAD_SPELLING[kind]} {self.size}"
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


def _factors(node: Node) -> list[Factor]:
    if isinstance(node, Axis):
        return [Factor(node.name, 1, node.size, node.size, node.size)] if node.size > 1 else []
    if isinstance(node, Num):
        return [Factor(None, 0, node.size, node.size, node.size)] if node.size > 1 else []
    if isinstance(node, Pair):
        out: list[Factor] = []
        for it in node.items:
            out += _factors(it)
        return out
    if isinstance(node, Div):
        fs = _factors(node.inner)
        rem = node.by
        while rem > 1:
            f = fs[-1]
            if rem % f.size == 0:
                fs.pop()
                rem //= f.size
            elif f.size % rem == 0:
                fs[-1] = f.div(rem)
                rem = 1
            else:
                raise NotFactorable(f"'{_node_text(node)}' splits inside a digit of size "
                                    f"{f.size}")
        return fs
    if isinstance(node, (Mod, Resize)):
        fs = _factors(node.inner)
        keep = node.by if isinstance(node, Mod) else node.to
        shrink = isinstance(node, Mod)
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
                raise NotFactorable(f"'{_node_text(node)}' keeps {keep} positions across a "
                                    f"digit of size {f.size}")
        if keep != 1:  # pragma: no cover - sizes were validated by the parser
            raise NotFactorable(f"'{_node_text(node)}' is larger than its inner mapping")
        return out[::-1]
    if isinstance(node, Pad):
        fs = _factors(node.inner)
        if node.to == node.inner.size:
            return fs
        if not fs:
            return [Factor(None, 0, 1, 1, node.to, ((node.to, node.kind),))]
        inner = math.prod(f.size for f in fs[1:])
        if node.to % inner:
            raise NotFactorable(f"'{_node_text(node)}' pads to {node.to}, not a multiple of "
                                f"the inner digits' {inner} positions")
        return [fs[0].pad(node.to // inner, node.kind)] + fs[1:]
    raise TypeError(node)  # pragma: no cover


# ---------------------------------------------------------------------------------------
# The mapping value
# ---------------------------------------------------------------------------------------
class Mapping:
    """A parsed mapping expression over declared axes."""

    __slots__ = ("node", "axes", "_factors", "_items")

    def __init__(self, node: Node, axes: TMapping[str, int]):
        self.node = node
        self.axes = dict(axes)
        self._factors: tuple[Factor, ...] | None = None
        self._items: list[tuple[str, tuple[Factor, ...]]] | None = None

    # -- basics -----------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.node.size

    @property
    def used_axes(self) -> list[str]:
        return _axes_of(self.node)

    def text(self) -> str:
        """Canonical text: ``m![...]``, single spaces, ``#{*}`` written ``#``."""
        return f"m![{_node_text(self.node, top=True)}]"

    __str__ = text

    def __repr__(self) -> str:
        return f"Mapping({self.text()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and self.node == other.node

    def __hash__(self) -> int:
        return hash(self.node)

    # -- semantics --------------------------------------------------------------------
    def cell(self, i: int) -> Cell:
        """Position ``i`` -> live index / padding kind / out of bounds (facts.md section 1)."""
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
            try:
                self._factors = tuple(_factors(self.node))
            except NotFactorable as e:
                raise fail("bad-mapping", what=self.text(),
                           detail=f"not a product of digit factors: {e}",
                           fix="split the axes explicitly (A / s, A % s) so every term is "
                               "one digit range") from None
        return self._factors

    def items(self) -> list[tuple[str, tuple[Factor, ...]]]:
        """Top-level comma-separated terms with their factors (for labelling entries)."""
        if self._items is None:
            nodes = self.node.items if isinstance(self.node, Pair) else (self.node,)
            out = []
            for n in nodes:
                sub = Mapping(n, self.axes)
                out.append((_node_text(n), sub.factors))
            self._items = out
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

