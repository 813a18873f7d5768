"""Graph problems (``kind: graph``; docs/graphs.md): named tensors and the ops over them.

A graph names its tensors once (tier, dtype, layout; ``given: true`` for the ones holding
data at the start) and lists ops that read and write them by name.  Each op is one of the
problems tcplan plans or verifies (a DMA, a PCIe move, an expression or a vector chain),
written as in its own file with its tensors named instead of spelled out.  A tensor one op
writes and others read keeps one layout; a free tensor (``element`` with candidate orders)
is one choice shared by every op that touches it.

This module reads the file into a :class:`Graph`: the tensors with their candidate
layouts, the ops, and the dependency DAG (networkx), checking what a graph can get wrong
(an unknown tensor, a cycle, a tensor read before anything writes it, a tensor written
twice, an axis mismatch), each error located in the file.  :meth:`Graph.op_problem` turns an
op and a choice of layouts into the ordinary problem the op's kind plans.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from collections.abc import Mapping as _Mapping
from typing import Any

import networkx as nx

from tcplan.model import limits
from tcplan.model.hardware import DTYPE_BYTES
from tcplan.model.mapping import Mapping, join
from tcplan.model.rules import TcplanError
from tcplan.model.tiers import Tensor

from .spec import SubDoc, _Ctx, _did_you_mean, problem_from
from .graph_orders import checked, orders_of, spanning



def op_roles() -> dict[str, dict[str, tuple[bool, bool]]]:
    """The kinds a graph's op may be, with the keys it names tensors with: role -> (reads
    it, its spec goes into the op's problem), as each kind declares (``Kind.graph_roles``)."""
    from .registry import kinds
    return {n: k.graph_roles[n] for n, k in kinds().items() if n in k.graph_roles}

#: a tensor's keys in a graph beside those of a tensor in any problem
GRAPH_TENSOR_KEYS = {"given", "axes", "keep"}
#: tiers whose tensors may write ``address: free`` (planner/graph_memory.py)
FREE_ADDRESS_TIERS = ("dm", "hbm")
#: an op's keys in a graph beside its kind's: its launch (a kernel function call)
GRAPH_OP_KEYS = ("name", "launch")
OBJECTIVES = ("sum", "critical_path", "makespan")


@dataclass
class GraphTensor:
    name: str
    spec: dict[str, Any]  # as written, without the graph's own keys; element as written
    axes: tuple[str, ...]  # the axes it carries, in the graph's order
    candidates: list[str] | None  # a free Element's candidates, as named; None: given
    given: bool  # holds data when the graph starts (an input)
    #: each candidate's Element: an order the user wrote (text, read with the tensor) or
    #: an order of the digits the user listed (built from them)
    elements: _Mapping[str, Any] = field(default_factory=dict)  # (or graph_orders.Orders)
    keep: bool = False  # lives to the graph's end (a result read after it)
    free_address: bool = False  # ``address: free``: planner/graph_memory.py places it

    def with_element(self, element: str | None) -> dict[str, Any]:
        """Its spec with one candidate Element (its own when it is not free)."""
        return self.spec if element is None else {**self.spec,
                                                  "element": self.elements[element]}


@dataclass
class GraphOp:
    index: int
    name: str
    kind: str
    data: dict[str, Any]  # its keys as written
    roles: dict[str, str]  # role -> tensor name
    #: role -> (it reads the tensor, its spec goes into the op's problem): the kind's
    #: ``graph_roles`` and the roles the op names of its own (``Kind.graph_extra_roles``)
    flags: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    launch: str = ""  # the launch (a kernel function call) it runs in; "": the graph's one
    at: int = -1  # its index in the file's ops (a sub-graph's op keeps it: its errors)

    def __post_init__(self) -> None:
        if self.at < 0:
            self.at = self.index

    @property
    def vrf(self) -> list[str]:
        """A DM chain op's VRF operands (its own, not the graph's tensors: a stream
        chain names graph tensors, which are its roles)."""
        vrf = self.data.get("vrf")
        return [str(n) for n in vrf if "vrf:" + str(n) not in self.roles] \
            if isinstance(vrf, dict) else []

    @property
    def read_roles(self) -> list[str]:
        return [r for r in self.roles if self.flags[r][0]]

    @property
    def reads(self) -> list[str]:
        return [self.roles[r] for r in self.read_roles]

    @property
    def writes(self) -> list[str]:
        return [t for r, t in self.roles.items() if r not in self.read_roles]


