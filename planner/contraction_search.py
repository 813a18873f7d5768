"""A contraction's mapping searched (issue 30, items 1-2; docs/contractions.md): an einsum
``SW,TW->R`` (the streamed operand, the TRF operand, the result) placed on the Tensor Unit.

The **candidates** are every mapping of this family (docs/contractions.md 'The candidates'):

* the contracted axis ``K`` in the Packet (``K % F`` in each flit, ``F`` a flit's elements,
  ``K / F`` innermost in Time; or ``K # F`` when ``K < F``), the Outer packing one or two
  flits, or in Time (``1 # F`` a flit: one product per lane a cycle);
* the TRF-only axis (``N``) in the Lane, ``1, 2, 4`` or ``8`` of it, any divisor of the
  rest as rows of the TRF's Element (the Outer's Time broadcast over them), the rest on
  slices;
* every other axis split into a spatial part (its outer digit, on Cluster and Slice:
  512 units, the two clusters taken by the first even spatial digit's outer half) and a
  Time part; a batch axis (in both operands and the result) wholly spatial;
* the Lane Folder interleaved or sequential.

Where what the problem fixes (a dimension, or DM layouts given) holds none of these, the
**wide** family is searched instead: it adds, where the spatial digits fit one cluster,
that cluster alone (``m![1 # 2]``, as kernels that leave the other cluster to other work
type it), and batch axes split as any other, their Time part also rows of the TRF's
Element (as attention's q-k keeps its heads: Element ``m![N, D]``).  :func:`family` says
which.

Each candidate is checked by the Contraction Engine's own model (model/engines/
contraction.py ``Contraction.lower``: every rule of its stages) and costed by its cycles
per slice on the main context, every slice at once, the TRF operand loaded beforehand (as
``kind: contract`` has it; its load, ``to_trf`` in the sub context, is reported: the moves
around the contraction are docs/decisions.md item 108's).  The search evaluates the
candidates in the order of a lower bound (the stream's flits) until it passes the best
cycles found, and keeps the least (cycles, then the multipliers' engaged cycles: units x
the Outer's packets, the plan that wastes fewest, then the units).  When every candidate
breaks a rule, one CP-SAT model (a Boolean per candidate, exactly one; each rule an
assumption literal that forbids the candidates breaking it) is infeasible, and its core,
shrunk by deletion, is a minimal set of rules every candidate breaks one of.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from tcplan.model import hardware as hw
from tcplan.model import limits
from tcplan.model.engines.contraction import MODES, Contraction, ContractionPlan
from tcplan.model.engines.base import flit_elements
from tcplan.model.lane import fold
from tcplan.model.mapping import Mapping, parse
from tcplan.model.rules import TcplanError, Violation, fail
from tcplan.model.tiers import Tensor

from .cpsat import solver

UNITS = hw.CLUSTERS_PER_CHIP * hw.SLICES_PER_CLUSTER  # a chip's slices: 512
#: the dimensions a problem may fix (``fix:``): the stream's and the TRF's
FIXABLE = ("cluster", "slice", "time", "packet", "lane", "element")


@dataclass(frozen=True)
class Einsum:
    """The einsum's three axis lists and its axes' roles."""

    stream: tuple[str, ...]
    trf: tuple[str, ...]
    result: tuple[str, ...]

    @property
    def contracted(self) -> tuple[str, ...]:
        return tuple(a for a in self.stream if a in self.trf and a not in self.result)

    @property
    def batch(self) -> tuple[str, ...]:
        return tuple(a for a in self.stream if a in self.trf and a in self.result)

    @property
    def trf_only(self) -> tuple[str, ...]:
        return tuple(a for a in self.trf if a not in self.stream)

    def text(self) -> str:
        return f"{''.join(self.stream)},{''.join(self.trf)}->{''.join(self.result)}"


@dataclass(frozen=True)
class Candidate:
    """One mapping of the contraction: the texts of every dimension, the stages."""

    dims: dict[str, str]  # cluster, slice, time, packet (the stream); lane, element (TRF)
    outer: tuple[str, str]  # the Outer's OutTime, OutPacket
    time_out: str  # the Time Reducer's OutTime
    mode: str  # the Lane Folder's
    units: int  # the units holding data (the spatial parts' product)
    k_in: str  # "packet" or "time": where the contracted axis sits
    flits: int  # the stream's flits per slice: the Stream Adapter takes one a cycle

    def describe(self) -> str:
        return ", ".join(f"{d} {self.dims[d]}" for d in FIXABLE) + f", lane mode {self.mode}"


@dataclass
class Evaluated:
    """A candidate checked: its plan and makespan, or the rules it breaks."""

    candidate: Candidate
    plan: ContractionPlan | None = None
    trf_load: int = 0
    violations: tuple[Violation, ...] = ()

    @property
    def cycles(self) -> int:
        assert self.plan is not None
        return self.plan.cycles

    @property
    def engaged(self) -> int:
        """Multiplier engagements: every unit's Outer packets (each engages all of a
        slice's multipliers, useful or not)."""
        assert self.plan is not None
        return self.candidate.units * self.plan.engine.outer_time.size


