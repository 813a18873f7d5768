"""Real kernels (issue 24, items 4 and 5): the Qwen3 decode kernels' data movement in
problems/kernels/qwen3/, and what those kernels do that tcplan does not express, refused
with a located error that says so (planner/kinds UNMODELLED; docs/kernels.md)."""

from __future__ import annotations

import numpy as np
import pytest

import tcplan
from tcplan.model.rules import TcplanError
from tcplan.planner.kinds import UNMODELLED


def test_nothing_is_refused_as_unmodelled_any_more():
    """Every engine of the kernels is an op or a problem kind now (``contraction``, the
    last, planned whole from its einsum: tests/test_contraction_planning.py)."""
    assert UNMODELLED == {}


GRAPH = """kind: graph
dtype: bf16
axes: {A: 64, B: 16}
tensors:
  x: {tier: dm, slice: 'm![A]', element: 'm![B]', given: true}
  y: {tier: dm, slice: 'm![A]', element: 'm![B]', address: 64}
ops:
  - {name: s, kind: contraction, source: x, destination: y}
"""


def test_a_contraction_op_missing_its_trf_says_so_at_its_line():
    """A contraction is a graph op (docs/contractions.md 'In a graph'): it names its
    source, its TRF operand and its destination."""
    with pytest.raises(TcplanError) as e:
        tcplan.loads(GRAPH, "g.yaml")
    msg = e.value.to_json()["message"]
    assert msg.startswith("g.yaml:8:") and "a contraction op names its trf tensor" in msg


def test_a_trf_tensor_is_filled_by_the_collect_engine_not_a_dma():
    """TRF tensors are graph tensors (a to_trf op writes one: tests/test_engines.py); a DMA
    into one is refused as an input mistake, naming the tiers."""
    text = GRAPH.replace("y: {tier: dm, slice: 'm![A]', element: 'm![B]', address: 64}",
                         "y: {tier: trf, slice: 'm![A]', lane: 'm![1]', element: 'm![B]'}")
    text = text.replace("kind: contraction, source: x, destination: y", "kind: dma, source: x, "
                        "destination: y, stream: {cluster: free, slice: free, time: free, "
                        "packet: free}")
    with pytest.raises(TcplanError) as e:
        tcplan.solve(tcplan.loads(text, "g.yaml"))
    assert e.value.kind == "input" and "trf" in e.value.to_json()["message"]


SCATTER = """format: 1
kind: scatter
dtype: bf16
axes: {T: 512, N: 8, D: 128}
source: {tier: dm, cluster: 'm![1 # 2]', slice: 'm![N, 1 # 32]', element: 'm![D]'}
index: {tier: hbm, dtype: i32, element: 'm![1]', address: 0}
destination: {tier: hbm, element: 'm![T, N, D]', address: 1048576}
"""


def test_a_scatter_whose_row_spans_slices():
    """The KV cache append of the projection and RoPE kernels (dma_scatter): one row
    m![N, D] of 8 heads, one head per slice, into the cache at the row the index names.  The
    row is walked over 8 slices (its DM side's loop nest, rows outer, a row's elements inner);
    before, the executor read it as 8 rows and crashed."""
    import ml_dtypes
    import numpy as np
    p = tcplan.loads(SCATTER)
    r = tcplan.verify(p)
    assert r.verified and r.checked == 8 * 128
    src = (np.arange(8 * 128).reshape(8, 128) % 251 + 1).astype(ml_dtypes.bfloat16)
    out = tcplan.run(p, inputs={"source": src, "index": np.array(5 * 2048, np.int32)})
    table = out.arrays["destination"]
    assert np.array_equal(table[5].view(np.uint16), src.view(np.uint16))
    unwritten = 0x5A5A  # (executor/run.py UNWRITTEN in both bytes: no other row is written)
    assert (table[4].view(np.uint16) == unwritten).all()
    assert (table[6].view(np.uint16) == unwritten).all()


# ---- the Qwen3 decode kernels (problems/kernels/qwen3; docs/kernels.md) -------------------
from pathlib import Path  # noqa: E402

KERNELS = Path(__file__).resolve().parents[1] / "problems/kernels/qwen3"
AS_TYPED = sorted(f for f in KERNELS.glob("*.yaml") if not f.stem.endswith("_free"))
FREE = sorted(KERNELS.glob("*_free.yaml"))
UNMODELLED_OPS = ("scatter", "gather", "redistribute")  # (their cycles count 0)


def _at_bound(record: dict) -> None:
    for op in record["plan"]["ops"]:
        if op["kind"] in UNMODELLED_OPS:
            assert op["cycles"] is None, op
        else:
            assert op["cycles"] == op["lower_bound"], op


