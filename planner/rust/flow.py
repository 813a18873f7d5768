"""The Tensor Unit's calls between ``begin`` and ``commit``, each as the graph op it is
(docs/kernels.md 'How a kernel is written'): ``fetch::<Time, Packet>`` a fetch into a
stream, ``collect``, ``switch``, ``fetch_cast``, ``cast``, ``transpose``, ``commit_trim``,
``to_trf`` / ``to_vrf``, the four ``contract_*`` calls one ``contract`` op, a
``vector_init() ... vector_final()`` one ``chain`` op (a lone inter-slice reduce its own
op), ``commit`` / ``commit_view`` a commit."""

from __future__ import annotations

from typing import Any, Callable

from .build import Graph
from .formula import reference
from .types import Scope, TensorType
from .values import Const, Enum, Flow, Slot, Struct, Unsupported
from .syntax import Node, text_of

Call = tuple[Node, list[Node], list[Any]]  # the call node, its type arguments, its values


class FlowReader:
    """Reads one method call on a :class:`Flow` (``call``), writing ops into the graph."""

    def __init__(self, graph: Graph, scope: Scope, tensor: Callable[[Any, Node], str],
                 write: Callable[[Any, Node], str]):
        self.g, self.scope, self.read_tensor, self.write_tensor = graph, scope, tensor, write

    # -- the stream so far ------------------------------------------------------------------
    def _type(self, flow: Flow) -> TensorType:
        assert flow.stream is not None
        return self.g.tensors[flow.stream].type

    def _next(self, flow: Flow, suffix: str, kind: str, ttype: TensorType, **f: Any) -> Flow:
        name = self.g.add(f"{flow.base}_{suffix}", ttype)
        self.g.op(f"{suffix}_{flow.base}", kind, source=flow.stream, destination=name, **f)
        flow.stream = name
        return flow

    def _maps(self, targs: list[Node], n: int, node: Node, what: str) -> list[str]:
        if len(targs) < n:
            raise Unsupported(node, f"{what} without its {n} type arguments")
        return [self.scope.mapping(t) for t in targs[:n]]

    def call(self, flow: Flow, method: str, c: Call) -> Any:
        if (flow.stream is None) != (method == "fetch"):
            raise Unsupported(c[0], f".{method}() " + ("before a fetch" if flow.stream is None
                                                        else "after the pipeline's fetch"))
        if flow.steps is None and method == "vector_final":
            raise Unsupported(c[0], "vector_final() without vector_init()")
        if flow.steps is not None and method != "vector_final":
            return self._vector(flow, method, c)
        handler = getattr(self, "m_" + method, None)
        if handler is None:
            raise Unsupported(c[0], f".{method}() is not an engine call tcplan models")
        return handler(flow, c)

    # -- Fetch to Commit --------------------------------------------------------------------
    def m_fetch(self, flow: Flow, c: Call) -> Flow:
        time, packet = self._maps(c[1], 2, c[0], "fetch")
        src = self.g.tensors[flow.source].type
        if src.tier != "dm":
            raise Unsupported(c[0], f"a Fetch reads a DM tensor, not {src.tier.upper()}")
        st = TensorType("stream", src.dtype, (("cluster", src.dim("cluster")),
                                              ("slice", src.dim("slice")),
                                              ("time", time), ("packet", packet)))
        flow.stream = self.g.add(f"{flow.base}_fetch", st)
        self.g.op(f"fetch_{flow.base}", "fetch", source=flow.source, stream=flow.stream,
                  context=flow.context)
        return flow

    def _dtype(self, c: Call, what: str) -> str:
        if not c[1]:
            raise Unsupported(c[0], f"{what} without its element type")
        return self.scope.dtype(c[1][0])

    def m_fetch_cast(self, flow: Flow, c: Call) -> Flow:
        to = self._dtype(c, "fetch_cast")
        t = self._type(flow)
        return self._next(flow, "widen", "fetch_cast", TensorType("stream", to, t.dims), to=to)

    def m_collect(self, flow: Flow, c: Call) -> Flow:
        time, packet = self._maps(c[1], 2, c[0], "collect")
        return self._next(flow, "collect", "collect",
                          self._type(flow).with_dims(time=time, packet=packet))

    def m_switch(self, flow: Flow, c: Call) -> Flow:
        slice_, time = self._maps(c[1], 2, c[0], "switch")
        cfg = c[2][0] if c[2] else None
        if not isinstance(cfg, Struct) or cfg.variant not in SWITCH_CONFIGS:
            raise Unsupported(c[0], "a switch whose config is not Broadcast1 or CustomBroadcast")
        return self._next(flow, "switch", "switch",
                          self._type(flow).with_dims(slice=slice_, time=time),
                          config={SWITCH_CONFIGS[cfg.variant]: dict(cfg.fields)})

    def m_cast(self, flow: Flow, c: Call) -> Flow:
        to = self._dtype(c, "cast")
        (packet,) = self._maps(c[1][1:], 1, c[0], "cast")
        t = self._type(flow)
        return self._next(flow, "cast", "cast",
                          TensorType("stream", to, t.dims).with_dims(packet=packet), to=to)

    def m_transpose(self, flow: Flow, c: Call) -> Flow:
        time, packet = self._maps(c[1], 2, c[0], "transpose")
        return self._next(flow, "transpose", "transpose",
                          self._type(flow).with_dims(time=time, packet=packet))

    def m_commit_trim(self, flow: Flow, c: Call) -> Flow:
        (packet,) = self._maps(c[1], 1, c[0], "commit_trim")
        return self._next(flow, "trim", "commit_trim", self._type(flow).with_dims(packet=packet))

    def commit(self, flow: Flow, dest: str) -> str:
        self.g.op(f"commit_{dest}", "commit", stream=flow.stream, destination=dest,
                  context=flow.context)
        return dest

    def register(self, flow: Flow, tier: str, expected: TensorType | None, name: str,
                 node: Node) -> Slot:
        """``to_trf`` / ``to_vrf`` into a register file tensor of the expected type."""
        if expected is None or expected.tier != tier:
            raise Unsupported(node, f"to_{tier}() whose {tier.upper()} tensor type is not "
                              "written (annotate the let)")
        t = self.g.add(name, expected)
        self.g.op(f"store_{name}", f"to_{tier}", source=flow.stream, destination=t)
        return Slot(expected, name, t)

    # -- the contraction ---------------------------------------------------------------------
    def m_contract_outer(self, flow: Flow, c: Call) -> Flow:
        time, packet = self._maps(c[1], 2, c[0], "contract_outer")
        if len(c[2]) != 1:
            raise Unsupported(c[0], "contract_outer() takes the TRF tensor")
        flow.stages = {"trf": self.read_tensor(c[2][0], c[0]),
                       "outer": {"time": time, "packet": packet}}
        return flow

    def m_contract_packet(self, flow: Flow, c: Call) -> Flow:
        self._stage(flow, c, "packet")
        return flow

    def m_contract_time(self, flow: Flow, c: Call) -> Flow:
        self._stage(flow, c, "time")
        return flow

    def _stage(self, flow: Flow, c: Call, key: str) -> None:
        if flow.stages is None:
            raise Unsupported(c[0], f"contract_{key} before contract_outer")
        flow.stages[key] = self._maps(c[1], 1, c[0], f"contract_{key}")[0]

    def m_contract_lane(self, flow: Flow, c: Call) -> Flow:
        time, packet = self._maps(c[1], 2, c[0], "contract_lane")
        st = flow.stages
        if st is None or not {"packet", "time"} <= set(st):
            raise Unsupported(c[0], "contract_lane without contract_outer, _packet and _time")
        mode = c[2][0].name.lower() if c[2] and isinstance(c[2][0], Enum) else "interleaved"
        t = self._type(flow).with_dims(time=time, packet=packet)
        name = self.g.add(f"{flow.base}_contract", TensorType("stream", "f32", t.dims))
        self.g.op(f"contract_{flow.base}", "contract", source=flow.stream, trf=st["trf"],
                  destination=name, stages={"outer": st["outer"], "packet": st["packet"],
                                            "time": st["time"], "lane": mode})
        flow.stream, flow.stages = name, None
        return flow

    # -- the Vector Engine -------------------------------------------------------------------
    def m_vector_init(self, flow: Flow, c: Call) -> Flow:
        flow.steps, flow.chain_source, flow.vrf = [], flow.stream, {}
        flow.chain_type = self._type(flow)
        return flow

    def m_vector_final(self, flow: Flow, c: Call) -> Flow:
        steps, flow.steps = flow.steps or [], None
        t = flow.chain_type or self._type(flow)
        inter = [s for s in steps if isinstance(s, tuple)]
        if inter and len(inter) == len(steps) - sum(s == {"tag": "zero"} for s in steps) \
                and len(inter) == 1:  # an inter-slice reduce alone (after its tag)
            _, op, slice_, time = inter[0]
            return self._next(flow, "reduced", "inter_slice_reduce",
                              t.with_dims(slice=slice_, time=time), op=op)
        if inter:
            raise Unsupported(c[0], "an inter-slice reduce among other vector steps")
        name = self.g.add(f"{flow.base}_chain", t)
        fields: dict[str, Any] = {"source": flow.chain_source, "destination": name}
        if flow.vrf:
            fields["vrf"] = dict(flow.vrf)
        fields["chain"] = [*steps, "final"]
        ref = reference(fields["chain"])
        if ref is None:
            raise Unsupported(c[0], "a chain with a step whose formula tcplan cannot state")
        fields["reference"] = ref
        self.g.op(f"chain_{flow.base}", "chain", **fields)
        flow.stream = name
        return flow

    def _vector(self, flow: Flow, method: str, c: Call) -> Flow:
        step = VECTOR_STEPS.get(method)
        if step is None:
            raise Unsupported(c[0], f".{method}() is not a Vector Engine step tcplan models")
        assert flow.steps is not None
        flow.steps.append(step(self, flow, c))
        return flow

    def operand(self, flow: Flow, value: Any, node: Node) -> Any:
        """A vector step's operand: a number, the stash, or a VRF tensor (named)."""
        if isinstance(value, Const):
            return value.value
        if isinstance(value, Enum) and value.name == "Stash":
            return "stash"
        if isinstance(value, Slot) and value.type.tier == "vrf":
            tensor = self.read_tensor(value, node)
            key = _vrf_key(flow.vrf, value.base, tensor)
            flow.vrf[key] = tensor
            return {"vrf": key}
        raise Unsupported(node, "a vector operand that is not a number, the stash or a VRF "
                          "tensor")


