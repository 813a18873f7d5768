"""The loader of DMA and PCIe problems (``kind: dma`` / ``pcie``; docs/problem-format.md):
source, destination and stream, and every choice such a problem may leave free (the stream's
order, packet and engine split, the destination's Element, placement or padding, an HBM
tensor's layout and address, hops).  ``planner/spec.py`` reads what every problem has and
hands the rest to the kind (``planner/kinds/dma.py``), which calls :func:`load_dma`."""

from __future__ import annotations

from typing import Any

from tcplan.model import hardware as hw
from tcplan.model import limits
from tcplan.model.mapping import MAX_SIZE, parse
from tcplan.model.rules import TcplanError
from tcplan.model.tiers import TIER_DIMS, Tensor

from .spec import _Ctx, _did_you_mean


def load_dma(ctx: _Ctx, data: dict, kind: str, tensors: dict[str, Tensor],
             params: dict[str, Any]) -> None:
    """Read a DMA or PCIe problem's tensors into ``tensors`` and its choices into
    ``params``: each step below reads one part and says where a mistake is."""
    data, free_addr = _split_free_addresses(ctx, data)
    free_source = _free_source_of(ctx, data)
    tensors["source"] = (free_source.base if free_source is not None else
                         ctx.tensor(("source",), data["source"], "source"))
    spec_d, free_element, free_slice = _destination(ctx, data, tensors["source"])
    tensors["destination"] = ctx.tensor(("destination",), spec_d, "destination")
    spec_s, free, engines_free = _free_stream(ctx, data, tensors, params)
    _free_layouts(ctx, tensors, params, free, free_element, free_source, free_slice)
    if free_addr:
        _place_free_addresses(free_addr, tensors, free_source, params)
        params["free_address"] = sorted(free_addr, reverse=True)  # source first
    if "bounds" in data:
        params["bounds"] = _bounds(ctx.doc, data["bounds"], free)
    if kind == "dma" and "hops" in data:
        params["hops"] = _hops(ctx.doc, data["hops"], free, free_source is not None
                               or free_element is not None or free_slice is not None)
    if "stream" in data:
        tensors["stream"] = ctx.tensor(("stream",), spec_s, "stream", tier="stream")
    else:
        from tcplan.model.dma import default_stream
        tensors["stream"] = default_stream(tensors["source"], tensors["destination"])
    if "engine_at" in data:
        params["engine_at"] = _engine_at(ctx, data["engine_at"], tensors["stream"],
                                         engines_free)


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


def _destination(ctx: _Ctx, data: dict, source: Tensor) -> tuple[Any, Any, Any]:
    """The destination's spec with its free placement or padding and free Element taken
    off: (spec, free Element, free placement)."""
    spec_d = data["destination"]
    free_element = free_slice = None
    if isinstance(spec_d, dict) and any(spec_d.get(d) == "free" or isinstance(
            spec_d.get(d), dict) for d in ("chip", "cluster", "slice")):
        free_slice = _free_slice(ctx, source, spec_d)
        spec_d = free_slice["specs"][0]
    elif isinstance(spec_d, dict) and any(isinstance(v, str) and FREE_PAD.search(v)
                                          for v in spec_d.values()):
        free_slice = _free_padding(ctx, spec_d)
        spec_d = free_slice["specs"][0]
    if _is_free_element(spec_d):
        free_element, spec_d = _free_element(ctx, source, spec_d)
    return spec_d, free_element, free_slice


def _free_stream(ctx: _Ctx, data: dict, tensors: dict[str, Tensor],
                 params: dict[str, Any]) -> tuple[Any, list[str], list[str]]:
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
        placeholder = default_stream(tensors["source"], tensors["destination"])
        spec_s = {k: v for k, v in spec_s.items() if k not in free + engines_free}
        spec_s.update({d: placeholder.dims[d].text() for d in free})
        if "chip" not in spec_s:  # the engines' chips follow the side spread over chips
            spec_s["chip"] = placeholder.dims["chip"].text()
        params["free"] = free + engines_free
    return spec_s, free, engines_free


