"""A graph's large free tensors: orders chosen without enumerating them (issue 32, item 3;
docs/graphs.md; docs/decisions.md items 131, 132 and 140).  A tensor several DMA ops
order is chosen jointly by planner/graph_shared.py, with :class:`_Search` per op.

A free Element of ``n`` digits has ``n!`` orders.  Up to ``GRAPH_CANDIDATES_MAX`` (120: 5
digits) of an op's combinations, the graph plans every one (planner/graph_plan.py).  Beyond,
up to ``GRAPH_ORDERS_MAX`` orders of a tensor (8 digits: 40,320), a tensor may be planned
by the one op that touches it, when that op is a DMA writing it (its ``destination``): the
DMA kind orders a free destination Element itself, inside its layout search, and takes a
prefix of digits kept outermost (``element: {free: true, prefix: ...}``).

:class:`Orders` holds such a tensor's candidates lazily (its orders named as the graph
names them, each Element built when asked).  :class:`Lazy` says which op plans which
tensor, and :func:`best_order` finds the op's best order by branch and bound over prefixes:

- A node is a prefix of the graph's digits (outermost first).  Its bound is the DMA kind's
  plan with the Element free behind that prefix.  The kind's free Element orders its own
  digits (the tensor's digits cut where the op's source cuts them), which tile the graph's:
  every graph order with that prefix is one of the kind's orders, so the kind's optimum is
  at most the best graph order's cost (its search is exact for its orders: the layout
  search's floor and exclusion, docs/decisions.md).
- When the kind's best Element is itself a graph order (its digits grouped back into the
  graph's, in order), that order is the node's best: it is planned as a given order (the
  same plan and cycles the enumeration gives it), and the node needs no children.  Else
  the node branches on its next digit.  A node whose search finds no plan has no order
  with a plan.
- Nodes are taken least bound first; the search ends when the least open bound reaches
  the best order planned: no order left can beat it.

The bounds and the orders' cycles are one figure when the DMA's estimate is the full cycle
model, which it is when no command is sampled (an op of at most ``SAMPLE_BLOCKS *
SAMPLE_BLOCK`` positions: no command has more packets).  A larger op's order is still the
best by the estimate its layout search ranks plans with, but the graph's status is then
``feasible`` (not proven against the full model), as it is when a bound's search is cut by
the time limit.  The tensor being touched by that op alone, the op's least cycles are the
best for the graph under every objective, so one row per combination of the op's other
free tensors (enumerated) goes to the joint choice.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
from collections.abc import Iterator, Mapping as AbcMapping
from typing import Any, Callable

from tcplan.model import limits
from tcplan.model.mapping import Mapping, join
from tcplan.model.rules import TcplanError

#: the op role whose free Element the op's kind orders itself, by op kind
ORDERING_ROLES = {"dma": "destination"}


class Orders(AbcMapping):
    """Every order of a free Element's digits, named ``m![a, b, c]`` as the graph names a
    candidate, each Element built when asked (a tensor may have 40,320 of them)."""

    def __init__(self, terms: list[str], digits: dict[str, Mapping]):
        self.terms = list(terms)
        self.digits = digits

    @staticmethod
    def name(order) -> str:
        return f"m![{', '.join(order)}]"

    def order(self, name: str) -> tuple[str, ...]:
        return tuple(name[3:-1].split(", "))

    def __iter__(self) -> Iterator[str]:
        return (self.name(p) for p in itertools.permutations(self.terms))

    def __len__(self) -> int:
        return math.factorial(len(self.terms))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.startswith("m![") and \
            sorted(self.order(name)) == sorted(self.terms)

    def __getitem__(self, name: str) -> Mapping:
        if name not in self:
            raise KeyError(name)
        return join(self.digits[x] for x in self.order(name))


class AllOrders(dict):
    """Every order of a free Element's digits, built (up to ``GRAPH_CANDIDATES_MAX``): a
    dict, with the digits an op may order itself (:class:`Lazy`)."""

    def __init__(self, terms: list[str], digits: dict[str, Mapping]):
        super().__init__((Orders.name(p), join(digits[x] for x in p))
                         for p in itertools.permutations(terms))
        self.terms, self.digits = list(terms), digits


def orders_of(terms: list[str], digit: dict[str, Mapping], count: int
              ) -> AllOrders | Orders:
    """A free Element's candidates: every order built up to ``GRAPH_CANDIDATES_MAX``,
    :class:`Orders` beyond (``count`` orders, checked against ``GRAPH_ORDERS_MAX``)."""
    if count <= limits.GRAPH_CANDIDATES_MAX:
        return AllOrders(terms, digit)
    return Orders(terms, digit)


def checked(elements) -> list:
    """The candidates whose axes a loader checks: every one, or the first of
    :class:`Orders` (all orders of the same digits carry the same axes and size)."""
    if isinstance(elements, Orders):
        return [next(iter(elements.items()))]
    return list(elements.items())


def spanning(t) -> list[str]:
    """The candidates whose size bounds a tensor's bytes (the first of :class:`Orders`)."""
    return (t.candidates or [])[:1] if isinstance(t.elements, Orders) else \
        list(t.candidates or [])


