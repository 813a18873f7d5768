"""Graph problems (issue 18; docs/graphs.md): located errors, the joint choice against brute
force over every assignment of the free tensors' layouts, minimal conflicts across ops, and
the end-to-end run on one set of memories (it must fail when an op does not do its job)."""

from __future__ import annotations

import io
import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest

import tcplan
from tcplan.planner.cli import main
from tcplan.planner.graph_plan import choose, evaluate, greedy
from tcplan.planner.kinds import Options
from tcplan.planner.outcome import NoPlan, unwrap

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = ROOT / "problems/graphs"
KV = GRAPHS / "kv_cache_append_then_read.yaml"
MLP = GRAPHS / "mlp_bias_activation.yaml"
FANOUT = GRAPHS / "weight_loaded_three_times.yaml"


def _load(text: str, name: str = "g.yaml"):
    return tcplan.loads(text, name)


def _error(text: str) -> tcplan.TcplanError:
    with pytest.raises(tcplan.TcplanError) as e:
        _load(text)
    assert e.value.kind == "input"
    return e.value


HEAD = """format: 1
kind: graph
dtype: bf16
axes: {S: 256, H: 8, D: 64}
"""
KNEW = "  k_new: {tier: dm, slice: 'm![H, S / 32]', element: 'm![S % 32, D]', given: true}\n"
KDM = ("  k_dm: {tier: dm, slice: 'm![S / 4]', element: 'm![S % 4, H, D]', "
       "address: 8192}\n")
CACHE = "  k_cache: {tier: hbm, element: free, axes: [S, H, D]}\n"
STREAM = "stream: {time: free, packet: free}"


def _graph(tensors: str, ops: list[str]) -> str:
    return HEAD + "tensors:\n" + tensors + "ops:\n" + "".join(f"  - {o}\n" for o in ops)


# ---- located errors ---------------------------------------------------------------------

@pytest.mark.parametrize("tensors, ops, where, words", [
    (KNEW + CACHE, ["{name: a, kind: dma, source: k_nw, destination: k_cache}"],
     "g.yaml:9:", ["'k_nw' is not a tensor", "did you mean 'k_new'"]),
    (KNEW + CACHE + KDM, ["{name: a, kind: dma, source: k_dm, destination: k_cache}"],
     "g.yaml:10:", ["k_dm is read before it is written"]),
    (KNEW + CACHE + KDM, ["{name: a, kind: dma, source: k_new, destination: k_cache}",
                          "{name: b, kind: dma, source: k_dm, destination: k_cache}"],
     "g.yaml:11:", ["k_cache is written by op a already"]),
    (KNEW + CACHE + KDM, ["{name: a, kind: dma, source: k_cache, destination: k_dm}",
                          "{name: b, kind: dma, source: k_dm, destination: k_cache}"],
     "g.yaml:10:", ["cycle: a -> b -> a"]),
    (KNEW + CACHE, ["{name: a, kind: dma, source: k_cache, destination: k_new}"],
     "g.yaml:9:", ["k_new is given"]),
    (KNEW + "  k_x: {tier: hbm, element: 'm![S, H]'}\n",
     ["{name: a, kind: dma, source: k_new, destination: k_x}"],
     "g.yaml:9:", ["carries the axes ['H', 'S']"]),
    (KNEW + CACHE, ["{name: a, kind: dmaa, source: k_new, destination: k_cache}"],
     "g.yaml:9:", ["'dmaa' is not a graph op", "did you mean 'dma'"]),
    (KNEW + KDM.replace("address: 8192", "address: 0"), [
        "{name: a, kind: dma, source: k_new, destination: k_dm}"],
     "g.yaml:7:", ["k_dm (dm bytes 0 to 4,096) overlaps k_new", "address: 4096"]),
    (KNEW + "  k_c: {tier: hbm, element: free}\n", [
        "{name: a, kind: dma, source: k_new, destination: k_c}"],
     "g.yaml:7:", ["a free Element orders the tensor's axes"]),
    (KNEW + "  k_c: {tier: hbm, element: {digits: ['S', 'H'], orders: []}}\n", [
        "{name: a, kind: dma, source: k_new, destination: k_c}"],
     "g.yaml:7:", ["takes digits"]),
    (KNEW + CACHE + "  spare: {tier: hbm, address: 4194304, element: 'm![S, H, D]'}\n",
     [f"{{name: a, kind: dma, source: k_new, destination: k_cache, {STREAM}}}"],
     "g.yaml:8:", ["spare is neither given nor written by an op"]),
    (KNEW + "  k_c: {tier: hbm, element: free, axes: [S, H, D, D]}\n", [
        "{name: a, kind: dma, source: k_new, destination: k_c}"],
     "g.yaml:7:", ["D is listed twice"]),
    (KNEW + CACHE, ["{name: a, kind: dma, axes: {S: 4}, source: k_new, destination: k_cache}"],
     "g.yaml:9:", ["axes is the graph's, not an op's"]),
    (KNEW + CACHE, ["{name: a, kind: [dma], source: k_new, destination: k_cache}"],
     "g.yaml:9:", ["['dma'] is not a graph op"]),
    (KNEW + CACHE + KDM, [
        f"{{name: a, kind: dma, source: k_new, destination: k_cache, {STREAM}}}",
        f"{{name: b, kind: dma, source: k_cache, destination: k_cache, {STREAM}}}"],
     "g.yaml:11:", ["ops.1.destination: k_cache is written by op a already"]),
    (KNEW + "  other: {tier: hbm, address: 262144, element: 'm![S, H, D]', given: true}\n"
     "  k_c: {tier: hbm, element: {orders: ['m![H, S, D]', 'm![H # 16, S, D]']}}\n",
     [f"{{name: a, kind: dma, source: k_new, destination: k_c, {STREAM}}}"],
     "g.yaml:", ["overlaps other"]),
])
def test_graph_mistakes_are_located(tensors, ops, where, words):
    e = _error(_graph(tensors, ops))
    text = str(e)
    assert e.message.startswith(where), e.message
    for w in words:
        assert w in text, text


