"""tcplan's Python API (``import tcplan``; docs/api.md).

Each verb of the command line is one function here, and each returns a typed result whose
``to_json()`` is what the verb prints with ``--json``.  The command line is a client of these
functions: one path from a problem to its answer, whichever door it comes through.

Errors: a problem that cannot be read (bad YAML, an unknown key, a malformed mapping) raises
:class:`TcplanError` with ``kind == "input"`` (exit code 2 on the command line).  A problem
that breaks a hardware rule or has no plan is an answer, not an exception: ``solve`` returns
status ``infeasible``, ``verify`` returns ``verified=False``, ``explain`` names the conflict;
only ``lower`` and ``run``, which must produce configs or data, raise it (``kind`` is
``"hardware"`` or ``"limit"``).
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tcplan.model.rules import TcplanError, fail

from .kinds import Options, Solved, kind_of
from .registry import SolveRecord
from .progress import Callback, Progress
from .render import EXIT_OK, EXIT_RULE, format_error
from .spec import Problem, load_problem, load_problem_text

__all__ = ["Problem", "TcplanError", "Options", "Progress", "SolveResult", "VerifyResult", "Explanation",
           "Lowered", "RunResult", "load", "loads", "solve", "verify", "explain", "lower",
           "run"]


def load(path: str | pathlib.Path) -> Problem:
    """A problem from its YAML file (docs/problem-format.md)."""
    return load_problem(path)


def loads(text: str | dict[str, Any], name: str = "<problem>") -> Problem:
    """A problem from YAML text, or from its mapping (the same keys, as ``yaml.safe_load``
    gives them: written out as YAML and read as a file would be, so errors name its keys);
    ``name`` is where error messages say it came from."""
    if isinstance(text, dict):
        import yaml
        try:
            text = yaml.safe_dump(text, sort_keys=False, default_flow_style=None)
        except yaml.YAMLError as e:
            raise fail("bad-problem", where=name, detail=f"not a problem's mapping: {e}",
                       fix="give the keys docs/problem-format.md names, with strings, "
                       "numbers, lists and mappings as values") from None
    elif not isinstance(text, str):
        raise fail("bad-problem", where=name, detail=f"expected YAML text or a mapping, "
                   f"not {type(text).__name__}", fix="tcplan.loads(text) or "
                   "tcplan.loads({'format': 1, 'kind': ..., ...}); tcplan.load(path) reads "
                   "a file")
    return load_problem_text(text, name)


def _problem(problem: Problem | str | pathlib.Path) -> Problem:
    return problem if isinstance(problem, Problem) else load(problem)


@dataclass
class SolveResult:
    """A solved problem: its status (``optimal``, ``feasible`` when the time limit cut the
    search, ``given`` when nothing was free, ``infeasible``, ``unknown``), cycles, the
    lowered plan (``None`` without one) and the error that says why there is none.
    ``record`` is the kind's own typed record of the solve (its fields; ``to_json()`` is
    what ``--json`` prints)."""

    problem: Problem
    record: SolveRecord
    plan: Any = None
    error: TcplanError | None = None
    exit_code: int = EXIT_OK

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def cycles(self) -> int | None:
        return self.record.cycles

    @property
    def lower_bound(self) -> int | None:
        return self.record.lower_bound

    @property
    def verified(self) -> bool | None:
        return self.record.verified

    @property
    def breakdown(self) -> dict[str, Any] | None:
        """The cycle report of the plan (model/cost.py), when the kind times one."""
        return self.record.breakdown

    @property
    def reason(self) -> TcplanError | None:
        """Why there is no timed plan: no plan at all, or one that failed its check."""
        return self.error or self.record.error

    def to_json(self) -> dict[str, Any]:
        return self.record.to_json()

    def text(self) -> str:
        return kind_of(self.problem).solve_text(
            self.problem, Solved(self.record, self.plan, self.error, self.exit_code))

    def plot(self, path: str | pathlib.Path) -> pathlib.Path:
        """Draw the plan of a DMA or PCIe problem to ``path`` (.svg or .png; needs
        matplotlib, ``pip install 'tcplan[plot]'``): docs/pictures.md."""
        from .plot import plot_result
        return plot_result(self, path, "plot()")

    def report(self, directory: str | pathlib.Path) -> pathlib.Path:
        """Write ``directory/index.html``, one self-contained page of the plan: layouts,
        lowered configs, cycles, pictures, the lower bound (docs/pictures.md)."""
        from .report import write_report
        return write_report(self, directory, "report()")


@dataclass
class VerifyResult:
    """An executed, checked and timed plan: ``verified`` is False (with ``error``) when the
    plan breaks a rule or the destination does not hold the source."""

    problem: Problem
    record: dict[str, Any]
    plan: Any = None
    error: TcplanError | None = None

    @property
    def verified(self) -> bool:
        return self.record["verified"]

    @property
    def cycles(self) -> int | None:
        return self.record.get("cycles")

    @property
    def checked(self) -> int:
        return self.record.get("checked", 0)

    @property
    def breakdown(self) -> dict[str, Any] | None:
        return self.record.get("breakdown")

    @property
    def reason(self) -> TcplanError | None:
        """Why there is no timed plan: the rule the plan breaks or its mismatch."""
        return self.error

    @property
    def lower_bound(self) -> int | None:
        """(A verify times the plan as given: no bound is reported.)"""
        return None

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.error is None else EXIT_RULE

    def to_json(self) -> dict[str, Any]:
        return dict(self.record)

    def text(self) -> str:
        r, name = self.record, self.problem.name
        if self.error is not None:
            return f"{name}: NOT verified\n" + format_error(self.error)
        kind = kind_of(self.problem)
        status = "verified" if r["verified"] else "executed, NOT checked"
        lines = [f"{name}: {status} ({r['checked']:,} {kind.output_word} elements "
                 f"checked, seed {r['seed']}; {r['method']})",
                 "cycles: " + (f"{r['cycles']:,}" if r["cycles"] is not None
                               else "not modelled for this kind yet")]
        if r.get("breakdown"):
            lines += kind.verify_lines(r)
        return "\n".join(lines)

    def plot(self, path: str | pathlib.Path) -> pathlib.Path:
        """Draw the plan of a DMA or PCIe problem to ``path`` (.svg or .png; needs
        matplotlib, ``pip install 'tcplan[plot]'``): docs/pictures.md."""
        from .plot import plot_result
        return plot_result(self, path, "plot()")


@dataclass
class Explanation:
    """Why a problem has no plan (``conflict``: a minimal set of requirements, each with its
    rule id, message and fix), or what binds the plan it has."""

    problem: Problem
    record: dict[str, Any]
    exit_code: int = EXIT_OK

    @property
    def feasible(self) -> bool:
        return self.record["feasible"]

    @property
    def conflict(self) -> list[dict[str, Any]]:
        return self.record.get("conflict", [])

    def to_json(self) -> dict[str, Any]:
        return dict(self.record)

    def text(self) -> str:
        from .render import format_explanation
        return format_explanation(self.problem.name, self.record)


@dataclass
class Lowered:
    """What the hardware runs: sequencer configs, DMA descriptors, chain or fold configs."""

    problem: Problem
    plan: Any

    def to_json(self) -> dict[str, Any]:
        return {"problem": self.problem.name, "kind": self.problem.kind,
                **self.plan.to_json()}

    def text(self) -> str:
        return kind_of(self.problem).render(self.problem, self.plan)


@dataclass
class RunResult:
    """Every tensor of a run on the user's data, as arrays in the problem's dtype over its
    axes (the destination, or a chain's result, among them)."""

    problem: Problem
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"problem": self.problem.name, "tensors": [
            {"tensor": n, "dtype": str(a.dtype), "shape": list(a.shape)}
            for n, a in self.arrays.items()]}

    def save(self, directory: str | pathlib.Path) -> list[pathlib.Path]:
        """Write each tensor to ``DIR/<name>.npy`` (bf16 and fp8 load back as their
        ml_dtypes dtypes); the paths written."""
        from .inputs import write_arrays
        return write_arrays(str(directory), self.arrays)