#: the op roles whose free Element the op's kind orders itself, by op kind (a source only
#: in HBM: planner/sources.py)
SHARING_ROLES = {"dma": ("destination", "source")}


def large(g, n: str) -> bool:
    """Tensor ``n`` has more candidates than the graph enumerates."""
    return len(g.tensors[n].candidates or []) > limits.GRAPH_CANDIDATES_MAX


def sharing_role(g, op, n: str) -> str | None:
    """The role in which ``op`` orders tensor ``n`` itself, or None."""
    for role in SHARING_ROLES.get(op.kind, ()):
        if op.roles.get(role) == n and (role != "source"
                                         or g.tensors[n].spec.get("tier") == "hbm"):
            return role
    return None


def shared_users(g, n: str, ops) -> list[int] | None:
    """The ops ordering large tensor ``n`` jointly, or None when one of them cannot (not
    a role its kind orders, or it touches another large free tensor)."""
    if not isinstance(g.tensors[n].elements, Orders):
        return None
    for op in ops:
        others = [m for m in g.op_free(op) if m != n and large(g, m)]
        if sharing_role(g, op, n) is None or others:
            return None
    return [op.index for op in ops]


class Lazy:
    """Which op orders which free tensor itself (``ordered``: op index -> tensor), for
    every op whose combinations exceed ``GRAPH_CANDIDATES_MAX``; which large free tensors
    several ops order jointly (``shared``: tensor -> op indexes, planner/graph_shared.py);
    ``own``: op index -> the large tensor whose orders it does not enumerate.  Raises
    ``size-limit`` for a tensor or an op no op can take that way."""

    def __init__(self, g):
        self.g = g
        self.ordered: dict[int, str] = {}
        self.shared: dict[str, list[int]] = {}
        users: dict[str, list] = {}
        for op in g.ops:
            for n in g.op_free(op):
                users.setdefault(n, []).append(op)
        for op in g.ops:
            free = g.op_free(op)
            count = math.prod(len(g.tensors[n].candidates or []) for n in free)
            if count <= limits.GRAPH_CANDIDATES_MAX:
                continue
            role = ORDERING_ROLES.get(op.kind)
            mine = op.roles.get(role, "") if role else ""
            if mine in free and len(users[mine]) == 1 and isinstance(
                    g.tensors[mine].elements, (Orders, AllOrders)):  # (every order: no list)
                self.ordered[op.index] = mine
        for n, ops in users.items():
            if large(g, n) and not any(self.ordered.get(op.index) == n for op in ops):
                together = shared_users(g, n, ops)
                if together is None:
                    self._refuse(n, ops)
                self.shared[n] = together or []
        self.own = {**self.ordered, **{i: n for n, ops in self.shared.items() for i in ops}}
        for op in g.ops:
            left = math.prod(len(g.tensors[n].candidates or []) for n in g.op_free(op)
                             if self.own.get(op.index) != n)
            limits.check(left, limits.GRAPH_EVALUATIONS_MAX, "layout choices of one op",
                         "plans", {f"op {op.name}": left}, limits.PLANNER,
                         "give the free tensors fewer candidate orders")

    def _refuse(self, n: str, ops) -> None:
        limits.check(len(self.g.tensors[n].candidates or []), limits.GRAPH_CANDIDATES_MAX,
                     "a free Element's candidate orders not ordered by the DMA ops "
                     "touching it",
                     "orders", {f"tensor {n}": len(self.g.tensors[n].candidates or [])},
                     limits.PLANNER, "beyond 120 orders a free tensor is ordered by the "
                     "dma ops that touch it, each touching no other such tensor "
                     "(docs/graphs.md); give fewer digits")

    def choices(self, op) -> list[dict[str, str]]:
        """The layouts the graph plans the op under: every combination of its free
        tensors, but for the tensor it orders itself."""
        n = self.own.get(op.index)
        if n is None:
            return self.g.choices(op)
        others = [m for m in self.g.op_free(op) if m != n]
        return [dict(zip(others, c)) for c in itertools.product(
            *(self.g.tensors[m].candidates or [] for m in others))]

    def op_choice(self, op, layout: dict[str, str], opts, plan_one: Callable):
        """The op's row under ``layout``: ``plan_one(g, op, layout, opts)`` (graph_plan's
        ``_op_choice``), or the best order of the tensor it orders (:func:`best_order`)."""
        n = self.ordered.get(op.index)
        if n is None:
            return plan_one(self.g, op, layout, opts)
        return best_order(self.g, op, n, layout, opts, plan_one)


    def fill(self, table: dict, opts, plan_one: Callable) -> None:
        """The rows of the ops that order a tensor themselves (``table``'s others are the
        enumeration's): one per combination of the op's other free tensors."""
        for i, n in self.ordered.items():
            op = self.g.ops[i]
            table[i] = [self.op_choice(op, layout, opts, plan_one)
                        for layout in self.choices(op)]


