"""The Commit Adapter's trim (book: computing-tensors/commit-adapter.md, 'Trimming').

Every commit's first stage: of each 32-byte flit only the leading ``valid_size`` elements
are written to DM, the padding after them dropped.  ``.commit_trim::<OutPacket>()`` declares
the trimmed packet; the compiler derives ``valid_size`` from it, and its bytes are 8, 16, 24
or 32 (32: no trim).  The trimmed packet holds what the input's leading positions hold
(``m![W # 32]`` to ``m![W]``; ``m![N]`` of 16 to ``m![N = 8]``, its first 8).  Chip,
Cluster, Slice and Time are the input's; it adds nearly no latency: one flit a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model.mapping import Mapping, held_indices
from tcplan.model.rules import Violation
from tcplan.model.tiers import Tensor

from .base import flit_violation, layout_violations, register

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
