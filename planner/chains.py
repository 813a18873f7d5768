"""Chain planning: an elementwise formula over a stream -> the fewest Tensor Unit invocations,
each a valid Intra-Slice Chain (seed 003; docs/hardware.md section 7).

1. :func:`linearize` turns the formula into a *spine*: the ops the stream passes, in order, each
   with its operand (a constant, a VRF tensor, or an earlier spine value read from the stash) and
   the conversions an i32 formula's float islands need.  A pair formula has one spine per group
   before the ``_zip`` op and one after it.
2. :func:`solve` encodes the choices as CP-SAT: per op its invocation and its option (stage, ALU,
   arg mode) from the ALU catalog of :mod:`model.vector`; invocations are non-decreasing along the
   spine; inside an invocation stages are non-decreasing and every ALU is used at most once
   (rule ``ve-alu-busy``); a stash read needs its value written in the same invocation at a
   Stashable stage of the same way, or the value entering the invocation (``ve-stash-*``); one
   stash per invocation.  The objective is the chain cycle model of :class:`model.vector.Analysis`
   (flits per invocation, doubled on a split 4-way section, plus one cycle per ALU).
3. :func:`build` turns the solution into chains (narrow/widen, conversions and stash inserted), and
   every chain is validated by :func:`model.vector.analyze` -- the planner only chooses.

When no plan exists the error names why (``plan-no-alu``, ``plan-two-streams``,
``plan-stash-reach``, ``plan-pair``) with what to change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcplan.model import expr as ex
from tcplan.model import vector as ve
from tcplan.model.mapping import Mapping, join
from tcplan.model.numeric import wrap_i32
from tcplan.model.rules import TcplanError, fail
from tcplan.model.tiers import require_placement

# abstract op -> candidate implementations: (step kind, op name, mode when the operand is on
# the right, mode when it is on the left, operand transform)
_Impl = tuple[str, str, str | None, str | None, str | None]
_I32: dict[str, list[_Impl]] = {
    "+": [("fxp", "AddFxp", "Mode01", "Mode10", None), ("clip", "AddFxp", "Mode01", "Mode10",
                                                         None)],
    "-": [("fxp", "SubFxp", "Mode01", "Mode10", None), ("clip", "AddFxp", "Mode01", None,
                                                         "negate"),
          ("fxp", "AddFxp", "Mode01", None, "negate")],
    "*": [("fxp", "MulInt", "Mode01", "Mode10", None)],
    "max": [("clip", "Max", "Mode01", "Mode10", None)],
    "min": [("clip", "Min", "Mode01", "Mode10", None)],
    "&": [("logic", "BitAnd", "Mode01", "Mode10", None)],
    "|": [("logic", "BitOr", "Mode01", "Mode10", None)],
    "^": [("logic", "BitXor", "Mode01", "Mode10", None)],
    "<<": [("logic", "LeftShift", "Mode01", "Mode10", None),
           ("fxp", "LeftShift", "Mode01", "Mode10", None)],
    ">>": [("logic", "ArithRightShift", "Mode01", "Mode10", None),
           ("fxp", "ArithRightShift", "Mode01", "Mode10", None)],
    "neg": [("fxp", "SubFxp", None, "Mode10", "zero")],
}
_F32: dict[str, list[_Impl]] = {
    "+": [("fp_binary", "AddF", "Mode01", "Mode10", None), ("clip", "Add", "Mode01", "Mode10",
                                                            None)],
    "-": [("fp_binary", "SubF", "Mode01", "Mode10", None), ("clip", "Add", "Mode01", None,
                                                            "negate"),
          ("fp_binary", "AddF", "Mode01", None, "negate")],
    "*": [("fp_binary", f"MulF({a})", "Mode01", "Mode10", None) for a in ("Mul0", "Mul1",
                                                                          "Fma")],
    "/": [("fp_binary", "DivF", "Mode01", "Mode10", None), ("fp_div", "DivF", "Mode01",
                                                            "Mode10", None)],
    "max": [("clip", "Max", "Mode01", "Mode10", None)],
    "min": [("clip", "Min", "Mode01", "Mode10", None)],
    "&": [("logic", "BitAnd", "Mode01", "Mode10", None)],
    "|": [("logic", "BitOr", "Mode01", "Mode10", None)],
    "^": [("logic", "BitXor", "Mode01", "Mode10", None)],
    "abs": [("logic", "BitAnd", "Mode01", None, "abs")],
    "neg": [("logic", "BitXor", "Mode01", None, "neg")],
    "fma": [("fp_ternary", "FmaF", None, None, None)],
    **{f: [("fp_unary", ex.UNARY_OP[f], None, None, None)] for f in ex.FLOAT_FUNCS},
}
#: what to write instead, for ops no ALU computes
_NO_ALU_HINT = {
    ("abs", "i32"): "write max(x, 0 - x) (the stash keeps x), or convert to f32",
    ("/", "i32"): "no Vector Engine ALU divides integers: compute in f32 (dtype: f32) or "
                  "multiply by a fixed-point reciprocal",
    ("fma", "i32"): "write a * b + c",
}
#: a zip op per abstract op and dtype (pair mode)
_ZIP = {
    ("+", "i32"): [("clip_zip", "AddFxp"), ("fxp_zip", "AddFxp")],
    ("-", "i32"): [("fxp_zip", "SubFxp")],
    ("*", "i32"): [("fxp_zip", "MulInt")],
    ("max", "i32"): [("clip_zip", "Max")], ("min", "i32"): [("clip_zip", "Min")],
    ("&", "i32"): [("logic_zip", "BitAnd")], ("|", "i32"): [("logic_zip", "BitOr")],
    ("^", "i32"): [("logic_zip", "BitXor")],
    ("+", "f32"): [("fp_zip", "AddF"), ("clip_zip", "Add")],
    ("-", "f32"): [("fp_zip", "SubF")],
    ("*", "f32"): [("fp_zip", f"MulF({a})") for a in ("Mul0", "Mul1", "Fma")],
    ("/", "f32"): [("fp_zip", "DivF")],
    ("max", "f32"): [("clip_zip", "Max")], ("min", "f32"): [("clip_zip", "Min")],
}
_COMMUTATIVE = {"+", "*", "&", "|", "^"}
STASHABLE = frozenset(n for n, s in ve.STAGES.items() if s[2])


@dataclass
class Option:
    kind: str  # step kind, or "fxp_to_fp" / "fp_to_fxp" for conversions
    op: str | None
    mode: str | None
    alu: str | None  # None for conversions (they are stages, not ALUs)
    stage: int
    transform: str | None = None

    @property
    def way(self) -> int:
        return 4 if 6 <= self.stage <= 8 else 8

    def label(self) -> str:
        return f"{self.op or self.kind}" + (f" on {self.alu}" if self.alu else "")


@dataclass
class SpineOp:
    what: str  # abstract op ("+", "exp", "tofloat", ...) for messages
    node: ex.Node | None  # the value it produces
    options: list[Option]
    operands: tuple[ve.Operand, ...] = ()  # const / vrf / stash
    stash_of: int | None = None  # spine value index read from the stash
    left: bool = False  # the operand is the op's first argument
    dtype: str = "i32"  # the stream's dtype after the op
    group: int | None = None  # pair mode: 0 / 1 before the zip; None after
    zip_: bool = False


@dataclass
class Spine:
    ops: list[SpineOp]
    pair: bool = False
    start_dtype: str = "i32"
    #: index of the zip op (pair mode); ops before it carry their group
    zip_at: int | None = None


def _unsupported(what: str, dtype: str, text: str) -> TcplanError:
    return fail("plan-no-alu", (what,), op=what, dtype=dtype, formula=text,
                hint=_NO_ALU_HINT.get((what, dtype), "rewrite the formula with ops the ALU "
                                      "table lists"))


def _options(what: str, dtype: str, left: bool, text: str, operand: str | None = "const",
             same: bool = False) -> list[Option]:
    """The implementations of an abstract op: ``left`` when the operand is its first
    argument, ``operand`` the operand's kind (a negated operand must be a constant), ``same``
    when both arguments are the stream (arg mode Mode00)."""
    table = _I32 if dtype == "i32" else _F32
    out = []
    mode: str | None  # (None: the implementation has no arg mode for that side)
    for kind, op, mode_r, mode_l, tf in table.get(what, []):
        if same:
            if kind not in ve.BINARY or tf is not None:
                continue
            mode = "Mode00"
        else:
            mode = mode_l if left else mode_r
            if kind in ve.BINARY and left and what in _COMMUTATIVE:
                mode = mode_r  # op(c, s) == op(s, c)
            if kind in ve.BINARY and mode is None:
                continue
            if tf == "negate" and (left or operand != "const"):
                continue
        fam = ve.FAMILY[kind]
        alu = ve.ALU_CATALOG[(fam, dtype)][op]
        out.append(Option(kind, op, mode, alu, ve.STEP_STAGE[kind], tf))
    if not out:
        raise _unsupported(what, dtype, text)
    return out


def _conv(to: str) -> Option:
    kind = "fxp_to_fp" if to == "f32" else "fp_to_fxp"
    return Option(kind, None, None, None, ve.STEP_STAGE[kind])


def _fold(n: ex.Node, dtype: str) -> Any:
    """A stream-free subformula's value (constant folding through the reference semantics)."""
    import numpy as np
    v = ex.evaluate(ex.Formula(n.text(), dtype, n, ()), {}, [])
    v = np.asarray(v).reshape(-1)[0]
    return int(v) if dtype == "i32" else float(v)


