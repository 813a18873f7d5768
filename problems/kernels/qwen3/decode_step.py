"""A whole decode step of Qwen3-0.6B as one graph: the kernel-function graphs of this folder
composed, layer by layer (issue 32 item 7).

    python problems/kernels/qwen3/decode_step.py --layers N [--free] [--no-launch]
        [--only LAUNCH] -o FILE

A layer is the three launches of ``ops::`` in tests/data/furiosa_opt/src/transformer/mod.rs,
in order: ``projection`` (x to DM, rmsnorm::forward, proj_q, proj_k, proj_v, rmsnorm::forward_q,
forward_k, rope::apply_rope, q to HBM), ``attention`` (attention::forward with its callees
qk_scaled, row_max, ng_to_vrf, masked_exp, row_sum, weighted_sum) and ``decoder`` (x to DM,
attention::norm, proj_o, rx to DM, residual::forward, rmsnorm::forward, mlp::forward,
residual::forward, rx to HBM).  Each function's graph file is read, its tensors and ops
renamed ``l<layer>.<instance>.<name>``, and a given input that an earlier function writes is
replaced by that tensor (:data:`LINKS`; same tier and layout, checked), or stays given where
the kernel reaches it through an unsafe reshape (:data:`UNLINKED`: its axes differ, so no
graph tensor can be both).  The moves of ``ops::`` itself are the linking moves
(:data:`MOVES`).  Every op gets ``launch: l<layer>.<launch>``; DM addresses restart at 0 at
each launch (1 KiB boundaries), HBM addresses are all distinct (1 MiB boundaries).
Embeddings and the final layer (lm_head) are left out.
"""

from __future__ import annotations

import argparse
import copy
import functools
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tcplan.model import hardware as hw

HERE = Path(__file__).resolve().parent
KIB, MIB = 1024, 1024 * 1024
#: each layer's HBM window: the HBM decode's period (the hash repeats)
HBM_WINDOW = hw.HBM_DECODE_PERIOD
DM_BYTES_PER_SLICE = hw.DM_BYTES_PER_SLICE
LAUNCHES = ("projection", "attention", "decoder")
FREE_STREAM = {"cluster": "free", "slice": "free", "time": "free", "packet": "free"}


@dataclass(frozen=True)
class Instance:
    """One call of a kernel function: its launch, its name in the layer, its graph file."""
    launch: str
    name: str
    stem: str


@dataclass(frozen=True)
class Move:
    """A move ``ops::`` makes itself (a ``to_dm`` or ``to_hbm_view``): a DMA between two
    tensors, named by reference (``inst.tensor``, ``step.x``, ``layer.q``, ``in``, ``out``),
    placed before the instance ``before`` (or at its launch's end: ``None``)."""
    launch: str
    name: str
    source: str
    destination: str
    before: str | None


#: the calls of one layer, in the kernel's order (attention::forward's callees first: each
#: writes what forward reads; forward's own moves follow)
INSTANCES = (
    Instance("projection", "rmsnorm", "rmsnorm_forward"),
    Instance("projection", "proj_q", "projection_proj_q"),
    Instance("projection", "proj_k", "projection_proj_p"),
    Instance("projection", "proj_v_p", "projection_proj_p"),
    Instance("projection", "proj_v", "projection_proj_v"),
    Instance("projection", "rmsnorm_q", "rmsnorm_forward_q"),
    Instance("projection", "rmsnorm_k", "rmsnorm_forward_k"),
    Instance("projection", "rope", "rope_apply_rope"),
    Instance("attention", "qk_scaled", "attention_qk_scaled"),
    Instance("attention", "row_max", "attention_row_max"),
    Instance("attention", "max_to_vrf", "attention_ng_to_vrf"),
    Instance("attention", "masked_exp", "attention_masked_exp"),
    Instance("attention", "row_sum", "attention_row_sum"),
    Instance("attention", "weighted_sum", "attention_weighted_sum"),
    Instance("attention", "forward", "attention_forward"),
    Instance("decoder", "norm", "attention_norm"),
    Instance("decoder", "proj_o", "projection_proj_o"),
    Instance("decoder", "residual1", "residual_forward"),
    Instance("decoder", "rmsnorm_post", "rmsnorm_forward"),
    Instance("decoder", "mlp", "mlp_forward"),
    Instance("decoder", "residual2", "residual_forward"),
)

