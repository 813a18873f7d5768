"""A large free tensor several DMA ops touch, ordered jointly (issue 32, item 3; docs/
graphs.md 'The file'; docs/decisions.md item 140).

Beyond ``GRAPH_CANDIDATES_MAX`` orders a free tensor is not enumerated.  Written by one DMA
and touched by no other op, that DMA orders it (planner/graph_orders.py).  Touched by
several ops, each a DMA that can order it itself (graph_orders ``SHARING_ROLES``: its
destination, or its source in HBM through the outer model of the address bits), the
tensor's order is chosen by branch and bound over prefixes of the graph's digits, jointly:

- A node is a prefix.  Each op, under each layout of its other free tensors, is planned
  with the tensor free behind the prefix (graph_orders ``_Search.bound``): no order with
  that prefix gives the op fewer cycles.  The node's bound is the joint choice of the
  tensor's part (planner/graph_parts.py) with those rows in place of the ops' rows: every
  objective is monotone in the ops' cycles (docs/decisions.md item 136), so no order with
  the prefix does better.
- At each node the orders the ops' own plans chose (each grouped back into the graph's
  digits, where it is one) are planned for every op, as given orders; the best joint
  choice over the orders planned so far is the incumbent.  A node whose bound reaches the
  incumbent is closed; else it branches on its next digit.  Nodes are taken least bound
  first; the search ends when the least open bound reaches the incumbent.
- The ops' rows are then those of the orders planned, and the joint choice picks among
  them: the optimum over every order.

A bound's search cut by the time limit keeps its parent's bound (every order under the
node is one under the parent), so the proof stands.  As for one op (graph_orders), the
bounds and the rows' cycles are one figure when no command of the op is sampled;
otherwise, or when a joint choice is cut by the time limit, the rows are marked not
proven (the graph's status ``feasible``).  A node's children are bounded at once, on the
process pool (planner/op_pool.py; :func:`bound_task`).
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Callable

from tcplan.model import limits

from .graph_orders import (_UNSAMPLED, Orders, _Search, large, refuse_digits,
                           sharing_role)

#: what a part's joint choice is worth: (its value, least first; None: no plan) and
#: whether it is proven
Value = Callable[[Any, dict[int, list], Callable[[], dict[int, list]]],
                 tuple["tuple[int, ...] | None", bool]]


class Joint:
    """One large tensor's joint order: its ops' searches, its part, the orders planned."""

    def __init__(self, g, n: str, ops: list[int], table, choices, opts, plan_one: Callable,
                 value: Value, row: Callable[..., Any]):
        from .graph_parts import parts, restrict
        self.g, self.n, self.table, self.value, self.row = g, n, table, value, row
        self.opts = opts
        self.part = next(p for p in parts(g) if ops[0] in p)
        if any(m != n for m in _large_in(g, self.part)):
            _refuse_together(g, n, self.part)
        self.sub, self.at = restrict(g, self.part), {i: k for k, i in enumerate(self.part)}
        self.searches = [(i, lay, _Search(g, g.ops[i], n, lay, opts, plan_one,
                                          sharing_role(g, g.ops[i], n) or ""))
                         for i in ops for lay in choices(g.ops[i])]
        self.digits = list(g.tensors[n].elements.terms)
        self.planned: list[tuple[str, ...]] = []
        self.dead: dict[int, Any] = {}  # searches no order plans: their root node
        self.proven = True

    def rows(self, shared: dict[int, list]) -> tuple[dict[int, list], Callable]:
        """The part's rows (by the part's op indexes): the tensor's ops' as given, the
        others' the table's (with the avoided ones, when the full model needs them)."""
        def build() -> dict[int, list]:
            return {k: shared[i] if i in shared else list(self.table[i])
                    for i, k in self.at.items()}

        def complete() -> dict[int, list]:
            self.table.complete([i for i in self.part if i not in shared])
            return build()
        return build(), complete

    def worth(self, shared: dict[int, list]) -> tuple[int, ...] | None:
        rows, complete = self.rows(shared)
        got, proven = self.value(self.sub, rows, complete)
        self.proven = self.proven and proven
        return got

    def bounds(self, prefixes: list[tuple[str, ...]], parents: list[dict]
               ) -> list[tuple[tuple[int, ...] | None, dict]]:
        """Nodes, their searches' bounds planned at once (planner/op_pool.py): each node's
        bound (None: no order with its prefix has a plan) and each search's node.  A
        search cut by the time limit keeps its parent's bound (every order under the node
        is one under the parent): the proof stands."""
        from .op_pool import plan_many
        live = [k for k in range(len(self.searches)) if k not in self.dead]
        todo = [(self.g.ops[self.searches[k][0]],
                 (self.n, self.searches[k][1], self.searches[k][2].role,
                  self.searches[k][2].kind_terms, p)) for p in prefixes for k in live]
        got = iter(plan_many(self.g, todo, self.opts, bound_task))
        out = []
        for p, parent in zip(prefixes, parents):
            nodes = {k: self.dead[k] if k in self.dead else _valid(next(got), parent.get(k))
                     for k in range(len(self.searches))}
            out.append((self.worth(self._bound_rows(p, nodes)), nodes))
        return out

    def _bound_rows(self, prefix: tuple[str, ...], nodes: dict) -> dict[int, list]:
        shared: dict[int, list] = {i: [] for i, _, _ in self.searches}
        for k, (i, lay, _) in enumerate(self.searches):
            node = nodes[k]
            if node.error is None and node.bound < math.inf:
                shared[i].append(self.row({**lay, self.n: f"prefix {prefix}"}, node.plan,
                                          int(node.bound)))
        return shared

    def incumbent(self, orders: list[tuple[str, ...]]) -> tuple[int, ...] | None:
        """The orders planned for every op (at once); the best joint choice over all
        planned."""
        from .graph_bound import plan_signatures
        from .op_cache import op_signature
        new = [o for o in orders if o not in self.planned]
        self.planned += new
        todo = {}
        for o in new:
            for i, lay, _ in self.searches:
                layout = {**lay, self.n: Orders.name(o)}
                todo[op_signature(self.g, self.g.ops[i], layout)] = (self.g.ops[i], layout)
        plan_signatures(self.g, todo, self.opts.op_plans, self.opts)  # (kept for row())
        return self.worth(self._rows())

    def _rows(self) -> dict[int, list]:
        out: dict[int, list] = {i: [] for i, _, _ in self.searches}
        for i, _, s in self.searches:
            out[i] += [s.row(o) for o in self.planned]
        return out

    def completions(self, prefix: tuple[str, ...], nodes: dict) -> list[tuple[str, ...]]:
        """The orders the ops' own plans at a node chose, where each is a graph order
        with the node's prefix (the last digit's order, at a leaf)."""
        left = [x for x in self.digits if x not in prefix]
        if len(left) <= 1:
            return [prefix + tuple(left)]
        out: list[tuple[str, ...]] = []
        for k, (_, _, s) in enumerate(self.searches):
            plan = nodes[k].plan
            order = s.graph_order(plan) if plan is not None else None
            if order is not None and order[:len(prefix)] == prefix and order not in out:
                out.append(order)
        return out

    def run(self) -> dict[int, list]:
        """The least bound first (module docstring); the ops' rows under the orders
        planned, their ``proven`` cleared when the proof does not hold."""
        nodes = {k: _valid(s.bound(()), None) for k, (_, _, s) in enumerate(self.searches)}
        root = self.worth(self._bound_rows((), nodes))
        for k, (_, _, s) in enumerate(self.searches):
            if nodes[k].plan is None:  # (no order has a plan for it: its node stays)
                self.dead[k] = nodes[k]
            elif not s.learn(nodes[k].plan):
                refuse_digits(self.n, len(self.g.tensors[self.n].candidates or []))
        best = None
        heap: list = [(root, 0, (), nodes)] if root is not None else []
        seq = 1
        while heap:
            bound, _, prefix, nodes = heapq.heappop(heap)
            if best is not None and bound >= best:
                break  # no order left beats the best planned
            orders = self.completions(prefix, nodes)
            if orders:
                got = self.incumbent(orders)
                best = got if best is None or (got is not None and got < best) else best
            if (best is not None and best <= bound) or len(prefix) + 1 >= len(self.digits):
                continue  # the node's best order is planned
            kids = [prefix + (x,) for x in self.digits if x not in prefix]
            for kid, (child, child_nodes) in zip(kids, self.bounds(kids, [nodes] * len(kids))):
                if child is not None:  # (None: no order of the child has a plan)
                    heapq.heappush(heap, (child, seq, kid, child_nodes))
                    seq += 1
        if not self.planned:  # no order has a plan: the first order's rules say why
            self.incumbent([tuple(self.digits)])
        exact = math.prod(self.g.axes_of(
            [t for i, _, _ in self.searches for t in self.g.ops[i].roles.values()]
        ).values()) <= _UNSAMPLED
        rows = self._rows()
        for r in (r for rs in rows.values() for r in rs):
            r.proven = r.proven and self.proven and exact
        return rows


def _valid(node, parent):
    """A search's node with a bound that holds: cut by the time limit (its plan, if any,
    not proven the least), the parent's bound, or 0 at the root (the plan kept: an order
    to try)."""
    if not node.proven and node.error is None:
        node.bound, node.proven = parent.bound if parent is not None else 0, True
    return node


def bound_task(g, op, item: tuple, opts):
    """What a pool worker runs (sent by name): one search's bound at one prefix."""
    n, layout, role, terms, prefix = item
    s = _Search(g, op, n, layout, opts, None, role)
    s.kind_terms = terms
    return s.bound(prefix)


def _large_in(g, part: list[int]) -> list[str]:
    """The large free tensors (beyond ``GRAPH_CANDIDATES_MAX`` orders) a part's ops touch."""
    return list(dict.fromkeys(n for i in part for n in g.op_free(g.ops[i]) if large(g, n)))


def _refuse_together(g, n: str, part: list[int]) -> None:
    others = [m for m in _large_in(g, part) if m != n]
    raise limits.size_error(len(others) + 1, 1, "large free tensors bound in one part",
                            "tensors", {f"tensor {m}": len(g.tensors[m].candidates or [])
                                        for m in [n, *others]}, limits.PLANNER,
                            "give all but one of them fewer digits (120 orders at most), or "
                            "keep them in ops bound by no common choice")


def fill_shared(g, shared: dict[str, list[int]], table, choices, opts, plan_one: Callable,
                value: Value, row: Callable[..., Any]) -> None:
    """The rows of the ops of each large tensor ordered jointly (``shared``)."""
    for n, ops in shared.items():
        table.update(Joint(g, n, ops, table, choices, opts, plan_one, value, row).run())
