"""Graph problems (``kind: graph``; docs/graphs.md): ops over shared named tensors, their
free layouts chosen jointly (planner/graph_plan.py), run end to end on one set of memories
(executor/graph.py)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tcplan.model.rules import TcplanError

from ..outcome import NoPlan, TimedOut, unwrap
from ..problem import Problem
from ..render import EXIT_OK, EXIT_RULE
from ..registry import Kind, Options, Solved, key_sets, kinds, register

if TYPE_CHECKING:  # (planner/graph.py imports networkx: loaded with the first graph)
    from ..graph import Graph
    from ..graph_plan import ConflictOp


@dataclass(frozen=True)
class GraphSpec:
    """A graph problem's tensors, ops and objective, as planner/graph.py reads them."""

    graph: "Graph"


def _graph(problem: Problem[GraphSpec]) -> "Graph":
    return problem.spec.graph


class GraphKind(Kind):
    names = ("graph",)
    scheduled = True
    keys = {"graph": key_sets({"tensors", "ops", "objective"}, {"tensors", "ops"})}
    solvable = True
    output_word = "graph tensor"

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> GraphSpec:
        from ..graph import load_graph
        return GraphSpec(load_graph(ctx, data))

    def lower(self, problem, opts: Options | None = None) -> Any:
        from ..graph_plan import plan_graph
        return unwrap(plan_graph(_graph(problem), opts or Options()))

    def plan(self, problem, opts: Options) -> tuple[Any, int | None, bool]:
        gp = self.lower(problem, opts)
        return gp, gp.cycles, gp.status == "optimal"

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.graph import run_graph
        _, rep = run_graph(_graph(problem), plan, kinds(), seed, progress=progress,
                           keep=())  # (no value is returned: each dropped once checked)
        return {**rep, "cycles": plan.cycles, "breakdown": _breakdown(plan)}

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        b = report["breakdown"]
        return [f"  {o['op']} ({o['kind']}): {_cycles(o['cycles'])}" for o in b["ops"]] + [
            f"  sum {b['sum_cycles']:,}; critical path {b['critical_path_cycles']:,} ("
            + " -> ".join(b["critical_path"]) + ")"]

    def inputs(self, problem) -> tuple[str, ...]:
        """The given tensors, and each chain op's VRF operands as OP.NAME."""
        g = _graph(problem)
        return tuple(n for n, t in g.tensors.items() if t.given) + tuple(
            f"{op.name}.{v}" for op in g.ops for v in op.vrf)

    def run(self, problem, plan, inputs: dict, seed: int) -> dict:
        from tcplan.executor.graph import run_graph
        values, _ = run_graph(_graph(problem), plan, kinds(), seed, inputs)
        return values

    def render(self, problem, plan) -> str:
        return graph_text(problem, plan)

    def solve(self, problem, opts: Options) -> Solved:
        return solve_graph(problem, opts)

    def solve_text(self, problem, solved: Solved) -> str:
        record = solved.record
        if not isinstance(record, GraphSolved):
            return super().solve_text(problem, solved)
        return "\n".join([graph_text(problem, record.plan), _verified(record)])

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        return explain_graph(problem, seed)

    def trace_check(self, problem) -> None:
        from tcplan.model.rules import fail
        raise fail("bad-request", detail="tcplan trace follows an index through one "
                   "problem's tensors; a graph's tensors take their layouts from its plan",
                   fix="tcplan lower the graph for its layouts, or trace one op written as "
                       "a problem of its own")


register(GraphKind())


def _breakdown(gp) -> dict[str, Any]:
    """A graph plan's numbers: each op's cycles, the sum and the critical path."""
    return {"objective": gp.objective, "sum_cycles": gp.sum_cycles,
            "unmodelled": gp.unmodelled,
            "critical_path_cycles": gp.critical_path_cycles,
            "critical_path": gp.critical_path,
            **({"schedule": gp.schedule.to_json()} if gp.schedule is not None else {}),
            "ops": [{"op": r.problem.name, "kind": r.problem.kind, "cycles": r.cycles,
                     "layout": r.layout} for r in gp.ops]}


def _op_json(row) -> dict[str, Any]:
    from ..registry import kind_of
    kind = kind_of(row.problem)
    return {"op": row.problem.name, "kind": row.problem.kind, "cycles": row.cycles,
            "lower_bound": kind.lower_bound(row.problem, row.plan),
            **kind.graph_summary(row.plan)}


