"""HBM layouts as choices beyond the source order alone: free HBM addresses (``address:
free`` with ``bounds: {align_bytes, range}``), a free source with a free destination
Element or a free engine split, a PCIe download, and two hops through a planned
intermediate (issue 15; docs/decisions.md items 77 and 78)."""

from __future__ import annotations

import io
import itertools
import json

import pytest

from tcplan.model.mapping import join, parse
from tcplan.model.rules import TcplanError
from tcplan.model.tiers import Tensor, free_address
from tcplan.planner.cli import main
from tcplan.planner.dma_plan import plan_free
from tcplan.planner.dma_spec import DmaSpec
from tcplan.planner.outcome import Found, NoPlan, unwrap
from tcplan.planner.spec import Problem, load_problem_text
from test_layout_planner import brute_force

EX5 = """kind: dma
dtype: i8
axes: {{A: 8, B: 64, C: 8, D: 512}}
source: {source}
destination: {{tier: dm, cluster: 'm![A / 4]', slice: 'm![A % 4, B]', element: 'm![C, D % 256]'}}
stream: {{cluster: 'm![A / 4]', slice: 'm![A % 4]', time: free, packet: free}}
"""
MIB = 1 << 20  # the source above holds 8 x 64 x 8 x 512 = 2 MiB


