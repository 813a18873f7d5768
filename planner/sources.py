"""A free HBM source: its Element order is a planning choice (issue 15; docs/decisions.md
items 76 and 77).

:class:`FreeSource` holds the source's digits (every axis cut where the destination and the
source's Chip cut it, so that what the transfer moves and what it does not are separate
digits), the prefix fixed outermost or the allowed orders, and builds the source tensor of
any order.  :func:`search_sources` plans it: the outer model (:class:`planner.bits.
SourceMaster`, the HBM address bits in CP-SAT) proposes the (order, option) pair of least
bound, the layout search plans that pair exactly, and the pair is excluded, until the bound
reaches the best plan.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from tcplan.model import hardware as hw
from tcplan.model import limits
from tcplan.model.cost import dmn_floor, engine_floor, hbm_bytes
from tcplan.model.mapping import Mapping, join
from tcplan.model.rules import TcplanError, fail
from tcplan.model.tiers import Tensor

from .bits import Digit, SourceMaster, Spent
from .outcome import Found, NoPlan, Outcome, TimedOut

if TYPE_CHECKING:
    from .layout import Search

REQUEST_BYTES = hw.DMA_REQUEST_BYTES
JOINT_CORE_MOST = limits.JOINT_CORE_MOST  # (model/limits.py)


@dataclass
class FreeSource:
    """The digits of a free HBM source's Element and the orders allowed for them."""

    digits: list[Digit]
    prefix: list[int]  # digit indices fixed outermost, in order
    allowed: list[tuple[int, ...]] | None  # the only orders allowed (else every order)
    base: Tensor  # the source in its first order (the other dimensions as given)
    chain: list[int] | None = None  # digits contiguous in the destination, innermost first

    def element(self, order: tuple[int, ...]) -> Mapping:
        """The Element of ``order`` (digit indices, outermost first)."""
        return join(self.digits[i].term for i in order)

    def text(self, order: tuple[int, ...]) -> str:
        """The Element of ``order`` as text (labels, messages)."""
        return self.element(order).text()

    def tensor(self, order: tuple[int, ...]) -> Tensor:
        """The source with its Element in ``order`` (digit indices, outermost first)."""
        b = self.base
        return Tensor(b.name, b.tier, b.dtype, {**b.dims, "element": self.element(order)},
                      b.address, dict(b.meta))

    def orders(self) -> Iterator[tuple[int, ...]]:
        """Every order allowed, the first one first."""
        if self.allowed is not None:
            yield from self.allowed
            return
        rest = [i for i in range(len(self.digits)) if i not in self.prefix]
        for p in itertools.permutations(rest):
            yield tuple(self.prefix) + p

    def count(self) -> int:
        if self.allowed is not None:
            return len(self.allowed)
        return math.factorial(len(self.digits) - len(self.prefix))

    def __iter__(self) -> Iterator[tuple[str, Tensor]]:
        """(Element text, source tensor) of every order allowed: for enumerations."""
        for o in self.orders():
            yield self.text(o), self.tensor(o)


def write_chain(digits: Sequence[tuple[str | None, int, int]], destination: Tensor
                ) -> list[int]:
    """The source digits (``(axis, first, last)`` ranges) the destination's Element holds
    contiguously from its innermost position, innermost first: each Element factor, from the
    innermost, takes the digits that tile its range, lowest first; padding or a factor no
    digits tile ends the run."""
    el = destination.dims["element"]
    out: list[int] = []
    for f in reversed(el.factors):
        if f.axis is None:
            break
        lo, hi = f.lo, min(f.lo * f.count, el.axes[f.axis])
        inside = sorted((k for k, (a, first, last) in enumerate(digits)
                         if a == f.axis and lo <= first and last <= hi),
                        key=lambda k: digits[k][1])
        tiles = [digits[k][1:] for k in inside]
        if not tiles or tiles[0][0] != lo or tiles[-1][1] != hi or any(
                a[1] != b[0] for a, b in zip(tiles, tiles[1:])):
            break
        out += inside
        if f.count != f.size:  # padded: the next factor is not contiguous with it
            break
    return out


