"""The loader of DMA and PCIe problems (``kind: dma`` / ``pcie``; docs/problem-format.md):
source, destination and stream, and every choice such a problem may leave free (the stream's
order, packet and engine split, the destination's Element, placement or padding, an HBM
tensor's layout and address, hops).  ``planner/spec.py`` reads what every problem has and
hands the rest to the kind (``planner/kinds/dma.py``), which calls :func:`load_dma`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tcplan.model import hardware as hw
from tcplan.model import limits
from tcplan.model.mapping import MAX_SIZE, Factor, Mapping, axis, join, number
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import TIER_DIMS, Tensor

from .layout import FreeElement
from .spec import _Ctx, _did_you_mean

if TYPE_CHECKING:
    from .sources import FreeSource


@dataclass(frozen=True)
class Placement:
    """One candidate of a free destination placement: how explanations name it, the
    destination it gives and that destination's free Element (None: given)."""

    label: str
    destination: Tensor
    free_element: FreeElement | None = None


@dataclass(frozen=True)
class FreePlacement:
    """A destination's free Slice, Cluster, Chip or padding amount: its candidates, the
    dimensions they choose, and the bound on a slice's footprint (bytes; None: none)."""

    candidates: tuple[Placement, ...]
    dims: tuple[str, ...]
    max_footprint_bytes: int | None = None


@dataclass(frozen=True)
class Bounds:
    """A planned problem's ``bounds``: the largest DMA packet, and the alignment of every
    destination Element row (bytes; None: no bound)."""

    packet_max_bytes: int | None = None
    align_bytes: int | None = None


@dataclass(frozen=True)
class DmaSpec:
    """A DMA or PCIe problem's choices (docs/problem-format.md): the stream's free
    dimensions (``time`` and ``packet``, with ``cluster`` and ``slice`` when the engine
    split is free too), a free destination Element, a free HBM source, a free destination
    placement, the sides whose HBM address the loader placed, the bounds, the hops (2:
    through an intermediate HBM layout), the one engine of a single-engine transfer, and
    whether the transfer is a PCIe DMA (``kind: pcie``, host <-> HBM)."""

    free: tuple[str, ...] = ()
    free_element: FreeElement | None = None
    free_source: FreeSource | None = None
    free_slice: FreePlacement | None = None
    free_address: tuple[str, ...] = ()
    bounds: Bounds = Bounds()
    hops: int = 1
    engine_at: dict[str, int] | None = None
    pcie: bool = False
    #: the sub-tensor warnings: source digits the destination leaves behind (none when
    #: the problem says ``sub_tensor: true``: a part of the tensor is meant)
    warnings: tuple[Violation, ...] = ()

    @property
    def planned(self) -> bool:
        """Is part of the layout a choice (a free stream, or a free HBM source)?"""
        return bool(self.free) or self.free_source is not None


def load_dma(ctx: _Ctx, data: dict, kind: str, tensors: dict[str, Tensor]) -> DmaSpec:
    """Read a DMA or PCIe problem's tensors into ``tensors``; return its choices: each step
    below reads one part and says where a mistake is."""
    data, free_addr = _split_free_addresses(ctx, data)
    free_source = _free_source_of(ctx, data)
    tensors["source"] = (free_source.base if free_source is not None else
                         ctx.tensor(("source",), data["source"], "source"))
    spec_d, free_element, free_slice = _destination(ctx, data, tensors["source"])
    tensors["destination"] = _named_copies(ctx, ctx.tensor(("destination",), spec_d,
                                                           "destination"))
    spec_s, free, engines_free = _free_stream(ctx, data, tensors)
    placement = _free_layouts(ctx, tensors, free, free_element, free_source, free_slice)
    spec = DmaSpec(free=tuple(free + engines_free), free_element=free_element,
                   free_source=free_source, free_slice=placement, pcie=kind == "pcie")
    if free_addr:
        spec = _place_free_addresses(free_addr, tensors, spec)
    if "bounds" in data:
        spec = dataclasses.replace(spec, bounds=_bounds(ctx.doc, data["bounds"], free))
    if kind == "dma" and "hops" in data:
        spec = dataclasses.replace(spec, hops=_hops(
            ctx.doc, data["hops"], free, free_source is not None or free_element is not None
            or free_slice is not None))
    if "stream" in data:
        tensors["stream"] = ctx.tensor(("stream",), spec_s, "stream", tier="stream")
    else:
        from tcplan.model.dma import default_stream
        tensors["stream"] = default_stream(tensors["source"], tensors["destination"])
    if "engine_at" in data:
        spec = dataclasses.replace(spec, engine_at=_engine_at(
            ctx, data["engine_at"], tensors["stream"], engines_free))
    return dataclasses.replace(spec, warnings=_sub_tensor(ctx, data, tensors, spec))


