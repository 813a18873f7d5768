"""Other DMA forms: scatter and gather, PCIe, the default stream, the seed's small examples."""

import pathlib

import numpy as np
import pytest

from tcplan.model import dma
from tcplan.model.rules import TcplanError
from tcplan.planner.lowering import lower_problem
from tcplan.planner.spec import load_problem, load_problem_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "problems/seed"
RNG = np.random.default_rng(1)


def test_gather_scaled_reads_byte_offsets():
    plan = lower_problem(load_problem(SEED / "gather_scaled.yaml"))
    assert (plan.row_elements, plan.row_bytes, plan.rows) == (128, 256, 512)  # bf16 rows
    table = RNG.standard_normal((512, 128)).astype(np.float32)
    rows = RNG.integers(0, 512, size=512)
    out = plan.apply(table, rows * 256)  # row r at r * 128 * 2 bytes
    assert np.array_equal(out, table[rows])
    with pytest.raises(TcplanError) as ei:
        plan.apply(table, rows * 256 + 2)  # not a whole row
    assert ei.value.code == "indexed-offset"
    with pytest.raises(TcplanError) as ei:
        plan.apply(table, np.full(512, 512 * 256))  # past the table
    assert ei.value.code == "indexed-offset"


def test_gather_unscaled_reads_row_positions():
    plan = lower_problem(load_problem(SEED / "gather_unscaled.yaml"))
    assert plan.rows == 2 * 512  # one row per (CL, G)
    table = RNG.standard_normal((512, 128)).astype(np.float32)
    rows = RNG.integers(0, 512, size=1024)
    assert np.array_equal(plan.apply(table, rows), table[rows])
    # the DM side walks clusters, slices, G % 2, then the 256-byte row
    assert plan.dm_entries == [(2, 2**30 // 2), (256, 2**22 // 2), (2, 128), (128, 1)]


def test_scatter_writes_rows():
    plan = lower_problem(load_problem(SEED / "scatter.yaml"))
    assert (plan.kind, plan.rows, plan.row_bytes) == ("scatter", 512, 256)
    table = np.zeros((612, 128), np.float32)
    data = RNG.standard_normal((512, 128)).astype(np.float32)
    rows = RNG.permutation(612)[:512]
    new = plan.apply(table, rows * 256, data)
    assert np.array_equal(new[rows], data)
    untouched = np.setdiff1d(np.arange(612), rows)
    assert not new[untouched].any()


def test_gather_shape_rules():
    text = (SEED / "gather_scaled.yaml").read_text()
    p = load_problem_text(text.replace("dtype: i32, chip", "dtype: bf16, chip"))
    with pytest.raises(TcplanError) as ei:
        lower_problem(p)
    assert ei.value.code == "indexed-shape" and "i32" in ei.value.message
    p = load_problem_text(text.replace("element: 'm![G % 2, D]'", "element: 'm![D, G % 2]'"))
    with pytest.raises(TcplanError) as ei:
        lower_problem(p)
    assert ei.value.code == "indexed-shape"


def test_pcie_upload_and_download():
    up = lower_problem(load_problem(SEED / "pcie_upload.yaml"))
    assert up.pcie and up.read.entries == [(512, 1)] and up.packet == 512
    # chip t's HBM receives host row t: host offset t * 512, HBM address 0
    assert sorted((e.chip, e.read_base, e.write_base) for e in up.engines) == [
        (t, t * 512, 0) for t in range(8)]
    down = lower_problem(load_problem(SEED / "pcie_download.yaml"))
    assert sorted((e.chip, e.read_base, e.write_base) for e in down.engines) == [
        (t, 0, t * 512) for t in range(8)]


def test_tensor_dma_and_pcie_tiers():
    p = load_problem(SEED / "pcie_upload.yaml")
    with pytest.raises(TcplanError) as ei:
        dma.lower(p.tensors["source"], p.tensors["destination"], p.tensors["stream"], 8)
    assert ei.value.code == "dma-tiers"  # host <-> HBM is the PCIe DMA's job
    d = load_problem(SEED / "dma_example_2.yaml")
    with pytest.raises(TcplanError) as ei:
        dma.lower(d.tensors["source"], d.tensors["destination"], d.tensors["stream"], 1,
                  pcie=True)
    assert ei.value.code == "dma-tiers"


def test_two_step_transpose():
    one = lower_problem(load_problem(SEED / "transpose_step1.yaml"))
    two = lower_problem(load_problem(SEED / "transpose_step2.yaml"))
    # f32 [A, B, C] -> [A, C, B]: stream A, C (time), B (packet); B is not contiguous in the
    # source (stride C = 32 elements), so the packet is one element
    assert one.read.entries == [(8, 512), (32, 1), (16, 32)]
    assert one.write.entries == [(8, 512), (32, 16), (16, 1)]
    assert one.packet == 1
    # [A, C, B] -> [C, A, B]: B is contiguous on both sides: 16-element (64 B) packets
    assert two.read.entries == [(32, 16), (8, 512), (16, 1)]
    assert two.write.entries == [(32, 128), (8, 16), (16, 1)]
    assert two.packet_bytes == 64


def test_hbm_to_dm_with_cluster_padding():
    plan = lower_problem(load_problem(SEED / "hbm_to_dm_cluster_padding.yaml"))
    # 2,048 elements: 256 slices (A / 8) of 8 elements (A % 8); cluster 1 is padding
    assert plan.read.entries == [(256, 8), (8, 1)]
    assert plan.write.entries_bytes == [(256, 2**22), (8, 1)]
    assert plan.packet_bytes == 8


def _gather(**repl):
    text = (SEED / "gather_scaled.yaml").read_text()
    for old, new in repl.items():
        assert old in text
        text = text.replace(old, new)
    return load_problem_text(text)


@pytest.mark.parametrize("old,new,rule", [
    ("destination: {tier: dm, chip", "destination: {tier: dm, dtype: i8, chip", "indexed-shape"),
    ("axes: {K: 512, D: 128, G: 512}", "axes: {K: 512, D: 4096, G: 512}", "dma-packet-max"),
    ("axes: {K: 512, D: 128, G: 512}", "axes: {K: 512, D: 3, G: 512}", "dma-hbm-dm-align"),
    ("element: 'm![G % 2, D]'", "element: 'm![D]'", "indexed-shape"),  # 256 rows, 512 indices
])
def test_gather_dma_rules(old, new, rule):
    with pytest.raises(TcplanError) as ei:
        lower_problem(_gather(**{old: new}))
    assert ei.value.code == rule


def test_overlapping_source_and_destination():
    p = load_problem_text("""
kind: dma
axes: {A: 8, B: 8}
source: {tier: hbm, address: 0, element: 'm![A, B]'}
destination: {tier: hbm, address: 8, element: 'm![B, A]'}
stream: {time: 'm![A]', packet: 'm![B]'}
""")
    with pytest.raises(TcplanError) as ei:
        lower_problem(p)
    assert ei.value.code == "dma-overlap" and "[0, 64)" in ei.value.message


def test_chip_loop_rule():
    p = load_problem_text("""
kind: dma
chips: 2
axes: {A: 2, B: 16}
source: {tier: hbm, chip: 'm![A]', element: 'm![B]'}
destination: {tier: hbm, chip: 'm![A]', address: 4096, element: 'm![B]'}
stream: {time: 'm![A]', packet: 'm![B]'}
""")
    with pytest.raises(TcplanError) as ei:
        lower_problem(p)
    assert ei.value.code == "dma-chip-loop"


def test_trace_of_a_dma_stream_checks_engines_not_slices():
    import io
    import json
    from tcplan.planner.cli import main
    out = io.StringIO()
    code = main(["trace", str(SEED / "dma_example_6.yaml"), "--index", "A=3,B=1,C=2,D=5",
                 "--json"], stdout=out, stderr=io.StringIO())
    assert code == 0
    obj = json.loads(out.getvalue())
    assert obj["warnings"] == []  # the stream's Slice (4) selects DMN pairs: no slice-size
    assert obj["tensors"]["destination"]["chip"] == 2  # D / 2


def test_trace_of_a_free_stream_follows_the_planned_stream():
    """A problem with its stream free is traced through the stream the plan chooses (the
    one `lower` and `verify` use; before, a default stream the plan never takes, issue
    31): the index's engine, time step and packet lane computed by hand from the planned
    Cluster m![D / 32], Slice m![H / 2], Time m![S / 64, S % 64, H % 2], Packet
    m![D % 32] (tcplan solve's figures for this problem)."""
    import io
    import json
    from tcplan.planner.cli import main
    path = SEED.parent / "planning/attention_v_head_major.yaml"
    out = io.StringIO()
    S, H, D = 69, 3, 40
    code = main(["trace", str(path), "--index", f"S={S},H={H},D={D}", "--json"],
                stdout=out, stderr=io.StringIO())
    assert code == 0
    obj = json.loads(out.getvalue())
    stream = obj["tensors"]["stream"]
    assert obj["planned"] == ["stream"]
    assert (stream["cluster"], stream["time"], stream["packet"]) == (
        D // 32, (S // 64) * 128 + (S % 64) * 2 + H % 2, D % 32)
    lowered = lower_problem(load_problem(path))
    assert [d.text() for d in lowered.stream_dims.values()][-2:] == [
        "m![S / 64, S % 64, H % 2]", "m![D % 32]"]


# ---- a move that leaves digits behind (issue 31: a typo moved half a tensor silently) ----
TYPO = """format: 1
name: typo
kind: dma
dtype: bf16
axes: {K: 64, N: 32}
source: {tier: hbm, element: 'm![K, N]'}
destination: {tier: dm, slice: 'm![K / 16, 1 # 64]', element: 'm![K % 8, N]'}
stream: {time: free, packet: free}
"""


def _said(argv: list[str]) -> tuple[int, str]:
    import io
    from tcplan.planner.cli import main
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue() + err.getvalue()


def io_json(argv: list[str]) -> dict:
    import io
    import json
    from tcplan.planner.cli import main
    out = io.StringIO()
    assert main(argv, stdout=out, stderr=io.StringIO()) == 0
    return json.loads(out.getvalue())


def test_a_destination_that_drops_a_digit_is_warned_of(tmp_path):
    """K % 8 where K % 16 was meant: the destination (K / 16 on slices, K % 8 in Element)
    leaves K / 8 % 2 behind, so half the tensor moves: 1,024 of 2,048 elements. solve,
    lower and verify say so, in the text and the JSON, with the digit not moved."""
    import json
    p = tmp_path / "typo.yaml"
    p.write_text(TYPO)
    for verb in ("solve", "lower", "verify"):
        code, text = _said([verb, str(p)])
        assert code == 0 and "warning [sub-tensor]" in text, (verb, text)
        assert "K / 8 % 2 (2 values) not moved (1,024 of the source's 2,048 elements " \
            "move)" in text, (verb, text)
        assert "sub_tensor: true" in text
    out = io_json(["solve", str(p), "--json"])
    w, = out["plan"]["warnings"]
    assert w["code"] == "sub-tensor" and w["terms"] == ["K"]
    out = io_json(["verify", str(p), "--json"])
    assert [x["code"] for x in out["warnings"]] == ["sub-tensor"]


def test_a_sub_tensor_meant_is_not_warned_of(tmp_path):
    """``sub_tensor: true`` says the part is meant; the seed's Example 5 says it; a padded
    source (Example 6: A # 16, its 16th value padding) holds no more than its destination;
    anything but true or false is a located error."""
    p = tmp_path / "meant.yaml"
    p.write_text(TYPO + "sub_tensor: true\n")
    assert "warning" not in _said(["solve", str(p)])[1]
    for name in ("dma_example_5", "dma_example_6"):
        assert not load_problem(SEED / f"{name}.yaml").spec.warnings
    bad = tmp_path / "bad.yaml"
    bad.write_text(TYPO + "sub_tensor: 1\n")
    code, text = _said(["solve", str(bad)])
    assert code == 2 and "bad.yaml:9" in text and "expected true or false" in text


def test_a_store_into_hbm_with_2_byte_packets_plans_and_verifies():
    """DM -> HBM transposing a bf16 tensor: 2-byte packets (one element), which the
    compiler accepts (it checks the written memory's width: 1 byte for HBM) and tcplan
    refused with dma-hbm-dm-align before (the spec's decision 19; docs/decisions.md item
    115). Its partial 256-byte blocks are priced as read-modify-writes; a load the other
    way, into DM, still needs 8-byte packets."""
    import tcplan
    store = """kind: dma
dtype: bf16
axes: {A: 64, B: 16}
source: {tier: dm, slice: 'm![A, 1 # 4]', element: 'm![B]'}
destination: {tier: hbm, element: 'm![B, A]'}
stream: {time: free, packet: free}
"""
    r = tcplan.solve(tcplan.loads(store, "store.yaml"))
    assert r.status == "optimal" and r.verified is True
    assert r.to_json()["plan"]["packet_bytes"] == 2 and r.to_json()["checked"] == 64 * 16
    load = store.replace("source: {tier: dm, slice: 'm![A, 1 # 4]', element: 'm![B]'}",
                         "source: {tier: hbm, element: 'm![B, A]'}").replace(
        "destination: {tier: hbm, element: 'm![B, A]'}",
        "destination: {tier: dm, slice: 'm![A, 1 # 4]', element: 'm![B]'}")
    back = tcplan.solve(tcplan.loads(load, "load.yaml"))
    assert back.status == "infeasible" and "dma-hbm-dm-align" in back.error.message


def test_an_unscaled_gather_with_a_padded_cluster_counts_live_entries():
    """The index on one cluster (Cluster m![1 # 2]): 512 live entries, not the 1,024
    positions its padded Cluster spans (before: indexed-shape, "the DM tensor holds 512
    rows but the index has 1024 entries"); it verifies, 512 rows of 128 moved."""
    import tcplan
    text = (SEED / "gather_unscaled.yaml").read_text().replace(
        "axes: {K: 512, D: 128, G: 512, CL: 2}", "axes: {K: 512, D: 128, G: 512}").replace(
        "cluster: 'm![CL]'", "cluster: 'm![1 # 2]'")
    assert text.count("m![1 # 2]") == 2
    r = tcplan.verify(tcplan.loads(text, "one_cluster.yaml"))
    assert r.verified is True and r.to_json()["checked"] == 512 * 128


#: a gathered row of D = 256 (512 B) split over the destination's Slice (D / 64, beside the
#: index's G) and its Element (D % 64), as furiosa-opt writes a row too wide for one slice
SPLIT_ROW = """kind: gather
variant: scaled
dtype: bf16
axes: {K: 512, D: 256, G: 64}
table: {tier: hbm, element: 'm![K, D]'}
index: {tier: hbm, dtype: i32, element: 'm![G]'}
destination: {tier: dm, cluster: 'm![1 # 2]', slice: 'm![G, D / 64]', element: 'm![D % 64]'}
"""


def test_a_gathered_row_split_over_slice_and_element_plans_and_verifies():
    """Issue 31: furiosa-opt's gather moves dst less the index's axes (its payload) wherever
    the DM tensor holds it; tcplan required the row as the DM tensor's innermost terms
    (before: indexed-shape, "the DM tensor's innermost terms D % 64 are not the table's row
    D"). One DMA packet is now the Element's innermost run of the row (D % 64, 128 B), and
    the row's D / 64 is walked beside G: 4 packets a row, each on its own slice; it lowers
    and verifies (every destination element against the table row its index selects)."""
    import tcplan
    plan = lower_problem(load_problem_text(SPLIT_ROW, "split.yaml"))
    assert (plan.rows, plan.row_bytes, plan.packet.text(), plan.packet_bytes) == \
        (64, 512, "m![D % 64]", 128)
    slice_stride = 2**22 // 2  # (elements)
    assert plan.dm_entries == [(64, 4 * slice_stride), (4, slice_stride), (64, 1)]
    assert plan.walk.text() == "m![G, D / 64]"
    r = tcplan.verify(tcplan.loads(SPLIT_ROW, "split.yaml"))
    assert r.verified is True and r.to_json()["checked"] == 64 * 256
    # on data: the destination (axes D, G) holds table[index[g] / 512 B, d]
    import ml_dtypes
    table = RNG.integers(-100, 100, (512, 256)).astype(ml_dtypes.bfloat16)
    rows = RNG.integers(0, 512, 64)
    got = tcplan.run(tcplan.loads(SPLIT_ROW, "split.yaml"),
                     {"table": table, "index": (rows * 512).astype(np.int32)})
    assert np.array_equal(got.arrays["destination"], table[rows].T)
    # a row of 8 KiB (D = 4096), over 8 slices of 1 KiB: before, dma-packet-max (the whole
    # row as one packet); and the scatter's way back, its DM rows split the same way
    wide = SPLIT_ROW.replace("{K: 512, D: 256, G: 64}", "{K: 64, D: 4096, G: 32}").replace(
        "m![G, D / 64]", "m![G, D / 512]").replace("m![D % 64]", "m![D % 512]")
    plan = lower_problem(load_problem_text(wide, "wide.yaml"))
    assert (plan.row_bytes, plan.packet_bytes) == (8192, 1024)
    assert tcplan.verify(tcplan.loads(wide, "wide.yaml")).verified is True
    back = """kind: scatter
dtype: bf16
axes: {K: 64, D: 256, C: 100}
source: {tier: dm, cluster: 'm![1 # 2]', slice: 'm![K, D / 64]', element: 'm![D % 64]'}
index: {tier: hbm, dtype: i32, element: 'm![K]'}
destination: {tier: hbm, element: 'm![C, D]'}
"""
    assert tcplan.verify(tcplan.loads(back, "back.yaml")).verified is True


@pytest.mark.parametrize("slice_,element,says", [
    ("m![G, D / 64 % 2]", "m![D % 64]", "do not hold the table's row m![D] (256 values)"),
    ("m![G, D % 4]", "m![D / 4]", "innermost term D / 4 is not the innermost part"),
])
def test_a_split_row_the_destination_cannot_hold_is_named(slice_, element, says):
    """A split that drops digits of the row, or whose innermost Element term does not run
    contiguously in the table's row (no DMA packet runs in both), is refused by name."""
    text = SPLIT_ROW.replace("m![G, D / 64]", slice_).replace("m![D % 64]", element)
    with pytest.raises(TcplanError) as ei:
        lower_problem(load_problem_text(text.replace("G: 64", "G: 128") if "% 2" in slice_
                                        else text, "bad.yaml"))
    assert ei.value.code == "indexed-shape" and says in ei.value.message
    assert len(ei.value.violations) == 1  # (no packet rule said of a packet not found)
