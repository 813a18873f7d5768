"""YAML -> Vector Engine chains, expression problems and lane folds (docs/problem-format.md).

Every mistake is a located ``bad-problem`` error (exit 2); what the hardware cannot run is left
to the model's rules (exit 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcplan.model import limits
from tcplan.model import vector as ve
from tcplan.model.expr import Formula
from tcplan.model.numeric import F32_MAX, I32_MIN, U32_MAX, fits_32_bits
from tcplan.model.lane import MODES as LANE_MODES
from tcplan.model.mapping import Mapping

STEP_HELP = ("steps: tag, unzip, logic, fxp, fxp_to_fp, narrow_split, narrow_trim, fp_unary, "
             "fp_binary, fp_ternary, reduce, fp_div, widen_concat, widen_pad, fp_to_fxp, clip, "
             "filter, stash, reinterpret, logic_zip, fxp_zip, fp_zip, clip_zip, final, "
             "inter_slice_reduce")


@dataclass(frozen=True)
class VectorSpec:
    """A vector problem's chain: its steps, the output mappings it declares (time, packet;
    checked against what the chain leaves) and the formula it is checked by (None: the
    semantics of its steps alone)."""

    steps: tuple[ve.Step, ...]
    output: dict[str, Mapping] = field(default_factory=dict)
    reference: Formula | None = None

    @property
    def formula(self) -> Formula | None:
        """The formula the chain's output is checked against."""
        return self.reference


@dataclass(frozen=True)
class ExpressionSpec:
    """An expression problem: the formula the planner compiles into chains, the size-2 Time
    term a pair formula (group0 / group1) zips, and the output mappings it declares."""

    expression: Formula
    pair_axis: str | None = None
    output: dict[str, Mapping] = field(default_factory=dict)

    @property
    def formula(self) -> Formula:
        """The formula the chains' output is checked against: the expression itself."""
        return self.expression


@dataclass(frozen=True)
class LaneFoldSpec:
    """A Lane Folder problem: its input's mappings (lane, time, packet and the spatial
    ones given), the mode, and the output mappings it declares (time, packet)."""

    input: dict[str, Mapping]
    mode: str
    output: dict[str, Mapping] = field(default_factory=dict)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def parse_vector(ctx, data: dict, kind: str, tensors: dict
                 ) -> VectorSpec | ExpressionSpec:
    doc = ctx.doc
    _streamed_dtype(ctx, kind)
    tensors["input"] = ctx.tensor(("input",), data["input"], "input", tier="stream")
    _vrf_operands(ctx, data, tensors)
    out = data.get("output")
    if out is not None:
        if not isinstance(out, dict) or not set(out) <= {"time", "packet"} or not out:
            raise doc.error(("output",), "expected {time, packet} mappings",
                            "output: {time: 'm![1]', packet: 'm![A % 8]'}")
    output = ({k: ctx.mapping(("output", k), v, k) for k, v in out.items()}
              if out is not None else {})
    if kind == "vector":
        steps, reference = _steps(ctx, data, tensors)
        return VectorSpec(steps, output, reference)
    e = data["expression"]
    if not isinstance(e, str):
        raise doc.error(("expression",), "expected a formula as text",
                        "expression: 'exp(sqrt(((x + 1) * 2) * 3))'")
    f = _formula(ctx, ("expression",), e, tensors)
    pa = data.get("pair_axis")
    if pa is not None:
        pa = _axis(ctx, ("pair_axis",), pa)
        terms = [t for t, _ in tensors["input"].dims["time"].items()]
        if ctx.axes[pa] != 2 or pa not in terms:
            raise doc.error(("pair_axis",), f"the pair axis is a size-2 term of the "
                            f"input's Time mapping ({tensors['input'].dims['time'].text()})",
                            f"e.g. time: 'm![{pa}]' with {pa}: 2")
    if f.pair != (pa is not None):
        raise doc.error(("expression",), "a formula over group0 / group1 needs pair_axis, "
                        "and pair_axis needs such a formula" if f.pair or pa else "",
                        "add pair_axis: I, or read x")
    if any(m.op in ("sum", "rmax", "rmin") for m in f.root.walk()):
        raise doc.error(("expression",), "the planner compiles elementwise formulas; a "
                        "reduction is a chain step", "write a vector problem with a "
                        "reduce step")
    return ExpressionSpec(f, pa, output)


