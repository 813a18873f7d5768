"""The Tensor Unit's engines (issue 29; model/engines/, executor/engines.py,
planner/kinds/engines.py): the guide's worked examples of the Collect and Cast Engines with
the mappings and cycles they state, each engine's two accounts of itself (the output mapping
it derives and the values it moves) checked against each other on random streams, the Cast's
conversions against a second implementation and hand-worked bits, the rules by name, and a
Tensor Unit path in a graph run end to end."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tcplan
from tcplan.executor.engines import (bf16_by_bits, check_holds, lay_out, narrowed, reference,
                                     run_engine)
from tcplan.model.engines import ENGINES, lower
from tcplan.model.engines.cast import convert
from tcplan.model.engines.collect import split_flits
from tcplan.model.mapping import held_indices, join, parse, same_holding
from tcplan.model.rules import TcplanError
from tcplan.model.tiers import Tensor

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "problems" / "guide"


def _stream(axes: dict[str, int], time: str, packet: str, dtype: str = "i8",
            slice_: str = "m![1 # 256]") -> Tensor:
    m = {"chip": "m![1]", "cluster": "m![1 # 2]", "slice": slice_, "time": time,
         "packet": packet}
    return Tensor("s", "stream", dtype, {d: parse(t, axes) for d, t in m.items()})


# ---- the guide's examples (book: computing-tensors/collect-engine.md, cast-engine.md) ----
@pytest.mark.parametrize("axes, dtype, packet, time2, packet2", [
    ({"A": 8, "B": 32}, "i8", "m![B]", "m![A]", "m![B # 32]"),        # Single-Flit Packet
    ({"A": 8, "B": 16}, "i8", "m![B]", "m![A]", "m![B # 32]"),        # Sub-Flit Packet
    ({"A": 8, "B": 32}, "bf16", "m![B]", "m![A, B / 16]", "m![B % 16]"),  # Multi-Flit
    ({"A": 8, "B": 56}, "i8", "m![B]", "m![A, B # 64 / 32]", "m![B # 64 % 32]"),  # padded
])
def test_the_guides_collect_examples(axes, dtype, packet, time2, packet2):
    """Collect's output is the guide's Time2 and Packet2 (the same index at every
    position), and the op verifies: one flit per cycle, as many cycles as flits."""
    inp = _stream(axes, "m![A]", packet, dtype)
    out = ENGINES["collect"]().output(inp)
    assert same_holding(out.dims["time"], parse(time2, axes))
    assert same_holding(out.dims["packet"], parse(packet2, axes))
    plan = lower(ENGINES["collect"](), inp, _stream(axes, time2, packet2, dtype))
    assert plan.cycles == parse(time2, axes).size


def test_the_guides_multi_flit_outputs_print_as_the_guide_writes_them():
    c = ENGINES["collect"]()
    out = c.output(_stream({"A": 8, "B": 32}, "m![A]", "m![B]", "bf16"))
    assert (out.dims["time"].text(), out.dims["packet"].text()) == ("m![A, B / 16]",
                                                                     "m![B % 16]")
    out = c.output(_stream({"A": 8, "B": 56}, "m![A]", "m![B]", "i8"))
    assert (out.dims["time"].text(), out.dims["packet"].text()) == ("m![A, B # 64 / 32]",
                                                                     "m![B # 64 % 32]")


@pytest.mark.parametrize("name, cycles", [
    ("collect_identity", 8), ("collect_padding", 8), ("collect_multi_flit", 16),
    ("collect_multi_flit_padded", 16), ("cast_i32_to_i8", 4), ("cast_padded", 1)])
def test_the_guide_problems_verify(name, cycles):
    r = tcplan.solve(GUIDE / f"{name}.yaml")
    assert r.status == "given" and r.verified is True and r.cycles == cycles


def test_the_guides_cast_packets():
    """An 8-element i32 flit cast to i8 is Packet m![A # 32]; 4 elements padded to 8
    (m![A # 8]) become m![A # 32] as well."""
    cast = ENGINES["cast"](to="i8")
    out = cast.output(_stream({"B": 4, "A": 8}, "m![B]", "m![A]", "i32"))
    assert out.dtype == "i8" and out.dims["packet"].text() == "m![A # 32]"
    out = cast.output(_stream({"A": 4}, "m![1]", "m![A # 8]", "i32"))
    assert same_holding(out.dims["packet"], parse("m![A # 32]", {"A": 4}))


# ---- the flit split's post-condition ---------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 70), st.sampled_from([1, 2, 4]))
def test_split_flits_holds_the_padded_packet(a, b, eb):
    """``join(outer, inner)`` holds what the padded packet holds, the inner part is one
    flit, for packets of two axes, any sizes."""
    axes = {"A": a, "B": b}
    flit = 32 // eb
    p = parse("m![A, B]", axes)
    whole = -(-p.size // flit) * flit
    padded = p if whole == p.size else p.pad(whole)
    try:
        outer, inner = split_flits(padded, flit)
    except TcplanError as e:  # (a flit ending inside B, whose values do not split there)
        assert e.code == "flit-split" and a > 1 and b % flit and flit % b
        return
    assert inner.size == flit and same_holding(join([outer, inner]), padded)


# ---- each engine's run against its output mapping ---------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 40), st.sampled_from(["i8", "bf16", "f32"]),
       st.booleans())
def test_collect_runs_what_its_mapping_says(t, b, dtype, inner_time):
    """Laid out by the input mapping, moved by the engine's run (which reads no mapping),
    the flits hold the tensor where the derived output mapping says."""
    axes = {"T": t, "B": b, "S": 4}
    time = "m![T]" if inner_time else "m![1]"
    packet = "m![B]" if inner_time else "m![T, B]"
    inp = _stream(axes, time, packet, dtype, slice_="m![S # 64]")
    c = ENGINES["collect"]()
    try:
        plan = lower(c, inp, c.output(inp))
    except TcplanError as e:  # (a packet m![T, B] whose flits end inside B)
        assert e.code == "flit-split" and not inner_time
        return
    T = np.random.default_rng(t * 100 + b).integers(0, 2**31, (t, b, 4)).astype(np.int32)
    T = T.view(np.uint8).reshape(-1)[: t * b * 4 * plan.inp.elem_bytes].view(
        {"i8": np.int8, "bf16": np.uint16, "f32": np.uint32}[dtype]).reshape(t, b, 4)
    out, checked = run_engine(plan, T, axes, reference(plan))
    assert checked == t * b * 4 and out is T


def test_a_wrong_output_mapping_fails_the_check():
    """The check can fail: the flits of a two-flit packet read back through the input's
    Packet (not split) do not hold the tensor."""
    axes = {"A": 4, "B": 32}
    inp = _stream(axes, "m![A]", "m![B]", "bf16")
    values = ENGINES["collect"]().run(lay_out(inp, np.arange(128, dtype=np.uint16)
                                              .reshape(4, 32), axes))
    wrong = _stream(axes, "m![B / 16, A]", "m![B % 16]", "bf16")  # (the flits' order swapped)
    with pytest.raises(TcplanError) as e:
        check_holds(wrong, values, np.arange(128, dtype=np.uint16).reshape(4, 32), axes, "x")
    assert e.value.code == "verify-mismatch"


def test_lay_out_puts_each_element_where_its_mapping_says():
    """Position (unit, time, packet) of Slice m![S], Time m![A], Packet m![B] holds T[A, B, S]
    at unit S (brute force over every position)."""
    axes = {"A": 3, "B": 4, "S": 64}
    s = _stream(axes, "m![A]", "m![B]", slice_="m![S]")
    T = np.arange(3 * 4 * 64, dtype=np.int32).reshape(3, 4, 64).astype(np.int8)
    v = lay_out(s, T, axes)
    for u in range(2 * 64):  # (cluster m![1 # 2]: the second cluster holds nothing)
        for a in range(3):
            for b in range(4):
                want = T[a, b, u] if u < 64 else 0
                assert v[u, a, b] == want


# ---- the Cast's conversions ---------------------------------------------------------------
BF16_CASES = [  # f32 bits -> bf16 bits, worked by hand
    (0x3F800000, 0x3F80),  # 1.0
    (0x3F808000, 0x3F80),  # a tie, kept even
    (0x3F818000, 0x3F82),  # a tie, rounded up to even
    (0x3F808001, 0x3F81),  # above the tie
    (0x00000001, 0x0000),  # a subnormal: +0
    (0x80000001, 0x8000),  # a negative subnormal: -0
    (0x7F800000, 0x7F80),  # +inf
    (0xFF800000, 0xFF80),  # -inf
    (0x7F800001, 0x7FC0),  # a signalling NaN: the one quiet word
    (0xFFC00001, 0x7FC0),  # a negative NaN: the same word
    (0x7F7FFFFF, 0x7F80),  # f32 max rounds to inf
]


@pytest.mark.parametrize("f32, bf16", BF16_CASES)
def test_f32_to_bf16_bits(f32, bf16):
    x = np.array([f32], np.uint32).view(np.float32)
    assert int(convert(x, "bf16").view(np.uint16)[0]) == bf16
    assert int(bf16_by_bits(x).view(np.uint16)[0]) == bf16


def test_the_two_bf16_conversions_agree_on_random_bits():
    bits = np.random.default_rng(0).integers(0, 2**32, 200_000, dtype=np.uint64)
    x = bits.astype(np.uint32).view(np.float32)
    assert np.array_equal(convert(x, "bf16").view(np.uint16), bf16_by_bits(x).view(np.uint16))


@pytest.mark.parametrize("to, cases", [
    ("i8", [(300, 44), (-129, 127), (127, 127), (-128, -128), (2**31 - 1, -1)]),
    ("i16", [(40_000, -25_536), (-32_769, 32_767), (65_536, 0)]),
])
def test_integer_casts_keep_the_low_bits(to, cases):
    x = np.array([c for c, _ in cases], np.int32)
    want = [w for _, w in cases]
    assert convert(x, to).tolist() == want and narrowed(x, to).tolist() == want


# ---- the rules, by name ---------------------------------------------------------------------
def _codes(engine, inp, out) -> set[str]:
    with pytest.raises(TcplanError) as e:
        lower(engine, inp, out)
    return {v.rule for v in e.value.violations}


def test_the_rules_by_name():
    axes = {"A": 8, "B": 32}
    c, inp = ENGINES["collect"](), _stream(axes, "m![A]", "m![B]", "bf16")
    assert _codes(c, inp, _stream(axes, "m![A]", "m![B]", "bf16")) == {"flit-packet",
                                                                      "engine-layout"}
    assert _codes(c, inp, _stream(axes, "m![B / 16, A]", "m![B % 16]", "bf16")) == {
        "engine-layout"}
    sl = {"A": 8, "B": 32, "S": 4}
    spread = _stream(sl, "m![A]", "m![B]", "bf16", slice_="m![S # 256]")
    moved = _stream(sl, "m![A, B / 16]", "m![B % 16]", "bf16", slice_="m![S % 2, S / 2 # 128]")
    assert _codes(c, spread, moved) == {"engine-spatial"}
    fewer = _stream(sl, "m![A, B / 16]", "m![B % 16]", "bf16", slice_="m![S # 128]")
    assert lower(c, spread, fewer).cycles == 16  # (the same slices hold the same rows)
    assert _codes(c, inp, _stream(axes, "m![A, B / 16]", "m![B % 16]", "f32")) == {
        "engine-layout", "flit-packet"}  # (Collect keeps the type: 16 f32 are two flits)
    cast = ENGINES["cast"](to="bf16")
    f32 = _stream({"A": 8, "B": 16}, "m![A]", "m![B]", "f32")  # 64 bytes: two flits
    assert _codes(cast, f32, _stream({"A": 8, "B": 16}, "m![A]", "m![B]", "bf16")) == {
        "flit-packet"}
    i32 = _stream({"A": 8}, "m![1]", "m![A]", "i32")
    assert _codes(ENGINES["cast"](to="bf16"), i32, i32) == {"cast-types"}
    assert _codes(ENGINES["cast"](to="f8e4m3"), _stream({"A": 8}, "m![1]", "m![A]", "f32"),
                  i32) == {"cast-types"}  # (the guide's, not converted by tcplan yet)


def test_a_bad_op_exits_1_with_the_rule_and_a_bad_option_exits_2(tmp_path, capsys):
    from tcplan.planner.cli import main
    text = (GUIDE / "collect_multi_flit.yaml").read_text().replace(
        "packet: 'm![B % 16]'", "packet: 'm![B]'")
    p = tmp_path / "c.yaml"
    p.write_text(text)
    assert main(["solve", str(p)]) == 1
    assert "[engine-layout]" in capsys.readouterr().out
    p.write_text((GUIDE / "cast_padded.yaml").read_text().replace("to: i8", "to: i9"))
    assert main(["solve", str(p)]) == 2
    assert "to: 'i9'" in capsys.readouterr().err


# ---- a Tensor Unit path in a graph ----------------------------------------------------------
PATH = """format: 1
name: path
kind: graph
dtype: bf16
axes: {R: 64, C: 32}
tensors:
  x: {tier: dm, slice: 'm![R]', element: 'm![C]', dtype: f32, given: true}
  xs: {tier: stream, slice: 'm![R]', time: 'm![1]', packet: 'm![C]', dtype: f32}
  xc: {tier: stream, slice: 'm![R]', time: 'm![C / 8]', packet: 'm![C % 8]', dtype: f32}
  xb: {tier: stream, slice: 'm![R]', time: 'm![C / 8]', packet: 'm![C % 8 # 16]'XB}
  y: {tier: dm, slice: 'm![R]', element: 'm![C / 8, C % 8 # 16]', address: 4096}
ops:
  - {name: fetch_x, kind: fetch, source: x, stream: xs}
  - {name: collect_x, kind: collect, source: xs, destination: xc}
  - {name: cast_x, kind: cast, source: xc, destination: xb, to: bf16}
  - {name: commit_y, kind: commit, stream: xb, destination: y}
"""


def test_a_fetch_collect_cast_commit_path_runs_end_to_end(tmp_path):
    """The f32 rows fetched (a 128-byte packet: 4 reads), collected into 4 flits, cast to
    bf16 and committed: every op at one flit (or read) a cycle, and y holds x in bf16, as
    ml_dtypes rounds it (no NaN or subnormal among normal draws)."""
    r = tcplan.solve(tcplan.loads(PATH.replace("XB", ""), "p.yaml"))
    assert r.status == "optimal" and r.verified is True
    ops = {o["op"]: o["cycles"] for o in r.to_json()["plan"]["ops"]}
    assert ops == {"fetch_x": 4, "collect_x": 4, "cast_x": 4, "commit_y": 4}
    import ml_dtypes
    from tcplan.planner.cli import main
    p = tmp_path / "p.yaml"
    p.write_text(PATH.replace("XB", ""))
    xs = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", xs)
    assert main(["run", str(p), "--input", f"x={tmp_path / 'x.npy'}",
                 "--out", str(tmp_path / "out")]) == 0
    y = np.load(tmp_path / "out" / "y.npy")
    assert np.array_equal(y.view(np.uint16), xs.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_a_cast_into_a_stream_of_another_type_is_refused():
    """The cast makes bf16; a graph that declares its output f32 has no plan, by name."""
    r = tcplan.solve(tcplan.loads(PATH.replace("XB", ", dtype: f32"), "p.yaml"))
    assert r.status == "infeasible" and "[graph-dtype]" in r.text()


def test_held_indices_marks_a_coordinate_past_its_axis():
    m = parse("m![B # 64 / 32, B # 64 % 32]", {"B": 56})
    coords, held = held_indices(m)
    assert held[:56].all() and not held[56:].any() and coords["B"][55] == 55


# ---- the register files (book: computing-tensors/register-files.md) -------------------------
def _trf(axes, lane: str, element: str, dtype: str = "bf16", slice_: str = "m![1 # 256]",
         cluster: str = "m![1 # 2]") -> Tensor:
    m = {"chip": "m![1]", "cluster": cluster, "slice": slice_, "lane": lane,
         "element": element}
    return Tensor("w", "trf", dtype, {d: parse(t, axes) for d, t in m.items()})


@pytest.mark.parametrize("name, cycles", [("to_trf_bmatmul", 16), ("to_trf_full", 1),
                                          ("to_vrf_store", 8)])
def test_the_guides_register_file_stores_verify(name, cycles):
    r = tcplan.solve(GUIDE / f"{name}.yaml")
    assert r.status == "given" and r.verified is True and r.cycles == cycles


def test_the_bmatmul_store_derives_two_flits_per_lane():
    """Time m![N, K / 16] into 8 lanes: Lane = Time / 2 (m![N]), Element = [Time % 2,
    Packet] (m![K]); FlitsPerLane 2, as the guide derives it."""
    axes = {"V": 32, "N": 8, "K": 32}
    inp = _stream(axes, "m![N, K / 16]", "m![K % 16]", "bf16", slice_="m![V % 16 # 256]")
    inp = inp.with_dims(cluster=parse("m![V / 16]", axes))
    out = _trf(axes, "m![N]", "m![K]", slice_="m![V % 16 # 256]", cluster="m![V / 16]")
    to_trf = ENGINES["to_trf"]()
    plan = lower(to_trf, inp, out)
    assert to_trf.derived(inp, out) == {"FlitsPerLane": 2}
    made = to_trf.output(inp, out)
    assert same_holding(made.dims["lane"], parse("m![N]", axes))
    assert same_holding(made.dims["element"], parse("m![K]", axes))
    T = np.random.default_rng(3).integers(0, 2**16, (32, 8, 32)).astype(np.uint16)
    assert run_engine(plan, T, axes, reference(plan))[1] == 32 * 8 * 32


def test_register_file_rules_by_name():
    axes = {"N": 8, "K": 32}
    inp = _stream(axes, "m![N, K / 16]", "m![K % 16]", "bf16")
    t = ENGINES["to_trf"]()
    assert lower(t, inp, _trf(axes, "m![N / 2]", "m![N % 2, K]")).cycles == 16  # 4 lanes
    assert _codes(t, inp, _trf(axes, "m![N]", "m![K % 16, K / 16]")) == {"engine-layout"}
    assert _codes(t, inp, _trf(axes, "m![N = 3]", "m![K]")) == {"trf-lanes"}
    big = {"N": 8, "K": 8192}  # 8 lanes x 8,192 bf16 = 16 KiB per lane: over 8 KiB
    wide = _stream(big, "m![N, K / 16]", "m![K % 16]", "bf16")
    assert _codes(t, wide, _trf(big, "m![N]", "m![K]")) == {"register-capacity"}
    half = {"N": 8, "K": 4096}  # 8 KiB a lane: the full region holds it, a half does not
    wide = _stream(half, "m![N, K / 16]", "m![K % 16]", "bf16")
    assert lower(t, wide, _trf(half, "m![N]", "m![K]")).cycles == 8 * 256
    assert _codes(ENGINES["to_trf"](region="first_half"), wide,
                  _trf(half, "m![N]", "m![K]")) == {"register-capacity"}
    # fewer active lanes see more rows each (register-files.md: 4 active, 256 rows a bank):
    # 4 lanes of 16 KiB fit, 8 lanes of 16 KiB (above) do not, 4 of 32 KiB do not
    four = _stream(half, "m![N / 2, N % 2, K / 16]", "m![K % 16]", "bf16")
    assert lower(t, four, _trf(half, "m![N / 2]", "m![N % 2, K]")).cycles == 8 * 256
    four = _stream(big, "m![N / 2, N % 2, K / 16]", "m![K % 16]", "bf16")
    assert _codes(t, four, _trf(big, "m![N / 2]", "m![N % 2, K]")) == {"register-capacity"}
    two_flits = _stream(axes, "m![N]", "m![K]", "bf16")
    assert _codes(t, two_flits, _trf(axes, "m![N]", "m![K]")) == {"flit-packet"}
    v = ENGINES["to_vrf"]()
    vrf = Tensor("v", "vrf", "bf16", {**{d: inp.dims[d] for d in ("chip", "cluster", "slice")},
                                      "element": parse("m![K, N]", axes)})
    assert _codes(v, inp, vrf) == {"engine-layout"}


TRF_PATH = """format: 1
name: weights_to_trf
kind: graph
dtype: bf16
axes: {S: 64, N: 8, K: 32}
tensors:
  w: {tier: dm, slice: 'm![S]', element: 'm![N, K]', given: true}
  ws: {tier: stream, slice: 'm![S]', time: 'm![N]', packet: 'm![K]'}
  wc: {tier: stream, slice: 'm![S]', time: 'm![N, K / 16]', packet: 'm![K % 16]'}
  wt: {tier: trf, slice: 'm![S]', lane: 'm![N]', element: 'm![K]'}
ops:
  - {name: fetch_w, kind: fetch, source: w, stream: ws, context: sub}
  - {name: collect_w, kind: collect, source: ws, destination: wc}
  - {name: store_w, kind: to_trf, source: wc, destination: wt}
"""


def test_a_weight_fetched_collected_and_stored_into_the_trf():
    """A graph's TRF tensor: the weight rows (64 bytes of bf16) fetched in the sub context
    (8 reads of 8 bytes each), collected into two flits, stored one lane per row."""
    r = tcplan.solve(tcplan.loads(TRF_PATH, "g.yaml"))
    assert r.status == "optimal" and r.verified is True
    ops = {o["op"]: o["cycles"] for o in r.to_json()["plan"]["ops"]}
    assert ops == {"fetch_w": 8 * 8, "collect_w": 16, "store_w": 16}


# ---- the Transpose Engine (book: computing-tensors/transpose-engine.md) ----------------------
@pytest.mark.parametrize("name, cycles, in_rows, in_cols, out_rows, double", [
    ("transpose_basic", 48, 8, 16, 16, 1),
    ("transpose_small", 6, 4, 8, 2, 1),
    ("transpose_large_column", 128, 8, 32, 32, 0),
    ("transpose_bf16", 68, 4, 8, 8, 1),
    ("transpose_f32", 34, 2, 8, 8, 1),
])
def test_the_guides_transposes(name, cycles, in_rows, in_cols, out_rows, double):
    """Each example's parameters (the guide's tables), its buffering and its latency, and
    the op verifies."""
    r = tcplan.solve(GUIDE / f"{name}.yaml")
    assert r.status == "given" and r.verified is True and r.cycles == cycles
    d = r.to_json()["plan"]["derived"]
    assert (d["in_rows"], d["in_cols"], d["out_rows"], d["double_buffered"]) == (
        in_rows, in_cols, out_rows, double)


def test_the_guides_i4_transpose_latency():
    """The i4 example (not a tcplan type): in_flits 16, out_rows 16, n = 4, double
    buffered: 16 + 3 x max(16, 16) + 16 = 80."""
    from tcplan.model.engines.transpose import burst_cycles
    assert burst_cycles(16, 16, 4, True) == 80 and burst_cycles(32, 32, 2, False) == 128


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]),
       st.integers(1, 8), st.sampled_from(["i8", "bf16", "f32"]))
def test_a_transpose_runs_what_its_mapping_says(n, r, ppc, v, dtype):
    """Any matrix the engine takes (n iterations of r rows of ppc packets of v valid
    elements): the output it derives holds what its run moves."""
    most = {"i8": 8, "bf16": 4, "f32": 2}[dtype]
    f = {"i8": 32, "bf16": 16, "f32": 8}[dtype]
    if r > most:
        return
    axes = {"N": n, "R": r, "Q": ppc, "V": v}
    inp = _stream(axes, "m![N, R, Q]", f"m![V # {f}]", dtype)
    out = _stream(axes, "m![N, Q, V]", f"m![R # {f}]", dtype)
    t = ENGINES["transpose"]()
    plan = lower(t, inp, out)
    T = np.random.default_rng(n * r * ppc * v).integers(0, 100, (n, r, ppc, v)).astype(
        {"i8": np.int8, "bf16": np.uint16, "f32": np.uint32}[dtype])
    assert run_engine(plan, T, axes, reference(plan))[1] == n * r * ppc * v


def test_transpose_rules_by_name():
    axes = {"C": 8, "D": 8, "E": 8}
    t = ENGINES["transpose"]()
    inp = _stream(axes, "m![C, D]", "m![E # 16]", "bf16")
    rows8 = _stream(axes, "m![C, E]", "m![D # 16]", "bf16")  # 8 rows of bf16: at most 4
    assert _codes(t, inp, rows8) == {"transpose-shape"}
    wide = _stream({"E": 16}, "m![1]", "m![E]", "bf16")  # 16 valid elements: at most 8
    assert _codes(t, wide, _stream({"E": 16}, "m![E]", "m![1 # 16]", "bf16")) == {
        "transpose-shape"}
    axes = {"C": 8, "D": 4, "E": 8}
    inp = _stream(axes, "m![C, D]", "m![E # 16]", "bf16")
    swapped = _stream(axes, "m![E, C]", "m![D # 16]", "bf16")
    assert _codes(t, inp, swapped) == {"engine-layout"}


# ---- the Switch Engine (book: computing-tensors/switch-engine.md) ---------------------------
@pytest.mark.parametrize("name, cycles, derived", [
    ("switch_broadcast01", 2048, {"slice2": 64, "ring_size": 4, "time1": 16}),
    ("switch_broadcast1", 4096, {"slice2": 8, "ring_size": 32}),
    ("switch_transpose", 8192, {"slice2": 4, "ring_size": 64}),
    ("switch_inter_transpose", 256, {"slice2": 8, "ring_size": 32, "time1": 2, "time2": 2}),
    ("switch_transposed_broadcast1", 1024, {"slice2": 4, "ring_size": 64}),
])
def test_the_guides_switch_configurations(name, cycles, derived):
    """Each regular configuration's example: the sub-dimensions the guide derives, its cycle
    estimate (ring_size x Time x flits per packet), and the op verifies (every broadcast
    copy holding the input)."""
    r = tcplan.solve(GUIDE / f"{name}.yaml")
    assert r.status == "given" and r.verified is True and r.cycles == cycles
    assert r.to_json()["plan"]["derived"] == derived


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["broadcast01", "broadcast1", "transpose", "inter_transpose",
                        "transposed_broadcast1"]),
       st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]),
       st.sampled_from([2, 4]))
