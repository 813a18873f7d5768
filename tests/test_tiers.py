"""Tiers: placement rules, addresses, the seed's NCHW index trace, `tcplan trace`."""

import io
import json
import pathlib

import pytest

from tcplan.model import hardware as hw
from tcplan.model.mapping import parse
from tcplan.model.tiers import Tensor, dm_address, hbm_decode, placement_violations, trace
from tcplan.planner.cli import main
from tcplan.planner.spec import load_problem

ROOT = pathlib.Path(__file__).resolve().parents[1]
NCHW = ROOT / "problems/seed/nchw_trace.yaml"
INDEX = {"N": 1, "C": 17, "H": 3, "W": 5}


def test_nchw_trace_reproduces_the_seed():
    p = load_problem(NCHW)
    hbm, dm, stream = (trace(p.tensors[n], INDEX) for n in ("hbm", "dm", "stream"))
    # HBM selects chip 1, element offset 17 * 32 * 32 + 3 * 32 + 5 = 17,509
    assert (hbm["chip"], hbm["element_offset"]) == (1, 17 * 32 * 32 + 3 * 32 + 5) == (1, 17509)
    assert hbm["byte_address"] == 17509 * 2  # bf16
    # DM selects slice 17 / 2 = 8; element (N, H, W, C % 2) = ((1 * 32 + 3) * 32 + 5) * 2 + 1
    assert dm["slice"] == 8 and dm["element_offset"] == ((1 * 32 + 3) * 32 + 5) * 2 + 1
    assert dm["byte_address"] == 8 * 2**22 + dm["element_offset"] * 2
    # the stream: slice 8, time 1 * 32 * 32 + 3 * 32 + 5 = 1,125, packet 17 % 2 = 1
    assert (stream["slice"], stream["time"], stream["packet"]) == (8, 1125, 1)
    # the problem file states the same expectations
    exp = p.expect["trace"]
    assert exp["index"] == INDEX
    for name in ("hbm", "dm", "stream"):
        got = trace(p.tensors[name], INDEX)
        for k, v in exp[name].items():
            assert got[k] == v, (name, k)


def test_nchw_placement_warnings():
    p = load_problem(NCHW)
    rules = {n: [v.rule for v in placement_violations(t, p.chips)] for n, t in p.tensors.items()}
    assert rules["hbm"] == []
    assert rules["dm"] == ["chip-count", "slice-size"]  # 1 of 4 chips; 32 slices
    assert rules["stream"] == ["chip-count", "slice-size"]


def _t(tier, axes, dtype="i8", **dims):
    return Tensor("t", tier, dtype, {d: parse(m, axes, d) for d, m in dims.items()})


def test_placement_rules():
    ax = {"A": 256, "B": 4096, "L": 16}
    ok = _t("dm", ax, chip="m![1]", cluster="m![1 # 2]", slice="m![A / 4]",
            element="m![A % 4, B]")
    assert placement_violations(ok, 1) == []  # 64 slices, 16 KiB per slice
    big = _t("dm", ax, dtype="f32", chip="m![1]", cluster="m![1 # 2]", slice="m![A]",
             element="m![B, L, 4]")  # 4096 * 16 * 4 * 4 B = 1 MiB
    v = placement_violations(big, 1)
    assert [x.rule for x in v] == ["capacity"]
    assert "1,048,576 B of a slice" in v[0].message
    # an SRAM address is an offset in every slice: the tensor must end inside the slice
    at = _t("dm", ax, chip="m![1]", cluster="m![1 # 2]", slice="m![A / 4]",
            element="m![A % 4, B]")
    at.address = 512 * 1024 - 16 * 1024  # 16 KiB tensor ending exactly at 512 KiB: fine
    assert placement_violations(at, 1) == []
    at.address += 8
    v = placement_violations(at, 1)
    assert [x.rule for x in v] == ["capacity"] and "from offset 507,912" in v[0].message
    trf = _t("trf", ax, chip="m![1]", cluster="m![1]", slice="m![A]", lane="m![L]",
             element="m![4]")
    assert [x.rule for x in placement_violations(trf, 1)] == ["lane-limit"]
    vrf = _t("vrf", ax, chip="m![1]", cluster="m![1]", slice="m![A]", element="m![B]")
    assert [x.rule for x in placement_violations(vrf, 1)] == []  # 4 KiB of 8 KiB
    three = _t("dm", ax, chip="m![1]", cluster="m![4]", slice="m![A]", element="m![B]")
    assert [x.rule for x in placement_violations(three, 1)] == ["cluster-size"]


