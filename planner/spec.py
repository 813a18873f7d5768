"""YAML problem files -> :class:`Problem`, validated on load (docs/problem-format.md).

Every mistake is a ``bad-problem`` error (exit 2) naming the file, line, column and field;
mapping errors keep their own code (``parse-error``, ``unknown-axis``, ``bad-mapping``) with the
location prepended.  YAML is read with PyYAML's safe loader only.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field
from typing import Any

import yaml

from model import hardware as hw
from model import limits
from model.mapping import MAX_SIZE, Mapping, parse, validate_axes
from model.rules import TcplanError, Violation, fail
from model.tiers import DIM_TITLES, REQUIRED_DIMS, TIER_DIMS, Tensor, default_dim

FORMAT_VERSION = 1
KINDS = ("layout", "sequence", "dma", "pcie", "redistribute", "gather", "scatter", "vector",
         "lane_fold", "expression")
#: top-level keys every problem may have
COMMON_KEYS = {"format", "name", "description", "kind", "chips", "dtype", "axes", "expect"}
#: the keys each kind adds (and which of them it requires)
KIND_KEYS: dict[str, tuple[set[str], set[str]]] = {
    "layout": ({"tensors"}, {"tensors"}),
    "sequence": ({"buffer", "stream", "mode", "engine"}, {"buffer", "stream"}),
    "dma": ({"source", "destination", "stream", "engine_at", "bounds", "hops"},
            {"source", "destination"}),
    "pcie": ({"source", "destination", "stream", "bounds"}, {"source", "destination"}),
    "redistribute": ({"source", "steps"}, {"source", "steps"}),
    "gather": ({"variant", "table", "index", "destination"},
               {"variant", "table", "index", "destination"}),
    "scatter": ({"source", "index", "destination"}, {"source", "index", "destination"}),
    "vector": ({"input", "vrf", "chain", "output", "reference"}, {"input", "chain"}),
    "lane_fold": ({"input", "mode", "output"}, {"input", "mode"}),
    "expression": ({"input", "vrf", "expression", "output", "pair_axis"},
                   {"input", "expression"}),
}
STEP_OPS = ("chip_shuffle", "cluster_swap", "chip_slice", "cluster_slice",
            "asymmetric_chip_slice", "asymmetric_cluster_slice", "hbm_chip_shuffle")
TENSOR_KEYS = {"tier", "address", "dtype"} | {d for ds in TIER_DIMS.values() for d in ds}
EXPECT_KEYS = {"error", "cycles", "read", "write", "unified", "entries", "raw_entries",
               "packet", "engines", "commands", "trace", "warnings", "element", "syncs",
               "semantics", "verified", "invocations", "status", "alus", "out_time",
               "out_packet", "explanation"}


#: the expectations `tcplan batch` compares (the others are documentation for tests)
EXPECT_TYPES = {"cycles": int, "invocations": int, "verified": bool, "status": str,
                "error": str, "explanation": list}
EXPECT_TYPE_NAMES = {int: "a whole number", bool: "true or false", str: "text",
                     list: "a list of rule ids"}
EXPECT_EXAMPLES = {"cycles": "628", "invocations": "1", "verified": "true",
                   "status": "optimal", "error": "capacity", "explanation": "[capacity]"}


@dataclass
class Problem:
    path: str
    name: str
    kind: str
    chips: int
    dtype: str
    axes: dict[str, int]
    tensors: dict[str, Tensor]
    params: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)


def _did_you_mean(word: object, choices) -> str:
    """`` (did you mean 'tier'?)`` for a near miss among ``choices``, else ``""``."""
    import difflib
    if not isinstance(word, str):
        return ""
    near = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


class _Refused(Exception):
    def __init__(self, what: str, mark: Any, fix: str):
        super().__init__(what)
        self.what, self.mark, self.fix = what, mark, fix


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases (a problem file needs none, and nested aliases
    expand exponentially: "billion laughs") and bounding the nesting depth and the node
    count while composing, before anything walks or builds the document."""

    def __init__(self, text: str):
        super().__init__(text)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"alias *{event.anchor} refused (problem files take no anchors "
                           "or aliases)", event.start_mark, "write the value out in full")
        self._nodes += 1
        if self._nodes > limits.YAML_MAX_NODES:
            raise _Refused(f"more than {limits.YAML_MAX_NODES:,} values", event.start_mark,
                           "a problem file is a few KiB of YAML")
        if self._depth >= limits.YAML_MAX_DEPTH:
            raise _Refused(f"nested deeper than {limits.YAML_MAX_DEPTH} levels",
                           event.start_mark, "flatten the document")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