def test_too_many_candidates_is_a_size_limit():
    # (8 digits may be ordered by the one DMA writing the tensor: planner/graph_orders.py)
    text = _graph(KNEW + "  k_c: {tier: hbm, element: {digits: ['S / 128', 'S / 64 % 2', "
                  "'S / 32 % 2', 'S / 16 % 2', 'S / 8 % 2', 'S % 8', 'H / 2', 'H % 2', "
                  "'D']}}\n", ["{name: a, kind: dma, source: k_new, destination: k_c}"])
    with pytest.raises(tcplan.TcplanError) as e:
        _load(text)
    assert e.value.code == "size-limit" and "362,880" in e.value.message, e.value.message


# ---- the joint choice against brute force -----------------------------------------------

DM_SPECS = [  # DM layouts of (S: 256, H: 8, D: 64) bf16 that fit one slice's DM
    "{tier: dm, slice: 'm![H, S / 32]', element: 'm![S % 32, D]'",
    "{tier: dm, slice: 'm![S / 4]', element: 'm![S % 4, H, D]'",
    "{tier: dm, slice: 'm![S / 4]', element: 'm![H, S % 4, D]'",
    "{tier: dm, slice: 'm![S / 8, H / 4]', element: 'm![S % 8, H % 4, D]'",
]


def random_graph(seed: int) -> str:
    """A small graph: a given DM tensor stored to one or two free HBM tensors, each read
    into one to three DM layouts, some HBM tensors copied on (HBM to HBM is not a DMA the
    seeds time, so copies go through DM)."""
    rng = random.Random(seed)
    tensors = ["  g: " + rng.choice(DM_SPECS) + ", given: true}\n"]
    ops, addr = [], 8192
    n_free = rng.choice([1, 1, 2])
    for h in range(n_free):
        orders = rng.sample(["m![S, H, D]", "m![H, S, D]", "m![S, D, H]", "m![H, D, S]"],
                            rng.choice([2, 3, 4]))
        tensors.append(f"  h{h}: {{tier: hbm, address: {h * 262144}, element: "
                       f"{{orders: {json.dumps(orders)}}}}}\n")
        src = "g" if h == 0 or rng.random() < 0.5 else f"d{h - 1}_0"
        ops.append(f"{{name: store{h}, kind: dma, source: {src}, destination: h{h}, "
                   f"{STREAM}}}")
        for r in range(rng.choice([1, 2, 3])):
            tensors.append(f"  d{h}_{r}: " + rng.choice(DM_SPECS) + f", address: {addr}}}\n")
            addr += 8192
            ops.append(f"{{name: load{h}_{r}, kind: dma, source: h{h}, "
                       f"destination: d{h}_{r}, {STREAM}}}")
    return _graph("".join(tensors), ops)


