"""Memory tiers, their spatial and temporal dimensions, placement rules, addresses and tracing.

Tiers (seed 001; docs/hardware.md section 3):

=========  =========================================  ==============================
tier       dimensions                                 capacity per unit
=========  =========================================  ==============================
host       Element                                    host memory
hbm        Chip, Element                              48 GB per chip
dm         Chip, Cluster, Slice, Element              512 KB per slice
trf        Chip, Cluster, Slice, Lane, Element        8 KB per lane
vrf        Chip, Cluster, Slice, Element              8 KB per slice
stream     Chip, Cluster, Slice, Time, Packet         Time unbounded
=========  =========================================  ==============================

A tensor *holds* a mathematical tensor T when every live position stores T at the index formed by
adding the partial indices of all its dimension mappings (docs/hardware.md section 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from . import hardware as hw
from .mapping import Mapping, join, number
from .rules import TcplanError, Violation

TIER_DIMS: dict[str, tuple[str, ...]] = {
    "host": ("element",),
    "hbm": ("chip", "element"),
    "dm": ("chip", "cluster", "slice", "element"),
    "trf": ("chip", "cluster", "slice", "lane", "element"),
    "vrf": ("chip", "cluster", "slice", "element"),
    "stream": ("chip", "cluster", "slice", "time", "packet"),
}
#: tiers the simulator holds as the values an op leaves there (the Tensor Unit's stream and
#: its register files), not in simulated memories: the op that makes one checks it
VALUE_TIERS = ("stream", "trf", "vrf")
#: dimensions a tensor must give; the others default (chip: m![1 # chips]; cluster: m![1 # 2]
#: on SRAM tiers, docs/hardware.md R4; m![1] on streams)
REQUIRED_DIMS: dict[str, tuple[str, ...]] = {
    "host": ("element",),
    "hbm": ("element",),
    "dm": ("slice", "element"),
    "trf": ("slice", "lane", "element"),
    "vrf": ("slice", "element"),
    "stream": ("time", "packet"),
}
#: capacity per unit: (bytes, unit name, what to spread over, the dimension to grow)
CAPACITY = {
    "hbm": (hw.HBM_BYTES_PER_CHIP, "chip", "chips", "Chip"),
    "dm": (hw.DM_BYTES_PER_SLICE, "slice", "slices", "Slice"),
    "trf": (hw.TRF_BYTES_PER_LANE, "lane", "lanes or slices", "Lane or Slice"),
    "vrf": (hw.VRF_BYTES_PER_SLICE, "slice", "slices", "Slice"),
}
DIM_TITLES = {"chip": "Chip", "cluster": "Cluster", "slice": "Slice", "lane": "Lane",
              "element": "Element", "time": "Time", "packet": "Packet"}


@dataclass
class Tensor:
    """A tensor (or stream) placed on a tier: one mapping per dimension."""

    name: str
    tier: str
    dtype: str
    dims: dict[str, Mapping]
    address: int = 0  # bytes: HBM per-chip address; DM/TRF/VRF offset in each slice/lane
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def elem_bytes(self) -> int:
        return hw.DTYPE_BYTES[self.dtype]

    def describe(self) -> str:
        parts = ", ".join(f"{DIM_TITLES[d]} {m.text()}" for d, m in self.dims.items())
        return f"{self.tier.upper()} {self.name} <{self.dtype}, {parts}>"

    def with_dims(self, **dims: Mapping) -> "Tensor":
        """The same tensor with the named dimensions' mappings replaced."""
        return replace(self, dims={**self.dims, **dims})

    def move(self, term: Mapping, src: str, dst: str, inner: bool = True) -> "Tensor":
        """``term`` (one of ``src``'s terms) moved to dimension ``dst``, as its innermost
        term (``inner``) or its outermost: a digit moved from Slice to Time, say.
        Post-condition (tested): the tensor holds the same indices, each as often."""
        if term not in self.dims[src].terms:
            raise ValueError(f"{term.text()} is not a term of {self.name}'s {src} "
                             f"{self.dims[src].text()}")
        moved = self.dims[src].drop(term)
        to = self.dims[dst]
        return self.with_dims(**{src: moved, dst: join([to, term] if inner else [term, to])})


def default_dim(tier: str, dim: str, chips: int) -> Mapping:
    """The mapping a tensor gets for a dimension it does not give."""
    if dim == "chip":
        return number(1).pad(chips) if chips > 1 else number(1)
    if dim == "cluster" and tier != "stream":
        return number(1).pad(hw.CLUSTERS_PER_CHIP)
    return number(1)


