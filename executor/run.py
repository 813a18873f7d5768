"""Functional execution of lowered DMA plans over simulated memories, and verification.

* :func:`tensor_values` makes the mathematical tensor T (one array over the problem's axes, in the
  order of its ``axes`` block) from a seed.
* :func:`place` writes T into a tensor's memory positions (Top padding gets the recognizable
  byte ``0xA5``, Zero padding zeros; Bottom padding addresses become forbidden).
* :func:`execute` runs every engine's commands as loop nests, vectorized and chunked.
* :func:`verify` recomputes, from T and the destination mapping alone (the holding rule), what
  every live destination position must hold, and compares with memory.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from tcplan.model import limits
from tcplan.model.hardware import DTYPE_BYTES as DTYPE_WIDTH
from tcplan.model.broadcast import broadcast_axes
from tcplan.model.mapping import BOTTOM, LIVE, TOP, ZERO
from tcplan.model.numeric import NP_DTYPES, _Dtypes
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import TIER_DIMS, Tensor, dm_address

from . import strided
from .memory import Memories



def bits_dtype(name: str) -> np.dtype:
    """The dtype a tensor that only moves is held in: numpy's own, or for ml_dtypes' types
    the unsigned integer of their width (the same bits)."""
    if name in _Dtypes.ML:
        return np.dtype(f"u{DTYPE_WIDTH[name]}")
    return NP_DTYPES[name]


def value_text(raw: np.ndarray, name: str) -> str:
    """One element's bytes shown as a value of tcplan dtype ``name`` (for messages)."""
    return repr(np.frombuffer(np.ascontiguousarray(raw).tobytes(), NP_DTYPES[name])[0])
TOP_BYTE = 0xA5  # recognizable garbage in Top padding
UNWRITTEN = 0x5A  # what a destination holds before the move
CHUNK = 1 << 22  # elements per vectorized step: bounds the memory of large transfers


def tensor_shape(axes: dict[str, int], what: str = "the tensor T over every axis"
                 ) -> tuple[int, ...]:
    """The shape of an array over every axis, checked against the simulator's limit
    before anything is allocated (rule ``size-limit``)."""
    limits.check(limits.product(axes.values()), limits.SIM_MAX_ELEMENTS, what, "elements",
                 limits.axes_parts(axes))
    return tuple(axes.values())


def check_sizes(problem) -> None:
    """Before simulating a problem: T over every axis, and the positions of every tensor the
    simulator places or reads back (padding included), within the simulator's limits
    (``size-limit``, naming the largest part).  A DMA stream is run as its lowered loops,
    never walked position by position."""
    tensor_shape(problem.axes)
    for name, t in problem.tensors.items():
        if t.tier != "stream":
            check_positions(t, name)


def check_positions(t: Tensor, name: str | None = None) -> None:
    n = limits.product(m.size for m in t.dims.values())
    if n > limits.SIM_MAX_POSITIONS:
        raise limits.size_error(n, limits.SIM_MAX_POSITIONS, f"{name or t.name} ({t.tier})",
                                "positions", {f"{d} {m.text()}": m.size
                                              for d, m in t.dims.items()})


def axis_strides(axes: dict[str, int]) -> dict[str, int]:
    """Each axis's stride in T's linear index (T over every axis, in the axes block's
    order, the last axis fastest)."""
    out, s = {}, 1
    for a in reversed(list(axes)):
        out[a] = s
        s *= axes[a]
    return out


def tensor_values(axes: dict[str, int], dtype: str, seed: int) -> np.ndarray:
    """The mathematical tensor T: deterministic random values from ``seed``."""
    rng = np.random.default_rng(seed)
    shape = tensor_shape(axes)
    dt = NP_DTYPES[dtype]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt)
    vals = rng.standard_normal(size=shape, dtype=np.float32) * 4
    return vals.astype(dt)


#: for float types, the top exponent bit cleared: every bit pattern left is finite
FINITE_MASK = {"f32": 0xBFFFFFFF, "bf16": 0xBFFF, "f16": 0xBFFF, "f8e4m3": 0xBF,
               "f8e5m2": 0xBF}


