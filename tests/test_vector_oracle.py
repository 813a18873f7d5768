"""An independent per-element oracle for the Vector Engine's op semantics (docs/hardware.md
section 7) and for the seed `ve_*` chain problems.

Nothing here comes from model/numeric.py, model/expr.py or executor/: expected values are
computed with Python ints, `struct` for f32 bit patterns, exact `Fraction` arithmetic (FMA,
conversions) and float64 `math` rounded once to f32.  f32 values travel as u32 bit patterns,
so NaN payloads and signed zeros are never lost.  The project code is only the thing under test.
"""

import ast
import functools
import math
import operator
import pathlib
import re
import struct
from fractions import Fraction
from itertools import compress

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tcplan.executor.chains import run_vector
from tcplan.model import numeric
from tcplan.planner.lowering import lower_problem
from tcplan.planner.spec import load_problem

SEED = pathlib.Path(__file__).resolve().parents[1] / "problems/seed"
MIN, MAX, M32 = -(2**31), 2**31 - 1, 0xFFFFFFFF
NAN, INF = float("nan"), float("inf")
HYP = settings(max_examples=300, deadline=None, database=None)


# ---- i32 ----------------------------------------------------------------------------------
def wrap(x):
    return ((x - MIN) & M32) + MIN


def sat(x):
    return max(MIN, min(MAX, x))


def ashr_round(v, b):
    e = b & 31
    mask = (1 << e) - 1
    thr = (mask >> 1) + (1 if v < 0 else 0)
    return (v >> e) + (1 if (v & mask) > thr else 0)


def mulfxp(a, b):
    r = MAX if a == b == MIN else (((a * b) >> 30) + 1) >> 1  # Python >> floors
    assert MIN <= r <= MAX
    return r


# ---- f32 ----------------------------------------------------------------------------------
def b2f(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def f2b(f):  # f must be exactly representable in f32 (or NaN / inf)
    return struct.unpack("<I", struct.pack("<f", f))[0]


def is_nan(bits):
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF) != 0


def rnd(fr):
    """Round a nonzero exact rational to nearest-even f32 (subnormals; overflow -> inf)."""
    sign, m = (-1.0 if fr < 0 else 1.0), abs(fr)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    e -= Fraction(2) ** e > m  # now 2^e <= m < 2^(e+1)
    q = Fraction(2) ** (max(e, -126) - 23)  # the f32 quantum at this magnitude
    k, rem = divmod(m / q, 1)
    k += rem > Fraction(1, 2) or (rem == Fraction(1, 2) and k % 2 == 1)
    val = k * q
    return math.copysign(INF if val > (2**24 - 1) * 2**104 else float(val), sign)


def rnd64(y):  # a float64 value rounded once to f32
    return y if (math.isnan(y) or math.isinf(y) or y == 0) else rnd(Fraction(y))


# + - * / on f32 values in float64, then rounded: a product of two f32 is exact in float64 and
# for + - / sqrt rounding twice is innocuous (53 >= 2 * 24 + 2); IEEE specials come from Python.
def f_div(a, b):
    if b == 0:
        return NAN if (a == 0 or math.isnan(a)) else math.copysign(INF, a) * math.copysign(1, b)
    return rnd64(a / b)


def f_fma(a, b, c):  # a * b + c exactly (Fraction), rounded once
    if any(math.isinf(v) or math.isnan(v) for v in (a, b, c)):
        return a * b + c  # IEEE rules for the specials (inf * 0, inf - inf -> NaN)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # -0 only when a*b is -0 and c is -0
        return (a * b) + c
    return rnd(exact)


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return INF


UNARY_F64 = {  # float64 definitions; the result is rounded once to f32
    "Exp": _exp, "NegExp": lambda x: _exp(-x), "Tanh": math.tanh, "Erf": math.erf,
    "Sigmoid": lambda x: 1.0 / (1.0 + _exp(-x)),
    "Log": lambda x: -INF if x == 0 else NAN if x < 0 else math.log(x),
    "Sin": lambda x: NAN if math.isinf(x) else math.sin(x),
    "Cos": lambda x: NAN if math.isinf(x) else math.cos(x),
    "Sqrt": lambda x: NAN if x < 0 else math.sqrt(x),
}


def _on_bits(fn):
    return lambda bits: f2b(rnd64(fn(b2f(bits))))


UNARY_O = {k: _on_bits(fn) for k, fn in UNARY_F64.items()}
TRANSCENDENTAL = set(UNARY_O) - {"Sqrt"}


