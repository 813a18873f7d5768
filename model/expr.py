"""Elementwise formulas: reference formulas of chain problems and the expressions the chain
planner compiles (docs/problem-format.md, "Formulas").

Grammar (Python-like precedence, lowest first)::

    expr := bor;  bor := bxor ('|' bxor)*;  bxor := band ('^' band)*;  band := shift ('&' shift)*
    shift := sum (('<<' | '>>') sum)*;  sum := prod (('+' | '-') prod)*
    prod := unary (('*' | '/') unary)*;  unary := '-' unary | atom
    atom := NUMBER | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'

Names: ``x`` (the input stream's tensor), ``group0`` / ``group1`` (the two groups of a pair
problem) and the problem's VRF operands.  Functions: ``max min abs exp negexp sqrt tanh sigmoid
erf log sin cos fma`` and the reductions ``sum rmax rmin`` (``sum(e, R)`` along axis R).

Typing (docs/decisions.md item 40): an f32 formula is all IEEE f32.  An i32 formula is i32
arithmetic (wrapping ``+ - *``, bit operations, clip ``max``/``min``); a float function takes
its i32 argument through FxpToFp(31) and its value is rounded back by FpToFxp(31) where an
integer operation (or the end of the formula) consumes it, so nested float functions stay in
f32 (a "float island").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import limits
from . import numeric as nm
from .rules import fail

FLOAT_FUNCS = ("exp", "negexp", "sqrt", "tanh", "sigmoid", "erf", "log", "sin", "cos")
FUNC_ARITY = {**{f: 1 for f in FLOAT_FUNCS}, "abs": 1, "max": 2, "min": 2, "fma": 3,
              "sum": 2, "rmax": 2, "rmin": 2}
REDUCTIONS = ("sum", "rmax", "rmin")
MAX_DEPTH = 200  # parentheses in one formula
UNARY_OP = {"exp": "Exp", "negexp": "NegExp", "sqrt": "Sqrt", "tanh": "Tanh",
            "sigmoid": "Sigmoid", "erf": "Erf", "log": "Log", "sin": "Sin", "cos": "Cos"}
_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+\.\d*(?:[eE][-+]?\d+)?|\d*\.\d+(?:[eE]"
                    r"[-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)|([A-Za-z_]\w*)|(<<|>>|[-+*/&|^(),]))")


@dataclass(frozen=True)
class Node:
    """A formula node: ``op`` is ``num``, ``var``, a binary operator, ``neg`` or a function."""

    op: str
    args: tuple["Node", ...] = ()
    value: Any = None  # num: the number; var: the name; reductions: the axis
    dtype: str = "i32"  # the type of the value (f32 inside float islands)

    def text(self) -> str:
        if self.op == "num":
            return repr(self.value)
        if self.op == "var":
            return self.value
        if self.op == "neg":
            return f"-{self.args[0].text()}"
        if self.op in FUNC_ARITY:
            extra = [self.value] if self.op in REDUCTIONS else []
            return f"{self.op}({', '.join([a.text() for a in self.args] + extra)})"
        return f"({self.args[0].text()} {self.op} {self.args[1].text()})"

    def walk(self):
        yield self
        for a in self.args:
            yield from a.walk()


@dataclass
class Formula:
    text: str
    dtype: str  # the stream's (and the result's) dtype
    root: Node
    names: tuple[str, ...]  # the input names it reads

    @property
    def transcendental(self) -> bool:
        return any(n.op in FLOAT_FUNCS and n.op != "sqrt" for n in self.root.walk())

    @property
    def pair(self) -> bool:
        return any(n in ("group0", "group1") for n in self.names)


def _bad(text: str, col: int, detail: str) -> Exception:
    return fail("bad-formula", (text,), what=text, column=col + 1, detail=detail)


class _Parser:
    def __init__(self, text: str, dtype: str, names: set[str], axes: dict[str, int]):
        self.text, self.dtype, self.names, self.axes = text, dtype, names, axes
        self.toks: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise _bad(text, pos + len(text[pos:]) - len(text[pos:].lstrip()),
                           f"unexpected {text[pos:].strip()[:1]!r}")
            kind = "num" if m.group(1) else "name" if m.group(2) else "op"
            g = m.lastindex
            assert g is not None  # a match takes one of the three alternatives' groups
            self.toks.append((kind, m.group(g), m.start(g)))
            pos = m.end()
        self.i = 0
        self.used: list[str] = []

    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "", len(self.text))

    def take(self, want: str | None = None) -> tuple[str, str, int]:
        t = self.peek()
        if want is not None and t[1] != want:
            raise _bad(self.text, t[2], f"expected {want!r}, found "
                       f"{t[1]!r}" if t[0] != "end" else f"expected {want!r} at the end")
        self.i += 1
        return t

    def parse(self) -> Node:
        if not self.toks:
            raise _bad(self.text, 0, "empty formula")
        n = self.binary(0)
        t = self.peek()
        if t[0] != "end":
            raise _bad(self.text, t[2], f"unexpected {t[1]!r}")
        return n

    LEVELS = (("|",), ("^",), ("&",), ("<<", ">>"), ("+", "-"), ("*", "/"))

    def binary(self, level: int) -> Node:
        if level == len(self.LEVELS):
            return self.unary()
        n = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in self.LEVELS[level]:
            op = self.take()[1]
            n = Node(op, (n, self.binary(level + 1)))
        return n

    def unary(self) -> Node:
        if self.peek()[1] == "-":
            self.take()
            inner = self.unary()
            if inner.op == "num":
                return Node("num", value=-inner.value)
            return Node("neg", (inner,))
        return self.atom()

    def atom(self) -> Node:
        kind, tok, col = self.take()
        if kind == "num":
            try:  # (Python refuses to convert over 4,300 digits; none fit a dtype)
                limits.number_text(tok)
            except limits.NumberTooLong as e:
                raise _bad(self.text, col, e.detail) from None
            v: Any = int(tok, 0) if re.fullmatch(r"0[xX][0-9a-fA-F]+|\d+", tok) else float(tok)
            if isinstance(v, int) and v >= 1 << 63:
                raise _bad(self.text, col, f"{tok} is beyond 64 bits")
            if isinstance(v, float) and self.dtype == "i32":
                raise _bad(self.text, col, f"{tok} is not an i32 constant")
            return Node("num", value=v)
        if kind == "name":
            if self.peek()[1] == "(":
                if tok not in FUNC_ARITY:
                    raise _bad(self.text, col, f"unknown function {tok!r} (known: "
                               + ", ".join(FUNC_ARITY) + ")")
                self.take("(")
                args = [self.binary(0)]
                while self.peek()[1] == ",":
                    self.take()
                    if tok in REDUCTIONS and len(args) == 1:
                        k, ax, c2 = self.take()
                        if ax not in self.axes:
                            raise _bad(self.text, c2, f"{ax!r} is not a declared axis")
                        self.take(")")
                        return Node(tok, tuple(args), value=ax)
                    args.append(self.binary(0))
                self.take(")")
                if len(args) != FUNC_ARITY[tok]:
                    raise _bad(self.text, col, f"{tok} takes {FUNC_ARITY[tok]} argument(s)")
                return Node(tok, tuple(args))
            if tok not in self.names:
                raise _bad(self.text, col, f"unknown name {tok!r} (known: "
                           + ", ".join(sorted(self.names)) + ")")
            if tok not in self.used:
                self.used.append(tok)
            return Node("var", value=tok)
        if tok == "(":
            n = self.binary(0)
            self.take(")")
            return n
        raise _bad(self.text, col, f"unexpected {tok!r}" if kind != "end" else
                   "unexpected end of the formula")


def parse_formula(text: str, dtype: str, vrf_names: set[str] | frozenset[str],
                  axes: dict[str, int]) -> Formula:
    names = {"x", "group0", "group1"} | set(vrf_names)
    if text.count("(") > MAX_DEPTH:
        raise _bad(text, text.index("("), f"nested deeper than {MAX_DEPTH} parentheses")
    p = _Parser(text, dtype, names, axes)
    try:
        root = _typed(p.parse(), dtype, text)
    except RecursionError:
        raise _bad(text, 0, "nested too deeply") from None
    if "x" in p.used and ("group0" in p.used or "group1" in p.used):
        raise _bad(text, 0, "a formula reads x or the groups of a pair, not both")
    ops = sum(1 for n in root.walk() if n.args)
    limits.check(ops, limits.FORMULA_MAX_OPS, f"the formula {text[:40]!r}", "operations",
                 stage="the chain planner", fix="split the formula over several problems")
    return Formula(text, dtype, root, tuple(p.used))


def _typed(n: Node, dtype: str, text: str) -> Node:
    """Give every node its value type: float functions are f32, and an f32 formula is f32
    throughout; in an i32 formula everything else is i32."""
    args = tuple(_typed(a, dtype, text) for a in n.args)
    if dtype == "f32":
        if n.op in ("<<", ">>"):
            raise _bad(text, 0, "shifts take i32 values; this formula is f32")
        if n.op in ("&", "|", "^"):  # a constant of a bit operation is a bit pattern
            for a in args:
                if a.op == "num" and isinstance(a.value, int) and \
                        not nm.fits_32_bits(a.value):
                    raise _bad(text, 0, f"{a.value} does not fit 32 bits")
            args = tuple(Node("num", (), a.value, "i32") if a.op == "num" and isinstance(
                a.value, int) else a for a in args)
        return Node(n.op, args, n.value, "f32")
    t = "f32" if n.op in FLOAT_FUNCS else "i32"
    if n.op == "num" and isinstance(n.value, int) and not nm.fits_32_bits(n.value):
        raise _bad(text, 0, f"{n.value} does not fit 32 bits")
    return Node(n.op, args, n.value, t)


# ---- evaluation -----------------------------------------------------------------------------
#: per reduced axis: its values in the order to fold them (None: index order) and the lanes
#: folded by a pairwise tree first (1: none), as a chain folds them (Analysis.fold_orders)
FoldOrders = dict[str, tuple[np.ndarray | None, int]]


def evaluate(f: Formula, inputs: dict[str, np.ndarray], axes: list[str],
             orders: FoldOrders | None = None) -> np.ndarray:
    """Evaluate over arrays given on ``axes`` (each input broadcast to them); reductions drop
    their axis, folding in index order or as ``orders`` says.  Returns an array of the
    formula's dtype."""
    frame = list(axes)
    out, out_axes = _eval(f.root, inputs, frame, f.dtype, orders or {})
    out = _as_stream(out, f.root.dtype, f.dtype)
    return _align(out, out_axes, [a for a in frame if a in out_axes])