def search_sources(fs: FreeSource, choices, plan_pair: Callable[..., Outcome[Search]],
                   time_limit: float, seed: int = 0, progress: Callable | None = None
                   ) -> Outcome[Search]:
    """The best plan over every source order and option (placement and engine split).

    ``choices.for_source(source, text)`` gives the options of one source order (the same
    list, option by option, for every order); ``choices.lower(option)`` lowers one in any
    stream order (for what no order changes: its engine floor, its HBM bytes);
    ``plan_pair(options, beat, seconds, core=False)`` plans them exactly (an outcome of
    :class:`planner.layout.Search`: :class:`Dominated` when nothing in it beats ``beat``;
    with ``core`` a search without a plan carries its minimal conflict).  The outer model
    proposes the pair of least bound; each pair planned is excluded; the search ends,
    proven optimal, when the bound reaches the best plan or no pair is left, or at the time
    limit (found, not proven).  ``progress`` (planner/progress.py) hears each round."""
    from .layout import ORDER_RULES, Search
    deadline = time.perf_counter() + time_limit
    master, floors, broken = outer_model(fs, choices, seed)
    result = Search([], [])
    failures: list[TcplanError] = []
    tried: list = []  # the options of the pairs that had no plan
    cut = False
    while not cut:
        left = deadline - time.perf_counter()
        best = result.best.cycles if result.candidates else None
        t0 = time.perf_counter()
        p = master.propose(best, left) if left > 0 else Spent.TIME
        result.times["outer cp-sat"] = result.times.get("outer cp-sat", 0.0) + (
            time.perf_counter() - t0)
        if p is Spent.ALL:
            break
        if p is Spent.TIME:
            cut = True
            break
        master.exclude(p)
        if progress is not None:
            progress("search", master.rounds, None, (f"best {best:,}, " if best else "")
                     + f"bound {p.bound:,} cycles")
        opt = choices.for_source(fs.tensor(p.order), fs.text(p.order))[p.option]
        out = plan_pair([opt], best, deadline - time.perf_counter())
        if isinstance(out, TimedOut):
            cut = True
            break
        if isinstance(out, NoPlan):
            e = out.error
            failures.append(e)
            tried.append(opt)
            _merge(result, out.record, e)
            if e.code != "plan-no-layout" and not {v.rule for v in e.violations} & set(
                    ORDER_RULES):
                master.drop(p.option)  # a rule no order changes: the option is out
            continue
        found = out.record
        _merge(result, found, None)
        cut = isinstance(out, Found) and not out.proven
        if found.candidates:
            result.options.append(opt)
            for c in found.candidates:
                c.option = len(result.options) - 1
            if best is None or found.best.cycles < best:  # ties: the earlier pair
                result.model, result.requirements = found.model, found.requirements
                result.scale, result.pieces = found.scale, found.pieces
            result.candidates = sorted(result.candidates + found.candidates,
                                       key=lambda c: (c.cycles, c.option))
    result.rounds = master.rounds
    if result.candidates:
        return Found(result, proven=not cut)
    if cut:
        return TimedOut(fail("plan-time-limit", (), limit=f"{time_limit:g}",
                             lowered=result.enumerated), result)
    if not failures and broken:
        return NoPlan(broken[0], result)
    if not tried:  # the outer model had no pair at all (pragma: the loader prevents it)
        return NoPlan(fail("plan-no-layout", (), pieces="of the source",
                           rules="no (source order, option) pair is allowed"), result)
    if len(tried) <= JOINT_CORE_MOST and deadline > time.perf_counter():
        # every pair failed: one minimal conflict across them all (their options' models
        # joined, as for placements: planner.layout._joint_core)
        joint = plan_pair(tried, None, deadline - time.perf_counter(), core=True)
        if isinstance(joint, (NoPlan, TimedOut)):
            if not joint.record.searched:  # nothing searched: this search's counts
                return type(joint)(joint.error, result)
            joint.record.rounds = result.rounds  # the joint search, with this one's rounds
            return joint
        return NoPlan(fail("plan-no-layout", (), pieces="of the source",  # pragma: no cover
                           rules="undecided"), result)  # (each of them had no plan alone)
    return NoPlan(fail("plan-no-layout", tuple(result.rejected),
                       pieces=f"in any of {fs.count():,} source layouts and "
                              f"{len(floors)} placements and engine splits",
                       rules=", ".join(f"{r} (rejected {k} plan(s) or layouts)"
                                       for r, k in sorted(result.rejected.items()))
                       or "the model has no plan"), result)


def outer_model(fs: FreeSource, choices, seed: int = 0
                ) -> tuple[SourceMaster, list, list[TcplanError]]:
    """The outer model of a free source over ``choices``' options, each priced in the first
    order (its engine floor; None when it breaks a rule no order changes, and then never
    proposed), and the errors of those options; raises when every option breaks one."""
    first = next(fs.orders())
    floors, reads, writes, broken = _prices(
        choices.for_source(fs.tensor(first), fs.text(first)), choices.lower)
    if len(broken) == len(floors):  # every option breaks a rule no order changes
        raise broken[0]
    master = SourceMaster(fs.digits, fs.base.elem_bytes, fs.base.address, fs.prefix,
                          fs.allowed, [f or (0, 0) for f in floors], reads, writes,
                          fs.chain, seed)
    for k, f in enumerate(floors):
        if f is None:
            master.drop(k)
    return master, floors, broken


