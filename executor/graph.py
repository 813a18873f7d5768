"""A graph run on one set of simulated memories (docs/graphs.md).

Every tensor of the graph is laid out as planned in the same memories; the given ones are
placed with their data (the user's, or seeded); then each op runs in topological order on
what the memories hold, as its kind executes it (``Kind.execute``: a DMA's commands, a
chain's invocations and its Commit), checking its own output as it goes (a DMA's
destination holds its source; a chain's output equals its formula).  At the end every
tensor is read back from the memories and compared with what it must hold, end to end.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tcplan.model.tiers import VALUE_TIERS

from .memory import Memories
from .run import as_dtype, extents, place, tensor_bits, verify


def run_graph(g, gp, kinds: dict, seed: int = 0,
              inputs: dict[str, np.ndarray] | None = None,
              progress=None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Run a planned graph: (every tensor's mathematical values, the report).  ``kinds``:
    the problem kinds by name, each op run by its own (the planner hands its registry in:
    the executor imports nothing of the planner).  ``inputs``: given tensors by name, and a
    chain op's VRF operands as ``OP.NAME``."""
    inputs = inputs or {}
    clock = time.perf_counter()
    tensors = {n: g.tensor(n, gp.layout) for n in g.tensors}
    mem = Memories(extents(list(tensors.values())))
    values: dict[str, np.ndarray] = {}
    for k, (n, t) in enumerate(tensors.items()):
        if g.tensors[n].given:
            values[n] = _given(g, gp, kinds, n, t, inputs.get(n), seed + k)
            if t.tier not in VALUE_TIERS:  # (a given stream: the Tensor Unit computed it)
                place(mem, t, g.axes_of([n]), values[n])
    seconds: dict[str, Any] = {"given": time.perf_counter() - clock, "ops": {}}
    for step, i in enumerate(g.order, 1):
        clock = time.perf_counter()
        op, row = g.ops[i], gp.ops[i]
        reads = {r: values[op.roles[r]] for r in op.read_roles}
        reads.update({"vrf:" + k.split(".", 1)[1]: v for k, v in inputs.items()
                      if k.startswith(op.name + ".")})  # (a chain's VRF operands)
        out = kinds[op.kind].execute(row.problem, row.plan, mem,
                                        {r: tensors[n] for r, n in op.roles.items()},
                                        reads, seed)
        for role, v in out.items():
            name = op.roles[role]
            want = tuple(g.axes_of([name]).values())
            if np.shape(v) != want:  # (every tensor's values are over the axes it carries)
                from tcplan.model.rules import fail
                raise fail("verify-mismatch", detail=f"op {op.name} made {name} over a "
                           f"shape {np.shape(v)}, not its axes' {want}")
            values[name] = np.ascontiguousarray(v)
        seconds["ops"][op.name] = time.perf_counter() - clock
        if progress is not None:
            progress("ops", step, len(g.order), op.name)
    checked = 0
    clock = time.perf_counter()
    for n, t in tensors.items():  # end to end: what every tensor holds now
        if t.tier not in VALUE_TIERS:  # (a stream or register file: by the op making it)
            checked += verify(mem, t, g.axes_of([n]), values[n])["checked"]
    seconds["end_to_end"] = time.perf_counter() - clock
    return values, {"verified": True, "checked": checked, "seconds": seconds,
                    "method": "ran every op in topological order on one set of simulated "
                              "memories, each checked as it ran; then every tensor read "
                              "back against what it must hold (holding rule)"}


def _given(g, gp, kinds: dict, name: str, t, user: np.ndarray | None, seed: int
           ) -> np.ndarray:
    """A given tensor's data: the user's (over its axes, in its dtype), or seeded: as the
    first op reading it asks (an index tensor: valid rows), else random bits."""
    axes = g.axes_of([name])
    if user is None:
        for i in g.order:
            op, row = g.ops[i], gp.ops[i]
            for role in op.read_roles:
                if op.roles[role] == name:
                    v = kinds[op.kind].given_values(row.problem, row.plan, role, seed)
                    if v is not None:
                        return v
        return tensor_bits(axes, t.dtype, seed)
    shape = tuple(axes.values())
    if user.shape != shape:
        from tcplan.model.rules import fail
        raise fail("bad-request", detail=f"--input {name}: expected shape {shape} "
                   f"({', '.join(axes)}), got {user.shape}",
                   fix="save the tensor with numpy.save over its axes, in the graph's order")
    return as_dtype(user, t.dtype, name)

