"""Scatter and gather: DMA moves of whole rows at addresses taken from an index tensor.

Seed 002 "Scatter와 Gather": ``dma_gather_scaled`` reads an HBM index whose values are *byte
offsets* along the gather axis (row r is at ``r * row_bytes``); ``dma_gather_unscaled`` reads an
on-chip DM index whose values are *raw row positions*; ``dma_scatter`` writes DM rows to the HBM
rows its (scaled, HBM) index selects.  A row is the table's Element mapping without its outermost
term (the gather axis), e.g. ``m![K, D]`` has rows of D elements.

Lowering gives the row size, the number of rows moved, and the sequencer that walks the DM side
(one packet per row); the other side's addresses come from the index at run time.  The value
semantics are :meth:`IndexedMove.apply`; an index value that is not a whole row inside the table
is ``indexed-offset`` (checked when the data is known).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import hardware as hw
from . import limits
from .mapping import Mapping, held_indices, join, number
from .rules import TcplanError, Violation
from .sequencer import check_side, stream_pieces
from .tiers import Tensor, placement_violations


@dataclass
class IndexedMove:
    kind: str  # gather or scatter
    variant: str  # scaled or unscaled
    table: Tensor  # the HBM tensor rows are read from (gather) or written to (scatter)
    rows_side: Tensor  # the DM tensor holding one row per index entry
    index: Tensor
    gather_axis: str  # the table's outermost term, as text
    row: Mapping  # the row: the table's other terms
    walk: Mapping  # the DM side's terms outside the packet, in its order: one packet each
    row_elements: int
    rows: int  # index entries (rows moved)
    dm_entries: list[tuple[int, int]]  # the DM side's sequencer, elements
    #: one DMA packet: the DM Element's innermost terms that run contiguously in the
    #: table's row (the whole row, or its innermost part where the row is split over the
    #: DM tensor's Slice and Element)
    packet: Mapping = field(default_factory=lambda: number(1))

    @property
    def packet_elements(self) -> int:
        return self.packet.size

    @property
    def packet_bytes(self) -> int:
        return self.packet_elements * self.table.elem_bytes

    def row_offsets(self, coords: dict[str, np.ndarray], n: int) -> np.ndarray:
        """The offset in the table's row (elements) of ``n`` positions whose coordinates
        are ``coords`` (the row's axes; one the positions do not carry counts as 0): where
        each of the walk's packets starts in its row."""
        return _row_offsets(self.row, coords, n)

    @property
    def row_bytes(self) -> int:
        return self.row_elements * self.table.elem_bytes

    def apply(self, table: np.ndarray, index: np.ndarray, rows_side: np.ndarray | None = None
              ) -> np.ndarray:
        """Gather: ``out[i] = table[row(index[i])]``; scatter: ``table[row(index[i])] =
        rows_side[i]`` (returns the new table).  Arrays are [rows, row_elements]."""
        idx = np.asarray(index, dtype=np.int64).reshape(-1)
        if self.variant == "scaled":
            bad = idx % self.row_bytes != 0
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise TcplanError(Violation("indexed-offset", (str(int(idx[k])),), {
                    "detail": f"index entry {k} is {int(idx[k])}, not a multiple of the "
                              f"{self.row_bytes}-byte row (scaled indices are byte offsets)"}))
            rows = idx // self.row_bytes
        else:
            rows = idx
        out_of = (rows < 0) | (rows >= table.shape[0])
        if out_of.any():
            k = int(np.flatnonzero(out_of)[0])
            raise TcplanError(Violation("indexed-offset", (str(int(idx[k])),), {
                "detail": f"index entry {k} selects row {int(rows[k])}; the table has "
                          f"{table.shape[0]} rows"}))
        if self.kind == "gather":
            return table[rows]
        new = table.copy()
        new[rows] = rows_side
        return new

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "variant": self.variant, "gather_axis": self.gather_axis,
                "row": self.row.text(), "row_elements": self.row_elements,
                "row_bytes": self.row_bytes, "rows": self.rows,
                "packet": self.packet.text(), "packet_elements": self.packet_elements,
                "packet_bytes": self.packet_bytes,
                "dm_entries": [list(e) for e in self.dm_entries],
                "index_values": "byte offsets" if self.variant == "scaled" else "row positions"}


