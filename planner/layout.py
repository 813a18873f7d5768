"""Layout search for a DMA whose stream is free: the loop order (Time), the Packet, and
optionally the engine split and the destination (its Element order as a model variable; its
Slice, Cluster, Chip or one padding amount, and the engine split, as options the search
branches on, each its own model: see :class:`Option`).

The candidate factors are the *pieces* of every axis the destination holds: the common
refinement of the digit ranges of the source, the destination and the stream's spatial
(engine-selecting) mappings, minus what those spatial mappings carry, split where the packet
cap or a whole 256-byte request needs it (:func:`candidate_pieces`).

:func:`search` builds one CP-SAT model: the loop order as a circuit, the Packet as its
innermost part, the DMA packet as one of the contiguous runs, and every order rule of the
registry (entry limit after merges, iteration limit, packet cap, alignment) and every bound
of the problem as a constraint guarded by its own assumption literal.  Its objective is the
DMA packet's :func:`model.cost.floor`.  Each plan it proposes is lowered by
:func:`model.dma.lower` (every rule), estimated (:func:`model.cost.estimate`) and excluded,
until the model's optimum reaches the best estimate: the plan is the estimate's minimum over
every legal plan, and a cut search says ``feasible``.  An infeasible model's core, shrunk by
deletion, is the conflict `tcplan explain` prints.  The planner only chooses: the executor
verifies the chosen plan.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

from tcplan.model import dma
from tcplan.model import hardware as hw
from tcplan.model.arith import divisors
from tcplan.model.cost import estimate
from tcplan.model.cost import floor as cost_floor
from tcplan.model.mapping import Mapping, axis, join
from tcplan.model.rules import TcplanError, Violation, fail
from tcplan.model.sequencer import _split_hint
from tcplan.model.tiers import Tensor

from . import cpsat
from .outcome import Dominated, Found, NoPlan, Outcome, TimedOut


#: the requirement a problem's packet bound stands for (rejections, explanations)
BOUND_PACKET = "bound:packet_max_bytes"
#: the requirement a problem's alignment bound on the destination's Element rows stands for
BOUND_ALIGN = "bound:align_bytes"
#: the requirement a free Slice's footprint bound stands for
BOUND_FOOTPRINT = "bound:max_footprint_bytes"


@dataclass(frozen=True)
class Piece:
    axis: str
    lo: int
    hi: int  # digit range [lo, hi)
    size: int  # axis size
    pad: int | None = None  # a whole axis padded on both sides: the positions both have
    ext: int | None = None  # the axis's padded extent where its size does not split evenly

    @property
    def count(self) -> int:
        return self.hi // self.lo

    @cached_property
    def mapping(self) -> Mapping:
        """The piece as a stream term: ``A``, ``A % hi``, ``A / lo``, ``A / lo % count``."""
        a = axis(self.axis, self.size)
        if self.lo == 1 and self.hi >= self.size:
            return a.pad(self.pad) if self.pad else a
        # digits of an axis whose size the cut does not divide: name them on the padded axis
        if self.ext and ((self.hi < self.size and self.size % self.hi)
                         or (self.lo > 1 and self.size % self.lo)):
            a = a.pad(self.ext)
        # a digit cut short (``A = 5``: the live values end inside the digit's range)
        short = not self.ext and (self.size // self.lo) % self.count
        if self.lo == 1:
            return a.resize(self.hi) if short else a % self.hi
        if self.hi >= self.size:
            return a / self.lo
        return (a / self.lo).resize(self.count) if short else a / self.lo % self.count

    def term(self) -> str:
        """The piece's term as text (names in the model and in messages)."""
        return self.mapping.body()


@dataclass(frozen=True)
class FreeElement:
    """A destination's free Element (the loader's, planner/dma_spec.py): every digit its
    other dimensions leave (``terms``, in the source's order) and those of them kept
    outermost, in order (``prefix``)."""

    terms: tuple[Mapping, ...]
    prefix: tuple[Mapping, ...] = ()


@dataclass
class Candidate:
    order: tuple[int, ...]  # piece indices, outermost first
    packet: int  # how many innermost pieces form the packet
    time: Mapping  # the stream's Time and Packet
    packet_map: Mapping
    cycles: int = 0
    plan: Any = None
    element: Mapping | None = None  # the destination's Element, when the planner chose it
    option: int = 0  # which of the search's options (placement and engine split)


@dataclass
class Search:
    """What a layout search tried and kept: the pieces it ordered, the legal plans it found
    (ranked), the rules that rejected the others, the model and its requirements, the
    conflict when there is no plan, and its counts and times.  How the search ended is the
    :class:`planner.outcome.Outcome` that carries it."""

    pieces: list[Piece]
    candidates: list[Candidate]  # legal ones, ranked
    rejected: dict[str, int] = field(default_factory=dict)  # rule id -> candidates
    examples: dict[str, Any] = field(default_factory=dict)  # rule id -> first Violation
    enumerated: int = 0  # plans the model proposed (lowered and estimated)
    conflict: list | None = None  # the minimal core of Requirements, when infeasible
    model: Any = None  # the CP-SAT model before the search excluded any plan
    requirements: list = field(default_factory=list)  # its assumption literals
    scale: int = 1  # objective units per cycle
    options: list = field(default_factory=list)  # the placements and engine splits searched
    minimal: bool = True  # the conflict is shown minimal (False: the time limit stopped it)
    rounds: int = 0  # pairs (source order, option) the outer model of a free source proposed
    models: int = 0  # option models built and searched
    times: dict = field(default_factory=lambda: {"cp-sat": 0.0, "lowering": 0.0,
                                                 "estimate": 0.0})  # seconds spent in each
    searched: bool = True  # False: options lowered as given, no model (a given stream)
    #: what shows the conflict: the model's core, or, when the time limit cut the search,
    #: the rules alone (``rules``: :meth:`_Searcher.rules_proof`)
    proof: str = "model"

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    @property
    def split(self) -> dict[str, Mapping]:
        """The engine split of the best plan's option (the stream's Cluster and Slice)."""
        return self.options[self.best.option].split


def _axes_of(*tensors: Tensor) -> dict[str, int]:
    """Every axis the tensors name, with its size."""
    axes: dict[str, int] = {}
    for t in tensors:
        for m in t.dims.values():
            axes.update(m.axes)
    return axes


def _cap(packet_max_bytes: int | None) -> int:
    """The DMA packet's byte limit: the hardware cap, or the problem's bound below it."""
    return hw.DMA_MAX_PACKET_BYTES if packet_max_bytes is None else min(
        packet_max_bytes, hw.DMA_MAX_PACKET_BYTES)


def _twos(n: int) -> int:
    """The 2-adic order of n (how many times 2 divides it)."""
    return (n & -n).bit_length() - 1


def _split(p: Piece, n: int, fits) -> list[Piece] | None:
    """Piece ``p`` (``n`` positions) cut at its largest divisor ``d`` with ``fits(d)`` (bytes
    8-byte aligned first): [outer, inner], or None when no divisor fits."""
    ds = [d for d in divisors(n)[1:-1] if fits(d)[0]]
    if not ds:
        return None
    d = max(ds, key=lambda d: (fits(d)[1] % hw.DMA_HBM_DM_ALIGN == 0, d))
    return [Piece(p.axis, p.lo * d, p.hi, p.size), Piece(p.axis, p.lo, p.lo * d, p.size)]


def _ranges(t: Tensor) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for m in t.dims.values():
        for f in m.factors:
            if f.axis is None:
                continue
            # the live digits (padding positions carry nothing to move)
            out.setdefault(f.axis, []).append((f.lo, min(f.lo * f.count, m.axes[f.axis])))
    return out


