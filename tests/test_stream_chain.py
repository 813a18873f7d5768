"""The Vector Engine fed by a stream (issue 29, item 2: 'Vector Engine between them'): a
graph's ``chain`` op reads the contraction's (or a collect's) stream and hands its own to the
next engine, its VRF operands register-file tensors a ``to_vrf`` wrote.  Checked against
numpy on integer data (every f32 sum exact, so bit for bit), by the chain's own reference
formula (a wrong one fails), and refused by name or at its line where it cannot run."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import tcplan
from tcplan.model.rules import TcplanError

ROOT = pathlib.Path(__file__).resolve().parents[1]
BIAS_RELU = ROOT / "problems" / "graphs" / "tu_path_matmul_bias_relu.yaml"


def _ints(rng, shape, lo=-4, hi=5) -> np.ndarray:
    return rng.integers(lo, hi, shape).astype(np.float32)


def test_matmul_bias_relu_equals_numpy_bit_for_bit():
    """y = max(x w^T + b, 0) per slice: small integers make every f32 sum exact, so the
    result equals numpy's float32 formula bit for bit (and half of it is clipped)."""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(7)
    x, w = _ints(rng, (4, 32, 32)), _ints(rng, (4, 8, 32))  # (S, A, B), (S, C, B)
    b = rng.integers(-40, 41, (4, 8)).astype(np.float32) / 4  # (S, C): quarters, exact
    out = tcplan.run(BIAS_RELU, {"x": x.astype(bf16), "w": w.transpose(0, 2, 1).astype(bf16), "b": b})
    want = np.maximum(np.einsum("sab,scb->sac", x, w) + b[:, None, :], np.float32(0))
    y = out.arrays["y"]
    assert y.shape == (4, 32, 8) and y.dtype == np.float32
    assert np.array_equal(y, want)
    assert 0.2 < (y == 0).mean() < 0.8  # (the clip does work: neither none nor all)


def test_the_chain_is_timed_in_the_path():
    """The chain's cycles: the contraction's 32 f32 flits narrowed to 64 four-way flits, +
    2 ALUs (FpFma for AddF, ClipMax): 66; the path runs at its slowest op, the contraction."""
    r = tcplan.solve(BIAS_RELU, verify="none").to_json()
    ops = {o["op"]: o for o in r["plan"]["ops"]}
    assert ops["bias_relu"]["cycles"] == 64 + 2
    assert sorted(ops["bias_relu"]["alus"]) == ["ClipMax", "FpFma"]
    main = next(p for p in r["tu_paths"] if "bias_relu" in p["ops"])
    assert main["ops"] == ["fetch_x", "collect_x", "matmul", "bias_relu", "commit_y"]
    assert main["cycles"] == ops["matmul"]["cycles"]


def _variant(old: str, new: str) -> str:
    text = BIAS_RELU.read_text()
    assert old in text
    return text.replace(old, new)


def test_a_chain_that_does_not_compute_its_reference_is_not_verified():
    r = tcplan.solve(tcplan.loads(_variant("max(x + bias, 0.0)", "max(x - bias, 0.0)"),
                                  "p.yaml"))
    assert r.verified is False and "[verify-mismatch]" in r.text()


def test_a_reduce_chain_drops_its_axis_in_the_graph():
    """A chain that takes the maximum over A (intra_slice_reduce) leaves a stream over C
    alone, committed as one row per slice: max over A of x w^T, against numpy."""
    text = _variant("""      - fp_binary: {op: AddF, operand: {vrf: bias}}
      - widen_concat: {time: 'm![A]', packet: 'm![C]'}
      - clip: {op: Max, operand: 0.0}
      - final
    reference: 'max(x + bias, 0.0)'""", """      - reduce: {op: Max, axis: A, time: 'm![C / 4]', packet: 'm![C % 4]'}
      - widen_concat: {time: 'm![1]', packet: 'm![C]'}
      - final
    reference: 'rmax(x, A)'""").replace("    vrf: {bias: bv}\n", "")
    text = text.replace("zs: {tier: stream, slice: 'm![S # 256]', time: 'm![A]'",
                        "zs: {tier: stream, slice: 'm![S # 256]', time: 'm![1]'")
    text = text.replace("element: 'm![A, C]', dtype: f32, address: 8192",
                        "element: 'm![C]', dtype: f32, address: 8192")
    rng = np.random.default_rng(2)
    x, w = _ints(rng, (4, 32, 32)), _ints(rng, (4, 8, 32))
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    b = np.zeros((4, 8), np.float32)
    out = tcplan.run(tcplan.loads(text, "p.yaml"),
                     {"x": x.astype(bf16), "w": w.transpose(0, 2, 1).astype(bf16), "b": b})
    want = np.einsum("sab,scb->sac", x, w).max(axis=1)
    assert np.array_equal(out.arrays["y"], want)


def test_a_destination_over_the_wrong_axes_is_refused():
    """The chain keeps A; a destination declared over C alone is not what it makes."""
    text = _variant("zs: {tier: stream, slice: 'm![S # 256]', time: 'm![A]'",
                    "zs: {tier: stream, slice: 'm![S # 256]', time: 'm![1]'")
    text = text.replace("  - {name: commit_y, kind: commit, stream: zs, destination: y}\n",
                        "").replace("  y: {tier: dm, slice: 'm![S # 256]', element: 'm![A, C]',"
                                    " dtype: f32, address: 8192}\n", "")  # (the chain alone)
    r = tcplan.solve(tcplan.loads(text, "p.yaml"))
    assert r.status == "infeasible" and r.exit_code == 1
    assert "op bias_relu" in r.text() and "[ve-shape]" in r.text(), r.text()


@pytest.mark.parametrize("old, new, where", [
    # the chain on a bf16 stream: the Vector Engine takes i32 or f32
    ("source: ys\n    vrf", "source: xc\n    vrf", "dtype"),
    # a VRF operand that is no tensor of the graph
    ("vrf: {bias: bv}", "vrf: {bias: bvv}", "vrf.bias"),
    # the destination on other slices
    ("zs: {tier: stream, slice: 'm![S # 256]'", "zs: {tier: stream, slice: 'm![S # 128]'",
     "slice"),
])
def test_a_chain_op_that_cannot_be_read_is_refused_at_its_line(old, new, where):
    with pytest.raises(TcplanError) as e:
        tcplan.solve(tcplan.loads(_variant(old, new), "p.yaml"))
    err = e.value
    assert err.kind == "input" and where in err.message, err.message


def test_the_vrf_operand_is_the_graphs_tensor():
    """The chain reads the bias the to_vrf stored: given another bias, it computes with it
    (the operand is not seeded apart)."""
    from tcplan.model.numeric import NP_DTYPES
    bf16 = NP_DTYPES["bf16"]
    rng = np.random.default_rng(11)
    x, w = _ints(rng, (4, 32, 32)), _ints(rng, (4, 8, 32))
    ys = [tcplan.run(BIAS_RELU, {"x": x.astype(bf16), "w": w.transpose(0, 2, 1).astype(bf16),
                                 "b": np.full((4, 8), v, np.float32)}).arrays["y"]
          for v in (0.0, 1000.0)]
    assert np.array_equal(ys[1], np.maximum(np.einsum("sab,scb->sac", x, w) + 1000, 0))
    assert not np.array_equal(ys[0], ys[1])
