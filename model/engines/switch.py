"""The Switch Engine: a stream moved between the slices of a chip over a ring (book:
computing-tensors/switch-engine.md).

Its regular configurations cut the stream's Slice into ``[slice2, slice1, slice0]`` (the
innermost ``slice1 x slice0`` slices one sub-ring, ``ring_size`` of them) and, where they
need it, its Time into ``[time1, time0]`` (``[time2, time1, time0]`` for InterTranspose),
and move the parts (``X``, ``Y``: new axes, the copies of a broadcast):

=====================  ========================  ===================================
configuration          output Slice              output Time
=====================  ========================  ===================================
Broadcast01            ``[slice2, X, Y]``        ``[time1, slice1, time0, slice0]``
Broadcast1             ``[slice2, X, slice0]``   ``[Time, slice1]``
Transpose              ``[slice2, slice0, slice1]``  ``Time``
InterTranspose         ``[slice2, time1, slice0]``   ``[time2, time0, slice1]``
TransposedBroadcast1   ``[slice2, Y, slice1]``   ``[Time, slice0]``
=====================  ========================  ===================================

Chip, Cluster, Packet and the type are the input's; Forwarding (no exchange) is no switch
at all.  A switch takes ``ring_size x Time x flits_per_packet`` cycles (the guide's
Performance), every sub-ring in parallel.  ``run`` moves the values by the same table on
arrays: the slices' axis cut into its three parts, the parts transposed and broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model.mapping import LIVE, Mapping, axis, join, number, split_inner
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import Tensor

from .base import layout_violations, register, same_units

#: each configuration: its parameters, and how many new broadcast axes its Slice takes
CONFIGS: dict[str, tuple[tuple[str, ...], int]] = {
    "broadcast01": (("slice1", "slice0", "time0"), 2),
    "broadcast1": (("slice1", "slice0"), 1),
    "transpose": (("slice1", "slice0"), 0),
    "inter_transpose": (("slice1", "slice0", "time0"), 0),
    "transposed_broadcast1": (("slice1", "slice0"), 1),
}
WHY = {"time": "the configuration's Time (docs/engines.md)", "packet": "a switch keeps "
       "the Packet", "dtype": "a switch keeps the type"}
WHY_SLICE = "the configuration's Slice, its broadcast axes the new ones of the output"


@dataclass(frozen=True)
class Parts:
    """The input's Slice and Time cut as the configuration reads them."""

    s2: Mapping
    s1: Mapping
    s0: Mapping
    t2: Mapping  # (InterTranspose: Time above time1; else m![1])
    t1: Mapping
    t0: Mapping


