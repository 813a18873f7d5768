"""A contraction planned whole from its einsum (issue 30; ``kind: contraction``;
planner/contraction_search.py): the guide's batched matmul with everything free and with K
forced into Time, the plan against a brute force that also tries every order of Time's
digits (each mapping lowered by the Contraction Engine's model), the search's bound, the
rules by name, and the plan run on the user's data against numpy.einsum."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

import tcplan
from tcplan.model import hardware as hw
from tcplan.model.engines.contraction import MODES, Contraction
from tcplan.model.lane import fold
from tcplan.model.mapping import parse
from tcplan.model.rules import TcplanError
from tcplan.model.tiers import Tensor
from tcplan.planner import contraction_search as cs

ROOT = Path(__file__).resolve().parents[1]
FREE = ROOT / "problems/contractions/bmatmul_free.yaml"
K_IN_TIME = ROOT / "problems/contractions/bmatmul_k_in_time.yaml"


def _problem(einsum: str, axes: dict[str, int], dtype: str = "bf16", fix: str = "") -> str:
    return (f"format: 1\nname: c\nkind: contraction\ndtype: {dtype}\naxes: {axes}\n"
            f"einsum: '{einsum}'\n" + (f"fix: {fix}\n" if fix else "")).replace("'", "'")


# ---- the guide's batched matmul ----------------------------------------------------------
def test_the_guides_bmatmul_with_everything_free_keeps_every_multiplier_busy():
    """K in the Packet (the tree sums it), N in the 8 lanes, V x M = 1,024 over the 512
    units: 2 of V a slice in Time, K / 16 packed into 64-byte packets: 4 flits, 2 packets,
    + the 5-cycle tree = 9 cycles; MAC utilization 1; verified against numpy.einsum."""
    r = tcplan.solve(FREE)
    assert r.status == "optimal" and r.verified is True and r.cycles == 9, r.text()
    j = r.to_json()
    assert j["plan"]["breakdown"]["mac_utilization"] == 1.0
    m = j["mapping"]
    axes = {"V": 32, "M": 32, "N": 8, "K": 32}
    assert parse(m["packet"], axes).size == 16 and parse(m["lane"], axes).size == 8
    assert j["plan"]["derived"]["PackSize"] == 2
    # the guide's M-in-Time strategy (32 units) takes 69 cycles: the free plan is faster
    assert tcplan.solve(ROOT / "problems/guide/contract_bmatmul_m_in_time.yaml").cycles == 69


def test_k_forced_into_time_keeps_one_multiplier_of_32_and_explain_says_so():
    r = tcplan.solve(K_IN_TIME)
    assert r.status == "optimal" and r.verified is True and r.cycles == 69
    assert r.to_json()["plan"]["breakdown"]["mac_utilization"] == pytest.approx(1 / 32)
    x = tcplan.explain(K_IN_TIME)
    words = x.text()
    assert x.exit_code == 0 and "K in Time: 1 of 32 multipliers busy" in words
    assert "MAC utilization 0.0312" in words and "fixed: packet m![1 # 16]" in words
    assert "with them free the best takes 9 cycles at MAC utilization 1.0000" in words


# ---- against a brute force ---------------------------------------------------------------
def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _brute(e: cs.Einsum, axes: dict[str, int], dtype: str) -> tuple[int, int, int]:
    """The least (cycles, engaged multipliers, units) over the family with every order of
    Time's digits: each mapping written here apart from the planner and lowered by the
    engine's model."""
    (k,) = e.contracted
    f = hw.FLIT_BYTES // hw.DTYPE_BYTES[dtype]
    free = [a for a in e.stream if a != k]
    n_axis = e.trf_only[0] if e.trf_only else None
    best = None
    for spatial in itertools.product(*(_divisors(axes[a]) for a in free)):
        if any(s != axes[a] for a, s in zip(free, spatial) if a in e.batch):
            continue
        for lane in (1, 2, 4, 8):
            if (n_axis is None and lane > 1) or (n_axis and axes[n_axis] % lane):
                continue
            for got in _mappings(e, axes, dtype, k, f, free, spatial, n_axis, lane):
                best = got if best is None else min(best, got)
    assert best is not None
    return best


