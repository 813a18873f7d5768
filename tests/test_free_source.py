"""A free HBM source Element (issue 15, first part): the source's layout in HBM is chosen
with the stream (docs/decisions.md item 76)."""

from __future__ import annotations

import io
import json
import pathlib
import random

import pytest

from tcplan.model.cost import lower_bound
from tcplan.model.rules import TcplanError
from tcplan.planner.cli import main
from tcplan.planner.dma_plan import plan_free
from tcplan.planner.dma_spec import DmaSpec
from tcplan.planner.outcome import Found, NoPlan, unwrap
from tcplan.planner.spec import Problem, load_problem, load_problem_text
from test_layout_planner import brute_force

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_example_5_with_its_source_free_reaches_the_32_channel_bus_floor():
    """The seed's Example 5 loses half its bandwidth to D / 256 on bit 8; with the source's
    layout free the plan reaches every channel: 500 + 4,096 / 32 x 16/3 = 1,183 cycles,
    1.58x the given 1,866 (the naive row-major source)."""
    out = io.StringIO()
    path = str(ROOT / "problems/planning/dma_example_5_free_source.yaml")
    assert main(["solve", path, "--json"], stdout=out) == 0
    r = json.loads(out.getvalue())
    assert r["verified"] and r["status"] == "optimal"
    assert r["cycles"] == r["lower_bound"] == 1_183 <= 1_200
    assert 1_866 / r["cycles"] >= 1.55
    bits = r["plan"]["hbm_bits"]["source"]
    assert bits[0]["bit"] == 8 and bits[0]["varies"], bits[0]
    assert r["plan"]["stream"]["source_element"].startswith("m![")


def small_problem(seed: int) -> Problem:
    """A small HBM -> DM transfer whose source layout and stream are free."""
    rng = random.Random(seed)
    names = ["A", "B", "C"][:rng.choice([2, 3])]
    axes = {a: rng.choice([2, 4, 8, 16, 32]) for a in names}
    dst = names[:]
    rng.shuffle(dst)
    slice_axis = dst.pop(0)
    text = f"""kind: dma
dtype: {rng.choice(['i8', 'bf16'])}
axes: {{{', '.join(f'{a}: {v}' for a, v in axes.items())}}}
source: {{tier: hbm, element: free}}
destination: {{tier: dm, slice: 'm![{slice_axis} # 64]', element: 'm![{', '.join(dst)}]'}}
stream: {{time: free, packet: free}}
"""
    return load_problem_text(text, f"<free source {seed}>")


def cheapest_over_sources(p: Problem) -> int | None:
    """The least estimate over every source candidate, each by itertools over every order
    and packet of the stream (None: no candidate has a legal plan)."""
    costs = [brute_force(Problem(p.path, p.name, p.kind, p.chips, p.dtype, p.axes,
                                 {**p.tensors, "source": src}, DmaSpec(free=p.spec.free)))
             for _, src in p.spec.free_source]
    return min((c for c in costs if c is not None), default=None)


@pytest.mark.parametrize("seed", range(10))
def test_the_plan_is_the_cheapest_of_every_source_layout_and_order(seed):
    """Every source Element order, and for each every order and packet of the stream
    (itertools), against the planner."""
    p = small_problem(seed)
    best = cheapest_over_sources(p)
    out = plan_free(p)
    if not isinstance(out, Found):  # no source layout has a legal plan (8-byte alignment)
        assert best is None and isinstance(out, NoPlan) and out.error.code == "plan-no-layout"
        return
    found = out.record
    assert found.best.cycles == best, (seed, found.best.plan.source.dims["element"].text())
    assert lower_bound(found.best.plan) <= found.best.cycles


def test_every_order_of_the_cut_digits_is_a_candidate():
    p = load_problem(ROOT / "problems/planning/dma_example_5_free_source.yaml")
    texts = [t for t, _ in p.spec.free_source]
    assert len(texts) == 720  # every order of A / 4, A % 4, B, C, D / 256, D % 256
    assert "m![A / 4, A % 4, B, C, D / 256, D % 256]" in texts


@pytest.mark.parametrize("source,why", [
    ("{tier: dm, slice: 'm![1 # 64]', element: free}", "only an HBM source"),
    ("{tier: hbm, element: {free: true, prefix: 'm![Z]'}}", "unknown"),
    ("{tier: hbm, element: {free: true, prefix: 'm![B]'}}", "not among the source's digits"),
    ("{tier: hbm, element: {free: true, allowed: []}}", "expected a list"),
])
def test_bad_free_sources_are_located(tmp_path, source, why):
    f = tmp_path / "p.yaml"
    f.write_text(f"""kind: dma
dtype: i8
axes: {{A: 64, B: 4, C: 16}}
source: {source}
destination: {{tier: dm, slice: 'm![A]', element: 'm![B % 2, C]'}}
stream: {{time: free, packet: free}}
""")
    out, err = io.StringIO(), io.StringIO()
    assert main(["solve", str(f)], stdout=out, stderr=err) == 2, err.getvalue()
    assert "p.yaml:4:" in err.getvalue() and why in err.getvalue(), err.getvalue()


def test_a_free_source_needs_a_given_placement_and_with_a_free_element_a_free_stream():
    head = "kind: dma\ndtype: i8\naxes: {A: 64, C: 16}\nsource: {tier: hbm, element: free}\n"
    with pytest.raises(TcplanError, match="is planned with its stream"):
        load_problem_text(head + "destination: {tier: dm, slice: 'm![A]', element: free}\n",
                          "<x>")
    with pytest.raises(TcplanError, match="with the destination's placement given"):
        load_problem_text(head + "destination: {tier: dm, slice: free, element: free}\n"
                          "stream: {time: free, packet: free}\n", "<x>")


@pytest.mark.parametrize("name", ["mlp_weight_free_source", "embedding_table_free_source"])
def test_kernel_problems_with_a_free_source_are_the_cheapest_layout(name):
    """Library problems at full size: every source order x stream order x packet."""
    p = load_problem(ROOT / f"problems/planning/{name}.yaml")
    best = cheapest_over_sources(p)
    out = plan_free(p)
    found = unwrap(out)
    assert found.best.cycles == best and out.status == "optimal"


def test_example_4_with_its_source_free_plans_at_its_bus_floor():
    """120 source orders; the plan reaches 500 + 16,384 x 16/3 (docs/decisions.md item 73)."""
    from tcplan.model.cost import dma_cycles
    out = plan_free(load_problem(ROOT / "problems/planning/dma_example_4_free_source.yaml"))
    found = unwrap(out)
    plan = found.best.plan
    assert out.status == "optimal"
    assert found.best.cycles == dma_cycles(plan).cycles == lower_bound(plan) == 87_882