def _free_layouts(ctx: _Ctx, tensors: dict[str, Tensor], params: dict[str, Any],
                  free: list[str], free_element: Any, free_source: Any,
                  free_slice: Any) -> None:
    """A free destination Element, source or placement: planned with a free stream, in the
    combinations the planner covers; into ``params``."""
    doc = ctx.doc
    if free_element is not None:
        if not free:
            raise doc.error(("destination", "element"), "a free destination is planned "
                            "with its stream", "add stream: {time: free, packet: free}")
        params["free_element"] = free_element
    if free_source is not None:
        if free_element is not None and not free:
            raise doc.error(("source", "element"), "a free source with a free "
                            "destination Element is planned with its stream",
                            "add stream: {time: free, packet: free}")
        if free_slice is not None:
            raise doc.error(("source", "element"), "a free source Element is planned "
                            "with the destination's placement given", "give the "
                            "destination's Chip, Cluster and Slice")
        params["free_source"] = free_source
    if free_slice is not None:
        if not free:
            raise doc.error(("destination", free_slice["dims"][0]), "a free destination "
                            "is planned with its stream",
                            "add stream: {time: free, packet: free}")
        params["free_slice"] = {"candidates": _placements(ctx, tensors["source"], free_slice),
                                "dims": free_slice["dims"],
                                "max_footprint_bytes": free_slice["max_footprint_bytes"]}


def _placements(ctx: _Ctx, source: Tensor, free_slice: dict) -> list[tuple]:
    """Each candidate placement as (text, destination tensor, its free Element or None)."""
    cands = []
    for text, sd in zip(free_slice["texts"], free_slice["specs"]):
        fe = None
        if _is_free_element(sd):
            try:  # a candidate whose Slice takes the prefix's digits is dropped
                fe, sd = _free_element(ctx, source, sd)
            except TcplanError:
                continue
        cands.append((text, ctx.tensor(("destination",), sd, "destination"), fe))
    if not cands:
        raise ctx.doc.error(("destination", "element"), "no candidate placement leaves the "
                            "Element prefix's digits to Element", "change the prefix")
    return cands


def _bounds(doc, b: Any, free: list[str]) -> dict[str, Any]:
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
    return dict(b)


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
                          tensors: dict[str, Tensor], free_source, params: dict) -> None:
    """Give each tensor with a free address its address (:func:`model.tiers.free_address`):
    the source first, clear of a destination with a given address; the destination clear
    of the source."""
    import dataclasses

    from tcplan.model.tiers import free_address
    for side in ("source", "destination"):
        if side not in free_addr:
            continue
        other = tensors["destination" if side == "source" else "source"]
        taken = None
        if other.tier == "hbm" and (side == "destination" or "destination" not in free_addr):
            taken = (other.address,
                     other.address + other.dims["element"].size * other.elem_bytes)
        at = free_address(tensors[side], *free_addr[side], taken)
        tensors[side] = dataclasses.replace(tensors[side], address=at)
        if side == "source" and free_source is not None:
            free_source.base = dataclasses.replace(free_source.base, address=at)
        fsl = params.get("free_slice")
        if side == "destination" and fsl:
            fsl["candidates"] = [(text, dataclasses.replace(d, address=at), fe)
                                 for text, d, fe in fsl["candidates"]]


def _free_element(ctx: "_Ctx", source: Tensor, spec: dict) -> tuple[dict, dict]:
    """``element: free`` (or ``{free: true, prefix: 'm![...]'}``): the destination's Element
    order is the planner's.  Returns the bound (``prefix``: terms that stay outermost, in
    order) and the destination spec with a placeholder Element: every digit the
    destination's other dimensions leave, in the source's order."""
    doc = ctx.doc
    keys = ("destination", "element")
    raw = spec["element"]
    prefix: list[str] = []
    if isinstance(raw, dict):
        if set(raw) - {"free", "prefix"} or raw.get("free") is not True:
            raise doc.error(keys, "a bounded free Element takes free: true and a prefix",
                            "element: {free: true, prefix: 'm![B / 4]'}")
        if "prefix" in raw:
            pm = ctx.mapping(keys + ("prefix",), raw["prefix"], "element")
            for text, fs in pm.items():
                if not any(f.axis for f in fs):
                    raise doc.error(keys + ("prefix",), f"{text} names no axis digits",
                                    "prefix: 'm![H]'")
                prefix.append(text)
    others = {k: v for k, v in spec.items() if k != "element"}
    held: dict[str, list[tuple[int, int]]] = {}
    probe = ctx.tensor(("destination",), {**others, "element": "m![1]"}, "destination")
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
            terms.append(f.axis if a == 1 and b >= size else f"{f.axis} % {b}" if a == 1
                         else f"{f.axis} / {a}" if b >= size else f"{f.axis} / {a} % {b // a}")
    if not terms:
        raise doc.error(keys, "the other dimensions hold every digit: nothing is left for "
                        "Element", "give Element a mapping")
    def digits(text: str) -> tuple:
        f = next(f for f in parse(f"m![{text}]", ctx.axes).factors if f.axis is not None)
        return (f.axis, f.lo, min(f.lo * f.count, ctx.axes[f.axis]))
    by_digits = {digits(t): t for t in terms}
    named = []
    for t in prefix:  # the prefix's terms, as the Element's own terms
        if digits(t) not in by_digits:
            raise doc.error(keys + ("prefix",), f"{t} is not one of the Element digits "
                            f"({', '.join(terms)})", "use terms the Element holds")
        if by_digits[digits(t)] in named:
            raise doc.error(keys + ("prefix",), f"{t} appears twice in the prefix",
                            "name each term once")
        named.append(by_digits[digits(t)])
    prefix = named
    return {"prefix": prefix, "terms": terms}, {**others,
                                                "element": "m![" + ", ".join(terms) + "]"}


