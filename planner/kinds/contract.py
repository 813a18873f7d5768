"""The Contraction Engine as a problem and a graph op (``kind: contract``;
model/engines/contraction.py, executor/contraction.py; issue 29, items 2-5).

A contract op reads a stream (``source``, one flit a packet: a Collect's output) and a TRF
tensor (``trf``) and writes the result stream (``destination``, in the pair's accumulator
type); ``stages`` names each stage's output as furiosa-opt's calls do::

    stages: {outer: {time: 'm![A]', packet: 'm![B]'},   # contract_outer::<OutTime, OutPacket>
             packet: 'm![1]',                           # contract_packet::<OutPacket>
             time: 'm![A]',                             # contract_time::<OutTime>
             lane: interleaved}                         # contract_lane(LaneMode)

and the destination's Time and Packet are the Lane Folder's ``contract_lane::<OutTime,
OutPacket>``.  What the compiler derives (PackSize, LaneBroadcast, TimeBroadcast, ReadSize,
the tree depth, InnerTime) tcplan derives and prints.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tcplan.model import hardware as hw
from tcplan.model.engines.contraction import MODES, Contraction, ContractionPlan
from tcplan.model.rules import TcplanError, fail

from ..problem import Problem
from ..registry import Kind, Options, Solved, key_sets, register
from .engines import given_text, solve_given

STAGES_EXAMPLE = ("stages: {outer: {time: 'm![A]', packet: 'm![B]'}, packet: 'm![1]', "
                  "time: 'm![A]', lane: interleaved}")


@dataclass(frozen=True)
class ContractSpec:
    """A contract op's one choice: each stage's output (nothing is free yet)."""

    engine: Contraction


def _stages(ctx, data: Any) -> Contraction:
    keys = ("stages",)
    if not isinstance(data, dict) or set(data) != {"outer", "packet", "time", "lane"}:
        raise ctx.doc.error(keys, "expected the stages outer, packet, time and lane",
                            STAGES_EXAMPLE)
    outer = data["outer"]
    if not isinstance(outer, dict) or set(outer) != {"time", "packet"}:
        raise ctx.doc.error(keys + ("outer",), "expected the Outer stage's time and packet",
                            "outer: {time: 'm![A]', packet: 'm![B]'}")
    lane = data["lane"]
    if lane not in MODES:
        raise ctx.doc.error(keys + ("lane",), f"{lane!r} is not a lane mode",
                            "lane: one of " + ", ".join(MODES))
    return Contraction(ctx.mapping(keys + ("outer", "time"), outer["time"], "time"),
                       ctx.mapping(keys + ("outer", "packet"), outer["packet"], "packet"),
                       ctx.mapping(keys + ("packet",), data["packet"], "packet"),
                       ctx.mapping(keys + ("time",), data["time"], "time"), lane)


class Contract(Kind):
    names = ("contract",)
    keys = {"contract": key_sets({"source", "trf", "destination", "stages"},
                                 {"source", "trf", "destination", "stages"})}
    solvable = True
    graph_roles = {"contract": {"source": (True, True), "trf": (True, True),
                                "destination": (False, True)}}
    graph_same_axes = False  # (the operands carry their own axes, the result its own)
    dtype_role = "source"
    output_word = "computed"

    def graph_mac_use(self, plan: ContractionPlan) -> float:
        return plan.cycles * plan.mac_utilization

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> ContractSpec:
        engine = _stages(ctx, data["stages"])
        src = ctx.tensor(("source",), data["source"], "source", tier="stream")
        tensors["source"] = src
        trf = ctx.tensor(("trf",), data["trf"], "trf", tier="trf")
        if trf.tier != "trf":
            raise ctx.doc.error(("trf", "tier"), "the weight operand is a TRF tensor",
                                "tier: trf")
        tensors["trf"] = trf
        out = ctx.tensor(("destination",), data["destination"], "destination",
                         tier="stream")
        acc = hw.CONTRACT_ACCUMULATOR.get(src.dtype, src.dtype)
        tensors["destination"] = dataclasses.replace(out, dtype=acc)
        return ContractSpec(engine)

    def lower(self, problem: Problem[ContractSpec]) -> ContractionPlan:
        t = problem.tensors
        return problem.spec.engine.lower(t["source"], t["trf"], t["destination"],
                                         problem.axes)

    def _run(self, problem, plan: ContractionPlan, S, W, check_it: bool = True):
        from tcplan.executor.contraction import run_contraction
        from tcplan.executor.run import check_positions
        for t in (plan.src, plan.trf, plan.out):  # (within the simulator's limits)
            check_positions(t, t.name)
        return run_contraction(plan, S, W, check_it)

    def verify(self, problem, plan: ContractionPlan, seed: int, progress=None
               ) -> dict[str, Any]:
        from tcplan.executor.run import carried_axes, tensor_values
        axes = problem.axes
        S = tensor_values({a: axes[a] for a in carried_axes(plan.src, axes)},
                          plan.src.dtype, seed)
        W = tensor_values({a: axes[a] for a in carried_axes(plan.trf, axes)},
                          plan.trf.dtype, seed + 1)
        _, checked = self._run(problem, plan, S, W)
        exact = plan.out.dtype == "i32"
        return {"verified": True, "cycles": plan.cycles, "checked": checked,
                "method": "laid the stream and the TRF out by their mappings, ran the four "
                          "stages on every slice, checked every held result position "
                          "against numpy.einsum of the operands, " + (
                              "bit for bit" if exact else "within the f32 summation bound "
                              "(docs/engines.md)"),
                "breakdown": plan.breakdown()}

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        b = report["breakdown"]
        return [f"  MAC utilization {b['mac_utilization']:.4f}; {b['bottleneck']}"]

    def plan(self, problem, opts: Options) -> tuple[Any, int | None, bool]:
        plan = self.lower(problem)
        return plan, plan.cycles, True

    def lower_bound(self, problem, plan) -> int | None:
        return plan.cycles

    def graph_summary(self, plan: ContractionPlan) -> dict[str, Any]:
        return {"stream": {d: plan.out.dims[d].text() for d in ("time", "packet")},
                "dtype": plan.out.dtype, "mac_utilization": round(plan.mac_utilization, 6),
                "stages": {s["stage"]: s["cycles"] for s in plan.stages()}}

    def solve(self, problem: Problem[ContractSpec], opts: Options) -> Solved:
        return solve_given(self, problem, opts)

    def solve_text(self, problem, solved: Solved) -> str:
        return given_text(self, problem, solved, " against numpy.einsum")

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        from ..explain import _item
        try:
            plan = self.lower(problem)
        except TcplanError as err:
            if err.kind == "input":
                raise
            return 1, {"problem": problem.name, "feasible": False,
                       "conflict": [_item(v.rule, v.to_json()) for v in err.violations]}
        return 0, feasible(problem.name, plan)

    def inputs(self, problem) -> tuple[str, ...]:
        return ("source", "trf")

    def run(self, problem, plan: ContractionPlan, inputs: dict, seed: int) -> dict:
        from tcplan.executor.run import embed, read_tensor_from
        axes = problem.axes
        S = read_tensor_from(embed(inputs.get("source"), plan.src, axes, "source", seed),
                             plan.src, axes)
        W = read_tensor_from(embed(inputs.get("trf"), plan.trf, axes, "trf", seed + 1),
                             plan.trf, axes)
        out, _ = self._run(problem, plan, S, W)
        return {"source": S, "trf": W, "destination": out}

    def check_tensors(self, problem, plan: ContractionPlan, tensors: dict) -> None:
        """In a graph, the tensors carry the dtypes the op reads and makes."""
        for role, t, verb in (("source", plan.src, "reads it"), ("trf", plan.trf, "reads it"),
                              ("destination", plan.out, "makes it")):
            if tensors[role].dtype != t.dtype:
                raise fail("graph-dtype", (tensors[role].name,), tensor=tensors[role].name,
                           have=tensors[role].dtype, op=problem.name, verb=verb,
                           want=t.dtype)

    def execute(self, problem, plan: ContractionPlan, mem, tensors: dict, values: dict,
                seed: int) -> dict:
        """The result over the axes its tensor carries (the operands' contracted axes
        summed away), as the graph holds every tensor."""
        out, _ = self._run(problem, plan, values["source"], values["trf"])
        return {"destination": out}

    def replay(self, problem, plan: ContractionPlan, mem, tensors: dict, values: dict,
               seed: int) -> dict:
        """The engine's own sums (its stages run), not checked against the reference."""
        out, _ = self._run(problem, plan, values["source"], values["trf"], check_it=False)
        return {"destination": out}


def feasible(name: str, plan: ContractionPlan, binding: list | None = None
             ) -> dict[str, Any]:
    """What ``explain`` says of a contraction with a plan: its cycles, its bottleneck and
    what binds (the multipliers it leaves idle; ``binding``: more to say first)."""
    util = plan.mac_utilization
    idle = [] if util >= 1 else [{
        "title": f"MAC utilization {util:.4f}",
        "detail": f"{plan.useful_products:,} useful products in "
                  f"{plan.engine.outer_time.size:,} cycles of the multipliers (a "
                  "contracted axis in Time, or a packet or lanes left part empty, leaves "
                  "multipliers idle)"}]
    return {"problem": name, "feasible": True, "cycles": plan.cycles,
            "lower_bound": plan.cycles, "mac_utilization": round(util, 6),
            "bottleneck": plan.breakdown()["bottleneck"], "binding": (binding or []) + idle}


register(Contract())
