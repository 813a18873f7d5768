"""A graph's run at scale (issue 32 item 5, docs/decisions.md items 129 and 130): the
whole-tensor strided views against the per-unit views and the index arrays, values dropped
after their last use, given tensors seeded as before, an op writing over a live tensor's
bytes refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tcplan
from tcplan.executor import run as run_mod
from tcplan.executor import strided
from tcplan.executor import tu as tu_mod
from tcplan.executor.graph import lifetimes, run_graph
from tcplan.executor.memory import Memories
from tcplan.executor.run import extents, place, read_tensor, tensor_bits, verify
from tcplan.model.rules import TcplanError
from tcplan.planner.registry import kinds

ROOT = Path(__file__).resolve().parents[1]
QWEN3 = ROOT / "problems/kernels/qwen3"


def _graph(name: str):
    p = tcplan.load(QWEN3 / f"{name}.yaml")
    return p, p.spec.graph


@pytest.fixture
def per_unit(monkeypatch):
    def set_(on: bool) -> None:
        monkeypatch.setattr(run_mod, "PER_UNIT", on)
        monkeypatch.setattr(tu_mod, "PER_UNIT", on)
    return set_


def _bytes(mem: Memories) -> dict:
    return {k: (s.data.copy(), s.writes.copy()) for k, s in mem.spaces.items()}


@pytest.mark.parametrize("name", ["mlp_forward", "rmsnorm_forward", "attention_forward"])
def test_whole_views_write_and_read_what_the_unit_views_do(name, per_unit):
    """Every memory tensor of a kernel placed (with T, and as a destination), read back and
    verified through the whole-tensor views, one view a unit and the index arrays: the
    same bytes, the same values, the same verdicts."""
    _, g = _graph(name)
    for k, n in enumerate(g.tensors):
        t = g.tensor(n, {})
        if t.tier not in ("dm", "hbm", "host"):
            continue
        axes = g.axes_of([n])
        assert strided.whole(t, axes) is not None, n  # (the kernels' tensors are boxes)
        T = tensor_bits(axes, t.dtype, k)
        got = {}
        for how in ("whole", "unit", "index"):
            per_unit(how != "whole")
            mem = Memories(extents([t]))
            if how == "index":  # (no unit views either: position by position)
                strided.units = lambda *a: None  # type: ignore[assignment]
            try:
                place(mem, t, axes, T)
                back = read_tensor(mem, t, axes, T.dtype)
                ok = verify(mem, t, axes, T)["checked"]
                dst = Memories(extents([t]))
                place(dst, t, axes, None)
            finally:
                strided.units = _UNITS
            got[how] = (_bytes(mem), back, ok, _bytes(dst))
        for how in ("unit", "index"):
            a, b = got["whole"], got[how]
            assert a[0].keys() == b[0].keys()
            for key in a[0]:
                assert np.array_equal(a[0][key][0], b[0][key][0]), (n, how)
                assert np.array_equal(a[3][key][0], b[3][key][0]), (n, how)
                assert np.array_equal(a[3][key][1], b[3][key][1]), (n, how)
            assert np.array_equal(a[1], b[1]) and a[2] == b[2], (n, how)


_UNITS = strided.units


def test_whole_views_find_a_corrupted_byte(per_unit):
    """A byte changed in one slice of a DM tensor: the whole view says no, and the index
    path names the position (the same verdict as before)."""
    _, g = _graph("mlp_forward")
    t = g.tensor("up_weight_dm", {})
    axes = g.axes_of(["up_weight_dm"])
    T = tensor_bits(axes, t.dtype, 3)
    mem = Memories(extents([t]))
    place(mem, t, axes, T)
    w = strided.whole(t, axes)
    assert w is not None and run_mod._verify_whole(mem, t, axes, T, None) is not None
    space = mem.space("dm", 0)
    at = (4 << 19) + t.address + 2 * 7  # slice 4 (live), element 7 (physical)
    space.data[at] ^= 0xFF
    assert run_mod._verify_whole(mem, t, axes, T, None) is None
    with pytest.raises(TcplanError) as e:
        verify(mem, t, axes, T)
    assert e.value.code == "verify-mismatch"


@pytest.mark.parametrize("name", ["residual_forward", "mlp_forward"])
def test_dropping_values_keeps_the_verdict_and_the_seeds(name):
    """The run that drops values after their last use checks what the run before issue 32
    did; every given tensor holds the same seeded values (``seed + k``, ``k`` its index)."""
    p, g = _graph(name)
    plan = tcplan.lower(p).plan
    old_values, old = run_graph(g, plan, kinds(), 5, legacy=True)
    values, new = run_graph(g, plan, kinds(), 5)
    _, lean = run_graph(g, plan, kinds(), 5, keep=())
    assert new["checked"] == old["checked"] == lean["checked"] > 0
    assert values.keys() == old_values.keys()
    for n in g.tensors:
        assert np.array_equal(values[n].view(np.uint8), old_values[n].view(np.uint8)), n


def test_lifetimes_follow_the_roles():
    """A given tensor is born at its first reader and dies at its last; a tensor written and
    never read lives to the end."""
    _, g = _graph("residual_forward")
    life = lifetimes(g)
    end = len(g.order)
    rank = {i: k for k, i in enumerate(g.order)}
    for n, t in g.tensors.items():
        steps = [rank[op.index] for op in g.ops if n in op.roles.values()]
        readers = [rank[op.index] for op in g.ops if n in op.reads]
        assert life[n][0] == min(steps)
        assert life[n][1] == (max(readers) if readers else end)


WEIGHT = """format: 1
name: shared
kind: graph
dtype: bf16
axes: {S: 512, H: 8, D: 64}
tensors:
  o_dm: {tier: dm, slice: 'm![S / 8]', element: 'm![S % 8, H, D]', given: true}
  o_hbm: {tier: hbm, address: 0, element: 'm![S, H, D]'}
  t1: {tier: dm, slice: 'm![H, S / 64]', element: 'm![S % 64, D]', address: 8192}
  t2: {tier: dm, slice: 'm![H, S / 64]', element: 'm![S % 64, D]', address: T2}
