"""A DMA problem's free choices planned (``plan_free``): its options (every destination
placement candidate, every engine split, the source layouts of a free HBM source) and the
searches that fit them: one layout search over all options (planner/layout.py), or, for a
free HBM source, the outer model of its address bits proposing (order, option) pairs that the
layout search plans (planner/sources.py).  This module sits above both: layout.py knows
nothing of sources.py, sources.py uses the layout search."""

from __future__ import annotations

import dataclasses
from typing import Callable

from tcplan.model import dma, limits
from tcplan.model import hardware as hw
from tcplan.model.cost import estimate
from tcplan.model.mapping import Mapping, number
from tcplan.model.rules import TcplanError, fail
from tcplan.model.tiers import Tensor

from .dma_spec import DmaSpec
from .layout import (BOUND_FOOTPRINT, ORDER_RULES, Candidate, Option, Piece, Search,
                     SearchRequest, _stream, candidate_pieces, pieces_of, search, staged)
from .outcome import Found, NoPlan, Outcome
from .registry import Staged
from .problem import Problem
from .sources import search_sources

#: a problem's own packet bound (``plan_free``'s default ``bound``)
PROBLEM = "problem"


class Choices:
    """A problem's options (:class:`Option`) for one source layout: every destination
    placement candidate (a free Slice, Cluster, Chip or padding) and every engine split;
    and an option lowered in its pieces' own order (what no order changes)."""

    def __init__(self, problem: Problem[DmaSpec], relax: frozenset[str] = frozenset(),
                 bound: int | None = None):
        t, spec = problem.tensors, problem.spec
        self.problem, self.relax, self.bound = problem, relax, bound
        self.source, self.stream = t["source"], t["stream"]
        self.pcie = spec.pcie
        fsl = spec.free_slice
        if fsl is not None:  # (label, destination, free Element, bounds that exclude it)
            most = fsl.max_footprint_bytes
            head = "destination " + (fsl.dims[0].title() + " " if len(fsl.dims) == 1 else "")
            self.places = [(head + c.label, c.destination, c.free_element,
                            (BOUND_FOOTPRINT,) if most is not None and
                            c.destination.dims["element"].size * c.destination.elem_bytes
                            > most else ()) for c in fsl.candidates]
        else:
            self.places = [("", t["destination"], spec.free_element, ())]

    def for_source(self, src: Tensor, stext: str = "") -> list[Option]:
        """The options with source ``src`` (``stext``: its Element, when it is a choice)."""
        out = []
        for text, dst, fe, over in self.places:
            for split, st, engines, at in _splits(src, dst, self.stream, self.problem):
                label = "; ".join(s for s in (f"source Element {stext}" if stext else "",
                                              text, engines) if s)
                out.append(Option(label, dst, st, fe, split, at, over,
                                  src if stext else None))
        return out

    def lower(self, o: Option):
        """Option ``o`` lowered in its pieces' own order, the order rules relaxed."""
        src = o.source or self.source
        pieces, _ = candidate_pieces(src, o.destination, o.stream, self.bound)
        return dma.lower(src, o.destination, _stream(o.stream, [p.mapping for p in pieces], []),
                         self.problem.chips, o.engine_at, self.pcie,
                         relax=frozenset(ORDER_RULES) | self.relax)


def plan_free(problem: Problem[DmaSpec], time_limit: float = 10.0, seed: int = 0,
              relax: frozenset[str] = frozenset(), bound: int | str | None = PROBLEM,
              workers: int = 1, method: str = "bits", progress: Callable | None = None,
              rules_first: bool = False) -> Outcome[Search]:
    """A problem's free stream (and free destination), searched: the outcome
    (planner/outcome.py), whose :class:`Search` holds the plans (``best.plan``) and the
    engine split each used (``split``).  Every destination placement candidate (a free
    Slice, Cluster, Chip or padding) and every engine split is an :class:`Option` of one
    CP-SAT model: the model chooses among them with the order, and its core spans all of
    them.  A free HBM source's Element order is chosen by the outer model of its address
    bits (:func:`planner.sources.search_sources`); with ``method="options"`` instead, every
    order is an option of its own and every option's model is built (the baseline the
    benchmark compares against: the search before the outer model and the option floors,
    docs/decisions.md items 77 and 80).  ``bound``: the packet bound (bytes; the problem's
    own by default, None for none).  ``progress`` (planner/progress.py) hears the search's
    rounds with the best plan and the bound."""
    t, spec = problem.tensors, problem.spec
    packet_bound = spec.bounds.packet_max_bytes if bound == PROBLEM else bound
    assert not isinstance(packet_bound, str)  # (PROBLEM is the only word)
    choices = Choices(problem, relax, packet_bound)
    fs = spec.free_source
    request = SearchRequest(
        t["source"], t["destination"], t["stream"], problem.chips, packet_bound,
        spec.bounds.align_bytes, time_limit, workers, seed, relax, choices.pcie,
        prune=method != "options", progress=None if fs is not None else progress,
        rules_first=rules_first)
    if fs is not None and method == "bits":
        def pair(options: list[Option], beat: int | None, seconds: float,
                 core: bool = False) -> Outcome[Search]:
            return search(dataclasses.replace(request, options=tuple(options), beat=beat,
                                              time_limit=seconds, core=core))
        return search_sources(fs, choices, pair if spec.free else
                              _given_stream(problem.chips, choices.pcie),
                              time_limit, seed, progress)
    if fs is not None and fs.count() > limits.SOURCE_MAX_ORDERS:
        raise limits.size_error(fs.count(), limits.SOURCE_MAX_ORDERS,
                                "the enumeration of a free source", "orders",
                                {d.label: d.size for d in fs.digits}, "the baseline search")
    return search(_with_options(request, choices, fs))


