"""A DMA problem's free choices planned (``plan_free``): its options (every destination
placement candidate, every engine split, the source layouts of a free HBM source) and the
searches that fit them: one layout search over all options (planner/layout.py), or, for a
free HBM source, the outer model of its address bits proposing (order, option) pairs that the
layout search plans (planner/sources.py).  This module sits above both: layout.py knows
nothing of sources.py, sources.py uses the layout search."""

from __future__ import annotations

from typing import Any, Callable

from tcplan.model import dma, limits
from tcplan.model import hardware as hw
from tcplan.model.cost import estimate
from tcplan.model.mapping import parse
from tcplan.model.rules import TcplanError, fail
from tcplan.model.tiers import Tensor

from .layout import (BOUND_FOOTPRINT, ORDER_RULES, Candidate, Option, Piece, Search,
                     _axes_of, _stream, candidate_pieces, pieces_of, search)
from .sources import search_sources


class Choices:
    """A problem's options (:class:`Option`) for one source layout: every destination
    placement candidate (a free Slice, Cluster, Chip or padding) and every engine split;
    and an option lowered in its pieces' own order (what no order changes)."""

    def __init__(self, problem, relax: frozenset[str] = frozenset(),
                 bound: int | None = None):
        t = problem.tensors
        self.problem, self.relax, self.bound = problem, relax, bound
        self.source, self.stream = t["source"], t["stream"]
        self.pcie = getattr(problem, "kind", "dma") == "pcie"
        fsl = problem.params.get("free_slice")
        if fsl:  # (label, destination, free Element, bounds that exclude it)
            most = fsl.get("max_footprint_bytes")
            head = "destination " + (fsl["dims"][0].title() + " " if len(fsl["dims"]) == 1
                                     else "")
            self.places = [(head + text, dst, fe, (BOUND_FOOTPRINT,) if most is not None and
                            dst.dims["element"].size * dst.elem_bytes > most else ())
                           for text, dst, fe in fsl["candidates"]]
        else:
            self.places = [("", t["destination"], problem.params.get("free_element"), ())]

    def for_source(self, src: Tensor, stext: str = "") -> list[Option]:
        """The options with source ``src`` (``stext``: its Element, when it is a choice)."""
        free = self.problem.params.get("free", [])
        out = []
        for text, dst, fe, over in self.places:
            for split, st, engines, at in _splits(src, dst, self.stream, free, self.problem):
                label = "; ".join(s for s in (f"source Element {stext}" if stext else "",
                                              text, engines) if s)
                out.append(Option(label, dst, st, fe, split, at, over,
                                  src if stext else None))
        return out

    def lower(self, o: Option):
        """Option ``o`` lowered in its pieces' own order, the order rules relaxed."""
        src = o.source or self.source
        pieces, _ = candidate_pieces(src, o.destination, o.stream, self.bound)
        axes = _axes_of(src, o.destination, o.stream)
        return dma.lower(src, o.destination,
                         _stream(o.stream, axes, [p.term() for p in pieces], []),
                         self.problem.chips, o.engine_at, self.pcie,
                         relax=frozenset(ORDER_RULES) | self.relax)


def plan_free(problem, time_limit: float = 10.0, seed: int = 0,
              relax: frozenset[str] = frozenset(), bound: Any = "problem", workers: int = 1,
              method: str = "bits", progress: Callable | None = None
              ) -> tuple[Search, dict[str, str]]:
    """A problem's free stream (and free destination): (the search, the engine split used).
    Every destination placement candidate (a free Slice, Cluster, Chip or padding) and every
    engine split is an :class:`Option` of one CP-SAT model: the model chooses among them with
    the order, and its core spans all of them.  A free HBM source's Element order is chosen
    by the outer model of its address bits (:func:`planner.sources.search_sources`); with
    ``method="options"`` instead, every order is an option of its own and every option's
    model is built (the baseline the benchmark compares against: the search before the
    outer model and the option floors, docs/decisions.md items 77 and 80).  ``progress``
    (planner/progress.py) hears the search's rounds with the best plan and the bound."""
    t = problem.tensors
    if bound == "problem":
        bound = problem.params.get("bounds", {}).get("packet_max_bytes")
    align = problem.params.get("bounds", {}).get("align_bytes")
    choices = Choices(problem, relax, bound)

    def run(options: list[Option], beat: int | None = None, limit: float = time_limit,
            core: bool = True) -> Search:
        return search(t["source"], t["destination"], t["stream"], problem.chips, bound, limit,
                      workers, seed=seed, relax=relax, pcie=choices.pcie, align_bytes=align,
                      options=options, beat=beat, core=core, prune=method != "options",
                      progress=None if fs is not None else progress)
    fs = problem.params.get("free_source")
    if fs is not None and method == "bits":
        pair = ((lambda opts, beat, secs, core=False: run(opts, beat, secs, core=core))
                if problem.params.get("free") else _given_stream(problem.chips, choices.pcie))
        found = search_sources(fs, choices, pair, time_limit, seed, progress)
    else:
        if fs is not None and fs.count() > limits.SOURCE_MAX_ORDERS:
            raise limits.size_error(fs.count(), limits.SOURCE_MAX_ORDERS,
                                    "the enumeration of a free source", "orders",
                                    {d.term: d.size for d in fs.digits}, "the baseline search")
        options = [o for stext, src in (fs if fs is not None else [("", t["source"])])
                   for o in choices.for_source(src, stext)]
        if not options:  # pragma: no cover - the given split always parses
            raise fail("plan-no-layout", (), pieces="of the stream", rules="no engine split")
        found = run(options)
    return found, found.options[found.best.option].split


