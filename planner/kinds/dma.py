"""DMA and PCIe problems (seed 002): a transfer between two placed tensors through a
stream; planned when its stream, a placement or an HBM layout is free."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from tcplan.model import dma
from tcplan.model.mapping import Mapping
from tcplan.model.rules import TcplanError, fail

from ..dma_spec import DmaSpec
from ..outcome import Found, error_of
from ..problem import Problem
from ..render import EXIT_OK, EXIT_RULE, _hbm_line, format_dma
from ..registry import Kind, Options, Solved, Staged, key_sets, register


class Dma(Kind):
    names = ("dma", "pcie")

    def graph_context(self, data: dict) -> str:
        return "dma"

    def graph_bank_accesses(self, plan) -> int:
        return 1  # (the guide's cumulative example counts a DMA's one)

    graph_floors = True  # (its layout search's option floors: planner/graph_bound.py)

    keys = {"dma": key_sets({"source", "destination", "stream", "engine_at", "bounds", "hops",
                             "sub_tensor"},
                            {"source", "destination"}),
            "pcie": key_sets({"source", "destination", "stream", "bounds"},
                             {"source", "destination"})}
    solvable = True
    engine_stream = True
    graph_broadcast = True
    graph_roles = {n: {"source": (True, True), "destination": (False, True)}
                   for n in ("dma", "pcie")}
    pictures = "transfer"

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> DmaSpec:
        from tcplan.model.broadcast import partial_violations

        from ..dma_spec import load_dma
        spec = load_dma(ctx, data, kind, tensors)
        # a destination asking for values the source lacks is a mistake, said before planning
        bad = partial_violations(tensors["source"], tensors["destination"],
                                 ctx.doc.where(("destination",)))
        if bad:
            raise TcplanError(bad)
        return spec

    def lower(self, problem: Problem[DmaSpec]) -> Any:
        from ..dma_plan import plan_free
        from ..outcome import unwrap
        if problem.spec.planned:  # a free stream or source: the searched layout's plan
            return warned(problem, unwrap(plan_free(problem)).best.plan)
        return given_plan(problem)

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.run import run_dma
        from tcplan.model.cost import dma_cycles
        result = run_dma(problem, plan, seed, progress=progress)
        cost = dma_cycles(plan)
        out = {"verified": True, "cycles": cost.cycles, "checked": result["checked"],
               "method": "executed every command over simulated memories; holding rule",
               "breakdown": cost.to_json()}
        if plan.warnings:
            out["warnings"] = [w.to_json() for w in plan.warnings]
        return out

    def inputs(self, problem) -> tuple[str, ...]:
        return ("source",)

    def run(self, problem, plan, inputs: dict, seed: int) -> dict:
        from tcplan.executor import run
        return run.run_with_data(problem, plan, inputs, seed)

    def render(self, problem, plan) -> str:
        return format_dma(problem.name, plan)

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        b = report["breakdown"]
        lines = [f"  start-up {b['startup']:,}, read {b['read']:,.0f}, write "
                 f"{b['write']:,.0f}; bottleneck: {b['bottleneck']}"]
        if b.get("hbm"):
            lines.append(_hbm_line(b["hbm"]))
        return lines + [f"  penalty: {p}" for p in b["penalties"]] + [
            f"warning [{w['code']}] {w['message']}\n  fix: {w['fix']}"
            for w in report.get("warnings", [])]

    def solve(self, problem, opts: Options) -> Solved:
        return solve_dma(problem, opts)

    def solve_text(self, problem, solved: Solved) -> str:
        record = solved.record
        if isinstance(record, HopsSolved):
            return _hops_text(problem, record)
        if isinstance(record, DmaSolved):
            return dma_solve_text(problem, record, solved.plan)
        return super().solve_text(problem, solved)

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        from ..explain import explain_dma
        return explain_dma(problem, seed)

    def plan(self, problem: Problem[DmaSpec], opts: Options) -> tuple[Any, int | None, bool]:
        return self.staged(problem, opts).run()

    def staged(self, problem: Problem[DmaSpec], opts: Options
               ) -> Staged[tuple[Any, int | None, bool]]:
        """A free stream's floor from its options' static checks (planner/layout.py
        ``staged``), then its search; a given stream is lowered at once (its cycles are its
        floor)."""
        from tcplan.model.cost import dma_cycles

        from ..dma_plan import plan_free, staged_free
        if problem.spec.hops > 1:
            raise fail("bad-request", detail="a graph's DMA op moves in one hop",
                       fix="drop hops, or add the intermediate tensor and a second op")
        if not problem.spec.planned:
            plan = self.lower(problem)
            cycles = dma_cycles(plan).cycles
            return Staged(lambda: cycles, lambda: (plan, cycles, True))
        search = staged_free(problem, opts.time_limit, opts.seed, opts.workers,
                             opts.rules_first)

        def run() -> tuple[Any, int | None, bool]:
            out = search.run() if search is not None else plan_free(
                problem, opts.time_limit, opts.seed, workers=opts.workers,
                rules_first=opts.rules_first)
            if not isinstance(out, Found):
                raise error_of(out)
            best = out.record.best.plan
            return best, dma_cycles(best).cycles, out.proven
        return Staged(search.floor if search is not None else lambda: None, run)

    graph_rebases = ("source", "destination")

    def graph_rebase(self, plan, shifts: dict[str, int], problem) -> Any:
        from tcplan.model.dma import rebased
        return rebased(plan, shifts.get("source", 0), shifts.get("destination", 0))

    def graph_summary(self, plan) -> dict[str, Any]:
        return {"stream": {d: m.text() for d, m in plan.stream_dims.items()}}

    def lower_bound(self, problem, plan) -> int | None:
        from tcplan.model.cost import lower_bound
        return lower_bound(plan)

    def execute(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        from tcplan.executor.run import execute, held_by, place, verify
        axes = problem.axes
        held = held_by(values["source"], plan.source, plan.destination, axes)
        place(mem, plan.destination, axes, None)
        moved = execute(mem, plan)
        verify(mem, plan.destination, axes, held, moved)
        return {"destination": held}

    def replay(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        from tcplan.executor.run import held_by, place
        held = held_by(values["source"], plan.source, plan.destination, problem.axes)
        place(mem, plan.destination, problem.axes, held)
        return {"destination": held}

    def traced_tensors(self, problem) -> dict[str, Any]:
        """A planned DMA's tensors as its plan lays them out: the stream searched, and a
        free source or destination as chosen (the plan ``lower`` and ``verify`` use)."""
        import dataclasses
        out = dict(problem.tensors)
        if not problem.spec.planned:
            return out
        plan = self.lower(problem)
        out.update(source=plan.source, destination=plan.destination)
        if "stream" in out:
            out["stream"] = dataclasses.replace(out["stream"], dims=dict(plan.stream_dims))
        return out

    def trace_warnings(self, problem, name: str, t) -> list:
        if name == "stream":  # its Chip/Cluster/Slice select engines, not placements
            return dma._stream_engine_violations(t, problem.chips)
        return super().trace_warnings(problem, name, t)


register(Dma())


def given_plan(problem: Problem[DmaSpec]) -> Any:
    """A DMA with nothing free: lowered as given."""
    t = problem.tensors
    return warned(problem, dma.lower(t["source"], t["destination"], t["stream"],
                                     problem.chips, problem.spec.engine_at,
                                     pcie=problem.spec.pcie))


def warned(problem: Problem[DmaSpec], plan: Any) -> Any:
    """The plan with the problem's warnings first among its own (``sub-tensor``)."""
    plan.warnings = [*problem.spec.warnings,
                     *(w for w in plan.warnings if w not in problem.spec.warnings)]
    return plan