def _prices(options: list, lower_option
            ) -> tuple[list[tuple[int, int] | None], float, float, list[TcplanError]]:
    """Per option, its engine floor (with its DM destination's busiest DMN) and request
    bytes (None when it breaks a rule no order
    changes: capacity, placement, the engine count); the most HBM read requests of one chip
    and that chip's write requests; the errors of the options that break such rules."""
    floors: list[tuple[int, int] | None] = []
    loads: list[tuple[float, float]] = []
    broken: list[TcplanError] = []
    for o in options:
        try:
            plan = lower_option(o)
        except TcplanError as e:
            floors.append(None)
            broken.append(e)
            continue
        f, moved = engine_floor(plan)  # and a DM destination's busiest DMN, every split's
        floors.append((max(f, dmn_floor(o.destination)), moved))  # (cycles, request bytes)
        r, w = hbm_bytes(plan)  # the same transfer in every option: its busiest chip
        loads.append(max(((r.get(c, 0) / REQUEST_BYTES, w.get(c, 0) / REQUEST_BYTES)
                          for c in set(r) | set(w)), default=(0.0, 0.0)))
    reads, writes = min(loads, default=(0.0, 0.0))
    return floors, reads, writes, broken


def _merge(result, found, err: TcplanError | None) -> None:
    """Count one pair's lowered plans and rejections into the whole search's."""
    if found is not None:
        result.enumerated += found.enumerated
        result.models += found.models
        for k, v in found.times.items():
            result.times[k] = result.times.get(k, 0.0) + v
        for r, k in found.rejected.items():
            result.rejected[r] = result.rejected.get(r, 0) + k
        for r, v in found.examples.items():
            result.examples.setdefault(r, v)
    if err is not None and (found is None or not found.rejected):
        for v in err.violations:
            result.rejected[v.rule] = result.rejected.get(v.rule, 0) + 1
            result.examples.setdefault(v.rule, v)


def binding_bits(plan, cycles: int, sides: tuple[str, ...] = ("source",)
                 ) -> list[dict[str, Any]]:
    """For ``tcplan explain``: per HBM side of a plan whose layout was a choice, the channel
    outputs its moved digits reach (the digit on each), the bus floor they give, and the
    floor with one output fewer; an output lost to a digit the transfer does not move is
    named too.  It binds when the plan (``cycles``) runs at that floor."""
    from tcplan.model.hbm_bits import bit_report, moved_by

    from .bits import CHANNEL_INPUTS, OUTPUT_NAMES, bus_floor
    reads, writes = hbm_bytes(plan)
    out = []
    for side in sides:
        t = getattr(plan, side)
        if t.tier != "hbm":
            continue
        other = plan.destination if side == "source" else plan.source
        mine, theirs = (reads, writes) if side == "source" else (writes, reads)
        chip = max(mine, key=lambda c: (mine[c], theirs.get(c, 0)), default=None)
        if chip is None:
            continue
        rows = {r["bit"]: r for r in bit_report(t, moved_by(other))}
        carried, lost = [], []
        for o, bits in enumerate(CHANNEL_INPUTS):
            on = [f"bit {b} ({OUTPUT_NAMES[o]}) <- {rows[b]['holds']}" for b in bits
                  if b in rows and rows[b]["varies"]]
            if on:
                carried.append(on[0])
            else:
                lost.append(f"bit {bits[0]} ({OUTPUT_NAMES[o]}) <- {rows[bits[0]]['holds']}")
        k = len(carried)
        r, w = mine[chip] / REQUEST_BYTES, theirs.get(chip, 0) / REQUEST_BYTES
        floor = bus_floor(r, w, k)
        detail = (f"the {side}'s moved digits reach {k} of the {len(CHANNEL_INPUTS)} channel "
                  f"outputs ({1 << k} channels): {'; '.join(carried) or 'none'}; its HBM "
                  f"bus floor is {floor:,} cycles")
        if k:
            detail += f", {bus_floor(r, w, k - 1):,} with one output fewer"
        if lost:
            detail += f"; not reached: {'; '.join(lost)}"
        binds = floor >= cycles
        detail += ("; the plan runs at this floor" if binds else
                   f"; the plan's {cycles:,} cycles are bound elsewhere")
        out.append({"rule": None, "title": ("binding" if binds else "the") +
                    f" HBM bit assignment ({side})",
                    "detail": detail, "outputs": k, "bus_floor": floor})
    return out
