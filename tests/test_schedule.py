"""The schedule of a graph on the main, sub and DMA contexts (issue 30, item 3;
planner/schedule.py; book: scheduling/schedule.md): the model against a brute force over
every start time of small random task sets, the guide's rules one by one on hand-made
cases, a graph's figures from its ops' own cycles, ``objective: makespan`` against an
enumeration of every layout, and the Chrome trace loaded back."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

import tcplan
from tcplan.planner.graph_plan import GraphPlan, choose, evaluate
from tcplan.planner.kinds import Options
from tcplan.planner.outcome import unwrap
from tcplan.planner.schedule import Hazard, Task, add_schedule, schedule_of

ROOT = Path(__file__).resolve().parents[1]
OVERLAP = ROOT / "problems/graphs/schedule_overlap.yaml"
LIMIT = 63  # (the guide: accesses to one bank must stay below 64 in total)


# ---- the model against brute force ----------------------------------------------------------
def _solve(tasks, hazards, durations, bank) -> int:
    from ortools.sat.python import cp_model
    m = cp_model.CpModel()
    total = sum(b for b, t in zip(bank, tasks) if t.context != "dma")
    v = add_schedule(m, tasks, hazards, durations, bank, total, sum(durations))
    m.minimize(v.makespan)
    sv = cp_model.CpSolver()
    sv.parameters.num_workers = 1
    assert sv.solve(m) == cp_model.OPTIMAL
    return sv.value(v.makespan)


def _legal(starts, tasks, hazards, durations, bank) -> bool:
    """The guide's rules checked on start times directly: a context or a resource runs one
    task at a time, a hazard's second task starts once the first ends, and while a DMA runs
    the running tasks' bank accesses (the DMA's one included) stay at most 63."""
    ends = [s + d for s, d in zip(starts, durations)]
    for a, b in itertools.combinations(range(len(tasks)), 2):
        shared = tasks[a].context == tasks[b].context or tasks[a].resources & tasks[b].resources
        if shared and durations[a] and durations[b] and starts[a] < ends[b] and \
                starts[b] < ends[a]:
            return False
    if any(starts[h.after] < ends[h.before] for h in hazards):
        return False
    for t in range(max(ends, default=0)):
        run = [k for k in range(len(tasks)) if starts[k] <= t < ends[k]]
        if any(tasks[k].context == "dma" for k in run) and \
                sum(1 if tasks[k].context == "dma" else bank[k] for k in run) > LIMIT:
            return False
    return True


def _brute(tasks, hazards, durations, bank) -> int:
    horizon = sum(durations)
    best = horizon
    for starts in itertools.product(range(horizon + 1), repeat=len(tasks)):
        span = max(s + d for s, d in zip(starts, durations))
        if span < best and _legal(starts, tasks, hazards, durations, bank):
            best = span
    return best


def _instance(rng: random.Random):
    n = rng.choice((3, 4))
    tasks = [Task(f"t{k}", (k,), rng.choice(("main", "sub", "dma")),
                  frozenset({"vector engine"}) if rng.random() < 0.3 else frozenset())
             for k in range(n)]
    durations = [rng.randint(0, 3) for _ in range(n)]
    bank = [0 if t.context == "dma" else rng.choice((0, 20, 31, 40, 62)) for t in tasks]
    hazards = [Hazard(a, b, "read after write", f"x{a}{b}")
               for a, b in itertools.combinations(range(n), 2) if rng.random() < 0.25]
    return tasks, hazards, durations, bank


@pytest.mark.parametrize("seed", range(40))
def test_the_model_is_the_brute_force_optimum(seed):
    tasks, hazards, durations, bank = _instance(random.Random(seed))
    assert _solve(tasks, hazards, durations, bank) == _brute(tasks, hazards, durations, bank)


def _task(name, context, resources=()):
    return Task(name, (0,), context, frozenset(resources))


@pytest.mark.parametrize("contexts, resources, bank, want", [
    # three contexts overlap: the longest
    (("main", "sub", "dma"), ((), (), ()), (0, 0, 0), 5),
    # one context: one after another
    (("main", "main", "dma"), ((), (), ()), (0, 0, 0), 7),
    # the Vector Engine shared by main and sub: one after the other
    (("main", "sub", "dma"), (("vector engine",), ("vector engine",), ()), (0, 0, 0), 7),
    # the guide's cumulative example: main 30 + sub 20 + DMA 1 = 51 overlap
    (("main", "sub", "dma"), ((), (), ()), (30, 20, 0), 5),
    # main 30 + sub 35 + DMA 1 = 66: the three never run at once; the DMA (5) beside the
    # main task (3), then beside the sub one (4): 7, not 5
    (("main", "sub", "dma"), ((), (), ()), (30, 35, 0), 7),
    # without a DMA, main and sub overlap whatever their accesses: the two main tasks, 8
    (("main", "sub", "main"), ((), (), ()), (30, 35, 40), 8),
])
def test_the_guides_rules_one_by_one(contexts, resources, bank, want):
    """Three tasks of 3, 4 and 5 cycles (the third on the DMA where it is one)."""
    tasks = [_task(f"t{k}", c, r) for k, (c, r) in enumerate(zip(contexts, resources))]
    durations = [3, 4, 5]
    got = _solve(tasks, [], durations, list(bank))
    assert got == want == _brute(tasks, [], durations, list(bank))


# ---- a graph's schedule -------------------------------------------------------------------
def _ops(solved) -> dict[str, int]:
    return {o["op"]: o["cycles"] for o in solved.to_json()["plan"]["ops"]}


def test_three_contexts_overlap_as_the_hazards_allow():
    """w's load (DMA), its TRF store (sub) and the matmul (main) wait each for the one
    before; z's store runs on the DMA after w's load, beside the Tensor Unit: the makespan
    is load_w + max(the two paths, store_z), a path's cycles its slowest op's."""
    r = tcplan.solve(OVERLAP)
    assert r.status == "optimal" and r.verified is True, r.text()
    c = _ops(r)
    sub = max(c["fetch_w"], c["collect_w"], c["store_w"])
    main = max(c["fetch_x"], c["collect_x"], c["matmul"], c["commit_y"])
    want = c["load_w"] + max(sub + main, c["store_z"])
    s = r.to_json()["schedule"]
    assert r.cycles == s["makespan"] == want
    assert want < sum(c.values())  # (the sum objective would count every op)
    at = {t["task"]: t for t in s["tasks"]}
    assert at["fetch_w -> store_w"]["context"] == "sub"
    assert at["fetch_x -> commit_y"]["context"] == "main"
    assert at["load_w"]["start"] == 0 and at["store_z"]["start"] == c["load_w"]
    assert at["fetch_w -> store_w"]["start"] == c["load_w"]  # (read after write of w)
    assert at["fetch_x -> commit_y"]["start"] == c["load_w"] + sub  # (of wt)
    assert s["busy"] == {"main": main, "sub": sub, "dma": c["load_w"] + c["store_z"]}
    kinds = {(h["before"], h["after"], h["kind"]) for h in s["hazards"]}
    assert ("load_w", "fetch_w -> store_w", "read after write") in kinds
    assert ("fetch_w -> store_w", "fetch_x -> commit_y", "read after write") in kinds
    assert [w["task"] for w in s["critical_path"]][-1] in ("store_z", "fetch_x -> commit_y")


def test_a_reused_register_file_orders_the_second_load_after_the_first_reads():
    """mlp loads its gate weight into the TRF bytes of the up weight: the gate's store waits
    for the up contraction (write after read), and every hazard holds in the schedule."""
    r = tcplan.solve(ROOT / "problems/kernels/qwen3/mlp_forward.yaml", verify="none")
    s = r.to_json()["schedule"]
    at = {t["task"]: t for t in s["tasks"]}
    war = [h for h in s["hazards"] if h["kind"] == "write after read"]
    assert war, s["hazards"]
    for h in s["hazards"]:
        assert at[h["after"]]["start"] >= at[h["before"]]["end"], h
    for a, b in itertools.combinations(s["tasks"], 2):  # (each context one at a time)
        if a["context"] == b["context"] and a["cycles"] and b["cycles"]:
            assert a["end"] <= b["start"] or b["end"] <= a["start"], (a, b)
    assert s["makespan"] == max(t["end"] for t in s["tasks"]) < r.to_json()["sum_cycles"]


# ---- a contraction op: its TRF fill on the sub context, the rest on the main -------------
TWO_GEMVS = """
format: 1
name: two_gemvs
kind: graph
dtype: bf16
objective: makespan
axes: {N: 1024, K: 128}
tensors:
  x: {tier: dm, cluster: 'm![N / 512]', slice: 'm![N / 4 % 128, 1 # 2]', element: 'm![K]', given: true}
  w1: {tier: dm, cluster: 'm![N / 512]', slice: 'm![N / 4 % 128, 1 # 2]', element: 'm![N % 4, K]', address: 4096, given: true}
  w2: {tier: dm, cluster: 'm![N / 512]', slice: 'm![N / 4 % 128, 1 # 2]', element: 'm![N % 4, K]', address: 8192, %W2%}
  y1: {tier: dm, cluster: 'm![N / 512]', slice: 'm![N / 4 % 128, 1 # 2]', element: 'm![N % 4]', dtype: f32, address: 16384}
  y2: {tier: dm, cluster: 'm![N / 512]', slice: 'm![N / 4 % 128, 1 # 2]', element: 'm![N % 4]', dtype: f32, address: 20480}