def pieces_of(source: Tensor, destination: Tensor, spatial: dict) -> list[Piece]:
    """The common refinement of the three sides' digit ranges over what the destination holds,
    minus the stream's spatial digits."""
    axes = {}
    for t in (source, destination):
        for m in t.dims.values():
            axes.update(m.axes)
    for m in spatial.values():
        axes.update(m.axes)
    held = _ranges(destination)
    cuts: dict[str, set[int]] = {}
    for rs in (_ranges(source), held, *[_ranges(Tensor("s", "stream", source.dtype, {d: m}))
                                        for d, m in spatial.items()]):
        for a, lst in rs.items():
            for lo, hi in lst:
                cuts.setdefault(a, set()).update((lo, hi))
    spatial_r: dict[str, list[tuple[int, int]]] = {}
    for d, m in spatial.items():
        for a, lst in _ranges(Tensor("s", "stream", source.dtype, {d: m})).items():
            spatial_r.setdefault(a, []).extend(lst)
    out = []
    for a in sorted(held, key=lambda a: list(axes).index(a) if a in axes else 0):
        pts = sorted(cuts[a])
        for lo, hi in zip(pts, pts[1:]):
            inside = any(l0 <= lo and hi <= h0 for l0, h0 in held[a])
            taken = any(l0 <= lo and hi <= h0 for l0, h0 in spatial_r.get(a, []))
            if inside and not taken and hi > lo:
                pad = None
                if lo == 1 and hi >= axes[a]:  # padded on both sides: stream the padding
                    ext = min(_extent(source, a), _extent(destination, a))
                    pad = ext if ext > axes[a] else None
                widest = max((f.lo * f.size for t in (source, destination, *[
                    Tensor("s", "stream", source.dtype, {d: m}) for d, m in spatial.items()])
                    for mm in t.dims.values() for f in mm.factors if f.axis == a),
                    default=axes[a])
                out.append(Piece(a, lo, hi, axes[a], pad,
                                 widest if widest > axes[a] else None))
    return out


def _extent(t: Tensor, axis: str) -> int:
    """The positions a tensor gives a whole axis held by one factor (with its padding), or
    the axis size."""
    for m in t.dims.values():
        for f in m.factors:
            if f.axis == axis and f.lo == 1:
                return f.size  # positions, padding included
    return 0


def _fit(pieces: list[Piece], most: int, eb: int) -> list[Piece]:
    """Split a piece that alone exceeds the packet limit at its largest divisor that fits
    (preferring one whose bytes keep 8-byte alignment), so that its inner part can still be
    the packet."""
    out = []
    for p in pieces:
        cut = _split(p, p.count, lambda d: (d <= most, d * eb)) \
            if p.count > most > 1 else None
        out += cut or [p]
    return out


#: the rules whose outcome depends on the order and the packet: encoded in the CP-SAT model
ORDER_RULES = ("entry-limit", "iteration-limit", "dma-packet-max", "dma-hbm-dm-align",
               "dma-dm-write-align")


@dataclass
class Requirement:
    """One assumption literal of the model: a rule instance or a bound of the problem."""

    key: str  # unique: rule id (or BOUND_PACKET) and the term it is about
    rule: str | None  # the registry rule; None for a bound the problem sets
    violation: Any  # a Violation describing the instance (None for a bound)
    literal: Any = None
    option: str = ""  # the placement or engine split it belongs to ("" for the only one)


@dataclass
class _Loops:
    """The pieces as the lowering cuts them: positions and (read, write) strides."""

    terms: list[str]
    n: list[int]
    read: list[int]
    write: list[int]
    free: list[bool] = field(default_factory=list)  # in a free destination Element

    @property
    def write_free(self) -> bool:
        return any(self.free)

    def merges(self, i: int, j: int) -> bool:
        """Can loops i (outer) and j (inner), adjacent, merge (contiguous on both sides)? A
        free Element order can make any two of its loops contiguous on the write side; a
        loop of a free Element and one of another dimension never are."""
        fi, fj = self.is_free(i), self.is_free(j)
        return self.read[i] == self.n[j] * self.read[j] and (
            (fi and fj) or (not fi and not fj and self.write[i] == self.n[j] * self.write[j]))

    def unit(self, i: int) -> bool:
        return self.read[i] == 1 and (self.is_free(i) or self.write[i] == 1)

    def is_free(self, i: int) -> bool:
        return bool(self.free) and self.free[i]

    def chains(self) -> list[tuple[int, ...]]:
        """Every run that can be the innermost contiguous part (outermost first): a unit loop
        and loops merging outward, plus the empty run."""
        out: list[tuple[int, ...]] = [()]
        todo: list[tuple[int, ...]] = [(i,) for i in range(len(self.n)) if self.unit(i)]
        while todo:
            ch = todo.pop()
            out.append(ch)
            todo += [(i,) + ch for i in range(len(self.n))
                     if i not in ch and self.merges(i, ch[0])]
        return out


def _free_loops(opt: "Option", pieces: list[Piece]) -> list[bool]:
    """Which pieces lie in the destination's free Element (its order chosen too)."""
    dst = opt.destination
    held = _ranges(Tensor("e", dst.tier, dst.dtype, {"element": dst.dims["element"]}))
    return [opt.free_element is not None and any(
        lo <= p.lo and p.hi <= hi for lo, hi in held.get(p.axis, [])) for p in pieces]


def _loops(pieces: list[Piece], lp: list, free: list[bool] | None = None) -> _Loops:
    """The pieces' loops as the lowering cuts them (``lp``: positions, strides)."""
    return _Loops([p.term() for p in pieces], [x.positions for x in lp],
                  [x.strides[0] for x in lp], [x.strides[1] for x in lp], free or [])


def _stream(stream: Tensor, time_t: list[Mapping], pack_t: list[Mapping]) -> Tensor:
    """The stream with its Time and Packet made of the given terms, outermost first."""
    return Tensor("stream", "stream", stream.dtype,
                  {**stream.dims, "time": join(time_t), "packet": join(pack_t)})


def _widen(pieces: list[Piece], lp: list, eb: int, cap: int) -> list[Piece]:
    """Along each side's contiguous run (from its unit-stride piece outward), where the run
    is still under one 256-byte request and the next piece would take it past the packet
    cap, split that piece at its largest divisor that fits (8-byte aligned first): the
    packet can then be as large as the cap allows.  The split is order-independent."""
    out: list[Piece | list[Piece]] = list(pieces)
    for k in (0, 1):
        at = {p.strides[k]: i for i, p in enumerate(lp) if p.strides[k] > 0}
        cum, i = 1, at.get(1)
        while i is not None:
            n = lp[i].positions
            if cum * eb < hw.DMA_REQUEST_BYTES and cum * n * eb > cap and \
                    out[i] is pieces[i] and pieces[i].count == n:
                out[i] = _split(pieces[i], n, lambda d, c=cum: (c * d * eb <= cap, c * d * eb)
                                ) or pieces[i]
                break
            cum *= n
            i = at.get(cum)
    flat: list[Piece] = []
    for x in out:
        flat += x if isinstance(x, list) else [x]
    return flat


