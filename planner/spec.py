"""YAML problem files -> :class:`Problem`, validated on load (docs/problem-format.md).

Every mistake is a ``bad-problem`` error (exit 2) naming the file, line, column and field;
mapping errors keep their own code (``parse-error``, ``unknown-axis``, ``bad-mapping``) with the
location prepended.  YAML is read with PyYAML's safe loader only.
"""

from __future__ import annotations

import pathlib
from typing import Any

import yaml

from tcplan.model import hardware as hw
from tcplan.model import limits
from tcplan.model.mapping import MAX_SIZE, Mapping, parse, validate_axes
from tcplan.model.rules import TcplanError, Violation, fail
from tcplan.model.tiers import DIM_TITLES, REQUIRED_DIMS, TIER_DIMS, Tensor, default_dim

from .problem import Problem

FORMAT_VERSION = 1
#: top-level keys every problem may have (each kind adds its own: planner/kinds/)
COMMON_KEYS = {"format", "name", "description", "kind", "chips", "dtype", "axes", "expect"}


def kind_keys() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Each problem kind's top-level keys and the ones it requires, as its module in
    planner/kinds/ declares them (the loader and ``tcplan schema`` read them here)."""
    from .registry import kinds
    return {name: kind.keys[name] for name, kind in kinds().items()}


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


_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE_LOADER):
    """PyYAML's safe loader, on libyaml's parser where PyYAML has it (15x faster on a
    whole model's file).  :func:`_bounded_events` checks the text before it composes."""


def _bounded_events(text: str) -> None:
    """Refuse aliases (a problem file needs none, and nested aliases expand exponentially:
    "billion laughs"), nesting deeper than :data:`limits.YAML_MAX_DEPTH` and more than
    :data:`limits.YAML_MAX_NODES` nodes, from the parser's events: before anything composes,
    walks or builds the document."""
    depth = nodes = 0
    for event in yaml.parse(text, Loader=_BASE_LOADER):
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"alias *{event.anchor} refused (problem files take no anchors "
                           "or aliases)", event.start_mark, "write the value out in full")
        if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
            nodes += 1
            if nodes > limits.YAML_MAX_NODES:
                raise _Refused(f"more than {limits.YAML_MAX_NODES:,} values",
                               event.start_mark, "split the model into smaller files")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limits.YAML_MAX_DEPTH:
                raise _Refused(f"nested deeper than {limits.YAML_MAX_DEPTH} levels",
                               event.start_mark, "flatten the document")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _bounded(construct: Any) -> Any:
    """PyYAML's constructor of a number, its text bounded first
    (:func:`model.limits.number_text`): PyYAML calls ``int()`` on the scalar itself, and
    reads ``0x...`` and base-60 ``1:59:59:...`` too, whose ints may be too long to print."""
    def make(loader: yaml.SafeLoader, node: Any) -> Any:
        try:
            limits.number_text(node.value if isinstance(node.value, str) else "")
        except limits.NumberTooLong as e:
            raise _Refused(e.detail, node.start_mark, e.fix) from None
        return construct(loader, node)
    return make


_Loader.add_constructor("tag:yaml.org,2002:int", _bounded(yaml.SafeLoader.construct_yaml_int))
_Loader.add_constructor("tag:yaml.org,2002:float",
                        _bounded(yaml.SafeLoader.construct_yaml_float))

#: what PyYAML's constructors raise on some tagged values (!!int '', !!timestamp abc,
#: !!bool maybe; a number's text is bounded before, by _bounded)
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
            _bounded_events(text)
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
            if "nesting depth" in str(e.problem):  # (libyaml's own bound, 1,000 levels)
                raise fail("bad-problem", where=where, detail=f"YAML: nested deeper than "
                           f"{limits.YAML_MAX_DEPTH} levels", fix="flatten the document"
                           ) from None
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

    def _keys_of(self, node: Any) -> dict[Any, Any]:
        """A mapping node's values by their keys' text (the last of a repeated key), made
        once per node: a whole model's mapping has thousands of keys."""
        index = self.__dict__.setdefault("_index", {})
        got = index.get(id(node))
        if got is None:
            got = index[id(node)] = {kn.value: vn for kn, vn in node.value}
        return got

    def node_at(self, keys: tuple) -> Any:
        node = self.node
        for k in keys:
            if isinstance(node, yaml.MappingNode):
                nxt = self._keys_of(node).get(str(k))
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
    return problem_from(doc, doc.data, path)