def _brute_force(g, table, objective: str) -> int | None:
    """The least cycles over every assignment of every free tensor's candidates, each op
    costed by its row for that assignment, the critical path by its own longest path."""
    free = g.free()
    best = None
    for combo in itertools.product(*(g.tensors[n].candidates for n in free)):
        assign = dict(zip(free, combo))
        cost = {}
        for op in g.ops:
            row = next(r for r in table[op.index]
                       if all(assign[n] == c for n, c in r.layout.items()))
            if not row.ok:
                break
            cost[op.index] = row.cycles
        else:
            if objective == "sum":
                total = sum(cost.values())
            else:
                finish: dict[int, int] = {}
                for op in g.ops:  # ops are listed after the ops they read from
                    pre = [finish[u] for u, v in g.dag.in_edges(op.index)]
                    finish[op.index] = max(pre, default=0) + cost[op.index]
                total = max(finish.values())
            best = total if best is None else min(best, total)
    return best


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_the_joint_choice_is_the_brute_force_optimum(seed):
    p = _load(random_graph(seed), f"random{seed}.yaml")
    g = p.spec.graph
    table = evaluate(g, Options())
    for objective in ("sum", "critical_path"):
        want = _brute_force(g, table, objective)
        if want is None:
            out = choose(g, table, objective)
            assert isinstance(out, NoPlan) and out.error.code == "graph-no-layout"
            continue
        got = unwrap(choose(g, table, objective))
        assert (got.sum_cycles if objective == "sum" else got.critical_path_cycles) == want
        gr = greedy(g, table)
        assert gr is None or gr.sum_cycles >= (got.sum_cycles if objective == "sum"
                                               else want)


def test_the_fanout_graph_beats_planning_each_op_alone():
    """The writer prefers the S-major HBM layout; three readers the head-major one: the
    joint plan takes the readers' (12,240 cycles), greedy the writer's (16,336), 1.33x.
    524,288 bytes each: 2,548 = 500 + 2,048 requests of 256 B; 4,596 = 500 + 4,096
    packets of 128 B (one head's D), a request each."""
    p = tcplan.load(FANOUT)
    g = p.spec.graph
    table = evaluate(g, Options())
    joint, alone = unwrap(choose(g, table)), greedy(g, table)
    assert joint.layout == {"o_hbm": "m![H, S, D]"} and alone.layout == {
        "o_hbm": "m![S, H, D]"}
    assert (joint.sum_cycles, alone.sum_cycles) == (4596 + 3 * 2548, 2548 + 3 * 4596)
    assert alone.sum_cycles / joint.sum_cycles >= 1.3
    assert joint.sum_cycles == _brute_force(g, table, "sum")


def test_an_op_costs_what_its_own_problem_costs():
    """The graph's read op is the DMA one would write by hand with the chosen layout."""
    solved = tcplan.solve(KV)
    layout = solved.to_json()["plan"]["layouts"]["k_cache"]
    alone = tcplan.loads(f"""kind: dma
dtype: bf16
axes: {{S: 256, H: 8, D: 64}}
source: {{tier: hbm, address: 0, element: '{layout}'}}
destination: {{tier: dm, slice: 'm![S / 4]', element: 'm![S % 4, H, D]', address: 8192}}
stream: {{time: free, packet: free}}
""", "read.yaml")
    ops = {o["op"]: o for o in solved.to_json()["plan"]["ops"]}
    assert tcplan.solve(alone).cycles == ops["read"]["cycles"]
    assert solved.cycles == sum(o["cycles"] for o in ops.values())