def parse_chain(ctx, data: dict, tensors: dict) -> VectorSpec:
    """A chain on a stream (a graph's ``chain`` op): it reads ``source`` (a contraction's,
    a collect's or a cast's stream) and makes ``destination`` (a stream on the source's
    units, its Time and Packet what the chain leaves: the output it declares), its VRF
    operands register-file tensors."""
    doc = ctx.doc
    _streamed_dtype(ctx, "chain")
    src = tensors["input"] = ctx.tensor(("source",), data["source"], "source", tier="stream")
    dst = ctx.tensor(("destination",), data["destination"], "destination", tier="stream")
    for d in ("chip", "cluster", "slice"):
        if d in dst.dims and dst.dims[d].text() != src.dims[d].text():
            raise doc.error(("destination", d), f"a chain keeps its stream on its units: "
                            f"{d.title()} {src.dims[d].text()}, the source's",
                            f"{d}: '{src.dims[d].text()}'")
    tensors["destination"] = dst
    _vrf_operands(ctx, data, tensors)
    steps, reference = _steps(ctx, data, tensors)
    return VectorSpec(steps, {d: dst.dims[d] for d in ("time", "packet")}, reference)


def _streamed_dtype(ctx, kind: str) -> None:
    if ctx.dtype not in ve.DTYPES:
        raise ctx.doc.error(("dtype",), f"a {kind} problem streams i32 or f32, not "
                            f"{ctx.dtype}", "dtype: i32 (or f32)" if kind != "chain" else
                            "cast or widen the stream to i32 or f32 first (a contraction's "
                            "output is)")


def _vrf_operands(ctx, data: dict, tensors: dict) -> None:
    """A chain's VRF operands (``vrf: {name: tensor}``) into ``tensors`` as ``vrf:name``."""
    doc = ctx.doc
    vrf = data.get("vrf", {})
    if not isinstance(vrf, dict):
        raise doc.error(("vrf",), "expected a mapping of names to VRF tensors",
                        "vrf: {bias: {tier: vrf, slice: 'm![A / 8]', element: 'm![A % 8]'}}")
    for name, spec in vrf.items():
        if not isinstance(name, str) or not name.isidentifier() or name in (
                "x", "group0", "group1"):
            raise doc.error(("vrf", name), "a VRF operand name is an identifier other than x, "
                            "group0 and group1", "e.g. bias", at_key=True)
        t = ctx.tensor(("vrf", name), {"tier": "vrf", **spec} if isinstance(spec, dict)
                       else spec, name)
        if t.tier != "vrf" or t.dtype not in ve.DTYPES:
            raise doc.error(("vrf", name), "a VRF operand is an i32 or f32 tensor on tier vrf",
                            "tier: vrf, dtype: i32")
        tensors["vrf:" + name] = t
    ctx.vrf_names_set = {n for n in tensors if n.startswith("vrf:")}


def _steps(ctx, data: dict, tensors: dict) -> tuple[tuple[ve.Step, ...], Formula | None]:
    """A chain's steps and the formula it is checked by (``reference``, if given)."""
    chain = data["chain"]
    if not isinstance(chain, list) or not chain:
        raise ctx.doc.error(("chain",), "expected a list of steps", STEP_HELP)
    steps = tuple(_step(ctx, ("chain", i), item) for i, item in enumerate(chain))
    ref = data.get("reference")
    if ref is None:
        return steps, None
    if not isinstance(ref, str):
        raise ctx.doc.error(("reference",), "expected a formula as text",
                            "reference: 'max(sigmoid(x + 100), 0)'")
    reference = _formula(ctx, ("reference",), ref, tensors)
    _reference_fits(ctx, reference, list(steps))
    return steps, reference