def tensor_bits(axes: dict[str, int], dtype: str, seed: int) -> np.ndarray:
    """A tensor T for moves, where only the bytes matter: uniformly random bit patterns from
    ``seed`` (finite for float types), generated as integers (several times faster than
    :func:`tensor_values`' normal draws: a 1 GiB tensor in about a second)."""
    rng = np.random.default_rng(seed)
    shape = tensor_shape(axes)
    dt = bits_dtype(dtype)
    u = np.dtype(f"u{dt.itemsize}")
    bits = rng.integers(0, np.iinfo(u).max, size=shape, dtype=u, endpoint=True)
    if dtype in FINITE_MASK:
        bits &= u.type(FINITE_MASK[dtype])
    return bits.view(dt)


def positions(t: Tensor, axes: dict[str, int]) -> Iterator[tuple[int, np.ndarray, np.ndarray,
                                                                   np.ndarray]]:
    """Every position of a tensor in chunks: (chip, byte address, linear index into T,
    status).  An index past an axis is Top padding (docs/decisions.md item 21)."""
    check_positions(t)
    dims = TIER_DIMS[t.tier]
    units = [d for d in dims if d != "element"]
    evals = {d: t.dims[d].evaluate() for d in units}
    el = t.dims["element"]
    strides: dict[str, int] = {}
    s = 1
    for a in reversed(list(axes)):
        strides[a] = s
        s *= axes[a]
    for combo in np.ndindex(*[t.dims[d].size for d in units]):
        pos = dict(zip(units, combo))
        ustat = LIVE
        ucoord: dict[str, int] = {}
        for d, p in pos.items():
            coords, st = evals[d]
            if st[p] != LIVE and ustat == LIVE:
                ustat = int(st[p])
            for a, cu in coords.items():
                ucoord[a] = ucoord.get(a, 0) + int(cu[p])
        for start in range(0, el.size, CHUNK):
            e = np.arange(start, min(el.size, start + CHUNK), dtype=np.int64)
            coords, st = el.evaluate(e)
            status = st.astype(np.int64)
            if ustat != LIVE:
                status[:] = ustat
            lin = np.zeros(e.size, np.int64)
            for a, size in axes.items():
                c = coords.get(a, 0) + ucoord.get(a, 0)
                if isinstance(c, np.ndarray):
                    past = (c >= size) & (status == LIVE)
                    status[past] = TOP
                    c = np.where(past, 0, c)
                elif c >= size:
                    status[status == LIVE] = TOP
                    c = 0
                lin += c * strides[a]
            off = t.address + e * t.elem_bytes
            if t.tier == "dm":  # (the unit's base address, plus the offsets)
                addr = dm_address(pos["cluster"], pos["slice"], 0) + off
            else:
                addr = off
            yield pos.get("chip", 0), addr, lin, status


def _boxed(t: Tensor, axes: dict[str, int]):
    """(units, box) of a tensor the strided views cover, else None (executor/strided.py)."""
    got = strided.units(t, axes)
    if got is None or any(u.status not in (LIVE, TOP) for u in got[0]):
        return None
    box = strided.element_box(t, axes, got[1])
    return None if box is None else (got[0], box)


#: the views of one unit at a time (the path before issue 32), kept as the reference the
#: whole-tensor views are tested and measured against (benchmarks/bench_verify.py)
PER_UNIT = False


def _whole(t: Tensor, axes: dict[str, int]) -> strided.Whole | None:
    return None if PER_UNIT else strided.whole(t, axes)


def _whole_views(mem: Memories, t: Tensor, w: strided.Whole, chip: int, counts: bool = False
                 ) -> np.ndarray | None:
    return strided.view(mem.space(t.tier, chip), t.address, w.box.shape, w.box.mem,
                        t.elem_bytes, counts)


def _place_whole(mem: Memories, t: Tensor, axes: dict[str, int], T: np.ndarray | None
                 ) -> bool:
    """:func:`place` through one strided view per chip spanning every unit (issue 32);
    False where it does not apply (nothing is written then)."""
    w = _whole(t, axes)
    if w is None:
        return False
    views = [_whole_views(mem, t, w, chip) for chip, _, _ in w.chips]
    if any(v is None for v in views):
        return False
    eb = t.elem_bytes
    for (chip, offset, status), v in zip(w.chips, views):
        assert v is not None
        if status == TOP or w.box.padded:
            _fill(v, TOP_BYTE)
        if status == TOP:
            continue
        lv = strided.live(v, w.box)
        if T is None:  # a destination: unwritten, its write counters at zero (every
            _fill(lv, UNWRITTEN)  # unit's: an earlier launch may have written its bytes)
            counts = _whole_views(mem, t, w, chip, counts=True)
            assert counts is not None  # (the counters' view is v's, over the write counts)
            _fill(counts, 0)
            continue
        for d, s_ in strided.pieces(lv, strided.t_view(T, offset, w.box, eb)):
            np.copyto(d, s_)
    return True