@dataclass(frozen=True)
class Chosen:
    """What a DMA's solve chose (or was given): the stream's Time and Packet, its engine
    split (Cluster, Slice) when planned, and the layouts the problem left free: the
    destination's dimensions (element, chip, cluster, slice), a free source's Element, and
    the HBM addresses placed (source first)."""

    time: Mapping
    packet: Mapping
    split: dict[str, Mapping] | None = None
    destination: dict[str, Mapping] = field(default_factory=dict)
    source_element: Mapping | None = None
    addresses: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"time": self.time.text(), "packet": self.packet.text()}
        if self.split is not None:
            out.update({d: m.text() for d, m in self.split.items()})
        out.update({"destination_" + d: m.text() for d, m in self.destination.items()})
        if self.source_element is not None:
            out["source_element"] = self.source_element.text()
        out.update({side + "_address": a for side, a in self.addresses.items()})
        return out


@dataclass(frozen=True)
class DmaSolved:
    """A DMA's solve: its status (``optimal``, ``feasible``, ``given``), what it chose, the
    lowered plan, its cycles (the full model's), the estimate the search minimized, the
    lower bound, the check, the search's counts and the times."""

    problem: str
    status: str
    chosen: Chosen
    plan: Any  # the lowered DmaPlan
    cycles: int
    estimate: int
    lower_bound: int | None
    breakdown: dict[str, Any]  # the cycle report (model.cost.CycleReport.to_json)
    verified: bool | None
    checked: int
    check: str
    candidates: int
    rejected: dict[str, int]
    solve_time: float
    times: dict[str, float]
    error: TcplanError | None = None  # why the plan did not verify
    #: the given DM layout binds: the same problem with it free (planner/dma_plan.py)
    freed: Any = None

    @property
    def bound_ratio(self) -> float | None:
        return round(self.cycles / self.lower_bound, 3) if self.lower_bound else None

    @property
    def note(self) -> str | None:
        return ("the time limit cut the search: the plan is not proven optimal"
                if self.status == "feasible" else None)

    def to_json(self) -> dict[str, Any]:
        out = {"problem": self.problem, "status": self.status, "cycles": self.cycles,
               "estimate": self.estimate, "lower_bound": self.lower_bound,
               "bound_ratio": self.bound_ratio,
               "plan": {"stream": self.chosen.to_json(), **self.plan.to_json()},
               "verified": self.verified, "checked": self.checked, "check": self.check,
               "candidates": self.candidates, "rejected": self.rejected,
               "solve_time": self.solve_time, "times": self.times,
               "breakdown": self.breakdown}
        if self.error is not None:
            out["error"] = self.error.to_json()
        if self.note is not None:
            out["note"] = self.note
        if self.freed is not None:
            out["layout_freed"] = self.freed.to_json()
        return out


