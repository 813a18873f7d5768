"""Numeric execution of Intra-Slice Chains (docs/hardware.md section 7 and R13).

Values travel as a (S, T, P) array of 32-bit patterns (S: Chip x Cluster x Slice positions,
T x P: the stream's arrangement); each step reads them as the dtype the model says the stream
carries there.  Integer ops, conversions and IEEE add/sub/mul/div/sqrt/fma are bit-exact;
transcendentals are computed in float64 and rounded once to f32.  :func:`run_chain` returns the
output values with their arrangement; :func:`output_tensor` turns them into the mathematical
tensor by the holding rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tcplan.model import limits
from tcplan.model.mapping import LIVE, ZERO
from tcplan.model.numeric import (BINARY_OPS, NP, UNARY, as_, bits_of, compare, fma32, fp_to_fxp,
                           fxp_to_fp, reduce_lanes, reduce_time)
from tcplan.model.vector import (BINARY_MODES, FAMILY, TERNARY_MODES, Analysis, Arrangement, Guard,
                          Operand, Slot, Step)

from .run import TOP_BYTE, carried_axes

TOP_PATTERN = np.uint32(TOP_BYTE * 0x01010101)  # Top padding lanes: the executor's Top byte


# ---- chain execution ---------------------------------------------------------------------
@dataclass
class Lane:
    """One stream (or one group of a pair) while the chain runs."""

    bits: np.ndarray  # (S, T, P) uint32
    tags: np.ndarray  # (S, T, P) uint8

    def take(self, src: np.ndarray) -> "Lane":
        S = self.bits.shape[0]
        flat = self.bits.reshape(S, -1)
        tflat = self.tags.reshape(S, -1)
        hole = src < 0
        s = np.where(hole, 0, src)
        bits = np.where(hole[None], TOP_PATTERN, flat[:, s])
        tags = np.where(hole[None], 0, tflat[:, s]).astype(np.uint8)
        return Lane(bits.astype(np.uint32), tags)


@dataclass
class ChainResult:
    bits: np.ndarray  # (S, T, P)
    dtype: str
    arrangement: Arrangement
    keep: np.ndarray  # (S, T, P) bool: positions the filter let through


def _place(an: Analysis, X: np.ndarray, arr: Arrangement, rows: np.ndarray) -> np.ndarray:
    """The input stream's values on the live units ``rows``: T at each live position
    (holding rule); padding lanes hold zeros (Zero padding) or the Top pattern."""
    shape = (rows.size, *arr.status.shape)
    bits = np.full(shape, TOP_PATTERN, np.uint32)
    bits[:, arr.status == ZERO] = 0
    cells = np.flatnonzero(arr.live)  # (the positions of a flit holding an element)
    lin = np.zeros((rows.size, cells.size), np.int64)
    stride = 1
    for a in reversed(list(an.chain.axes)):  # (X's linear index, C order)
        size = an.chain.axes[a]
        c = an.spatial[a][rows][:, None] if a in an.spatial else np.zeros((1, 1), np.int64)
        if a in arr.cells:
            c = c + arr.cells[a].reshape(-1)[cells][None]
        lin += np.minimum(c, size - 1) * stride
        stride *= size
    vals = np.asarray(X, NP[an.chain.dtype]).reshape(-1)[lin]
    bits.reshape(rows.size, -1)[:, cells] = bits_of(vals)
    return bits


def vrf_memory(an: Analysis, name: str, V: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The VRF operand's memory on the live units ``rows`` (units, element positions),
    filled by the holding rule from its mathematical tensor V (over the operand's own axes,
    in the problem's order)."""
    t = an.chain.vrf[name]
    el = t.dims["element"]
    ec, es = el.evaluate()
    vaxes = carried_axes(t, an.chain.axes)
    S = rows.size
    idx = []
    for a in vaxes:
        c = an.spatial[a][rows][:, None] if a in an.spatial else np.zeros((S, 1), np.int64)
        c = c + ec.get(a, np.zeros(el.size, np.int64))[None, :]
        idx.append(np.minimum(c, an.chain.axes[a] - 1))
    vals = V[tuple(idx)] if vaxes else np.broadcast_to(V, (S, el.size))
    bits = bits_of(np.asarray(vals, NP[t.dtype])).copy()
    bits[:, es != LIVE] = TOP_PATTERN
    return bits