ops:
  - {name: store, kind: dma, source: o_dm, destination: o_hbm, stream: {time: free, packet: free}}
  - {name: load1, kind: dma, source: o_hbm, destination: t1, stream: {time: free, packet: free}}
  - {name: load2, kind: dma, source: o_hbm, destination: t2, stream: {time: free, packet: free}}
"""


def test_an_op_writing_over_a_live_tensor_is_refused(monkeypatch):
    """Two DM tensors sharing bytes while both live (the loader's check left out): the
    op writing the second is refused by name, both tensors named; apart, it verifies."""
    from tcplan.planner import graph as pg

    def spans_only(g) -> None:
        g.spans = pg._spans(g)
    monkeypatch.setattr(pg, "_disjoint", spans_only)
    p = tcplan.loads(WEIGHT.replace("T2", "16384"), "apart")
    _, rep = run_graph(p.spec.graph, tcplan.lower(p).plan, kinds(), 0, keep=())
    assert rep["verified"]
    p = tcplan.loads(WEIGHT.replace("T2", "12288"), "shared")
    with pytest.raises(TcplanError) as e:
        run_graph(p.spec.graph, tcplan.lower(p).plan, kinds(), 0, keep=())
    assert e.value.code == "verify-mismatch"
    text = str(e.value)
    assert "load2" in text and "t2" in text and "t1" in text


def test_hbm_pages_of_a_dead_tensor_are_released():
    """A released span reads zeros again on its whole pages, and only there."""
    mem = Memories({"hbm": (0, 1 << 22)})
    s = mem.space("hbm", 0)
    s.data[:] = 7
    s.release(4096 + 1, 3 * 4096 + 5)
    assert s.data[4096] == 7 and s.data[2 * 4096] == 0 and s.data[3 * 4096 - 1] == 0
    assert s.data[3 * 4096] == 7


# ---- twins: an op whose plan already ran, checked, is replayed ---------------------------

def _twice(text: str) -> str:
    """The graph's ops twice, as two launches: the second over tensors of its own (``*1``)
    at the same DM addresses, its HBM tensors one HBM decode period up."""
    import yaml

    from tcplan.model.hardware import HBM_DECODE_PERIOD
    d = yaml.safe_load(text)
    tensors, ops = {}, []
    for k in (0, 1):
        for n, t in d["tensors"].items():
            t = dict(t)
            if t.get("tier") == "hbm":
                t["address"] = t.get("address", 0) + k * HBM_DECODE_PERIOD
            tensors[f"{n}{k}"] = t
        for o in d["ops"]:
            o = {key: (f"{v}{k}" if isinstance(v, str) and v in d["tensors"] else v)
                 for key, v in o.items()}
            ops.append({**o, "name": f"{o['name']}{k}", "launch": f"l{k}"})
    d.pop("expect", None)
    return json.dumps({**d, "tensors": tensors, "ops": ops})  # (JSON is YAML, alias-free)


@pytest.mark.parametrize("name, replayed", [("contraction_op", {"gemv1"}), (
    "tu_path_collect_cast", {"fetch_x1", "collect_x1", "cast_x1", "commit_y1"})])
def test_a_twin_is_replayed_and_makes_what_running_it_makes(name, replayed):
    """The second launch's ops have the first's plans: those at the same addresses are
    replayed (not run again), each making the bits running it makes; a DMA moved by an HBM
    period has commands of its own and runs.  The contraction's second result is checked
    apart against numpy.einsum of its own operands (the replay computed it, not a copy)."""
    from tcplan.planner.graph_plan import plan_graph
    from tcplan.planner.kinds import Options
    from tcplan.planner.kinds.graph import twin_keys
    from tcplan.planner.outcome import unwrap
    text = _twice((ROOT / "problems/graphs" / f"{name}.yaml").read_text())
    g = tcplan.loads(text, f"{name}_twice.yaml").spec.graph
    gp = unwrap(plan_graph(g, Options(verify="none", jobs=1)))
    keys = twin_keys(g, gp)
    ran, rep = run_graph(g, gp, kinds(), 3)
    again, rep2 = run_graph(g, gp, kinds(), 3, twins=keys)
    assert rep["replayed"] == 0
    assert rep2["replayed"] == len(replayed) and rep2["verified"] is True
    assert {op.name for op in g.ops if op.launch == "l1" and keys[op.name] in {
        keys[o.name] for o in g.ops if o.launch == "l0"}} == replayed
    for n, v in ran.items():
        assert np.array_equal(v.view(np.uint8), again[n].view(np.uint8)), n
    if name == "contraction_op":
        assert keys["load_w1"] != keys["load_w0"]  # (moved: its own commands, run)
        from tcplan.model.numeric import NP_DTYPES

        def real(n: str) -> np.ndarray:  # (bf16 values as numbers, not their bits)
            t = g.tensors[n].spec
            return again[n].view(NP_DTYPES[t.get("dtype", "bf16")]).astype(np.float64)
        # (x over N and K, each slice's row: a slice holds N / 4 of it, its N % 4 digit 0)
        n = np.arange(1024)
        want = np.einsum("nk,nk->n", real("x1")[n - n % 4], real("w1"))
        assert np.allclose(again["y1"], want, rtol=1e-3, atol=1e-3)
        assert not np.array_equal(again["y1"], again["y0"])


def test_a_dead_tensors_bottom_padding_is_no_longer_forbidden():
    """A tensor's Bottom padding (#{!}) is forbidden while it lives; when its life ends the
    bytes are free for a tensor of a later launch: writing them is refused before
    ``clear_bottom`` and allowed after, the other bytes' marks untouched."""
    from tcplan.executor.run import clear_bottom
    p = tcplan.loads("""
kind: dma
axes: {A: 4, B: 6}
source: {tier: hbm, element: 'm![A, B #{!} 8]'}
destination: {tier: hbm, address: 4096, element: 'm![A, B]'}
stream: {time: 'm![A]', packet: 'm![B]'}
""", "bottom.yaml")
    t = p.tensors["source"]
    axes = dict(p.axes)
    mem = Memories(extents([t]))
    place(mem, t, axes, tensor_bits(axes, t.dtype, 0))
    space = mem.space("hbm", 0)
    pad = np.array([6], np.int64)  # (row 0's first padding element: B = 6 of 8)
    with pytest.raises(TcplanError) as ei:
        space.write(pad * t.elem_bytes, np.zeros((1, t.elem_bytes), np.uint8))
    assert "Bottom padding" in ei.value.message
    clear_bottom(mem, t, axes)
    space.write(pad * t.elem_bytes, np.zeros((1, t.elem_bytes), np.uint8))
    assert int(space.bottom.sum()) == 0  # (every mark was the dead tensor's)
