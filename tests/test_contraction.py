"""The Contraction Engine (model/engines/contraction.py, executor/contraction.py; issue 29):
the guide's worked examples with the figures they state (book: computing-tensors/
contraction-engine/), each rule refusing what it names, and every run checked against
numpy.einsum (integers bit for bit, floats within the stated summation bound)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tcplan
from tcplan.model.rules import TcplanError
from tcplan.planner.kinds import kind_of
from tcplan.planner.spec import load_problem

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "problems/guide"


def plan_of(name: str):
    p = load_problem(str(GUIDE / f"{name}.yaml"))
    return p, kind_of(p).lower(p)


# ---- the guide's figures ------------------------------------------------------------------
@pytest.mark.parametrize("name, util", [
    ("contract_bmatmul_k_in_time", 1 / 32),  # 'only 1 of 32 multipliers does useful work'
    ("contract_bmatmul_m_in_time", 1.0),  # 'It maximizes MAC utilization across lanes'
    ("contract_bmatmul_v_in_time", 1.0),
    ("contract_matmul_packet", 1.0),  # 'uses all 8 lanes in parallel: tree depth 5'
])
def test_batched_matmul_mac_utilization(name, util):
    _, plan = plan_of(name)
    assert plan.mac_utilization == pytest.approx(util)


def test_stream_adapter_example_derives_pack_lane_and_time_broadcast():
    # outer.md stream_adapter_example: PackSize = 2, LaneBroadcast N = 8, TimeBroadcast B = 5
    _, plan = plan_of("contract_stream_adapter")
    assert (plan.packing.pack, plan.packing.lanes, plan.packing.tiling) == (2, 8, 5)


@pytest.mark.parametrize("name, read, bcast", [
    ("contract_bmatmul_m_in_time", 32, 1),  # trf_sequencer_full_read: ReadSize 32, 1
    ("contract_trf_partial_read", 16, 2),  # trf_sequencer_partial_read: ReadSize 16, L
])
def test_trf_sequencer_read_size_and_packet_broadcast(name, read, bcast):
    _, plan = plan_of(name)
    assert (plan.reads.read_size, plan.reads.packet_broadcast) == (read, bcast)
    assert plan.reads.banks == (2 if read * 2 > 32 else 1)  # bf16: 64 B spans both banks


def test_packet_reducer_depth_and_latency():
    # packet-reducer.md: 'tree depth 5 sums over the 32 bf16 elements of B'; latency 5 (bf16)
    _, plan = plan_of("contract_matmul_packet")
    assert plan.depth == 5 and plan.tree_latency == 5
    _, partial = plan_of("contract_trf_partial_read")  # [L, K] to [L]: the innermost 16
    assert partial.depth == 4


def test_time_reducer_slots_of_reduce_b():
    # time-reducer.md reduce_b: InnerTime::SIZE = 8; Sequential, Lane 1: slot capacity 32
    from tcplan.model.engines.contraction import slot_capacity
    _, plan = plan_of("contract_reduce_b")
    assert plan.inner_time == 8
    assert slot_capacity("sequential", 1, 1) == 32
    # the table: Interleaved 128 / Packet::SIZE, Sequential 32 / Lane::SIZE
    assert [slot_capacity("interleaved", 8, p) for p in (1, 4, 32)] == [128, 32, 4]
    assert [slot_capacity("sequential", n, 8) for n in (1, 2, 8)] == [32, 16, 4]


@pytest.mark.parametrize("mode, time, packet", [
    ("interleaved", "m![M, P]", "m![N]"),  # lane-folder.md lane_interleaved
    ("sequential", "m![M, N, P / 8]", "m![P % 8]"),  # lane_sequential
])
def test_lane_folder_examples(mode, time, packet):
    _, plan = plan_of(f"contract_lane_{mode}")
    assert (plan.folded.out_time.text(), plan.folded.out_packet.text()) == (time, packet)


def test_multiplier_widening_and_tree_latency_by_type():
    from tcplan.model.engines.contraction import accumulator
    assert [accumulator(t, t) for t in ("i8", "bf16", "f8e4m3", "f8e5m2")] == \
        ["i32", "f32", "f32", "f32"]
    for bad in (("i8", "bf16"), ("f8e4m3", "f8e5m2"), ("f32", "f32"), ("i16", "i16")):
        with pytest.raises(TcplanError) as e:
            accumulator(*bad)
        assert e.value.code == "contract-dtypes"


@pytest.mark.parametrize("name", sorted(p.stem for p in GUIDE.glob("contract_*.yaml")))
def test_guide_contractions_verify_with_their_cycles(name):
    p = load_problem(str(GUIDE / f"{name}.yaml"))
    r = tcplan.verify(p)
    assert r.verified and r.cycles == p.expect["cycles"]


# ---- built problems: each rule, each dtype ------------------------------------------------
SPATIAL = "cluster: 'm![1 # 2]', slice: 'm![S # 256]'"


def contract(dtype="bf16", time="m![A, K / 16]", packet="m![K % 16]", lane="m![N]",
             element="m![K]", outer=("m![A]", "m![K]"), rpacket="m![1]", rtime="m![A]",
             mode="interleaved", out=("m![A]", "m![N]"), axes="{S: 2, A: 8, K: 32, N: 8}",
             trf_dtype=None) -> str:
    td = f", dtype: {trf_dtype}" if trf_dtype else ""
    return f"""format: 1