def _formula(ctx, keys: tuple, text: str, tensors: dict):
    from tcplan.model.expr import parse_formula
    from tcplan.model.rules import TcplanError
    names = {n[4:] for n in tensors if n.startswith("vrf:")}
    try:
        return parse_formula(text, ctx.dtype, names, ctx.axes)
    except TcplanError as e:
        v = e.violations[0]
        raise ctx.doc.error(keys, v.message, v.fix) from None


def _reference_fits(ctx, f, steps: list[ve.Step]) -> None:
    """The reference reads what the chain reads: x, or group0 / group1 after an unzip, and
    reduces exactly the axes the chain reduces, once each."""
    pair = bool(steps) and steps[0].kind == "unzip"
    names = set(f.names)
    if pair and "x" in names or not pair and names & {"group0", "group1"}:
        raise ctx.doc.error(("reference",), "a pair chain (unzip) is checked against group0 "
                            "/ group1, any other chain against x",
                            "use group0 and group1" if pair else "use x")
    red = [m.value for m in f.root.walk() if m.op in ("sum", "rmax", "rmin")]
    chain_red = [str(s.axis) for s in steps if s.kind == "reduce"]
    if sorted(red) != sorted(chain_red):
        raise ctx.doc.error(("reference",), f"the formula reduces {red or 'nothing'}, the "
                            f"chain {chain_red or 'nothing'}", "reduce the axes the chain "
                            "reduces, once each")


def chain_of(problem) -> ve.Chain:
    """The model's Chain for a loaded vector problem."""
    t = problem.tensors
    return ve.Chain(problem.dtype, problem.axes, t["input"], list(problem.spec.steps),
                    {n[4:]: v for n, v in t.items() if n.startswith("vrf:")},
                    problem.spec.output)


def _step(ctx, keys: tuple, item: Any) -> ve.Step:
    doc = ctx.doc
    if isinstance(item, str):
        kind, arg = item, None
    elif isinstance(item, dict) and len(item) == 1:
        (kind, arg), = item.items()
    else:
        raise doc.error(keys, "a step is a name or one {step: arguments} mapping", STEP_HELP)
    if kind not in ve.STEP_KINDS:
        raise doc.error(keys, f"unknown step {kind!r}", STEP_HELP)
    r = _StepReader(ctx, keys + (kind,) if isinstance(item, dict) else keys, kind, arg)
    getattr(r, _STEP_READERS.get(kind, "operand_op"))()
    return r.st


