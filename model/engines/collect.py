"""The Collect Engine: a packet normalized to one 32-byte flit (book:
computing-tensors/collect-engine.md).

Every engine after it consumes exactly one 32-byte flit per cycle.  Collect makes one of a
packet of any size in two steps:

1. **Pad** the packet to the next multiple of 32 bytes (``Packet # n``; skipped when it is
   one already);
2. **Split** it at the flit: the inner 32 bytes are the new Packet, the outer flit count
   joins Time as its innermost term (``Time, Packet # n / F`` and ``Packet # n % F``,
   ``F`` the flit's elements; skipped for a one-flit packet).

Chip, Cluster and Slice, and the element type, are the input's.  ``run`` does the same to
the values: zeros in the padding, each packet cut into flits, the flits of one packet in
consecutive time steps.  One flit per cycle per slice: its cycles are the output's Time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model.mapping import Mapping, join, same_holding, split_inner
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import Tensor

from .base import flit_elements, flit_violation, layout_violations, register

WHY = {"time": "the input's Time, then the packet's flits", "packet": "the inner flit of "
       "the packet padded to whole flits", "dtype": "Collect keeps the element type"}


def padded_packet(packet: Mapping, dtype: str) -> Mapping:
    """The packet padded to whole flits (itself when it is whole flits already)."""
    f = flit_elements(dtype)
    whole = -(-packet.size // f) * f
    return packet if whole == packet.size else packet.pad(whole)


def split_flits(packet: Mapping, flit: int) -> tuple[Mapping, Mapping]:
    """(outer, inner) of a padded packet at the flit: its digits where the cut falls on a
    digit boundary (:func:`~model.mapping.split_inner`), else ``packet / flit`` and
    ``packet % flit`` where those two hold what the packet holds (one padded axis cut
    part-way through its live values, the guide's ``B # 64``); else ``flit-split``.
    Post-condition (tested): ``join(outer, inner)`` holds what ``packet`` holds."""
    if packet.size == flit:  # (one flit: nothing to split)
        return join([]), packet
    try:
        return split_inner(packet, flit)
    except TcplanError:
        pass
    outer, inner = packet.div(flit), packet.mod(flit)
    if same_holding(join([outer, inner]), packet):
        return outer, inner
    raise TcplanError(Violation("flit-split", (packet.text(),), {
        "packet": packet.text(), "flit": flit}))


@dataclass(frozen=True)
class Collect:
    """The Collect Engine (no options: the hardware decides the output)."""

    name: ClassVar[str] = "collect"
    out_tier: ClassVar[str] = "stream"
    rules: ClassVar[tuple[str, ...]] = ("engine-spatial", "engine-layout", "flit-packet",
                                        "flit-split")

    def output(self, inp: Tensor, declared: Tensor | None = None) -> Tensor:
        outer, inner = split_flits(padded_packet(inp.dims["packet"], inp.dtype),
                                   flit_elements(inp.dtype))  # (or flit-split)
        time = inp.dims["time"] if outer.size == 1 else join([inp.dims["time"], outer])
        return inp.with_dims(time=time, packet=inner)

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        try:
            want = self.output(inp, out)
        except TcplanError as err:
            return err.violations
        return flit_violation("Collect", "output", out, "declare Packet "
                              f"{want.dims['packet'].text()}, the inner flit") + \
            layout_violations("Collect", want, out, WHY)

    def run(self, values: np.ndarray, inp: Tensor | None = None, out: Tensor | None = None
            ) -> np.ndarray:
        units, time, packet = values.shape
        f = hw.FLIT_BYTES // values.itemsize  # (the flit is bytes: 32 of them)
        whole = -(-packet // f) * f
        padded = np.zeros((units, time, whole), values.dtype)
        padded[:, :, :packet] = values
        return padded.reshape(units, time * (whole // f), f)

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        return {}

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        return out.dims["time"].size


register(Collect.name, Collect)
