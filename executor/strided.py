"""Strided views: the executor's fast path (issue 16).

A DMA command is an affine loop nest (at most 8 entries, each ``positions x stride``), so its
read side and its write side are each one numpy view over the simulated memory, and the move
is one copy between them.  A tensor's Element is a product of digit factors, each adding
``lo x digit`` to one axis, so over one unit (chip, cluster, slice) its live positions and
the tensor T they hold are two views of one shape too: placing, verifying (the holding rule)
and reading back are copies and comparisons between them, chunk by chunk.

Every view is bounds-checked from its two extreme addresses (the memory's own checks, with
their messages), never element by element.  Where a view cannot say it (a DM access that
leaves its slice's backed 512 KiB inside the window, Bottom padding in the space, a command
that writes one address twice, an Element whose digits are not a box of live positions), the
caller falls back to the index-array path, which remains the reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model.mapping import LIVE, TOP, NotFactorable
from tcplan.model.rules import TcplanError
from tcplan.model.tiers import TIER_DIMS, Tensor, dm_address

from .memory import DM_BACKED_SHIFT, DM_WINDOW_SHIFT, Space

#: elements one comparison or copy handles at once (bounds the temporaries)
CHUNK = 1 << 22


def injective(shape: tuple[int, ...], strides: tuple[int, ...], eb: int) -> bool:
    """Does a view of ``eb``-byte elements reach a distinct address at every index?  (A
    sufficient test: sorted by stride, each one clears the span of those inside it.)"""
    span = eb
    for n, s in sorted(((n, abs(s)) for n, s in zip(shape, strides) if n > 1),
                       key=lambda x: x[1]):
        if s < span:
            return False
        span = s * (n - 1) + span
    return True


def _extremes(addr: int, shape, strides) -> tuple[int, int]:
    lo = addr + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    hi = addr + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
    return lo, hi


def _physical_strides(space: Space, addr: int, shape, strides, eb: int
                      ) -> tuple[int, tuple[int, ...]] | None:
    """The physical byte index of ``addr`` and the physical strides of a view (DM: a
    stride of whole slice windows steps whole backed slices; every other stride must keep
    the offsets inside one slice's backed bytes), bounds-checked at the extremes; None when
    no view can say it."""
    lo, hi = _extremes(addr, shape, strides)
    space.physical(np.array([lo, hi + eb - 1], np.int64))  # raises the access error
    if space.tier != "dm":
        return addr - space.lo, tuple(strides)
    window = 1 << DM_WINDOW_SHIFT
    inner = [(n, s) for n, s in zip(shape, strides) if s % window]
    off = addr & (window - 1)
    olo, ohi = _extremes(off, [n for n, _ in inner], [s for _, s in inner])
    if olo < 0 or ohi + eb > (1 << DM_BACKED_SHIFT):
        return None  # the offsets leave the backed part of a window: index arrays
    phys = [s if s % window else (s >> DM_WINDOW_SHIFT) << DM_BACKED_SHIFT for s in strides]
    base = ((addr >> DM_WINDOW_SHIFT) << DM_BACKED_SHIFT) | off
    return base - space.lo, tuple(phys)


def view(space: Space, addr: int, shape: tuple[int, ...], strides: tuple[int, ...],
         eb: int, counts: bool = False) -> np.ndarray | None:
    """The bytes of a space as a view of ``shape + (eb,)`` (``strides`` in bytes), or,
    with ``counts``, their write counters (every byte of an element counts its writes; the
    first is read); None when no view can say it (see :func:`_physical_strides`; a view
    that touches Bottom padding)."""
    got = _physical_strides(space, addr, shape, strides, eb)
    if got is None:
        return None
    base, phys = got
    if space.bottom is not None and np.lib.stride_tricks.as_strided(
            space.bottom[base:], tuple(shape) + (eb,), phys + (1,)).any():
        return None  # (it touches Bottom padding: the index path says where)
    arr = space.writes if counts else space.data
    return np.lib.stride_tricks.as_strided(arr[base:], tuple(shape) + (eb,), phys + (1,),
                                           writeable=True)


def copy_command(rs: Space, ws: Space, entries, rbase: int, wbase: int, eb: int) -> bool:
    """One DMA command as a copy between two strided views, and its write counts; False
    when a view cannot say it (the caller uses index arrays)."""
    shape = tuple(n for n, _, _ in entries)
    rstr = tuple(r * eb for _, r, _ in entries)
    wstr = tuple(w * eb for _, _, w in entries)
    if not injective(shape, wstr, eb):
        return False
    src = view(rs, rbase, shape, rstr, eb)
    if src is None:
        return False
    dst = view(ws, wbase, shape, wstr, eb)
    if dst is None:
        return False
    cnt = view(ws, wbase, shape, wstr, eb, counts=True)
    if cnt is None:
        return False
    src, dst, cnt = merged(src, dst, cnt)
    np.copyto(dst, src)  # (a copy between views allocates nothing)
    cnt += 1  # (a counter wrapped by 256 writes shows in verify's total)
    return True


def pieces(*arrays: np.ndarray) -> Iterator[tuple[np.ndarray, ...]]:
    """Views of one shape, merged (:func:`merged`) and cut into pieces of at most
    :data:`CHUNK` elements, piece by piece together (for work that makes temporaries:
    comparisons, reductions, copies out of T)."""
    ms = merged(*arrays)
    cut = _cut(ms[0].shape)
    return zip(*(chunks(a, cut) for a in ms))


def merged(*arrays: np.ndarray) -> list[np.ndarray]:
    """The same elements of views of one shape, with adjacent dimensions merged wherever
    every view steps through them contiguously (``stride[outer] == size[inner] x
    stride[inner]``) and dimensions of one position dropped: the copies and comparisons
    then run over long contiguous rows instead of element by element."""
    if arrays[0].ndim == 0:  # (one element a unit: a row of one)
        arrays = tuple(np.lib.stride_tricks.as_strided(a, (1,), (a.itemsize,),
                                                       writeable=a.flags.writeable)
                       for a in arrays)
    keep = [k for k, n in enumerate(arrays[0].shape) if n != 1] or [arrays[0].ndim - 1]
    shape = [arrays[0].shape[keep[-1]]]
    strides = [[a.strides[keep[-1]]] for a in arrays]
    for k in reversed(keep[:-1]):
        n = arrays[0].shape[k]
        if all(a.strides[k] == shape[0] * st[0] for a, st in zip(arrays, strides)):
            shape[0] *= n  # one dimension of both sizes, stepping by the inner stride
        else:
            shape.insert(0, n)
            for a, st in zip(arrays, strides):
                st.insert(0, a.strides[k])
    return [np.lib.stride_tricks.as_strided(a, tuple(shape), tuple(st),
                                            writeable=a.flags.writeable)
            for a, st in zip(arrays, strides)]


def _cut(shape: tuple[int, ...]) -> tuple[int, int]:
    """Where to cut views of ``shape`` into pieces of at most :data:`CHUNK` elements: the
    outer dimensions before ``k`` are iterated, dimension ``k`` is cut in blocks of ``b``."""
    inner = math.prod(shape)
    for k, n in enumerate(shape):
        inner //= n
        if inner * n <= CHUNK:
            return k, n
        if inner <= CHUNK:
            return k, max(1, CHUNK // inner)
    return len(shape) - 1, 1


def chunks(a: np.ndarray, cut: tuple[int, int]) -> Iterator[np.ndarray]:
    """``a`` in pieces: every index of its dimensions before ``k``, and blocks of ``b``
    positions of dimension ``k`` (see :func:`_cut`); views of one shape line up."""
    k, b = cut
    if a.ndim == 0:
        yield a
        return
    for idx in np.ndindex(*a.shape[:k]):
        for lo in range(0, a.shape[k], b):
            yield a[idx + (slice(lo, lo + b),)]


@dataclass
class Box:
    """A tensor's Element as a box: per factor (outermost first) its positions, its live
    positions, its memory stride (bytes) and its stride in T (elements; 0 broadcasts)."""

    shape: tuple[int, ...]
    live: tuple[int, ...]
    mem: tuple[int, ...]
    tstr: tuple[int, ...]

    @property
    def padded(self) -> bool:
        return self.live != self.shape


def element_box(t: Tensor, axes: dict[str, int], reach: dict[str, int]) -> Box | None:
    """The box of ``t``'s Element, or None where it is not one: a digit with padding other
    than Top (``#``) padding, or digits whose coordinates (plus ``reach``, the most the
    other dimensions add to each axis) could pass their axis (those positions are Top
    padding one by one)."""
    try:
        fs = t.dims["element"].factors
    except TcplanError:
        return None
    strides, s = {}, 1
    for a in reversed(list(axes)):
        strides[a] = s
        s *= axes[a]
    top = dict(reach)
    for f in fs:
        covered = f.count == f.size or (f.pads and f.pads[-1][0] >= f.size)
        if not covered or any(kind != TOP for _, kind in f.pads):
            return None
        if f.axis is not None:
            top[f.axis] = top.get(f.axis, 0) + f.lo * (f.count - 1)
    if any(top[a] >= axes[a] for a in top if a in axes):
        return None
    weights, w = [], t.elem_bytes
    for f in reversed(fs):
        weights.append(w)
        w *= f.size
    return Box(tuple(f.size for f in fs), tuple(f.count for f in fs),
               tuple(reversed(weights)),
               tuple(f.lo * strides[f.axis] if f.axis is not None else 0 for f in fs))


@dataclass
class Unit:
    """One unit of a tensor (a chip, cluster and slice): where its Element starts, the
    index into T its other dimensions add, and their status."""

    chip: int
    address: int
    offset: int  # into T (elements)
    status: int


def units(t: Tensor, axes: dict[str, int]) -> tuple[list[Unit], dict[str, int]] | None:
    """Every unit of a tensor and the most each axis gets from the other dimensions, or
    None for a tier the views do not cover."""
    if t.tier not in ("hbm", "host", "dm"):
        return None
    dims = [d for d in TIER_DIMS[t.tier] if d != "element"]
    evals = {d: t.dims[d].evaluate() for d in dims}
    strides, s = {}, 1
    for a in reversed(list(axes)):
        strides[a] = s
        s *= axes[a]
    out: list[Unit] = []
    reach: dict[str, int] = {}
    for combo in np.ndindex(*[t.dims[d].size for d in dims]):
        pos = dict(zip(dims, combo))
        status, offset = LIVE, 0
        for d, p in pos.items():
            coords, st = evals[d]
            if st[p] != LIVE and status == LIVE:
                status = int(st[p])
            for a, c in coords.items():
                offset += int(c[p]) * strides[a]
                if st[p] == LIVE:
                    reach[a] = max(reach.get(a, 0), int(c[p]))
        address = (dm_address(pos["cluster"], pos["slice"], t.address) if t.tier == "dm"
                   else t.address)
        out.append(Unit(pos.get("chip", 0), address, offset, status))
    return out, reach


@dataclass
class Whole:
    """A whole tensor as one box per chip (issue 32): the factors of its unit dimensions
    (Cluster, then Slice; none outside DM) then its Element's, ``units`` of them unit
    factors, from the tensor's address; and every chip: (chip, the index into T its Chip
    coordinates add, its status).  One strided view spans every slice: a DM unit factor
    steps whole slice windows, which :func:`view` maps onto the backed bytes."""

    box: Box
    units: int
    chips: list[tuple[int, int, int]]


def _unit_factors(t: Tensor, d: str, step: int, strides: dict[str, int]
                  ) -> list[tuple[int, int, int, int, str | None, int]] | None:
    """A unit dimension's factors as (size, live count, memory stride, T stride, axis,
    lo), outermost first, or None where they are not a box (a padding other than Top)."""
    try:
        fs = t.dims[d].factors
    except TcplanError:
        return None
    out = []
    w = step
    for f in reversed(fs):
        covered = f.count == f.size or (f.pads and f.pads[-1][0] >= f.size)
        if not covered or any(kind != TOP for _, kind in f.pads):
            return None
        out.append((f.size, f.count, w, f.lo * strides[f.axis] if f.axis is not None else 0,
                    f.axis, f.lo))
        w *= f.size
    return out[::-1]


def whole(t: Tensor, axes: dict[str, int]) -> Whole | None:
    """The tensor as :class:`Whole`, or None where the views cannot span it (a tier they
    do not cover, a unit or Element that is no box of live and Top-padded positions, a
    Chip position of another status, digits that could pass their axis)."""
    if t.tier not in ("hbm", "host", "dm"):
        return None
    strides, s = {}, 1
    for a in reversed(list(axes)):
        strides[a] = s
        s *= axes[a]
    facs: list[tuple[int, int, int, int, str | None, int]] = []
    if t.tier == "dm":
        window = hw.DM_SLICE_STRIDE
        for d, step in (("cluster", hw.SLICES_PER_CLUSTER * window), ("slice", window)):
            got = _unit_factors(t, d, step, strides)
            if got is None:
                return None
            facs += got
    reach: dict[str, int] = {}
    for _, count, _, _, ax, lo in facs:
        if ax is not None:
            reach[ax] = reach.get(ax, 0) + lo * (count - 1)
    chips = [(0, 0, LIVE)]
    if "chip" in t.dims:
        coords, st = t.dims["chip"].evaluate()
        chips = []
        top: dict[str, int] = {}  # (the most each axis gets from a live chip)
        for p in range(t.dims["chip"].size):
            if st[p] not in (LIVE, TOP):
                return None
            chips.append((p, sum(int(c[p]) * strides[a] for a, c in coords.items()),
                          int(st[p])))
            for a, c in coords.items():
                if st[p] == LIVE:
                    top[a] = max(top.get(a, 0), int(c[p]))
        reach = {a: reach.get(a, 0) + top.get(a, 0) for a in {*reach, *top}}
    box = element_box(t, axes, reach)
    if box is None:
        return None
    return Whole(Box(tuple(f[0] for f in facs) + box.shape, tuple(f[1] for f in facs)
                     + box.live, tuple(f[2] for f in facs) + box.mem,
                     tuple(f[3] for f in facs) + box.tstr), len(facs), chips)


def t_view(T: np.ndarray, offset: int, box: Box, eb: int, writeable: bool = False
           ) -> np.ndarray:
    """T's bytes at the box's live positions, as a view of ``box.live + (eb,)``."""
    flat = T.reshape(-1).view(np.uint8)
    return np.lib.stride_tricks.as_strided(flat[offset * eb:], box.live + (eb,),
                                           tuple(s * eb for s in box.tstr) + (1,),
                                           writeable=writeable)


def live(v: np.ndarray, box: Box) -> np.ndarray:
    """The live part of a view over the whole box."""
    return v[tuple(slice(0, n) for n in box.live)]


def size(box: Box) -> int:
    return math.prod(box.live)


__all__ = ["Box", "NotFactorable", "Unit", "Whole", "whole", "chunks", "copy_command", "element_box",
           "injective", "live", "merged", "pieces", "size", "t_view", "units", "view"]
