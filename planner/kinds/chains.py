"""Vector Engine chains, planned expressions and Lane Folder folds (seeds 003-005): problems
whose data flows through the Tensor Unit's Intra-Slice Chain or the Lane Folder."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tcplan.model import tiers
from tcplan.model.rules import TcplanError, fail

from ..chains_spec import ExpressionSpec, LaneFoldSpec, VectorSpec, parse_lane_fold, parse_vector
from ..problem import Problem
from ..render import EXIT_RULE, format_error
from ..registry import Kind, Options, Solved, key_sets, register


class _Chains(Kind):
    output_word = "output"
    #: as a graph's op: reads x and writes out, in the DM of its slices (check_tensors)
    ROLES = {"x": (True, False), "out": (False, False)}

    def inputs(self, problem) -> tuple[str, ...]:
        return ("x",) + tuple(n[4:] for n in problem.tensors if n.startswith("vrf:"))

    def run(self, problem, plan, inputs: dict, seed: int) -> dict:
        return _run_chains(problem, plan, inputs, seed)

    def out_dtype(self, plan) -> str:
        """The dtype a graph's chain op writes (the kind's own)."""
        raise NotImplementedError

    def _checked(self, problem, plan, X, seed: int, vrf: dict) -> dict[str, Any]:
        """Run the op on ``X`` and check it (a kind that is a graph op has it)."""
        raise NotImplementedError

    def check_tensors(self, problem, plan, tensors: dict) -> None:
        """A graph's chain reads ``x`` and writes ``out`` in its slices' DM: through the
        Fetch and Commit sequencers, whose configs must exist (every sequencer rule)."""
        from tcplan.model.sequencer import derive
        stream = problem.tensors["input"]
        out = {**{d: stream.dims[d] for d in ("time", "packet")}, **problem.spec.output}
        dtypes = {"x": problem.dtype, "out": self.out_dtype(plan)}
        for role, maps, mode, engine in (("x", stream.dims, "read", "fetch"),
                                         ("out", out, "write", "commit")):
            t = tensors[role]
            if t.dtype != dtypes[role]:
                raise fail("graph-dtype", (t.name,), tensor=t.name, have=t.dtype,
                           op=problem.name, verb="reads" if role == "x" else "writes",
                           want=dtypes[role])
            want = {d: stream.dims[d].text() for d in ("chip", "cluster", "slice")}
            have = {d: t.dims[d].text() for d in want if d in t.dims}
            if t.tier != "dm" or have != want:
                raise fail("graph-chain-placement", (t.name,), tensor=t.name, op=problem.name,
                           have=f"in {t.tier}" + (" with " + ", ".join(
                               f"{d.title()} {v}" for d, v in have.items()) if have else ""),
                           want=", ".join(f"{d.title()} {v}" for d, v in want.items()))
            derive(t.dims["element"], maps["time"], maps["packet"], t.dtype, mode, engine)

    def execute(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        """Run the chain(s) on what ``x`` holds, check the result against the formula, and
        commit it to ``out``."""
        from tcplan.executor.run import place
        vrf = checked_inputs(problem, {k[4:]: v for k, v in values.items()
                                       if k.startswith("vrf:")}, f"{problem.name}.")
        rep = self._checked(problem, plan, values["x"], seed, vrf)
        r = rep["run"]
        if not r["written"].all():
            raise fail("verify-mismatch", detail=f"op {problem.name} leaves positions of "
                       f"{tensors['out'].name} unwritten")
        place(mem, tensors["out"], problem.axes, r["out"])
        return {"out": r["out"]}


class Vector(_Chains):
    names = ("vector",)
    graph_roles = {"vector": _Chains.ROLES}
    keys = {"vector": key_sets({"input", "vrf", "chain", "output", "reference"},
                               {"input", "chain"})}

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> VectorSpec | ExpressionSpec:
        return parse_vector(ctx, data, kind, tensors)

    def lower(self, problem) -> Any:
        from tcplan.model.vector import analyze

        from ..chains_spec import chain_of
        tiers.require_placement(problem.tensors.values(), problem.chips)
        return analyze(chain_of(problem))

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.chains import verify_vector
        rep = verify_vector(problem, plan, seed)
        rep.pop("run")
        return rep

    def plan(self, problem, opts: Options) -> tuple[Any, int | None, bool]:
        if problem.spec.reference is None:
            raise fail("bad-request", detail=f"a graph checks every op; the vector op "
                       f"{problem.name} has no reference formula to check its chain by",
                       fix="add reference: '<formula of x>' to the op")
        an = self.lower(problem)
        return an, an.cycles, True

    def out_dtype(self, plan) -> str:
        return plan.infos[-1].dtype  # (the dtype after the last step)

    def _checked(self, problem, plan, X, seed: int, vrf: dict) -> dict[str, Any]:
        from tcplan.executor.chains import verify_vector
        return verify_vector(problem, plan, seed, X, vrf)

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        b = report["breakdown"]
        return [f"  {b['flits']:,} flit(s) per slice + {b['latency']} cycle(s) of ALU "
                f"latency ({', '.join(b['alus']) or 'no ALU'}); bottleneck: "
                f"{b['bottleneck']}"] if b else []


class LaneFold(_Chains):
    names = ("lane_fold",)
    keys = {"lane_fold": key_sets({"input", "mode", "output"}, {"input", "mode"})}

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> LaneFoldSpec:
        return parse_lane_fold(ctx, data, tensors)

    def inputs(self, problem) -> tuple[str, ...]:
        return ("x",)

    def lower(self, problem: Problem[LaneFoldSpec]) -> Any:
        from tcplan.model.lane import fold
        tiers.require_placement(problem.tensors.values(), problem.chips)
        m, out = problem.spec.input, problem.spec.output
        return fold(problem.axes, m["lane"], m["time"], m["packet"], problem.spec.mode,
                    out.get("time"), out.get("packet"))

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.chains import verify_lane_fold
        return verify_lane_fold(problem, plan, seed)

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        b = report["breakdown"]
        return [f"  {b['flits']:,} flit(s); {b['elements_per_cycle']} of {b['bus_width']} "
                "bus lanes carry data per cycle"] if b else []


class Expression(_Chains):
    names = ("expression",)
    graph_roles = {"expression": _Chains.ROLES}
    keys = {"expression": key_sets({"input", "vrf", "expression", "output", "pair_axis"},
                                   {"input", "expression"})}

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> VectorSpec | ExpressionSpec:
        return parse_vector(ctx, data, kind, tensors)
    solvable = True

    def lower(self, problem) -> Any:
        from ..chains import plan_expression
        return plan_expression(problem)

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.chains import verify_plan
        rep = verify_plan(problem, plan, seed)
        rep.pop("run")
        return {**rep, "cycles": plan.cycles, "invocations": len(plan.chains),
                "breakdown": {"invocations": [a.breakdown() for a in plan.analyses]}}

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        return ([f"  {report['invocations']} invocation(s) as planned by tcplan solve"]
                if report.get("breakdown") else [])

    def solve(self, problem, opts: Options) -> Solved:
        return solve_expression(problem, opts)

    def plan(self, problem, opts: Options) -> tuple[Any, int | None, bool]:
        from ..chains import plan_expression
        plan = plan_expression(problem, opts.time_limit, opts.workers, opts.seed)
        return plan, plan.cycles, plan.solution.status == "optimal"

    def out_dtype(self, plan) -> str:
        return plan.analyses[-1].infos[-1].dtype  # (the dtype after the last step)

    def graph_summary(self, plan) -> dict[str, Any]:
        return {"invocations": len(plan.chains)}

    def _checked(self, problem, plan, X, seed: int, vrf: dict) -> dict[str, Any]:
        from tcplan.executor.chains import verify_plan
        return verify_plan(problem, plan, seed, X, vrf)

    def solve_text(self, problem, solved: Solved) -> str:
        if solved.error is None and isinstance(solved.record, ExpressionSolved):
            return expression_text(problem, solved.record)
        if solved.plan is not None and solved.error is not None:  # planned, check failed
            return f"{problem.name}: planned but NOT verified\n" + format_error(solved.error)
        return super().solve_text(problem, solved)

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        from ..explain import explain_expression
        return explain_expression(problem, seed)


class StreamChain(Vector):
    """A chain on a stream (issue 29: the Vector Engine between the Contraction Engine, a
    collect or a cast and the next engine): ``source`` and ``destination`` are streams on the
    same units, the VRF operands register-file tensors (in a graph, tensors a ``to_vrf``
    wrote).  No Fetch and no Commit: the stream passes engine to engine."""

    names = ("chain",)
    graph_roles = {"chain": {"source": (True, True), "destination": (False, True)}}
    keys = {"chain": key_sets({"source", "destination", "vrf", "chain", "reference"},
                              {"source", "destination", "chain", "reference"})}
    graph_same_axes = False  # (a reduce step drops an axis: check_tensors checks the rest)
    dtype_role = "source"
    output_word = "destination"

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> VectorSpec:
        from ..chains_spec import parse_chain
        return parse_chain(ctx, data, tensors)

    def graph_extra_roles(self, op: dict[str, Any]) -> dict[str, tuple[Any, tuple]]:
        vrf = op.get("vrf")
        return ({f"vrf:{n}": (t, ("vrf", n)) for n, t in vrf.items()}
                if isinstance(vrf, dict) else {})

    def graph_place(self, data: dict[str, Any], role: str, spec: dict[str, Any]) -> tuple:
        if not role.startswith("vrf:"):
            return super().graph_place(data, role, spec)
        data["vrf"] = {**data["vrf"], role[4:]: spec}  # (a copy: the op's keys stay)
        return ("vrf", role[4:])

    def lower(self, problem) -> Any:
        from tcplan.model.vector import analyze

        from ..chains_spec import chain_of
        return analyze(chain_of(problem))

    def plan(self, problem, opts: Options) -> tuple[Any, int | None, bool]:
        an = self.lower(problem)
        return an, an.cycles, True

    def lower_bound(self, problem, plan) -> int | None:
        return plan.cycles  # (nothing to choose: the chain's flits and latency)

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.chains import verify_vector
        rep = verify_vector(problem, plan, seed)
        rep.pop("run")
        return rep

    def graph_summary(self, plan) -> dict[str, Any]:
        return {"alus": list(plan.alus), "dtype": self.out_dtype(plan)}

    def check_tensors(self, problem, plan, tensors: dict) -> None:
        """The destination carries the chain's type and the source's axes but those a
        reduce step sums."""
        from tcplan.executor.run import carried_axes
        src, dst = tensors["source"], tensors["destination"]
        if dst.dtype != self.out_dtype(plan):
            raise fail("graph-dtype", (dst.name,), tensor=dst.name, have=dst.dtype,
                       op=problem.name, verb="makes it", want=self.out_dtype(plan))
        want = [a for a in carried_axes(src, problem.axes) if a not in plan.dropped_axes]
        have = carried_axes(dst, problem.axes)
        if set(have) != set(want):
            raise fail("bad-request", detail=f"op {problem.name}: {dst.name} carries the axes "
                       f"{have}; the chain leaves {want} (the source's, less the ones a reduce "
                       "step sums)", fix=f"declare {dst.name} over {want}")

    def execute(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        """Check the chain against its reference on seeded edge values (signs, zeros,
        extremes: the stream's own values may not reach them), then run it on the stream's
        values, checked again."""
        from tcplan.executor.chains import verify_vector
        verify_vector(problem, plan, seed)
        vrf = checked_inputs(problem, {k[4:]: v for k, v in values.items()
                                       if k.startswith("vrf:")}, f"{problem.name}.")
        r = self._checked(problem, plan, values["source"], seed, vrf)["run"]
        return {"destination": r["out"]}

    def replay(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        """The chain run on the stream's values, not checked against its formula again."""
        from tcplan.executor.chains import run_vector
        vrf = checked_inputs(problem, {k[4:]: v for k, v in values.items()
                                       if k.startswith("vrf:")}, f"{problem.name}.")
        return {"destination": run_vector(problem, plan, seed,
                                          {"x": values["source"], **vrf})["out"]}

    def inputs(self, problem) -> tuple[str, ...]:
        return ("source",) + tuple(n[4:] for n in problem.tensors if n.startswith("vrf:"))

    def run(self, problem, plan, inputs: dict, seed: int) -> dict:
        """The chain on the user's stream (``source``, over the problem's axes) and VRF
        operands: the values it makes (``destination``)."""
        from tcplan.executor.chains import run_vector
        given = checked_inputs(problem, {"x" if k == "source" else k: v
                                         for k, v in inputs.items()})
        r = run_vector(problem, plan, seed, given)
        return {"source": r["x"], **r["vrf"], "destination": r["out"]}

    def solve(self, problem, opts: Options) -> Solved:
        from .engines import solve_given
        return solve_given(self, problem, opts)

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        from .engines import TensorUnitEngine
        return TensorUnitEngine.explain(self, problem, seed)  # type: ignore[arg-type]

    def solve_text(self, problem, solved: Solved) -> str:
        from .engines import given_text
        ref = problem.spec.reference
        return given_text(self, problem, solved, f" against {ref.text}" if ref else "")


for k in (Vector(), LaneFold(), Expression(), StreamChain()):
    register(k)


@dataclass(frozen=True)
class ExpressionSolved:
    """An expression's solve: the planner's status, the chains' cycles and invocations (each
    chain's steps, ALUs and cycles: ``chains``), and the check of the chains against the
    formula on seeded data (``method``; ``error`` when they do not compute it)."""

    problem: str
    status: str
    plan: Any  # the chains planned (planner/chains.py's Plan)
    verified: bool | None
    checked: int = 0
    check: str = "full"
    method: str = ""
    solve_time: float = 0.0
    times: dict[str, float] = field(default_factory=dict)
    error: TcplanError | None = None
    lower_bound: None = None
    breakdown: None = None

    @property
    def cycles(self) -> int:
        return self.plan.cycles

    @property
    def invocations(self) -> int:
        return len(self.plan.chains)

    @property
    def note(self) -> str | None:
        return ("the time limit cut the search: the plan is not proven optimal"
                if self.status != "optimal" else None)

    def to_json(self) -> dict[str, Any]:
        head = {"problem": self.problem, "status": self.status, "cycles": self.cycles,
                "invocations": self.invocations, "plan": self.plan.chains_json(),
                "verified": self.verified}
        if self.error is not None:  # (a plan that does not compute its formula)
            return {**head, "error": self.error.to_json()}
        out = {**head, "checked": self.checked, "check": self.check, "method": self.method,
               "solve_time": self.solve_time, "times": self.times}
        if self.note is not None:
            out["note"] = self.note
        return out


def solve_expression(problem: Problem[ExpressionSpec], opts: Options) -> Solved:
    """Plan an expression: the fewest Tensor Unit invocations, each a valid chain; run the
    chains on seeded inputs against the formula."""
    from tcplan.executor.chains import verify_plan

    from ..chains import plan_expression
    t0 = time.perf_counter()
    try:
        plan = plan_expression(problem, opts.time_limit, opts.workers, opts.seed)
    except TcplanError as err:
        if err.kind == "input":
            raise
        return Solved.no_plan(problem.name, err, "unknown" if err.code in (
            "plan-time-limit", "size-limit") else "infeasible")
    solve_s = time.perf_counter() - t0
    check = opts.verify
    t1 = time.perf_counter()
    try:
        # (an expression's chains are small: sample checks them in full too)
        report: dict[str, Any] = (
            verify_plan(problem, plan, opts.seed) if check != "none" else
            {"verified": None, "checked": 0, "method": "not run (--verify none)"})
    except TcplanError as err:  # a plan that does not compute the formula: a tcplan bug
        return Solved(ExpressionSolved(problem.name, plan.solution.status, plan, False,
                                       error=err), plan, err, EXIT_RULE)
    record = ExpressionSolved(
        problem.name, plan.solution.status, plan, report["verified"], report["checked"],
        "full" if check == "sample" else check, report["method"], round(solve_s, 3),
        # (the chains run on their data and are checked in one pass: verify holds both)
        {"plan": round(solve_s, 3), "lower": 0.0, "execute": 0.0,
         "verify": round(time.perf_counter() - t1, 3)})
    return Solved(record, plan)


def expression_text(problem: Problem[ExpressionSpec], out: ExpressionSolved) -> str:
    """What `tcplan solve` prints of an expression's plan."""
    f = problem.spec.expression
    lines = [f"{problem.name}: {f.text} ({problem.dtype}) -> {out.invocations} Tensor "
             f"Unit invocation(s), {out.cycles:,} cycles ({out.status}; solved in "
             f"{out.solve_time:.2f} s)"]
    if out.note is not None:
        lines.append("  note: " + out.note)
    from ..chains import step_text
    for q, (c, a) in enumerate(zip(out.plan.chains, out.plan.analyses), 1):
        lines.append(f"  invocation {q} ({a.cycles:,} cycles; ALUs: "
                     f"{', '.join(a.alus) or 'none'}):")
        lines += [f"    .{step_text(s)}" for s in c.steps]
    lines.append(f"verified: {out.checked:,} output elements; {out.method}"
                 if out.verified else "not verified (--verify none)")
    return "\n".join(lines)


def checked_inputs(problem: Any, inputs: dict, label: str = "") -> dict:
    """A chain's given tensors (x over the problem's axes, VRF operands over theirs) in
    the right shapes and dtypes; ``label`` prefixes their names in messages."""
    from tcplan.executor import run
    shapes = {"x": tuple(problem.axes.values())}
    for n, t in problem.tensors.items():
        if n.startswith("vrf:"):
            shapes[n[4:]] = tuple(problem.axes[a] for a in run.carried_axes(t, problem.axes))
    out = {}
    for name, arr in inputs.items():
        dtype = problem.dtype if name == "x" else problem.tensors["vrf:" + name].dtype
        if arr.shape != shapes[name]:
            raise fail("bad-request", detail=f"--input {label}{name}: expected shape "
                       f"{shapes[name]} (the axes in the problem's order), got {arr.shape}",
                       fix="save the tensor with numpy.save in that shape")
        out[name] = run.as_dtype(arr, dtype, label + name)
    return out


def _run_chains(problem: Any, plan: Any, inputs: dict, seed: int) -> dict:
    """Vector chains, planned expressions and lane folds on the user's tensors: x over the
    problem's axes (a pair's grouping axis is an ordinary axis), VRF operands over theirs."""
    from tcplan.executor import chains
    inputs = checked_inputs(problem, inputs)
    if problem.kind == "lane_fold":
        X, out, _ = chains.run_lane_fold(problem, plan, seed, inputs.get("x"))
        return {"x": X, "result": out}
    if problem.kind == "vector":
        r = chains.run_vector(problem, plan, seed, inputs)
    else:
        if set(inputs) - {"x"}:
            raise fail("bad-request", detail="a planned expression reads its VRF operands "
                       "from seeded data", fix="give only x")
        r = chains.run_plan(problem, plan, seed, inputs.get("x"))
    return {"x": r["x"], **r["vrf"], "result": r["out"]}