name: c
kind: contract
dtype: {dtype}
axes: {axes}
source: {{{SPATIAL}, time: '{time}', packet: '{packet}'}}
trf: {{tier: trf, {SPATIAL}, lane: '{lane}', element: '{element}'{td}}}
stages: {{outer: {{time: '{outer[0]}', packet: '{outer[1]}'}}, packet: '{rpacket}',
          time: '{rtime}', lane: {mode}}}
destination: {{{SPATIAL}, time: '{out[0]}', packet: '{out[1]}'}}
"""


def lowered(text: str):
    p = tcplan.loads(text, "c.yaml")
    return p, kind_of(p).lower(p)


def test_i8_runs_bit_for_bit_against_einsum():
    # i8: a flit of 32, a packet of 64 (PackSize 2 packs K / 32); the tree sums all 64
    p, plan = lowered(contract("i8", time="m![A, K / 32]", packet="m![K % 32]",
                               axes="{S: 2, A: 8, K: 64, N: 8}"))
    assert plan.out.dtype == "i32" and plan.tree_latency == 6
    rng = np.random.default_rng(3)
    S = rng.integers(-128, 128, size=(2, 8, 64), dtype=np.int8)
    W = rng.integers(-128, 128, size=(2, 64, 8), dtype=np.int8)
    out = tcplan.run(p, {"source": S, "trf": W})
    want = np.einsum("sak,skn->san", S.astype(np.int64), W.astype(np.int64))
    assert np.array_equal(out.arrays["destination"], want.astype(np.int32))


def test_f8_verifies():
    p, plan = lowered(contract("f8e4m3", time="m![A, K / 32]", packet="m![K % 32]",
                               axes="{S: 2, A: 8, K: 64, N: 8}"))
    assert plan.out.dtype == "f32" and tcplan.verify(p).verified


@pytest.mark.parametrize("kw, rule", [
    ({"lane": "m![N]", "axes": "{S: 2, A: 8, K: 32, N: 3}", "out": ("m![A]", "m![N # 8]")},
     "contract-lanes"),
    ({"outer": ("m![A]", "m![K # 48]")}, "contract-outer-packet"),
    ({"time": "m![K / 16, A]", "outer": ("m![A]", "m![K]")}, "contract-pack"),
    ({"outer": ("m![A / 2, K / 16]", "m![K % 16]"), "time": "m![A, K / 16]"},
     "contract-broadcast"),
    ({"element": "m![K % 16]"}, "contract-trf"),
    ({"trf_dtype": "i8"}, "contract-dtypes"),
    ({"rpacket": "m![K % 2]"}, "contract-packet-reduce"),
    ({"time": "m![K / 16, A]", "packet": "m![K % 16]", "outer": ("m![K / 16, A]",
                                                                   "m![K % 16]"),
      "rtime": "m![A, K / 16]"}, "contract-time-reduce"),
    ({"time": "m![K / 16, A]", "outer": ("m![K / 16, A]", "m![K % 16]"), "mode":
      "sequential", "out": ("m![A, N]", "m![1 # 8]")}, "contract-slots"),
])
def test_each_rule_refuses_by_name(kw, rule):
    with pytest.raises(TcplanError) as e:
        lowered(contract(**kw))
    assert rule in {v.rule for v in e.value.violations}, e.value


def test_the_reducers_may_not_sum_a_digit_the_result_holds():
    """contract-reduce-axes: a stream whose Slice holds K / 8 (each slice a different K
    range) while the tree sums K % 16: the digits overlap, so the result on the slices
    would hold values the reducer has already summed over."""
    text = contract().replace("slice: 'm![S # 256]'", "slice: 'm![K / 8, S # 64]'")
    with pytest.raises(TcplanError) as e:
        lowered(text)
    assert [v.rule for v in e.value.violations] == ["contract-reduce-axes"]
    assert "digits of K" in e.value.message


def test_a_result_may_keep_the_digits_the_reducers_do_not_sum():
    """The tree keeps K / 16 (OutPacket m![K / 16]) and sums K % 16: the result on
    m![A, K / 16] holds a partial sum per K / 16 (docs/decisions.md item 105): each is
    numpy's sum over its 16 values of K, exactly on integers."""
    p, plan = lowered(contract(rpacket="m![K / 16]", out=("m![A, K / 16]", "m![N]")))
    from tcplan.model.numeric import NP_DTYPES
    rng = np.random.default_rng(4)
    S = rng.integers(-3, 4, (2, 8, 32)).astype(np.float32)  # (S, A, K)
    W = rng.integers(-3, 4, (2, 32, 8)).astype(np.float32)  # (S, K, N)
    bf16 = NP_DTYPES["bf16"]
    out = tcplan.run(p, {"source": S.astype(bf16), "trf": W.astype(bf16)})
    d = out.arrays["destination"]  # (S, A, K, N): the partial sums at K = 0 and 16
    want = np.einsum("sakj,skjn->sakn", S.reshape(2, 8, 2, 16), W.reshape(2, 2, 16, 8))
    assert np.array_equal(d[:, :, ::16], want)