class _StepReader:
    """One chain step's arguments read into a :class:`ve.Step`, one method per family of
    steps (``_STEP_READERS``), every mistake located at its key."""

    def __init__(self, ctx, keys: tuple, kind: str, arg: Any):
        self.ctx, self.doc, self.keys, self.kind, self.arg = ctx, ctx.doc, keys, kind, arg
        self.st = ve.Step(kind, where=ctx.doc.where(keys))

    def bad(self, detail: str, fix: str, sub: tuple = ()) -> Exception:
        return self.doc.error(self.keys + sub, detail, fix)

    def fields(self, allowed: set[str], required: set[str]) -> dict:
        arg, kind = self.arg, self.kind
        if isinstance(arg, str) and "op" in allowed and required <= {"op"}:
            return {"op": arg}
        if arg is None and not required:
            return {}
        if not isinstance(arg, dict):
            raise self.bad("expected a mapping of " + ", ".join(sorted(allowed)),
                           f"e.g. {kind}: {{{', '.join(sorted(required or allowed))}: ...}}")
        for k in arg:
            if k not in allowed:
                raise self.doc.error(self.keys + (k,), "unknown key", "allowed: "
                                     + ", ".join(sorted(allowed)), at_key=True)
        for k in sorted(required):
            if k not in arg:
                raise self.bad(f"missing {k}", f"add {k}")
        return arg

    def mapping(self, f: dict, key: str) -> Any:
        return self.ctx.mapping(self.keys + (key,), f[key], key)

    def op(self, f: dict, family: str | None) -> Any:
        return _op(self.ctx, _opkeys(self.keys, self.arg), f["op"], family)

    # -- the step families ------------------------------------------------------------------
    def tag(self) -> None:
        self.st.tag = _tag(self.ctx, self.keys, self.arg)

    def unzip(self) -> None:
        f = self.fields({"axis", "time"}, {"axis", "time"})
        self.st.axis = _axis(self.ctx, self.keys + ("axis",), f["axis"])
        self.st.time = self.mapping(f, "time")

    def convert(self) -> None:
        arg = self.arg
        w = arg.get("int_width") if isinstance(arg, dict) and set(arg) == {"int_width"} \
            else arg
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= 31:
            raise self.bad(f"{w!r} is not an int_width", f"{self.kind}: 31 (0 to 31; 31 is "
                           "the plain integer conversion)")
        self.st.int_width = w

    def reshape(self) -> None:  # narrow_split, widen_concat
        f = self.fields({"time", "packet"}, {"time", "packet"})
        self.st.time, self.st.packet = self.mapping(f, "time"), self.mapping(f, "packet")

    def pad(self) -> None:  # narrow_trim, widen_pad
        if isinstance(self.arg, str):
            self.st.packet = self.ctx.mapping(self.keys, self.arg, "packet")
            return
        f = self.fields({"packet"}, set())
        if "packet" in f:
            self.st.packet = self.mapping(f, "packet")

    def reinterpret(self) -> None:
        if self.arg not in ve.DTYPES:
            raise self.bad(f"{self.arg!r} is not a 32-bit scalar", "reinterpret: i32 (or f32)")
        self.st.dtype = self.arg

    def filter(self) -> None:
        arg = self.arg
        g = arg.get("guard") if isinstance(arg, dict) and set(arg) == {"guard"} else arg
        self.st.guard = _guard(self.ctx, self.keys, g if g is not None else "all")

    def bare(self) -> None:  # stash, final, inter_slice_reduce
        arg, kind, st = self.arg, self.kind, self.st
        if arg not in (None, {}) and not (kind == "inter_slice_reduce" and isinstance(
                arg, dict) and set(arg) <= {"op"}):
            raise self.bad("takes no arguments", f"write - {kind}")
        st.op = arg.get("op") if isinstance(arg, dict) else None
        if st.op is not None and st.op not in ve.INTER_SLICE_OPS:
            raise self.bad(f"{st.op!r} is not an inter-slice reduce op",
                           "op: " + ", ".join(ve.INTER_SLICE_OPS), ("op",))

    def reduce(self) -> None:
        f = self.fields({"op", "axis", "time", "packet"}, {"op", "axis", "time", "packet"})
        self.st.op = self.op(f, "reduce")
        self.st.axis = _axis(self.ctx, self.keys + ("axis",), f["axis"])
        self.st.time, self.st.packet = self.mapping(f, "time"), self.mapping(f, "packet")

    def fp_unary(self) -> None:
        f = self.fields({"op", "groups"}, {"op"})
        self.st.op = self.op(f, "fp_unary")
        if "groups" in f:
            g = f["groups"]
            if not isinstance(g, list) or len(g) != 2 or not all(isinstance(b, bool)
                                                                for b in g):
                raise self.bad("groups of a unary op are two flags", "groups: [true, false]",
                               ("groups",))
            self.st.groups = tuple(g)

    def operand_op(self) -> None:
        """Ops with operands, and zips: the op, its arg mode, its operands or its groups'."""
        kind, st = self.kind, self.st
        is_zip = kind in ve.ZIPS
        allowed = {"op", "mode"} if is_zip else {"op", "mode", "operand", "operands",
                                                 "groups"}
        f = self.fields(allowed, {"op"})
        st.op = self.op(f, ve.FAMILY.get(kind))
        if "mode" in f:
            modes = ve.TERNARY_MODES if kind in ve.TERNARY else ve.BINARY_MODES
            if not isinstance(f["mode"], str) or f["mode"] not in modes:
                raise self.bad(f"{f['mode']!r} is not an arg mode", "use one of "
                               + ", ".join(modes), ("mode",))
            st.mode = f["mode"]
        if is_zip:
            return
        self.operands(f, kind in ve.TERNARY)
        if "groups" in f:
            st.groups = self.groups(f["groups"], kind in ve.TERNARY)
        if not st.operands and st.groups is None and (st.mode or "") not in ("Mode00",):
            raise self.bad("missing operand", f"e.g. {kind}: {{op: {st.op}, operand: 1}}")

    def operands(self, f: dict, ternary: bool) -> None:
        ctx, keys = self.ctx, self.keys
        if "operand" in f and "operands" in f:
            raise self.bad("give operand or operands, not both", "drop one")
        if "operands" in f:
            ops = f["operands"]
            if not isinstance(ops, list) or len(ops) != (2 if ternary else 1):
                raise self.bad("expected a list of " + ("two operands" if ternary else
                                                        "one operand"),
                               "operands: [1.0, 2.0]", ("operands",))
            self.st.operands = tuple(_operand(ctx, keys + ("operands", i), o)
                                     for i, o in enumerate(ops))
        elif "operand" in f:
            if ternary:
                raise self.bad("a ternary op takes operands: [o0, o1]",
                               "operands: [2.0, 1.0]")
            self.st.operands = (_operand(ctx, keys + ("operand",), f["operand"]),)

    def groups(self, g: Any, ternary: bool) -> tuple:
        """Pair mode's per-group arguments (None skips a group)."""
        ctx, keys = self.ctx, self.keys
        if not isinstance(g, list) or len(g) != 2:
            raise self.bad("groups is a list of two arguments (null skips a group)",
                           "groups: [10, null]", ("groups",))
        out: list[tuple | None] = []
        for i, x in enumerate(g):
            if x is None:
                out.append(None)
            elif ternary:
                if not isinstance(x, list) or len(x) != 2:
                    raise self.bad("a ternary group argument is [o0, o1]",
                                   "groups: [[2.0, 1.0], null]", ("groups", i))
                out.append(tuple(_operand(ctx, keys + ("groups", i, j), o)
                                 for j, o in enumerate(x)))
            else:
                out.append((_operand(ctx, keys + ("groups", i), x),))
        return tuple(out)


