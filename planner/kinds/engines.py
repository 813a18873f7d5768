"""The Tensor Unit's engines as problems and graph ops (model/engines/; issue 29, items 2-4):
``kind: collect``, ``cast``, ``to_trf`` and ``to_vrf``, one stream in (``source``) and one
stream or register-file tensor out (``destination``), the engine's options beside them (a
Cast's ``to``, a TRF store's ``region``).

One kind serves every engine of model/engines/ through its registry (``ENGINES``): the
loader makes the engine from the op's options, ``lower`` checks the op by the engine's
rules, ``verify`` and ``execute`` run it on data (executor/engines.py) and check the output
against what the op computes.  A stream's dtype is the problem's (``dtype``); a Cast's
output is ``to``.  In a graph the op's problem takes the dtype of the stream it reads
(``Kind.dtype_role``).
"""

from __future__ import annotations

import dataclasses
import time as _time
from dataclasses import dataclass
from typing import Any

from tcplan.model import engines as eng
from tcplan.model import hardware as hw
from tcplan.model.engines.register_files import TRF_REGIONS
from tcplan.model.engines.switch import CONFIGS
from tcplan.model.rules import TcplanError, fail

from ..problem import Problem
from ..registry import Kind, Options, Solved, key_sets, register
from ..render import EXIT_OK, EXIT_RULE

ROLES = {"source": (True, True), "destination": (False, True)}
#: each engine's options: key -> (allowed words, required); ``None``: a switch's
#: configuration, ``{name: {parameter: size}}`` (:func:`_switch_config`)
OPTIONS: dict[str, dict[str, tuple[tuple[str, ...] | None, bool]]] = {
    "collect": {},
    "cast": {"to": (tuple(hw.DTYPE_BYTES), True)},
    "to_trf": {"region": (tuple(TRF_REGIONS), False)},
    "to_vrf": {},
    "transpose": {},
    "switch": {"config": (None, True)},
    "commit_trim": {},
    "fetch_cast": {"to": (tuple(hw.DTYPE_BYTES), True)},
    "commit_cast": {"to": (tuple(hw.DTYPE_BYTES), True)},
    "commit_cast_relu": {"to": (tuple(hw.DTYPE_BYTES), True)},
    "inter_slice_reduce": {"op": (tuple(dict.fromkeys(
        o for ops in hw.INTER_SLICE_REDUCE_OPS.values() for o in ops)), True)},
}
#: the engines whose output drops axes (a reduction): a kind of their own
REDUCING = tuple(n for n in eng.ENGINES if getattr(eng.ENGINES[n], "reduces", False))


def _switch_config(ctx, value: Any) -> dict[str, Any]:
    """A switch's ``config: {broadcast1: {slice1: 4, slice0: 8}}`` as its options."""
    keys = ("config",)
    if not isinstance(value, dict) or len(value) != 1:
        raise ctx.doc.error(keys, "expected one configuration and its parameters",
                            "config: {broadcast1: {slice1: 4, slice0: 8}}")
    (name, args), = value.items()
    if name == "custom_broadcast":
        ring = args.get("ring_size") if isinstance(args, dict) and set(args) == {
            "ring_size"} else None
        if not isinstance(ring, int) or isinstance(ring, bool) or ring < 1:
            raise ctx.doc.error(keys + (name,), "custom_broadcast takes ring_size, a positive "
                                "whole number", "custom_broadcast: {ring_size: 4}")
        return {"config": name, "ring_size": ring}
    if name not in CONFIGS:
        raise ctx.doc.error(keys + (name,), f"{name!r} is not a regular configuration",
                            "use one of " + ", ".join(CONFIGS) + " or custom_broadcast",
                            at_key=True)
    want = CONFIGS[name][0]
    if not isinstance(args, dict) or set(args) != set(want) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1
            for v in args.values()):
        raise ctx.doc.error(keys + (name,), f"{name} takes {', '.join(want)}, each a "
                            "positive whole number", f"{name}: {{"
                            + ", ".join(f"{k}: 2" for k in want) + "}")
    return {"config": name, **args}


@dataclass(frozen=True)
class EngineSpec:
    """An engine op's one choice: the engine, configured by its options."""

    engine: eng.Engine


