"""Problems with no data move: a sequencer derivation (seed 001's sequence examples) and a
layout (tensors placed on tiers, with their placement rules)."""

from __future__ import annotations

from typing import Any

from model.sequencer import derive

from ..render import format_table
from . import Kind, register


def default_mode(engine: str, mode: str | None) -> str:
    if mode is not None:
        return mode
    return "write" if engine == "commit" else "read"


class Sequence(Kind):
    names = ("sequence",)

    def verify(self, problem, plan, seed: int) -> dict[str, Any]:
        from executor.forms import verify_sequence
        return verify_sequence(problem, plan, seed)

    def lower(self, problem) -> Any:
        t = problem.tensors
        engine = problem.params["engine"]
        return derive(t["buffer"].dims["element"], t["stream"].dims["time"],
                      t["stream"].dims["packet"], t["buffer"].dtype,
                      default_mode(engine, problem.params["mode"]), engine)

    def render(self, problem, plan) -> str:
        t = problem.tensors
        return format_table(plan, t["buffer"].dims["element"].text(),
                            t["stream"].dims["time"].text(), t["stream"].dims["packet"].text())


class Layout(Kind):
    names = ("layout",)

    def verify(self, problem, plan, seed: int) -> dict[str, Any]:
        from executor.forms import verify_layout
        return verify_layout(problem, plan, seed)

    def lower(self, problem) -> Any:
        from ..lowering import LayoutReport
        return LayoutReport(problem)


register(Sequence())
register(Layout())