@dataclass(frozen=True)
class _Searched:
    """A DMA's free choices planned: the plan, its status, what was chosen, the legal
    layouts found, the rejections by rule, and the seconds spent lowering."""

    plan: Any
    status: str
    chosen: Chosen
    candidates: int
    rejected: dict[str, int]
    lowering: float


def _searched(problem: Problem[DmaSpec], opts) -> _Searched | TcplanError:
    """Plan a DMA's free choices; the error that says why there is no plan."""
    from ..dma_plan import plan_free
    out = plan_free(problem, opts.time_limit, opts.seed, workers=opts.workers,
                    progress=opts.progress)
    if not isinstance(out, Found):
        return error_of(out)
    found, spec = out.record, problem.spec
    best = found.best
    plan = best.plan
    destination = {"element": best.element} if best.element is not None else {}
    if spec.free_slice is not None:
        destination.update({d: plan.destination.dims[d] for d in spec.free_slice.dims})
    chosen_hbm = set(spec.free_address) | ({"source"} if spec.free_source else set())
    chosen = Chosen(best.time, best.packet_map, found.split, destination,
                    plan.source.dims["element"] if spec.free_source else None,
                    {side: getattr(plan, side).address
                     for side in sorted(chosen_hbm, reverse=True)})  # (the source first)
    logging.getLogger("tcplan").debug(
        "search: %d option model(s), %d plan(s) lowered and estimated, %d outer "
        "round(s); seconds: %s", found.models, found.enumerated, found.rounds,
        {k: round(v, 3) for k, v in found.times.items()})
    return _Searched(plan, out.status, chosen, len(found.candidates), found.rejected,
                     found.times.get("lowering", 0.0))  # (lowering happens inside the search)