#: names a chain's formula gives its own inputs: no VRF operand may take them
FORMULA_NAMES = {"x", "group0", "group1"}


def _vrf_key(taken: dict[str, str], base: str, tensor: str) -> str:
    """A VRF operand's name in the chain: its variable's, less ``_vrf``, unless another
    operand or the formula's input has it."""
    for key in (base[:-4] if base.endswith("_vrf") else base, tensor):
        if taken.get(key, tensor) == tensor and key not in FORMULA_NAMES:
            return key
    k = 2
    while f"{tensor}_{k}" in taken:
        k += 1
    return f"{tensor}_{k}"


SWITCH_CONFIGS = {"Broadcast1": "broadcast1", "CustomBroadcast": "custom_broadcast"}


def _reshape(key: str) -> Callable[[FlowReader, Flow, Call], Any]:
    def step(r: FlowReader, flow: Flow, c: Call) -> Any:
        time, packet = r._maps(c[1], 2, c[0], key)
        _retime(r, flow, time, packet)
        return {key: {"time": time, "packet": packet}}
    return step


def _pad(key: str) -> Callable[[FlowReader, Flow, Call], Any]:
    def step(r: FlowReader, flow: Flow, c: Call) -> Any:
        (packet,) = r._maps(c[1], 1, c[0], key)
        _retime(r, flow, None, packet)
        return {key: packet}
    return step


