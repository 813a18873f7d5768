"""The Contraction Engine run on data (model/engines/contraction.py; issue 29, item 4).

:func:`run_stages` runs the four stages on every slice at once, as array operations over
the derived configuration: the Stream Adapter packs and broadcasts the stream's flits, the
TRF Sequencer reads each lane's elements by its index table, the Multiplier widens and
multiplies, the Packet Reducer sums adjacent pairs ``depth`` times, the Time Reducer adds
the summed ``Time`` terms flit after flit into its slots, the Lane Folder reorders
(model/lane.py).  :func:`reference` is what the op computes, written apart: ``numpy.einsum``
of the two operands over the axes they carry, in ``int64`` (wrapped to ``i32``) or
``float64``.  :func:`check` holds the two against each other: integers bit for bit; a float
within the summation bound ``gamma(n) * sum |a * b|`` (``gamma(n) = n u / (1 - n u)``, ``u
= 2^-24``; docs/engines.md): every product of two ``bf16`` or ``f8`` values is exact in
``f32``, so only the ``n - 1`` additions round, in whatever order the hardware adds.
"""

from __future__ import annotations

import numpy as np

from tcplan.model.engines import SPATIAL
from tcplan.model.engines.contraction import ContractionPlan
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import TIER_DIMS, Tensor

from .engines import Gather, axis_digits, check_holds, gather, held_values, lay_out
from .run import value_text

U32 = 2.0 ** -24  # the unit roundoff of f32


def _widen(x: np.ndarray, acc: str) -> np.ndarray:
    return x.astype(np.int64) if acc == "i32" else x.astype(np.float32)