def solve(problem: Problem | str | pathlib.Path, *, time_limit: float = 10.0,
          workers: int = 1, seed: int = 0, verify: str = "full",
          progress: Callback | None = None, jobs: int = 0,
          dask: str | None = None, flat: bool = False) -> SolveResult:
    """Plan a problem's free choices (the least modelled cycles), lower, execute and check
    the plan (``verify``: ``full``, ``sample`` or ``none``), and time it.  A graph's op
    plans run on ``jobs`` processes (0: the machine's cores) or on the Dask scheduler
    ``dask`` (``local``: a local cluster; planner/op_pool.py).  ``progress``:
    called as ``progress(stage, done, total, note)`` while the search, the run and the check
    advance (``total`` None when open-ended); ``tcplan.Progress`` draws it on a stream."""
    p = _problem(problem)
    if verify not in ("full", "sample", "none"):
        raise ValueError(f"verify must be full, sample or none, not {verify!r}")
    if not time_limit > 0 or workers < 1:
        raise ValueError(f"time_limit must be above 0 and workers at least 1, not "
                         f"{time_limit!r} and {workers!r}")
    if jobs < 0:
        raise ValueError(f"jobs must be 0 or more, not {jobs!r}")
    s = kind_of(p).solve(p, Options(time_limit, workers, seed, verify, progress, jobs=jobs,
                                    dask=dask, flat=flat))
    return SolveResult(p, s.record, s.plan, s.error, s.exit)