#: a given input -> the tensor that holds it: another instance's (``inst.name``), the
#: step's (``step.name``: one per decode step, shared by every layer), a linking move's
#: (``layer.name``) or the layer's input hidden state (``in``)
LINKS = {
    "proj_v.kv_offset": "step.kv_offset",
    "rope.q": "rmsnorm_q.out",
    "rope.k": "rmsnorm_k.out",
    "rope.cos_hbm": "step.cos",
    "rope.sin_hbm": "step.sin",
    "rope.kv_offset": "step.kv_offset",
    "qk_scaled.q": "layer.q",
    "qk_scaled.k": "rope.k_cache",
    "row_max.qk": "qk_scaled.logits",
    "max_to_vrf.x": "row_max.max",
    "masked_exp.qk": "qk_scaled.logits",
    "masked_exp.max_vrf": "max_to_vrf.x_vrf",
    "masked_exp.mask_hbm": "step.mask",
    "row_sum.masked_exp": "masked_exp.masked",
    "weighted_sum.masked_exp": "masked_exp.masked",
    "weighted_sum.v": "proj_v.v_cache",
    "forward.max": "row_max.max",
    "forward.expsum": "row_sum.sum",
    "forward.result": "weighted_sum.result",
    "norm.sum_hbm": "forward.sum_hbm_out",
    "residual1.input": "proj_o.out",
    "rmsnorm_post.input": "residual1.out",
    "residual2.input": "mlp.out",
    "residual2.residual": "residual1.out",
}

#: given inputs that stay given, with why (each an unsafe reshape or a part left out)
UNLINKED = {
    "proj_q.input": "rmsnorm.out reshaped (unsafe) from SliceP4 m![Dummy64, 1 # 4] to SliceQ "
                    "m![Q / 32, 1 # 4]",
    "proj_k.input": "rmsnorm.out reshaped (unsafe) to SliceP m![P / 32, 1 # 8]",
    "proj_v_p.input": "rmsnorm.out reshaped (unsafe) to SliceP m![P / 32, 1 # 8]",
    "proj_v.v": "proj_v_p.gathered (m![P / 128, 1 # 32] | m![P % 128]) reshaped (unsafe) to "
                "SliceN32 m![N, 1 # 32] | m![D]",
    "rmsnorm_q.input": "proj_q.gathered (m![Q / 256, 1 # 32] | m![Q % 256]) reshaped (unsafe) "
                       "to m![N, 1 # 32] | m![G, D]",
    "rmsnorm_k.input": "proj_k.gathered reshaped (unsafe) to m![N, 1 # 32] | m![D]",
    "rope.rotate_half_q": "rope's half copies (tile views) are left out by its file",
    "rope.rotate_half_k": "rope's half copies (tile views) are left out by its file",
    "proj_o.input": "norm.out (m![N, G, D]) reshaped (unsafe) to m![Q], then to SliceO "
                    "m![H / 16, 1 # 4]",
    "mlp.x": "rmsnorm_post.out reshaped (unsafe) from SliceP4 to m![L / 48, 1 # 4]",
    "mlp.x_ug": "mlp's own reshape of x_bcast (its file gives it)",
    "layer.rx_flat": "residual2.out reshaped (unsafe) from SliceP4 to Slice m![1 # 256] "
                     "before its store",
}

MOVES = (
    Move("projection", "load_x", "in", "rmsnorm.input", "rmsnorm"),
    Move("projection", "store_q", "rope.result_q", "layer.q", None),
    Move("decoder", "load_attn", "forward.out_hbm_out", "norm.input", "norm"),
    Move("decoder", "load_rx", "in", "residual1.residual", "residual1"),
    Move("decoder", "store_rx", "layer.rx_flat", "out", None),
)


def _layer_tensor(name: str, free: bool) -> dict[str, Any]:
    """The tensors ``ops::`` declares itself: the q it stores, the reshaped rx it stores."""
    if name == "q":
        return _hbm("m![N, G, D]", ["N", "G", "D"], free)
    if name == "rx_flat":
        return {"tier": "dm", "chip": "m![1]", "cluster": "m![1 # 2]", "slice": "m![1 # 256]",
                **_element("m![H]", ["H"], free), "given": True}
    raise KeyError(name)