def run_chain(an: Analysis, X: np.ndarray, vrf: dict[str, np.ndarray]) -> ChainResult:
    """Execute an analysed chain on the input tensor X and the VRF operand tensors, on
    the units holding data (the others' results, read by nothing, are the Top pattern,
    kept nowhere)."""
    arr = an.entry
    rows = np.flatnonzero(an.spatial_status == LIVE)
    S = rows.size
    limits.check(S * arr.T * arr.P, limits.SIM_MAX_ELEMENTS, "the chain's lanes (slices x "
                 "time x packet)", "elements", {"slices": S, "time": arr.T, "packet": arr.P})
    lanes = [Lane(_place(an, X, arr, rows), np.zeros((S, arr.T, arr.P), np.uint8))]
    vrf_mem = {n: vrf_memory(an, n, V, rows) for n, V in vrf.items() if n in an.chain.vrf}
    stash: np.ndarray | None = None
    keep = None
    dtype = an.chain.dtype
    for info in an.infos:
        st: Step = info.step
        k = st.kind
        ctx = _Ctx(dtype, vrf_mem, info, stash)
        if k == "tag":
            lanes[0].tags = _tag(st, as_(lanes[0].bits, dtype))
        elif k == "unzip":
            assert info.split is not None  # (the analysis of an unzip step sets it)
            g0, g1 = info.split
            P = lanes[0].bits.shape[2]
            lanes = [lanes[0].take(g[:, None] * P + np.arange(P)[None, :]) for g in (g0, g1)]
            for ln in lanes:
                ln.tags[:] = 0
        elif k == "stash":
            stash = lanes[0].bits.copy()
        elif k == "reinterpret":
            pass
        elif k in ("fxp_to_fp", "fp_to_fxp"):
            f = fxp_to_fp if k == "fxp_to_fp" else fp_to_fxp
            assert st.int_width is not None  # (a conversion step has its int_width)
            for ln in lanes:
                ln.bits = bits_of(f(as_(ln.bits, dtype), st.int_width))
        elif info.src is not None:  # narrow / widen
            lanes = [ln.take(info.src) for ln in lanes]
            if keep is not None:
                keep = _take_mask(keep, info.src)
        elif k == "reduce":
            ln = lanes[0]
            assert info.groups is not None and st.op is not None  # (analysed reduce step)
            vals = as_(ln.bits, dtype)
            if info.tree > 1:  # (the axis in Packet: a tree within each flit first)
                vals = reduce_lanes(vals, st.op)
            vals = reduce_time(vals, info.groups, st.op, dtype)
            first = np.array([g[0] for g in info.groups])
            bits = bits_of(vals)
            if info.tree > 1:  # (the value in the first lane, the others padding)
                bits = np.concatenate([bits, np.full(bits.shape[:2] + (info.tree - 1,),
                                                     TOP_PATTERN, np.uint32)], axis=2)
            lanes = [Lane(bits, ln.tags[:, first, :])]
        elif k == "filter":
            admit = (st.guard or Guard()).admits(lanes[0].tags)
            keep = admit if keep is None else keep & admit
        elif k in ("final", "inter_slice_reduce"):
            break
        elif k.endswith("_zip"):
            a = as_(lanes[0].bits, dtype)
            b = as_(lanes[1].bits, dtype)
            x, y = {"Mode00": (a, a), "Mode01": (a, b), "Mode10": (b, a),
                    "Mode11": (b, b)}[st.mode or "Mode01"]
            assert st.op is not None  # (a zip step has its op)
            out = BINARY_OPS[(FAMILY[k], dtype)][st.op](x, y)
            lanes = [Lane(bits_of(np.asarray(out, NP[dtype])), lanes[1].tags)]
        elif k == "fp_unary":
            assert st.op is not None  # (a unary step has its op)
            if len(lanes) == 2:
                assert st.groups is not None  # (the analysis requires them when paired)
                flags = st.groups
            else:
                flags = (True,)
            for ln, on in zip(lanes, flags):
                if on:
                    ln.bits = bits_of(UNARY[st.op](as_(ln.bits, dtype)))
        else:  # binary / ternary ops with operands
            if len(lanes) == 2:
                assert st.groups is not None  # (the analysis requires them when paired)
                for ln, arg in zip(lanes, st.groups):
                    if arg is not None:
                        ln.bits = _apply(st, ln, arg, ctx)
            else:
                ln = lanes[0]
                ln.bits = _apply(st, ln, st.operands, ctx)
                if ctx.read_stash:
                    stash = None
        dtype = info.dtype
    out = lanes[0]
    T, P = out.bits.shape[1:]
    units = len(an.spatial_status)
    bits = np.full((units, T, P), TOP_PATTERN, np.uint32)
    bits[rows] = out.bits
    kept = np.zeros((units, T, P), bool)
    kept[rows] = True if keep is None else keep
    return ChainResult(bits, dtype, an.exit, kept)


def _take_mask(mask: np.ndarray, src: np.ndarray) -> np.ndarray:
    S = mask.shape[0]
    flat = mask.reshape(S, -1)
    return np.where(src[None] < 0, False, flat[:, np.where(src < 0, 0, src)])


@dataclass
class _Ctx:
    dtype: str
    vrf: dict[str, np.ndarray]
    info: Any
    stash: np.ndarray | None
    read_stash: bool = False


