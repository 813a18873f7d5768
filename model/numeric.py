"""Numeric semantics of the Vector Engine's ops (docs/hardware.md section 7 and R13).

The one definition of what every op computes, on numpy arrays of the dtype it runs on: used by
the executor to run chains and by :mod:`model.expr` to evaluate reference formulas.  Integer ops,
conversions and IEEE add/sub/mul/div/sqrt/fma/min/max are bit-exact; transcendentals are
computed in float64 and rounded once to f32 (within the 2 ulp docs/hardware.md R13 allows).
"""

from __future__ import annotations

import math
from typing import Any, Iterator
from typing import Mapping as TMapping

import numpy as np

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
U32_MAX = 2**32 - 1
F32_MAX = float(np.finfo(np.float32).max)


def fits_32_bits(v: int) -> bool:
    """An integer constant a 32-bit lane can hold: an i32 value or a u32 bit pattern."""
    return I32_MIN <= v <= U32_MAX


def wrap_i32(v: int) -> int:
    """A Python integer reduced to i32 (two's complement)."""
    return (v - I32_MIN) % 2**32 + I32_MIN


class _Dtypes(TMapping[str, np.dtype]):
    """numpy's dtype of each tcplan dtype.  bf16 and the fp8s are ml_dtypes' types, imported
    on first use: its import takes about half a second, and a move that is checked bit for
    bit never needs it (executor.run.tensor_bits draws their bits as unsigned integers)."""

    NATIVE = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "f32": np.float32,
              "f16": np.float16}
    ML = {"bf16": "bfloat16", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}

    def __getitem__(self, name: str) -> np.dtype:
        if name in self.NATIVE:
            return np.dtype(self.NATIVE[name])
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, self.ML[name]))

    def __iter__(self) -> Iterator[str]:
        return iter([*self.NATIVE, *self.ML])

    def __len__(self) -> int:
        return len(self.NATIVE) + len(self.ML)


NP_DTYPES = _Dtypes()

NP = {"i32": np.int32, "f32": np.float32}


def as_(bits: np.ndarray, dtype: str) -> np.ndarray:
    return bits.view(NP[dtype])


def bits_of(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values).view(np.uint32)


# ---- scalar semantics -------------------------------------------------------------------
def _sat(x: np.ndarray) -> np.ndarray:
    return np.clip(x, I32_MIN, I32_MAX).astype(np.int32)


