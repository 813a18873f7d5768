"""The decode step as one graph (issue 32 item 7): problems/kernels/qwen3/decode_step.py
composes the Qwen3 kernel-function graphs into decoder layers.  Checked here apart from
tcplan's own checks: the links (a linked input IS the producer's tensor), the op count, the
DM byte ranges of one launch (computed from the YAML, not by the loader), and a layer's
sum cycles against its functions' files solved alone."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import tcplan
from tcplan.planner.spec import load_problem_text

ROOT = Path(__file__).resolve().parents[1]
QWEN3 = ROOT / "problems/kernels/qwen3"


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("decode_step", QWEN3 / "decode_step.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["decode_step"] = mod
    spec.loader.exec_module(mod)
    return mod


DS = _module()


def _text(layers: int, free: bool = False, **kw: Any) -> str:
    doc, header = DS.build(layers, free, **kw)
    return str(DS.dump(doc, header))


def _op(doc: dict, name: str) -> dict:
    return next(o for o in doc["ops"] if o["name"] == name)



@pytest.mark.parametrize("free", [False, True])
def test_two_layers_load_and_link(free):
    text = _text(2, free)
    g = load_problem_text(text, "decode_step.yaml").spec.graph
    doc = yaml.safe_load(text)
    # layer 0's rmsnorm writes the DM x the projection's load filled: one tensor
    assert _op(doc, "l0.load_x")["destination"] == "l0.rmsnorm.input"
    assert _op(doc, "l0.rmsnorm.fetch_input")["source"] == "l0.rmsnorm.input"
    # rope reads what forward_q and forward_k write
    assert _op(doc, "l0.rmsnorm_q.commit_out")["destination"] == "l0.rmsnorm_q.out"
    assert "l0.rmsnorm_q.out" in {v for o in doc["ops"] if o["name"].startswith("l0.rope.")
                                  for v in o.values() if isinstance(v, str)}
    # the q stored to HBM is the q attention loads; the K cache rope writes is the one read
    assert _op(doc, "l0.store_q")["destination"] == _op(doc, "l0.qk_scaled.load_q")["source"]
    assert _op(doc, "l0.rope.scatter_k")["destination"] == \
        _op(doc, "l0.qk_scaled.load_k")["source"] == "l0.rope.k_cache"
    # layer 0's output hidden state is layer 1's input (both its loads)
    assert _op(doc, "l0.store_rx")["destination"] == "l0.rx"
    assert _op(doc, "l1.load_x")["source"] == _op(doc, "l1.load_rx")["source"] == "l0.rx"
    assert _op(doc, "l0.load_x")["source"] == "step.x"
    # the step's inputs are shared, each layer's weights its own
    assert "step.kv_offset" in _op(doc, "l1.proj_v.scatter_v").values()
    assert doc["tensors"]["l0.mlp.up_weight"]["address"] != \
        doc["tensors"]["l1.mlp.up_weight"]["address"]
    # every op of every function, and the five moves of ops:: per layer
    count = sum(len(DS._function(i.stem, free)["ops"]) for i in DS.INSTANCES)
    assert len(g.ops) == 2 * (count + len(DS.MOVES))
    launches = [f"l{n}.{x}" for n in range(2) for x in DS.LAUNCHES]
    assert list(dict.fromkeys(o["launch"] for o in doc["ops"])) == launches


def _dm_ranges(doc: dict, sizes: dict[str, int]) -> dict[str, list[tuple[int, int, str]]]:
    """Per launch, each DM tensor's bytes [address, address + size) its ops touch."""
    out: dict[str, list[tuple[int, int, str]]] = {}
    for o in doc["ops"]:
        for n in {v for v in o.values() if isinstance(v, str) and v in doc["tensors"]}:
            t = doc["tensors"][n]
            if t["tier"] == "dm":
                item = (t["address"], t["address"] + sizes[n], n)
                if item not in out.setdefault(o["launch"], []):
                    out[o["launch"]].append(item)
    return out


