"""A contraction planned whole from its einsum (``kind: contraction``; issue 30, items 1, 2
and 5; planner/contraction_search.py; docs/contractions.md).

The problem names the einsum (``einsum: 'VMK,NK->VMN'``: the streamed operand, the TRF
operand, the result, one letter per axis of ``axes``) and optionally fixes dimensions of
the mapping (``fix: {packet: 'm![1 # 16]'}``); tcplan chooses the rest (the streamed
operand's Cluster, Slice, Time and Packet, the TRF's Lane and Element, the stages' outputs
and the Lane Folder's mode), proves the choice optimal over the candidates under the
Contraction Engine's cycle model, runs it on data against ``numpy.einsum``, and explains a
contraction with no mapping by a minimal set of named rules.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field
from typing import Any

from tcplan.model import hardware as hw
from tcplan.model.engines.contraction import ContractionPlan
from tcplan.model.mapping import Mapping
from tcplan.model.rules import TcplanError, fail

from .. import contraction_moves as cm
from .. import contraction_search as cs
from ..problem import Problem
from ..registry import Kind, Options, Solved, key_sets, kinds, register
from ..render import EXIT_OK, EXIT_RULE
from .contraction_with_moves import MovesSolved, moves_plan, read_moves
from .contraction_with_moves import explain as explain_moves
from .contraction_with_moves import run as run_moves
from .contraction_with_moves import solve as solve_moves
from .contraction_common import from_plan, to_plan, why
from .contract import Contract, feasible
from .engines import EngineSolved


@dataclass(frozen=True)
class ContractionSpec:
    """The einsum, the dimensions the problem fixes (the rest are free) and, when the
    problem says where the operands start and the result goes, the moves around it."""

    einsum: cs.Einsum
    fixed: dict[str, Mapping] = field(default_factory=dict)
    moves: cm.Moves | None = None


@dataclass(frozen=True)
class ContractionSolved(EngineSolved):
    """A contraction's solve: the engine op's record, and how the search went."""

    evaluated: int = 0
    candidates: int = 0
    trf_load: int = 0

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["search"] = {"candidates": self.candidates, "evaluated": self.evaluated,
                         "trf_load_cycles": self.trf_load}
        out["mapping"] = _mapping(self.plan)
        return out


def _mapping(plan: ContractionPlan) -> dict[str, str]:
    """The chosen mapping's dimensions, as a problem would fix them."""
    s, t = plan.src.dims, plan.trf.dims
    return {"cluster": s["cluster"].text(), "slice": s["slice"].text(),
            "time": s["time"].text(), "packet": s["packet"].text(),
            "lane": t["lane"].text(), "element": t["element"].text(),
            "lane_mode": plan.engine.mode}


def _einsum(ctx, text: Any, axes: dict[str, int]) -> cs.Einsum:
    """``'VMK,NK->VMN'``: each letter an axis; one contracted axis, at most one axis only
    the TRF operand carries, the result the operands' axes less the contracted one."""
    keys = ("einsum",)
    example = "einsum: 'VMK,NK->VMN' (the streamed operand, the TRF operand -> the result)"
    if not isinstance(text, str) or text.count("->") != 1 or text.split("->")[0].count(
            ",") != 1:
        raise ctx.doc.error(keys, "expected two operands and a result", example)
    left, result = (p.replace(" ", "") for p in text.split("->"))
    stream, trf = left.split(",")
    for letter in stream + trf + result:
        if letter not in axes:
            raise ctx.doc.error(keys, f"{letter!r} is not an axis (each letter names one "
                                "of axes:)", example)
    for part in (stream, trf, result):
        if len(set(part)) != len(part):
            raise ctx.doc.error(keys, f"{part!r} names an axis twice", example)
    e = cs.Einsum(tuple(stream), tuple(trf), tuple(result))
    want = [a for a in dict.fromkeys(stream + trf) if a not in e.contracted]
    if len(e.contracted) != 1 or sorted(result) != sorted(want):
        raise ctx.doc.error(keys, f"{text!r}: tcplan plans a contraction of one axis both "
                            "operands carry and the result does not, the result carrying "
                            "every other axis", example)
    if len(e.trf_only) > 1:
        raise ctx.doc.error(keys, f"{text!r}: the TRF operand carries {len(e.trf_only)} "
                            "axes the streamed one does not; tcplan plans one (its Lane)",
                            example)
    return e


