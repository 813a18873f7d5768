"""Problems with no data move: a sequencer derivation (seed 001's sequence examples) and a
layout (tensors placed on tiers, with their placement rules)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tcplan.model.sequencer import derive

from ..problem import NoChoices, Problem
from ..render import format_table
from ..registry import Kind, key_sets, register


@dataclass(frozen=True)
class SequenceSpec:
    """A sequence problem's choices: the engine whose rules apply (``pseudo``: the seed's
    examples, no engine), and its mode (None: the engine's own, read unless a Commit)."""

    engine: str = "pseudo"
    mode: str | None = None


def default_mode(engine: str, mode: str | None) -> str:
    if mode is not None:
        return mode
    return "write" if engine == "commit" else "read"


class Sequence(Kind):
    names = ("sequence",)
    keys = {"sequence": key_sets({"buffer", "stream", "mode", "engine"}, {"buffer", "stream"})}

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> SequenceSpec:
        tensors["buffer"] = ctx.tensor(("buffer",), data["buffer"], "buffer")
        tensors["stream"] = ctx.tensor(("stream",), data["stream"], "stream", tier="stream")
        return SequenceSpec(
            engine=ctx.choice(data, "engine", ("pseudo", "fetch", "commit", "dma"), "pseudo"),
            mode=ctx.choice(data, "mode", ("read", "write"), None))

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.forms import verify_sequence
        return verify_sequence(problem, plan, seed)

    def lower(self, problem: Problem[SequenceSpec]) -> Any:
        t, spec = problem.tensors, problem.spec
        return derive(t["buffer"].dims["element"], t["stream"].dims["time"],
                      t["stream"].dims["packet"], t["buffer"].dtype,
                      default_mode(spec.engine, spec.mode), spec.engine)

    def render(self, problem, plan) -> str:
        t = problem.tensors
        return format_table(plan, t["buffer"].dims["element"].text(),
                            t["stream"].dims["time"].text(), t["stream"].dims["packet"].text())


class Layout(Kind):
    names = ("layout",)
    keys = {"layout": key_sets({"tensors"}, {"tensors"})}

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> NoChoices:
        ts = data["tensors"]
        if not isinstance(ts, dict) or not ts:
            raise ctx.doc.error(("tensors",), "expected a mapping of names to tensors",
                                "tensors: {hbm: {tier: hbm, element: 'm![A]'}}")
        for tname, spec in ts.items():
            tensors[str(tname)] = ctx.tensor(("tensors", tname), spec, str(tname),
                                             allow_stream=True)
        return NoChoices()

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.forms import verify_layout
        return verify_layout(problem, plan, seed)

    def lower(self, problem) -> Any:
        from ..lowering import LayoutReport
        return LayoutReport(problem)


register(Sequence())
register(Layout())