#: what PyYAML's constructors raise on some tagged values (!!int '', !!timestamp abc,
#: !!bool maybe), and Python on an integer of over 4,300 digits
_CONSTRUCT_ERRORS = (ValueError, IndexError, KeyError, AttributeError, TypeError,
                     OverflowError)


def _failing_scalar(root: Any) -> Any:
    """The mark of the first scalar PyYAML cannot construct (the document's start if none
    fails alone)."""
    todo = [root]
    while todo:
        node = todo.pop()
        if isinstance(node, yaml.ScalarNode):
            make = yaml.SafeLoader.yaml_constructors.get(node.tag)
            if make is not None:
                try:
                    make(yaml.SafeLoader(""), node)
                except _CONSTRUCT_ERRORS + (yaml.YAMLError,):
                    return node.start_mark
        elif isinstance(node, yaml.SequenceNode):
            todo += reversed(node.value)
        elif isinstance(node, yaml.MappingNode):
            todo += [n for kv in reversed(node.value) for n in reversed(kv)]
    return root.start_mark


class _Doc:
    """A YAML document with the location of every node, addressed by key path."""

    def __init__(self, text: str, path: str):
        self.path = path
        self.lines = text.splitlines()
        if len(text) > limits.PROBLEM_FILE_MAX_BYTES:
            raise fail("bad-problem", where=path, detail=f"larger than "
                       f"{limits.PROBLEM_FILE_MAX_BYTES:,} characters",
                       fix="a problem file is a few KiB of YAML")
        try:
            loader = _Loader(text)
            try:
                self.node = loader.get_single_node()
                try:
                    self.data = loader.construct_document(self.node) if self.node else None
                except _CONSTRUCT_ERRORS as e:
                    raise _Refused(f"a value cannot be read ({type(e).__name__}: "
                                   f"{str(e)[:120]})", _failing_scalar(self.node),
                                   "write plain numbers, text, lists and mappings") from None
            finally:
                loader.dispose()
        except _Refused as e:
            m = e.mark
            raise fail("bad-problem", where=f"{path}:{m.line + 1}:{m.column + 1}",
                       detail=f"YAML: {e.what}", fix=e.fix) from None
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
            line = text.splitlines()[mark.line] if mark and mark.line < len(
                text.splitlines()) else ""
            unquoted = "m![" in line and "'m![" not in line and '"m![' not in line
            raise fail("bad-problem", where=where, detail=f"YAML: {e.problem or e.context}"
                       + (" (a mapping string must be quoted: YAML reads its [ and , as "
                          "its own)" if unquoted else ""),
                       fix="quote it: element: 'm![A, B]'" if unquoted
                       else "fix the YAML syntax") from None
        except yaml.YAMLError as e:
            raise fail("bad-problem", where=path, detail=f"YAML: {e}",
                       fix="fix the YAML syntax") from None
        except RecursionError:
            raise fail("bad-problem", where=path, detail="YAML nested too deeply",
                       fix="flatten the document") from None

    def node_at(self, keys: tuple) -> Any:
        node = self.node
        for k in keys:
            if isinstance(node, yaml.MappingNode):
                nxt = None
                for kn, vn in node.value:
                    if kn.value == str(k):
                        nxt = vn
                node = nxt if nxt is not None else node
                if nxt is None:
                    break
            elif isinstance(node, yaml.SequenceNode) and isinstance(k, int) \
                    and k < len(node.value):
                node = node.value[k]
            else:
                break
        return node

    def key_node(self, keys: tuple) -> Any:
        parent = self.node_at(keys[:-1])
        if isinstance(parent, yaml.MappingNode):
            for kn, _ in parent.value:
                if kn.value == str(keys[-1]):
                    return kn
        return None

    def where(self, keys: tuple, at_key: bool = False) -> str:
        node = self.key_node(keys) if at_key and keys else self.node_at(keys)
        if node is None:
            return self.path
        m = node.start_mark
        return f"{self.path}:{m.line + 1}:{m.column + 1}"

    def error(self, keys: tuple, detail: str, fix: str, at_key: bool = False) -> TcplanError:
        """A located ``bad-problem`` error: at the value of ``keys``, or at the key itself
        (``at_key``) when the key is what is wrong."""
        field_ = ".".join(str(k) for k in keys)
        return fail("bad-problem", where=self.where(keys, at_key),
                    detail=f"{field_}: {detail}" if field_ else detail, fix=fix)

    def duplicate_keys(self) -> None:
        def walk(node: Any, keys: tuple) -> None:
            if isinstance(node, yaml.MappingNode):
                seen: set = set()
                for kn, vn in node.value:
                    if not isinstance(kn, yaml.ScalarNode):  # a list or mapping as a key:
                        walk(vn, keys + ("?",))  # refused by the checks of its field
                        continue
                    if kn.value in seen:
                        m = kn.start_mark
                        raise fail("bad-problem", where=f"{self.path}:{m.line + 1}:{m.column + 1}",
                                   detail=f"{'.'.join(map(str, keys + (kn.value,)))}: "
                                          f"duplicate key", fix="give every key once")
                    seen.add(kn.value)
                    walk(vn, keys + (kn.value,))
            elif isinstance(node, yaml.SequenceNode):
                for i, vn in enumerate(node.value):
                    walk(vn, keys + (i,))
        walk(self.node, ())