@dataclass
class Graph:
    doc: Any
    base: dict[str, Any]  # the graph's common keys: dtype, chips, axes
    tensors: dict[str, GraphTensor]
    ops: list[GraphOp]
    objective: str
    dag: Any = None  # networkx.DiGraph over op indexes; edges carry the tensor
    order: list[int] = field(default_factory=list)  # a topological order of the ops
    #: each memory tensor's tier and bytes ``[lo, hi)`` in a unit (``_disjoint``)
    spans: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    #: the launches in the order they run (each op's ``launch``; one, "", when none named)
    launches: list[str] = field(default_factory=list)
    _problems: dict = field(default_factory=dict, repr=False)

    def free(self) -> list[str]:
        """The tensors whose layout is a choice, in the file's order."""
        return [n for n, t in self.tensors.items() if t.candidates is not None]

    def op_free(self, op: GraphOp) -> list[str]:
        """The free tensors an op touches (each once, in its roles' order)."""
        return list(dict.fromkeys(t for t in op.roles.values()
                                  if self.tensors[t].candidates is not None))

    def choices(self, op: GraphOp) -> list[dict[str, str]]:
        """Every assignment of candidate layouts to the op's free tensors."""
        names = self.op_free(op)
        # (op_free keeps the tensors with candidates: the ``or []`` never applies)
        return [dict(zip(names, c)) for c in itertools.product(
            *(self.tensors[n].candidates or [] for n in names))]

    def axes_of(self, names) -> dict[str, int]:
        """The graph's axes the tensors carry, in the graph's order."""
        used = {a for n in names for a in self.tensors[n].axes}
        return {a: s for a, s in self.base["axes"].items() if a in used}

    def tensor(self, name: str, layout: dict[str, str]) -> Tensor:
        """A tensor in a chosen layout (``layout``: free tensor -> its Element)."""
        t = self.tensors[name]
        axes = self.axes_of([name])
        ctx = _Ctx(self.doc, axes, self.base["chips"], self.base["dtype"])
        spec = t.with_element(layout.get(name))
        return _stream_dtype(ctx, ("tensors", name), spec, ctx.tensor(
            ("tensors", name), _without_dtype(spec), name, allow_stream=True))

    def lifetimes(self) -> dict[str, tuple[int, int]]:
        """Each tensor's steps (:func:`lifetimes`): what the executor keeps live."""
        return lifetimes(self)

    def op_problem(self, op: GraphOp, layout: dict[str, str]):
        """The op as the problem of its own kind, its tensors in the chosen layout."""
        key = (op.index, tuple(sorted((n, layout[n]) for n in self.op_free(op))))
        if key not in self._problems:
            self._problems[key] = _op_problem(self, op, layout)
        return self._problems[key]


def load_graph(ctx: _Ctx, data: dict) -> Graph:
    """A graph from its file's data (the common keys already checked by the loader)."""
    doc = ctx.doc
    objective = data.get("objective", "sum")
    if objective not in OBJECTIVES:
        raise doc.error(("objective",), f"{objective!r} is not an objective",
                        "objective: sum (every op's cycles), critical_path or makespan (the "
                        "schedule on the main, sub and DMA contexts)")
    base = {"dtype": ctx.dtype, "chips": ctx.chips, "axes": ctx.axes}
    errors: list = []
    tensors = _tensors(ctx, data.get("tensors"), errors)
    ops = _ops(doc, data.get("ops"), [str(n) for n in data["tensors"]], errors)
    if errors:
        raise TcplanError(errors)
    g = Graph(doc, base, tensors, ops, objective)
    from .registry import kinds
    for op in ops:
        if kinds()[op.kind].graph_same_axes:
            _same_axes(g, op)
    _dag(g)
    _place_free(g)
    _disjoint(g)
    return g


def _place_free(g: Graph) -> None:
    """Addresses for the tensors that say ``address: free`` (planner/graph_memory.py);
    :func:`_disjoint` then checks the placement as any given one."""
    free = [n for n, t in g.tensors.items() if t.free_address]
    if not free:
        return
    from .graph_memory import assign
    for n, at in assign(g, free, _spans(g), lifetimes(g)).items():
        g.tensors[n].spec["address"] = at