def _verify_whole(mem: Memories, dst: Tensor, axes: dict[str, int], T: np.ndarray,
                  moved: int | None) -> dict | None:
    """:func:`verify` through one strided view per chip spanning every unit (issue 32);
    None where it does not apply or anything is wrong (the index path says where)."""
    w = _whole(dst, axes)
    if w is None:
        return None
    eb = dst.elem_bytes
    checked = landed = 0
    for chip, offset, status in w.chips:
        v = _whole_views(mem, dst, w, chip)
        if v is None:
            return None
        if moved is not None:
            cv = _whole_views(mem, dst, w, chip, counts=True)
            assert cv is not None  # (the counters' view is v's, over the write counts)
            counts = cv[..., 0]  # (an element's first byte)
            for (c,) in strided.pieces(counts):
                landed += int(c.sum(dtype=np.int64))
            if status == LIVE and any(c.max(initial=0) > 1 for (c,) in
                                      strided.pieces(strided.live(counts, w.box))):
                return None
        if status == TOP:
            continue
        for g, want in strided.pieces(strided.live(v, w.box),
                                      strided.t_view(T, offset, w.box, eb)):
            if not np.array_equal(g, want):
                return None
        checked += strided.size(w.box)
    if moved is not None and landed != moved:
        return None
    return {"checked": checked}


def _read_whole(mem_or_space, t: Tensor, axes: dict[str, int], out: np.ndarray) -> bool:
    w = _whole(t, axes)
    if w is None:
        return False
    for chip, offset, status in w.chips:
        if status != LIVE:
            continue
        space = (mem_or_space.space(t.tier, chip) if isinstance(mem_or_space, Memories)
                 else mem_or_space)
        v = strided.view(space, t.address, w.box.shape, w.box.mem, t.elem_bytes)
        if v is None:
            return False
        dst = strided.t_view(out, offset, w.box, t.elem_bytes, writeable=True)
        for d, s_ in strided.pieces(dst, strided.live(v, w.box)):
            np.copyto(d, s_)
    return True


def _place_fast(mem: Memories, t: Tensor, axes: dict[str, int], T: np.ndarray | None
                ) -> bool:
    """:func:`place` through strided views, unit by unit; False where they do not apply."""
    got = _boxed(t, axes)
    if got is None:
        return False
    units, box = got
    eb = t.elem_bytes
    for u in units:
        v = strided.view(mem.space(t.tier, u.chip), u.address, box.shape, box.mem, eb)
        if v is None:
            return False  # (what was written is written again by the index path)
        if u.status == TOP or box.padded:
            _fill(v, TOP_BYTE)
        if u.status == TOP:
            if T is None:  # (its counters too: an earlier launch may have written there)
                counts = strided.view(mem.space(t.tier, u.chip), u.address, box.shape,
                                      box.mem, eb, counts=True)
                assert counts is not None  # (v's view, over the write counts)
                _fill(counts, 0)
            continue
        lv = strided.live(v, box)
        if T is None:  # a destination: unwritten, its write counters at zero (and mapped)
            _fill(lv, UNWRITTEN)
            counts = strided.view(mem.space(t.tier, u.chip), u.address, box.shape, box.mem,
                                  eb, counts=True)
            assert counts is not None  # (the counters' view is v's, over the write counts)
            _fill(counts, 0)
            continue
        for d, s_ in strided.pieces(lv, strided.t_view(T, u.offset, box, eb)):
            np.copyto(d, s_)
    return True


def _fill(v: np.ndarray, byte: int) -> None:
    for (c,) in strided.pieces(v):
        c[...] = byte