def _as_stream(v: np.ndarray, have: str, want: str) -> np.ndarray:
    if have == want:
        return v
    return nm.fp_to_fxp(v, 31) if want == "i32" else nm.fxp_to_fp(v, 31)


def _align(v: np.ndarray, have: list[str], want: list[str]) -> np.ndarray:
    """Arrange v (over ``have``) over ``want`` (a superset), size-1 where absent."""
    perm = [have.index(a) for a in want if a in have]
    v = np.transpose(v, perm) if perm else v
    shape = []
    it = iter(v.shape)
    for a in want:
        shape.append(next(it) if a in have else 1)
    return v.reshape(shape)


def _eval(n: Node, inputs: dict, frame: list[str], dtype: str, orders: FoldOrders
          ) -> tuple[np.ndarray, list[str]]:
    dt = nm.NP[n.dtype]
    if n.op == "num":
        v = n.value
        if n.dtype == "i32":
            return np.array(int(v) & 0xFFFFFFFF, np.uint32).view(np.int32).reshape(
                [1] * len(frame)), frame
        return np.full([1] * len(frame), v, np.float32), frame
    if n.op == "var":
        return inputs[n.value], frame
    if n.op in REDUCTIONS:
        v, fr = _eval(n.args[0], inputs, frame, dtype, orders)
        v = _as(v, n.args[0].dtype, n.dtype)
        ax = fr.index(n.value)
        v = np.broadcast_to(v, np.broadcast_shapes(v.shape, tuple(
            1 for _ in fr))) if v.ndim == len(fr) else v
        op = {"sum": "AddSat" if n.dtype == "i32" else "Add", "rmax": "Max",
              "rmin": "Min"}[n.op]
        moved = _folded_first(np.moveaxis(v, ax, 0), *orders.get(n.value, (None, 1)), op)
        acc = moved[0].copy()
        for k in range(1, moved.shape[0]):
            acc = _fold(acc, moved[k], op)
        return acc, [a for a in fr if a != n.value]
    vals: list[np.ndarray] = []
    fr = frame
    for arg in n.args:
        v, fr2 = _eval(arg, inputs, fr, dtype, orders)
        if fr2 != fr:  # a reduction below: reduce the frame for the others too
            fr = fr2
        if n.op in ("&", "|", "^") and n.dtype == "f32" and arg.dtype == "i32":
            vals.append(v.view(np.float32))  # bit pattern of a constant
        else:
            vals.append(_as(v, arg.dtype, n.dtype))
    with np.errstate(all="ignore"):
        if n.op in FLOAT_FUNCS:
            return nm.UNARY[UNARY_OP[n.op]](vals[0]), fr
        if n.op == "fma":
            x, y, z = np.broadcast_arrays(*vals)
            return nm.fma32(x, y, z), fr
        a = vals[0]
        b = vals[1] if len(vals) > 1 else None
        if b is not None:
            a, b = np.broadcast_arrays(a, b)
        if n.dtype == "i32":
            r = _i32(n.op, a, b)
        else:
            r = _f32(n.op, a, b)
    return np.asarray(r, dt), fr


