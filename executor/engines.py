"""The Tensor Unit's engines run on data (model/engines/; issue 29, item 4).

A stream's values on its slices are an array ``(units, time, packet)``: the units (chip,
cluster, slice) in order, each position holding the element of the mathematical tensor at
the index its mappings give (the holding rule, docs/hardware.md section 1), zeros where it
holds none.  :func:`lay_out` makes that array of a tensor, :func:`check_holds` checks one
against a tensor, position by position and bit for bit.  :func:`run_engine` lays the input
out by its mappings, runs the engine's own value semantics (which consult no mapping), and
checks the result against the output mapping and the tensor the op must compute: the
engine's two accounts of itself checked against each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tcplan.model.bytes_cache import BytesLRU, read_only
from tcplan.model.engines import SPATIAL, EnginePlan, same_units
from tcplan.model.limits import STREAM_INDEX_CACHE_BYTES
from tcplan.model.mapping import LIVE
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import TIER_DIMS, Tensor

from .run import axis_strides, carried_axes, constant_along, over_axes, value_text

#: the streams' indices used last (a graph's op reads the stream the op before it made,
#: with the same mappings; every layer of a model, its layer's), the least recently used
#: dropped past ``STREAM_INDEX_CACHE_BYTES``: key -> (lin, held), both read-only
_INDEX_CACHE: BytesLRU[tuple[np.ndarray, np.ndarray]] = BytesLRU(
    STREAM_INDEX_CACHE_BYTES, lambda v: v[0].nbytes + v[1].nbytes)


def stream_index(t: Tensor, axes: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`compute_stream_index`, remembered (the least recently used dropped past
    ``STREAM_INDEX_CACHE_BYTES``; the arrays are read-only: callers share them)."""
    def make() -> tuple[np.ndarray, np.ndarray]:
        lin, held = compute_stream_index(t, axes)
        read_only(lin, held)
        return lin, held
    return _INDEX_CACHE.get(_index_key(t, axes), make)


@dataclass(frozen=True)
class Gather:
    """A stream's (or register file's) layout as a gather: its shape ``(units, *inner)``,
    the flat positions holding an element, the linear index into the tensor each holds,
    and which units hold any.  :func:`compute_stream_index`'s content without the
    positions holding nothing (a weight's TRF on 64 of 512 slices: an eighth of it)."""

    shape: tuple[int, ...]
    pos: np.ndarray
    src: np.ndarray
    rows: np.ndarray  # bool per unit

    @property
    def nbytes(self) -> int:
        return self.pos.nbytes + self.src.nbytes + self.rows.nbytes


_GATHER_CACHE: BytesLRU[Gather] = BytesLRU(STREAM_INDEX_CACHE_BYTES, lambda g: g.nbytes)


def gather(t: Tensor, axes: dict[str, int]) -> Gather:
    """The stream's :class:`Gather`, remembered (least recently used dropped past
    ``STREAM_INDEX_CACHE_BYTES``): every layer of a model lays its weights out alike."""
    key = _index_key(t, axes)

    def make() -> Gather:
        g = compute_gather(t, axes)
        read_only(g.pos, g.src, g.rows)
        return g
    return _GATHER_CACHE.get(key, make)


def _index_type(top: int) -> type:
    """The narrowest integer holding every index below ``top`` (positions, and indexes
    into the tensor)."""
    return np.int32 if top < 2 ** 31 else np.int64