def test_a_switch_runs_what_its_mapping_says(config, s1, s0, t0, t):
    """Every regular configuration on Slice m![S] (256) and Time m![T1, T0]: its derived
    output holds what its run moves (the broadcast copies constant along X and Y)."""
    axes = {"S": 256, "T": t * t0 * (s1 if config == "inter_transpose" else 1), "E": 8,
            "X": s1, "Y": s0}
    sw = ENGINES["switch"](config=config, slice1=s1, slice0=s0, time0=t0)
    inp = _stream(axes, "m![T]", "m![E]", "i32", slice_="m![S]")
    new = {"broadcast01": "X, Y", "broadcast1": "X", "transposed_broadcast1": "Y"}
    declared = _stream(axes, "m![T]", "m![E]", "i32", slice_="m![S]")
    if config in new:  # (the output's Slice names the new axes: take the derived one)
        from tcplan.model.engines.switch import _joined
        p = sw.parts(inp)
        parts = [parse(f"m![{a}]", axes) for a in new[config].split(", ")]
        declared = declared.with_dims(slice=_joined([p.s2, *parts]))
    out = sw.output(inp, declared)
    plan = lower(sw, inp, out)
    T = np.random.default_rng(s1 * 10 + s0).integers(0, 2**31, (256, axes["T"], 8)).astype(
        np.int32)
    due, checked = run_engine(plan, T, axes, reference(plan))
    copies = axes["X"] if config in ("broadcast01", "broadcast1") else 1
    copies *= axes["Y"] if config in ("broadcast01", "transposed_broadcast1") else 1
    assert checked == 256 * axes["T"] * 8 * copies