# ---------------------------------------------------------------------------------------
# Placement rules
# ---------------------------------------------------------------------------------------
def placement_violations(t: Tensor, chips: int) -> list[Violation]:
    """Every tier rule the tensor breaks (seed 001 "제약 조건"; docs/hardware.md R4)."""
    out: list[Violation] = []
    chip = t.dims.get("chip")
    if chip is not None and chip.size != chips:
        out.append(Violation("chip-count", (chip.text(),), {
            "tensor": t.name, "mapping": chip.text(), "size": chip.size, "chips": chips,
            "inner": chip.body()}))
    cluster = t.dims.get("cluster")
    if cluster is not None and cluster.size not in hw.CLUSTER_SIZES:
        out.append(Violation("cluster-size", (cluster.text(),), {
            "tensor": t.name, "mapping": cluster.text(), "size": cluster.size}))
    sl = t.dims.get("slice")
    if sl is not None and sl.size not in hw.SLICE_SIZES:
        pad = next((s for s in hw.SLICE_SIZES if s >= sl.size), None)
        hint = (f"pad the Slice mapping with #, e.g. m![{sl.body()} # {pad}]" if pad else
                f"a Slice holds at most {hw.SLICE_SIZES[-1]} slices: move digits of "
                f"{sl.body()} to another dimension (Element, Cluster, Chip)")
        out.append(Violation("slice-size", (sl.text(),), {
            "tensor": t.name, "mapping": sl.text(), "size": sl.size, "hint": hint}))
    lane = t.dims.get("lane")
    if lane is not None and lane.size > hw.MAX_LANES:
        out.append(Violation("lane-limit", (lane.text(),), {
            "tensor": t.name, "mapping": lane.text(), "size": lane.size}))
    if t.tier in CAPACITY:
        cap, unit, spread, dim = CAPACITY[t.tier]
        el = t.dims["element"]
        nbytes = el.size * t.elem_bytes
        # addresses are offsets inside each chip, slice or lane: the tensor must end inside it
        end = nbytes + t.address
        if end > cap:
            where = f" from offset {t.address:,}" if t.address else ""
            out.append(Violation("capacity", (el.text(),), {
                "tensor": t.name, "mapping": el.text(), "elements": el.size,
                "elem_bytes": t.elem_bytes, "bytes": end, "unit": unit, "capacity": cap,
                "spread": spread, "dim": dim, "where": where}))
    overlap = dimension_overlap(t)
    if overlap:
        out.append(Violation("overlapping-dimensions", (), {"tensor": t.name,
                                                            "detail": overlap}))
    return out


#: the tier rules a chain or lane fold keeps on its stream and operands (a stream's Slice
#: selects slices; the VRF's own capacity is the rule vrf-capacity)
CHAIN_RULES = ("chip-count", "cluster-size", "lane-limit", "overlapping-dimensions")


def require_placement(tensors, chips: int, rules: tuple[str, ...] = CHAIN_RULES) -> None:
    """Raise every one of ``rules`` that the tensors break."""
    found = [v for t in tensors for v in placement_violations(t, chips) if v.rule in rules]
    if found:
        raise TcplanError(found)


def dimension_overlap(t: Tensor) -> str | None:
    """Text describing two dimensions that carry overlapping digits of an axis, or None."""
    spans: dict[str, list[tuple[int, int, str, str]]] = {}
    for d, m in t.dims.items():
        for f in m.factors:
            if f.axis is None or f.count <= 1:
                continue
            size = m.axes[f.axis]
            hi = min(f.hi, size)
            spans.setdefault(f.axis, []).append((f.lo, hi, d, f.label(m.axes)))
    for a, lst in spans.items():
        lst.sort()
        for (_, hi1, d1, l1), (lo2, hi2, d2, l2) in zip(lst, lst[1:]):
            if hi1 > lo2:
                return (f"{DIM_TITLES[d1]} term {l1} and {DIM_TITLES[d2]} term {l2} both carry "
                        f"{a} digits [{lo2}, {min(hi1, hi2)})")
    return None


# ---------------------------------------------------------------------------------------
# Addresses
# ---------------------------------------------------------------------------------------
#: an int, or a numpy array of them (every slice's address at once)
Ints = TypeVar("Ints", int, np.ndarray)


def dm_address(cluster: Ints, slice_: Ints, offset: int) -> Ints:
    """DM virtual address of byte ``offset`` in slice ``slice_`` (0..255) of ``cluster``
    (docs/hardware.md R10); elementwise over arrays of clusters and slices."""
    dmn, in_dmn = divmod(slice_, hw.SLICES_PER_DMN)
    return ((cluster * hw.DMNS_PER_CLUSTER + dmn) * hw.SLICES_PER_DMN + in_dmn) \
        * hw.DM_SLICE_STRIDE + offset


