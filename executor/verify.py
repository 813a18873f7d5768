"""`tcplan verify`: lower, execute, verify and time a problem."""

from __future__ import annotations

from typing import Any

from model.cost import dma_cycles

from .run import check_sizes, run_dma


def verify_problem(problem, seed: int = 0) -> dict[str, Any]:
    """Raises TcplanError (a rule, or a verification mismatch) or returns the report."""
    from planner.lowering import lower_problem  # the planner owns lowering a problem
    plan = lower_problem(problem)
    check_sizes(problem)
    if problem.kind in ("dma", "pcie"):
        result = run_dma(problem, plan, seed)
        cost = dma_cycles(plan)
        return {"verified": True, "cycles": cost.cycles, "checked": result["checked"],
                "method": "executed every command over simulated memories; holding rule",
                "breakdown": cost.to_json()}
    if problem.kind == "vector":
        from .chains import verify_vector
        return verify_vector(problem, plan, seed)
    if problem.kind == "expression":
        from .chains import verify_plan
        rep = verify_plan(problem, plan, seed)
        return {**rep, "cycles": plan.cycles, "invocations": len(plan.chains),
                "breakdown": {"invocations": [a.breakdown() for a in plan.analyses]}}
    if problem.kind == "lane_fold":
        from .chains import verify_lane_fold
        return verify_lane_fold(problem, plan, seed)
    from .forms import verify_other
    return verify_other(problem, plan, seed)