def test_a_refused_op_is_explained_by_its_rule_with_exit_1():
    p = tcplan.loads(contract(trf_dtype="i8"), "c.yaml")
    code, report = kind_of(p).explain(p)
    assert code == 1 and report["conflict"][0]["rule"] == "contract-dtypes"


def test_explain_names_idle_multipliers():
    p = load_problem(str(GUIDE / "contract_bmatmul_k_in_time.yaml"))
    code, report = kind_of(p).explain(p)
    assert code == 0 and report["mac_utilization"] == pytest.approx(1 / 32)
    assert report["binding"][0]["title"] == "MAC utilization 0.0312"


# ---- the check can fail, and its float bound is the right one -----------------------------
def test_a_wrong_result_is_caught():
    from tcplan.executor import contraction as C
    from tcplan.executor.engines import lay_out
    p, plan = lowered(contract("i8", time="m![A, K / 32]", packet="m![K % 32]",
                               axes="{S: 2, A: 8, K: 64, N: 8}"))
    rng = np.random.default_rng(0)
    S = rng.integers(-9, 9, size=(2, 8, 64)).astype(np.int8)
    W = rng.integers(-9, 9, size=(2, 64, 8)).astype(np.int8)
    exact, bound = C.reference(plan, S, W)
    values = C.run_stages(plan, lay_out(plan.src, _full(S, p.axes, "SAK"), p.axes),
                          lay_out(plan.trf, _full(W, p.axes, "SKN"), p.axes))
    assert C.check(plan, plan.out, values, exact, bound) == 2 * 8 * 8
    values[0, 3, 2] += 1
    with pytest.raises(TcplanError) as e:
        C.check(plan, plan.out, values, exact, bound)
    assert e.value.code == "verify-mismatch" and "unit 0, time 3, packet 2" in str(e.value)


