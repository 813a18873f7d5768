"""A graph's ops scheduled on the three contexts (book: scheduling/schedule.md; issue 30,
item 3; docs/graphs.md 'The schedule').

The main context drives the Tensor Unit, the sub context its register-file loads, the DMA
context the moves between HBM and DM.  Each context runs its operations one at a time;
operations of different contexts overlap unless

* a **hazard** orders them: a reader waits for the writer of its tensor (read after
  write); where two tensors share bytes (a register file reused, docs/decisions.md item
  104), the second's writer waits for the first's readers (write after read) and writer
  (write after write);
* a **shared resource** does: the Vector Engine, which a chain, the Cast Engine and the
  Inter-Slice Reducer occupy, serves one context at a time;
* the **bank-access limit** does: while a DMA runs, the consecutive accesses of every
  running Fetch and Commit to one DM bank, and the DMA's own, must stay below 64 in total
  (the guide's 'cumulative' limit; a DMA counts 1).

A Tensor Unit path (a Fetch, the engines its stream passes, a Commit or a register-file
store: planner/pipeline.py) is one task, its cycles the pipeline's (its slowest op).  CP-SAT
places every task: one interval each, one ``NoOverlap`` per context and per shared
resource, a cumulative for the bank limit, the hazards as precedences; it minimizes the
makespan, then the sum of the starts (every task as early as the makespan allows).
:func:`add_schedule` is that model's one helper, shared by the schedule of a chosen plan
(:func:`schedule_of`) and by a graph's joint choice under ``objective: makespan``
(planner/graph_plan.py), where the durations are the choice's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import networkx as nx

from tcplan.model import hardware as hw

from . import cpsat
from .cpsat import solver

#: the contexts, in the order a schedule prints them (book: scheduling/schedule.md)
CONTEXTS = hw.SCHEDULE_CONTEXTS


@dataclass(frozen=True)
class Task:
    """Ops scheduled as one: a Tensor Unit path or an op alone (``ops``: graph indexes in
    the graph's order), its context and the resources it holds besides its context."""

    name: str
    ops: tuple[int, ...]
    context: str
    resources: frozenset[str]
    #: "" the ops whole; "prelude" or "rest": an op's two parts (``Kind.graph_prelude``)
    part: str = ""


@dataclass(frozen=True)
class Hazard:
    """Task ``after`` waits for task ``before`` to end, because of ``tensor``."""

    before: int
    after: int
    kind: str  # "read after write", "write after read", "write after write"
    tensor: str


@dataclass(frozen=True)
class Timed:
    """A task placed: its start, cycles and share of the bank-access limit."""

    task: Task
    start: int
    cycles: int
    bank_accesses: int

    @property
    def end(self) -> int:
        return self.start + self.cycles


@dataclass(frozen=True)
class Wait:
    """One step of the critical path: the task, and what it waited for (``after``: the
    task ending as it starts; ``why``: the hazard, context or resource; both None for
    the path's first task: it starts at 0, or (a schedule not proven, with gaps) nothing
    ends as it starts)."""

    task: str
    after: str | None
    why: str | None


@dataclass(frozen=True)
class Schedule:
    timed: tuple[Timed, ...]
    hazards: tuple[Hazard, ...]
    makespan: int
    status: str  # "optimal" or "feasible" (the time limit cut the proof)
    critical: tuple[Wait, ...]
    mac_use: float  # multiplier-cycles busy, summed over contractions (utilization x cycles)

    def busy(self) -> dict[str, int]:
        """Per context, the cycles a task runs on it."""
        out = {c: 0 for c in CONTEXTS}
        for t in self.timed:
            out[t.task.context] += t.cycles
        return out

    @property
    def mac_utilization(self) -> float:
        """The multipliers' use over the makespan (0 without a contraction)."""
        return self.mac_use / self.makespan if self.makespan else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"makespan": self.makespan, "status": self.status, "busy": self.busy(),
                "mac_utilization": round(self.mac_utilization, 6),
                "tasks": [{"task": t.task.name, "context": t.task.context,
                           "start": t.start, "cycles": t.cycles, "end": t.end,
                           "ops": list(t.task.ops), "bank_accesses": t.bank_accesses,
                           "resources": sorted(t.task.resources),
                           **({"part": t.task.part} if t.task.part else {})}
                          for t in self.timed],
                "hazards": [{"before": self.timed[h.before].task.name,
                             "after": self.timed[h.after].task.name, "kind": h.kind,
                             "tensor": h.tensor} for h in self.hazards],
                "critical_path": [{"task": w.task, "after": w.after, "why": w.why}
                                  for w in self.critical]}

    def text(self) -> str:
        busy = self.busy()
        head = (f"  schedule: makespan {self.makespan:,} cycles ({self.status}); busy "
                + ", ".join(f"{c} {busy[c]:,}" for c in CONTEXTS)
                + (f"; MAC utilization over the makespan {self.mac_utilization:.4f}"
                   if self.mac_use else ""))
        rows = [f"    {t.task.context:<4} {t.start:>9,} .. {t.end:>9,}  {t.task.name}"
                for t in sorted(self.timed, key=lambda t: (t.start, CONTEXTS.index(
                    t.task.context)))]
        path = [f"      {w.task}" + ("" if w.why is None else f" (waits: {w.why})")
                for w in self.critical]
        return "\n".join([head, *rows, "    critical path, first to last:", *path])

    def trace(self) -> dict[str, Any]:
        """The schedule in the Trace Event Format (Perfetto, chrome://tracing): one thread
        per context, a complete event per task, a flow arrow per hazard.  Timestamps are
        cycles (the format's unit is the microsecond: one cycle shows as 1 us)."""
        tid = {c: k + 1 for k, c in enumerate(CONTEXTS)}
        ev: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 1,
                                     "args": {"name": "tcplan schedule"}}]
        ev += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid[c],
                "args": {"name": f"{c} context"}} for c in CONTEXTS]
        for t in self.timed:
            ev.append({"name": t.task.name, "cat": t.task.context, "ph": "X", "pid": 1,
                       "tid": tid[t.task.context], "ts": t.start, "dur": t.cycles,
                       "args": {"cycles": t.cycles, "ops": list(t.task.ops),
                                "bank_accesses": t.bank_accesses,
                                **({"part": t.task.part} if t.task.part else {})}})
        for k, h in enumerate(self.hazards):
            a, b = self.timed[h.before], self.timed[h.after]
            common = {"name": f"{h.kind} {h.tensor}", "cat": "hazard", "pid": 1, "id": k}
            ev.append({**common, "ph": "s", "tid": tid[a.task.context], "ts": a.end - (
                1 if a.cycles else 0)})
            ev.append({**common, "ph": "f", "bp": "e", "tid": tid[b.task.context],
                       "ts": b.start})
        return {"traceEvents": ev,
                "otherData": {"makespan_cycles": self.makespan, "status": self.status}}