#: tiers whose tensors may share bytes where their lifetimes do not meet (docs/decisions.md
#: item 104): a kernel loads one weight into the TRF after the last read of another
REUSED_TIERS = ("trf", "vrf")
#: tiers whose tensors end with their launch unless they say ``keep: true`` (a kernel's DM
#: is its own: a result no op reads lives to the graph's end only in HBM or the host)
LAUNCH_TIERS = ("dm",)


def launch_steps(g: Graph) -> list[tuple[int, int]]:
    """Per launch, its first and last step in the graph's order (launches are contiguous:
    the order runs them one after another)."""
    out: dict[str, tuple[int, int]] = {}
    for k, i in enumerate(g.order):
        a, _ = out.get(g.ops[i].launch, (k, k))
        out[g.ops[i].launch] = (a, k)
    return [out[n] for n in g.launches if n in out]


def lifetimes(g: Graph) -> dict[str, tuple[int, int]]:
    """Per tensor, the steps of the graph's order over which it holds its bytes (both
    included).  A register file's tensor (TRF, VRF): from the first op touching it (a given
    one: from the start) to the last.  Any other: from the start of the launch of the
    first op touching it to the end of the launch of the last (DM and HBM are reused only
    between launches), and to the graph's end when it says ``keep: true`` or, outside DM,
    nothing reads it after it is written (a result)."""
    rank = {i: k for k, i in enumerate(g.order)}
    steps = launch_steps(g)
    of_step = [0] * len(g.order)
    for k, (a, b) in enumerate(steps):
        of_step[a:b + 1] = [k] * (b - a + 1)
    touch: dict[str, tuple[int, int]] = {}
    read: set[str] = set()
    for op in g.ops:
        k = rank[op.index]
        read.update(op.reads)
        for name in op.roles.values():
            a, b = touch.get(name, (k, k))
            touch[name] = (min(a, k), max(b, k))
    end = len(g.order) - 1
    life: dict[str, tuple[int, int]] = {}
    for n, t in g.tensors.items():
        a, b = touch.get(n, (0, end))
        if t.spec.get("tier") in REUSED_TIERS:
            life[n] = (0 if t.given else a, b)
            continue
        a, b = steps[of_step[a]][0], steps[of_step[b]][1]
        result = not t.given and n not in read and t.spec.get("tier") not in LAUNCH_TIERS
        life[n] = (a, end if t.keep or result else b)
    return life


def _disjoint(g: Graph) -> None:
    """Tensors of one tier must not share bytes while both live (:func:`lifetimes`): each
    reaches, in every unit (chip, cluster, slice) it spans, the bytes from its address over
    its Element (its largest candidate's, when free: a padded order reaches further).
    Every layout spans units from index 0 up, so two tensors of a tier meet exactly when
    those byte ranges do.  Swept in the order lifetimes start, against the tensors still
    live.  Records each tensor's span (``g.spans``)."""
    life = lifetimes(g)
    g.spans = _spans(g)
    live: list[str] = []
    for n in sorted(g.spans, key=lambda n: life[n][0]):
        tier, lo, hi = g.spans[n]
        live = [o for o in live if life[o][1] >= life[n][0]]
        for other in live:
            o_tier, a, b = g.spans[other]
            if o_tier != tier or not (lo < b and a < hi):
                continue
            both = next((g.ops[i].name for i in g.order if n in g.ops[i].roles.values()),
                        "the start")
            raise g.doc.error(("tensors", n, "address") if "address" in g.tensors[n].spec
                              else ("tensors", n), f"{n} ({tier} bytes {lo:,} to {hi:,}) "
                              f"overlaps {other} (bytes {a:,} to {b:,}) in the same "
                              f"units while both are live (at op {both})",
                              f"give {n} address: {b} or above, or end {other}'s life in "
                              "an earlier launch")
        live.append(n)


def _spans(g: Graph) -> dict[str, tuple[str, int, int]]:
    """Each memory tensor's tier and the bytes it reaches in a unit, ``[lo, hi)`` (a free
    one's furthest candidate: a padded order reaches further); streams hold none."""
    out = {}
    for n, t in g.tensors.items():
        objs = [g.tensor(n, {n: c}) for c in spanning(t)] if t.candidates else \
            [g.tensor(n, {})]
        obj = objs[0]
        if obj.tier == "stream":
            continue  # a Tensor Unit stream holds no bytes of a memory
        lo = obj.address
        out[n] = (obj.tier, lo, lo + max(o.dims["element"].size for o in objs) *
                  obj.elem_bytes)
    return out


