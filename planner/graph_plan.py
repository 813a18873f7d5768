"""Planning a graph's layouts jointly (docs/graphs.md; docs/decisions.md item 88).

1. **Evaluate**: every op under every combination of the candidate layouts of the free
   tensors it touches is planned by its own kind (``Kind.plan``: a DMA's stream search, an
   expression's chains), giving its modelled cycles or the rule that rejects it.
2. **Choose**: one CP-SAT model picks one layout per free tensor and one evaluated
   combination per op, consistent with the layouts, minimizing the graph's cycles: the sum
   over ops (``objective: sum``, the default), the critical path through the dependency
   DAG (``objective: critical_path``: ops without a path between them overlap), or the
   makespan of the schedule on the three contexts (``objective: makespan``,
   planner/schedule.py: the same model, its durations the choice's).
4. **Schedule**: the chosen plan's schedule (its makespan, each context's busy time, the
   critical path), whatever the objective.
3. **Explain**: each op's "has a plan" is an assumption literal; an infeasible model's
   core, shrunk by deletion, is a minimal set of ops whose layout needs conflict.

The per-op plans are exact (each op's own search is optimal for its layout), so the joint
choice is the graph's optimum over the candidate layouts; tests check it against brute
force over every assignment.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import networkx as nx

from tcplan.model import limits
from tcplan.model.rules import TcplanError, fail

from . import cpsat
from .cpsat import solver
from .graph import Graph, GraphOp
from .graph_bound import Table
from .outcome import Found, NoPlan, TimedOut


@dataclass
class OpChoice:
    """One op under one assignment of its free tensors' layouts: its plan and cycles (None
    for a kind whose cycles are not modelled: it counts 0), or the error that rejects it.
    Its problem (the op as a problem of its kind) is made when first asked for."""

    layout: dict[str, str]
    plan: Any = None
    cycles: int | None = None
    error: TcplanError | None = None
    proven: bool = True  # the op's own plan proven optimal (not cut by its time limit)
    signature: str = ""  # the op signature its plan is kept under ("": not recorded)
    made: Any = field(default=None, repr=False)  # () -> its problem
    _problem: Any = field(default=None, repr=False)

    @property
    def problem(self) -> Any:
        if self._problem is None and self.made is not None:
            make, self.made = self.made, None
            try:
                self._problem = make()
            except TcplanError:  # (the row's error says why)
                self._problem = None
        return self._problem

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a plan cached on disk, sent from a worker) with its problem made."""
        return {**self.__dict__, "_problem": self.problem, "made": None}

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def cost(self) -> int:
        return self.cycles or 0


@dataclass(frozen=True)
class ConflictOp:
    """One op of a graph's conflict: the rules that reject its layouts (an example message
    of each) and the layouts it has a plan with."""

    op: str
    kind: str
    rules: list[str]
    examples: dict[str, str]
    layouts_with_a_plan: list[dict[str, str]]


@dataclass(frozen=True)
class GraphConflict:
    """A minimal set of ops whose layout needs no choice meets (``graph-no-layout``); empty
    when the time limit stopped the choice first."""

    ops: tuple[ConflictOp, ...] = ()


@dataclass
class GraphPlan:
    layout: dict[str, str]  # free tensor -> its chosen Element
    ops: list[OpChoice]  # per op, in the file's order
    objective: str
    sum_cycles: int
    critical_path_cycles: int
    critical_path: list[str]  # op names along it
    status: str = "optimal"
    evaluations: int = 0
    times: dict[str, float] = field(default_factory=dict)
    unmodelled: list[str] = field(default_factory=list)  # ops whose cycles count 0
    schedule: Any = None  # planner/schedule.py Schedule of the chosen plan
    parts: int = 1  # independent parts solved (planner/graph_parts.py)
    op_plans: dict[str, Any] = field(default_factory=dict)  # OpPlans.to_json(): reuse

    @property
    def cycles(self) -> int:
        if self.objective == "makespan" and self.schedule is not None:
            return self.schedule.makespan
        return self.sum_cycles if self.objective == "sum" else self.critical_path_cycles

    def to_json(self) -> dict[str, Any]:
        """What `tcplan lower --json` prints of a graph: the layouts and each op's plan."""
        return {"status": self.status, "objective": self.objective, "cycles": self.cycles,
                "sum_cycles": self.sum_cycles,
                "critical_path_cycles": self.critical_path_cycles,
                "critical_path": self.critical_path, "unmodelled": self.unmodelled,
                "layouts": self.layout,
                **({"schedule": self.schedule.to_json()} if self.schedule is not None
                   else {}),
                "ops": [{"op": r.problem.name, "kind": r.problem.kind, "cycles": r.cycles,
                         "layout": r.layout, "proven": r.proven,
                         **({"plan": r.plan.to_json()} if hasattr(r.plan, "to_json")
                            else {})} for r in self.ops]}