def _step_tensor(name: str, free: bool) -> dict[str, Any]:
    """The step's own inputs, one for every layer: the hidden state, the position's
    kv_offset, cos and sin, the mask."""
    if name == "kv_offset":
        return {"tier": "hbm", "chip": "m![1]", "dtype": "i32", "element": "m![1]",
                "given": True}
    if name == "mask":
        return {**_hbm("m![T]", ["T"], free), "dtype": "f32", "given": True}
    return {**_hbm("m![H]" if name == "x" else "m![D]", ["H" if name == "x" else "D"],
                   free), "given": True}


def _element(typed: str, axes: list[str], free: bool) -> dict[str, Any]:
    return {"element": "free", "axes": axes} if free else {"element": typed}


def _hbm(typed: str, axes: list[str], free: bool) -> dict[str, Any]:
    return {"tier": "hbm", "chip": "m![1]", **_element(typed, axes, free)}


@functools.cache
def _function(stem: str, free: bool) -> dict[str, Any]:
    """A function's graph file as PyYAML reads it."""
    text = (HERE / f"{stem}{'_free' if free else ''}.yaml").read_text()
    data = yaml.safe_load(text)
    assert isinstance(data, dict) and data.get("kind") == "graph", stem
    return data


@functools.cache
def _sizes(stem: str, free: bool) -> dict[str, int]:
    """Each memory tensor's bytes per unit in a function's file (its largest candidate's),
    as tcplan's loader computes them (``Graph.spans``)."""
    from tcplan.planner.spec import load_problem
    graph = load_problem(HERE / f"{stem}{'_free' if free else ''}.yaml").spec.graph
    return {n: hi - lo for n, (_, lo, hi) in graph.spans.items()}


def _roles(op: dict[str, Any]) -> dict[tuple[Any, ...], bool]:
    """Where an op names its tensors (a key path into the op) and whether it reads each:
    the kind's roles (``Kind.graph_roles``) and its own (``graph_extra_roles``: VRF
    operands, read)."""
    from tcplan.planner.graph import op_roles
    from tcplan.planner.registry import kinds
    kind = str(op["kind"])
    out: dict[tuple[Any, ...], bool] = {(r,): reads for r, (reads, _) in
                                        op_roles()[kind].items()}
    out.update({at: True for _, (_, at) in kinds()[kind].graph_extra_roles(op).items()})
    return out


def _get(op: dict[str, Any], at: tuple[Any, ...]) -> Any:
    for k in at:
        op = op[k]
    return op


def _set(op: dict[str, Any], at: tuple[Any, ...], value: str) -> None:
    for k in at[:-1]:
        op = op[k]
    op[at[-1]] = value


def _candidates(spec: dict[str, Any]) -> frozenset[str]:
    """A memory tensor's candidate Elements by name, as planner/graph.py names them."""
    el: Any = spec["element"]
    if isinstance(el, str) and el != "free":
        return frozenset([el])
    if isinstance(el, dict) and "orders" in el:
        return frozenset(el["orders"])
    terms = spec["axes"] if el == "free" else el["digits"]
    return frozenset(f"m![{', '.join(p)}]" for p in itertools.permutations(terms))


