"""Bound before planning (issue 32, item 2; docs/graphs.md 'At scale'; docs/decisions.md
item 139).

An op's kind may give a floor of its cycles under a layout before it searches
(``Kind.staged``; ``Kind.graph_floors``): a DMA's is the least floor of its options, read
off their static checks (planner/layout.py ``staged``), about a third of its search.  The
graph then plans such an op by branch and bound over its layouts: each layout is staged
(its floor), and the layouts are searched in order of floor until the next floor exceeds
the least cycles found; the rest are avoided (:class:`Floor`: not planned, their floor
kept).  A layout whose floor equals the best is still planned: it may tie.

Exactness.  An avoided row's cycles exceed its op's best, and a kind that gives floors runs
one task with no prelude and the same bank accesses under every plan, so its cycles are all
the joint choice reads of it: no avoided row is ever an op's best in what the objective
reads.  The joint choice therefore first tries the ideal choice (planner/graph_ideal.py)
over the rows planned: found, it is the optimum over every row, avoided ones included
(each op at its best over all of them).  Where it is not found, or where a part is solved
under fixed boundary layouts (planner/graph_chain.py) so that an op's best is over fewer
rows, :class:`Table` plans the avoided rows that could matter (:meth:`Table.ensure`) or all
of them (:meth:`Table.complete`) before the full model weighs them.  Tests compare the
bounded plan with the plan over every row (tests/test_graph_bound.py).

:func:`plan_task` is what the pool runs: an op's layouts under branch and bound
(:class:`Rows`), or one layout.  An op of the same layouts in another layer shares the
plans and the floors (planner/op_cache.py keeps both, on disk too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from tcplan.model.rules import TcplanError

from .registry import Staged


@dataclass(frozen=True)
class Rows:
    """A task: an op's layouts planned by branch and bound; ``best``: the least cycles of
    its rows known before (None: none)."""

    layouts: tuple[dict[str, str], ...]
    best: int | None = None


@dataclass(frozen=True)
class Floor:
    """An op plan avoided: what it takes at least (cycles)."""

    cycles: int


@dataclass(frozen=True)
class Stage:
    """An op under a layout, staged: its problem and its plan in two steps."""

    problem: Any
    staged: Staged[tuple[Any, int | None, bool]]


def _rejected(e: TcplanError) -> tuple:
    """The entry of a rule rejecting the layout; what is not (an input mistake, a limit,
    the time limit) is raised: no answer for it."""
    if e.kind in ("input", "limit") or e.code == "plan-time-limit":
        raise e
    return None, None, True, e


def stage_op(g, op, layout: dict[str, str], opts) -> Stage | tuple:
    """The op under ``layout`` staged by its kind, or the entry of the rule rejecting it."""
    from .registry import kinds
    try:
        problem = g.op_problem(op, layout)
        return Stage(problem, kinds()[op.kind].staged(problem, opts))
    except TcplanError as e:
        return _rejected(e)


def finish_op(g, op, layout: dict[str, str], stage: Stage) -> tuple:
    """A staged op searched: (plan, cycles, proven, None), or the rule's entry."""
    from .registry import kinds
    try:
        plan, cycles, proven = stage.staged.run()
        kinds()[op.kind].check_tensors(stage.problem, plan, {
            r: g.tensor(t, layout) for r, t in op.roles.items()})
    except TcplanError as e:
        return _rejected(e)
    return plan, cycles, proven, None


def plan_one(g, op, layout: dict[str, str], opts) -> tuple:
    """The op planned under one layout by its kind (graph_plan.py ``plan_op``)."""
    got = stage_op(g, op, layout, opts)
    return finish_op(g, op, layout, got) if isinstance(got, Stage) else got


def plan_rows(g, op, task: Rows, opts) -> list[tuple | Floor]:
    """Each layout of ``task``: its entry, or its :class:`Floor` where the floor exceeds
    the least cycles found (layouts searched in order of floor, a layout without a floor
    first)."""
    staged = [stage_op(g, op, layout, opts) for layout in task.layouts]
    floors = [s.staged.floor() if isinstance(s, Stage) else None for s in staged]
    best = task.best
    out: list[tuple | Floor] = [()] * len(staged)
    for k in sorted(range(len(staged)), key=lambda k: _first(floors[k])):
        s, f = staged[k], floors[k]
        if not isinstance(s, Stage):
            out[k] = s
        elif f is not None and best is not None and f > best:
            out[k] = Floor(f)
        else:
            entry = out[k] = finish_op(g, op, task.layouts[k], s)
            if entry[3] is None:
                cost = entry[1] or 0
                best = cost if best is None else min(best, cost)
    return out


def _first(floor: int | None) -> int:
    """The order layouts are searched in: by floor, one without a floor first."""
    return -1 if floor is None else floor


def plan_task(g, op, task: Rows | dict[str, str], opts) -> list[tuple | Floor] | tuple:
    """What a pool worker runs (sent by name): an op's :class:`Rows`, or one layout."""
    if isinstance(task, Rows):
        return plan_rows(g, op, task, opts)
    return plan_one(g, op, task, opts)


def least(kept: list) -> int | None:
    """The least cycles of an op's planned rows (kept entries), None when none has a plan."""
    costs = [k[0][1] or 0 for k in kept if not isinstance(k, Floor) and k[0][3] is None]
    return min(costs) if costs else None