def hbm_decode(addr: int) -> dict[str, int]:
    """The HBM address decode of docs/hardware.md section 5 (docs/hardware.md R11)."""
    def bit(i: int) -> int:
        return (addr >> i) & 1
    channel = 0
    for i, b in enumerate(hw.HBM_CHANNEL_BITS):
        v = 0
        for off in hw.HBM_CHANNEL_XOR_OFFSETS:
            v ^= bit(b + off)
        channel |= v << i
    return {
        "stack": bit(hw.HBM_STACK_BIT),
        "channel": channel,
        "global_channel": bit(hw.HBM_STACK_BIT) * 16 + channel,
        "bank_group": bit(hw.HBM_BANK_GROUP_BITS[0]) | bit(hw.HBM_BANK_GROUP_BITS[1]) << 1,
        "bank": bit(hw.HBM_BANK_BITS[0]) | bit(hw.HBM_BANK_BITS[1]) << 1,
        "slice": bit(hw.HBM_SLICE_BIT),
        "row": addr >> hw.HBM_ROW_LOW_BIT,
    }


# ---------------------------------------------------------------------------------------
# Index tracing
# ---------------------------------------------------------------------------------------
def position_of(m: Mapping, index: dict[str, int]) -> tuple[int | None, dict[str, int]]:
    """Where ``m`` puts the digits of ``index`` it carries: (position, coordinates used), or
    (None, ...) when the index needs a digit value the mapping does not hold (padding range,
    a sliced digit)."""
    pos = 0
    used: dict[str, int] = {}
    for f in m.factors:
        if f.axis is None:
            d = 0  # broadcast or padding-only digit: the first copy
        else:
            d = (index.get(f.axis, 0) // f.lo) % f.radix if f.lo else 0
            if d >= f.count:
                return None, used
            used[f.axis] = used.get(f.axis, 0) + d * f.lo
        pos = pos * f.size + d
    return pos, used


def trace(t: Tensor, index: dict[str, int]) -> dict[str, Any]:
    """Where tensor index ``index`` lives in ``t``: a position per dimension, plus the address
    (or time step and packet lane for a stream).  ``held`` is False when ``t`` holds a
    sub-tensor without this index."""
    out: dict[str, Any] = {"tensor": t.name, "tier": t.tier}
    covered: dict[str, int] = {}
    for d, m in t.dims.items():
        pos, used = position_of(m, index)
        if pos is None:
            out["held"] = False
            out["reason"] = f"{DIM_TITLES[d]} {m.text()} does not hold this index"
            return out
        out[d] = pos
        for a, v in used.items():
            covered[a] = covered.get(a, 0) + v
    missing = {a: v - covered.get(a, 0) for a, v in index.items() if v != covered.get(a, 0)}
    if missing:
        out["held"] = False
        out["reason"] = ("the tensor holds a sub-tensor: no dimension carries "
                         + ", ".join(f"{a} = {v}" for a, v in missing.items()))
        return out
    out["held"] = True
    if t.tier == "stream":
        out["time"] = out.pop("time")
        out["packet"] = out.pop("packet")
        return out
    offset = t.address + out["element"] * t.elem_bytes
    out["element_offset"] = out["element"]
    out["byte_offset"] = offset
    if t.tier == "hbm":
        out["byte_address"] = offset
        out["hbm"] = hbm_decode(offset)
    elif t.tier in ("dm", "trf", "vrf"):
        s = out.get("slice", 0)
        out["dmn"] = s // hw.SLICES_PER_DMN
        if t.tier == "dm":
            out["byte_address"] = dm_address(out.get("cluster", 0), s, offset)
    return out


def free_address(t: Tensor, lo: int, hi: int, align: int,
                 taken: tuple[int, int] | None = None) -> int:
    """The address of an HBM tensor whose address is free: the lowest multiple of ``align``
    in ``[lo, hi)`` that holds its bytes and stays clear of ``taken`` (another tensor's
    ``[start, end)`` on the same chip), preferring one aligned past its own size (a power of
    two) so that its digits land on whole address bits (docs/decisions.md item 78).
    Raises ``hbm-address-range`` when the bytes do not fit at all, ``hbm-address-align``
    when no aligned address leaves room."""
    size = t.dims["element"].size * t.elem_bytes
    if size > hi - lo:
        raise TcplanError([Violation("hbm-address-range", (t.name,), {
            "tensor": t.name, "bytes": size, "lo": lo, "hi": hi, "room": max(hi - lo, 0),
            "capacity": hw.HBM_BYTES_PER_CHIP})])
    natural = 1 << max(size - 1, 0).bit_length()
    for step in (align * natural // math.gcd(align, natural), align):
        at = -(-lo // step) * step
        while at + size <= hi:
            if taken is None or at + size <= taken[0] or at >= taken[1]:
                return at
            at = -(-taken[1] // step) * step  # past the other tensor
    besides = (f" clear of the other tensor's bytes [{taken[0]:,}, {taken[1]:,})"
               if taken else "")
    raise TcplanError([Violation("hbm-address-align", (t.name,), {
        "tensor": t.name, "align": align, "lo": lo, "hi": hi, "bytes": size,
        "besides": besides})])
