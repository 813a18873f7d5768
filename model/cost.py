"""The analytic DMA cycle model (docs/hardware.md sections 4-6; docs/decisions.md items 33 and 73).

One model, no per-example constants.  For every command of every engine:

* start-up: ~500 cycles per command;
* requests: each packet is ``ceil(bytes / 256)`` 256-byte AXI requests; an engine issues one
  request per cycle (256 B/cycle);
* DM side: each DMN moves 128 B/cycle; an engine's DM time is the busiest DMN's bytes / 128, so
  a pattern alternating the two DMNs of its pair reaches 256 B/cycle and one that stays in one
  DMN gets half;
* HBM side: the address decode of docs/hardware.md section 5 (stack bit, channel hash, bank group,
  bank, row); each channel serves its requests in issue order (engines interleaved), 16/3
  cycles per request (256 B at 48 GB/s, 1 GHz); a bank's first open of a row overlaps the
  other banks' transfers, a re-open of a row it had closed costs ~40 cycles, and a bank opens
  at most one row per 40 cycles (:func:`channel_time`, docs/decisions.md item 73); the
  busiest channel bounds every engine on that chip (engines share HBM);
  a read crossing a 256-byte boundary costs a second request; a partial or unaligned HBM write
  is a read-modify-write (an extra read of the block and a row turnaround);
* reads and writes pipeline across tiers; within one cluster's DM, and HBM -> HBM (Example 1),
  they serialize;
* PCIe moves 30 B/cycle;
* an aggregate takes the longest engine (its commands run back to back), or the HBM bound.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import hardware as hw
from . import limits

STARTUP = hw.DMA_STARTUP_CYCLES
REQUEST_BYTES = hw.DMA_REQUEST_BYTES
DMN_BYTES_PER_CYCLE = hw.DMN_BYTES_PER_CYCLE
HBM_SERVICE = hw.HBM_REQUEST_CYCLES
ROW_SWITCH = hw.HBM_ROW_SWITCH_CYCLES
HBM_CHANNELS = hw.HBM_CHANNELS
HBM_BANKS = hw.HBM_BANKS
PCIE_BYTES_PER_CYCLE = hw.PCIE_BYTES_PER_CYCLE
REQUESTS_PER_CYCLE = hw.DMA_ENGINE_BYTES_PER_CYCLE / hw.DMA_REQUEST_BYTES
DMN_SHIFT = hw.DM_DMN_STRIDE.bit_length() - 1  # address bits above a DMN's slices
CLUSTER_SHIFT = hw.DM_CLUSTER_STRIDE.bit_length() - 1


@dataclass
class CycleReport:
    cycles: int
    startup: int
    read: float
    write: float
    bottleneck: str
    penalties: list[str] = field(default_factory=list)
    engines: list[dict[str, Any]] = field(default_factory=list)
    hbm: dict[str, Any] = field(default_factory=dict)  # the hottest HBM channel's requests
    channels: list[dict[str, Any]] = field(default_factory=list)  # every HBM channel used
    dmns: list[dict[str, Any]] = field(default_factory=list)  # every DMN used
    banks: list[dict[str, Any]] = field(default_factory=list)  # per channel, its banks used

    def to_json(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "startup": self.startup, "read": round(self.read, 1),
                "write": round(self.write, 1), "bottleneck": self.bottleneck,
                "penalties": self.penalties, "engines": self.engines,
                **({"hbm": self.hbm} if self.hbm else {}),
                **({"hbm_channels": self.channels} if self.channels else {}),
                **({"hbm_banks": self.banks} if self.banks else {}),
                **({"dmns": self.dmns} if self.dmns else {})}


def _packet_addresses(entries, base: int, k: int, eb: int, packet: int) -> np.ndarray:
    """Byte address of every packet of a command on side ``k`` (1 read, 2 write)."""
    outer = _digits(entries, packet)
    n = limits.product(e[0] for e in outer)
    if n > limits.COST_MAX_PACKETS:
        raise limits.size_error(n, limits.COST_MAX_PACKETS, "a DMA command", "packets",
                                {f"loop entry {j}": e[0] for j, e in enumerate(outer)},
                                limits.COST_MODEL)
    addr = np.array([base], np.int64)
    for e in outer:
        addr = (addr[:, None] + np.arange(e[0], dtype=np.int64) * e[k] * eb).ravel()
    return addr


def _requests(addr: np.ndarray, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The 256-byte blocks each packet touches (a packet crossing a boundary touches more),
    and whether each block is only partly covered."""
    first = addr // REQUEST_BYTES
    last = (addr + nbytes - 1) // REQUEST_BYTES
    span = int((last - first).max()) + 1 if addr.size else 1
    blocks = first[:, None] + np.arange(span, dtype=np.int64)
    keep = blocks <= last[:, None]
    start = blocks * REQUEST_BYTES
    covered = (np.minimum(start + REQUEST_BYTES, (addr + nbytes)[:, None])
               - np.maximum(start, addr[:, None]))
    return start[keep], (covered < REQUEST_BYTES)[keep]