def test_every_kernel_function_has_its_files():
    """One graph per kernel function with data movement of its own (proj_k only calls
    proj_p), each beside its free variant."""
    stems = {f.stem for f in AS_TYPED}
    assert stems >= {
        "attention_qk_scaled", "attention_row_max", "attention_masked_exp",
        "attention_row_sum", "attention_weighted_sum", "attention_forward_first",
        "attention_forward", "attention_norm", "attention_ng_to_vrf", "projection_proj_q",
        "projection_proj_p", "projection_proj_v", "projection_proj_o", "mlp_forward",
        "rmsnorm_forward", "rmsnorm_forward_q", "rmsnorm_forward_k", "rope_apply_rope",
        "residual_forward", "lm_head_forward"}
    assert {f.stem[: -len("_free")] for f in FREE} == stems


@pytest.mark.parametrize("path", AS_TYPED, ids=lambda p: p.stem)
def test_each_kernel_function_as_typed(path):
    """Every move of the kernel, each layout as the kernel types it: the graph plans every
    op at its lower bound and verifies end to end (proj_q and proj_p too: their Fetch of a
    64-byte packet takes two reads, docs/decisions.md item 96)."""
    p = tcplan.load(path)
    r = tcplan.solve(p)
    assert r.status == p.expect["status"] == "optimal", r.text()
    assert r.verified is True
    _at_bound(r.to_json())


def test_proj_q_fetches_its_result_in_two_reads():
    """proj_q's fetch::<m![1], m![Q % 32]>() of bf16: one 64-byte packet per slice, read 32
    bytes at a time: 2 cycles; its other moves cost 12,876 as before its compute was typed."""
    r = tcplan.solve(KERNELS / "projection_proj_q.yaml", verify="none").to_json()
    ops = {o["op"]: o for o in r["plan"]["ops"]}
    assert ops["fetch_result"]["cycles"] == 2
    moves = ("load_weight", "fetch_weight", "fetch_input", "commit_result", "fetch_result",
             "commit_gathered")
    assert sum(ops[m]["cycles"] for m in moves) == 12_876 + 2


def test_proj_q_compute_costs_by_hand():
    """Each compute op of proj_q at the figure the guide's rates give: a flit a cycle per
    slice (collect 32 x 64 = 2,048 weight flits, 64 input flits; to_trf 2,048); the
    contraction 64 flits in, 32 x 4 = 128 packets out (H / 32 by the Q % 4 broadcast) + the
    5-cycle tree = 133 at MAC utilization 1; cast 4 flits; commit_trim 8 and 16 flits; the
    switch a ring of 32 x 1 x 2 flits = 64."""
    r = tcplan.solve(KERNELS / "projection_proj_q.yaml", verify="none").to_json()
    ops = {o["op"]: o for o in r["plan"]["ops"]}
    want = {"collect_weight": 2048, "store_weight": 2048, "collect_input": 64,
            "contract": 133, "cast": 4, "trim_result": 8, "gather": 64,
            "collect_gathered": 16, "trim_gathered": 16}
    assert {k: ops[k]["cycles"] for k in want} == want
    assert ops["contract"]["mac_utilization"] == 1.0


@pytest.mark.parametrize("name, rows", [("projection_proj_q", 2048),
                                         ("projection_proj_p", 1024)])
def test_the_projections_compute_x_times_w(name, rows):
    """The user's x and W through the whole kernel (proj_q: the query projection; proj_p:
    the K / V one): the gathered result is bf16(x @ W^T), against numpy in float64 (within
    one bf16 rounding and the f32 summation bound, docs/engines.md)."""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(5)
    x = rng.standard_normal(1024).astype(np.float32).astype(bf16)
    w = rng.standard_normal((rows, 1024)).astype(np.float32).astype(bf16)
    out = tcplan.run(KERNELS / f"{name}.yaml",
                     {"input": np.broadcast_to(x, (rows, 1024)), "weight": w})
    g = out.arrays["gathered"]  # (over the axes it carries: the rows)
    assert g.shape == (rows,)
    _close_to_matvec(g, w, x)


def test_lm_head_compute_costs_by_hand():
    """The lm_head's iteration: 64 input flits in, the contraction's 32 x 2 = 64 packets
    (H / 32 by the Wp / 8 % 2 broadcast) + the 5-cycle tree = 69 at full MAC utilization;
    the weight tile's 1,024 flits collected and stored; the gather a ring of 8 x 19 flits."""
    r = tcplan.solve(KERNELS / "lm_head_forward.yaml", verify="none").to_json()
    ops = {o["op"]: o for o in r["plan"]["ops"]}
    want = {"collect_weight": 1024, "store_weight": 1024, "collect_input": 64,
            "contract": 69, "cast": 2, "trim_tile": 2, "gather": 8 * 19}
    assert {k: ops[k]["cycles"] for k in want} == want
    assert ops["contract"]["mac_utilization"] == 1.0


