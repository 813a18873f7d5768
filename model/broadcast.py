"""Broadcast moves: a destination that carries an axis its source does not.

A move's output holds the same mathematical tensor as its input (docs/hardware.md section 1).
When the destination carries an axis the source does not carry at all, the destination is a
*broadcast*: it holds one copy of the source for every value of that axis, each copy equal to
the source (the mathematical tensor is constant along the axis).  The read side repeats its
addresses (stride-0 entries: reads may broadcast), the write side writes every copy (writes
may not broadcast: each slot still has one source position).  docs/decisions.md item 92.

An axis both sides carry is different: the source holds it over some values (all of them, or
a sub-tensor) and the destination must ask for no value the source does not hold.  A
destination that does (source ``m![A % 4]``, destination ``m![A]``) is more likely a mistake
than a broadcast, since the copies would sit at indices whose values the source never had:
rule ``broadcast-partial``, refused before anything is planned (:func:`partial_violations`).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from . import limits
from .mapping import Factor
from .rules import Violation
from .tiers import DIM_TITLES, Tensor



def carried(t: Tensor) -> dict[str, list[tuple[str, Factor]]]:
    """Per axis, the (dimension, digit) pairs that carry it: digits with more than one live
    value, over every dimension of the tensor."""
    out: dict[str, list[tuple[str, Factor]]] = {}
    for d, m in t.dims.items():
        for f in m.factors:
            if f.axis is not None and f.count > 1:
                out.setdefault(f.axis, []).append((d, f))
    return out


def broadcast_axes(source: Tensor, destination: Tensor) -> list[str]:
    """The axes the destination carries and the source does not (the broadcast's copies), in
    the order the destination's dimensions name them."""
    have = carried(source)
    return [a for a in carried(destination) if a not in have]


def _is_prefix(fs: list[Factor], size: int) -> int | None:
    """The digits hold the values [0, V) exactly (a chain of full digits from 1 up, the top
    one possibly cut short): V, else None."""
    fs = sorted(fs, key=lambda f: f.lo)
    lo = 1
    for k, f in enumerate(fs):
        if f.lo != lo or (k < len(fs) - 1 and f.count != f.radix):
            return None
        lo *= f.radix
    top = fs[-1]
    return min(size, top.lo * top.count)


def _values(fs: list[Factor]) -> np.ndarray | None:
    """Every value the digits give (sorted), or None when there are too many to list."""
    n = 1
    for f in fs:
        n *= f.count
    if n > limits.BROADCAST_EXACT_VALUES:
        return None
    vals = np.zeros(1, np.int64)
    for f in fs:
        vals = (vals[:, None] + f.lo * np.arange(f.count, dtype=np.int64)).ravel()
    return np.unique(vals)


def _ranges(fs: Iterable[Factor]) -> list[tuple[int, int]]:
    """The digit ranges the live values reach (a digit cut short by ``=`` reaches less)."""
    return sorted((f.lo, f.lo * f.count) for f in fs)


def _within(dst: list[tuple[int, int]], src: list[tuple[int, int]]) -> bool:
    """Every destination digit range lies inside the union of the source's."""
    for lo, hi in dst:
        cur = lo
        for a, b in src:
            if a <= cur < b:
                cur = b
        if cur < hi:
            return False
    return True


def _holds_all(src: list[Factor], dst: list[Factor], size: int) -> bool:
    """Does every value of the axis the destination's digits give lie among the source's?"""
    top = _is_prefix(src, size)
    if top is not None and top >= size:
        return True  # the source holds every value of the axis
    want = _values(dst)
    if want is not None:
        want = want[want < size]  # values past the axis are padding, not indices
    if top is not None:
        most = int(want.max(initial=0)) if want is not None else \
            min(size - 1, sum(f.lo * (f.count - 1) for f in dst))
        return most < top
    have = _values(src)
    if have is not None and want is not None:
        return bool(np.isin(want, have, assume_unique=True).all())
    return _within(_ranges(dst), _ranges(src))


def partial_violations(source: Tensor, destination: Tensor, where: str
                       ) -> list[Violation]:
    """``broadcast-partial``: an axis both carry, for which the destination asks values the
    source does not hold (``where``: the problem's place of the destination)."""
    have = carried(source)
    out = []
    for a, parts in carried(destination).items():
        if a not in have:
            continue
        size = destination.dims[parts[0][0]].axes[a]
        src = [f for _, f in have[a]]
        dst = [f for _, f in parts]
        if _holds_all(src, dst, size):
            continue
        terms = ", ".join(f"{DIM_TITLES[d]} digit {f.label({a: size})}" for d, f in parts)
        src_terms = ", ".join(f"{DIM_TITLES[d]} digit {f.label({a: size})}"
                              for d, f in have[a])
        out.append(Violation("broadcast-partial", (terms,), {
            "where": where, "axis": a, "dst": destination.describe(), "terms": terms,
            "src_terms": src_terms}))
    return out


def sub_tensor_violations(source: Tensor, destination: Tensor, where: str
                          ) -> list[Violation]:
    """``sub-tensor`` (a warning): the axes of which the destination holds fewer values
    than the source, naming the source's digits it leaves behind (a destination that
    carries an axis through ``K % 8`` where the source holds ``K``).  A destination that
    does not carry an axis at all holds its value 0, the same mistake."""
    have, want = carried(source), carried(destination)
    sizes = {a: source.dims[fs[0][0]].axes[a] for a, fs in have.items()}
    counts = {a: _count([f for _, f in fs], sizes[a]) for a, fs in have.items()}
    kept = {a: _count([f for _, f in want.get(a, [])], sizes[a]) for a in have}
    total = moved = 1
    for a in have:
        total, moved = total * counts[a], moved * min(kept[a], counts[a])
    out = []
    for a, fs in have.items():
        if kept[a] >= counts[a]:
            continue
        size = sizes[a]
        got = _ranges(f for _, f in want.get(a, []))
        dropped = [t for _, f in fs if (t := _left(f, got, a, size)) is not None]

        def terms(parts: list[tuple[str, Factor]]) -> str:
            return ", ".join(f"{DIM_TITLES[d]} {f.label({a: size})}" for d, f in parts)
        out.append(Violation("sub-tensor", (a,), {
            "where": where, "axis": a, "moved": moved, "total": total,
            "kept": f"through {terms(want[a])}" if a in want else "in no dimension",
            "held": f"through {terms(fs)}",
            "dropped": ", ".join(dropped) if dropped else "values beyond the destination's"}))
    return out


def _left(f: Factor, got: list[tuple[int, int]], a: str, size: int) -> str | None:
    """The parts of source digit ``f`` the destination's digit ranges ``got`` do not reach
    (``K / 8 % 2`` of ``K`` when they reach 8 and from 16 up), each with its values; None
    when they reach it all."""
    gaps = digit_gaps(f.lo, f.lo * f.count, got, a, size)
    return ", ".join(f"{t} ({n} values)" for t, n in gaps) or None


def digit_gaps(lo: int, hi: int, got: list[tuple[int, int]], a: str, size: int
               ) -> list[tuple[str, int]]:
    """The digits of axis ``a`` (``size`` values) in the range ``[lo, hi)`` that the digit
    ranges ``got`` do not reach, as terms (``A % 4``, ``K / 8 % 2``) with their values."""
    cur, gaps = lo, []
    while cur < hi:
        reach = next((top for b, top in got if b <= cur < top), None)
        if reach is not None:
            cur = reach
            continue
        end = min([b for b, _ in got if b > cur] + [hi])
        text = a if cur == 1 else f"{a} / {cur}"
        gaps.append((text + (f" % {end // cur}" if end < size else ""), end // cur))
        cur = end
    return gaps


def _count(fs: list[Factor], size: int) -> int:
    """How many values of an axis of ``size`` the digits give (1 for none: the value 0;
    values past the axis are padding, not counted)."""
    vals = _values(fs)
    if vals is not None:
        return int((vals < size).sum())
    n = 1
    for f in fs:
        n *= f.count
    return min(n, size)