#: which reader each step kind takes (any other: an op with operands, or a zip)
_STEP_READERS = {
    "tag": "tag", "unzip": "unzip", "fxp_to_fp": "convert", "fp_to_fxp": "convert",
    "narrow_split": "reshape", "widen_concat": "reshape", "narrow_trim": "pad",
    "widen_pad": "pad", "reinterpret": "reinterpret", "filter": "filter", "stash": "bare",
    "final": "bare", "inter_slice_reduce": "bare", "reduce": "reduce",
    "fp_unary": "fp_unary",
}


def _opkeys(keys: tuple, arg: Any) -> tuple:
    return keys + ("op",) if isinstance(arg, dict) else keys


def _op(ctx, keys: tuple, op: Any, fam: str | None) -> str:
    names = ve.ops_of(fam) if fam is not None else set()
    if not isinstance(op, str) or op not in names:
        raise ctx.doc.error(keys, f"{op!r} is not a {fam} op", "use one of " + ", ".join(
                                sorted(names)))
    return op


def _axis(ctx, keys: tuple, a: Any) -> str:
    if not isinstance(a, str) or a not in ctx.axes:
        raise ctx.doc.error(keys, f"{a!r} is not a declared axis",
                            "use one of " + ", ".join(ctx.axes))
    return a


