"""``tcplan solve GRAPH.yaml --emit rust``: a planned graph as furiosa-opt code to paste.

Each tensor gets its type with the planned mappings (a free Element as the plan chose it),
each move its call with its type parameters: ``to_dm`` / ``to_hbm_view`` for a DMA (its
stream is the DMA engine's plan, ``tdma``'s in furiosa-opt: a comment says what tcplan
planned), ``begin ... commit`` for each Fetch-to-Commit pipeline with every engine call of
it, and a ``contraction`` op as the calls of its planned mapping (the TRF's load on the sub
context, the contraction's four stages on the main).  ``tcplan import`` reads the code back
to the same graph (tests/test_emit.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from tcplan.model.rules import fail
from tcplan.model.tiers import TIER_DIMS, default_dim

from .flow import SWITCH_CONFIGS
from .types import TENSOR_TYPES

RUST_TYPES = {tier: name for name, (tier, _) in TENSOR_TYPES.items()
              if not name.endswith(("View", "ViewMut"))}
ENDS = ("commit", "to_trf", "to_vrf")


@dataclass
class Planned:
    """A graph with its plan's choices in: tensors (name -> tier, dtype and mappings) and
    ops (as a graph file writes them), a contraction op expanded into the ops it runs."""

    name: str
    axes: dict[str, int]
    dtype: str
    tensors: dict[str, dict[str, Any]] = field(default_factory=dict)
    ops: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def planned(doc: dict[str, Any], plan: dict[str, Any]) -> Planned:
    """The graph file ``doc`` with the plan's layouts (``tcplan lower --json``'s)."""
    if doc.get("kind") != "graph":
        raise fail("bad-request", detail=f"--emit rust writes a graph's kernel; "
                   f"{doc.get('name')} is a {doc.get('kind')} problem",
                   fix="use --emit rust on a graph (kind: graph)")
    p = Planned(doc["name"], dict(doc["axes"]), doc.get("dtype", "bf16"))
    chips = int(doc.get("chips", 1))
    for n, t in doc["tensors"].items():
        if t["tier"] not in RUST_TYPES and t["tier"] != "stream":
            raise fail("bad-request", detail=f"--emit rust: {n} is a {t['tier']} tensor, "
                       "which a furiosa-opt kernel does not hold", fix="emit a graph whose "
                       "tensors are in HBM, DM, the TRF or the VRF")
        spec = {k: v for k, v in t.items() if k not in ("axes", "address")}
        spec.setdefault("dtype", p.dtype)
        if n in plan.get("layouts", {}):
            spec["element"] = plan["layouts"][n]
        for d in TIER_DIMS[t["tier"]]:
            spec.setdefault(d, default_dim(t["tier"], d, chips).text())
        p.tensors[n] = spec
    for op in doc["ops"]:
        if op["kind"] not in WRITTEN:
            raise fail("bad-request", detail=f"--emit rust: op {op['name']} is a "
                       f"{op['kind']}, which tcplan does not write as furiosa-opt code",
                       fix="emit a graph of moves, Fetch-to-Commit pipelines and "
                       "contractions (docs/kernels.md 'Emitting a plan')")
    for op, opplan in zip(doc["ops"], plan["ops"]):
        if op["kind"] == "contraction":
            _contraction(p, op, opplan["plan"])
        else:
            p.ops.append(op)
    return p


def _stream(p: Planned, name: str, dims: dict[str, str]) -> str:
    p.tensors[name] = {"tier": "stream", "dtype": dims.get("dtype", p.dtype),
                       **{d: dims[d] for d in ("cluster", "slice", "time", "packet")}}
    return name


def _contraction(p: Planned, op: dict[str, Any], plan: dict[str, Any]) -> None:
    """A planned contraction op as the ops of its plan's graph, on the outer tensors."""
    inner = {o["op"]: o for o in plan["graph"]["ops"]}
    n = op["name"]
    outer = {"trf_dm": op["trf"], "source_dm": op["source"], "result_dm": op["destination"]}
    renamed: dict[str, str] = dict(outer)
    trf_out = inner["to_trf"]["plan"]["output"]
    p.tensors[f"{n}_trf"] = {"tier": "trf", **trf_out}
    renamed["trf"] = f"{n}_trf"
    prev: dict[str, str] = {}
    for o in plan["graph"]["ops"]:
        k, q = o["kind"], o["plan"]
        if k == "dma":
            p.notes.append(f"{n}: its plan's move {o['op']} is not emitted")
            continue
        if k == "fetch":
            src = renamed[_fetch_source(o["op"])]
            prev[o["op"]] = _stream(p, f"{n}_{o['op']}", {**q["stream"], "dtype":
                                    p.tensors[src]["dtype"]})
            p.ops.append({"name": f"{n}_{o['op']}", "kind": "fetch", "source": src,
                          "stream": prev[o["op"]], "context": q["context"]})
            last = prev[o["op"]]
            continue
        if k == "commit":
            p.ops.append({"name": f"{n}_{o['op']}", "kind": "commit", "stream": last,
                          "destination": renamed["result_dm"], "context": q["context"]})
            continue
        if k == "to_trf":
            p.ops.append({"name": f"{n}_to_trf", "kind": "to_trf", "source": last,
                          "destination": renamed["trf"]})
            continue
        out = q["output"] if k != "contract" else {
            **p.tensors[last], **q["output"], "dtype": q["result"]}
        dest = _stream(p, f"{n}_{o['op']}", out)
        fields: dict[str, Any] = {"name": dest, "kind": k, "source": last, "destination": dest}
        if k == "contract":
            fields.update(trf=renamed["trf"], stages={
                "outer": q["outer"], "packet": q["packet"], "time": q["time"],
                "lane": q["lane_mode"]})
        if k in ("cast", "fetch_cast"):
            fields["to"] = out["dtype"]
        p.ops.append(fields)
        last = dest