def test_switch_rules_by_name():
    axes = {"A": 256, "B": 64, "C": 32, "X": 4}
    inp = _stream(axes, "m![B]", "m![C]", slice_="m![A]")
    good = _stream(axes, "m![B, A / 8 % 4]", "m![C]", slice_="m![A / 32, X, A % 8]")
    assert lower(ENGINES["switch"](config="broadcast1", slice1=4, slice0=8), inp,
                 good).cycles == 32 * 64 * 1
    assert _codes(ENGINES["switch"](config="broadcast1", slice1=3, slice0=8), inp, good) == {
        "switch-shape"}  # (a ring of 24 slices does not divide 256)
    assert _codes(ENGINES["switch"](config="broadcast1", slice1=2, slice0=8), inp, good) == {
        "switch-shape"}  # (X has 4 copies, the configuration moves 2)
    padded = _stream(axes, "m![B, A / 8 % 4]", "m![C]", slice_="m![A / 32, X, A % 8 # 8]")
    assert lower(ENGINES["switch"](config="broadcast1", slice1=4, slice0=8), inp,
                 padded).cycles == 2048  # (A % 8 # 8 holds what A % 8 does)
    swapped = _stream(axes, "m![A / 8 % 4, B]", "m![C]", slice_="m![A / 32, X, A % 8]")
    assert _codes(ENGINES["switch"](config="broadcast1", slice1=4, slice0=8), inp,
                  swapped) == {"engine-layout"}
    small = _stream({"A": 128, "B": 8, "C": 32}, "m![B]", "m![C]", slice_="m![A]")
    assert _codes(ENGINES["switch"](config="inter_transpose", slice1=2, slice0=16, time0=2),
                  small, small) == {"switch-shape"}  # (InterTranspose spans 256 slices)


