"""The Cast Engine: one flit of i32 or f32 narrowed, repadded to one flit (book:
computing-tensors/cast-engine.md).

Its input packet is one 32-byte flit of ``i32`` or ``f32``; each element is converted to the
output type and the packet padded back to one flit of it (``Packet # F``, ``F`` the output
type's flit elements): an ``f32`` packet ``m![A]`` of 8 elements becomes the ``bf16``
packet ``m![A # 16]``.  Chip, Cluster, Slice and Time are the input's.

The conversions, as the guide's reference semantics do them (furiosa-opt-std
``float/bf16.rs``, ``cast.rs``): ``f32 -> bf16`` rounds to nearest even, flushes a subnormal
to a zero of its sign and makes every NaN the one quiet word ``0x7fc0``; ``i32 -> i8`` and
``i32 -> i16`` keep the low bits (two's complement wrap).  The fp8 targets and ``i4`` are
the guide's too; tcplan does not convert to them yet (docs/decisions.md item 97).

One flit per cycle per slice, never the bottleneck (the guide's Performance): its cycles are
its Time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model.numeric import NP_DTYPES
from tcplan.model.rules import Violation
from tcplan.model.tiers import Tensor

from .base import flit_elements, flit_violation, layout_violations, register

WHY = {"time": "the Cast Engine keeps Time", "packet": "the input's packet padded to one "
       "flit of the output type", "dtype": "the type the op casts to"}
#: the conversions tcplan runs (the guide's others: docs/decisions.md item 97)
CONVERTED = {("f32", "bf16"), ("i32", "i8"), ("i32", "i16")}
BF16_QUIET_NAN = 0x7FC0


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """``f32`` narrowed to ``bf16`` as the hardware does: round to nearest even, a
    subnormal to a zero of its sign, every NaN to ``0x7fc0``."""
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32)
    sub = ((bits & 0x7F800000) == 0) & ((bits & 0x007FFFFF) != 0)
    x = np.where(sub, np.where(bits >> 31 == 1, np.float32(-0.0), np.float32(0.0)), x)
    with np.errstate(invalid="ignore"):  # (a NaN: its word is set below)
        out = x.astype(NP_DTYPES["bf16"])
    nan = np.isnan(x)
    if nan.any():
        out = out.copy()
        out.view(np.uint16)[nan] = BF16_QUIET_NAN
    return out


def convert(x: np.ndarray, to: str) -> np.ndarray:
    """``x`` (``f32`` or ``i32`` values) converted to ``to`` as the Cast Engine does."""
    if to == "bf16":
        return f32_to_bf16(x)
    return np.asarray(x).astype(NP_DTYPES[to])  # (numpy's cast keeps the low bits)


@dataclass(frozen=True)
class Cast:
    """The Cast Engine, narrowing to ``to``."""

    to: str
    name: ClassVar[str] = "cast"
    out_tier: ClassVar[str] = "stream"
    rules: ClassVar[tuple[str, ...]] = ("cast-types", "flit-packet", "engine-spatial",
                                        "engine-layout")

    def output(self, inp: Tensor, declared: Tensor | None = None) -> Tensor:
        f = flit_elements(self.to)
        p = inp.dims["packet"]
        packet = p if p.size == f else p.pad(f)
        return replace(inp.with_dims(packet=packet), dtype=self.to)

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        bad = self.type_violations(inp.dtype)
        bad += flit_violation("Cast", "input", inp, "collect the stream first (one flit "
                              "per packet)")
        if bad:
            return bad
        return layout_violations("Cast", self.output(inp, out), out, WHY)

    def type_violations(self, have: str) -> list[Violation]:
        """``cast-types``: a conversion the engine has (and tcplan runs)."""
        if have in hw.CAST_ENGINE_CASTS and self.to in hw.CAST_ENGINE_CASTS[have] and \
                (have, self.to) in CONVERTED:
            return []
        known = have in hw.CAST_ENGINE_CASTS and self.to in hw.CAST_ENGINE_CASTS[have]
        fix = ("tcplan converts f32 to bf16 and i32 to i8 or i16 (docs/decisions.md item "
               "97)" if known else "cast an i32 or f32 stream (a contraction's or a vector "
                                   "chain's output) to one of its narrower types")
        return [Violation("cast-types", (f"{have} -> {self.to}",), {
            "have": have, "want": self.to, "fix": fix})]

    def run(self, values: np.ndarray, inp: Tensor | None = None, out: Tensor | None = None
            ) -> np.ndarray:
        units, time, packet = values.shape
        out_type = NP_DTYPES[self.to]
        f = hw.FLIT_BYTES // out_type.itemsize
        flits = np.zeros((units, time, f), out_type)
        flits[:, :, :packet] = convert(values, self.to)
        return flits

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        return {}

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        return inp.dims["time"].size


def make(to: str) -> Cast:
    return Cast(to)


register(Cast.name, make)