def place(mem: Memories | None, t: Tensor, axes: dict[str, int], T: np.ndarray | None
          ) -> None:
    """Fill a tensor's positions: T at live ones (or the unwritten pattern when ``T`` is
    None), 0xA5 in Top padding, zeros in Zero padding; Bottom padding becomes forbidden.
    Placing counts no writes.  Through strided views where they apply (one spanning every
    unit, else one per unit), else position by position in chunks.  ``mem`` None: a run
    of values only (executor/graph.py ``run_graph(memory=False)``), nothing to fill."""
    if mem is None:
        return
    if _place_whole(mem, t, axes, T) or _place_fast(mem, t, axes, T):
        return
    eb = t.elem_bytes
    flat = T.reshape(-1).view(np.uint8).reshape(-1, eb) if T is not None else None
    bottoms: dict[int, list[np.ndarray]] = {}
    for chip, addr, lin, status in positions(t, axes):
        space = mem.space(t.tier, chip)
        if T is None:  # a destination's write counters at zero (an earlier launch's)
            space.writes[space.physical(addr)[:, None] + np.arange(eb)] = 0
        live = status == LIVE
        if live.any():
            vals = (flat[lin[live]] if flat is not None else
                    np.full((int(live.sum()), eb), UNWRITTEN, np.uint8))
            space.write(addr[live], vals, count=False)
        for kind, byte in ((TOP, TOP_BYTE), (ZERO, 0)):
            m = status == kind
            if m.any():
                space.write(addr[m], np.full((int(m.sum()), eb), byte, np.uint8),
                            count=False)
        b = status == BOTTOM
        if b.any():
            phys = space.physical(addr[b])
            bottoms.setdefault(chip, []).append(
                (phys[:, None] + np.arange(eb)).ravel())
    for chip, parts in bottoms.items():
        mem.space(t.tier, chip).forbid(np.concatenate(parts))


def clear_bottom(mem: Memories, t: Tensor, axes: dict[str, int]) -> None:
    """A dead tensor's Bottom-padding bytes no longer forbidden: a tensor of a later launch
    may own them (docs/decisions.md item 130)."""
    if not any("#{!}" in m.text() for m in t.dims.values()):
        return
    eb = t.elem_bytes
    for chip, addr, _, status in positions(t, axes):
        b = status == BOTTOM
        if b.any():
            space = mem.space(t.tier, chip)
            if space.bottom is not None:
                phys = space.physical(addr[b])
                space.bottom[(phys[:, None] + np.arange(eb)).ravel()] = 0


def execute(mem: Memories, plan, progress: Callable | None = None) -> int:
    """Run every command of a DmaPlan; returns the number of elements moved.  ``progress``
    (planner/progress.py) hears ``("execute", commands run, commands)``."""
    eb = plan.elem_bytes
    src, dst = plan.source, plan.destination
    moved = ran = 0
    total = sum(len(e.commands) for e in plan.engines)
    for e in plan.engines:
        rs = mem.space(src.tier, e.read_chip)
        ws = mem.space(dst.tier, e.write_chip)
        for c in e.commands:
            if strided.copy_command(rs, ws, c.entries, c.read_base, c.write_base, eb):
                moved += limits.product(n for n, _, _ in c.entries)
            else:
                for raddr, waddr in _addresses(c.entries, c.read_base, c.write_base, eb):
                    ws.write(waddr, rs.read(raddr, eb))
                    moved += raddr.size
            ran += 1
            if progress is not None:
                progress("execute", ran, total, "")
    return moved


def _addresses(entries, rbase: int, wbase: int, eb: int) -> Iterator[tuple[np.ndarray,
                                                                         np.ndarray]]:
    """The loop nest, outermost entries iterated, innermost vectorized (chunked)."""
    inner = 1
    split = len(entries)
    while split > 0 and inner * entries[split - 1][0] <= CHUNK:
        split -= 1
        inner *= entries[split][0]
    r_off = np.zeros(1, np.int64)
    w_off = np.zeros(1, np.int64)
    for n, r, w in entries[split:]:
        k = np.arange(n, dtype=np.int64)
        r_off = (r_off[:, None] + k * r * eb).ravel()
        w_off = (w_off[:, None] + k * w * eb).ravel()
    outer = entries[:split]
    for combo in np.ndindex(*[n for n, _, _ in outer]) if outer else [()]:
        rb = rbase + sum(i * r * eb for i, (_, r, _) in zip(combo, outer))
        wb = wbase + sum(i * w * eb for i, (_, _, w) in zip(combo, outer))
        yield rb + r_off, wb + w_off