def _with_options(request: SearchRequest, choices: "Choices", fs) -> SearchRequest:
    """The request with its options: every engine split of every source order."""
    sources = list(fs) if fs is not None else [("", request.source)]
    options = [o for stext, src in sources for o in choices.for_source(src, stext)]
    if not options:  # pragma: no cover - the given split always parses
        raise fail("plan-no-layout", (), pieces="of the stream", rules="no engine split")
    return dataclasses.replace(request, options=tuple(options))


def staged_free(problem: Problem[DmaSpec], time_limit: float, seed: int, workers: int,
                rules_first: bool) -> Staged[Outcome[Search]] | None:
    """:func:`plan_free` in two steps (issue 32, item 2): the floor of every plan from the
    options' static checks, then the search, the checks not repeated; None for a free
    source (its outer model has no one floor before it searches)."""
    t, spec = problem.tensors, problem.spec
    if spec.free_source is not None:
        return None
    choices = Choices(problem, frozenset(), spec.bounds.packet_max_bytes)
    req = _with_options(SearchRequest(
        t["source"], t["destination"], t["stream"], problem.chips,
        spec.bounds.packet_max_bytes, spec.bounds.align_bytes, time_limit, workers, seed,
        frozenset(), choices.pcie, rules_first=rules_first), choices, None)
    searcher = staged(req)
    return Staged(searcher.floor, searcher.run)


def _given_stream(chips: int, pcie: bool):
    """The pair planner of a free source whose stream is given: each option lowered as it
    is and estimated (the first rule it breaks is the answer)."""
    def plan(options: list[Option], beat: int | None, seconds: float, core: bool = False
             ) -> Outcome[Search]:
        errors: list[TcplanError] = []
        for o in options:
            assert o.source is not None  # (a free source's options name their source)
            try:
                p = dma.lower(o.source, o.destination, o.stream, chips, o.engine_at, pcie)
            except TcplanError as e:
                errors.append(e)
                continue
            c = Candidate((), 0, p.stream_dims["time"], p.stream_dims["packet"],
                          estimate(p).cycles, p)
            return Found(Search([], [c], options=[o], enumerated=1))
        return NoPlan(errors[0], Search([], [], searched=False))
    return plan


def _splits(src: Tensor, dst: Tensor, stream: Tensor, problem: Problem[DmaSpec]
            ) -> list[tuple[dict[str, Mapping], Tensor, str, dict | None]]:
    """The engine splits to try: (split, stream, label, engine_at); the given one unless the
    stream's Cluster or Slice is free (the most engines first: ties go to them)."""
    free = problem.spec.free
    if "cluster" not in free and "slice" not in free:
        return [({d: stream.dims[d] for d in ("cluster", "slice")}, stream, "",
                 problem.spec.engine_at)]
    splits = engine_splits(src, dst, stream, free)
    splits.sort(key=lambda sp: -_engines_of(sp))
    return [(split, Tensor("stream", "stream", stream.dtype, {**stream.dims, **split}),
             f"engines Cluster {split['cluster'].text()}, Slice {split['slice'].text()}",
             None) for split in splits]


