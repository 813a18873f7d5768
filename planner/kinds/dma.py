"""DMA and PCIe problems (seed 002): a transfer between two placed tensors through a
stream; planned when its stream, a placement or an HBM layout is free."""

from __future__ import annotations

import logging
from typing import Any

from tcplan.model import dma
from tcplan.model.rules import TcplanError, fail

from ..render import EXIT_OK, EXIT_RULE, _hbm_line, format_dma
from ..registry import REGISTRY, Kind, Options, Solved, key_sets, register


class Dma(Kind):
    names = ("dma", "pcie")
    keys = {"dma": key_sets({"source", "destination", "stream", "engine_at", "bounds", "hops"},
                            {"source", "destination"}),
            "pcie": key_sets({"source", "destination", "stream", "bounds"},
                             {"source", "destination"})}
    solvable = True
    engine_stream = True
    graph_broadcast = True
    graph_roles = {n: {"source": (True, True), "destination": (False, True)}
                   for n in ("dma", "pcie")}
    pictures = True

    def load(self, ctx, data: dict, kind: str, tensors: dict, params: dict) -> None:
        from tcplan.model.broadcast import partial_violations

        from ..dma_spec import load_dma
        load_dma(ctx, data, kind, tensors, params)
        # a destination asking for values the source lacks is a mistake, said before planning
        bad = partial_violations(tensors["source"], tensors["destination"],
                                 ctx.doc.where(("destination",)))
        if bad:
            raise TcplanError(bad)

    def lower(self, problem) -> Any:
        from ..dma_plan import plan_free, planned
        t = problem.tensors
        if planned(problem):  # a free stream or source: the searched layout's plan
            return plan_free(problem)[0].best.plan
        return dma.lower(t["source"], t["destination"], t["stream"], problem.chips,
                         problem.params.get("engine_at"), pcie=problem.kind == "pcie")

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.run import run_dma
        from tcplan.model.cost import dma_cycles
        result = run_dma(problem, plan, seed, progress=progress)
        cost = dma_cycles(plan)
        return {"verified": True, "cycles": cost.cycles, "checked": result["checked"],
                "method": "executed every command over simulated memories; holding rule",
                "breakdown": cost.to_json()}

    def inputs(self, problem) -> tuple[str, ...]:
        return ("source",)

    def run(self, problem, plan, inputs: dict, seed: int) -> dict:
        from tcplan.executor import run
        return run.run_with_data(problem, plan, inputs, seed)

    def render(self, problem, plan) -> str:
        return format_dma(problem.name, plan)

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        b = report["breakdown"]
        lines = [f"  start-up {b['startup']:,}, read {b['read']:,.0f}, write "
                 f"{b['write']:,.0f}; bottleneck: {b['bottleneck']}"]
        if b.get("hbm"):
            lines.append(_hbm_line(b["hbm"]))
        return lines + [f"  penalty: {p}" for p in b["penalties"]]

    def solve(self, problem, opts: Options) -> Solved:
        return solve_dma(problem, opts)

    def solve_text(self, problem, solved: Solved) -> str:
        if solved.error is not None:
            return super().solve_text(problem, solved)
        if "hops" in solved.record["plan"]:
            return _hops_text(problem, solved)
        return dma_solve_text(problem, solved)

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        from ..explain import explain_dma
        return explain_dma(problem, seed)

    def plan(self, problem, opts: Options) -> tuple[Any, int | None, bool]:
        from tcplan.model.cost import dma_cycles

        from ..dma_plan import plan_free, planned
        if problem.params.get("hops", 1) > 1:
            raise fail("bad-request", detail="a graph's DMA op moves in one hop",
                       fix="drop hops, or add the intermediate tensor and a second op")
        if not planned(problem):
            plan = self.lower(problem)
            return plan, dma_cycles(plan).cycles, True
        found = plan_free(problem, opts.time_limit, opts.seed, workers=opts.workers)[0]
        return found.best.plan, dma_cycles(found.best.plan).cycles, \
            found.status == "optimal"

    def graph_summary(self, plan) -> dict[str, Any]:
        return {"stream": {d: m.text() for d, m in plan.stream_dims.items()}}

    def lower_bound(self, problem, plan) -> int | None:
        from tcplan.model.cost import lower_bound
        return lower_bound(plan)

    def execute(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        from tcplan.executor.run import execute, held_by, place, verify
        axes = problem.axes
        held = held_by(values["source"], plan.source, plan.destination, axes)
        place(mem, plan.destination, axes, None)
        moved = execute(mem, plan)
        verify(mem, plan.destination, axes, held, moved)
        return {"destination": held}

    def trace_warnings(self, problem, name: str, t) -> list:
        if name == "stream":  # its Chip/Cluster/Slice select engines, not placements
            return dma._stream_engine_violations(t, problem.chips)
        return super().trace_warnings(problem, name, t)


register(Dma())


def _no_plan(problem: Any, err: TcplanError) -> Solved:
    """`solve` found no plan: infeasible, or unknown when the time limit cut the search."""
    status = "unknown" if err.code == "plan-time-limit" else "infeasible"
    return Solved({"problem": problem.name, "status": status, "cycles": None, "plan": None,
                   "verified": None, "explanation": err.to_json()}, error=err,
                  exit=EXIT_RULE)


def _searched(problem: Any, opts) -> tuple[Any, str, dict[str, Any], int, dict, float]:
    """Plan a DMA's free choices: (plan, status, the chosen stream and layouts, legal
    layouts, rejections by rule, lowering seconds)."""
    from ..dma_plan import plan_free
    found, split = plan_free(problem, opts.time_limit, opts.seed, workers=opts.workers,
                             progress=opts.progress)
    best = found.best
    plan = best.plan
    chosen = {"time": best.time, "packet": best.packet_text,
              "cluster": f"m![{split['cluster']}]", "slice": f"m![{split['slice']}]"}
    if best.element is not None:
        chosen["destination_element"] = best.element
    if problem.params.get("free_slice"):
        for dim in problem.params["free_slice"]["dims"]:
            chosen["destination_" + dim] = plan.destination.dims[dim].text()
    if problem.params.get("free_source"):
        chosen["source_element"] = plan.source.dims["element"].text()
    chosen_hbm = set(problem.params.get("free_address", ())) | (
        {"source"} if problem.params.get("free_source") else set())
    for side in sorted(chosen_hbm, reverse=True):  # the source first
        chosen[side + "_address"] = getattr(plan, side).address
    logging.getLogger("tcplan").debug(
        "search: %d option model(s), %d plan(s) lowered and estimated, %d outer "
        "round(s); seconds: %s", found.models, found.enumerated, found.rounds,
        {k: round(v, 3) for k, v in found.times.items()})
    return (plan, found.status, chosen, len(found.candidates), found.rejected,
            found.times.get("lowering", 0.0))  # (lowering happens inside the search)


def solve_dma(problem: Any, opts) -> Solved:
    """A DMA with a free stream: search the order and packet, lower, verify, time.  With
    nothing free the problem is verified as given."""
    import time

    from tcplan.executor.run import run_dma
    from tcplan.model.cost import dma_cycles, estimate, lower_bound

    from ..dma_plan import planned
    t = problem.tensors
    t0 = time.perf_counter()
    if problem.params.get("hops", 1) > 1:
        return _solve_hops(problem, opts)
    try:
        if planned(problem):
            plan, status, chosen, n_cand, rejected, lowering = _searched(problem, opts)
        else:
            plan, status = REGISTRY["dma"].lower(problem), "given"
            lowering = time.perf_counter() - t0
            chosen = {"time": t["stream"].dims["time"].text(),
                      "packet": t["stream"].dims["packet"].text()}
            n_cand, rejected = 1, {}
    except TcplanError as err:
        if err.kind == "input":
            raise
        return _no_plan(problem, err)
    solve_s = time.perf_counter() - t0
    detailed = dma_cycles(plan)
    bound = lower_bound(plan)
    check = opts.verify
    times = {"plan": round(solve_s, 3), "lower": round(lowering, 3)}
    try:
        ran = run_dma(problem, plan, opts.seed, check, opts.progress)
        checked = ran["checked"]
        times.update(execute=round(ran["execute_s"], 3), verify=round(ran["verify_s"], 3))
        verified, error = (None if check == "none" else True), None
    except TcplanError as err:
        verified, error, checked = False, err.to_json(), 0
    out = {"problem": problem.name, "status": status, "cycles": detailed.cycles,
           "estimate": estimate(plan).cycles, "lower_bound": bound,
           "bound_ratio": round(detailed.cycles / bound, 3) if bound else None,
           "plan": {"stream": chosen, **plan.to_json()}, "verified": verified,
           "checked": checked, "check": check, "candidates": n_cand, "rejected": rejected,
           "solve_time": round(solve_s, 3), "times": times,
           "breakdown": detailed.to_json()}
    if error:
        out["error"] = error
    if status == "feasible":
        out["note"] = "the time limit cut the search: the plan is not proven optimal"
    return Solved(out, plan, exit=EXIT_OK if verified is not False else EXIT_RULE)


def dma_solve_text(problem: Any, solved: Solved) -> str:
    """What `tcplan solve` prints of a DMA's plan."""
    out, plan = solved.record, solved.plan
    chosen, rejected = out["plan"]["stream"], out["rejected"]
    dest = [f"{d.title()} {chosen['destination_' + d]:,}" if d == "address" else
            f"{d.title()} {chosen['destination_' + d]}"
            for d in ("chip", "cluster", "slice", "element", "address")
            if "destination_" + d in chosen]
    head = (f"{problem.name}: "
            + (f"source Element {chosen['source_element']} (HBM), "
               if "source_element" in chosen else "")
            + (f"source address {chosen['source_address']:,}, "
               if "source_address" in chosen else "") + "stream "
            + (f"Cluster {chosen['cluster']}, Slice {chosen['slice']}, " if "slice" in
               chosen else "") + f"Time {chosen['time']}, Packet {chosen['packet']} "
            + ("into destination " + ", ".join(dest) + " " if dest else "")
            + f"({out['status']}; {out['candidates']} legal layout(s)"
            + (", rejected: " + ", ".join(f"{r} x{k}" for r, k in rejected.items())
               if rejected else "") + f"; {out['solve_time']:.2f} s)")
    b = out["breakdown"]
    return "\n".join(
        [head, format_dma(problem.name, plan),
         f"cycles: {out['cycles']:,} (estimate {out['estimate']:,}; lower bound "
         f"{out['lower_bound']:,}, ratio {out['bound_ratio']})"]
        + ([_hbm_line(b["hbm"])] if b.get("hbm") else [])
        + [_verified_line(out["verified"], out["check"], out["checked"], out.get("error"))]
        + ([f"note: {out['note']}"] if "note" in out else []))


def _verified_line(verified: bool | None, check: str, checked: int, error) -> str:
    """What `solve` says of its check (``--verify full|sample|none``)."""
    if verified is None:
        return "not verified (--verify none: the plan was not executed)"
    if not verified:
        return f"NOT verified [{error['code']}]: " + error["message"]
    if check == "sample":
        return (f"verified at a sample: {checked:,} live destination positions drawn at "
                f"random (seeded) hold what they must (--verify full checks every one)")
    return f"verified: {checked:,} destination elements"


def _solve_hops(problem: Any, opts) -> Solved:
    """Direct or through one intermediate HBM layout: the shortest path of planned hops;
    each hop is executed and verified (so the chain holds the source tensor end to end)."""
    import time

    from tcplan.executor.run import run_dma
    from tcplan.model.cost import dma_cycles

    from ..hops import plan_hops
    t0 = time.perf_counter()
    try:
        hp = plan_hops(problem, opts.time_limit, opts.seed)
    except TcplanError as err:
        if err.kind == "input":
            raise
        return _no_plan(problem, err)
    solve_s = time.perf_counter() - t0
    rows, verified, total = [], True, 0
    for h in hp.hops:
        full = dma_cycles(h.plan).cycles
        total += full
        try:
            checked = run_dma(problem, h.plan, opts.seed)["checked"]
        except TcplanError:
            verified, checked = False, 0
        rows.append({"source": h.source.describe(), "destination": h.destination.describe(),
                     "stream": h.stream, "cycles": full, "estimate": h.cycles,
                     "checked": checked})
    out = {"problem": problem.name, "status": "optimal", "cycles": total,
           "plan": {"hops": rows}, "verified": verified, "why": hp.direct_error,
           "intermediates_tried": hp.tried, "solve_time": round(solve_s, 3)}
    return Solved(out, hp, exit=EXIT_OK if verified else EXIT_RULE)


def _hops_text(problem: Any, solved: Solved) -> str:
    out = solved.record
    rows = out["plan"]["hops"]
    lines = [f"{problem.name}: {len(rows)} hop(s), {out['cycles']:,} cycles"
             + (f" ({out['why']})" if out["why"] else "")
             + f"; {out['intermediates_tried']} intermediate layout(s) tried in "
             f"{out['solve_time']:.2f} s"]
    for k, r in enumerate(rows, 1):
        lines.append(f"  hop {k}: {r['source']} -> {r['destination']}")
        lines.append(f"         stream {r['stream']}; {r['cycles']:,} cycles; "
                     + (f"verified ({r['checked']:,} elements)" if r["checked"] else
                        "NOT verified"))
    return "\n".join(lines)