SWITCH_PATH = """format: 1
name: broadcast_rows
kind: graph
dtype: i8
axes: {A: 256, B: 64, C: 32, X: 4}
tensors:
  x: {tier: dm, slice: 'm![A]', element: 'm![B, C]', given: true}
  xs: {tier: stream, slice: 'm![A]', time: 'm![B]', packet: 'm![C]'}
  xb: {tier: stream, slice: 'm![A / 32, X, A % 8]', time: 'm![B, A / 8 % 4]', packet: 'm![C]'}
  xc: {tier: stream, slice: 'm![A / 32, X, A % 8]', time: 'm![B, A / 8 % 4]', packet: 'm![C # 32]'}
  y: {tier: dm, slice: 'm![A / 32, X, A % 8]', element: 'm![B, A / 8 % 4, C]', address: 4096}
ops:
  - {name: fetch_x, kind: fetch, source: x, stream: xs}
  - {name: share, kind: switch, source: xs, destination: xb, config: {broadcast1: {slice1: 4, slice0: 8}}}
  - {name: collect_x, kind: collect, source: xb, destination: xc}
  - {name: commit_y, kind: commit, stream: xc, destination: y}
"""


def test_a_broadcast_through_the_switch_runs_end_to_end():
    """Each slice's rows fetched, shared with the 4 slices of its group (Broadcast1), and
    committed: every slice of a group of 32 holds the group's 4 x 64 rows, verified
    end to end (y holds x, constant along X)."""
    r = tcplan.solve(tcplan.loads(SWITCH_PATH, "g.yaml"))
    assert r.status == "optimal" and r.verified is True, r.text()
    ops = {o["op"]: o["cycles"] for o in r.to_json()["plan"]["ops"]}
    assert ops["share"] == 32 * 64 * 1 and ops["collect_x"] == 256


