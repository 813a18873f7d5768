"""Kernel planning problems whose HBM layout (an HBM tensor's Element order) is free:
problems/planning/{kv_cache_fp8_k_half, attention_v_cache, attention_out_proj_weight,
mlp_down_proj, rope_table, gqa_k_cache, lm_head_tile}_free_source.yaml and
kv_cache_append_v_free_dest.yaml.

Each file solves optimal and verified; a small variant of each (the same mappings, the axes
shrunk) and the files themselves plan the cheapest of every HBM layout x stream order x
packet (itertools, not the planner's CP-SAT models); and against the naive row-major layout
(the axes in the order of ``axes:``) the free layout's cycles are derived from the cost
model (model/cost.py): one start-up of 500, an engine issuing one 256-byte request per
cycle, each DMN moving 128 B/cycle, and each HBM channel 16/3 cycles per request over the
channels the addresses reach (the bus floor)."""

from __future__ import annotations

import io
import itertools
import json
import math
import pathlib

import pytest
import yaml

from tcplan.model.cost import dma_cycles, lower_bound
from tcplan.model.hbm_bits import bit_report, moved_by
from tcplan.model.mapping import join
from tcplan.model.tiers import Tensor
from tcplan.planner.cli import main
from tcplan.planner.dma_plan import plan_free
from tcplan.planner.dma_spec import DmaSpec
from tcplan.planner.outcome import NoPlan, unwrap
from tcplan.planner.spec import Problem, load_problem, load_problem_text
from test_free_source import cheapest_over_sources
from test_layout_planner import brute_force

ROOT = pathlib.Path(__file__).resolve().parents[1]
PLANNING = ROOT / "problems/planning"

NEW_SOURCES = ["kv_cache_fp8_k_half_free_source", "attention_v_cache_free_source",
               "attention_out_proj_weight_free_source", "mlp_down_proj_free_source",
               "rope_table_free_source", "gqa_k_cache_free_source",
               "lm_head_tile_free_source"]
NEW_DESTS = ["kv_cache_append_v_free_dest"]
NEW = NEW_SOURCES + NEW_DESTS

#: each new problem at a small size: its mappings with the axes shrunk (a Slice padded to
#: the 64 slices a DM Slice takes at least where the shrunk digits hold fewer)
SMALL = {
    "kv_cache_fp8_k_half_free_source": """kind: dma
dtype: f8e4m3
axes: {S: 256, H: 4, E: 512}
source: {tier: hbm, address: 0, element: free}
destination: {tier: dm, cluster: 'm![H / 2]', slice: 'm![H % 2, S / 4]',
              element: 'm![S % 4, E % 256]'}
stream: {cluster: 'm![H / 2]', slice: 'm![H % 2]', time: free, packet: free}
""",
    "attention_v_cache_free_source": """kind: dma
dtype: bf16
axes: {S: 16, H: 4, D: 16}
source: {tier: hbm, element: free}
destination: {tier: dm, slice: 'm![H, D / 8 # 16]', element: 'm![D % 8, S]'}
stream: {time: free, packet: free}
""",
    "attention_out_proj_weight_free_source": """kind: dma
dtype: bf16
axes: {H: 4, D: 8, N: 32}
source: {tier: hbm, element: free}
destination: {tier: dm, slice: 'm![H, N / 8 # 16]', element: 'm![D, N % 8]'}
stream: {time: free, packet: free}
""",
    "mlp_down_proj_free_source": """kind: dma
dtype: bf16
axes: {F: 32, N: 16}
source:
  tier: hbm
  element:
    free: true
    allowed: ['m![F, N]', 'm![N, F]', 'm![N / 4, F, N % 4]', 'm![F / 16, N / 4, F % 16, N % 4]']
destination: {tier: dm, cluster: 'm![F / 16]', slice: 'm![N / 4 # 64]',
              element: 'm![F % 16, N % 4]'}
stream: {cluster: 'm![F / 16]', time: free, packet: free}
""",
    "rope_table_free_source": """kind: dma
dtype: bf16
axes: {P: 64, CS: 2, R: 8}
source: {tier: hbm, element: free}
destination: {tier: dm, slice: 'm![P / 8 # 64]', element: 'm![CS, P % 8, R]'}
stream: {time: free, packet: free}
""",
    "gqa_k_cache_free_source": """kind: dma
dtype: bf16
axes: {S: 32, G: 4, D: 8}
source: {tier: hbm, element: free}
destination: {tier: dm, slice: 'm![G, S / 8 # 64]', element: 'm![S % 8, D]'}
stream: {slice: 'm![G]', time: free, packet: free}
""",
    "lm_head_tile_free_source": """kind: dma
dtype: bf16
axes: {V: 64, E: 16}
source: {tier: hbm, element: free}
destination: {tier: dm, cluster: 'm![E / 8]', slice: 'm![V / 8 # 64]',
              element: 'm![V % 8, E % 8]'}
stream: {cluster: 'm![E / 8]', time: free, packet: free}
""",
    "kv_cache_append_v_free_dest": """kind: dma
dtype: bf16
axes: {T: 8, H: 4, D: 16}
source: {tier: dm, slice: 'm![H, D / 8 # 16]', element: 'm![D % 8, T]'}
destination: {tier: hbm, element: free}
stream: {time: free, packet: free}
""",
}


