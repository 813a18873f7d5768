"""DMA and PCIe problems (seed 002): a transfer between two placed tensors through a
stream; planned when its stream, a placement or an HBM layout is free."""

from __future__ import annotations

import json
import logging
from typing import Any, TextIO

from model import dma
from model.rules import TcplanError

from ..render import EXIT_OK, EXIT_RULE, _hbm_line, format_dma, format_error
from . import REGISTRY, Kind, register



class Dma(Kind):
    names = ("dma", "pcie")
    solvable = True
    engine_stream = True

    def lower(self, problem) -> Any:
        from ..layout import plan_free, planned
        t = problem.tensors
        if planned(problem):  # a free stream or source: the searched layout's plan
            return plan_free(problem)[0].best.plan
        return dma.lower(t["source"], t["destination"], t["stream"], problem.chips,
                         problem.params.get("engine_at"), pcie=problem.kind == "pcie")

    def verify(self, problem, plan, seed: int) -> dict[str, Any]:
        from executor.run import run_dma
        from model.cost import dma_cycles
        result = run_dma(problem, plan, seed)
        cost = dma_cycles(plan)
        return {"verified": True, "cycles": cost.cycles, "checked": result["checked"],
                "method": "executed every command over simulated memories; holding rule",
                "breakdown": cost.to_json()}

    def inputs(self, problem) -> tuple[str, ...]:
        return ("source",)

    def run(self, problem, plan, inputs: dict, seed: int) -> dict:
        from executor import run
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

    def solve(self, problem, args, stdout: TextIO) -> int:
        return solve_dma(problem, args, stdout)

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        from ..explain import explain_dma
        return explain_dma(problem, seed)

    def trace_warnings(self, problem, name: str, t) -> list:
        if name == "stream":  # its Chip/Cluster/Slice select engines, not placements
            return dma._stream_engine_violations(t, problem.chips)
        return super().trace_warnings(problem, name, t)


register(Dma())


def _no_plan(problem: Any, err: TcplanError, args, stdout: TextIO) -> int:
    """`solve` found no plan: infeasible, or unknown when the time limit cut the search."""
    status = "unknown" if err.code == "plan-time-limit" else "infeasible"
    out = {"problem": problem.name, "status": status, "cycles": None, "plan": None,
           "verified": None, "explanation": err.to_json()}
    print(json.dumps(out) if args.json else f"{problem.name}: {status}\n"
          + format_error(err), file=stdout)
    return EXIT_RULE