def test_proj_o_computes_attn_times_wo_on_every_slice_group():
    """proj_o: the output projection of the attention (Q = 2,048) by Wo (H = 1,024 x Q),
    its 1,024 outputs copied to all 64 slice groups (the Broadcast1 to SliceP4): each copy
    is attn @ Wo^T, against numpy (the graph's axes are Q, H, Dummy64: the weight argument
    HBM m![H, Q] is given over (Q, H), its transpose)."""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(9)
    a = rng.standard_normal(2048).astype(np.float32).astype(bf16)
    w = rng.standard_normal((1024, 2048)).astype(np.float32).astype(bf16)
    out = tcplan.run(KERNELS / "projection_proj_o.yaml",
                     {"input": np.broadcast_to(a[:, None], (2048, 1024)), "weight": w.T})
    o = out.arrays["out"]
    assert o.shape == (1024, 64) and (o == o[:, :1]).all()
    _close_to_matvec(o[:, 0], w, a)


def _close_to_matvec(g: np.ndarray, w: np.ndarray, x: np.ndarray) -> None:
    """``g`` is bf16(w @ x): within one bf16 rounding and the f32 summation bound."""
    got = g.astype(np.float64)
    exact = w.astype(np.float64) @ x.astype(np.float64)
    n = x.size * 2.0 ** -24
    bound = n / (1 - n) * (np.abs(w.astype(np.float64)) @ np.abs(x.astype(np.float64)))
    assert (np.abs(got - exact) <= 2.0 ** -8 * np.abs(exact) + bound * (1 + 2.0 ** -8)).all()
    assert not np.array_equal(got, np.zeros_like(got))


def test_the_query_broadcast_in_qk_scaled():
    """The issue's reproducer inside its kernel: q into 64 slice groups, at its bound."""
    r = tcplan.solve(KERNELS / "attention_qk_scaled.yaml")
    load_q = next(o for o in r.to_json()["plan"]["ops"] if o["op"] == "load_q")
    assert load_q["cycles"] == load_q["lower_bound"] == 842 and r.verified is True


def test_qk_scaled_computes_the_scaled_scores_bit_for_bit():
    """qk_scaled whole: q's scores against the key block (the contraction), divided by
    SQRT_HEAD_DIM in the vector chain, cast to bf16 and gathered onto slice 0.  With small
    integers every f32 sum is exact, so the logits equal numpy's bf16(f32(q . k) / f32(c))
    bit for bit (numpy's f32 division and ml_dtypes' round to nearest even, not tcplan's)."""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(3)
    q = rng.integers(-4, 5, (8, 2, 128)).astype(np.float32)  # (N, G, D)
    k = rng.integers(-4, 5, (512, 8, 128)).astype(np.float32)  # (T, N, D)
    out = tcplan.run(KERNELS / "attention_qk_scaled.yaml",
                     {"q": q.astype(bf16), "k": k.transpose(1, 2, 0).astype(bf16)})
    logits = out.arrays["logits"]  # over (N, G, T)
    scores = np.einsum("ngd,tnd->ngt", q.astype(np.float64), k.astype(np.float64))
    want = (scores.astype(np.float32) / np.float32(11.313708)).astype(bf16)
    assert logits.shape == (8, 2, 512)
    assert np.array_equal(logits.view(np.uint16), want.view(np.uint16))
    assert np.abs(scores).max() > 100  # (not a trivial case: the sums are large)


def test_qk_scaled_compute_costs_by_hand():
    """qk_scaled's compute at the guide's rates: k's 8 x 8 x 8 = 512 flits collected and
    stored; q's 2 x 8 x 8 = 128 flits collected; the contraction's Stream Adapter takes the
    128 flits (packed two to a 64-byte packet: 64 packets, one for each of N x G x D / 32)
    + the 5-cycle tree: 133, every multiplier busy; the chain's 16 f32 flits narrowed to 32
    four-way ones, + 1 ALU (FpDiv): 33; the cast 16 flits; the gather a ring of 256 slices x
    16 flits = 4,096 (Broadcast1)."""
    r = tcplan.solve(KERNELS / "attention_qk_scaled.yaml", verify="none").to_json()
    ops = {o["op"]: o for o in r["plan"]["ops"]}
    want = {"collect_k": 512, "store_k": 512, "collect_q": 128, "contract": 133,
            "scale": 33, "cast": 16, "trim_qk": 16, "gather": 4096}
    assert {k: ops[k]["cycles"] for k in want} == want
    assert ops["contract"]["mac_utilization"] == 1.0