def _retime(r: FlowReader, flow: Flow, time: str | None, packet: str) -> None:
    """A step that reshapes the stream: the chain's output takes its Time and Packet."""
    t = flow.chain_type
    assert t is not None
    flow.chain_type = t.with_dims(time=time or t.dim("time"), packet=packet)


def _reduce(r: FlowReader, flow: Flow, c: Call) -> Any:
    if len(c[1]) < 3:
        raise Unsupported(c[0], "vector_intra_slice_reduce without its 3 type arguments")
    name = text_of(c[1][0])
    r.scope.axis(c[1][0], name)
    time, packet = r._maps(c[1][1:], 2, c[0], "vector_intra_slice_reduce")
    _retime(r, flow, time, packet)
    return {"reduce": {"op": _enum(c, 0), "axis": name, "time": time, "packet": packet}}


def _inter(r: FlowReader, flow: Flow, c: Call) -> Any:
    slice_, time = r._maps(c[1], 2, c[0], "vector_inter_slice_reduce")
    return ("inter_slice_reduce", _enum(c, 0), slice_, time)


def _enum(c: Call, k: int) -> str:
    if len(c[2]) <= k or not isinstance(c[2][k], Enum):
        raise Unsupported(c[0], "an operation that is not an enum value")
    return c[2][k].name


def _binary(key: str, with_mode: bool = False) -> Callable[[FlowReader, Flow, Call], Any]:
    def step(r: FlowReader, flow: Flow, c: Call) -> Any:
        f: dict[str, Any] = {"op": _enum(c, 0)}
        if with_mode:
            f["mode"] = _enum(c, 1)
        f["operand"] = r.operand(flow, c[2][-1] if len(c[2]) > 1 else None, c[0])
        return {key: f}
    return step


def _fp_div(r: FlowReader, flow: Flow, c: Call) -> Any:
    return {"fp_div": {"op": "DivF", "operand": r.operand(flow, c[2][0] if c[2] else None,
                                                            c[0])}}


def _tag(r: FlowReader, flow: Flow, c: Call) -> Any:
    if _enum(c, 0) != "Zero":
        raise Unsupported(c[0], "an intra-slice tag other than TagMode::Zero")
    return {"tag": "zero"}


VECTOR_STEPS: dict[str, Callable[[FlowReader, Flow, Call], Any]] = {
    "vector_intra_slice_tag": _tag,
    "vector_narrow_split": _reshape("narrow_split"),
    "vector_widen_concat": _reshape("widen_concat"),
    "vector_narrow_trim": _pad("narrow_trim"),
    "vector_widen_pad": _pad("widen_pad"),
    "vector_intra_slice_reduce": _reduce,
    "vector_inter_slice_reduce": _inter,
    "vector_fp_unary": lambda r, f, c: {"fp_unary": _enum(c, 0)},
    "vector_fp_binary": _binary("fp_binary"),
    "vector_fp_binary_with_mode": _binary("fp_binary", with_mode=True),
    "vector_clip": _binary("clip"),
    "vector_fp_div": _fp_div,
    "vector_stash": lambda r, f, c: "stash",
}