def fxp_to_fp_o(x, iw):
    return 0 if x == 0 else f2b(rnd(Fraction(x, 2 ** (31 - iw))))


def fp_to_fxp_o(bits, iw):
    x = b2f(bits)
    if is_nan(bits):
        return MIN if bits >> 31 else MAX
    if math.isinf(x):
        return MIN if x < 0 else MAX
    v = Fraction(x) * 2 ** (31 - iw)
    return sat(math.floor(abs(v) + Fraction(1, 2)) * (-1 if v < 0 else 1))


def fp2(fn):
    return lambda a, b: f2b(fn(b2f(a), b2f(b)))


def _isn(v):
    return isinstance(v, float) and math.isnan(v)


def _clip(pick, dec):
    return lambda a, b: a if pick(dec(a), dec(b)) else b


def _bitwise_i32(f):
    return lambda a, b: wrap(f(a & M32, b & M32))


# clip picks (True -> a): Max / Min return the other operand when exactly one is NaN
PICKS = {"Max": lambda a, b: _isn(b) if _isn(a) != _isn(b) else a > b,
         "Min": lambda a, b: _isn(b) if _isn(a) != _isn(b) else a < b,
         "AbsMax": lambda a, b: abs(a) > abs(b), "AbsMin": lambda a, b: abs(a) < abs(b)}
CLIP_I = {k: _clip(p, int) for k, p in PICKS.items()}
CLIP_F = {k: _clip(p, b2f) for k, p in PICKS.items()}
BITS = {"BitAnd": operator.and_, "BitOr": operator.or_, "BitXor": operator.xor}
SHIFTS = {"LeftShift": lambda a, b: wrap(a << (b & 31)),
          "LogicRightShift": lambda a, b: wrap((a & M32) >> (b & 31)),
          "ArithRightShift": lambda a, b: a >> (b & 31)}
F_ADD, F_SUB, F_MUL = (fp2(lambda a, b: rnd64(a + b)), fp2(lambda a, b: rnd64(a - b)),
                       fp2(lambda a, b: rnd64(a * b)))
ORACLE = {
    ("logic", "i32"): {**{k: _bitwise_i32(f) for k, f in BITS.items()}, **SHIFTS},
    ("logic", "f32"): BITS,  # on the bit patterns
    ("fxp", "i32"): {"AddFxp": lambda a, b: wrap(a + b), "AddFxpSat": lambda a, b: sat(a + b),
                     "SubFxp": lambda a, b: wrap(a - b), "SubFxpSat": lambda a, b: sat(a - b),
                     "LeftShiftSat": lambda a, b: sat(a * 2 ** (b & 31)),
                     "MulFxp": mulfxp, "MulInt": lambda a, b: wrap(a * b),
                     "ArithRightShiftRound": ashr_round, **SHIFTS},
    ("fp_binary", "f32"): {"AddF": F_ADD, "SubF": F_SUB, "MulF(Mul0)": F_MUL,
                           "MulF(Mul1)": F_MUL, "MulF(Fma)": F_MUL, "DivF": fp2(f_div)},
    ("fp_div", "f32"): {"DivF": fp2(f_div)},
    ("clip", "i32"): {**CLIP_I, "AddFxp": lambda a, b: wrap(a + b),
                      "AddFxpSat": lambda a, b: sat(a + b)},
    ("clip", "f32"): {**CLIP_F, "Add": F_ADD},
}


# ---- comparing ----------------------------------------------------------------------------
def _ordered(bits):  # f32 bit patterns on the ordered integer line of floats
    return bits if bits < 2**31 else 2**31 - bits


def same(got, want, dtype, tol=False):
    """Bit-exact (any NaN equals any NaN); with tol: 2 ulp (f32) or +-1 (i32)."""
    if dtype == "i32":
        return abs(got - want) <= tol
    if is_nan(got) or is_nan(want):
        return is_nan(got) and is_nan(want)
    return got == want or (tol and abs(_ordered(got) - _ordered(want)) <= 2)


def show(v, dtype):
    return v if dtype == "i32" else f"{b2f(v)!r} (0x{v:08x})"


def mismatches(got, want, dtype, tol=False, args=None):
    assert len(got) == len(want)
    cand = compress(range(len(got)), map(operator.ne, got, want))  # fast path: equal bits
    return [f"args={i if args is None else args[i]}: got {show(got[i], dtype)}, want "
            f"{show(want[i], dtype)}" for i in cand if not same(got[i], want[i], dtype, tol)]


