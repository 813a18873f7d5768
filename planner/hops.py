"""Multi-hop DMA plans: when no single transfer is legal, or two are faster, go through an
intermediate HBM layout (seed 002's two-step transpose).

The candidate intermediates are HBM tensors on the source's chip holding the moved tensor in
every order of its pieces (the common refinement of both sides' digits), at a scratch address
past both tensors.  Every candidate hop (source -> intermediate, intermediate -> destination,
and the direct transfer) is one layout search (:func:`planner.layout.plan_free`, the CP-SAT
model whose plan is the estimate's minimum); the hops form a graph whose shortest path (networkx,
weighted by estimated cycles) is the plan.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import networkx as nx

from model.mapping import parse
from model.rules import TcplanError, fail
from model.tiers import Tensor

from .layout import pieces_of, plan_free

#: intermediates start on a boundary of this many bytes past both tensors (a tidy scratch
#: address; any 256-byte-aligned one would do)
SCRATCH_ALIGN = 4096
#: at most this many intermediates are tried (orders of the pieces)
MAX_INTERMEDIATES = 24


@dataclass
class Hop:
    source: Tensor
    destination: Tensor
    plan: Any
    cycles: int
    stream: dict[str, str]


@dataclass
class HopPlan:
    hops: list[Hop]
    direct_error: str | None = None  # why the direct transfer is not used
    tried: int = 0
    rejected: dict[str, int] = field(default_factory=dict)

    @property
    def cycles(self) -> int:
        return sum(h.cycles for h in self.hops)


def _hop(problem, src: Tensor, dst: Tensor, time_limit: float = 10.0, seed: int = 0) -> Hop:
    stream = Tensor("stream", "stream", src.dtype, dict(problem.tensors["stream"].dims))
    sub = SimpleNamespace(tensors={"source": src, "destination": dst, "stream": stream},
                          chips=problem.chips, axes=problem.axes, kind="dma",
                          params={"free": problem.params.get("free", []),
                                  "bounds": problem.params.get("bounds", {})})
    found, split = plan_free(sub, time_limit, seed)
    b = found.best
    return Hop(src, dst, b.plan, b.cycles, {"time": b.time, "packet": b.packet_text,
                                           "cluster": f"m![{split['cluster']}]",
                                           "slice": f"m![{split['slice']}]"})


def _end(t: Tensor) -> int:
    return t.address + t.dims["element"].size * t.elem_bytes


def plan_hops(problem, time_limit: float = 10.0, seed: int = 0) -> HopPlan:
    t = problem.tensors
    src, dst = t["source"], t["destination"]
    g = nx.DiGraph()
    hops: dict[tuple[str, str], Hop] = {}
    rejected: dict[str, int] = {}

    def add(u: str, v: str, a: Tensor, b: Tensor) -> None:
        try:
            h = _hop(problem, a, b, time_limit, seed)
        except TcplanError as e:
            rejected[e.code] = rejected.get(e.code, 0) + 1
            return
        hops[(u, v)] = h
        g.add_edge(u, v, weight=h.cycles)

    add("source", "destination", src, dst)
    direct = ("source", "destination") in hops
    pieces = pieces_of(src, dst, {})
    scratch = max(_end(src) if src.tier == "hbm" else 0,
                  _end(dst) if dst.tier == "hbm" else 0)
    scratch = -(-scratch // SCRATCH_ALIGN) * SCRATCH_ALIGN
    axes = dict(problem.axes)
    tried = 0
    for order in itertools.islice(itertools.permutations(pieces), MAX_INTERMEDIATES):
        text = "m![" + ", ".join(p.term() for p in order) + "]"
        dims = {"chip": src.dims.get("chip", parse("m![1]", axes)),
                "element": parse(text, axes)}
        mid = Tensor("scratch", "hbm", src.dtype, dims, scratch)
        name = f"HBM {text}"
        if src.tier == "hbm" and src.dims["element"].text() == text:
            continue
        tried += 1
        add("source", name, src, mid)
        if ("source", name) in hops:
            add(name, "destination", mid, dst)
    try:
        path = nx.shortest_path(g, "source", "destination", weight="weight")
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        raise fail("plan-no-layout", tuple(rejected), pieces=", ".join(
            p.term() for p in pieces), rules="every direct and two-hop transfer: " + ", ".join(
            f"{r} ({k})" for r, k in sorted(rejected.items()))) from None
    chosen = [hops[(u, v)] for u, v in zip(path, path[1:])]
    why = None
    if len(chosen) > 1:
        why = ("the direct transfer is slower" if direct else
               "no single transfer is legal")
    return HopPlan(chosen, why, tried, rejected)