def _decode(addr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(channel 0..31 including the stack bit, bank id, row) of HBM byte addresses."""
    def bit(i: int) -> np.ndarray:
        return (addr >> i) & 1
    # (every channel bit at once: bit b of the XOR of the address shifted by each offset)
    xor = np.zeros_like(addr)
    for off in hw.HBM_CHANNEL_XOR_OFFSETS:
        xor ^= addr >> off
    ch = np.zeros_like(addr)
    for i, b in enumerate(hw.HBM_CHANNEL_BITS):
        ch |= ((xor >> b) & 1) << i
    channel = bit(hw.HBM_STACK_BIT) * 16 + ch
    bank = (bit(hw.HBM_BANK_BITS[0]) | bit(hw.HBM_BANK_BITS[1]) << 1
            | bit(hw.HBM_BANK_GROUP_BITS[0]) << 2 | bit(hw.HBM_BANK_GROUP_BITS[1]) << 3
            | bit(hw.HBM_SLICE_BIT) << 4)
    row = addr >> hw.HBM_ROW_LOW_BIT
    return channel, bank, row


@dataclass
class RowOpens:
    """Per HBM channel (arrays of 32): the requests it serves, the rows its banks open for
    the first time in the transfer (first opens), the rows they open again after closing
    them (re-opens), and the most opens of any one of its banks.  The same per bank
    (``bank_*``: arrays of 32 channels x 32 banks, the bank id of :func:`_decode`); the
    channel figures are their sums over the banks (the most opens: their maximum)."""

    requests: np.ndarray
    first: np.ndarray
    reopens: np.ndarray
    bank_opens: np.ndarray
    bank_requests: np.ndarray = field(
        default_factory=lambda: np.zeros((HBM_CHANNELS, HBM_BANKS)))
    bank_first: np.ndarray = field(default_factory=lambda: np.zeros((HBM_CHANNELS, HBM_BANKS)))
    bank_reopens: np.ndarray = field(
        default_factory=lambda: np.zeros((HBM_CHANNELS, HBM_BANKS)))

    def times(self) -> np.ndarray:
        """Each channel's busy time under docs/decisions.md item 73."""
        return channel_time(self.requests, self.reopens, self.bank_opens)


def channel_time(requests, reopens, bank_opens):
    """The HBM reading of docs/decisions.md item 73 (amending docs/hardware.md R12), in one
    place: every request costs its channel 16/3 cycles, a first open included (the activation
    overlaps the other banks' transfers); a re-open (a row its bank already closed) costs the
    serialized 40; and a bank opens at most one row per 40 cycles, so its opens x 40 bound
    the channel from below."""
    busy = requests * HBM_SERVICE + reopens * (ROW_SWITCH - HBM_SERVICE)
    return np.maximum(busy, bank_opens * ROW_SWITCH)


def row_opens(channel: np.ndarray, bank: np.ndarray, row: np.ndarray, stamp: np.ndarray
              ) -> RowOpens:
    """Classify every request, per (channel, bank) in issue order (``stamp``): a request
    opens a row when its bank's previous request was in another row (or it is the bank's
    first); an open is a first open when the bank has not opened that row before, else a
    re-open.  Counted per bank, summed per channel."""
    if not channel.size:
        z = np.zeros(HBM_CHANNELS)
        return RowOpens(z, z, z, z)
    order = np.lexsort((stamp, bank, channel))
    c, b, r = channel[order], bank[order], row[order]
    bank_of = c * HBM_BANKS + b
    new_bank = np.r_[True, bank_of[1:] != bank_of[:-1]]
    opens = new_bank | np.r_[False, r[1:] != r[:-1]]
    span = int(r.max()) + 1
    key = bank_of[opens] * span + r[opens]  # in issue order within each bank
    first = np.zeros(key.size, bool)
    first[np.unique(key, return_index=True)[1]] = True
    ob = bank_of[opens]
    grid = (HBM_CHANNELS, HBM_BANKS)

    def per_bank(ids: np.ndarray) -> np.ndarray:
        return np.bincount(ids, minlength=HBM_CHANNELS * HBM_BANKS).reshape(grid).astype(float)

    b_req, b_first, b_re = per_bank(bank_of), per_bank(ob[first]), per_bank(ob[~first])
    return RowOpens(b_req.sum(axis=1), b_first.sum(axis=1), b_re.sum(axis=1),
                    (b_first + b_re).max(axis=1), b_req, b_first, b_re)


def _hbm_time(reqs: list[tuple[int, np.ndarray, np.ndarray]], penalties: list[str],
              channels: list[dict[str, Any]] | None = None,
              banks: list[dict[str, Any]] | None = None
              ) -> tuple[float, dict[int, float], dict[str, Any]]:
    """Busiest channel's time over all requests (chip, byte addresses, issue stamps), and
    what its hottest channel did (requests, first opens, re-opens); every channel used is
    added to ``channels``, with the same numbers, and to ``banks`` with its banks used and
    their requests, first opens and re-opens (one list each, in bank order)."""
    worst = 0.0
    per_chip: dict[int, float] = {}
    hot_report: dict[str, Any] = {}
    by_chip: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for chip, addr, stamp in reqs:
        by_chip.setdefault(chip, []).append((addr, stamp))
    for chip, parts in by_chip.items():
        addr = np.concatenate([a for a, _ in parts])
        stamp = np.concatenate([s for _, s in parts])
        if not addr.size:
            continue
        channel, bank, row = _decode(addr)
        ro = row_opens(channel, bank, row, stamp)
        busy = ro.times()
        used = int((ro.requests > 0).sum())
        if channels is not None:
            channels += [{"chip": chip, "channel": c, "requests": int(ro.requests[c]),
                          "first_opens": int(ro.first[c]), "reopens": int(ro.reopens[c]),
                          "most_opens_of_a_bank": int(ro.bank_opens[c]),
                          "busy_cycles": round(float(busy[c]), 1)}
                         for c in np.flatnonzero(ro.requests).tolist()]
        if banks is not None:
            for c in np.flatnonzero(ro.requests).tolist():
                used_banks = np.flatnonzero(ro.bank_requests[c])
                banks.append({"chip": chip, "channel": c, "banks": used_banks.tolist(),
                              **{key: ro_bank[c, used_banks].astype(int).tolist()
                                 for key, ro_bank in (("requests", ro.bank_requests),
                                                      ("first_opens", ro.bank_first),
                                                      ("reopens", ro.bank_reopens))}})
        t = float(busy.max())
        per_chip[chip] = t
        hot = int(busy.argmax())
        if t > worst or not hot_report:
            worst = max(worst, t)
            hot_report = {"chip": chip, "channel": hot, "requests": int(ro.requests[hot]),
                          "first_opens": int(ro.first[hot]), "reopens": int(ro.reopens[hot]),
                          "most_opens_of_a_bank": int(ro.bank_opens[hot]),
                          "cycles": round(t, 1)}
        if ro.reopens[hot]:
            penalties.append(f"row re-opens on chip {chip} HBM channel {hot}: "
                             f"{int(ro.reopens[hot]):,} x {ROW_SWITCH} cycles (rows its banks "
                             f"had closed; {int(ro.first[hot]):,} first opens overlap)")
        stacks = np.unique((addr >> hw.HBM_STACK_BIT) & 1)
        if stacks.size == 1 and addr.size >= 32:
            penalties.append(f"chip {chip}: requests reach only {used} of 32 HBM channels "
                             f"(stack bit 8 never toggles: half the bandwidth)")
        elif used < 32 and addr.size >= 64:
            penalties.append(f"chip {chip}: requests reach only {used} of 32 HBM channels")
    return worst, per_chip, hot_report


def _serial(plan, e, c) -> bool:
    """Whether a command's read and write serialize: HBM -> HBM (Example 1) and within one
    cluster's DM; across tiers they pipeline."""
    src, dst = plan.source.tier, plan.destination.tier
    return src == dst == "hbm" or (src == dst == "dm" and e.read_chip == e.write_chip
                                   and (c.read_base >> CLUSTER_SHIFT)
                                   == (c.write_base >> CLUSTER_SHIFT))


def _data_time(plan, e, c, sides: dict[int, float]) -> float:
    """A command's data time from its read (1) and write (2) sides (:func:`_serial`)."""
    return sides[1] + sides[2] if _serial(plan, e, c) else max(sides[1], sides[2])


def dma_cycles(plan) -> CycleReport:
    """Cycles of a lowered DmaPlan."""
    eb = plan.elem_bytes
    src, dst = plan.source.tier, plan.destination.tier
    hbm_hbm = src == dst == "hbm"
    penalties: list[str] = []
    hbm_reqs: list[tuple[int, np.ndarray, np.ndarray]] = []
    engines, startup_total = [], 0
    dmn_bytes: dict[tuple[int, int], float] = {}  # (chip, cluster x 8 + DMN) -> bytes
    dmn_users: dict[tuple[int, int], set] = {}  # ... -> the engines reading or writing it
    worst_engine, worst_read, worst_write = 0.0, 0.0, 0.0
    for e in plan.engines:
        t_engine = 0.0
        stamp0: float = 0
        r_sum = w_sum = 0.0
        steps = []  # per command: its start-up, read, write and whether they serialize
        for c in e.commands:
            pbytes = c.packet * eb
            sides = {}
            for k, tier, base, chip in ((1, src, c.read_base, e.read_chip),
                                        (2, dst, c.write_base, e.write_chip)):
                paddr = _packet_addresses(c.entries, base, k, eb, c.packet)
                req, partial = _requests(paddr, pbytes)
                n = req.size
                t = n / REQUESTS_PER_CYCLE  # one 256-byte request per cycle per engine
                if plan.pcie:
                    t = max(t, paddr.size * pbytes / PCIE_BYTES_PER_CYCLE)
                if tier == "dm":
                    most, keys = _dmn_loads(paddr, pbytes, chip, dmn_bytes)
                    for key in keys:
                        dmn_users.setdefault(key, set()).add(tuple(e.engine))
                    t_dm = most / DMN_BYTES_PER_CYCLE
                    if t_dm > t and len(keys) == 1:
                        penalties.append(f"engine {e.engine}: {'reads' if k == 1 else 'writes'}"
                                         f" stay in one DMN: {t_dm:,.0f} cycles at 128 B/cycle")
                    t = max(t, t_dm)
                if tier == "hbm":
                    stamps = stamp0 + np.arange(n, dtype=np.int64)
                    if k == 2 and partial.any():  # partly covered blocks: read-modify-write
                        penalties.append(f"engine {e.engine}: {int(partial.sum()):,} HBM write "
                                         f"blocks are partial or unaligned: read-modify-write")
                        req = np.concatenate([req, req[partial]])
                        stamps = np.concatenate([stamps, stamps[partial]])
                    hbm_reqs.append((chip, req, stamps))
                sides[k] = t
            stamp0 += max(sides.values())
            data = _data_time(plan, e, c, sides)
            steps.append({"startup": STARTUP, "read": round(sides[1], 1),
                          "write": round(sides[2], 1),
                          "serial": _serial(plan, e, c)})
            r_sum += sides[1]
            w_sum += sides[2]
            t_engine += STARTUP + data
            startup_total += STARTUP
        engines.append({"engine": list(e.engine), "commands": len(e.commands),
                        "cycles": round(t_engine), "read_cycles": round(r_sum, 1),
                        "write_cycles": round(w_sum, 1), "bytes": sum(
                            limits.product(x[0] for x in _digits(c.entries, c.packet))
                            * c.packet * eb for c in e.commands), "timeline": steps})
        if t_engine > worst_engine:
            worst_engine, worst_read, worst_write = t_engine, r_sum, w_sum
    channels: list[dict[str, Any]] = []
    banks: list[dict[str, Any]] = []
    hbm, _, hot = _hbm_time(hbm_reqs, penalties, channels, banks)
    hbm_total = STARTUP + hbm  # the channels serve every engine of the chip
    if hbm_total > worst_engine:
        cycles, bottleneck = hbm_total, "HBM channels"
        if hot.get("most_opens_of_a_bank", 0) > 1 and not hot["reopens"] and \
                hot["most_opens_of_a_bank"] * ROW_SWITCH >= hot["requests"] * HBM_SERVICE:
            penalties.append(f"chip {hot['chip']} HBM channel {hot['channel']}: one bank "
                             f"opens {hot['most_opens_of_a_bank']:,} rows, at most one per "
                             f"{ROW_SWITCH} cycles")
    else:
        cycles = worst_engine
        serial_any = hbm_hbm or (src == dst == "dm")
        bottleneck = ("engine requests and DM" if not serial_any else
                      "serialized read and write")
    shared = _shared_dmn(dmn_bytes, dmn_users)
    if shared is not None and shared[0] > cycles:
        cycles, bottleneck = shared[0], "a DMN shared by several engines"
        penalties.append(shared[1])
    n_cmd_max = max((len(e.commands) for e in plan.engines), default=0)
    dmns = [{"chip": chip, "cluster": d // hw.DMNS_PER_CLUSTER,
             "dmn": d % hw.DMNS_PER_CLUSTER, "bytes": round(b),
             "cycles": round(b / DMN_BYTES_PER_CYCLE, 1)}
            for (chip, d), b in sorted(dmn_bytes.items())]
    return CycleReport(math.ceil(cycles), STARTUP * n_cmd_max, worst_read, worst_write,
                       bottleneck, list(dict.fromkeys(_summarize(penalties))), engines, hot,
                       channels, dmns, banks)


def _dmn_loads(paddr: np.ndarray, pbytes: int, chip: int,
               acc: dict[tuple[int, int], float], scale: float = 1.0
               ) -> tuple[float, list[tuple[int, int]]]:
    """One command side's bytes per DMN (a packet at each address; ``scale``: packets per
    sampled packet), added to ``acc`` by (chip, cluster x 8 + DMN) (docs/hardware.md R10):
    (the busiest DMN's bytes from this side, the DMNs it touches)."""
    dmn = paddr >> DMN_SHIFT
    low = int(dmn.min())
    per = np.bincount(dmn - low, minlength=1) * pbytes * scale
    keys = [(chip, low + off) for off in np.flatnonzero(per).tolist()]
    for key in keys:
        acc[key] = acc.get(key, 0.0) + float(per[key[1] - low])
    return float(per.max()), keys


def _shared_dmn(dmn_bytes: dict[tuple[int, int], float],
                dmn_users: dict[tuple[int, int], set]) -> tuple[float, str] | None:
    """A DMN moves 128 B/cycle for all its 32 slices (docs/hardware.md section 4), whichever
    engines read or write them: the busiest DMN's bytes over the transfer, at 128 B/cycle,
    after one start-up.  (An engine's own time counts only its bytes; this counts every
    engine's.)  None when no DMN is touched; else (cycles, the penalty's words)."""
    if not dmn_bytes:
        return None
    (chip, d), most = max(dmn_bytes.items(), key=lambda kv: kv[1])
    users = len(dmn_users[(chip, d)])
    t = STARTUP + most / DMN_BYTES_PER_CYCLE
    return t, (f"chip {chip} cluster {d // hw.DMNS_PER_CLUSTER} DMN "
               f"{d % hw.DMNS_PER_CLUSTER}: {most:,.0f} bytes from {users} engine(s) at 128 "
               f"B/cycle: {most / DMN_BYTES_PER_CYCLE:,.0f} cycles")


def _summarize(penalties: list[str]) -> list[str]:
    """One line per kind of penalty: the first instance and how many engines share it."""
    out: dict[str, list[str]] = {}
    for p in penalties:
        key = p.split(": ", 1)[-1] if p.startswith("engine") else p
        out.setdefault(key, []).append(p)
    lines = []
    for items in out.values():
        lines.append(items[0] + (f" (and {len(items) - 1} more like it)" if len(items) > 1
                                 else ""))
    return lines


# ---- the fast estimate (the planner's objective) -----------------------------------------------
#: the estimate samples this many blocks of consecutive packets per command ...
SAMPLE_BLOCKS = 32
#: ... of this many packets each (a whole command when it is smaller)
SAMPLE_BLOCK = 1024


#: below this share of sampled HBM requests with a same-bank predecessor in their block, the
#: sample cannot show the row switches and the estimate is the full model
MIN_SAME_BANK = 0.5


def _packets(plan) -> int:
    """The most packets one command of a plan has (what the full model lists at once)."""
    return max((limits.product(e[0] for e in _digits(c.entries, c.packet))
                for g in plan.engines for c in g.commands), default=0)


def total_packets(plan) -> int:
    """Every packet a plan's commands move, over all its engines."""
    return sum(limits.product(e[0] for e in _digits(c.entries, c.packet))
               for g in plan.engines for c in g.commands)


def _digits(entries, packet: int) -> list[tuple[int, int, int]]:
    return entries[:-1] if entries and packet > 1 and entries[-1][0] == packet else entries


def _packet_addr_at(outer, base: int, k: int, eb: int, idx: np.ndarray) -> np.ndarray:
    """Byte addresses of the packets with issue indices ``idx`` (mixed radix over the loops)."""
    addr = np.full(idx.shape, base, np.int64)
    rem = idx.copy()
    for e in reversed(outer):
        addr += (rem % e[0]) * (e[k] * eb)
        rem //= e[0]
    return addr


def _sample(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Packet indices of the sample (blocks spread evenly) and each one's block number."""
    if n <= SAMPLE_BLOCKS * SAMPLE_BLOCK:
        return np.arange(n, dtype=np.int64), np.zeros(n, np.int64)
    starts = (np.arange(SAMPLE_BLOCKS, dtype=np.int64) * (n - SAMPLE_BLOCK)) // (SAMPLE_BLOCKS - 1)
    idx = (starts[:, None] + np.arange(SAMPLE_BLOCK, dtype=np.int64)[None, :]).ravel()
    block = np.repeat(np.arange(SAMPLE_BLOCKS, dtype=np.int64), SAMPLE_BLOCK)
    return idx, block


def estimate(plan) -> CycleReport:
    """The fast estimate: see :func:`_estimate`."""
    return _estimate(plan, floor=False)


def floor(plan) -> int:
    """What :func:`estimate` gives at least, whatever the loop order of the same packets: the
    layout planner's bound for all plans that move the same packets (same DMA packet, same
    engines).  Where a command is estimated exactly (no sampling), everything but the HBM row
    switches is order-independent, and each HBM bank switches at least once per extra row it
    opens; where a command is sampled, the engine takes one request per packet's minimum
    256-byte blocks and the HBM load spreads evenly over 32 channels.  With a free
    destination Element the same holds for the plan whose Element ends in the DMA packet's
    run: every plan with that packet writes the same packets (the run is Element's
    innermost), in another order."""
    return _estimate(plan, floor=True).cycles


@dataclass
class _Sampled:
    """What :func:`_estimate` gathers over the commands: per chip, the sampled HBM requests
    (address, stamp, block, weight), the HBM rows the transfer reaches and (the floor) the
    least requests of sampled commands; the DMN loads; whether anything was sampled."""

    hbm: dict = field(default_factory=dict)
    row_sets: dict = field(default_factory=dict)
    spread: dict = field(default_factory=dict)
    dmn_load: dict = field(default_factory=dict)  # (chip, cluster x 8 + DMN) -> bytes
    sampled: bool = False


def _estimate(plan, floor: bool) -> CycleReport:
    """The cycle model of :func:`dma_cycles` evaluated on a sample: for every command, blocks
    of consecutive packets spread evenly over it stand for the whole (request counts, DMN
    loads, channel loads and the row-switch rate scale by packets / sampled packets).
    Milliseconds instead of a pass over every request: the planner ranks layouts with it, and
    `verify` reports it beside the full model (the two agree within 10% on every problem of
    the library, tests/test_layout_planner.py)."""
    got = _Sampled()
    worst_engine = 0.0
    n_cmd_max = max((len(e.commands) for e in plan.engines), default=0)
    for e in plan.engines:
        t_engine = stamp0 = 0.0
        for c in e.commands:
            sides = _command_sides(plan, e, c, floor, stamp0, got)
            stamp0 += max(sides.values())
            t_engine += STARTUP + _data_time(plan, e, c, sides)
        worst_engine = max(worst_engine, t_engine)
    worst_hbm = 0.0
    for chip in got.spread:  # floor: a chip with sampled commands
        total = got.spread[chip] + sum(float(p[3].sum()) for p in got.hbm.get(chip, []))
        worst_hbm = max(worst_hbm, total * HBM_SERVICE / HBM_CHANNELS)
    for chip, parts in got.hbm.items():
        # (a chip with sampled commands in the floor: its exact requests still bound their
        # channels; the sampled ones only add)
        reached = got.row_sets.get(chip)
        cost = _channels_estimate(plan, parts, floor, got,
                                  len(reached) if reached is not None else 1)
        if cost is None:
            return dma_cycles(plan)
        worst_hbm = max(worst_hbm, float(cost.max()))
    hbm_total = STARTUP + worst_hbm
    if hbm_total > worst_engine:
        cycles, bottleneck = hbm_total, "HBM channels"
    else:
        cycles, bottleneck = worst_engine, "engine requests and DM"
    dmn = got.dmn_load
    if dmn and STARTUP + max(dmn.values()) / DMN_BYTES_PER_CYCLE > cycles:
        cycles = STARTUP + max(dmn.values()) / DMN_BYTES_PER_CYCLE
        bottleneck = "a DMN shared by several engines"
    return CycleReport(math.ceil(cycles), STARTUP * n_cmd_max, 0.0, 0.0, bottleneck)


def _command_sides(plan, e, c, floor: bool, stamp0: float, got: _Sampled) -> dict[int, float]:
    """One command's read (1) and write (2) sides estimated on its sampled packets: each
    side's time, its HBM requests and DMN loads added to ``got``."""
    eb = plan.elem_bytes
    pbytes = c.packet * eb
    outer = _digits(c.entries, c.packet)
    n = 1
    for x in outer:
        n *= x[0]
    idx, block = _sample(n)
    scale = n / max(idx.size, 1)
    got.sampled = got.sampled or idx.size < n
    rough = floor and idx.size < n  # a sampled command, in the floor
    sides = {}
    for k, tier, base, chip in ((1, plan.source.tier, c.read_base, e.read_chip),
                                (2, plan.destination.tier, c.write_base, e.write_chip)):
        if rough:  # every packet takes at least its bytes' 256-byte blocks
            least = n * -(-pbytes // REQUEST_BYTES)
            t = least / REQUESTS_PER_CYCLE
            if plan.pcie:
                t = max(t, n * pbytes / PCIE_BYTES_PER_CYCLE)
            if tier == "hbm":  # a write not a whole block is read-modify-write
                rmw = n if k == 2 and pbytes % REQUEST_BYTES else 0
                got.spread[chip] = got.spread.get(chip, 0.0) + least + rmw
            sides[k] = t
            continue
        low = base % REQUEST_BYTES
        paddr, req, partial, rpp = _side_sample(tuple(map(tuple, outer)), low, k, eb, n,
                                                pbytes)
        paddr, req = paddr + (base - low), req + (base - low)
        n_req = rpp.mean() * n if rpp.size else 0.0
        t = n_req / REQUESTS_PER_CYCLE
        if plan.pcie:
            t = max(t, n * pbytes / PCIE_BYTES_PER_CYCLE)
        if tier == "dm":
            most, _ = _dmn_loads(paddr, pbytes, chip, got.dmn_load, scale)
            t = max(t, most / DMN_BYTES_PER_CYCLE)
        if tier == "hbm" and floor:  # (order-free: the requests, a weight of 1 each)
            if k == 2 and partial.any():  # read-modify-write: the block twice
                req = np.concatenate([req, req[partial]])
            got.hbm.setdefault(chip, []).append((req, None, None, np.ones(req.size)))
        elif tier == "hbm":
            first = np.repeat(np.cumsum(np.r_[0, rpp[:-1]]), rpp)
            j = np.arange(req.size) - first
            stamp = stamp0 + np.repeat(idx, rpp) * (rpp.mean() if rpp.size else 1) + j
            rblock = np.repeat(block, rpp)
            w = np.full(req.size, scale)
            if k == 2 and partial.any():  # read-modify-write: the block twice
                req = np.concatenate([req, req[partial]])
                stamp = np.concatenate([stamp, stamp[partial]])
                rblock = np.concatenate([rblock, rblock[partial]])
                w = np.concatenate([w, w[partial]])
            got.hbm.setdefault(chip, []).append((req, stamp, rblock, w))
            got.row_sets.setdefault(chip, set()).update(_rows(outer, base, k, eb, pbytes))
        sides[k] = t
    return sides


@functools.lru_cache(maxsize=256)
def _side_sample(outer: tuple, low: int, k: int, eb: int, n: int, pbytes: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A command side's sampled packets from a base of ``low`` (below one 256-byte block):
    their addresses, the blocks they touch, which of those are partly covered, and the
    blocks per packet.  From any base of the same offset in its block they are the same,
    moved by whole blocks (the engines of one plan, the plans of one search, share them);
    read-only."""
    idx, _ = _sample(n)
    paddr = _packet_addr_at(outer, low, k, eb, idx)
    req, partial = _requests(paddr, pbytes)
    got = (paddr, req, partial, _per_packet_requests(paddr, pbytes))
    for a in got:
        a.flags.writeable = False
    return got


def _channels_estimate(plan, parts: list, floor: bool, got: _Sampled, rows: int
                       ) -> np.ndarray | None:
    """One chip's HBM channel times from its sampled requests (``rows``: the rows the
    transfer reaches); None when the sample sees too few requests per bank to show their
    row switches (the caller then runs the full model)."""
    req = np.concatenate([p[0] for p in parts])
    w = np.concatenate([p[3] for p in parts])
    channel, bank, row = _decode(req)
    if floor:  # whatever the order: no re-opens, each bank opens each of its rows once
        # (every weight is 1 here, an exact command: the sums are the same in any order)
        return channel_time(np.bincount(channel, weights=w, minlength=HBM_CHANNELS), 0.0,
                            _bank_rows(channel, bank, row)[1])
    stamp = np.concatenate([p[1] for p in parts])
    blk = np.concatenate([p[2] for p in parts])
    order = np.lexsort((stamp, blk, bank, channel))
    ch, b, r, bl, ww = channel[order], bank[order], row[order], blk[order], w[order]
    same = np.r_[False, (ch[1:] == ch[:-1]) & (b[1:] == b[:-1]) & (bl[1:] == bl[:-1])]
    if not floor and got.sampled and same.mean() < MIN_SAME_BANK and \
            _packets(plan) <= limits.COST_MAX_PACKETS:
        return None
    load = np.bincount(ch, weights=ww, minlength=HBM_CHANNELS)
    # the rows each bank must open whatever the order (exact where nothing is sampled)
    banks, most_rows = _bank_rows(ch, b, r)
    if not got.sampled:  # every request is here, in issue order: the full model's reading
        return row_opens(channel, bank, row, stamp).times()
    switch = same & np.r_[False, r[1:] != r[:-1]]
    # a block's first request in a bank has no predecessor in the sample: give it the
    # switch rate its channel shows elsewhere
    n_same = np.bincount(ch[same], minlength=HBM_CHANNELS)
    n_sw = np.bincount(ch[switch], minlength=HBM_CHANNELS)
    rate = np.where(n_same > 0, n_sw / np.maximum(n_same, 1), 0.0)
    p_sw = np.where(same, switch.astype(float), rate[ch])
    sw = np.bincount(ch, weights=p_sw * ww, minlength=HBM_CHANNELS)
    # each bank opens every row the transfer reaches at least once (first opens), which
    # blocks of consecutive packets rarely see; the opens beyond are re-opens
    opens = np.minimum(load, np.maximum(sw + banks, banks * rows))
    reopens = np.maximum(0.0, opens - banks * rows)
    return channel_time(load, reopens, np.maximum(most_rows, opens / np.maximum(banks, 1)))


ROW_BYTES = 1 << hw.HBM_ROW_LOW_BIT
MAX_ROW_COMBOS = 1 << 16


def _rows(outer, base: int, k: int, eb: int, pbytes: int) -> set[int]:
    """The HBM rows a command's packets reach: the loops that step by a row or more are
    enumerated (up to MAX_ROW_COMBOS combinations), the others only widen the span."""
    big = [e for e in outer if abs(e[k] * eb) >= ROW_BYTES]
    small = [e for e in outer if abs(e[k] * eb) < ROW_BYTES]
    lo = sum(min(0, (e[0] - 1) * e[k] * eb) for e in small)
    hi = sum(max(0, (e[0] - 1) * e[k] * eb) for e in small) + pbytes - 1
    combos = 1
    for e in big:
        combos *= e[0]
    if combos > MAX_ROW_COMBOS:
        big = big[-int(math.log2(MAX_ROW_COMBOS)):]  # the innermost few; a lower estimate
    starts = np.array([base], np.int64)
    for e in big:
        starts = (starts[:, None] + np.arange(e[0], dtype=np.int64) * e[k] * eb).ravel()
    out: set[int] = set()
    for a in np.unique((starts + lo) // ROW_BYTES):
        out.add(int(a))
    for a in np.unique((starts + hi) // ROW_BYTES):
        out.add(int(a))
    return out


#: the most rows a transfer's span may have for :func:`_bank_rows` to mark them in a table
BANK_ROWS_DENSE = 256


def _bank_rows(channel: np.ndarray, bank: np.ndarray, row: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per channel: how many of its banks the requests reach, and the most distinct rows
    one of them is asked for (each is opened at least once, whatever the order)."""
    bank_of = channel * HBM_BANKS + bank
    lo = int(row.min()) if row.size else 0
    span = int(row.max()) - lo + 1 if row.size else 1
    if span <= BANK_ROWS_DENSE:  # (a table of every bank's rows in the span: no sort)
        seen = np.zeros((HBM_CHANNELS * HBM_BANKS, span), bool)
        seen[bank_of, row - lo] = True
        per_bank = seen.sum(axis=1).reshape(HBM_CHANNELS, HBM_BANKS)
    else:
        per_bank = np.bincount(np.unique(bank_of * span + row - lo) // span,
                               minlength=HBM_CHANNELS * HBM_BANKS
                               ).reshape(HBM_CHANNELS, HBM_BANKS)
    return (per_bank > 0).sum(axis=1).astype(float), per_bank.max(axis=1).astype(float)


def _per_packet_requests(addr: np.ndarray, nbytes: int) -> np.ndarray:
    first = addr // REQUEST_BYTES
    last = (addr + nbytes - 1) // REQUEST_BYTES
    return (last - first + 1).astype(np.int64)


def engine_floor(plan) -> tuple[int, int]:
    """What :func:`estimate` gives at least for every plan whose engines move the same bytes
    to and from the same DM addresses, whatever the order, the packet and either side's
    layout in HBM: the busiest engine's start-up, then per side its bytes at one 256-byte
    request per cycle, at 30 B/cycle over PCIe, and in DM over the DMNs it touches at
    128 B/cycle each (read and write add up where they serialize).  Also the most bytes an
    engine moves in requests (twice where they serialize): with packets of ``P < 256``
    bytes it takes at least that many bytes / ``P`` requests.  The outer model of a free HBM
    source prices an option with them (planner/bits.py)."""
    eb = plan.elem_bytes
    worst, most = 0.0, 0
    for e in plan.engines:
        moved = sum(limits.product(x[0] for x in _digits(c.entries, c.packet)) * c.packet * eb
                    for c in e.commands)
        sides = []
        for k, tier in ((1, plan.source.tier), (2, plan.destination.tier)):
            t = moved / hw.DMA_ENGINE_BYTES_PER_CYCLE
            if plan.pcie:
                t = max(t, moved / PCIE_BYTES_PER_CYCLE)
            if tier == "dm" and e.commands:  # the DMNs its addresses span, at most
                spans = [_span(c.entries, c.read_base if k == 1 else c.write_base, k, eb)
                         for c in e.commands]
                dmns = (max(h for _, h in spans) >> DMN_SHIFT) - (
                    min(lo for lo, _ in spans) >> DMN_SHIFT) + 1
                t = max(t, moved / (dmns * DMN_BYTES_PER_CYCLE))
            sides.append(t)
        serial = bool(e.commands) and all(
            _data_time(plan, e, c, {1: 1.0, 2: 1.0}) == 2.0 for c in e.commands)
        worst = max(worst, sum(sides) if serial else max(sides, default=0.0))
        most = max(most, moved * (2 if serial else 1))
    return math.ceil(STARTUP + worst), most


def _span(entries, base: int, k: int, eb: int) -> tuple[int, int]:
    """The lowest and highest byte address a command touches on side ``k``."""
    lo = base + sum(min(0, (e[0] - 1) * e[k]) for e in entries) * eb
    hi = base + sum(max(0, (e[0] - 1) * e[k]) for e in entries) * eb + eb - 1
    return lo, hi


def hbm_bytes(plan) -> tuple[dict[int, int], dict[int, int]]:
    """Per chip, the bytes a plan reads from HBM and writes to it (the same for every order
    and layout of the same transfer)."""
    eb = plan.elem_bytes
    out: tuple[dict[int, int], dict[int, int]] = ({}, {})
    for e in plan.engines:
        for c in e.commands:
            b = limits.product(x[0] for x in _digits(c.entries, c.packet)) * c.packet * eb
            for k, tier, chip in ((0, plan.source.tier, e.read_chip),
                                  (1, plan.destination.tier, e.write_chip)):
                if tier == "hbm":
                    out[k][chip] = out[k].get(chip, 0) + b
    return out


def dmn_floor(t) -> int:
    """What every move writing DM tensor ``t`` whole takes at least, whatever its engines
    and order: the busiest DMN's bytes (each live slice of it receives every live element
    of its part) at 128 B/cycle, after one start-up (docs/hardware.md section 4).  0 for a
    tensor not in DM.  The layout search prices an engine split's option with it."""
    if t.tier != "dm":
        return 0
    live = 1
    for f in t.dims["element"].factors:
        live *= f.count
    per: dict[tuple[int, int, int], int] = {}
    ok = [np.flatnonzero(t.dims[d].evaluate()[1] == 0).tolist()
          for d in ("chip", "cluster", "slice")]
    for chip in ok[0]:
        for cluster in ok[1]:
            for s in ok[2]:
                key = (chip, cluster, s // hw.SLICES_PER_DMN)
                per[key] = per.get(key, 0) + live * t.elem_bytes
    return math.ceil(STARTUP + max(per.values(), default=0) / DMN_BYTES_PER_CYCLE)


def lower_bound(plan) -> int:
    """Bytes over the bottleneck bandwidth, plus one start-up: the busiest engine at one
    256-byte request per cycle and each DMN it writes or reads at 128 B/cycle (per command,
    back to back), each DMN's bytes from every engine at 128 B/cycle, each chip's HBM
    requests spread evenly over the channels its addresses can reach (the bus floor), and
    each HBM bank opening each of its rows once, one per 40 cycles (order-independent).  No
    layout of the same tensors with the same engines beats it."""
    eb = plan.elem_bytes
    best = 0.0
    per_chip: dict[int, list[np.ndarray]] = {}
    dmn_all: dict[tuple[int, int], float] = {}
    for e in plan.engines:
        t_e = 0.0
        for c in e.commands:
            pbytes = c.packet * eb
            t_c = 0.0
            for k, tier, base, chip in ((1, plan.source.tier, c.read_base, e.read_chip),
                                        (2, plan.destination.tier, c.write_base,
                                         e.write_chip)):
                paddr = _packet_addresses(c.entries, base, k, eb, c.packet)
                n_bytes = paddr.size * pbytes
                t_c = max(t_c, n_bytes / hw.DMA_ENGINE_BYTES_PER_CYCLE)
                if tier == "dm":  # each DMN moves 128 B/cycle, whatever the order
                    most, _ = _dmn_loads(paddr, pbytes, chip, dmn_all)
                    t_c = max(t_c, most / DMN_BYTES_PER_CYCLE)
                if tier == "hbm":
                    req, _ = _requests(paddr, pbytes)
                    per_chip.setdefault(chip, []).append(req)
            t_e += t_c
        best = max(best, t_e)
    best = max(best, max(dmn_all.values(), default=0.0) / DMN_BYTES_PER_CYCLE)
    for reqs in per_chip.values():
        req = np.concatenate(reqs)
        channel, bank, row = _decode(req)
        reach = int((np.bincount(channel, minlength=HBM_CHANNELS) > 0).sum())
        # the bus floor over the channels the addresses reach, and every bank opens each
        # of its rows at least once, one per 40 cycles
        _, most_rows = _bank_rows(channel, bank, row)
        best = max(best, float(channel_time(req.size / max(reach, 1), 0.0,
                                            most_rows.max())))
    return math.ceil(STARTUP + best)