def test_disjoint_digit_ranges_across_dimensions():
    ax = {"A": 256, "B": 64}
    fine = _t("dm", ax, chip="m![1]", cluster="m![1]", slice="m![A / 4]",
              element="m![A % 4, B]")
    assert placement_violations(fine, 1) == []
    bad = _t("dm", ax, chip="m![1]", cluster="m![1]", slice="m![A / 4]",
             element="m![A % 8, B]")
    v = placement_violations(bad, 1)
    assert [x.rule for x in v] == ["overlapping-dimensions"]
    assert "A digits [4, 8)" in v[0].message


def test_dm_addresses():
    assert dm_address(0, 0, 0) == 0
    assert dm_address(0, 1, 0) == hw.DM_SLICE_STRIDE == 2**22
    assert dm_address(0, 32, 0) == hw.DM_DMN_STRIDE == 2**27
    assert dm_address(1, 0, 5) == 2**30 + 5
    assert dm_address(1, 255, 0) == ((1 * 8 + 7) * 32 + 31) * 2**22


def test_hbm_decode():
    assert hbm_decode(0)["global_channel"] == 0
    assert hbm_decode(1 << 8)["stack"] == 1
    # channel bit 0 = b9 ^ b13 ^ b21 ^ b25 (docs/hardware.md section 5)
    for bits, want in (((9,), 1), ((13,), 1), ((21,), 1), ((25,), 1), ((9, 13), 0),
                       ((9, 21, 25), 1)):
        addr = sum(1 << b for b in bits)
        assert hbm_decode(addr)["channel"] & 1 == want, bits
    d = hbm_decode((1 << 17) | (1 << 19) | (1 << 20) | (5 << 21))
    assert (d["bank"], d["bank_group"] >> 1, d["slice"], d["row"]) == (1, 1, 1, 5)


def test_trace_of_an_index_a_sub_tensor_lacks():
    ax = {"A": 8, "D": 512}
    t = _t("dm", ax, chip="m![1]", cluster="m![1]", slice="m![A # 64]", element="m![D % 256]")
    assert trace(t, {"A": 3, "D": 17})["held"]
    r = trace(t, {"A": 3, "D": 300})
    assert not r["held"] and "D = 256" in r["reason"]


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    return main(argv, stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_trace_cli():
    code, out, _ = run(["trace", str(NCHW), "--index", "N=1,C=17,H=3,W=5", "--json"])
    assert code == 0
    obj = json.loads(out)
    assert obj["tensors"]["hbm"]["element_offset"] == 17509
    assert obj["tensors"]["stream"]["time"] == 1125
    assert {w["code"] for w in obj["warnings"]} == {"chip-count", "slice-size"}
    code, out, _ = run(["trace", str(NCHW), "--index", "N=1,C=17,H=3,W=5"])
    assert code == 0 and "element offset 17,509" in out and "time 1,125, packet 1" in out
    assert "warnings" in out


@pytest.mark.parametrize("index", ["N=4", "Q=1", "N=1,N=2", "N", "N=x"])
def test_trace_cli_bad_index(index):
    code, out, _ = run(["trace", str(NCHW), "--index", index, "--json"])
    assert code == 2 and json.loads(out)["error"]["code"] == "bad-request"
