"""`tcplan verify`: lower, execute, verify and time a problem."""

from __future__ import annotations

from typing import Any

from .run import check_sizes


def verify_problem(problem, seed: int = 0) -> dict[str, Any]:
    """Raises TcplanError (a rule, or a verification mismatch) or returns the report: the
    problem lowered, checked against the simulator's limits, and verified, each as its
    kind does it (planner/kinds/: the planner owns lowering a problem)."""
    from planner.kinds import kind_of
    kind = kind_of(problem)
    plan = kind.lower(problem)
    check_sizes(problem)
    return kind.verify(problem, plan, seed)