# ---- the tasks and their hazards (of a graph, whatever its layouts) -------------------------
def tasks_of(g) -> list[Task]:
    """The graph's tasks: each Tensor Unit path (ops linked by stream tensors) one task on
    the sub context when every Fetch or Commit of it that names a context names sub, else
    the main; every other op a task of its own on its kind's context."""
    from .registry import kinds
    streams = {n for n, t in g.tensors.items() if t.spec.get("tier") == "stream"}
    links: nx.Graph = nx.Graph()
    links.add_nodes_from(op.index for op in g.ops)
    writer = {t: op.index for op in g.ops for t in op.writes if t in streams}
    for op in g.ops:
        for t in op.reads:
            if t in writer:
                links.add_edge(writer[t], op.index)
    rank = {i: k for k, i in enumerate(g.order)}
    out = []
    for part in sorted(nx.connected_components(links), key=lambda p: min(rank[i] for i in p)):
        ops = tuple(sorted(part, key=rank.__getitem__))
        said = {kinds()[g.ops[i].kind].graph_context(g.ops[i].data) for i in ops} - {None}
        context = "dma" if "dma" in said else "sub" if said == {"sub"} else "main"
        resources = _resources(g, ops)
        name = g.ops[ops[0]].name if len(ops) == 1 else \
            f"{g.ops[ops[0]].name} -> {g.ops[ops[-1]].name}"
        out.append(Task(name, ops, context, resources))
    return _split_preludes(g, out)