%HBM%ops:
%LOAD%  - {name: gemv1, kind: contraction, einsum: 'K,NK->N', source: x, trf: w1, destination: y1}
  - {name: gemv2, kind: contraction, einsum: 'K,NK->N', source: x, trf: w2, destination: y2}
"""
#: the TRF's fill of a 4 x 128 bf16 weight a slice: 1,024 bytes read 8 a cycle (the sub
#: context's reads, book: moving-tensors/fetch-engine.md)
FILL = 4 * 128 * 2 // 8


def _two_gemvs(tmp_path, loaded: bool):
    text = TWO_GEMVS.replace("%W2%", "" if loaded else "given: true").replace(
        "%HBM%", "  w_hbm: {tier: hbm, element: 'm![N, K]', address: 0, given: true}\n"
        if loaded else "").replace(
        "%LOAD%", "  - {name: load_w2, kind: dma, source: w_hbm, destination: w2, "
        "stream: {time: free, packet: free}}\n" if loaded else "")
    path = tmp_path / "two_gemvs.yaml"
    path.write_text(text)
    r = tcplan.solve(path, verify="none").to_json()
    ops = {o["op"]: o["cycles"] for o in r["plan"]["ops"]}
    return r["schedule"], {t["task"]: t for t in r["schedule"]["tasks"]}, ops


def test_a_contraction_ops_fill_runs_on_the_sub_context_before_its_rest(tmp_path):
    """Each gemv is two tasks: its TRF fill (sub context, 1,024 bytes at 8 a cycle) and the
    rest (main), whose cycles sum to the op's; the second fill waits for the first op's
    TRF reads (write after read the TRF), so the makespan is two fills and two rests in
    series, not the fills back to back."""
    s, at, ops = _two_gemvs(tmp_path, loaded=False)
    for op in ("gemv1", "gemv2"):
        fill, rest = at[f"{op} (TRF fill)"], at[op]
        assert (fill["context"], fill["part"], rest["context"], rest["part"]) == (
            "sub", "prelude", "main", "rest")
        assert fill["cycles"] == FILL and fill["cycles"] + rest["cycles"] == ops[op]
        assert rest["start"] >= fill["end"]
    assert at["gemv2 (TRF fill)"]["start"] == at["gemv1"]["end"]
    assert {"before": "gemv1", "after": "gemv2 (TRF fill)", "kind": "write after read",
            "tensor": "the TRF"} in s["hazards"]
    assert s["makespan"] == ops["gemv1"] + ops["gemv2"]


def test_a_contraction_ops_fill_overlaps_the_dma_it_does_not_wait_for(tmp_path):
    """With the second weight loaded from HBM meanwhile, the first op runs during the load
    and the second's fill starts as the load ends: the makespan is the load, then the
    second op (fill and rest), not the sum of the ops."""
    s, at, ops = _two_gemvs(tmp_path, loaded=True)
    load = ops["load_w2"]
    assert load > ops["gemv1"]  # (the case this test is about: the load is the longer)
    assert at["gemv1 (TRF fill)"]["start"] == 0 and at["gemv1"]["end"] == ops["gemv1"]
    assert at["gemv2 (TRF fill)"]["start"] == load
    assert s["makespan"] == load + ops["gemv2"] < load + ops["gemv1"] + ops["gemv2"]


FREE = OVERLAP.read_text().replace(
    "w_hbm: {tier: hbm, element: 'm![S, C, B]', given: true}",
    "w_hbm: {tier: hbm, element: free, axes: [S, C, B], given: true}").replace(
    "z_hbm: {tier: hbm, element: 'm![S, Z]', address: 65536}",
    "z_hbm: {tier: hbm, element: free, axes: [S, Z], address: 65536}")


def test_the_makespan_objective_is_the_best_over_every_layout():
    """With both HBM layouts free, the joint choice's makespan is the least of the
    schedules of every assignment of candidates (each planned apart, then scheduled)."""
    p = tcplan.loads(FREE, "free.yaml")
    g = p.spec.graph
    table = evaluate(g, Options())
    got = unwrap(choose(g, table, "makespan"))
    best = None
    free = g.free()
    assert len(free) == 2
    for combo in itertools.product(*(g.tensors[n].candidates for n in free)):
        assign = dict(zip(free, combo))
        rows = [next(r for r in table[op.index]
                     if all(assign[n] == c for n, c in r.layout.items())) for op in g.ops]
        if not all(r.ok for r in rows):
            continue
        span = schedule_of(g, GraphPlan(assign, rows, "makespan", 0, 0, [])).makespan
        best = span if best is None else min(best, span)
    assert best is not None
    assert schedule_of(g, got).makespan == best


# ---- the trace ------------------------------------------------------------------------------
def test_the_trace_loads_back_with_every_task(tmp_path):
    from tcplan.planner.cli import main
    out = tmp_path / "s.json"
    assert main(["solve", str(OVERLAP), "--verify", "none", "--trace", str(out)]) == 0
    trace = json.loads(out.read_text())
    s = tcplan.solve(OVERLAP, verify="none").to_json()["schedule"]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(names.values()) == ["dma context", "main context", "sub context"]
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(s["tasks"])
    for t in s["tasks"]:
        e = next(e for e in spans if e["name"] == t["task"])
        assert (names[e["tid"]], e["ts"], e["dur"]) == (f"{t['context']} context",
                                                       t["start"], t["cycles"])
    flows = [e for e in trace["traceEvents"] if e["ph"] in ("s", "f")]
    assert len(flows) == 2 * len(s["hazards"])
    assert trace["otherData"]["makespan_cycles"] == s["makespan"]


def test_trace_and_plot_refusals_exit_2_before_any_work(tmp_path, capsys):
    """A trace of a problem without a schedule, or not named .json: exit 2, said."""
    from tcplan.planner.cli import main
    dma = ROOT / "problems/seed/dma_example_1.yaml"
    assert main(["solve", str(dma), "--trace", str(tmp_path / "t.json")]) == 2
    assert "has none" in capsys.readouterr().err
    assert main(["solve", str(OVERLAP), "--trace", str(tmp_path / "t.txt")]) == 2
    assert "NAME.json" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_graphs_schedule_is_drawn(tmp_path):
    """``--plot`` on a graph draws its schedule: an SVG naming every context and task."""
    pytest.importorskip("matplotlib")
    from tcplan.planner.cli import main
    out = tmp_path / "s.svg"
    assert main(["solve", str(OVERLAP), "--verify", "none", "--plot", str(out)]) == 0
    svg = out.read_text()
    for word in ("main context", "sub context", "dma context", "load_w", "store_z",
                 "makespan"):
        assert word in svg, word


def test_a_kernel_functions_trace_holds_every_task_on_its_context(tmp_path):
    """mlp_forward's schedule as a trace: every op of the graph in exactly one task event
    (a contraction op in two: its TRF fill on the sub track, then the rest, the fill
    ending before the rest starts), each event inside the makespan on its context's
    track, the tracks' events apart."""
    from tcplan.planner.cli import main
    path = ROOT / "problems/kernels/qwen3/mlp_forward_free.yaml"
    out = tmp_path / "mlp.json"
    assert main(["solve", str(path), "--verify", "none", "--trace", str(out)]) == 0
    trace = json.loads(out.read_text())
    span = trace["otherData"]["makespan_cycles"]
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    ops = [i for e in events for i in e["args"]["ops"] if e["args"].get("part") != "prelude"]
    graph = tcplan.load(path).spec.graph
    assert sorted(ops) == list(range(len(graph.ops)))
    fills = {e["args"]["ops"][0]: e for e in events if e["args"].get("part") == "prelude"}
    assert sorted(graph.ops[i].name for i in fills) == [
        "contract_down", "contract_gate", "contract_up"]
    tid = {e["args"]["name"]: e["tid"] for e in trace["traceEvents"] if e["ph"] == "M"
           and e["name"] == "thread_name"}
    for i, fill in fills.items():
        rest, = [e for e in events if e["args"]["ops"] == [i] and e is not fill]
        assert fill["tid"] == tid["sub context"] and rest["tid"] == tid["main context"]
        assert fill["ts"] + fill["dur"] <= rest["ts"] and fill["dur"] > rest["dur"] > 0
    by_track: dict[int, list] = {}
    for e in events:
        assert 0 <= e["ts"] and e["ts"] + e["dur"] <= span
        by_track.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_track.values():
        spans = sorted(s for s in spans if s[1] > s[0])
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


