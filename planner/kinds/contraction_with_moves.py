"""The ``contraction`` kind with its moves (``moves:``; docs/contractions.md 'The moves',
'In a graph'): the block read with located errors, the search (planner/contraction_moves.py)
solved, explained and run through the chosen candidate's graph."""

from __future__ import annotations

import dataclasses
import time as _time
from dataclasses import dataclass
from typing import Any

from tcplan.model import hardware as hw
from tcplan.model.engines.base import flit_elements
from tcplan.model.mapping import Mapping
from tcplan.model.rules import TcplanError, fail

from .. import contraction_moves as cm
from .. import contraction_search as cs
from ..registry import Options, Solved, kinds
from ..render import EXIT_OK, EXIT_RULE
from .contract import feasible
from .contraction_common import from_plan, to_plan, why


def read_moves(ctx, data: Any, e: cs.Einsum, fixed: dict[str, Mapping]) -> cm.Moves:
    """``moves: {source: hbm, trf: {tier: hbm, element: 'm![N, K]'}, result: dm}``: where
    each operand starts and the result goes (``hbm``, its Element free unless given, or
    ``dm``, laid out as the plan needs or given: its Cluster and Slice join ``fixed``)."""
    if not isinstance(data, dict):
        raise ctx.doc.error(("moves",), "expected where the operands start and the result "
                            "goes", EXAMPLE)
    for role in data:
        if role not in cm.ROLES:
            raise ctx.doc.error(("moves", role), f"{role!r} is not an operand",
                                "source, trf or result", at_key=True)
    places = {role: _place(ctx, role, data.get(role, "dm"), e, fixed) for role in cm.ROLES}
    (k,) = e.contracted
    f = flit_elements(ctx.dtype)
    if ctx.axes[k] > f and ctx.axes[k] % f:
        raise ctx.doc.error(("moves",), f"with moves, the contracted axis {k} "
                            f"({ctx.axes[k]}) is a multiple of a flit ({f}) or at most one: "
                            "the TRF is filled a flit of it at a time",
                            f"pad {k} to a multiple of {f}")
    acc = hw.CONTRACT_ACCUMULATOR.get(ctx.dtype, ctx.dtype)
    return cm.Moves(places["source"][0], places["trf"][0], places["result"][0],
                    places["result"][1] != acc)


EXAMPLE = "moves: {source: hbm, trf: hbm, result: hbm}"


def _place(ctx, role: str, p: Any, e: cs.Einsum, fixed: dict[str, Mapping]
           ) -> tuple[cm.Place, str]:
    """One role's place and type: ``hbm`` or ``dm``, or the mapping of either with its
    Element (and a DM one's Cluster and Slice, which join ``fixed``), and ``dtype``."""
    keys = ("moves", role)
    if isinstance(p, str):
        p = {"tier": p}
    if not isinstance(p, dict) or p.get("tier") not in cm.PLACES or set(p) - {
            "tier", "element", "cluster", "slice", "dtype"}:
        raise ctx.doc.error(keys, "expected hbm or dm, or {tier: hbm, element: ...}, or "
                            "{tier: dm, cluster: ..., slice: ..., element: ...}", EXAMPLE)
    if p["tier"] == "hbm" and ("cluster" in p or "slice" in p):
        raise ctx.doc.error(keys + ("slice" if "slice" in p else "cluster",),
                            "an HBM operand has no Cluster or Slice",
                            f"{role}: {{tier: hbm, element: ...}}")
    element = None
    if p.get("element") is not None:
        m = ctx.mapping(keys + ("element",), p["element"], "element")
        letters = {"source": e.stream, "trf": e.trf, "result": e.result}[role]
        if p["tier"] == "hbm" and sorted(m.used_axes) != sorted(letters):
            raise ctx.doc.error(keys + ("element",), f"{m.text()} does not hold exactly "
                                f"the {role}'s axes {', '.join(letters)}",
                                "element: 'm![" + ", ".join(letters) + "]'")
        element = m.text()
    if p["tier"] == "dm" and (element is None) != ("slice" not in p):
        raise ctx.doc.error(keys, "a DM layout given names its Slice and Element (its "
                            "Cluster m![1 # 2] unless given); without them the plan lays "
                            "it out", f"{role}: {{tier: dm, slice: ..., element: ...}}, or dm")
    acc = hw.CONTRACT_ACCUMULATOR.get(ctx.dtype, ctx.dtype)
    want = (acc, *[ctx.dtype] * (ctx.dtype in hw.CAST_ENGINE_CASTS.get(acc, ()))) \
        if role == "result" else (ctx.dtype,)
    if p.get("dtype", want[0]) not in want:
        raise ctx.doc.error(keys + ("dtype",), f"the {role} is {' or '.join(want)} here, "
                            f"not {p['dtype']} (the Multiplier takes the operands' type; "
                            "the result is its accumulator's, or cast back to the "
                            "operands' by the Cast Engine)", f"dtype: {want[0]}")
    if p["tier"] == "dm" and element is not None:
        _fix_spatial(ctx, keys, p, fixed)
    return cm.Place(p["tier"], element), p.get("dtype", want[0])


