"""Problem -> configs: the one place that turns a loaded problem into what the hardware runs
(used by `tcplan lower`, `verify` and `run`), and `tcplan verify`: the configs executed and
checked, each as the problem's kind does it."""

from __future__ import annotations

from typing import Any

from tcplan.model import tiers


def lower_problem(problem: Any) -> Any:
    """The configs of a problem (a DmaPlan, a SequencerConfig, ...; raises TcplanError):
    its kind's ``lower`` (planner/kinds/)."""
    from .registry import kind_of
    return kind_of(problem).lower(problem)


def verify_problem(problem, seed: int = 0, progress=None) -> dict[str, Any]:
    """Raises TcplanError (a rule, or a verification mismatch) or returns the report: the
    problem lowered, checked against the simulator's limits, and verified, each as its
    kind does it (planner/kinds/; the executor runs what the kind hands it).  ``progress``:
    the callback of planner/progress.py, told how execution and checking advance."""
    import time

    from tcplan.executor.run import check_sizes

    from .registry import kind_of
    kind = kind_of(problem)
    t0 = time.perf_counter()
    plan = kind.lower(problem)
    check_sizes(problem)
    t1 = time.perf_counter()
    report = kind.verify(problem, plan, seed, progress)
    # (executing and checking are one pass here)
    report["times"] = {"lower": round(t1 - t0, 3), "verify": round(time.perf_counter() - t1, 3)}
    return report


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