def evaluate(g: Graph, opts, bound: bool = False) -> Table:
    """Every op under every combination of its free tensors' candidate layouts, each
    distinct op plan made once (planner/op_cache.py: ``opts.op_plans``, or a table of this
    call's own), the new ones on a process pool or a Dask cluster (planner/op_pool.py).
    With ``bound``, an op whose kind gives floors is planned by branch and bound over its
    layouts (planner/graph_bound.py): the table keeps the plans it avoided, to be made
    when the joint choice needs them."""
    from .graph_bound import Avoided, Floor, Table, plan_all
    from .graph_orders import Lazy
    from .graph_shared import fill_shared
    from .op_cache import OpPlans, moved, op_shifts, op_signature
    cache = opts.op_plans if opts.op_plans is not None else OpPlans()
    opts = dataclasses.replace(opts, op_plans=cache)  # (op_choice's rows: the same table)
    lazy = Lazy(g)  # (ops that order a large free tensor themselves: planner/graph_orders.py)
    signatures: dict[str, str] = {}  # key -> the op signature (the run's twin keys)
    jobs = []
    for op in (op for op in g.ops if op.index not in lazy.own):
        for layout in g.choices(op):
            sig = op_signature(g, op, layout)
            signatures[_key(op, sig, opts)] = sig
            jobs.append((op, layout, _key(op, sig, opts)))
    _check_plans(jobs)
    entries: dict[str, Any] = {}
    todo: dict[str, tuple[GraphOp, dict[str, str]]] = {}
    for op, layout, sig in jobs:
        if sig in entries or sig in todo:
            cache.hits += 1
            continue
        got = cache.get(sig)
        floor = cache.floor(sig) if got is None and bound else None
        if got is None and floor is None:
            todo[sig] = (op, layout)
        else:
            entries[sig] = got if floor is None else Floor(floor)
    plan_all(g, todo, jobs, entries, cache, opts, bound)

    def row(op: GraphOp, layout: dict[str, str], kept, key: str) -> OpChoice:
        got = _row(g, op, layout, moved(op, kept, op_shifts(g, op),
                                        functools.partial(g.op_problem, op, layout)))
        got.signature = signatures[key]
        return got
    table = Table({op.index: [] for op in g.ops},
                  plan=lambda pairs: _plan_avoided(g, table, pairs, opts, cache, row))
    for op, layout, sig in jobs:
        e = entries[sig]
        if isinstance(e, Floor):
            table.avoided.setdefault(op.index, []).append(Avoided(layout, sig, e.cycles))
        else:
            table[op.index].append(row(op, layout, e, sig))
    table.ensure(list(g.order), {})  # (an op's rows from other ops' tasks: a floor it needs)
    lazy.fill(table, opts, op_choice)  # (graph_orders: their best orders, branch and bound)
    fill_shared(g, lazy.shared, table, lazy.choices, opts, op_choice,
                functools.partial(_part_value, opts), OpChoice)  # (ordered jointly)
    return table


def _part_value(opts, sub: Graph, rows: dict[int, list[OpChoice]],
                complete: Callable[[], dict[int, list[OpChoice]]]
                ) -> tuple[tuple[int, ...] | None, bool]:
    """What a part's joint choice over ``rows`` is worth (planner/graph_shared.py): its
    objective, then its sum (None: no plan), and whether that is proven."""
    out = choose(sub, rows, None, opts.time_limit, opts.seed, complete)
    if not isinstance(out, Found):
        return None, isinstance(out, NoPlan)
    r = out.record
    if sub.objective == "makespan":
        from .schedule import schedule_by_launch
        sched = schedule_by_launch(sub, r, opts.time_limit, opts.seed)
        return (sched.makespan, r.sum_cycles), out.proven and sched.status == "optimal"
    if sub.objective == "critical_path":
        return (r.critical_path_cycles, r.sum_cycles), out.proven
    return (r.sum_cycles,), out.proven