def _tree_then_in_order(x: np.ndarray) -> np.ndarray:
    """f32 sums over the last axis as the Vector Engine folds T (T % 4 in a flit: the tree
    ((a + b) + (c + d)); T / 4 in Time: left to right), written apart from tcplan."""
    f = x.astype(np.float32).reshape(x.shape[:-1] + (-1, 4))
    flits = (f[..., 0] + f[..., 1]) + (f[..., 2] + f[..., 3])  # (each sum rounds to f32)
    acc = flits[..., 0]
    for k in range(1, flits.shape[-1]):
        acc = (acc + flits[..., k]).astype(np.float32)
    return acc


def test_row_sum_computes_the_softmax_denominator_bit_for_bit():
    """row_sum whole: sum over T of the masked exponentials, + EPS, as the chain folds them
    (a tree within each four-way flit, then over Time), bit for bit against numpy; and within
    the f32 summation bound of the float64 sum."""
    rng = np.random.default_rng(4)
    e = np.exp(rng.standard_normal((8, 2, 512))).astype(np.float32)  # (N, G, T)
    out = tcplan.run(KERNELS / "attention_row_sum.yaml", {"masked_exp": e})
    s = out.arrays["sum"]  # over (N, G)
    want = (_tree_then_in_order(e) + np.float32(6.25e-8)).astype(np.float32)
    assert s.shape == (8, 2) and np.array_equal(s, want)
    exact = e.astype(np.float64).sum(axis=-1)
    n = 512 * 2.0 ** -24
    assert (np.abs(s - exact) <= n / (1 - n) * exact + 1e-7).all()


def test_row_max_computes_the_row_maxima():
    """row_max whole: the bf16 logits widened to f32 by the Fetch Adapter, the maximum over
    T per head (a tree within each flit, then over Time): numpy's max, exactly (a maximum
    does not round)."""
    from tcplan.model.numeric import NP_DTYPES
    rng = np.random.default_rng(8)
    qk = rng.standard_normal((8, 2, 512)).astype(np.float32).astype(NP_DTYPES["bf16"])
    out = tcplan.run(KERNELS / "attention_row_max.yaml", {"qk": qk})
    m = out.arrays["max"]  # over (N, G), f32
    assert m.dtype == np.float32 and np.array_equal(m, qk.astype(np.float32).max(axis=-1))


def test_row_max_compute_costs_by_hand():
    """row_max: the Fetch Adapter widens 512 packets of 16 bf16 to 64 bytes each, 2 cycles a
    packet + its 2-cycle latency = 1,026; the chain's 2,048 four-way flits + 1 ALU = 2,049,
    the path's bottleneck."""
    r = tcplan.solve(KERNELS / "attention_row_max.yaml", verify="none").to_json()
    ops = {o["op"]: o for o in r["plan"]["ops"]}
    assert ops["widen_qk"]["cycles"] == 512 * 2 + 2
    assert ops["row_max"]["cycles"] == 2048 + 1
    path, = [p for p in r["tu_paths"] if "row_max" in p["ops"]]
    assert path["bottleneck"] == "row_max" and path["cycles"] == 2049


def test_masked_exp_computes_the_masked_exponentials():
    """masked_exp whole: exp(qk - max) per head (the Fetch Adapter's widening, SubF with
    the max from the VRF, Exp), within 2 ulp of numpy's (a transcendental: tcplan rounds
    the float64 value once), then the mask from the VRF by min: exactly numpy's minimum
    of the exponentials tcplan wrote."""
    from tcplan.model.numeric import NP_DTYPES
    rng = np.random.default_rng(12)
    qk = (3 * rng.standard_normal((8, 2, 512))).astype(np.float32).astype(NP_DTYPES["bf16"])
    mx = qk.astype(np.float32).max(axis=-1)
    mask = np.where(np.arange(512) < 300, np.inf, 0).astype(np.float32)
    out = tcplan.run(KERNELS / "attention_masked_exp.yaml",
                     {"qk": qk, "max_vrf": mx, "mask_hbm": mask})
    e, m = out.arrays["exp"], out.arrays["masked"]
    want = np.exp((qk.astype(np.float32) - mx[..., None]).astype(np.float64))
    ulp = np.spacing(want.astype(np.float32)).astype(np.float64)
    assert e.dtype == np.float32 and (np.abs(e - want) <= 2 * ulp).all()
    assert e.max() == 1.0 and (e > 0).all()  # (each head's maximum: exp(0))
    assert np.array_equal(m, np.minimum(e, mask))
    assert (m[..., 300:] == 0).all() and (m[..., :300] == e[..., :300]).all()