def _free_source(ctx: "_Ctx", spec: dict, dest_spec: Any) -> dict[str, Any]:
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
    prefix: list[str] = []
    allowed = None
    if isinstance(raw, dict):
        if set(raw) - {"free", "prefix", "allowed"} or raw.get("free") is not True:
            raise doc.error(keys, "a bounded free Element takes free: true, a prefix and an "
                            "allowed list", "element: {free: true, prefix: 'm![A]'}")
        if "prefix" in raw:
            prefix = [t for t, _ in ctx.mapping(keys + ("prefix",), raw["prefix"],
                                                "element").items()]
        if "allowed" in raw:
            if not isinstance(raw["allowed"], list) or not raw["allowed"]:
                raise doc.error(keys + ("allowed",), "expected a list of Element mappings",
                                "allowed: ['m![A, B]', 'm![B, A]']")
            allowed = [ctx.mapping(keys + ("allowed", k), text, "element").text()
                       for k, text in enumerate(raw["allowed"])]
    others = {k: v for k, v in spec.items() if k != "element"}
    probe = ctx.tensor(("source",), {**others, "element": "m![1]"}, "source")
    # a free destination Element holds every digit its other dimensions leave: those cut
    # the source, and the transfer moves every digit
    dest_free = isinstance(dest_spec, dict) and (dest_spec.get("element") == "free" or
                                                 isinstance(dest_spec.get("element"), dict))
    if dest_free:
        dest_spec = {**dest_spec, "element": "m![1]"}
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
            terms.append(a if lo == 1 and hi >= size else f"{a} % {hi}" if lo == 1
                         else f"{a} / {lo}" if hi >= size else f"{a} / {lo} % {hi // lo}")
    if set(prefix) - set(terms):
        raise doc.error(keys + ("prefix",), f"the prefix's terms are not among the "
                        f"source's digits ({', '.join(terms)})", "use those terms")
    if len(set(prefix)) < len(prefix):
        raise doc.error(keys + ("prefix",), "the prefix names a digit twice",
                        "name each digit once")
    if len(terms) - len(prefix) > limits.SOURCE_MAX_DIGITS:
        rest = [t for t in terms if t not in prefix]
        raise doc.error(keys, f"{len(rest)} digits to order ({', '.join(rest)}): more than "
                        f"{limits.SOURCE_MAX_DIGITS}", "fix the outermost ones with a "
                        "prefix, or list the allowed orders")
    order = prefix + [t for t in terms if t not in prefix]
    base = ctx.tensor(("source",), {**others, "element": "m![" + ", ".join(order) + "]"},
                      "source")
    factors = base.dims["element"].factors
    moved = moved_by(dest) if dest is not None and not dest_free else (lambda *_: True)
    ranges = [(f.axis, f.lo, min(f.lo * f.count, ctx.axes[f.axis])) for f in factors]
    digits = [Digit(t, f.size, bool(moved(*r))) for t, f, r in zip(order, factors, ranges)]
    if allowed is not None:
        if len(allowed) > limits.SOURCE_MAX_ORDERS:
            raise doc.error(keys + ("allowed",), f"{len(allowed):,} allowed orders: more than "
                            f"{limits.SOURCE_MAX_ORDERS}", "list fewer, or use a prefix")
        allowed = [_digit_order(ctx, keys + ("allowed", k), text, order)
                   for k, text in enumerate(allowed)]
        if prefix and not any(o[:len(prefix)] == tuple(range(len(prefix))) for o in allowed):
            raise doc.error(keys + ("prefix",), "no allowed order starts with the prefix",
                            "drop the prefix, or allow an order that starts with it")
        if prefix:  # the prefix narrows the allowed orders
            allowed = [o for o in allowed if o[:len(prefix)] == tuple(range(len(prefix)))]
    return FreeSource(digits, list(range(len(prefix))), allowed, base,
                      write_chain(ranges, dest) if dest is not None and not dest_free
                      else None)


