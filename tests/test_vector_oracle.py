"""An independent per-element oracle for the Vector Engine's op semantics (facts.md section 7)
and for the seed `ve_*` chain problems.

Nothing here is taken from model/numeric.py, model/expr.py or executor/: expected values come
from plain Python ints, exact `fractions.Fraction` arithmetic rounded once to f32, and `math`
transcendentals in float64 rounded to f32.  f32 values travel as their u32 bit patterns so
NaN payloads and signed zeros are never lost.  The project code is only the thing under test.
"""

import math
import pathlib
import re
import struct
from fractions import Fraction

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from executor.chains import run_vector
from model import numeric
from planner.lowering import lower_problem
from planner.spec import load_problem

SEED = pathlib.Path(__file__).resolve().parents[1] / "problems/seed"
MIN, MAX, M32 = -(2**31), 2**31 - 1, 0xFFFFFFFF
HYP = settings(max_examples=300, deadline=None, database=None)


# ---- i32 ---------------------------------------------------------------------------------
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
    if a == MIN and b == MIN:
        return MAX
    r = (((a * b) >> 30) + 1) >> 1  # Python >> is a floor (arithmetic) shift
    assert MIN <= r <= MAX
    return r


# ---- f32 (bit patterns in, bit patterns out) ----------------------------------------------
def b2f(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def f2b(f):  # f must be representable in f32 (or NaN / inf)
    return struct.unpack("<I", struct.pack("<f", f))[0]


def is_nan(bits):
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF) != 0


NAN, INF = float("nan"), float("inf")
F32_MAX = Fraction((2**24 - 1) * 2**104)


def rnd(fr):
    """Round a nonzero exact rational to the nearest-even f32 (subnormals, overflow to inf)."""
    sign, m = (-1.0 if fr < 0 else 1.0), abs(fr)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1  # now 2^e <= m < 2^(e+1)
    q = Fraction(2) ** (max(e, -126) - 23)  # the f32 quantum at this magnitude
    n = m / q
    k, rem = divmod(n.numerator, n.denominator)
    if 2 * rem > n.denominator or (2 * rem == n.denominator and k % 2 == 1):
        k += 1
    val = k * q
    return math.copysign(INF, sign) if val > F32_MAX else math.copysign(float(val), sign)


def rnd64(y):
    return y if (math.isnan(y) or math.isinf(y) or y == 0) else rnd(Fraction(y))


def sgn(x):
    return math.copysign(1.0, x)


def f_add(a, b):
    if math.isnan(a) or math.isnan(b):
        return NAN
    if math.isinf(a) or math.isinf(b):
        return NAN if (math.isinf(a) and math.isinf(b) and a != b) else (a if math.isinf(a) else b)
    s = Fraction(a) + Fraction(b)
    if s == 0:  # round-to-nearest: -0 only for (-0) + (-0)
        return -0.0 if (a == 0 and b == 0 and sgn(a) < 0 and sgn(b) < 0) else 0.0
    return rnd(s)


def f_mul(a, b):
    if math.isnan(a) or math.isnan(b):
        return NAN
    s = sgn(a) * sgn(b)
    if math.isinf(a) or math.isinf(b):
        return NAN if (a == 0 or b == 0) else math.copysign(INF, s)
    p = Fraction(a) * Fraction(b)
    return math.copysign(0.0, s) if p == 0 else rnd(p)


def f_div(a, b):
    if math.isnan(a) or math.isnan(b) or (math.isinf(a) and math.isinf(b)) or a == b == 0:
        return NAN
    s = sgn(a) * sgn(b)
    if math.isinf(a) or b == 0:
        return math.copysign(INF, s)
    if math.isinf(b) or a == 0:
        return math.copysign(0.0, s)
    return rnd(Fraction(a) / Fraction(b))


def f_fma(a, b, c):
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        return NAN
    sp = sgn(a) * sgn(b)
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return NAN
        p = math.copysign(INF, sp)
        return NAN if (math.isinf(c) and c != p) else p
    if math.isinf(c):
        return c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        both_zero = (a == 0 or b == 0) and c == 0
        return -0.0 if (both_zero and sp < 0 and sgn(c) < 0) else 0.0
    return rnd(exact)


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return INF


def _log(x):
    return -INF if x == 0 else NAN if x < 0 else math.log(x)


def _trig(fn):
    return lambda x: NAN if math.isinf(x) else fn(x)