def _check_plans(jobs: list) -> None:
    """The distinct op plans a graph asks for, within ``GRAPH_EVALUATIONS_MAX``."""
    counts: dict[str, int] = {}
    for op, _, sig in jobs:
        counts[op.name] = counts.get(op.name, 0) + 1
    limits.check(len({sig for _, _, sig in jobs}), limits.GRAPH_EVALUATIONS_MAX,
                 "distinct layout choices of the graph's ops", "plans",
                 {f"op {n}": c for n, c in counts.items()}, limits.PLANNER,
                 "give the free tensors fewer candidate orders")


def _plan_avoided(g: Graph, table, pairs: list, opts, cache, row) -> None:
    """Avoided rows planned (each signature once) and added to ``table``."""
    from .graph_bound import plan_signatures
    kept = plan_signatures(g, {a.signature: (g.ops[i], a.layout) for i, a in pairs},
                           cache, opts)
    for i, a in pairs:
        table[i].append(row(g.ops[i], a.layout, kept[a.signature], a.signature))


def _key(op: GraphOp, signature: str, opts) -> str:
    """An op plan's key: its signature, or with ``opts.flat`` (the method before issue 32,
    the benchmarks' baseline) its op's own, so that nothing is shared."""
    return f"{op.index}\0{signature}" if opts.flat else signature


def _row(g: Graph, op: GraphOp, layout: dict[str, str], entry) -> OpChoice:
    """An op's choice from its plan (shared by every op of its signature)."""
    plan, cycles, proven, error = entry
    return OpChoice(layout, plan, cycles, error, proven,
                    made=lambda: g.op_problem(op, layout))


def op_choice(g: Graph, op: GraphOp, layout: dict[str, str], opts) -> OpChoice:
    """One op under one layout, from ``opts.op_plans`` when an op of its signature was
    planned before."""
    from .op_cache import moved, op_shifts, op_signature
    sig, cache, shifts = op_signature(g, op, layout), opts.op_plans, op_shifts(g, op)
    kept = cache.get(sig) if cache is not None else None
    if kept is None:
        kept = (plan_op(g, op, layout, opts), shifts)
        if cache is not None:
            cache.put(sig, kept)
    return _row(g, op, layout, moved(op, kept, shifts,
                                     functools.partial(g.op_problem, op, layout)))


def plan_op(g: Graph, op: GraphOp, layout: dict[str, str], opts) -> tuple:
    """The op planned under one layout by its kind: (plan, cycles, proven, None), or
    (None, None, True, the rule that rejects it).  What is not a rule rejecting the layout
    (an input mistake, a limit, the time limit) is raised: no answer for it."""
    from .graph_bound import plan_one
    return plan_one(g, op, layout, opts)


#: what the joint choice returns (planner/outcome.py)
JointChoice = Found[GraphPlan] | NoPlan[GraphConflict] | TimedOut[GraphConflict]


def path_cycles(g: Graph, cycles: dict[int, int]) -> tuple[int, list[str]]:
    """The critical path: the longest chain of dependent ops, by their cycles (networkx's
    longest path of the DAG weighted by the cycles of the op each edge enters)."""
    start = -1  # the source node (op indexes count from 0)
    w: nx.DiGraph[int] = nx.DiGraph()
    w.add_node(start)
    for i in g.order:
        w.add_edge(start, i, weight=cycles[i])
    for u, v in g.dag.edges:
        w.add_edge(u, v, weight=cycles[v])
    path = nx.dag_longest_path(w, weight="weight", topo_order=[start, *g.order])
    return (sum(cycles[i] for i in path[1:]), [g.ops[i].name for i in path[1:]])


