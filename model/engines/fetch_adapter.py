"""The Fetch Adapter's type cast: ``fetch_cast`` (book: computing-tensors/fetch-adapter.md,
'Type Casting').

Between the Fetch Engine and the Switch or Collect Engine, each element of the fetched
stream is converted to the output type; Chip, Cluster, Slice, Time and Packet are the
input's (the guide: 'preserving the Time and Packet mapping').  The conversions: ``i8`` and
``i16`` to ``i32`` (sign extended), ``bf16`` to ``f32`` (exact), ``f32`` to ``bf16`` (round
to nearest even, as the Cast Engine); the fp8 widenings are the guide's too, tcplan does not
run them yet (docs/decisions.md item 101).

Cycles: a cast's output per read fits one 32-byte flit (the guide's limit on ``read_size``),
so a packet of ``P`` output bytes passes in ``ceil(P / 32)`` cycles, plus the cast's latency
(the guide's '1 to 2 cycles': 2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model.numeric import NP_DTYPES
from tcplan.model.rules import Violation
from tcplan.model.tiers import Tensor

from .base import layout_violations, register
from .cast import f32_to_bf16

WHY = {"time": "the Fetch Adapter keeps Time", "packet": "the Fetch Adapter keeps the "
       "Packet (each element converted)", "dtype": "the type the op casts to"}
#: the conversions tcplan runs (the fp8 widenings: docs/decisions.md item 101)
CONVERTED = {("i8", "i32"), ("i16", "i32"), ("bf16", "f32"), ("f32", "bf16")}


@dataclass(frozen=True)
class FetchCast:
    """The Fetch Adapter, casting each element to ``to``."""

    to: str
    name: ClassVar[str] = "fetch_cast"
    out_tier: ClassVar[str] = "stream"
    rules: ClassVar[tuple[str, ...]] = ("fetch-cast-types", "engine-spatial",
                                        "engine-layout")

    def output(self, inp: Tensor, declared: Tensor | None = None) -> Tensor:
        return replace(inp, dtype=self.to)

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        have = inp.dtype
        if (have, self.to) not in CONVERTED:
            known = self.to in hw.FETCH_ADAPTER_CASTS.get(have, ())
            has = ", ".join(f"{a} -> {b}" for a, bs in hw.FETCH_ADAPTER_CASTS.items()
                            for b in bs)
            return [Violation("fetch-cast-types", (f"{have} -> {self.to}",), {
                "have": have, "want": self.to,
                "why": "the hardware has it, tcplan does not run it yet" if known else
                       f"it has {has} and no other",
                "fix": "tcplan runs i8 and i16 -> i32, bf16 -> f32 and f32 -> bf16 "
                       "(docs/decisions.md item 101)" if known else
                       "widen to i32 or f32 here and narrow later with the Cast Engine"})]
        return layout_violations("Fetch Adapter", self.output(inp), out, WHY)

    def run(self, values: np.ndarray, inp: Tensor | None = None, out: Tensor | None = None
            ) -> np.ndarray:
        if inp is not None:  # (a stream that only moved may hold bf16 as its u16 bits)
            values = np.ascontiguousarray(values).view(NP_DTYPES[inp.dtype])
        if self.to == "bf16":
            return f32_to_bf16(values)
        return np.asarray(values).astype(NP_DTYPES[self.to])  # (exact: a widening)

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        return {"CyclesPerPacket": self._per_packet(inp)}

    def _per_packet(self, inp: Tensor) -> int:
        out_bytes = inp.dims["packet"].size * hw.DTYPE_BYTES[self.to]
        return -(-out_bytes // hw.FLIT_BYTES)

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        return inp.dims["time"].size * self._per_packet(inp) + hw.FETCH_CAST_LATENCY


register(FetchCast.name, FetchCast)
