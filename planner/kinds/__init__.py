"""One home per problem kind (issue 17, item 0; ARCHITECTURE.md).

Every kind of problem (``kind:`` in its file) implements one small protocol, :class:`Kind`,
in its own module, and is registered once in :data:`REGISTRY`.  The CLI, lowering,
verification and explanation reach a kind only through :func:`kind_of`: no ``kind ==``
chains elsewhere.

=================  =========================================================================
method             what it does
=================  =========================================================================
``lower``          the problem -> what the hardware runs (a plan; planned when it is free)
``verify``         execute a lowered plan over simulated memories, check, time: a report
``inputs``         the tensors ``tcplan run`` takes
``run``            execute on the user's tensors: every tensor, as mathematical arrays
``render``         a lowered plan as text (``tcplan lower``)
``verify_lines``   what ``tcplan verify`` says of a report's breakdown
``solve``          plan the free choices, verify, print (``tcplan solve``); exit code
``explain``        (exit code, report): the conflict, or what binds a feasible plan
``trace_warnings`` the placement rules a tensor breaks (``tcplan trace``)
=================  =========================================================================
"""

from __future__ import annotations

from typing import Any, TextIO

from model import tiers
from model.rules import fail


class Kind:
    """The protocol; a method a kind does not have says so (``bad-request``)."""

    names: tuple[str, ...] = ()  # the ``kind:`` values it serves
    output_word = "destination"  # what verification checks, in messages
    solvable = False  # `tcplan solve` plans it (`batch` solves it rather than verifies)
    engine_stream = False  # its stream's Chip, Cluster and Slice select engines (a DMA)

    def lower(self, problem) -> Any:
        raise NotImplementedError

    def verify(self, problem, plan, seed: int) -> dict[str, Any]:
        raise NotImplementedError

    def inputs(self, problem) -> tuple[str, ...]:
        return ()

    def run(self, problem, plan, inputs: dict, seed: int) -> dict:
        raise fail("bad-request", detail=f"tcplan run executes data moves; a {problem.kind} "
                   "problem has none", fix="use tcplan verify or trace")

    def render(self, problem, plan) -> str:
        return plan.text()

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        return []

    def solve(self, problem, args, stdout: TextIO) -> int:
        raise fail("bad-request", detail=f"tcplan solve plans expression and DMA problems; "
                   f"{problem.path} is a {problem.kind} problem",
                   fix="use tcplan verify for a problem with nothing to choose")

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        raise fail("bad-request", detail=f"tcplan explain covers DMA and expression problems, "
                   f"not {problem.kind}", fix="use tcplan verify")

    def trace_warnings(self, problem, name: str, t) -> list:
        return tiers.placement_violations(t, problem.chips)


REGISTRY: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    for n in kind.names:
        if n in REGISTRY:  # pragma: no cover - guards the registry itself
            raise ValueError(f"kind {n} registered twice")
        REGISTRY[n] = kind
    return kind


def kind_of(problem) -> Kind:
    """The kind of a loaded problem."""
    return REGISTRY[problem.kind]


from . import basic, chains, dma, moves  # noqa: E402,F401 - each registers its kinds