def _full(T: np.ndarray, axes: dict, have: str) -> np.ndarray:
    """T over the axes ``have`` (letters of the axes' names, in order) as one over all."""
    shape = [axes[a] if a in have else 1 for a in axes]
    return np.ascontiguousarray(np.broadcast_to(T.reshape(shape), tuple(axes.values())))


def test_float_bound_holds_and_is_needed():
    """The f32 result of an ill-conditioned sum differs from the float64 value (so an exact
    comparison would refuse a correct run) by no more than gamma(n) * sum |a b|."""
    p, plan = lowered(contract())
    rng = np.random.default_rng(7)
    big = (rng.standard_normal((2, 8, 32)) * 2.0 ** rng.integers(-8, 9, (2, 8, 32)))
    S = big.astype(np.float32).astype(tcplan_bf16())  # (scales 2^-8 to 2^8: cancellation)
    W = rng.standard_normal((2, 32, 8)).astype(np.float32).astype(tcplan_bf16())
    out = tcplan.run(p, {"source": S, "trf": W})  # raises verify-mismatch past the bound
    exact = np.einsum("sak,skn->san", S.astype(np.float64), W.astype(np.float64))
    bound = 32 * 2.0 ** -24 / (1 - 32 * 2.0 ** -24) * np.einsum(
        "sak,skn->san", np.abs(S.astype(np.float64)), np.abs(W.astype(np.float64)))
    got = out.arrays["destination"]
    assert (np.abs(got - exact) <= bound).all()
    # f32 adds round: the result is not the float64 value rounded (bit equality would fail)
    assert (got != exact.astype(np.float32)).any()


def tcplan_bf16():
    from tcplan.model.numeric import NP_DTYPES
    return NP_DTYPES["bf16"]


def test_the_graph_path_computes_a_matmul():
    r = tcplan.solve(load_problem(str(ROOT / "problems/graphs/tu_path_matmul.yaml")))
    assert r.verified and r.status == "optimal"


def test_a_tensor_unit_path_is_timed_as_a_pipeline():
    """tu_path_matmul: the weight's path (fetch 16, collect 16, to_trf 16 cycles) and the
    main path (fetch 64, collect 64, contract 69, commit 32) each cost their slowest op, by
    hand: 16 (fetch_w) and 69 (the contraction), against 48 and 229 in series."""
    r = tcplan.solve(ROOT / "problems/graphs/tu_path_matmul.yaml", verify="none")
    paths = {tuple(p["ops"]): p for p in r.to_json()["tu_paths"]}
    assert paths[("fetch_w", "collect_w", "store_w")] == {
        "ops": ["fetch_w", "collect_w", "store_w"], "context": "main", "cycles": 16,
        "bottleneck": "fetch_w", "sum_cycles": 48}
    main = paths[("fetch_x", "collect_x", "matmul", "commit_y")]
    assert (main["cycles"], main["bottleneck"], main["sum_cycles"]) == (69, "matmul", 229)
    assert "69 cycles pipelined, bottleneck matmul" in r.text()