# ---- conflicts ----------------------------------------------------------------------------

MLP_TEXT = MLP.read_text()


def test_a_conflict_names_the_ops_that_disagree():
    """The chain reads h_dm T-major (its Fetch needs the packet innermost); a load from a
    given F-major HBM layout into DM plans only into an F % 8-major h_dm (a write into DM
    keeps 8-byte packets). (Before docs/decisions.md item 115 the same conflict stood on
    the store side, into HBM, which now has no alignment rule: that store plans.)"""
    text = MLP_TEXT.replace("h_hbm: {tier: hbm, address: 0, element: 'm![B, T, F]', "
                            "given: true}", "h_hbm: {tier: hbm, address: 0, element: "
                            "'m![B, F, T]', given: true}")
    p = _load(text, "conflict.yaml")
    why = tcplan.explain(p)
    assert not why.feasible and why.exit_code == 1
    assert [c["op"] for c in why.conflict] == ["load", "bias_relu"]
    msg = " ".join(c["message"] for c in why.conflict)
    assert "innermost-access" in msg and "dma-hbm-dm-align" in msg
    assert "h_dm m![F % 8, T]" in msg
    solved = tcplan.solve(p)
    assert solved.status == "infeasible" and solved.error.code == "graph-no-layout"
    # minimal: without either op, the other has a plan
    g = p.spec.graph
    table = evaluate(g, Options())
    for keep in ("load", "bias_relu"):
        rows = table[next(o.index for o in g.ops if o.name == keep)]
        assert any(r.ok for r in rows)
    store = MLP_TEXT.replace("a_hbm: {tier: hbm, address: 1048576, element: free, axes: "
                             "[B, T, F]}", "a_hbm: {tier: hbm, address: 1048576, element: "
                             "'m![B, F, T]'}")
    assert tcplan.explain(_load(store, "store.yaml")).feasible


def test_an_op_with_no_plan_at_all_is_the_conflict_alone():
    text = _graph(KNEW + CACHE + KDM.replace("'m![S / 4]'", "'m![S / 8]'").replace(
        "'m![S % 4, H, D]'", "'m![S % 8, H, D]'"),
        [f"{{name: append, kind: dma, source: k_new, destination: k_cache, {STREAM}}}",
         f"{{name: read, kind: dma, source: k_cache, destination: k_dm, {STREAM}}}"])
    why = tcplan.explain(_load(text))
    assert [c["op"] for c in why.conflict] == ["read"]
    assert why.conflict[0]["rules"] == ["slice-size"]


# ---- running it -----------------------------------------------------------------------------

def test_solve_verify_and_explain_agree():
    # append: 256 x 8 x 64 bf16 = 262,144 bytes in 4,096-byte packets, 1,024 requests of
    # 256 B at one a cycle + 500; read: 128-byte packets (D), 2,048 requests + 500
    solved = tcplan.solve(KV)
    assert solved.status == "optimal" and solved.verified and solved.cycles == 4072
    checked = tcplan.verify(KV)
    assert checked.verified and checked.cycles == 4072
    assert checked.breakdown["critical_path"] == ["append", "read"]
    assert tcplan.explain(KV).to_json()["cycles"] == 4072


def test_a_run_that_does_not_move_fails_verification(monkeypatch):
    from tcplan.executor import run as run_mod
    monkeypatch.setattr(run_mod, "execute", lambda mem, plan, progress=None: 0)
    checked = tcplan.verify(KV)
    assert checked.verified is False and checked.error.code == "verify-mismatch"


def test_a_clobbered_tensor_is_caught(monkeypatch):
    """Two DM tensors at the same bytes (the loader's overlap check switched off): the run
    refuses the op writing over the live input (docs/decisions.md item 130)."""
    from tcplan.planner import graph as graph_mod
    monkeypatch.setattr(graph_mod, "_disjoint", lambda g: None)
    text = KV.read_text().replace("address: 8192", "address: 0")
    checked = tcplan.verify(_load(text, "clobber.yaml"))
    assert checked.verified is False and "verify-mismatch" == checked.error.code