def _moves_choice(problem, opts: Options) -> cm.MovesChoice:
    s = problem.spec
    return cm.search(s.einsum, problem.axes, problem.dtype, s.fixed, s.moves, opts,
                     problem.name)


def moves_plan(problem, opts: Options) -> cm.Timed:
    out = _moves_choice(problem, opts)
    if out.best is None:
        raise _moves_no_plan(problem, out)
    return out.best


def _moves_no_plan(problem, out: cm.MovesChoice) -> TcplanError:
    if not out.core:
        return fail("plan-time-limit", limit="the solver's", lowered=out.planned)
    rules = ", ".join(f"[{v.rule}] {v.message[:140]}" for v in out.examples)
    return fail("contraction-no-mapping", (problem.spec.einsum.text(),),
                einsum=problem.spec.einsum.text(), candidates=out.candidates, rules=rules)


@dataclass(frozen=True)
class MovesSolved:
    """A contraction solved with its moves: the chosen candidate's graph, its plan and
    schedule, the search's counts, the end-to-end check."""

    problem: str
    einsum: str
    choice: cm.MovesChoice
    graph: Any  # the GraphSolved of the chosen candidate's graph
    times: dict[str, float]

    @property
    def status(self) -> str:
        return "optimal" if self.choice.proven else "feasible"

    @property
    def cycles(self) -> int | None:
        return self.graph.cycles

    @property
    def verified(self) -> bool | None:
        return self.graph.verified

    @property
    def lower_bound(self) -> int | None:
        return self.choice.bound

    @property
    def breakdown(self) -> None:
        return None

    @property
    def error(self) -> TcplanError | None:
        return self.graph.error

    def mapping(self) -> dict[str, str]:
        assert self.choice.best is not None
        return self.choice.best.mapping()

    def to_json(self) -> dict[str, Any]:
        c = self.choice
        return {**self.graph.to_json(), "problem": self.problem, "status": self.status,
                "einsum": self.einsum, "mapping": self.mapping(),
                "lower_bound": c.bound, "times": self.times,
                "search": {"candidates": c.candidates, "lowered": c.lowered,
                           "planned": c.planned, "op_plans_reused": c.op_plans}}

    def text(self) -> str:
        from .graph import _verified, graph_text
        c = self.choice
        assert c.best is not None
        bound = "" if c.proven else "; its graph's plan not proven within the time limit"
        head = [f"{self.problem}: {self.einsum} with its moves, makespan {self.cycles:,} "
                f"cycles ({self.status} over {c.candidates:,} candidate mappings: "
                f"{c.lowered:,} lowered, {c.planned:,} with their moves planned, the "
                f"others bounded out{bound}; op plans reused {c.op_plans.get('hits', 0):,}, "
                f"planned {c.op_plans.get('misses', 0):,})",
                "  mapping: " + ", ".join(f"{d} {v}" for d, v in self.mapping().items())]
        return "\n".join(head + [graph_text(c.best.problem, c.best.plan),
                                 _verified(self.graph)])


