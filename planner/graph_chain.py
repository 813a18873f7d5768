"""Layers chained through a boundary tensor, solved layer by layer (issue 32, item 4;
docs/decisions.md item 138).

A free tensor with several candidates that ops of more than one launch touch (one layer's
output, the next one's input) binds its launches into one part (planner/graph_parts.py),
and a model whose layers all chain so is one flat joint choice. Cut at those tensors
instead, the graph is a set of pieces; where the pieces form paths, each boundary tensor
between two consecutive pieces and no other tie, the optimum is a shortest path over the
boundaries' candidates (dynamic programming): a piece's value under each choice of its
boundary tensors' candidates is its own joint choice with those fixed, and the graph's
value is the sum of its pieces' (the sum of cycles; under ``makespan``, launches run one
after another, so the sum of the launches' makespans, then of cycles). Pieces alike under
one choice of their boundaries (every layer of a model) are solved once. Under
``critical_path`` the path crosses pieces: no chain.
"""

from __future__ import annotations

from typing import Any, Callable

import networkx as nx

from .graph_parts import parts

Value = tuple[int, ...]
#: a piece's value (None: no plan) under a choice of its boundary tensors' candidates
Solve = Callable[[list[int], dict[str, str]], Value | None]


def boundaries(g) -> frozenset[str]:
    """The free tensors with several candidates that ops of more than one launch touch."""
    if g.objective == "critical_path":
        return frozenset()
    seen: dict[str, set[str]] = {}
    for op in g.ops:
        for t in g.op_free(op):
            if len(g.tensors[t].candidates or []) > 1:
                seen.setdefault(t, set()).add(op.launch)
    return frozenset(t for t, launches in seen.items() if len(launches) > 1)


def chains(g) -> list[tuple[list[list[int]], list[str]]] | None:
    """The pieces cut at the boundaries, as paths: each its pieces in path order and the
    boundary tensor between each two consecutive ones; None where there is no boundary or
    the pieces do not form paths (a boundary touching three pieces, two between one pair,
    a cycle)."""
    cut = boundaries(g)
    if not cut:
        return None
    pieces = parts(g, cut)
    where = {i: k for k, p in enumerate(pieces) for i in p}
    link: nx.Graph = nx.Graph()
    link.add_nodes_from(range(len(pieces)))
    for t in sorted(cut):
        touch = sorted({where[op.index] for op in g.ops if t in g.op_free(op)})
        if len(touch) != 2 or link.has_edge(*touch):
            return None
        link.add_edge(*touch, tensor=t)
    out = []
    for comp in sorted(nx.connected_components(link), key=min):
        sub = link.subgraph(comp)
        ends = sorted(k for k in comp if sub.degree(k) <= 1)
        if len(comp) > 1 and (not nx.is_tree(sub) or len(ends) != 2):
            return None
        path = [ends[0]] if len(comp) == 1 else nx.shortest_path(sub, ends[0], ends[1])
        out.append(([pieces[k] for k in path],
                    [link.edges[a, b]["tensor"] for a, b in zip(path, path[1:])]))
    return out


def best_path(path: list[list[int]], links: list[str], candidates: Callable[[str], list[str]],
              solve: Solve) -> tuple[Value, list[dict[str, str]]] | None:
    """The least total value along ``path`` (pieces; ``links[k]`` the boundary tensor
    between pieces k and k + 1) over its boundaries' candidates, and each piece's
    boundary choice; None when no choice plans every piece."""
    states: dict[str | None, tuple[Value, list[dict[str, str]]]] = {None: ((), [])}
    for k, piece in enumerate(path):
        before = links[k - 1] if k else None
        after = links[k] if k < len(links) else None
        nxt: dict[str | None, tuple[Value, list[dict[str, str]]]] = {}
        for c_out in (candidates(after) if after else [None]):
            for c_in, (total, fixed) in states.items():
                choice = {t: c for t, c in ((before, c_in), (after, c_out))
                          if t is not None and c is not None}
                v = solve(piece, choice)
                if v is None:
                    continue
                got = (_add(total, v), fixed + [choice])
                if c_out not in nxt or got[0] < nxt[c_out][0]:
                    nxt[c_out] = got
        if not nxt:
            return None
        states = nxt
    return states[None]


def _add(a: Value, b: Value) -> Value:
    return b if not a else tuple(x + y for x, y in zip(a, b))


def piece_value(g, record: Any, objective: str, schedule: Callable[[Any, Any], Any]) -> Value:
    """What the joint choice minimizes of a piece's choice: (its makespan, its sum) or
    (its sum,)."""
    if objective == "makespan":
        return (schedule(g, record).makespan, record.sum_cycles)
    return (record.sum_cycles,)