def test_run_takes_the_given_tensors_and_writes_every_tensor(tmp_path):
    rng = np.random.default_rng(5)
    h = rng.standard_normal((16, 2, 2048)).astype(np.float32)
    ran = tcplan.run(MLP, {"h_hbm": h})
    assert set(ran.arrays) == {"h_hbm", "h_dm", "a_dm", "a_hbm"}
    assert np.array_equal(ran.arrays["h_dm"], h)
    assert np.array_equal(ran.arrays["a_hbm"], np.maximum(h + np.float32(0.5), 0))
    out = io.StringIO()
    np.save(tmp_path / "h.npy", h)
    assert main(["run", str(MLP), "--input", f"h_hbm={tmp_path / 'h.npy'}", "--out",
                 str(tmp_path / "out")], stdout=out) == 0
    assert np.array_equal(np.load(tmp_path / "out" / "a_hbm.npy"), ran.arrays["a_hbm"])


def test_the_cli_solves_lowers_and_batches_graphs(tmp_path):
    out = io.StringIO()
    assert main(["solve", str(KV), "--json"], stdout=out) == 0
    r = json.loads(out.getvalue())
    assert r["plan"]["layouts"] == {"k_cache": "m![H, S, D]"}
    assert r["sum_cycles"] == r["critical_path_cycles"] == 4072
    out = io.StringIO()
    assert main(["lower", str(KV)], stdout=out) == 0 and "op read" in out.getvalue()
    out = io.StringIO()
    assert main(["batch", str(GRAPHS), "--json"], stdout=out) == 0
    assert json.loads(out.getvalue())["ok"]


# ---- ops that run on memories of their own: gather, scatter, redistribute ------------------

def test_a_scatter_then_a_gather_of_the_same_pages_reads_back_what_was_written():
    ran = tcplan.run(GRAPHS / "paged_kv_write_then_read.yaml", seed=4)
    a, b = ran.arrays["new_rows"], ran.arrays["read_back"]
    assert a.shape == (512, 128) and np.array_equal(a.view(np.uint16), b.view(np.uint16))
    pages = ran.arrays["pages"]  # seeded by the scatter: distinct whole rows, in bytes
    assert len(set(pages.tolist())) == 512 and (pages % 256 == 0).all()
    solved = tcplan.solve(GRAPHS / "paged_kv_write_then_read.yaml")
    assert solved.verified and solved.cycles is None
    assert solved.to_json()["unmodelled"] == ["write", "read"]


def test_an_embedding_lookup_gathers_the_rows_its_ids_name():
    ran = tcplan.run(GRAPHS / "embedding_lookup_then_store.yaml", seed=2)
    table, ids, out = ran.arrays["table"], ran.arrays["ids"], ran.arrays["out"]
    rows = ids // 256  # scaled ids: byte offsets of 128-element bf16 rows
    assert out.shape == (128, 512)  # (D, G): the graph's axes order
    assert np.array_equal(out.view(np.uint16), table[rows].T.view(np.uint16))
    # the store: 512 x 128 bf16 = 131,072 bytes, 512 requests of 256 B at one a cycle, + 500
    # (the gather's cycles are not modelled: 0)
    assert tcplan.solve(GRAPHS / "embedding_lookup_then_store.yaml").cycles == 500 + 512


def test_two_redistributions_compose():
    ran = tcplan.run(GRAPHS / "shuffle_then_swap.yaml", seed=1)
    x, z = ran.arrays["x"], ran.arrays["z"]
    # chip c gets chip c + 1's data (chip_shuffle [1, 2, 3, 0]), then the clusters swap
    assert np.array_equal(z, np.roll(x, -1, axis=0)[:, ::-1])


def test_a_result_declared_otherwise_than_made_is_refused():
    text = (GRAPHS / "shuffle_then_swap.yaml").read_text().replace("address: 2048}",
                                                                   "address: 4096}")
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.solve(_load(text, "swap.yaml"))
    assert e.value.code == "graph-derived-layout" and e.value.kind == "input"
    assert "address: 2048" in str(e.value)


