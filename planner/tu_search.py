"""The stream of a Fetch or a Commit whose Time and Packet are free (model/tu.py).

The candidates are the *pieces* of the DM tensor's Element: its digits, coalesced, the
innermost contiguous run cut where a packet reaches the 32-byte read.  One CP-SAT model
(:class:`_Model`) holds

* the Packet: the innermost ``j`` pieces of the run, in the tensor's order (a packet of more
  than one element must be contiguous: ``innermost-access``), ``j`` among those one access
  reads whole (a Commit's ``packet-bytes``; for a Fetch, :func:`_packets` says why no
  larger packet can be faster);
* the Time order of the other pieces, as a circuit; two neighbouring loops merge into one
  entry when the inner one is the outer one's contiguous successor in DM, and the entries
  left after merging are at most 8 (``entry-limit``);
* for a Commit, every Time loop whose DM step is not a multiple of 8 bytes merges into the
  loop inside it (``commit-align``);

each rule guarded by one assumption literal, and as objective the Fetch's or Commit's cycles
per slice (packets x accesses per packet, exact for each ``j``), then fewer entries.  Each
plan it proposes is lowered by :func:`model.tu.lower` with every rule (iterations, bank
starvation among them); a rejected plan is excluded and the model solved again
(:func:`search`).  An infeasible model's core is the conflict `tcplan explain` prints.  The
planner only chooses: the executor checks the plan.

The search's answer is a value (planner/outcome.py): :class:`~planner.outcome.Found` (the
plan, proven optimal or cut by the time limit), :class:`~planner.outcome.NoPlan` (the
model's conflict, or the rules that rejected every plan it proposed) or
:class:`~planner.outcome.TimedOut`, each carrying what the search counted
(:class:`TuSearch`).  The stream's Time and Packet are built from the pieces' mappings
(:attr:`Piece.mapping`), never from text parsed again.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, TypeAlias

from tcplan.model import hardware as hw
from tcplan.model import limits, tu
from tcplan.model.mapping import Factor, Mapping, axis, coalesce_factors, join
from tcplan.model.rules import RULES, TcplanError, Violation, fail
from tcplan.model.tiers import Tensor

from .outcome import Found, NoPlan, TimedOut

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import Constraint, CpSolver, IntVar, LinearExpr

MAX_PLANS = limits.TU_SEARCH_MAX_PLANS


@dataclass(frozen=True)
class Piece:
    """One candidate stream term: ``count`` live values of the digit [lo, lo * radix) of
    ``axis``, one DM step apart by ``weight`` elements."""

    axis: str
    lo: int
    count: int
    weight: int
    size: int  # the axis's size
    radix: int = 0  # the digit's range (0: its count)

    @cached_property
    def mapping(self) -> Mapping:
        """The piece as a stream term, built: ``A``, ``A / lo``, then ``% radix`` when the
        digit ends inside the axis, then ``= count`` when its live values end inside the
        digit (``A / 4 % 8 = 5``)."""
        radix = self.radix or self.count
        m = axis(self.axis, self.size)
        if self.lo > 1:
            m = m / self.lo
        if self.lo * radix < self.size:
            m = m % radix
        return m.resize(self.count) if self.count < radix else m

    def term(self) -> str:
        """The piece's term as text (messages and the search's list of pieces)."""
        return self.mapping.body()


def _cuts(f: Factor, span: int, most: int) -> list[int]:
    """Where to cut digit ``f`` (``span`` elements inside it, all contiguous) so that every
    packet of a power-of-two number of elements up to ``most`` is a suffix of whole pieces:
    the digit's own positions ``k`` at which ``span * k`` is such a packet."""
    ks, p = [], 1
    while p <= most:
        if span < p < span * f.count and p % span == 0:
            k = p // span
            if f.count % k == 0 and f.radix % k == 0:
                ks.append(k)
        p *= 2
    return ks


