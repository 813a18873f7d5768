"""Vector Engine chains and the Lane Folder: every seed example runs and verifies, every
rejection the seed describes names its rule, tags / branched operands / shapes behave as
docs/hardware.md section 7 says, and both Lane Folder examples fold as seed 004 prints them."""

import io
import json
import pathlib

import numpy as np
import pytest
import yaml

from tcplan.executor.chains import run_vector, verify_vector
from tcplan.executor.vector import _tag
from tcplan.model import vector as ve
from tcplan.model.lane import fold
from tcplan.model.mapping import equivalent, parse
from tcplan.model.rules import TcplanError
from tcplan.planner.cli import main
from tcplan.planner.lowering import lower_problem
from tcplan.planner.spec import load_problem, load_problem_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED_VE = sorted((ROOT / "problems/seed").glob("ve_*.yaml"))
SEED_LANE = sorted((ROOT / "problems/seed").glob("lane_*.yaml"))

I32 = """kind: vector
dtype: i32
axes: {A: 2048, B: 2}
input: {cluster: 'm![B]', slice: 'm![A / 8]', time: 'm![1]', packet: 'm![A % 8]'}
"""
F32 = """kind: vector
dtype: f32
axes: {A: 512, B: 2}
input: {cluster: 'm![B]', slice: 'm![A / 2]', time: 'm![1]', packet: 'm![A % 2 # 8]'}
"""
I32T = F32.replace("dtype: f32", "dtype: i32")
PAIR = """kind: vector
dtype: f32
axes: {A: 512, B: 2, I: 2}
input: {cluster: 'm![B]', slice: 'm![A / 2]', time: 'm![I]', packet: 'm![A % 2 # 8]'}
"""
UZ = "unzip: {axis: I, time: 'm![1]'}"
SPLIT = "narrow_split: {time: 'm![1 # 2]', packet: 'm![A % 2 # 4]'}"
CONCAT = "widen_concat: {time: 'm![1]', packet: 'm![A % 2 # 8]'}"


def problem(head: str, chain: list[str], extra: str = ""):
    text = head + extra + "chain:\n" + "".join(f"  - {c}\n" for c in chain)
    return load_problem_text(text, "<test>")


def rejected(head: str, chain: list[str], extra: str = "") -> TcplanError:
    p = problem(head, chain, extra)
    with pytest.raises(TcplanError) as e:
        lower_problem(p)
    assert e.value.kind == "hardware"
    return e.value


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    return main(argv, stdout=out, stderr=err), out.getvalue(), err.getvalue()


# ---- the seed's chains --------------------------------------------------------------------
def test_every_seed_chain_example_is_a_problem():
    names = {p.stem for p in SEED_VE}
    want = {"ve_staged_pipeline", "ve_add_constant", "ve_sigmoid", "ve_bitwise_abs",
            "ve_mode10", "ve_vrf_add", "ve_stash_fp", "ve_stash_fxp",
            "ve_stash_across_narrow_widen", "ve_pair_add", "ve_pair_preprocess_one_side",
            "ve_pair_fp_mul_zip", "ve_pair_asymmetric_preprocess", "ve_pair_sub_reverse"}
    assert want <= names
    assert {p.stem for p in SEED_LANE} == {"lane_interleaved", "lane_sequential"}


@pytest.mark.parametrize("path", SEED_VE, ids=lambda p: p.stem)
@pytest.mark.parametrize("seed", [0, 3])
def test_seed_chain_verifies(path, seed):
    p = load_problem(path)
    an = lower_problem(p)
    rep = verify_vector(p, an, seed)
    assert rep["verified"] is True and rep["checked"] > 0
    assert an.alus == p.expect["alus"]
    # cycles: flits through the slowest section + one per ALU (docs/hardware.md section 7)
    assert rep["cycles"] == an.flits + len(p.expect["alus"])


def test_seed_chain_cycles_follow_way_and_alus():
    # i32 constant add: 1 flit (Time m![1]) at 8-way, one ALU
    assert lower_problem(load_problem(ROOT / "problems/seed/ve_add_constant.yaml")).cycles == 2
    # sigmoid via trim: 4 live lanes pass the 4-way section in one flit, one ALU
    assert lower_problem(load_problem(ROOT / "problems/seed/ve_sigmoid.yaml")).cycles == 2
    # VRF add: Time m![N] = 256 flits, one ALU
    assert lower_problem(load_problem(ROOT / "problems/seed/ve_vrf_add.yaml")).cycles == 257
    # the seed's staged pipeline: FxpAdd, FpFpu, ClipMax
    an = lower_problem(load_problem(ROOT / "problems/seed/ve_staged_pipeline.yaml"))
    assert an.alus == ["FxpAdd", "FpFpu", "ClipMax"] and an.latency == 3


