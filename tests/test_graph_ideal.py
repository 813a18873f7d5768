"""The ideal joint choice (planner/graph_ideal.py, docs/decisions.md item 136): where every
op can run a row best in all the objective reads of it, that assignment is taken without
the joint model. Checked against the joint model itself (the shortcut switched off) on every
graph of problems/graphs and on Qwen3 kernel graphs, objective by objective."""

from __future__ import annotations

from pathlib import Path

import pytest

import tcplan
from tcplan.planner import graph_ideal
from tcplan.planner.graph_orders import candidates
from tcplan.planner.graph_plan import choose, evaluate, with_op_plans
from tcplan.planner.kinds import Options
from tcplan.planner.op_cache import OpPlans
from tcplan.planner.outcome import Found
from tcplan.planner.schedule import schedule_of

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "problems/graphs").glob("*.yaml")) + [
    ROOT / "problems/kernels/qwen3" / f"{k}.yaml"
    for k in ("rmsnorm_forward_free", "attention_forward_free", "residual_forward_free")]


def _value(g, found: Found) -> tuple[int, ...]:
    """What the joint choice minimizes: its objective, then the sum."""
    gp = found.record
    if gp.objective == "makespan":
        return schedule_of(g, gp).makespan, gp.sum_cycles
    if gp.objective == "critical_path":
        return gp.critical_path_cycles, gp.sum_cycles
    return (gp.sum_cycles,)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_ideal_choice_is_the_joint_models_optimum(path, monkeypatch):
    p = tcplan.load(path)
    g = p.spec.graph
    table = evaluate(g, with_op_plans(Options(verify="none", jobs=1, op_plans=OpPlans())))
    fast = choose(g, table, None, 10.0, 0)
    ideal = graph_ideal.ideal_choice(g, table, g.objective, 10.0, 0,
                                     lambda n: candidates(g, table, n))
    monkeypatch.setattr(graph_ideal, "ideal_choice", lambda *a, **k: None)
    full = choose(g, table, None, 10.0, 0)
    assert isinstance(fast, Found) == isinstance(full, Found)
    if not isinstance(full, Found):
        return
    assert _value(g, fast) == _value(g, full)
    assert fast.record.status == full.record.status
    if ideal is not None:  # every op at its cheapest row
        for op in g.ops:
            least = min(r.cost for r in table[op.index] if r.ok)
            assert ideal[1][op.index].cost == least


def test_ops_pulling_a_tensor_apart_leave_it_to_the_model():
    """weight_loaded_three_times: the store prefers the sequence-major HBM layout, the
    three loads the head-major one (docs/graphs.md): no layout is every op's best."""
    g = tcplan.load(ROOT / "problems/graphs/weight_loaded_three_times.yaml").spec.graph
    table = evaluate(g, with_op_plans(Options(verify="none", jobs=1, op_plans=OpPlans())))
    assert graph_ideal.ideal_rows(g, table, g.objective) is not None
    assert graph_ideal.ideal_choice(g, table, g.objective, 10.0, 0,
                                    lambda n: candidates(g, table, n)) is None