def load_problem(path: str | pathlib.Path) -> Problem:
    from .inputs import read_text
    return load_problem_text(read_text(path), str(path))


def load_problem_text(text: str, path: str = "<problem>") -> Problem:
    doc = _Doc(text, path)
    doc.duplicate_keys()
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error((), "a problem is a YAML mapping (key: value lines)",
                        "start from docs/problem-format.md")
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        raise doc.error(("kind",), f"{kind!r} is not a problem kind" if "kind" in data
                        else "missing", "use one of " + ", ".join(KINDS))
    extra, required = KIND_KEYS[kind]
    allowed = COMMON_KEYS | extra
    for k in data:
        if not isinstance(k, str) or k not in allowed:
            raise doc.error((k,), f"unknown key for a {kind} problem"
                            + _did_you_mean(k, allowed),
                            "allowed keys: " + ", ".join(sorted(allowed)), at_key=True)
    for k in sorted(required | {"axes"}):
        if k not in data:
            raise doc.error((), f"missing required key {k!r}",
                            f"a {kind} problem needs " + ", ".join(sorted(required | {'axes'})))
    if "format" in data and (type(data["format"]) is not int
                             or data["format"] != FORMAT_VERSION):
        raise doc.error(("format",), f"unsupported format {data['format']!r}",
                        f"this tcplan reads format {FORMAT_VERSION}")
    name = data.get("name", pathlib.Path(path).stem)
    if not isinstance(name, str):
        raise doc.error(("name",), "must be text", "name: my_problem")
    chips = data.get("chips", 1)
    if isinstance(chips, bool) or not isinstance(chips, int) or not 1 <= chips <= 1024:
        raise doc.error(("chips",), f"{chips!r} is not a chip count", "chips: 1 (up to 1024)")
    dtype = data.get("dtype", "i8")
    if not isinstance(dtype, str) or dtype not in hw.DTYPE_BYTES:
        raise doc.error(("dtype",), f"{dtype!r} is not a dtype",
                        "use one of " + ", ".join(hw.DTYPE_BYTES))
    raw_axes = data["axes"]
    if isinstance(raw_axes, dict):
        for axis, size in raw_axes.items():
            try:
                validate_axes({axis: size}, "axes")
            except TcplanError as e:
                raise doc.error(("axes", axis),
                                e.violations[0].detail["detail"].split(": ", 1)[-1],
                                e.violations[0].fix, at_key=not isinstance(axis, str)) from None
    try:
        axes = validate_axes(raw_axes, "axes")
    except TcplanError as e:
        raise doc.error(("axes",), e.violations[0].detail["detail"].split(": ", 1)[-1],
                        e.violations[0].fix) from None
    ctx = _Ctx(doc, axes, chips, dtype)
    tensors: dict[str, Tensor] = {}
    params: dict[str, Any] = {}
    if kind == "layout":
        ts = data["tensors"]
        if not isinstance(ts, dict) or not ts:
            raise doc.error(("tensors",), "expected a mapping of names to tensors",
                            "tensors: {hbm: {tier: hbm, element: 'm![A]'}}")
        for tname, spec in ts.items():
            tensors[str(tname)] = ctx.tensor(("tensors", tname), spec, str(tname),
                                             allow_stream=True)
    elif kind == "sequence":
        tensors["buffer"] = ctx.tensor(("buffer",), data["buffer"], "buffer")
        tensors["stream"] = ctx.tensor(("stream",), data["stream"], "stream", tier="stream")
        params["mode"] = ctx.choice(data, "mode", ("read", "write"), None)
        params["engine"] = ctx.choice(data, "engine", ("pseudo", "fetch", "commit", "dma"),
                                      "pseudo")
    elif kind in ("dma", "pcie"):
        free_addr: dict[str, tuple[int, int, int]] = {}
        for side in ("source", "destination"):
            sp = data[side]
            if isinstance(sp, dict) and (sp.get("address") == "free" or "bounds" in sp):
                free_addr[side] = _address_bounds(ctx, side, sp)
                data = {**data, side: {k: v for k, v in sp.items()
                                       if k not in ("address", "bounds")}}
        spec_src = data["source"]
        free_source = None
        if isinstance(spec_src, dict) and (spec_src.get("element") == "free"
                                           or isinstance(spec_src.get("element"), dict)):
            free_source = _free_source(ctx, spec_src, data["destination"])
        tensors["source"] = (free_source.base if free_source is not None else
                             ctx.tensor(("source",), spec_src, "source"))
        spec_d = data["destination"]
        free_element = free_slice = None
        if isinstance(spec_d, dict) and any(spec_d.get(d) == "free" or isinstance(
                spec_d.get(d), dict) for d in ("chip", "cluster", "slice")):
            free_slice = _free_slice(ctx, tensors["source"], spec_d)
            spec_d = free_slice["specs"][0]
        elif isinstance(spec_d, dict) and any(isinstance(v, str) and FREE_PAD.search(v)
                                              for v in spec_d.values()):
            free_slice = _free_padding(ctx, spec_d)
            spec_d = free_slice["specs"][0]
        if isinstance(spec_d, dict) and (spec_d.get("element") == "free"
                                         or isinstance(spec_d.get("element"), dict)):
            free_element, spec_d = _free_element(ctx, tensors["source"], spec_d)
        tensors["destination"] = ctx.tensor(("destination",), spec_d, "destination")
        spec_s = data.get("stream")
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
            from model.dma import default_stream
            placeholder = default_stream(tensors["source"], tensors["destination"])
            spec_s = {k: v for k, v in spec_s.items() if k not in free + engines_free}
            spec_s.update({d: placeholder.dims[d].text() for d in free})
            if "chip" not in spec_s:  # the engines' chips follow the side spread over chips
                spec_s["chip"] = placeholder.dims["chip"].text()
            params["free"] = free + engines_free
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
            cands = []
            for text, sd in zip(free_slice["texts"], free_slice["specs"]):
                fe = None
                if sd.get("element") == "free" or isinstance(sd.get("element"), dict):
                    try:  # a candidate whose Slice takes the prefix's digits is dropped
                        fe, sd = _free_element(ctx, tensors["source"], sd)
                    except TcplanError:
                        continue
                cands.append((text, ctx.tensor(("destination",), sd, "destination"), fe))
            if not cands:
                raise doc.error(("destination", "element"), "no candidate placement leaves the "
                                "Element prefix's digits to Element", "change the prefix")
            params["free_slice"] = {"candidates": cands, "dims": free_slice["dims"],
                                    "max_footprint_bytes": free_slice["max_footprint_bytes"]}
        if free_addr:
            _place_free_addresses(free_addr, tensors, free_source, params)
            params["free_address"] = sorted(free_addr, reverse=True)  # source first
        if "bounds" in data:
            b = data["bounds"]
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
            params["bounds"] = dict(b)
        if kind == "dma" and "hops" in data:
            h = data["hops"]
            if type(h) is not int or h not in (1, 2):
                raise doc.error(("hops",), f"{h!r} is not 1 or 2", "hops: 2")
            if not free:
                raise doc.error(("hops",), "a multi-hop search plans free streams",
                                "add stream: {time: free, packet: free}")
            if h > 1 and (free_source is not None or free_element is not None
                          or free_slice is not None):
                raise doc.error(("hops",), "a multi-hop search plans the intermediate's "
                                "layout; the source's and the destination's are given",
                                "give them, or drop hops")
            params["hops"] = h
        if "stream" in data:
            tensors["stream"] = ctx.tensor(("stream",), spec_s, "stream", tier="stream")
        else:
            from model.dma import default_stream
            tensors["stream"] = default_stream(tensors["source"], tensors["destination"])
        if "engine_at" in data:
            params["engine_at"] = ctx.engine_at(data["engine_at"])
            if engines_free:
                raise doc.error(("engine_at",), "engine_at fixes the engine; the stream's "
                                "engine split is free", "drop engine_at, or the free "
                                "cluster / slice", at_key=True)
            st = tensors["stream"]
            if any(st.dims[d].size > 1 for d in ("chip", "cluster", "slice")):
                raise doc.error(("engine_at",), "applies to a single-engine transfer; this "
                                "stream's Chip/Cluster/Slice mappings select the engines",
                                "drop engine_at, or the stream's spatial mappings",
                                at_key=True)
    elif kind == "redistribute":
        tensors["source"] = ctx.tensor(("source",), data["source"], "source")
        params["steps"] = ctx.steps(data["steps"])
    elif kind == "gather":
        params["variant"] = ctx.choice(data, "variant", ("scaled", "unscaled"), None)
        for k in ("table", "index", "destination"):
            tensors[k] = ctx.tensor((k,), data[k], k)
    elif kind == "scatter":
        params["variant"] = "scaled"
        for k in ("source", "index", "destination"):
            tensors[k] = ctx.tensor((k,), data[k], k)
    elif kind in ("vector", "expression"):
        from .chains_spec import parse_vector
        parse_vector(ctx, data, kind, tensors, params)
    elif kind == "lane_fold":
        from .chains_spec import parse_lane_fold
        parse_lane_fold(ctx, data, tensors, params)
    expect = data.get("expect", {})
    if not isinstance(expect, dict):
        raise doc.error(("expect",), "expected a mapping", "expect: {cycles: 628}")
    for k in expect:
        if not isinstance(k, str) or k not in EXPECT_KEYS:
            raise doc.error(("expect", k), "unknown expectation",
                            "use " + ", ".join(sorted(EXPECT_KEYS)), at_key=True)
        want = EXPECT_TYPES.get(k)
        v = expect[k]
        if want is not None and not (isinstance(v, want) and not (
                isinstance(v, bool) and want is not bool) and (
                not isinstance(v, list) or all(isinstance(x, str) for x in v))):
            raise doc.error(("expect", k), f"{v!r} is not {EXPECT_TYPE_NAMES[want]}",
                            f"e.g. {k}: {EXPECT_EXAMPLES[k]}")
    return Problem(path, name, kind, chips, dtype, axes, tensors, params, expect)