def _named_copies(ctx: _Ctx, t: Tensor) -> Tensor:
    """A destination's bare numbers (``m![F, 2]``: two copies, as furiosa-opt writes a
    broadcast) as axes of their own (``copies``, ``copies2``, ...; added to the problem's
    axes): a broadcast over an axis the source does not carry, which the write side can
    then address (each copy its own slot; docs/decisions.md item 114)."""
    new: dict[str, int] = {}

    def name(n: int) -> str:
        k = len(new) + 1
        while (label := "copies" if k == 1 else f"copies{k}") in ctx.axes or label in new:
            k += 1
        new[label] = n
        return label

    dims = {}
    for d, m in t.dims.items():
        items = m.raw[1] if m.raw[0] == "pair" else [m.raw]
        if not any(i[0] == "num" and i[1] > 1 for i in items):
            dims[d] = m
            continue
        named = [("ax", name(i[1]), i[2]) if i[0] == "num" and i[1] > 1 else i
                 for i in items]
        raw = ("pair", named) if m.raw[0] == "pair" else named[0]
        dims[d] = Mapping(raw, {**m.axes, **new}, m.size)
    if not new:
        return t
    ctx.axes.update(new)
    return dataclasses.replace(t, dims=dims)


def _sub_tensor(ctx: _Ctx, data: dict, tensors: dict[str, Tensor], spec: DmaSpec
                ) -> tuple[Violation, ...]:
    """``sub-tensor`` warnings where the destination, as given, leaves digits of the
    source behind, unless ``sub_tensor: true`` says a part of the tensor is meant."""
    from tcplan.model.broadcast import sub_tensor_violations
    said = data.get("sub_tensor", False)
    if not isinstance(said, bool):
        raise ctx.doc.error(("sub_tensor",), f"expected true or false, not {said!r}",
                            "sub_tensor: true (the move is meant to leave digits behind)")
    if said or spec.free_element or spec.free_slice or spec.free_source:
        return ()
    return tuple(sub_tensor_violations(tensors["source"], tensors["destination"],
                                       ctx.doc.where(("destination",))))


def _split_free_addresses(ctx: _Ctx, data: dict) -> tuple[dict, dict[str, tuple]]:
    """``address: free`` and ``bounds`` of a side: read, and taken off its tensor."""
    free_addr: dict[str, tuple[int, int, int]] = {}
    for side in ("source", "destination"):
        sp = data[side]
        if isinstance(sp, dict) and (sp.get("address") == "free" or "bounds" in sp):
            free_addr[side] = _address_bounds(ctx, side, sp)
            data = {**data, side: {k: v for k, v in sp.items()
                                   if k not in ("address", "bounds")}}
    return data, free_addr


def _is_free_element(spec: Any) -> bool:
    return isinstance(spec, dict) and (spec.get("element") == "free"
                                       or isinstance(spec.get("element"), dict))


def _free_source_of(ctx: _Ctx, data: dict) -> Any:
    """The free HBM source (its candidate Element orders), or None when it is given."""
    if _is_free_element(data["source"]):
        return _free_source(ctx, data["source"], data["destination"])
    return None


@dataclass(frozen=True)
class _Candidates:
    """A free placement as the loader reads it: each candidate's label and destination spec
    (its mappings as values), the dimensions chosen, and the footprint bound."""

    labels: list[str]
    specs: list[dict[str, Any]]
    dims: tuple[str, ...]
    max_footprint_bytes: int | None = None


def _destination(ctx: _Ctx, data: dict, source: Tensor
                 ) -> tuple[Any, FreeElement | None, _Candidates | None]:
    """The destination's spec with its free placement or padding and free Element taken
    off: (spec, free Element, free placement)."""
    spec_d = data["destination"]
    free_element = None
    free_slice: _Candidates | None = None
    if isinstance(spec_d, dict) and any(spec_d.get(d) == "free" or isinstance(
            spec_d.get(d), dict) for d in ("chip", "cluster", "slice")):
        free_slice = _free_slice(ctx, source, spec_d)
        spec_d = free_slice.specs[0]
    elif isinstance(spec_d, dict) and any(isinstance(v, str) and FREE_PAD.search(v)
                                          for v in spec_d.values()):
        free_slice = _free_padding(ctx, spec_d)
        spec_d = free_slice.specs[0]
    if _is_free_element(spec_d):
        free_element, spec_d = _free_element(ctx, source, spec_d)
    return spec_d, free_element, free_slice