def choose(g: Graph, table: dict[int, list[OpChoice]], objective: str | None = None,
           time_limit: float = 10.0, seed: int = 0,
           complete: Callable[[], dict[int, list[OpChoice]]] | None = None) -> JointChoice:
    """The joint choice: CP-SAT over the free tensors' layouts and the ops' combinations;
    :class:`NoPlan` (``graph-no-layout``) with a minimal conflict of ops when none exists,
    :class:`TimedOut` when the time limit stops it first.  ``complete``: the rows with
    the plans branch and bound avoided (planner/graph_bound.py), made when the ideal choice
    over the rows planned fails."""
    from ortools.sat.python import cp_model
    objective = objective or g.objective
    from .graph_ideal import ideal_choice
    from .graph_orders import candidates  # (of a lazy Orders, those the rows name)
    ideal = ideal_choice(g, table, objective, time_limit, seed,
                         lambda n: candidates(g, table, n))
    if ideal is not None:  # (every op at its best: optimal, no model to weigh them)
        return _found(g, table, *ideal, objective, True)
    table = complete() if complete is not None else table
    m = cpsat.model()
    x = {n: {c: m.new_bool_var(f"{n}={c}") for c in candidates(g, table, n)}
         for n in g.free()}
    for n, lits in x.items():
        m.add_exactly_one(lits.values())
    runs = {op.index: m.new_bool_var(f"runs {op.name}") for op in g.ops}
    y: dict[int, list[tuple[Any, OpChoice]]] = {}
    for op in g.ops:
        y[op.index] = []
        for row in table[op.index]:
            if not row.ok:
                continue
            lit = m.new_bool_var(f"{op.name} @ {row.layout}")
            for n, c in row.layout.items():
                m.add_implication(lit, x[n][c])
            y[op.index].append((lit, row))
        m.add(sum(lit for lit, _ in y[op.index]) == 1).only_enforce_if(runs[op.index])
    cyc = {i: sum(lit * row.cost for lit, row in rows) for i, rows in y.items()}
    total = sum(cyc.values())
    if objective == "critical_path":
        hi = sum(max((r.cost for _, r in rows), default=0) for rows in y.values())
        finish = {i: m.new_int_var(0, hi, f"finish {i}") for i in y}
        for i in g.order:
            m.add(finish[i] >= cyc[i])
            for p in g.dag.predecessors(i):
                m.add(finish[i] >= finish[p] + cyc[i])
        span = m.new_int_var(0, hi, "critical path")
        for i in finish:
            m.add(span >= finish[i])
        m.minimize(span * (hi + 1) + total)  # the path, then the sum
    elif objective == "makespan":
        hi = sum(max((r.cost for _, r in rows), default=0) for rows in y.values())
        span = _makespan(g, m, y, cyc, hi)
        m.minimize(span * (hi + 1) + total)  # the makespan, then the sum
    else:
        m.minimize(total)
    m.add_assumptions(list(runs.values()))
    sv = solver(time_limit, seed)
    st = sv.solve(m)
    if st == cp_model.MODEL_INVALID:  # pragma: no cover - the model's own mistake
        raise RuntimeError(f"the joint choice's model is invalid: {m.validate()}")
    if st == cp_model.INFEASIBLE:
        core = _conflict(g, m, runs, sv, time_limit, seed)
        return NoPlan(conflict_error(g, table, core), conflict_of(table, core))
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return TimedOut(fail("plan-time-limit", limit=f"{time_limit:g}", lowered=0),
                        GraphConflict())
    layout = {n: next(c for c, lit in lits.items() if sv.value(lit)) for n, lits in x.items()}
    chosen = [next(r for lit, r in y[op.index] if sv.value(lit)) for op in g.ops]
    return _found(g, table, layout, chosen, objective, st == cp_model.OPTIMAL)


def _found(g: Graph, table: dict[int, list[OpChoice]], layout: dict[str, str],
           chosen: list[OpChoice], objective: str, optimal: bool) -> JointChoice:
    """The joint choice found (``optimal``: proven so, as far as the choice goes)."""
    per_op = {op.index: chosen[op.index].cost for op in g.ops}
    span_c, path = path_cycles(g, per_op)
    proven = optimal and all(r.proven for r in chosen)
    return Found(GraphPlan(layout, chosen, objective, sum(per_op.values()), span_c, path,
                           "optimal" if proven else "feasible",
                           sum(len(r) for r in table.values()),
                           unmodelled=[op.name for op in g.ops
                                       if chosen[op.index].cycles is None]), proven)