def compute_gather(t: Tensor, axes: dict[str, int]) -> Gather:
    """:func:`compute_stream_index` as a :class:`Gather`, without its arrays over every
    position: a position holds an element when its unit and its inner position each do
    (live, every axis within one level inside its size) and every axis over both levels
    sums inside its size, so the held positions are the outer sum of the held units and
    the held inner positions (C order, as ``flatnonzero`` gives them), less those where an
    axis over both sums past its size (checked only where it can), and so are their
    indexes."""
    dims = TIER_DIMS[t.tier]
    strides = axis_strides(axes)
    u_lin, u_held, u_parts = _level(t, dims[:3], strides)
    i_lin, i_held, i_parts = _level(t, dims[3:], strides)
    for a in set(u_parts) - set(i_parts):
        u_held = u_held & (u_parts[a] < axes[a])
    for a in set(i_parts) - set(u_parts):
        i_held = i_held & (i_parts[a] < axes[a])
    units = tuple(t.dims[d].size for d in dims[:3])
    inner = tuple(t.dims[d].size for d in dims[3:])

    def flat(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(x, shape).reshape(-1)
    u_lin, u_held, i_lin, i_held = (flat(u_lin, units), flat(u_held, units),
                                    flat(i_lin, inner), flat(i_held, inner))
    lu, li = np.flatnonzero(u_held), np.flatnonzero(i_held)
    keep = None
    if lu.size and li.size:
        for a in set(u_parts) & set(i_parts):  # (an axis over both levels)
            cu, ci = flat(u_parts[a], units)[lu], flat(i_parts[a], inner)[li]
            if int(cu.max()) + int(ci.max()) >= axes[a]:  # (some position sums past it)
                ok = cu[:, None] + ci[None, :] < axes[a]
                keep = ok if keep is None else keep & ok
    top = u_lin.size * i_lin.size
    if lu.size and li.size:
        top = max(top, int(u_lin[lu].max()) + int(i_lin[li].max()) + 1)
    small = _index_type(top)
    pos: np.ndarray = lu.astype(small)[:, None] * small(i_lin.size) + li.astype(small)[None, :]
    src: np.ndarray = u_lin[lu].astype(small)[:, None] + i_lin[li].astype(small)[None, :]
    rows = np.zeros(u_lin.size, bool)
    rows[lu] = bool(li.size) if keep is None else keep.any(axis=1)
    if keep is not None:
        pos, src = pos[keep], src[keep]
    return Gather((u_lin.size, *inner), pos.reshape(-1), src.reshape(-1), rows)


def _index_key(t: Tensor, axes: dict[str, int]) -> tuple:
    return (t.tier, tuple((d, m.raw, tuple(m.axes.items())) for d, m in t.dims.items()),
            tuple(axes.items()))


def compute_stream_index(t: Tensor, axes: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per position ``(units, *inner)`` of a stream (``time, packet``) or a register file's
    tensor (``lane, element`` or ``element``): the linear index into the tensor over
    ``axes`` (C order) and whether the position holds an element (live in every dimension,
    every coordinate inside its axis).  The index is linear in the coordinates, so it is
    summed dimension by dimension, broadcast: the units (chip, cluster, slice) apart from
    the inner dimensions, and the two combined only on the units that hold something (a
    stream on 32 slices of 512 costs its 32); the other units' rows are zeros, held
    nowhere."""
    dims = TIER_DIMS[t.tier]
    strides = axis_strides(axes)
    u_lin, u_held, u_parts = _level(t, dims[:3], strides)
    i_lin, i_held, i_parts = _level(t, dims[3:], strides)
    for a in set(u_parts) | set(i_parts):  # (an axis within one level: checked there)
        if a not in i_parts:
            u_held = u_held & (u_parts[a] < axes[a])
        elif a not in u_parts:
            i_held = i_held & (i_parts[a] < axes[a])
    units = tuple(t.dims[d].size for d in dims[:3])
    u_lin, u_held = (np.broadcast_to(x, units).reshape(-1) for x in (u_lin, u_held))
    inner = tuple(t.dims[d].size for d in dims[3:])
    i_lin, i_held = (np.broadcast_to(x, inner) for x in (i_lin, i_held))
    live = np.flatnonzero(u_held)
    pad = (slice(None),) + (None,) * i_lin.ndim  # (a unit's value over the inner dimensions)
    held_live = np.broadcast_to(i_held[None], (live.size, *i_held.shape))
    for a in set(u_parts) & set(i_parts):  # (an axis over both: checked per position)
        per_unit = np.broadcast_to(u_parts[a], units).reshape(-1)[live][pad]
        held_live = held_live & (per_unit + i_parts[a][None] < axes[a])
    lin = np.zeros((u_lin.size, *i_lin.shape), np.int64)
    held = np.zeros(lin.shape, bool)
    lin[live] = u_lin[live][pad] + i_lin[None]
    held[live] = held_live
    return lin, held


def _level(t: Tensor, dims: tuple[str, ...], strides: dict[str, int]
           ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Over ``dims`` of ``t`` (broadcast, one array dimension each): the linear index's
    part, whether every dimension is live, and each axis's coordinate summed over them."""
    n = len(dims)
    lin = np.zeros([1] * n, np.int64)
    held = np.ones([1] * n, bool)
    parts: dict[str, np.ndarray] = {}
    for k, d in enumerate(dims):
        m = t.dims[d]
        coords, status = m.evaluate()
        shape = [1] * n
        shape[k] = m.size
        own = np.zeros(m.size, np.int64)
        for a, c in coords.items():
            own += c * strides[a]
            c = c.reshape(shape)
            parts[a] = parts[a] + c if a in parts else c
        lin = lin + own.reshape(shape)
        held = held & (status == LIVE).reshape(shape)
    return lin, held, parts


def lay_out(stream: Tensor, T: np.ndarray, axes: dict[str, int],
            index: Gather | None = None) -> np.ndarray:
    """The stream's values holding ``T`` (over ``axes``): zeros where it holds nothing
    (``index``: the stream's :func:`gather`, or the part of it the caller runs on)."""
    g = index if index is not None else gather(stream, axes)
    out = np.zeros(g.shape, T.dtype)
    out.reshape(-1)[g.pos] = T.reshape(-1)[g.src]
    return out


def restrict(g: Gather, units: np.ndarray) -> Gather:
    """``g`` on the units ``units`` only (ascending), numbered from 0 in that order: each
    unit's held positions are one run of ``g.pos`` (ascending), found by bisection; where
    the units kept hold every position (an engine runs on the units holding its input or
    its output), the indexes are ``g``'s own and the positions only shift."""
    if units.size == g.shape[0]:
        return g
    inner = int(np.prod(g.shape[1:], dtype=np.int64))
    units = units.astype(np.int64)
    first = (units * inner).astype(g.pos.dtype)  # (in pos's own type: no wider copy of it)
    lo = np.searchsorted(g.pos, first)
    n = np.searchsorted(g.pos, first + g.pos.dtype.type(inner)) - lo
    shift = np.repeat(((units - np.arange(units.size)) * inner).astype(g.pos.dtype), n)
    shape = (units.size, *g.shape[1:])
    if int(n.sum()) == g.pos.size:
        return Gather(shape, g.pos - shift, g.src, g.rows[units])
    at = np.repeat(lo - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))
    return Gather(shape, g.pos[at] - shift, g.src[at], g.rows[units])


def check_holds(stream: Tensor, values: np.ndarray, T: np.ndarray, axes: dict[str, int],
                what: str, index: Gather | None = None,
                units: np.ndarray | None = None) -> int:
    """Does every position of ``values`` that ``stream`` (or a register file's tensor) says
    holds an element hold ``T``'s, bit for bit?  Returns the positions checked; raises
    ``verify-mismatch`` at the first that does not (its unit and position, the value found
    and the one due; ``index``: the stream's :func:`gather`, or the part of it on
    ``units``: which unit each row of ``values`` is, where they are a few of the
    stream's)."""
    g = index if index is not None else gather(stream, axes)
    if values.shape != g.shape:
        raise TcplanError(Violation("verify-mismatch", (), {"detail": (
            f"{what}: the engine made values of shape {values.shape} (units first), the "
            f"output's mappings have {g.shape}")}))
    got, due = values.reshape(-1)[g.pos], T.reshape(-1)[g.src]
    bits = np.dtype(f"u{T.dtype.itemsize}")
    bad = np.flatnonzero(got.view(bits) != due.view(bits))
    if bad.size:
        where = list(np.unravel_index(int(g.pos[bad[0]]), g.shape))
        if units is not None:
            where[0] = units[where[0]]
        at = ", ".join(f"{d} {int(i)}" for d, i in zip(("unit", *TIER_DIMS[stream.tier][3:]),
                                                       where))
        raise TcplanError(Violation("verify-mismatch", (), {"detail": (
            f"{what}: {at} holds "
            f"{value_text(got[bad[0]:bad[0] + 1], stream.dtype)}, not "
            f"{value_text(due[bad[0]:bad[0] + 1], stream.dtype)} "
            f"({bad.size:,} of {got.size:,} positions differ)")}))
    return int(g.pos.size)


def run_engine(plan: EnginePlan, values: np.ndarray, axes: dict[str, int],
               reference: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, int]:
    """Run the op on its input's ``values`` (over the axes the input carries): (the tensor
    its output holds, over every axis of the op, ``reference`` of the input's copies; the
    positions checked).  ``reference`` is what the op computes over whole tensors (the
    identity for a move such as Collect, the conversion for a Cast), written apart from the
    engine; a switch's broadcast copies each hold the input (constant along the axes the
    output carries and the input does not)."""
    if getattr(plan.engine, "reduces", False):  # (its output drops axes: a reduction)
        return run_reduction(plan, values, axes)
    T, out, kept = _sides(plan, values, axes)
    g_in, g_out = gather(plan.inp, axes), gather(out, axes)
    rows = None
    if len(kept) == len(SPATIAL):  # (every unit keeps its own: run on those holding data,
        rows = np.flatnonzero(g_in.rows | g_out.rows)  # where they are at most half)
        if rows.size * 2 <= g_out.shape[0]:
            g_in, g_out = restrict(g_in, rows), restrict(g_out, rows)
        else:
            rows = None
    flits = plan.engine.run(lay_out(plan.inp, T, axes, g_in), plan.inp, plan.out)
    due = _reference_where_held(reference, T, g_out)
    checked = check_holds(out, flits, due, axes, f"the {plan.engine.name} op's output", g_out,
                          rows)
    return due, checked


def _sides(plan: EnginePlan, values: np.ndarray, axes: dict[str, int]
           ) -> tuple[np.ndarray, Tensor, dict[str, Any]]:
    """The input's copies over every axis of the op (a switch's broadcast copies each hold
    the input), the output stream as the engine lays it, the units it keeps."""
    have = carried_axes(plan.inp, axes)
    copies = [a for a in carried_axes(plan.out, axes) if a not in have]  # (a broadcast's)
    T = constant_along(over_axes(values, have, axes), axes, copies)
    # (where the engine keeps the units, the output's Chip, Cluster or Slice places what the
    # input's does, engine-spatial says: its values are laid over the input's units; a
    # switch's Slice is its own, of the input's size)
    kept = {d: plan.inp.dims[d] for d in SPATIAL
            if same_units(plan.inp.dims[d], plan.out.dims[d])}
    return T, plan.out.with_dims(**kept), kept


def engine_values(plan: EnginePlan, values: np.ndarray, axes: dict[str, int],
                  reference: Callable[[np.ndarray], np.ndarray]) -> np.ndarray | None:
    """What :func:`run_engine` returns, without running the engine or checking it (an op
    whose twin ran checked: graph ``replay``); None for a reduction (its sums are the
    engine's own: it runs)."""
    if getattr(plan.engine, "reduces", False):
        return None
    T, out, _ = _sides(plan, values, axes)
    if reference is identity:  # (a move: nothing to compute, no index needed)
        return T
    return _reference_where_held(reference, T, gather(out, axes))


def run_reduction(plan: EnginePlan, values: np.ndarray, axes: dict[str, int]
                  ) -> tuple[np.ndarray, int]:
    """An Inter-Slice Reducer on its input's ``values`` (over the axes the input carries),
    checked: (the result the engine made, over the axes the output carries; the positions
    checked).  The reference, written apart, reduces the input tensor over the axes the
    output drops, at the values the input holds of them: integers and ``Max`` / ``Min``
    exactly; f32 ``Add`` and ``Mul`` within ``gamma(n)`` of the float64 result (``n`` the
    values folded; the ring's order of addition is the hardware's)."""
    have = carried_axes(plan.inp, axes)
    kept = carried_axes(plan.out, axes)
    T = over_axes(values, have, axes)
    flits = plan.engine.run(lay_out(plan.inp, T, axes), plan.inp, plan.out)
    gone = [k for k, a in enumerate(axes) if a in have and a not in kept]
    held = {k: held_values((plan.inp,), list(axes)[k], list(axes.values())[k]) for k in gone}
    sub = T
    for k in gone:
        sub = np.take(sub, held[k], axis=k)
    op = plan.engine.op  # type: ignore[attr-defined]
    wide = sub.astype(np.float64 if sub.dtype.kind == "f" else np.int64)
    n = int(np.prod([held[k].size for k in gone], dtype=np.int64)) if gone else 1
    reductions: dict[str, Callable[..., Any]] = {
        "Add": np.sum, "AddSat": _saturating_sum, "Mul": np.prod, "Max": np.max,
        "Min": np.min}
    red = reductions[op]
    exact = red(wide, axis=tuple(gone)) if gone else wide
    o_axes = {a: axes[a] for a in kept}
    # (the output on the input's units: engine-spatial held, ``m![1]`` and ``m![1 # 2]``)
    out_t = plan.out.with_dims(chip=plan.inp.dims["chip"], cluster=plan.inp.dims["cluster"])
    lin, live = stream_index(out_t, o_axes)
    got = flits[live]
    due = np.asarray(exact).reshape(-1)[lin[live]]
    if sub.dtype.kind != "f":
        due = np.clip(due, -2 ** 31, 2 ** 31 - 1) if op == "AddSat" else \
            (due + 2 ** 31) % 2 ** 32 - 2 ** 31
        bad = got.astype(np.int64) != due
    elif op in ("Add", "Mul"):
        u = 2.0 ** -24
        tol = n * u / (1 - n * u) * (np.abs(np.asarray(red(np.abs(wide), axis=tuple(gone))
                                                         if gone else wide)).reshape(-1)
                                     [lin[live]])
        bad = ~((np.abs(got.astype(np.float64) - due) <= tol) |
                (np.isnan(got) & np.isnan(due)) | (got == due))
    else:
        bad = got.astype(np.float64) != due
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        raise TcplanError(Violation("verify-mismatch", (), {"detail": (
            f"the inter_slice_reduce op's output: position {at} of the held ones holds "
            f"{got[at]!r}, the reduction over {', '.join(list(axes)[k] for k in gone)} "
            f"gives {due[at]!r} ({int(bad.sum()):,} of {got.size:,} positions off)")}))
    result = np.zeros(tuple(o_axes.values()), flits.dtype)
    result.reshape(-1)[lin[live]] = got
    return result, int(live.sum())


def axis_digits(tensors, a: str) -> list[tuple[int, int]]:
    """The digits ``(lo, radix)`` of axis ``a`` in the tensors' mappings."""
    return sorted({(f.lo, f.radix) for t in tensors for m in t.dims.values()
                   for f in m.factors if f.axis == a})


def held_values(tensors, a: str, size: int) -> np.ndarray:
    """The values of axis ``a`` that the digits the tensors hold of it reach (their sum:
    the whole axis where the digits overlap or cover it)."""
    digits = axis_digits(tensors, a)
    if any(lo * radix > nxt for (lo, radix), (nxt, _) in zip(digits, digits[1:])):
        return np.arange(size)  # (overlapping digits: every value)
    v = np.zeros(1, np.int64)
    for lo, radix in digits:
        v = (v[:, None] + np.arange(radix, dtype=np.int64)[None] * lo).reshape(-1)
    return np.sort(v[v < size])


def _saturating_sum(x: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    """``AddSat`` over ``axis`` in index order (the ring's slice order), each partial sum
    clipped to i32, in int64 arithmetic: saturation depends on the order."""
    x = np.moveaxis(x, axis, tuple(range(len(axis))))
    x = x.reshape((-1,) + x.shape[len(axis):])
    acc = x[0].copy()
    for v in x[1:]:
        acc = np.clip(acc + v, -2 ** 31, 2 ** 31 - 1)
    return acc


def _reference_where_held(reference: Callable[[np.ndarray], np.ndarray], T: np.ndarray,
                          index: Gather) -> np.ndarray:
    """``reference`` of ``T`` at the elements the output holds (zeros elsewhere: no unit
    holds them, no later op reads them): a stream on a few of an axis's values (one slice
    per 16th of a vocabulary) costs what it holds, not the whole tensor."""
    if reference is identity:  # (a move: nothing to compute)
        return T
    mark = np.zeros(T.size, bool)
    mark[index.src] = True
    at = np.flatnonzero(mark)
    if at.size == T.size:
        return reference(T)
    vals = reference(np.ascontiguousarray(T.reshape(-1)[at]))
    due = np.zeros(T.shape, vals.dtype)
    due.reshape(-1)[at] = vals
    return due


# ---- what each op computes, over whole tensors, apart from the engines' own code ---------
def bf16_by_bits(x: np.ndarray) -> np.ndarray:
    """``f32`` to ``bf16`` in integer arithmetic: round the high half to nearest even
    (``(u + 0x7fff + lsb) >> 16``), a subnormal to a zero of its sign, a NaN to ``0x7fc0``
    (furiosa-opt-std float/bf16.rs)."""
    from tcplan.model.numeric import NP_DTYPES
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    sign = u & 0x80000000
    exp, man = u & 0x7F800000, u & 0x007FFFFF
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    out = np.where((exp == 0) & (man != 0), sign >> 16, rounded)
    out = np.where((exp == 0x7F800000) & (man != 0), 0x7FC0, out)
    return out.astype(np.uint16).view(NP_DTYPES["bf16"])


def narrowed(T: np.ndarray, to: str) -> np.ndarray:
    """A Cast's result: ``bf16`` by :func:`bf16_by_bits`; an integer type by its low
    bits, masked and sign-extended here (not numpy's cast)."""
    if to == "bf16":
        return bf16_by_bits(T)
    from tcplan.model.numeric import NP_DTYPES
    dt = NP_DTYPES[to]
    bits = 8 * dt.itemsize
    low = T.astype(np.int64) & ((1 << bits) - 1)
    return np.where(low >= 1 << (bits - 1), low - (1 << bits), low).astype(dt)


def widened(T: np.ndarray, to: str) -> np.ndarray:
    """A Fetch Adapter's widening, by bits: ``bf16`` to ``f32`` is the 16 bits as the high
    half of the word; an integer is sign-extended from its top bit (not numpy's cast)."""
    from tcplan.model.numeric import NP_DTYPES
    bits = 8 * T.dtype.itemsize
    u = np.ascontiguousarray(T).view(f"u{T.dtype.itemsize}").astype(np.int64)
    if to == "f32":  # (from bf16)
        return (u << 16).astype(np.uint32).view(np.float32)
    return np.where(u >= 1 << (bits - 1), u - (1 << bits), u).astype(NP_DTYPES[to])


def identity(T: np.ndarray) -> np.ndarray:
    """A move's reference: what it reads."""
    return T


def relu_by_bits(T: np.ndarray) -> np.ndarray:
    """A fused ReLU on f32 words: a word with its sign bit set becomes +0.0 unless its
    exponent is all ones with a mantissa (a NaN, kept)."""
    u = np.ascontiguousarray(T, np.float32).view(np.uint32)
    nan = ((u >> 23) & 0xFF == 0xFF) & (u & 0x7FFFFF != 0)
    return np.where((u >> 31 == 1) & ~nan, np.uint32(0), u).view(np.float32)


def reference(plan: EnginePlan) -> Callable[[np.ndarray], np.ndarray]:
    """What the op computes over whole tensors: a move holds its input (Collect), a Cast
    narrows each element to its output type, a Fetch Adapter widens it (or narrows f32 to
    bf16)."""
    to, have = plan.out.dtype, plan.inp.dtype
    if getattr(plan.engine, "relu", False):  # (the Commit Adapter's fused ReLU)
        return lambda T: narrowed(relu_by_bits(T), to)
    if to == have:
        return identity
    from tcplan.model import hardware as hw
    if hw.DTYPE_BYTES[to] > hw.DTYPE_BYTES[have]:
        return lambda T: widened(T, to)
    return lambda T: narrowed(T, to)