def test_verification_catches_a_wrong_chain():
    p = load_problem(ROOT / "problems/seed/ve_mode10.yaml")
    # Mode01 computes x - 7, not the reference 7 - x
    p.spec.steps[1].mode = "Mode01"
    with pytest.raises(TcplanError) as e:
        verify_vector(p, lower_problem(p), 0)
    assert e.value.code == "verify-mismatch"


def test_edge_values_reach_the_chain():
    p = load_problem(ROOT / "problems/seed/ve_add_constant.yaml")
    r = run_vector(p, lower_problem(p), 0)
    x = r["x"]
    assert x.min() == -(2**31) and x.max() == 2**31 - 1 and (x == 0).any()
    # x + 100 wraps at MAX
    i = np.argwhere(x == 2**31 - 1)[0]
    assert r["out"][tuple(i)] == -(2**31) + 99
    p = load_problem(ROOT / "problems/seed/ve_bitwise_abs.yaml")
    r = run_vector(p, lower_problem(p), 0)
    assert np.isnan(r["x"]).any() and np.isinf(r["x"]).any()
    # abs of -inf is +inf, abs of -0.0 is +0.0 (bit-wise)
    assert np.array_equal(r["out"].view(np.uint32), r["x"].view(np.uint32) & 0x7FFFFFFF)


# ---- rejections the seed describes (acceptance list) ------------------------------------------
def test_fxpadd_twice():
    e = rejected(I32, ["tag: zero", "fxp: {op: AddFxp, operand: 10}",
                       "fxp: {op: MulInt, operand: 2}", "fxp: {op: SubFxp, operand: 5}",
                       "final"])
    assert e.code == "ve-alu-busy"
    assert "FxpAdd is already in use by step 2" in e.message and "step 4" in e.message


def test_tanh_sqrt_in_one_invocation():
    e = rejected(F32, ["tag: zero", "narrow_trim: 'm![A % 2 # 4]'", "fp_unary: Sqrt",
                       "fp_unary: Tanh", "widen_pad: 'm![A % 2 # 8]'", "final"])
    assert e.code == "ve-alu-busy" and "FpFpu is already in use by step 3" in e.message


def test_second_stash():
    e = rejected(I32, ["tag: zero", "stash", "fxp: {op: AddFxp, operand: 1}", "stash",
                       "clip: {op: Max, operand: stash}", "final"])
    assert e.code == "ve-stash-twice" and "step 2" in e.message


def test_second_stash_read():
    e = rejected(I32, ["tag: zero", "stash", "fxp: {op: AddFxp, operand: stash}",
                       "clip: {op: Max, operand: stash}", "final"])
    assert e.code == "ve-stash-read-twice" and "step 3" in e.message


def test_stash_in_pair_mode():
    assert rejected(PAIR, [UZ, "stash", SPLIT, "fp_zip: AddF", CONCAT, "final"]).code == \
        "ve-pair-forbidden"


def test_filter_and_reduce_in_pair_mode():
    e = rejected(PAIR, [UZ, "clip_zip: Max", "filter: {group: 0}", "final"])
    assert e.code == "ve-pair-forbidden" and "vector_filter" in e.message
    e = rejected(PAIR, [UZ, SPLIT, "reduce: {op: Add, axis: A, time: 'm![1]', packet: "
                        "'m![1]'}", CONCAT, "final"])
    assert e.code == "ve-pair-forbidden" and "vector_intra_slice_reduce" in e.message


def test_inter_slice_reduce_before_zip():
    assert rejected(PAIR, [UZ, "inter_slice_reduce"]).code == "ve-pair-unzipped"
    assert rejected(PAIR, [UZ, "final"]).code == "ve-pair-unzipped"


def test_four_way_exit():
    e = rejected(F32, ["tag: zero", "narrow_trim: 'm![A % 2 # 4]'", "fp_unary: Exp", "final"])
    assert e.code == "ve-exit-way"


def test_trim_and_pad_in_pair_mode():
    e = rejected(PAIR, [UZ, "narrow_trim: 'm![A % 2 # 4]'", "fp_zip: AddF", "final"])
    assert e.code == "ve-pair-trim" and "vector_narrow_split" in e.violations[0].fix
    e = rejected(PAIR, [UZ, SPLIT, "fp_unary: {op: Exp, groups: [true, false]}",
                        "widen_pad: 'm![A % 2 # 8]'", "fp_zip: AddF", "final"])
    assert e.code == "ve-pair-trim"


