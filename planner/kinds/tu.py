"""Fetch and Commit problems (model/tu.py): a DM tensor read into the Tensor Unit's stream
(``kind: fetch``) and a stream written into a DM tensor (``kind: commit``); planned when the
stream's Time and Packet are free (planner/tu_search.py); graph ops of their own."""

from __future__ import annotations

import time as _time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tcplan.model import hardware as hw
from tcplan.model import tu
from tcplan.model.broadcast import partial_violations
from tcplan.model.mapping import number
from tcplan.model.rules import TcplanError
from tcplan.model.tiers import Tensor

from ..outcome import Found, unwrap
from ..problem import Problem
from ..registry import Kind, Options, Solved, key_sets, register
from ..render import EXIT_OK, EXIT_RULE

if TYPE_CHECKING:
    from ..tu_search import TuOutcome

#: the DM tensor's role in each kind's problem
MEMORY = {"fetch": "source", "commit": "destination"}
WHAT = {"fetch": "reads a DM tensor into", "commit": "writes into a DM tensor"}


@dataclass(frozen=True)
class TuSpec:
    """A Fetch's or Commit's choices: the stream's Time and Packet free (planned by
    planner/tu_search.py) or given, and the context it runs in (main or sub)."""

    free: bool = False
    context: str = "main"


def _memory(problem: Problem[TuSpec]) -> Tensor:
    return problem.tensors[MEMORY[problem.kind]]


@dataclass(frozen=True)
class TuSolved:
    """A Fetch's or Commit's solve: its status (``optimal``, ``feasible`` when the time limit
    cut the search, ``given`` when the stream was), the lowered plan, its lower bound, the
    rules that rejected proposed plans, the check and its outcome (``error``: why the plan
    did not verify), and the times."""

    problem: str
    status: str
    plan: tu.TuPlan
    lower_bound: int
    rejected: dict[str, int]
    check: str
    solve_time: float
    breakdown: dict[str, Any]  # the plan's cycle report (TuPlan.breakdown)
    verified: bool | None
    checked: int
    times: dict[str, float]
    error: TcplanError | None = None

    @property
    def cycles(self) -> int:
        return self.plan.cycles

    @property
    def bound_ratio(self) -> float:
        return round(self.plan.cycles / self.lower_bound, 3)

    def to_json(self) -> dict[str, Any]:
        out = {"problem": self.problem, "status": self.status, "cycles": self.cycles,
               "lower_bound": self.lower_bound, "bound_ratio": self.bound_ratio,
               "plan": self.plan.to_json(), "rejected": self.rejected, "check": self.check,
               "solve_time": self.solve_time, "breakdown": self.breakdown,
               "verified": self.verified, "checked": self.checked}
        if self.error is not None:
            out["error"] = self.error.to_json()
        out["times"] = self.times
        return out