def _makespan(g: Graph, m, y: dict[int, list[tuple[Any, OpChoice]]], cyc: dict[int, Any],
              hi: int):
    """The schedule's model (planner/schedule.py ``add_schedule``) over the choice: a
    task's duration the largest of its ops' chosen cycles, its share of the bank-access
    limit the sum of its ops' chosen plans' (a path's Fetch and Commit run at once)."""
    from .registry import kinds
    from .schedule import add_schedule, part_cycles, tasks_and_hazards
    tasks, hazards = tasks_and_hazards(g)
    durations, bank = [], []
    top = 0
    for t in tasks:
        d = m.new_int_var(0, hi, f"cycles {t.name}")
        m.add_max_equality(d, [cyc[i] if not t.part else sum(
            lit * part_cycles(g, t, i, r.cost, r.plan) for lit, r in y[i]) for i in t.ops])
        durations.append(d)
        accesses = {i: [kinds()[g.ops[i].kind].graph_bank_accesses(r.plan)
                        if t.part != "prelude" else 0 for _, r in y[i]] for i in t.ops}
        most = sum(max(a, default=0) for a in accesses.values())
        b = m.new_int_var(0, most, f"bank {t.name}")  # (a cumulative's demand: one variable)
        m.add(b == sum(lit * a for i in t.ops for (lit, _), a in zip(y[i], accesses[i])))
        bank.append(b)
        top += most if t.context != "dma" else 0
    return add_schedule(m, tasks, hazards, durations, bank, top, hi).makespan



def _conflict(g: Graph, m, runs, sv, time_limit: float, seed: int) -> list[GraphOp]:
    """A minimal set of ops no choice of layouts plans together (the model's core, shrunk
    by deletion)."""
    from ortools.sat.python import cp_model
    core_idx = set(sv.sufficient_assumptions_for_infeasibility())
    core = [i for i, lit in runs.items() if lit.index in core_idx] or list(runs)
    k = 0
    while k < len(core):  # deletion: drop an op whenever the rest still conflict
        trial = core[:k] + core[k + 1:]
        m.clear_assumptions()
        m.add_assumptions([runs[i] for i in trial])
        if trial and solver(time_limit, seed).solve(m) == cp_model.INFEASIBLE:
            core = trial
        else:
            k += 1
    return [g.ops[i] for i in core]


def conflict_error(g: Graph, table, core: list[GraphOp]) -> TcplanError:
    """Each op of the conflict in words: the layouts it has a plan with, the rule that
    rejects the others."""
    lines = []
    for op in core:
        ok = [r.layout for r in table[op.index] if r.ok]
        bad: dict[str, list[str]] = {}
        for r in table[op.index]:
            if r.error is not None:
                bad.setdefault(_rule(r.error), []).append(_layout_text(r.layout))
        need = ("has no plan with any layout" if not ok else "needs "
                + " or ".join(_layout_text(lay) for lay in ok[:3])
                + (f" (or {len(ok) - 3} more)" if len(ok) > 3 else ""))
        why = "; ".join(f"[{rule}] rejects {', '.join(v[:2])}" + (
            f" and {len(v) - 2} more" if len(v) > 2 else "") for rule, v in bad.items())
        lines.append(f"op {op.name} ({op.kind} {', '.join(op.reads)} -> "
                     f"{', '.join(op.writes)}) {need}"
                     + (f" ({why})" if why else ""))
    shared = sorted({t for op in core for t in g.op_free(op)})
    remedy = (f"give the shared tensor(s) ({', '.join(shared)}) a candidate layout each of "
              "these ops has a plan with, or change what rejects the others" if shared else
              f"op {core[0].name} has no plan in its given layouts: change what its rule "
              "names (run tcplan explain on the op written as a problem of its own)")
    return fail("graph-no-layout", ops=", ".join(op.name for op in core),
                detail="; ".join(lines), remedy=remedy)


def conflict_of(table, core: list[GraphOp]) -> GraphConflict:
    """Each op of the conflict as a value: the rules that reject its layouts, an example
    of each, and the layouts it has a plan with."""
    return GraphConflict(tuple(ConflictOp(
        op.name, op.kind,
        sorted({_rule(r.error) for r in table[op.index] if r.error is not None}),
        {_rule(r.error): r.error.violations[0].message[:160]
         for r in reversed(table[op.index]) if r.error is not None},
        [r.layout for r in table[op.index] if r.ok]) for op in core))