def _bytes(t: dict) -> int:
    """A DM tensor's bytes per slice from its Element as written (its largest candidate:
    every candidate of a free one orders the same digits; padding ``a # b`` counts b)."""
    el = t["element"]
    if el == "free":
        orders = [[str(a) for a in t["axes"]]]
    elif isinstance(el, dict):
        orders = [o[3:-1].split(",") for o in el["orders"]] if "orders" in el \
            else [el["digits"]]
    else:
        orders = [el[3:-1].split(",")]
    best = 0
    for terms in orders:
        n = 1
        for term in terms:
            n *= _term_size(term.strip())
        best = max(best, n)
    return best * {"bf16": 2, "f32": 4, "i32": 4}[t.get("dtype", "bf16")]


def _term_size(term: str) -> int:
    if "#" in term:
        return int(term.split("#")[1])
    words = term.split()
    size = DS.AXES.get(words[0], 1) if not words[0].isdigit() else int(words[0])
    for op, k in zip(words[1::2], words[2::2]):
        size = size // int(k) if op == "/" else min(size, int(k))
    return size


@pytest.mark.parametrize("free", [False, True])
def test_no_two_dm_tensors_of_one_launch_overlap(free):
    doc = yaml.safe_load(_text(2, free))
    sizes = {n: _bytes(t) for n, t in doc["tensors"].items() if t["tier"] == "dm"}
    for launch, items in _dm_ranges(doc, sizes).items():
        items.sort()
        for (a, b, n), (c, d, m) in zip(items, items[1:]):
            assert b <= c, f"{launch}: {n} [{a}, {b}) overlaps {m} [{c}, {d})"
        assert all(a % 1024 == 0 for a, _, _ in items)
        assert max(b for _, b, _ in items) <= 512 * 1024
    hbm = sorted(t["address"] for t in doc["tensors"].values() if t["tier"] == "hbm")
    assert len(set(hbm)) == len(hbm) and all(a % 2**20 == 0 for a in hbm)


def test_the_loaders_sizes_agree_with_the_independent_ones():
    text = _text(1)
    g = load_problem_text(text, "decode_layer.yaml").spec.graph
    doc = yaml.safe_load(text)
    for n, (tier, lo, hi) in g.spans.items():
        if tier == "dm":
            assert hi - lo == _bytes(doc["tensors"][n]), n


def test_a_launch_alone_loads_without_the_launch_key():
    for launch in DS.LAUNCHES:
        text = _text(1, launch=False, only=launch)
        assert "launch:" not in text.split("format: 1")[1]
        load_problem_text(text, f"{launch}.yaml")


def _sum(path_or_text: Any, name: str = "f.yaml") -> dict:
    p = load_problem_text(path_or_text, name) if isinstance(path_or_text, str) else \
        tcplan.load(path_or_text)
    return tcplan.solve(p, verify="none").to_json()


@pytest.mark.slow
def test_one_layer_sums_its_functions_cycles():
    """Under the sum objective every op is planned alone, so a layer's sum is its
    functions' sums, each solved from its own file, plus its five moves'."""
    got = _sum(_text(1, False), "decode_layer.yaml")
    assert got["status"] == "optimal"
    ops = {o["op"]: o["cycles"] for o in got["plan"]["ops"]}
    alone = {stem: _sum(QWEN3 / f"{stem}.yaml")["sum_cycles"]
             for stem in {i.stem for i in DS.INSTANCES}}
    for inst in DS.INSTANCES:
        mine = sum(c or 0 for op, c in ops.items() if op.startswith(f"l0.{inst.name}."))
        assert mine == alone[inst.stem], inst.name
    moves = sum(ops[f"l0.{m.name}"] for m in DS.MOVES)
    assert got["sum_cycles"] == sum(alone[i.stem] for i in DS.INSTANCES) + moves
