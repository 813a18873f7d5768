"""Bound before planning (planner/graph_bound.py, docs/decisions.md item 139): an op's
layouts searched in order of floor, the rest avoided, the joint choice unchanged.  Checked
against the choice over every row on every graph of problems/graphs and on Qwen3 kernel
graphs; each floor against the cycles of every plan its search lowers; the branch and
bound's order and stop, and the rows a fixed boundary brings back, on small tables."""

from __future__ import annotations

from pathlib import Path

import pytest

import tcplan
from tcplan.model.cost import dma_cycles
from tcplan.planner import graph_bound
from tcplan.planner.graph_bound import Avoided, Floor, Rows, Stage, Table
from tcplan.planner.graph_plan import OpChoice, choose, evaluate, plan_graph, with_op_plans
from tcplan.planner.kinds import Options
from tcplan.planner.op_cache import DiskCache, OpPlans
from tcplan.planner.outcome import Found
from tcplan.planner.registry import Staged
from test_graph_ideal import FILES, _value

ROOT = Path(__file__).resolve().parents[1]


def _opts(**kw) -> Options:
    return Options(verify="none", jobs=1, **{"op_plans": OpPlans(), **kw})


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_bounded_plan_is_the_choice_over_every_row(path):
    g = tcplan.load(path).spec.graph
    bounded = plan_graph(g, _opts())
    table = evaluate(g, with_op_plans(_opts()))  # (every row planned: no bound)
    assert not table.avoided
    full = choose(g, table, None, 10.0, 0)
    assert isinstance(bounded, Found) == isinstance(full, Found)
    if isinstance(full, Found):
        assert _value(g, bounded) == _value(g, full)
        assert bounded.record.status == full.record.status


def test_some_graphs_avoid_plans_and_one_needs_them_back():
    """The decode layer's kernels avoid plans; weight_loaded_three_times, whose store and
    loads pull the weight's layout apart (no ideal choice), plans them back for the model."""
    attention = plan_graph(tcplan.load(
        ROOT / "problems/kernels/qwen3/attention_forward_free.yaml").spec.graph, _opts())
    assert attention.record.op_plans["avoided"] > 0
    g = tcplan.load(ROOT / "problems/graphs/weight_loaded_three_times.yaml").spec.graph
    opts = with_op_plans(_opts())
    table = evaluate(g, opts, bound=True)
    before = sum(len(a) for a in table.avoided.values())
    full = evaluate(g, with_op_plans(_opts()))
    out = choose(g, table, None, 10.0, 0, lambda: (table.complete(list(g.order)), table)[1])
    assert before > 0 and not any(table.avoided.values())
    assert sorted(len(r) for r in table.values()) == sorted(len(r) for r in full.values())
    assert _value(g, out) == _value(g, choose(g, full, None, 10.0, 0))


def test_a_floor_never_exceeds_the_cycles_of_a_plan_its_search_lowers():
    """Each DMA op of every graph under each layout: its staged floor against the full
    cycle model of every plan its search lowers (not only the best)."""
    from tcplan.planner.dma_plan import staged_free
    checked = 0
    for path in FILES:
        checked += _floors_checked(tcplan.load(path).spec.graph, staged_free)
    assert checked > 100


def _floors_checked(g, staged_free) -> int:
    checked = 0
    for op in g.ops:
        if op.kind != "dma":
            continue
        for layout in g.choices(op):
            problem = g.op_problem(op, layout)
            if not problem.spec.planned:
                continue
            search = staged_free(problem, 10.0, 0, 1, False)
            assert search is not None
            floor = search.floor()
            out = search.run()
            if floor is None or not isinstance(out, Found):
                continue
            for c in out.record.candidates:
                assert dma_cycles(c.plan).cycles >= floor, (op.name, layout)
                checked += 1
    return checked


def _stage(floor, cycles, ran: list):
    def run():
        ran.append(cycles)
        return None, cycles, True
    return Stage(None, Staged(lambda: floor, run))


def test_rows_are_searched_in_order_of_floor_until_the_next_floor_exceeds_the_best(
        monkeypatch):
    ran: list[int] = []
    floors = {"a": 5, "b": 3, "c": 9, "d": 3, "e": None, "f": 4}
    cycles = {"a": 6, "b": 4, "c": 10, "d": 4, "e": 7, "f": 5}
    monkeypatch.setattr(graph_bound, "stage_op", lambda g, op, layout, opts: _stage(
        floors[layout["t"]], cycles[layout["t"]], ran))
    monkeypatch.setattr(graph_bound, "finish_op", lambda g, op, layout, s: (
        None, *s.staged.run()[1:], None))
    layouts = tuple({"t": k} for k in floors)
    out = graph_bound.plan_rows(None, None, Rows(layouts), None)
    # no floor first (7), then 3 (4), 3 (4, a tie: planned), 4 (5: 4 <= the best, 4)
    assert ran == [7, 4, 4, 5]
    assert out[0] == Floor(5) and out[2] == Floor(9)
    assert [o[1] for k, o in enumerate(out) if k not in (0, 2)] == [4, 4, 7, 5]
    ran.clear()
    graph_bound.plan_rows(None, None, Rows(layouts, best=3), None)  # (3 known before)
    assert ran == [7, 4, 4]  # floors 4, 5 and 9 exceed 3


def _row(t: str, cost: int) -> OpChoice:
    return OpChoice({"t": t}, None, cost)


def test_a_fixed_boundary_brings_back_the_avoided_rows_that_could_win_under_it():
    planned: list = []
    table = Table({0: [_row("x", 100), _row("y", 300)]},
                  {0: [Avoided({"t": "y2"}, "s1", 250), Avoided({"t": "z"}, "s2", 120)]},
                  lambda pairs: planned.extend(a.signature for _, a in pairs))
    table.ensure([0], {})  # (every avoided floor exceeds the best, 100)
    assert planned == []
    table.ensure([0], {"t": "z"})  # (no row agrees with z: its best is unknown)
    assert planned == ["s2"]
    table.ensure([0], {"t": "y2"})
    assert planned == ["s2", "s1"] and table.avoided[0] == []
    assert Table({0: []}).avoided_plans() == 0


def test_floors_are_kept_on_disk_so_a_warm_run_plans_nothing(tmp_path):
    g = tcplan.load(ROOT / "problems/kernels/qwen3/attention_forward_free.yaml").spec.graph
    cold = OpPlans(disk=DiskCache(tmp_path / "ops"))
    first = plan_graph(g, _opts(op_plans=cold)).record
    warm = OpPlans(disk=DiskCache(tmp_path / "ops"))
    second = plan_graph(g, _opts(op_plans=warm)).record
    assert first.op_plans["avoided"] > 0
    assert second.op_plans["planned"] == 0
    assert second.op_plans["avoided"] == first.op_plans["avoided"]
    assert second.sum_cycles == first.sum_cycles