def _fetch_source(op_name: str) -> str:
    return "trf_dm" if op_name == "fetch_trf" else "source_dm"


# ---- the code ---------------------------------------------------------------------------
def _type(t: dict[str, Any]) -> str:
    return f"{RUST_TYPES[t['tier']]}<{t['dtype']}, " + ", ".join(
        t[d] for d in TIER_DIMS[t["tier"]]) + ">"


def _num(v: float) -> str:
    return f"{float(v)!r}f32"


def emit_rust(p: Planned, header: list[str]) -> str:
    """The graph as one furiosa-opt function (with the ``axes!`` it names)."""
    written = {o.get("destination") for o in p.ops}
    params = [f"    {n}: &{_type(t)}," for n, t in p.tensors.items()
              if t["tier"] != "stream" and t.get("given")]
    params += [f"    {n}: &mut {_type(t)}," for n, t in p.tensors.items()
               if t["tier"] == "hbm" and not t.get("given") and n in written]
    body: list[str] = []
    consumers = _consumers(p)
    for op in p.ops:
        body += _statement(p, op, consumers)
    lines = [*(f"// {h}" for h in header), *(f"// {n}" for n in p.notes),
             "use furiosa_opt_std::prelude::*;", "",
             "axes![" + ", ".join(f"{a} = {s}" for a, s in p.axes.items()) + "];", "",
             f"pub fn {p.name}(", "    ctx: &mut Context,", *params, ") {", *body, "}"]
    return "\n".join(lines) + "\n"


def _consumers(p: Planned) -> dict[str, dict[str, Any]]:
    """Each stream tensor -> the op that reads it."""
    out = {}
    for op in p.ops:
        src = op.get("stream") if op["kind"] == "commit" else op.get("source")
        if isinstance(src, str) and p.tensors[src]["tier"] == "stream":
            out[src] = op
    return out


def _statement(p: Planned, op: dict[str, Any], consumers: dict[str, dict[str, Any]]
               ) -> list[str]:
    k = op["kind"]
    if k == "dma":
        src, dst = op["source"], op["destination"]
        if p.tensors[dst]["tier"] == "hbm":
            return [f"    {src}.view().to_hbm_view(&mut ctx.tdma, {dst}.view_mut());"]
        return [f"    let {dst}: {_type(p.tensors[dst])} = {src}.to_dm(&mut ctx.tdma);"]
    if k == "fetch":
        return _pipeline(p, op, consumers)
    if k == "scatter":
        return [f"    // {op['name']}: a scatter of {op['source']} into {op['destination']} "
                f"at {op['index']} (write it as the kernel does: dma_scatter)"]
    return []  # (inside a pipeline: written with its Fetch)


def _pipeline(p: Planned, fetch: dict[str, Any], consumers: dict[str, dict[str, Any]]
              ) -> list[str]:
    st = p.tensors[fetch["stream"]]
    calls = [f".begin({fetch['source']}.view())", f".fetch::<{st['time']}, {st['packet']}>()"]
    cur, op = fetch["stream"], consumers.get(fetch["stream"])
    while op is not None and op["kind"] not in ENDS:
        calls += _calls(p, op)
        cur = op["destination"]
        op = consumers.get(cur)
    if op is None:
        return [f"    // {fetch['name']}: a pipeline with no commit or register store"]
    dest = op["destination"]
    end = ".commit()" if op["kind"] == "commit" else f".{op['kind']}()"
    return [f"    let {dest}: {_type(p.tensors[dest])} = ctx",
            f"        .{fetch.get('context', 'main')}", *(f"        {c}" for c in calls),
            f"        {end};"]


def _calls(p: Planned, op: dict[str, Any]) -> list[str]:
    """An op inside a pipeline as its furiosa-opt calls (``OP_CALLS``, one per kind)."""
    d: dict[str, Any] = p.tensors.get(op.get("destination", ""), {})
    write = OP_CALLS.get(op["kind"])
    if write is None:
        raise fail("bad-request", detail=f"--emit rust: op {op['name']} ({op['kind']}) has "
                   "no furiosa-opt call tcplan writes", fix="leave --emit rust out for it")
    return write(op, d)