def _with(p: Problem, **tensors: Tensor) -> Problem:
    """``p`` with some tensors given and only its stream free."""
    return Problem(p.path, p.name, p.kind, p.chips, p.dtype, p.axes, {**p.tensors, **tensors},
                   DmaSpec(free=p.spec.free))


def destination_costs(p: Problem) -> list[int | None]:
    """A free HBM destination Element (``spec.free_element``: its terms, the prefix's
    outermost): per Element order, the least estimate over every order and packet of the
    stream by itertools (None: no legal plan)."""
    fe = p.spec.free_element
    dst = p.tensors["destination"]
    rest = [t for t in fe.terms if t not in fe.prefix]
    costs = []
    for order in itertools.permutations(rest):
        dims = dict(dst.dims)
        dims["element"] = join(list(fe.prefix) + list(order))
        costs.append(brute_force(_with(p, destination=Tensor(
            dst.name, dst.tier, dst.dtype, dims, dst.address))))
    return costs


def source_costs(p: Problem) -> list[int | None]:
    """Per source Element candidate, test_free_source.cheapest_over_sources of that one
    candidate: the least estimate over every stream order and packet (itertools)."""
    return [brute_force(_with(p, source=src)) for _, src in p.spec.free_source]


def _candidates(p: Problem) -> int:
    if p.spec.free_source is not None:
        return len(list(p.spec.free_source))
    fe = p.spec.free_element
    return math.factorial(len(fe.terms) - len(fe.prefix))


def _chosen(found) -> str:
    """The HBM Element the plan chose (the source's, else the destination's)."""
    plan = found.best.plan
    side = plan.source if plan.source.tier == "hbm" else plan.destination
    return side.dims["element"].text()


# ---- the files -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", NEW)
def test_every_new_problem_solves_optimal_and_verified(name):
    path = PLANNING / f"{name}.yaml"
    text = path.read_text()
    assert text.startswith("# ") and "\nformat: 1\n" in text
    p = load_problem(path)
    assert p.name == name and p.expect == {"status": "optimal", "verified": True}
    assert (p.spec.free_source is not None) == name.endswith("_free_source")
    assert (p.spec.free_element is not None) == name.endswith("_free_dest")
    out = io.StringIO()
    assert main(["solve", str(path), "--json"], stdout=out) == 0
    r = json.loads(out.getvalue())
    assert r["status"] == "optimal" and r["verified"] is True, r["status"]
    assert r["cycles"] >= r["lower_bound"]


# ---- brute force ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", NEW)
def test_small_variant_plans_the_cheapest_layout_of_every_layout_and_order(name):
    """Every HBM Element order of the small variant, for each every stream order and packet
    (itertools), against the planner; the variant keeps the file's candidates (as many
    layouts), and its layouts do not all cost the same (a wrong choice would show)."""
    p = load_problem_text(SMALL[name], f"<small {name}>")
    assert _candidates(p) == _candidates(load_problem(PLANNING / f"{name}.yaml"))
    costs = source_costs(p) if name in NEW_SOURCES else destination_costs(p)
    legal = [c for c in costs if c is not None]
    assert legal and max(legal) > min(legal), costs
    out = plan_free(p)
    found = unwrap(out)
    assert out.status == "optimal"
    assert found.best.cycles == min(legal), (_chosen(found), sorted(set(legal)))
    assert lower_bound(found.best.plan) <= found.best.cycles


