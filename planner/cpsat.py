"""The CP-SAT solver as every search here configures it: a time limit, one worker (the
answer deterministic for a seed), the seed."""

from __future__ import annotations

import functools
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


@functools.cache
def _model_class() -> Any:
    """``cp_model.CpModel`` without the camelCase aliases ortools (9.12 on) sets on every
    new model and clone (a loop over ``dir``: about a millisecond each, where a graph's
    layout searches build thousands); the model, and so every answer, is the same.  Where
    the installed ortools builds its models otherwise, its own class."""
    from ortools.sat.python import cp_model
    base = cp_model.CpModel
    if not all(hasattr(base, a) for a in ("_add_pre_pep8_methods", "rebuild_constant_map",
                                          "proto")):
        return base

    class Model(base):  # type: ignore[misc, valid-type]
        def _add_pre_pep8_methods(self) -> None:
            pass

        def clone(self) -> "Model":
            c = Model()
            c.proto.copy_from(self.proto)
            c.rebuild_constant_map()
            return c

    return Model


def model() -> Any:
    """A new, empty CP-SAT model (``cp_model.CpModel``'s interface)."""
    return _model_class()()