# ---- the critical path's reasons, and a cycle of paths ------------------------------------
def _timed(specs, hazards=()):
    """Tasks (name, context, cycles, bank accesses) placed by the schedule's own model."""
    from tcplan.planner.schedule import Timed, _place
    tasks = [Task(n, (k,), c, frozenset()) for k, (n, c, _, _) in enumerate(specs)]
    cycles = [d for _, _, d, _ in specs]
    bank = [b for _, _, _, b in specs]
    starts, proven = _place(tasks, list(hazards), cycles, bank, 10.0, 0)
    assert proven
    return tuple(Timed(t, s, d, b) for t, s, d, b in zip(tasks, starts, cycles, bank))


def test_a_task_held_back_by_the_bank_limit_says_so():
    """A DMA of 100 cycles; two Tensor Unit tasks of 40 accesses each cannot both run
    beside it (81 > 63): the second waits for the first, for the bank-access limit."""
    from tcplan.planner.schedule import critical_path
    timed = _timed([("dma", "dma", 100, 1), ("j", "main", 30, 40), ("k", "sub", 80, 40)])
    at = {t.task.name: t for t in timed}
    assert max(at["j"].start, at["k"].start) >= min(at["j"].end, at["k"].end)
    path = critical_path(timed, [])
    assert path[-1].why == "bank-access limit", path