# ---- the Commit Adapter's trim (book: computing-tensors/commit-adapter.md) ----------------
@pytest.mark.parametrize("name, valid", [("commit_trim_i8_padding", 8),
                                         ("commit_trim_f32_non_padding", 4),
                                         ("commit_trim_bf16_with_transpose", 8)])
def test_the_guides_trims(name, valid):
    p = tcplan.load(GUIDE / f"{name}.yaml")
    r = tcplan.verify(p)
    assert r.verified and r.cycles == 8
    plan = lower(ENGINES["commit_trim"](), p.tensors["source"], p.tensors["destination"])
    assert plan.engine.derived(plan.inp, plan.out) == {"valid_size": valid}


def test_trim_rules_by_name():
    trim = ENGINES["commit_trim"]()
    ax = {"M": 4, "W": 32}
    inp = _stream(ax, "m![M]", "m![W]")
    # 12 bytes is no trim the adapter makes (8, 16, 24 or 32)
    assert _codes(trim, inp, _stream(ax, "m![M]", "m![W = 12]")) == {"commit-trim"}
    # a packet that is not the flit's leading elements
    assert _codes(trim, inp, _stream(ax, "m![M]", "m![W / 4]")) == {"commit-trim"}
    # a trim of what is not one flit
    wide = _stream({"M": 4, "W": 64}, "m![M]", "m![W]")
    assert "flit-packet" in _codes(trim, wide, _stream({"M": 4, "W": 64}, "m![M]",
                                                       "m![W = 32]"))
    # the 24-byte trim of a 32-byte flit is one
    assert lower(trim, inp, _stream(ax, "m![M]", "m![W = 24]")).cycles == 4


def test_a_broadcast1_whose_copies_are_padding_gathers():
    """proj_q's switch: Broadcast1 {slice1: 8, slice0: 4} of Slice m![Q / 32, 1 # 4] into
    m![Q / 256, 1 # 32], Time m![Q / 32 % 8]: the output declares the copies past the first
    as padding (a gather); the broadcast term is then 1 # 8, and the run checks the first
    copy of every slice group."""
    ax = {"Q": 2048}
    inp = _stream(ax, "m![1]", "m![Q % 32]", "bf16", "m![Q / 32, 1 # 4]")
    out = _stream(ax, "m![Q / 32 % 8]", "m![Q % 32]", "bf16", "m![Q / 256, 1 # 32]")
    sw = ENGINES["switch"](config="broadcast1", slice1=8, slice0=4)
    plan = lower(sw, inp, out)
    assert plan.cycles == 32 * 1 * 2
    wrong = _stream(ax, "m![Q / 32 % 8]", "m![Q % 32]", "bf16", "m![1 # 32, Q / 256]")
    assert _codes(sw, inp, wrong) == {"engine-layout"}


# ---- the Fetch Adapter's cast ----------------------------------------------------------------
def test_the_guides_fetch_cast_example():
    """The guide's fetch_with_type_cast: i8 [0..7] fetched and cast to i32 [0..7], Time and
    Packet unchanged; 32 output bytes in one cycle, + the cast's 2-cycle latency."""
    r = tcplan.solve(GUIDE / "fetch_cast_i8.yaml")
    assert r.verified is True and r.cycles == 1 + 2
    out = tcplan.run(GUIDE / "fetch_cast_i8.yaml", {"source": np.arange(8, dtype=np.int8)})
    d = out.arrays["destination"]
    assert d.dtype == np.int32 and d.tolist() == list(range(8))


@pytest.mark.parametrize("have, to", [("bf16", "f32"), ("i8", "i32"), ("i16", "i32")])
def test_every_widening_agrees_with_the_bits_on_every_value(have, to):
    """The engine's widening (numpy / ml_dtypes casts) against the reference's (by bits:
    bf16 as the high half of an f32 word, integers sign-extended), on every bit pattern of
    the input type, NaNs and infinities included."""
    from tcplan.executor.engines import widened
    from tcplan.model.engines.fetch_adapter import FetchCast
    from tcplan.model.numeric import NP_DTYPES
    n = 8 * np.dtype(NP_DTYPES[have]).itemsize
    allbits = np.arange(1 << n, dtype=np.int64).astype(f"u{n // 8}")
    x = allbits.view(NP_DTYPES[have]).reshape(1, 1, -1)
    got = FetchCast(to).run(x)
    want = widened(x, to)
    assert np.array_equal(got.view(f"u4"), want.view(f"u4"))
    if have == "bf16":  # (by hand: 1.0 is 0x3f80; -2.0 is 0xc000)
        one = np.array([0x3F80, 0xC000], np.uint16).view(NP_DTYPES["bf16"]).reshape(1, 1, 2)
        assert FetchCast("f32").run(one).reshape(-1).tolist() == [1.0, -2.0]


def test_a_fetch_cast_of_64_output_bytes_takes_two_cycles_a_packet():
    """A bf16 packet of 16 widened to f32 is 64 bytes: two flits' worth a packet (the
    guide's read_size limit), so Time 4 takes 8 cycles, + 2."""
    inp = _stream({"A": 64}, "m![A / 16]", "m![A % 16]", "bf16")
    from tcplan.model.engines.fetch_adapter import FetchCast
    plan = lower(FetchCast("f32"), inp, _stream({"A": 64}, "m![A / 16]", "m![A % 16]", "f32"))
    assert plan.cycles == 4 * 2 + 2
    assert plan.engine.derived(plan.inp, plan.out) == {"CyclesPerPacket": 2}


def test_fetch_cast_rules_by_name():
    from tcplan.model.engines.fetch_adapter import FetchCast
    a = {"A": 16}
    bf = _stream(a, "m![1]", "m![A]", "bf16")
    assert _codes(FetchCast("i32"), bf, _stream(a, "m![1]", "m![A]", "i32")) == \
        {"fetch-cast-types"}
    f8 = _stream(a, "m![1]", "m![A]", "f8e4m3")
    bad = FetchCast("f32").check(f8, _stream(a, "m![1]", "m![A]", "f32"))
    assert [v.rule for v in bad] == ["fetch-cast-types"] and "not run it yet" in bad[0].message
    assert "item 101" in bad[0].detail["fix"]
    # the packet is kept: a declared output that pads it is not the adapter's
    assert _codes(FetchCast("f32"), bf, _stream(a, "m![1]", "m![A # 32]", "f32")) == \
        {"engine-layout"}


