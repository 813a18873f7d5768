"""Free addresses of a graph's tensors (issue 32, item 0; docs/graphs.md 'tensors').

A DM or HBM tensor written ``address: free`` gets its address here, when the graph loads:
each tensor is a rectangle of its lifetime (planner/graph.py ``lifetimes``: whole launches
for DM and HBM) by its bytes in a unit (its largest candidate's Element), and CP-SAT
places the free ones, on :data:`ALIGN` boundaries, so that no two rectangles of a tier meet
(``NoOverlap2D``, the tensors with given addresses fixed) within the unit's capacity, as
XLA's buffer assignment packs buffers by their live ranges (heuristically there).  Among the
placements it takes the lowest top address, then the lowest addresses in the file's order.

When none exists, ``graph-memory`` names the first op where the tensors live together need
more bytes than the unit holds (no placement can beat that), or, when no op does, says the
live tensors cannot be packed without a gap.
"""

from __future__ import annotations

from typing import Any

from tcplan.model.rules import fail
from tcplan.model.tiers import CAPACITY

from .cpsat import solver

#: addresses' alignment per tier, bytes: the Qwen3 kernels' (DM 1 KiB, HBM 1 MiB), for a
#: free address here and an imported kernel's (planner/rust/build.py; docs/decisions.md
#: items 121 and 134)
ALIGN = {"dm": 1024, "hbm": 1 << 20, "vrf": 64, "trf": 64}
#: seconds CP-SAT may take to place one tier's tensors
PLACE_SECONDS = 10.0


def assign(g, free: list[str], spans: dict[str, tuple[str, int, int]],
           life: dict[str, tuple[int, int]]) -> dict[str, int]:
    """Each free tensor's address (``spans`` each tensor's tier and bytes as if at its
    given address, a free one's at 0; ``life`` its steps)."""
    out: dict[str, int] = {}
    for tier in sorted({spans[n][0] for n in free}):
        mine = [n for n in free if spans[n][0] == tier]
        fixed = [n for n in spans if spans[n][0] == tier and n not in free]
        out.update(_place_tier(g, tier, mine, fixed, spans, life))
    return out


def _place_tier(g, tier: str, mine: list[str], fixed: list[str],
                spans: dict[str, tuple[str, int, int]], life: dict[str, tuple[int, int]]
                ) -> dict[str, int]:
    from ortools.sat.python import cp_model
    cap, align = CAPACITY[tier][0], ALIGN[tier]
    m = cp_model.CpModel()
    xs, ys, starts = [], [], {}
    end = max((b for _, b in life.values()), default=0) + 1
    slots = cap // align
    top = m.new_int_var(0, slots, "top")  # (in slots of ``align`` bytes)
    for n in mine + fixed:
        _, lo, hi = spans[n]
        size = hi - lo
        if n in mine:
            slot = m.new_int_var(0, max(0, (cap - size) // align), f"slot {n}")
            start: Any = m.new_int_var(0, cap, f"address {n}")
            m.add(start == slot * align)
            starts[n] = slot
            m.add(top >= slot + -(-size // align))
        else:
            start = lo
        xs.append(m.new_fixed_size_interval_var(start, size, f"bytes {n}"))
        a, b = life[n]
        ys.append(m.new_fixed_size_interval_var(a, b - a + 1, f"life {n}"))
    m.add_no_overlap_2d(xs, ys)
    m.minimize(top * (len(mine) * slots + 1) + sum(starts.values()))  # (top, then low)
    sv = solver(PLACE_SECONDS, 0)
    st = sv.solve(m)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise _full(g, tier, mine + fixed, spans, life, end, st == cp_model.INFEASIBLE)
    return {n: sv.value(v) * align for n, v in starts.items()}


def _full(g, tier: str, names: list[str], spans, life, end: int, proven: bool):
    """``graph-memory``: the first op whose live tensors need more than the unit holds."""
    cap, unit = CAPACITY[tier][0], CAPACITY[tier][1]
    need = [0] * end
    for n in names:
        a, b = life[n]
        for k in range(a, b + 1):
            need[k] += spans[n][2] - spans[n][1]
    at = next((k for k, v in enumerate(need) if v > cap), None)
    if at is not None:
        live = sorted((n for n in names if life[n][0] <= at <= life[n][1]),
                      key=lambda n: spans[n][1] - spans[n][2])
        return fail("graph-memory", (tier,), tier=tier, op=g.ops[g.order[at]].name,
                    bytes=need[at], unit=unit, capacity=cap,
                    live=", ".join(f"{n} ({spans[n][2] - spans[n][1]:,} B)"
                                   for n in live[:6]) + (" ..." if len(live) > 6 else ""))
    why = "no placement of the live tensors without a gap fits" if proven else \
        f"no placement found within {PLACE_SECONDS:g} s"
    return fail("graph-memory", (tier,), tier=tier, op="any op", bytes=max(need, default=0),
                unit=unit, capacity=cap, live=why)
