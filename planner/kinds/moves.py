"""Redistributions (collectives across chips and clusters) and indexed moves (gather,
scatter): data moves lowered to their own forms (seed 002)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tcplan.model import gather, redistribute
from tcplan.model.rules import fail

from ..render import format_indexed, format_redistribution
from . import Kind, key_sets, register


class Redistribute(Kind):
    names = ("redistribute",)
    keys = {"redistribute": key_sets({"source", "steps"}, {"source", "steps"})}

    def load(self, ctx, data: dict, kind: str, tensors: dict, params: dict) -> None:
        tensors["source"] = ctx.tensor(("source",), data["source"], "source")
        params["steps"] = ctx.steps(data["steps"])

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.forms import verify_redistribution
        return verify_redistribution(problem, plan, seed)

    def lower(self, problem) -> Any:
        return redistribute.plan(problem.tensors["source"], problem.params["steps"],
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


class Indexed(Kind):
    """Gather (table rows by index into DM) and scatter (rows from DM by index)."""

    names = ("gather", "scatter")
    keys = {"gather": key_sets({"variant", "table", "index", "destination"},
                               {"variant", "table", "index", "destination"}),
            "scatter": key_sets({"source", "index", "destination"},
                                {"source", "index", "destination"})}
    #: the tensors each reads from the problem file, in its order
    TENSORS = {"gather": ("table", "index", "destination"),
               "scatter": ("source", "index", "destination")}

    def load(self, ctx, data: dict, kind: str, tensors: dict, params: dict) -> None:
        params["variant"] = (ctx.choice(data, "variant", ("scaled", "unscaled"), None)
                             if kind == "gather" else "scaled")
        for k in self.TENSORS[kind]:
            tensors[k] = ctx.tensor((k,), data[k], k)

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        from tcplan.executor.forms import verify_indexed
        return verify_indexed(problem, plan, seed)

    def lower(self, problem) -> Any:
        t = problem.tensors
        if problem.kind == "gather":
            return gather.plan("gather", problem.params["variant"], t["table"],
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


register(Redistribute())
register(Indexed())