# ---- the Switch Engine's custom configurations -------------------------------------------------
@pytest.mark.parametrize("name, cycles, positions", [
    ("switch_custom_permutation", 256 * 8 * 8, 256 * 8 * 64),
    ("switch_custom_broadcast", 32 * 8 * 8, 256 * 32 * 64),
    ("switch_custom_extraction", 4 * 8 * 1, 256 * 24 * 8),
])
def test_the_guides_custom_broadcasts(name, cycles, positions):
    """The guide's three CustomBroadcast examples: each verifies (every output position
    holds, bit for bit, the element its mapping names, gathered by the bitmap tcplan
    derives from the two mappings) at ring_size x Time x flits_per_packet; Example 3's
    Time is the input's, as the guide's Performance defines it (docs/decisions.md item
    103)."""
    r = tcplan.solve(GUIDE / f"{name}.yaml")
    assert r.verified is True and r.cycles == cycles
    assert r.to_json()["checked"] == positions


def test_a_custom_permutation_moves_each_slice_where_the_guide_says():
    """Example 1's bitmap by hand: output slice 1, (B % 4, B / 4, A % 4, A / 4) =
    (0, 0, 0, 1), receives input slice (A, B) = (4, 0), i.e. 64, as the guide's table says;
    output slice 4, (0, 0, 1, 0), holds A = 1, B = 0: input slice 16 (the guide's row 4
    prints (0, 1) and ring group 1, which the mapping it states does not give)."""
    from tcplan.model.engines.switch import CustomBroadcast
    axes = {"A": 16, "B": 16, "C": 1, "D": 8}
    inp = _stream(axes, "m![C]", "m![D]", "f32", "m![A, B]")
    out = _stream(axes, "m![C]", "m![D]", "f32", "m![B % 4, B / 4, A % 4, A / 4]")
    cb = CustomBroadcast(256)
    v = np.arange(2 * 256, dtype=np.float32).reshape(2 * 256, 1, 1) * np.ones((1, 1, 8),
                                                                             np.float32)
    got = cb.run(v, inp, out)  # (units: cluster x slice)
    assert got[1, 0, 0] == 64 and got[4, 0, 0] == 16
    assert (got[256:] == 0).all()  # (the second cluster, m![1 # 2]: padding, holds nothing)


def test_custom_broadcast_rules_by_name():
    from tcplan.model.engines.switch import CustomBroadcast
    axes = {"A": 16, "B": 16, "C": 8, "D": 8}
    inp = _stream(axes, "m![C]", "m![D]", "f32", "m![A, B]")
    perm = _stream(axes, "m![C]", "m![D]", "f32", "m![B % 4, B / 4, A % 4, A / 4]")
    # a sub-ring of 16 slices cannot reverse the digits of all 256
    bad = CustomBroadcast(16).check(inp, perm)
    assert [v.rule for v in bad] == ["switch-custom"] and "sub-ring of 16" in bad[0].message
    # a ring that does not divide the slices
    assert "does not divide" in CustomBroadcast(3).check(inp, perm)[0].message
    # a live value dropped: C # 4 moved to Slice X without C in Time
    ax = {"A": 16, "B": 4, "C": 3, "D": 8, "E": 8, "X": 4}
    src = _stream(ax, "m![D]", "m![E]", "f32", "m![A, B, C # 4]")
    drop = _stream(ax, "m![D]", "m![E]", "f32", "m![A, B, X]")
    bad = CustomBroadcast(4).check(src, drop)
    assert [v.rule for v in bad] == ["switch-custom"] and "dropped" in bad[0].message
    # the Packet is kept
    other = _stream(axes, "m![C]", "m![D # 16]", "f32", "m![B % 4, B / 4, A % 4, A / 4]")
    assert {v.rule for v in CustomBroadcast(256).check(inp, other)} == {"engine-layout"}


def test_a_custom_broadcast_option_is_read_with_its_location(tmp_path, capsys):
    from tcplan.planner.cli import main
    p = tmp_path / "s.yaml"
    p.write_text((GUIDE / "switch_custom_broadcast.yaml").read_text().replace(
        "{ring_size: 32}", "{ring: 32}"))
    assert main(["solve", str(p)]) == 2
    assert "custom_broadcast takes ring_size" in capsys.readouterr().err


# ---- register files reused over a graph's order ----------------------------------------------
def _two_weights(store_second_early: bool) -> str:
    """tu_path_matmul with a second TRF tensor at the same bytes, filled from the same
    collected weight and read by a second contraction: before the first contraction reads
    its own (both live at once) or after it."""
    text = (ROOT / "problems" / "graphs" / "tu_path_matmul.yaml").read_text()
    text = text.replace("  ys: {", "  wt2: {tier: trf, slice: 'm![S # 256]', lane: 'm![C]', "
                        "element: 'm![B]'}\n  ys2: {tier: stream, slice: 'm![S # 256]', time: "
                        "'m![A]', packet: 'm![C]', dtype: f32}\n  y2: {tier: dm, slice: "
                        "'m![S # 256]', element: 'm![A, C]', dtype: f32, address: 16384}\n"
                        "  ys: {")
    store2 = "  - {name: store_w2, kind: to_trf, source: wc, destination: wt2}\n"
    second = ("  - {name: matmul2, kind: contract, source: xc, trf: wt2, destination: ys2, "
              "stages: {outer: {time: 'm![A]', packet: 'm![B]'}, packet: 'm![1]', time: "
              "'m![A]', lane: interleaved}}\n  - {name: commit_y2, kind: commit, stream: ys2, "
              "destination: y2}\n")
    text = text.replace("  - {name: commit_y, kind: commit, stream: ys, destination: y}\n",
                        "  - {name: commit_y, kind: commit, stream: ys, destination: y}\n"
                        + ("" if store_second_early else store2) + second)
    if store_second_early:
        text = text.replace("  - {name: fetch_x,", store2 + "  - {name: fetch_x,")
    return text


def test_a_trf_tensor_may_reuse_bytes_once_the_last_read_is_done():
    """Two weights at the same TRF bytes: loaded after the first contraction's read, the
    second plans and verifies (a kernel's up and gate weights, docs/decisions.md item 104);
    loaded while the first is still to be read, it is refused at its line."""
    r = tcplan.solve(tcplan.loads(_two_weights(False), "g.yaml"))
    assert r.status == "optimal" and r.verified is True
    with pytest.raises(TcplanError) as e:
        tcplan.loads(_two_weights(True), "g.yaml")
    assert "overlaps" in e.value.message and "wt" in e.value.message


# ---- the Inter-Slice Reducer -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["inter_slice_dummy", "inter_slice_broadcast"])
def test_the_guides_inter_slice_reductions(name):
    """The guide's Dummy Replacement (AddSat, i32) and Broadcast (f32 Add) examples: each
    verifies against the reduction over R written apart, at one flit streamed plus the
    ring of 4: 5 cycles."""
    r = tcplan.solve(GUIDE / f"{name}.yaml")
    assert r.verified is True and r.cycles == 1 + 4


def test_the_inter_slice_reducer_sums_each_group_into_its_first_slice():
    """By hand: A / 8 groups of R = 4 slices; the sum of a group's four packets lands on its
    first slice (Slice [A / 8, 1 # 4]); with the broadcast, on every slice of the group."""
    from tcplan.model.engines.inter_slice import InterSliceReduce
    axes = {"A": 64, "R": 4}
    inp = _stream(axes, "m![1]", "m![A % 8]", "i32", "m![A / 8, R]")
    out = _stream(axes, "m![1]", "m![A % 8]", "i32", "m![A / 8, 1 # 4]")
    v = np.arange(2 * 32 * 8, dtype=np.int32).reshape(64, 1, 8)  # (cluster x slice units)
    got = InterSliceReduce("AddSat").run(v, inp, out)
    assert got[0, 0, 0] == 0 + 8 + 16 + 24 and got[4, 0, 1] == 33 + 41 + 49 + 57
    assert lower(InterSliceReduce("AddSat"), inp, out).cycles == 1 + 4