def candidate_pieces(source: Tensor, destination: Tensor, stream: Tensor,
                     packet_max_bytes: int | None = None) -> tuple[list[Piece], list]:
    """The factors a free stream orders: the common refinement of the digit ranges
    (:func:`pieces_of`), a piece larger than the packet cap split (:func:`_fit`), and a piece
    that keeps the contiguous run under one request split (:func:`_widen`); with the loops
    the lowering cuts from them (positions, strides)."""
    spatial = {d: stream.dims[d] for d in ("chip", "cluster", "slice")}
    eb = source.elem_bytes
    cap = _cap(packet_max_bytes)
    pieces = _fit(pieces_of(source, destination, spatial), max(cap // eb, 1), eb)

    def loops(ps: list[Piece]) -> list:
        return dma.loop_pieces(source, destination,
                               _stream(stream, [p.mapping for p in ps], []))
    lp = loops(pieces)
    wider = _widen(pieces, lp, eb, cap)
    if wider != pieces:  # a piece split so that the packet can reach a whole request
        pieces, lp = wider, loops(wider)
    return pieces, lp


@dataclass
class Option:
    """One choice besides the order: a destination placement (a free Slice, Cluster, Chip or
    padding candidate, with its Element free or given) and an engine split.  Each option is
    its own CP-SAT model; the search branches on the options (docs/decisions.md item 66)."""

    label: str  # how explanations name it ("" for the only one)
    destination: Tensor
    stream: Tensor
    free_element: FreeElement | None = None
    split: dict[str, Mapping] = field(default_factory=dict)  # the stream's Cluster, Slice
    engine_at: dict[str, int] | None = None
    over: tuple[str, ...] = ()  # bounds of the problem that exclude it (footprint)
    source: Tensor | None = None  # a candidate layout of a free HBM source (else the given)


@dataclass
class _Built:
    """An option's part of the model: its pieces, loops and variables."""

    opt: Option
    pieces: list[Piece]
    terms: list[str]  # the pieces' terms as text (names)
    L: _Loops
    E: list[int]
    x: dict
    y: dict
    pos: list
    inp: list
    epos: list
    tie: Any = 0  # (the DMA packet's floor, the order's tie-break): objective terms
    span: int = 1  # the tie-break's range
    c: int = 0  # the option's index (its rank: ties go to the lower)


@dataclass
class _Model:
    """An option's CP-SAT model, ready to solve."""

    m: Any
    clone: Any  # before the search excluded any plan (for `binding`)
    b: _Built
    reqs: list[Requirement]
    enforce: list
    scale: int  # objective units per cycle
    relax: frozenset[str]  # the rules the lowering relaxes


@dataclass(frozen=True)
class SearchRequest:
    """One layout search: the transfer (source, destination, the stream whose Time and
    Packet are free), the problem's bounds, the solver's settings, and how to search (see
    :func:`search`)."""

    source: Tensor
    destination: Tensor
    stream: Tensor
    chips: int
    packet_max_bytes: int | None = None
    align_bytes: int | None = None
    time_limit: float = 10.0
    workers: int = 1
    seed: int = 0
    relax: frozenset[str] = frozenset()
    pcie: bool = False
    engine_at: dict[str, int] | None = None
    free_element: FreeElement | None = None
    options: tuple[Option, ...] | None = None
    beat: int | None = None
    core: bool = True
    prune: bool = True
    progress: Callable[..., None] | None = None
    #: try the rules' own proof (:meth:`_Searcher.rules_proof`) before any model: a graph's
    #: op under a layout it cannot take is rejected in milliseconds, not one model per
    #: option and a minimal core (docs/decisions.md item 133)
    rules_first: bool = False


def search(req: SearchRequest) -> Outcome[Search]:
    """The fastest legal (order, packet) of the free stream by :func:`model.cost.estimate`.

    CP-SAT holds the loop order as a circuit over the pieces, the Packet as a suffix of it,
    the contiguous innermost run, the DMA packet (their common suffix) and every order rule as
    a constraint guarded by an assumption literal (one per rule instance and per bound).  Its
    objective is, per DMA packet, :func:`model.cost.floor` (what the estimate gives at least
    for any order of those packets), with a tie-break that keeps row-stepping loops outer.
    The loop: solve, lower the plan (every rule of the registry), estimate it, exclude it, and
    solve again until the model's optimum reaches the best estimate: the plan returned is then
    the estimate's minimum over all legal plans.  When the model is infeasible, the solver's
    core, shrunk by deletion, is the conflict (``Search.conflict``).

    The outcome (planner/outcome.py): :class:`Found` (``proven`` False when the time limit
    cut the search after a plan), :class:`NoPlan` (the rules in conflict), :class:`TimedOut`
    (no plan before the time limit) or :class:`Dominated` (``beat``); each carries the
    :class:`Search`.  An input mistake (``kind == "input"``) is raised.

    ``options``: the destination placements and engine splits to choose among (by default the
    given ``destination`` and ``stream``).  Each option is its own model, searched in turn and
    told the best plan so far; ties go to the earlier option.  Its rule instances are
    requirements of their own (``key@label``); a bound of the problem has one key for every
    option; an option that breaks a rule no order changes (capacity, placement) is excluded
    by that rule's requirement.  When no option has a plan, :func:`_joint_core` joins the
    options' cores into one minimal across all of them (docs/decisions.md item 66).

    ``free_element`` (a :class:`FreeElement`): the destination's Element order is chosen too,
    as a second circuit over the pieces (the prefix's pieces outermost): two loops merge on the
    write side exactly when the inner one is the outer one's Element successor, and a loop's
    write stride is 8-byte aligned when the 2-adic orders of the pieces inside it in Element
    add up to enough.

    ``align_bytes`` (a bound of the problem, ``bound:align_bytes``): every destination
    Element row (each write stride above one element) is a multiple of it.

    ``beat`` (one option only): a plan found elsewhere; when the model's bound reaches it
    before any plan here, the outcome is :class:`Dominated` (an infeasible model then has no
    conflict shrunk).  ``core=False``: an infeasible model's core is not shrunk (the outer
    model of a free source plans many).
    ``prune=False``: build every option's model, even one whose option floor cannot beat
    the best plan (the benchmark's baseline).  ``progress`` (planner/progress.py) hears
    ``("search", plans lowered, None, "best ..., bound ...")``."""
    return _Searcher(req).run()


def staged(req: SearchRequest) -> "_Searcher":
    """The search of ``req`` in two steps (issue 32, item 2): ``floor()``, what every plan
    takes at least, from its options' static checks alone (no model); then ``run()``, the
    search itself (:func:`search`), the checks not repeated."""
    return _Searcher(req)


class _Searcher:
    """One call of :func:`search`: its request and what it found as fields, its steps as
    methods (check each option for what no order changes, build an option's model,
    solve-lower-exclude it, branch on the options, say why there is no plan)."""

    def __init__(self, req: SearchRequest):
        self.req = req
        self.deadline = time.perf_counter() + req.time_limit
        self.source, self.bound = req.source, req.packet_max_bytes
        options = list(req.options) if req.options is not None else [
            Option("", req.destination, req.stream, req.free_element,
                   engine_at=req.engine_at)]
        self.options, self.single = options, len(options) == 1
        self.result = Search([], [], options=options)
        self.loose = frozenset(ORDER_RULES) | req.relax
        self.failed: list[TcplanError] = []
        self.stop: NoPlan[Search] | None = None
        self.checks_done = False
        self.floors: dict[int, int] = {}

    def floor(self) -> int | None:
        """What every plan of the search takes at least (:func:`model.cost.dma_cycles` as
        well as the estimate: its terms are the bandwidths both charge), from the options'
        static checks alone: the least floor of an option that may have a plan
        (:func:`_option_floor`); None when the checks already answer (no plan: cheap to
        say) or no option is left."""
        self.stop, self.checks_done = self.check_options(), True
        if self.stop is not None or not self.live:
            return None
        return min(self.option_floor(c) for c in self.live)

    def option_floor(self, c: int) -> int:
        """Option ``c``'s floor (:func:`_option_floor`), worked out once."""
        if c not in self.floors:
            self.floors[c] = _option_floor(*self.checked[c][:2])
        return self.floors[c]

    # -- lowering and solving ---------------------------------------------------------------
    def lower_with(self, opt: Option, time_t: list[Mapping], pack_t: list[Mapping],
                   rx: frozenset[str], element: list[Mapping] | None = None):
        src = opt.source or self.source
        dst = opt.destination
        if element is not None:
            dst = dst.with_dims(element=join(element))
        t0 = time.perf_counter()
        try:
            return dma.lower(src, dst, _stream(opt.stream, time_t, pack_t), self.req.chips,
                             opt.engine_at, self.req.pcie, relax=rx)
        finally:
            self.result.times["lowering"] += time.perf_counter() - t0

    def solver(self, limit: float):
        from ortools.sat.python import cp_model
        s = cp_model.CpSolver()
        s.parameters.num_workers = max(self.req.workers, 1)
        s.parameters.random_seed = self.req.seed
        s.parameters.max_time_in_seconds = max(limit, 0.05)
        return s

    # -- what no order changes, per option --------------------------------------------------
    def check_options(self) -> NoPlan[Search] | None:
        """Each option checked for the rules no order changes (``self.checked``); with
        several, one that breaks such a rule is built with it relaxed and excluded by that
        rule's requirement; a rule every option breaks is the answer (the outcome returned;
        an input mistake is raised)."""
        result = self.result
        self.checked: list[tuple[Option, Any, list[Violation], frozenset[str]]] = []
        for opt in self.options:
            extra: set[str] = set()
            static: list[Violation] = []
            src = opt.source or self.source
            try:
                pieces, lp = candidate_pieces(src, opt.destination, opt.stream, self.bound)
            except TcplanError as e:
                if self.single:
                    return self._static_answer(e, [])
                self.failed.append(e)
                self.checked.append((opt, None, [], frozenset()))
                continue
            while True:
                try:
                    got = _static(opt, pieces, lp, self.loose | extra, self.lower_with)
                    break
                except TcplanError as e:
                    if self.single:
                        return self._static_answer(e, pieces)
                    new = {v.rule for v in e.violations} - extra
                    self.failed.append(e)
                    if e.kind == "input" or not new:
                        got = None
                        break
                    static += [v for v in e.violations if v.rule in new]
                    extra |= new
            self.checked.append((opt, got, static, frozenset(extra)))
        self.live = [c for c, (_, got, _, _) in enumerate(self.checked) if got is not None]
        if not self.live:  # every option is malformed or broken beyond relaxing
            if self.failed[0].kind == "input":
                raise self.failed[0]
            result.searched = False  # (no model to search: the first option's error)
            return NoPlan(self.failed[0], result)
        # a rule instance that several options break (the same message) is one requirement
        self.users: dict[tuple[str, str], list[str]] = {}
        for c in self.live:
            for v in {(v.rule, v.message): v for v in self.checked[c][2]}.values():
                self.users.setdefault((v.rule, v.message), []).append(self.checked[c][0].label)
        if not self.single:
            # a rule every option breaks is no choice of placement: it is the answer
            common = set.intersection(*({v.rule for v in self.checked[c][2]}
                                        for c in self.live))
            if common:
                first = self.checked[self.live[0]][2]
                return NoPlan(TcplanError([v for v in first if v.rule in common]), result)
        return None

    def _static_answer(self, e: TcplanError, pieces: list[Piece]) -> NoPlan[Search]:
        """The only option breaks a rule no order changes: that is the answer (an input
        mistake is raised)."""
        if e.kind == "input":
            raise e
        result = self.result
        result.pieces = pieces
        for v in e.violations:
            result.examples.setdefault(v.rule, v)
            result.rejected[v.rule] = 1
        result.conflict = [Requirement(v.rule, v.rule, v) for v in e.violations]
        return NoPlan(e, result)

    # -- an option's model ------------------------------------------------------------------
    def assemble(self, c: int) -> _Model | None:
        """Option ``c``'s CP-SAT model (None when it is malformed).  Its rule instances are
        keyed by the option's label, a bound of the problem and a rule instance that several
        options break by themselves, so the options' models share those keys (the search
        branches on the option; :func:`_joint_core` joins their cores)."""
        m = cpsat.model()
        reqs: list[Requirement] = []

        def requirement(key: str, rule: str | None, v: Any, label: str = "") -> Any:
            if key.startswith("bound:"):  # a bound of the problem: one key for every option
                label = ""
            lit = m.new_bool_var(f"{key}@{label}" if label else key)
            reqs.append(Requirement(lit.name, rule, v, lit, label))
            return lit
        opt, got, static, extra = self.checked[c]
        try:
            b = _build(m, c, opt, got[0], got[1], opt.source or self.source, self.bound,
                       self.req.align_bytes, self.req.pcie, self.source.elem_bytes, self.loose | extra,
                       self.lower_with, requirement, self.result.times)
        except TcplanError as e:
            if self.single or e.kind != "input":
                raise
            self.failed.append(e)  # malformed (a free Element whose digits the split takes)
            return None
        for v in {(v.rule, v.message): v for v in static}.values():
            # out unless the rule is dropped; one key for the options it breaks
            who = self.users[v.rule, v.message]
            lit = requirement(v.rule, v.rule, v, who[0] if len(who) == 1 else
                              "" if len(who) == len(self.live) else
                              f"{who[0]} and {len(who) - 1} more like it")
            m.add_bool_or([~lit])
        for key in opt.over:  # a bound of the problem that excludes this option
            m.add_bool_or([~requirement(key, None, None)])
        # the objective: the DMA packet's floor, then a tie-break that keeps row-stepping
        # loops outer and the Packet no longer than the DMA packet
        scale = b.span
        m.minimize(scale * b.tie[0] + b.tie[1])
        # relax names rule ids or single requirements (keys); the lowering relaxes by rule
        relax = self.req.relax
        off = [r for r in reqs if r.key in relax or (r.rule or r.key) in relax
               or r.key.split("@")[0] in relax]
        enforce = [r.literal for r in reqs if r not in off]
        for r in off:
            m.add_bool_or([~r.literal])  # a relaxed requirement: its constraint is off
        m.add_assumptions(enforce)
        return _Model(m, m.clone(), b, reqs, enforce, scale,
                      relax | {r.rule for r in off if r.rule})

    # -- one model: solve, lower, estimate, exclude -----------------------------------------
    def solve_model(self, pk: _Model, beat: int | None, core: bool) -> str:
        """Solve, lower, estimate and exclude until the model's optimum reaches the best
        estimate (or ``beat``, another option's best): "done", "infeasible", "dominated" or
        "cut" (time)."""
        from ortools.sat.python import cp_model
        result = self.result
        while True:
            sv = self.solver(self.deadline - time.perf_counter())
            t0 = time.perf_counter()
            st = sv.solve(pk.m)
            result.times["cp-sat"] += time.perf_counter() - t0
            if st == cp_model.INFEASIBLE:
                if core and not result.candidates and not result.enumerated:
                    result.conflict, result.minimal = _shrink(
                        pk.m, sv, pk.reqs, pk.enforce, self.solver, self.deadline)
                return "done" if result.candidates else "infeasible"
            if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                return "cut"
            bound = _cycles_of(sv.best_objective_bound, pk.scale)
            if result.candidates and bound >= result.candidates[0].cycles:
                return "done"  # no other plan can beat the best one
            if beat is not None and bound >= beat:
                return "dominated"  # nothing here beats the plan the caller has
            self.propose(pk, sv, bound)
            if time.perf_counter() > self.deadline:
                return "cut"

    def propose(self, pk: _Model, sv, bound: int) -> None:
        """The model's solution: excluded from the model, lowered (every rule), estimated
        and kept as a candidate, or its rejection counted."""
        result, b = self.result, pk.b
        n = len(b.terms)
        order = sorted(range(n), key=lambda i: sv.value(b.pos[i]))
        kk = sum(sv.value(b.inp[i]) for i in range(n))
        result.enumerated += 1
        if self.req.progress is not None:
            self.req.progress("search", result.enumerated, None, _note(
                result, bound, None if self.single else (b.c, len(self.options))))
        seen = [b.x[e] if sv.value(b.x[e]) else ~b.x[e] for e in b.x] + \
            [b.inp[i] if sv.value(b.inp[i]) else ~b.inp[i] for i in range(n)] + \
            [b.y[e] if sv.value(b.y[e]) else ~b.y[e] for e in b.y]
        pk.m.add_bool_or([~lit for lit in seen])  # this plan is done: never again
        maps = [p.mapping for p in b.pieces]
        time_t = [maps[i] for i in order[:n - kk]]
        pack_t = [maps[i] for i in order[n - kk:]]
        element = ([maps[i] for i in sorted(b.E, key=lambda i: sv.value(b.epos[i]))]
                   if b.L.write_free else None)
        try:
            plan = self.lower_with(b.opt, time_t, pack_t, pk.relax, element)
        except TcplanError as e:  # a rule the model does not hold: excluded, go on
            for v in e.violations:
                result.examples.setdefault(v.rule, v)
            for r in {v.rule for v in e.violations}:
                result.rejected[r] = result.rejected.get(r, 0) + 1
            return
        t0 = time.perf_counter()
        cycles = estimate(plan).cycles
        result.times["estimate"] += time.perf_counter() - t0
        result.candidates.append(Candidate(
            tuple(order), kk, plan.stream_dims["time"], plan.stream_dims["packet"], cycles,
            plan, plan.destination.dims["element"] if b.L.write_free else None, b.c))
        # stable: the earlier option, then the first found, wins ties
        result.candidates.sort(key=lambda c: (c.cycles, c.option))

    # -- the options ------------------------------------------------------------------------
    def one_option(self) -> list[str]:
        result = self.result
        pk = self.assemble(self.live[0])
        assert pk is not None  # (the only option: a malformed one raised)
        result.models += 1
        result.model, result.requirements, result.scale = pk.clone, pk.reqs, pk.scale
        result.pieces = pk.b.pieces
        return [self.solve_model(pk, self.req.beat,
                                 core=self.req.core and self.req.beat is None)]

    def each_option(self) -> list[str]:
        """The option first: each option's own model (small, so each solve is quick), told
        the best plan so far, in the options' order; :func:`_joint_core` joins their cores
        when none has a plan."""
        result = self.result
        best_pk, assembled, outcomes = None, 0, []
        models: list[_Model] = []  # the options' models, while none has a plan
        for c in self.live:
            if time.perf_counter() > self.deadline:
                outcomes.append("cut")
                break
            if self.req.prune and result.candidates and \
                    self.option_floor(c) >= result.best.cycles:
                outcomes.append("dominated")  # not worth building: it cannot beat the best
                continue
            pk = self.assemble(c)
            if pk is None:
                continue
            assembled += 1
            result.models += 1
            had = result.best if result.candidates else None
            outcomes.append(self.solve_model(
                pk, result.best.cycles if result.candidates else None, core=False))
            if outcomes[-1] == "infeasible":
                models.append(pk)
            if result.candidates and result.best is not had:
                best_pk = pk
            if outcomes[-1] == "cut":
                break
        if not assembled and "cut" not in outcomes:  # every option is malformed
            raise next(e for e in self.failed if e.kind == "input")
        if best_pk is not None:
            result.model, result.requirements, result.scale = \
                best_pk.clone, best_pk.reqs, best_pk.scale
            result.pieces = best_pk.b.pieces
        elif outcomes and all(o == "infeasible" for o in outcomes):
            # no option has a plan: the problem over all options (their disjunction) has
            # none exactly when no option's model has; its core, option by option
            result.pieces = models[0].b.pieces
            result.requirements = list({r.key: r for pk in models for r in pk.reqs}.values())
            result.conflict, result.minimal = _joint_core(models, self.solver, self.deadline)
        return outcomes

    # -- the whole search -------------------------------------------------------------------
    def run(self) -> Outcome[Search]:
        stop = self.stop if self.checks_done else self.check_options()
        if stop is not None:
            return stop
        proof = self.rules_proof() if self.req.rules_first else None
        if proof is not None:
            self.result.conflict, self.result.minimal = proof
            self.result.proof = "rules"
            return NoPlan(self.no_plan(), self.result)
        outcomes = self.one_option() if self.single else self.each_option()
        result = self.result
        if outcomes == ["dominated"] and self.single and not result.candidates:
            return Dominated(result)
        if "cut" in outcomes:  # the time limit cut the search
            if result.candidates:
                return Found(result, proven=False)
            proof = self.rules_proof()  # before giving up on time: the rules' own proof
            if proof is not None:
                result.conflict, result.minimal = proof
                result.proof = "rules"
                return NoPlan(self.no_plan(), result)
            return TimedOut(fail("plan-time-limit", (), limit=f"{self.req.time_limit:g}",
                                 lowered=result.enumerated), result)
        if not result.candidates:
            return NoPlan(self.no_plan(), result)
        return Found(result)

    def rules_proof(self) -> tuple[list[Requirement], bool] | None:
        """No plan, shown without the model (the time limit cut the search): every option
        dead under a few rules read off its loops (:class:`_Dead`: the DMA packet's
        alignment and the packet bound over every run that can be the packet, too few
        merges for the entry limit, what no order changes), shrunk by deletion over those
        rules.  The conflict and whether it is shown minimal, or None."""
        pcie, bound, eb = self.req.pcie, self.bound, self.source.elem_bytes
        dead = [_Dead.of(opt, got, static, self.source, eb, bound, pcie)
                for opt, got, static, _ in (self.checked[c] for c in self.live)]
        for d in dead:  # (a relaxed requirement is none: explain's deletion filter)
            d.drop_relaxed(self.req.relax)
        keys = list(dict.fromkeys(k for d in dead for k in d.keys))
        if not keys or not all(d.dead(set(keys)) for d in dead):
            return None
        drop_first = [k for k in keys if k not in ("align", BOUND_PACKET)] + [
            k for k in (BOUND_PACKET, "align") if k in keys]
        core = set(keys)
        for k in drop_first:
            if all(d.dead(core - {k}) for d in dead):
                core.discard(k)
        self.result.pieces = self.result.pieces or (dead[0].pieces if self.single else [])
        reqs = [r for d in dead for r in d.requirements(core)]
        reqs = list({(r.key, r.option): r for r in reqs}.values())
        return reqs, not ("entry-limit" in core and len(core) > 1)  # (its test is a bound)

    def no_plan(self) -> TcplanError:
        """``plan-no-layout``: the model's conflict, or the rules that rejected its plans."""
        result = self.result
        if result.conflict:
            rules = sorted({r.rule or r.key for r in result.conflict})
            for r in result.conflict:
                result.rejected[r.rule or r.key] = result.rejected.get(r.rule or r.key, 0) + 1
                if r.violation is not None:
                    result.examples.setdefault(r.rule, r.violation)
        else:
            rules = [f"{r} (rejected {k} proposed plan(s))"
                     for r, k in sorted(result.rejected.items())]
        pieces = (", ".join(p.term() for p in result.pieces) if self.single else
                  f"in any of {len(self.options)} options (source layouts, placements, "
                  "engine splits)")
        return fail("plan-no-layout", tuple(result.rejected), pieces=pieces,
                    rules=("in conflict: " if result.conflict else "") + ", ".join(rules)
                    or "the model has no plan")


def _static(opt: Option, pieces: list[Piece], lp: list, loose: frozenset[str], lower_with
            ) -> tuple[list[Piece], list, Any]:
    """An option's pieces, loops and plan in their own order; raises what no order changes
    (tiers, dtype, placement, capacity, the engine count)."""
    terms = [p.term() for p in pieces]
    plan = lower_with(opt, [p.mapping for p in pieces], [], loose)
    if [p.term for p in lp] != terms:  # pragma: no cover - pieces are the refinement
        raise fail("plan-no-layout", (), pieces=", ".join(terms),
                   rules="the lowering cuts the pieces differently")
    return pieces, lp, plan


def _floors(opt: Option, chains: list[tuple[int, ...]], L: _Loops, terms: list[Mapping],
            free: list[bool], eb: int, loose: frozenset[str], lower_with,
            times: dict | None = None) -> list[int]:
    """What each DMA packet costs at least, whatever the order (the model's objective); with
    a free Element the representative's Element ends in the packet's run, as every plan with
    that packet does, so it writes the same packets."""
    n = len(terms)
    floors = []
    for ch in chains:
        if math.prod(L.n[i] for i in ch) * eb > hw.DMA_MAX_PACKET_BYTES:
            floors.append(0)  # over the packet cap: only a relaxed dma-packet-max reaches it
            continue
        rest = [terms[i] for i in range(n) if i not in ch]
        pack = [terms[i] for i in ch]
        try:
            plan = lower_with(opt, rest, pack, loose,
                              [terms[i] for i in range(n) if i not in ch and free[i]]
                              + [terms[i] for i in ch if free[i]] if L.write_free else None)
            t0 = time.perf_counter()
            floors.append(cost_floor(plan))
            if times is not None:
                times["estimate"] += time.perf_counter() - t0
        except TcplanError:
            floors.append(0)
    return floors


def _build(m, c: int, opt: Option, pieces: list[Piece], lp: list, source: Tensor,
           packet_max_bytes: int | None, align_bytes: int | None, pcie: bool, eb: int,
           loose: frozenset[str], lower_with, requirement, times: dict | None = None
           ) -> _Built:
    """Option ``c``'s variables and constraints in model ``m``: the loop order (and a free
    Element order) as circuits, the Packet, the DMA packet, and every order rule as a
    requirement (``requirement`` names it for the option)."""
    bld = _Builder(m, c, opt, pieces, lp, source, eb, requirement)
    bld.check_free_element()
    floors = _floors(opt, bld.chains, bld.L, [p.mapping for p in pieces], bld.free, eb,
                     loose, lower_with, times)
    bld.loop_order()
    if bld.L.write_free:
        bld.element_order()
    bld.loop_links()
    bld.dma_packet()
    bld.packet_max()
    if packet_max_bytes is not None:
        bld.packet_bound(packet_max_bytes)
    bld.iteration_limit()
    bld.entry_limit()
    if not pcie:
        bld.alignment()
    if align_bytes is not None:
        bld.rows_bound(align_bytes)
    return bld.objective(floors)


class _Builder:
    """The steps of :func:`_build`: the pieces' loops and the option's variables as fields,
    one method per part of the model."""

    def __init__(self, m, c: int, opt: Option, pieces: list[Piece], lp: list,
                 source: Tensor, eb: int, requirement):
        self.m, self.c, self.opt, self.pieces, self.source, self.eb = (m, c, opt, pieces,
                                                                       source, eb)
        self.requirement = requirement
        self.pre = f"o{c}_"
        self.n, self.terms = len(pieces), [p.term() for p in pieces]
        self.free = _free_loops(opt, pieces)
        self.L = _loops(pieces, lp, self.free)
        self.E = [i for i in range(self.n) if self.free[i]]  # the free Element's loops
        # what each DMA packet costs at least, whatever the order (the model's objective);
        # with a free Element the representative's Element ends in the packet's run, as
        # every plan with that packet does, so it writes the same packets
        self.chains = self.L.chains()
        self.y: dict[tuple[int, int], Any] = {}  # a free Element order: D -> ... -> D
        self.epos: list[Any] = []
        self._inside: dict[tuple[int, int], Any] = {}

    def check_free_element(self) -> None:
        dst = self.opt.destination
        if self.opt.free_element is not None and math.prod(
                self.L.n[i] for i in self.E) != dst.dims["element"].size:
            raise fail("bad-request", detail="a free Element needs every one of its digits "
                       "moved by Time and Packet, but the stream's engine split takes some",
                       fix="give the destination's Element, or an engine split outside it")

    # -- small helpers ----------------------------------------------------------------------
    def req(self, key: str, rule: str | None, v: Any) -> Any:
        return self.requirement(key, rule, v, self.opt.label)

    def var(self, name: str) -> Any:
        return self.m.new_bool_var(f"{self.pre}{name}")

    def chain_bytes(self, ch: tuple[int, ...]) -> int:
        return math.prod(self.L.n[i] for i in ch) * self.eb

    def inside(self, i: int, j: int) -> Any:
        """Is free-Element loop j inside loop i in Element order?"""
        if (i, j) not in self._inside:
            b = self.var(f"element_inside_{i}_{j}")
            self.m.add(self.epos[j] > self.epos[i]).only_enforce_if(b)
            self.m.add(self.epos[j] < self.epos[i]).only_enforce_if(~b)
            self._inside[i, j] = b
        return self._inside[i, j]

    def rows_aligned(self, i: int, need: int, name: str) -> Any:
        """Free-Element loop i's write stride has 2-adic order ``need`` or more: a literal
        that implies it, True when nothing is needed, False when no order gives it."""
        if need <= 0:
            return True
        twos = [(_twos(self.L.n[j]), j) for j in self.E if j != i]
        if sum(v for v, _ in twos) < need:
            return False
        ok = self.var(f"{name}_{self.terms[i]}")
        self.m.add(sum(v * self.inside(i, j) for v, j in twos if v) >= need
                   ).only_enforce_if(ok)
        return ok

    # -- the variables ----------------------------------------------------------------------
    def loop_order(self) -> None:
        """The loop order as a circuit (node n: the outside of the nest), each loop's depth,
        whether it is in the Packet, and whether it is in the innermost contiguous run."""
        m, n, terms, pre = self.m, self.n, self.terms, self.pre
        self.x = {(i, j): m.new_bool_var(f"{pre}next_{i}_{j}") for i in range(n + 1)
                  for j in range(n + 1) if i != j}
        if n:  # every node skips itself exactly when the option is off
            m.add_circuit([(i, j, lit) for (i, j), lit in self.x.items()])
        self.pos = [m.new_int_var(0, max(n - 1, 0), f"{pre}depth_{t}") for t in terms]
        self.inp = [m.new_bool_var(f"{pre}packet_{t}") for t in terms]
        self.inc = [m.new_bool_var(f"{pre}run_{t}") for t in terms]

    def element_order(self) -> None:
        """A free Element's order as a second circuit over its loops, the prefix's pieces
        outermost."""
        m, E, D, pre, terms = self.m, self.E, self.n, self.pre, self.terms
        y = self.y = {(i, j): m.new_bool_var(f"{pre}element_next_{i}_{j}") for i in E + [D]
                      for j in E + [D] if i != j}
        m.add_circuit([(i, j, lit) for (i, j), lit in y.items()])
        epos = self.epos = [m.new_int_var(0, len(E) - 1, f"{pre}element_depth_{t}")
                            if self.free[i] else None for i, t in enumerate(terms)]
        for i in E:
            m.add(epos[i] == 0).only_enforce_if(y[D, i])
            for j in E:
                if i != j:
                    m.add(epos[j] == epos[i] + 1).only_enforce_if(y[i, j])
        fixed: list[int] = []  # the prefix's pieces, outermost first
        assert self.opt.free_element is not None  # (only a free Element has an order)
        for t in self.opt.free_element.prefix:
            f = next(f for f in t.factors if f.axis is not None)
            fixed += sorted((i for i, p in enumerate(self.pieces) if p.axis == f.axis
                             and f.lo <= p.lo and p.hi <= f.lo * f.count),
                            key=lambda i: -self.pieces[i].lo)
        for k, i in enumerate(fixed):
            m.add(epos[i] == k)

    def loop_links(self) -> None:
        """Depths follow the circuit; the Packet is innermost; the contiguous run is an
        innermost chain of loops that merge (a free Element's: its Element successors)."""
        m, n, L, D, x, y, inc, inp = (self.m, self.n, self.L, self.n, self.x, self.y,
                                      self.inc, self.inp)
        for i in range(n):
            m.add(self.pos[i] == 0).only_enforce_if(x[D, i])
            if not L.unit(i):
                m.add_implication(x[i, D], ~inc[i])
            elif L.is_free(i):  # contiguous on the write side: innermost in Element
                m.add_bool_or([~x[i, D], ~inc[i], y[i, D]])
                m.add_bool_or([~x[i, D], inc[i], ~y[i, D]])
            else:
                m.add_implication(x[i, D], inc[i])
            for j in range(n):
                if i == j:
                    continue
                m.add(self.pos[j] == self.pos[i] + 1).only_enforce_if(x[i, j])
                m.add_bool_or([~x[i, j], ~inp[i], inp[j]])  # the Packet is innermost
                if L.merges(i, j):
                    m.add_bool_or([~x[i, j], ~inc[i], inc[j]])
                    if L.is_free(i):  # inc_i == inc_j and j is i's Element successor
                        m.add_bool_or([~x[i, j], ~inc[i], y[i, j]])
                        m.add_bool_or([~x[i, j], inc[i], ~inc[j], ~y[i, j]])
                    else:
                        m.add_bool_or([~x[i, j], inc[i], ~inc[j]])
                else:
                    m.add_implication(x[i, j], ~inc[i])

    def dma_packet(self) -> None:
        """The DMA packet: the common suffix of Packet and the contiguous run, one of the
        chains (``z``), and which loops it holds (``dpk``)."""
        m = self.m
        self.z = z = [self.var(f"dma_packet_{k}") for k in range(len(self.chains))]
        m.add_exactly_one(z)
        self.dpk = []
        for i in range(self.n):
            d = self.var(f"in_dma_packet_{self.terms[i]}")
            m.add_bool_and([self.inp[i], self.inc[i]]).only_enforce_if(d)
            m.add_bool_or([~self.inp[i], ~self.inc[i], d])
            m.add(d == sum(z[k] for k, ch in enumerate(self.chains) if i in ch))
            self.dpk.append(d)
        self.empty = z[self.chains.index(())]

    # -- the order rules, each a requirement ------------------------------------------------
    def packet_max(self) -> None:
        """dma-packet-max: the stream's Packet holds at most 4,096 B."""
        m, n, L, eb, terms = self.m, self.n, self.L, self.eb, self.terms
        f = []
        for i in range(n):
            fi = m.new_int_var(1, L.n[i], f"{self.pre}packet_loop_{terms[i]}")
            m.add(fi == L.n[i]).only_enforce_if(self.inp[i])
            m.add(fi == 1).only_enforce_if(~self.inp[i])
            f.append(fi)
        whole = math.prod(L.n)
        prod = m.new_int_var(1, max(whole, 1), f"{self.pre}packet_elements")
        if f:
            m.add_multiplication_equality(prod, f)
        else:
            m.add(prod == 1)
        most = hw.DMA_MAX_PACKET_BYTES // eb
        if whole <= most:
            return
        big = min((c for c in self.chains if self.chain_bytes(c) > hw.DMA_MAX_PACKET_BYTES),
                  key=self.chain_bytes, default=tuple(range(n)))
        lit = self.req("dma-packet-max", "dma-packet-max", Violation(
            "dma-packet-max", tuple(terms[i] for i in big), {
                "packet": self.chain_bytes(big) // eb, "elem_bytes": eb,
                "bytes": self.chain_bytes(big),
                "suggestion": "m![..., " + (terms[big[0]] if big else "...") + "]"}))
        m.add(prod <= most).only_enforce_if(lit)

    def packet_bound(self, most_bytes: int) -> None:
        """The problem's bound on the DMA packet."""
        over = [k for k, c in enumerate(self.chains) if self.chain_bytes(c) > most_bytes]
        if over:
            lit = self.req(BOUND_PACKET, None, None)
            for k in over:
                self.m.add_implication(lit, ~self.z[k])

    def iteration_limit(self) -> None:
        """iteration-limit: a loop longer than 65,536 is an entry of its own, too long."""
        for i, t in enumerate(self.terms):
            if self.L.n[i] > hw.MAX_ENTRY_ITERATIONS:
                lit = self.req(f"iteration-limit:{t}", "iteration-limit", Violation(
                    "iteration-limit", (t,), {"entry": i, "term": t, "size": self.L.n[i],
                                              "hint": _split_hint(t, self.L.n[i])}))
                self.m.add_bool_or([~lit])

    def entry_limit(self) -> None:
        """entry-limit: more than 8 loops must merge down to 8 (``merged``: loop j directly
        inside loop i, contiguous on both sides)."""
        m, n, L, x, y = self.m, self.n, self.L, self.x, self.y
        self.mergeable = [(i, j) for i in range(n) for j in range(n)
                          if i != j and L.merges(i, j)]
        self.merged = {}
        for e in self.mergeable:
            if L.is_free(e[0]):
                self.merged[e] = self.var(f"merge_{e[0]}_{e[1]}")
                m.add_bool_and([x[e], y[e]]).only_enforce_if(self.merged[e])
                m.add_bool_or([~x[e], ~y[e], self.merged[e]])
            else:
                self.merged[e] = x[e]
        if n <= hw.MAX_SEQUENCER_ENTRIES:
            return
        need = n - hw.MAX_SEQUENCER_ENTRIES
        lit = self.req("entry-limit", "entry-limit", Violation(
            "entry-limit", tuple(self.terms), {
                "count": f"{n} loops need {need} merges; at best",
                "entries": ", ".join(self.terms)}))
        # a DMA packet shorter than the merged contiguous run cuts it in two: one entry more
        cut = self.var("packet_cuts_run")
        for i in range(n):
            m.add_bool_or([cut, ~self.inc[i], self.dpk[i], self.empty])
        m.add(sum(self.merged.values()) - cut >= need).only_enforce_if(lit)

    def alignment(self) -> None:
        """Alignment (seed 002): every stride but the DMA packet's own, and the packet."""
        rule, checks = dma.alignment_checks(self.source.tier, self.opt.destination.tier)
        sides = [(side, self.L.write if k == 2 else self.L.read, align)
                 for side, k, align in checks]
        if not sides:
            return
        align = max(a for _, _, a in sides)  # the packet is one size on both sides
        bad = [k for k, c in enumerate(self.chains)
               if max(self.chain_bytes(c), self.eb) % align]
        if bad:
            sizes = sorted({max(self.chain_bytes(self.chains[k]), self.eb) for k in bad})
            lit = self.req(f"{rule}:packet", rule, Violation(rule, (), {
                "side": " and ".join(sorted(s for s, _, _ in sides)), "align": align,
                "what": "packets of " + ", ".join(f"{b} B" for b in sizes)}))
            for k in bad:
                self.m.add_implication(lit, ~self.z[k])
        for side, strides, align in sides:
            for i in range(self.n):
                self.stride_aligned(rule, side, strides, align, i)

    def stride_aligned(self, rule: str, side: str, strides: list, align: int, i: int
                       ) -> None:
        """Loop i's stride on ``side`` is aligned, or i is exempt: the DMA packet's run (a
        packet of more than one element), the innermost loop (a one-element packet), or
        (more than 8 loops) merged into the loop inside it."""
        m, t, x, D = self.m, self.terms[i], self.x, self.n
        aligned: Any = False  # a free Element: aligned when enough 2s lie inside it
        if side == "write" and self.L.is_free(i):
            aligned = self.rows_aligned(i, _twos(align) - _twos(self.eb), "aligned")
            if aligned is True:
                return
            what = f"the write stride of {t} (its Element order is free)"
        elif (strides[i] * self.eb) % align == 0:
            return
        else:
            what = f"stride {strides[i] * self.eb} B of {t} outside the DMA packet"
        lit = self.req(f"{rule}:{side}:{t}", rule, Violation(rule, (t,), {
            "side": side, "align": align, "what": what}))
        q = self.var(f"exempt_{side}_{t}")
        in_run = self.var(f"in_run_{side}_{t}")
        m.add_bool_and([self.inc[i], ~self.empty]).only_enforce_if(in_run)
        m.add_bool_or([~self.inc[i], self.empty, in_run])
        inner = self.var(f"inner_{side}_{t}")
        m.add_bool_and([x[i, D], self.empty]).only_enforce_if(inner)
        m.add_bool_or([~x[i, D], ~self.empty, inner])
        m.add_bool_or([~q, in_run, inner]
                      + ([self.merged[a, j] for (a, j) in self.mergeable if a == i]
                         if self.n > hw.MAX_SEQUENCER_ENTRIES else [])
                      + ([aligned] if aligned is not False else []))
        m.add_implication(lit, q)

    def rows_bound(self, align_bytes: int) -> None:
        """The problem's alignment bound on the destination's Element rows."""
        lit, L, eb = None, self.L, self.eb
        for i in range(self.n):
            rows = L.write[i] > 1 and L.write[i] * eb < hw.DM_SLICE_STRIDE
            ok = self.rows_aligned(i, _twos(align_bytes) - _twos(eb), "row_aligned") \
                if L.is_free(i) else not rows or (L.write[i] * eb) % align_bytes == 0
            if ok is True:
                continue
            lit = self.req(BOUND_ALIGN, None, None) if lit is None else lit
            if ok is False and not L.is_free(i):
                self.m.add_bool_or([~lit])  # a given Element row breaks it: no plan keeps it
            else:  # Element's innermost loop is no row
                self.m.add_bool_or([~lit, self.y[i, self.n]] + ([] if ok is False else [ok]))

    def objective(self, floors: list[int]) -> _Built:
        """The objective terms: the DMA packet's floor; the tie-break keeps row-stepping
        loops outer, then a Packet no longer than the DMA packet."""
        n, L, eb, z = self.n, self.L, self.eb, self.z
        weight = []
        for i in range(n):
            hbm_strides = [abs(s) * eb for s, t in ((L.read[i], self.source.tier),
                                                    (L.write[i], self.opt.destination.tier))
                           if t == "hbm"]
            weight.append(max(hbm_strides, default=0).bit_length())
        spare = sum(self.inp) - sum(len(ch) * z[k] for k, ch in enumerate(self.chains))
        b = _Built(self.opt, self.pieces, self.terms, L, self.E, self.x, self.y, self.pos,
                   self.inp, self.epos)
        b.tie = (sum(fl * z[k] for k, fl in enumerate(floors)),
                 (n + 1) * sum(w * p for w, p in zip(weight, self.pos)) + spare)
        b.span = (sum(weight) * max(n - 1, 0) + 1) * (n + 1)
        b.c = self.c
        return b


def _option_floor(opt: Option, got: tuple) -> int:
    """What every plan of an option takes at least, from its pieces, their loops and any
    one of its plans (the same engines, bytes and DM addresses): its engine floor, and with
    packets no longer than its longest run contiguous on both sides (any length with a free
    Element), its requests: at one a cycle per engine, and spread over all 32 HBM channels
    (planner/bits.py); and a DM destination's busiest DMN (the same for every split)."""
    from tcplan.model.cost import dmn_floor, engine_floor, hbm_bytes

    from .bits import REQUEST_BITS, bus_floor, request_floor
    pieces, lp, plan = got
    eb = plan.elem_bytes
    floor, moved = engine_floor(plan)
    most = hw.DMA_REQUEST_BYTES
    if opt.free_element is None:
        L = _loops(pieces, lp)
        most = min(most, max(math.prod(L.n[i] for i in ch) * eb for ch in L.chains()))
    bits = min(max(most - 1, 0).bit_length(), REQUEST_BITS)  # 2 ** bits >= the packet
    reads, writes = hbm_bytes(plan)
    per = 1 << bits
    bus = max((bus_floor(reads.get(c, 0) / per, writes.get(c, 0) / per, 5)
               for c in set(reads) | set(writes)), default=0)
    return max(floor, request_floor(moved, bits), bus, dmn_floor(opt.destination))


@dataclass
class _Dead:
    """One option's facts for :meth:`_Searcher.rules_proof`: the bytes of every run that can
    be its DMA packet (:meth:`_Loops.chains`), which of them break the packet alignment
    (``align``: a write into DM, model.dma.alignment_checks) or the problem's packet bound,
    whether its loops can merge down to the entry limit, and the rules no order changes
    (each a requirement the option is excluded by).  ``dead(keys)``: no plan meets the
    rules ``keys`` (each test exact but the entry limit's, an upper bound on merges)."""

    label: str
    pieces: list[Piece]
    misaligned: list[bool]  # per run
    over: list[bool]  # per run
    violations: dict[str, Any]  # requirement key -> its Violation (None: a bound)
    entry_dead: bool = False

    @staticmethod
    def of(opt: Option, got: Any, static: list, source: Tensor, eb: int, bound: int | None,
           pcie: bool) -> "_Dead":
        pieces, lp, _ = got
        L = _loops(pieces, lp, _free_loops(opt, pieces))
        sizes = [math.prod(L.n[i] for i in ch) * eb for ch in L.chains()]
        viol: dict[str, Any] = {v.rule: v for v in static}
        viol.update({k: None for k in opt.over})
        rule, checks = dma.alignment_checks(source.tier, opt.destination.tier)
        align = max((a for _, _, a in checks), default=1) if not pcie else 1
        misaligned = [max(b, eb) % align != 0 for b in sizes]
        if any(misaligned):
            viol["align"] = Violation(rule, (), {
                "side": " and ".join(sorted(s for s, _, _ in checks)), "align": align,
                "what": "packets of " + ", ".join(
                    f"{b} B" for b in sorted({max(b, eb) for b, m in zip(sizes, misaligned)
                                              if m}))})
        over = [bound is not None and b > bound for b in sizes]
        if any(over):
            viol[BOUND_PACKET] = None
        dead = _Dead(opt.label, pieces, misaligned, over, viol,
                     "entry-limit" in {v.rule for v in static})
        need = len(L.n) - hw.MAX_SEQUENCER_ENTRIES
        if need > 0 and not dead.entry_dead:
            pairs = [(i, j) for i in range(len(L.n)) for j in range(len(L.n))
                     if i != j and L.merges(i, j)]
            most = min(len({i for i, _ in pairs}), len({j for _, j in pairs}))
            dead.entry_dead = most < need  # (each loop merges with one inside it at most)
            if dead.entry_dead:
                viol["entry-limit"] = Violation("entry-limit", tuple(L.terms), {
                    "count": f"{len(L.n)} loops with at most {most} merges: at least "
                             f"{len(L.n) - most}", "entries": ", ".join(L.terms)})
        return dead

    @property
    def keys(self) -> list[str]:
        return list(self.violations)

    def drop_relaxed(self, relax: frozenset[str]) -> None:
        """Forget the requirements ``relax`` names (by key, by key before the option's
        label, or by rule), as :meth:`_Searcher.assemble` turns them off."""
        for r in self.requirements(set(self.violations)):
            if {r.key, r.key.split("@")[0], r.rule or r.key} & relax:
                del self.violations[next(k for k in self.violations
                                         if self.key_of(k) == r.key)]

    def dead(self, keys: set[str]) -> bool:
        mine = keys & set(self.violations)
        if mine - {"align", BOUND_PACKET, "entry-limit"} or (
                "entry-limit" in mine and self.entry_dead):
            return True  # (a rule no order changes excludes the option)
        return not any(not (m and "align" in mine) and not (o and BOUND_PACKET in mine)
                       for m, o in zip(self.misaligned, self.over))

    def requirements(self, core: set[str]) -> list[Requirement]:
        """This option's members of the core, as the model names its requirements."""
        out = []
        for k in sorted(core & set(self.violations)):
            v = self.violations[k]
            out.append(Requirement(self.key_of(k), None if v is None else v.rule, v, None,
                                   "" if v is None else self.label))
        return out

    def key_of(self, k: str) -> str:
        """The model's key of this option's requirement ``k``."""
        v = self.violations[k]
        if v is None:  # a bound of the problem: one key for every option
            return k
        key = f"{v.rule}:packet" if k == "align" else k
        return f"{key}@{self.label}" if self.label else key


def _cycles_of(objective: float, scale: int) -> int:
    """Whole cycles of an objective value or bound, ``scale`` x cycles + a tie-break in
    ``[0, scale)``.  CP-SAT reports them as floats that can fall a hair under the integer
    (1079.9999999999998 for 1,080): half a unit keeps that from costing a cycle, and the
    tie-break (at most ``scale - 1``) from adding one."""
    return math.floor((objective + 0.5) / scale)


def binding(found: Search, workers: int = 1, seed: int = 0) -> list[dict[str, Any]]:
    """For a solved search, the requirements that may bind the plan: dropped alone, the
    model's floor goes below its floor with every requirement (a faster plan may exist)."""
    from ortools.sat.python import cp_model
    out: list[dict[str, Any]] = []
    if found.model is None or not found.candidates:
        return out

    def floor_of(m) -> int | None:
        s = cp_model.CpSolver()
        s.parameters.num_workers, s.parameters.random_seed = max(workers, 1), seed
        s.parameters.max_time_in_seconds = 10.0
        if s.solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        return _cycles_of(s.best_objective_bound, found.scale)
    floor_all = floor_of(found.model.clone())
    if floor_all is None:
        return out
    for r in found.requirements:
        m = found.model.clone()
        m.clear_assumptions()
        m.add_assumptions([m.get_bool_var_from_proto_index(q.literal.index)
                           for q in found.requirements if q is not r])
        reach = floor_of(m)
        if reach is None or reach >= floor_all:
            continue
        out.append({"rule": r.rule, "requirement": r.key, "floor_without": reach,
                    "floor": floor_all,
                    "message": r.violation.message if r.violation is not None else
                    "a bound of the problem"})
    return out


def _joint_core(models: list[_Model], solver, deadline: float
                ) -> tuple[list[Requirement], bool]:
    """A minimal conflict across options, none of which has a plan.  Requirements are the
    same across the options' models by key (a bound, or a rule instance several options
    break, is one requirement for all of them).  Each option's own core, shrunk; their union
    has no plan in any option; a deletion pass then drops a member when every option that
    has it still has no plan without it (the others do not see it)."""
    import time as _time

    from ortools.sat.python import cp_model
    union: dict[str, Requirement] = {}
    minimal = True
    for pk in models:
        sv = solver(max(deadline - _time.perf_counter(), 0.05))
        pk.m.clear_assumptions()
        pk.m.add_assumptions(pk.enforce)
        if sv.solve(pk.m) != cp_model.INFEASIBLE:  # pragma: no cover - it was infeasible
            return [], False
        core, ok = _shrink(pk.m, sv, pk.reqs, pk.enforce, solver, deadline)
        minimal = minimal and ok
        for r in core:
            union.setdefault(r.key, r)
    keys = list(union)

    def without(drop: str) -> bool | None:
        """No option that has ``drop`` gets a plan without it? None: undecided."""
        for pk in models:
            mine = {r.key: r.literal for r in pk.reqs}
            if drop not in mine:
                continue
            left = deadline - _time.perf_counter()
            if left <= 0:
                return None
            pk.m.clear_assumptions()
            pk.m.add_assumptions([mine[k] for k in keys if k in mine and k != drop])
            st = solver(min(10.0, left)).solve(pk.m)
            if st != cp_model.INFEASIBLE:
                return False if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None
        return True
    for k in list(keys):
        got = without(k)
        if got:
            keys.remove(k)
        elif got is None:
            minimal = False
    for pk in models:
        pk.m.clear_assumptions()
        pk.m.add_assumptions(pk.enforce)
    return [union[k] for k in keys], minimal


def _shrink(m, sv, reqs: list[Requirement], enforce: list, solver, deadline: float
            ) -> tuple[list[Requirement], bool]:
    """The solver's infeasibility core, shrunk by deletion to a minimal one: dropping any
    requirement left makes the model feasible.  Each infeasible trial's own core cuts the
    rest at once.  Past ``deadline`` (or when a trial is undecided) the members left are
    kept: the core still has no plan, but is then not shown minimal (False)."""
    import time as _time

    from ortools.sat.python import cp_model
    by_index = {r.literal.index: r for r in reqs}

    def core_of(s) -> list[Requirement]:
        return [by_index[i] for i in s.sufficient_assumptions_for_infeasibility()
                if i in by_index]
    core = core_of(sv)
    if not core:  # infeasible without any requirement: nothing the problem can drop
        return [], True
    minimal = True
    k = 0
    while k < len(core):
        left = deadline - _time.perf_counter()
        if left <= 0:
            minimal = False
            break
        trial = core[:k] + core[k + 1:]
        m.clear_assumptions()
        m.add_assumptions([r.literal for r in trial])
        s = solver(min(10.0, left))
        st = s.solve(m)
        if st == cp_model.INFEASIBLE:
            ids = {id(r) for r in core_of(s)}
            smaller = [r for r in trial if id(r) in ids]
            # the members before k are needed (without one, a superset had a plan), so
            # the trial's own core keeps them, in order: k is the next one to try
            core = smaller or trial
            continue
        if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            minimal = False  # undecided: keep it
        k += 1
    m.clear_assumptions()
    m.add_assumptions(enforce)
    return core, minimal


def _note(result: Search, bound: int, option: tuple[int, int] | None) -> str:
    """What the search's progress says: the best plan so far and the model's bound (with
    several options, the bound of the option being searched, not of the problem)."""
    best = f"best {result.best.cycles:,}, " if result.candidates else ""
    if option is None:
        return f"{best}bound {bound:,} cycles"
    return f"{best}option {option[0] + 1} of {option[1]}: its bound {bound:,} cycles"