def _free_stream(ctx: _Ctx, data: dict, tensors: dict[str, Tensor]
                 ) -> tuple[Any, list[str], list[str]]:
    """The stream's free words: (its spec with placeholders for the free dimensions, the
    free Time/Packet, the free Cluster/Slice)."""
    doc, spec_s = ctx.doc, data.get("stream")
    _check_free_words(doc, spec_s)
    free = [d for d in ("time", "packet") if isinstance(spec_s, dict)
            and spec_s.get(d) == "free"]
    engines_free = [d for d in ("cluster", "slice") if isinstance(spec_s, dict)
                    and spec_s.get(d) == "free"]
    if engines_free and len(free) != 2:
        raise doc.error(("stream", engines_free[0]), "a free engine split needs a free "
                        "time and packet", "time: free and packet: free")
    if free and len(free) != 2:
        raise doc.error(("stream", free[0]), "free the time and the packet together (the "
                        "packet is the innermost part of the searched order)",
                        "time: free and packet: free")
    if free:
        from tcplan.model.dma import default_stream
        assert isinstance(spec_s, dict)  # (free words were found in it)
        placeholder = default_stream(tensors["source"], tensors["destination"])
        spec_s = {k: v for k, v in spec_s.items() if k not in free + engines_free}
        spec_s.update({d: placeholder.dims[d] for d in free})
        if "chip" not in spec_s:  # the engines' chips follow the side spread over chips
            spec_s["chip"] = placeholder.dims["chip"]
    return spec_s, free, engines_free


def _free_layouts(ctx: _Ctx, tensors: dict[str, Tensor], free: list[str],
                  free_element: FreeElement | None, free_source: FreeSource | None,
                  free_slice: _Candidates | None) -> FreePlacement | None:
    """A free destination Element, source or placement: planned with a free stream, in the
    combinations the planner covers; the free placement's candidates."""
    doc = ctx.doc
    if free_element is not None:
        if not free:
            raise doc.error(("destination", "element"), "a free destination is planned "
                            "with its stream", "add stream: {time: free, packet: free}")
    if free_source is not None:
        if free_element is not None and not free:
            raise doc.error(("source", "element"), "a free source with a free "
                            "destination Element is planned with its stream",
                            "add stream: {time: free, packet: free}")
        if free_slice is not None:
            raise doc.error(("source", "element"), "a free source Element is planned "
                            "with the destination's placement given", "give the "
                            "destination's Chip, Cluster and Slice")
    if free_slice is None:
        return None
    if not free:
        raise doc.error(("destination", free_slice.dims[0]), "a free destination "
                        "is planned with its stream", "add stream: {time: free, packet: free}")
    return FreePlacement(_placements(ctx, tensors["source"], free_slice), free_slice.dims,
                         free_slice.max_footprint_bytes)


def _placements(ctx: _Ctx, source: Tensor, free_slice: _Candidates
                ) -> tuple[Placement, ...]:
    """Each candidate placement: its label, destination tensor and free Element (or None)."""
    cands = []
    for label, sd in zip(free_slice.labels, free_slice.specs):
        fe = None
        if _is_free_element(sd):
            try:  # a candidate whose Slice takes the prefix's digits is dropped
                fe, sd = _free_element(ctx, source, sd)
            except TcplanError:
                continue
        cands.append(Placement(label, ctx.tensor(("destination",), sd, "destination"), fe))
    if not cands:
        raise ctx.doc.error(("destination", "element"), "no candidate placement leaves the "
                            "Element prefix's digits to Element", "change the prefix")
    return tuple(cands)


def _bounds(doc, b: Any, free: list[str]) -> Bounds:
    """A planned problem's ``bounds: {packet_max_bytes, align_bytes}``."""
    if not isinstance(b, dict) or set(b) - {"packet_max_bytes", "align_bytes"}:
        raise doc.error(("bounds",), "bounds take packet_max_bytes and align_bytes",
                        "bounds: {packet_max_bytes: 1024, align_bytes: 64}")
    v = b.get("packet_max_bytes")
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise doc.error(("bounds", "packet_max_bytes"), f"{v!r} is not a byte count",
                        "packet_max_bytes: 1024")
    a = b.get("align_bytes")
    if a is not None and (isinstance(a, bool) or not isinstance(a, int) or a < 1
                          or a & (a - 1)):
        raise doc.error(("bounds", "align_bytes"), f"{a!r} is not a power of two",
                        "align_bytes: 64")
    for key in ("packet_max_bytes", "align_bytes"):
        if b.get(key) is not None and not free:
            raise doc.error(("bounds", key), "bounds apply to a planned (free) "
                            "problem", "add stream: {time: free, packet: free}")
    return Bounds(v, a)


def _hops(doc, h: Any, free: list[str], free_ends: bool) -> int:
    """``hops: 1`` or ``2``: through one intermediate HBM layout, planned."""
    if type(h) is not int or h not in (1, 2):
        raise doc.error(("hops",), f"{h!r} is not 1 or 2", "hops: 2")
    if not free:
        raise doc.error(("hops",), "a multi-hop search plans free streams",
                        "add stream: {time: free, packet: free}")
    if h > 1 and free_ends:
        raise doc.error(("hops",), "a multi-hop search plans the intermediate's "
                        "layout; the source's and the destination's are given",
                        "give them, or drop hops")
    return h