def _split_preludes(g, tasks: list[Task]) -> list[Task]:
    """An op with a prelude (``Kind.graph_prelude``: a contraction op's TRF fill) as two
    tasks: the prelude on its context, then the rest on the op's."""
    from .registry import kinds
    out = []
    for t in tasks:
        pre = kinds()[g.ops[t.ops[0]].kind].graph_prelude if len(t.ops) == 1 else None
        if pre is None:
            out.append(t)
            continue
        out += [Task(f"{t.name} ({pre[2]})", t.ops, pre[1], frozenset(), "prelude"),
                Task(t.name, t.ops, t.context, t.resources, "rest")]
    return out


def _task_at(g, tasks: Sequence[Task]):
    """``at(op, tensor)``: the task in which ``op`` touches ``tensor`` (an op's prelude for
    the tensor its prelude reads, else the op's task or its rest)."""
    from .registry import kinds
    whole: dict[int, int] = {}
    pre: dict[int, int] = {}
    for k, t in enumerate(tasks):
        for i in t.ops:
            (pre if t.part == "prelude" else whole)[i] = k

    def at(op, tensor: str) -> int:
        p = kinds()[op.kind].graph_prelude
        if op.index in pre and p is not None and op.roles.get(p[0]) == tensor:
            return pre[op.index]
        return whole[op.index]
    return at


def part_cycles(g, task: Task, i: int, cost: int, plan) -> int:
    """Op ``i``'s cycles in ``task`` (``cost`` its cycles under ``plan``): all of them,
    its prelude's, or the rest."""
    from .registry import kinds
    if not task.part:
        return cost
    pre = kinds()[g.ops[i].kind].graph_prelude_cycles(plan) if plan is not None else 0
    return pre if task.part == "prelude" else cost - pre


def _reusing_within(g, tasks: Sequence[Task]) -> set[int]:
    """The paths of more than one op that write a tensor over the bytes of one they also
    read or write earlier (a write after read or after write inside one pipeline): cut
    into their ops, the graph's order keeps them apart."""
    from .graph import shared_bytes
    at = _task_at(g, tasks)
    touch: dict[str, set[int]] = {}
    for op in g.ops:
        for t in op.roles.values():
            touch.setdefault(t, set()).add(at(op, t))
    writers = {t: at(op, t) for op in g.ops for t in op.writes}
    return {writers[second] for first, second in shared_bytes(g)
            if second in writers and writers[second] in touch.get(first, set())
            and len(tasks[writers[second]].ops) > 1}


def _resources(g, ops: Sequence[int]) -> frozenset[str]:
    from .registry import kinds
    return frozenset(r for i in ops for r in kinds()[g.ops[i].kind].graph_resources(
        g.ops[i].kind))


def hazards_of(g, tasks: Sequence[Task]) -> list[Hazard]:
    """Read after write on every memory tensor; write after read and write after write
    between tensors sharing bytes (a register file reused), in the graph's order."""
    from .graph import shared_bytes
    at = _task_at(g, tasks)
    writer: dict[str, int] = {}
    readers: dict[str, set[int]] = {}
    for op in g.ops:
        for t in op.writes:
            writer[t] = at(op, t)
        for t in op.reads:
            readers.setdefault(t, set()).add(at(op, t))
    out: dict[tuple[int, int], Hazard] = {}

    def add(a: int, b: int, kind: str, tensor: str) -> None:
        if a != b and (a, b) not in out:
            out[(a, b)] = Hazard(a, b, kind, tensor)

    for t, w in writer.items():
        for r in sorted(readers.get(t, ())):
            add(w, r, "read after write", t)
    for first, second in shared_bytes(g):  # (first's last use before second's first)
        if second not in writer:
            continue
        for r in sorted(readers.get(first, ())):
            add(r, writer[second], "write after read", first)
        if first in writer:
            add(writer[first], writer[second], "write after write", first)
    rest = _rests(tasks)
    for k, t in enumerate(tasks):  # (an op's prelude before its rest)
        if t.part == "prelude":
            add(k, rest[t.ops], "read after write", TRF)
    users = _trf_users(g, tasks, writer, readers)
    for n, (_, w1, r1, op1) in enumerate(users):  # (one TRF: a fill after the reads before)
        for _, w2, _, op2 in users[n + 1:]:
            if op1 or op2:
                for r in sorted(r1):
                    add(r, w2, "write after read", TRF)
                add(w1, w2, "write after write", TRF)
    return list(out.values())