def linearize(f: ex.Formula, vrf: set[str]) -> Spine:
    """The formula as spines of ops (raises plan-* errors for what cannot be linearized)."""
    if any(m.op in ex.REDUCTIONS for m in f.root.walk()):
        raise fail("plan-pair", ("sum",), formula=f.text,
                   detail="reductions are chain steps with declared mappings; the planner "
                          "compiles elementwise formulas", fix="write the chain as a vector "
                                                               "problem")
    lz = _Linearizer(f, vrf)
    if not lz.dep(f.root):
        raise fail("plan-two-streams", (f.text,), formula=f.text, a=f.text, b="x",
                   detail="the formula does not read the stream", fix="use x")
    if not f.pair:
        ops: list[SpineOp] = []
        lz.lin(f.root, ops, {}, None, f.dtype)
        return Spine(ops, False, f.dtype)
    return lz.pair()


class _Linearizer:
    """The steps of :func:`linearize`: the formula, its stream variables and its VRF
    operands as fields; a spine value table ``values`` maps (node, dtype) to the index of
    the spine value holding it."""

    def __init__(self, f: ex.Formula, vrf: set[str]):
        self.f, self.text, self.vrf = f, f.text, vrf
        self.streams = ("group0", "group1") if f.pair else ("x",)

    def dep(self, n: ex.Node) -> set[str]:
        """The stream variables ``n`` reads."""
        return {m.value for m in n.walk() if m.op == "var" and m.value in self.streams}

    def operand(self, n: ex.Node, dtype: str) -> ve.Operand:
        """``n`` as an op's operand: a VRF tensor or a constant."""
        text = self.text
        if n.op == "var" and n.value in self.vrf:
            return ve.Operand("vrf", name=n.value)
        if self.dep(n):
            raise fail("plan-pair", (n.text(),), formula=text,
                       detail=f"{n.text()} reads a group again after the zip",
                       fix="combine the groups once, with one binary op")
        if any(m.op == "var" for m in n.walk()):
            raise fail("plan-two-streams", (n.text(),), formula=text, a=n.text(), b="the "
                       "stream", detail="an operand is a constant or one VRF tensor; this one "
                       "computes on a VRF tensor", fix="precompute it into its own VRF tensor")
        if n.op == "num" and dtype == "f32" and n.dtype == "i32":
            return ve.Operand("const", value=n.value)  # a bit pattern (docs/decisions.md item 40)
        if n.dtype != dtype and n.op != "num":
            raise fail("plan-two-streams", (n.text(),), formula=text, a=n.text(), b="the "
                       "stream", detail=f"{n.text()} is {n.dtype} where the op computes "
                       f"{dtype}", fix="keep operands in the stream's type")
        return ve.Operand("const", value=_fold(n, dtype))

    @staticmethod
    def convert(ops: list[SpineOp], values: dict, n: ex.Node, cur: str, want: str,
                group: int | None) -> None:
        if cur != want:  # an i32 formula's float island: enter or leave it
            ops.append(SpineOp("to" + ("float" if want == "f32" else "int"), None,
                               [_conv(want)], dtype=want, group=group))
            values[(n, want)] = len(ops)

    @staticmethod
    def done(ops: list[SpineOp], values: dict, n: ex.Node, op: SpineOp) -> None:
        ops.append(op)
        values[(n, n.dtype)] = len(ops)

    def lin(self, n: ex.Node, ops: list[SpineOp], values: dict, group: int | None,
            want: str) -> None:
        """Append the ops that turn the stream into n's value, converted to ``want``."""
        if n.op == "var" and n.value in self.streams:
            values[(n, self.f.dtype)] = 0
            self.convert(ops, values, n, self.f.dtype, want, group)
            return
        if (n, want) in values:  # pragma: no cover - a spine passes a node once
            return
        if n.op in ex.FLOAT_FUNCS or n.op in ("abs", "neg"):
            self.lin_unary(n, ops, values, group)
        elif n.op == "fma":
            self.lin_fma(n, ops, values, group)
        elif all(self.dep(a) for a in n.args):
            self.lin_two_streams(n, ops, values, group)
        else:
            s_ = 0 if self.dep(n.args[0]) else 1
            self.lin(n.args[s_], ops, values, group, n.dtype)
            o = self.operand(n.args[1 - s_], n.dtype)
            self.done(ops, values, n, SpineOp(n.op, n, _options(
                n.op, n.dtype, s_ == 1, self.text, operand=o.kind), (o,), left=s_ == 1,
                dtype=n.dtype, group=group))
        self.convert(ops, values, n, n.dtype, want, group)

    def lin_unary(self, n: ex.Node, ops: list[SpineOp], values: dict, group: int | None
                  ) -> None:
        kind = n.op
        if kind in ex.FLOAT_FUNCS:
            self.lin(n.args[0], ops, values, group, "f32")
            self.done(ops, values, n, SpineOp(kind, n, _options(kind, "f32", False, self.text),
                                              dtype="f32", group=group))
            return
        self.lin(n.args[0], ops, values, group, n.dtype)
        i32 = n.dtype == "i32"
        opts = _options(kind, n.dtype, kind == "neg" and i32, self.text)
        zero = ve.Operand("const", value=0)
        self.done(ops, values, n, SpineOp(kind, n, opts, (zero,) if i32 else (),
                                          left=kind == "neg" and i32, dtype=n.dtype,
                                          group=group))

    def lin_fma(self, n: ex.Node, ops: list[SpineOp], values: dict, group: int | None
                ) -> None:
        a, b, c = args = n.args
        deps = [bool(self.dep(x)) for x in args]
        others: tuple[ex.Node, ...]  # the operands, in slot order
        if deps == [True, True, False] and a == b:  # fma(x, x, c): Mode002
            mode, s_, others = "Mode002", a, (c, c)
        elif deps == [True, False, True] and a == c:  # fma(x, c, x): Mode020
            mode, s_, others = "Mode020", a, (b, b)
        elif sum(deps) == 1:
            i = deps.index(True)
            mode = {0: "Mode012", 1: "Mode102", 2: "Mode120"}[i]
            s_, others = args[i], tuple(x for k, x in enumerate(args) if k != i)
        else:
            raise fail("plan-two-streams", (n.text(),), formula=self.text,
                       a=args[0].text(), b=args[1].text(), detail="fma reads the stream "
                       "once (or twice in one position pair) and operands",
                       fix="keep the other arguments free of the stream")
        self.lin(s_, ops, values, group, n.dtype)
        opt = _options("fma", n.dtype, False, self.text)
        for o in opt:
            o.mode = mode
        self.done(ops, values, n, SpineOp("fma", n, opt, tuple(self.operand(x, n.dtype)
                                                                 for x in others),
                                          dtype=n.dtype, group=group))

    def lin_two_streams(self, n: ex.Node, ops: list[SpineOp], values: dict,
                        group: int | None) -> None:
        """A binary op on two values of the stream: op(s, s) when they are one, else one
        side's spine computing the other on the way, stashed."""
        a, b = n.args
        kind, text = n.op, self.text
        if a == b:  # op(s, s): arg mode Mode00
            try:
                opts = _options(kind, n.dtype, False, text, same=True)
            except TcplanError:
                opts = []
            if opts:
                self.lin(a, ops, values, group, n.dtype)
                self.done(ops, values, n, SpineOp(kind, n, opts, (), dtype=n.dtype,
                                                  group=group))
                return
        if group is not None:
            raise fail("plan-pair", (n.text(),), formula=text,
                       detail=f"{n.text()} reads a group's value twice before the zip; "
                              "that needs the stash, which pair mode does not have",
                       fix="move the op after the zip, or into another invocation")
        for spine_side, other, left in ((a, b, False), (b, a, True)):
            trial: list[SpineOp] = []
            tv: dict = {}
            try:
                self.lin(spine_side, trial, tv, group, n.dtype)
            except TcplanError:
                continue
            idx = tv.get((other, n.dtype))
            if idx is None:
                continue
            try:
                opts = _options(kind, n.dtype, left, text, operand="stash")
            except TcplanError:
                continue
            ops.extend(trial)
            values.update(tv)
            self.done(ops, values, n, SpineOp(kind, n, opts, (ve.Operand("stash"),),
                                              stash_of=idx, left=left, dtype=n.dtype,
                                              group=group))
            return
        raise fail("plan-two-streams", (n.text(),), formula=text, a=a.text(), b=b.text(),
                   detail="both operands depend on the stream and neither is an earlier "
                          "value of the other's computation",
                   fix="load one side as a VRF operand, or restructure the formula")

    # -- pair mode --------------------------------------------------------------------------
    def pair(self) -> Spine:
        """Pair mode: each group's spine up to the zip (the node whose two arguments read one
        group each), the zip, then the rest on the zipped value."""
        f, text = self.f, self.text
        zip_node = next((m for m in f.root.walk() if len(m.args) == 2
                         and self.dep(m.args[0]) in ({"group0"}, {"group1"})
                         and self.dep(m.args[1]) in ({"group0"}, {"group1"})
                         and self.dep(m.args[0]) != self.dep(m.args[1])), None)
        if zip_node is None:
            raise fail("plan-pair", (text,), formula=text,
                       detail="a pair formula combines group0 and group1 with one binary op",
                       fix="e.g. exp(group0) * group1")
        pre: list[SpineOp] = []
        a, b = zip_node.args
        g_of = {0: 0 if self.dep(a) == {"group0"} else 1,
                1: 0 if self.dep(b) == {"group0"} else 1}
        for k, side in enumerate((a, b)):
            self.lin(side, pre, {}, g_of[k], zip_node.dtype)
        if any(op.options[0].kind in ("fxp_to_fp", "fp_to_fxp") for op in pre):
            raise fail("plan-pair", (text,), formula=text,
                       detail="a conversion before the zip converts both groups",
                       fix="convert after the zip, or write the formula in f32")
        zops = _ZIP.get((zip_node.op, zip_node.dtype))
        if not zops:
            raise _unsupported(f"{zip_node.op} (zip)", zip_node.dtype, text)
        swapped = g_of[0] == 1
        opts = []
        for kind, op in zops:
            mode = "Mode10" if swapped and zip_node.op not in _COMMUTATIVE else "Mode01"
            alu = ve.ALU_CATALOG[(ve.FAMILY[kind], zip_node.dtype)][op]
            opts.append(Option(kind, op, mode, alu, ve.STEP_STAGE[kind]))
        pre.append(SpineOp(zip_node.op, zip_node, opts, dtype=zip_node.dtype, zip_=True))
        zip_at = len(pre) - 1
        # after the zip the zipped value is the stream: linearize the rest as a single
        # stream whose only variable is the zip node
        self.zip_node = zip_node
        self.post: list[SpineOp] = []
        self.lin_after(f.root, f.dtype)
        return Spine(pre + self.post, True, f.dtype, zip_at)

    def dep_after(self, n: ex.Node) -> bool:
        return any(m == self.zip_node for m in n.walk())

    def lin_after(self, n: ex.Node, want: str) -> None:
        post, text = self.post, self.text
        if n == self.zip_node:
            self.convert(post, {}, n, n.dtype, want, None)
            return
        args = n.args
        deps = [self.dep_after(x) for x in args]
        if n.op in ex.FLOAT_FUNCS or n.op in ("abs", "neg"):
            self.lin_after(args[0], "f32" if n.op in ex.FLOAT_FUNCS else n.dtype)
            i32 = n.dtype == "i32"
            opts = _options(n.op, n.dtype, n.op == "neg" and i32, text)
            zero = (ve.Operand("const", value=0),) if i32 and n.op == "neg" else ()
            post.append(SpineOp(n.op, n, opts, zero, left=bool(zero), dtype=n.dtype))
        elif len(args) == 2 and deps == [True, True] and args[0] == args[1]:
            self.lin_after(args[0], n.dtype)
            post.append(SpineOp(n.op, n, _options(n.op, n.dtype, False, text, same=True),
                                (), dtype=n.dtype))
        elif sum(deps) == 1 and len(args) == 2:
            k = deps.index(True)
            self.lin_after(args[k], n.dtype)
            o = self.operand(args[1 - k], n.dtype)
            post.append(SpineOp(n.op, n, _options(n.op, n.dtype, k == 1, text,
                                                  operand=o.kind), (o,), left=k == 1,
                                dtype=n.dtype))
        else:
            raise fail("plan-pair", (n.text(),), formula=text,
                       detail=f"{n.text()} reads the zipped value in more than one argument",
                       fix="use the zipped value once per op (or square it, x * x)")
        self.convert(post, {}, n, n.dtype, want, None)