def test_norm_divides_by_the_running_sum_on_every_slice_group():
    """attention::norm: each slice group's copy of the attention output divided by the
    head's sum (from the VRF: HBM -> DM -> sub Fetch -> to_vrf), cast to bf16: numpy's
    f32 division rounded to bf16 (ml_dtypes, to nearest even), exactly."""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(13)
    x = rng.standard_normal((8, 2, 128, 64)).astype(np.float32).astype(bf16)  # (N, G, D, Dummy64)
    s = rng.uniform(1, 100, (8, 2)).astype(np.float32)
    out = tcplan.run(KERNELS / "attention_norm.yaml", {"input": x, "sum_hbm": s})
    want = (x.astype(np.float32) / s[:, :, None, None]).astype(bf16)
    assert np.array_equal(out.arrays["out"].view(np.uint16), want.view(np.uint16))


def test_ng_to_vrf_stores_the_per_head_values():
    """ng_to_vrf: the [N, G] values in the VRF as the kernel lays them (Element m![N, G]),
    16 f32 in 2 flits: sub Fetch 8 cycles (8 bytes a cycle), collect and store 2 each."""
    r = tcplan.solve(KERNELS / "attention_ng_to_vrf.yaml", verify="none").to_json()
    ops = {o["op"]: o["cycles"] for o in r["plan"]["ops"]}
    assert ops == {"fetch_x": 8, "collect_x": 2, "store_x": 2}
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    out = tcplan.run(KERNELS / "attention_ng_to_vrf.yaml", {"x": x})
    assert np.array_equal(out.arrays["x_vrf"], x)


def test_residual_adds_in_f32_and_rounds_to_bf16():
    """residual::forward on every slice group: bf16(f32(input) + f32(residual)), the sum
    from the VRF (clip Add), against numpy and ml_dtypes, exactly."""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(14)
    x, r = (rng.standard_normal((2, 1024, 64)).astype(np.float32).astype(bf16))
    out = tcplan.run(KERNELS / "residual_forward.yaml", {"input": x, "residual": r})
    want = (x.astype(np.float32) + r.astype(np.float32)).astype(bf16)
    assert np.array_equal(out.arrays["out"].view(np.uint16), want.view(np.uint16))


def _rmsnorm(x: np.ndarray, w: np.ndarray, n: float) -> tuple[np.ndarray, ...]:
    """RMS norm over the second-to-last axis of x (..., n, copies) as the kernel computes
    it, written with numpy: the mean square (squares summed as the chain folds them),
    its root, x * w / rms in f32 and the bf16 result."""
    from tcplan.model.numeric import NP_DTYPES
    xf = x.astype(np.float32)
    sq = np.moveaxis(xf * xf, -2, -1)  # (..., copies, n)
    ms = (_tree_then_in_order(sq) / np.float32(n) + np.float32(6.25e-8)).astype(np.float32)
    rms = np.sqrt(ms)
    y = (xf * w.astype(np.float32)[..., :, None]) / rms[..., None, :]
    return ms, rms, y.astype(NP_DTYPES["bf16"])


@pytest.mark.parametrize("name, shape, wshape", [
    ("rmsnorm_forward", (1024, 64), (1024,)),      # (H, Dummy64): each slice group's copy
    ("rmsnorm_forward_k", (8, 128), (128,)),       # (N, D): per head
])
def test_rmsnorm_against_numpy(name, shape, wshape):
    """rmsnorm whole: the mean square, its root and the scaled result, each as the kernel
    computes it, bit for bit against numpy (IEEE products, division and square root; the
    sum in the chain's order)."""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(15)
    x = rng.standard_normal(shape).astype(np.float32).astype(bf16)
    w = rng.standard_normal(wshape).astype(np.float32).astype(bf16)
    out = tcplan.run(KERNELS / f"{name}.yaml", {"input": x, "rms_weight": w})
    if name == "rmsnorm_forward_k":  # (the head N is the batch: move it last, as copies)
        ms, rms, y = _rmsnorm(x.T, w, 128)
        y = y.T
    else:
        ms, rms, y = _rmsnorm(x, w, 1024)
    assert np.array_equal(out.arrays["ms"], ms) and np.array_equal(out.arrays["rms"], rms)
    assert np.array_equal(out.arrays["out"].view(np.uint16), y.view(np.uint16))