@dataclass(frozen=True)
class GraphSolved:
    """A graph's solve: the joint plan (planner/graph_plan.py's GraphPlan: its status,
    layouts, ops, cycles by sum and critical path), whether it ran end to end, and the
    times.  Its cycles are None when no op has modelled cycles."""

    problem: str
    plan: Any  # the GraphPlan
    cycles: int | None
    verified: bool | None
    checked: int
    check: str
    times: dict[str, float]
    solve_time: float
    error: TcplanError | None = None
    lower_bound: None = None
    breakdown: None = None
    paths: tuple = ()  # the Tensor Unit paths as pipelines (planner/pipeline.py)

    @property
    def status(self) -> str:
        return self.plan.status

    def to_json(self) -> dict[str, Any]:
        gp = self.plan
        out = {"problem": self.problem, "status": gp.status, "cycles": self.cycles,
               "objective": gp.objective, "sum_cycles": gp.sum_cycles,
               "critical_path_cycles": gp.critical_path_cycles,
               "critical_path": gp.critical_path, "unmodelled": gp.unmodelled,
               "plan": {"layouts": gp.layout, "ops": [_op_json(r) for r in gp.ops]},
               "verified": self.verified, "checked": self.checked, "check": self.check,
               "evaluations": gp.evaluations, "parts": gp.parts,
               "op_plans": gp.op_plans, "solve_time": self.solve_time,
               "times": self.times, "tu_paths": [t.to_json() for t in self.paths]}
        if gp.schedule is not None:
            out["schedule"] = gp.schedule.to_json()
        if self.error is not None:
            out["error"] = self.error.to_json()
        return out


def solve_graph(problem, opts: Options) -> Solved:
    """Choose every free tensor's layout and every op's plan, then run the graph end to end
    (``opts.verify``: ``full``; ``sample`` runs it in full too; ``none`` skips the run)."""
    from tcplan.executor.graph import run_graph

    from ..graph_plan import plan_graph
    from ..op_pool import checkers
    t0 = time.perf_counter()
    g = _graph(problem)
    try:
        out = plan_graph(g, opts)
        gp = unwrap(out)
    except TcplanError as err:
        if err.kind == "input":
            raise
        return Solved.no_plan(problem.name, err, "unknown" if err.code == "plan-time-limit"
                              or err.kind == "limit" else "infeasible")
    plan_s = time.perf_counter() - t0
    verified, checked, error = None, 0, None
    t1 = time.perf_counter()
    if opts.verify != "none":
        try:
            checked = run_graph(g, gp, kinds(), opts.seed, progress=opts.progress,
                                keep=(), twins=twin_keys(g, gp),
                                apart=checkers(opts))[1]["checked"]
            verified = True
        except TcplanError as err:
            verified, error = False, err
    modelled = len(gp.unmodelled) < len(g.ops)  # (else no figure to give)
    from ..pipeline import tu_paths
    record = GraphSolved(problem.name, gp, gp.cycles if modelled else None, verified,
                         checked, "none" if opts.verify == "none" else "full",
                         {"plan": round(plan_s, 3), **gp.times, "lower": 0.0,
                          "execute": 0.0, "verify": round(time.perf_counter() - t1, 3)},
                         round(plan_s, 3), error, paths=tuple(tu_paths(g, gp)))
    return Solved(record, gp, exit=EXIT_OK if verified is not False else EXIT_RULE)


def twin_keys(g, gp) -> dict[str, str]:
    """Op name -> the signature its plan was kept under (planner/op_cache.py) with the HBM
    periods its plan was moved by: ops with one key have one plan, to the byte, so the run
    checks the first and replays the others (executor/graph.py ``run_graph``).  A plan
    moved to other addresses is other commands: each moved copy runs, checked."""
    from ..op_cache import op_shifts, op_signature
    return {op.name: (gp.ops[op.index].signature or op_signature(g, op, gp.layout))
            + json.dumps(sorted(op_shifts(g, op).items())) for op in g.ops}


def _reuse_lines(gp) -> list[str]:
    """What was planned once and reused (planner/op_cache.py, planner/graph_parts.py)."""
    r = gp.op_plans
    if not r or not r.get("asked"):
        return []
    return [f"  op plans: {r['asked']:,} asked, {r['planned']:,} planned, {r['hits']:,} "
            f"reused in this run, {r['disk_hits']:,} from the disk cache (hit rate "
            f"{r['hit_rate']:.1%}), {r.get('avoided', 0):,} avoided by their floors; "
            f"{gp.parts:,} independent part(s)"]


