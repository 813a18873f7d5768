"""A graph cut into independent parts, each solved once (issue 32, item 4; docs/graphs.md
'At scale').

Two ops are in one part when one choice binds them: a free tensor with more than one
candidate they both touch, or, under ``objective: makespan``, one launch (its schedule
binds its ops; launches run one after another, so the graph's makespan is the sum of its
launches').  Under ``critical_path`` the whole graph is one part.  The parts share no
choice, so the graph's optimum is each part's optimum, together (its sum, or its makespan:
the sum over launches).

A part is a graph of its own (:func:`restrict`), and its :func:`part_signature` says what
its solution depends on, without names: parts with one signature (every layer of a model)
are solved once and the solution is mapped onto the others by position.
"""

from __future__ import annotations

import dataclasses
import json
import networkx as nx

from .graph import Graph


def parts(g: Graph, cut: frozenset[str] = frozenset()) -> list[list[int]]:
    """The op indexes of each part, each in the graph's order, parts by their first op;
    ``cut``: free tensors that bind nothing here (a chain's boundaries, planner/
    graph_chain.py: their candidates are chosen across the parts)."""
    if g.objective == "critical_path":
        return [list(g.order)]
    join: nx.Graph = nx.Graph()
    join.add_nodes_from(op.index for op in g.ops)
    first: dict[str, int] = {}
    for op in g.ops:
        binds = [t for t in g.op_free(op) if len(g.tensors[t].candidates or []) > 1
                 and t not in cut]
        if g.objective == "makespan":
            binds.append("launch " + op.launch)
        for key in binds:
            join.add_edge(first.setdefault(key, op.index), op.index)
    rank = {i: k for k, i in enumerate(g.order)}
    out = [sorted(c, key=rank.__getitem__) for c in nx.connected_components(join)]
    return sorted(out, key=lambda p: rank[p[0]])


def restrict(g: Graph, ops: list[int]) -> Graph:
    """The graph of these ops (in the graph's order) and the tensors they touch; a tensor
    another part writes is given here (it holds its data when this part starts)."""
    keep = [g.ops[i] for i in ops]
    new = {op.index: k for k, op in enumerate(keep)}
    names = list(dict.fromkeys(t for op in keep for t in op.roles.values()))
    written = {t for op in keep for t in op.writes}
    tensors = {n: dataclasses.replace(g.tensors[n], given=g.tensors[n].given or
                                      n not in written) for n in names}
    sub_ops = [dataclasses.replace(op, index=new[op.index], at=op.at) for op in keep]
    dag: nx.DiGraph[int] = nx.relabel_nodes(g.dag.subgraph(ops), new, copy=True)
    sub = Graph(g.doc, g.base, tensors, sub_ops, g.objective, dag,
                [new[i] for i in g.order if i in new],
                {n: g.spans[n] for n in names if n in g.spans},
                [n for n in g.launches if any(op.launch == n for op in keep)])
    return sub


def part_signature(g: Graph) -> str:
    """What a part's solution depends on, its tensors and launches named by their first
    appearance: each op's kind, keys and tensors, each tensor as written with its
    candidates, the graph's dtype, chips, axes and objective."""
    from .op_cache import canonical_data
    ids: dict[str, str] = {}
    launch: dict[str, str] = {}
    ops = []
    for i in g.order:
        op = g.ops[i]
        roles = {r: ids.setdefault(t, f"t{len(ids)}") for r, t in op.roles.items()}
        ops.append([op.kind, canonical_data(op), roles,
                    launch.setdefault(op.launch, f"l{len(launch)}")])
    moves = _movable(g)
    tensors = {ids[n]: [_moved(t.spec, moves.get(n, 0)), t.candidates, t.given, t.keep]
               for n, t in g.tensors.items() if n in ids}
    base = {**g.base, "axes": list(g.base["axes"].items())}  # (their order matters)
    return json.dumps({"ops": ops, "tensors": tensors, "base": base,
                       "objective": g.objective}, sort_keys=True, default=str)


def _movable(g: Graph) -> dict[str, int]:
    """Per HBM tensor every op of the part moves a plan with (``Kind.graph_rebases``), the
    bytes it lies above its address modulo the decode's period (planner/op_cache.py)."""
    from .op_cache import op_shifts
    shift: dict[str, int] = {}
    fixed: set[str] = set()
    for op in g.ops:
        got = op_shifts(g, op)
        for role, t in op.roles.items():
            if role in got:
                shift[t] = got[role]
            else:
                fixed.add(t)
    return {t: v for t, v in shift.items() if t not in fixed}


def _moved(spec: dict, by: int) -> dict:
    return {**spec, "address": spec["address"] - by} if by else spec


def rename(ids_from: Graph, ids_to: Graph) -> dict[str, str]:
    """Tensor names of one part onto another of the same signature (by first appearance:
    the two parts' ops correspond by position in their orders)."""
    return dict(zip(appearance(ids_from), appearance(ids_to)))


def appearance(g: Graph) -> list[str]:
    """The part's tensors in the order its ops first name them (the signature's names)."""
    return list(dict.fromkeys(t for i in g.order for t in g.ops[i].roles.values()))