def _switch(op: dict[str, Any], d: dict[str, Any]) -> list[str]:
    (variant, fields), = op["config"].items()
    name = {v: k for k, v in SWITCH_CONFIGS.items()}[variant]
    inner = ", ".join(f"{a}: {b}" for a, b in fields.items())
    return [f".switch::<{d['slice']}, {d['time']}>(SwitchConfig::{name} {{ {inner} }})"]


def _contract(op: dict[str, Any], d: dict[str, Any]) -> list[str]:
    s = op["stages"]
    return [f".contract_outer::<{s['outer']['time']}, {s['outer']['packet']}, _, _, _>"
            f"(&{op['trf']})", f".contract_packet::<{s['packet']}>()",
            f".contract_time::<{s['time']}>()",
            f".contract_lane::<{d['time']}, {d['packet']}>(LaneMode::"
            f"{str(s['lane']).capitalize()})"]


OpCalls = Callable[[dict[str, Any], dict[str, Any]], list[str]]
#: each op kind inside a pipeline -> its calls (``op``, its destination stream ``d``)
OP_CALLS: dict[str, OpCalls] = {
    "collect": lambda op, d: [f".collect::<{d['time']}, {d['packet']}>()"],
    "transpose": lambda op, d: [f".transpose::<{d['time']}, {d['packet']}>()"],
    "commit_trim": lambda op, d: [f".commit_trim::<{d['packet']}>()"],
    "fetch_cast": lambda op, d: [f".fetch_cast::<{op['to']}>()"],
    "cast": lambda op, d: [f".cast::<{op['to']}, {d['packet']}>()"],
    "switch": _switch,
    "contract": _contract,
    "inter_slice_reduce": lambda op, d: [
        ".vector_init()", f".vector_inter_slice_reduce::<{d['slice']}, {d['time']}>"
        f"(InterSliceReduceOpF32::{op['op']})", ".vector_final()"],
    "chain": lambda op, d: [".vector_init()", *(_step(s, op.get("vrf", {}))
                                                for s in op["chain"] if s != "final"),
                            ".vector_final()"],
}
#: the graph ops furiosa-opt code is written for (the rest: a located refusal): those of a
#: pipeline, and the moves, Fetches, stores and contractions that frame them
WRITTEN = set(OP_CALLS) | {*ENDS, "dma", "fetch", "scatter", "contraction"}


def _operand(o: Any, vrf: dict[str, str]) -> str:
    if o == "stash":
        return "Stash"
    if isinstance(o, dict):
        return f"&{vrf[o['vrf']]}"
    return _num(o)


STEP_CALLS = {"tag": lambda a, v: ".vector_intra_slice_tag(TagMode::Zero)",
              "narrow_split": lambda a, v: f".vector_narrow_split::<{a['time']}, "
                                           f"{a['packet']}>()",
              "widen_concat": lambda a, v: f".vector_widen_concat::<{a['time']}, "
                                           f"{a['packet']}>()",
              "narrow_trim": lambda a, v: f".vector_narrow_trim::<{a}>()",
              "widen_pad": lambda a, v: f".vector_widen_pad::<{a}>()",
              "fp_unary": lambda a, v: f".vector_fp_unary(FpUnaryOp::{a})",
              "reduce": lambda a, v: f".vector_intra_slice_reduce::<{a['axis']}, {a['time']}, "
                                     f"{a['packet']}>(IntraSliceReduceOpF32::{a['op']})",
              "clip": lambda a, v: f".vector_clip(ClipBinaryOpF32::{a['op']}, "
                                   f"{_operand(a['operand'], v)})",
              "fp_div": lambda a, v: f".vector_fp_div({_operand(a['operand'], v)})"}


def _step(s: Any, vrf: dict[str, str]) -> str:
    if s == "stash":
        return ".vector_stash()"
    (key, arg), = s.items() if isinstance(s, dict) else ((s, {}),)
    arg = arg if arg is not None else {}
    if key == "fp_binary":
        op = _binary_op(arg["op"])
        if "mode" in arg:
            return (f".vector_fp_binary_with_mode({op}, BinaryArgMode::{arg['mode']}, "
                    f"{_operand(arg['operand'], vrf)})")
        return f".vector_fp_binary({op}, {_operand(arg['operand'], vrf)})"
    if key not in STEP_CALLS:
        raise fail("bad-request", detail=f"--emit rust: the chain step {key} has no "
                   "furiosa-opt call tcplan writes", fix="leave --emit rust out for it")
    return STEP_CALLS[key](arg, vrf)


def _binary_op(op: str) -> str:
    """``MulF(Mul0)`` -> ``FpBinaryOp::MulF(FpMulAlu::Mul0)``."""
    name, _, alu = op.partition("(")
    return f"FpBinaryOp::{name}(FpMulAlu::{alu[:-1]})" if alu else f"FpBinaryOp::{name}"