def planned(problem) -> bool:
    """Is part of a DMA problem's layout a choice (a free stream, or a free HBM source)?
    Then :func:`plan_free` gives its plan."""
    return bool(problem.params.get("free") or problem.params.get("free_source"))


def _given_stream(chips: int, pcie: bool):
    """The pair planner of a free source whose stream is given: each option lowered as it
    is and estimated (the first rule it breaks is raised)."""
    def plan(options: list[Option], beat: int | None, seconds: float, core: bool = False
             ) -> Search:
        errors: list[TcplanError] = []
        for o in options:
            try:
                p = dma.lower(o.source, o.destination, o.stream, chips, o.engine_at, pcie)
            except TcplanError as e:
                errors.append(e)
                continue
            c = Candidate((), 0, p.stream_dims["time"].text(), p.stream_dims["packet"].text(),
                          estimate(p).cycles, p)
            return Search([], [c], options=[o], enumerated=1)
        raise errors[0]
    return plan


def _splits(src: Tensor, dst: Tensor, stream: Tensor, free: list[str], problem
            ) -> list[tuple[dict[str, str], Tensor, str, dict | None]]:
    """The engine splits to try: (split, stream, label, engine_at); the given one unless the
    stream's Cluster or Slice is free (the most engines first: ties go to them)."""
    if "cluster" not in free and "slice" not in free:
        return [({d: stream.dims[d].text()[3:-1] for d in ("cluster", "slice")}, stream, "",
                 problem.params.get("engine_at"))]
    axes = _axes_of(src, dst, stream)
    splits = engine_splits(src, dst, stream, free)
    splits.sort(key=lambda sp: -_engines_of(sp, axes))
    out = []
    for split in splits:
        dims = dict(stream.dims)
        try:
            for d, v in split.items():
                dims[d] = parse(f"m![{v}]", axes, d)
        except TcplanError:
            continue
        out.append((split, Tensor("stream", "stream", stream.dtype, dims),
                    f"engines Cluster m![{split['cluster']}], Slice m![{split['slice']}]",
                    None))
    return out


def engine_splits(source: Tensor, destination: Tensor, stream: Tensor, free: list[str]
                  ) -> list[dict[str, str]]:
    """Candidate engine splits: the stream's Cluster (up to 2 positions) and Slice (up to 4
    DMN-pair engines per cluster) each take the top digits of one piece, or nothing; never
    the same digits twice.  The list is the same, split by split, for every Element order
    of the source (the outer model of a free source indexes options by it)."""
    spatial = {d: stream.dims[d] for d in ("chip",)}
    pieces = sorted(pieces_of(source, destination, spatial), key=lambda p: (p.axis, -p.lo))
    axes = _axes_of(source, destination, stream)

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
            if c != "1" and sl != "1" and _share_digits(c, sl, axes):
                continue
            out.append({"cluster": c, "slice": sl})
    return out


def _share_digits(a: str, b: str, axes: dict[str, int]) -> bool:
    """Do two terms carry some digit of one axis both?"""
    def ranges(text: str) -> list[tuple[str, int, int]]:
        return [(f.axis, f.lo, f.lo * f.count) for f in parse(f"m![{text}]", axes).factors
                if f.axis is not None]
    return any(x == y and lo < hi2 and lo2 < hi for x, lo, hi in ranges(a)
               for y, lo2, hi2 in ranges(b))


def _engines_of(split: dict[str, str], axes: dict[str, int]) -> int:
    n = 1
    for text in split.values():
        try:
            n *= parse(f"m![{text}]", axes).size
        except TcplanError:
            return 0
    return n
