"""Redistributions (collectives across chips and clusters) and indexed moves (gather,
scatter): data moves lowered to their own forms (seed 002)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tcplan.model import gather, redistribute
from tcplan.model.rules import fail

from ..problem import Problem
from ..render import format_indexed, format_redistribution
from ..registry import Kind, Options, key_sets, register


@dataclass(frozen=True)
class RedistributeSpec:
    """A redistribution's steps, in order (docs/hardware.md section 6)."""

    steps: tuple[redistribute.Step, ...]


@dataclass(frozen=True)
class IndexedSpec:
    """A gather's or scatter's index values: byte offsets (``scaled``) or row positions
    (``unscaled``, a gather's only)."""

    variant: str = "scaled"


class _RunsAlone(Kind):
    """A graph op that runs on memories of its own (its kind's executor, on the values the
    graph's tensors hold), its output then placed in the graph's memories and checked
    there; its cycles are not modelled (docs/graphs.md)."""

    graph_same_axes = False

    def graph_context(self, data: dict) -> str:
        return "dma"

    def graph_bank_accesses(self, plan) -> int:
        return 1  # (a DMA's, as the guide's cumulative example counts it)

    #: per name: graph role -> the key of the tensor in what ``run`` takes and returns
    run_keys: dict[str, dict[str, str]] = {}

    def plan(self, problem, opts: Options) -> tuple[Any, int | None, bool]:
        return self.lower(problem), None, True

    @property
    def graph_rebases(self) -> tuple[str, ...]:  # type: ignore[override]
        """Every role: its plan is its lowering, made again at the op's own addresses (an
        address a multiple of the HBM decode's period away keeps every alignment)."""
        return tuple(r for roles in self.graph_roles.values() for r in roles)

    def graph_rebase(self, plan, shifts: dict[str, int], problem) -> Any:
        return self.lower(problem())

    def execute(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        keys = self.run_keys[problem.kind]
        self.check_run(problem, plan, {keys[r]: v for r, v in values.items()}, seed)
        return self.replay(problem, plan, mem, tensors, values, seed)

    def replay(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        """The op run on the values it reads, its results placed (not checked again)."""
        from tcplan.executor.run import carried_axes, place
        keys = self.run_keys[problem.kind]
        inputs = {keys[r]: v for r, v in values.items()}
        got = self.run(problem, plan, inputs, seed)
        out = {}
        for role, (reads, _) in self.graph_roles[problem.kind].items():
            if not reads:
                t = tensors[role]
                axes = {a: problem.axes[a] for a in carried_axes(t, problem.axes)}
                out[role] = np.ascontiguousarray(got[keys[role]])
                place(mem, t, axes, out[role])
        return out


    def check_run(self, problem, plan, inputs: dict, seed: int) -> None:
        """Verify the op's plan by its kind's own check (raises a mismatch)."""
        self.verify(problem, plan, seed)


class Redistribute(_RunsAlone):
    names = ("redistribute",)
    keys = {"redistribute": key_sets({"source", "steps"}, {"source", "steps"})}
    graph_roles = {"redistribute": {"source": (True, True), "result": (False, False)}}
    run_keys = {"redistribute": {"source": "source", "result": "result"}}

    def check_tensors(self, problem, plan, tensors: dict) -> None:
        """The graph's result tensor is laid out as the redistribution leaves it."""
        t, want = tensors["result"], plan.result
        have = {d: m.text() for d, m in t.dims.items()}
        need = {d: m.text() for d, m in want.dims.items()}
        if t.tier != want.tier or have != need or t.address != want.address:
            raise fail("graph-derived-layout", (t.name,), tensor=t.name, op=problem.name,
                       have=_layout(t.tier, have, t.address),
                       want=_layout(want.tier, need, want.address))

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> RedistributeSpec:
        tensors["source"] = ctx.tensor(("source",), data["source"], "source")
        return RedistributeSpec(tuple(ctx.steps(data["steps"])))

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.forms import verify_redistribution
        return verify_redistribution(problem, plan, seed)

    def lower(self, problem: Problem[RedistributeSpec]) -> Any:
        return redistribute.plan(problem.tensors["source"], list(problem.spec.steps),
                                 problem.chips)

    def inputs(self, problem) -> tuple[str, ...]:
        return ("source",)

    def run(self, problem, plan, inputs: dict, seed: int) -> dict:
        from tcplan.executor import forms, run
        axes = problem.axes
        T = run.embed(inputs.get("source"), plan.source, axes, "source", seed)
        mem = forms.run_redistribution(problem, plan, T)
        return {"source": run.read_tensor(mem, plan.source, axes, T.dtype),
                "result": run.read_tensor(mem, plan.result, axes, T.dtype)}

    def render(self, problem, plan) -> str:
        return format_redistribution(problem.name, plan)


def _layout(tier: str, dims: dict[str, str], address: int) -> str:
    return "{tier: " + tier + ", " + ", ".join(f"{d}: '{v}'" for d, v in dims.items()) + (
        f", address: {address}" if address else "") + "}"


class Indexed(_RunsAlone):
    """Gather (table rows by index into DM) and scatter (rows from DM by index)."""

    names = ("gather", "scatter")
    graph_roles = {"gather": {"table": (True, True), "index": (True, True),
                              "destination": (False, True)},
                   "scatter": {"source": (True, True), "index": (True, True),
                               "destination": (False, True)}}
    run_keys = {n: {r: r for r in roles} for n, roles in graph_roles.items()}
    keys = {"gather": key_sets({"variant", "table", "index", "destination"},
                               {"variant", "table", "index", "destination"}),
            "scatter": key_sets({"source", "index", "destination"},
                                {"source", "index", "destination"})}
    #: the tensors each reads from the problem file, in its order
    TENSORS = {"gather": ("table", "index", "destination"),
               "scatter": ("source", "index", "destination")}

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> IndexedSpec:
        spec = IndexedSpec(ctx.choice(data, "variant", ("scaled", "unscaled"), None)
                           if kind == "gather" else "scaled")
        for k in self.TENSORS[kind]:
            tensors[k] = ctx.tensor((k,), data[k], k)
        return spec

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.forms import verify_indexed
        return verify_indexed(problem, plan, seed)

    def lower(self, problem: Problem[IndexedSpec]) -> Any:
        t = problem.tensors
        if problem.kind == "gather":
            return gather.plan("gather", problem.spec.variant, t["table"],
                               t["destination"], t["index"], problem.chips)
        return gather.plan("scatter", "scaled", t["destination"], t["source"], t["index"],
                           problem.chips)

    def inputs(self, problem) -> tuple[str, ...]:
        return ("table", "index") if problem.kind == "gather" else ("source", "index")

    def run(self, problem, plan, inputs: dict, seed: int) -> dict:
        from tcplan.executor import forms, run
        axes = problem.axes
        name = self.inputs(problem)[0]
        data_t = plan.table if name == "table" else plan.rows_side
        T = run.embed(inputs.get(name), data_t, axes, name, seed)
        keys = None
        if "index" in inputs:
            idx = inputs["index"]
            want = tuple(axes[a] for a in run.carried_axes(plan.index, axes))
            if idx.shape != want or not np.issubdtype(idx.dtype, np.integer):
                raise fail("bad-request", detail=f"--input index: expected an integer array "
                           f"of shape {want}, got {idx.shape} {idx.dtype}",
                           fix="save the index tensor with numpy.save")
            keys = forms.index_keys(plan, idx)
        written, holder, index = forms.run_indexed(problem, plan, T, keys, seed)
        return {name: run.read_tensor_from(T, data_t, axes), "index": index,
                "destination": run.read_tensor(holder, written, axes, T.dtype)}

    def render(self, problem, plan) -> str:
        return format_indexed(problem.name, plan)

    def check_run(self, problem, plan, inputs: dict, seed: int) -> None:
        """The moves on the graph's data checked row by row (the holding rule)."""
        from tcplan.executor import forms, run
        name = self.inputs(problem)[0]
        data_t = plan.table if name == "table" else plan.rows_side
        T = run.embed(inputs.get(name), data_t, problem.axes, name, seed)
        forms.verify_indexed(problem, plan, seed, T=T,
                             keys=forms.index_keys(plan, inputs["index"]))

    def given_values(self, problem, plan, role: str, seed: int) -> Any:
        """A given index tensor: valid rows of the table, seeded (scaled: byte offsets);
        a scatter's distinct, as a scatter needs."""
        if role != "index":
            return None
        from tcplan.executor.run import carried_axes
        rng = np.random.default_rng(seed)
        shape = tuple(problem.axes[a] for a in carried_axes(plan.index, problem.axes))
        n, rows = int(np.prod(shape)), plan.table.dims["element"].size // plan.row_elements
        if problem.kind == "scatter":
            if n > rows:
                raise fail("verify-mismatch", detail=f"{n} scattered rows do not fit "
                           f"{rows} table rows")
            keys = rng.permutation(rows)[:n]
        else:
            keys = rng.integers(0, rows, size=n)
        vals = keys * plan.row_bytes if plan.variant == "scaled" else keys
        return vals.astype(np.int32).reshape(shape)


register(Redistribute())
register(Indexed())