def arr(values, dtype):  # Python ints (i32) or u32 bit patterns (f32) -> a typed numpy array
    return (np.array(values, np.int32) if dtype == "i32"
            else np.array(values, np.uint32).view(np.float32))


def vals(a, dtype):  # the inverse, on the project's results
    a = np.asarray(a)
    assert a.dtype == (np.int32 if dtype == "i32" else np.float32), a.dtype
    return a.astype(np.int64).tolist() if dtype == "i32" else a.view(np.uint32).tolist()


EDGES = {"i32": [MIN, MAX, 0, -1, 1, MIN + 1, MAX - 1, 7, -7, 31, 32, 33, -32],
         "f32": [f2b(rnd64(x)) for x in (NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5,
                                           3.4028234663852886e38, 2.0**-126, 1e-45, 100.0,
                                           -100.0, 88.7, -88.7, 1e30)]}
I32 = st.integers(MIN, MAX)
F32 = st.floats(width=32, allow_nan=True, allow_infinity=True)


def to_bits(floats):  # hypothesis floats -> the exact bits the project will see
    return np.array(floats, np.float32).view(np.uint32).tolist()


def check(name, got, want, dtype, tol=False, args=None):
    bad = mismatches(vals(got, dtype), want, dtype, tol, args)
    assert not bad, f"{name}: {len(bad)} mismatch(es), e.g. {bad[:3]}"


# ---- the ops ------------------------------------------------------------------------------
def test_oracle_matches_spec_examples():
    assert [ashr_round(v, 2) for v in (2, 6, -2, -6, -1)] == [1, 2, -1, -2, 0]
    assert ashr_round(MAX, 31) == 1 and ashr_round(MIN, 31) == -1
    lss = ORACLE[("fxp", "i32")]["LeftShiftSat"]
    assert [lss(v, 31) for v in (1, -1, 0)] == [MAX, MIN, 0]  # saturating x * 2^31
    assert f_fma(rnd64(0.1), 10.0, -1.0) == 2.0**-26  # fused: the product is not rounded
    assert f2b(f_fma(-0.0, 1.0, -0.0)) == 0x80000000 and f2b(f_fma(1.0, 1.0, -1.0)) == 0
    assert fp_to_fxp_o(f2b(NAN), 31) == MAX and fp_to_fxp_o(f2b(-2.5), 31) == -3
    assert fp_to_fxp_o(f2b(-2.5), 0) == MIN and fp_to_fxp_o(f2b(2.5), 30) == 5
    assert fxp_to_fp_o(MIN, 0) == f2b(-1.0) and fxp_to_fp_o(MAX, 31) == f2b(2.0**31)
    assert f2b(rnd(Fraction(1, 2**150))) == 0 and f2b(rnd(Fraction(3, 2**151))) == 1


def test_catalog_is_fully_covered():
    assert set(numeric.BINARY_OPS) == set(ORACLE)
    for key, ops in ORACLE.items():
        assert set(numeric.BINARY_OPS[key]) == set(ops), key
    assert set(numeric.UNARY) == set(UNARY_O)


def check_binary(family, dtype, pairs):
    a, b = (arr([p[i] for p in pairs], dtype) for i in (0, 1))
    for op, fn in ORACLE[(family, dtype)].items():
        with np.errstate(all="ignore"):
            got = numeric.BINARY_OPS[(family, dtype)][op](a.copy(), b.copy())
        check(f"{family}/{dtype} {op}", got, [fn(x, y) for x, y in pairs], dtype, args=pairs)


@pytest.mark.parametrize("key", list(ORACLE), ids="/".join)
def test_binary_ops_on_edge_pairs(key):
    E = EDGES[key[1]]
    check_binary(*key, [(x, y) for x in E for y in E])


@pytest.mark.parametrize("key", list(ORACLE), ids="/".join)
@HYP
@given(data=st.data())
def test_binary_ops_random(key, data):
    if key[1] == "i32":
        check_binary(*key, [(data.draw(I32), data.draw(I32))])
    else:
        check_binary(*key, [tuple(to_bits([data.draw(F32), data.draw(F32)]))])


CMP = {"Equal": operator.eq, "Less": operator.lt, "Greater": operator.gt,
       "True": lambda x, v: True, "False": lambda x, v: False}
CMP_U = {"LessUnsigned": operator.lt, "GreaterUnsigned": operator.gt}