def test_rope_rotates_q_and_k():
    """rope::apply_rope: q * cos + rotate_half(q) * sin (and k's), each product and the sum
    in f32 (IEEE, exact to reproduce), rounded to bf16: against numpy and ml_dtypes, bit for
    bit; the K row lands in the cache where kv_offset says."""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(16)
    def draw(*shape):
        return rng.standard_normal(shape).astype(np.float32).astype(bf16)
    q, rq, k, rk = draw(8, 2, 128), draw(8, 2, 128), draw(8, 128), draw(8, 128)
    cos, sin = draw(128), draw(128)
    out = tcplan.run(KERNELS / "rope_apply_rope.yaml", {
        "q": q, "rotate_half_q": rq, "k": k, "rotate_half_k": rk, "cos_hbm": cos,
        "sin_hbm": sin})
    f = np.float32
    for name, x, r in (("result_q", q, rq), ("result_k", k, rk)):
        want = (x.astype(f) * cos.astype(f) + r.astype(f) * sin.astype(f)).astype(bf16)
        assert np.array_equal(out.arrays[name].view(np.uint16), want.view(np.uint16)), name


def test_mlp_computes_down_of_silu_gate_times_up():
    """mlp::forward whole, stage by stage against numpy (each stage from the one before as
    tcplan computed it, so that roundings do not compound): x spread by the CustomBroadcast
    to every slice of its group; up and gate = bf16(W x) within the f32 summation bound;
    silu = sigmoid(g) * g within 2 ulp; the product bf16(up * silu) exactly; every H / 8 group
    holding all of it after the Broadcast1; down = W_d p within the f32 bound; the output
    bf16(down) on every slice group, exactly."""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(17)
    x = (rng.standard_normal(1024) / 8).astype(np.float32).astype(bf16)
    wu, wg = (rng.standard_normal((2, 3072, 1024)) / 8).astype(np.float32).astype(bf16)
    wd = (rng.standard_normal((1024, 3072)) / 8).astype(np.float32).astype(bf16)
    out = tcplan.run(KERNELS / "mlp_forward.yaml", {
        "x": np.broadcast_to(x, (3072, 1024)), "x_ug": np.broadcast_to(x, (3072, 1024)),
        "up_weight": wu, "gate_weight": wg, "down_weight": wd.T})
    a = out.arrays
    xb = a["x_bcast"]  # (L, H, Dummy4): each group's copy in its 4 slices
    assert (xb[::48].view(np.uint16) == x.view(np.uint16)[None, :, None]).all()
    _close_to_matvec(a["up"], wu, x)
    _close_to_matvec(a["gate"], wg, x)
    g = a["gate"].astype(np.float32)
    want = np.float32(1) / (1 + np.exp(-g.astype(np.float64))) * g
    assert (np.abs(a["silu"] - want) <= 2 * np.spacing(np.abs(want).astype(np.float32))
            + 1e-30).all()
    prod = (a["up"].astype(np.float32) * a["silu"]).astype(bf16)
    assert np.array_equal(a["prod"].view(np.uint16), prod.view(np.uint16))
    pd = a["prod_d"]  # (L, H): every H / 8 group holds all of L
    assert (pd[:, ::8].view(np.uint16) == prod.view(np.uint16)[:, None]).all()
    down = a["down"]
    exact = wd.astype(np.float64) @ prod.astype(np.float64)
    n = 3072 * 2.0 ** -24
    bound = n / (1 - n) * (np.abs(wd.astype(np.float64)) @ np.abs(prod.astype(np.float64)))
    assert down.dtype == np.float32 and (np.abs(down - exact) <= bound + 1e-30).all()
    o = a["out"]  # (H, Dummy64)
    assert (o.view(np.uint16) == down.astype(bf16).view(np.uint16)[:, None]).all()