def graph_text(problem, gp) -> str:
    g = _graph(problem)
    lines = [f"{problem.name}: {len(g.ops)} op(s) over {len(g.tensors)} tensor(s); "
             f"{gp.cycles:,} cycles ({gp.status}; objective {gp.objective}: sum "
             f"{gp.sum_cycles:,}, critical path {gp.critical_path_cycles:,} through "
             + (" -> ".join(gp.critical_path) or "no op with modelled cycles")
             + f"; {gp.evaluations} op plan(s) evaluated)"] + _reuse_lines(gp)
    for n, c in gp.layout.items():
        lines.append(f"  {n}: Element {c} (of {len(g.tensors[n].candidates or ())} candidates)")
    for i in g.order:
        row, op = gp.ops[i], g.ops[i]
        j = _op_json(row)
        how = (f"; Time {j['stream']['time']}, Packet {j['stream']['packet']}"
               if "stream" in j else f"; {j['invocations']} invocation(s)"
               if "invocations" in j else "")
        if "stages" in j:  # (a contraction: its multipliers' use, its slowest stage)
            slow = max(j["stages"], key=j["stages"].get)
            how += f"; MAC utilization {j['mac_utilization']:.4f}, bottleneck the {slow}"
        if "mapping" in j:  # (a contraction op: its mapping, the engine's part, the fill)
            how += (f"; its TRF fill {j['trf_fill_cycles']:,}, the contraction "
                    f"{j['contraction_cycles']:,} (MAC utilization "
                    f"{j['mac_utilization']:.4f}); mapping " + ", ".join(
                        f"{d} {v}" for d, v in j["mapping"].items()))
        bound = ("" if j["lower_bound"] is None or row.cycles is None else
                 " (at its lower bound)" if row.cycles <= j["lower_bound"] else
                 f" (lower bound {j['lower_bound']:,})")
        lines.append(f"  op {op.name} ({op.kind} {_flow(op)}): {_cycles(row.cycles)}{bound}"
                     f"{how}")
    if gp.unmodelled:
        lines.append("  (cycles not modelled, counted 0: " + ", ".join(gp.unmodelled) + ")")
    from ..pipeline import tu_paths
    lines += [p.text() for p in tu_paths(g, gp)]
    if gp.schedule is not None:
        lines.append(gp.schedule.text())
    return "\n".join(lines)


def _flow(op) -> str:
    return ", ".join(op.reads) + " -> " + ", ".join(op.writes)


def _cycles(c: int | None) -> str:
    return "cycles not modelled" if c is None else f"{c:,} cycles"


def _verified(r: GraphSolved) -> str:
    if r.verified is None:
        return "not verified (--verify none: the graph was not run)"
    if not r.verified:
        assert r.error is not None  # (a failed run has its error)
        return f"NOT verified [{r.error.code}]: {r.error.message}"
    return f"verified end to end: {r.checked:,} tensor elements"


def explain_graph(problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
    """A minimal set of ops whose layout needs conflict, or what the plan costs."""
    from ..graph_plan import plan_graph
    try:
        out = plan_graph(_graph(problem), Options(seed=seed))
    except TcplanError as err:  # (what the evaluation says: no choice to explain)
        if err.kind == "input":
            raise
        return EXIT_RULE, _no_choice(problem, err)
    if isinstance(out, TimedOut):
        return EXIT_RULE, _no_choice(problem, out.error)
    if isinstance(out, NoPlan):
        fix = out.error.violations[0].fix
        conflict = [{"rule": "graph-no-layout", "requirement": f"op {it.op}", "op": it.op,
                     "rules": it.rules, "layouts_with_a_plan": it.layouts_with_a_plan,
                     "message": _need(it), "fix": fix} for it in out.record.ops]
        return EXIT_RULE, {"problem": problem.name, "feasible": False, "conflict": conflict}
    gp = out.record
    return EXIT_OK, {"problem": problem.name, "feasible": True, "cycles": gp.cycles,
                     "bottleneck": "critical path " + " -> ".join(gp.critical_path),
                     "binding": [{"title": f"op {r.problem.name}: {_cycles(r.cycles)} with "
                                  + (", ".join(f"{n} {c}" for n, c in r.layout.items())
                                     or "its given layouts")} for r in gp.ops]}


def _no_choice(problem, err: TcplanError) -> dict[str, Any]:
    """The explanation of a graph whose choice never ran: the error, as its one item."""
    v = err.violations[0]
    return {"problem": problem.name, "feasible": False, "conflict": [
        {"rule": v.rule, "requirement": v.rule, "message": v.message, "fix": v.fix}]}


def _need(it: ConflictOp) -> str:
    ok = it.layouts_with_a_plan
    if not ok:
        return f"op {it.op} has no plan with any candidate layout (" + "; ".join(
            f"{r}: {it.examples[r]}" if r in it.examples else r for r in it.rules) + ")"
    return (f"op {it.op} has a plan only with " + " or ".join(
        ", ".join(f"{n} {c}" for n, c in lay.items()) for lay in ok[:3])
        + (f" (or {len(ok) - 3} more)" if len(ok) > 3 else "")
        + ("; the others are rejected by " + "; ".join(
            f"{r} ({it.examples[r]})" if r in it.examples else r
            for r in it.rules) if it.rules else ""))