def _rule(err: TcplanError) -> str:
    """The rule that rejects an op's layout; for a stream search with no legal order, the
    rules in its conflict too (``plan-no-layout: dma-hbm-dm-align``)."""
    v = err.violations[0]
    inner = v.detail.get("rules", "") if v.rule == "plan-no-layout" else ""
    inner = str(inner).removeprefix("in conflict: ")
    return f"{v.rule}: {inner}" if inner else v.rule


def _layout_text(layout: dict[str, str]) -> str:
    return ", ".join(f"{n} {c}" for n, c in layout.items()) or "its given layouts"


def plan_graph(g: Graph, opts) -> JointChoice:
    """Evaluate every op's layout choices (each distinct plan once: planner/op_cache.py),
    then choose jointly, part by part (planner/graph_parts.py; what no layout changes, an
    input mistake or a limit, is raised by the evaluation)."""
    from .graph_chain import chains
    from .graph_parts import parts
    from .schedule import schedule_by_launch, schedule_of
    t0 = time.perf_counter()
    opts = with_op_plans(opts)
    table = evaluate(g, opts, bound=not opts.flat)
    t1 = time.perf_counter()
    pieces = parts(g) if not opts.flat else [list(g.order)]
    chained = None if opts.flat else chains(g)
    if chained is not None:
        out = choose_chains(g, table, chained, opts)
        pieces = [p for path, _ in chained for p in path]
    else:
        out = choose_whole(g, table, opts) if len(pieces) == 1 else \
            choose_parts(g, table, pieces, opts)
    opts.op_plans.avoided += table.avoided_plans()
    if isinstance(out, Found):
        t2 = time.perf_counter()
        out.record.schedule = (schedule_of if opts.flat else schedule_by_launch)(
            g, out.record, opts.time_limit, opts.seed)
        if out.record.schedule.status != "optimal" and g.objective == "makespan":
            out.record.status = "feasible"
        out.record.times = {"evaluate": round(t1 - t0, 3), "choose": round(t2 - t1, 3),
                            "schedule": round(time.perf_counter() - t2, 3)}
        out.record.parts = len(pieces)
        out.record.op_plans = opts.op_plans.to_json()
    return out


def choose_whole(g: Graph, table: Table, opts) -> JointChoice:
    """The joint choice over the whole graph (the avoided plans made if it needs them)."""
    def complete() -> Table:
        table.complete(list(g.order))
        return table
    return choose(g, table, None, opts.time_limit, opts.seed, complete)


def with_op_plans(opts):
    """``opts`` with a table of op plans (over the disk cache, planner/op_cache.py)."""
    from .op_cache import DiskCache, OpPlans
    if opts.flat:
        return dataclasses.replace(opts, op_plans=OpPlans(), jobs=1)
    if opts.op_plans is not None:
        return dataclasses.replace(opts, rules_first=True)
    return dataclasses.replace(opts, rules_first=True, op_plans=OpPlans(
        disk=DiskCache.default(f"seed {opts.seed}")))


def choose_chains(g: Graph, table: Table, chained: list, opts
                  ) -> JointChoice:
    """The joint choice of pieces chained through boundary tensors (planner/graph_chain.py):
    each path's boundary candidates by dynamic programming over the pieces' own choices,
    then each piece's choice under them; where no choice plans a path, the flat choice (its
    conflict says why)."""
    from .graph_chain import best_path, piece_value
    from .graph_orders import candidates
    from .schedule import schedule_by_launch
    solved: dict[tuple, tuple[Graph, GraphPlan]] = {}
    values: dict[tuple, tuple[int, ...]] = {}

    def value(piece: list[int], fixed: dict[str, str]) -> tuple[int, ...] | None:
        got = solve_part(g, table, piece, fixed, opts, solved)
        if not isinstance(got, tuple):
            return None
        base, record, key, _ = got
        if key not in values:
            values[key] = piece_value(base, record, g.objective, lambda s, r: schedule_by_launch(
                s, r, opts.time_limit, opts.seed))
        return values[key]
    pieces, fixed = [], []
    for path, links in chained:
        best = best_path(path, links, lambda t: candidates(g, table, t), value)
        if best is None:
            return choose_whole(g, table, opts)
        pieces += path
        fixed += best[1]
    return choose_parts(g, table, pieces, opts, fixed, solved)


