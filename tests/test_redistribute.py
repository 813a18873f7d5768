"""Redistribution: value semantics of docs/hardware.md section 6 on concrete tensors, and every
rule."""

import pathlib

import numpy as np
import pytest

from tcplan.model import redistribute as rd
from tcplan.model.rules import TcplanError
from tcplan.planner.spec import load_problem, load_problem_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "problems/seed"
SRC = [1, 2, 3, 0]
RNG = np.random.default_rng(0)
# in[p, k, b, c, d]: source chip p, cluster k, local element (b, c, d); B=4, C=8, D=8
IN = RNG.integers(-2**31, 2**31, size=(4, 2, 4, 8, 8), dtype=np.int64).astype(np.int32)


def run(name):
    p = load_problem(SEED / f"{name}.yaml")
    plan = rd.plan(p.tensors["source"], list(p.spec.steps), p.chips)
    out = plan.apply(IN.reshape(4, 2, -1)) if plan.source.tier == "dm" else None
    return p, plan, out


def test_chip_shuffle():
    p, plan, out = run("chip_shuffle")
    out = out.reshape(4, 2, 4, 8, 8)
    for t in range(4):
        assert np.array_equal(out[t], IN[SRC[t]])  # out[t, k, b, c, d] = in[sources[t], ...]
    assert plan.syncs == p.expect["syncs"] == ["ChipSync"]
    assert plan.result.dims["element"].text() == p.expect["element"]


def test_cluster_swap():
    p, plan, out = run("cluster_swap")
    out = out.reshape(4, 2, 4, 8, 8)
    for k in range(2):
        assert np.array_equal(out[:, k], IN[:, 1 - k])  # out[p, k, ...] = in[p, 1 - k, ...]
    assert plan.syncs == ["ClusterSync"]


def test_chip_slice():
    p, plan, out = run("chip_slice")
    out = out.reshape(4, 2, 8, 8)
    for t in range(4):
        assert np.array_equal(out[t], IN[t, :, [0, 1, 2, 3][t]])  # in[t, k, indices[t], c, d]
    assert plan.syncs == [] and plan.result.dims["element"].text() == "m![C, D]"


def test_cluster_slice():
    _, plan, out = run("cluster_slice")
    out = out.reshape(4, 2, 8, 8)
    for k in range(2):
        assert np.array_equal(out[:, k], IN[:, k, [1, 0][k]])  # in[p, k, indices[k], c, d]
    assert plan.syncs == []


def test_fused_redistribution():
    p, plan, out = run("fused_redistribution")
    out = out.reshape(4, 2, 8)
    for t in range(4):
        for k in range(2):
            # out[t, k, d] = in[sources[t], 1 - k, t, [3, 7][k], d]
            assert np.array_equal(out[t, k], IN[SRC[t], 1 - k, t, [3, 7][k]])
    assert plan.syncs == p.expect["syncs"] == ["ChipSync", "ClusterSync"]
    assert plan.result.dims["element"].text() == "m![D]"


def test_asymmetric_slices_are_local_copies():
    _, plan, out = run("asymmetric_chip_slice")
    out = out.reshape(4, 2, 8, 8)
    for t in range(4):
        assert np.array_equal(out[t], IN[t, :, [3, 0, 1, 2][t]])
    assert plan.syncs == []
    _, plan, out = run("asymmetric_cluster_slice")
    out = out.reshape(4, 2, 8, 8)
    for k in range(2):
        assert np.array_equal(out[:, k], IN[:, k, [1, 0][k]])
    assert plan.syncs == []


def test_hbm_chip_shuffle():
    p = load_problem(SEED / "hbm_chip_shuffle.yaml")
    plan = rd.plan(p.tensors["source"], list(p.spec.steps), p.chips)
    data = RNG.integers(0, 1000, size=(4, 256)).astype(np.int32)
    out = plan.apply(data)
    for t in range(4):
        assert np.array_equal(out[t], data[SRC[t]])  # out[t, e] = in[sources[t], e]


HEAD = """
kind: redistribute
chips: 4
dtype: i32
axes: {ChipAxis: 4, ClusterAxis: 2, B: 4, C: 8, D: 8}
source:
  tier: dm
  chip: 'm![ChipAxis]'
  cluster: CLUSTER
  slice: 'm![1 # 256]'
  element: 'm![B, C, D]'
steps:
"""