def check_unary_fma_conversions_compare(bits, triples, ints):
    floats = [b2f(x) for x in bits]
    for op, fn in UNARY_O.items():
        with np.errstate(all="ignore"):
            got = numeric.UNARY[op](arr(bits, "f32"))
        check(f"unary {op}", got, list(map(fn, bits)), "f32", op in TRANSCENDENTAL, floats)
    with np.errstate(all="ignore"):
        got = numeric.fma32(*(arr([t[i] for t in triples], "f32") for i in range(3)))
    check("fma32", got, [f2b(f_fma(*map(b2f, t))) for t in triples], "f32",
          args=[tuple(map(b2f, t)) for t in triples])
    for iw in (31, 0, 15, 30):
        check(f"fxp_to_fp(iw={iw})", numeric.fxp_to_fp(arr(ints, "i32"), iw),
              [fxp_to_fp_o(x, iw) for x in ints], "f32", args=ints)
        with np.errstate(all="ignore"):
            got = numeric.fp_to_fxp(arr(bits, "f32"), iw)
        check(f"fp_to_fxp(iw={iw})", got, [fp_to_fxp_o(x, iw) for x in bits], "i32",
              args=floats)
    for dtype, xs in (("i32", ints), ("f32", bits)):
        for value in xs:
            v = value if dtype == "i32" else arr([value], "f32")[0]
            dec = (lambda y: y) if dtype == "i32" else b2f
            for op, fn in {**CMP, **CMP_U}.items():
                got = np.asarray(numeric.compare(op, v, arr(xs, dtype))).tolist()
                want = [CMP_U[op](x & M32, value & M32) if op in CMP_U
                        else fn(dec(x), dec(value)) for x in xs]
                assert got == want, f"compare {op} {dtype} {show(value, dtype)}: {xs}"


def test_unary_fma_conversions_compare_on_edges():
    E = EDGES["f32"]
    check_unary_fma_conversions_compare(E, [(a, b, c) for a in E for b in E for c in E],
                                        EDGES["i32"])


@HYP
@given(F32, F32, F32, I32, I32)
def test_unary_fma_conversions_compare_random(a, b, c, i, j):
    bits = to_bits([a, b, c])
    check_unary_fma_conversions_compare(bits, [tuple(bits)], [i, j])


# ---- the seed chain problems --------------------------------------------------------------
FUNCS = {"exp": "Exp", "sigmoid": "Sigmoid", "tanh": "Tanh", "erf": "Erf", "log": "Log",
         "sin": "Sin", "cos": "Cos", "sqrt": "Sqrt"}
ARITH = {"i32": {ast.Add: lambda x, y: wrap(x + y), ast.Sub: lambda x, y: wrap(x - y),
                 ast.Mult: lambda x, y: wrap(x * y)},
         "f32": {ast.Add: F_ADD, ast.Sub: F_SUB, ast.Mult: F_MUL}}


def evaluate(node, env, dtype, n):
    """(kind, values at the written coordinates): kind 'i' (Python ints) or 'f' (f32 bits).
    In an i32 problem + - * max are i32 ops; a float function takes its argument through
    FxpToFp(31), and its result goes back through FpToFxp(31) when an integer op consumes it."""
    def ev(nd, want):
        kind, v = evaluate(nd, env, dtype, n)
        if kind != want:
            v = [fp_to_fxp_o(x, 31) if want == "i" else fxp_to_fp_o(x, 31) for x in v]
        return v

    k = "i" if dtype == "i32" else "f"
    if isinstance(node, ast.Constant):
        return k, [int(node.value) if k == "i" else f2b(rnd64(float(node.value)))] * n
    if isinstance(node, ast.Name):
        return k, env[node.id]
    if isinstance(node, ast.BinOp):
        return k, list(map(ARITH[dtype][type(node.op)], ev(node.left, k), ev(node.right, k)))
    name, args = node.func.id, node.args
    if name == "sum":  # sum(x, R): saturating i32 sum over R, in increasing R order
        assert k == "i" and [a.id for a in args] == ["x", "R"]
        return k, [functools.reduce(lambda acc, v: sat(acc + v), row, 0) for row in env["x@R"]]
    if name == "max":  # the Clip Max, first argument as a
        return k, list(map(ORACLE[("clip", dtype)]["Max"], ev(args[0], k), ev(args[1], k)))
    if name == "abs":  # f32: clear the sign bit
        assert k == "f"
        return k, [x & 0x7FFFFFFF for x in ev(args[0], "f")]
    return "f", list(map(UNARY_O[FUNCS[name]], ev(args[0], "f")))