def _rests(tasks: Sequence[Task]) -> dict[tuple[int, ...], int]:
    """The task of each split op's rest, by its ops."""
    return {t.ops: k for k, t in enumerate(tasks) if t.part == "rest"}


#: the register file an op's prelude fills, as a hazard names it
TRF = "the TRF"


def _trf_users(g, tasks: Sequence[Task], writer: dict[str, int],
               readers: dict[str, set[int]]) -> list[tuple[int, int, set[int], bool]]:
    """Who fills the TRF, in the graph's order: (rank, the filling task, the reading tasks,
    an op's own TRF?): each TRF tensor, and each op with a prelude (its prelude fills, its
    rest reads; such an op's TRF has no address, so it is ordered against every other)."""
    rank = {i: n for n, i in enumerate(g.order)}
    rest = _rests(tasks)
    out = []
    for k, t in enumerate(tasks):
        if t.part == "prelude":
            out.append((rank[t.ops[0]], k, {rest[t.ops]}, True))
    of = {k: rank[i] for k, t in enumerate(tasks) for i in t.ops}
    for name, spec in g.tensors.items():
        if spec.spec.get("tier") == "trf" and name in writer:
            out.append((of[writer[name]], writer[name], readers.get(name, set()), False))
    return sorted(out, key=lambda u: u[0])


def tasks_and_hazards(g) -> tuple[list[Task], list[Hazard]]:
    """The tasks and their hazards, none waiting for itself: where paths wait for each
    other (a stream read by two ops the graph's order keeps apart, each path reading what
    the other writes), or a path writes over bytes it reads earlier (a register file
    reused inside one pipeline), the paths are cut into their ops, one task each, the
    streams between them ordered as any tensor (read after write): the graph's order, no
    longer pipelined."""
    tasks = tasks_of(g)
    while True:
        hazards = hazards_of(g, tasks)
        dag: nx.DiGraph = nx.DiGraph()
        dag.add_edges_from((h.before, h.after) for h in hazards)
        try:
            cycle = nx.find_cycle(dag)
            cut = {a for a, _ in cycle} | {b for _, b in cycle}
        except nx.NetworkXNoCycle:
            cut = _reusing_within(g, tasks)
            if not cut:
                return tasks, hazards + _launch_order(g, tasks, hazards)
        tasks = [t for k, t in enumerate(tasks) if k not in cut or t.part] + [
            Task(g.ops[i].name, (i,), tasks[k].context, _resources(g, (i,)))
            for k in sorted(cut) if not tasks[k].part for i in tasks[k].ops]
        rank = {i: n for n, i in enumerate(g.order)}
        tasks.sort(key=lambda t: min(rank[i] for i in t.ops))


def _launch_order(g, tasks: Sequence[Task], hazards: Sequence[Hazard]) -> list[Hazard]:
    """Launches run one after another: each task of a launch that no task of it waits for
    (a sink) before each task of the next that waits for none of it (a source); every task
    leads to a sink and follows a source, so every task of one launch ends before any
    of the next starts."""
    if len(g.launches) < 2:
        return []
    of = [g.launches.index(g.ops[t.ops[0]].launch) for t in tasks]
    has_after = {h.before for h in hazards if of[h.before] == of[h.after]}
    has_before = {h.after for h in hazards if of[h.before] == of[h.after]}
    out = []
    for n, name in enumerate(g.launches[1:], 1):
        sinks = [k for k in range(len(tasks)) if of[k] == n - 1 and k not in has_after]
        sources = [k for k in range(len(tasks)) if of[k] == n and k not in has_before]
        out += [Hazard(a, b, "launch order", name) for a in sinks for b in sources]
    return out


# ---- the model ----------------------------------------------------------------------------
@dataclass
class ScheduleVars:
    """What :func:`add_schedule` adds: each task's start and end, and the makespan."""

    starts: list[Any]
    ends: list[Any]
    makespan: Any


