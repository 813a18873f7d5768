"""The engines' protocol and what they share (model/engines/__init__.py says what each member
is): the registry, the flit and layout checks, and a checked op (:class:`EnginePlan`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model.mapping import Mapping, held_indices, same_holding
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import DIM_TITLES, Tensor

SPATIAL = ("chip", "cluster", "slice")


class Engine(Protocol):
    """One engine of the Tensor Unit, configured (its options are the value's fields)."""

    name: ClassVar[str]
    out_tier: ClassVar[str]  # what it makes: a stream, or a register file's tensor
    rules: ClassVar[tuple[str, ...]]

    def output(self, inp: Tensor, declared: Tensor) -> Tensor:
        """What the engine makes of ``inp`` (``inp`` satisfying :meth:`check`'s input
        rules), taking from ``declared`` only what the op chooses."""
        ...

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        """Every rule ``inp`` and the declared ``out`` break."""
        ...

    def run(self, values: np.ndarray, inp: Tensor, out: Tensor) -> np.ndarray:
        """The slices' flits ``(units, time, packet)`` in, the output's values out.  The
        engine's configuration (its sizes: a TRF store's lanes, a transpose's rows) is
        derived from the op as its compiler does; the values are moved by array
        operations."""
        ...

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        """Cycles per slice, every slice in parallel."""
        ...

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        """What the compiler derives for the op and tcplan prints (a TRF store's
        FlitsPerLane); ``{}``: nothing."""
        ...


#: name -> how to make the engine from its options (the op's keys beside its tensors)
ENGINES: dict[str, Callable[..., Engine]] = {}


def register(name: str, make: Callable[..., Engine]) -> None:
    if name in ENGINES:  # pragma: no cover - guards the registry itself
        raise ValueError(f"engine {name} registered twice")
    ENGINES[name] = make


def flit_elements(dtype: str) -> int:
    """Elements of one 32-byte flit of ``dtype``."""
    return hw.FLIT_BYTES // hw.DTYPE_BYTES[dtype]


def flit_violation(engine: str, side: str, stream: Tensor, fix: str) -> list[Violation]:
    """``flit-packet``: ``stream``'s packet is one flit of its dtype, or the violation."""
    p, eb = stream.dims["packet"], stream.elem_bytes
    if p.size * eb == hw.FLIT_BYTES:
        return []
    return [Violation("flit-packet", (p.text(),), {
        "engine": engine, "side": side, "packet": p.text(), "elements": p.size,
        "elem_bytes": eb, "bytes": p.size * eb, "fix": fix})]


def layout_violations(engine: str, want: Tensor, got: Tensor, why: dict[str, str],
                      dims: tuple[str, ...] = ("time", "packet"),
                      spatial: tuple[str, ...] = SPATIAL) -> list[Violation]:
    """``engine-spatial`` and ``engine-layout``: each of ``got``'s mappings holds what
    ``want``'s does (:func:`~model.mapping.same_holding`: the same index at every position,
    ``m![A / 2, A % 2]`` is ``m![A]``), its
    dtype ``want``'s; ``why`` says, per dimension, how the engine makes it."""
    out: list[Violation] = []
    for d in spatial:
        if not same_units(want.dims[d], got.dims[d]):
            out.append(Violation("engine-spatial", (got.dims[d].text(),), {
                "engine": engine, "dim": d.title(), "got": got.dims[d].text(),
                "want": want.dims[d].text()}))
    for d in dims:
        if not same_holding(want.dims[d], got.dims[d]):
            out.append(Violation("engine-layout", (got.dims[d].text(),), {
                "engine": engine, "dim": d.title(), "got": got.dims[d].text(),
                "want": want.dims[d].text(), "why": why[d]}))
    if want.dtype != got.dtype:
        out.append(Violation("engine-layout", (got.dtype,), {
            "engine": engine, "dim": "dtype", "got": got.dtype, "want": want.dtype,
            "why": why["dtype"]}))
    return out


@dataclass(frozen=True)
class EnginePlan:
    """A checked engine op: the engine (its options), its input and output streams, and its
    cycles per slice."""

    engine: Engine
    inp: Tensor
    out: Tensor

    @property
    def cycles(self) -> int:
        return self.engine.cycles(self.inp, self.out)

    def breakdown(self) -> dict[str, Any]:
        return {"engine": self.engine.name, "cycles": self.cycles,
                "packets_in": self.inp.dims["time"].size,
                "packets_out": self.out.dims["time"].size if "time" in self.out.dims
                else None,
                "bottleneck": f"the {self.engine.name} engine's cycles per slice, every "
                              "slice in parallel (docs/engines.md)"}

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine.name, "input": _stream_json(self.inp),
                "output": _stream_json(self.out),
                "derived": self.engine.derived(self.inp, self.out),
                "breakdown": self.breakdown()}

    def text(self) -> str:
        i = self.inp.dims
        out = ", ".join(f"{DIM_TITLES[d]} {m.text()}" for d, m in self.out.dims.items()
                        if d not in SPATIAL)
        return "\n".join([
            f"{self.engine.name}: {self.inp.dtype} -> {self.out.tier.upper()} "
            f"{self.out.dtype}",
            f"  in:  Time {i['time'].text()}, Packet {i['packet'].text()}",
            f"  out: {out}",
            *(f"  {k}: {v} (derived)" for k, v in self.engine.derived(self.inp,
                                                                     self.out).items()),
            f"  cycles: {self.cycles:,} per slice, every slice in parallel"])


def _stream_json(t: Tensor) -> dict[str, Any]:
    return {"dtype": t.dtype, **{d: m.text() for d, m in t.dims.items()}}


def lower(engine: Engine, inp: Tensor, out: Tensor) -> EnginePlan:
    """The op checked: its plan, or :class:`TcplanError` naming every rule it breaks."""
    bad = engine.check(inp, out)
    if bad:
        raise TcplanError(bad)
    return EnginePlan(engine, inp, out)


def same_units(a: Mapping, b: Mapping) -> bool:
    """Do two spatial mappings place the same indices on the same units, whatever units
    past the shorter one's end that hold nothing?  ``m![1]`` (a stream's default Cluster)
    and ``m![1 # 2]`` (a register file's) run an engine on the same cluster."""
    (ca, ha), (cb, hb) = held_indices(a), held_indices(b)
    n = min(a.size, b.size)
    if ha[n:].any() or hb[n:].any() or not np.array_equal(ha[:n], hb[:n]):
        return False
    zero = np.zeros(n, np.int64)
    return all(np.array_equal(np.where(ha[:n], ca.get(k, zero)[:n], 0),
                              np.where(hb[:n], cb.get(k, zero)[:n], 0))
               for k in set(ca) | set(cb))