# Which coordinates the input of the sub-tensor problems holds: ve_intra_slice_reduce maps
# A only through A % 4 and A / 4 % 2 (so A < 8) and S only through S / 4 (so S % 4 == 0);
# ve_narrow_split_semantics maps A only through A % 8 (so A < 8).  Others hold everything.
HELD = {"ve_intra_slice_reduce": lambda c: (c["A"] < 8) & (c["S"] % 4 == 0),
        "ve_narrow_split_semantics": lambda c: c["A"] < 8}
PROBLEMS = sorted(p.stem for p in SEED.glob("ve_*.yaml"))


def held_mask(name, axes, shape):
    coords = dict(zip(axes, np.indices(shape)))
    return np.broadcast_to(HELD.get(name, lambda c: True)(coords), shape)


@functools.cache
def chain_run(name, seed):
    doc = yaml.safe_load((SEED / f"{name}.yaml").read_text())
    problem = load_problem(SEED / f"{name}.yaml")
    return doc, run_vector(problem, lower_problem(problem), seed)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", PROBLEMS)
def test_seed_chain_matches_oracle(name, seed):
    doc, r = chain_run(name, seed)
    dtype, sizes, text = doc["dtype"], doc["axes"], doc["reference"]
    axes = list(sizes)
    x, out, written = r["x"], r["out"], r["written"]
    pair = "I" if "group0" in text or "group1" in text else None
    reduced = "R" if "sum(" in text else None
    frame = [a for a in axes if a not in (pair, reduced)]
    assert x.shape == tuple(sizes[a] for a in axes)
    assert out.shape == written.shape == tuple(sizes[a] for a in frame)
    assert written.sum() > 0
    assert np.array_equal(written, held_mask(name, frame, out.shape)), \
        f"{name}: written != where the input holds data"

    def at(a):  # values at the written coordinates (C order)
        return vals(a[written], dtype)

    env = {}
    if pair:
        env["group0"], env["group1"] = (at(np.take(x, g, axis=axes.index(pair))) for g in (0, 1))
    elif reduced:
        env["x@R"] = np.moveaxis(x, axes.index(reduced), -1)[written].astype(np.int64).tolist()
    else:
        env["x"] = at(x)
    for vname, vdoc in (doc.get("vrf") or {}).items():
        used = set(re.findall(r"\b[A-Z]\w*", " ".join(map(str, vdoc.values()))))
        V = r["vrf"][vname]
        assert V.shape == tuple(sizes[a] for a in axes if a in used)
        V = V.reshape([sizes[a] if a in used else 1 for a in frame])
        env[vname] = at(np.broadcast_to(V, out.shape))

    kind, want = evaluate(ast.parse(text, mode="eval").body, env, dtype, int(written.sum()))
    if dtype == "i32" and kind == "f":  # the end of the formula consumes a float result
        want = [fp_to_fxp_o(v, 31) for v in want]
    tol = any(f in text for f in FUNCS if FUNCS[f] in TRANSCENDENTAL)
    got, coords = at(out), np.argwhere(written)
    bad = mismatches(got, want, dtype, tol, coords)
    assert not bad, f"{name} ({text}) seed {seed}: {len(bad)} mismatch(es), e.g. {bad[:3]}"

    # the comparison can fail: corrupt one written element (bit 30) and it must be caught
    i = next(k for k, w in enumerate(want) if dtype == "i32" or not is_nan(w))
    got[i] = wrap(got[i] ^ (1 << 30)) if dtype == "i32" else got[i] ^ (1 << 30)
    assert mismatches(got, want, dtype, tol, coords), f"{name}: a corrupted output passed"


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", PROBLEMS)
def test_seed_chain_inputs_carry_edge_values(name, seed):
    doc, r = chain_run(name, seed)
    x = r["x"]
    held = x[held_mask(name, list(doc["axes"]), x.shape)]  # the input that reaches the chain
    if doc["dtype"] == "i32":
        missing = [v for v in (MIN, MAX) if not (held == v).any()]
    else:
        missing = [k for k, f in (("NaN", np.isnan), ("inf", np.isinf)) if not f(held).any()]
    assert not missing, (f"{name} seed {seed}: no {missing} in the input the chain holds "
                         "(the edge values are planted where the input mappings do not reach)")