def load_problem_data(data: dict[str, Any], path: str) -> Problem:
    """A problem from data tcplan built itself (a candidate's graph): read as a file of the
    same YAML would be, without printing and parsing the text; its mistakes (tcplan's own)
    are located at ``path`` only."""
    return problem_from(_DataDoc(path), data, path)


class _DataDoc:
    """The document of data built in memory: no text, so no lines or nodes to point at."""

    def __init__(self, path: str):
        self.path = path
        self.lines: list[str] = []

    def node_at(self, keys: tuple) -> Any:
        return None

    def where(self, keys: tuple, at_key: bool = False) -> str:
        return self.path

    def error(self, keys: tuple, detail: str, fix: str, at_key: bool = False) -> TcplanError:
        field_ = ".".join(str(k) for k in keys)
        return fail("bad-problem", where=self.path,
                    detail=f"{field_}: {detail}" if field_ else detail, fix=fix)


class SubDoc:
    """A part of a document read as a problem of its own (a graph's op): its keys are
    found at other places of the document, so its errors point into the file as written.
    ``place(keys)`` gives the document's keys of the part's ``keys``."""

    def __init__(self, doc: "_Doc | SubDoc", place: Any):
        self.doc, self.place = doc, place
        self.path: str = doc.path
        self.lines: list[str] = doc.lines

    def node_at(self, keys: tuple) -> Any:
        return self.doc.node_at(self.place(keys))

    def where(self, keys: tuple, at_key: bool = False) -> str:
        return self.doc.where(self.place(keys), at_key)

    def error(self, keys: tuple, detail: str, fix: str, at_key: bool = False) -> TcplanError:
        return self.doc.error(self.place(keys), detail, fix, at_key)


def problem_from(doc: Any, data: Any, path: str) -> Problem:
    """A problem from its parsed YAML ``data``; ``doc`` locates its mistakes."""
    if not isinstance(data, dict):
        raise doc.error((), "a problem is a YAML mapping (key: value lines)",
                        "start from docs/problem-format.md")
    from .registry import kinds, refuse_unmodelled
    kind = data.get("kind")
    if isinstance(kind, str):
        refuse_unmodelled(doc, ("kind",), kind)
    known = kinds()
    if not isinstance(kind, str) or kind not in known:
        what = (f"{kind!r} is not a problem kind" + _did_you_mean(kind, known)
                if "kind" in data else "missing")
        raise doc.error(("kind",), what, "use one of " + ", ".join(known))
    the_kind = known[kind]
    extra, required = the_kind.keys[kind]
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
    spec = the_kind.load(ctx, data, kind, tensors)
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
    return Problem(path, name, kind, chips, dtype, axes, tensors, spec, expect)


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
        from tcplan.model.redistribute import Step
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

    def error_at(self, keys: tuple, e: TcplanError) -> TcplanError:
        """A mapping error of the loader's own making, located at ``keys``."""
        v = e.violations[0]
        return TcplanError(Violation(v.rule, v.terms, {
            **v.detail, "what": f"{self.doc.where(keys)}: {'.'.join(map(str, keys))}"}))

    def mapping(self, keys: tuple, value: Any, dim: str) -> Mapping:
        """The mapping at ``keys``: the user's text parsed (errors located there), or a
        mapping the loader built itself (a default, a candidate), taken as it is."""
        if isinstance(value, Mapping):
            return value
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
            what = ("a stream is no tier for this tensor" if t == "stream" else
                    f"{t!r} is not a tier" + _did_you_mean(t, TIER_DIMS))
            raise self.doc.error(keys + ("tier",) if "tier" in spec else keys,
                                 what if "tier" in spec else "missing tier" + near,
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
                dims[d] = default_dim(t, d, self.chips)
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
