"""Which HBM address bits each digit of a tensor's Element lands on.

An HBM tensor's byte offset is ``address + element position x element bytes``; a digit
factor of ``size`` positions whose inner digits hold ``w`` positions occupies the bits
``[log2(w x bytes), log2(w x bytes x size))`` when both are powers of two.  The address
decode (``model/hardware.py``: the stack bit 8, the channel bits 9-12 hashed with 13-16,
21-24 and 25-28, the bank-group bits 13 and 19, the bank bits 17-18, the slice bit 20, the
row bits from 21) then says what each digit does: a transfer reaches both stacks only if a
digit it moves sits on bit 8 (docs/decisions.md item 75).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import hardware as hw
from .tiers import Tensor

#: the decoded bits a report covers: the stack bit up to the last channel-hash partner
FIRST_BIT = hw.HBM_STACK_BIT
LAST_BIT = max(hw.HBM_CHANNEL_BITS) + max(hw.HBM_CHANNEL_XOR_OFFSETS)


def bit_role(bit: int) -> str:
    """What the address decode does with one bit."""
    roles = []
    if bit == hw.HBM_STACK_BIT:
        roles.append("stack")
    for i, b in enumerate(hw.HBM_CHANNEL_BITS):
        for off in hw.HBM_CHANNEL_XOR_OFFSETS:
            if bit == b + off:
                roles.append(f"channel {i}" + ("" if off == 0 else " hash"))
    if bit in hw.HBM_BANK_GROUP_BITS:
        roles.append("bank group")
    if bit in hw.HBM_BANK_BITS:
        roles.append("bank")
    if bit == hw.HBM_SLICE_BIT:
        roles.append("bank slice")
    if bit >= hw.HBM_ROW_LOW_BIT:
        roles.append("row")
    if bit < hw.HBM_STACK_BIT:
        roles.append("within a 256-byte request")
    return ", ".join(roles)


@dataclass(frozen=True)
class Span:
    """The bits ``[lo, hi)`` one Element digit occupies (``exact``: a power-of-two digit on
    a power-of-two weight; otherwise its values mix the bits of the whole span), and the
    digit range ``[first, last)`` of ``axis`` it carries (None for padding or a number)."""

    lo: int
    hi: int
    term: str
    exact: bool
    axis: str | None = None
    first: int = 0
    last: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"bits": [self.lo, self.hi - 1], "term": self.term, "exact": self.exact}


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def element_spans(t: Tensor) -> list[Span]:
    """The bit span of every Element digit of an HBM tensor, innermost first."""
    el = t.dims["element"]
    weight = t.elem_bytes
    out = []
    for f in reversed(el.factors):
        top = weight * f.size
        exact = _pow2(weight) and _pow2(f.size)
        lo = (weight - 1).bit_length() if exact else weight.bit_length() - 1
        last = min(f.hi, el.axes[f.axis]) if f.axis is not None else 0
        out.append(Span(lo, (top - 1).bit_length(), f.label(el.axes), exact, f.axis, f.lo,
                        last))
        weight = top
    return out


def held(t: Tensor) -> dict[str, list[tuple[int, int]]]:
    """The digit ranges ``[first, last)`` of each axis a tensor's dimensions carry."""
    out: dict[str, list[tuple[int, int]]] = {}
    for m in t.dims.values():
        for f in m.factors:
            if f.axis is not None and f.count > 1:
                out.setdefault(f.axis, []).append((f.lo, min(f.hi, m.axes[f.axis])))
    return out


def moved_by(other: Tensor):
    """A predicate for :func:`bit_report`: does the digit range ``[first, last)`` of
    ``axis`` vary in a transfer with ``other`` (the other side holds some of it)?"""
    ranges = held(other)
    return lambda axis, first, last: any(a < last and first < b
                                         for a, b in ranges.get(axis, []))


def _bit_digit(s: Span, bit: int, axes: dict[str, int]) -> tuple[str, int, int]:
    """The one-bit digit of an exact span on ``bit``: its term and digit range."""
    assert s.axis is not None  # (an exact span holds one axis's digits)
    sub = s.first * (1 << (bit - s.lo))
    term = s.axis + (f" / {sub}" if sub > 1 else "") + (
        " % 2" if 2 * sub < axes[s.axis] else "")
    return term, sub, min(2 * sub, axes[s.axis])


def bit_report(t: Tensor, moved=None) -> list[dict[str, Any]]:
    """Per decoded bit (8 to 28) of an HBM tensor: its role, the digit on it (one bit of an
    axis, ``D / 256 % 2``; a whole digit where it is not a power of two; or the base
    address's bit), and with ``moved`` (see :func:`moved_by`) whether the transfer changes
    it.  Above the base address's lowest set bit its carries add to the digits (said)."""
    spans = element_spans(t)
    axes = t.dims["element"].axes
    carry_from = (t.address & -t.address).bit_length() - 1 if t.address else None
    # the byte addresses are the contiguous range [lowest, highest]: a bit above the
    # Element's digits changes only where a carry crosses it, where the two differ there
    lowest = t.address
    highest = t.address + t.dims["element"].size * t.elem_bytes - 1
    rows = []
    for bit in range(FIRST_BIT, LAST_BIT + 1):
        on = next((s for s in spans if s.lo <= bit < s.hi), None)
        row: dict[str, Any] = {"bit": bit, "role": bit_role(bit)}
        if on is None and (lowest >> bit) != (highest >> bit):
            row["holds"] = (f"address bit {(t.address >> bit) & 1} (+ the carries of the "
                            "digits below)")
            row["varies"] = True
        elif on is None or on.axis is None:
            row["holds"] = (f"address bit {(t.address >> bit) & 1}" if on is None
                            else f"padding {on.term}")
            row["varies"] = False
        elif on.exact:
            term, first, last = _bit_digit(on, bit, axes)
            row["holds"] = term
            row["varies"] = moved is None or bool(moved(on.axis, first, last))
        else:
            row["holds"] = on.term + " (not a power of two: its values mix these bits)"
            row["varies"] = moved is None or bool(moved(on.axis, on.first, on.last))
        if carry_from is not None and on is not None and bit >= carry_from:
            row["holds"] += " (+ the base address's carries)"
        rows.append(row)
    return rows


def report_lines(name: str, t: Tensor, moved=None) -> list[str]:
    """``bit 8 (stack) <- D / 256 % 2 (fixed in this transfer)``: one line per decoded bit;
    the bits past the Element's top, which hold the base address, on one line."""
    lines = [f"{name}: HBM address bits (Element {t.dims['element'].text()}, address "
             f"{t.address:,})"]
    rows = bit_report(t, moved)
    top = max((s.hi for s in element_spans(t)), default=0)
    for r in rows:
        if r["bit"] >= max(top, FIRST_BIT + 1) and r["holds"].startswith("address bit") \
                and not r["varies"]:
            lines.append(f"  bits {r['bit']}-{LAST_BIT} (the rest) <- the base address "
                         "(fixed)")
            break
        fixed = "" if r["varies"] else " (fixed in this transfer)"
        lines.append(f"  bit {r['bit']} ({r['role']}) <- {r['holds']}{fixed}")
    return lines