def test_inter_slice_rules_by_name():
    from tcplan.model.engines.inter_slice import InterSliceReduce
    axes = {"A": 64, "R": 4, "X": 4, "C": 4}
    inp = _stream(axes, "m![C]", "m![A % 8]", "i32", "m![A / 8, R]")
    dummy = _stream(axes, "m![C]", "m![A % 8]", "i32", "m![A / 8, 1 # 4]")
    # Mul is an f32 operation
    bad = InterSliceReduce("Mul").check(inp, dummy)
    assert [v.rule for v in bad] == ["inter-slice-shape"] and "AddSat" in bad[0].message
    # a promotion of the Time factor C into the freed slots: not modelled
    promo = _stream(axes, "m![1]", "m![A % 8]", "i32", "m![A / 8, C]")
    bad = InterSliceReduce("Add").check(inp, promo)
    assert "promotion" in bad[0].message
    # the replacing factors must hold the reduced ones' 4 slices
    two = _stream(axes, "m![C]", "m![A % 8]", "i32", "m![A / 8, 1 # 2, 1 # 2]")
    assert not InterSliceReduce("Add").check(inp, two)  # (2 x 2 = 4: a dummy of two terms)
    # Time is kept
    other = _stream(axes, "m![1]", "m![A % 8]", "i32", "m![A / 8, X]")
    assert {v.rule for v in InterSliceReduce("Add").check(inp, other)} == {"engine-layout"}


def test_a_contraction_result_may_carry_a_partly_summed_axis():
    """weighted_sum's contraction: the tree sums T % 16 in each slice while the result
    stays on the slices of T / 16: at T = 16 k the result holds the partial sum over the
    16 keys of slice k, against numpy on integers (exact; summing a digit the result holds
    is still refused: tests/test_contraction.py, contract-reduce-axes)."""
    text = """format: 1
kind: contract
dtype: bf16
axes: {N: 2, T: 64, G: 2, D: 16}
source: {slice: 'm![N, T / 16]', time: 'm![G]', packet: 'm![T % 16]'}
trf: {tier: trf, slice: 'm![N, T / 16]', lane: 'm![D % 8]', element: 'm![D / 8, T % 16]'}
stages: {outer: {time: 'm![G, D / 8]', packet: 'm![T % 16]'}, packet: 'm![1]', time: 'm![G, D / 8]', lane: interleaved}
destination: {slice: 'm![N, T / 16]', time: 'm![G, D / 8]', packet: 'm![D % 8]'}
"""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(0)
    S = rng.integers(-3, 4, (2, 64, 2)).astype(np.float32)  # (N, T, G)
    W = rng.integers(-3, 4, (2, 64, 16)).astype(np.float32)  # (N, T, D)
    out = tcplan.run(tcplan.loads(text, "c.yaml"),
                     {"source": S.astype(bf16), "trf": W.astype(bf16)})
    d = out.arrays["destination"]  # (N, T, G, D)
    want = np.einsum("nkjg,nkjd->nkgd", S.reshape(2, 4, 16, 2), W.reshape(2, 4, 16, 16))
    assert np.array_equal(d[:, ::16], want) and (d[:, 1::16] == 0).all()


@pytest.mark.parametrize("cluster, refused", [("m![3]", True), ("m![1]", False),
                                              ("m![1 # 4]", False)])
def test_a_custom_broadcast_on_other_clusters(cluster, refused):
    """Found by the fuzz campaign: an input on other units than the output's (Cluster
    m![3]) is refused by name; m![1] and m![1 # 4] place the stream on the same units as the
    output's m![1 # 2] and verify (a traceback before)."""
    text = (GUIDE / "switch_custom_broadcast.yaml").read_text().replace(
        "source: {cluster: 'm![1 # 2]'", f"source: {{cluster: '{cluster}'")
    r = tcplan.verify(tcplan.loads(text, "p.yaml"))
    if refused:
        assert r.verified is False and "switch-custom" in str(r.error)
    else:
        assert r.verified is True


# ---- the Commit Adapter's casts (book: computing-tensors/commit-adapter.md, 'Type Casting') --
@pytest.mark.parametrize("name", ["commit_cast_example", "commit_cast_relu_example"])
def test_the_guides_commit_casts(name):
    """The guide's two casts: 8 f32 of Time m![N, C, H] (48 steps) to 8 bf16, one flit a
    cycle; the ReLU clamps the guide's [-5.0, -0.1, 0.0, 3.7] to [0.0, 0.0, 0.0, 3.7], the
    plain cast keeps them (as bf16 rounds them)."""
    r = tcplan.solve(GUIDE / f"{name}.yaml")
    assert r.status == "given" and r.verified is True and r.cycles == 48
    row = np.array([-5.0, -0.1, 0.0, 3.7, 1.0, -1.0, 2.5, -2.5], np.float32)
    out = tcplan.run(GUIDE / f"{name}.yaml", {"source": np.broadcast_to(row, (4, 3, 4, 8))})
    d = out.arrays["destination"]
    assert d.shape == (4, 3, 4, 8) and d.dtype.itemsize == 2
    got = d[2, 1, 3].astype(np.float32).tolist()
    if "relu" in name:
        assert got == [0.0, 0.0, 0.0, 3.703125, 1.0, 0.0, 2.5, 0.0]
    else:
        assert got == [-5.0, -0.10009765625, 0.0, 3.703125, 1.0, -1.0, 2.5, -2.5]


@pytest.mark.parametrize("relu", [False, True])
def test_commit_casts_agree_with_the_bits_on_every_kind_of_word(relu):
    """The engine's cast (numpy: signbit, isnan, ml_dtypes) against the reference's (by bits:
    the sign bit cleared to +0.0 unless the word is a NaN, then rounded by bits), on 2**20
    random words and every boundary word: zeros of both signs, subnormals, infinities and
    NaNs with their sign bit set."""
    from tcplan.executor.engines import relu_by_bits
    from tcplan.model.engines.commit_adapter import CommitCast, CommitCastRelu
    rng = np.random.default_rng(7)
    special = np.array([0, 0x80000000, 1, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x7F800000,
                        0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001,
                        0x3F808000, 0x3F818000, 0xBF808000], np.uint32)
    words = np.concatenate([special, rng.integers(0, 1 << 32, 1 << 20, np.uint64
                                                  ).astype(np.uint32)])
    x = words.view(np.float32).reshape(1, 1, -1)
    got = (CommitCastRelu if relu else CommitCast)("bf16").run(x)
    want = narrowed(relu_by_bits(x) if relu else x, "bf16")
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    if relu:  # (hand-worked: -0.0 and a negative subnormal to +0.0; a negative NaN kept)
        assert got.view(np.uint16)[0, 0, 1] == 0 and got.view(np.uint16)[0, 0, 3] == 0
        assert got.view(np.uint16)[0, 0, 9] == 0x7FC0


