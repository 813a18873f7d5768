"""The Vector Engine's Inter-Slice Reducer: a stream reduced across the slices of a
cluster (book: computing-tensors/vector-engine/inter-slice-reducer.md).

The innermost factors of the input's Slice (the reduction group: ``r`` slices, contiguous)
are reduced into one; their place in the output's Slice is taken by a dummy (``1 # r``: the
value on the group's first slice, the others padding) or a broadcast over a new axis (the
value on every slice of the group); the outer factors, Time and Packet are kept.  Its ops:
i32 ``Add`` (wrapping), ``AddSat``, ``Max``, ``Min``; f32 ``Add``, ``Max``, ``Min``,
``Mul``.  The guide's promotion of a Time factor into the freed Slice is not modelled
(refused by name).  Cycles: the input's streaming time plus a ring-sized tail
(``Time x flits_per_packet + r``, the guide's Performance).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model.mapping import Mapping
from tcplan.model.numeric import reduce_op
from tcplan.model.rules import Violation
from tcplan.model.tiers import Tensor

from .base import layout_violations, register

OPS = hw.INTER_SLICE_REDUCE_OPS
WHY = {"time": "the Inter-Slice Reducer keeps Time (a promotion into the Slice is not "
       "modelled)", "packet": "the Inter-Slice Reducer keeps the Packet",
       "dtype": "the reducer keeps the type"}


@dataclass(frozen=True)
class InterSliceReduce:
    """The Inter-Slice Reducer, reducing by ``op``."""

    op: str
    name: ClassVar[str] = "inter_slice_reduce"
    out_tier: ClassVar[str] = "stream"
    rules: ClassVar[tuple[str, ...]] = ("inter-slice-shape", "engine-spatial",
                                        "engine-layout")
    reduces: ClassVar[bool] = True  # (its output drops the axes of the reduced slices)

    def group(self, inp: Tensor, out: Tensor) -> tuple[int, list[Mapping], list[Mapping]]:
        """(the reduction ratio ``r``, the reduced Slice terms, the replacing ones): the
        terms after the Slices' common outer terms."""
        a, b = inp.dims["slice"].terms, out.dims["slice"].terms
        k = 0
        while k < min(len(a), len(b)) and a[k].text() == b[k].text():
            k += 1
        reduced, replacing = list(a[k:]), list(b[k:])
        return int(np.prod([t.size for t in reduced], dtype=np.int64)), reduced, replacing

    def output(self, inp: Tensor, declared: Tensor) -> Tensor:
        return inp.with_dims(slice=declared.dims["slice"])

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        why = self._why(inp, out)
        if why:
            return [Violation("inter-slice-shape", (out.dims["slice"].text(),), {
                "op": self.op, "slice": inp.dims["slice"].text(),
                "out_slice": out.dims["slice"].text(), "why": why})]
        return layout_violations("Inter-Slice Reducer", self.output(inp, out), out, WHY,
                                 spatial=("chip", "cluster"))

    def _why(self, inp: Tensor, out: Tensor) -> str:
        if self.op not in OPS.get(inp.dtype, ()):
            return f"{self.op} is not an operation of the {inp.dtype} reducer (" + \
                ", ".join(OPS.get(inp.dtype, ())) + ")" if inp.dtype in OPS else \
                f"the reducer takes i32 or f32, not {inp.dtype}"
        if out.dims["slice"].size != inp.dims["slice"].size:
            return f"the output's Slice has {out.dims['slice'].size} slices, the input's " \
                   f"{inp.dims['slice'].size}"
        r, reduced, replacing = self.group(inp, out)
        if not reduced or any(not t.used_axes for t in reduced):
            return "no innermost Slice factors of an axis to reduce (the reduced factors " \
                   "are the input Slice's innermost ones the output replaces)"
        size = int(np.prod([t.size for t in replacing], dtype=np.int64))
        if size != r:
            return f"the replacing factors hold {size} slices, the reduced ones {r}"
        have = {x for d in ("slice", "time", "packet") for x in inp.dims[d].used_axes}
        for t in replacing:
            if set(t.used_axes) & have:
                return f"{t.text()[3:-1]} comes from the input: a promotion from Time is " \
                       "not modelled (a dummy 1 # n or a new axis replaces the reduced " \
                       "factors)"
        gone = {x for t in reduced for x in t.used_axes}
        kept = {x for d in ("time", "packet") for x in out.dims[d].used_axes} | {
            x for t in out.dims["slice"].terms for x in t.used_axes}
        if gone & kept:
            return f"the output still holds {', '.join(sorted(gone & kept))}, which the " \
                   "reduced factors carry"
        return ""

    def run(self, values: np.ndarray, inp: Tensor, out: Tensor) -> np.ndarray:
        units, time, packet = values.shape
        r = self.group(inp, out)[0]
        v = values.reshape(units // r, r, time, packet)
        acc = v[:, 0].copy()
        for k in range(1, r):  # (around the ring, slice after slice)
            acc = reduce_op(self.op, acc, v[:, k])
        return np.broadcast_to(acc[:, None], v.shape).reshape(units, time, packet).copy()

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        return {"ReduceRatio": self.group(inp, out)[0]}

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        flits = -(-inp.dims["packet"].size * inp.elem_bytes // hw.FLIT_BYTES)
        return inp.dims["time"].size * flits + self.group(inp, out)[0]


register(InterSliceReduce.name, InterSliceReduce)  # (the class: its ``reduces`` is read)