def _split(f: Factor, name: str, wt: int, ks: list[int], size: int) -> list[Piece]:
    """Digit ``f`` of axis ``name`` (DM step ``wt``) cut at positions ``ks``, innermost
    piece first."""
    out, prev = [], 1
    for k in ks + [f.count]:
        radix = f.radix // prev if k == f.count else k // prev
        out.append(Piece(name, f.lo * prev, k // prev if k != f.count else f.count // prev,
                         wt * prev, size, radix))
        prev = k
    return out


def pieces_of(memory: Tensor, most: int) -> tuple[list[Piece], int]:
    """The Element's live digits, outermost first, the innermost contiguous run cut at every
    power-of-two packet of at most ``most`` elements (so that each is a suffix of whole
    pieces); and how many of the innermost pieces form that run.  A digit with padding
    positions (``#``) or cut short (``=``) may end the run: its live values are contiguous,
    what lies beyond them is not."""
    el = memory.dims["element"]
    axes = el.axes
    fs: list[Factor] = list(coalesce_factors(el.factors))
    weights, w = [], 1
    for f in reversed(fs):
        weights.append(w)
        w *= f.size
    weights.reverse()
    out: list[Piece] = []
    run, span, contiguous = 0, 1, True
    for f, wt in reversed(list(zip(fs, weights))):
        if f.axis is None or f.count <= 1:
            contiguous &= f.size == 1
            continue
        if contiguous and wt == span:
            parts = _split(f, f.axis, wt, _cuts(f, span, most), axes[f.axis])
            out += parts
            run += len(parts)
            contiguous = f.count == f.size
            span *= f.size
            continue
        contiguous = False
        out.append(Piece(f.axis, f.lo, f.count, wt, axes[f.axis], f.radix))
    return out[::-1], run


@dataclass(frozen=True)
class TuRequest:
    """One search: the engine (``fetch`` or ``commit``), the DM tensor it reads or writes,
    the context it runs in, the chips, and the solver's settings (its time limit in
    seconds, seed and worker threads)."""

    engine: str
    memory: Tensor
    context: str = "main"
    chips: int = 1
    time_limit: float = 10.0
    seed: int = 0
    workers: int = 1


@dataclass(frozen=True)
class TuSearch:
    """What a search counted: the candidate pieces, the plan when one was found, the rules
    that rejected proposed plans (how many times each, and one example of each), and how
    many plans it lowered."""

    pieces: tuple[Piece, ...] = ()
    plan: tu.TuPlan | None = None
    rejected: dict[str, int] = field(default_factory=dict)
    examples: dict[str, Violation] = field(default_factory=dict)  # one per rejecting rule
    lowered: int = 0

    def best(self) -> tu.TuPlan:
        """The plan found (the record of a :class:`Found` outcome holds one)."""
        if self.plan is None:  # pragma: no cover - asked of a search without a plan
            raise ValueError("the search found no plan")
        return self.plan


#: what :func:`search` returns
TuOutcome: TypeAlias = Found[TuSearch] | NoPlan[TuSearch] | TimedOut[TuSearch]


def _time_limit(record: TuSearch, limit: float) -> TimedOut[TuSearch]:
    """The time limit stopped the search before a plan."""
    return TimedOut(TcplanError(Violation("plan-time-limit", (), {
        "limit": limit, "lowered": record.lowered})), record)


def _rejected(record: TuSearch, limit: float) -> NoPlan[TuSearch] | TimedOut[TuSearch]:
    """No plan: the rules that rejected every plan the model proposed (all of them, or the
    first ``MAX_PLANS``); the time limit when none was rejected."""
    if not record.examples:
        return _time_limit(record, limit)
    more = (f" (the first {record.lowered} plans the model proposed)"
            if record.lowered >= MAX_PLANS else "")
    return NoPlan(TcplanError(Violation("plan-no-layout", tuple(record.examples), {
        "pieces": ", ".join(p.term() for p in record.pieces), "rules": "; ".join(
            f"[{r}] {v.message}" for r, v in record.examples.items()) + more})), record)