class TensorUnitMove(Kind):
    names = ("fetch", "commit")
    keys = {"fetch": key_sets({"source", "stream", "context"}, {"source", "stream"}),
            "commit": key_sets({"stream", "destination", "context"},
                               {"stream", "destination"})}
    solvable = True
    graph_roles = {"fetch": {"source": (True, True), "stream": (False, True)},
                   "commit": {"stream": (True, True), "destination": (False, True)}}
    graph_broadcast = True  # a Fetch's stream may repeat what it reads (a broadcast read)
    pictures = "tensor unit"  # `--plot`: its DM banks and cycles (planner/tu_plot.py)

    def graph_context(self, data: dict) -> str | None:
        return data.get("context")  # (absent: the path's, main unless all say sub)

    def graph_bank_accesses(self, plan) -> int:
        return plan.bank_run  # (model/tu.py: its longest run on one DM bank)

    output_word = "moved"

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> TuSpec:
        role = MEMORY[kind]
        mem = ctx.tensor((role,), data[role], role)
        if mem.tier != "dm":
            why = ("TRF and VRF tensors are filled by the Collect Engine (to_trf, to_vrf), "
                   "which tcplan does not model (docs/kernels.md)"
                   if mem.tier in ("trf", "vrf") else "the Tensor Unit streams DM only")
            raise ctx.doc.error((role, "tier"), f"a {kind.title()} {WHAT[kind]} the Tensor "
                                f"Unit's stream, not a {mem.tier.upper()} tensor: {why}",
                                "tier: dm (a DMA moves HBM tensors into DM first)")
        tensors[role] = mem
        spec = data["stream"]
        if not isinstance(spec, dict):
            raise ctx.doc.error(("stream",), "expected a stream: time and packet",
                                "stream: {time: free, packet: free}")
        if spec.get("tier", "stream") != "stream":
            raise ctx.doc.error(("stream", "tier"), f"a {kind.title()}'s stream is the "
                                f"Tensor Unit's, not a {spec['tier']!r} tensor",
                                "name a tensor of tier stream (time and packet)")
        free = [k for k in ("time", "packet") if spec.get(k) == "free"]
        if free and len(free) != 2:
            raise ctx.doc.error(("stream", free[0]), "time and packet are free together",
                                "stream: {time: free, packet: free}")
        given = dict(spec)
        for d in tu.SPATIAL:  # each slice moves its own part: the tensor's, unless given
            given.setdefault(d, mem.dims[d])
        if free:
            given.update(time=number(1), packet=number(1))
        tensors["stream"] = ctx.tensor(("stream",), given, "stream", tier="stream")
        if not free:  # the stream asking for values the tensor lacks: a mistake, said now
            src, dst = ((mem, tensors["stream"]) if kind == "fetch"
                        else (tensors["stream"], mem))
            bad = partial_violations(src, dst, ctx.doc.where(("stream",)))
            if bad:
                raise TcplanError(bad)
        return TuSpec(bool(free), ctx.choice(data, "context", hw.TU_CONTEXTS, "main"))

    def lower(self, problem: Problem[TuSpec]) -> tu.TuPlan:
        if problem.spec.free:
            return unwrap(self._search(problem, Options())).best()
        return tu.lower(problem.kind, _memory(problem), problem.tensors["stream"],
                        problem.spec.context, problem.chips)

    def _search(self, problem: Problem[TuSpec], opts: Options) -> TuOutcome:
        """The free stream searched (planner/tu_search.py) with the solver's settings."""
        from ..tu_search import TuRequest, search
        return search(TuRequest(problem.kind, _memory(problem), problem.spec.context,
                                problem.chips, opts.time_limit, opts.seed, opts.workers))

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.tu import simulate
        ran = simulate(plan, problem.axes, _values(problem, plan, seed))
        return {"verified": True, "cycles": plan.cycles, "checked": ran["checked"],
                "method": f"ran every slice's {problem.kind.title()} config over simulated "
                          f"DM; holding rule on every live {ran['what'][:-1]}",
                "breakdown": plan.breakdown()}

    def render(self, problem, plan) -> str:
        return plan.text()

    def inputs(self, problem) -> tuple[str, ...]:
        return ("source",) if problem.kind == "fetch" else ("stream",)

    def run(self, problem, plan, inputs: dict, seed: int) -> dict:
        """The user's DM tensor fetched (source and stream), or the user's stream committed
        (stream and destination): arrays over the axes each carries."""
        from tcplan.executor import tu as run_tu
        from tcplan.executor.run import embed, read_tensor_from
        axes = problem.axes
        role = self.inputs(problem)[0]
        held = plan.memory if role == "source" else plan.stream
        T = embed(inputs.get(role), held, axes, role, seed)
        out = run_tu.run_with_data(plan, axes, T)
        other = plan.stream if role == "source" else plan.memory
        name = "stream" if role == "source" else "destination"
        return {role: read_tensor_from(T, held, axes), name: read_tensor_from(out, other, axes)}

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        b = report["breakdown"]
        return [f"  {b['packets']:,} packets of {b['packet_bytes']} B per slice, "
                f"{b['accesses_per_packet']} access(es) of {b['access_bytes']} B each "
                f"({b['bytes_per_cycle']} B/cycle), {b['slices']} slice(s) in parallel; "
                f"longest run on one DM bank {b['longest_bank_run']}"]

    def plan(self, problem: Problem[TuSpec], opts: Options) -> tuple[Any, int | None, bool]:
        if not problem.spec.free:
            plan = self.lower(problem)
            return plan, plan.cycles, True
        out = self._search(problem, opts)
        if not isinstance(out, Found):
            raise out.error
        plan = out.record.best()
        return plan, plan.cycles, out.proven

    def solve(self, problem: Problem[TuSpec], opts: Options) -> Solved:
        t0 = _time.perf_counter()
        rejected: dict[str, int] = {}
        try:
            if problem.spec.free:
                out = self._search(problem, opts)
                if not isinstance(out, Found):  # NoPlan or TimedOut: the record says why
                    return Solved.no_plan(problem.name, out.error)
                plan, status, rejected = out.record.best(), out.status, out.record.rejected
            else:
                plan, status = self.lower(problem), "given"
        except TcplanError as err:
            if err.kind == "input":
                raise
            return Solved.no_plan(problem.name, err)
        solve_s = _time.perf_counter() - t0
        bound = tu.lower_bound(plan, problem.spec.free)
        breakdown = plan.breakdown()
        t1 = _time.perf_counter()
        verified: bool | None = None
        checked, error = 0, None
        if opts.verify != "none":
            try:
                verified, checked = True, self.verify(problem, plan, opts.seed)["checked"]
            except TcplanError as err:
                verified, checked, error = False, 0, err
        record = TuSolved(problem.name, status, plan, bound, rejected, opts.verify,
                          round(solve_s, 3), breakdown, verified, checked,
                          {"plan": round(solve_s, 3),
                           "verify": round(_time.perf_counter() - t1, 3)}, error)
        return Solved(record, plan, exit=EXIT_RULE if verified is False else EXIT_OK)

    def solve_text(self, problem: Problem[TuSpec], solved: Solved) -> str:
        out = solved.record
        if solved.error is not None or not isinstance(out, TuSolved):
            return super().solve_text(problem, solved)
        stream = out.plan.stream.dims
        head = (f"{problem.name}: {problem.kind.title()} stream Time "
                f"{stream['time'].text()}, Packet {stream['packet'].text()} ({out.status}; "
                f"{out.solve_time:.2f} s)")
        cycles = (f"cycles: {out.cycles:,} (lower bound {out.lower_bound:,}, ratio "
                  f"{out.bound_ratio})")
        return "\n".join([head, out.plan.text(), cycles, _check_line(out)])

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        from ..explain import _item
        try:
            plan = self.lower(problem)
        except TcplanError as err:
            if err.kind == "input":
                raise
            return 1, {"problem": problem.name, "feasible": False,
                       "conflict": [_item(v.rule, v.to_json()) for v in err.violations]}
        b = plan.breakdown()
        bound = tu.lower_bound(plan, problem.spec.free)
        return 0, {"problem": problem.name, "feasible": True, "cycles": plan.cycles,
                   "lower_bound": bound,
                   "bottleneck": f"{b['accesses_per_packet']} access(es) of "
                                 f"{b['access_bytes']} B per {b['packet_bytes']}-byte packet, "
                                 f"{b['packets']:,} packets per slice",
                   "binding": tu.binding(plan, problem.spec.free)}

    def given_values(self, problem, plan, role: str, seed: int) -> Any:
        """A Commit's given stream (what the Tensor Unit computed) holds values of the
        tensor it is written into: random bits of that dtype."""
        if plan.engine != "commit" or role != "stream":
            return None
        from tcplan.executor.run import carried_axes, tensor_bits
        axes = problem.axes
        kept = carried_axes(plan.stream, axes)
        return tensor_bits({a: axes[a] for a in kept}, plan.memory.dtype, seed)

    def check_tensors(self, problem, plan, tensors: dict) -> None:
        """In a graph, the stream carries the DM tensor's dtype (a Fetch delivers its
        values, a Commit writes them; the Cast Engine that converts is not modelled)."""
        from tcplan.model.rules import fail
        stream, mem = tensors["stream"], tensors[MEMORY[problem.kind]]
        if stream.dtype != mem.dtype:
            raise fail("graph-dtype", (stream.name,), tensor=stream.name, have=stream.dtype,
                       op=problem.name, verb="fetches into it" if problem.kind == "fetch"
                       else "commits it into", want=f"{mem.dtype} ({mem.name})")

    def lower_bound(self, problem, plan) -> int | None:
        return tu.lower_bound(plan, problem.spec.free)

    def traced_tensors(self, problem) -> dict[str, Any]:
        """A free stream as the plan chooses it (what ``lower`` and ``verify`` use)."""
        out = dict(problem.tensors)
        if problem.spec.free:
            out["stream"] = self.lower(problem).stream
        return out

    def graph_summary(self, plan) -> dict[str, Any]:
        return {"stream": {d: plan.stream.dims[d].text() for d in ("time", "packet")},
                "context": plan.context}

    def execute(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        from tcplan.executor.run import carried_axes, held_by, over_axes, place, verify
        from tcplan.executor.tu import run_commit, run_fetch
        axes = problem.axes
        if plan.engine == "fetch":  # (a broadcast read: every copy holds the tensor)
            held = held_by(values["source"], plan.memory, plan.stream, axes)
            run_fetch(mem, plan, axes, held)
            return {"stream": held}
        held = over_axes(values["stream"], carried_axes(plan.stream, axes), axes)
        place(mem, plan.memory, axes, None)
        moved = run_commit(mem, plan, axes, held)
        verify(mem, plan.memory, axes, held, moved)
        return {"destination": held}

    def replay(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        from tcplan.executor.run import carried_axes, held_by, over_axes, place
        axes = problem.axes
        if plan.engine == "fetch":
            return {"stream": held_by(values["source"], plan.memory, plan.stream, axes)}
        held = over_axes(values["stream"], carried_axes(plan.stream, axes), axes)
        place(mem, plan.memory, axes, held)
        return {"destination": held}


def _check_line(out: TuSolved) -> str:
    """What `tcplan solve` says of the check."""
    if out.verified is None:
        return "not verified (--verify none)"
    if out.verified or out.error is None:
        return f"verified: {out.checked:,} positions"
    return f"NOT verified [{out.error.code}]: {out.error.message}"


def _values(problem, plan, seed: int):
    """The mathematical tensor a Fetch or Commit is checked with: random bits, constant along
    the axes a Fetch's stream repeats (a broadcast read, model/broadcast.py)."""
    from tcplan.executor.run import constant_along, tensor_bits
    from tcplan.model.broadcast import broadcast_axes
    T = tensor_bits(problem.axes, plan.memory.dtype, seed)
    if plan.engine == "fetch":
        T = constant_along(T, problem.axes, broadcast_axes(plan.memory, plan.stream))
    return T


register(TensorUnitMove())

