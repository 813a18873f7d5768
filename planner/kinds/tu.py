"""Fetch and Commit problems (model/tu.py): a DM tensor read into the Tensor Unit's stream
(``kind: fetch``) and a stream written into a DM tensor (``kind: commit``); planned when the
stream's Time and Packet are free (planner/tu_search.py); graph ops of their own."""

from __future__ import annotations

import time as _time
from typing import Any

from tcplan.model import hardware as hw
from tcplan.model import tu
from tcplan.model.broadcast import partial_violations
from tcplan.model.rules import TcplanError

from ..render import EXIT_OK, EXIT_RULE
from ..registry import Kind, Options, Solved, key_sets, register

#: the DM tensor's role in each kind's problem
MEMORY = {"fetch": "source", "commit": "destination"}
WHAT = {"fetch": "reads a DM tensor into", "commit": "writes into a DM tensor"}


def _memory(problem):
    return problem.tensors[MEMORY[problem.kind]]


class TensorUnitMove(Kind):
    names = ("fetch", "commit")
    keys = {"fetch": key_sets({"source", "stream", "context"}, {"source", "stream"}),
            "commit": key_sets({"stream", "destination", "context"},
                               {"stream", "destination"})}
    solvable = True
    graph_roles = {"fetch": {"source": (True, True), "stream": (False, True)},
                   "commit": {"stream": (True, True), "destination": (False, True)}}
    graph_broadcast = True  # a Fetch's stream may repeat what it reads (a broadcast read)

    output_word = "moved"

    def load(self, ctx, data: dict, kind: str, tensors: dict, params: dict) -> None:
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
            given.setdefault(d, mem.dims[d].text())
        if free:
            given.update(time="m![1]", packet="m![1]")
        tensors["stream"] = ctx.tensor(("stream",), given, "stream", tier="stream")
        if not free:  # the stream asking for values the tensor lacks: a mistake, said now
            src, dst = ((mem, tensors["stream"]) if kind == "fetch"
                        else (tensors["stream"], mem))
            bad = partial_violations(src, dst, ctx.doc.where(("stream",)))
            if bad:
                raise TcplanError(bad)
        params["free"] = bool(free)
        params["context"] = ctx.choice(data, "context", hw.TU_CONTEXTS, "main")

    def lower(self, problem) -> Any:
        if problem.params["free"]:
            return self._search(problem, Options())[0]
        return tu.lower(problem.kind, _memory(problem), problem.tensors["stream"],
                        problem.params["context"], problem.chips)

    def _search(self, problem, opts: Options) -> tuple[tu.TuPlan, bool, Any]:
        from ..tu_search import search
        found = search(problem.kind, _memory(problem), problem.params["context"],
                       problem.chips, opts.time_limit, opts.seed, opts.workers)
        if found.plan is None:
            raise found.error(opts.time_limit)
        return found.plan, found.optimal, found

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

    def plan(self, problem, opts: Options) -> tuple[Any, int | None, bool]:
        if not problem.params["free"]:
            plan = self.lower(problem)
            return plan, plan.cycles, True
        plan, optimal, _ = self._search(problem, opts)
        return plan, plan.cycles, optimal

    def solve(self, problem, opts: Options) -> Solved:
        t0 = _time.perf_counter()
        try:
            if problem.params["free"]:
                plan, optimal, found = self._search(problem, opts)
                status, rejected = ("optimal" if optimal else "feasible"), found.rejected
            else:
                plan, status, rejected = self.lower(problem), "given", {}
        except TcplanError as err:
            if err.kind == "input":
                raise
            status = "unknown" if err.code == "plan-time-limit" else "infeasible"
            return Solved({"problem": problem.name, "status": status, "cycles": None,
                           "plan": None, "verified": None, "explanation": err.to_json()},
                          error=err, exit=EXIT_RULE)
        solve_s = _time.perf_counter() - t0
        bound = tu.lower_bound(plan, problem.params["free"])
        out = {"problem": problem.name, "status": status, "cycles": plan.cycles,
               "lower_bound": bound, "bound_ratio": round(plan.cycles / bound, 3),
               "plan": plan.to_json(), "rejected": rejected, "check": opts.verify,
               "solve_time": round(solve_s, 3), "breakdown": plan.breakdown()}
        t1 = _time.perf_counter()
        if opts.verify == "none":
            out.update(verified=None, checked=0)
        else:
            try:
                out.update(verified=True, checked=self.verify(problem, plan,
                                                              opts.seed)["checked"])
            except TcplanError as err:
                out.update(verified=False, checked=0, error=err.to_json())
        out["times"] = {"plan": round(solve_s, 3),
                        "verify": round(_time.perf_counter() - t1, 3)}
        return Solved(out, plan, exit=EXIT_RULE if out["verified"] is False else EXIT_OK)

    def solve_text(self, problem, solved: Solved) -> str:
        if solved.error is not None:
            return super().solve_text(problem, solved)
        out = solved.record
        st = out["plan"]["stream"]
        head = (f"{problem.name}: {problem.kind.title()} stream Time {st['time']}, Packet "
                f"{st['packet']} ({out['status']}; {out['solve_time']:.2f} s)")
        check = ("not verified (--verify none)" if out["verified"] is None else
                 f"verified: {out['checked']:,} positions" if out["verified"] else
                 f"NOT verified [{out['error']['code']}]: {out['error']['message']}")
        return "\n".join([head, solved.plan.text(),
                          f"cycles: {out['cycles']:,} (lower bound {out['lower_bound']:,}, "
                          f"ratio {out['bound_ratio']})", check])

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
        bound = tu.lower_bound(plan, problem.params["free"])
        return 0, {"problem": problem.name, "feasible": True, "cycles": plan.cycles,
                   "lower_bound": bound,
                   "bottleneck": f"{b['accesses_per_packet']} access(es) of "
                                 f"{b['access_bytes']} B per {b['packet_bytes']}-byte packet, "
                                 f"{b['packets']:,} packets per slice",
                   "binding": tu.binding(plan, problem.params["free"])}

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
        return tu.lower_bound(plan, problem.params["free"])

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