VRF_HEAD = """kind: vector
dtype: i32
axes: {A: 2048, B: 2, N: 256, C: 4}
input: {cluster: 'm![B]', slice: 'm![A / 8]', time: 'm![N]', packet: 'm![A % 8]'}
"""


def test_operand_axis_the_stream_lacks():
    e = rejected(VRF_HEAD, ["tag: zero", "fxp: {op: AddFxp, operand: {vrf: v}}", "final"],
                 "vrf:\n  v: {cluster: 'm![B]', slice: 'm![A / 8]', element: 'm![C, A % 8]'}\n")
    assert e.code == "vrf-operand-axes"
    assert "the stream leaves operand axes unmatched: C" in e.message


def test_guard_never_satisfied():
    e = rejected(I32, ["tag: zero", "fxp: {op: AddFxp, operand: [{guard: {not_matches: "
                       "[Ignore, Ignore, Ignore, Ignore]}, imm: 1}]}", "final"])
    assert e.code == "ve-guard-dead" and "reg0" in e.message


def test_slot_after_unconditional():
    e = rejected(I32, ["tag: zero", "fxp: {op: AddFxp, operand: [{imm: 1}, {guard: {group: 1},"
                       " imm: 2}]}", "final"])
    assert e.code == "ve-slot-order" and "slot reg0 is unconditional" in e.message


def test_fourth_immediate():
    g = "{guard: {matches: [One, Ignore, Ignore, Ignore]}, imm: %d}"
    slots = ", ".join(g % k for k in range(4))
    e = rejected(I32, ["tag: {comparison: ['Less(0)', 'False', 'False', 'False']}",
                       f"fxp: {{op: AddFxp, operand: [{slots}]}}", "final"])
    assert e.code == "ve-operand-slots" and "fourth immediate" in e.message


def test_matches_all_ignore_is_all():
    g = ve.Guard("matches", ("Ignore",) * 4).canonical()
    assert g == ve.Guard() and g.unconditional


# ---- more rules ----------------------------------------------------------------------------
@pytest.mark.parametrize("head, chain, extra, code", [
    (I32, ["tag: zero", "clip: {op: Max, operand: 0}", "fxp: {op: AddFxp, operand: 1}",
           "final"], "", "ve-stage-order"),
    (I32, ["tag: zero", "fxp_to_fp: 31", "fxp_to_fp: 31", "final"], "", "ve-stage-order"),
    (I32, ["fxp: {op: AddFxp, operand: 1}", "final"], "", "ve-entry"),
    (I32, ["tag: zero", "tag: zero", "final"], "", "ve-entry"),
    (I32, ["tag: zero", "fxp: {op: AddFxp, operand: 1}"], "", "ve-no-exit"),
    (I32, ["tag: zero", "final", "fxp: {op: AddFxp, operand: 1}"], "", "ve-after-exit"),
    (I32, ["tag: zero", "stash", "inter_slice_reduce", "clip: {op: Max, operand: stash}"], "",
     "ve-handover-stage"),
    (I32, ["tag: zero", "stash", "fxp: {op: AddFxp, operand: 1}", "inter_slice_reduce",
           "clip: {op: Max, operand: stash}"], "", "ve-stash-dropped"),
    (F32, ["tag: zero", "fxp: {op: AddFxp, operand: 1}", "final"], "", "ve-op-dtype"),
    (I32T, ["tag: zero", "narrow_trim", "fp_unary: Exp", "widen_pad", "final"], "",
     "ve-op-dtype"),
    (F32, ["tag: zero", "fp_unary: Exp", "final"], "", "ve-way"),
    (F32, ["tag: zero", "widen_pad", "final"], "", "ve-way"),
    (I32, ["tag: zero", "fxp_to_fp: 31", "stash", "final"], "", "ve-stash-stage"),
    (F32, ["tag: zero", "stash", "narrow_trim", "fp_binary: {op: AddF, operand: stash}",
           "widen_pad", "final"], "", "ve-stash-type"),
    (I32, ["tag: zero", "clip: {op: Max, operand: stash}", "final"], "", "ve-stash-empty"),
    (F32, ["tag: {axis_toggle: A}", "final"], "", "ve-tag-mode"),
    (I32T, ["tag: zero", "narrow_trim", "fxp: {op: AddFxp, operand: 1}", "final"], "",
     "ve-stage-order"),
    (I32, ["tag: zero", "narrow_trim", "widen_pad", "final"], "", "ve-trim-live"),
    (F32, ["tag: zero", "narrow_trim: 'm![A % 2 # 4]'", "widen_pad: 'm![A % 2 # 4 # 8]'",
           "final"], "output: {time: 'm![1]', packet: 'm![A % 4 # 8]'}\n", "ve-shape"),
    (F32, ["tag: zero", "narrow_split: {time: 'm![1 # 2]', packet: 'm![A % 4]'}",
           CONCAT, "final"], "", "ve-shape"),
    (I32, ["tag: zero", "clip_zip: AddFxp", "final"], "", "ve-zip-unpaired"),
    (I32, ["tag: zero", "fxp: {op: MulInt, groups: [10, null]}", "final"], "",
     "ve-pair-only"),
    (PAIR, [UZ, "clip: {op: Max, operand: 0.0}", "clip_zip: Min", "final"], "",
     "ve-pair-args"),
    (PAIR.replace("time: 'm![I]'", "time: 'm![I]', slice: 'm![A / 2]'").replace(
        "axes: {A: 512, B: 2, I: 2}", "axes: {A: 512, B: 2, I: 2}"),
     ["unzip: {axis: B, time: 'm![1]'}", "clip_zip: Min", "final"], "", "ve-unzip-axis"),
])
def test_rule(head, chain, extra, code):
    if "slice: 'm![A / 2]', time" in head and head.count("slice") > 1:
        head = PAIR
    assert rejected(head, chain, extra).code == code