def add_schedule(m, tasks: Sequence[Task], hazards: Sequence[Hazard], durations: Sequence[Any],
                 bank: Sequence[Any], bank_total: int, horizon: int) -> ScheduleVars:
    """The schedule's constraints on ``m`` (a CP-SAT model): an interval per task of
    ``durations[k]`` (an int or a variable), one ``NoOverlap`` per context and per shared
    resource, the hazards as precedences, and the bank-access limit as a cumulative: a
    Tensor Unit task demands its ``bank[k]`` accesses (an int or a variable: a cumulative's
    demand is one), a DMA task ``bank_total + 1``
    against a capacity of ``63 + bank_total`` (``bank_total`` >= the sum of every Tensor
    Unit task's demand): with a DMA running the Tensor Unit's accesses may sum to 62 (63
    with the DMA's one), with none they are free."""
    starts, ends, intervals = [], [], []
    for k, t in enumerate(tasks):
        s = m.new_int_var(0, horizon, f"start {t.name}")
        e = m.new_int_var(0, horizon, f"end {t.name}")
        intervals.append(m.new_interval_var(s, durations[k], e, f"run {t.name}"))
        starts.append(s)
        ends.append(e)
    groups: dict[str, list[int]] = {}
    for k, t in enumerate(tasks):
        groups.setdefault("context " + t.context, []).append(k)
        for r in t.resources:
            groups.setdefault(r, []).append(k)
    for ks in groups.values():
        if len(ks) > 1:
            m.add_no_overlap([intervals[k] for k in ks])
    for h in hazards:
        m.add(starts[h.after] >= ends[h.before])
    limit = hw.DM_BANK_STARVATION_ACCESSES - 1
    if bank_total and any(t.context == "dma" for t in tasks):
        demands = [bank_total + 1 if t.context == "dma" else bank[k]
                   for k, t in enumerate(tasks)]
        m.add_cumulative(intervals, demands, limit + bank_total)
    span = m.new_int_var(0, horizon, "makespan")
    if ends:
        m.add_max_equality(span, ends)
    return ScheduleVars(starts, ends, span)


def schedule_of(g, gp, time_limit: float = 10.0, seed: int = 0) -> Schedule:
    """The schedule of a planned graph (``gp``: each op's plan and cycles): the least
    makespan under the model, its tasks as early as that allows."""
    from ortools.sat.python import cp_model

    from .registry import kinds
    tasks, hazards = tasks_and_hazards(g)
    cycles = [max((part_cycles(g, t, i, gp.ops[i].cost, gp.ops[i].plan) for i in t.ops),
                  default=0) for t in tasks]
    bank = [sum(kinds()[g.ops[i].kind].graph_bank_accesses(gp.ops[i].plan) for i in t.ops
                if gp.ops[i].plan is not None and t.part != "prelude") for t in tasks]
    starts, proven = _place(tasks, hazards, cycles, bank, time_limit, seed)
    timed = tuple(Timed(t, starts[k], cycles[k], bank[k]) for k, t in enumerate(tasks))
    span = max((t.end for t in timed), default=0)
    mac = sum(kinds()[g.ops[i].kind].graph_mac_use(gp.ops[i].plan) for i in range(len(g.ops))
              if gp.ops[i].plan is not None)
    return Schedule(timed, tuple(hazards), span, "optimal" if proven else "feasible",
                    critical_path(timed, hazards), mac)