def solve(problem, opts: Options) -> Solved:
    from .graph import solve_graph
    t0 = _time.perf_counter()
    out = _moves_choice(problem, opts)
    if out.best is None:
        return Solved.no_plan(problem.name, _moves_no_plan(problem, out),
                              None if out.core else "unknown")
    t1 = _time.perf_counter()  # (the chosen graph re-planned from the search's op plans)
    graph = solve_graph(out.best.problem, dataclasses.replace(opts, op_plans=out.cache))
    if graph.plan is None:  # (the same graph planned again from the same op plans)
        assert graph.error is not None
        return Solved.no_plan(problem.name, graph.error)
    out.best.plan = graph.plan
    record = MovesSolved(problem.name, problem.spec.einsum.text(), out, graph.record,
                         {"plan": round(t1 - t0, 3),
                          "verify": round(_time.perf_counter() - t1, 3)})
    return Solved(record, out.best.plan, exit=graph.exit)


def explain(problem, seed: int) -> tuple[int, dict[str, Any]]:
    from ..explain import _item
    out = _moves_choice(problem, Options(seed=seed))
    if out.best is None:
        if not out.core:
            err = _moves_no_plan(problem, out)
            return EXIT_RULE, {"problem": problem.name, "feasible": False, "conflict": [
                _item(v.rule, v.to_json()) for v in err.violations]}
        return EXIT_RULE, {"problem": problem.name, "feasible": False, "conflict": [
            _item(v.rule, v.to_json()) for v in out.examples]}
    best = out.best
    assert best.evaluated.plan is not None
    sched = best.plan.schedule
    crit = " -> ".join(w.task for w in sched.critical)
    binding = [{"title": f"makespan {best.makespan:,} cycles; the contraction "
                         f"{best.evaluated.cycles:,}",
                "detail": f"the critical path: {crit}" if crit else "the schedule"}]
    binding += why(problem, best.evaluated)
    out_json = feasible(problem.name, best.evaluated.plan, binding)
    out_json.update(cycles=best.makespan, lower_bound=out.bound,
                    bottleneck=f"the critical path {crit}" if crit else "the schedule")
    return EXIT_OK, out_json


def run(problem, plan: cm.Timed, inputs: dict, seed: int) -> dict:
    """The operands (einsum letter order) as the graph's given tensors, the graph run, the
    result back in the result's letter order."""
    from tcplan.executor.graph import run_graph
    e, g, gp = problem.spec.einsum, plan.problem.spec.graph, plan.plan
    names = {role: next(n for n in (f"{role}_hbm", f"{role}_dm") if n in g.tensors)
             for role in ("source", "trf", "result")}
    given = {names[role]: to_plan(inputs[role], letters, g.tensor(names[role], gp.layout),
                                   problem.axes, role)
             for role, letters in (("source", e.stream), ("trf", e.trf)) if role in inputs}
    values, _ = run_graph(g, gp, kinds(), seed, given)
    return {role: from_plan(values[names[key]], g.tensor(names[key], gp.layout), letters,
                             problem.axes)
            for role, key, letters in (("source", "source", e.stream),
                                       ("trf", "trf", e.trf),
                                       ("destination", "result", e.result))}


def _fix_spatial(ctx, keys: tuple, p: dict, fixed: dict[str, Mapping]) -> None:
    """A DM layout given fixes the stream's Cluster and Slice (a Fetch reads its own
    slice's DM): added to ``fixed``, or checked against what is there."""
    from tcplan.model.mapping import same_holding
    for d, default in (("cluster", "m![1 # 2]"), ("slice", None)):
        m = ctx.mapping(keys + (d,), p.get(d, default), d)
        if d in fixed and not same_holding(fixed[d], m):
            raise ctx.doc.error(keys + (d,), f"{m.text()} is not the {d} fixed elsewhere "
                                f"({fixed[d].text()}): one stream reads every operand",
                                f"{d}: '{fixed[d].text()}'")
        fixed[d] = m