def test_the_critical_path_passes_through_a_task_of_no_cycles():
    """load (100, DMA) -> gather (0 cycles: not modelled) -> use (10): the path names both
    hazards, not a bank limit."""
    from tcplan.planner.schedule import critical_path
    hz = [Hazard(0, 1, "read after write", "rows"), Hazard(1, 2, "read after write", "g")]
    timed = _timed([("load", "dma", 100, 1), ("gather", "dma", 0, 1), ("use", "main", 10, 0)],
                   hz)
    path = critical_path(timed, hz)
    assert [(w.task, w.why) for w in path] == [
        ("load", None), ("gather", "read after write rows"), ("use", "read after write g")]


def test_paths_waiting_for_each_other_are_cut_into_their_ops():
    """tests/test_engines.py's two weights at the same TRF bytes, both stored from one
    collected stream and read by two contractions of one stream: as paths, the store path
    waits for the contraction path (write after read of wt) and the contraction path for
    the store path (read after write): a cycle. Cut into their ops, the schedule follows
    the graph's order, every hazard held."""
    import sys
    sys.path.insert(0, str(ROOT / "tests"))
    from test_engines import _two_weights
    r = tcplan.solve(tcplan.loads(_two_weights(False), "g.yaml"), verify="none")
    s = r.to_json()["schedule"]
    names = {t["task"] for t in s["tasks"]}
    assert {"store_w", "store_w2", "matmul", "matmul2"} <= names
    at = {t["task"]: t for t in s["tasks"]}
    for h in s["hazards"]:
        assert at[h["after"]]["start"] >= at[h["before"]]["end"], h
    assert at["store_w2"]["start"] >= at["matmul"]["end"]


def test_a_path_writing_over_bytes_it_wrote_is_cut():
    """In the two-weights graph, one path stores the collected weight into wt and wt2 (the
    same TRF bytes): a write after write inside one pipeline, which the schedule cuts into
    the path's ops."""
    import sys
    sys.path.insert(0, str(ROOT / "tests"))
    from test_engines import _two_weights
    from tcplan.planner.schedule import _reusing_within, tasks_of
    g = tcplan.loads(_two_weights(False), "g.yaml").spec.graph
    tasks = tasks_of(g)
    cut = _reusing_within(g, tasks)
    assert [tasks[k].name for k in cut] == ["fetch_w -> store_w2"]