UNARY_F64 = {  # float64 definitions; the result is rounded once to f32
    "Exp": _exp, "NegExp": lambda x: _exp(-x), "Tanh": math.tanh, "Erf": math.erf,
    "Sigmoid": lambda x: 1.0 / (1.0 + _exp(-x)), "Log": _log,
    "Sin": _trig(math.sin), "Cos": _trig(math.cos),
    "Sqrt": lambda x: NAN if x < 0 else math.sqrt(x),  # 53 >= 2*24+2: rounding twice is exact
}
UNARY_O = {k: (lambda fn: lambda bits: f2b(rnd64(fn(b2f(bits)))))(fn)
           for k, fn in UNARY_F64.items()}
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
    return sat(int(math.floor(abs(v) + Fraction(1, 2))) * (-1 if v < 0 else 1))


def fp2(fn):
    return lambda a, b: f2b(fn(b2f(a), b2f(b)))


def _isn(v):
    return isinstance(v, float) and v != v


# clip picks, True -> a: Max / Min return the other operand when exactly one is NaN
PICKS = {"Max": lambda a, b: _isn(b) if _isn(a) != _isn(b) else a > b,
         "Min": lambda a, b: _isn(b) if _isn(a) != _isn(b) else a < b,
         "AbsMax": lambda a, b: abs(a) > abs(b), "AbsMin": lambda a, b: abs(a) < abs(b)}
CLIP_I = {k: (lambda p: lambda a, b: a if p(a, b) else b)(p) for k, p in PICKS.items()}
CLIP_F = {k: (lambda p: lambda a, b: a if p(b2f(a), b2f(b)) else b)(p) for k, p in PICKS.items()}
BITS = {"BitAnd": lambda a, b: a & b, "BitOr": lambda a, b: a | b,
        "BitXor": lambda a, b: a ^ b}
SHIFTS = {"LeftShift": lambda a, b: wrap(a << (b & 31)),
          "LogicRightShift": lambda a, b: wrap((a & M32) >> (b & 31)),
          "ArithRightShift": lambda a, b: a >> (b & 31)}
ORACLE = {
    ("logic", "i32"): {**{k: (lambda f: lambda a, b: wrap(f(a & M32, b & M32)))(f)
                          for k, f in BITS.items()}, **SHIFTS},
    ("logic", "f32"): BITS,
    ("fxp", "i32"): {"AddFxp": lambda a, b: wrap(a + b), "AddFxpSat": lambda a, b: sat(a + b),
                     "SubFxp": lambda a, b: wrap(a - b), "SubFxpSat": lambda a, b: sat(a - b),
                     "LeftShiftSat": lambda a, b: sat(a * wrap(1 << (b & 31))),
                     "MulFxp": mulfxp, "MulInt": lambda a, b: wrap(a * b),
                     "ArithRightShiftRound": ashr_round, **SHIFTS},
    ("fp_binary", "f32"): {"AddF": fp2(f_add), "SubF": fp2(lambda a, b: f_add(a, -b)),
                           "MulF(Mul0)": fp2(f_mul), "MulF(Mul1)": fp2(f_mul),
                           "MulF(Fma)": fp2(f_mul), "DivF": fp2(f_div)},
    ("fp_div", "f32"): {"DivF": fp2(f_div)},
    ("clip", "i32"): {**CLIP_I,
                      "AddFxp": lambda a, b: wrap(a + b), "AddFxpSat": lambda a, b: sat(a + b)},
    ("clip", "f32"): {**CLIP_F, "Add": fp2(f_add)},
}


# ---- comparing -----------------------------------------------------------------------------
def _ordered(bits):
    return bits if bits < 2**31 else 2**31 - bits


def same(got, want, dtype, tol=False):
    if dtype == "i32":
        return abs(got - want) <= (1 if tol else 0)
    if is_nan(got) or is_nan(want):
        return is_nan(got) and is_nan(want)
    return got == want if not tol else abs(_ordered(got) - _ordered(want)) <= 2


def show(v, dtype):
    return v if dtype == "i32" else f"{b2f(v)!r} (0x{v:08x})"


def mismatches(got, want, dtype, tol=False, args=None):
    return [f"args={args[i] if args else i}: got {show(g, dtype)}, want {show(w, dtype)}"
            for i, (g, w) in enumerate(zip(got, want)) if not same(g, w, dtype, tol)]


def arr(vals, dtype):  # Python ints (i32) or u32 bit patterns (f32) -> typed numpy array
    return np.array(vals, np.int32) if dtype == "i32" else np.array(vals, np.uint32).view(np.float32)


def vals(a, dtype):  # the inverse, on the project's result
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


def check_binary(family, dtype, pairs):
    a, b = arr([p[0] for p in pairs], dtype), arr([p[1] for p in pairs], dtype)
    for op, fn in ORACLE[(family, dtype)].items():
        got = vals(numeric.BINARY_OPS[(family, dtype)][op](a.copy(), b.copy()), dtype)
        bad = mismatches(got, [fn(x, y) for x, y in pairs], dtype, args=pairs)
        assert not bad, f"{family}/{dtype} {op}: {len(bad)} mismatch(es), e.g. {bad[:3]}"