def _verify_fast(mem: Memories, dst: Tensor, axes: dict[str, int], T: np.ndarray,
                 moved: int | None, progress: Callable | None = None) -> dict | None:
    """:func:`verify` through strided views: the destination's live box against T's, unit
    by unit, chunk by chunk.  None where the views do not apply, or where anything is
    wrong (the index path then finds it and says where)."""
    got = _boxed(dst, axes)
    if got is None:
        return None
    units, box = got
    eb = dst.elem_bytes
    checked = landed = 0
    per_unit, total = dst.dims["element"].size, _positions_of(dst)
    for k, u in enumerate(units):
        if progress is not None and k:
            progress("verify", k * per_unit, total, "")
        space = mem.space(dst.tier, u.chip)
        v = strided.view(space, u.address, box.shape, box.mem, eb)
        if v is None:
            return None
        if moved is not None:
            cv = strided.view(space, u.address, box.shape, box.mem, eb, counts=True)
            assert cv is not None  # (the counters' view is v's, over the write counts)
            counts = cv[..., 0]  # (an element's first byte)
            for (c,) in strided.pieces(counts):
                landed += int(c.sum(dtype=np.int64))
            if u.status == LIVE and any(c.max(initial=0) > 1 for (c,) in
                                        strided.pieces(strided.live(counts, box))):
                return None
        if u.status == TOP:
            continue
        for g, w in strided.pieces(strided.live(v, box), strided.t_view(T, u.offset, box, eb)):
            if not np.array_equal(g, w):
                return None
        checked += strided.size(box)
    if moved is not None and landed != moved:
        return None
    if progress is not None:
        progress("verify", total, total, "")
    return {"checked": checked}


def _positions_of(t: Tensor) -> int:
    return limits.product(m.size for m in t.dims.values())


def verify(mem: Memories, dst: Tensor, axes: dict[str, int], T: np.ndarray,
           moved: int | None = None, progress: Callable | None = None) -> dict:
    """Compare every live destination position with T at its index (the holding rule); Zero
    padding must still hold zeros; with ``moved``, every write must have landed on the
    destination and every live slot exactly once.  Through strided views where they apply;
    the index path (position by position, in chunks) finds and names any mismatch.
    ``progress`` (planner/progress.py) hears ``("verify", positions checked, positions)``."""
    fast = None if PER_UNIT else _verify_whole(mem, dst, axes, T, moved)
    if fast is not None and progress is not None:
        progress("verify", _positions_of(dst), _positions_of(dst), "")
    if fast is None:
        fast = _verify_fast(mem, dst, axes, T, moved, progress)
    if fast is not None:
        return fast
    eb = dst.elem_bytes
    flat = T.reshape(-1).view(np.uint8).reshape(-1, eb)
    checked = landed = seen = 0
    total = _positions_of(dst)
    for chip, addr, lin, status in positions(dst, axes):
        if progress is not None:
            progress("verify", seen, total, "")
            seen += addr.size
        space = mem.space(dst.tier, chip)
        zero = status == ZERO
        if zero.any():
            z = space.read(addr[zero], eb)
            if z.any():
                k = int(np.flatnonzero(z.any(axis=1))[0])
                raise TcplanError(Violation("verify-mismatch", (), {"detail": (
                    f"Zero padding (#{{0}}) at chip {chip} address {int(addr[zero][k]):,} "
                    f"holds {z[k].tolist()} after the move")}))
        if moved is not None:
            counts = space.writes[space.physical(addr)]
            landed += int(counts.sum())
            twice = (status == LIVE) & (counts > 1)
            if twice.any():
                raise TcplanError(Violation("verify-mismatch", (), {"detail": (
                    f"destination slot at chip {chip} address {int(addr[twice][0]):,} was "
                    f"written {int(counts[twice][0])} times")}))
        live = status == LIVE
        if not live.any():
            continue
        _holds(mem.space(dst.tier, chip), chip, addr[live], lin[live], flat, axes, dst.dtype)
        checked += int(live.sum())
    if moved is not None and landed != moved:
        raise TcplanError(Violation("verify-mismatch", (), {"detail": (
            f"{moved - landed:,} of {moved:,} moved elements were written outside the "
            f"destination")}))
    if progress is not None:
        progress("verify", total, total, "")
    return {"checked": checked}


