"""Layout search for a DMA whose stream is free: the loop order (Time) and the Packet.

The candidate factors are the *pieces* of every axis the destination holds: the common
refinement of the digit ranges of the source, the destination and the stream's spatial
(engine-selecting) mappings, minus what those spatial mappings carry.  The stream is an order
of all pieces; the Packet is its innermost pieces (a suffix), the rest is Time.

CP-SAT enumerates the legal assignments: the order is a permutation (one position per piece,
all different: an exact encoding of the loop order), the packet a chain of the innermost
positions, with the DMA packet cap (``dma-packet-max``) and the bound a problem gives
(``packet_max_bytes``) as linear constraints over the pieces' log sizes.  Every candidate is
lowered by :func:`model.dma.lower` -- the same code and rule registry as a given stream, so the
entry limit after merges, alignment and every other rule hold by construction -- checked
against the exact packet limit, and ranked by :func:`model.cost.estimate`; the leaders (up to
``RERANK`` within 15% of the best estimate) are re-ranked by the full model
(:func:`model.cost.dma_cycles`).  Ties go to the fewest Time entries, then the enumeration
order (deterministic).  Candidates are lowered until the time limit; a cut search says
``feasible``.  The planner only chooses: the executor verifies the chosen plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from model import dma
from model import hardware as hw
from model.cost import dma_cycles, estimate
from model.mapping import parse
from model.rules import TcplanError, fail
from model.tiers import Tensor


#: the requirement a problem's packet bound stands for (rejections, explanations)
BOUND_PACKET = "bound:packet_max_bytes"
#: candidates re-ranked by the full model after the estimate's ranking
RERANK = 8


@dataclass(frozen=True)
class Piece:
    axis: str
    lo: int
    hi: int  # digit range [lo, hi)
    size: int  # axis size

    @property
    def count(self) -> int:
        return self.hi // self.lo

    def term(self) -> str:
        if self.lo == 1 and self.hi >= self.size:
            return self.axis
        if self.lo == 1:
            return f"{self.axis} % {self.hi}"
        if self.hi >= self.size:
            return f"{self.axis} / {self.lo}"
        return f"{self.axis} / {self.lo} % {self.count}"


@dataclass
class Candidate:
    order: tuple[int, ...]  # piece indices, outermost first
    packet: int  # how many innermost pieces form the packet
    time: str
    packet_text: str
    cycles: int = 0
    plan: Any = None


@dataclass
class Search:
    pieces: list[Piece]
    candidates: list[Candidate]  # legal ones, ranked
    rejected: dict[str, int] = field(default_factory=dict)  # rule id -> candidates
    examples: dict[str, Any] = field(default_factory=dict)  # rule id -> first Violation
    status: str = "optimal"
    enumerated: int = 0

    @property
    def best(self) -> Candidate:
        return self.candidates[0]


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
    spatial_r = {}
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
                out.append(Piece(a, lo, hi, axes[a]))
    return out


def _fit(pieces: list[Piece], most: int, eb: int) -> list[Piece]:
    """Split a piece that alone exceeds the packet limit at its largest divisor that fits
    (preferring one whose bytes keep 8-byte alignment), so that its inner part can still be
    the packet."""
    out = []
    for p in pieces:
        if p.count > most and most > 1:
            ds = [d for d in range(2, most + 1) if p.count % d == 0]
            cut = max(ds, key=lambda d: ((d * eb) % hw.DMA_HBM_DM_ALIGN == 0, d), default=None)
            if cut is not None:
                out += [Piece(p.axis, p.lo * cut, p.hi, p.size),
                        Piece(p.axis, p.lo, p.lo * cut, p.size)]
                continue
        out.append(p)
    return out


def search(source: Tensor, destination: Tensor, stream: Tensor, chips: int,
           packet_max_bytes: int | None = None, time_limit: float = 10.0, workers: int = 1,
           seed: int = 0, relax: frozenset[str] = frozenset(), pcie: bool = False,
           engine_at: dict[str, int] | None = None) -> Search:
    """Every legal (order, packet) of the free stream, ranked by the estimate; the best few
    by the estimate are re-ranked by the full model (:func:`model.cost.dma_cycles`)."""
    import time as _time
    deadline = _time.perf_counter() + time_limit
    from ortools.sat.python import cp_model
    spatial = {d: stream.dims[d] for d in ("chip", "cluster", "slice")}
    eb = source.elem_bytes
    cap = hw.DMA_MAX_PACKET_BYTES if packet_max_bytes is None else min(
        packet_max_bytes, hw.DMA_MAX_PACKET_BYTES)
    pieces = _fit(pieces_of(source, destination, spatial), max(cap // eb, 1), eb)
    n = len(pieces)
    m = cp_model.CpModel()
    pos = [m.new_int_var(0, max(n - 1, 0), f"pos_{p.term()}") for p in pieces]
    if n:
        m.add_all_different(pos)
    inp = [m.new_bool_var(f"in_packet_{p.term()}") for p in pieces]
    k = m.new_int_var(0, n, "packet_pieces")
    m.add(k == sum(inp))
    for i in range(n):  # the packet is the innermost k positions
        m.add(pos[i] >= n - k).only_enforce_if(inp[i])
        m.add(pos[i] < n - k).only_enforce_if(~inp[i])
    # packet bytes <= cap, in log2 (scaled to stay exact for non-powers of two)
    scale = 1000
    # floor of each log: never excludes a packet within the cap (sum of floors <= floor of
    # the sum); the few it lets past are rejected exactly after lowering
    logs = [math.floor(math.log2(p.count) * scale) for p in pieces]
    m.add(sum(lg * b for lg, b in zip(logs, inp)) <= math.floor(math.log2(cap / eb) * scale))

    class Collect(cp_model.CpSolverSolutionCallback):
        def __init__(self):
            super().__init__()
            self.found: list[tuple[tuple[int, ...], int]] = []

        def on_solution_callback(self):
            order = sorted(range(n), key=lambda i: self.value(pos[i]))
            self.found.append((tuple(order), self.value(k)))

    solver = cp_model.CpSolver()
    solver.parameters.enumerate_all_solutions = True
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1  # enumeration needs a single worker
    solver.parameters.random_seed = seed
    cb = Collect()
    st = solver.solve(m, cb)
    result = Search(pieces, [], status="optimal" if st == cp_model.OPTIMAL else "feasible")
    result.enumerated = len(cb.found)
    axes = dict(source.dims["element"].axes)
    for t in (source, destination, stream):
        for mm in t.dims.values():
            axes.update(mm.axes)
    seen = set()
    for order, kk in sorted(cb.found):
        terms = [pieces[i].term() for i in order]
        time_t, pack_t = terms[:n - kk], terms[n - kk:]
        key = (tuple(time_t), tuple(pack_t))
        if key in seen:
            continue
        seen.add(key)
        dims = dict(stream.dims)
        dims["time"] = parse("m![" + (", ".join(time_t) or "1") + "]", axes, "time")
        dims["packet"] = parse("m![" + (", ".join(pack_t) or "1") + "]", axes, "packet")
        s = Tensor("stream", "stream", stream.dtype, dims)
        try:
            plan = dma.lower(source, destination, s, chips, engine_at, pcie, relax=relax)
        except TcplanError as e:
            for v in e.violations:
                result.examples.setdefault(v.rule, v)
            for r in {v.rule for v in e.violations}:  # candidates, not violations
                result.rejected[r] = result.rejected.get(r, 0) + 1
            continue
        if plan.packet_bytes > cap:  # the exact packet limit (bound or DMA cap)
            r = "dma-packet-max" if plan.packet_bytes > hw.DMA_MAX_PACKET_BYTES else \
                BOUND_PACKET
            result.rejected[r] = result.rejected.get(r, 0) + 1
            continue
        c = Candidate(order, kk, dims["time"].text(), dims["packet"].text(),
                      estimate(plan).cycles, plan)
        result.candidates.append(c)
        if _time.perf_counter() > deadline:  # the time limit cut the search
            result.status = "feasible"
            break
    result.candidates.sort(key=lambda c: (c.cycles, len(c.plan.unified), c.order, c.packet))
    # the estimate samples: re-rank the leaders (within 15% of the best) by the full model
    if result.candidates:
        lead = [c for c in result.candidates[:RERANK]
                if c.cycles <= result.candidates[0].cycles * 1.15]
        for c in lead:
            c.cycles = dma_cycles(c.plan).cycles
        lead.sort(key=lambda c: (c.cycles, len(c.plan.unified), c.order, c.packet))
        result.candidates[:len(lead)] = lead
    if not result.candidates:
        rules = ", ".join(f"{r} ({k})" for r, k in sorted(result.rejected.items())) or \
            "none enumerated"
        err = fail("plan-no-layout", tuple(result.rejected), pieces=", ".join(
            p.term() for p in pieces), rules=rules)
        err.search = result  # type: ignore[attr-defined]  # for the diagnostics
        raise err
    return result


def engine_splits(source: Tensor, destination: Tensor, stream: Tensor, free: list[str]
                  ) -> list[dict[str, str]]:
    """Candidate engine splits: the stream's Cluster (up to 2 positions) and Slice (up to 4
    DMN-pair engines per cluster) each take the top digits of one piece, or nothing."""
    spatial = {d: stream.dims[d] for d in ("chip",)}
    pieces = pieces_of(source, destination, spatial)

    def tops(most: int) -> list[str]:
        out = []
        for p in pieces:
            for k in (4, 2):
                if k <= most and p.count % k == 0 and p.count >= k:
                    sub = Piece(p.axis, p.hi // k, p.hi, p.size)
                    out.append(sub.term())
        return out
    slices = ["1"] + (tops(hw.DMA_ENGINES_PER_CLUSTER) if "slice" in free else [])
    clusters = ["1"] + (tops(hw.CLUSTERS_PER_CHIP) if "cluster" in free else [])
    if "slice" not in free:
        slices = [stream.dims["slice"].text()[3:-1]]
    if "cluster" not in free:
        clusters = [stream.dims["cluster"].text()[3:-1]]
    out = []
    for c in clusters:
        for sl in slices:
            if c != "1" and c == sl:
                continue
            out.append({"cluster": c, "slice": sl})
    return out


def _engines_of(split: dict[str, str], stream: Tensor, axes: dict[str, int]) -> int:
    n = 1
    for text in split.values():
        try:
            n *= parse(f"m![{text}]", axes).size
        except TcplanError:
            return 0
    return n


def search_engines(source: Tensor, destination: Tensor, stream: Tensor, chips: int,
                   free: list[str], packet_max_bytes: int | None = None,
                   time_limit: float = 10.0, seed: int = 0,
                   relax: frozenset[str] = frozenset(), pcie: bool = False
                   ) -> tuple[Search, dict[str, str]]:
    """The best (engine split, order, packet): every candidate split searched in turn."""
    axes = dict(source.dims["element"].axes)
    for t in (source, destination, stream):
        for mm in t.dims.values():
            axes.update(mm.axes)
    best: tuple[Search, dict[str, str]] | None = None
    rejected: dict[str, int] = {}
    examples: dict[str, Any] = {}
    splits = engine_splits(source, destination, stream, free)
    count = {i: _engines_of(sp, stream, axes) for i, sp in enumerate(splits)}
    # the most engines first; fewer only when no split with more has a legal layout
    for i in sorted(range(len(splits)), key=lambda i: -count[i]):
        split = splits[i]
        if best is not None and count[i] < _engines_of(best[1], stream, axes):
            break
        dims = dict(stream.dims)
        try:
            for d, text in split.items():
                dims[d] = parse(f"m![{text}]", axes, d)
        except TcplanError:
            continue
        s = Tensor("stream", "stream", stream.dtype, dims)
        try:
            found = search(source, destination, s, chips, packet_max_bytes, time_limit,
                           seed=seed, relax=relax, pcie=pcie)
        except TcplanError as e:
            f = getattr(e, "search", None)
            if f is not None:
                for r, k in f.rejected.items():
                    rejected[r] = rejected.get(r, 0) + k
                    examples.setdefault(r, f.examples.get(r))
            continue
        if best is None or found.best.cycles < best[0].best.cycles:
            best = (found, split)
    if best is None:
        err = fail("plan-no-layout", tuple(rejected), pieces="of the stream, over every "
                   "engine split,",
                   rules=", ".join(f"{r} ({k})" for r, k in sorted(rejected.items())))
        err.search = Search([], [], rejected, examples)  # type: ignore[attr-defined]
        raise err
    return best


def plan_free(problem, time_limit: float = 10.0, seed: int = 0,
              relax: frozenset[str] = frozenset(), bound: Any = "problem"
              ) -> tuple[Search, dict[str, str]]:
    """A problem's free stream: (the search, the engine split used)."""
    t = problem.tensors
    free = problem.params.get("free", [])
    if bound == "problem":
        bound = problem.params.get("bounds", {}).get("packet_max_bytes")
    pcie = getattr(problem, "kind", "dma") == "pcie"
    if "cluster" in free or "slice" in free:
        return search_engines(t["source"], t["destination"], t["stream"], problem.chips,
                              free, bound, time_limit, seed, relax, pcie)
    found = search(t["source"], t["destination"], t["stream"], problem.chips, bound,
                   time_limit, seed=seed, relax=relax, pcie=pcie,
                   engine_at=problem.params.get("engine_at"))
    st = t["stream"]
    return found, {"cluster": st.dims["cluster"].text()[3:-1],
                   "slice": st.dims["slice"].text()[3:-1]}
