"""Graphs at scale (issue 32; docs/graphs.md 'At scale'): launches and lifetimes (DM reused
between launches, located errors where two live tensors meet), identical work planned once
(op signatures, parts, the disk cache), the parts' plan against the flat joint choice, and
the same plan from one process, a pool and a Dask cluster."""

from __future__ import annotations

import dataclasses
import json

import pytest

import tcplan
from tcplan.planner.graph_parts import part_signature, parts, restrict
from tcplan.planner.graph_plan import choose, evaluate, plan_graph, with_op_plans
from tcplan.planner.kinds import Options
from tcplan.planner.op_cache import DiskCache, OpPlans, op_signature
from tcplan.planner.outcome import Found, unwrap
from tcplan.planner.schedule import schedule_of

HEAD = """format: 1
kind: graph
dtype: bf16
objective: makespan
axes: {S: 256, H: 8, D: 64}
"""
STREAM = "stream: {time: free, packet: free}"


def _layers(n: int, shared_dm: bool = True) -> str:
    """``n`` launches, each loading its own HBM tensor (its Element free) into DM and back
    out to HBM: every launch the same work over other tensors; with ``shared_dm`` every
    launch's DM tensor at the same address (reused between launches)."""
    tensors, ops = [], []
    for k in range(n):
        dm_at = 0 if shared_dm else 65536 * k
        tensors += [
            f"  w{k}: {{tier: hbm, address: {k << 20}, element: free, axes: [S, D], "
            "given: true}",
            f"  x{k}: {{tier: dm, slice: 'm![S / 4]', element: free, axes: [D], "
            f"address: {dm_at}}}".replace("axes: [D]", "axes: [D]"),
            f"  y{k}: {{tier: hbm, address: {(k + 64) << 20}, element: 'm![S, D]'}}"]
        ops += [f"  - {{name: load{k}, kind: dma, source: w{k}, destination: x{k}, "
                f"launch: l{k}, {STREAM}}}",
                f"  - {{name: store{k}, kind: dma, source: x{k}, destination: y{k}, "
                f"launch: l{k}, {STREAM}}}"]
    return HEAD + "tensors:\n" + "\n".join(tensors) + "\nops:\n" + "\n".join(ops) + "\n"


def _fix_dm(text: str) -> str:
    """The DM tensors carry S % 4 in their Element (the slice holds S / 4)."""
    return text.replace("element: free, axes: [D], address",
                        "element: {digits: ['S % 4', 'D']}, address")


def _graph(n: int, **kw):
    return tcplan.loads(_fix_dm(_layers(n, **kw)), f"layers{n}.yaml").spec.graph


def _opts(**kw) -> Options:
    """One process, no run, a table of its own (no disk cache: the counts are this plan's)."""
    return Options(time_limit=10.0, verify="none", jobs=1, **{"op_plans": OpPlans(), **kw})


# ---- launches and lifetimes ---------------------------------------------------------------

def test_dm_is_reused_between_launches_and_not_within_one():
    g = _graph(3)  # (every launch's DM tensor at address 0: loads)
    assert g.launches == ["l0", "l1", "l2"]
    text = _fix_dm(_layers(2)).replace("launch: l1", "launch: l0")
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.loads(text, "one.yaml")
    msg = str(e.value)
    assert e.value.kind == "input" and "x1" in msg and "x0" in msg and "while both are live" \
        in msg and "at op load1" in msg, msg


def test_a_launch_reading_what_a_later_one_writes_is_located():
    text = _fix_dm(_layers(2)).replace("store0, kind: dma, source: x0",
                                       "store0, kind: dma, source: x1")
    text = text.replace("y0: {tier: hbm", "y0: {tier: hbm").replace(
        "load1, kind: dma, source: w1, destination: x1, launch: l1",
        "load1, kind: dma, source: w1, destination: x1, launch: l1")
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.loads(text.replace("x0: {tier: dm", "x0: {tier: dm, keep: true, given: true",
                                  ).replace("given: true, slice", "slice"), "late.yaml")
    assert "of the later launch l1" in str(e.value) or "reads x1" in str(e.value), str(e.value)


