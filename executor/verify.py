"""`tcplan verify`: lower, execute, verify and time a problem."""

from __future__ import annotations

from typing import Any

from .run import check_sizes


def verify_problem(problem, seed: int = 0, progress=None) -> dict[str, Any]:
    """Raises TcplanError (a rule, or a verification mismatch) or returns the report: the
    problem lowered, checked against the simulator's limits, and verified, each as its
    kind does it (planner/kinds/: the planner owns lowering a problem).  ``progress``: the
    callback of planner/progress.py, told how execution and checking advance."""
    import time

    from tcplan.planner.kinds import kind_of
    kind = kind_of(problem)
    t0 = time.perf_counter()
    plan = kind.lower(problem)
    check_sizes(problem)
    t1 = time.perf_counter()
    report = kind.verify(problem, plan, seed, progress)
    # (executing and checking are one pass here)
    report["times"] = {"lower": round(t1 - t0, 3), "verify": round(time.perf_counter() - t1, 3)}
    return report