@dataclass(frozen=True)
class EngineSolved:
    """An engine op's solve: its plan (nothing is free: ``given``), its cycles, the check.
    The plan is an engine's (``EnginePlan``, a contraction's ``ContractionPlan``): it has
    ``cycles``, ``breakdown()``, ``to_json()`` and ``text()``."""

    problem: str
    plan: Any
    verified: bool | None
    checked: int
    times: dict[str, float]
    error: TcplanError | None = None
    status: str = "given"

    @property
    def cycles(self) -> int:
        return self.plan.cycles

    @property
    def lower_bound(self) -> int:
        return self.plan.cycles  # (one flit per cycle: its flits are the bound)

    @property
    def breakdown(self) -> dict[str, Any]:
        return self.plan.breakdown()

    def to_json(self) -> dict[str, Any]:
        out = {"problem": self.problem, "status": self.status, "cycles": self.cycles,
               "lower_bound": self.lower_bound, "plan": self.plan.to_json(),
               "breakdown": self.breakdown, "verified": self.verified,
               "checked": self.checked}
        if self.error is not None:
            out["error"] = self.error.to_json()
        out["times"] = self.times
        return out


def _keys(names: tuple[str, ...]) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    return {n: key_sets({"source", "destination", *OPTIONS[n]},
                        {"source", "destination", *(k for k, (_, req) in OPTIONS[n].items()
                                                     if req)})
            for n in names}


class TensorUnitEngine(Kind):
    names = tuple(n for n in eng.ENGINES if n not in REDUCING)
    keys = _keys(names)
    solvable = True
    graph_roles = {n: ROLES for n in names}
    graph_broadcast = True  # (a switch's output carries its broadcast axes)
    dtype_role = "source"
    output_word = "computed"

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> EngineSpec:
        options: dict[str, Any] = {}
        for k, (allowed, _) in OPTIONS[kind].items():
            if allowed is None:
                options.update(_switch_config(ctx, data[k]))
            elif (v := ctx.choice(data, k, allowed, None)) is not None:
                options[k] = v
        engine = eng.ENGINES[kind](**options)
        tensors["source"] = ctx.tensor(("source",), data["source"], "source", tier="stream")
        out = ctx.tensor(("destination",), data["destination"], "destination",
                         tier=engine.out_tier)
        if out.tier != engine.out_tier:
            raise ctx.doc.error(("destination", "tier"), f"{kind} makes a "
                                f"{engine.out_tier.upper()} tensor, not a {out.tier.upper()} "
                                "one", f"tier: {engine.out_tier}")
        tensors["destination"] = dataclasses.replace(out, dtype=options.get("to") or
                                                     out.dtype)
        return EngineSpec(engine)

    def lower(self, problem: Problem[EngineSpec]) -> eng.EnginePlan:
        return eng.lower(problem.spec.engine, problem.tensors["source"],
                         problem.tensors["destination"])

    def verify(self, problem, plan: eng.EnginePlan, seed: int, progress=None
               ) -> dict[str, Any]:
        from tcplan.executor.engines import reference, run_engine
        from tcplan.executor.run import carried_axes, tensor_bits
        axes = problem.axes
        T = tensor_bits({a: axes[a] for a in carried_axes(plan.inp, axes)}, plan.inp.dtype,
                        seed)
        _, checked = run_engine(plan, T, axes, reference(plan))
        return {"verified": True, "cycles": plan.cycles, "checked": checked,
                "method": f"laid the input out by its mappings, ran the {plan.engine.name} "
                          "engine on every slice's flits, checked every held output "
                          "position against the op's reference, bit for bit",
                "breakdown": plan.breakdown()}

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        b = report["breakdown"]
        return [f"  {b['packets_in']:,} packet(s) in, {b['packets_out']:,} out per slice: "
                f"{b['bottleneck']}"]

    def plan(self, problem, opts: Options) -> tuple[Any, int | None, bool]:
        plan = self.lower(problem)
        return plan, plan.cycles, True

    def lower_bound(self, problem, plan) -> int | None:
        return plan.cycles

    def graph_summary(self, plan) -> dict[str, Any]:
        return {plan.out.tier: {d: m.text() for d, m in plan.out.dims.items()
                                if d not in eng.SPATIAL}, "dtype": plan.out.dtype}

    def solve(self, problem: Problem[EngineSpec], opts: Options) -> Solved:
        return solve_given(self, problem, opts)

    def solve_text(self, problem, solved: Solved) -> str:
        return given_text(self, problem, solved, "")

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        from ..explain import _item
        try:
            plan = self.lower(problem)
        except TcplanError as err:
            if err.kind == "input":
                raise
            return 1, {"problem": problem.name, "feasible": False,
                       "conflict": [_item(v.rule, v.to_json()) for v in err.violations]}
        return 0, {"problem": problem.name, "feasible": True, "cycles": plan.cycles,
                   "lower_bound": plan.cycles,
                   "bottleneck": plan.breakdown()["bottleneck"], "binding": []}

    def inputs(self, problem) -> tuple[str, ...]:
        return ("source",)

    def run(self, problem, plan: eng.EnginePlan, inputs: dict, seed: int) -> dict:
        from tcplan.executor.engines import reference, run_engine
        from tcplan.executor.run import embed, read_tensor_from
        axes = problem.axes
        T = read_tensor_from(embed(inputs.get("source"), plan.inp, axes, "source", seed),
                             plan.inp, axes)
        out, _ = run_engine(plan, T, axes, reference(plan))
        return {"source": T, "destination": read_tensor_from(out, plan.out, axes)}

    def check_tensors(self, problem, plan: eng.EnginePlan, tensors: dict) -> None:
        """In a graph, the streams carry the dtypes the op reads and makes."""
        for role, t in (("source", plan.inp), ("destination", plan.out)):
            if tensors[role].dtype != t.dtype:
                raise fail("graph-dtype", (tensors[role].name,), tensor=tensors[role].name,
                           have=tensors[role].dtype, op=problem.name,
                           verb="reads it" if role == "source" else "makes it",
                           want=t.dtype)

    def execute(self, problem, plan: eng.EnginePlan, mem, tensors: dict, values: dict,
                seed: int) -> dict:
        from tcplan.executor.engines import reference, run_engine
        out, _ = run_engine(plan, values["source"], problem.axes, reference(plan))
        return {"destination": out}

    def replay(self, problem, plan: eng.EnginePlan, mem, tensors: dict, values: dict,
               seed: int) -> dict | None:
        from tcplan.executor.engines import engine_values, reference
        out = engine_values(plan, values["source"], problem.axes, reference(plan))
        return None if out is None else {"destination": out}