def test_keep_extends_a_dm_tensor_to_the_end():
    text = _fix_dm(_layers(2)).replace("x0: {tier: dm,", "x0: {tier: dm, keep: true,")
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.loads(text, "keep.yaml")
    assert "x1" in str(e.value) and "x0" in str(e.value)


# ---- identical work planned once ----------------------------------------------------------

def _loads_only(n: int) -> str:
    """``n`` launches each loading a weight into DM, every launch at the same addresses
    (a given HBM tensor and a DM tensor both end with their launch)."""
    text = _fix_dm(_layers(n)).replace("\n", "\n")
    lines = [ln for ln in text.splitlines() if "store" not in ln and "  y" not in ln]
    text = "\n".join(lines) + "\n"
    for k in range(n):
        text = text.replace(f"w{k}: {{tier: hbm, address: {k << 20},",
                            f"w{k}: {{tier: hbm, address: 0,")
    return text


def test_identical_launches_share_one_signature_and_one_solve():
    g = tcplan.loads(_loads_only(3), "loads.yaml").spec.graph
    pieces = parts(g)
    assert len(pieces) == 3  # (makespan: one part per launch; no free tensor crosses)
    sigs = {part_signature(restrict(g, p)) for p in pieces}
    assert len(sigs) == 1
    sig = {op_signature(g, g.ops[i], {n: c for n in g.op_free(g.ops[i])
                                      for c in g.tensors[n].candidates[:1]})
           for i in (0, 1, 2)}
    assert len(sig) == 1  # (load0, load1, load2: the same op over other tensors)
    gp = unwrap(plan_graph(g, _opts()))
    plans = gp.op_plans["planned"] + gp.op_plans["avoided"]  # (the distinct ones)
    assert gp.parts == 3 and plans * 3 == gp.op_plans["asked"] == 12
    assert gp.op_plans["avoided"] == 3  # (three layouts' floors exceed the best's cycles)
    assert gp.layout["x0"] == gp.layout["x1"] == gp.layout["x2"]
    assert gp.layout["w0"] == gp.layout["w1"] == gp.layout["w2"]


def test_parts_give_the_flat_joint_choice():
    """The independent check: the flat model over the whole table (launches ordered by
    their hazards in one schedule) against the parts' plan, makespan and sum."""
    g = _graph(3, shared_dm=False)
    opts = with_op_plans(_opts())
    table = evaluate(g, opts)
    flat = choose(g, table, None, 10.0, 0)
    assert isinstance(flat, Found)
    flat_span = schedule_of(g, flat.record).makespan
    gp = unwrap(plan_graph(g, opts))
    assert gp.parts == 3 and gp.status == "optimal"
    assert gp.schedule.makespan == flat_span == gp.cycles
    assert gp.sum_cycles == flat.record.sum_cycles
    # launches run one after another: each launch's first task starts where one ends
    ends = {t.end for t in gp.schedule.timed}
    for launch in g.launches[1:]:
        first = min(t.start for t in gp.schedule.timed
                    if g.ops[t.task.ops[0]].launch == launch)
        assert first in ends


def test_the_disk_cache_starts_a_second_run_warm(tmp_path):
    g = _graph(2)
    first = OpPlans(disk=DiskCache(tmp_path, "seed 0"))
    a = unwrap(plan_graph(g, _opts(op_plans=first)))
    assert first.disk_hits == 0 and first.misses > 0
    second = OpPlans(disk=DiskCache(tmp_path, "seed 0"))
    b = unwrap(plan_graph(_graph(2), _opts(op_plans=second)))
    assert second.misses == 0 and second.disk_hits == first.misses
    assert json.dumps(a.to_json(), sort_keys=True, default=str) == \
        json.dumps(b.to_json(), sort_keys=True, default=str)
    other = OpPlans(disk=DiskCache(tmp_path, "seed 1"))  # (another seed: its own plans)
    unwrap(plan_graph(_graph(2), _opts(op_plans=other)))
    assert other.disk_hits == 0