def test_proj_q_paths_keep_the_register_file_load_apart():
    """proj_q: the weight's sub-context path (its Fetch the bottleneck, 8,192 cycles), the
    main path through the contraction (133) and the gather (the switch, 64)."""
    r = tcplan.solve(ROOT / "problems/kernels/qwen3/projection_proj_q.yaml", verify="none")
    got = {(p["context"], p["bottleneck"], p["cycles"]) for p in r.to_json()["tu_paths"]}
    assert got == {("sub", "fetch_weight", 8192), ("main", "contract", 133),
                   ("main", "gather", 64)}


# ---- many configurations against numpy.einsum, bit for bit (i8) --------------------------
@settings(max_examples=30, deadline=None, derandomize=True)  # (the same 30 in every run)
@given(lanes=st.sampled_from([1, 2, 4, 8]), k=st.sampled_from([32, 64]),
       summed_in_time=st.booleans(), b=st.sampled_from([1, 2, 3]),
       mode=st.sampled_from(["interleaved", "sequential"]), a=st.sampled_from([1, 2, 4]),
       seed=st.integers(0, 2 ** 16))
def test_random_contractions_match_einsum(lanes, k, summed_in_time, b, mode, a, seed):
    """Over a family of i8 contractions (1 to 8 lanes; K packed two flits to a packet, or
    its outer digit summed by the Time Reducer; a TRF-only axis B broadcast innermost in
    Time; both lane modes), the result of the stages is numpy.einsum of the operands,
    bit for bit.  Each case is built from the guide's formulas, not from tcplan's output."""
    axes = {"S": 2, "A": a, "K": k, "N": lanes, "B": b}
    bt = ", B" if b > 1 else ""
    if k == 64 and not summed_in_time:  # PackSize 2: K / 32 packed into a 64-byte packet
        time, packet, outer = "m![A, K / 32]", "m![K % 32]", (f"m![A{bt}]", "m![K]")
    elif k == 64:  # PackSize 1; the Time Reducer sums K / 32 (the outermost term)
        time, packet, outer = "m![K / 32, A]", "m![K % 32]", (f"m![K / 32, A{bt}]",
                                                             "m![K % 32]")
    else:
        time, packet, outer = "m![A]", "m![K]", (f"m![A{bt}]", "m![K]")
    kept = f"m![A{bt}]"
    element = "m![B, K]" if b > 1 else "m![K]"
    if mode == "interleaved":  # OutTime [Time, Packet], OutPacket [Lane # 8]
        out = (kept, "m![N]" if lanes == 8 else "m![N # 8]")
    else:  # OutTime [Time, Lane, PadPacket / 8], OutPacket [PadPacket % 8]
        out = (f"m![A{bt}, N]" if lanes > 1 else kept, "m![1 # 8]")
    text = contract("i8", time=time, packet=packet, element=element, outer=outer,
                    rtime=kept, mode=mode, out=out,
                    axes="{" + ", ".join(f"{n}: {v}" for n, v in axes.items()) + "}")
    p = tcplan.loads(text, "c.yaml")
    # the Time Reducer's slots (the guide: 128 / Packet Interleaved, 32 / Lane Sequential)
    # hold the kept terms inner to the summed K / 32: A x B of them
    slots = 128 if mode == "interleaved" else 32 // lanes
    if k == 64 and summed_in_time and a * b > slots:
        with pytest.raises(TcplanError) as e:
            tcplan.run(p, {})
        assert e.value.code == "contract-slots" and f"InnerTime {a * b} slots" in \
            e.value.message
        return
    rng = np.random.default_rng(seed)
    S = rng.integers(-128, 128, size=(2, a, k), dtype=np.int8)
    W = rng.integers(-128, 128, size=(2, k, lanes, b), dtype=np.int8)
    given = W if b > 1 else W[..., 0]  # (over the axes the TRF carries: B when b > 1)
    got = tcplan.run(p, {"source": S, "trf": given}).arrays["destination"]
    want = np.einsum("sak,sknb->sanb", S.astype(np.int64), W.astype(np.int64))
    assert np.array_equal(got.reshape(want.shape), want.astype(np.int32))