def test_packet_must_be_one_flit():
    head = I32.replace("packet: 'm![A % 8]'", "packet: 'm![A % 4]'").replace(
        "slice: 'm![A / 8]'", "slice: 'm![A / 4 % 256]'")
    assert rejected(head, ["tag: zero", "final"]).code == "ve-packet-size"


def test_vrf_partition_packet_and_capacity():
    extra = "vrf:\n  v: {cluster: 'm![1 # 2]', slice: 'm![A / 8]', element: 'm![A % 8]'}\n"
    e = rejected(VRF_HEAD, ["tag: zero", "fxp: {op: AddFxp, operand: {vrf: v}}", "final"],
                 extra)
    assert e.code == "vrf-operand-partition" and "Cluster" in e.message
    # lanes read elements 0, 2, 4, ...: neither a broadcast nor consecutive
    extra = "vrf:\n  v: {cluster: 'm![B]', slice: 'm![A / 8]', element: " \
            "'m![A % 2, A / 2 % 4]'}\n"
    e = rejected(VRF_HEAD, ["tag: zero", "fxp: {op: AddFxp, operand: {vrf: v}}", "final"],
                 extra)
    assert e.code == "vrf-operand-packet"
    # 2,048 x 4 B = 8 KiB fits alone, not with the stash's 1 KiB reservation
    extra = "vrf:\n  v: {cluster: 'm![B]', slice: 'm![A / 8]', element: 'm![N, A % 8]'}\n"
    head = VRF_HEAD
    ok = problem(head, ["tag: zero", "fxp: {op: AddFxp, operand: {vrf: v}}", "final"], extra)
    lower_problem(ok)
    e = rejected(head, ["tag: zero", "stash", "fxp: {op: AddFxp, operand: {vrf: v}}",
                        "clip: {op: Max, operand: stash}", "final"], extra)
    assert e.code == "vrf-capacity" and "1,024 B are reserved for the stash" in e.message


def test_vrf_broadcast_reads_one_address():
    p = load_problem(ROOT / "problems/seed/ve_vrf_add.yaml")
    an = lower_problem(p)
    idx = an.infos[1].vrf_index["v"]
    # every time step (N) reads the same eight consecutive elements: v broadcasts over N
    assert (idx == np.arange(8)[None, :]).all()