def _packets(pieces: list[Piece], run: int, eb: int, context: str, total: int
             ) -> dict[int, int]:
    """For each packet of the innermost ``j`` pieces that one access reads whole (its bytes
    1, 2, 4, ..., 32): the cycles per slice (packets x accesses per packet; the packet is
    contiguous).  A Commit's packet must be one (``packet-bytes``); a Fetch may read a
    larger packet in several reads, but such a packet costs no fewer cycles than one access
    of the same run (a slice's cycles are its elements over the read's, and no read exceeds
    32 bytes), so the search offers a Fetch the same packets (docs/decisions.md item 96)."""
    out = {}
    for j in range(run + 1):
        n = 1
        for p in pieces[len(pieces) - j:]:
            n *= p.count
        if n * eb in hw.ACCESS_BYTES:
            out[j] = (total // n) * tu.reads_per_packet(n, tu.access_of(n, 8 * eb, context))
    return out


class _Model:
    """The CP-SAT model over the pieces: the packet choice, the Time circuit, merges."""

    def __init__(self, pieces: list[Piece], run: int, packets: dict[int, int], engine: str,
                 eb: int):
        from ortools.sat.python import cp_model
        self.cp = cp_model
        m = self.m = cp_model.CpModel()
        self.pieces, n = pieces, len(pieces)
        self.req: dict[str, IntVar] = {}  # rule id -> its assumption literal
        self.j = {k: m.new_bool_var(f"packet_{k}") for k in range(run + 1)}
        m.add_exactly_one(self.j.values())
        self.in_packet = [m.new_bool_var(f"in_packet_{i}") for i in range(n)]
        for i in range(n):  # piece i is in the packet iff j > (its place from the inside)
            inner = n - 1 - i
            m.add(sum(self.j[k] for k in self.j if k > inner) == 1).only_enforce_if(
                self.in_packet[i])
            m.add(sum(self.j[k] for k in self.j if k > inner) == 0).only_enforce_if(
                self.in_packet[i].negated())
        single = m.add_bool_or([self.j[k] for k in packets] or [m.new_constant(0)])
        if RULES["packet-bytes"].applies(engine, tu.MODE[engine]):
            self._rule("packet-bytes", [single])
        # the Time circuit: node n is the start/end; arc (i, k): loop i just outside loop k
        self.arc: dict[tuple[int, int], IntVar] = {}
        arcs: list[tuple[int, int, IntVar]] = []
        for i in range(n + 1):
            for k in range(n + 1):
                if i != k:
                    self.arc[i, k] = lit = m.new_bool_var(f"arc_{i}_{k}")
                    arcs.append((i, k, lit))
        for i in range(n):  # a packet piece is off the Time circuit
            arcs.append((i, i, self.in_packet[i]))
        no_time = m.new_bool_var("no_time")  # every piece in the packet: the start node alone
        m.add(sum(self.in_packet) == n).only_enforce_if(no_time)
        m.add(sum(self.in_packet) < n).only_enforce_if(no_time.negated())
        arcs.append((n, n, no_time))
        m.add_circuit(arcs)
        # merges: loop i then loop k contiguous in DM, or the innermost loop into the packet
        merged: list[IntVar] = []
        self.merge: dict[tuple[int, int], IntVar] = {}
        for (i, k), lit in self.arc.items():
            if i < n and k < n and pieces[i].weight == pieces[k].count * pieces[k].weight:
                self.merge[i, k] = lit
                merged.append(lit)
        into = self._into_packet(run)
        packet_entry = m.new_bool_var("packet_entry")
        m.add(packet_entry == 1 - self.j[0])
        entries = sum(1 - x for x in self.in_packet) + packet_entry - sum(merged) - into
        self.entries = entries
        self._rule("entry-limit", [m.add(entries <= hw.MAX_SEQUENCER_ENTRIES)])
        if engine == "commit":
            cons = []
            for i, p in enumerate(pieces):
                if (p.weight * eb) % hw.COMMIT_ALIGN_BYTES:
                    outs = [lit for (a, _), lit in self.merge.items() if a == i]
                    cons.append(m.add_bool_or(outs + [self.in_packet[i], self.last[i]]
                                              if i in self.last else
                                              outs + [self.in_packet[i]]))
            self._rule("commit-align", cons)
        self.cycles = sum(c * self.j[k] for k, c in packets.items())
        m.minimize(self.cycles * (hw.MAX_SEQUENCER_ENTRIES + len(pieces) + 2) + entries)

    def _into_packet(self, run: int) -> LinearExpr | int:
        """1 when the innermost Time loop merges into the packet's entry (it is the packet's
        outermost piece's contiguous successor); ``last[i]``: loop i is innermost in Time
        and merges so."""
        m, n, ps = self.m, len(self.pieces), self.pieces
        into: dict[int, list[IntVar]] = {}
        terms = []
        for i in range(n):
            for k in range(1, run + 1):  # packet of the innermost k pieces, outermost n - k
                top = n - k
                if i < top and ps[i].weight == ps[top].count * ps[top].weight:
                    lit = m.new_bool_var(f"into_{i}_{k}")
                    m.add_bool_and([self.arc[i, n], self.j[k]]).only_enforce_if(lit)
                    m.add_bool_or([self.arc[i, n].negated(), self.j[k].negated(), lit])
                    terms.append(lit)
                    into.setdefault(i, []).append(lit)
        self.last: dict[int, IntVar] = {}
        for i, lits in into.items():
            any_ = m.new_bool_var(f"last_{i}")
            m.add_max_equality(any_, lits)
            self.last[i] = any_
        return sum(terms)

    def _rule(self, rule: str, constraints: list[Constraint]) -> None:
        lit = self.req[rule] = self.m.new_bool_var(f"req_{rule}")
        for c in constraints:
            c.only_enforce_if(lit)

    def decode(self, s: CpSolver) -> tuple[list[int], int]:
        """A solution: the Time pieces outermost first, and the packet's piece count."""
        n = len(self.pieces)
        j = next(k for k, v in self.j.items() if s.value(v))
        order: list[int] = []
        cur = n
        while True:
            nxt = next((k for k in range(n + 1) if k != cur and (cur, k) in self.arc
                        and s.value(self.arc[cur, k])), n)
            if nxt == n:
                return order, j
            order.append(nxt)
            cur = nxt

    def exclude(self, order: list[int], j: int) -> None:
        n = len(self.pieces)
        chain = [n] + order + [n]
        lits = [self.arc[a, b] for a, b in zip(chain, chain[1:]) if (a, b) in self.arc]
        self.m.add_bool_or([x.negated() for x in lits] + [self.j[j].negated()])


def _joined(ps: list[Piece]) -> list[Piece]:
    """Neighbouring pieces of one digit rejoined (the outer one starting where the inner one
    ends): the terms the stream is written with (``D / 8 % 2, D % 8`` is ``D % 16``)."""
    out: list[Piece] = []
    for p in ps:
        if out:
            q = out[-1]  # outer, p inner
            pr = p.radix or p.count
            if q.axis == p.axis and q.lo == p.lo * pr and p.count == pr:
                out[-1] = Piece(p.axis, p.lo, q.count * pr, p.weight, p.size,
                                (q.radix or q.count) * pr)
                continue
        out.append(p)
    return out


def _stream(memory: Tensor, pieces: list[Piece], order: list[int], j: int) -> Tensor:
    """The stream of a solution: the memory's Chip, Cluster and Slice; Time the pieces of
    ``order`` and Packet the innermost ``j`` pieces, neighbouring pieces of a digit rejoined
    (``m![1]`` when none)."""
    n = len(pieces)
    dims = {d: memory.dims[d] for d in tu.SPATIAL}
    dims["time"] = join(p.mapping for p in _joined([pieces[i] for i in order]))
    dims["packet"] = join(p.mapping for p in _joined(pieces[n - j:]))
    return Tensor("stream", "stream", memory.dtype, dims)


def search(req: TuRequest) -> TuOutcome:
    """The fastest legal stream (Time order and Packet) of a Fetch or Commit of
    ``req.memory``: :class:`Found` (``proven``: optimal under the cycle model; False when the
    time limit cut the search after a plan), :class:`NoPlan` (what no stream changes, the
    model's conflict, or the rules that rejected every plan it proposed) or
    :class:`TimedOut` (the time limit before any plan).  A mistake in the request (an input
    error) is raised."""
    engine, memory, context, chips = req.engine, req.memory, req.context, req.chips
    deadline = _time.perf_counter() + req.time_limit
    static = tu.static_violations(engine, memory, chips)
    if static:  # no stream changes these: they are the answer
        return NoPlan(TcplanError(static), TuSearch())
    eb = memory.elem_bytes
    pieces, run = pieces_of(memory, hw.FETCH_MAX_READ_BYTES // eb)
    if not pieces:
        raise fail("bad-request", detail=f"{memory.describe()} holds one element per slice: "
                   "there is no stream to plan", fix="give the stream: time 'm![1]', packet "
                   "'m![1]'")
    total = 1
    for p in pieces:
        total *= p.count
    packets = _packets(pieces, run, eb, context, total)
    model = _Model(pieces, run, packets, engine, eb)
    model.m.add_assumptions(list(model.req.values()))
    rejected: dict[str, int] = {}
    examples: dict[str, Violation] = {}
    lowered = 0

    def record(plan: tu.TuPlan | None = None) -> TuSearch:
        return TuSearch(tuple(pieces), plan, rejected, examples, lowered)

    while lowered < MAX_PLANS:
        s = model.cp.CpSolver()
        s.parameters.num_workers = max(req.workers, 1)
        s.parameters.random_seed = req.seed
        s.parameters.max_time_in_seconds = max(deadline - _time.perf_counter(), 0.05)
        status = s.solve(model.m)
        if status == model.cp.INFEASIBLE:
            if lowered == 0:
                return NoPlan(TcplanError(_conflict(model, s, memory, engine, deadline)),
                              record())
            return _rejected(record(), req.time_limit)  # every plan it proposed, rejected
        if status not in (model.cp.OPTIMAL, model.cp.FEASIBLE):
            return _time_limit(record(), req.time_limit)  # no plan, or none proven
        order, j = model.decode(s)
        lowered += 1
        try:
            plan = tu.lower(engine, memory, _stream(memory, pieces, order, j), context, chips)
        except TcplanError as err:
            if err.kind == "input":
                raise
            for v in err.violations:
                rejected[v.rule] = rejected.get(v.rule, 0) + 1
                examples.setdefault(v.rule, v)
            model.exclude(order, j)
            continue
        return Found(record(plan), proven=status == model.cp.OPTIMAL)
    return _rejected(record(), req.time_limit)


def _conflict(model: _Model, s: CpSolver, memory: Tensor, engine: str, deadline: float
              ) -> list[Violation]:
    """The model's core, shrunk by deletion to a minimal set of rules that no order and
    packet satisfy together (without any one of them the others can be met)."""
    names = {v.index: r for r, v in model.req.items()}
    core = [names[i] for i in s.sufficient_assumptions_for_infeasibility() if i in names]
    for r in list(core):
        if len(core) == 1 or _time.perf_counter() > deadline:
            break
        trial = [x for x in core if x != r]
        model.m.clear_assumptions()
        model.m.add_assumptions([model.req[x] for x in trial])
        sv = model.cp.CpSolver()
        sv.parameters.max_time_in_seconds = max(deadline - _time.perf_counter(), 0.05)
        if sv.solve(model.m) == model.cp.INFEASIBLE:
            core = trial  # still no plan without r: r is not needed
    return [Violation("plan-no-layout", tuple(core), {
        "pieces": ", ".join(p.term() for p in model.pieces),
        "rules": "; ".join(f"[{r}] {RULES[r].title}" for r in core)
        + f" (a {engine.title()} of {memory.describe()})"})]