# ---- the CP-SAT model ------------------------------------------------------------------------
@dataclass
class Solution:
    status: str  # optimal / feasible
    invocation: list[int]
    choice: list[Option]
    objective: int
    merged: dict[int, int] = field(default_factory=dict)  # pair: g0 op -> g1 op in one step
    wall: float = 0.0


def solve(spine: Spine, flits: int, split: bool, time_limit: float = 10.0, workers: int = 1,
          seed: int = 0, enforce_stash: list[bool] | None = None) -> Solution | None:
    """The fewest-cycle assignment of (invocation, option) to every spine op, or None.
    ``split``: the stream's back four lanes hold data, so a 4-way section doubles the
    flits (narrow_split); a pair's first invocation always splits."""
    cm = _ChainModel(spine)
    cm.order()
    if spine.pair:
        cm.pair_merges()
    cm.alus_once()
    cm.stash(enforce_stash)
    cm.objective(flits, split)
    return cm.solve(time_limit, workers, seed)


class _ChainModel:
    """The CP-SAT model of :func:`solve`, one method per part: each op's invocation and
    option, the spine's stage order, pair mode's merged steps, each ALU once per
    invocation, the stash, the cycles."""

    def __init__(self, spine: Spine):
        from ortools.sat.python import cp_model
        self.cp, self.spine = cp_model, spine
        self.ops = ops = spine.ops
        n = self.n = len(ops)
        m = self.m = cp_model.CpModel()
        self.inv = [m.new_int_var(0, max(n - 1, 0), f"inv_{i}") for i in range(n)]
        self.x = [[m.new_bool_var(f"x_{i}_{k}") for k in range(len(op.options))]
                  for i, op in enumerate(ops)]
        for i in range(n):
            m.add_exactly_one(self.x[i])
        self.stage = [sum(o.stage * self.x[i][k] for k, o in enumerate(ops[i].options))
                      for i in range(n)]
        self.way4 = [sum(self.x[i][k] for k, o in enumerate(ops[i].options) if o.way == 4)
                     for i in range(n)]
        self.pre: set[int] = set()
        if spine.pair:
            assert spine.zip_at is not None  # (a pair spine has its zip)
            self.pre = set(range(spine.zip_at + 1))
        for i in self.pre:
            m.add(self.inv[i] == 0)
        if n:
            m.add(self.inv[0] == 0)
        self.same: dict[tuple[int, int], Any] = {}
        self.merged: dict[tuple[int, int], Any] = {}

    def eq(self, i: int, j: int):
        """Ops i and j run in the same invocation."""
        key = (min(i, j), max(i, j))
        if key not in self.same:
            b = self.m.new_bool_var(f"same_{key[0]}_{key[1]}")
            self.m.add(self.inv[key[0]] == self.inv[key[1]]).only_enforce_if(b)
            self.m.add(self.inv[key[0]] != self.inv[key[1]]).only_enforce_if(~b)
            self.same[key] = b
        return self.same[key]

    def order(self) -> None:
        """The spine (per group before the zip) passes stages in order within an
        invocation, and moves on by at most one invocation per op."""
        m, inv, ops, n = self.m, self.inv, self.ops, self.n
        if self.spine.pair:
            z = self.spine.zip_at
            assert z is not None  # (a pair spine has its zip)
            self.g0 = [i for i in self.pre if ops[i].group == 0]
            self.g1 = [i for i in self.pre if ops[i].group == 1]
            chains = [self.g0 + [z] + list(range(z + 1, n)), self.g1 + [z]]
        else:
            chains = [list(range(n))]
        for ch in chains:
            for a, b in zip(ch, ch[1:]):
                m.add(inv[b] >= inv[a])
                m.add(inv[b] <= inv[a] + 1)
                m.add(self.stage[b] >= self.stage[a]).only_enforce_if(self.eq(a, b))

    def pair_merges(self) -> None:
        """Merges of the two groups' ops (pair mode): one step serves both groups; each op
        merges at most once, and merges do not cross."""
        m, ops, x, merged = self.m, self.ops, self.x, self.merged
        for a in self.g0:
            for b in self.g1:
                shared = [(ka, kb) for ka, oa in enumerate(ops[a].options)
                          for kb, ob in enumerate(ops[b].options)
                          if (oa.kind, oa.op, oa.mode) == (ob.kind, ob.op, ob.mode)]
                if not shared:
                    continue
                v = m.new_bool_var(f"merge_{a}_{b}")
                merged[(a, b)] = v
                for ka, kb in shared:
                    m.add(x[a][ka] == x[b][kb]).only_enforce_if(v)
                m.add(sum(x[a][ka] for ka, _ in shared) == 1).only_enforce_if(v)
        for a in self.g0:
            m.add(sum(v for (p, _), v in merged.items() if p == a) <= 1)
        for b in self.g1:
            m.add(sum(v for (_, q), v in merged.items() if q == b) <= 1)
        for (a1, b1), v1 in merged.items():
            for (a2, b2), v2 in merged.items():
                if a1 < a2 and b1 > b2:
                    m.add(v1 + v2 <= 1)

    def alus_once(self) -> None:
        """Each ALU (and each conversion stage) at most once per invocation."""
        m, x, merged = self.m, self.x, self.merged
        res: dict[str, list[tuple[int, int]]] = {}
        for i, op in enumerate(self.ops):
            for k, o in enumerate(op.options):
                res.setdefault(o.alu or o.kind, []).append((i, k))
        for uses in res.values():
            for u in range(len(uses)):
                for w in range(u + 1, len(uses)):
                    (i, ki), (j, kj) = uses[u], uses[w]
                    if i == j:
                        continue
                    key = (min(i, j), max(i, j))
                    mv = merged.get(key, merged.get(key[::-1]))
                    m.add_bool_or([~x[i][ki], ~x[j][kj], ~self.eq(i, j)]
                                  + ([mv] if self.spine.pair and mv is not None else []))

    def stash(self, enforce: list[bool] | None) -> None:
        """The stash: each read needs its value in the same invocation (module doc)."""
        needs = [(r, op.stash_of) for r, op in enumerate(self.ops) if op.stash_of is not None]
        for t, (r, k) in enumerate(needs):
            if enforce is None or enforce[t]:
                self.stash_read(r, k)
        for t1 in range(len(needs)):
            for t2 in range(t1 + 1, len(needs)):
                self.m.add(self.inv[needs[t1][0]] != self.inv[needs[t2][0]])

    def stash_read(self, r: int, k: int) -> None:
        """Op r reads what op k computed: (a) stashed after op k - 1, at r's way; (c) right
        after the narrow before op k, 4-way; (b) the invocation's input, 8-way."""
        m, inv, x, ops, way4 = self.m, self.inv, self.x, self.ops, self.way4
        if self.spine.pair:
            m.add(inv[r] >= 1)  # no stash in pair mode (invocation 0)
        avail = []
        reader_way = [(kk, o.way) for kk, o in enumerate(ops[r].options)]
        if k >= 1:
            a = m.new_bool_var(f"stash_a_{r}")
            m.add(inv[r] == inv[k - 1]).only_enforce_if(a)
            for kw, o in enumerate(ops[k - 1].options):
                for kr, wr in reader_way:
                    if o.stage not in STASHABLE or o.way != wr:
                        m.add_bool_or([~a, ~x[k - 1][kw], ~x[r][kr]])
            avail.append(a)
        c = m.new_bool_var(f"stash_c_{r}")
        m.add(inv[r] == inv[k]).only_enforce_if(c)
        m.add(way4[k] == 1).only_enforce_if(c)
        if k >= 1:  # op k is the invocation's first 4-way op: the narrow comes right before
            m.add(way4[k - 1] == 0).only_enforce_if([c, self.eq(k - 1, k)])
        for kr, wr in reader_way:
            if wr != 4:
                m.add_bool_or([~c, ~x[r][kr]])
        avail.append(c)
        b = m.new_bool_var(f"stash_b_{r}")
        if k == 0:
            m.add(inv[r] == 0).only_enforce_if(b)
        else:
            m.add(inv[r] == inv[k]).only_enforce_if(b)
            m.add(inv[k] == inv[k - 1] + 1).only_enforce_if(b)
        for kr, wr in reader_way:
            if wr != 8:
                m.add_bool_or([~b, ~x[r][kr]])
        avail.append(b)
        m.add_bool_or(avail)

    def objective(self, flits: int, split: bool) -> None:
        """Over the invocations: the flits (twice where a split 4-way section runs) plus the
        ALUs used; a pair's later invocations stream one group's worth."""
        m, n, inv, spine, x = self.m, self.n, self.inv, self.spine, self.x
        n_inv = m.new_int_var(1, max(n, 1), "invocations")
        if n:
            m.add_max_equality(n_inv, [v + 1 for v in inv])
        four = []  # (invocation, "it has a 4-way op and splits")
        for q in range(n):
            if not (split or (q == 0 and spine.pair)):
                continue  # trim / pad keep the flits
            f = m.new_bool_var(f"four_{q}")
            for i in range(n):
                if spine.pair and q == 0 and i not in self.pre:  # (pre: up to the zip)
                    continue  # after the zip a split pass carries half the pair's flits
                bi = m.new_bool_var(f"in_{i}_{q}")
                m.add(inv[i] == q).only_enforce_if(bi)
                m.add(inv[i] != q).only_enforce_if(~bi)
                m.add(f >= bi + self.way4[i] - 1)
            four.append((q, f))
        alus = sum(x[i][k] for i, op in enumerate(self.ops) for k, o in enumerate(op.options)
                   if o.alu is not None) - sum(self.merged.values())  # a merged step: 1 ALU
        later = flits // 2 if spine.pair else flits
        cycles = flits + (n_inv - 1) * later + alus
        self.cycles = cycles + sum(f * (flits if q == 0 else later) for q, f in four)
        # ties go to the catalog's first option (MulF(Mul0) before Mul1, Fxp before Clip)
        prefer = sum(k * x[i][k] for i in range(n) for k in range(len(x[i])))
        m.minimize(self.cycles * (1 + sum(len(x[i]) for i in range(n))) + prefer)

    def solve(self, time_limit: float, workers: int, seed: int) -> Solution | None:
        cp, x, n = self.cp, self.x, self.n
        solver = cp.CpSolver()
        solver.parameters.max_time_in_seconds = time_limit
        solver.parameters.num_workers = workers
        solver.parameters.random_seed = seed
        st = solver.solve(self.m)
        if st == cp.UNKNOWN:  # stopped by the time limit: neither a plan nor a proof
            raise fail("plan-time-limit", (), limit=f"{time_limit:g}", lowered=0)
        if st not in (cp.OPTIMAL, cp.FEASIBLE):
            return None
        choice = [self.ops[i].options[next(k for k in range(len(x[i]))
                                           if solver.value(x[i][k]))] for i in range(n)]
        mg = {a: b for (a, b), v in self.merged.items() if solver.value(v)}
        return Solution("optimal" if st == cp.OPTIMAL else "feasible",
                        [solver.value(v) for v in self.inv], choice,
                        int(solver.value(self.cycles)), mg, solver.wall_time)


