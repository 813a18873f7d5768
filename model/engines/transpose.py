"""The Transpose Engine: a matrix of flits transposed inside a slice (book:
computing-tensors/transpose-engine.md).

Its input is a collected stream (one 32-byte flit per packet) whose packet carries at most
``valid_size`` valid elements (8; the rest of the flit is padding, dropped by *Unpack*).
The engine reads a matrix of ``in_rows`` rows, each row ``packets_per_col`` consecutive
packets (*Gather*: ``in_cols = packets_per_col x valid_size``), transposes it, drops the
rows that came from packet padding (*Trim*: ``out_rows = packets_per_col x valid``) and
pads each output row to one flit (*Align*).  In mappings, with the input's Time
``[outer, R, Q]`` (``Q`` the innermost ``packets_per_col`` positions, ``R`` the ``in_rows``
above them) and Packet ``V # F`` (``V`` its valid elements)::

    OutTime = [outer, Q, V]        OutPacket = R # F

The kernel writer declares OutTime and OutPacket; the compiler derives ``in_rows``,
``in_cols`` and ``out_rows`` (tcplan derives and prints them: ``in_rows`` is what the
declared OutPacket holds, ``packets_per_col`` the one choice whose output is the declared
one).  A burst runs ``n = outer`` iterations of ``in_flits = in_rows x packets_per_col``
input flits and ``out_rows`` output flits: double buffered (``in_cols <= 16``)
``in_flits + (n - 1) max(in_flits, out_rows) + out_rows`` cycles, single buffered
``n (in_flits + out_rows)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model.mapping import Mapping, held_indices, join, split_inner
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import Tensor

from .base import flit_elements, flit_violation, layout_violations, register

WHY = {"time": "the input's outer Time, then the packets of a row, then a packet's valid "
       "elements ([outer, Q, V])", "packet": "the input's rows (the Time above a row's "
       "packets), padded to one flit (R # F)", "dtype": "the Transpose Engine keeps the type"}


@dataclass(frozen=True)
class Shape:
    """The engine's parameters for one op (the guide's, derived as its compiler does)."""

    in_rows: int
    packets_per_col: int
    valid: int  # valid elements per input packet
    iterations: int  # n
    outer: Mapping
    rows: Mapping  # R
    cols: Mapping  # Q
    kept: Mapping  # V

    @property
    def in_cols(self) -> int:
        return self.packets_per_col * hw.TRANSPOSE_VALID_SIZE

    @property
    def in_flits(self) -> int:
        return self.in_rows * self.packets_per_col

    @property
    def out_rows(self) -> int:
        return self.packets_per_col * self.valid

    @property
    def double_buffered(self) -> bool:
        return self.in_cols <= hw.TRANSPOSE_BUFFER_COLUMNS


def burst_cycles(in_flits: int, out_rows: int, n: int, double: bool) -> int:
    """A burst of ``n`` iterations (book: transpose-engine.md 'Performance')."""
    if double:
        return in_flits + (n - 1) * max(in_flits, out_rows) + out_rows
    return n * (in_flits + out_rows)


def valid_prefix(packet: Mapping) -> int:
    """How many leading positions of ``packet`` hold an element, when they are a prefix
    (the rest padding); -1 when a held position follows padding."""
    _, held = held_indices(packet)
    v = int(held.sum())
    return v if held[:v].all() else -1


@dataclass(frozen=True)
class Transpose:
    """The Transpose Engine (no options: the declared output decides it)."""

    name: ClassVar[str] = "transpose"
    out_tier: ClassVar[str] = "stream"
    rules: ClassVar[tuple[str, ...]] = ("flit-packet", "transpose-shape", "engine-spatial",
                                        "engine-layout")

    def shape(self, inp: Tensor, out: Tensor, packets_per_col: int) -> Shape:
        """The parameters for a row of ``packets_per_col`` packets (``out`` gives
        ``in_rows``: what its packet holds); ``TcplanError`` when Time does not cut."""
        time, packet = inp.dims["time"], inp.dims["packet"]
        r, v = valid_prefix(out.dims["packet"]), valid_prefix(packet)
        rest, cols = split_inner(time, packets_per_col)
        outer, rows = split_inner(rest, r)
        kept = packet if v == packet.size else packet.resize(v)
        return Shape(r, packets_per_col, v, outer.size, outer, rows, cols, kept)

    def made(self, inp: Tensor, s: Shape) -> Tensor:
        f = flit_elements(inp.dtype)
        rows = s.rows if s.rows.size == f else s.rows.pad(f)
        return inp.with_dims(time=join([m for m in (s.outer, s.cols, s.kept) if m.size > 1]),
                             packet=rows)

    def derive(self, inp: Tensor, out: Tensor) -> tuple[Shape | None, list[Violation]]:
        """The parameters whose output is ``out``, or the violations: ``transpose-shape``
        (the sizes the engine takes) or ``engine-layout`` (the nearest output)."""
        bad = self.size_violations(inp, out)
        if bad:
            return None, bad
        r = valid_prefix(out.dims["packet"])
        tried: Tensor | None = None
        for ppc in [c // hw.TRANSPOSE_VALID_SIZE for c in hw.TRANSPOSE_IN_COLS]:
            if (inp.dims["time"].size // r) % ppc:
                continue
            try:
                s = self.shape(inp, out, ppc)
            except TcplanError:
                continue
            made = self.made(inp, s)
            if not layout_violations("Transpose", made, out, WHY):
                return s, []
            tried = tried or made
        if tried is None:
            return None, [self._shape_violation(inp, out, "no row of 1, 2 or 4 packets "
                                                "cuts the input's Time into rows")]
        return None, layout_violations("Transpose", tried, out, WHY)

    def size_violations(self, inp: Tensor, out: Tensor) -> list[Violation]:
        """``flit-packet`` on both sides and ``transpose-shape``: valid elements a prefix of
        at most ``valid_size``, ``in_rows`` a prefix of the output packet within its limit
        and dividing the input's Time."""
        bad = flit_violation("Transpose", "input", inp, "collect the stream first")
        bad += flit_violation("Transpose", "output", out, "pad the output packet to one "
                              "flit (R # F)")
        if bad:
            return bad
        v, r = valid_prefix(inp.dims["packet"]), valid_prefix(out.dims["packet"])
        most = hw.TRANSPOSE_MAX_IN_ROWS[inp.elem_bytes]
        why = ("the input packet's valid elements are not its leading positions" if v < 0
               else f"the input packet carries {v} valid elements, more than the "
                    f"{hw.TRANSPOSE_VALID_SIZE} the engine reads a cycle"
               if v > hw.TRANSPOSE_VALID_SIZE
               else "the output packet's rows are not its leading positions" if r < 1
               else f"{r} input rows, more than the {most} of {inp.elem_bytes}-byte "
                    "elements" if r > most
               else f"{r} input rows do not divide the input's Time "
                    f"({inp.dims['time'].size})" if inp.dims["time"].size % r else "")
        return [self._shape_violation(inp, out, why)] if why else []

    def _shape_violation(self, inp: Tensor, out: Tensor, why: str) -> Violation:
        return Violation("transpose-shape", (out.dims["packet"].text(),), {
            "time": inp.dims["time"].text(), "packet": inp.dims["packet"].text(),
            "out_time": out.dims["time"].text(), "out_packet": out.dims["packet"].text(),
            "why": why})

    def output(self, inp: Tensor, declared: Tensor) -> Tensor:
        s, bad = self.derive(inp, declared)
        if s is None:
            raise TcplanError(bad)
        return self.made(inp, s)

    def check(self, inp: Tensor, out: Tensor) -> list[Violation]:
        return self.derive(inp, out)[1]

    def derived(self, inp: Tensor, out: Tensor) -> dict[str, int]:
        s, _ = self.derive(inp, out)
        if s is None:
            return {}
        return {"in_rows": s.in_rows, "in_cols": s.in_cols, "out_rows": s.out_rows,
                "iterations": s.iterations, "double_buffered": int(s.double_buffered)}

    def run(self, values: np.ndarray, inp: Tensor, out: Tensor) -> np.ndarray:
        s, _ = self.derive(inp, out)
        assert s is not None  # (checked before it runs)
        units = values.shape[0]
        vs = hw.TRANSPOSE_VALID_SIZE
        m = values[:, :, :vs].reshape(units, s.iterations, s.in_rows,
                                      s.packets_per_col * vs)     # Unpack, Gather
        t = m.transpose(0, 1, 3, 2)                                  # Transpose
        keep = np.array([q * vs + j for q in range(s.packets_per_col)
                         for j in range(s.valid)])
        t = t[:, :, keep, :]                                         # Trim
        f = values.shape[2]
        aligned = np.zeros((units, s.iterations, s.out_rows, f), values.dtype)
        aligned[..., :s.in_rows] = t                                 # Align
        return aligned.reshape(units, s.iterations * s.out_rows, f)

    def cycles(self, inp: Tensor, out: Tensor) -> int:
        s, _ = self.derive(inp, out)
        assert s is not None
        return burst_cycles(s.in_flits, s.out_rows, s.iterations, s.double_buffered)


register(Transpose.name, Transpose)