def solve(tmp_path, text: str) -> tuple[int, str, str]:
    f = tmp_path / "p.yaml"
    f.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    code = main(["solve", str(f), "--json"], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_free_address_with_a_free_layout_plans_example_5_at_its_bus_floor(tmp_path):
    code, out, _ = solve(tmp_path, EX5.format(
        source="{tier: hbm, element: free, address: free}"))
    r = json.loads(out)
    assert code == 0 and r["verified"] and r["cycles"] == 1_183


@pytest.mark.parametrize("bounds,address", [
    ("{range: [1048576, 5242880]}", 2 * MIB),  # aligned past its 2 MiB: its bits are whole
    ("{align_bytes: 4096, range: [1052672, 3153920]}", 1052672),  # no 2 MiB multiple fits
    ("{align_bytes: 65536, range: [0, 2097152]}", 0),
])
def test_the_free_address_is_the_lowest_aligned_one_that_fits(tmp_path, bounds, address):
    code, out, _ = solve(tmp_path, EX5.format(
        source=f"{{tier: hbm, element: free, address: free, bounds: {bounds}}}"))
    r = json.loads(out)
    assert code == 0 and r["verified"], r
    assert r["plan"]["stream"]["source_address"] == address


@pytest.mark.parametrize("bounds,rule,words", [
    ("{range: [4096, 300000]}", "hbm-address-range",
     "its 2,097,152 B do not fit in its allowed addresses [4,096, 300,000)"),
    ("{align_bytes: 8388608, range: [4096, 6291456]}", "hbm-address-align",
     "no multiple of 8,388,608 B in [4,096, 6,291,456)"),
])
def test_infeasible_addresses_name_their_rule(tmp_path, bounds, rule, words):
    code, out, err = solve(tmp_path, EX5.format(
        source=f"{{tier: hbm, element: free, address: free, bounds: {bounds}}}"))
    said = out + err  # --json: the error as JSON on stdout
    assert code == 1 and rule in said and words in said, said


@pytest.mark.parametrize("source,why", [
    ("{tier: hbm, element: free, bounds: {align_bytes: 64}}", "go with a free address"),
    ("{tier: hbm, element: free, address: free, bounds: {range: [5, 2]}}",
     "expected [lowest, past the highest]"),
    ("{tier: hbm, element: free, address: free, bounds: {align_bytes: 0}}",
     "is not a byte count"),
    ("{tier: hbm, element: free, address: free, bounds: {step: 4}}", "take align_bytes"),
    ("{tier: hbm, element: free, address: free, bounds: {range: [0, 1099511627776]}}",
     "past the chip's HBM"),
])
def test_bad_address_bounds_are_located(tmp_path, source, why):
    code, out, err = solve(tmp_path, EX5.format(source=source))
    said = out + err
    assert code == 2 and "p.yaml:4:" in said and why in said, said


def test_a_dm_tensor_has_no_free_address(tmp_path):
    text = EX5.format(source="{tier: hbm, element: 'm![A, B, C, D]'}").replace(
        "destination: {tier: dm,", "destination: {tier: dm, address: free,")
    code, out, err = solve(tmp_path, text)
    assert code == 2 and "only an HBM tensor's address is planned" in out + err, out + err


def _scratch(size: int) -> Tensor:
    return Tensor("t", "hbm", "i8", {"element": parse(f"m![A # {size}]", {"A": 1})})


@pytest.mark.parametrize("size,lo,hi,align,taken", [
    (48, 0, 512, 16, None), (48, 8, 512, 16, (0, 100)), (64, 3, 400, 32, (60, 130)),
    (100, 0, 1000, 24, (130, 300)), (7, 5, 40, 2, (6, 20)), (256, 0, 700, 64, (200, 260)),
])
def test_free_address_against_every_address(size, lo, hi, align, taken):
    """Brute force over every address in the range: the lowest one aligned both ways
    (align and the size's power of two) that fits and avoids the other tensor, else the
    lowest aligned one."""
    def ok(a: int, step: int) -> bool:
        clear = taken is None or a + size <= taken[0] or a >= taken[1]
        return a % step == 0 and lo <= a and a + size <= hi and clear
    natural = 1 << (size - 1).bit_length()
    both = [a for a in range(hi) if ok(a, align) and a % natural == 0]
    only = [a for a in range(hi) if ok(a, align)]
    want = (both or only or [None])[0]
    if want is None:
        with pytest.raises(TcplanError):
            free_address(_scratch(size), lo, hi, align, taken)
    else:
        assert free_address(_scratch(size), lo, hi, align, taken) == want


BOTH = """kind: dma
dtype: {dtype}
axes: {{A: {a}, B: {b}, C: {c}}}
source: {{tier: hbm, element: free}}
destination: {{tier: dm, slice: 'm![A # 64]', element: free}}
stream: {{time: free, packet: free}}
"""


@pytest.mark.parametrize("dtype,a,b,c", [("bf16", 4, 8, 16), ("i8", 8, 16, 8),
                                         ("f32", 2, 4, 32), ("bf16", 8, 2, 64)])
def test_free_source_and_free_destination_element_together(dtype, a, b, c):
    """Every source order x every destination Element order x (itertools) every stream
    order and packet, against the planner."""
    p = load_problem_text(BOTH.format(dtype=dtype, a=a, b=b, c=c), "<both>")
    fe = p.spec.free_element
    best = None
    for _, src in p.spec.free_source:
        for terms in itertools.permutations(fe.terms):
            dst = p.tensors["destination"]
            dims = {**dst.dims, "element": join(terms)}
            q = Problem(p.path, p.name, p.kind, p.chips, p.dtype, p.axes,
                        {**p.tensors, "source": src,
                         "destination": Tensor(dst.name, dst.tier, dst.dtype, dims)},
                        DmaSpec(free=p.spec.free))
            c_ = brute_force(q)
            best = c_ if best is None or (c_ is not None and c_ < best) else best
    out = plan_free(p)
    if not isinstance(out, Found):
        assert best is None and isinstance(out, NoPlan), out
        assert out.error.code == "plan-no-layout", out.error
        return
    assert out.status == "optimal" and out.record.best.cycles == best


def test_two_hops_find_their_intermediate_with_the_outer_model():
    """The narrow-rows problem: no single transfer is legal; the intermediate the outer
    model proposes first is the one a search over every order of the pieces finds best."""
    import pathlib

    from tcplan.planner.hops import _hop, _intermediates, plan_hops
    from tcplan.planner.spec import load_problem
    root = pathlib.Path(__file__).resolve().parents[1]
    p = load_problem(root / "problems/planning/two_hop_narrow_rows.yaml")
    hp = unwrap(plan_hops(p))
    fs = _intermediates(p)
    totals = []
    for order in fs.orders():
        mid = fs.tensor(order)
        first, second = _hop(p, p.tensors["source"], mid), _hop(p, mid, p.tensors["destination"])
        if isinstance(first, TcplanError) or isinstance(second, TcplanError):
            continue
        totals.append(first.cycles + second.cycles)
    assert len(hp.hops) == 2 and hp.cycles == min(totals)


SPLIT = """kind: dma
dtype: bf16
axes: {{S: {s}, H: 2, D: {d}}}
source: {{tier: hbm, element: {{free: true, prefix: 'm![H]'}}}}
destination: {{tier: dm, slice: 'm![H, S / {rows} # 32]', element: 'm![S % {rows}, D]'}}
stream: {{cluster: free, slice: free, time: free, packet: free}}
"""


@pytest.mark.parametrize("s,d,rows", [(32, 16, 16), (64, 8, 16)])
def test_free_source_with_a_free_engine_split_against_brute_force(s, d, rows):
    """A K cache with its layout and its engine split free: every source order x every
    engine split x (itertools) every stream order and packet, against the planner."""
    from tcplan.planner.dma_plan import engine_splits
    p = load_problem_text(SPLIT.format(s=s, d=d, rows=rows), "<split>")
    stream = p.tensors["stream"]
    best = None
    for _, src in p.spec.free_source:
        for split in engine_splits(src, p.tensors["destination"], stream, p.spec.free):
            dims = {**stream.dims, **split}
            q = Problem(p.path, p.name, p.kind, p.chips, p.dtype, p.axes,
                        {**p.tensors, "source": src,
                         "stream": Tensor("stream", "stream", stream.dtype, dims)},
                        DmaSpec(free=("time", "packet")))
            try:
                c = brute_force(q)
            except TcplanError:  # a split that cuts the pieces apart: no plan
                continue
            best = c if best is None or (c is not None and c < best) else best
    out = plan_free(p)
    assert out.status == "optimal" and unwrap(out).best.cycles == best


def test_a_pcie_download_with_a_free_source_layout_and_address(tmp_path):
    """PCIe (HBM -> host, 8 chips): the source's layout and address free; the plan is the
    cheapest of its two orders, each planned with its layout given."""
    text = """kind: pcie
chips: 8
dtype: bf16
axes: {{A: 8, B: 64, C: 32}}
source: {{tier: hbm, chip: 'm![A]', element: {element}, address: {address}}}
destination: {{tier: host, element: 'm![A, C, B]'}}
stream: {{chip: 'm![A]', time: free, packet: free}}
"""
    code, out, _ = solve(tmp_path, text.format(element="free", address="free"))
    r = json.loads(out)
    assert code == 0 and r["verified"] and r["status"] == "optimal"
    each = [unwrap(plan_free(load_problem_text(text.format(element=f"'{o}'", address=0),
                                               "<o>"))).best.cycles
            for o in ("m![B, C]", "m![C, B]")]
    assert r["cycles"] == min(each) < max(each)
    assert r["plan"]["stream"]["source_element"] == "m![C, B]"  # the host's order


def test_a_free_source_under_the_seeds_given_stream_is_the_cheapest_order():
    """Example 5 as the seed streams it (Time m![C, B % 32, B / 32], Packet m![D % 256]),
    its source free: the plan is the least estimate over every source order lowered with
    that stream (720 orders, each lowered and estimated here), 1,183 cycles against the
    seed's 1,866."""
    import pathlib

    from tcplan.model import dma
    from tcplan.model.cost import estimate
    from tcplan.planner.spec import load_problem
    root = pathlib.Path(__file__).resolve().parents[1]
    text = (root / "problems/seed/dma_example_5.yaml").read_text()
    text = text.replace("element: 'm![A, B, C, D]'", "element: free").split("expect:")[0]
    p = load_problem_text(text, "<ex5 free source>")
    t = p.tensors
    costs = []
    for _, src in p.spec.free_source:
        try:
            costs.append(estimate(dma.lower(src, t["destination"], t["stream"], p.chips)).cycles)
        except TcplanError:
            continue
    out = plan_free(p)
    found = unwrap(out)
    assert out.status == "optimal" and found.best.cycles == min(costs) == 1_183
    assert found.best.time.text() == "m![C, B % 32, B / 32]"  # the stream stays as given
    given = load_problem(root / "problems/seed/dma_example_5.yaml")
    assert estimate(dma.lower(given.tensors["source"], t["destination"], t["stream"],
                              p.chips)).cycles == 1_866


@pytest.mark.parametrize("source,why", [
    ("{tier: hbm, element: {free: true, prefix: 'm![B]', allowed: ['m![A, B, C, D]']}}",
     "no allowed order starts with the prefix"),
    ("{tier: hbm, element: {free: true, prefix: 'm![B, B]'}}", "names a digit twice"),
    ("{tier: hbm, element: {free: true, allowed: ['m![A, B, C, D / 256, D % 256 # 512]']}}",
     "pads a digit"),
    ("{tier: hbm, element: free, address: free, bounds: {range: [0]}}",
     "expected [lowest, past the highest]"),
    ("{tier: hbm, element: free, address: free, bounds: {range: 5}}",
     "expected [lowest, past the highest]"),
])
def test_contradictory_free_sources_are_located(tmp_path, source, why):
    code, out, err = solve(tmp_path, EX5.format(source=source))
    assert code == 2 and "p.yaml:4:" in out + err and why in out + err, out + err


def test_two_hops_with_a_free_source_are_refused(tmp_path):
    text = EX5.format(source="{tier: hbm, element: free}") + "hops: 2\n"
    code, out, err = solve(tmp_path, text)
    assert code == 2 and "hops" in out + err and "give them" in out + err, out + err