def _tag(ctx, keys: tuple, arg: Any) -> tuple:
    if arg is None or arg == "zero":
        return ("zero",)
    if isinstance(arg, dict) and set(arg) == {"axis_toggle"}:
        return ("axis_toggle", _axis(ctx, keys + ("axis_toggle",), arg["axis_toggle"]))
    if isinstance(arg, dict) and set(arg) == {"comparison"}:
        cmps = arg["comparison"]
        if not isinstance(cmps, list) or len(cmps) != 4:
            raise ctx.doc.error(keys + ("comparison",), "expected four comparisons",
                                "comparison: ['Less(0)', 'Equal(5)', 'Greater(100)', 'True']")
        out = []
        for i, c in enumerate(cmps):
            out.append(_cmp(ctx, keys + ("comparison", i), c))
        return ("comparison", tuple(out))
    if isinstance(arg, str) and arg != "zero":
        raise ctx.doc.error(keys, f"{arg!r} is not a tag mode", "tag: zero")
    raise ctx.doc.error(keys, "a tag mode is zero, {comparison: [c0, c1, c2, c3]} or "
                        "{axis_toggle: AXIS}", "tag: zero")


def _cmp(ctx, keys: tuple, c: Any) -> tuple:
    import re
    if c in ("True", "False") or c is True or c is False:
        return (str(c), None)
    m = re.fullmatch(r"\s*(\w+)\s*\(\s*([^)]*?)\s*\)\s*", c) if isinstance(c, str) else None
    if m and m.group(1) in ve.CMP_OPS:
        v: int | float | None
        try:
            v = limits.to_int(m.group(2), 0)
        except limits.NumberTooLong as e:
            raise ctx.doc.error(keys, f"{c[:40]!r}...: {e.detail}", e.fix) from None
        except ValueError:
            try:
                v = float(m.group(2))
            except ValueError:
                v = None
        if v is not None and ctx.dtype == "i32" and not (isinstance(v, int)
                                                         and fits_32_bits(v)):
            raise ctx.doc.error(keys, f"{c!r}: an i32 comparison takes a 32-bit integer",
                                f"use {I32_MIN} to {U32_MAX}")
        if v is not None and ctx.dtype == "f32":
            try:
                v = float(v)
            except OverflowError:
                raise ctx.doc.error(keys, f"{c[:40]!r}: overflows f32",
                                    "use a value within f32") from None
            if v != v or abs(v) == float("inf") or abs(v) <= F32_MAX:
                return (m.group(1), v)
            raise ctx.doc.error(keys, f"{c!r}: {v} overflows f32", "use a value within f32")
        if v is not None:
            return (m.group(1), v)
    raise ctx.doc.error(keys, f"{c!r} is not a comparison", "e.g. 'Less(0)', 'Equal(5)', "
                        "'GreaterUnsigned(7)', 'True'")


def _guard(ctx, keys: tuple, g: Any) -> ve.Guard:
    if g == "all":
        return ve.Guard()
    if isinstance(g, dict) and len(g) == 1:
        (k, v), = g.items()
        if k == "group" and v in (0, 1) and not isinstance(v, bool):
            return ve.Guard("group", group=v)
        if k in ("matches", "not_matches") and isinstance(v, list) and len(v) == 4 and all(
                b in ve.BIT_REQS for b in v):
            return ve.Guard(k, tuple(v)).canonical()
    raise ctx.doc.error(keys, f"{g!r} is not a guard", "guard: all, {group: 1}, "
                        "{matches: [One, Ignore, Ignore, Ignore]} or {not_matches: [...]}")