def solve_dma(problem: Any, args, stdout: TextIO) -> int:
    """A DMA with a free stream: search the order and packet, lower, verify, time.  With
    nothing free the problem is verified as given."""
    import time

    from executor.run import run_dma
    from model.cost import dma_cycles, estimate, lower_bound

    from ..layout import plan_free, planned
    t = problem.tensors
    t0 = time.perf_counter()
    free = planned(problem)
    if problem.params.get("hops", 1) > 1:
        return _solve_hops(problem, args, stdout)
    try:
        if free:
            found, split = plan_free(problem, args.time_limit, args.seed,
                                     workers=args.workers)
            best = found.best
            plan, status = best.plan, found.status
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
            n_cand, rejected = len(found.candidates), found.rejected
            lowering = found.times.get("lowering", 0.0)  # (inside the search)
            logging.getLogger("tcplan").debug(
                "search: %d option model(s), %d plan(s) lowered and estimated, %d outer "
                "round(s); seconds: %s", found.models, found.enumerated, found.rounds,
                {k: round(v, 3) for k, v in found.times.items()})
        else:
            plan, status = REGISTRY["dma"].lower(problem), "given"
            lowering = time.perf_counter() - t0
            chosen = {"time": t["stream"].dims["time"].text(),
                      "packet": t["stream"].dims["packet"].text()}
            n_cand, rejected = 1, {}
    except TcplanError as err:
        if err.kind == "input":
            raise
        return _no_plan(problem, err, args, stdout)
    solve_s = time.perf_counter() - t0
    est = estimate(plan).cycles
    detailed = dma_cycles(plan)
    bound = lower_bound(plan)
    check = getattr(args, "verify", "full")
    times = {"plan": round(solve_s, 3), "lower": round(lowering, 3)}
    try:
        ran = run_dma(problem, plan, args.seed, check)
        checked = ran["checked"]
        times.update(execute=round(ran["execute_s"], 3), verify=round(ran["verify_s"], 3))
        verified, error = (None if check == "none" else True), None
    except TcplanError as err:
        verified, error, checked = False, err.to_json(), 0
    out = {"problem": problem.name, "status": status, "cycles": detailed.cycles,
           "estimate": est, "lower_bound": bound,
           "bound_ratio": round(detailed.cycles / bound, 3) if bound else None,
           "plan": {"stream": chosen, **plan.to_json()}, "verified": verified,
           "checked": checked, "check": check, "candidates": n_cand, "rejected": rejected,
           "solve_time": round(solve_s, 3), "times": times,
           "breakdown": detailed.to_json()}
    if error:
        out["error"] = error
    if status == "feasible":
        out["note"] = "the time limit cut the search: the plan is not proven optimal"
    if args.json:
        print(json.dumps(out), file=stdout)
    else:
        lines = [f"{problem.name}: "
                 + (f"source Element {chosen['source_element']} (HBM), "
                    if "source_element" in chosen else "")
                 + (f"source address {chosen['source_address']:,}, "
                    if "source_address" in chosen else "") + "stream "
                 + (f"Cluster {chosen['cluster']}, Slice {chosen['slice']}, " if "slice" in
                    chosen else "") + f"Time {chosen['time']}, Packet {chosen['packet']} "
                 + ("into destination " + ", ".join(
                     f"{d.title()} {chosen['destination_' + d]:,}" if d == "address" else
                     f"{d.title()} {chosen['destination_' + d]}"
                     for d in ("chip", "cluster", "slice", "element", "address")
                     if "destination_" + d in chosen) + " "
                    if any(k.startswith("destination_") for k in chosen) else "")
                 + f"({status}; {n_cand} legal layout(s)"
                 + (", rejected: " + ", ".join(f"{r} x{k}" for r, k in rejected.items())
                    if rejected else "") + f"; {solve_s:.2f} s)",
                 format_dma(problem.name, plan),
                 f"cycles: {detailed.cycles:,} (estimate {est:,}; lower bound {bound:,}, "
                 f"ratio {out['bound_ratio']})"] + (
                     [_hbm_line(detailed.hbm)] if detailed.hbm else []) + [
                 _verified_line(verified, check, checked, error)] + (
                     [f"note: {out['note']}"] if "note" in out else [])
        print("\n".join(lines), file=stdout)
    return EXIT_OK if verified is not False else EXIT_RULE


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


def _solve_hops(problem: Any, args, stdout: TextIO) -> int:
    """Direct or through one intermediate HBM layout: the shortest path of planned hops;
    each hop is executed and verified (so the chain holds the source tensor end to end)."""
    import time

    from executor.run import run_dma
    from model.cost import dma_cycles

    from ..hops import plan_hops
    t0 = time.perf_counter()
    try:
        hp = plan_hops(problem, args.time_limit, args.seed)
    except TcplanError as err:
        if err.kind == "input":
            raise
        return _no_plan(problem, err, args, stdout)
    solve_s = time.perf_counter() - t0
    rows, verified, total = [], True, 0
    for h in hp.hops:
        full = dma_cycles(h.plan).cycles
        total += full
        try:
            checked = run_dma(problem, h.plan, args.seed)["checked"]
        except TcplanError:
            verified, checked = False, 0
        rows.append({"source": h.source.describe(), "destination": h.destination.describe(),
                     "stream": h.stream, "cycles": full, "estimate": h.cycles,
                     "checked": checked})
    out = {"problem": problem.name, "status": "optimal", "cycles": total,
           "plan": {"hops": rows}, "verified": verified, "why": hp.direct_error,
           "intermediates_tried": hp.tried, "solve_time": round(solve_s, 3)}
    if args.json:
        print(json.dumps(out), file=stdout)
    else:
        lines = [f"{problem.name}: {len(rows)} hop(s), {total:,} cycles"
                 + (f" ({hp.direct_error})" if hp.direct_error else "")
                 + f"; {hp.tried} intermediate layout(s) tried in {solve_s:.2f} s"]
        for k, r in enumerate(rows, 1):
            lines.append(f"  hop {k}: {r['source']} -> {r['destination']}")
            lines.append(f"         stream {r['stream']}; {r['cycles']:,} cycles; "
                         + (f"verified ({r['checked']:,} elements)" if r["checked"] else
                            "NOT verified"))
        print("\n".join(lines), file=stdout)
    return EXIT_OK if verified else EXIT_RULE