def test_the_disk_cache_is_bounded(tmp_path):
    disk = DiskCache(tmp_path, max_bytes=300)
    for k in range(40):
        disk.put(f"op {k}", ((None, k, True, None), {}))
    disk.trim()
    files = list(tmp_path.glob("*/*.pickle"))
    assert 0 < len(files) < 40
    assert sum(p.stat().st_size for p in files) <= 300
    assert disk.get("op 39") == ((None, 39, True, None), {})  # (the newest stay)


# ---- the same plan from every backend ----------------------------------------------------

def _plan_json(g, **kw) -> str:
    gp = unwrap(plan_graph(g, dataclasses.replace(_opts(), **kw)))
    return json.dumps(gp.to_json(), sort_keys=True, default=str)


def test_a_process_pool_gives_the_same_plan():
    one = _plan_json(_graph(4, shared_dm=False), jobs=1)
    assert _plan_json(_graph(4, shared_dm=False), jobs=2) == one


def test_a_local_dask_cluster_gives_the_same_plan(tmp_path):
    pytest.importorskip("dask.distributed")
    path = tmp_path / "layers.yaml"
    path.write_text(_fix_dm(_layers(4, shared_dm=False)))
    local = _plan_json(tcplan.load(path).spec.graph, jobs=1)
    assert _plan_json(tcplan.load(path).spec.graph, dask="local") == local


# ---- plans moved to another HBM address ---------------------------------------------------

def _at(text: str, k: int, address: int) -> str:
    return text.replace(f"w{k}: {{tier: hbm, address: {k << 20},",
                        f"w{k}: {{tier: hbm, address: {address},")


def test_a_plan_moved_by_the_decode_period_is_shared_and_moves_the_right_bytes():
    """Layer 1's weight lies one HBM decode period above layer 0's: its load reuses layer
    0's plan, moved, and the graph runs end to end (the moved commands read its bytes).
    Independently, layer 1's load planned on its own (a fresh table) costs the same."""
    from tcplan.model.hardware import HBM_DECODE_PERIOD
    text = _at(_fix_dm(_layers(2)), 1, HBM_DECODE_PERIOD)
    r = tcplan.solve(tcplan.loads(text, "moved.yaml"))
    assert r.verified is True, r.text()
    gp = r.plan
    reuse = gp.op_plans
    assert reuse["planned"] < reuse["asked"]
    rows = {row.problem.name: row for row in gp.ops}
    assert rows["load1"].cycles == rows["load0"].cycles
    assert rows["load1"].plan.source.address == HBM_DECODE_PERIOD
    alone = tcplan.loads(_at(_fix_dm(_layers(1)), 0, HBM_DECODE_PERIOD), "alone.yaml")
    fresh = unwrap(plan_graph(alone.spec.graph, _opts(op_plans=OpPlans())))
    load = next(row for row in fresh.ops if row.problem.name == "load0")
    assert load.plan.source.address == HBM_DECODE_PERIOD  # (planned there, not moved)
    assert load.cycles == rows["load1"].cycles
    assert load.plan.engines == rows["load1"].plan.engines


def test_a_plan_is_not_shared_below_the_period():
    """One MiB apart, the HBM hash differs: each load is planned for its own address."""
    g = _graph(2)
    sig = {op_signature(g, g.ops[i], {n: g.tensors[n].candidates[0]
                                      for n in g.op_free(g.ops[i])}) for i in (0, 2)}
    assert len(sig) == 2


# ---- a rejected layout proven by the rules first ----------------------------------------