# ---- building chains ---------------------------------------------------------------------------
@dataclass
class Plan:
    chains: list[ve.Chain]
    analyses: list[ve.Analysis]
    solution: Solution

    @property
    def cycles(self) -> int:
        return sum(a.cycles for a in self.analyses)

    def text(self) -> str:
        lines = [f"{len(self.chains)} Tensor Unit invocation(s), {self.cycles:,} cycles "
                 f"({self.solution.status})"]
        for q, a in enumerate(self.analyses):
            lines.append(f"invocation {q + 1}: " + a.text())
        return "\n".join(lines)

    def chains_json(self) -> list[dict[str, Any]]:
        return [{"invocation": q + 1, "steps": [step_text(s) for s in c.steps],
                 "alus": a.alus, "cycles": a.cycles}
                for q, (c, a) in enumerate(zip(self.chains, self.analyses))]

    def to_json(self) -> dict[str, Any]:
        return {"status": self.solution.status, "cycles": self.cycles,
                "invocations": len(self.chains), "plan": self.chains_json()}


def step_text(s: ve.Step) -> str:
    """A step as the API call it stands for."""
    args: list[str] = []
    if s.kind == "tag":
        args.append("TagMode::Zero")
    if s.kind == "unzip":
        assert s.time is not None  # (an unzip step declares its Time)
        args.append(f"{s.axis}, {s.time.text()}")
    if s.op:
        args.append(s.op)
    if s.mode and s.mode not in ("Mode01", "Mode012"):
        args.append(s.mode)
    for o in s.operands:
        args.append(", ".join(sl.operand.text() for sl in o))
    if s.groups is not None:
        args.append(", ".join("()" if g is None else str(g).lower() if isinstance(g, bool)
                              else ", ".join(sl.operand.text() for o in g for sl in o)
                              for g in s.groups))
    if s.int_width is not None:
        args.append(str(s.int_width))
    if s.dtype:
        args.append(s.dtype)
    if s.packet is not None and s.kind in ("narrow_trim", "widen_pad", "narrow_split",
                                           "widen_concat"):
        args.append((s.time.text() + ", " if s.time is not None else "") + s.packet.text())
    return f"{ve.METHODS[s.kind]}({', '.join(args)})"