def _holds(space, chip: int, addr: np.ndarray, lin: np.ndarray, flat: np.ndarray,
           axes: dict[str, int], dtype: str, note: str = "") -> None:
    """The holding rule at live positions: the bytes at ``addr`` equal T's element ``lin``
    (``flat``: T as rows of bytes); else ``verify-mismatch`` naming the first that does
    not, its index, address and both values (as values of tcplan dtype ``dtype``)."""
    got = space.read(addr, flat.shape[1])
    want = flat[lin]
    bad = (got != want).any(axis=1)
    if not bad.any():
        return
    k = int(np.flatnonzero(bad)[0])
    index = dict(zip(axes, np.unravel_index(int(lin[k]), tuple(axes.values()))))
    raise TcplanError(Violation("verify-mismatch", (), {"detail": (
        f"destination index {', '.join(f'{a}={int(v)}' for a, v in index.items())} "
        f"at chip {chip} address {int(addr[k]):,} holds {value_text(got[k], dtype)}, "
        f"expected {value_text(want[k], dtype)}"
        + (" (never written)" if (got[k] == UNWRITTEN).all() else "") + note)}))


def extents(tensors: list[Tensor]) -> dict[str, tuple[int, int]]:
    """The byte range of HBM / host memory the tensors reach (for the memories' sizes)."""
    out: dict[str, tuple[int, int]] = {}
    for t in tensors:
        if t.tier in ("hbm", "host"):
            lo, hi = t.address, t.address + t.dims["element"].size * t.elem_bytes
            a, b = out.get(t.tier, (lo, hi))
            out[t.tier] = (min(a, lo), max(b, hi))
    return out


SAMPLE_POSITIONS = limits.SAMPLE_POSITIONS  # (model/limits.py)


def run_dma(problem, plan, seed: int = 0, check: str = "full",
            progress: Callable | None = None) -> dict:
    """Place the source, execute the plan, verify the destination: every position
    (``check="full"``), a seeded random sample of :data:`SAMPLE_POSITIONS` of them
    (``"sample"``, :func:`verify_sample`), or nothing at all, not even the run (``"none"``)."""
    if check == "none":
        return {"checked": 0, "moved": 0, "check": "none", "execute_s": 0.0,
                "verify_s": 0.0}
    import time
    t0 = time.perf_counter()
    dst = plan.destination
    T = constant_along(tensor_bits(problem.axes, plan.source.dtype, seed), problem.axes,
                       broadcast_axes(plan.source, dst))
    mem, moved = simulate(plan, problem.axes, T, progress)
    t1 = time.perf_counter()
    if check == "sample":
        result = verify_sample(mem, dst, problem.axes, T, SAMPLE_POSITIONS, seed)
    else:
        result = verify(mem, dst, problem.axes, T, moved, progress)
    result["moved"] = moved
    result["check"] = check
    result["execute_s"] = t1 - t0  # placing the tensors and running the commands
    result["verify_s"] = time.perf_counter() - t1
    result["allocated_bytes"] = mem.allocated_bytes
    return result


def constant_along(T: np.ndarray, axes: dict[str, int], names: list[str]) -> np.ndarray:
    """T made constant along the axes ``names`` (a broadcast's copies, model/broadcast.py):
    every value along them is the value at 0, so every copy holds the source."""
    if not names:
        return T
    first = T[tuple(slice(0, 1) if a in names else slice(None) for a in axes)]
    return np.ascontiguousarray(np.broadcast_to(first, T.shape))


def over_axes(values: np.ndarray, have: list[str], want: dict[str, int]) -> np.ndarray:
    """A mathematical tensor over the axes ``have`` as one over ``want`` (which holds them
    all, in the same order): repeated along every axis it lacks (a broadcast's copies)."""
    if list(want) == list(have):
        return values
    shape = tuple(want[a] if a in have else 1 for a in want)
    # one copy here, not one per check (a flat view of a broadcast array copies it)
    return np.ascontiguousarray(np.broadcast_to(values.reshape(shape), tuple(want.values())))


def held_by(values: np.ndarray, src: Tensor, dst: Tensor, axes: dict[str, int]) -> np.ndarray:
    """What ``dst`` holds once it takes ``src``'s ``values`` (a mathematical tensor over the
    axes ``src`` carries): those values over every axis of the problem, the same in each of
    the copies ``dst`` repeats (a broadcast, model/broadcast.py)."""
    return constant_along(over_axes(values, carried_axes(src, axes), axes), axes,
                          broadcast_axes(src, dst))