def schedule_by_launch(g, gp, time_limit: float = 10.0, seed: int = 0) -> Schedule:
    """The schedule launch by launch (launches run one after another: each starts where
    the one before ends), each distinct launch (its signature and its chosen plans)
    scheduled once and mapped onto the others (planner/graph_parts.py)."""
    if len(g.launches) < 2:
        return schedule_of(g, gp, time_limit, seed)
    from .graph_parts import rename
    launches = _launches(g, gp)
    done = _distinct_schedules(launches, time_limit, seed)
    timed: list[Timed] = []
    hazards: list[Hazard] = []
    critical: list[Wait] = []
    offset, mac, proven = 0, 0.0, True
    for launch, (ops, sub, _, key) in zip(g.launches, launches):
        s, base = done[key]
        names, tensors = _task_names(g, ops, base, s), rename(base, sub)
        k0 = len(timed)
        timed += [Timed(Task(names[t.task.name], tuple(ops[i] for i in t.task.ops),
                             t.task.context, t.task.resources, t.task.part),
                        t.start + offset, t.cycles, t.bank_accesses) for t in s.timed]
        hazards += [Hazard(h.before + k0, h.after + k0, h.kind, tensors.get(h.tensor,
                                                                           h.tensor))
                    for h in s.hazards]
        waits = [Wait(names[w.task], names.get(w.after or "", w.after), w.why)
                 for w in s.critical]
        if critical and waits:
            waits[0] = Wait(waits[0].task, critical[-1].task, f"launch order {launch}")
        critical += waits
        offset, mac = offset + s.makespan, mac + s.mac_use
        proven = proven and s.status == "optimal"
    return Schedule(tuple(timed), tuple(hazards), offset, "optimal" if proven else
                    "feasible", tuple(critical), mac)


def _launches(g, gp) -> list[tuple[list[int], Any, list[Any], tuple]]:
    """Each launch: its ops (in the graph's order), its sub-graph, their chosen rows and
    its key (the sub-graph's signature and its ops' plans': launches alike share it)."""
    from .graph_parts import part_signature, restrict
    from .op_cache import op_signature
    out = []
    for launch in g.launches:
        ops = [i for i in g.order if g.ops[i].launch == launch]
        sub = restrict(g, ops)
        rows = [gp.ops[i] for i in ops]
        out.append((ops, sub, rows, (part_signature(sub), tuple(
            op_signature(sub, op, r.layout) for op, r in zip(sub.ops, rows)))))
    return out


def _distinct_schedules(launches: list, time_limit: float, seed: int
                        ) -> dict[tuple, tuple[Schedule, Any]]:
    """Each distinct launch's schedule (by key; the first launch of a key is its base),
    made side by side on threads, one per core (each solve deterministic, the solver's own
    code holding no lock: the same schedules as one after another)."""
    first: dict[tuple, tuple[Any, list[Any]]] = {}
    for _, sub, rows, key in launches:
        first.setdefault(key, (sub, rows))

    def one(key: tuple) -> tuple[Schedule, Any]:
        sub, rows = first[key]
        return schedule_of(sub, _Chosen(rows), time_limit, seed), sub
    threads = min(len(first), os.cpu_count() or 1)
    if threads < 2:
        return {key: one(key) for key in first}
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(threads) as pool:
        return dict(zip(first, pool.map(one, first)))


@dataclass(frozen=True)
class _Chosen:
    """The chosen rows of a launch's ops, as :func:`schedule_of` reads a plan."""

    ops: list[Any]


def _task_names(g, ops: list[int], base, s: Schedule) -> dict[str, str]:
    """The names of a launch's tasks from those of the launch it was scheduled as (each
    named after its first and last op: the same positions)."""
    out = {}
    for t in s.timed:
        first, last = t.task.ops[0], t.task.ops[-1]
        core = base.ops[first].name if first == last else \
            f"{base.ops[first].name} -> {base.ops[last].name}"
        mine = g.ops[ops[first]].name if first == last else \
            f"{g.ops[ops[first]].name} -> {g.ops[ops[last]].name}"
        out[t.task.name] = mine + t.task.name[len(core):]
    return out


#: the work (CP-SAT's deterministic seconds) the second solve of :func:`_place` may spend
#: pulling tasks early once the makespan is proven: the makespan does not change, and a
#: deterministic bound gives the same starts on every machine (a launch of 46 tasks took
#: its whole 10 s of wall time without it). 0.1: a decode layer's three launches take
#: 0.47 s, not 2.0 s, their starts summing 0.02% later (docs/decisions.md item 137)
EARLY_STARTS_WORK = 0.1