def test_rules_first_rejects_exactly_what_the_models_reject():
    """Every op of a Qwen3 kernel under every layout: the rules' proof before any model
    (what a graph's op plans use) against the models and their core (the search alone):
    the same layouts rejected, the same cycles for the rest."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / \
        "problems/kernels/qwen3/attention_forward_free.yaml"
    g = tcplan.load(path).spec.graph

    def table(rules_first: bool):
        opts = _opts(op_plans=OpPlans(), rules_first=rules_first)
        return {(i, json.dumps(r.layout, sort_keys=True)): (r.ok, r.cycles)
                for i, rows in evaluate(g, opts).items() for r in rows}
    fast, slow = table(True), table(False)
    assert fast == slow
    assert sum(not ok for ok, _ in fast.values()) >= 10  # (the check saw rejections)


# ---- free addresses -----------------------------------------------------------------------

def test_free_addresses_are_placed_and_reused_between_launches():
    text = _fix_dm(_layers(3)).replace("address: 0}", "address: free}")
    g = tcplan.loads(text, "free.yaml").spec.graph
    at = {n: g.tensors[n].spec["address"] for n in ("x0", "x1", "x2")}
    assert at == {"x0": 0, "x1": 0, "x2": 0}  # (one launch each: the same bytes)
    within = text.replace("launch: l1", "launch: l0").replace("launch: l2", "launch: l0")
    g = tcplan.loads(within, "free1.yaml").spec.graph
    spans = sorted((g.tensors[n].spec["address"], g.spans[n][2]) for n in ("x0", "x1", "x2"))
    for (a, end), (b, _) in zip(spans, spans[1:]):  # (one launch: side by side)
        assert end <= b, spans
    assert all(a % 1024 == 0 for a, _ in spans)


def test_dm_that_cannot_hold_a_launch_names_the_op():
    """Each x holds 512 B per slice; 1,100 of them in one launch need 563,200 B of a
    slice's 524,288."""
    n = 1100
    head = HEAD.replace("axes: {S: 256, H: 8, D: 64}", "axes: {S: 256, D: 64}")
    tensors = ["  w: {tier: hbm, address: 0, element: 'm![S, D]', given: true}"] + [
        f"  x{k}: {{tier: dm, slice: 'm![S / 4]', element: 'm![S % 4, D]', address: free}}"
        for k in range(n)]
    ops = [f"  - {{name: load{k}, kind: dma, source: w, destination: x{k}, {STREAM}}}"
           for k in range(n)]
    text = head + "tensors:\n" + "\n".join(tensors) + "\nops:\n" + "\n".join(ops) + "\n"
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.loads(text, "full.yaml")
    assert e.value.code == "graph-memory", str(e.value)
    assert "dm: at op load0" in str(e.value) and "563,200 B" in str(e.value)


def test_the_order_of_the_axes_is_part_of_an_op_plan(tmp_path, monkeypatch):
    """A tensor's values are laid out in the graph's order of the axes, and so are a
    chain's: the same op in two graphs whose axes come in another order shares no plan
    (a shared one read the values in the wrong order), and each verifies."""
    monkeypatch.setenv("TCPLAN_CACHE", str(tmp_path))
    text = _fix_dm(_layers(1))
    other = text.replace("axes: {S: 256, H: 8, D: 64}", "axes: {D: 64, H: 8, S: 256}")
    ga, gb = (tcplan.loads(t, "a.yaml").spec.graph for t in (text, other))
    lay = {n: ga.tensors[n].candidates[0] for n in ga.op_free(ga.ops[0])}
    assert op_signature(ga, ga.ops[0], lay) != op_signature(gb, gb.ops[0], lay)
    for t in (text, other):
        assert tcplan.solve(tcplan.loads(t, "g.yaml")).verified is True


def test_a_free_tensor_no_op_touches_keeps_its_first_candidate():
    text = _fix_dm(_layers(2)).replace(
        "ops:\n", "  spare: {tier: hbm, address: 268435456, element: free, axes: [S, D], "
        "given: true}\nops:\n")
    gp = unwrap(plan_graph(tcplan.loads(text, "spare.yaml").spec.graph, _opts()))
    assert gp.parts == 2 and gp.layout["spare"] == "m![S, D]"


# ---- layers chained through a boundary tensor ---------------------------------------------