def test_attention_forward_folds_the_block_into_the_running_softmax():
    """attention::forward's own compute, against numpy: the new max max(block, old);
    alpha = exp(old - new) within 2 ulp; sum = old * alpha + expsum and out = bf16(bf16(old
    * alpha) + result), each from tcplan's alpha, exactly (IEEE products and sums, ml_dtypes'
    rounding to bf16); the new values stored to HBM."""
    from tcplan.model.numeric import NP_DTYPES
    bf16, f = NP_DTYPES["bf16"], np.float32
    rng = np.random.default_rng(18)
    blk, old = rng.standard_normal((2, 8, 2)).astype(f)
    old_sum, expsum = rng.uniform(1, 50, (2, 8, 2)).astype(f)
    old_out, result = rng.standard_normal((2, 8, 2, 128)).astype(f).astype(bf16)
    out = tcplan.run(KERNELS / "attention_forward.yaml", {
        "max": blk, "max_hbm_in": old, "expsum": expsum, "sum_hbm_in": old_sum,
        "out_hbm_in": old_out, "result": result})
    a = out.arrays
    new = np.maximum(blk, old)
    assert np.array_equal(a["max_hbm_out"], new)
    want = np.exp((old - new).astype(np.float64))
    alpha = a["alpha"]
    assert (np.abs(alpha - want) <= 2 * np.spacing(want.astype(f))).all() and (alpha <= 1).all()
    assert np.array_equal(a["sum_hbm_out"], (old_sum * alpha + expsum).astype(f))
    scaled = (old_out.astype(f) * alpha[..., None]).astype(bf16)
    assert np.array_equal(a["scaled_out"].view(np.uint16), scaled.view(np.uint16))
    new_out = (scaled.astype(f) + result.astype(f)).astype(bf16)
    assert np.array_equal(a["out_hbm_out"].view(np.uint16), new_out.view(np.uint16))


def test_weighted_sum_contracts_each_slice_and_reduces_across_slices():
    """attention::weighted_sum whole: the softmax weights rounded to bf16; each slice's
    contraction the partial sum over its 16 keys (on T / 16), rounded to bf16, within one
    bf16 rounding and the f32 bound of numpy's float64; the Inter-Slice Reducer's sum of
    the 32 partial sums of each head (from tcplan's partials) likewise; the result gathered
    on slice 0."""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(19)
    w = rng.random((8, 2, 512)).astype(np.float32)  # (N, G, T): softmax weights
    v = rng.standard_normal((512, 8, 128)).astype(np.float32).astype(bf16)  # (T, N, D)
    out = tcplan.run(KERNELS / "attention_weighted_sum.yaml",
                     {"masked_exp": w, "v": v.transpose(1, 2, 0)})
    a = out.arrays
    wb = w.astype(bf16)
    assert np.array_equal(a["weight_s0"].view(np.uint16), wb.view(np.uint16))
    w64 = wb.astype(np.float64).reshape(8, 2, 32, 16)
    v64 = v.astype(np.float64).transpose(1, 0, 2).reshape(8, 32, 16, 128)  # (N, k, j, D)

    def close(got, exact, absum, n):
        g = n * 2.0 ** -24 / (1 - n * 2.0 ** -24)
        return (np.abs(got - exact) <= 2.0 ** -8 * np.abs(exact) + g * absum * 1.01).all()
    part = a["partial"].astype(np.float64)[..., ::16]  # (N, G, D, k): at T = 16 k
    exact = np.einsum("ngkj,nkjd->ngdk", w64, v64)
    absum = np.einsum("ngkj,nkjd->ngdk", np.abs(w64), np.abs(v64))
    assert close(part, exact, absum, 16)
    res = a["result"].astype(np.float64)  # (N, G, D)
    assert close(res, part.sum(axis=-1), np.abs(part).sum(axis=-1), 32)
    assert np.abs(res).max() > 1


def test_row_sum_compute_costs_by_hand():
    """row_sum's chain: 1,024 f32 flits narrowed to 2,048 four-way ones, + 2 ALUs
    (IntraSliceReduce, ClipAdd) = 2,050 cycles, the path's bottleneck; the transpose of the
    16 sums."""
    r = tcplan.solve(KERNELS / "attention_row_sum.yaml", verify="none").to_json()
    ops = {o["op"]: o for o in r["plan"]["ops"]}
    assert ops["row_sum"]["cycles"] == 2048 + 2
    assert sorted(ops["row_sum"]["alus"]) == ["ClipAdd", "IntraSliceReduce"]
    path, = [p for p in r["tu_paths"] if "row_sum" in p["ops"]]
    assert path["bottleneck"] == "row_sum" and path["cycles"] == 2050


@pytest.mark.slow
@pytest.mark.parametrize("path", FREE, ids=lambda p: p.stem)
def test_each_kernel_function_with_free_layouts(path):
    """The same graph with its DM and HBM layouts free, planned for its makespan on the
    three contexts: it solves and verifies, every op at its bound, its makespan never
    longer than the kernel's own layouts' schedule (they are among its candidates), nor
    its ops' sum."""
    free = tcplan.solve(path)
    typed = tcplan.solve(path.with_name(path.stem[: -len("_free")] + ".yaml"), verify="none")
    assert free.status == typed.status
    if free.status == "optimal":
        assert free.verified is True
        f, t = free.to_json(), typed.to_json()
        if typed.cycles is None:  # only unmodelled ops (a scatter): no figure either way
            assert free.cycles is None
        else:
            assert f["objective"] == "makespan" and free.cycles == f["schedule"]["makespan"]
            assert f["schedule"]["makespan"] <= t["schedule"]["makespan"]
            assert f["sum_cycles"] <= t["sum_cycles"]
        _at_bound(f)