def _engine_at(ctx: _Ctx, spec: Any, stream: Tensor, engines_free: list[str]
               ) -> dict[str, int]:
    """The one engine of a single-engine transfer."""
    at = ctx.engine_at(spec)
    if engines_free:
        raise ctx.doc.error(("engine_at",), "engine_at fixes the engine; the stream's "
                            "engine split is free", "drop engine_at, or the free "
                            "cluster / slice", at_key=True)
    if any(stream.dims[d].size > 1 for d in ("chip", "cluster", "slice")):
        raise ctx.doc.error(("engine_at",), "applies to a single-engine transfer; this "
                            "stream's Chip/Cluster/Slice mappings select the engines",
                            "drop engine_at, or the stream's spatial mappings",
                            at_key=True)
    return at


def _check_free_words(doc, spec: Any) -> None:
    """A stream's keys and its ``free`` words, before anything pairs them: a key that is no
    stream dimension, or a value one letter from ``free``, is said at its place."""
    if not isinstance(spec, dict):
        return
    dims = TIER_DIMS["stream"]
    for k, v in spec.items():
        if k in ("tier", "address", "dtype"):
            continue  # (the tensor's own check says what a stream has not)
        if not isinstance(k, str) or k not in dims:
            raise doc.error(("stream", k), "unknown key" + _did_you_mean(k, dims),
                            f"a stream takes {', '.join(dims)}", at_key=True)
        if isinstance(v, str) and v != "free" and not v.strip().startswith("m![") and \
                _did_you_mean(v, ["free"]):
            raise doc.error(("stream", k), f"{v!r} is not a mapping (did you mean 'free'?)",
                            f"{k}: free, or {k}: 'm![...]'")


def _address_bounds(ctx: "_Ctx", side: str, spec: dict) -> tuple[int, int, int]:
    """``address: free`` on an HBM tensor, with its ``bounds: {align_bytes: N, range: [lo,
    hi]}``: (lo, hi, align); the range defaults to the chip's HBM, the alignment to one
    256-byte request (docs/decisions.md item 78)."""
    doc = ctx.doc
    if spec.get("address") != "free":
        raise doc.error((side, "bounds"), "a tensor's bounds go with a free address",
                        "address: free", at_key=True)
    if spec.get("tier") != "hbm":
        raise doc.error((side, "address"), "only an HBM tensor's address is planned",
                        "give the address (bytes)")
    b = spec.get("bounds", {})
    if not isinstance(b, dict) or set(b) - {"align_bytes", "range"}:
        raise doc.error((side, "bounds"), "a free address's bounds take align_bytes and range",
                        "bounds: {align_bytes: 4096, range: [0, 1073741824]}")
    align = b.get("align_bytes", hw.DMA_REQUEST_BYTES)
    if isinstance(align, bool) or not isinstance(align, int) or not 1 <= align <= MAX_SIZE:
        raise doc.error((side, "bounds", "align_bytes"), f"{align!r} is not a byte count",
                        "align_bytes: 4096")
    if "range" in b and not (isinstance(b["range"], list) and len(b["range"]) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_SIZE
            for x in b["range"]) and b["range"][0] < b["range"][1]):
        raise doc.error((side, "bounds", "range"), "expected [lowest, past the highest] "
                        "byte address", "range: [0, 1073741824]")
    lo, hi = b.get("range", [0, hw.HBM_BYTES_PER_CHIP])
    if hi > hw.HBM_BYTES_PER_CHIP:
        raise doc.error((side, "bounds", "range"), f"{hi:,} is past the chip's HBM "
                        f"({hw.HBM_BYTES_PER_CHIP:,} B)", f"range: [{lo}, "
                        f"{hw.HBM_BYTES_PER_CHIP}]")
    return lo, hi, align


def _place_free_addresses(free_addr: dict[str, tuple[int, int, int]],
                          tensors: dict[str, Tensor], spec: DmaSpec) -> DmaSpec:
    """Give each tensor with a free address its address (:func:`model.tiers.free_address`):
    the source first, clear of a destination with a given address; the destination clear
    of the source.  Returns the spec with the sides placed (``free_address``, the source
    first) and its free source's and placements' tensors at their addresses."""
    from tcplan.model.tiers import free_address
    replace = dataclasses.replace
    for side in ("source", "destination"):
        if side not in free_addr:
            continue
        other = tensors["destination" if side == "source" else "source"]
        taken = None
        if other.tier == "hbm" and (side == "destination" or "destination" not in free_addr):
            taken = (other.address,
                     other.address + other.dims["element"].size * other.elem_bytes)
        at = free_address(tensors[side], *free_addr[side], taken)
        tensors[side] = replace(tensors[side], address=at)
        fs, fsl = spec.free_source, spec.free_slice
        if side == "source" and fs is not None:
            spec = replace(spec, free_source=replace(fs, base=replace(fs.base, address=at)))
        if side == "destination" and fsl is not None:
            spec = replace(spec, free_slice=replace(fsl, candidates=tuple(
                replace(c, destination=replace(c.destination, address=at))
                for c in fsl.candidates)))
    return replace(spec, free_address=tuple(sorted(free_addr, reverse=True)))