def shared_bytes(g: Graph) -> list[tuple[str, str]]:
    """The pairs of tensors of one launch that share bytes (a register file reused), the
    one used first first: its last use comes before the other's first in the graph's
    order.  (Tensors of different launches are kept apart by the launches' order.)"""
    life = lifetimes(g)
    steps = launch_steps(g)
    groups: dict[int, list[str]] = {}
    for n in g.spans:
        groups.setdefault(next(k for k, (a, b) in enumerate(steps)
                               if a <= life[n][0] <= b), []).append(n)
    out = []
    for names in groups.values():
        for k, n in enumerate(names):
            for other in names[k + 1:]:
                (tier, lo, hi), (o_tier, a, b) = g.spans[n], g.spans[other]
                if tier == o_tier and lo < b and a < hi:
                    out.append((n, other) if life[n][1] < life[other][0] else (other, n))
    return out


def _tensors(ctx: _Ctx, spec: Any, errors: list) -> dict[str, GraphTensor]:
    """Every tensor of the graph; a tensor's error is collected in ``errors`` and the rest
    are still read, so that one run names every mistake of the file."""
    doc = ctx.doc
    if not isinstance(spec, dict) or not spec:
        raise doc.error(("tensors",), "expected a mapping of names to tensors",
                        "tensors: {x: {tier: hbm, element: 'm![A, B]', given: true}}")
    out = {}
    for name, t in spec.items():
        try:
            out[str(name)] = _tensor(ctx, name, t)
        except TcplanError as e:
            errors += e.violations
    return out


def _tensor(ctx: _Ctx, name: Any, t: Any) -> GraphTensor:
    doc, keys = ctx.doc, ("tensors", name)
    if not isinstance(t, dict):
        raise doc.error(keys, "expected a tensor: a tier and one mapping per dimension",
                        "x: {tier: hbm, element: 'm![A, B]'}")
    given, keep = t.get("given", False), t.get("keep", False)
    if not isinstance(given, bool):
        raise doc.error(keys + ("given",), f"{given!r} is not true or false",
                        "given: true (the tensor holds data when the graph starts)")
    if not isinstance(keep, bool):
        raise doc.error(keys + ("keep",), f"{keep!r} is not true or false",
                        "keep: true (the tensor lives to the graph's end: a result)")
    base = {k: v for k, v in t.items() if k not in GRAPH_TENSOR_KEYS}
    free_address = base.get("address") == "free"
    if free_address:
        if base.get("tier") not in FREE_ADDRESS_TIERS:
            raise doc.error(keys + ("address",), f"a {base.get('tier')} tensor's address "
                            "is given", "address: free places DM and HBM tensors; give an "
                            "address")
        base["address"] = 0  # (placed when the graph is read: planner/graph_memory.py)
    if t.get("tier") == "stream" and t.get("time") == "free":
        raise doc.error(keys + ("time",), "a graph's stream is given: the computation "
                        "that reads or writes it fixes its Time and Packet",
                        "write the stream's Time and Packet mappings")
    elements = _candidates(ctx, keys, t)
    cands = list(elements) if elements is not None else None
    first = _stream_dtype(ctx, keys, base, ctx.tensor(
        keys, _without_dtype({**base, "element": elements[cands[0]]} if elements and cands
                             else base), str(name), allow_stream=True))
    if elements and first.tier != "stream":
        _free_overlap(ctx, keys, first)
    axes = tuple(a for a in ctx.axes if a in {x for m in first.dims.values()
                                              for x in m.used_axes})
    for c, el in checked(elements or {}):  # (of a lazy Orders, the first: graph_orders)
        got = ctx.tensor(keys, {**base, "element": el}, str(name))
        if {x for m in got.dims.values() for x in m.used_axes} != set(axes):
            raise doc.error(keys + ("element",), f"the candidate {c} carries other axes "
                            f"than {next(iter(elements or {}))}",
                            "give candidates over the same digits")
    return GraphTensor(str(name), base, axes, cands, given, elements or {}, keep,
                       free_address)