def _place(tasks: Sequence[Task], hazards: Sequence[Hazard], cycles: Sequence[int],
           bank: Sequence[int], time_limit: float, seed: int) -> tuple[list[int], bool]:
    """The starts: the least makespan first, then (that makespan kept) the least sum of
    the starts, two solves (one weighted objective would overflow on long kernels); the
    tasks one after another in hazard order when the time limit stops the first."""
    from ortools.sat.python import cp_model
    horizon = sum(cycles)
    total = sum(b for b, t in zip(bank, tasks) if t.context != "dma")
    m = cpsat.model()
    v = add_schedule(m, tasks, hazards, cycles, bank, total, horizon)
    m.minimize(v.makespan)
    sv = solver(time_limit, seed)
    st = sv.solve(m)
    if st == cp_model.MODEL_INVALID:  # pragma: no cover - the model's own mistake
        raise RuntimeError(f"the schedule's model is invalid: {m.validate()}")
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _in_order(tasks, hazards, cycles), False
    span = sv.value(v.makespan)
    for s, start in zip(v.starts, [sv.value(s) for s in v.starts]):
        m.add_hint(s, start)
    m.add(v.makespan <= span)
    m.minimize(sum(v.starts))
    sv2 = solver(time_limit, seed)
    sv2.parameters.max_deterministic_time = EARLY_STARTS_WORK
    st2 = sv2.solve(m)
    if st2 in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return [sv2.value(s) for s in v.starts], st == cp_model.OPTIMAL
    return [sv.value(s) for s in v.starts], st == cp_model.OPTIMAL  # pragma: no cover



def _in_order(tasks: Sequence[Task], hazards: Sequence[Hazard], cycles: Sequence[int]
              ) -> list[int]:
    """Every task after the one before, in an order of the hazards (a schedule that
    always exists: :func:`tasks_and_hazards` leaves no cycle)."""
    dag: nx.DiGraph = nx.DiGraph()
    dag.add_nodes_from(range(len(tasks)))
    dag.add_edges_from((h.before, h.after) for h in hazards)
    starts, t = [0] * len(tasks), 0
    for k in nx.lexicographical_topological_sort(dag):
        starts[k] = t
        t += cycles[k]
    return starts


def critical_path(timed: Sequence[Timed], hazards: Sequence[Hazard]) -> tuple[Wait, ...]:
    """From the last task to end back to a task starting at 0: at each step the task ending
    as the current one starts and what orders them (a hazard first, then the context, a
    shared resource, the bank limit)."""
    if not timed:
        return ()
    by_hazard = {(h.before, h.after): h for h in hazards}
    k = max(range(len(timed)), key=lambda i: (timed[i].end, -i))
    steps: list[Wait] = []
    seen = {k}
    while True:
        cur = timed[k]
        found = None
        if cur.start > 0:
            for j, t in enumerate(timed):
                if j in seen or t.end != cur.start:
                    continue
                why = _why(j, k, timed, by_hazard)
                if why is not None and (found is None or why[0] < found[0]):
                    found = (why[0], j, why[1])
        if found is None:
            steps.append(Wait(cur.task.name, None, None))
            break
        _, j, text = found
        steps.append(Wait(cur.task.name, timed[j].task.name, text))
        seen.add(j)
        k = j
    return tuple(reversed(steps))


def _why(j: int, k: int, timed: Sequence[Timed], by_hazard: dict) -> tuple[int, str] | None:
    a, b = timed[j].task, timed[k].task
    h = by_hazard.get((j, k))
    if h is not None:
        return 0, f"{h.kind} {h.tensor}"
    if a.context == b.context:
        return 1, f"{a.context} context"
    shared = sorted(a.resources & b.resources)
    if shared:
        return 2, shared[0]
    if _over_the_bank_limit(j, k, timed):
        return 3, "bank-access limit"
    return None


def _over_the_bank_limit(j: int, k: int, timed: Sequence[Timed]) -> bool:
    """Would task ``k`` starting while task ``j`` still ran break the bank-access limit
    (with a DMA running at ``k``'s start, or ``k`` one)?"""
    at = timed[k].start
    running = [i for i, t in enumerate(timed) if t.start <= at < t.end and i != k] + [j, k]
    if not any(timed[i].task.context == "dma" for i in running):
        return False
    used = sum(1 if timed[i].task.context == "dma" else timed[i].bank_accesses
               for i in set(running))
    return used > hw.DM_BANK_STARVATION_ACCESSES - 1