# ---- the candidates ---------------------------------------------------------------------
def _divisors(n: int) -> list[int]:
    from tcplan.model.arith import divisors
    return sorted(divisors(n))


def _split(axis: str, size: int, spatial: int) -> tuple[str | None, str | None]:
    """``axis`` cut into its spatial part (outer, ``spatial`` values) and its time part
    (inner): the two digits' texts, None where a part is 1."""
    if spatial == size:
        return axis, None
    if spatial == 1:
        return None, axis
    rest = size // spatial
    return f"{axis} / {rest}", f"{axis} % {rest}"


def _m(digits: list[str], pad: int | None = None) -> str:
    body = ", ".join(digits) if digits else "1"
    return f"m![{body} # {pad}]" if pad is not None else f"m![{body}]"


def _spatial(digits: list[tuple[str, int]], wide: bool) -> Iterator[tuple[str, str]]:
    """Cluster and Slice of the spatial digits (outermost first): the two clusters taken by
    the first even digit's outer half where one is even, else one cluster (``m![1 # 2]``);
    the wide family also the one cluster where the two are taken; none when they hold
    more than a chip's units or cannot be padded to a cluster's slices."""
    u = 1
    for _, s in digits:
        u *= s
    if u > UNITS:
        return
    even = next((k for k, (_, s) in enumerate(digits) if s % 2 == 0), None)
    if even is not None and u // 2 <= hw.SLICES_PER_CLUSTER:
        text, s = digits[even]
        rest = digits[:even] + digits[even + 1:]
        half = s // 2
        cluster = f"m![{text} / {half}]" if half > 1 else f"m![{text}]"
        inner = ([f"{text} % {half}"] if half > 1 else []) + [t for t, _ in rest]
        sl = _slices(inner, u // 2)
        if sl is not None:
            yield cluster, sl
        if not wide:
            return
    if u <= hw.SLICES_PER_CLUSTER:
        sl = _slices([t for t, _ in digits], u)
        if sl is not None:
            yield "m![1 # 2]", sl


def _slices(digits: list[str], count: int) -> str | None:
    """The Slice of digits holding ``count`` values, padded to a cluster's slices: a
    trailing ``1 # n`` (each value on every n-th slice) where ``count`` divides them, a
    lone digit padded (``A # 256``) otherwise; None for several digits that cannot be."""
    n = hw.SLICES_PER_CLUSTER
    if count == n:
        return _m(digits)
    if n % count == 0:
        return _m(digits + [f"1 # {n // count}"])
    return _m(digits, n) if len(digits) == 1 else None


def _k_options(k: str, size: int, f: int) -> Iterator[tuple[str, list[str], str, str, str]]:
    """Where the contracted axis goes: (the stream's Packet, its Time digits innermost, the
    Outer's packet, the time digit the Outer packs away or "", "packet" / "time")."""
    if size <= f:
        packet = k if size == f else f"{k} # {f}"
        yield f"m![{packet}]", [], f"m![{packet}]", "", "packet"
    elif size % f == 0:
        rest = size // f
        yield f"m![{k} % {f}]", [f"{k} / {f}"], f"m![{k} % {f}]", "", "packet"
        if rest % 2 == 0:  # (PackSize 2: two flits a packet)
            inner = f"{k} / {f}"
            yield (f"m![{k} % {f}]", [inner], f"m![{k} % {2 * f}]", inner, "packet")
    yield f"m![1 # {f}]", [k], f"m![1 # {f}]", "", "time"


def family(e: Einsum, axes: dict[str, int], dtype: str, keep: Callable[[Candidate], bool]
           ) -> tuple[list[Candidate], int]:
    """The candidates that hold what the problem fixes (``keep``): the family's, or, where
    it holds none, the wide family's (module docstring); and how many that family has."""
    every = list(candidates(e, axes, dtype))
    pool = [c for c in every if keep(c)]
    if pool:
        return pool, len(every)
    every = list(candidates(e, axes, dtype, wide=True))
    return [c for c in every if keep(c)], len(every)


def candidates(e: Einsum, axes: dict[str, int], dtype: str, wide: bool = False
               ) -> Iterator[Candidate]:
    """Every candidate of the family, or of the wide family (module docstring)."""
    (k,) = e.contracted
    f = flit_elements(dtype)
    free = [a for a in e.stream if a not in (k,)]  # (stream-only and batch, stream order)
    lane_axis = e.trf_only[0] if e.trf_only else None
    lanes = [n for n in hw.CONTRACT_LANES if lane_axis is None and n == 1 or
             lane_axis is not None and axes[lane_axis] % n == 0]
    splits = {a: _divisors(axes[a]) if wide or a not in e.batch else [axes[a]] for a in free}
    rows = {lane: _divisors(axes[lane_axis] // lane) if lane_axis else [1] for lane in lanes}
    count = (12 if wide else 6) * sum(len(r) for r in rows.values()) * math.prod(
        len(d) for d in splits.values())
    limits.check(count, limits.CONTRACTION_MAX_CANDIDATES, "the contraction's candidate "
                 "mappings", "candidates", {f"axis {a}": len(d) for a, d in splits.items()},
                 "the contraction search", "give the axes fewer divisors (pad one to a "
                 "power of two) or fix a dimension")
    for spatial in itertools.product(*(splits[a] for a in free)):
        for lane in lanes:
            for r in rows[lane]:
                yield from _with_lane(e, axes, dtype, k, f, free, spatial, lane_axis,
                                      lane, r, wide)


def _with_lane(e: Einsum, axes: dict[str, int], dtype: str, k: str, f: int,
               free: list[str], spatial: tuple[int, ...], lane_axis: str | None,
               lane: int, rows: int = 1, wide: bool = False) -> Iterator[Candidate]:
    """The candidates with ``lane`` values of the TRF-only axis in the Lane and ``rows``
    more in the TRF's Element (the Outer stage reads a row a packet: its Time broadcast
    over them), the rest on slices."""
    digits, times, held = [], [], []
    for a, s in zip(free, spatial):
        sp, tm = _split(a, axes[a], s)
        if sp is not None:
            digits.append((sp, s))
        if tm is not None:
            times.append(tm)
            if a in e.batch:  # (a batch axis's Time part: the TRF holds its rows too)
                held.append(tm)
    lane_text, row = "m![1]", []
    if lane_axis is not None:
        n = axes[lane_axis]
        if lane > 1:
            lane_text = f"m![{lane_axis} % {lane}]" if lane < n else f"m![{lane_axis}]"
        if rows > 1:  # (rows of it in the TRF's Element, each a time step of the Outer)
            row = [_digit(lane_axis, n, lane, rows)]
        if lane * rows < n:  # (the rest of it on slices: the stream broadcast over them)
            digits.append((f"{lane_axis} / {lane * rows}" if lane * rows > 1 else lane_axis,
                           n // (lane * rows)))
    units = 1
    for _, s in digits:
        units *= s
    steps = 1
    for a, s in zip(free, spatial):
        steps *= axes[a] // s
    for place in _spatial(digits, wide):
        for packet, k_times, outer_packet, packed, where in _k_options(k, axes[k], f):
            time = times + k_times
            outer_time = time
            if packed:  # (the packed digit of 2 flits leaves K / 2F in Time)
                rest = axes[k] // (2 * f)
                outer_time = times + ([f"{k} / {2 * f}"] if rest > 1 else [])
            for mode in MODES:
                yield Candidate(
                    {"cluster": place[0], "slice": place[1], "time": _m(time),
                     "packet": packet, "lane": lane_text, "element": _m(held + row + [k])},
                    (_m(outer_time + row), outer_packet), _m(times + row), mode, units,
                    where, steps * (axes[k] if where == "time" else max(1, axes[k] // f)))


def _digit(a: str, n: int, inner: int, count: int) -> str:
    """The digit of axis ``a`` (``n`` values) holding ``count`` values above its inner
    ``inner``."""
    if inner == 1:
        return a if count == n else f"{a} % {count}"
    return f"{a} / {inner}" if inner * count == n else f"{a} / {inner} % {count}"


# ---- a candidate checked ------------------------------------------------------------------
def evaluate(c: Candidate, e: Einsum, axes: dict[str, int], dtype: str) -> Evaluated:
    """The candidate lowered by the Contraction Engine's model, or the rules it breaks."""
    try:
        src, trf, out, engine = tensors_of(c, e, axes, dtype)
        plan = engine.lower(src, trf, out, axes)
    except TcplanError as err:
        if err.kind == "input":
            raise
        return Evaluated(c, violations=tuple(err.violations))
    flits = trf.dims["lane"].size * trf.dims["element"].size // flit_elements(dtype)
    return Evaluated(c, plan, max(1, flits))


def tensors_of(c: Candidate, e: Einsum, axes: dict[str, int], dtype: str
               ) -> tuple[Tensor, Tensor, Tensor, Contraction]:
    """The stream, the TRF, the result stream and the engine of a candidate."""
    def m(text: str) -> Mapping:
        return parse(text, axes)
    spatial = {"chip": m("m![1]"), "cluster": m(c.dims["cluster"]),
               "slice": m(c.dims["slice"])}
    src = Tensor("stream", "stream", dtype, {**spatial, "time": m(c.dims["time"]),
                                             "packet": m(c.dims["packet"])})
    trf = Tensor("trf", "trf", dtype, {**spatial, "lane": m(c.dims["lane"]),
                                       "element": m(c.dims["element"])})
    engine = Contraction(m(c.outer[0]), m(c.outer[1]), m("m![1]"), m(c.time_out), c.mode)
    lf = fold(axes, trf.dims["lane"], engine.time, engine.packet, c.mode)
    acc = hw.CONTRACT_ACCUMULATOR.get(dtype, dtype)
    out = Tensor("result", "stream", acc, {**spatial, "time": lf.out_time,
                                           "packet": lf.out_packet})
    return src, trf, out, engine


def matches(c: Candidate, fixed: dict[str, Mapping], axes: dict[str, int]) -> bool:
    """Does the candidate hold what each fixed dimension holds?"""
    from tcplan.model.mapping import same_holding
    return all(same_holding(parse(c.dims[d], axes), m) for d, m in fixed.items())


# ---- the search ---------------------------------------------------------------------------
def search(e: Einsum, axes: dict[str, int], dtype: str, fixed: dict[str, Mapping],
           time_limit: float = 10.0, seed: int = 0) -> "Choice":
    """Every candidate that holds the fixed dimensions, evaluated in the order of its lower
    bound (its stream's flits: the Stream Adapter takes one a cycle) until the bound
    passes the best cycles found (no candidate left can reach them), then chosen."""
    held, total = family(e, axes, dtype, lambda c: matches(c, fixed, axes))
    pool = sorted(held, key=lambda c: (c.flits, c.units))
    if not pool:  # (what the problem fixes no candidate holds: that is the conflict)
        text = ", ".join(f"{d} {m.text()}" for d, m in fixed.items())
        v = fail("contraction-fixed", (text,), fixed=text,
                 candidates=total).violations[0]
        return Choice(None, 0, ("contraction-fixed",), (v,), True, total)
    rows: list[Evaluated] = []
    best: int | None = None
    for c in pool:
        if best is not None and c.flits > best:
            break  # (every candidate after this one takes more cycles than the best)
        r = evaluate(c, e, axes, dtype)
        rows.append(r)
        if r.plan is not None and (best is None or r.cycles < best):
            best = r.cycles
    out = choose(rows, time_limit, seed)
    if out.best is None and out.core and fixed and \
            search(e, axes, dtype, {}, time_limit, seed).best is not None:
        text = ", ".join(f"{d} {m.text()}" for d, m in fixed.items())
        v = fail("contraction-fixed", (text,), fixed=text,
                 candidates=total).violations[0]  # (freed, the rules are met)
        return Choice(None, len(rows), ("contraction-fixed",) + out.core,
                      (v,) + out.examples, True, len(pool))
    return Choice(out.best, len(rows), out.core, out.examples, out.proven, len(pool))


# ---- the choice ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Choice:
    """The search's outcome: the best candidate (None when every one breaks a rule), how
    many were evaluated, and the minimal rules that leave none."""

    best: Evaluated | None
    evaluated: int
    core: tuple[str, ...] = ()
    examples: tuple[Violation, ...] = ()
    proven: bool = True
    candidates: int = 0  # the candidates holding the fixed dimensions


def choose(rows: list[Evaluated], time_limit: float = 10.0, seed: int = 0) -> Choice:
    """The best candidate that breaks no rule: the least cycles, then the fewest engaged
    multipliers, then the fewest units (a least element of an explicit list, exact); when
    every one breaks a rule, :func:`conflict` names a minimal set of the rules."""
    ok = [r for r in rows if r.plan is not None]
    if ok:
        best = min(ok, key=lambda r: (r.cycles, r.engaged, r.candidate.units))
        return Choice(best, len(rows))
    return conflict(rows, time_limit, seed)


def conflict(rows: list[Evaluated], time_limit: float = 10.0, seed: int = 0) -> Choice:
    """CP-SAT over the candidates: exactly one chosen, each rule an assumption literal that
    forbids the candidates breaking it; infeasible, its core shrunk by deletion is a
    minimal set of rules every candidate breaks one of."""
    from ortools.sat.python import cp_model
    m = cp_model.CpModel()
    rules = sorted({v.rule for r in rows for v in r.violations})
    enforced = {r: m.new_bool_var(f"enforce {r}") for r in rules}
    pick = [m.new_bool_var(f"candidate {k}") for k in range(len(rows))]
    m.add_exactly_one(pick)
    for lit, r in zip(pick, rows):
        for v in {v.rule for v in r.violations}:
            m.add_implication(lit, enforced[v].Not())
    m.add_assumptions(list(enforced.values()))
    sv = solver(time_limit, seed)
    st = sv.solve(m)
    if st == cp_model.INFEASIBLE:
        core = _core(m, enforced, sv, time_limit, seed)
        return Choice(None, len(rows), tuple(core), _examples(rows, core))
    return Choice(None, len(rows), proven=False)  # (the time limit, or no candidate)



def _core(m, enforced: dict[str, Any], sv, time_limit: float, seed: int) -> list[str]:
    """A minimal set of rules no candidate escapes (the solver's core, shrunk by
    deletion)."""
    from ortools.sat.python import cp_model
    found = set(sv.sufficient_assumptions_for_infeasibility())
    core = [r for r, lit in enforced.items() if lit.index in found] or list(enforced)
    k = 0
    while k < len(core):
        trial = core[:k] + core[k + 1:]
        m.clear_assumptions()
        m.add_assumptions([enforced[r] for r in trial])
        if solver(time_limit, seed).solve(m) == cp_model.INFEASIBLE:
            core = trial
        else:
            k += 1
    return core


def _examples(rows: list[Evaluated], core: list[str]) -> tuple[Violation, ...]:
    """One violation of each core rule, as a candidate broke it."""
    out = []
    for rule in core:
        out.append(next(v for r in rows for v in r.violations if v.rule == rule))
    return tuple(out)