def test_commit_cast_rules_by_name():
    cast = ENGINES["commit_cast"](to="bf16")
    ax = {"M": 4, "W": 8}
    f32 = _stream(ax, "m![M]", "m![W]", "f32")
    # an i32 stream: the adapter casts f32 to bf16 only
    assert _codes(cast, _stream(ax, "m![M]", "m![W]", "i32"),
                  _stream(ax, "m![M]", "m![W]", "bf16")) == {"commit-cast-types"}
    assert _codes(ENGINES["commit_cast"](to="i8"), f32,
                  _stream(ax, "m![M]", "m![W]", "i8")) == {"commit-cast-types"}
    # 2 f32 (8 bytes) and 6 f32 (24 bytes): not a multiple of 16 bytes
    for w in (2, 6):
        a = {"M": 4, "W": w}
        assert _codes(cast, _stream(a, "m![M]", "m![W]", "f32"),
                      _stream(a, "m![M]", "m![W]", "bf16")) == {"commit-cast-width"}
    # the same packet written split still holds what the input's does: it casts
    assert lower(cast, f32, _stream(ax, "m![M]", "m![W / 2, W % 2]", "bf16")).cycles == 4
    # a Time that moved: the layout the cast keeps, by name
    assert "engine-layout" in _codes(cast, f32, _stream({"M": 4, "W": 8}, "m![1]",
                                                        "m![W]", "bf16"))
    # 4 f32 (16 bytes) casts
    a = {"M": 4, "W": 4}
    assert lower(cast, _stream(a, "m![M]", "m![W]", "f32"),
                 _stream(a, "m![M]", "m![W]", "bf16")).cycles == 4


def test_a_trim_and_relu_cast_path_in_a_graph():
    """fetch -> collect -> commit_trim -> commit_cast_relu -> commit, as a kernel writes the
    end of a main-context path: y holds relu(x) in bf16, bit for bit."""
    text = PATH.replace("XB", "").replace(
        "  - {name: cast_x, kind: cast, source: xc, destination: xb, to: bf16}\n",
        "  - {name: trim_x, kind: commit_trim, source: xc, destination: xt}\n"
        "  - {name: cast_x, kind: commit_cast_relu, source: xt, destination: xb, to: bf16}\n"
    ).replace("packet: 'm![C % 8 # 16]'", "packet: 'm![C % 8]'").replace(
        "  y: {tier: dm, slice: 'm![R]', element: 'm![C / 8, C % 8 # 16]', address: 4096}",
        "  xt: {tier: stream, slice: 'm![R]', time: 'm![C / 8]', packet: 'm![C % 8]', "
        "dtype: f32}\n  y: {tier: dm, slice: 'm![R]', element: 'm![C]', address: 4096}")
    r = tcplan.solve(tcplan.loads(text, "p.yaml"))
    assert r.status == "optimal" and r.verified is True, r.text()
    xs = np.random.default_rng(3).standard_normal((64, 32)).astype(np.float32)
    y = tcplan.run(tcplan.loads(text, "p.yaml"), {"x": xs}).arrays["y"]
    import ml_dtypes
    assert np.array_equal(y.view(np.uint16),
                          np.maximum(xs, 0).astype(ml_dtypes.bfloat16).view(np.uint16))


#: streams over A=6, B=40, C=3: an axis over the units and the inner dimensions (the first
#: two), padding past an axis (the second and third), units holding nothing
STREAMS = [
    {"cluster": "m![A / 3 # 2]", "slice": "m![B / 8, A % 3 # 4]", "time": "m![C, B % 8 / 2]",
     "packet": "m![B % 2 # 4]"},
    {"cluster": "m![1 # 2]", "slice": "m![B # 64 / 2]", "time": "m![A, C]",
     "packet": "m![B # 64 % 2 # 8]"},
    {"cluster": "m![A # 8 / 4]", "slice": "m![A # 8 % 4, C]", "time": "m![B # 48 / 8]",
     "packet": "m![B # 48 % 8]"},
]


@pytest.mark.parametrize("dims", STREAMS)
def test_a_streams_index_is_its_cells_one_by_one(dims):
    """stream_index (units and inner dimensions apart, combined on the units holding data)
    against Mapping.cell at every position: held where every dimension's cell is live and
    every axis's summed coordinate is inside it; the index of those coordinates."""
    import itertools
    from tcplan.executor.engines import compute_stream_index
    axes = {"A": 6, "B": 40, "C": 3}
    t = Tensor("s", "stream", "i8", {d: parse(m, axes) for d, m in
                                      {"chip": "m![1]", **dims}.items()})
    lin, held = compute_stream_index(t, axes)
    order = ("chip", "cluster", "slice", "time", "packet")
    sizes = [t.dims[d].size for d in order]
    for pos in itertools.product(*(range(n) for n in sizes)):
        cells = [t.dims[d].cell(i) for d, i in zip(order, pos)]
        unit = (pos[0] * sizes[1] + pos[1]) * sizes[2] + pos[2]
        coord = {a: 0 for a in axes}
        for c in cells:
            for a, v in (c.index or {}).items():
                coord[a] += v
        want = all(c.status == "live" for c in cells) and all(
            coord[a] < n for a, n in axes.items())
        assert held[unit, pos[3], pos[4]] == want, pos
        if want:
            assert lin[unit, pos[3], pos[4]] == (coord["A"] * 40 + coord["B"]) * 3 + coord["C"]


@pytest.mark.parametrize("dims", STREAMS + [
    {"cluster": "m![1 # 2]", "slice": "m![C # 4, 1 # 2]", "time": "m![A # 8, B / 8]",
     "packet": "m![B % 8 # 16]"}])
def test_a_streams_gather_is_its_index_where_held(dims):
    """compute_gather (held units x held inner positions, no array over every position)
    against compute_stream_index (itself checked cell by cell above): the same held
    positions in order, the same indexes, the same units holding any; on every case,
    the ones with an axis over the units and the inner dimensions included."""
    from tcplan.executor.engines import compute_gather, compute_stream_index
    axes = {"A": 6, "B": 40, "C": 3}
    t = Tensor("s", "stream", "i8", {d: parse(m, axes) for d, m in
                                      {"chip": "m![1]", **dims}.items()})
    lin, held = compute_stream_index(t, axes)
    g = compute_gather(t, axes)
    assert g.shape == lin.shape
    assert g.pos.tolist() == np.flatnonzero(held).tolist()
    assert g.src.tolist() == lin.reshape(-1)[held.reshape(-1)].tolist()
    assert g.rows.tolist() == held.reshape(lin.shape[0], -1).any(axis=1).tolist()
    assert g.pos.dtype == g.src.dtype == np.int32


def test_a_gather_restricted_to_some_units_is_its_rows_taken():
    """restrict (positions renumbered on the units kept) against the dense layout's rows:
    laying a tensor out with the restricted gather gives the full layout's rows of those
    units, on a stream whose units hold unevenly (the last cluster's slices padding)."""
    from tcplan.executor.engines import compute_gather, lay_out, restrict
    axes = {"A": 6, "B": 40, "C": 3}
    t = Tensor("s", "stream", "i8", {d: parse(m, axes) for d, m in {
        "chip": "m![1]", "cluster": "m![A # 8 / 4]", "slice": "m![A # 8 % 4, C]",
        "time": "m![B # 48 / 8]", "packet": "m![B # 48 % 8]"}.items()})
    T = np.arange(6 * 40 * 3, dtype=np.int32).reshape(6, 40, 3) % 127
    g = compute_gather(t, axes)
    full = lay_out(t, T.astype(np.int8), axes, g)
    for units in (np.flatnonzero(g.rows), np.array([0, 5, 7]), np.arange(g.shape[0])):
        part = restrict(g, units)
        assert part.shape == (units.size, *g.shape[1:])
        assert np.array_equal(lay_out(t, T.astype(np.int8), axes, part), full[units])
        assert part.rows.tolist() == g.rows[units].tolist()