def _digit_order(ctx: "_Ctx", keys: tuple, text: str, digits: list[str]) -> tuple[int, ...]:
    """An allowed Element of a free source as an order of its digits: each of its terms
    must be one digit or consecutive digits of one axis."""
    m = parse(text, ctx.axes, "element")
    ranges = {}
    for k, t in enumerate(digits):
        f = parse(f"m![{t}]", ctx.axes, "element").factors[0]
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
                                f"({', '.join(digits)})", "order those digits")
        out += inside
    if sorted(out) != list(range(len(digits))):
        raise ctx.doc.error(keys, f"it does not hold each of the source's digits "
                            f"({', '.join(digits)}) once", "order those digits")
    return tuple(out)


#: generated Slice candidates spread over at least one DMN's slices (``allowed`` may go lower)
MIN_SLICE_SPREAD = hw.SLICES_PER_DMN


def _free_slice(ctx: "_Ctx", source: Tensor, spec: dict) -> dict[str, Any]:
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
    lists: list[list[str]] = []
    for d in dims:
        keys = ("destination", d)
        raw = spec[d]
        allowed = None
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
                allowed = []
                for k, text in enumerate(raw["allowed"]):
                    ctx.mapping(keys + ("allowed", k), text, d)
                    allowed.append(str(text))
            if d == "slice":
                most = raw.get("max_footprint_bytes")
                if most is not None and (isinstance(most, bool) or not isinstance(most, int)
                                         or most < 1):
                    raise doc.error(keys + ("max_footprint_bytes",),
                                    f"{most!r} is not a byte count",
                                    "max_footprint_bytes: 65536")
        if allowed is None:
            allowed = _spread_candidates(source, d, ctx.chips)
        if not allowed:
            raise doc.error(keys, f"no axis can be spread over the {d} dimension",
                            f"give the {d.title()}")
        lists.append(allowed)
    texts, specs = [], []
    for combo in itertools.product(*lists):
        used = [set(parse(t, ctx.axes).axes) & set(ctx.axes) for t in combo]
        if any(a & b for i, a in enumerate(used) for b in used[i + 1:]):
            continue  # one axis's top digits in two dimensions
        texts.append(", ".join(f"{d} {t}" for d, t in zip(dims, combo)) if len(dims) > 1
                     else combo[0])
        specs.append({**spec, **dict(zip(dims, combo))})
    if not specs:
        raise doc.error(("destination", dims[-1]), "no combination of the candidates keeps "
                        "each axis in one dimension", "give allowed lists")
    return {"texts": texts, "specs": specs, "max_footprint_bytes": most, "dims": dims}


def _source_factors(source: Tensor) -> list:
    """Every digit factor of the source, its Chip, Cluster and Slice before its Element."""
    return [f for d in ("chip", "cluster", "slice", "element") if d in source.dims
            for f in source.dims[d].factors]


def _spread_candidates(source: Tensor, dim: str, chips: int) -> list[str]:
    """Generated candidates for a free Slice, Cluster or Chip: the top digits of one axis."""
    if dim == "slice":
        counts, first = range(MIN_SLICE_SPREAD, max(hw.SLICE_SIZES) + 1), []
    elif dim == "cluster":
        counts, first = [hw.CLUSTERS_PER_CHIP], [f"m![1 # {hw.CLUSTERS_PER_CHIP}]"]
    else:
        counts, first = [chips], ["m![1 # %d]" % chips]
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
                term = f.axis if k == 1 else f"{f.axis} / {k}"
                out.append(f"m![{term}" + (f" # {pad}" if pad != count else "") + "]")
            k *= 2
    return list(dict.fromkeys(out))


#: a padding amount the planner chooses: ``m![A, C # free]``
FREE_PAD = __import__("re").compile(r"([^,\[\]]+?)\s*#\s*free\b")


def _free_padding(ctx: "_Ctx", spec: dict) -> dict[str, Any]:
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
    term = FREE_PAD.search(text).group(1).strip()
    n = ctx.mapping(keys, f"m![{term}]", dim).size
    if dim == "slice":
        sizes = [x for x in hw.SLICE_SIZES if x >= n]
    else:
        sizes = sorted({-(-n // m) * m for m in (1, 2, 4, 8, 16, 32, 64)} - {0})
        sizes = [x for x in sizes if x <= 4 * n]
    if not sizes:
        raise doc.error(keys, f"{term} has {n} positions: no padded size fits",
                        "give the mapping")
    texts, specs = [], []
    for x in sizes:
        padded = term if x == n else f"{term} # {x}"
        new = FREE_PAD.sub(lambda mt, p=padded: mt.group(1)[:len(mt.group(1))
                                                            - len(mt.group(1).lstrip())] + p,
                           text, count=1)
        ctx.mapping(keys, new, dim)  # each candidate is a valid mapping
        texts.append(new)
        specs.append({**spec, dim: new})
    return {"texts": texts, "specs": specs, "max_footprint_bytes": None, "dims": [dim]}