def test_reduce_rules():
    head = """kind: vector
dtype: i32
axes: {A: 512, B: 2, S: 64, R: 16}
input: {cluster: 'm![B]', slice: 'm![S / 4 # 256]', time: 'm![R, A / 4 % 16]', packet: 'm![A % 4 # 8]'}
"""
    # R outermost leaves 16 partial sums open at once; the reducer holds 8
    e = rejected(head, ["tag: zero", "narrow_trim: 'm![A % 4]'", "reduce: {op: AddSat, axis: R, "
                        "time: 'm![A / 4 % 16]', packet: 'm![A % 4]'}", "widen_pad", "final"])
    assert e.code == "ve-reduce-slots" and "16 partial sums" in e.message
    # R innermost: one open sum at a time
    ok = problem(head.replace("m![R, A / 4 % 16]", "m![A / 4 % 16, R]"), [
        "tag: zero", "narrow_trim: 'm![A % 4]'", "reduce: {op: AddSat, axis: R, "
        "time: 'm![A / 4 % 16]', packet: 'm![A % 4]'}", "widen_pad", "final"])
    lower_problem(ok)
    # A in Packet (and Time): the guide's 'Reduction in Both', a tree within each flit whose
    # value lands in the first lane: the output packet is m![1 # 4], not m![1]
    e = rejected(head, ["tag: zero", "narrow_trim: 'm![A % 4]'", "reduce: {op: AddSat, axis: A, "
                        "time: 'm![R]', packet: 'm![1]'}", "widen_pad", "final"])
    assert e.code == "ve-shape" and "16 x 4 here, 16 x 1 declared" in e.message
    lower_problem(problem(head, [
        "tag: zero", "narrow_trim: 'm![A % 4]'", "reduce: {op: AddSat, axis: A, "
        "time: 'm![R]', packet: 'm![1 # 4]'}", "widen_pad: 'm![1 # 8]'", "final"]))
    # a flit holding two values of R besides A cannot be folded by the tree
    both = head.replace("packet: 'm![A % 4 # 8]'", "packet: 'm![1 # 2, R % 2, A % 2]'").replace(
        "time: 'm![R, A / 4 % 16]'", "time: 'm![R / 2, A / 2]'")
    e = rejected(both, ["tag: zero", "narrow_trim: 'm![R % 2, A % 2]'", "reduce: {op: AddSat, "
                        "axis: A, time: 'm![R / 2]', packet: 'm![1 # 4]'}", "widen_pad", "final"])
    assert e.code == "ve-reduce-axis" and "several values of R" in e.message
    # an axis the stream holds only in its Slice
    e = rejected(head, ["tag: zero", "narrow_trim: 'm![A % 4]'", "reduce: {op: AddSat, axis: S, "
                        "time: 'm![R, A / 4 % 16]', packet: 'm![A % 4]'}", "widen_pad", "final"])
    assert e.code == "ve-reduce-axis" and "not in the stream's Time x Packet" in e.message


@pytest.mark.parametrize("name, cycles", [("ve_reduce_time", 16 + 1),
                                           ("ve_reduce_packet", 2 + 1),
                                           ("ve_reduce_time_packet", 4 + 1)])
def test_the_guides_intra_slice_reduce_examples(name, cycles):
    """The guide's three reductions (R in Time, in the Packet, in both): each verifies
    against its formula bit for bit, at one flit a cycle plus the reducer's ALU."""
    import tcplan
    r = tcplan.verify(ROOT / "problems" / "guide" / f"{name}.yaml")
    assert r.verified is True and r.cycles == cycles


def test_the_packet_tree_folds_pairs_first():
    """'Reduction in Packet' folds a flit as op(op(a, b), op(c, d)): for f32 Add the lanes
    1e8, 1, -1e8, 1 give (1e8 + 1) + (-1e8 + 1) = 1e8 - 1e8 = 0 (each sum rounds to a
    multiple of 8), where adding left to right gives 1: the chain gives 0, by hand."""
    import tcplan
    x = np.zeros((512, 4), np.float32)
    x[0] = [1e8, 1, -1e8, 1]
    x[1] = [1, 2, 3, 4]
    out = tcplan.run(ROOT / "problems" / "guide" / "ve_reduce_packet.yaml", {"x": x})
    res = out.arrays["result"]
    assert res[0] == 0.0 and res[1] == 10.0
    left_to_right = np.float32(0)
    for v in x[0]:
        left_to_right = np.float32(left_to_right + v)
    assert left_to_right == 1.0  # (the order matters here)


# ---- tags and branched operands -------------------------------------------------------------
def test_tag_example_seven_is_eight():
    st = ve.Step("tag", tag=("comparison", (("Less", 0), ("Equal", 5), ("Greater", 100),
                                            ("True", None))))
    assert int(_tag(st, np.array([7], np.int32))[0]) == 0b1000
    assert int(_tag(st, np.array([5], np.int32))[0]) == 0b1010
    assert int(_tag(st, np.array([-1], np.int32))[0]) == 0b1001
    assert int(_tag(st, np.array([101], np.int32))[0]) == 0b1100