def candidates(g, table, n: str) -> list[str]:
    """The candidates the joint choice weighs for tensor ``n``: all of them, or, for
    :class:`Orders`, those the rows name (an op ordered it: the rest have no row)."""
    t = g.tensors[n]
    if not isinstance(t.elements, Orders):
        return list(t.candidates or [])
    named = {r.layout[n] for rows in table.values() for r in rows if n in r.layout}
    return sorted(named) or (t.candidates or [])[:1]


# ---- branch and bound over prefixes ----------------------------------------------------

def _range(m: Mapping) -> tuple[str, int, int] | None:
    """A one-factor term's digit range ``(axis, lo, hi)``; None for anything else."""
    fs = m.factors
    if len(fs) != 1 or fs[0].axis is None or fs[0].count != fs[0].size:
        return None
    f, axis = fs[0], fs[0].axis or ""
    return (axis, f.lo, min(f.lo * f.count, m.axes[axis]))


@dataclasses.dataclass
class _Node:
    prefix: tuple[str, ...]
    bound: float  # inf: no order of the node has a plan
    plan: Any = None
    proven: bool = True
    error: TcplanError | None = None


class _Search:
    """One op's best order of one tensor under one layout of its other tensors."""

    def __init__(self, g, op, n: str, layout: dict[str, str], opts,
                 plan_one: Callable | None, role: str = "destination"):
        from .registry import kinds
        self.g, self.op, self.n, self.layout, self.opts = g, op, n, layout, opts
        self.role = role  # (the side of the op's plan whose Element is the tensor's)
        self.plan_one, self.kind = plan_one, kinds()[op.kind]
        self.orders: Orders | AllOrders = g.tensors[n].elements
        self.graph = {x: _range(self.orders.digits[x]) for x in self.orders.terms}
        self.kind_terms: dict[tuple, str] | None = None  # kind digit range -> its text
        self.proven = True
        self.planned: dict[str, Any] = {}  # order name -> its row
        self.free_problem: Any = None  # the op with the tensor free (the root's problem)

    def bound(self, prefix: tuple[str, ...]) -> _Node:
        """The node's bound: the op planned by its kind with the Element free behind the
        prefix (the prefix in the kind's digits)."""
        el: dict[str, Any] = {"free": True}
        if prefix:
            el["prefix"] = "m![" + ", ".join(self._kind_digits(prefix)) + "]"
        t = self.g.tensors[self.n]
        g2 = dataclasses.replace(self.g, tensors={**self.g.tensors, self.n: dataclasses.replace(
            t, elements={"free": el})}, _problems={})
        node = _Node(prefix, math.inf)
        try:
            problem = g2.op_problem(self.op, {**self.layout, self.n: "free"})
            if not prefix:
                self.free_problem = problem
            node.plan, cycles, node.proven = self.kind.plan(problem, self.opts)
            node.bound = math.inf if cycles is None else cycles
        except TcplanError as e:
            if e.kind in ("input", "limit"):
                raise
            if e.code == "plan-time-limit":
                node.bound, node.proven = 0, False
            else:
                node.error = e
        if not node.proven:
            self.proven = False
        return node

    def _kind_digits(self, prefix: tuple[str, ...]) -> list[str]:
        assert self.kind_terms is not None
        out = []
        for x in prefix:
            axis, lo, hi = self.graph[x] or ("", 0, 0)
            parts = sorted((r for r in self.kind_terms if r[0] == axis and lo <= r[1]
                            and r[2] <= hi), key=lambda r: -r[1])
            out += [self.kind_terms[r] for r in parts]
        return out

    def learn(self, plan) -> bool:
        """The kind's digits, from its first plan's Element: True when they tile the
        graph's digits (each graph digit a run of the kind's), the condition for its
        orders to include the graph's.  The digits are the free Element's own, as its
        problem holds them (the plan's Element may print a digit as finer terms)."""
        spec = getattr(self.free_problem, "spec", None)
        fe, fs = getattr(spec, "free_element", None), getattr(spec, "free_source", None)
        terms = (list(fe.terms) if self.role == "destination" and fe is not None else
                 [d.term for d in fs.digits] if self.role == "source" and fs is not None
                 else getattr(plan, self.role).dims["element"].terms)
        self.kind_terms = {}
        for term in terms:
            r = _range(term)
            if r is None:
                return False
            self.kind_terms[r] = term.body()
        for r in self.graph.values():
            if r is None:
                return False
            axis, lo, hi = r
            cuts = sorted((a, b) for (ax, a, b) in self.kind_terms if ax == axis
                          and lo <= a and b <= hi)
            if not cuts or cuts[0][0] != lo or cuts[-1][1] != hi or any(
                    a[1] != b[0] for a, b in zip(cuts, cuts[1:])):
                return False
        return True

    def graph_order(self, plan) -> tuple[str, ...] | None:
        """The kind's chosen Element as a graph order (its digits grouped back into the
        graph's, each run from its highest part down), or None."""
        ranges = [_range(t) for t in getattr(plan, self.role).dims["element"].terms]
        out: list[str] = []
        k = 0
        while k < len(ranges):
            r = ranges[k]
            x = next((x for x, g in self.graph.items() if r and g and g[0] == r[0]
                      and g[2] == r[2]), None)
            if x is None or r is None:
                return None
            low = r[1]
            k += 1
            while low != (self.graph[x] or ("", 0, 0))[1]:
                nxt = ranges[k] if k < len(ranges) else None
                if nxt is None or nxt[0] != r[0] or nxt[2] != low:
                    return None
                low, k = nxt[1], k + 1
            out.append(x)
        return tuple(out) if sorted(out) == sorted(self.orders.terms) else None

    def row(self, order: tuple[str, ...]):
        name = Orders.name(order)
        assert self.plan_one is not None  # (a bound's worker plans no row)
        if name not in self.planned:
            self.planned[name] = self.plan_one(self.g, self.op, {**self.layout,
                                                                  self.n: name}, self.opts)
        return self.planned[name]

    def run(self):
        """Least bound first; the best order's row, its ``proven`` cleared when the proof
        does not hold (a bound cut by the time limit, a sampled estimate)."""
        root = self.bound(())
        if root.plan is None or not self.learn(root.plan):
            if root.error is not None:  # no order has a plan: the first order's rule
                return self.row(tuple(self.orders.terms))
            refuse_digits(self.n, len(self.orders))
        best = None
        heap: list = [(root.bound, 0, root)]
        seq = 1
        while heap:
            bound, _, node = heapq.heappop(heap)
            if best is not None and bound >= best.cost:
                break  # no order left beats the best planned
            if node.error is not None:
                continue  # no order of the node has a plan
            whole = self.graph_order(node.plan)
            if whole is not None and whole[:len(node.prefix)] == node.prefix:
                r = self.row(whole)
                if r.ok and (best is None or r.cost < best.cost):
                    best = r
                if r.ok and r.cost <= bound:
                    continue  # the node's best order, planned
            left = [x for x in self.orders.terms if x not in node.prefix]
            if len(left) <= 1:
                r = self.row(node.prefix + tuple(left))
                if r.ok and (best is None or r.cost < best.cost):
                    best = r
                continue
            for x in left:
                child = self.bound(node.prefix + (x,))
                heapq.heappush(heap, (child.bound, seq, child))
                seq += 1
        if best is None:
            return self.row(tuple(self.orders.terms))  # (every order rejected)
        exact = math.prod(self.g.axes_of(self.op.roles.values()).values()) <= _UNSAMPLED
        best.proven = best.proven and self.proven and exact
        return best


def refuse_digits(n: str, orders: int) -> None:
    """``size-limit``: tensor ``n``'s orders are too many to enumerate, and the DMA that
    would order it orders other digits than the graph's."""
    limits.check(orders, limits.GRAPH_CANDIDATES_MAX, "a free Element's candidate orders",
                 "orders", {f"tensor {n}": orders}, limits.PLANNER,
                 "its DMA orders it in digits that do not tile the graph's: give fewer "
                 "digits, or orders: [...]")


def _unsampled() -> int:
    from tcplan.model.cost import SAMPLE_BLOCK, SAMPLE_BLOCKS
    return SAMPLE_BLOCKS * SAMPLE_BLOCK


_UNSAMPLED = _unsampled()


def best_order(g, op, n: str, layout: dict[str, str], opts, plan_one: Callable):
    """The op's row with its best order of tensor ``n`` (module docstring)."""
    return _Search(g, op, n, layout, opts, plan_one).run()