def _mappings(e, axes, dtype, k, f, free, spatial, n_axis, lane):
    space, times = [], []
    for a, s in zip(free, spatial):
        r = axes[a] // s
        if s > 1:
            space.append((a if r == 1 else f"{a} / {r}", s))
        if r > 1:
            times.append(a if s == 1 else f"{a} % {r}")
    if n_axis is not None and lane < axes[n_axis]:
        space.append((f"{n_axis} / {lane}", axes[n_axis] // lane))
    units = int(np.prod([s for _, s in space])) if space else 1
    even = [i for i, (_, s) in enumerate(space) if s % 2 == 0]
    if units > 512 or (units > 256 and not even):
        return
    if even:  # (both clusters: any even part's outer half; the cycles are a slice's)
        first, s = space[even[-1]]
        cluster = f"m![{first} / {s // 2}]" if s > 2 else f"m![{first}]"
        rest = ([f"{first} % {s // 2}"] if s > 2 else []) + [
            t for i, (t, _) in enumerate(space) if i != even[-1]]
    else:
        cluster, rest = "m![1 # 2]", [t for t, _ in space]
    n_slices = units // 2 if even else units
    slice_ = "m![" + (", ".join(rest) or "1") + (" # 256]" if n_slices < 256 else "]")
    lane_t = "m![1]" if n_axis is None else (
        f"m![{n_axis} % {lane}]" if lane < axes[n_axis] else f"m![{n_axis}]")
    kk = axes[k]
    ks = [("m![1 # %d]" % f, [k], "m![1 # %d]" % f, None)]
    if kk <= f:
        ks.append((f"m![{k}]" if kk == f else f"m![{k} # {f}]", [], None, None))
    else:
        ks.append((f"m![{k} % {f}]", [f"{k} / {f}"], None, None))
        if kk == 2 * f:
            ks.append((f"m![{k} % {f}]", [f"{k} / {f}"], f"m![{k} % {2 * f}]", "pack"))
    for packet, k_time, outer_packet, pack in ks:
        for order in itertools.permutations(times + k_time):
            if pack and order[-1] != k_time[0]:
                continue  # (two flits packed: the packed digit innermost)
            out_time = [t for t in order if t not in k_time]
            outer_time = out_time if pack else list(order)
            for mode in MODES:
                got = _lower(axes, dtype, cluster, slice_, list(order), packet, lane_t, k,
                             outer_time, outer_packet or packet, out_time, mode)
                if got is not None:
                    yield (got[0], units * got[1], units)


def _lower(axes, dtype, cluster, slice_, time, packet, lane, k, outer_time, outer_packet,
           out_time, mode):
    def m(t):
        return parse(t, axes)

    def mm(ds):
        return m("m![" + (", ".join(ds) or "1") + "]")
    sp = {"chip": m("m![1]"), "cluster": m(cluster), "slice": m(slice_)}
    src = Tensor("s", "stream", dtype, {**sp, "time": mm(time), "packet": m(packet)})
    trf = Tensor("w", "trf", dtype, {**sp, "lane": m(lane), "element": m(f"m![{k}]")})
    eng = Contraction(mm(outer_time), m(outer_packet), m("m![1]"), mm(out_time), mode)
    try:
        lf = fold(axes, trf.dims["lane"], eng.time, eng.packet, mode)
        out = Tensor("o", "stream", hw.CONTRACT_ACCUMULATOR[dtype],
                     {**sp, "time": lf.out_time, "packet": lf.out_packet})
        plan = eng.lower(src, trf, out, axes)
    except TcplanError:
        return None
    return plan.cycles, plan.engine.outer_time.size


SMALL = [
    ("MK,NK->MN", {"M": 4, "N": 8, "K": 32}, "bf16"),
    ("VMK,NK->VMN", {"V": 4, "M": 2, "N": 4, "K": 16}, "bf16"),
    ("MK,NK->MN", {"M": 8, "N": 2, "K": 64}, "i8"),
    ("HD,HTD->HT", {"H": 2, "T": 8, "D": 32}, "bf16"),
    ("MK,K->M", {"M": 6, "K": 8}, "bf16"),
]


@pytest.mark.parametrize("einsum, axes, dtype", SMALL, ids=[s[0] for s in SMALL])
def test_the_plan_is_the_best_of_every_mapping(einsum, axes, dtype):
    p = tcplan.loads(_problem(einsum, axes, dtype), "c.yaml")
    e = p.spec.einsum
    out = cs.search(e, p.axes, dtype, {})
    assert out.best is not None and out.proven
    got = (out.best.cycles, out.best.engaged, out.best.candidate.units)
    assert got == _brute(e, p.axes, dtype)
    r = tcplan.solve(p)
    assert r.status == "optimal" and r.verified is True and r.cycles == got[0]


@pytest.mark.parametrize("einsum, axes, dtype", SMALL[:3], ids=[s[0] for s in SMALL[:3]])
def test_the_searchs_bound_never_passes_a_plan(einsum, axes, dtype):
    """Every candidate's cycles are at least its stream's flits (the bound the search
    stops at)."""
    p = tcplan.loads(_problem(einsum, axes, dtype), "c.yaml")
    for c in cs.candidates(p.spec.einsum, p.axes, dtype):
        r = cs.evaluate(c, p.spec.einsum, p.axes, dtype)
        if r.plan is not None:
            assert r.cycles >= c.flits, c.describe()


# ---- rules and mistakes ------------------------------------------------------------------
def test_an_einsum_no_mapping_meets_is_explained_by_its_rules(tmp_path, capsys):
    """f32 operands: the Multiplier takes i8 or a matching float pair of bf16 or fp8; every
    candidate breaks contract-dtypes, the one rule named; exit 1."""
    from tcplan.planner.cli import main
    f = tmp_path / "c.yaml"
    f.write_text(_problem("MK,NK->MN", {"M": 4, "N": 8, "K": 32}, "f32"))
    assert main(["explain", str(f)]) == 1
    out = capsys.readouterr().out
    assert "[contract-dtypes]" in out and out.count("[") == 1
    assert main(["solve", str(f)]) == 1
    assert "[contraction-no-mapping]" in capsys.readouterr().out


def test_a_fixed_dimension_no_candidate_holds_is_named(tmp_path, capsys):
    from tcplan.planner.cli import main
    f = tmp_path / "c.yaml"
    f.write_text(_problem("MK,NK->MN", {"M": 4, "N": 8, "K": 32}, "bf16",
                          "{lane: 'm![N / 2]'}"))
    assert main(["explain", str(f)]) == 1
    assert "[contraction-fixed]" in capsys.readouterr().out


@pytest.mark.parametrize("einsum, words", [
    ("MK,NK", "two operands and a result"),
    ("MX,NK->MN", "'X' is not an axis"),
    ("MK,NK->MNK", "one axis both operands carry"),
    ("MKN,NK->M", "one axis both operands carry"),
    ("M,N->MN", "one axis both operands carry"),
])
def test_a_bad_einsum_is_located(einsum, words):
    with pytest.raises(TcplanError) as e:
        tcplan.loads(_problem(einsum, {"M": 4, "N": 8, "K": 32}), "c.yaml")
    assert e.value.kind == "input" and words in e.value.to_json()["message"]
    assert "c.yaml:6:" in e.value.to_json()["message"]


def test_the_plan_runs_on_the_users_data():
    """i8 operands, an i32 result: the run equals numpy.einsum bit for bit."""
    p = tcplan.loads(_problem("MK,NK->MN", {"M": 8, "N": 2, "K": 64}, "i8"), "c.yaml")
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (8, 64), dtype=np.int64).astype(np.int8)
    b = rng.integers(-128, 128, (2, 64), dtype=np.int64).astype(np.int8)
    got = tcplan.run(p, {"source": a, "trf": b}).arrays["destination"]
    assert np.array_equal(got, np.einsum("mk,nk->mn", a.astype(np.int64),
                                         b.astype(np.int64)).astype(np.int32))


LIBRARY = sorted((ROOT / "problems/contractions").glob("*.yaml"))


def test_the_library_has_the_issues_contractions():
    """GEMV and GEMM shapes of the Qwen3 layers, batched matmuls, q-k and p-v products."""
    assert len(LIBRARY) >= 10
    kinds = {tcplan.load(p).spec.einsum.text() for p in LIBRARY}
    assert {"K,NK->N", "MK,NK->MN", "VMK,NK->VMN", "HD,HTD->HT", "HT,HDT->HD"} <= kinds


@pytest.mark.slow
@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: p.stem)
def test_each_library_contraction_plans_proves_and_verifies(path):
    """Each solves optimal and verified (meeting its expect block); where its candidates
    are few, the plan's cycles are every candidate's least (each lowered apart)."""
    from tcplan.planner.expect import expectations
    p = tcplan.load(path)
    r = tcplan.solve(p)
    assert r.status == "optimal" and r.verified is True, r.text()
    row = expectations(p, r.to_json(), r.exit_code)
    assert row["ok"], row["why"]
    from tcplan.planner import contraction_moves as cm
    s = p.spec
    every, _ = cs.family(s.einsum, p.axes, p.dtype, lambda c: cs.matches(c, s.fixed, p.axes)
                         and (s.moves is None or cm.given_dm(c, s.einsum, p.axes, p.dtype,
                                                             s.moves)))
    if len(every) <= 50:
        rows = [cs.evaluate(c, p.spec.einsum, p.axes, p.dtype) for c in every]
        if p.spec.moves is None:
            assert r.cycles == min(x.cycles for x in rows if x.plan is not None)
        else:  # (each candidate's graph planned apart: the least makespan)
            from tcplan.planner.registry import Options
            spans = [t.makespan for t in (
                cm._timed(x, p.spec.einsum, p.axes, p.dtype, p.spec.moves,
                          Options(verify="none"), p.name) for x in rows if x.plan is not None)
                if isinstance(t, cm.Timed)]
            assert r.cycles == min(spans)


def test_the_plan_does_not_depend_on_the_einsums_letter_order():
    """V = 3 (odd) first or second: the two clusters are taken by M's half either way."""
    axes = {"V": 3, "M": 256, "N": 8, "K": 32}
    a = tcplan.solve(tcplan.loads(_problem("VMK,VNK->VMN", axes), "a.yaml"), verify="none")
    b = tcplan.solve(tcplan.loads(_problem("MVK,VNK->MVN", axes), "b.yaml"), verify="none")
    assert a.cycles == b.cycles and a.to_json()["plan"]["breakdown"]["mac_utilization"] == \
        b.to_json()["plan"]["breakdown"]["mac_utilization"]


def test_too_many_candidates_is_a_size_limit():
    with pytest.raises(TcplanError) as e:
        cs.search(cs.Einsum(("A", "B", "C", "D", "K"), ("N", "K"), ("A", "B", "C", "D", "N")),
                  {"A": 720, "B": 720, "C": 720, "D": 720, "N": 8, "K": 32}, "bf16", {})
    assert e.value.code == "size-limit" and "candidate" in e.value.message