def test_first_matching_slot_wins_and_unclaimed_pass_through():
    g = "{{guard: {{matches: [{}]}}, imm: {}}}"
    slots = ", ".join([g.format("One, Ignore, Ignore, Ignore", 1),
                       g.format("Ignore, One, Ignore, Ignore", 2),
                       g.format("One, Ignore, Ignore, Ignore", 99),
                       "{guard: {matches: [Ignore, Ignore, One, Ignore]}, rf: {vrf: v}}"])
    p = problem(I32.replace("axes: {A: 2048, B: 2}", "axes: {A: 2048, B: 2}"), [
        "tag: {comparison: ['Less(0)', 'Equal(5)', 'Greater(100)', 'False']}",
        f"fxp: {{op: AddFxp, operand: [{slots}]}}", "final"],
        "vrf:\n  v: {cluster: 'm![B]', slice: 'm![A / 8]', element: 'm![A % 8]'}\n")
    an = lower_problem(p)
    r = run_vector(p, an, 5)
    x = r["x"].astype(np.int64)
    v = r["vrf"]["v"].astype(np.int64)
    want = np.where(x < 0, x + 1, np.where(x == 5, x + 2, np.where(x > 100, x + v, x)))
    want = ((want + 2**31) % 2**32 - 2**31).astype(np.int32)
    assert np.array_equal(r["out"], want)


# ---- narrow / widen shape semantics ---------------------------------------------------------
def test_split_shape_semantics_match_the_seed():
    # seed: [T], [P] -> [T, P / 4], [P % 4] with T = S % 4, P = A % 8
    p = load_problem(ROOT / "problems/seed/ve_narrow_split_semantics.yaml")
    an = lower_problem(p)
    split = an.infos[1]
    assert split.way == 4 and an.infos[2].way == 8
    assert split.src.shape == (8, 4)
    # front four lanes first, then the back four
    assert split.src[0].tolist() == [0, 1, 2, 3] and split.src[1].tolist() == [4, 5, 6, 7]


def test_trim_and_pad_derive_their_mappings():
    p = problem(F32, ["tag: zero", "narrow_trim", "fp_unary: Exp", "widen_pad", "final"],
                "output: {time: 'm![1]', packet: 'm![A % 2 # 8]'}\n")
    an = lower_problem(p)
    assert an.exit.P == 8 and an.exit.live.sum() == 2


# ---- Lane Folder ------------------------------------------------------------------------------
AXES = {"N": 8, "M": 4, "P": 16}


def m(text, axes=AXES):
    return parse(text, axes)


@pytest.mark.parametrize("mode, t, pk", [("interleaved", "m![M, P]", "m![N]"),
                                          ("sequential", "m![M, N, P / 8]", "m![P % 8]")])
def test_lane_fold_seed_examples(mode, t, pk):
    lf = fold(AXES, m("m![N]"), m("m![M]"), m("m![P]"), mode)
    assert equivalent(lf.out_time, m(t)) and equivalent(lf.out_packet, m(pk))
    assert lf.cycles == 64  # 512 elements, 8 per cycle
    lf2 = fold(AXES, m("m![N]"), m("m![M]"), m("m![P]"), mode, m(t), m(pk))
    assert lf2.cycles == 64


@pytest.mark.parametrize("path", SEED_LANE, ids=lambda p: p.stem)
def test_lane_fold_problems_verify(path):
    code, out, err = run(["verify", str(path), "--json"])
    assert code == 0, (out, err)
    r = json.loads(out)
    p = load_problem(path)
    assert r["verified"] is True and r["checked"] == 512 and r["cycles"] == p.expect["cycles"]
    lf = lower_problem(p)
    assert equivalent(lf.out_time, parse(p.expect["out_time"], p.axes))
    assert equivalent(lf.out_packet, parse(p.expect["out_packet"], p.axes))


def test_lane_fold_throughput():
    axes = {"N": 4, "M": 4, "P": 4}
    # Interleaved with 4 lanes: half the bus carries data
    lf = fold(axes, m("m![N]", axes), m("m![M]", axes), m("m![P]", axes), "interleaved")
    assert lf.breakdown()["elements_per_cycle"] == 4 and lf.cycles == 16
    assert equivalent(lf.out_packet, m("m![N # 8]", axes))
    # Sequential with Packet 4: one cycle per packet, 4 elements each, padded to 8
    lf = fold(axes, m("m![N]", axes), m("m![M]", axes), m("m![P]", axes), "sequential")
    assert lf.cycles == 16 and lf.breakdown()["elements_per_cycle"] == 4
    assert equivalent(lf.out_packet, m("m![P # 8]", axes))