def solve_dma(problem: Problem[DmaSpec], opts) -> Solved:
    """A DMA with a free stream: search the order and packet, lower, verify, time.  With
    nothing free the problem is verified as given."""
    import time

    from tcplan.executor.run import run_dma
    from tcplan.model.cost import dma_cycles, estimate, lower_bound
    t = problem.tensors
    t0 = time.perf_counter()
    if problem.spec.hops > 1:
        return _solve_hops(problem, opts)
    try:
        if problem.spec.planned:
            got = _searched(problem, opts)
            if isinstance(got, TcplanError):
                return Solved.no_plan(problem.name, got)
        else:
            plan = given_plan(problem)
            got = _Searched(plan, "given", Chosen(t["stream"].dims["time"],
                                                  t["stream"].dims["packet"]),
                            1, {}, time.perf_counter() - t0)
    except TcplanError as err:
        if err.kind == "input":
            raise
        return Solved.no_plan(problem.name, err)
    plan = warned(problem, got.plan)
    solve_s = time.perf_counter() - t0
    detailed = dma_cycles(plan)
    check = opts.verify
    times = {"plan": round(solve_s, 3), "lower": round(got.lowering, 3)}
    try:
        ran = run_dma(problem, plan, opts.seed, check, opts.progress)
        checked = ran["checked"]
        times.update(execute=round(ran["execute_s"], 3), verify=round(ran["verify_s"], 3))
        verified, error = (None if check == "none" else True), None
    except TcplanError as err:
        verified, error, checked = False, err, 0
    bound = lower_bound(plan)
    t1 = time.perf_counter()
    freed = _freed(problem, detailed.cycles, bound, opts)
    if freed is not None:
        times["layout_freed"] = round(time.perf_counter() - t1, 3)
    record = DmaSolved(problem.name, got.status, got.chosen, plan, detailed.cycles,
                       estimate(plan).cycles, bound, detailed.to_json(), verified,
                       checked, check, got.candidates, got.rejected, round(solve_s, 3), times,
                       error, freed)
    return Solved(record, plan, exit=EXIT_OK if verified is not False else EXIT_RULE)


def _freed(problem: Problem[DmaSpec], cycles: int, bound: int | None, opts) -> Any:
    """A plan at its layout's lower bound: the given DM layout against the same problem
    with it free (planner/dma_plan.py ``layout_freed``, within the time limit and 2 s)."""
    from ..dma_plan import FREED_TIME_LIMIT, layout_freed
    if bound is None or cycles > bound:
        return None
    return layout_freed(problem, bound, opts.seed, min(FREED_TIME_LIMIT, opts.time_limit))


def dma_solve_text(problem: Problem[DmaSpec], out: DmaSolved, plan: Any) -> str:
    """What `tcplan solve` prints of a DMA's plan."""
    chosen, rejected = out.chosen, out.rejected
    dest = [f"{d.title()} {chosen.destination[d].text()}" for d in
            ("chip", "cluster", "slice", "element") if d in chosen.destination]
    if "destination" in chosen.addresses:
        dest.append(f"Address {chosen.addresses['destination']:,}")
    split = chosen.split
    head = (f"{problem.name}: "
            + (f"source Element {chosen.source_element.text()} (HBM), "
               if chosen.source_element is not None else "")
            + (f"source address {chosen.addresses['source']:,}, "
               if "source" in chosen.addresses else "") + "stream "
            + (f"Cluster {split['cluster'].text()}, Slice {split['slice'].text()}, "
               if split is not None else "")
            + f"Time {chosen.time.text()}, Packet {chosen.packet.text()} "
            + ("into destination " + ", ".join(dest) + " " if dest else "")
            + f"({out.status}; {out.candidates} legal layout(s)"
            + (", rejected: " + ", ".join(f"{r} x{k}" for r, k in rejected.items())
               if rejected else "") + f"; {out.solve_time:.2f} s)")
    hbm = out.breakdown.get("hbm")
    return "\n".join(
        [head, format_dma(problem.name, plan),
         f"cycles: {out.cycles:,} (estimate {out.estimate:,}; lower bound "
         f"{out.lower_bound:,}, ratio {out.bound_ratio})"]
        + ([_hbm_line(hbm)] if hbm else [])
        + [_verified_line(out.verified, out.check, out.checked, out.error)]
        + ([f"note: {out.note}"] if out.note is not None else [])
        + ([f"note: {out.freed.note()}"] if out.freed is not None else []))