def _split_time(time: Mapping, axis: str, axes: dict[str, int]) -> Mapping:
    """Time without the pair axis's term (the pair mode's groups)."""
    term = next((t for t in time.terms if t.body() == axis), None)
    if term is None:
        raise fail("plan-pair", (time.text(),), formula=time.text(),
                   detail=f"the pair axis {axis} is not a whole term of Time {time.text()}",
                   fix=f"make {axis} one term of the stream's Time mapping")
    return join(t for t in time.terms if t != term)


def build(spine: Spine, sol: Solution, stream, axes: dict[str, int], vrf: dict,
          pair_axis: str | None) -> list[ve.Chain]:
    from tcplan.model.tiers import Tensor
    ops = spine.ops
    n_inv = (max(sol.invocation) + 1) if ops else 1
    arr = ve.Arrangement.of(stream.dims["time"], stream.dims["packet"])
    trim = not arr.live[:, ve.hw.VE_PACKET_LANES // 2:].any()
    chains = []
    dtype = spine.start_dtype
    cur_stream = stream
    stash_after: dict[int, int] = {}  # spine value index -> reader, stashed in the same inv.
    stash_entry: dict[int, int] = {}  # invocation -> reader (the value entering it)
    stash_narrow: set[int] = set()  # ops before whose narrow the stash is written
    for r, op in enumerate(ops):
        if op.stash_of is None:
            continue
        k = op.stash_of
        if k >= 1 and sol.invocation[k - 1] == sol.invocation[r] and \
                sol.choice[k - 1].stage in STASHABLE and \
                sol.choice[k - 1].way == sol.choice[r].way:
            stash_after[k] = r
        elif sol.choice[r].way == 4:
            stash_narrow.add(k)
        else:
            stash_entry[sol.invocation[r]] = r
    for q in range(n_inv):
        idx = [i for i in range(len(ops)) if sol.invocation[i] == q]
        steps: list[ve.Step] = []
        time_m, packet_m = cur_stream.dims["time"], cur_stream.dims["packet"]
        pair_here = spine.pair and q == 0
        if pair_here:
            assert pair_axis is not None  # (plan_expression requires it for a pair)
            split_t = _split_time(time_m, pair_axis, axes)
            steps.append(ve.Step("unzip", axis=pair_axis, time=split_t))
            time_m = split_t
        else:
            steps.append(ve.Step("tag"))
        if q in stash_entry:
            steps.append(ve.Step("stash"))
        way = 8
        pre_narrow = (time_m, packet_m)
        # order the steps: by stage; in pair mode merge the groups (no crossing merges)
        order = _emission_order(spine, sol, idx)
        for item in order:
            i = item[0]
            o = sol.choice[i]
            if o.way == 4 and way == 8:
                if trim and not pair_here:
                    steps.append(ve.Step("narrow_trim"))
                else:
                    steps.append(ve.Step("narrow_split"))
                way = 4
                if i in stash_narrow:
                    steps.append(ve.Step("stash"))
            elif o.way == 8 and way == 4 and o.stage >= 9:
                steps.append(_widen(trim and not pair_here, pre_narrow))
                way = 8
            steps.append(_step_of(ops, item, o, sol.choice))
            if i + 1 in stash_after:
                steps.append(ve.Step("stash"))
        if way == 4:
            steps.append(_widen(trim and not pair_here, pre_narrow))
        steps.append(ve.Step("final"))
        axes_q = axes if not spine.pair or q == 0 else {
            a: v for a, v in axes.items() if a != pair_axis}
        chain = ve.Chain(dtype, axes_q, cur_stream, steps, vrf)
        chains.append(chain)
        if idx:
            dtype = ops[idx[-1]].dtype
        if pair_here:
            assert pair_axis is not None  # (plan_expression requires it for a pair)
            dims = dict(cur_stream.dims)
            dims["time"] = _split_time(cur_stream.dims["time"], pair_axis, axes)
            cur_stream = Tensor(cur_stream.name, "stream", cur_stream.dtype, dims)
    return chains


def _widen(trim: bool, pre: tuple[Mapping, Mapping]) -> ve.Step:
    if trim:
        return ve.Step("widen_pad", packet=pre[1])
    return ve.Step("widen_concat", time=pre[0], packet=pre[1])


def _emission_order(spine: Spine, sol: Solution, idx: list[int]) -> list[tuple[int, ...]]:
    if not spine.pair or not idx or idx[0] != 0:
        return [(i,) for i in idx]
    g0 = [i for i in idx if spine.ops[i].group == 0]
    g1 = [i for i in idx if spine.ops[i].group == 1]
    rest = [i for i in idx if spine.ops[i].group is None]
    partner = {a: b for a, b in sol.merged.items()}
    back = {b: a for a, b in partner.items()}
    out: list[tuple[int, ...]] = []
    a_i = b_i = 0
    stage = lambda i: sol.choice[i].stage  # noqa: E731
    while a_i < len(g0) or b_i < len(g1):
        a = g0[a_i] if a_i < len(g0) else None
        b = g1[b_i] if b_i < len(g1) else None
        if a is not None and b is not None and partner.get(a) == b:
            out.append((a, b))
            a_i += 1
            b_i += 1
        elif b is None or (a is not None and a not in partner and (
                stage(a) <= stage(b) or b in back)):
            assert a is not None  # (with g1 done, g0 is not)
            out.append((a,))
            a_i += 1
        elif a is None or b not in back:
            out.append((b,))
            b_i += 1
        else:
            out.append((a,))
            a_i += 1
    return out + [(i,) for i in rest]


def _operand_slots(op: SpineOp, o: Option) -> tuple[tuple[ve.Slot, ...], ...]:
    if o.transform == "abs":
        return (ve.plain(ve.Operand("const", value=0x7FFFFFFF)),)
    if o.transform == "neg":
        return (ve.plain(ve.Operand("const", value=0x80000000)),)
    out = []
    for od in op.operands:
        if o.transform == "negate" and od.kind == "const":
            v = od.value
            od = ve.Operand("const", value=-v if isinstance(v, float) else wrap_i32(-v))
        elif o.transform == "negate":  # pragma: no cover - _options offers it for constants
            raise AssertionError(f"negated {od.kind} operand of {op.what}")
        out.append(ve.plain(od))
    return tuple(out)


def _step_of(ops: list[SpineOp], item: tuple[int, ...], o: Option, choice: list[Option]
             ) -> ve.Step:
    i = item[0]
    op = ops[i]
    if o.kind in ("fxp_to_fp", "fp_to_fxp"):
        return ve.Step(o.kind, int_width=31)
    st = ve.Step(o.kind, op=o.op, mode=o.mode)
    if op.zip_:
        return st
    if op.group is not None:  # pair mode, per group
        groups: list[Any] = [None, None]
        for j in item:
            g = ops[j].group
            assert g is not None  # (an item merges ops of the two groups)
            if o.kind == "fp_unary":
                groups[g] = True
            else:
                groups[g] = _operand_slots(ops[j], choice[j])
        if o.kind == "fp_unary":
            st.groups = tuple(bool(g) for g in groups)
        else:
            st.groups = tuple(groups)
        return st
    if o.kind != "fp_unary":
        st.operands = _operand_slots(op, o)
    if o.transform in ("abs", "neg") and op.dtype == "f32":
        st.mode = "Mode01"
    return st


# ---- the whole planning step ------------------------------------------------------------------
def plan_expression(problem, time_limit: float = 10.0, workers: int = 1, seed: int = 0
                    ) -> Plan:
    """Plan an expression problem (raises TcplanError with the plan-* explanation)."""
    require_placement(problem.tensors.values(), problem.chips)
    f: ex.Formula = problem.spec.expression
    stream = problem.tensors["input"]
    vrf = {n[4:]: t for n, t in problem.tensors.items() if n.startswith("vrf:")}
    pair_axis = problem.spec.pair_axis
    if f.pair and pair_axis is None:
        raise fail("plan-pair", (f.text,), formula=f.text,
                   detail="the formula reads group0 / group1 but the problem names no "
                          "pair_axis", fix="add pair_axis: I (the 2-way grouping axis)")
    spine = linearize(f, set(vrf))
    arr = ve.Arrangement.of(stream.dims["time"], stream.dims["packet"])
    flits = arr.T
    split = bool(arr.live[:, ve.hw.VE_PACKET_LANES // 2:].any())
    sol = solve(spine, flits, split, time_limit, workers, seed)
    if sol is None:
        raise _explain(spine, flits, split, f)
    chains = build(spine, sol, stream, problem.axes, vrf, pair_axis)
    analyses = [ve.analyze(c) for c in chains]
    return Plan(chains, analyses, sol)


def _explain(spine: Spine, flits: int, split: bool, f: ex.Formula) -> TcplanError:
    needs = [(op, op.stash_of) for op in spine.ops if op.stash_of is not None]
    names = ("group0", "group1") if spine.pair else ("x",)

    def value(k: int) -> str:
        if k == 0:
            return names[0]
        node = spine.ops[k - 1].node
        return node.text() if node is not None else spine.ops[k - 1].what
    for t, (op, k) in enumerate(needs):
        only = [u == t for u in range(len(needs))]
        if solve(spine, flits, split, 5.0, 1, 0, only) is None:
            v = value(k)
            return fail("plan-stash-reach", (v,), formula=f.text, value=v,
                        reader=op.node.text() if op.node is not None else op.what)
    if needs and solve(spine, flits, split, 5.0, 1, 0, [False] * len(needs)) is not None:
        vs = ", ".join(value(k) for _, k in needs)
        return fail("plan-stash-reach", tuple(op.what for op, _ in needs), formula=f.text,
                    value=vs, reader="their readers (one stash per invocation)")
    # what is left: a pair whose groups' ops cannot share one invocation before the zip
    pre = [op for op in spine.ops[:(spine.zip_at or 0) + 1]]
    alus: dict[str, list[str]] = {}
    for op in pre:
        for o in op.options:
            if o.alu:
                alus.setdefault(o.alu, []).append(op.node.text() if op.node is not None
                                                  else op.what)
    clash = [f"{a} ({' and '.join(dict.fromkeys(w))})" for a, w in alus.items()
             if len(set(w)) > 1]
    return fail("plan-pair", tuple(clash) or (f.text,), formula=f.text,
                detail="the groups' ops before the zip must fit one invocation, but they "
                       "need " + ("; ".join(clash) if clash else "more ALUs than it has"),
                fix="move one side's op after the zip (into a later invocation), or give "
                    "it an op on another ALU")