def test_lane_fold_rules():
    axes = {"N": 8, "M": 4, "P": 3, "Q": 64, "L": 3}
    with pytest.raises(TcplanError) as e:
        fold(axes, m("m![N]", axes), m("m![M]", axes), m("m![P]", axes), "interleaved")
    assert e.value.code == "lane-fold-packet"
    with pytest.raises(TcplanError) as e:
        fold(axes, m("m![N]", axes), m("m![M]", axes), m("m![Q]", axes), "sequential")
    assert e.value.code == "lane-fold-packet"
    with pytest.raises(TcplanError) as e:
        fold(axes, m("m![L]", axes), m("m![M]", axes), m("m![N]", axes), "interleaved")
    assert e.value.code == "lane-fold-lanes"
    with pytest.raises(TcplanError) as e:  # Sequential's output declared for Interleaved
        fold(AXES, m("m![N]"), m("m![M]"), m("m![P]"), "interleaved", m("m![M, N, P / 8]"),
             m("m![P % 8]"))
    assert e.value.code == "lane-fold-shape" and "m![M, P]" in e.value.violations[0].fix


# ---- CLI -------------------------------------------------------------------------------------
def test_cli_verify_and_run_vector(tmp_path):
    path = ROOT / "problems/seed/ve_pair_preprocess_one_side.yaml"
    code, out, _ = run(["verify", str(path), "--json"])
    r = json.loads(out)
    assert code == 0 and r["verified"] is True and r["cycles"] == 4
    assert set(r["breakdown"]) >= {"flits", "latency", "alus"}
    # run on the user's data: x over (A, B, I), the grouping axis kept as an ordinary axis
    x = np.arange(2048 * 2 * 2, dtype=np.int32).reshape(2048, 2, 2)
    np.save(tmp_path / "x.npy", x)
    code, out, err = run(["run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--out",
                          str(tmp_path)])
    assert code == 0, (out, err)
    res = np.load(tmp_path / "result.npy")
    assert res.shape == (2048, 2)
    assert np.array_equal(res, x[:, :, 0] * 10 + x[:, :, 1])


def test_cli_rejection_exit_code():
    text = I32 + "chain:\n  - tag: zero\n  - narrow_trim\n  - final\n"
    p = ROOT / "tests" / "_tmp_reject.yaml"
    try:
        p.write_text(text)
        code, out, _ = run(["verify", str(p), "--json"])
        assert code == 1 and json.loads(out)["error"]["code"] == "ve-trim-live"
    finally:
        p.unlink()


def test_yaml_of_seed_problems_is_plain():
    for path in SEED_VE + SEED_LANE:
        assert isinstance(yaml.safe_load(path.read_text()), dict)


# ---- filter, ternary, FpDiv, the inter-slice hand-over ----------------------------------------
def test_filter_masks_elements_its_guard_does_not_admit():
    p = problem(I32, ["tag: {comparison: ['False', 'False', 'False', 'Less(0)']}",
                      "fxp: {op: AddFxp, operand: 1}", "filter: {group: 1}", "final"])
    an = lower_problem(p)
    r = run_vector(p, an, 4)
    x = r["x"]
    # only negative elements (GroupId bit 3 set) leave the chain
    assert np.array_equal(r["written"], x < 0)
    assert np.array_equal(r["out"][x < 0], x[x < 0] + 1)


@pytest.mark.parametrize("mode, f", [
    ("Mode012", lambda s, a, b: s * a + b), ("Mode102", lambda s, a, b: a * s + b),
    ("Mode120", lambda s, a, b: a * b + s), ("Mode002", lambda s, a, b: s * s + b)])
def test_fma_arg_modes(mode, f):
    p = problem(F32, ["tag: zero", "narrow_trim",
                      f"fp_ternary: {{op: FmaF, operands: [0.5, 3.0], mode: {mode}}}",
                      "widen_pad", "final"])
    r = run_vector(p, lower_problem(p), 1)
    x = r["x"].astype(np.float64)
    ok = np.isfinite(x) & (np.abs(x) < 1e6)
    # small operands: the fused result equals the float64 result rounded once
    with np.errstate(all="ignore"):
        want = f(x, 0.5, 3.0).astype(np.float32)
    assert np.array_equal(r["out"][ok], want[ok])