def solve_given(kind: Kind, problem: Problem, opts: Options) -> Solved:
    """An engine op's solve (nothing to choose): the op checked by its rules, then run on
    data and checked (``opts.verify``), timed; a rule it breaks is its record."""
    t0 = _time.perf_counter()
    try:
        plan = kind.lower(problem)
    except TcplanError as err:
        if err.kind == "input":
            raise
        return Solved.no_plan(problem.name, err)
    t1 = _time.perf_counter()
    verified: bool | None = None
    checked, error = 0, None
    if opts.verify != "none":
        try:
            verified, checked = True, kind.verify(problem, plan, opts.seed)["checked"]
        except TcplanError as err:
            verified, error = False, err
    record = EngineSolved(problem.name, plan, verified, checked,
                          {"plan": round(t1 - t0, 3),
                           "verify": round(_time.perf_counter() - t1, 3)}, error)
    return Solved(record, plan, exit=EXIT_RULE if verified is False else EXIT_OK)


def given_text(kind: Kind, problem, solved: Solved, against: str) -> str:
    """An engine op's solve as text: its plan and the check (``against``: what the result
    was checked against, e.g. " against numpy.einsum")."""
    out = solved.record
    if solved.error is not None or not isinstance(out, EngineSolved):
        return Kind.solve_text(kind, problem, solved)
    check = ("not verified (--verify none)" if out.verified is None else
             f"verified: {out.checked:,} positions{against}" if out.verified else
             f"NOT verified: {out.error.message if out.error else ''}")
    return "\n".join([f"{problem.name}: {problem.kind} (nothing to choose)",
                      out.plan.text(), check])


class ReducingEngine(TensorUnitEngine):
    """An engine whose output drops the axes it reduces (the Inter-Slice Reducer): the
    destination carries the source's axes less those."""

    names = REDUCING
    keys = _keys(REDUCING)
    graph_roles = {n: ROLES for n in REDUCING}
    graph_same_axes = False  # (check_tensors checks what the destination carries)
    graph_broadcast = False

    def check_tensors(self, problem, plan: eng.EnginePlan, tensors: dict) -> None:
        super().check_tensors(problem, plan, tensors)
        from tcplan.executor.run import carried_axes
        src, dst = tensors["source"], tensors["destination"]
        if not set(carried_axes(dst, problem.axes)) < set(carried_axes(src, problem.axes)):
            raise fail("bad-request", detail=f"op {problem.name}: {dst.name} carries "
                       f"{carried_axes(dst, problem.axes)}; a reduction's output carries the "
                       f"source's axes ({carried_axes(src, problem.axes)}) less those it "
                       "reduces", fix=f"declare {dst.name} without the reduced axes")


register(TensorUnitEngine())
register(ReducingEngine())