def _digit_term(ctx: "_Ctx", keys: tuple, a: str, lo: int, hi: int) -> Mapping:
    """The term of axis ``a``'s digits [lo, hi): ``A``, ``A % hi``, ``A / lo`` or
    ``A / lo % (hi / lo)`` (a mistake located at ``keys``)."""
    size = ctx.axes[a]
    try:
        m = axis(a, size)
        if lo > 1:
            m = m / lo
        return m % (hi // lo) if hi < size else m
    except TcplanError as e:
        raise ctx.error_at(keys, e) from None


def _digit_range(ctx: "_Ctx", term: Mapping) -> tuple[str | None, int, int]:
    """(axis, first, past the last) of a one-digit term's digit."""
    f = next(f for f in term.factors if f.axis is not None)
    return _range_of(ctx, f)


def _range_of(ctx: "_Ctx", f: Factor) -> tuple[str | None, int, int]:
    """(axis, first, past the last live value) of a digit (a broadcast: (None, 0, 0))."""
    if f.axis is None:
        return (None, 0, 0)
    return (f.axis, f.lo, min(f.lo * f.count, ctx.axes[f.axis]))


def _free_element(ctx: "_Ctx", source: Tensor, spec: dict) -> tuple[FreeElement, dict]:
    """``element: free`` (or ``{free: true, prefix: 'm![...]'}``): the destination's Element
    order is the planner's.  Returns the free Element (every digit the destination's other
    dimensions leave, in the source's order, and the ``prefix``: terms that stay outermost,
    in order) and the destination spec with a placeholder Element: those digits in the
    source's order."""
    doc = ctx.doc
    keys = ("destination", "element")
    raw = spec["element"]
    prefix: list[Mapping] = []
    if isinstance(raw, dict):
        if set(raw) - {"free", "prefix"} or raw.get("free") is not True:
            raise doc.error(keys, "a bounded free Element takes free: true and a prefix",
                            "element: {free: true, prefix: 'm![B / 4]'}")
        if "prefix" in raw:
            pm = ctx.mapping(keys + ("prefix",), raw["prefix"], "element")
            for term in pm.terms:
                if not any(f.axis for f in term.factors):
                    raise doc.error(keys + ("prefix",), f"{term.body()} names no axis digits",
                                    "prefix: 'm![H]'")
                prefix.append(term)
    others = {k: v for k, v in spec.items() if k != "element"}
    held: dict[str, list[tuple[int, int]]] = {}
    probe = ctx.tensor(("destination",), {**others, "element": number(1)}, "destination")
    for m in probe.dims.values():
        for f in m.factors:
            if f.axis is not None:
                held.setdefault(f.axis, []).append((f.lo, f.lo * f.count))
    terms = []
    for f in _source_factors(source):  # the source's digits, outermost first
        if f.axis is None:
            continue
        size = ctx.axes[f.axis]
        lo, hi = f.lo, min(f.lo * f.count, size)
        cuts = sorted({lo, hi} | {x for a, b in held.get(f.axis, []) for x in (a, b)
                                  if lo < x < hi})
        for a, b in reversed(list(zip(cuts, cuts[1:]))):
            if any(x <= a and b <= y for x, y in held.get(f.axis, [])):
                continue
            terms.append(_digit_term(ctx, keys, f.axis, a, b))
    if not terms:
        raise doc.error(keys, "the other dimensions hold every digit: nothing is left for "
                        "Element", "give Element a mapping")
    by_digits = {_digit_range(ctx, t): t for t in terms}
    named: list[Mapping] = []
    for t in prefix:  # the prefix's terms, as the Element's own terms
        if _digit_range(ctx, t) not in by_digits:
            raise doc.error(keys + ("prefix",), f"{t.body()} is not one of the Element "
                            f"digits ({_listed(terms)})", "use terms the Element holds")
        if by_digits[_digit_range(ctx, t)] in named:
            raise doc.error(keys + ("prefix",), f"{t.body()} appears twice in the prefix",
                            "name each term once")
        named.append(by_digits[_digit_range(ctx, t)])
    return FreeElement(tuple(terms), tuple(named)), {**others, "element": join(terms)}


def _listed(terms) -> str:
    return ", ".join(t.body() for t in terms)


def _free_source(ctx: "_Ctx", spec: dict, dest_spec: Any) -> FreeSource:
    """``element: free`` on an HBM source (or ``{free: true, prefix: 'm![...]', allowed:
    [...]}``): the source's layout in HBM is the planner's.  It holds every axis of the
    problem, each cut where the destination's digits (and the source's Chip) cut it, so that
    what the transfer moves and what it does not are separate digits; the candidates are
    every order of those digits (the prefix's terms outermost), or the ``allowed`` list
    (docs/decisions.md items 76 and 77)."""
    from tcplan.model.hbm_bits import moved_by

    from .bits import Digit
    from .sources import FreeSource, write_chain
    doc = ctx.doc
    keys = ("source", "element")
    if spec.get("tier") != "hbm":
        raise doc.error(keys, "only an HBM source has a layout to plan here",
                        "give the Element, or put the source in HBM")
    raw = spec["element"]
    prefix: list[Mapping] = []
    allowed_maps: list[Mapping] | None = None
    if isinstance(raw, dict):
        if set(raw) - {"free", "prefix", "allowed"} or raw.get("free") is not True:
            raise doc.error(keys, "a bounded free Element takes free: true, a prefix and an "
                            "allowed list", "element: {free: true, prefix: 'm![A]'}")
        if "prefix" in raw:
            prefix = list(ctx.mapping(keys + ("prefix",), raw["prefix"], "element").terms)
        if "allowed" in raw:
            if not isinstance(raw["allowed"], list) or not raw["allowed"]:
                raise doc.error(keys + ("allowed",), "expected a list of Element mappings",
                                "allowed: ['m![A, B]', 'm![B, A]']")
            allowed_maps = [ctx.mapping(keys + ("allowed", k), text, "element")
                            for k, text in enumerate(raw["allowed"])]
    others = {k: v for k, v in spec.items() if k != "element"}
    probe = ctx.tensor(("source",), {**others, "element": number(1)}, "source")
    # a free destination Element holds every digit its other dimensions leave: those cut
    # the source, and the transfer moves every digit
    dest_free = isinstance(dest_spec, dict) and (dest_spec.get("element") == "free" or
                                                 isinstance(dest_spec.get("element"), dict))
    if dest_free:
        dest_spec = {**dest_spec, "element": number(1)}
    cuts: dict[str, set[int]] = {a: {1, n} for a, n in ctx.axes.items()}
    held: dict[str, list[tuple[int, int]]] = {}
    dest = (ctx.tensor(("destination",), dest_spec, "destination")
            if isinstance(dest_spec, dict) and all(v != "free" and not isinstance(v, dict)
                                                   for v in dest_spec.values()) else None)
    for t in (probe,) + ((dest,) if dest is not None else ()):
        for m in t.dims.values():
            for f in m.factors:
                if f.axis is not None:
                    hi = min(f.lo * f.count, ctx.axes[f.axis])
                    cuts[f.axis].update({f.lo, hi})
                    if t is probe:
                        held.setdefault(f.axis, []).append((f.lo, hi))
    terms = []
    for a, size in ctx.axes.items():
        pts = sorted(x for x in cuts[a] if 1 <= x <= size)
        for lo, hi in reversed(list(zip(pts, pts[1:]))):
            if any(x <= lo and hi <= y for x, y in held.get(a, [])):
                continue
            terms.append(_digit_term(ctx, keys, a, lo, hi))
    if set(prefix) - set(terms):
        raise doc.error(keys + ("prefix",), f"the prefix's terms are not among the "
                        f"source's digits ({_listed(terms)})", "use those terms")
    if len(set(prefix)) < len(prefix):
        raise doc.error(keys + ("prefix",), "the prefix names a digit twice",
                        "name each digit once")
    if len(terms) - len(prefix) > limits.SOURCE_MAX_DIGITS:
        rest = [t for t in terms if t not in prefix]
        raise doc.error(keys, f"{len(rest)} digits to order ({_listed(rest)}): more than "
                        f"{limits.SOURCE_MAX_DIGITS}", "fix the outermost ones with a "
                        "prefix, or list the allowed orders")
    order = prefix + [t for t in terms if t not in prefix]
    base = ctx.tensor(("source",), {**others, "element": join(order)}, "source")
    factors = base.dims["element"].factors
    moved = moved_by(dest) if dest is not None and not dest_free else (lambda *_: True)
    ranges = [_range_of(ctx, f) for f in factors]
    digits = [Digit(t, f.size, bool(moved(*r))) for t, f, r in zip(order, factors, ranges)]
    allowed = None
    if allowed_maps is not None:
        if len(allowed_maps) > limits.SOURCE_MAX_ORDERS:
            raise doc.error(keys + ("allowed",), f"{len(allowed_maps):,} allowed orders: "
                            f"more than {limits.SOURCE_MAX_ORDERS}", "list fewer, or use a "
                            "prefix")
        allowed = [_digit_order(ctx, keys + ("allowed", k), m, order)
                   for k, m in enumerate(allowed_maps)]
        if prefix and not any(o[:len(prefix)] == tuple(range(len(prefix))) for o in allowed):
            raise doc.error(keys + ("prefix",), "no allowed order starts with the prefix",
                            "drop the prefix, or allow an order that starts with it")
        if prefix:  # the prefix narrows the allowed orders
            allowed = [o for o in allowed if o[:len(prefix)] == tuple(range(len(prefix)))]
    return FreeSource(digits, list(range(len(prefix))), allowed, base,
                      write_chain(ranges, dest) if dest is not None and not dest_free
                      else None)


def _digit_order(ctx: "_Ctx", keys: tuple, m: Mapping, digits: list[Mapping]
                 ) -> tuple[int, ...]:
    """An allowed Element of a free source as an order of its digits: each of its terms
    must be one digit or consecutive digits of one axis."""
    ranges = {}
    for k, t in enumerate(digits):
        f = t.factors[0]
        ranges[k] = (f.axis, f.lo, f.lo * f.radix)
    out: list[int] = []
    for f in m.factors:
        if f.pads or f.count != f.size:
            raise ctx.doc.error(keys, f"{f.label(ctx.axes)} pads a digit: an allowed order "
                                "holds the source's digits, unpadded", "drop the padding")
        inside = sorted((k for k, (a, lo, hi) in ranges.items() if a == f.axis
                         and f.lo <= lo and hi <= f.lo * f.radix), key=lambda k: -ranges[k][1])
        if f.axis is None or not inside:
            raise ctx.doc.error(keys, f"{f.label(ctx.axes)} is none of the source's digits "
                                f"({_listed(digits)})", "order those digits")
        out += inside
    if sorted(out) != list(range(len(digits))):
        raise ctx.doc.error(keys, f"it does not hold each of the source's digits "
                            f"({_listed(digits)}) once", "order those digits")
    return tuple(out)


#: generated Slice candidates spread over at least one DMN's slices (``allowed`` may go lower)
MIN_SLICE_SPREAD = hw.SLICES_PER_DMN


def _free_slice(ctx: "_Ctx", source: Tensor, spec: dict) -> _Candidates:
    """A free placement of a destination with a free Element: ``slice``, ``cluster`` and/or
    ``chip`` say ``free`` (or ``{free: true, allowed: [...]}``; a Slice also takes
    ``max_footprint_bytes``).  The candidates of each: the ``allowed`` ones, else the top
    digits of one axis, ``X / k`` -- a Slice over 32 to 256 slices (padded to 64, 128 or
    256), a Cluster over both clusters, a Chip over every chip -- plus, for Cluster and Chip,
    staying in the first one.  Returns every combination (no axis in two dimensions) and the
    destination spec of each."""
    import itertools
    doc = ctx.doc
    dims = [d for d in ("chip", "cluster", "slice")
            if spec.get(d) == "free" or isinstance(spec.get(d), dict)]
    if spec.get("tier") != "dm" and set(dims) - {"chip"}:
        raise doc.error(("destination", dims[-1]), "only a DM destination has a Slice and a "
                        "Cluster to plan", "give the mapping")
    if not (spec.get("element") == "free" or isinstance(spec.get("element"), dict)):
        raise doc.error(("destination", dims[-1]), f"a free {dims[-1].title()} needs a free "
                        f"Element (Element holds what {dims[-1].title()} leaves)",
                        "element: free")
    if "chip" in dims and ctx.chips < 2:
        raise doc.error(("destination", "chip"), "a free Chip needs several chips",
                        "chips: 2 (or more), or drop chip: free")
    most = None
    lists: list[list[tuple[str, Mapping]]] = []  # per dimension: (label, mapping)
    for d in dims:
        keys = ("destination", d)
        raw = spec[d]
        allowed: list[tuple[str, Mapping]] | None = None
        if isinstance(raw, dict):
            extra = {"max_footprint_bytes"} if d == "slice" else set()
            if set(raw) - {"free", "allowed"} - extra or raw.get("free") is not True:
                raise doc.error(keys, f"a bounded free {d.title()} takes free: true, allowed"
                                + (" and max_footprint_bytes" if extra else ""),
                                f"{d}: {{free: true, allowed: ['m![A]']}}")
            if "allowed" in raw:
                if not isinstance(raw["allowed"], list) or not raw["allowed"]:
                    raise doc.error(keys + ("allowed",), f"expected a list of {d.title()} "
                                    "mappings", "allowed: ['m![A # 64]', 'm![B / 2]']")
                allowed = [(str(text), ctx.mapping(keys + ("allowed", k), text, d))
                           for k, text in enumerate(raw["allowed"])]
            if d == "slice":
                most = raw.get("max_footprint_bytes")
                if most is not None and (isinstance(most, bool) or not isinstance(most, int)
                                         or most < 1):
                    raise doc.error(keys + ("max_footprint_bytes",),
                                    f"{most!r} is not a byte count",
                                    "max_footprint_bytes: 65536")
        if allowed is None:
            allowed = [(m.text(), m) for m in _spread_candidates(source, d, ctx.chips)]
        if not allowed:
            raise doc.error(keys, f"no axis can be spread over the {d} dimension",
                            f"give the {d.title()}")
        lists.append(allowed)
    labels, specs = [], []
    for combo in itertools.product(*lists):
        used = [set(m.axes) for _, m in combo]
        if any(a & b for i, a in enumerate(used) for b in used[i + 1:]):
            continue  # one axis's top digits in two dimensions
        labels.append(", ".join(f"{d} {t}" for d, (t, _) in zip(dims, combo))
                      if len(dims) > 1 else combo[0][0])
        specs.append({**spec, **{d: m for d, (_, m) in zip(dims, combo)}})
    if not specs:
        raise doc.error(("destination", dims[-1]), "no combination of the candidates keeps "
                        "each axis in one dimension", "give allowed lists")
    return _Candidates(labels, specs, tuple(dims), most)


def _source_factors(source: Tensor) -> list:
    """Every digit factor of the source, its Chip, Cluster and Slice before its Element."""
    return [f for d in ("chip", "cluster", "slice", "element") if d in source.dims
            for f in source.dims[d].factors]


def _spread_candidates(source: Tensor, dim: str, chips: int) -> list[Mapping]:
    """Generated candidates for a free Slice, Cluster or Chip: the top digits of one axis."""
    counts: range | list[int]
    if dim == "slice":
        counts, first = range(MIN_SLICE_SPREAD, max(hw.SLICE_SIZES) + 1), []
    elif dim == "cluster":
        counts, first = [hw.CLUSTERS_PER_CHIP], [number(1).pad(hw.CLUSTERS_PER_CHIP)]
    else:
        counts, first = [chips], [number(1).pad(chips)]
    out = list(first)
    for f in _source_factors(source):
        if f.axis is None:
            continue
        size = next(m.axes[f.axis] for m in source.dims.values() if f.axis in m.axes)
        k = 1
        while k < size:
            count = -(-size // k)
            if count in counts and size % k == 0:
                pad = min(x for x in hw.SLICE_SIZES if x >= count) if dim == "slice" else count
                term = axis(f.axis, size) if k == 1 else axis(f.axis, size) / k
                out.append(term.pad(pad) if pad != count else term)
            k *= 2
    return list(dict.fromkeys(out))


#: a padding amount the planner chooses: ``m![A, C # free]``
#: a term padded ``# free``; it starts at the string's start or after ``[`` or ``,`` (the
#: leftmost match the unanchored pattern finds, in linear time: unanchored, a long term
#: with no ``# free`` was tried from every one of its characters)
FREE_PAD = __import__("re").compile(r"(?:^|(?<=[\[,]))([^,\[\]]+?)\s*#\s*free\b")


def _free_padding(ctx: "_Ctx", spec: dict) -> _Candidates:
    """One destination term padded ``# free``: the candidate padded sizes (a Slice term: 64,
    128 or 256 slices; another term: its size rounded up to a multiple of 2, 4, ..., 64, up
    to four times its size; the unpadded size first) and the destination spec for each."""
    doc = ctx.doc
    found = [(d, v) for d, v in spec.items() if isinstance(v, str) and FREE_PAD.search(v)]
    if len(found) > 1 or len(FREE_PAD.findall(found[0][1])) > 1:
        raise doc.error(("destination", found[-1][0]), "one padding amount can be free",
                        "give the other padding amounts")
    dim, text = found[0]
    keys = ("destination", dim)
    found_pad = FREE_PAD.search(text)
    assert found_pad is not None  # (found above)
    term = found_pad.group(1).strip()
    n = ctx.mapping(keys, term, dim).size
    if dim == "slice":
        sizes = [x for x in hw.SLICE_SIZES if x >= n]
    else:
        sizes = sorted({-(-n // m) * m for m in (1, 2, 4, 8, 16, 32, 64)} - {0})
        sizes = [x for x in sizes if x <= 4 * n]
    if not sizes:
        raise doc.error(keys, f"{term} has {n} positions: no padded size fits",
                        "give the mapping")
    labels, specs = [], []
    for x in sizes:
        # the user's text with the amount filled in: read once, here, as the user wrote it
        padded = term if x == n else f"{term} # {x}"
        new = FREE_PAD.sub(lambda mt, p=padded: mt.group(1)[:len(mt.group(1))
                                                            - len(mt.group(1).lstrip())] + p,
                           text, count=1)
        labels.append(new)
        specs.append({**spec, dim: ctx.mapping(keys, new, dim)})
    return _Candidates(labels, specs, (dim,))