def _verified_line(verified: bool | None, check: str, checked: int,
                   error: TcplanError | None) -> str:
    """What `solve` says of its check (``--verify full|sample|none``)."""
    if verified is None:
        return "not verified (--verify none: the plan was not executed)"
    if not verified:
        assert error is not None  # (a failed check has its error)
        return f"NOT verified [{error.code}]: " + error.message
    if check == "sample":
        return (f"verified at a sample: {checked:,} live destination positions drawn at "
                f"random (seeded) hold what they must (--verify full checks every one)")
    return f"verified: {checked:,} destination elements"


@dataclass(frozen=True)
class HopRow:
    """One hop of a multi-hop solve: its two tensors, the stream it chose, its cycles (the
    full model's and the estimate) and the destination elements its check covered."""

    source: str
    destination: str
    stream: dict[str, str]
    cycles: int
    estimate: int
    checked: int

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "destination": self.destination,
                "stream": self.stream, "cycles": self.cycles, "estimate": self.estimate,
                "checked": self.checked}


@dataclass(frozen=True)
class HopsSolved:
    """A multi-hop DMA's solve: its hops, their total cycles, whether every hop verified,
    why the direct transfer is not used, and the intermediates tried."""

    problem: str
    hops: tuple[HopRow, ...]
    cycles: int
    verified: bool
    why: str | None
    intermediates_tried: int
    solve_time: float
    status: str = "optimal"
    lower_bound: None = None
    breakdown: None = None  # (each hop's is its own)
    error: None = None

    def to_json(self) -> dict[str, Any]:
        return {"problem": self.problem, "status": self.status, "cycles": self.cycles,
                "plan": {"hops": [h.to_json() for h in self.hops]},
                "verified": self.verified, "why": self.why,
                "intermediates_tried": self.intermediates_tried,
                "solve_time": self.solve_time}


def _solve_hops(problem: Problem[DmaSpec], opts) -> Solved:
    """Direct or through one intermediate HBM layout: the shortest path of planned hops;
    each hop is executed and verified (so the chain holds the source tensor end to end)."""
    import time

    from tcplan.executor.run import run_dma
    from tcplan.model.cost import dma_cycles

    from ..hops import plan_hops
    t0 = time.perf_counter()
    try:
        out = plan_hops(problem, opts.time_limit, opts.seed)
    except TcplanError as err:
        if err.kind == "input":
            raise
        return Solved.no_plan(problem.name, err)
    if not isinstance(out, Found):
        return Solved.no_plan(problem.name, error_of(out))
    hp = out.record
    solve_s = time.perf_counter() - t0
    rows, verified, total = [], True, 0
    for h in hp.hops:
        full = dma_cycles(h.plan).cycles
        total += full
        try:
            checked = run_dma(problem, h.plan, opts.seed)["checked"]
        except TcplanError:
            verified, checked = False, 0
        rows.append(HopRow(h.source.describe(), h.destination.describe(), h.stream, full,
                           h.cycles, checked))
    record = HopsSolved(problem.name, tuple(rows), total, verified, hp.direct_error,
                        hp.tried, round(solve_s, 3))
    return Solved(record, hp, exit=EXIT_OK if verified else EXIT_RULE)


def _hops_text(problem: Problem[DmaSpec], out: HopsSolved) -> str:
    lines = [f"{problem.name}: {len(out.hops)} hop(s), {out.cycles:,} cycles"
             + (f" ({out.why})" if out.why else "")
             + f"; {out.intermediates_tried} intermediate layout(s) tried in "
             f"{out.solve_time:.2f} s"]
    for k, r in enumerate(out.hops, 1):
        lines.append(f"  hop {k}: {r.source} -> {r.destination}")
        lines.append(f"         stream {r.stream}; {r.cycles:,} cycles; "
                     + (f"verified ({r.checked:,} elements)" if r.checked else
                        "NOT verified"))
    return "\n".join(lines)