def solve_part(g: Graph, table: Table, ops: list[int],
               fixed: dict[str, str], opts, solved: dict
               ) -> tuple[Graph, GraphPlan, tuple, Graph] | JointChoice:
    """A part's joint choice (``fixed``: its boundary tensors' candidates), as (the part it
    was solved as, its plan, the key it was solved under, the part itself), each part of
    one signature and one boundary choice solved once (``solved``)."""
    from .graph_parts import appearance, part_signature, restrict
    sub = restrict(g, ops)
    at = {t: k for k, t in enumerate(appearance(sub))}
    key = (part_signature(sub), tuple(sorted((at[t], c) for t, c in fixed.items())))
    if key not in solved:
        def rows() -> dict[int, list[OpChoice]]:
            return {k: [r for r in table[i] if all(r.layout.get(t, c) == c
                                                   for t, c in fixed.items())]
                    for k, i in enumerate(ops)}

        def complete() -> dict[int, list[OpChoice]]:
            table.complete(ops)
            return rows()
        table.ensure(ops, fixed)
        out = choose(sub, rows(), None, opts.time_limit, opts.seed, complete)
        if not isinstance(out, Found):
            return out
        solved[key] = (sub, out.record)
    return (*solved[key], key, sub)


def choose_parts(g: Graph, table: Table, pieces: list[list[int]],
                 opts, fixed: list[dict[str, str]] | None = None, solved: dict | None = None
                 ) -> JointChoice:
    """The joint choice of each part on its own (its optimum is the graph's there; ``fixed``:
    each part's boundary choice, planner/graph_chain.py), each distinct part solved once
    and mapped onto the parts of its signature."""
    from .graph_parts import rename
    solved = {} if solved is None else solved
    layout: dict[str, str] = {}
    chosen: dict[int, OpChoice] = {}
    proven = True
    for k, ops in enumerate(pieces):
        got = solve_part(g, table, ops, fixed[k] if fixed else {}, opts, solved)
        if not isinstance(got, tuple):
            return got
        base, record, _, sub = got
        names = rename(base, sub)
        layout.update({names[n]: c for n, c in record.layout.items()})
        for j, row in enumerate(record.ops):
            want = {names[n]: c for n, c in row.layout.items()}
            chosen[ops[j]] = table.planned(ops[j], want)
        proven = proven and record.status == "optimal"
    per_op = {op.index: chosen[op.index].cost for op in g.ops}
    span, path = path_cycles(g, per_op)
    rows = [chosen[op.index] for op in g.ops]
    # (a free tensor no op touches keeps its first candidate: nothing tells them apart)
    free = {n: layout.get(n) or (g.tensors[n].candidates or [""])[0] for n in g.free()}
    return Found(GraphPlan(free, rows, g.objective,
                           sum(per_op.values()), span, path,
                           "optimal" if proven else "feasible",
                           sum(len(r) for r in table.values()),
                           unmodelled=[op.name for op in g.ops if chosen[op.index].cycles
                                       is None]), proven)


def greedy(g: Graph, table: dict[int, list[OpChoice]]) -> GraphPlan | None:
    """Each op planned alone, in topological order: its best combination given the layouts
    earlier ops fixed (the first op's layout fixed by the first op): the baseline a joint
    plan is compared with.  None when an op finds no plan under the layouts fixed before."""
    fixed: dict[str, str] = {}
    chosen: dict[int, OpChoice] = {}
    for i in g.order:
        rows = [r for r in table[i] if r.ok
                and all(fixed.get(n, c) == c for n, c in r.layout.items())]
        if not rows:
            return None
        best = min(rows, key=lambda r: r.cost)
        fixed.update(best.layout)
        chosen[i] = best
    per_op = {i: chosen[i].cost for i in chosen}
    span, path = path_cycles(g, per_op)
    return GraphPlan(fixed, [chosen[op.index] for op in g.ops], g.objective,
                     sum(per_op.values()), span, path, "greedy")
