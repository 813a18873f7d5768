"""The ideal joint choice: every op at its best, when the layouts allow it (issue 32; docs/
decisions.md item 136).

The joint choice (planner/graph_plan.py ``choose``) weighs each op's rows against the
others' through the tensors they share. Where some assignment of the free tensors' layouts
lets every op run a row that is its best in everything the objective reads of it (its
cycles; under ``makespan`` also its prelude's and its rest's cycles and its bank accesses),
that assignment is optimal: the sum, the critical path and the schedule's makespan never
grow when an op's cycles or bank accesses shrink (a schedule that fits longer or hungrier
tasks fits shorter and leaner ones), so no other assignment does better. Finding it is a
satisfiability question (one row per op, its layouts agreeing), far smaller than the
scheduling model: a decode layer's choice drops from 2.2 s to 0.3 s. Where no such
assignment exists, the full model chooses.
"""

from __future__ import annotations

from typing import Any, Callable

from .cpsat import model, solver


def ideal_rows(g, table: dict[int, list], objective: str) -> dict[int, list] | None:
    """Per op, its rows best in every measure ``objective`` reads (None when an op has
    no row, or no row is best in all of them at once)."""
    measure = _measure(g, objective)
    out: dict[int, list] = {}
    for op in g.ops:
        rows = [r for r in table[op.index] if r.ok]
        if not rows:
            return None
        values = [measure(op.index, r) for r in rows]
        best = tuple(min(v[k] for v in values) for k in range(len(values[0])))
        out[op.index] = [r for r, v in zip(rows, values) if v == best]
        if not out[op.index]:
            return None
    return out


def _measure(g, objective: str) -> Callable[[int, Any], tuple[int, ...]]:
    """What the objective reads of an op's row, each the less the better."""
    from .registry import kinds

    def cycles(i: int, r) -> tuple[int, ...]:
        return (r.cost,)

    def scheduled(i: int, r) -> tuple[int, ...]:
        kind = kinds()[g.ops[i].kind]
        pre = kind.graph_prelude_cycles(r.plan) if r.plan is not None else 0
        return (r.cost, pre, r.cost - pre, kind.graph_bank_accesses(r.plan))
    return scheduled if objective == "makespan" else cycles


def ideal_choice(g, table: dict[int, list], objective: str, time_limit: float, seed: int,
                 candidates: Callable[[str], list[str]]
                 ) -> tuple[dict[str, str], list] | None:
    """(each free tensor's layout, each op's row) with every op at an ideal row, or None
    when the rows' layouts cannot agree (or the search for it runs out of time)."""
    from ortools.sat.python import cp_model
    best = ideal_rows(g, table, objective)
    if best is None:
        return None
    m = model()
    x = {n: {c: m.new_bool_var(f"{n}={c}") for c in candidates(n)} for n in g.free()}
    for lits in x.values():
        m.add_exactly_one(lits.values())
    pick: dict[int, list[tuple[Any, Any]]] = {}
    for i, rows in best.items():
        pick[i] = []
        for r in rows:
            if any(c not in x[n] for n, c in r.layout.items()):
                continue
            lit = m.new_bool_var(f"op {i} @ {r.layout}")
            for n, c in r.layout.items():
                m.add_implication(lit, x[n][c])
            pick[i].append((lit, r))
        m.add_exactly_one(lit for lit, _ in pick[i])
    sv = solver(time_limit, seed)
    if sv.solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    layout = {n: next(c for c, lit in lits.items() if sv.value(lit)) for n, lits in x.items()}
    chosen = [next(r for lit, r in pick[op.index] if sv.value(lit)) for op in g.ops]
    return layout, chosen