def test_a_lane_fold_is_not_a_graph_op():
    e = _error(_graph(KNEW + CACHE, ["{name: a, kind: lane_fold, x: k_new, out: k_cache}"]))
    assert "'lane_fold' is not a graph op" in e.message
    for kind in ("dma", "pcie", "expression", "vector", "gather", "scatter", "redistribute"):
        assert kind in str(e)


def test_a_chain_op_of_another_dtype_than_its_tensors_is_refused():
    """An out tensor in bf16 would take the chain's f32 output two bytes at a time."""
    text = MLP_TEXT.replace("a_dm: {tier: dm,", "a_dm: {tier: dm, dtype: bf16,").replace(
        "a_hbm: {tier: hbm,", "a_hbm: {tier: hbm, dtype: bf16,")
    solved = tcplan.solve(_load(text, "bf16_out.yaml"))
    assert solved.status == "infeasible" and "graph-dtype" in solved.error.message
    assert "a_dm is bf16; op bias_relu writes f32" in str(
        tcplan.explain(_load(text, "bf16_out.yaml")).to_json())


def test_a_vector_op_needs_its_reference():
    text = (GRAPHS / "layer_norm_scale_shift.yaml").read_text()
    i = text.index("  - name: scale_shift")
    j = text.index("  - {name: store")
    vec = """  - name: scale_shift
    kind: vector
    x: x_dm
    out: y_dm
    input: {cluster: 'm![B]', slice: 'm![R / 8]', time: 'm![N]', packet: 'm![R % 8]'}
    chain: [{tag: zero}, {fxp: {op: AddFxp, operand: 1}}, final]
"""
    text = (text[:i] + vec + text[j:]).replace("dtype: f32", "dtype: i32")
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.solve(_load(text, "noref.yaml"))
    assert e.value.kind == "input" and "no reference formula" in str(e.value)


def test_a_time_limit_is_never_taken_for_a_rule(tmp_path):
    """A search the limit stops is 'unknown' (no plan found) or 'feasible' (not proven),
    never 'infeasible' or 'optimal'."""
    text = _graph("  s: {tier: hbm, element: 'm![S, H, D]', given: true}\n"
                  "  d: {tier: dm, slice: 'm![S / 4]', element: 'm![S % 4, H, D]'}\n",
                  ["{name: a, kind: dma, source: s, destination: d, "
                   "stream: {cluster: free, slice: free, time: free, packet: free}}"])
    for limit in (0.01, 0.05, 10.0):
        solved = tcplan.solve(_load(text), time_limit=limit, verify="none")
        assert solved.status in ("unknown", "feasible", "optimal")
        if solved.status == "unknown":
            assert solved.error.code == "plan-time-limit"
    assert solved.status == "optimal"


def test_lower_json_and_trace_of_a_graph(tmp_path):
    out = io.StringIO()
    assert main(["lower", str(KV), "--json"], stdout=out) == 0
    r = json.loads(out.getvalue())
    assert r["layouts"] == {"k_cache": "m![H, S, D]"} and r["ops"][1]["plan"]["engines"]
    err = io.StringIO()
    assert main(["trace", str(KV), "--index", "S=1"], stdout=io.StringIO(), stderr=err) == 2
    assert "tcplan lower the graph" in err.getvalue()


