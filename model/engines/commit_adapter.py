"""The Commit Adapter's trim and casts (book: computing-tensors/commit-adapter.md,
'Trimming' and 'Type Casting').

Every commit's first stage: of each 32-byte flit only the leading ``valid_size`` elements
are written to DM, the padding after them dropped.  ``.commit_trim::<OutPacket>()`` declares
the trimmed packet; the compiler derives ``valid_size`` from it, and its bytes are 8, 16, 24
or 32 (32: no trim).  The trimmed packet holds what the input's leading positions hold
(``m![W # 32]`` to ``m![W]``; ``m![N]`` of 16 to ``m![N = 8]``, its first 8).  Chip,
Cluster, Slice and Time are the input's; it adds nearly no latency: one flit a cycle.

After the trim, on the main context, the adapter may cast: ``commit_cast`` narrows ``f32`` to
``bf16`` (its one conversion; the Cast Engine makes every other), ``commit_cast_relu`` does
the same with a ReLU fused in (two hardware conversions, so two ops, as in the guide).  The
trimmed packet, in ``f32`` bytes, must be a multiple of the commit unit (8 bytes) times the
narrowing (2): 16 or 32 bytes, 4 or 8 elements (furiosa-opt-lower ``config_commit_cast``).
The packet keeps its elements (8 ``f32`` become 8 ``bf16``, 16 bytes); Chip, Cluster,
Slice and Time are the input's.  The ReLU keys on the sign bit after NaN is tested (a NaN
stays a NaN, the quiet word; ``-0.0`` and every negative become ``+0.0``), the narrowing is
the Cast Engine's (round to nearest even, subnormals to a signed zero).  One flit a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model.mapping import Mapping, held_indices
from tcplan.model.rules import Violation
from tcplan.model.tiers import Tensor

from .base import flit_violation, layout_violations, register
from .cast import f32_to_bf16

WHY = {"time": "the Commit Adapter keeps Time", "packet": "the input packet's leading "
       "valid_size elements", "dtype": "a trim keeps the type"}


@dataclass(frozen=True)
class CommitTrim:
    """The Commit Adapter's trim (no options: the declared output packet says how much)."""

    name: ClassVar[str] = "commit_trim"
    out_tier: ClassVar[str] = "stream"
    rules: ClassVar[tuple[str, ...]] = ("flit-packet", "commit-trim", "engine-layout",
                                        "engine-spatial")

    def output(self, inp: Tensor, declared: Tensor) -> Tensor:
        return inp.with_dims(packet=declared.dims["packet"])

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        bad = flit_violation("Commit Adapter", "input", inp, "trim a flit: collect or cast "
                             "the stream first")
        p, q = inp.dims["packet"], out.dims["packet"]
        nbytes = q.size * inp.elem_bytes
        if nbytes not in hw.COMMIT_TRIM_BYTES or q.size > p.size or \
                not _holds_prefix(p, q):
            bad.append(Violation("commit-trim", (q.text(),), {
                "packet": p.text(), "out": q.text(), "bytes": nbytes}))
        return bad + layout_violations("Commit Adapter", inp.with_dims(packet=q), out, WHY)

    def run(self, values: np.ndarray, inp: Tensor, out: Tensor) -> np.ndarray:
        return values[:, :, :out.dims["packet"].size]

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        return inp.dims["time"].size

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        return {"valid_size": out.dims["packet"].size}


def _holds_prefix(p: Mapping, q: Mapping) -> bool:
    """Does ``q`` hold, position by position, what ``p``'s first ``q.size`` positions
    hold?"""
    (cp, hp), (cq, hq) = held_indices(p), held_indices(q)
    n = q.size
    if not np.array_equal(hp[:n], hq):
        return False
    zero = np.zeros(max(p.size, n), np.int64)
    return all(np.array_equal(np.where(hq, cp.get(a, zero)[:n], 0),
                              np.where(hq, cq.get(a, zero)[:n], 0)) for a in set(cp) | set(cq))


register(CommitTrim.name, CommitTrim)

CAST_WHY = {"time": "the Commit Adapter keeps Time", "packet": "the Commit Adapter keeps "
            "the packet's elements", "dtype": "the type the op casts to"}


@dataclass(frozen=True)
class CommitCast:
    """The Commit Adapter's cast of a trimmed stream to ``to`` (``f32 -> bf16`` only)."""

    to: str
    name: ClassVar[str] = "commit_cast"
    relu: ClassVar[bool] = False
    out_tier: ClassVar[str] = "stream"
    rules: ClassVar[tuple[str, ...]] = ("commit-cast-types", "commit-cast-width",
                                        "engine-spatial", "engine-layout")

    def output(self, inp: Tensor, declared: Tensor | None = None) -> Tensor:
        return replace(inp, dtype=self.to)

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        if (inp.dtype, self.to) not in hw.COMMIT_ADAPTER_CASTS:
            return [Violation("commit-cast-types", (f"{inp.dtype} -> {self.to}",), {
                "op": self.name, "have": inp.dtype, "want": self.to})]
        p = inp.dims["packet"]
        nbytes = p.size * inp.elem_bytes
        unit = hw.COMMIT_BASE_BYTES * (inp.elem_bytes // hw.DTYPE_BYTES[self.to])
        legal = [n for n in hw.COMMIT_TRIM_BYTES if n % unit == 0]
        bad = [] if nbytes in legal else [Violation("commit-cast-width", (p.text(),), {
            "op": self.name, "packet": p.text(), "bytes": nbytes, "unit": unit,
            "legal": " or ".join(f"{n} B" for n in legal)})]
        return bad + layout_violations("Commit Adapter", self.output(inp), out, CAST_WHY)

    def run(self, values: np.ndarray, inp: Tensor | None = None, out: Tensor | None = None
            ) -> np.ndarray:
        x = np.asarray(values, np.float32)
        if self.relu:  # (on the sign bit, NaN tested first: -0.0 and negatives to +0.0)
            x = np.where(np.signbit(x) & ~np.isnan(x), np.float32(0.0), x)
        return f32_to_bf16(x)

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        return inp.dims["time"].size

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        return {}


@dataclass(frozen=True)
class CommitCastRelu(CommitCast):
    """The same cast with a ReLU fused in (``CommitF32ToBf16Relu``)."""

    name: ClassVar[str] = "commit_cast_relu"
    relu: ClassVar[bool] = True


register(CommitCast.name, CommitCast)
register(CommitCastRelu.name, CommitCastRelu)