def engine_splits(source: Tensor, destination: Tensor, stream: Tensor, free: tuple[str, ...]
                  ) -> list[dict[str, Mapping]]:
    """Candidate engine splits: the stream's Cluster (up to 2 positions) and Slice (up to 4
    DMN-pair engines per cluster) each take the top digits of one piece, or nothing; never
    the same digits twice.  The list is the same, split by split, for every Element order
    of the source (the outer model of a free source indexes options by it)."""
    spatial = {d: stream.dims[d] for d in ("chip",)}
    pieces = sorted(pieces_of(source, destination, spatial), key=lambda p: (p.axis, -p.lo))

    def tops(most: int) -> list[Mapping]:
        out = []
        for p in pieces:
            for k in (4, 2):
                if k <= most and p.count % k == 0 and p.count >= k:
                    try:  # (the top digits of a padded axis may have no term of their own)
                        out.append(Piece(p.axis, p.hi // k, p.hi, p.size).mapping)
                    except TcplanError:
                        continue
        return out
    one = number(1)
    slices = [one] + (tops(hw.DMA_ENGINES_PER_CLUSTER) if "slice" in free else [])
    clusters = [one] + (tops(hw.CLUSTERS_PER_CHIP) if "cluster" in free else [])
    if "slice" not in free:
        slices = [stream.dims["slice"]]
    if "cluster" not in free:
        clusters = [stream.dims["cluster"]]
    out = []
    for c in clusters:
        for sl in slices:
            if c != one and sl != one and _share_digits(c, sl):
                continue
            out.append({"cluster": c, "slice": sl})
    return out


def _share_digits(a: Mapping, b: Mapping) -> bool:
    """Do two terms carry some digit of one axis both?"""
    def ranges(m: Mapping) -> list[tuple[str, int, int]]:
        return [(f.axis, f.lo, f.lo * f.count) for f in m.factors if f.axis is not None]
    return any(x == y and lo < hi2 and lo2 < hi for x, lo, hi in ranges(a)
               for y, lo2, hi2 in ranges(b))


def _engines_of(split: dict[str, Mapping]) -> int:
    n = 1
    for m in split.values():
        n *= m.size
    return n


# ---- the given layout against the same problem with it free (issue 31) ----------------------
#: a given layout whose bound is at least this many times what the same problem with the
#: layout free reaches is said to bind (`tcplan explain` and `tcplan solve`)
FREED_RATIO = 1.2
#: seconds the freed problem's plan may take (a remark, not the answer: it is left out
#: when the search needs longer)
FREED_TIME_LIMIT = 2.0


@dataclasses.dataclass(frozen=True)
class FreedLayout:
    """A DM destination's given Slice and Element against the same problem with them (and
    the stream) free: the given layout's lower bound (what no stream beats), the freed
    problem's plan's cycles and the Slice and Element it took."""

    bound: int
    cycles: int
    slice: Mapping
    element: Mapping

    @property
    def ratio(self) -> float:
        return round(self.bound / self.cycles, 1)

    def title(self) -> str:
        return (f"the destination's layout as given bounds every stream at {self.bound:,} "
                f"cycles; with its Slice and Element free, {self.cycles:,}")

    def detail(self) -> str:
        return (f"Slice {self.slice.text()}, Element {self.element.text()} ({self.ratio}x "
                "faster; the bound of a given layout is that layout's)")

    def note(self) -> str:
        """What `tcplan solve` says under a plan at its bound."""
        return (f"the lower bound is this layout's: with the destination's Slice and Element "
                f"free, {self.cycles:,} cycles ({self.ratio}x faster): Slice "
                f"{self.slice.text()}, Element {self.element.text()}")

    def to_json(self) -> dict:
        return {"bound": self.bound, "cycles": self.cycles, "ratio": self.ratio,
                "slice": self.slice.text(), "element": self.element.text()}


def layout_freed(problem: Problem[DmaSpec], bound: int | None, seed: int = 0,
                 time_limit: float = FREED_TIME_LIMIT) -> FreedLayout | None:
    """Where the problem (a file) gives its DM destination's Slice and Element: the same
    problem with them and the stream free, planned within ``time_limit``; the
    :class:`FreedLayout` when its plan is at least FREED_RATIO times faster than ``bound``,
    the given layout's lower bound, else None (a plan "at its bound" is at the bound of
    the layout as given)."""
    import pathlib

    import yaml

    from .spec import load_problem_text
    spec, dst = problem.spec, problem.tensors["destination"]
    path = pathlib.Path(problem.path)
    if (bound is None or dst.tier != "dm" or spec.free_slice or spec.free_element
            or spec.free_source or spec.hops > 1 or not path.is_file()):
        return None
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("destination"), dict):
        return None
    data["destination"] = {k: v for k, v in data["destination"].items()
                           if k not in ("slice", "element")} | {"slice": "free",
                                                                "element": "free"}
    data["stream"] = {"cluster": "free", "slice": "free", "time": "free", "packet": "free"}
    data.pop("expect", None)
    try:
        freed = load_problem_text(yaml.safe_dump(data, sort_keys=False), problem.path)
        out = plan_free(freed, time_limit, seed)
    except TcplanError:
        return None
    if not isinstance(out, Found) or out.record.best.cycles * FREED_RATIO > bound:
        return None
    best = out.record.best
    d = best.plan.destination.dims
    return FreedLayout(bound, best.cycles, d["slice"], d["element"])