@dataclass(frozen=True)
class Switch:
    """A regular configuration of the Switch Engine with its parameters."""

    config: str
    slice1: int
    slice0: int
    time0: int = 1
    name: ClassVar[str] = "switch"
    out_tier: ClassVar[str] = "stream"
    rules: ClassVar[tuple[str, ...]] = ("switch-shape", "engine-spatial", "engine-layout")

    @property
    def ring_size(self) -> int:
        return self.slice1 * self.slice0

    def parts(self, inp: Tensor) -> Parts:
        """The cut, or ``TcplanError`` where a size does not divide or a digit does not
        split (the violations :meth:`shape_violations` names)."""
        rest, s0 = split_inner(inp.dims["slice"], self.slice0)
        s2, s1 = split_inner(rest, self.slice1)
        time = inp.dims["time"]
        if self.config == "inter_transpose":
            up, t0 = split_inner(time, self.time0)
            t2, t1 = split_inner(up, self.slice1)
            return Parts(s2, s1, s0, t2, t1, t0)
        t1, t0 = split_inner(time, self.time0)
        return Parts(s2, s1, s0, _ONE, t1, t0)

    def made(self, inp: Tensor, p: Parts, new: list[Mapping]) -> Tensor:
        """The output of the cut ``p``, ``new`` its broadcast axes (outermost first)."""
        time = inp.dims["time"]
        slice_, out_time = {
            "broadcast01": lambda: ([p.s2, *new], [p.t1, p.s1, p.t0, p.s0]),
            "broadcast1": lambda: ([p.s2, *new, p.s0], [time, p.s1]),
            "transpose": lambda: ([p.s2, p.s0, p.s1], [time]),
            "inter_transpose": lambda: ([p.s2, p.t1, p.s0], [p.t2, p.t0, p.s1]),
            "transposed_broadcast1": lambda: ([p.s2, *new, p.s1], [time, p.s0]),
        }[self.config]()
        return inp.with_dims(slice=_joined(slice_), time=_joined(out_time))

    def shape_violations(self, inp: Tensor, out: Tensor) -> list[Violation]:
        """``switch-shape``: the parameters cut the input; the Slice keeps its size; the
        broadcast axes are new and of the sizes the configuration moves."""
        why = self._why(inp, out)
        if not why:
            return []
        return [Violation("switch-shape", (self.config,), {
            "config": self.config, "slice": inp.dims["slice"].text(),
            "time": inp.dims["time"].text(), "why": why})]

    def _why(self, inp: Tensor, out: Tensor) -> str:
        s, t = inp.dims["slice"], inp.dims["time"]
        if s.size % self.ring_size:
            return f"the ring of slice1 x slice0 = {self.ring_size} slices does not divide " \
                   f"the Slice's {s.size}"
        if self.config == "inter_transpose" and s.size != hw.SLICES_PER_CLUSTER:
            return f"InterTranspose spans all {hw.SLICES_PER_CLUSTER} slices, not {s.size}"
        need = self.time0 * (self.slice1 if self.config == "inter_transpose" else 1)
        if t.size % need:
            return f"{need} (time0" + (" x slice1" if need != self.time0 else "") + \
                   f") does not divide the Time's {t.size}"
        if out.dims["slice"].size != s.size:
            return f"the output's Slice has {out.dims['slice'].size} slices, the input's " \
                   f"{s.size}: a switch keeps the slice count"
        try:
            self.parts(inp)
        except TcplanError as err:
            return f"the cut does not fall on digits: {err.violations[0].message}"
        sizes = self.copy_sizes()
        got = [m.size for m in self.new_axes(inp, out)]
        if got and got != sizes and not self.holds_part(inp, out):
            return f"the output's Slice takes new broadcast axes of sizes {sizes} (axes the " \
                   f"input does not carry), not {got or 'none'}"
        return ""

    def holds_part(self, inp: Tensor, out: Tensor) -> bool:
        """Does the declared output hold, wherever it holds an element, the element the
        configuration puts there (its copies all live), and every live input element
        somewhere?  A kernel's output Slice may keep some of a broadcast's copies: mlp's
        Broadcast1 {slice1: 128, slice0: 2} into SliceP4 ``m![Dummy64, 1 # 4]`` keeps every
        other copy (docs/decisions.md item 103)."""
        copies = [axis(f"copy{k}_", n) for k, n in enumerate(self.copy_sizes())]
        made = self.made(inp, self.parts(inp), copies)
        axes = sorted({a for d in ("slice", "time") for a in inp.dims[d].used_axes})
        sizes = {**inp.dims["slice"].axes, **inp.dims["time"].axes}
        k_m, live_m = _positions(made, axes, sizes)
        k_o, live_o = _positions(out, axes, sizes)
        if k_m.size != k_o.size or (live_o & ~live_m).any() or (k_o != k_m)[live_o].any():
            return False
        k_i, live_i = _positions(inp, axes, sizes)
        return bool(np.isin(k_i[live_i], k_o[live_o]).all())

    def copy_sizes(self) -> list[int]:
        """The sizes of the broadcast's copies (a broadcast of one copy is none)."""
        sizes = [self.slice1, self.slice0][:CONFIGS[self.config][1]]
        if self.config == "transposed_broadcast1":
            sizes = [self.slice0]
        return [n for n in sizes if n > 1]

    def copies(self, inp: Tensor, out: Tensor) -> list[Mapping]:
        """The output Slice's broadcast terms: its new axes, or, where it declares none,
        padding (``1 # n``: the copies past the first hold nothing the op keeps, as a
        kernel using Broadcast1 to gather declares them, Slice ``m![Q / 256, 1 # 32]``)."""
        return self.new_axes(inp, out) or [number(1).pad(n) for n in self.copy_sizes()]

    def new_axes(self, inp: Tensor, out: Tensor) -> list[Mapping]:
        """The output Slice's terms over axes the input does not carry (the broadcast
        copies), outermost first."""
        have = {a for m in inp.dims.values() for a in m.used_axes}
        return [t for t in out.dims["slice"].terms
                if t.used_axes and not set(t.used_axes) & have and t.size > 1]

    def output(self, inp: Tensor, declared: Tensor) -> Tensor:
        return self.made(inp, self.parts(inp), self.copies(inp, declared))

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        bad = self.shape_violations(inp, out)
        if bad:
            return bad
        bad = layout_violations("Switch", self.output(inp, out), out,
                                {**WHY, "slice": WHY_SLICE}, ("slice", "time", "packet"),
                                spatial=("chip", "cluster"))
        if bad and all(v.detail.get("dim") in ("Slice", "Time") for v in bad) and \
                self.holds_part(inp, out):
            return []
        return bad

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        p = self.parts(inp)
        d = {"slice2": p.s2.size, "ring_size": self.ring_size}
        if self.config in ("broadcast01", "inter_transpose"):
            d["time1"] = p.t1.size
        if self.config == "inter_transpose":
            d["time2"] = p.t2.size
        return d

    def run(self, values: np.ndarray, inp: Tensor, out: Tensor) -> np.ndarray:
        units, time, packet = values.shape
        s = inp.dims["slice"].size
        s1, s0, t0 = self.slice1, self.slice0, self.time0
        s2 = s // (s1 * s0)
        v = values.reshape(units // s, s2, s1, s0, time, packet)
        if self.config == "broadcast01":
            t1 = time // t0
            v = v.reshape(units // s, s2, s1, s0, t1, t0, packet)
            w = v.transpose(0, 1, 4, 2, 5, 3, 6)[:, :, None, None]  # c s2 X Y t1 s1 t0 s0
            w = np.broadcast_to(w, (units // s, s2, s1, s0, t1, s1, t0, s0, packet))
        elif self.config == "broadcast1":
            w = v.transpose(0, 1, 3, 4, 2, 5)[:, :, None]  # c s2 X s0 t s1
            w = np.broadcast_to(w, (units // s, s2, s1, s0, time, s1, packet))
        elif self.config == "transpose":
            w = v.transpose(0, 1, 3, 2, 4, 5)  # c s2 s0 s1 t
        elif self.config == "inter_transpose":
            t2 = time // (s1 * t0)
            v = v.reshape(units // s, s2, s1, s0, t2, s1, t0, packet)
            w = v.transpose(0, 1, 5, 3, 4, 6, 2, 7)  # c s2 t1 s0 t2 t0 s1
        else:  # transposed_broadcast1
            w = v.transpose(0, 1, 2, 4, 3, 5)[:, :, None]  # c s2 Y s1 t s0
            w = np.broadcast_to(w, (units // s, s2, s0, s1, time, s0, packet))
        return np.ascontiguousarray(w).reshape(units, -1, packet)

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        flits = -(-inp.dims["packet"].size * inp.elem_bytes // hw.FLIT_BYTES)
        return self.ring_size * inp.dims["time"].size * flits


_ONE = join([])


def _joined(parts: list[Mapping]) -> Mapping:
    return join([m for m in parts if m.size > 1])


@dataclass(frozen=True)
class CustomBroadcast:
    """The Switch Engine with a bitmap the compiler synthesizes from the op's mappings
    (the guide's 'Custom Configurations'): any output Slice and Time whose every element
    some input slice of the same sub-ring of ``ring_size`` slices holds (new axes: the
    copies of a broadcast), no live input value dropped, the Packet kept."""

    ring_size: int
    name: ClassVar[str] = "switch"
    out_tier: ClassVar[str] = "stream"
    rules: ClassVar[tuple[str, ...]] = ("switch-custom", "engine-spatial", "engine-layout")

    def output(self, inp: Tensor, declared: Tensor) -> Tensor:
        return inp.with_dims(slice=declared.dims["slice"], time=declared.dims["time"])

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        why = self._why(inp, out)
        if why:
            return [Violation("switch-custom", (out.dims["slice"].text(),), {
                "ring": self.ring_size, "slice": inp.dims["slice"].text(),
                "time": inp.dims["time"].text(), "out_slice": out.dims["slice"].text(),
                "out_time": out.dims["time"].text(), "why": why})]
        return layout_violations("Switch", self.output(inp, out), out,
                                 {**WHY, "slice": "the declared Slice (a custom bitmap)",
                                  "time": "the declared Time (a custom bitmap)"},
                                 ("packet",), spatial=("chip", "cluster"))

    def _why(self, inp: Tensor, out: Tensor) -> str:
        s = inp.dims["slice"].size
        for d in ("chip", "cluster"):
            if not same_units(inp.dims[d], out.dims[d]):
                return f"the output's {d.title()} {out.dims[d].text()} is not the input's " \
                       f"{inp.dims[d].text()}: a switch moves a stream between the slices " \
                       "of its cluster"
        if s % self.ring_size:
            return f"the ring of {self.ring_size} slices does not divide the Slice's {s}"
        if out.dims["slice"].size != s:
            return f"the output's Slice has {out.dims['slice'].size} slices, the input's " \
                   f"{s}: a switch keeps the slice count"
        src, held_in = self._sources(inp, out)
        if (src == -2).any():
            u, t = np.argwhere(src.reshape(-1, out.dims["time"].size) == -2)[0]
            return f"output slice {u % s}, time {t} holds an element no input slice of its " \
                   f"sub-ring of {self.ring_size} holds"
        dropped = held_in & ~np.isin(np.arange(held_in.size), src)
        if dropped.any():
            u, t = np.argwhere(dropped.reshape(-1, inp.dims["time"].size))[0]
            return f"the live value at input slice {u % s}, time {t} reaches no output " \
                   "position (dropped values must be padding)"
        return ""

    def _sources(self, inp: Tensor, out: Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Per output (unit, time) position, the input (unit, time) position whose packet
        it receives (-1: the output holds nothing there; -2: no input position of its
        sub-ring holds it), and which input positions hold an element: the bitmap."""
        axes = sorted({a for d in ("slice", "time") for a in inp.dims[d].used_axes})
        sizes = {**inp.dims["slice"].axes, **inp.dims["time"].axes}
        s = inp.dims["slice"].size
        # (the same units, _why checked: ``m![1]`` and ``m![1 # 2]`` alike, counted as in)
        out = out.with_dims(chip=inp.dims["chip"], cluster=inp.dims["cluster"])
        k_in, live_in = _positions(inp, axes, sizes)
        k_out, live_out = _positions(out, axes, sizes)
        n_in, n_out = inp.dims["time"].size, out.dims["time"].size
        unit = np.arange(k_in.size // n_in)  # (chip x cluster x slice: both sides alike)
        ring = unit // s * (s // self.ring_size) + unit % s // self.ring_size
        space = int(np.prod([sizes[a] for a in axes])) if axes else 1
        key_in = np.repeat(ring, n_in) * space + k_in
        key_out = np.repeat(ring, n_out) * space + k_out
        order = np.argsort(np.where(live_in, key_in, -1), kind="stable")
        sorted_keys = np.where(live_in, key_in, -1)[order]
        at = np.searchsorted(sorted_keys, key_out)
        at = np.minimum(at, sorted_keys.size - 1)
        found = sorted_keys[at] == key_out
        src = np.where(live_out, np.where(found, order[at], -2), -1)
        return src, live_in

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        return {"ring_size": self.ring_size}

    def run(self, values: np.ndarray, inp: Tensor, out: Tensor) -> np.ndarray:
        units, time, packet = values.shape
        src, _ = self._sources(inp, out)
        flat = values.reshape(units * time, packet)
        got = np.where((src >= 0)[:, None], flat[np.maximum(src, 0)], 0)
        return got.reshape(units, out.dims["time"].size, packet).astype(values.dtype)

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        flits = -(-inp.dims["packet"].size * inp.elem_bytes // hw.FLIT_BYTES)
        return self.ring_size * inp.dims["time"].size * flits


def _positions(t: Tensor, axes: list[str], sizes: dict[str, int]
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per (unit, time) position of a stream, in order: the index of the element it holds
    over ``axes`` (the input's Slice and Time axes; the Packet is kept whole) and whether it
    holds one (live in every dimension; an axis the input lacks, a broadcast's, ignored)."""
    dims = ("chip", "cluster", "slice", "time")
    key = np.zeros([1] * 4, np.int64)
    live = np.ones([1] * 4, bool)
    coord = {a: np.zeros([1] * 4, np.int64) for a in axes}
    for k, d in enumerate(dims):
        m = t.dims[d]
        c, st = m.evaluate()
        shape = [1] * 4
        shape[k] = m.size
        live = live & (st == LIVE).reshape(shape)
        for a in axes:
            if a in c:
                coord[a] = coord[a] + c[a].reshape(shape)
    stride = 1
    for a in reversed(axes):
        key = key + coord[a] * stride
        live = live & (coord[a] < sizes[a])
        stride *= sizes[a]
    key, live = np.broadcast_arrays(key, live)
    return key.reshape(-1), live.reshape(-1)


def make(config: str, slice1: int = 1, slice0: int = 1, time0: int = 1,
         ring_size: int = 1) -> Switch | CustomBroadcast:
    if config == "custom_broadcast":
        return CustomBroadcast(ring_size)
    return Switch(config, slice1, slice0, time0)


register(Switch.name, make)