def test_run_takes_a_chain_ops_vrf_operands(tmp_path):
    """layer_norm_scale_shift: x * gamma + beta with the user's gamma and beta."""
    lnorm = GRAPHS / "layer_norm_scale_shift.yaml"
    p = tcplan.load(lnorm)
    assert kind_inputs(p) == ("x_hbm", "scale_shift.gamma", "scale_shift.beta")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2048, 2, 16)).astype(np.float32)  # (R, B, N)
    gamma = rng.standard_normal((2048, 2)).astype(np.float32)  # (R, B): per feature
    beta = rng.standard_normal((2048, 2)).astype(np.float32)
    for name, arr in (("x", x), ("g", gamma), ("b", beta)):
        np.save(tmp_path / f"{name}.npy", arr)
    out = tmp_path / "out"
    assert main(["run", str(lnorm), "--input", f"x_hbm={tmp_path / 'x.npy'}",
                 "--input", f"scale_shift.gamma={tmp_path / 'g.npy'}",
                 "--input", f"scale_shift.beta={tmp_path / 'b.npy'}", "--out", str(out)],
                stdout=io.StringIO()) == 0
    y = np.load(out / "y_hbm.npy")
    want = x * gamma[:, :, None] + beta[:, :, None]  # (the chain's fused multiply-add:
    assert np.allclose(y, want, rtol=1e-6, atol=1e-6)  # one rounding, not two)
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.run(p, {"scale_shift.gamma": gamma[:10]})
    assert "scale_shift.gamma: expected shape (2048, 2)" in str(e.value)


def kind_inputs(p):
    from tcplan.planner.kinds import kind_of
    return kind_of(p).inputs(p)


# ---- a free Element repeating digits another dimension holds (issue 31) ------------------
REPEATS = """format: 1
name: repeats
kind: graph
dtype: bf16
axes: {A: 64, B: 32}
tensors:
  src: {tier: hbm, element: 'm![A, B]', given: true}
  dst: {tier: dm, slice: 'm![A / 4, 1 # 16]', element: %ELEMENT%}
ops:
  - {name: load, kind: dma, source: src, destination: dst, stream: {time: free, packet: free}}
"""


@pytest.mark.parametrize("element", ["free, axes: [A, B]", "{digits: ['A', 'B']}"])
def test_a_free_element_repeating_the_slices_digits_gets_the_fixed_layouts_error(element):
    """The Slice holds A / 4 and the free Element orders all of A: every order repeats A's
    high digits. Written as a given layout, tcplan names incompatible-decomposition; the
    free one now gets the same rule (before: graph-no-layout over its candidates), at the
    Element's line, its fix the digits no other dimension holds (A % 4 and B), which then
    plan."""
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.loads(REPEATS.replace("%ELEMENT%", element), "repeats.yaml")
    assert e.value.code == "incompatible-decomposition"
    assert e.value.message.startswith("repeats.yaml:8:") and "A / 4" in e.value.message
    assert e.value.fix.startswith("element: {digits: ['A % 4', 'B']}")
    fixed = tcplan.loads(REPEATS.replace("%ELEMENT%", "{digits: ['A % 4', 'B']}"), "ok.yaml")
    assert tcplan.solve(fixed, verify="none").status == "optimal"
    given = tcplan.loads(REPEATS.replace("%ELEMENT%", "'m![A, B]'"), "given.yaml")
    assert "incompatible-decomposition" in tcplan.solve(given, verify="none").error.message


def test_a_graph_file_s_mistakes_come_in_one_run(tmp_path, capsys):
    """Issue 31: every tensor's and every op's mistake is named at once (before, one per
    run): an undeclared axis, a bad flag, a misspelt op kind and an unknown tensor."""
    from tcplan.planner.cli import main
    f = tmp_path / "g.yaml"
    f.write_text("""format: 1
name: multi
kind: graph
axes: {A: 64, B: 32}
tensors:
  x: {tier: hbm, element: 'm![A, B]', given: true}
  y: {tier: dm, cluster: 'm![1 # 2]', slice: 'm![A, 1 # 4]', element: 'm![B, Q]'}
  z: {tier: dm, cluster: 'm![1 # 2]', slice: 'm![A, 1 # 4]', element: 'm![B]', given: maybe}
ops:
  - {name: a, kind: dma, source: x, destination: y}
  - {name: b, kind: dmaa, source: y, destination: z}
  - {name: c, kind: dma, source: x, destination: w}
""")
    assert main(["solve", str(f)]) == 2
    err = capsys.readouterr().err
    assert [ln.split(": ")[1] for ln in err.splitlines() if ln.startswith("error")] == [
        f"{f}:7:71", f"{f}:8:87", f"{f}:11:21", f"{f}:12:50"]
    assert "'Q'" in err and "'maybe'" in err and "did you mean 'dma'" in err and "'w'" in err