def test_fp_div_stage_and_fpu_divide_alike():
    a = problem(F32, ["tag: zero", "narrow_trim", "fp_div: {op: DivF, operand: 3.0}",
                      "widen_pad", "final"])
    b = problem(F32, ["tag: zero", "narrow_trim", "fp_binary: {op: DivF, operand: 3.0}",
                      "widen_pad", "final"])
    ra, rb = (run_vector(p, lower_problem(p), 2) for p in (a, b))
    assert lower_problem(a).alus == ["FpDiv"] and lower_problem(b).alus == ["FpFpu"]
    assert np.array_equal(ra["out"].view(np.uint32), rb["out"].view(np.uint32))
    assert np.array_equal(ra["out"][np.isfinite(ra["x"])],
                          (ra["x"] / np.float32(3.0))[np.isfinite(ra["x"])])


def test_inter_slice_reduce_hands_over_from_clip():
    p = problem(I32, ["tag: zero", "clip: {op: Max, operand: 0}", "inter_slice_reduce"])
    an = lower_problem(p)
    r = run_vector(p, an, 0)
    assert np.array_equal(r["out"], np.maximum(r["x"], 0))


def test_reinterpreted_stash_feeds_an_i32_op():
    # stash the f32 stream's bits as i32 and xor them back: x ^ x = 0 bit for bit
    p = problem(F32, ["tag: zero", "reinterpret: i32", "stash",
                      "logic: {op: BitXor, operand: stash}", "reinterpret: f32", "final"])
    r = run_vector(p, lower_problem(p), 0)
    live = r["written"]
    assert (r["out"].view(np.uint32)[live] == 0).all()


# ---- regressions from review -------------------------------------------------------------------
def test_split_of_a_padded_packet_keeps_its_padding():
    # C = 6 over an 8-lane packet: the split's second half holds C = 4, 5 and two padding lanes
    text = """kind: vector
dtype: f32
axes: {C: 6, T: 4}
input: {time: 'm![T]', packet: 'm![C # 8]'}
chain:
  - tag: zero
  - narrow_split: {time: 'm![T, [C # 8] / 4]', packet: 'm![[C # 8] % 4]'}
  - fp_unary: Exp
  - widen_concat: {time: 'm![T]', packet: 'm![C # 8]'}
  - final
reference: 'exp(x)'
"""
    p = load_problem_text(text, "<pad>")
    assert verify_vector(p, lower_problem(p), 0)["verified"]
    lf = fold({"N": 8, "M": 2, "P": 20}, parse("m![N]", {"N": 8}), parse("m![M]", {"M": 2}),
              parse("m![P # 32]", {"P": 20}), "sequential")
    assert lf.cycles == 2 * 8 * 4


def test_vrf_operand_must_hold_each_lane_and_match_the_dtype():
    head = I32
    e = rejected(head, ["tag: zero", "fxp: {op: AddFxp, operand: {vrf: v}}", "final"],
                 "vrf:\n  v: {cluster: 'm![B]', slice: 'm![A / 8]', element: 'm![1]'}\n")
    assert e.code == "vrf-operand-coverage"
    e = rejected(head, ["tag: zero", "fxp: {op: AddFxp, operand: {vrf: v}}", "final"],
                 "vrf:\n  v: {cluster: 'm![B]', slice: 'm![A / 8]', element: 'm![A % 8]', "
                 "dtype: f32}\n")
    assert e.code == "ve-op-dtype" and "VRF operand v (f32)" in e.message


def test_constants_are_not_silently_converted():
    assert rejected(I32, ["tag: zero", "fxp: {op: AddFxp, operand: 2.5}", "final"]).code == \
        "ve-op-dtype"
    assert rejected(F32, ["tag: zero", "clip: {op: Add, operand: 4294967295}", "final"]
                    ).code == "ve-op-dtype"
    with pytest.raises(TcplanError) as e:
        problem(I32, ["tag: {comparison: ['Less(1.5)', 'True', 'True', 'True']}", "final"])
    assert e.value.code == "bad-problem" and "32-bit integer" in e.value.message


@pytest.mark.parametrize("ref, words", [
    ("group0 + group1", "against x"), ("sum(x, A)", "reduces"),
    ("(" * 300 + "x" + ")" * 300, "nested")])
def test_reference_must_fit_the_chain(ref, words):
    with pytest.raises(TcplanError) as e:
        problem(I32, ["tag: zero", "final"], f"reference: '{ref}'\n")
    assert e.value.code == "bad-problem" and words in e.value.message


def test_left_shift_sat_by_31_saturates_like_a_multiply():
    from tcplan.model.numeric import BINARY_OPS
    f = BINARY_OPS[("fxp", "i32")]["LeftShiftSat"]
    got = f(np.array([1, -1, 0], np.int32), np.array([31, 31, 31], np.int32))
    assert got.tolist() == [2**31 - 1, -(2**31), 0]