def verify(problem: Problem | str | pathlib.Path, *, seed: int = 0,
           progress: Callback | None = None) -> VerifyResult:
    """Lower a problem, execute its plan over simulated memories on seeded data, check what
    it must hold, and time it (``progress`` as for :func:`solve`)."""
    from .lowering import verify_problem
    p = _problem(problem)
    try:
        report = verify_problem(p, seed, progress)
    except TcplanError as err:
        if err.kind == "input":
            raise
        return VerifyResult(p, {"problem": p.name, "verified": False, "error": err.to_json()},
                            error=err)
    return VerifyResult(p, {"problem": p.name, **report, "seed": seed})


def explain(problem: Problem | str | pathlib.Path, *, seed: int = 0) -> Explanation:
    """A minimal set of conflicting requirements, or what binds the plan."""
    p = _problem(problem)
    code, record = kind_of(p).explain(p, seed)
    return Explanation(p, record, code)


def lower(problem: Problem | str | pathlib.Path) -> Lowered:
    """The configs the hardware runs (planned first when the problem leaves choices free)."""
    from .lowering import lower_problem
    p = _problem(problem)
    return Lowered(p, lower_problem(p))


def run(problem: Problem | str | pathlib.Path, inputs: dict[str, np.ndarray] | None = None,
        *, seed: int = 0) -> RunResult:
    """Execute a problem on the user's tensors (``inputs``: name -> array over the axes in
    the problem's order; the names are the problem kind's inputs, e.g. ``source`` or ``x``);
    inputs not given are seeded random data."""
    from tcplan.executor.run import check_sizes
    p = _problem(problem)
    kind = kind_of(p)
    names = kind.inputs(p)
    if not names:
        kind.run(p, None, {}, seed)  # says what the kind has not
    unknown = sorted(set(inputs or {}) - set(names))
    if unknown:
        from tcplan.model.rules import fail
        raise fail("bad-request", detail=f"input(s) {', '.join(unknown)}: a {p.kind} problem "
                   f"takes {', '.join(names)}", fix="name one of the problem's input tensors")
    plan = lower(p).plan
    check_sizes(p)
    return RunResult(p, kind.run(p, plan, dict(inputs or {}), seed))
