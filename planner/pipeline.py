"""A graph's Tensor Unit paths as pipelines (issue 29, item 5; docs/engines.md 'Cycles').

The ops that pass streams to each other (a Fetch, the engines, a Commit; a store into a
register file ends a path, a contraction reads the register file apart) run as one
pipeline: every stage takes one flit a cycle per slice, so a path costs its slowest op
(its bottleneck), not the sum of its ops.  :func:`tu_paths` finds the paths of a planned
graph (connected through stream tensors) and gives each its context (the Fetch's: main or
sub, the register-file loads apart from the main path), its pipelined cycles and its
bottleneck.  The graph's objective is unchanged (its ``sum`` and critical path); the
schedule of the three contexts is the next issue's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx


@dataclass(frozen=True)
class TuPath:
    """One Tensor Unit path: its ops in graph order, its context, its pipelined cycles."""

    ops: tuple[str, ...]
    context: str
    cycles: int  # the slowest op's (every stage a flit a cycle: a pipeline)
    bottleneck: str
    sum_cycles: int  # the ops' cycles one after another

    def to_json(self) -> dict[str, Any]:
        return {"ops": list(self.ops), "context": self.context, "cycles": self.cycles,
                "bottleneck": self.bottleneck, "sum_cycles": self.sum_cycles}

    def text(self) -> str:
        return (f"  path ({self.context}) {' -> '.join(self.ops)}: {self.cycles:,} cycles "
                f"pipelined, bottleneck {self.bottleneck} (ops in series: "
                f"{self.sum_cycles:,})")


def tu_paths(g, gp) -> list[TuPath]:
    """The planned graph's Tensor Unit paths of two ops or more (``g`` the graph,
    ``gp`` its plan; ops without modelled cycles are left out)."""
    streams = {n for n, t in g.tensors.items() if t.spec.get("tier") == "stream"}
    links: nx.Graph = nx.Graph()
    writer: dict[str, int] = {}
    for i in g.order:
        for t in g.ops[i].writes:
            if t in streams:
                writer[t] = i
    for i in g.order:
        if gp.ops[i].cycles is None:
            continue
        touches = [t for t in g.ops[i].reads + g.ops[i].writes if t in streams]
        if touches:
            links.add_node(i)
        for t in g.ops[i].reads:
            if t in writer and gp.ops[writer[t]].cycles is not None:
                links.add_edge(writer[t], i)
    rank = {i: k for k, i in enumerate(g.order)}
    out = []
    for part in nx.connected_components(links):
        if len(part) < 2:
            continue
        ops = sorted(part, key=rank.__getitem__)
        slow = max(ops, key=lambda i: gp.ops[i].cycles)
        contexts = {g.ops[i].data.get("context", "main") for i in ops
                    if g.ops[i].kind in ("fetch", "commit")}
        out.append(TuPath(tuple(g.ops[i].name for i in ops),
                          "sub" if contexts == {"sub"} else "main",
                          gp.ops[slow].cycles, g.ops[slow].name,
                          sum(gp.ops[i].cycles for i in ops)))
    return out