def plan_text(steps, cluster="'m![ClusterAxis]'"):
    p = load_problem_text(HEAD.replace("CLUSTER", cluster) + steps)
    return rd.plan(p.tensors["source"], list(p.spec.steps), p.chips)


@pytest.mark.parametrize("steps,cluster,rule", [
    ("  - chip_shuffle: [1, 1, 2, 3]\n", None, "shuffle-permutation"),
    ("  - chip_shuffle: [1, 2, 3]\n", None, "shuffle-permutation"),
    ("  - cluster_swap: true\n", "'m![1 # 2]'", "swap-two-clusters"),
    ("  - chip_slice: {axis: 'm![B]', output: 'm![C, D]', indices: [0, 1, 2]}\n", None,
     "slice-index"),
    ("  - chip_slice: {axis: 'm![B]', output: 'm![C, D]', indices: [0, 1, 2, 4]}\n", None,
     "slice-index"),
    ("  - cluster_slice: {axis: 'm![C]', output: 'm![B, D]', indices: [0, 1]}\n", None,
     None),  # C sits between B and D: contiguous, removing it leaves B, D: legal
    ("  - chip_slice: {axis: 'm![B, D]', output: 'm![C]', indices: [0, 1, 2, 3]}\n", None,
     "slice-axis"),  # B and D are not next to each other: one call per axis
    ("  - chip_slice: {axis: 'm![B]', output: 'm![D, C]', indices: [0, 1, 2, 3]}\n", None,
     "slice-axis"),
    ("  - cluster_swap: true\n  - chip_shuffle: [1, 2, 3, 0]\n", None, "redistribute-order"),
    ("  - asymmetric_chip_slice: {axis: 'm![B]', output: 'm![C, D]', indices: [0, 1, 2, 3]}\n"
     "  - cluster_swap: true\n", None, "redistribute-order"),
])
def test_constraints(steps, cluster, rule):
    if rule is None:
        plan = plan_text(steps, cluster or "'m![ClusterAxis]'")
        assert plan.result.dims["element"].text() == "m![B, D]"
        return
    with pytest.raises(TcplanError) as ei:
        plan_text(steps, cluster or "'m![ClusterAxis]'")
    assert ei.value.code == rule


def test_inactive_source_chip():
    text = HEAD.replace("CLUSTER", "'m![ClusterAxis]'").replace(
        "chips: 4", "chips: 8").replace("chip: 'm![ChipAxis]'", "chip: 'm![ChipAxis # 8]'")
    p = load_problem_text(text + "  - chip_shuffle: [4, 2, 3, 0, 1, 5, 6, 7]\n")
    with pytest.raises(TcplanError) as ei:
        rd.plan(p.tensors["source"], list(p.spec.steps), p.chips)
    assert ei.value.code == "inactive-source" and "source chip 4" in ei.value.message


def _walk(entries, base, k):
    addrs = np.array([base], np.int64)
    for e in entries:
        addrs = (addrs[:, None] + np.arange(e[0]) * e[k] * 4).ravel()  # i32: 4 bytes
    return addrs


def test_fused_redistribution_descriptors():
    _, plan, _ = run("fused_redistribution")
    descs = plan.descriptors()
    assert len(descs) == 8  # one command per target chip and cluster
    for d in descs:
        t, k = d["target"]
        rchip, raddr = d["read"]
        wchip, waddr = d["write"]
        assert (rchip, wchip) == (SRC[t], t)
        reads = _walk(d["entries"], raddr, 1)
        writes = _walk(d["entries"], waddr, 2)
        # out[t, k, d] = in[sources[t], 1 - k, t, [3, 7][k], d]: cluster 1 - k, slice 0,
        # element (t * 8 + [3, 7][k]) * 8 + d
        want_r = [(1 - k) * 2**30 + ((t * 8 + [3, 7][k]) * 8 + dd) * 4 for dd in range(8)]
        # the result is a new tensor placed after the source (4 * 8 * 8 i32 = 1,024 B)
        want_w = [k * 2**30 + 1024 + dd * 4 for dd in range(8)]
        assert reads.tolist() == want_r and writes.tolist() == want_w


def test_hbm_chip_shuffle_descriptors():
    p = load_problem(SEED / "hbm_chip_shuffle.yaml")
    plan = rd.plan(p.tensors["source"], list(p.spec.steps), p.chips)
    assert [(d["read"][0], d["write"][0], d["entries"]) for d in plan.descriptors()] == [
        (SRC[t], t, [[256, 1, 1]]) for t in range(4)]
