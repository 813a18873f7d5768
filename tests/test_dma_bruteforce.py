"""Brute-force oracle for DMA lowering: run every engine's commands as loop nests and check, for
every move, that the source address holds the tensor index the destination address must hold.

The oracle knows nothing of the derivation: it evaluates the source and destination mappings
cell by cell (tree semantics), places them with the address model (HBM byte offsets, the DM
virtual address of docs/hardware.md R10, one address space per chip) and compares.
"""

import pathlib

import numpy as np
import pytest

from tcplan.model import dma
from tcplan.model.mapping import LIVE
from tcplan.model.tiers import dm_address
from tcplan.planner.spec import load_problem, load_problem_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "problems/seed"
CHIP = 2**40  # the oracle's own chip space (any value above every per-chip address)
DIMS = {"hbm": ("chip", "element"), "host": ("element",),
        "dm": ("chip", "cluster", "slice", "element")}


def placed(t, axes):
    """(address, linear tensor index, live) of every position of tensor ``t``."""
    dims = DIMS[t.tier]
    shape = [t.dims[d].size for d in dims]
    grids = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    live = np.ones(shape, bool)
    coords = {a: np.zeros(shape, np.int64) for a in axes}
    for d, g in zip(dims, grids):
        c, st = t.dims[d].evaluate(g.ravel())
        live &= (st == LIVE).reshape(shape)
        for a, v in c.items():
            coords[a] += v.reshape(shape)
    lin = np.zeros(shape, np.int64)
    for a, size in axes.items():
        live &= coords[a] < size  # an index past an axis is padding
        lin = lin * size + coords[a]
    pos = dict(zip(dims, grids))
    off = t.address + pos["element"] * t.elem_bytes
    if t.tier == "dm":
        addr = dm_address(pos["cluster"], pos["slice"], off)
    else:
        addr = off
    addr = addr + pos.get("chip", 0) * CHIP
    return addr.ravel(), lin.ravel(), live.ravel()


def run_commands(plan, src, dst):
    reads, writes = [], []
    for e in plan.engines:
        for c in e.commands:
            r = np.array([c.read_base], np.int64)
            w = np.array([c.write_base], np.int64)
            for n, rs, ws in c.entries:
                k = np.arange(n, dtype=np.int64)
                r = (r[:, None] + k * rs * plan.elem_bytes).ravel()
                w = (w[:, None] + k * ws * plan.elem_bytes).ravel()
            rc = 0 if src.tier == "host" else e.read_chip
            wc = 0 if dst.tier == "host" else e.write_chip
            reads.append(r + rc * CHIP)
            writes.append(w + wc * CHIP)
    return np.concatenate(reads), np.concatenate(writes)


def check(problem):
    t = problem.tensors
    src, dst = t["source"], t["destination"]
    plan = dma.lower(src, dst, t["stream"], problem.chips, problem.spec.engine_at,
                     pcie=problem.kind == "pcie")
    sa, si, sl = placed(src, problem.axes)
    da, di, dl = placed(dst, problem.axes)
    R, W = run_commands(plan, src, dst)
    src_of = dict(zip(sa[sl].tolist(), si[sl].tolist()))
    dst_live = dict(zip(da[dl].tolist(), di[dl].tolist()))
    dst_any = set(da.tolist())  # live slots and padding slots of the destination
    written: dict[int, int] = {}
    for r, w in zip(R.tolist(), W.tolist()):
        assert w in dst_any, f"write at {w} outside the destination"
        if w in dst_live:
            assert r in src_of, f"a live slot {w} gets a non-live source address {r}"
            assert src_of[r] == dst_live[w], f"slot {w} gets index {src_of[r]}"
            written[w] = written.get(w, 0) + 1
    assert set(written) == set(dst_live), "live destination slots never written"
    assert max(written.values()) == 1, "a live slot written twice"
    return plan


@pytest.mark.parametrize("name", ["dma_example_1", "dma_example_6", "transpose_step1",
                                  "transpose_step2", "hbm_to_dm_cluster_padding", "pcie_upload",
                                  "pcie_download"])
def test_seed_transfers(name):
    check(load_problem(SEED / f"{name}.yaml"))


SMALL = {
    # padding in a Time term that the destination has no room for: moved as 13, not 16
    "time_padding": """
kind: dma
axes: {A: 13, C: 4}
source: {tier: hbm, element: 'm![A, C]'}
destination: {tier: hbm, address: 4096, element: 'm![C, A]'}
stream: {time: 'm![A # 16, C]', packet: 'm![1]'}
""",
    # padding in the Packet with no room: 200-element packets
    "packet_padding": """
kind: dma
axes: {A: 200, B: 3}
source: {tier: hbm, element: 'm![B, A]'}
destination: {tier: hbm, address: 65536, element: 'm![B, A]'}
stream: {time: 'm![B]', packet: 'm![A # 256]'}
""",
    # padding both sides have room for: whole padded rows move
    "padded_rows": """
kind: dma
dtype: bf16
axes: {A: 64, B: 5, C: 4}
source: {tier: dm, slice: 'm![A]', element: 'm![C, B # 8]'}
destination: {tier: hbm, address: 8, element: 'm![C, A, B # 8]'}
stream: {time: 'm![C, A]', packet: 'm![B # 8]'}
""",
    # 2 chips x 2 clusters x 4 engines, cross-chip reads
    "cross_chip": """
kind: dma
chips: 2
axes: {A: 2, B: 16, C: 64}
source: {tier: hbm, chip: 'm![A]', element: 'm![B, C]'}
destination: {tier: hbm, chip: 'm![1 # 2]', address: 4096, element: 'm![A, B, C]'}
stream: {chip: 'm![A]', cluster: 'm![B / 8]', slice: 'm![B / 2 % 4]', time: 'm![B % 2]',
         packet: 'm![C]'}
""",
    # an uneven axis over engines and chips (Example 6 in small)
    "uneven": """
kind: dma
chips: 2
axes: {A: 11, B: 2, C: 16}
source: {tier: hbm, chip: 'm![B]', element: 'm![A # 16, C]'}
destination: {tier: hbm, chip: 'm![B]', address: 8192, element: 'm![C, A]'}
stream: {chip: 'm![B]', slice: 'm![(A # 16) / 4]', time: 'm![(A # 16) / 2 % 2, (A # 16) % 2]',
         packet: 'm![C]'}
""",
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_transfers(name):
    plan = check(load_problem_text(SMALL[name]))
    if name == "time_padding":
        assert plan.unified[0][0] == 13
    if name == "packet_padding":
        assert plan.packet == 200
    if name == "padded_rows":
        assert plan.packet == 8
    if name == "uneven":
        assert not plan.homogeneous