def _free_overlap(ctx: _Ctx, keys: tuple, first: Tensor) -> None:
    """A free Element whose digits another dimension of the tensor holds too (every order
    repeats them): the error a given layout gets, ``incompatible-decomposition``, at the
    Element, with the digits the other dimensions leave to order."""
    from tcplan.model.broadcast import digit_gaps
    from tcplan.model.rules import TcplanError, fail
    from tcplan.model.sequencer import layout_of_dims
    from tcplan.model.tiers import DIM_TITLES
    try:
        layout_of_dims([(DIM_TITLES[d], m, 1) for d, m in first.dims.items()])
        return
    except TcplanError as err:
        if err.code != "incompatible-decomposition":
            raise
        detail = err.violations[0].detail["detail"]
    element = first.dims["element"]
    held: dict[str, list[tuple[int, int]]] = {}
    for d, m in first.dims.items():
        for f in (m.factors if d != "element" else ()):
            if f.axis is not None and f.count > 1:
                held.setdefault(f.axis, []).append((f.lo, f.lo * f.radix))
    left = [t for a in element.used_axes for t, _ in digit_gaps(
        1, element.axes[a], sorted(held.get(a, [])), a, element.axes[a])]
    raise fail("incompatible-decomposition", (keys[-1],),
               detail=f"{ctx.doc.where(keys + ('element',))}: {detail}; every order of the "
               "free Element repeats the digits the tensor's other dimensions hold",
               fix="element: {digits: [" + ", ".join(f"'{t}'" for t in left) + "]} (the "
               "digits no other dimension holds)")


def _without_dtype(spec: dict) -> dict:
    """A stream's spec as a problem reads it: a stream takes no dtype there."""
    return {k: v for k, v in spec.items() if k != "dtype"} if spec.get("tier") == "stream" \
        else spec


def _stream_dtype(ctx: _Ctx, keys: tuple, spec: dict, t: Tensor) -> Tensor:
    """In a graph a stream has a dtype, the values it carries (the graph's unless it says
    ``dtype:``): a Fetch and a Commit must carry their DM tensor's."""
    if t.tier != "stream" or "dtype" not in spec:
        return t
    d = spec["dtype"]
    if d not in DTYPE_BYTES:
        raise ctx.doc.error(keys + ("dtype",), f"{d!r} is not a dtype",
                            "dtype: one of " + ", ".join(DTYPE_BYTES))
    return dataclasses.replace(t, dtype=d)


def _candidates(ctx: _Ctx, keys: tuple, t: dict) -> _Mapping[str, Any] | None:
    """A free Element's candidates, each named as it reads and with its Element: ``free``
    (every order of the tensor's ``axes``), ``{digits: [...]}`` (every order of those
    digits, each read once) or ``{orders: [...]}`` (these, as written)."""
    doc, el = ctx.doc, t.get("element")
    if el == "free":
        axes = t.get("axes")
        if not isinstance(axes, list) or not axes or not all(a in ctx.axes for a in axes):
            raise doc.error(keys + ("axes",) if "axes" in t else keys + ("element",),
                            "a free Element orders the tensor's axes: name them",
                            "axes: [" + ", ".join(ctx.axes) + "]")
        terms = [str(a) for a in axes]
        where = [keys + ("axes", k) for k in range(len(terms))]
    elif isinstance(el, dict):
        if set(el) not in ({"digits"}, {"orders"}):
            raise doc.error(keys + ("element",), "a free Element takes digits (every order "
                            "of them) or orders (these candidates)",
                            "element: {digits: ['A / 4', 'A % 4', 'B']}")
        (kind, items), = el.items()
        if not isinstance(items, list) or not items or not all(
                isinstance(x, str) for x in items):
            raise doc.error(keys + ("element", kind), "expected a list of texts",
                            "digits: ['A', 'B'] or orders: ['m![A, B]', 'm![B, A]']")
        if kind == "orders":
            return {c: c for c in _bounded(ctx, keys, list(dict.fromkeys(items)))}
        terms = items
        where = [keys + ("element", kind, k) for k in range(len(terms))]
    else:
        if "axes" in t:
            raise doc.error(keys + ("axes",), "axes name what a free Element orders; this "
                            "Element is given", "drop axes, or write element: free")
        return None
    if len(set(terms)) != len(terms):
        dup = next(x for x in terms if terms.count(x) > 1)
        raise doc.error(keys + ("axes" if el == "free" else "element",), f"{dup} is listed "
                        "twice", "name each axis or digit once")
    count = 1
    for k in range(2, len(terms) + 1):
        count *= k
    limits.check(count, limits.GRAPH_ORDERS_MAX, "a free Element's candidate orders",
                 "orders", {f"tensor {keys[-1]}": len(terms)}, limits.PLANNER,
                 "give orders: [...] or fewer digits")
    digit = {x: ctx.mapping(at, x, "element") for x, at in zip(terms, where)}
    return orders_of(terms, digit, count)  # (beyond 120 orders: lazily, graph_orders)


