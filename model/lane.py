"""The Contraction Engine's Lane Folder (seed 004; docs/hardware.md section 8).

``contract_lane(mode)`` removes the Lane dimension without summing: Interleaved moves Lane into
the output packet (``OutTime = [Time, Packet]``, ``OutPacket = [Lane # 8]``), Sequential into
the output time (``OutTime = [Time, Lane, PadPacket / 8]``, ``OutPacket = [PadPacket % 8]`` with
``PadPacket = Packet # align_up(Packet::SIZE, 8)``).  :func:`fold` validates a fold, derives the
output mappings, checks declared ones position by position, and gives the index map the executor
applies and the folder's cycles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import hardware as hw
from . import limits
from .mapping import LIVE, TOP, Mapping, join
from .rules import fail
from .vector import Arrangement

MODES = ("interleaved", "sequential")


@dataclass
class LaneFold:
    mode: str
    lane: Mapping
    time: Mapping
    packet: Mapping
    out_time: Mapping
    out_packet: Mapping
    #: (OutTime x OutPacket) -> flat input position over (Lane, Time, Packet); -1 filler
    src: np.ndarray
    entry: dict[str, np.ndarray]  # axis -> (L, T, P) coordinates
    entry_status: np.ndarray  # (L, T, P)
    exit: Arrangement

    @property
    def cycles(self) -> int:
        """One output flit per cycle; the folder adds no latency beyond draining (seed 004)."""
        return self.out_time.size

    def breakdown(self) -> dict[str, Any]:
        live = int((self.entry_status == LIVE).sum())
        per = (self.lane.size if self.mode == "interleaved"
               else min(self.packet.size, hw.LANE_FOLD_BUS))
        return {"flits": self.cycles, "elements_per_cycle": per,
                "bus_width": hw.LANE_FOLD_BUS, "live_elements": live,
                "utilization": round(per / hw.LANE_FOLD_BUS, 4)}

    def text(self) -> str:
        return (f"Lane Folder ({self.mode}): Lane {self.lane.text()}, Time {self.time.text()}, "
                f"Packet {self.packet.text()} -> OutTime {self.out_time.text()}, OutPacket "
                f"{self.out_packet.text()}; {self.cycles:,} cycles "
                f"({self.breakdown()['elements_per_cycle']} of {hw.LANE_FOLD_BUS} lanes per "
                "cycle)")

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "out_time": self.out_time.text(),
                "out_packet": self.out_packet.text(), "cycles": self.cycles,
                "breakdown": self.breakdown()}


def fold(axes: dict[str, int], lane: Mapping, time: Mapping, packet: Mapping, mode: str,
         out_time: Mapping | None = None, out_packet: Mapping | None = None) -> LaneFold:
    if packet.size not in hw.LANE_FOLD_PACKETS:
        raise fail("lane-fold-packet", (packet.text(),), packet=packet.text(),
                   size=packet.size)
    if lane.size not in hw.LANE_FOLD_LANES:
        raise fail("lane-fold-lanes", (lane.text(),), lane=lane.text(), size=lane.size)
    L, T, P = lane.size, time.size, packet.size
    bus = hw.LANE_FOLD_BUS
    # the index map below has one entry per output lane of every output flit
    limits.check(T * max(L * -(-P // bus), P) * bus, limits.EVAL_MAX_POSITIONS,
                 "the Lane Folder's index map", "positions",
                 {f"time {time.text()}": T, f"packet {packet.text()}": P,
                  f"lane {lane.text()}": L}, limits.EVALUATION)
    if mode == "interleaved":
        want_t = join([time, packet])
        want_p = lane.pad(bus)
        # out[t * P + p, l] = in[l, t, p]
        t, p, l_ = np.meshgrid(np.arange(T), np.arange(P), np.arange(bus), indexing="ij")
        src = np.where(l_ < L, (l_ * T + t) * P + p, -1).reshape(T * P, bus)
    else:
        pp = -(-P // bus) * bus
        want_t = join([time, lane, packet.pad(pp) / bus])
        want_p = packet.pad(pp) % bus
        t, l_, j, q = np.meshgrid(np.arange(T), np.arange(L), np.arange(pp // bus),
                                  np.arange(bus), indexing="ij")
        col = j * bus + q
        src = np.where(col < P, (l_ * T + t) * P + col, -1).reshape(T * L * (pp // bus), bus)
    # the input arrangement over (Lane, Time, Packet)
    lc, ls = lane.evaluate()
    tp = Arrangement.of(time, packet)
    cells = {}
    for a in set(lc) | set(tp.cells):
        cells[a] = lc.get(a, np.zeros(L, np.int64))[:, None, None] + \
            tp.cells.get(a, np.zeros((T, P), np.int64))[None]
    status = np.where(ls[:, None, None] != LIVE, ls[:, None, None], tp.status[None])
    status = status.astype(np.uint8)
    for a, c in cells.items():  # summed coordinates past the axis are padding
        status[(status == LIVE) & (c >= axes.get(a, 1 << 62))] = TOP
    for a in cells:
        cells[a] = np.where(status == LIVE, cells[a], 0)
    flat = Arrangement({a: c.reshape(1, -1) for a, c in cells.items()}, status.reshape(1, -1))
    nat = flat.take(src)
    ot = out_time if out_time is not None else want_t
    op = out_packet if out_packet is not None else want_p
    why = nat.mismatch(Arrangement.of(ot, op))
    if why:
        raise fail("lane-fold-shape", (ot.text(), op.text()), mode=mode.title(),
                   time=ot.text(), packet=op.text(), why=why, want_time=want_t.text(),
                   want_packet=want_p.text())
    return LaneFold(mode, lane, time, packet, ot, op, src, cells, status, nat)