def _link(producer: dict[str, Any], consumer: dict[str, Any]) -> tuple[bool, str | None]:
    """Whether a given input can be the producer's tensor, narrowing the producer's
    candidates to those the consumer has too where they differ (then a note says so)."""
    def strip(spec: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        return {k: v for k, v in spec.items() if k not in keys}
    if strip(producer, ("address", "given")) == strip(consumer, ("address", "given")):
        return True, None
    layout = ("address", "given", "element", "axes")
    if "element" not in producer or strip(producer, layout) != strip(consumer, layout):
        return False, None
    mine, theirs = _candidates(producer), _candidates(consumer)
    if mine == theirs:
        return True, None
    both = mine & theirs
    if not both:
        return False, None
    if both != mine:
        producer.pop("axes", None)
        producer["element"] = {"orders": sorted(both)} if len(both) > 1 else next(iter(both))
    return True, f"candidates {sorted(mine)} and {sorted(theirs)}: linked over {sorted(both)}"


AXES = {"H": 1024, "Dummy64": 64, "Q": 2048, "P": 1024, "N": 8, "G": 2, "D": 128, "T": 512,
        "L": 3072, "Dummy4": 4}
DTYPE_BYTES = hw.DTYPE_BYTES


@dataclass
class Step:
    """The graph being built."""
    free: bool
    tensors: dict[str, dict[str, Any]]
    sizes: dict[str, int]  # a memory tensor's bytes per unit (its largest candidate's)
    ops: list[dict[str, Any]]
    notes: list[str]  # the links made only in part, and the ones not made

    def add(self, name: str, spec: dict[str, Any], size: int) -> str:
        if name not in self.tensors:
            self.tensors[name], self.sizes[name] = spec, size
        return name


def _own_size(spec: dict[str, Any]) -> int:
    """The bytes of a tensor ``ops::`` declares (its axes whole, unpadded)."""
    el = spec["element"]
    axes = spec["axes"] if el == "free" else [a.strip() for a in el[3:-1].split(",")]
    n = 1
    for a in axes:
        n *= AXES.get(a, 1)
    return n * DTYPE_BYTES[spec.get("dtype", "bf16")]


def _ref(step: Step, layer: int, ref: str) -> str:
    """A reference's tensor in the step, declared on first use."""
    head, _, tail = ref.partition(".")
    if ref == "in" and layer > 0:
        return f"l{layer - 1}.rx"
    if ref in ("in", "step.x"):
        return _ref(step, layer, "step.x") if ref == "in" else \
            step.add("step.x", _step_tensor("x", step.free), _own_size(
                _step_tensor("x", step.free)))
    if ref == "out":
        spec = _hbm("m![H]", ["H"], step.free)
        return step.add(f"l{layer}.rx", spec, _own_size(spec))
    if head == "step":
        spec = _step_tensor(tail, step.free)
        return step.add(ref, spec, _own_size(spec))
    if head == "layer":
        spec = _layer_tensor(tail, step.free)
        return step.add(f"l{layer}.{tail}", spec, _own_size(spec))
    inst = next(i for i in INSTANCES if i.name == head)
    spec = dict(_function(inst.stem, step.free)["tensors"][tail])
    return step.add(f"l{layer}.{ref}", spec, _sizes(inst.stem, step.free)[tail])


def _instance(step: Step, layer: int, inst: Instance, launch: str | None) -> None:
    """One call: its tensors (linked where :data:`LINKS` says), the moves ``ops::`` makes
    before it, then its ops, renamed."""
    data = _function(inst.stem, step.free)
    names: dict[str, str] = {}
    written = {m.destination for m in MOVES}
    for t, spec in data["tensors"].items():
        key = f"{inst.name}.{t}"
        if key in LINKS:
            producer = _ref(step, layer, LINKS[key])
            ok, note = _link(step.tensors[producer], dict(spec))
            if ok:
                names[t] = producer
                if note:
                    step.notes.append(f"{key} <- {LINKS[key]}: {note}")
                continue
            step.notes.append(f"{key} not linked to {LINKS[key]}: the layouts differ")
        elif spec.get("given") and key not in UNLINKED and key not in written \
                and spec.get("tier") in ("dm", "vrf"):
            step.notes.append(f"{key}: given, no link declared")
        names[t] = step.add(f"l{layer}.{key}", dict(spec), _sizes(inst.stem, step.free).get(t, 0))
    for m in MOVES:
        if m.before == inst.name:
            _move(step, layer, m, launch)
    for op in data["ops"]:
        op = copy.deepcopy(op)
        for at in _roles(op):
            if isinstance(_get(op, at), str):
                _set(op, at, names[_get(op, at)])
        _append(step, layer, f"{inst.name}.{op['name']}", op, launch)


def _append(step: Step, layer: int, name: str, op: dict[str, Any], launch: str | None) -> None:
    head = {"name": f"l{layer}.{name}", "kind": op["kind"]}
    if launch is not None:
        head["launch"] = f"l{layer}.{launch}"
    step.ops.append({**head, **{k: v for k, v in op.items() if k not in ("name", "kind")}})


def _move(step: Step, layer: int, m: Move, launch: str | None) -> None:
    """A move of ``ops::``: a DMA, its stream free (tdma plans it)."""
    source, destination = _ref(step, layer, m.source), _ref(step, layer, m.destination)
    op = {"kind": "dma", "source": source, "destination": destination,
          "stream": dict(FREE_STREAM)}
    _append(step, layer, m.name, op, launch)


def _finish(step: Step) -> None:
    """Given where no op writes a tensor and some op reads it; a tensor no op touches is
    dropped (a launch left out with ``--only``)."""
    read: set[str] = set()
    wrote: set[str] = set()
    for op in step.ops:
        for at, reads in _roles(op).items():
            (read if reads else wrote).add(_get(op, at))
    for n in list(step.tensors):
        spec = step.tensors[n]
        spec.pop("given", None)
        if n not in read and n not in wrote:
            del step.tensors[n], step.sizes[n]
        elif n not in wrote:
            spec["given"] = True


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def _window(name: str) -> int:
    """A tensor's HBM window: the step's own tensors 0, layer l's l + 1."""
    head = name.split(".", 1)[0]
    return int(head[1:]) + 1 if head[:1] == "l" and head[1:].isdigit() else 0


def _addresses(step: Step, per_launch: bool) -> dict[str, int]:
    """DM tensors on 1 KiB boundaries from 0 at each launch (DM is not kept across
    launches: a DM tensor's life ends with its launch, planner/graph.py ``lifetimes``); a
    register file's keep their function's.  HBM tensors on 1 MiB boundaries, each layer's
    in a window of its own, one HBM decode period (512 MiB, model/hardware.py
    ``HBM_DECODE_PERIOD``) per layer, at the same offsets in every window: the HBM hash
    repeats with the period, so every layer's moves cost the same and tcplan plans them
    once (planner/op_cache.py).  Returns each launch's DM bytes per slice; a DM tensor two
    launches touch, a launch past DM or a layer past its window is an error."""
    launches: dict[str, set[str]] = {}
    for op in step.ops:
        for at in _roles(op):
            launches.setdefault(_get(op, at), set()).add(op.get("launch", "all"))
    dm: dict[str, int] = {}
    hbm: dict[int, int] = {}
    for n, spec in step.tensors.items():
        tier = spec.get("tier")
        if tier == "hbm":
            w = _window(n)
            spec["address"] = w * HBM_WINDOW + hbm.get(w, 0)
            hbm[w] = hbm.get(w, 0) + _round_up(step.sizes[n], MIB)
            if hbm[w] > HBM_WINDOW:
                raise SystemExit(f"{n}: past its layer's HBM window of {HBM_WINDOW:,} bytes")
        elif tier == "dm":
            (launch, *more) = sorted(launches[n]) if per_launch else ["all"]
            if more:
                raise SystemExit(f"{n}: a DM tensor of launches {launch}, {', '.join(more)}")
            spec["address"] = dm.get(launch, 0)
            dm[launch] = spec["address"] + _round_up(step.sizes[n], KIB)
    for launch, used in dm.items():
        if used > DM_BYTES_PER_SLICE:
            raise SystemExit(f"launch {launch}: {used:,} bytes of DM per slice, past its "
                             f"{DM_BYTES_PER_SLICE:,}")
    return dm


def build(layers: int, free: bool, launch: bool = True,
          only: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """The decode step's graph (as PyYAML writes it) and its header's lines."""
    step = Step(free, {}, {}, [], [])
    for layer in range(layers):
        for name in LAUNCHES:
            if only not in (None, name):
                continue
            for inst in INSTANCES:
                if inst.launch == name:
                    _instance(step, layer, inst, name if launch else None)
            for m in MOVES:
                if m.launch == name and m.before is None:
                    _move(step, layer, m, name if launch else None)
    _finish(step)
    dm = _addresses(step, launch)
    axes: dict[str, int] = {}
    for inst in INSTANCES:
        if only in (None, inst.launch):
            axes.update(_function(inst.stem, free)["axes"])
    doc: dict[str, Any] = {
        "format": 1, "name": _name(layers, free), "kind": "graph", "dtype": "bf16",
        "axes": {a: axes[a] for a in AXES if a in axes},
        "objective": "makespan" if free else "sum",
        "tensors": step.tensors, "ops": step.ops}
    return doc, _header(layers, free, launch, only, step.notes, dm)


def _name(layers: int, free: bool) -> str:
    return ("decode_layer" if layers == 1 else "decode_step") + ("_free" if free else "")


def _header(layers: int, free: bool, launch: bool, only: str | None, notes: list[str],
            dm: dict[str, int]) -> list[str]:
    """The generated file's comment: what it is, what is linked, what is not."""
    what = "its DM and HBM layouts free (the functions' _free files)" if free else \
        "every layout as the kernels type it"
    lines = [
        f"Qwen3-0.6B, one decode step: {layers} decoder layer(s), {what}. Generated by",
        f"problems/kernels/qwen3/decode_step.py --layers {layers}" + (" --free" if free else "")
        + ("" if launch else " --no-launch") + (f" --only {only}" if only else "")
        + " (do not edit; README.md 'The decode step').",
        "Per layer l, the launches of ops:: (tests/data/furiosa_opt/src/transformer/mod.rs):",
        "l<l>.projection, l<l>.attention, l<l>.decoder; each function's graph file renamed",
        "l<l>.<call>.<name>. Linked (a given input replaced by the tensor an earlier call",
        "writes, same tier and layout): " + ", ".join(f"{k} <- {v}" for k, v in LINKS.items())
        + ". The moves of ops:: itself: " + ", ".join(
            f"{m.name} ({m.source} -> {m.destination})" for m in MOVES)
        + ". 'in' is the layer's input hidden state (step.x, then l<l-1>.rx), 'out' l<l>.rx;"
        " kv_offset, cos, sin and the mask are the step's, shared by every layer.",
        "Not linked (given at an address of their own): " + "; ".join(
            f"{k}: {v}" for k, v in UNLINKED.items()) + ".",
        "proj_k has no graph file of its own: it is proj_p (projection_proj_p.yaml); proj_v is",
        "proj_p (call proj_v_p) then its scatter (projection_proj_v.yaml). In-place",
        "HBM state (attention's max, sum, out; the K and V caches, which the scatters write)",
        "is given per layer as *_in. Left out: the embedding and the final layer (lm_head).",
        "Addresses: DM on 1 KiB boundaries from 0 at each launch, HBM on 1 MiB boundaries, "
        "each layer's in a window of its own (512 MiB, the HBM decode's period), the step's "
        "in window 0. DM bytes per slice: " + ", ".join(
            f"{k} {v:,}" for k, v in dm.items() if k.startswith(("l0.", "all"))) + ".",
    ]
    lines += ["Links made in part or not made: " + "; ".join(notes) + "."] if notes else []
    return lines


def dump(doc: dict[str, Any], header: list[str]) -> str:
    """The file: its header, then one line per tensor and per op."""
    import textwrap

    def flow(v: Any) -> str:
        text = yaml.safe_dump([v], default_flow_style=True, width=10**9, sort_keys=False)
        return text.strip()[1:-1]  # (one item of a flow list: no document end marker)
    out = [f"# {line}" for h in header for line in textwrap.wrap(h, 92)]
    out += [f"{k}: {flow(doc[k])}" for k in ("format", "name", "kind", "dtype", "axes",
                                             "objective")]
    out += ["tensors:"] + [f"  {flow(n)}: {flow(s)}" for n, s in doc["tensors"].items()]
    out += ["ops:"] + [f"  - {flow(op)}" for op in doc["ops"]]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=1, help="decoder layers (28: the model)")
    ap.add_argument("--free", action="store_true", help="compose the _free files")
    ap.add_argument("--no-launch", action="store_true",
                    help="leave out the ops' launch key (DM addresses then never restart)")
    ap.add_argument("--only", choices=LAUNCHES, help="one launch of each layer")
    ap.add_argument("-o", "--output", required=True, help="the file to write ('-': stdout)")
    a = ap.parse_args(argv)
    if a.layers < 1:
        ap.error("--layers: at least 1")
    doc, header = build(a.layers, a.free, not a.no_launch, a.only)
    text = dump(doc, header)
    if a.output == "-":
        sys.stdout.write(text)
    else:
        Path(a.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