def simulate(plan, axes: dict[str, int], T: np.ndarray, progress: Callable | None = None
             ) -> tuple[Memories, int]:
    """A plan's memories after its run: the source placed holding ``T``, the destination
    placed unwritten (placing counts no writes), every command executed; and the elements
    moved."""
    src, dst = plan.source, plan.destination
    mem = Memories(extents([src, dst]))
    place(mem, src, axes, T)
    place(mem, dst, axes, None)
    return mem, execute(mem, plan, progress)


def verify_sample(mem: Memories, dst: Tensor, axes: dict[str, int], T: np.ndarray, n: int,
                  seed: int) -> dict:
    """The holding rule at ``n`` positions of the destination drawn at random from
    ``seed`` (each evaluated through its mappings, one by one as the reference does):
    every live one must hold T at its index.  Padding and write counts are not looked at
    (``verify`` does that)."""
    rng = np.random.default_rng(seed)
    dims = [d for d in TIER_DIMS[dst.tier] if d != "element"]
    el = dst.dims["element"]
    units = limits.product(dst.dims[d].size for d in dims)
    total = units * el.size
    k = min(n, total)
    flat = (rng.choice(total, size=k, replace=False) if total <= 1 << 24
            else rng.integers(0, total, size=k))
    unit, e = np.divmod(flat, el.size)
    coords, status = el.evaluate(e)
    coord = {a: np.asarray(c, np.int64) for a, c in coords.items()}
    status = status.astype(np.int64)
    pos = dict(zip(dims, np.unravel_index(unit, [dst.dims[d].size for d in dims]))) \
        if dims else {}
    for d, p in pos.items():
        dcoords, st = dst.dims[d].evaluate(p)
        status = np.where(status == LIVE, st, status)
        for a, v in dcoords.items():
            coord[a] = coord.get(a, 0) + v
    lin = np.zeros(k, np.int64)
    stride = 1
    for a in reversed(list(axes)):
        c = coord.get(a, np.zeros(k, np.int64))
        status = np.where((status == LIVE) & (c >= axes[a]), TOP, status)
        lin += np.where(c < axes[a], c, 0) * stride
        stride *= axes[a]
    live = status == LIVE
    eb = dst.elem_bytes
    off = dst.address + e * eb
    addr = (np.array([dm_address(int(c), int(s), 0) for c, s in
                      zip(pos["cluster"], pos["slice"])], np.int64) + off
            if dst.tier == "dm" else off)
    chips = pos.get("chip", np.zeros(k, np.int64))
    flat_T = T.reshape(-1).view(np.uint8).reshape(-1, eb)
    checked = 0
    for chip in np.unique(chips[live]).tolist():
        at = live & (chips == chip)
        _holds(mem.space(dst.tier, chip), chip, addr[at], lin[at], flat_T, axes, dst.dtype,
               " (a sampled position)")
        checked += int(at.sum())
    return {"checked": checked, "sampled": k}




def carried_axes(t: Tensor, axes: dict[str, int]) -> list[str]:
    """The axes a tensor carries, in the order of the problem's axes block."""
    used = {a for m in t.dims.values() for a in m.used_axes}
    return [a for a in axes if a in used]


def run_with_data(problem, plan, inputs: dict[str, np.ndarray], seed: int = 0
                  ) -> dict[str, np.ndarray]:
    """Run a DMA/PCIe problem on the user's source tensor; return source and destination.

    Arrays are mathematical tensors: one dimension per axis the tensor carries, in the order
    of the problem's axes block.  A source not given is filled by ``seed``."""
    src, dst = plan.source, plan.destination
    axes = problem.axes
    T = embed(inputs.get("source"), src, axes, "source", seed)
    mem = Memories(extents([src, dst]))
    place(mem, src, axes, T)
    place(mem, dst, axes, None)
    execute(mem, plan)
    return {"source": read_tensor_from(T, src, axes),
            "destination": read_tensor(mem, dst, axes, T.dtype)}


def _read_fast(mem_or_space, t: Tensor, axes: dict[str, int], out: np.ndarray) -> bool:
    got = _boxed(t, axes)
    if got is None:
        return False
    units, box = got
    eb = t.elem_bytes
    for u in units:
        if u.status != LIVE:
            continue
        space = (mem_or_space.space(t.tier, u.chip) if isinstance(mem_or_space, Memories)
                 else mem_or_space)
        v = strided.view(space, u.address, box.shape, box.mem, eb)
        if v is None:
            return False
        dst = strided.t_view(out, u.offset, box, eb, writeable=True)
        for d, s_ in strided.pieces(dst, strided.live(v, box)):
            np.copyto(d, s_)
    return True