def plan(kind: str, variant: str, table: Tensor, rows_side: Tensor, index: Tensor, chips: int
         ) -> IndexedMove:
    """A gather's or scatter's rows and the DM side's sequencer.  The row (the table's terms
    after the gather axis) may sit anywhere in the DM tensor, split over its Slice and
    Element (furiosa-opt's payload, ``dst`` less the index's axes, docs/decisions.md item
    120): one DMA packet is the Element's innermost terms that run contiguously in the
    row, and the row's other digits are walked with the index positions."""
    _check_tensors(kind, variant, table, rows_side, index, chips)
    row_terms = table.dims["element"].terms[1:]
    row = join(row_terms)
    violations: list[Violation] = []
    walk_terms, packet, index_terms = _split_side(rows_side, row, violations)
    idx_axes = {a for m in index.dims.values() for a in m.used_axes}
    outer = join(index_terms)
    if set(outer.used_axes) != idx_axes:
        violations.append(Violation("indexed-shape", tuple(t.body() for t in index_terms), {
            "detail": f"the DM tensor's rows are indexed by "
                      f"{', '.join(sorted(outer.used_axes)) or 'nothing'}, the index tensor "
                      f"by {', '.join(sorted(idx_axes)) or 'nothing'}"}))
    index_entries = 1  # (its live positions: a padded dimension, `1 # 2`, adds none)
    for m in index.dims.values():
        for f in m.factors:
            index_entries *= f.count
    if not violations and outer.size != index_entries:
        violations.append(Violation("indexed-shape", tuple(t.body() for t in index_terms), {
            "detail": f"the DM tensor holds {outer.size} rows but the index has "
                      f"{index_entries} entries"}))
    if packet is None:  # (the DM tensor's terms do not hold the row: said)
        raise TcplanError(violations)
    packet_bytes = packet.size * table.elem_bytes
    if packet_bytes > hw.DMA_MAX_PACKET_BYTES:
        violations.append(Violation("dma-packet-max", (packet.text(),), {
            "packet": packet.size, "elem_bytes": table.elem_bytes, "bytes": packet_bytes,
            "suggestion": "split the row's innermost term in the DM tensor's Element, or "
                          "spread its outer digits over the Slice"}))
    if packet_bytes % hw.DMA_HBM_DM_ALIGN:
        violations.append(Violation("dma-hbm-dm-align", (packet.text(),), {
            "side": "row", "align": hw.DMA_HBM_DM_ALIGN,
            "what": f"{packet_bytes}-byte packets of the row {row.text()} (HBM <-> DM "
                    "packets must be multiples of 8 bytes)"}))
    if violations:
        raise TcplanError(violations)
    from .dma import _layout  # the DM address space (same as a DMA's)
    L = _layout(rows_side)
    walk = join(walk_terms)
    pieces = stream_pieces((L,), [("time", walk), ("packet", packet)])
    mode = "write" if kind == "gather" else "read"
    v, _ = check_side(L, 0, pieces, mode, "dma")
    if v:
        raise TcplanError(v)
    entries = [(p.positions, p.strides[0]) for p in pieces if p.positions > 1]
    return IndexedMove(kind, variant, table, rows_side, index,
                       table.dims["element"].terms[0].body(), row, walk, row.size,
                       outer.size, entries, packet)


def _check_tensors(kind: str, variant: str, table: Tensor, rows_side: Tensor, index: Tensor,
                   chips: int) -> None:
    """Placements, tiers and dtypes: an HBM table, a DM side of its dtype, an i32 index in
    HBM (scaled) or DM (unscaled)."""
    violations: list[Violation] = []
    for t in (table, rows_side, index):
        violations += placement_violations(t, chips)
    if table.tier != "hbm" or rows_side.tier != "dm":
        violations.append(Violation("indexed-shape", (table.tier, rows_side.tier), {
            "detail": f"a {kind} moves rows between an HBM table and a DM tensor, not "
                      f"{table.tier} and {rows_side.tier}"}))
    want_tier = "dm" if variant == "unscaled" else "hbm"
    if index.tier != want_tier or index.dtype != "i32":
        violations.append(Violation("indexed-shape", (index.tier, index.dtype), {
            "detail": f"a {variant} {kind} reads an i32 index from {want_tier.upper()} "
                      f"({'raw row positions' if variant == 'unscaled' else 'byte offsets'}); "
                      f"got {index.dtype} in {index.tier.upper()}"}))
    if table.dtype != rows_side.dtype:
        violations.append(Violation("indexed-shape", (table.dtype, rows_side.dtype), {
            "detail": f"the table is {table.dtype} but the DM tensor is {rows_side.dtype}: a "
                      f"{kind} moves rows unchanged"}))
    if violations:
        raise TcplanError(violations)