@dataclass(frozen=True)
class Avoided:
    """An op's row not planned: its layout, the plan's signature and its floor."""

    layout: dict[str, str]
    signature: str
    floor: int


class Table(dict[int, list[Any]]):
    """Every op's planned rows (op index -> its rows, as a dict) with its avoided ones
    (``avoided``) and ``plan``, which plans avoided rows: given (op index, avoided) pairs,
    it adds their rows to the table."""

    def __init__(self, rows: dict[int, list[Any]] | None = None,
                 avoided: dict[int, list[Avoided]] | None = None,
                 plan: Callable[[list[tuple[int, Avoided]]], None] | None = None):
        super().__init__(rows or {})
        self.avoided = avoided or {}
        self.plan = plan

    def ensure(self, ops: list[int], fixed: dict[str, str]) -> None:
        """Under ``fixed`` layouts, every avoided row of ``ops`` that agrees with them and
        could tie or beat its op's best row that agrees, planned."""
        def agrees(layout: dict[str, str]) -> bool:
            return all(layout.get(t, c) == c for t, c in fixed.items())
        need = []
        for i in ops:
            costs = [r.cost for r in self[i] if r.ok and agrees(r.layout)]
            best = min(costs) if costs else None
            need += [(i, a) for a in self.avoided.get(i, [])
                     if agrees(a.layout) and (best is None or a.floor <= best)]
        self._plan(need)

    def complete(self, ops: list[int]) -> None:
        """Every avoided row of ``ops`` planned (the full model weighs them all)."""
        self._plan([(i, a) for i in ops for a in self.avoided.get(i, [])])

    def planned(self, i: int, layout: dict[str, str]) -> Any:
        """Op ``i``'s row under ``layout``, planned now if it was avoided (an op of a
        part solved once for all parts alike takes the row the first part chose)."""
        self._plan([(i, a) for a in self.avoided.get(i, []) if a.layout == layout])
        return next(r for r in self[i] if r.layout == layout)

    def _plan(self, pairs: list[tuple[int, Avoided]]) -> None:
        if not pairs:
            return
        assert self.plan is not None  # (a table with avoided rows has its planner)
        sigs = {a.signature for _, a in pairs}  # (made once: every op of them gets its row)
        pairs = [(i, a) for i, rows in self.avoided.items() for a in rows
                 if a.signature in sigs]
        for i, a in pairs:
            self.avoided[i].remove(a)
        self.plan(pairs)

    def avoided_plans(self) -> int:
        """The distinct op plans never made (ops of one signature share one)."""
        return len({a.signature for rows in self.avoided.values() for a in rows})


def plan_all(g, todo: dict[str, tuple], jobs: list, entries: dict[str, Any], cache, opts,
             bound: bool) -> None:
    """Every op plan of ``todo`` (signature -> (op, layout)) made, into ``entries`` and
    ``cache``; with ``bound``, the layouts of an op whose kind gives floors as one
    :class:`Rows` task, its avoided plans kept as their :class:`Floor` (an op whose other
    rows came from other ops' tasks may still need one: :meth:`Table.ensure`)."""
    from .op_pool import plan_many
    from .registry import kinds
    by_op: dict[int, list[str]] = {}  # each op whose kind gives floors: its signatures
    for op, layout, sig in jobs:
        if bound and kinds()[op.kind].graph_floors:
            by_op.setdefault(op.index, []).append(sig)
    rows_of: dict[int, list[str]] = {}
    tasks: list[tuple[Any, Any, list[str]]] = []
    for sig, (op, layout) in todo.items():
        if len(by_op.get(op.index, ())) > 1:
            rows_of.setdefault(op.index, []).append(sig)
        else:
            tasks.append((op, layout, [sig]))
    for i, sigs in rows_of.items():
        best = least([entries[s] for s in by_op[i] if s in entries])
        tasks.append((g.ops[i], Rows(tuple(todo[s][1] for s in sigs), best), sigs))
    got = plan_many(g, [(op, task) for op, task, _ in tasks], opts, plan_task)
    for (op, task, sigs), out in zip(tasks, got):
        for sig, e in zip(sigs, out if isinstance(task, Rows) else [out]):
            _keep(g, sig, op, e, entries, cache)


def plan_signatures(g, todo: dict[str, tuple], cache, opts) -> dict[str, Any]:
    """Each signature's op plan (signature -> (op, layout)): kept, or made now."""
    from .op_pool import plan_many
    out: dict[str, Any] = {}
    make = {}
    for sig, pair in todo.items():
        kept = cache.get(sig)
        if kept is None:
            make[sig] = pair
        else:
            out[sig] = kept
    for sig, e in zip(make, plan_many(g, list(make.values()), opts, plan_task)):
        _keep(g, sig, make[sig][0], e, out, cache)
    return out


def _keep(g, sig: str, op, e: tuple | Floor, entries: dict[str, Any], cache) -> None:
    """An op plan made (kept with the shifts of its op) or avoided (its floor kept)."""
    from .op_cache import op_shifts
    if isinstance(e, Floor):
        entries[sig] = e
        cache.put_floor(sig, e.cycles)
    else:
        entries[sig] = (e, op_shifts(g, op))
        cache.put(sig, entries[sig])