class Contraction(Kind):
    names = ("contraction",)
    keys = {"contraction": key_sets({"einsum", "fix", "moves"}, {"einsum"})}
    solvable = True
    output_word = "computed"
    #: as a graph's op: the operands and the result as DM tensors of the graph (their
    #: layouts, free or given, become the op's moves: docs/contractions.md 'In a graph')
    graph_roles = {"contraction": {"source": (True, True), "trf": (True, True),
                                   "destination": (False, True)}}
    graph_same_axes = False
    dtype_role = "source"
    #: in a graph's schedule the TRF's fill runs first, in the sub context (decisions 112)
    graph_prelude = ("trf", "sub", "TRF fill")
    #: its own graph runs on its operands' values alone: checked apart (executor/apart.py)
    checks_apart = True

    def graph_resources(self, name: str) -> frozenset[str]:
        """The Vector Engine, held by the op's main path (its Cast Engine, where the result
        is cast; held whether or not it is: the kind, not the plan, says)."""
        return frozenset({"vector engine"})

    def graph_prelude_cycles(self, plan: Any) -> int:
        """The op's own graph's TRF fill (``Timed.fill``: the rest, its main path, waits
        for it; the op's cycles are their sum)."""
        return plan.fill

    def graph_place(self, data: dict[str, Any], role: str, spec: dict[str, Any]) -> tuple:
        key = "result" if role == "destination" else role
        data.setdefault("moves", {})[key] = {k: spec[k] for k in (
            "tier", "cluster", "slice", "element", "dtype") if k in spec}
        return ("moves", key)

    def graph_mac_use(self, plan: Any) -> float:
        inner = plan.evaluated.plan if isinstance(plan, cm.Timed) else plan
        assert inner is not None  # (a Timed candidate was lowered)
        return inner.cycles * inner.mac_utilization

    def graph_summary(self, plan: Any) -> dict[str, Any]:
        if not isinstance(plan, cm.Timed):
            return {}
        inner = plan.evaluated.plan
        assert inner is not None  # (a Timed candidate was lowered)
        return {"mapping": plan.mapping(), "contraction_cycles": inner.cycles,
                "mac_utilization": round(inner.mac_utilization, 6),
                "trf_fill_cycles": self.graph_prelude_cycles(plan)}

    def execute(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        """The op's own graph (Fetches, the TRF's fill, the contraction, the Commit) run on
        the operands' values, each of its ops checked there (the contraction against
        numpy.einsum); the result placed into the graph's memory."""
        return self._inner(problem, plan, mem, tensors, values, seed, False)

    def replay(self, problem, plan, mem, tensors: dict, values: dict, seed: int
               ) -> dict | None:
        """Its own graph with every op replayed (the twin's ran each, checked), as values
        only; None where one of them cannot replay."""
        from tcplan.executor.graph import NeedsMemory
        try:
            return self._inner(problem, plan, mem, tensors, values, seed, True)
        except NeedsMemory:
            return None

    def _inner(self, problem, plan, mem, tensors: dict, values: dict, seed: int,
               replay: bool) -> dict:
        import numpy as np

        from tcplan.executor.graph import run_graph
        from tcplan.executor.run import carried_axes, place
        from tcplan.model.numeric import NP_DTYPES
        g, gp = plan.problem.spec.graph, plan.plan
        names = {op.name: op.name for op in g.ops} if replay else None
        inner, _ = run_graph(g, gp, kinds(), seed, {"source_dm": values["source"],
                                                    "trf_dm": values["trf"]},
                             twins=names, checked=set(names or ()), memory=not replay)
        dst = tensors["destination"]
        out = np.ascontiguousarray(inner["result_dm"], NP_DTYPES[dst.dtype])
        place(mem, dst, {a: problem.axes[a] for a in carried_axes(dst, problem.axes)}, out)
        return {"destination": out}

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> ContractionSpec:
        e = _einsum(ctx, data["einsum"], ctx.axes)
        fix = data.get("fix") or {}
        if not isinstance(fix, dict):
            raise ctx.doc.error(("fix",), "expected dimensions and their mappings",
                                "fix: {packet: 'm![1 # 16]'}")
        fixed = {}
        for d, text in fix.items():
            if d not in cs.FIXABLE:
                raise ctx.doc.error(("fix", d), f"{d!r} is not a dimension a contraction "
                                    "fixes", "one of " + ", ".join(cs.FIXABLE), at_key=True)
            fixed[d] = ctx.mapping(("fix", d), text, d)
        moves = read_moves(ctx, data["moves"], e, fixed) if "moves" in data else None
        return ContractionSpec(e, fixed, moves)

    def has_schedule(self, problem) -> bool:
        return problem.spec.moves is not None

    def _search(self, problem: Problem[ContractionSpec], opts: Options | None = None
                ) -> cs.Choice:
        o = opts or Options()
        return cs.search(problem.spec.einsum, problem.axes, problem.dtype,
                         problem.spec.fixed, o.time_limit, o.seed)

    def lower(self, problem: Problem[ContractionSpec]) -> Any:
        if problem.spec.moves is not None:
            return moves_plan(problem, Options())
        out = self._search(problem)
        if out.best is None or out.best.plan is None:
            raise _no_mapping(problem, out)
        return out.best.plan

    def plan(self, problem, opts: Options) -> tuple[Any, int | None, bool]:
        if problem.spec.moves is not None:
            t = moves_plan(problem, opts)
            return t, t.makespan, t.plan.status == "optimal"
        out = self._search(problem, opts)
        if out.best is None or out.best.plan is None:
            raise _no_mapping(problem, out)
        return out.best.plan, out.best.cycles, out.proven

    def render(self, problem, plan) -> str:
        if isinstance(plan, cm.Timed):  # (with moves: the mapping and its graph's plan)
            from .graph import graph_text
            return "\n".join(["mapping: " + ", ".join(f"{d} {v}" for d, v in
                                                       plan.mapping().items()),
                              graph_text(plan.problem, plan.plan)])
        return plan.text()

    def lower_bound(self, problem, plan) -> int | None:
        return plan.makespan if isinstance(plan, cm.Timed) else plan.cycles

    def verify(self, problem, plan: Any, seed: int, progress=None) -> dict[str, Any]:
        if isinstance(plan, cm.Timed):  # (the moves: the graph run end to end)
            from tcplan.executor.graph import run_graph

            from .graph import _breakdown
            _, rep = run_graph(plan.problem.spec.graph, plan.plan, kinds(), seed,
                               progress=progress)
            return {**rep, "cycles": plan.makespan, "breakdown": _breakdown(plan.plan)}
        return Contract.verify(Contract(), problem, plan, seed)  # (its stream and TRF)

    def _run(self, problem, plan: ContractionPlan, S, W):
        return Contract._run(Contract(), problem, plan, S, W)

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        if "mac_utilization" not in report["breakdown"]:  # (the moves: a graph's lines)
            from .graph import GraphKind
            return GraphKind.verify_lines(GraphKind(), report)
        return Contract.verify_lines(Contract(), report)

    def solve(self, problem: Problem[ContractionSpec], opts: Options) -> Solved:
        if problem.spec.moves is not None:
            return solve_moves(problem, opts)
        t0 = _time.perf_counter()
        out = self._search(problem, opts)
        if out.best is None or out.best.plan is None:
            return Solved.no_plan(problem.name, _no_mapping(problem, out),
                                  None if out.proven else "unknown")
        plan, t1 = out.best.plan, _time.perf_counter()
        verified, checked, error = None, 0, None
        if opts.verify != "none":
            try:
                verified, checked = True, self.verify(problem, plan, opts.seed)["checked"]
            except TcplanError as err:
                verified, error = False, err
        record = ContractionSolved(
            problem.name, plan, verified, checked,
            {"plan": round(t1 - t0, 3), "verify": round(_time.perf_counter() - t1, 3)},
            error, "optimal" if out.proven else "feasible", out.evaluated, out.candidates,
            out.best.trf_load)
        return Solved(record, plan, exit=EXIT_RULE if verified is False else EXIT_OK)

    def solve_text(self, problem, solved: Solved) -> str:
        r = solved.record
        if isinstance(r, MovesSolved):
            return r.text()
        if solved.error is not None or not isinstance(r, ContractionSolved):
            return Kind.solve_text(self, problem, solved)
        check = ("not verified (--verify none)" if r.verified is None else
                 f"verified: {r.checked:,} positions against numpy.einsum" if r.verified
                 else f"NOT verified: {r.error.message if r.error else ''}")
        m = _mapping(r.plan)
        return "\n".join([
            f"{problem.name}: {problem.spec.einsum.text()}, {r.cycles:,} cycles ({r.status}"
            f" over {r.candidates:,} candidate mappings, {r.evaluated:,} evaluated, the "
            "others bounded out)",
            "  mapping: " + ", ".join(f"{d} {v}" for d, v in m.items()),
            f"  the TRF's load (to_trf, sub context): {r.trf_load:,} cycles, before it",
            r.plan.text(), check])

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        from ..explain import _item
        if problem.spec.moves is not None:
            return explain_moves(problem, seed)
        out = self._search(problem)
        if out.best is None or out.best.plan is None:
            return EXIT_RULE, {"problem": problem.name, "feasible": False, "conflict": [
                _item(v.rule, v.to_json()) for v in out.examples]}
        return EXIT_OK, feasible(problem.name, out.best.plan, why(problem, out.best))

    def inputs(self, problem) -> tuple[str, ...]:
        return ("source", "trf")

    def run(self, problem, plan: Any, inputs: dict, seed: int) -> dict:
        """The operands in the einsum's letter order (``source``: the streamed one,
        ``trf``), the result (``destination``) in the result's."""
        e = problem.spec.einsum
        if isinstance(plan, cm.Timed):
            return run_moves(problem, plan, inputs, seed)
        given = {role: to_plan(inputs[role], letters, t, problem.axes, role)
                 for role, letters, t in (("source", e.stream, plan.src),
                                          ("trf", e.trf, plan.trf)) if role in inputs}
        out = Contract.run(Contract(), problem, plan, given, seed)
        return {"source": from_plan(out["source"], plan.src, e.stream, problem.axes),
                "trf": from_plan(out["trf"], plan.trf, e.trf, problem.axes),
                "destination": from_plan(out["destination"], plan.out, e.result,
                                          problem.axes)}


def _no_mapping(problem, out: cs.Choice) -> TcplanError:
    if not out.proven and not out.core:
        return fail("plan-time-limit", limit="the solver's", lowered=out.evaluated)
    rules = ", ".join(f"[{v.rule}] {v.message[:140]}" for v in out.examples)
    return fail("contraction-no-mapping", (problem.spec.einsum.text(),),
                einsum=problem.spec.einsum.text(), candidates=out.candidates, rules=rules)


register(Contraction())

