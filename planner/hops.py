"""Multi-hop DMA plans: when no single transfer is legal, or two are faster, go through an
intermediate HBM layout (seed 002's two-step transpose).

The intermediate is an HBM tensor on the source's chips holding the moved tensor in some
order of its pieces (the common refinement of both sides' digits), at a scratch address past
both tensors.  Its order is a free HBM layout, chosen by the same outer model of the HBM
address bits as a free source (:class:`planner.bits.SourceMaster`, as the second hop's
source): each order it proposes is planned as two hops, each one layout search
(:func:`planner.dma_plan.plan_free`), against the direct transfer; the search stops when the
model's bound plus the first hop's floor reaches the best (docs/decisions.md item 77).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from tcplan.model import hardware as hw
from tcplan.model.mapping import join, number
from tcplan.model.rules import TcplanError, fail
from tcplan.model.tiers import Tensor, free_address

from .bits import Digit, Spent
from .dma_plan import plan_free
from .dma_spec import DmaSpec
from .layout import pieces_of
from .outcome import Found, NoPlan, Outcome, error_of
from .problem import Problem
from .sources import FreeSource, outer_model, write_chain

#: intermediates start on a boundary of this many bytes past both tensors (a tidy scratch
#: address; any 256-byte-aligned one would do)
SCRATCH_ALIGN = 4096


@dataclass
class Hop:
    source: Tensor
    destination: Tensor
    plan: Any
    cycles: int
    stream: dict[str, str]


@dataclass
class HopPlan:
    hops: list[Hop]
    direct_error: str | None = None  # why the direct transfer is not used
    tried: int = 0
    rejected: dict[str, int] = field(default_factory=dict)

    @property
    def cycles(self) -> int:
        return sum(h.cycles for h in self.hops)


def _hop(problem: Problem[DmaSpec], src: Tensor, dst: Tensor, time_limit: float = 10.0,
         seed: int = 0) -> Hop | TcplanError:
    """One hop planned: the hop, or the error that says why it has none."""
    out = plan_free(_sub(problem, src, dst), time_limit, seed)
    if not isinstance(out, Found):
        return error_of(out)
    b, split = out.record.best, out.record.split
    return Hop(src, dst, b.plan, b.cycles, {"time": b.time.text(),
                                           "packet": b.packet_map.text(),
                                           "cluster": split["cluster"].text(),
                                           "slice": split["slice"].text()})


def _sub(problem: Problem[DmaSpec], src: Tensor, dst: Tensor) -> Problem[DmaSpec]:
    """One hop of ``problem`` as a DMA problem of its own: ``src`` to ``dst`` through the
    problem's stream (its Time and Packet free), under the problem's bounds."""
    stream = Tensor("stream", "stream", src.dtype, dict(problem.tensors["stream"].dims))
    return dataclasses.replace(
        problem, kind="dma", tensors={"source": src, "destination": dst, "stream": stream},
        spec=DmaSpec(free=problem.spec.free, bounds=problem.spec.bounds))


def _end(t: Tensor) -> int:
    return t.address + t.dims["element"].size * t.elem_bytes


def _intermediates(problem) -> FreeSource:
    """The intermediate HBM tensor as a free source: the moved tensor's pieces (the common
    refinement of both sides' digits) in any order, on the source's chips, at a scratch
    address past both tensors (aligned past its own size)."""
    t = problem.tensors
    src, dst = t["source"], t["destination"]
    pieces = pieces_of(src, dst, {})
    scratch = max(_end(src) if src.tier == "hbm" else 0,
                  _end(dst) if dst.tier == "hbm" else 0)
    mid = Tensor("scratch", "hbm", src.dtype,
                 {"chip": src.dims.get("chip", number(1)),
                  "element": join(p.mapping for p in pieces)}, 0)
    at = free_address(mid, -(-scratch // SCRATCH_ALIGN) * SCRATCH_ALIGN,
                      hw.HBM_BYTES_PER_CHIP, SCRATCH_ALIGN)
    mid = Tensor(mid.name, mid.tier, mid.dtype, mid.dims, at)
    digits = [Digit(p.mapping, p.count, True) for p in pieces]
    ranges = [(p.axis, p.lo, min(p.hi, p.size)) for p in pieces]
    return FreeSource(digits, [], None, mid,
                      write_chain(ranges, dst) if dst.tier in ("hbm", "dm") else None)


def _first_hop_floor(problem, fs: FreeSource) -> int:
    """What the first hop (source -> intermediate) takes at least in any order of the
    intermediate: it writes every byte of it, so its engines and HBM bytes are the same in
    all; the least engine floor over its options (0 when none lowers)."""
    from tcplan.model.cost import engine_floor

    from .dma_plan import Choices
    first = next(fs.orders())
    choices = Choices(_sub(problem, problem.tensors["source"], fs.tensor(first)))
    floors = []
    for o in choices.for_source(problem.tensors["source"]):
        try:
            floors.append(engine_floor(choices.lower(o))[0])
        except TcplanError:
            continue
    return min(floors, default=0)


def plan_hops(problem: Problem[DmaSpec], time_limit: float = 10.0, seed: int = 0
              ) -> Outcome[HopPlan]:
    """The direct transfer, or two through an intermediate HBM layout, whichever is
    faster.  The intermediate's order is chosen by the outer model of its address bits
    (the second hop's source, :class:`planner.bits.SourceMaster`): each order it proposes
    is planned as two hops, and it stops when its bound plus the first hop's floor reaches
    the best (docs/decisions.md item 77).  No plan: :class:`NoPlan` with what was tried."""
    import time

    from .dma_plan import Choices
    t = problem.tensors
    src, dst = t["source"], t["destination"]
    deadline = time.perf_counter() + time_limit
    rejected: dict[str, int] = {}

    def hop(a: Tensor, b: Tensor) -> Hop | None:
        try:
            got = _hop(problem, a, b, max(deadline - time.perf_counter(), 0.05), seed)
        except TcplanError as e:  # (a hop's own mistake: no plan either)
            got = e
        if isinstance(got, TcplanError):
            rejected[got.code] = rejected.get(got.code, 0) + 1
            return None
        return got
    direct = hop(src, dst)
    best: list[Hop] | None = [direct] if direct is not None else None
    fs = _intermediates(problem)
    lb1 = _first_hop_floor(problem, fs)
    tried = 0
    try:
        master, _, _ = outer_model(fs, Choices(_sub(problem, fs.base, dst)), seed)
    except TcplanError as e:  # no intermediate can reach the destination
        rejected[e.code] = rejected.get(e.code, 0) + 1
        master = None
    while master is not None and time.perf_counter() < deadline:
        total = sum(h.cycles for h in best) if best else None
        p = master.propose(None if total is None else total - lb1,
                           deadline - time.perf_counter())
        if isinstance(p, Spent):
            break
        master.exclude_order(p.order)
        mid = fs.tensor(p.order)
        if src.tier == "hbm" and src.dims["element"] == mid.dims["element"]:
            continue
        tried += 1
        first = hop(src, mid)
        second = hop(mid, dst) if first is not None else None
        if first is not None and second is not None and (
                best is None or first.cycles + second.cycles < sum(h.cycles for h in best)):
            best = [first, second]
    if best is None:
        return NoPlan(fail("plan-no-layout", tuple(rejected), pieces=", ".join(
            d.label for d in fs.digits), rules="every direct and two-hop transfer: "
            + ", ".join(f"{r} ({k})" for r, k in sorted(rejected.items()))),
            HopPlan([], None, tried, rejected))
    why = None
    if len(best) > 1:
        why = ("the direct transfer is slower" if direct is not None else
               "no single transfer is legal")
    return Found(HopPlan(best, why, tried, rejected))
