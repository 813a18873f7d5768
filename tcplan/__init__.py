"""tcplan: a layout planner and simulator for the FuriosaAI RNGD Tensor Contraction Processor.

The API (docs/api.md)::

    import tcplan
    problem = tcplan.load("problems/planning/attention_v_head_major.yaml")
    solved = tcplan.solve(problem)          # plan, lower, execute, check, time
    print(solved.status, solved.cycles)     # optimal 2548
    print(solved.to_json()["plan"]["stream"])

``load``/``loads`` read a problem; ``solve``, ``verify``, ``explain``, ``lower`` and ``run``
return typed results (:class:`SolveResult`, :class:`VerifyResult`, :class:`Explanation`,
:class:`Lowered`, :class:`RunResult`), each with ``to_json()`` (what the command line prints
with ``--json``) and ``text()`` (what it prints without).  The parts below the package
(``tcplan.model``, ``tcplan.planner``, ``tcplan.executor``) are internal.
"""

from importlib.metadata import PackageNotFoundError, version as _version

import ml_dtypes  # noqa: F401 - registers "bfloat16" (and the fp8 types) as numpy dtype names

from tcplan.planner.api import (Explanation, Lowered, Options, Problem, Progress, RunResult,
                                SolveResult, TcplanError, VerifyResult, explain, load, loads,
                                lower, run, solve, verify)

try:
    __version__ = _version("tcplan")
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__", "Problem", "TcplanError", "Options", "Progress", "SolveResult",
           "VerifyResult", "Explanation", "Lowered", "RunResult", "load", "loads", "solve",
           "verify", "explain", "lower", "run"]