def _chained(n: int) -> str:
    """``n`` launches, launch k loading h{k-1} (HBM; h0 given head-major) into DM (its
    Element's order free) and storing it back as h{k} (HBM, Element free): each h between
    two launches is a boundary whose layout the store before and the load after both pay
    for."""
    tensors = ["  h0: {tier: hbm, address: 0, element: 'm![D, S]', given: true}"]
    ops = []
    for k in range(1, n + 1):
        tensors += [f"  x{k}: {{tier: dm, slice: 'm![S / 4]', element: "
                    f"{{digits: ['S % 4', 'D']}}, axes: [D], address: 0}}",
                    f"  h{k}: {{tier: hbm, address: {k << 20}, element: free, axes: [S, D]}}"]
        ops += [f"  - {{name: load{k}, kind: dma, source: h{k - 1}, destination: x{k}, "
                f"launch: l{k}, {STREAM}}}",
                f"  - {{name: store{k}, kind: dma, source: x{k}, destination: h{k}, "
                f"launch: l{k}, {STREAM}}}"]
    return HEAD + "tensors:\n" + "\n".join(tensors) + "\nops:\n" + "\n".join(ops) + "\n"


def test_a_chain_of_launches_is_solved_piece_by_piece_as_the_flat_model_does():
    """Three launches chained through two free HBM tensors: the dynamic program over the
    boundaries' candidates (planner/graph_chain.py) gives the flat joint choice's makespan
    and sum (the independent check: one model over the whole graph), each launch solved
    once per choice of its boundaries."""
    from tcplan.planner.graph_chain import boundaries, chains
    g = tcplan.loads(_chained(3), "chained.yaml").spec.graph
    assert boundaries(g) == {"h1", "h2"}
    paths = chains(g)
    assert paths is not None and len(paths) == 1
    pieces, links = paths[0]
    assert len(pieces) == 3 and links == ["h1", "h2"]
    gp = unwrap(plan_graph(g, with_op_plans(_opts())))
    flat = unwrap(plan_graph(g, with_op_plans(_opts(flat=True))))
    assert gp.status == flat.status == "optimal"
    assert (gp.cycles, gp.sum_cycles) == (flat.cycles, flat.sum_cycles)
    assert gp.parts == 3
    # (no layout is every op's best: h0 is head-major, so the first load cannot take its
    # best; turning to sequence-major at the first store pays 16,884 once, less than
    # staying head-major costs the later DMAs: the boundaries' choice is not local)
    assert gp.sum_cycles < 6 * 4596 and gp.layout["h1"] == "m![S, D]"
    # (the boundaries' chosen layouts are each the one both of its DMAs were planned under)
    for op, row in zip(g.ops, gp.ops):
        for t, c in row.layout.items():
            assert gp.layout[t] == c, (op.name, t)


def test_a_boundary_read_by_two_later_launches_leaves_one_part():
    """h1 read by launches 2 and 3: not a path (three pieces meet at h1), so the launches
    it binds stay one part, solved flat, to the same optimum."""
    from tcplan.planner.graph_chain import chains
    text = _chained(3).replace("source: h2, destination: x3", "source: h1, destination: x3")
    g = tcplan.loads(text, "fan.yaml").spec.graph
    assert chains(g) is None
    gp = unwrap(plan_graph(g, with_op_plans(_opts())))
    flat = unwrap(plan_graph(g, with_op_plans(_opts(flat=True))))
    assert (gp.cycles, gp.sum_cycles) == (flat.cycles, flat.sum_cycles)


def test_distinct_launches_scheduled_side_by_side_as_one_after_another(monkeypatch):
    """planner/schedule.py schedules a graph's distinct launches on threads, one per core:
    the same schedule, task for task, as made one after another (one core), on three
    launches over tensors at other addresses (three keys)."""
    from tcplan.planner import schedule as sched
    g = _graph(3, shared_dm=False)
    gp = unwrap(plan_graph(g, _opts()))
    assert len({key for *_, key in sched._launches(g, gp)}) == 3
    side_by_side = sched.schedule_by_launch(g, gp)
    monkeypatch.setattr(sched.os, "cpu_count", lambda: 1)
    one_by_one = sched.schedule_by_launch(g, gp)
    assert side_by_side.to_json() == one_by_one.to_json()
    assert side_by_side.makespan == gp.cycles and len(side_by_side.timed) >= 6