def _folded_first(moved: np.ndarray, order: np.ndarray | None, tree: int, op: str
                  ) -> np.ndarray:
    """The values along a reduced axis (first) in the order they are folded, each run of
    ``tree`` values already folded pairwise: ``((x0 x1) (x2 x3))``."""
    if order is not None and moved.shape[0] == order.size:
        moved = moved[order]
    if tree > 1 and moved.shape[0] % tree == 0:
        runs = moved.reshape((moved.shape[0] // tree, tree) + moved.shape[1:])
        while runs.shape[1] > 1:
            runs = _fold(runs[:, 0::2], runs[:, 1::2], op)
        moved = runs[:, 0]
    return moved


def _fold(acc, x, op):
    if op == "AddSat":
        return nm._sat(acc.astype(np.int64) + x)
    if op == "Add":
        return (acc + x).astype(np.float32)
    return nm._fmax(acc, x) if op == "Max" else nm._fmin(acc, x)


def _as(v: np.ndarray, have: str, want: str) -> np.ndarray:
    """An argument of type ``have`` used where ``want`` is computed (i32 formulas only)."""
    if have == want:
        return v
    return nm.fxp_to_fp(v, 31) if want == "f32" else nm.fp_to_fxp(v, 31)


def _i32(op: str, a, b):
    ops = nm.BINARY_OPS
    if op == "+":
        return ops[("fxp", "i32")]["AddFxp"](a, b)
    if op == "-":
        return ops[("fxp", "i32")]["SubFxp"](a, b)
    if op == "*":
        return ops[("fxp", "i32")]["MulInt"](a, b)
    if op == "/":  # no ALU divides i32 (the planner says so); defined as C division
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        q = np.where(b64 == 0, 0, np.trunc(a64 / np.where(b64 == 0, 1, b64)))
        return nm._wrap(q.astype(np.int64))
    if op == "neg":
        return nm._wrap(-a.astype(np.int64))
    if op == "abs":
        return nm._wrap(np.abs(a.astype(np.int64)))
    if op in ("max", "min"):
        return ops[("clip", "i32")][op.title()](a, b)
    name = {"&": "BitAnd", "|": "BitOr", "^": "BitXor", "<<": "LeftShift",
            ">>": "ArithRightShift"}[op]
    return ops[("logic", "i32")][name](a, b)


def _f32(op: str, a, b):
    ops = nm.BINARY_OPS
    if op in ("+", "-", "*", "/"):
        name = {"+": "AddF", "-": "SubF", "*": "MulF(Mul0)", "/": "DivF"}[op]
        return ops[("fp_binary", "f32")][name](a, b)
    if op == "neg":
        return (a.view(np.uint32) ^ np.uint32(0x80000000)).view(np.float32)
    if op == "abs":
        return (a.view(np.uint32) & np.uint32(0x7FFFFFFF)).view(np.float32)
    if op in ("max", "min"):
        return ops[("clip", "f32")][op.title()](a, b)
    name = {"&": "BitAnd", "|": "BitOr", "^": "BitXor"}[op]
    return ops[("logic", "f32")][name](a, b)