def _bounded(ctx: _Ctx, keys: tuple, cands: list[str]) -> list[str]:
    limits.check(len(cands), limits.GRAPH_CANDIDATES_MAX, "a free Element's candidate "
                 "orders", "orders", {f"tensor {keys[-1]}": len(cands)}, limits.PLANNER,
                 "give fewer orders")
    return cands


def _ops(doc, spec: Any, tensors: list[str], errors: list) -> list[GraphOp]:
    """Every op of the graph over the tensors it declares (``tensors``); an op's error is
    collected in ``errors`` and the rest are still read."""
    if not isinstance(spec, list) or not spec:
        raise doc.error(("ops",), "expected a list of ops",
                        "ops: [{name: load, kind: dma, source: x, destination: y}]")
    ops: list[GraphOp] = []
    names: set = set()
    known = _Known(tensors)
    for i, o in enumerate(spec):
        try:
            ops.append(_op(doc, i, o, known, names))
        except TcplanError as e:
            errors += e.violations
    return ops


class _Known(list):
    """The graph's tensor names in the file's order, with a set's membership test."""

    def __init__(self, names: list[str]):
        super().__init__(names)
        self._set = set(names)

    def __contains__(self, name: object) -> bool:
        return name in self._set


def _op(doc, i: int, o: Any, tensors: list[str], names: set) -> GraphOp:
    keys = ("ops", i)
    if not isinstance(o, dict):
        raise doc.error(keys, "expected an op: a mapping with its kind and tensors",
                        "{name: load, kind: dma, source: x, destination: y}")
    kind, roles_of = o.get("kind"), op_roles()
    if isinstance(kind, str):
        from .registry import refuse_unmodelled
        refuse_unmodelled(doc, keys + ("kind",), kind)
    if not isinstance(kind, str) or kind not in roles_of:
        what = (f"{kind!r} is not a graph op" + _did_you_mean(kind, roles_of)
                if "kind" in o else "missing")
        raise doc.error(keys + ("kind",), what, "graph ops are " + ", ".join(roles_of)
                        + " (docs/graphs.md)")
    name = o.get("name", f"op{i + 1}")
    if not isinstance(name, str) or name in names:
        raise doc.error(keys + ("name",), f"{name!r} is not a new op name",
                        "give every op its own name")
    names.add(name)
    launch = o.get("launch", "")
    if not isinstance(launch, str) or ("launch" in o and not launch):
        raise doc.error(keys + ("launch",), f"{launch!r} is not a launch name",
                        "launch: projection (ops of one kernel call share a name)")
    if "hops" in o:
        raise doc.error(keys + ("hops",), "a graph's op moves in one hop",
                        "add the intermediate tensor and a second op", at_key=True)
    for k in ("axes", "chips", "expect", "format"):
        if k in o:
            raise doc.error(keys + (k,), f"{k} is the graph's, not an op's",
                            f"set {k} at the graph's top level", at_key=True)
    from .registry import kinds
    flags = dict(roles_of[kind])
    named = {role: (o.get(role), (role,)) for role in roles_of[kind]}
    for role, (t, at) in kinds()[kind].graph_extra_roles(o).items():
        flags[role], named[role] = (True, True), (t, at)
    roles = {}
    for role, (t, at) in named.items():
        if role not in o and at == (role,):
            raise doc.error(keys, f"a {kind} op names its {role} tensor",
                            f"{role}: <one of {', '.join(tensors)}>")
        if not isinstance(t, str) or t not in tensors:
            raise doc.error(keys + at, f"{t!r} is not a tensor of the graph"
                            + _did_you_mean(t, tensors),
                            "name one of " + ", ".join(tensors))
        roles[role] = t
    return GraphOp(i, name, kind, o, roles, flags, launch)