# ---- the contractions planned in their functions (issue 30, item 6) ----------------------
PLANNED = ("projection_proj_q", "projection_proj_p", "projection_proj_o", "mlp_forward")


def _contractions(stem: str) -> tuple[dict, dict, list, list]:
    typed = tcplan.solve(KERNELS / f"{stem}.yaml", verify="none").to_json()
    free = tcplan.solve(KERNELS / f"{stem}_free.yaml", verify="none").to_json()
    kernel = [o for o in typed["plan"]["ops"] if o["kind"] == "contract"]
    mine = [o for o in free["plan"]["ops"] if o["kind"] == "contraction"]
    return typed, free, kernel, mine


@pytest.mark.slow
@pytest.mark.parametrize("stem", PLANNED)
def test_a_free_variant_plans_its_contractions_whole(stem):
    """Each typed `contract` is one `contraction` op in the free variant (no engine op of
    the kernel's contraction is left), planned no slower and at no lower MAC utilization;
    the op's cycles are its TRF fill (the slice's TRF bytes at 8 a cycle: the sub
    context's reads) plus its main path; the makespan never longer than the kernel's."""
    typed, free, kernel, mine = _contractions(stem)
    assert len(mine) == len(kernel) >= 1
    assert not {"contract", "to_trf"} & {o["kind"] for o in free["plan"]["ops"]}
    for k, o, fill in zip(kernel, mine, _fills(stem)):
        assert o["contraction_cycles"] <= k["cycles"]
        assert o["mac_utilization"] >= k["mac_utilization"]
        assert o["trf_fill_cycles"] == fill
        assert o["cycles"] > o["trf_fill_cycles"]
    assert free["schedule"]["makespan"] <= typed["schedule"]["makespan"]


def _fills(stem: str) -> list[int]:
    """The kernel's TRF tensors, in the order its contract ops read them, as fills: a
    slice's bytes (its Lane's and Element's sizes, bf16) read 8 a cycle (the sub
    context's reads, book: moving-tensors/fetch-engine.md)."""
    from tcplan.model.mapping import parse
    p = tcplan.load(KERNELS / f"{stem}.yaml")
    g = p.spec.graph
    out = []
    for op in g.ops:
        if op.kind == "contract":
            t = g.tensors[op.data["trf"]].spec
            out.append(parse(t["lane"], p.axes).size * parse(t["element"], p.axes).size
                       * 2 // 8)
    return out


@pytest.mark.slow
def test_proj_o_planned_uses_every_multiplier_and_gains_the_difference():
    """The kernel's proj_o contraction keeps half the multipliers idle (Lane H / 4 % 4);
    the planned one fills the eight lanes, and the makespan falls by exactly the two
    contractions' difference (the load, the fill and the share around them unchanged)."""
    typed, free, (k,), (o,) = _contractions("projection_proj_o")
    assert (k["cycles"], k["mac_utilization"]) == (261, 0.5)
    assert (o["contraction_cycles"], o["mac_utilization"]) == (133, 1.0)
    assert o["mapping"]["lane"] == "m![H % 8]"
    assert typed["schedule"]["makespan"] - free["schedule"]["makespan"] == 261 - 133


def test_qk_scaleds_contraction_is_the_best_under_its_layouts():
    """With attention::qk_scaled's DM layouts given, the search's best mapping is the
    kernel's own (docs/kernels.md: why qk_scaled keeps its typed contraction), its
    contraction the typed contract op's cycles."""
    r = tcplan.solve(KERNELS.parents[1] / "contractions/attention_qk_kernel_layouts.yaml",
                     verify="none").to_json()
    m = r["mapping"]
    assert (m["time"], m["packet"], m["lane"], m["element"]) == (
        "m![N, G, D / 16]", "m![D % 16]", "m![T % 8]", "m![N, D]")
    typed = tcplan.solve(KERNELS / "attention_qk_scaled.yaml", verify="none").to_json()
    contract, = [o for o in typed["plan"]["ops"] if o["kind"] == "contract"]
    inner, = [o for o in r["plan"]["ops"] if o["kind"] == "contract"]
    assert inner["cycles"] == contract["cycles"] == 133