def read_tensor(mem_or_space, t: Tensor, axes: dict[str, int], dtype) -> np.ndarray:
    """The mathematical tensor a placed tensor holds, over the axes it carries."""
    out = np.zeros(tensor_shape(axes, f"{t.name} read back over every axis"), dtype)
    kept = carried_axes(t, axes)
    if _read_whole(mem_or_space, t, axes, out) or _read_fast(mem_or_space, t, axes, out):
        return out[tuple(slice(None) if a in kept else 0 for a in axes)]
    flat = out.reshape(-1)
    eb = t.elem_bytes
    for chip, addr, lin, status in positions(t, axes):
        live = status == LIVE
        if live.any():
            space = (mem_or_space.space(t.tier, chip) if isinstance(mem_or_space, Memories)
                     else mem_or_space)
            flat[lin[live]] = space.read(addr[live], eb).reshape(-1).view(dtype)
    return out[tuple(slice(None) if a in kept else 0 for a in axes)]


#: dtypes numpy knows only through ml_dtypes: a .npy file names them (``descr``) by name
ML_DTYPES = {"bf16", "f8e4m3", "f8e5m2"}


def as_dtype(given: np.ndarray, dtype: str, name: str) -> np.ndarray:
    """A user's array as tcplan's ``dtype``: as it is when it has that dtype; viewed as it
    when it is its bit patterns of the same width: numpy's void (``V2``, what ``np.save``
    writes for an ml_dtypes array) or, for bf16 and fp8, unsigned integers (``uint16``,
    ``uint8``).  Anything else is a bad request naming the dtype to save."""
    dt = NP_DTYPES[dtype]
    if given.dtype == dt:
        return given
    bits = given.dtype.kind == "V" or (dtype in ML_DTYPES and given.dtype.kind == "u")
    if bits and given.dtype.itemsize == dt.itemsize and not given.dtype.fields:
        return given.view(dt)
    extra = (f" (or its bit patterns as uint{8 * dt.itemsize})" if dtype in ML_DTYPES
             else "")
    raise TcplanError(Violation("bad-request", (), {
        "detail": f"--input {name}: expected dtype {dt}{extra}, got {dtype_text(given)}",
        "fix": (f"save it with numpy.save after import ml_dtypes, as "
                f"ml_dtypes.{dt.name}" if dtype in ML_DTYPES
                else f"save it as {dt} (numpy .astype)")}))


def dtype_text(a: np.ndarray) -> str:
    """An array's dtype as a user reads it: its name, or for numpy's void (``|V2``, what
    ``numpy.save`` writes for an ml_dtypes array) its width and what it may hold."""
    if a.dtype.kind == "V" and not a.dtype.fields:
        n = a.dtype.itemsize
        held = {1: ", as numpy.save writes an fp8 type", 2: ", as numpy.save writes bfloat16"}
        return f"{n}-byte raw values (numpy's void{held.get(n, '')})"
    return a.dtype.name


def embed(given: np.ndarray | None, t: Tensor, axes: dict[str, int], name: str,
          seed: int) -> np.ndarray:
    """A user's tensor (over the axes ``t`` carries) as T over all axes; seeded if None."""
    if given is None:
        return tensor_values(axes, t.dtype, seed)
    kept = carried_axes(t, axes)
    want = tuple(axes[a] for a in kept)
    dt = NP_DTYPES[t.dtype]
    if given.shape != want:
        raise TcplanError(Violation("bad-request", (), {
            "detail": f"--input {name}: expected an array of shape {want} ({', '.join(kept)}) "
                      f"and dtype {dt}, got shape {given.shape}, dtype {dtype_text(given)}",
            "fix": "save the tensor with numpy.save in that shape and dtype"}))
    given = as_dtype(given, t.dtype, name)
    T = np.zeros(tensor_shape(axes, f"--input {name} over every axis"), dt)
    T[tuple(slice(None) if a in kept else 0 for a in axes)] = given
    return T


def read_tensor_from(T: np.ndarray, t: Tensor, axes: dict[str, int]) -> np.ndarray:
    """T restricted to the axes ``t`` carries (what the user gave, or what the seed made)."""
    kept = carried_axes(t, axes)
    return T[tuple(slice(None) if a in kept else 0 for a in axes)]