# ---- the ops --------------------------------------------------------------------------------
def test_oracle_matches_spec_examples():
    assert [ashr_round(v, 2) for v in (2, 6, -2, -6, -1)] == [1, 2, -1, -2, 0]
    assert ashr_round(MAX, 31) == 1 and ashr_round(MIN, 31) == -1
    lss = ORACLE[("fxp", "i32")]["LeftShiftSat"]
    assert [lss(v, 31) for v in (1, -1, 0)] == [MIN, MAX, 0]
    assert f_fma(rnd64(0.1), 10.0, -1.0) == 2.0**-26  # fused: the product is not rounded
    assert fp_to_fxp_o(f2b(NAN), 31) == MAX and fp_to_fxp_o(f2b(-2.5), 31) == -3
    assert fp_to_fxp_o(f2b(-2.5), 0) == MIN and fp_to_fxp_o(f2b(2.5), 30) == 5
    assert fxp_to_fp_o(MIN, 0) == f2b(-1.0) and fxp_to_fp_o(MAX, 31) == f2b(2.0**31)
    assert f2b(rnd(Fraction(1, 2**150))) == 0 and f2b(rnd(Fraction(3, 2**151))) == 1


def test_catalog_is_fully_covered():
    assert set(numeric.BINARY_OPS) == set(ORACLE)
    for key, ops in ORACLE.items():
        assert set(numeric.BINARY_OPS[key]) == set(ops), key
    assert set(numeric.UNARY) == set(UNARY_O)


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


def check_unary(bits):
    for op, fn in UNARY_O.items():
        got = vals(numeric.UNARY[op](arr(bits, "f32")), "f32")
        bad = mismatches(got, [fn(x) for x in bits], "f32", op in TRANSCENDENTAL,
                         [b2f(x) for x in bits])
        assert not bad, f"unary {op}: {bad[:3]}"


def check_fma(triples):
    cols = [arr([t[i] for t in triples], "f32") for i in range(3)]
    got = vals(numeric.fma32(*cols), "f32")
    want = [f2b(f_fma(*map(b2f, t))) for t in triples]
    bad = mismatches(got, want, "f32", args=[tuple(map(b2f, t)) for t in triples])
    assert not bad, f"fma32: {len(bad)} mismatch(es), e.g. {bad[:3]}"


IWS = [31, 0, 15, 30]


def check_conversions(ints, bits):
    for iw in IWS:
        got = vals(numeric.fxp_to_fp(arr(ints, "i32"), iw), "f32")
        bad = mismatches(got, [fxp_to_fp_o(x, iw) for x in ints], "f32", args=ints)
        assert not bad, f"fxp_to_fp(iw={iw}): {bad[:3]}"
        got = vals(numeric.fp_to_fxp(arr(bits, "f32"), iw), "i32")
        bad = mismatches(got, [fp_to_fxp_o(x, iw) for x in bits], "i32",
                         args=[b2f(x) for x in bits])
        assert not bad, f"fp_to_fxp(iw={iw}): {bad[:3]}"


CMP = {"Equal": lambda x, v: x == v, "Less": lambda x, v: x < v, "Greater": lambda x, v: x > v,
       "True": lambda x, v: True, "False": lambda x, v: False}
CMP_U = {"LessUnsigned": lambda x, v: x < v, "GreaterUnsigned": lambda x, v: x > v}


def check_compare(dtype, xs, value):
    for op in [*CMP, *CMP_U]:
        v = value if dtype == "i32" else arr([value], "f32")[0]
        got = np.asarray(numeric.compare(op, v, arr(xs, dtype))).tolist()
        if op in CMP_U:
            want = [CMP_U[op](x & M32, value & M32) for x in xs]
        else:
            dec = (lambda y: y) if dtype == "i32" else b2f
            want = [CMP[op](dec(x), dec(value)) for x in xs]
        assert got == want, f"compare {op} {dtype} value={show(value, dtype)}: xs={xs}"


def test_unary_fma_conversions_compare_on_edges():
    E = EDGES["f32"]
    check_unary(E)
    check_fma([(a, b, c) for a in E for b in E for c in E])
    check_conversions(EDGES["i32"], E)
    for dtype in ("i32", "f32"):
        for value in EDGES[dtype]:
            check_compare(dtype, EDGES[dtype], value)


@HYP
@given(F32, F32, F32, I32, I32)
def test_unary_fma_conversions_compare_random(a, b, c, i, j):
    bits = to_bits([a, b, c])
    check_unary(bits)
    check_fma([tuple(bits)])
    check_conversions([i, j], bits)
    check_compare("i32", [i, j, *EDGES["i32"]], j)
    check_compare("f32", bits + EDGES["f32"], bits[1])