@pytest.mark.parametrize("name", NEW_SOURCES)
def test_new_problem_at_full_size_is_the_cheapest_source_layout(name):
    """The files themselves: every source order x stream order x packet."""
    p = load_problem(PLANNING / f"{name}.yaml")
    best = cheapest_over_sources(p)
    out = plan_free(p)
    found = unwrap(out)
    assert out.status == "optimal" and found.best.cycles == best, _chosen(found)


@pytest.mark.parametrize("name", NEW_DESTS)
def test_new_problem_at_full_size_is_the_cheapest_destination_layout(name):
    p = load_problem(PLANNING / f"{name}.yaml")
    best = min(c for c in destination_costs(p) if c is not None)
    out = plan_free(p)
    found = unwrap(out)
    assert out.status == "optimal" and found.best.cycles == best, _chosen(found)


# ---- against the row-major layout ----------------------------------------------------------


def row_major(name: str) -> Problem:
    """The file with its free HBM Element given row-major (the axes in declared order)."""
    data = yaml.safe_load((PLANNING / f"{name}.yaml").read_text())
    side = "source" if name.endswith("_free_source") else "destination"
    data[side]["element"] = "m![" + ", ".join(data["axes"]) + "]"
    del data["expect"]
    return load_problem_text(yaml.safe_dump(data, sort_keys=False), f"<row-major {name}>")


FP8_ROW_MAJOR = """kind: dma
dtype: f8e4m3
axes: {S: 1024, H: 8, E: 512}
source: {tier: hbm, address: 0, element: 'm![S, H, E]'}
destination:
  tier: dm
  cluster: 'm![H / 4]'
  slice: 'm![H % 4, S / 16]'
  element: 'm![S % 16, E % 256]'
stream:
  cluster: 'm![H / 4]'
  slice: 'm![H % 4]'
  time: free
  packet: free
"""


def test_fp8_k_half_free_layout_beats_the_row_major_cache_by_the_stack_bit():
    """The transfer moves E % 256 (K) of every token and head: 1,024 x 8 x 256 B = 2 MiB,
    8,192 requests of 256 B, on 8 engines (H), each 1,024 requests (1,524 cycles with its
    start-up) written over the two DMNs of its pair (256 KiB / 256 B/cycle, the same).
    Row-major m![S, H, E] puts E / 256 (V, never read) on address bit 8, the stack bit:
    every request reaches only 16 of the 32 channels, so the bus floor is
    500 + 8,192 / 16 x 16/3 = 3,230.7 -> 3,231.  A free layout moves a varying digit onto
    bit 8 and reaches all 32: 500 + 8,192 / 32 x 16/3 = 1,865.3 -> 1,866, above the
    engines' 1,524; ratio 3,231 / 1,866 = 1.73."""
    out = io.StringIO()
    path = PLANNING / "kv_cache_fp8_k_half_free_source.yaml"
    assert main(["solve", str(path), "--json"], stdout=out) == 0
    free = json.loads(out.getvalue())
    assert free["status"] == "optimal" and free["verified"]
    assert free["cycles"] == free["lower_bound"] == 1_866
    bit8 = free["plan"]["hbm_bits"]["source"][0]
    assert bit8["bit"] == 8 and bit8["varies"] and bit8["holds"] != "E / 256", bit8

    p = load_problem_text(FP8_ROW_MAJOR, "<fp8 row-major>")
    rows = {r["bit"]: r for r in bit_report(p.tensors["source"],
                                            moved_by(p.tensors["destination"]))}
    assert rows[8]["holds"] == "E / 256" and not rows[8]["varies"]
    out = plan_free(p)
    found = unwrap(out)
    plan = found.best.plan
    assert out.status == "optimal"
    assert found.best.cycles == dma_cycles(plan).cycles == lower_bound(plan) == 3_231
    assert found.best.cycles / free["cycles"] >= 1.5