def stream_adapter(plan: ContractionPlan, flits: np.ndarray) -> np.ndarray:
    """``(units, Time, Packet)`` flits to ``(units, 1, OutTime, OutPacket)``: PackSize flits
    side by side, each packet repeated TimeBroadcast times (a view where it can be; the
    lane broadcast is the multiplication's, against the TRF's lanes)."""
    p = plan.packing
    u, t, n = flits.shape
    packed = flits.reshape(u, t // p.pack, 1, p.pack * n)
    tiled = np.broadcast_to(packed, (u, t // p.pack, p.tiling, p.pack * n))
    return tiled.reshape(u, 1, (t // p.pack) * p.tiling, p.pack * n)


def trf_sequencer(plan: ContractionPlan, trf: np.ndarray) -> np.ndarray:
    """``(units, Lane, Element)`` to ``(units, Lane, OutTime, OutPacket)``: each lane's
    element at its index table's position, zero where the product holds nothing."""
    pos, _ = plan.trf_positions()
    e = plan.engine
    L = plan.trf.dims["lane"].size
    pos = pos.reshape(L, e.outer_time.size, e.outer_packet.size)
    padded = np.concatenate([trf, np.zeros((*trf.shape[:2], 1), trf.dtype)], axis=2)
    # (position -1, nothing held, reads the zero appended after each lane's elements)
    return padded[:, np.arange(L)[:, None, None], np.where(pos >= 0, pos, trf.shape[2])]


def packet_reducer(plan: ContractionPlan, x: np.ndarray) -> np.ndarray:
    """Sum adjacent pairs ``depth`` times within each packet; keep OutPacket's elements
    (the outermost padding trimmed, or zeros past a narrower ReducePacket)."""
    for _ in range(plan.depth):
        x = x[..., 0::2] + x[..., 1::2]
    n = plan.engine.packet.size
    if x.shape[-1] >= n:
        return x[..., :n]
    pad = np.zeros((*x.shape[:-1], n - x.shape[-1]), x.dtype)
    return np.concatenate([x, pad], axis=-1)


def time_reducer(plan: ContractionPlan, x: np.ndarray) -> np.ndarray:
    """``(units, Lane, OutTime, P)``: the summed Time terms added flit after flit (in the
    order they arrive) into the slot of the kept ones."""
    terms = plan.engine.outer_time.terms
    u, L, _, P = x.shape
    x = x.reshape(u, L, *(t.size for t in terms), P)
    kept = list(plan.kept)
    gone = [k for k in range(len(terms)) if k not in kept]
    order = [0, 1, *(2 + k for k in kept), *(2 + k for k in gone), 2 + len(terms)]
    x = x.transpose(order)
    K = int(np.prod([terms[k].size for k in kept], dtype=np.int64))
    R = int(np.prod([terms[k].size for k in gone], dtype=np.int64))
    x = x.reshape(u, L, K, R, P)
    acc = x[:, :, :, 0].copy()
    for r in range(1, R):
        acc += x[:, :, :, r]
    return acc


def lane_folder(plan: ContractionPlan, x: np.ndarray) -> np.ndarray:
    """``(units, Lane, Time, Packet)`` to ``(units, OutTime, OutPacket)`` by the fold's
    index map (zeros where it places nothing)."""
    src = plan.folded.src
    flat = x.reshape(x.shape[0], -1)
    got = flat[:, np.maximum(src, 0)]
    return np.where(src >= 0, got, np.zeros((), x.dtype))


def run_stages(plan: ContractionPlan, flits: np.ndarray, trf: np.ndarray) -> np.ndarray:
    """The result stream's values ``(units, Time, Packet)`` of the operands' values."""
    acc = plan.out.dtype
    a = stream_adapter(plan, _widen(flits, acc))
    b = trf_sequencer(plan, _widen(trf, acc))
    x = time_reducer(plan, packet_reducer(plan, a * b))
    out = lane_folder(plan, x)
    return out.astype(np.int32) if acc == "i32" else out


def reference(plan: ContractionPlan, S: np.ndarray, W: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray | None]:
    """``einsum`` of the stream's tensor ``S`` and the TRF's ``W`` (each over the axes it
    carries, in the op's order) into the result's axes: the exact value (``i32`` wrapped,
    or ``float64``) and, for floats, the summation bound per element.  Each operand is
    read as it holds (:func:`operand`), and only at the values of each axis some tensor of
    the op holds (:func:`held_values`): the result is zero elsewhere."""
    axes = plan.axes
    names = {a: chr(ord("a") + i) for i, a in enumerate(axes)}
    s_ax, w_ax, o_ax = (_carried(t, axes) for t in (plan.src, plan.trf, plan.out))
    values = {a: held_values((plan.src, plan.trf, plan.out), a, axes[a])
              for a in set(s_ax) | set(w_ax) | set(o_ax)}
    # (an axis the result carries some digits of while the reducers sum others: a partial
    # sum, over the summed digits' values, at each value of the result's digits)
    parts = _partial_axes(plan, o_ax)
    for a, (kept, summed) in parts.items():
        values[a] = (kept[:, None] + summed[None, :]).reshape(-1)
    s = _split(operand(S, plan.src, axes, values), s_ax, parts)
    w = _split(operand(W, plan.trf, axes, values), w_ax, parts)
    inner = {a: chr(ord("A") + i) for i, a in enumerate(axes)}

    def letters(ax: list[str]) -> str:
        return "".join(names[a] + (inner[a] if a in parts else "") for a in ax)
    spec = f"{letters(s_ax)},{letters(w_ax)}->{''.join(names[a] for a in o_ax)}"
    grid = np.ix_(*(parts[a][0] if a in parts else values[a] for a in o_ax))
    exact = np.zeros([axes[a] for a in o_ax], np.float64 if plan.out.dtype != "i32"
                     else np.int64)
    if plan.out.dtype == "i32":
        exact[grid] = np.einsum(spec, s.astype(np.int64), w.astype(np.int64))
        return ((exact + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32), None
    s64, w64 = s.astype(np.float64), w.astype(np.float64)
    n = max(1, int(np.prod([axes[a] for a in set(s_ax) | set(w_ax) if a not in o_ax]
                           + [parts[a][1].size for a in parts], dtype=np.int64)))
    gamma = n * U32 / (1 - n * U32)
    bound = np.zeros_like(exact)
    exact[grid] = np.einsum(spec, s64, w64)
    bound[grid] = gamma * np.einsum(spec, np.abs(s64), np.abs(w64))
    return exact, bound


def _partial_axes(plan: ContractionPlan, o_ax: list[str]
                  ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per axis the result carries whose other digits the reducers sum: (the values its
    digits in the result reach, the values the summed digits reach)."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for a in {a for a, _, _ in plan.summed_digits()} & set(o_ax):
        size = plan.axes[a]
        kept = held_values((plan.out,), a, size)
        summed = np.zeros(1, np.int64)
        for _, lo, radix in sorted(d for d in plan.summed_digits() if d[0] == a):
            summed = (summed[:, None] + np.arange(radix, dtype=np.int64)[None] * lo
                      ).reshape(-1)
        out[a] = (kept, np.sort(summed))
    return out


def _split(x: np.ndarray, ax: list[str], parts: dict[str, tuple[np.ndarray, np.ndarray]]
           ) -> np.ndarray:
    """An operand read at ``kept x summed`` values of each partial axis, that axis split in
    two (kept, summed)."""
    shape: list[int] = []
    for a, n in zip(ax, x.shape):
        shape += [parts[a][0].size, parts[a][1].size] if a in parts else [n]
    return x.reshape(shape)


def operand(T: np.ndarray, t: Tensor, axes: dict[str, int],
            values: dict[str, np.ndarray]) -> np.ndarray:
    """``T`` (over the axes ``t`` carries) as ``t`` holds it, at ``values`` of each axis:
    along an axis of which ``t`` holds only some digits (a TRF whose Slice holds ``A / 8``
    and no ``A % 8``), the value at the digits it holds, the others 0 (the one operand
    serves every value of the digits it lacks: a broadcast)."""
    kept = _carried(t, axes)
    mine = {a: axis_digits((t,), a) for a in kept}
    index = []
    for a in kept:
        x = values[a]
        index.append(sum(((x // lo) % radix * lo for lo, radix in mine[a]),
                         np.zeros_like(x)))
    return T[np.ix_(*index)] if index else T


def _carried(t, axes: dict[str, int]) -> list[str]:
    used = {a for d in TIER_DIMS[t.tier] for a in t.dims[d].used_axes}
    return [a for a in axes if a in used]


def check(plan: ContractionPlan, out: Tensor, values: np.ndarray, exact: np.ndarray,
          bound: np.ndarray | None, index: Gather | None = None) -> int:
    """Every position the result holds against the reference (over the axes the result
    carries): bit for bit (integers), or within ``bound`` (floats; a non-finite reference
    is matched by class); ``index``: the result's :func:`gather` over its axes, where the
    caller has it."""
    o_axes = {a: plan.axes[a] for a in _carried(plan.out, plan.axes)}
    g = index if index is not None else gather(out, o_axes)
    if bound is None:
        return check_holds(out, values, exact, o_axes, "the contraction's result", g)
    held = values.reshape(-1)[g.pos]
    got = held.astype(np.float64)
    due = exact.reshape(-1)[g.src]
    tol = bound.reshape(-1)[g.src]
    finite = np.isfinite(due)
    ok = np.where(finite, np.abs(got - due) <= tol,
                  (np.isnan(got) & np.isnan(due)) | (got == due))
    bad = np.flatnonzero(~ok)
    if bad.size:
        where = np.unravel_index(int(g.pos[bad[0]]), g.shape)
        at = ", ".join(f"{d} {int(i)}" for d, i in zip(("unit", "time", "packet"), where))
        raise TcplanError(Violation("verify-mismatch", (), {"detail": (
            f"the contraction's result: {at} holds "
            f"{value_text(held[bad[0]:bad[0] + 1], plan.out.dtype)}, not "
            f"{due[bad[0]]!r} within {tol[bad[0]]:.3g} ({bad.size:,} of {got.size:,} "
            "positions off)")}))
    return int(g.pos.size)


def run_contraction(plan: ContractionPlan, S: np.ndarray, W: np.ndarray, check_it: bool = True
                    ) -> tuple[np.ndarray, int]:
    """Run the op on ``S`` (the stream's tensor, over the axes it carries, in the op's
    order) and ``W`` (the TRF's), checked (``check_it``: else not, 0 positions checked,
    for an op whose twin ran checked): (the result the engine made, over the axes the
    result carries; the positions checked)."""
    axes = plan.axes
    s_axes, w_axes, o_axes = ({a: axes[a] for a in _carried(t, axes)}
                              for t in (plan.src, plan.trf, plan.out))
    # (the TRF and the result sit on the stream's units, engine-spatial says: laid over them)
    units = {d: plan.src.dims[d] for d in SPATIAL}
    out_t = plan.out.with_dims(**units)
    flits = lay_out(plan.src, S, s_axes)
    trf = lay_out(plan.trf.with_dims(**units), W, w_axes)
    # (the units the stream holds nothing on compute nothing: run on the others only)
    live = gather(plan.src, s_axes).rows
    ran = run_stages(plan, flits[live], trf[live])
    values = np.zeros((flits.shape[0], *ran.shape[1:]), ran.dtype)
    values[live] = ran
    checked = 0
    g = gather(out_t, o_axes)
    if check_it:
        exact, bound = reference(plan, S, W)
        checked = check(plan, out_t, values, exact, bound, g)
    # (the result is what the engine made, read back from the positions holding it: for
    # floats, the hardware's sums, not the float64 reference)
    result = np.zeros(tuple(o_axes.values()), values.dtype)
    result.reshape(-1)[g.src] = values.reshape(-1)[g.pos]
    return result, checked