def _value(ctx, keys: tuple, v: Any) -> ve.Operand:
    if v == "stash":
        return ve.Operand("stash")
    if isinstance(v, dict) and set(v) == {"vrf"}:
        name = v["vrf"]
        if not isinstance(name, str) or f"vrf:{name}" not in getattr(ctx, "vrf_names_set", ()):
            raise ctx.doc.error(keys + ("vrf",), f"{name!r} is not a declared VRF operand",
                                "declare it under vrf:")
        return ve.Operand("vrf", name=name)
    if _num(v):
        if isinstance(v, int) and not fits_32_bits(v):
            raise ctx.doc.error(keys, f"{v} does not fit 32 bits",
                                f"use {I32_MIN} to {U32_MAX} (hex for bit patterns)")
        if isinstance(v, float) and v == v and abs(v) != float("inf") and abs(v) > F32_MAX:
            raise ctx.doc.error(keys, f"{v} overflows f32", "use a value within f32 (or .inf)")
        return ve.Operand("const", value=v)
    raise ctx.doc.error(keys, f"{v!r} is not an operand", "a number, stash, {vrf: NAME} or a "
                        "list of slots [{guard: ..., imm: 5}, {rf: stash}]")


def _operand(ctx, keys: tuple, v: Any) -> tuple[ve.Slot, ...]:
    if not isinstance(v, list):
        return ve.plain(_value(ctx, keys, v))
    if not v:
        raise ctx.doc.error(keys, "this operand fills no slot", "give at least one slot")
    out = []
    for i, s in enumerate(v):
        k = keys + (i,)
        if not isinstance(s, dict) or not (set(s) <= {"guard", "imm", "rf"}) or \
                len(set(s) & {"imm", "rf"}) != 1:
            raise ctx.doc.error(k, "a slot is {guard: G, imm: VALUE} or {guard: G, rf: "
                                "stash | {vrf: NAME}}", "e.g. {guard: {group: 1}, imm: 5}")
        g = _guard(ctx, k + ("guard",), s.get("guard", "all"))
        if "imm" in s:
            op = _value(ctx, k + ("imm",), s["imm"])
            if op.kind != "const":
                raise ctx.doc.error(k + ("imm",), "an immediate slot holds a constant",
                                    "use rf: for a VRF or stash operand")
            out.append(ve.Slot(g, op, "imm"))
        else:
            op = _value(ctx, k + ("rf",), s["rf"])
            if op.kind == "const":
                raise ctx.doc.error(k + ("rf",), "the rf port reads the VRF or the stash",
                                    "use imm: for a constant")
            out.append(ve.Slot(g, op, "rf"))
    return tuple(out)


def parse_lane_fold(ctx, data: dict, tensors: dict) -> LaneFoldSpec:
    doc = ctx.doc
    spec = data["input"]
    dims = ("chip", "cluster", "slice", "lane", "time", "packet")
    if not isinstance(spec, dict):
        raise doc.error(("input",), "expected {lane, time, packet} mappings",
                        "input: {lane: 'm![N]', time: 'm![M]', packet: 'm![P]'}")
    for k in spec:
        if k not in dims:
            raise doc.error(("input", k), "unknown key", "allowed: " + ", ".join(dims),
                            at_key=True)
    for k in ("lane", "time", "packet"):
        if k not in spec:
            raise doc.error(("input",), f"missing {k}", f"add {k}: 'm![...]'")
    maps: dict[str, Mapping] = {}
    for k in dims:
        if k in spec:
            maps[k] = ctx.mapping(("input", k), spec[k], k)
    mode = ctx.choice(data, "mode", LANE_MODES, None)
    out = data.get("output")
    output: dict[str, Mapping] = {}
    if out is not None:
        if not isinstance(out, dict) or set(out) != {"time", "packet"}:
            raise doc.error(("output",), "expected {time, packet}",
                            "output: {time: 'm![M, P]', packet: 'm![N]'}")
        output = {k: ctx.mapping(("output", k), v, k) for k, v in out.items()}
    return LaneFoldSpec(maps, mode, output)
