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

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import hardware as hw
from .mapping import Mapping, join
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
    walk: Mapping  # the DM side's terms outside the row, in its order: one row per position
    row_elements: int
    rows: int  # index entries (rows moved)
    dm_entries: list[tuple[int, int]]  # the DM side's sequencer, elements

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
                "dm_entries": [list(e) for e in self.dm_entries],
                "index_values": "byte offsets" if self.variant == "scaled" else "row positions"}


def plan(kind: str, variant: str, table: Tensor, rows_side: Tensor, index: Tensor, chips: int
         ) -> IndexedMove:
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
    terms = table.dims["element"].terms
    gather_axis = terms[0].body()
    row_terms = terms[1:]
    row = join(row_terms)
    idx_axes = [a for m in index.dims.values() for a in m.used_axes]
    # the DM side: index positions outside, the row innermost
    side_terms = [term for d in ("cluster", "slice", "element")
                  for term in rows_side.dims[d].terms if any(f.axis for f in term.factors)]
    tail = side_terms[-len(row_terms):] if row_terms else []
    if row_terms and tail != list(row_terms):
        violations.append(Violation("indexed-shape", tuple(t.body() for t in row_terms), {
            "detail": f"the DM tensor's innermost terms {_listed(tail) or 'none'} are not the "
                      f"table's row {_listed(row_terms)}"}))
    outer = side_terms[:len(side_terms) - len(row_terms)] if row_terms else side_terms
    walk = join(outer)
    outer_axes = set(walk.used_axes)
    if outer_axes != set(idx_axes):
        violations.append(Violation("indexed-shape", tuple(sorted(outer_axes)), {
            "detail": f"the DM tensor's rows are indexed by {', '.join(sorted(outer_axes))}, "
                      f"the index tensor by {', '.join(sorted(set(idx_axes)))}"}))
    index_entries = 1  # (its live positions: a padded dimension, `1 # 2`, adds none)
    for m in index.dims.values():
        for f in m.factors:
            index_entries *= f.count
    if not violations and walk.size != index_entries:
        violations.append(Violation("indexed-shape", tuple(t.body() for t in outer), {
            "detail": f"the DM tensor holds {walk.size} rows but the index has "
                      f"{index_entries} entries"}))
    row_bytes = row.size * table.elem_bytes
    if row_bytes > hw.DMA_MAX_PACKET_BYTES:
        violations.append(Violation("dma-packet-max", (row.text(),), {
            "packet": row.size, "elem_bytes": table.elem_bytes, "bytes": row_bytes,
            "suggestion": "gathering narrower rows (split the row axis into the table's outer "
                          "terms)"}))
    if row_bytes % hw.DMA_HBM_DM_ALIGN:
        violations.append(Violation("dma-hbm-dm-align", (row.text(),), {
            "side": "row", "align": hw.DMA_HBM_DM_ALIGN,
            "what": f"{row_bytes}-byte rows (HBM <-> DM packets must be multiples of 8 bytes)"}))
    if violations:
        raise TcplanError(violations)
    from .dma import _layout  # the DM address space (same as a DMA's)
    L = _layout(rows_side)
    pieces = stream_pieces((L,), [("time", walk), ("packet", row)])
    mode = "write" if kind == "gather" else "read"
    v, _ = check_side(L, 0, pieces, mode, "dma")
    if v:
        raise TcplanError(v)
    entries = [(p.positions, p.strides[0]) for p in pieces if p.positions > 1]
    return IndexedMove(kind, variant, table, rows_side, index, gather_axis, row, walk,
                       row.size, walk.size, entries)


def _listed(terms) -> str:
    return ", ".join(t.body() for t in terms)
