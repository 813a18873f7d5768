"""Every dtype round-trips through `.npy` files (issue 17, item 1): `tcplan run` writes what
numpy loads back as the problem's dtype (bf16 and fp8 named by their ml_dtypes names, not
numpy's void `V2`), and takes it back; numpy's own `V2` files and raw unsigned bit patterns
of bf16 and fp8 are taken as those bits (docs/decisions.md item 81)."""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import pytest

from tcplan.executor.run import NP_DTYPES
from tcplan.model import hardware as hw
from tcplan.planner.cli import main

PROBLEM = """kind: dma
dtype: {dtype}
axes: {{A: 64, B: 32}}
source: {{tier: hbm, element: 'm![A, B]'}}
destination: {{tier: dm, slice: 'm![A]', element: 'm![B]'}}
stream: {{time: 'm![A]', packet: 'm![B]'}}
"""


def run(tmp_path, dtype: str, out: str, *inputs: str) -> tuple[int, str]:
    f = tmp_path / "p.yaml"
    f.write_text(PROBLEM.format(dtype=dtype))
    so, se = io.StringIO(), io.StringIO()
    args = ["run", str(f), "--out", str(tmp_path / out)]
    for i in inputs:
        args += ["--input", f"source={i}"]
    return main(args, stdout=so, stderr=se), so.getvalue() + se.getvalue()


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


@pytest.mark.parametrize("dtype", sorted(hw.DTYPE_BYTES))
def test_every_dtype_round_trips(tmp_path, dtype):
    """Written, loaded by numpy as the right dtype, given back, the same bits."""
    code, said = run(tmp_path, dtype, "a")
    assert code == 0, said
    first = np.load(tmp_path / "a/destination.npy")
    assert first.dtype == NP_DTYPES[dtype] and first.shape == (64, 32)
    header = (tmp_path / "a/destination.npy").read_bytes()[:128]
    assert b"V2" not in header and b"V1" not in header
    code, said = run(tmp_path, dtype, "b", str(tmp_path / "a/destination.npy"))
    assert code == 0, said
    again = np.load(tmp_path / "b/destination.npy")
    assert again.dtype == first.dtype and np.array_equal(bits(again), bits(first))


@pytest.mark.parametrize("dtype", ["bf16", "f8e4m3", "f8e5m2"])
def test_numpys_void_files_and_raw_bit_patterns_are_taken(tmp_path, dtype):
    dt = NP_DTYPES[dtype]
    want = np.random.default_rng(1).integers(0, 2 ** (8 * dt.itemsize), (64, 32)).astype(
        np.dtype(f"u{dt.itemsize}"))
    # numpy writes bf16 and float8_e4m3fn as V2 / V1, and float8_e5m2 as '<f1' (which
    # numpy itself cannot load back)
    np.save(tmp_path / "void.npy", want.view(dt))
    np.save(tmp_path / "raw.npy", want)
    for name in ("void", "raw"):
        code, said = run(tmp_path, dtype, name, str(tmp_path / f"{name}.npy"))
        assert code == 0, said
        got = np.load(tmp_path / f"{name}/destination.npy")
        assert got.dtype == dt and np.array_equal(bits(got), want)


def test_a_wrong_dtype_names_the_one_to_save(tmp_path):
    np.save(tmp_path / "f32.npy", np.zeros((64, 32), np.float32))
    code, said = run(tmp_path, "bf16", "x", str(tmp_path / "f32.npy"))
    assert code == 2 and "expected dtype bfloat16" in said and "ml_dtypes" in said, said
    np.save(tmp_path / "i16.npy", np.zeros((64, 32), np.int16))
    code, said = run(tmp_path, "bf16", "y", str(tmp_path / "i16.npy"))
    assert code == 2 and "uint16" in said, said  # signed ints are numbers, not bits
    assert ml_dtypes.bfloat16 is not None


def test_run_json_lists_every_file_with_its_dtype_and_shape(tmp_path):
    import json
    f = tmp_path / "p.yaml"
    f.write_text(PROBLEM.format(dtype="bf16"))
    so = io.StringIO()
    assert main(["run", str(f), "--out", str(tmp_path / "o"), "--json"], stdout=so) == 0
    r = json.loads(so.getvalue())
    assert [w["tensor"] for w in r["written"]] == ["source", "destination"]
    for w in r["written"]:
        assert w["dtype"] == "bfloat16" and w["shape"] == [64, 32]
        assert np.load(w["path"]).dtype == NP_DTYPES["bf16"]


def test_a_bf16_input_of_the_wrong_shape_names_its_dtype(tmp_path):
    """numpy's own file of a bf16 array (its header says ``|V2``) in the wrong shape: the
    error names the shape and the dtype as a user reads them, not numpy's ``|V2``
    (issue 31), and exits 2."""
    f = tmp_path / "v2.npy"
    np.save(f, np.zeros((3, 5), ml_dtypes.bfloat16).view("V2"))
    assert b"V2" in f.read_bytes()[:128]
    code, said = run(tmp_path, "bf16", "o", str(f))
    assert code == 2, said
    assert "got shape (3, 5), dtype 2-byte raw values (numpy's void, as numpy.save writes " \
        "bfloat16)" in said and "|V2" not in said