def _operand_value(op: Operand, ctx: _Ctx, shape: tuple) -> np.ndarray:
    dt = NP[ctx.dtype]
    if op.kind == "const":
        v = op.value
        if ctx.dtype == "i32" or (ctx.info.step.kind == "logic" and isinstance(v, int)):
            # i32 values, and the integer constants of f32 bit operations, are bit patterns
            arr = np.array(int(v) & 0xFFFFFFFF, np.uint32).view(dt)
        else:
            arr = np.array(v, np.float32) if not isinstance(v, int) or isinstance(v, bool) \
                else np.array(float(v), np.float32)
        return np.broadcast_to(arr.astype(dt), shape)
    if op.kind == "stash":
        assert ctx.stash is not None  # (the analysis rejects reading an empty stash)
        ctx.read_stash = True
        return ctx.stash.view(dt)
    assert op.name is not None  # a VRF operand names its tensor
    mem = ctx.vrf[op.name]  # (S, positions)
    idx = ctx.info.vrf_index[op.name]  # (T, P)
    bits = mem[:, np.where(idx < 0, 0, idx)]
    return bits.view(dt)


def _apply(st: Step, ln: Lane, operands, ctx: _Ctx) -> np.ndarray:
    """A binary/ternary op with (possibly branched) operands: each element takes the first
    slot whose guard admits its tag; an element no slot claims passes through."""
    dt = NP[ctx.dtype]
    s = as_(ln.bits, ctx.dtype)
    shape = s.shape
    fam = FAMILY[st.kind]
    if st.kind == "fp_ternary":
        mode3 = TERNARY_MODES[st.mode or "Mode012"]
        o0 = _slot_values(operands[0], ctx, ln, shape) if len(operands) > 0 else None
        o1 = _slot_values(operands[1], ctx, ln, shape) if len(operands) > 1 else None
        pick = {"s": s}  # (the analysis checked the operands the mode reads are given)
        for name, o in (("o0", o0), ("o1", o1)):
            if o is not None:
                pick[name] = o[0]
        a, b, c = (pick[x] for x in mode3)
        mask = np.ones(shape, bool)
        for o in (o0, o1):
            if o is not None:
                mask &= o[1]
        out = fma32(a, b, c)
        return bits_of(np.where(mask, out, s).astype(dt))
    mode = BINARY_MODES[st.mode or "Mode01"]
    assert st.op is not None  # (a step with operands has its op)
    f = BINARY_OPS[(fam, ctx.dtype)][st.op]
    if "o0" not in mode:
        return bits_of(np.asarray(f(s, s), dt))
    vals, claimed = _slot_values(operands[0], ctx, ln, shape)
    a, b = (s if x == "s" else vals for x in mode)
    out = np.asarray(f(a, b), dt)
    return bits_of(np.where(claimed, out, s).astype(dt))


def _slot_values(slots: tuple[Slot, ...], ctx: _Ctx, ln: Lane, shape: tuple
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The operand each element sees (first admitting slot) and which elements are claimed."""
    dt = NP[ctx.dtype]
    vals = np.zeros(shape, dt)
    claimed = np.zeros(shape, bool)
    for sl in slots:
        admit = sl.guard.admits(ln.tags) & ~claimed
        v = _operand_value(sl.operand, ctx, shape)
        vals = np.where(admit, v, vals)
        claimed |= admit
    return vals, claimed


def _tag(st: Step, x: np.ndarray) -> np.ndarray:
    if st.tag[0] == "zero":
        return np.zeros(x.shape, np.uint8)
    tags = np.zeros(x.shape, np.uint8)
    for bit, (op, value) in enumerate(st.tag[1]):
        tags |= (compare(op, value, x).astype(np.uint8) << bit)
    return tags


# ---- results as tensors -------------------------------------------------------------------
def live_coordinates(an: Analysis, arr: Arrangement, axes: list[str],
                     keep: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """The live units (``rows``), which of their positions hold an element (``live``,
    ``(rows, T, P)``; and ``keep`` there, where given) and each of ``axes``' coordinate at
    those positions, in ``live``'s order."""
    rows = np.flatnonzero(an.spatial_status == LIVE)
    live = np.broadcast_to(arr.live[None], (rows.size, *arr.live.shape))
    if keep is not None:
        live = live & keep[rows]
    none = np.zeros((1, 1, 1), np.int64)
    idx = tuple(np.broadcast_to((an.spatial[a][rows][:, None, None] if a in an.spatial
                                 else none)
                                + arr.cells.get(a, np.zeros(arr.status.shape, np.int64))[None],
                                live.shape)[live] for a in axes)
    return rows, live, idx


def output_tensor(an: Analysis, res: ChainResult) -> tuple[np.ndarray, np.ndarray]:
    """The output's mathematical tensor over the kept axes (problem order) and a mask of the
    coordinates some live output position wrote."""
    axes = [a for a in an.chain.axes if a not in an.dropped_axes]
    shape = tuple(an.chain.axes[a] for a in axes)
    rows, live, idx = live_coordinates(an, res.arrangement, axes, res.keep)
    out = np.zeros(shape, NP[res.dtype])
    written = np.zeros(shape, bool)
    vals = as_(res.bits[rows], res.dtype)[live]
    if axes:
        out[tuple(idx)] = vals
        written[tuple(idx)] = True
    elif vals.size:
        out[()] = vals[0]
        written[()] = True
    return out, written