def _split_side(side: Tensor, row: Mapping, violations: list[Violation]
                ) -> tuple[list[Mapping], Mapping | None, list[Mapping]]:
    """The DM tensor's terms (Cluster, Slice, Element; those that carry an axis) as
    (the walk: every term outside the packet, in its order; the packet; the terms of
    the index positions).  The row's terms must hold the row, each of its values once;
    the packet is the Element's longest innermost run of them that is contiguous in the
    table's row, cut to whole terms of at most 4,096 bytes where it can be (None, with
    the violation added, where the terms hold no such run)."""
    terms = [term for d in ("cluster", "slice", "element") for term in side.dims[d].terms
             if any(f.axis for f in term.factors)]
    n_element = len([t for t in side.dims["element"].terms if any(f.axis for f in t.factors)])
    row_axes = set(row.used_axes)
    row_side = [t for t in terms if set(t.used_axes) & row_axes]
    index_terms = [t for t in terms if not set(t.used_axes) & row_axes]
    mixed = [t for t in row_side if set(t.used_axes) - row_axes]
    if mixed:
        violations.append(Violation("indexed-shape", tuple(t.body() for t in mixed), {
            "detail": f"the DM tensor's term {_listed(mixed)} mixes the row's axes with "
                      "the index's: write each in terms of its own"}))
    if not row_axes or mixed:
        return index_terms, None if mixed else number(1), index_terms
    held = join(row_side)
    if not _holds_row(held, row):
        violations.append(Violation("indexed-shape", tuple(t.body() for t in row_side), {
            "detail": f"the DM tensor's row terms {_listed(row_side) or 'none'} "
                      f"({held.size:,} positions) do not hold the table's row {row.text()} "
                      f"({row.size:,} values), each of its values once: give the DM tensor "
                      "every digit of the row"}))
        return index_terms, None, index_terms
    k = 0  # the longest innermost run of Element terms contiguous in the row
    while k < n_element and _contiguous(join(terms[len(terms) - k - 1:]), row):
        k += 1
    if k == 0:
        violations.append(Violation("indexed-shape", (terms[-1].body(),), {
            "detail": f"the DM tensor's innermost term {terms[-1].body()} is not the "
                      f"innermost part of the table's row {row.text()}: a DMA packet must "
                      "run contiguously in both (put the row's innermost digits innermost "
                      "in the Element)"}))
        return index_terms, None, index_terms
    eb = side.elem_bytes
    while k > 1 and join(terms[len(terms) - k:]).size * eb > hw.DMA_MAX_PACKET_BYTES:
        k -= 1
    return terms[:len(terms) - k], join(terms[len(terms) - k:]), index_terms


def _holds_row(held: Mapping, row: Mapping) -> bool:
    """Does ``held`` hold every value of ``row``, each once?"""
    if held.size > limits.EVAL_MAX_POSITIONS or row.size > limits.EVAL_MAX_POSITIONS:
        return held.size == row.size  # (too large to compare value by value)
    mine, want = (np.sort(_keys(*held_indices(m), row)) for m in (held, row))
    return bool(np.array_equal(mine, want)) and np.unique(mine).size == mine.size


def _contiguous(packet: Mapping, row: Mapping) -> bool:
    """Do ``packet``'s positions hold the row's offsets 0, 1, ... in order?"""
    if packet.size > row.size or packet.size > limits.EVAL_MAX_POSITIONS:
        return False
    coords, held = held_indices(packet)
    return bool(held.all()) and bool(np.array_equal(
        _row_offsets(row, coords, packet.size), np.arange(packet.size)))


def _keys(coords: dict[str, np.ndarray], held: np.ndarray, row: Mapping) -> np.ndarray:
    """Each held position's row coordinates as one number (mixed radix over the row's
    axes)."""
    key = np.zeros(int(held.sum()), np.int64)
    for a in row.used_axes:
        key = key * row.axes[a] + (coords[a][held] if a in coords else 0)
    return key


def _row_offsets(row: Mapping, coords: dict[str, np.ndarray], n: int) -> np.ndarray:
    """The offset in ``row`` (elements, its positions) of ``n`` coordinates: each of the
    row's digits weighted by the positions to its right (an axis ``coords`` lacks is 0)."""
    out = np.zeros(n, np.int64)
    weight = 1
    for f in reversed(row.factors):
        if f.axis is not None and f.axis in coords:
            out += ((np.asarray(coords[f.axis], np.int64) // f.lo) % f.radix) * weight
        weight *= f.size
    return out


def _listed(terms) -> str:
    return ", ".join(t.body() for t in terms)
