"""The CP-SAT solver as every search here configures it: a time limit, one worker (the
answer deterministic for a seed), the seed."""

from __future__ import annotations

from typing import Any


def solver(time_limit: float, seed: int) -> Any:
    """A ``cp_model.CpSolver`` for ``time_limit`` seconds (at least 0.01), one worker,
    ``seed``."""
    from ortools.sat.python import cp_model
    sv = cp_model.CpSolver()
    sv.parameters.max_time_in_seconds = max(time_limit, 0.01)
    sv.parameters.num_workers = 1
    sv.parameters.random_seed = seed
    return sv
