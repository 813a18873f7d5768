"""The moves around a contraction, planned with its mapping (issue 30, item 1;
docs/contractions.md 'The moves').

A contraction whose operands start in HBM (or in DM, laid out as the plan needs) and whose
result goes to DM or HBM is, for one candidate mapping, a graph (docs/graphs.md): the
operands' loads (DMA context), the TRF operand's Fetch, Collect and ``to_trf`` (sub
context), the streamed operand's Fetch and Collect, the contraction and the Commit (main
context), the result's store (DMA context).  :func:`graph_data` writes that graph, every
DM Element free over its digits, an HBM Element free over its axes unless given, every
DMA's stream free; the graph planner chooses them and schedules the ops (``objective:
makespan``).  :func:`search` finds the candidate whose graph has the least makespan:

* **Bounds.**  A candidate's makespan is at least ``cycles + floor``: the main path waits
  for both loads (one DMA context runs them one after the other), takes at least the
  contraction's cycles, and the store waits for it; each DMA takes at least its DM
  tensor's DMN floor (model/cost.py ``dmn_floor``: the busiest DMN's bytes at 128 B a
  cycle, after the start-up).  Before lowering, the stream's flits bound the cycles.
* **Order.**  Candidates sit in one heap keyed by their best bound so far; the least is
  refined (flits, then the engine's cycles, then the graph's makespan).  When a planned
  makespan comes off the heap every other key is at least it, so it is the least makespan
  of every candidate (A* with consistent bounds); ties are refined to be chosen by the
  contraction's own order (cycles, engaged multipliers, units).
* **Reuse.**  An op planned in one candidate's graph is not planned again in another's
  (``Options.op_plans``: the same op over the same tensors).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any

from tcplan.model import hardware as hw
from tcplan.model.arith import round_up
from tcplan.model.cost import dmn_floor
from tcplan.model.engines.base import flit_elements
from tcplan.model.engines.contraction import ContractionPlan
from tcplan.model.mapping import Mapping, axis, join, parse, same_holding
from tcplan.model.mapping import number as number_mapping
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import Tensor

from . import contraction_search as cs
from .op_cache import OpPlans

#: the operands and the result, and where each may start or go
ROLES = ("source", "trf", "result")
PLACES = ("hbm", "dm")
#: where tcplan puts the candidate graph's tensors: each DM tensor at a multiple of 256
#: bytes of its slice, each HBM tensor at a multiple of 64 KiB (its choice, not a rule)
DM_ALIGN = 256
HBM_ALIGN = 1 << 16


@dataclass(frozen=True)
class Place:
    """Where an operand starts (or the result goes): ``hbm`` (its Element given, or None:
    free, every order of its axes) or ``dm``: laid out as the plan needs (``element``
    None) or as given (its Element here; its Cluster and Slice are the problem's ``fix``,
    which the candidate's stream holds)."""

    tier: str
    element: str | None = None


@dataclass(frozen=True)
class Moves:
    """Where each operand starts and the result goes, and whether the result is cast."""

    source: Place
    trf: Place
    result: Place
    cast: bool = False  # the result cast to the operands' type (f32 to bf16) before its commit


def given_dm(c: cs.Candidate, e: cs.Einsum, axes: dict[str, int], dtype: str,
             moves: Moves) -> bool:
    """Does each DM tensor given hold, in its Element, the digits the candidate puts on a
    slice (in any order)?"""
    s = sides(c, e, axes, dtype, moves.cast)
    for role in ("source", "trf", "result"):
        p = getattr(moves, role)
        if p.tier != "dm" or p.element is None:
            continue
        want = parse(p.element, axes)
        if not any(same_holding(want, join(order) if order else number_mapping(1))
                   for order in itertools.permutations(s.digits[role])):
            return False
    return True


def _size(digits: list[Mapping]) -> int:
    return math.prod(d.size for d in digits)


def _trf_stream(k: str, size: int, f: int, outer: list[str]) -> tuple[str, str]:
    """The flits ``to_trf`` stores: the lane digit, the TRF's rows and ``K``'s outer flits
    in Time, a flit of ``K`` in the Packet."""
    time = list(outer)
    if size > f:
        time.append(f"{k} / {f}")
        packet = f"{k} % {f}"
    else:
        packet = k if size == f else f"{k} # {f}"
    return cs._m(time), f"m![{packet}]"


@dataclass(frozen=True)
class Sides:
    """A candidate's DM tensors: each role's digits (its Element, any order; none: one
    element a slice) and bytes."""

    digits: dict[str, list[Mapping]]
    dtypes: dict[str, str]

    def bytes(self, role: str) -> int:
        return _size(self.digits[role]) * hw.DTYPE_BYTES[self.dtypes[role]]

    def element(self, role: str) -> Mapping:
        """The digits in one order (``m![1]`` for none)."""
        return join(self.digits[role]) if self.digits[role] else number_mapping(1)

    def texts(self, role: str) -> list[str]:
        return [d.body() for d in self.digits[role]] or ["1"]


def sides(c: cs.Candidate, e: cs.Einsum, axes: dict[str, int], dtype: str,
          cast: bool = False) -> Sides:
    """What each DM tensor holds a slice: the streamed operand its Time parts and the
    contracted axis, the TRF operand its Lane part and the contracted axis, the result
    the Time parts and the Lane part."""
    (k,) = e.contracted
    def terms(text: str) -> list[Mapping]:
        return [m for m in parse(text, axes).terms if m.size > 1]
    lane = terms(c.dims["lane"])
    stream = [m for m in terms(c.dims["time"]) if k not in m.used_axes]
    acc = dtype if cast else hw.CONTRACT_ACCUMULATOR.get(dtype, dtype)
    return Sides({"source": stream + [axis(k, axes[k])],
                  "trf": lane + terms(c.dims["element"]),
                  "result": terms(c.time_out) + lane},
                 {"source": dtype, "trf": dtype, "result": acc})


def floor(c: cs.Candidate, e: cs.Einsum, axes: dict[str, int], dtype: str,
          moves: Moves) -> int:
    """What the candidate's DMAs take at least, one after the other on the DMA context:
    each DM tensor a DMA writes or reads, its DMN floor."""
    s = sides(c, e, axes, dtype, moves.cast)
    spatial = {"chip": number_mapping(1), "cluster": parse(c.dims["cluster"], axes),
               "slice": parse(c.dims["slice"], axes)}
    return sum(dmn_floor(Tensor(role, "dm", s.dtypes[role],
                                {**spatial, "element": s.element(role)}))
               for role in ("source", "trf", "result") if getattr(moves, role).tier == "hbm")


def graph_data(c: cs.Candidate, plan: ContractionPlan, e: cs.Einsum, axes: dict[str, int],
               dtype: str, moves: Moves, name: str) -> dict[str, Any]:
    """The candidate's graph (a ``kind: graph`` problem's data): every move around the
    contraction, every free choice of it left free."""
    s = sides(c, e, axes, dtype, moves.cast)
    spatial = {"cluster": c.dims["cluster"], "slice": c.dims["slice"]}
    tensors, ops = _memory(e, axes, s, moves, spatial)
    for part in (_trf_path(c, e, axes, dtype, spatial),
                 _main_path(c, plan, s, moves.cast, dtype, spatial)):
        tensors.update(part[0])
        ops += part[1]
    ops.sort(key=lambda o: o["name"] == "store_result")  # (the store last)
    return {"format": 1, "name": name, "kind": "graph", "dtype": dtype,
            "objective": "makespan", "axes": {a: axes[a] for a in axes},
            "tensors": tensors, "ops": ops}


Part = tuple[dict[str, Any], list[dict[str, Any]]]  # a graph's tensors and ops


def _memory(e: cs.Einsum, axes: dict[str, int], s: Sides, moves: Moves,
            spatial: dict[str, str]) -> Part:
    """The DM tensors on the candidate's units (each its own bytes), the HBM tensors and
    the DMAs between them (each DMA's Time and Packet free)."""
    tensors: dict[str, Any] = {}
    ops: list[dict[str, Any]] = []
    address = 0
    for role in ("trf", "source", "result"):
        p = getattr(moves, role)
        given = p.element if p.tier == "dm" else None
        tensors[f"{role}_dm"] = {"tier": "dm", "chip": "m![1]", **spatial,
                                 "element": given or {"digits": s.texts(role)},
                                 "address": address, "dtype": s.dtypes[role]}
        address = round_up(address + s.bytes(role), DM_ALIGN)
    hbm_at = 0
    letters = {"source": e.stream, "trf": e.trf, "result": e.result}
    for role in ("trf", "source", "result"):
        p = getattr(moves, role)
        if p.tier != "hbm":
            tensors[f"{role}_dm"]["given"] = role != "result"
            continue
        size = math.prod(axes[a] for a in letters[role]) * hw.DTYPE_BYTES[s.dtypes[role]]
        tensors[f"{role}_hbm"] = {"tier": "hbm", "chip": "m![1]", "address": hbm_at,
                                  "dtype": s.dtypes[role], "given": role != "result",
                                  **({"element": p.element} if p.element else
                                     {"element": "free", "axes": list(letters[role])})}
        hbm_at = round_up(hbm_at + size, HBM_ALIGN)
        src, dst = (f"{role}_dm", f"{role}_hbm") if role == "result" else \
            (f"{role}_hbm", f"{role}_dm")
        ops.append({"name": f"{'store' if role == 'result' else 'load'}_{role}",
                    "kind": "dma", "source": src, "destination": dst,
                    "stream": {"time": "free", "packet": "free"}})
    return tensors, ops


def _trf_path(c: cs.Candidate, e: cs.Einsum, axes: dict[str, int], dtype: str,
              spatial: dict[str, str]) -> Part:
    """The TRF operand fetched and collected in the sub context, stored into the TRF."""
    (k,) = e.contracted
    outer = [m.body() for m in parse(c.dims["lane"], axes).terms if m.size > 1] + [
        m.body() for m in parse(c.dims["element"], axes).terms if k not in m.used_axes]
    time, packet = _trf_stream(k, axes[k], flit_elements(dtype), outer)
    stream = {"tier": "stream", **spatial, "time": time, "packet": packet}
    tensors: dict[str, Any] = {
        "trf_fetch": stream, "trf_flits": dict(stream),
        "trf": {"tier": "trf", **spatial, "lane": c.dims["lane"],
                "element": c.dims["element"]}}
    return tensors, [
        {"name": "fetch_trf", "kind": "fetch", "source": "trf_dm", "stream": "trf_fetch",
         "context": "sub"},
        {"name": "collect_trf", "kind": "collect", "source": "trf_fetch",
         "destination": "trf_flits"},
        {"name": "to_trf", "kind": "to_trf", "source": "trf_flits", "destination": "trf"}]


def _main_path(c: cs.Candidate, plan: ContractionPlan, s: Sides, cast: bool, dtype: str,
               spatial: dict[str, str]) -> Part:
    """The streamed operand fetched and collected, the contraction, its result cast to
    the operands' type where asked, trimmed to the flit's leading bytes where padded, and
    committed (the main context)."""
    stream = {"tier": "stream", **spatial}
    acc = hw.CONTRACT_ACCUMULATOR.get(dtype, dtype)
    out_time, out_packet = plan.out.dims["time"].text(), plan.out.dims["packet"]
    flits = {**stream, "time": c.dims["time"], "packet": c.dims["packet"]}
    tensors: dict[str, Any] = {
        "source_fetch": flits, "source_flits": dict(flits),
        "result_stream": {**stream, "time": out_time, "packet": out_packet.text(),
                          "dtype": acc}}
    ops: list[dict[str, Any]] = [
        {"name": "fetch_source", "kind": "fetch", "source": "source_dm",
         "stream": "source_fetch", "context": "main"},
        {"name": "collect_source", "kind": "collect", "source": "source_fetch",
         "destination": "source_flits"},
        {"name": "contract", "kind": "contract", "source": "source_flits", "trf": "trf",
         "destination": "result_stream",
         "stages": {"outer": {"time": c.outer[0], "packet": c.outer[1]},
                    "packet": "m![1]", "time": c.time_out, "lane": c.mode}}]
    last, packet, kind = "result_stream", out_packet, acc
    if cast:  # (f32 to the operands' type, a flit of them padded: Cast's output)
        packet, kind = out_packet.unpadded().pad(flit_elements(dtype)), dtype
        tensors["result_cast"] = {**stream, "time": out_time, "packet": packet.text(),
                                  "dtype": kind}
        ops.append({"name": "cast_result", "kind": "cast", "source": last,
                    "destination": "result_cast", "to": dtype})
        last = "result_cast"
    if packet.unpadded().size != packet.size:  # (the commit writes the flit's lead)
        tensors["result_trimmed"] = {**stream, "time": out_time,
                                     "packet": packet.unpadded().text(), "dtype": kind}
        ops.append({"name": "trim_result", "kind": "commit_trim", "source": last,
                    "destination": "result_trimmed"})
        last = "result_trimmed"
    ops.append({"name": "commit_result", "kind": "commit", "stream": last,
                "destination": "result_dm", "context": "main"})
    return tensors, ops


# ---- the search --------------------------------------------------------------------------
@dataclass
class Timed:
    """A candidate with its moves planned: the engine's plan, the graph and its plan."""

    evaluated: cs.Evaluated
    problem: Any  # the graph's Problem
    plan: Any  # its GraphPlan

    @property
    def makespan(self) -> int:
        return int(self.plan.cycles)

    @functools.cached_property
    def fill(self) -> int:
        """The TRF's fill: the graph's sub-context path (its main path waits for it).
        Computed once: a graph op's schedule asks for it under every choice."""
        from .schedule import tasks_of
        g, gp = self.problem.spec.graph, self.plan
        return sum(max(gp.ops[i].cost for i in t.ops) for t in tasks_of(g)
                   if t.context == "sub")

    def mapping(self) -> dict[str, str]:
        """The chosen mapping, each dimension as ``fix:`` gives it, and the lane mode."""
        c = self.evaluated.candidate
        return {**c.dims, "lane_mode": c.mode}

    def to_json(self) -> dict[str, Any]:
        return {"mapping": self.mapping(), "makespan": self.makespan,
                "graph": self.plan.to_json()}


@dataclass(frozen=True)
class MovesChoice:
    """The search's outcome: the best candidate with its moves (None when none has a
    plan), the count at each stage, the minimal rules that leave none."""

    best: Timed | None
    lowered: int  # candidates lowered by the engine's model
    planned: int  # candidates whose graphs were planned
    candidates: int
    core: tuple[str, ...] = ()
    examples: tuple[Violation, ...] = ()
    proven: bool = True
    op_plans: dict[str, int] = field(default_factory=dict)  # reuse: hits, misses (counts)
    #: the least makespan any candidate can have: the best's, when its graph's plan is
    #: proven (each graph's solver calls have the time limit, as in any graph)
    bound: int | None = None
    #: the op plans of every graph planned (Options.op_plans), to re-plan the chosen one
    cache: OpPlans = field(default_factory=OpPlans, repr=False)


def search(e: cs.Einsum, axes: dict[str, int], dtype: str, fixed: dict, moves: Moves,
           opts: Any, name: str) -> MovesChoice:
    """The candidate whose graph has the least makespan (module docstring: bounds, order,
    reuse)."""
    pool, total = cs.family(e, axes, dtype, lambda c: cs.matches(c, fixed, axes)
                            and given_dm(c, e, axes, dtype, moves))
    if not pool:  # (what the problem fixes and the DM layouts it gives hold no candidate)
        from tcplan.model.rules import fail
        text = ", ".join([f"{d} {m.text()}" for d, m in fixed.items()] + [
            f"the {r} in DM with Element {getattr(moves, r).element}" for r in ROLES
            if getattr(moves, r).tier == "dm" and getattr(moves, r).element])
        v = fail("contraction-fixed", (text,), fixed=text,
                 candidates=total).violations[0]
        return MovesChoice(None, 0, 0, total, ("contraction-fixed",), (v,))
    cache = OpPlans()
    opts = replace(opts, op_plans=cache, verify="none", progress=None)
    floors = [floor(c, e, axes, dtype, moves) for c in pool]
    heap = [(c.flits + fl, 0, i) for i, (c, fl) in enumerate(zip(pool, floors))]
    heapq.heapify(heap)
    lowered: dict[int, cs.Evaluated] = {}
    broken: list[cs.Evaluated] = []
    done: list[Timed] = []
    planned = lowered_count = 0
    best: int | None = None
    while heap and (best is None or heap[0][0] <= best):
        value, stage, i = heapq.heappop(heap)
        if stage == 0:
            lowered_count += 1
            r = cs.evaluate(pool[i], e, axes, dtype)
            if r.plan is None:
                broken.append(r)
                continue
            lowered[i] = r
            heapq.heappush(heap, (r.cycles + floors[i], 1, i))
        elif stage == 1:
            planned += 1
            t = _timed(lowered[i], e, axes, dtype, moves, opts, name)
            if isinstance(t, cs.Evaluated):
                broken.append(t)
                continue
            heapq.heappush(heap, (t.makespan, 2, i))
            done.append(t)
        else:
            best = value
    stats = {"hits": cache.hits, "misses": cache.misses}
    counts = (lowered_count, planned, len(pool))
    if not done:  # (every candidate broke a rule, its engine's or its moves')
        out = cs.conflict(broken, opts.time_limit, opts.seed)
        return MovesChoice(None, *counts, out.core, out.examples, out.proven, stats,
                           cache=cache)
    least = min(t.makespan for t in done)
    top = min((t for t in done if t.makespan == least),
              key=lambda t: (t.evaluated.cycles, t.evaluated.engaged,
                             t.evaluated.candidate.units))
    proven = all(t.plan.status == "optimal" for t in done if t.makespan == least)
    return MovesChoice(top, *counts, (), (), proven, stats, least if proven else None,
                       cache)


def _timed(r: cs.Evaluated, e: cs.Einsum, axes: dict[str, int], dtype: str, moves: Moves,
           opts: Any, name: str) -> Timed | cs.Evaluated:
    """The candidate's graph planned, or the candidate with the rules its moves break."""
    from .graph_plan import plan_graph
    from .outcome import Found
    from .spec import load_problem_data
    assert r.plan is not None
    data = graph_data(r.candidate, r.plan, e, axes, dtype, moves, name)
    try:
        problem = load_problem_data(data, f"<{name}: moves>")
        data = _pruned(data, problem.spec.graph, opts)
        problem = load_problem_data(data, f"<{name}: moves>")
        out = plan_graph(problem.spec.graph, opts)
    except TcplanError as err:
        if err.kind == "input":
            raise
        return cs.Evaluated(r.candidate, violations=tuple(err.violations))
    if not isinstance(out, Found):
        return cs.Evaluated(r.candidate, violations=tuple(out.error.violations))
    return Timed(r, problem, out.record)


def _pruned(data: dict[str, Any], g: Any, opts: Any) -> dict[str, Any]:
    """The graph with each DM tensor's Element restricted to the orders its Fetch or
    Commit has a plan with (an order they reject is in no plan of the graph: dropping it
    before the DMAs are planned under it keeps the optimum)."""
    from .graph_plan import op_choice
    tensors = dict(data["tensors"])
    for op in g.ops:
        if op.kind not in ("fetch", "commit") or not g.op_free(op):
            continue
        (dm,) = g.op_free(op)  # (its one DM tensor: the stream is given)
        ok = [layout[dm] for layout in g.choices(op)
              if op_choice(g, op, layout, opts).ok]
        if ok:  # (none: the graph says which rule, as for any op without a plan)
            tensors[dm] = {**tensors[dm], "element": {"orders": ok}}
    return {**data, "tensors": tensors}