class _Ctx:
    def __init__(self, doc: _Doc, axes: dict[str, int], chips: int, dtype: str):
        self.doc, self.axes, self.chips, self.dtype = doc, axes, chips, dtype

    def choice(self, data: dict, key: str, allowed: tuple, default: Any) -> Any:
        v = data.get(key, default)
        if v is not None and (not isinstance(v, str) or v not in allowed):
            raise self.doc.error((key,), f"{v!r} is not one of {', '.join(allowed)}",
                                 f"use one of {', '.join(allowed)}")
        return v

    def steps(self, spec: Any) -> list:
        from model.redistribute import Step
        keys = ("steps",)
        if not isinstance(spec, list) or not spec:
            raise self.doc.error(keys, "expected a list of steps",
                                 "steps: [{chip_shuffle: [1, 2, 3, 0]}, {cluster_swap: true}]")
        out = []
        for i, item in enumerate(spec):
            k = keys + (i,)
            if not isinstance(item, dict) or len(item) != 1:
                raise self.doc.error(k, "each step is one {op: arguments} mapping",
                                     "e.g. - chip_shuffle: [1, 2, 3, 0]")
            (op, arg), = item.items()
            if op not in STEP_OPS:
                raise self.doc.error(k + (op,), "unknown step", "use one of "
                                     + ", ".join(STEP_OPS), at_key=True)
            if op in ("chip_shuffle", "hbm_chip_shuffle"):
                if not isinstance(arg, list) or not all(
                        isinstance(x, int) and not isinstance(x, bool) for x in arg):
                    raise self.doc.error(k + (op,), "expected a list of source chips",
                                         f"{op}: [1, 2, 3, 0]")
                out.append(Step(op, sources=list(arg)))
            elif op == "cluster_swap":
                if arg is not True:
                    raise self.doc.error(k + (op,), "write cluster_swap: true",
                                         "cluster_swap: true")
                out.append(Step(op))
            else:
                if not isinstance(arg, dict) or set(arg) != {"axis", "output", "indices"}:
                    raise self.doc.error(k + (op,), "expected {axis, output, indices}",
                                         f"{op}: {{axis: 'm![B]', output: 'm![C, D]', "
                                         "indices: [0, 1, 2, 3]}")
                idx = arg["indices"]
                if not isinstance(idx, list) or not all(
                        isinstance(x, int) and not isinstance(x, bool) for x in idx):
                    raise self.doc.error(k + (op, "indices"), "expected a list of positions",
                                         "indices: [0, 1, 2, 3]")
                out.append(Step(op, axis=self.mapping(k + (op, "axis"), arg["axis"], "axis"),
                                output=self.mapping(k + (op, "output"), arg["output"],
                                                    "element"),
                                indices=list(idx)))
        return out

    def engine_at(self, spec: Any) -> dict[str, int]:
        keys = ("engine_at",)
        if not isinstance(spec, dict):
            raise self.doc.error(keys, "expected {chip, cluster, pair}",
                                 "engine_at: {chip: 0, cluster: 0, pair: 0}")
        out = {}
        limits = {"chip": self.chips, "cluster": hw.CLUSTERS_PER_CHIP,
                  "pair": hw.DMA_ENGINES_PER_CLUSTER}
        for k, v in spec.items():
            if k not in limits:
                raise self.doc.error(keys + (k,), "unknown key", "use chip, cluster and pair",
                                     at_key=True)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < limits[k]:
                raise self.doc.error(keys + (k,), f"{v!r} is out of range",
                                     f"{k} is 0 to {limits[k] - 1}")
            out[k] = v
        return out

    def mapping(self, keys: tuple, value: Any, dim: str) -> Mapping:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise self.doc.error(keys, f"expected a mapping such as 'm![A, B]', got "
                                 f"{type(value).__name__}", "quote the mapping")
        try:
            return parse(value, self.axes, DIM_TITLES.get(dim, dim))
        except TcplanError as e:
            v = e.violations[0]
            line = self.doc.node_at(keys)
            hint = ""
            if v.rule == "parse-error" and line is not None:
                src = self.doc.lines[line.start_mark.line] if line.start_mark.line < len(
                    self.doc.lines) else ""
                if "#" in src[line.end_mark.column:] if line.start_mark.line == \
                        line.end_mark.line else False:
                    hint = " (YAML reads ' #' as a comment: quote the mapping)"
            raise TcplanError(Violation(v.rule, v.terms, {
                **v.detail, "what": f"{self.doc.where(keys)}: {'.'.join(map(str, keys))}"
                + hint})) from None

    def tensor(self, keys: tuple, spec: Any, name: str, tier: str | None = None,
               allow_stream: bool = False) -> Tensor:
        if not isinstance(spec, dict):
            raise self.doc.error(keys, "expected a mapping with a tier and one mapping per "
                                 "dimension", "e.g. {tier: hbm, element: 'm![A, B]'}")
        t = spec.get("tier", tier)
        if not isinstance(t, (str, type(None))):
            raise self.doc.error(keys + ("tier",), f"{t!r} is not a tier",
                                 "tier: one of host, hbm, dm, trf, vrf")
        if tier == "stream":
            t = "stream"
            if "tier" in spec and spec["tier"] != "stream":
                raise self.doc.error(keys + ("tier",), "a stream has no tier",
                                     "drop the tier key", at_key=True)
        if t not in TIER_DIMS or (t == "stream" and tier != "stream" and not allow_stream):
            tiers = "host, hbm, dm, trf, vrf" + (", stream" if allow_stream else "")
            near = "".join(_did_you_mean(k, ["tier"]) and f" ({k!r} is not 'tier')"
                           for k in spec if k != "tier")[:80]
            raise self.doc.error(keys + ("tier",) if "tier" in spec else keys,
                                 (f"{t!r} is not a tier" + _did_you_mean(t, TIER_DIMS))
                                 if "tier" in spec else "missing tier" + near,
                                 f"tier: one of {tiers}")
        dims_allowed = TIER_DIMS[t]
        for k in spec:
            if not isinstance(k, str) or k not in TENSOR_KEYS or (k in TIER_DIMS["stream"] + TIER_DIMS["trf"]
                                        and k not in dims_allowed):
                keys_allowed = ["tier", *dims_allowed] + (
                    [] if t == "stream" else ["address", "dtype"])
                what = (f"a {t} tensor has no {k} dimension" if k in TENSOR_KEYS
                        else "unknown key" + _did_you_mean(k, keys_allowed))
                raise self.doc.error(keys + (k,), what,
                                     f"{t.upper()} tensors take {', '.join(keys_allowed)}",
                                     at_key=True)
            if t == "stream" and k in ("address", "dtype"):
                raise self.doc.error(keys + (k,), "a stream has no " + k, "drop it",
                                     at_key=True)
        for d in REQUIRED_DIMS[t]:
            if d not in spec:
                raise self.doc.error(keys, f"a {t} tensor needs a {d} mapping",
                                     f"add {d}: 'm![...]'")
        dims: dict[str, Mapping] = {}
        for d in dims_allowed:
            if d in spec:
                dims[d] = self.mapping(keys + (d,), spec[d], d)
            else:
                dims[d] = default_dim(t, d, self.chips, self.axes)
        address = spec.get("address", 0)
        if isinstance(address, bool) or not isinstance(address, int) or \
                not 0 <= address <= MAX_SIZE:
            raise self.doc.error(keys + ("address",), f"{address!r} is not a byte address",
                                 "address: a non-negative integer (bytes)")
        dtype = spec.get("dtype", self.dtype)
        if not isinstance(dtype, str) or dtype not in hw.DTYPE_BYTES:
            raise self.doc.error(keys + ("dtype",), f"{dtype!r} is not a dtype",
                                 "use one of " + ", ".join(hw.DTYPE_BYTES))
        return Tensor(name, t, dtype, dims, address)


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

    from model.tiers import free_address
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
    from model.hbm_bits import moved_by

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