#: (problem, free cycles, row-major cycles or None when the row-major layout has no plan),
#: each derived in the comment above it
ROW_MAJOR_CASES = [
    # 8 x 64 x 512 bf16 = 512 KiB on one engine.  Free: each slice's block (a head's 64 rows
    # of 64 columns, 8 KiB) contiguous, 4 KiB packets: 2,048 requests -> 500 + 2,048.
    # Row-major m![H, D, N]: the common contiguous run is N % 64, 128 B, one request per
    # packet: 4,096 requests -> 500 + 4,096 (1.80x).
    ("attention_out_proj_weight_free_source", 2_548, 4_596),
    # 2,048 x 2 x 64 bf16 = 512 KiB on one engine.  Free: a slice's cos and sin rows of 32
    # positions (8 KiB) contiguous: 2,048 requests -> 2,548.  Row-major m![P, CS, R]
    # interleaves cos and sin per position: 128-byte runs (R), 4,096 requests -> 4,596.
    ("rope_table_free_source", 2_548, 4_596),
    # 1,024 x 256 bf16 = 512 KiB on 2 engines (the clusters' F / 512), 256 KiB each.  Free:
    # a blocked layout keeps each slice's 512 x 4 block (4 KiB) contiguous: 1,024 requests
    # -> 1,524.  Row-major (K-major) m![F, N]: the common contiguous run is N % 4, 8 B, one
    # request per packet: 256 KiB / 8 B = 32,768 requests -> 33,268 (21.8x).
    ("mlp_down_proj_free_source", 1_524, 33_268),
    # 512 x 8 x 64 bf16 = 512 KiB on one engine.  Free: a head's V transposed, S runs of
    # 1 KiB: 2,048 requests -> 2,548.  Row-major m![S, H, D] holds D contiguous, the slices
    # S: no run of 8 bytes is contiguous on both sides (the DMA's alignment), no plan.
    ("attention_v_cache_free_source", 2_548, None),
    # 64 x 8 x 64 bf16 = 64 KiB on one engine: 1 KiB packets (a slice's T row of a column),
    # 256 requests -> 756.  Row-major m![T, H, D] in HBM against T-contiguous rows in DM: no
    # run of two elements is contiguous on both sides; a write into HBM has no alignment
    # rule (docs/decisions.md item 115), so 2-byte packets: 32,768 requests -> 33,268 (44x).
    ("kv_cache_append_v_free_dest", 756, 33_268),
    # 1,024 x 4 x 128 bf16 = 1 MiB on 4 engines (G), 256 KiB each: 1,024 requests -> 1,524,
    # above the bus floor 500 + 4,096 / 32 x 16/3 = 1,183.  Row-major m![S, G, D] reads
    # 256-byte rows (D), the same requests; G % 2 on the stack bit varies across the
    # engines, so all 32 channels: row-major is already the best (1.0x).
    ("gqa_k_cache_free_source", 1_524, 1_524),
    # 2,048 x 256 bf16 = 1 MiB on 2 engines (E / 128): 2,048 requests each -> 2,548.
    # Row-major m![V, E]: 256-byte runs (E % 128), the same count; E / 128 on the stack bit
    # varies across the engines: already the best (1.0x).
    ("lm_head_tile_free_source", 2_548, 2_548),
]


@pytest.mark.parametrize("name,free,naive", ROW_MAJOR_CASES, ids=[c[0] for c in
                                                                   ROW_MAJOR_CASES])
def test_free_layout_against_row_major(name, free, naive):
    found = unwrap(plan_free(load_problem(PLANNING / f"{name}.yaml")))
    assert found.best.cycles == dma_cycles(found.best.plan).cycles == free
    if naive is None:
        out = plan_free(row_major(name))
        assert isinstance(out, NoPlan) and out.error.code == "plan-no-layout"
        return
    rm_out = plan_free(row_major(name))
    rm = unwrap(rm_out)
    assert rm_out.status == "optimal"
    assert rm.best.cycles == dma_cycles(rm.best.plan).cycles == naive
    assert free <= naive