def _dag(g: Graph) -> None:
    """The dependency DAG: an edge from the op writing a tensor to every op reading it."""
    doc = g.doc
    writer: dict[str, GraphOp] = {}
    for op in g.ops:
        for t in op.writes:
            role = next(r for r, n in op.roles.items()
                        if n == t and r not in op.read_roles)
            if g.tensors[t].given:
                raise doc.error(("ops", op.index, role), f"{t} is given (an input of the "
                                "graph); no op writes it", "write to another tensor, or "
                                "drop given: true")
            if t in writer:
                raise doc.error(("ops", op.index, role), f"{t} is written by op "
                                f"{writer[t].name} already", "give each tensor one writer")
            writer[t] = op
    dag: nx.DiGraph[int] = nx.DiGraph()
    dag.add_nodes_from(op.index for op in g.ops)
    for op in g.ops:
        for t in op.reads:
            role = next(r for r, n in op.roles.items() if n == t)
            if t not in writer and not g.tensors[t].given:
                raise doc.error(("ops", op.index, role), f"{t} is read before it is "
                                "written: no op writes it and it is not given",
                                f"write {t} in an earlier op, or mark it given: true")
            if t in writer:
                dag.add_edge(writer[t].index, op.index, tensor=t)
    for n, gt in g.tensors.items():
        if not gt.given and n not in writer:
            raise doc.error(("tensors", n), f"{n} is neither given nor written by an op: "
                            "nothing would hold its data", "mark it given: true, write it "
                            "in an op, or drop it")
    try:
        cycle = nx.find_cycle(dag)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        names = [g.ops[u].name for u, _ in cycle]
        raise doc.error(("ops", cycle[0][0]), "the ops form a cycle: " + " -> ".join(
            names + names[:1]), "a graph's ops run once each, in order: break the cycle")
    g.dag = dag
    g.launches = list(dict.fromkeys(op.launch for op in g.ops))
    rank = {op.index: g.launches.index(op.launch) for op in g.ops}
    for u, v, t in dag.edges(data="tensor"):
        if rank[u] > rank[v]:
            raise doc.error(("ops", v, "launch"), f"op {g.ops[v].name} (launch "
                            f"{g.ops[v].launch}) reads {t}, written by op {g.ops[u].name} "
                            f"of the later launch {g.ops[u].launch}", "launches run in the "
                            "order of their first op in the file: move the writer's launch "
                            "first")
    g.order = list(nx.lexicographical_topological_sort(dag, key=lambda i: (rank[i], i)))


def _op_problem(g: Graph, op: GraphOp, layout: dict[str, str]):
    """The op as a problem of its kind: its tensors' specs put where it names them."""
    keys = ("ops", op.at)
    data = {k: v for k, v in op.data.items() if k not in (*GRAPH_OP_KEYS,
                                                           *op_roles()[op.kind])}
    axes = g.axes_of(op.roles.values())
    from .registry import kinds
    kind = kinds()[op.kind]
    role = kind.dtype_role  # (an engine op: the dtype of the stream it reads)
    typed = g.tensors[op.roles[role]].spec.get("dtype") if role in op.roles else None
    data.update(name=op.name, axes=axes, dtype=data.get("dtype", typed or g.base["dtype"]),
                chips=g.base["chips"])
    place = {}
    for role, t in op.roles.items():
        if op.flags[role][1]:  # the tensor is part of the op's own problem, in its own dtype
            spec = g.tensors[t].with_element(layout.get(t))
            at = kind.graph_place(data, role, _without_dtype(spec) if spec.get("tier") ==
                                  "stream" else {"dtype": g.base["dtype"], **spec})
            place[at] = ("tensors", t)

    def where(k: tuple) -> tuple:
        for n in (2, 1):
            if k[:n] in place:
                return place[k[:n]] + k[n:]
        return keys + k
    return problem_from(SubDoc(g.doc, where), data, g.doc.path)


def _same_axes(g: Graph, op: GraphOp) -> None:
    """An op moves or computes a tensor over one set of axes: its tensors carry them all;
    a move's written tensor may carry more (a broadcast: ``Kind.graph_broadcast``)."""
    from .registry import kinds
    wider = kinds()[op.kind].graph_broadcast
    first = op.reads[0] if op.reads else next(iter(op.roles.values()))
    base = set(g.tensors[first].axes)
    for role, t in op.roles.items():
        have = set(g.tensors[t].axes)
        if have == base or (wider and role not in op.read_roles and have >= base):
            continue
        raise g.doc.error(("ops", op.index, role), f"{t} carries the axes {sorted(have)}, "
                          f"{first} carries {sorted(base)}",
                          "an op's tensors carry the same axes" + (
                              " (a move's destination may carry more: a broadcast)"
                              if wider else ""))
