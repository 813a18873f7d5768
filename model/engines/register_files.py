"""The Collect Engine's writes into the register files: ``to_trf`` and ``to_vrf`` (book:
computing-tensors/register-files.md, collect-engine.md 'Register File Loading').

A collected stream (one 32-byte flit per packet) is stored into a slice's register file:

* ``to_trf``: the Tensor Register File, per slice 8 lanes x 2 banks x 128 rows; the stream's
  Time splits into ``Lane`` (its outer factors) and ``FlitsPerLane`` (the inner ones), each
  lane filled by that many consecutive flits: ``Lane = Time / FlitsPerLane``,
  ``Element = [Time % FlitsPerLane, Packet]``.  The user picks ``Lane`` (1, 2, 4 or 8 lanes);
  tcplan derives ``FlitsPerLane`` and the Element and prints them.  A store names its
  region: ``full`` (128 rows per bank, 8 KiB per lane) or a half (``first_half``,
  ``second_half``: 64 rows, 4 KiB per lane), the halves letting a store fill one while the
  Contraction Engine reads the other (double buffering).
* ``to_vrf``: the Vector Register File, 8 KiB per slice: ``Element = [Time, Packet]``.

Chip, Cluster and Slice are the stream's.  One flit per cycle: a store's cycles are its
flits.  ``run`` moves the flits: a slice's ``(time, packet)`` flits as ``(lane, element)``
rows, or as one row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model.mapping import join, split_inner
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import Tensor

from .base import SPATIAL, flit_violation, layout_violations, register

#: a TRF store's regions and the rows of a bank each holds (register-files.md 'Double
#: Buffering')
TRF_REGIONS = {"full": 1, "first_half": 2, "second_half": 2}
WHY_TRF = {"lane": "the outer factors of the stream's Time (Lane = Time / FlitsPerLane)",
           "element": "the inner factors of Time, then the Packet ([Time % FlitsPerLane, "
                      "Packet])", "dtype": "a store keeps the element type"}
WHY_VRF = {"element": "the stream's Time, then its Packet ([Time, Packet])",
           "dtype": "a store keeps the element type"}


def _register_tensor(inp: Tensor, tier: str, **dims) -> Tensor:
    return replace(inp, tier=tier, dims={**{d: inp.dims[d] for d in SPATIAL}, **dims},
                   address=0)


@dataclass(frozen=True)
class ToTrf:
    """A store of a collected stream into the TRF, in ``region``."""

    region: str = "full"
    name: ClassVar[str] = "to_trf"
    out_tier: ClassVar[str] = "trf"
    rules: ClassVar[tuple[str, ...]] = ("flit-packet", "trf-lanes", "register-capacity",
                                        "engine-spatial", "engine-layout")

    def output(self, inp: Tensor, declared: Tensor) -> Tensor:
        """The TRF tensor of ``declared``'s Lane count (``trf-lanes`` holding)."""
        time = inp.dims["time"]
        lane_outer, inner = split_inner(time, time.size // declared.dims["lane"].size)
        return _register_tensor(inp, "trf", lane=lane_outer,
                                element=join([inner, inp.dims["packet"]]))

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        bad = flit_violation("to_trf", "input", inp, "collect the stream first")
        bad += self.lane_violations(inp, out)
        if bad:
            return bad
        try:
            want = self.output(inp, out)
        except TcplanError as err:  # (the Lane cut inside a digit of Time)
            return [Violation("trf-lanes", err.violations[0].terms, {
                "lanes": out.dims["lane"].size, "time": inp.dims["time"].text(),
                "why": "the outer factors of Time do not split there"})]
        # (fewer active lanes see more rows each: 4 active lanes, twice a lane's 8 KiB;
        # book: computing-tensors/register-files.md 'Architecture')
        active = out.dims["lane"].size
        per_lane = hw.TRF_BYTES_PER_LANE * hw.MAX_LANES // active
        return capacity_violations(out, per_lane // TRF_REGIONS[self.region],
                                   f"a lane's {self.region} region with {active} active "
                                   "lane(s)") + \
            layout_violations("to_trf", want, out, WHY_TRF, ("lane", "element"))

    def lane_violations(self, inp: Tensor, out: Tensor) -> list[Violation]:
        """``trf-lanes``: 1, 2, 4 or 8 lanes, dividing the stream's Time."""
        lanes, time = out.dims["lane"].size, inp.dims["time"]
        why = ("not 1, 2, 4 or 8" if lanes not in hw.TRF_LANE_COUNTS else
               f"they do not divide Time's {time.size} flits" if time.size % lanes else "")
        if not why:
            return []
        return [Violation("trf-lanes", (out.dims["lane"].text(),), {
            "lanes": lanes, "time": time.text(), "why": why})]

    def run(self, values: np.ndarray, inp: Tensor, out: Tensor) -> np.ndarray:
        units, time, packet = values.shape
        lanes = out.dims["lane"].size
        return values.reshape(units, lanes, (time // lanes) * packet)

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        return {"FlitsPerLane": inp.dims["time"].size // out.dims["lane"].size}

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        return inp.dims["time"].size


@dataclass(frozen=True)
class ToVrf:
    """A store of a collected stream into the VRF."""

    name: ClassVar[str] = "to_vrf"
    out_tier: ClassVar[str] = "vrf"
    rules: ClassVar[tuple[str, ...]] = ("flit-packet", "register-capacity", "engine-spatial",
                                        "engine-layout")

    def output(self, inp: Tensor, declared: Tensor) -> Tensor:
        return _register_tensor(inp, "vrf", element=join([inp.dims["time"],
                                                          inp.dims["packet"]]))

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        bad = flit_violation("to_vrf", "input", inp, "collect the stream first")
        if bad:
            return bad
        return capacity_violations(out, hw.VRF_BYTES_PER_SLICE, "a slice's VRF") + \
            layout_violations("to_vrf", self.output(inp, out), out, WHY_VRF, ("element",))

    def run(self, values: np.ndarray, inp: Tensor | None = None, out: Tensor | None = None
            ) -> np.ndarray:
        units, time, packet = values.shape
        return values.reshape(units, time * packet)

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        return {}

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        return inp.dims["time"].size


def capacity_violations(out: Tensor, capacity: int, what: str) -> list[Violation]:
    """``register-capacity``: the tensor's Element (from its offset) fits ``capacity``."""
    need = out.address + out.dims["element"].size * out.elem_bytes
    if need <= capacity:
        return []
    return [Violation("register-capacity", (out.dims["element"].text(),), {
        "tensor": out.name, "tier": out.tier.upper(), "bytes": need, "what": what,
        "capacity": capacity})]


register(ToTrf.name, ToTrf)
register(ToVrf.name, ToVrf)
