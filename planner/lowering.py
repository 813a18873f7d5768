"""Problem -> configs: the one place that turns a loaded problem into what the hardware runs
(used by `tcplan lower`, `verify` and `run`)."""

from __future__ import annotations

from typing import Any

from model import dma, gather, redistribute, tiers
from model.sequencer import derive


def default_mode(engine: str, mode: str | None) -> str:
    if mode is not None:
        return mode
    return "write" if engine == "commit" else "read"


def lower_problem(problem: Any) -> Any:
    """The configs of a problem: a DmaPlan or a SequencerConfig (raises TcplanError)."""
    t = problem.tensors
    from .layout import planned
    if problem.kind in ("dma", "pcie") and planned(problem):
        from .layout import plan_free  # a free stream or source: the searched layout's plan
        return plan_free(problem)[0].best.plan
    if problem.kind in ("dma", "pcie"):
        return dma.lower(t["source"], t["destination"], t["stream"], problem.chips,
                         problem.params.get("engine_at"), pcie=problem.kind == "pcie")
    if problem.kind == "redistribute":
        return redistribute.plan(t["source"], problem.params["steps"], problem.chips)
    if problem.kind == "gather":
        return gather.plan("gather", problem.params["variant"], t["table"], t["destination"],
                           t["index"], problem.chips)
    if problem.kind == "scatter":
        return gather.plan("scatter", "scaled", t["destination"], t["source"], t["index"],
                           problem.chips)
    if problem.kind == "sequence":
        engine = problem.params["engine"]
        return derive(t["buffer"].dims["element"], t["stream"].dims["time"],
                      t["stream"].dims["packet"], t["buffer"].dtype,
                      default_mode(engine, problem.params["mode"]), engine)
    if problem.kind in ("vector", "lane_fold"):  # (an expression: in plan_expression)
        tiers.require_placement(problem.tensors.values(), problem.chips)
    if problem.kind == "vector":
        from model.vector import analyze

        from .chains_spec import chain_of
        return analyze(chain_of(problem))
    if problem.kind == "lane_fold":
        from model.lane import fold
        m = problem.params["input"]
        out = problem.params.get("output", {})
        return fold(problem.axes, m["lane"], m["time"], m["packet"], problem.params["mode"],
                    out.get("time"), out.get("packet"))
    if problem.kind == "expression":
        from .chains import plan_expression
        return plan_expression(problem)
    return LayoutReport(problem)


class LayoutReport:
    """What `lower` says of a layout problem: each tensor's dimensions, footprint and
    placement-rule warnings (a layout has no operation to lower)."""

    def __init__(self, problem: Any):
        self.problem = problem
        self.rows = []
        for name, t in problem.tensors.items():
            el = t.dims.get("element")
            self.rows.append({
                "tensor": name, "tier": t.tier, "dtype": t.dtype,
                "dims": {d: {"mapping": m.text(), "size": m.size} for d, m in t.dims.items()},
                "bytes_per_unit": el.size * t.elem_bytes if el is not None else None,
                "warnings": [v.to_json() for v in tiers.placement_violations(t, problem.chips)],
            })

    def to_json(self) -> dict[str, Any]:
        return {"tensors": self.rows}

    def text(self) -> str:
        lines = [f"{self.problem.name}: layout of {len(self.rows)} tensor(s), "
                 f"{self.problem.chips} chip(s)"]
        for r in self.rows:
            dims = ", ".join(f"{tiers.DIM_TITLES[d]} {v['mapping']} ({v['size']})"
                             for d, v in r["dims"].items())
            foot = (f"; {r['bytes_per_unit']:,} B per unit" if r["bytes_per_unit"] is not None
                    else "")
            lines.append(f"  {r['tensor']}: {r['tier'].upper()} <{r['dtype']}> {dims}{foot}")
            for w in r["warnings"]:
                lines.append(f"    warning [{w['code']}] {w['message']}")
        return "\n".join(lines)