def _wrap(x: np.ndarray) -> np.ndarray:
    return (np.asarray(x, np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _count(b: np.ndarray) -> np.ndarray:
    """Shift counts use their low five bits (docs/decisions.md item 41)."""
    return (np.asarray(b, np.int64) & 31)


def _shl(a, b):
    return _wrap(np.asarray(a, np.int64) << _count(b))


def _lshr(a, b):
    return (a.view(np.uint32) >> _count(b).astype(np.uint32)).view(np.int32)


def _ashr(a, b):
    return (np.asarray(a, np.int64) >> _count(b)).astype(np.int32)


def _shl_sat(a, b):
    """a * 2^b, saturated (docs/hardware.md section 7; count 31 multiplies by 2^31, not by i32::MIN
    as the reference's wrapped 1 << 31 does: docs/decisions.md item 41)."""
    return _sat(np.asarray(a, np.int64) << _count(b))


def _ashr_round(a, b):
    """a / 2^b rounded to nearest, ties away from zero (the reference's rounding_divide)."""
    e = _count(b)
    v = np.asarray(a, np.int64)
    mask = (np.int64(1) << e) - 1
    rem = v & mask
    thr = (mask >> 1) + (v < 0)
    return ((v >> e) + (rem > thr)).astype(np.int32)


def _mulfxp(a, b):
    a64, b64 = np.asarray(a, np.int64), np.asarray(b, np.int64)
    r = (((a64 * b64) >> 30) + 1) >> 1
    both_min = (a64 == I32_MIN) & (b64 == I32_MIN)
    return np.where(both_min, I32_MAX, r).astype(np.int32)


def _abs_pick(a, b, smaller: bool):
    """AbsMin / AbsMax: the operand of smaller / larger magnitude; a tie (or NaN) gives b."""
    ma = np.abs(np.asarray(a, np.float64 if a.dtype.kind == "f" else np.int64))
    mb = np.abs(np.asarray(b, np.float64 if b.dtype.kind == "f" else np.int64))
    pick_a = ma < mb if smaller else ma > mb
    return np.where(pick_a, a, b)


def _fmax(a, b):
    """Max: a if a > b else b; a NaN operand yields the other (IEEE maxNum)."""
    r = np.where(a > b, a, b)
    if a.dtype.kind == "f":
        r = np.where(np.isnan(b), a, np.where(np.isnan(a), b, r))
    return r


def _fmin(a, b):
    r = np.where(a < b, a, b)
    if a.dtype.kind == "f":
        r = np.where(np.isnan(b), a, np.where(np.isnan(a), b, r))
    return r


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Fused multiply-add rounded once to f32: the product is exact in float64, the sum is
    rounded to odd in float64 (TwoSum gives the error), then to nearest-even in f32."""
    a64, b64, c64 = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
    with np.errstate(all="ignore"):
        p = a64 * b64
        s = p + c64
        bb = s - p
        err = (p - (s - bb)) + (c64 - bb)
        bits = s.view(np.int64).copy()
        fix = np.isfinite(s) & np.isfinite(err) & (err != 0) & ((bits & 1) == 0)
        away = (err > 0) == (s > 0)  # the exact value is beyond s in magnitude
        bits = np.where(fix, bits + np.where(away, 1, -1), bits)
        return bits.view(np.float64).astype(np.float32)


def _f64(fn):
    def op(a):
        with np.errstate(all="ignore"):
            return fn(np.asarray(a, np.float32).astype(np.float64)).astype(np.float32)
    return op


_erf = np.frompyfunc(math.erf, 1, 1)


def _sqrt(a):
    """IEEE square root in f32 (correctly rounded; NaN below zero)."""
    with np.errstate(invalid="ignore"):
        return np.sqrt(np.asarray(a, np.float32))

UNARY = {
    "Exp": _f64(np.exp),
    "NegExp": _f64(lambda x: np.exp(-x)),
    "Sqrt": lambda a: _sqrt(a),
    "Tanh": _f64(np.tanh),
    "Sigmoid": _f64(lambda x: 1.0 / (1.0 + np.exp(-x))),
    # (np.asarray, not .astype: for a 0-d input the frompyfunc ufunc returns a bare float)
    "Erf": _f64(lambda x: np.asarray(_erf(x), np.float64)),
    "Log": _f64(np.log),
    "Sin": _f64(np.sin),
    "Cos": _f64(np.cos),
}
TRANSCENDENTAL = frozenset(UNARY) - {"Sqrt"}


def _i64(f):
    return lambda a, b: f(np.asarray(a, np.int64), np.asarray(b, np.int64))


def _u(f):
    return lambda a, b: f(a.view(np.uint32), np.asarray(b).astype(a.dtype).view(np.uint32)
                          ).view(a.dtype)


def _f32(f):
    def op(a, b):
        with np.errstate(all="ignore"):
            return f(np.asarray(a, np.float32), np.asarray(b, np.float32)).astype(np.float32)
    return op


#: (family, dtype) -> op -> f(a, b) on typed arrays (the ALU catalog's ops)
BINARY_OPS: dict[tuple[str, str], dict[str, Any]] = {
    ("logic", "i32"): {"BitAnd": _u(np.bitwise_and), "BitOr": _u(np.bitwise_or),
                       "BitXor": _u(np.bitwise_xor), "LeftShift": _shl,
                       "LogicRightShift": _lshr, "ArithRightShift": _ashr},
    ("logic", "f32"): {"BitAnd": _u(np.bitwise_and), "BitOr": _u(np.bitwise_or),
                       "BitXor": _u(np.bitwise_xor)},
    ("fxp", "i32"): {"AddFxp": _i64(lambda a, b: _wrap(a + b)),
                     "AddFxpSat": _i64(lambda a, b: _sat(a + b)),
                     "SubFxp": _i64(lambda a, b: _wrap(a - b)),
                     "SubFxpSat": _i64(lambda a, b: _sat(a - b)),
                     "LeftShift": _shl, "LeftShiftSat": _shl_sat, "MulFxp": _mulfxp,
                     "MulInt": _i64(lambda a, b: _wrap(a * b)), "LogicRightShift": _lshr,
                     "ArithRightShift": _ashr, "ArithRightShiftRound": _ashr_round},
    ("fp_binary", "f32"): {"AddF": _f32(np.add), "SubF": _f32(np.subtract),
                           "MulF(Mul0)": _f32(np.multiply), "MulF(Mul1)": _f32(np.multiply),
                           "MulF(Fma)": _f32(np.multiply), "DivF": _f32(np.divide)},
    ("fp_div", "f32"): {"DivF": _f32(np.divide)},
    ("clip", "i32"): {"Min": _fmin, "Max": _fmax,
                      "AbsMin": lambda a, b: _abs_pick(a, b, True),
                      "AbsMax": lambda a, b: _abs_pick(a, b, False),
                      "AddFxp": _i64(lambda a, b: _wrap(a + b)),
                      "AddFxpSat": _i64(lambda a, b: _sat(a + b))},
    ("clip", "f32"): {"Min": _fmin, "Max": _fmax,
                      "AbsMin": lambda a, b: _abs_pick(a, b, True),
                      "AbsMax": lambda a, b: _abs_pick(a, b, False), "Add": _f32(np.add)},
}


def fxp_to_fp(x: np.ndarray, int_width: int) -> np.ndarray:
    """x / 2^(31 - int_width), rounded to nearest even in f32 (exact in float64 first)."""
    return (np.asarray(x, np.float64) * 2.0 ** (int_width - 31)).astype(np.float32)


def fp_to_fxp(x: np.ndarray, int_width: int) -> np.ndarray:
    """x * 2^(31 - int_width), rounded half away from zero, saturated; NaN -> MAX / MIN by
    its sign bit."""
    v = np.asarray(x, np.float32).astype(np.float64) * 2.0 ** (31 - int_width)
    with np.errstate(invalid="ignore"):
        r = np.trunc(v + np.copysign(0.5, v))
        r = np.clip(np.nan_to_num(r, nan=0.0), I32_MIN, I32_MAX)
    neg = np.signbit(np.asarray(x, np.float32))
    r = np.where(np.isnan(v), np.where(neg, I32_MIN, I32_MAX), r)
    return r.astype(np.int64).astype(np.int32)


def compare(op: str, value: Any, x: np.ndarray) -> np.ndarray:
    """One tag comparison on the stream (Cmp of seed 003)."""
    if op == "True":
        return np.ones(x.shape, bool)
    if op == "False":
        return np.zeros(x.shape, bool)
    b = np.asarray(value).astype(x.dtype)
    if op == "Equal":
        return x == b
    if op == "Less":
        return x < b
    if op == "Greater":
        return b < x
    xu, bu = x.view(np.uint32), np.asarray(b).reshape(1).view(np.uint32)[0]
    return xu < bu if op == "LessUnsigned" else bu < xu


def reduce_op(op: str, acc: np.ndarray, x: np.ndarray) -> np.ndarray:
    """One step of a reduction (the intra-slice and inter-slice reducers): ``AddSat`` (i32,
    saturating), ``Add`` (f32, or i32 wrapping), ``Mul`` (f32), ``Max``, ``Min``, in the
    stream's type."""
    if op == "AddSat":
        return _sat(acc.astype(np.int64) + x)
    if op in ("Add", "Mul"):
        with np.errstate(over="ignore"):  # (i32 wraps)
            return (acc + x if op == "Add" else acc * x).astype(acc.dtype)
    return _fmax(acc, x) if op == "Max" else _fmin(acc, x)


def reduce_time(vals: np.ndarray, groups: list[np.ndarray], op: str, dtype: str
                ) -> np.ndarray:
    """Intra-slice reduce: per output time step, fold the input time steps in stream order
    (groups of one length folded together: a step of the fold for all of them at once)."""
    if len({len(g) for g in groups}) == 1:
        at = np.array([list(g) for g in groups], np.int64)  # (groups, steps folded)
        acc = vals[:, at[:, 0], :].copy()
        for j in range(1, at.shape[1]):
            acc = reduce_op(op, acc, vals[:, at[:, j], :])
        return acc
    out = []
    for g in groups:
        acc = vals[:, g[0], :].copy()
        for t in g[1:]:
            acc = reduce_op(op, acc, vals[:, t, :])
        out.append(acc)
    return np.stack(out, axis=1)


def reduce_lanes(vals: np.ndarray, op: str) -> np.ndarray:
    """Intra-slice reduce over the Packet: each flit's lanes folded by a pairwise tree
    (four lanes: ``op(op(a, b), op(c, d))``), ``(..., P)`` -> ``(..., 1)``."""
    while vals.shape[-1] > 1:
        vals = reduce_op(op, vals[..., 0::2], vals[..., 1::2])
    return vals


