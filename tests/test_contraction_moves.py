"""A contraction planned with its moves (issue 30, item 1; docs/contractions.md 'The moves';
planner/contraction_moves.py): the search against every candidate's graph planned, its
bound against the planned makespans, the schedule against the ops' own cycles, the run
against numpy.einsum, and the file's mistakes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

from tcplan.executor import strided
from tcplan.model.mapping import parse
from tcplan.planner import api
from tcplan.planner import contraction_moves as cm
from tcplan.planner import contraction_search as cs
from tcplan.planner.registry import Options

HBM = cm.Moves(cm.Place("hbm"), cm.Place("hbm"), cm.Place("hbm"))


def _einsum(text: str) -> cs.Einsum:
    left, result = text.split("->")
    a, b = left.split(",")
    return cs.Einsum(tuple(a), tuple(b), tuple(result))


def _every(e: cs.Einsum, axes: dict[str, int], moves: cm.Moves) -> list[cm.Timed]:
    """Every candidate's graph planned, each with no reuse of op plans (the brute force)."""
    out = []
    for c in cs.candidates(e, axes, "bf16"):
        r = cs.evaluate(c, e, axes, "bf16")
        if r.plan is None:
            continue
        t = cm._timed(r, e, axes, "bf16", moves, Options(verify="none"), "brute")
        if isinstance(t, cm.Timed):
            out.append(t)
    return out


CASES = [("MK,NK->MN", {"M": 2, "N": 4, "K": 16}, HBM),
         ("HD,HTD->HT", {"H": 2, "T": 8, "D": 16},
          cm.Moves(cm.Place("dm"), cm.Place("hbm"), cm.Place("hbm")))]


@pytest.mark.parametrize("text, axes, moves", CASES)
def test_the_search_finds_the_least_makespan_of_every_candidate(text, axes, moves):
    e = _einsum(text)
    every = _every(e, axes, moves)
    assert every, "the brute force planned no candidate"
    least = min(t.makespan for t in every)
    out = cm.search(e, axes, "bf16", {}, moves, Options(time_limit=60), "x")
    assert out.best is not None and out.proven
    assert out.best.makespan == least
    assert out.bound == least
    ties = [t for t in every if t.makespan == least]
    key = min((t.evaluated.cycles, t.evaluated.engaged, t.evaluated.candidate.units)
              for t in ties)
    got = out.best.evaluated
    assert (got.cycles, got.engaged, got.candidate.units) == key
    # the bound never passes a planned makespan: flits <= cycles, and cycles + floor
    for t in every:
        c = t.evaluated.candidate
        fl = cm.floor(c, e, axes, "bf16", moves)
        assert c.flits + fl <= t.evaluated.cycles + fl <= t.makespan


def test_the_schedule_is_the_loads_then_the_paths_then_the_store():
    """The chain of one contraction, from the ops' own cycles: the TRF's load, then the
    source's load beside the TRF's sub path, the main path, the store."""
    e, axes = _einsum("MK,NK->MN"), {"M": 4, "N": 8, "K": 32}
    out = cm.search(e, axes, "bf16", {}, HBM, Options(time_limit=60), "x")
    assert out.best is not None
    gp, g = out.best.plan, out.best.problem.spec.graph
    cyc = {g.ops[i].name: gp.ops[i].cycles for i in range(len(g.ops))}
    sub = max(cyc[n] for n in ("fetch_trf", "collect_trf", "to_trf"))
    main = max(cyc[n] for n in ("fetch_source", "collect_source", "contract",
                                "commit_result"))
    want = min(cyc["load_trf"] + max(cyc["load_source"], sub),
               cyc["load_source"] + cyc["load_trf"] + sub) + main + cyc["store_result"]
    assert out.best.makespan == want


def test_a_problem_with_moves_solves_runs_and_traces(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent("""\
        format: 1
        name: small_moves
        kind: contraction
        dtype: bf16
        axes: {M: 4, N: 8, K: 32}
        einsum: 'MK,NK->MN'
        moves: {source: hbm, trf: {tier: hbm, element: 'm![N, K]'}, result: dm}
        """))
    trace = tmp_path / "t.json"
    r = subprocess.run([sys.executable, "-m", "tcplan", "solve", str(path), "--json",
                        "--trace", str(trace)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "optimal" and out["verified"] is True
    assert "trf_hbm" not in out["plan"]["layouts"]  # (given: not a choice)
    assert out["plan"]["layouts"]["source_hbm"] in ("m![M, K]", "m![K, M]")
    assert out["cycles"] == out["schedule"]["makespan"] == out["lower_bound"]
    events = json.loads(trace.read_text())["traceEvents"]
    named = {ev["name"] for ev in events if ev.get("ph") == "X"}
    assert {"load_trf", "load_source"} <= named
    # the run against numpy.einsum, the user's operands in the einsum's letter order
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 32)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((8, 32)).astype(ml_dtypes.bfloat16)
    p = api.load(path)
    got = api.run(p, {"source": a, "trf": b}).arrays["destination"]
    want = np.einsum("mk,nk->mn", a.astype(np.float32), b.astype(np.float32))
    assert got.shape == (4, 8)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("moves, where", [
    ("{source: tape}", "moves.source"),
    ("{source: {tier: dm, element: 'm![M, K]'}}", "moves.source"),
    ("{trf: {tier: hbm, element: 'm![M, K]'}}", "moves.trf.element"),
    ("{weights: hbm}", "moves.weights"),
])
def test_a_wrong_moves_block_is_a_located_error(tmp_path, moves, where):
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(f"""\
        format: 1
        name: bad
        kind: contraction
        dtype: bf16
        axes: {{M: 4, N: 8, K: 32}}
        einsum: 'MK,NK->MN'
        moves: {moves}
        """))
    r = subprocess.run([sys.executable, "-m", "tcplan", "solve", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stdout + r.stderr
    assert where in r.stderr and "Traceback" not in r.stderr


def test_every_candidate_is_placed_on_a_chips_units():
    """Every candidate's Cluster holds at most 2 values and its Slice at most 256 (a
    Slice padded on its last digit held 16,384), and they hold ``units`` values."""
    for text, axes in [("VMK,NK->VMN", {"V": 32, "M": 32, "N": 8, "K": 32}),
                       ("K,NK->N", {"N": 2048, "K": 1024}),
                       ("HD,HTD->HT", {"H": 16, "T": 128, "D": 128})]:
        e = _einsum(text)
        for c in cs.candidates(e, axes, "bf16"):
            cl, sl = parse(c.dims["cluster"], axes), parse(c.dims["slice"], axes)
            assert cl.size <= 2 and sl.size <= 256, c.describe()
            live = int((cl.evaluate()[1] == 0).sum()) * int((sl.evaluate()[1] == 0).sum())
            assert live == c.units, c.describe()


def test_unpadded_keeps_the_positions_that_hold_data():
    axes = {"A": 4, "B": 8}
    for text, want in [("m![A # 8]", "m![A]"), ("m![A, B # 16]", "m![A, B]"),
                       ("m![B / 2, 1 # 4]", "m![B / 2, 1]"), ("m![A, B]", "m![A, B]")]:
        m = parse(text, axes)
        u = m.unpadded()
        assert u.text() == want
        held = m.evaluate()
        assert u.size == int((held[1] == 0).sum())


def test_merging_a_view_of_one_element_writes_through():
    a = np.zeros(4)
    (v,) = strided.merged(np.lib.stride_tricks.as_strided(a[2:], (), ()))
    v[...] = 5
    assert a.tolist() == [0, 0, 5, 0]


GEMV = """\
format: 1
name: dm_given
kind: contraction
dtype: bf16
axes: {{N: 1024, K: 128}}
einsum: 'K,NK->N'
moves:
  source: {source}
  trf: hbm
  result: dm
"""


def _solve(tmp_path, source: str) -> subprocess.CompletedProcess:
    path = tmp_path / "p.yaml"
    path.write_text(GEMV.format(source=source))
    return subprocess.run([sys.executable, "-m", "tcplan", "solve", str(path), "--json"],
                          capture_output=True, text=True)


def test_an_operand_given_in_dm_fixes_the_streams_cluster_and_slice(tmp_path):
    r = _solve(tmp_path, "{tier: dm, cluster: 'm![N / 512]', "
                         "slice: 'm![N / 4 % 128, 1 # 2]', element: 'm![K / 2, K % 2]'}")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["verified"] is True and out["status"] == "optimal"
    axes = {"N": 1024, "K": 128}
    from tcplan.model.mapping import same_holding
    assert same_holding(parse(out["mapping"]["slice"], axes),
                        parse("m![N / 4 % 128, 1 # 2]", axes))
    assert same_holding(parse(out["mapping"]["cluster"], axes), parse("m![N / 512]", axes))
    assert "source_dm" not in out["plan"]["layouts"]  # (given: not a choice)


def test_a_dm_layout_no_candidate_holds_is_named(tmp_path):
    """The Element holds half of K: no candidate puts that on a slice."""
    r = _solve(tmp_path, "{tier: dm, cluster: 'm![N / 512]', "
                         "slice: 'm![N / 4 % 128, 1 # 2]', element: 'm![K % 64]'}")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "contraction-fixed" in r.stdout + r.stderr


@pytest.mark.parametrize("source", [
    "{tier: dm, element: 'm![K]'}",
    "{tier: hbm, slice: 'm![N / 4 % 128, 1 # 2]'}",
])
def test_a_dm_layout_half_given_is_a_located_error(tmp_path, source):
    r = _solve(tmp_path, source)
    assert r.returncode == 2 and "moves.source" in r.stdout + r.stderr, r.stdout + r.stderr



def test_a_contraction_op_in_a_graph_plans_its_mapping_under_each_layout():
    """problems/graphs/contraction_op.yaml: the op's cycles are its own graph's makespan
    (the TRF's fill, then the contraction's path), planned under each of w's two orders;
    the graph's makespan is the load then the op; verified end to end."""
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "problems/graphs/contraction_op.yaml"
    r = api.solve(api.load(path))
    assert r.status == "optimal" and r.verified is True, r.text()
    gp = r.plan
    cyc = {row.problem.name: row.cycles for row in gp.ops}
    assert gp.schedule.makespan == cyc["load_w"] + cyc["gemv"]
    op = next(row for row in gp.ops if row.problem.name == "gemv")
    inner = op.plan.plan.ops
    names = [o.problem.name for o in inner]
    icyc = dict(zip(names, (o.cycles for o in inner)))
    sub = max(icyc[n] for n in ("fetch_trf", "collect_trf", "to_trf"))
    main = max(icyc[n] for n in ("fetch_source", "collect_source", "contract",
                                 "commit_result") if n in icyc)
    assert cyc["gemv"] == sub + main  # (no DMA inside: the fill, then the main path)
    # the op's plan is the least over every candidate holding the DM layouts given
    p = op.problem
    every, _ = cs.family(p.spec.einsum, p.axes, p.dtype,
                         lambda c: cs.matches(c, p.spec.fixed, p.axes)
                         and cm.given_dm(c, p.spec.einsum, p.axes, p.dtype, p.spec.moves))
    spans = []
    for c in every:
        ev = cs.evaluate(c, p.spec.einsum, p.axes, p.dtype)
        if ev.plan is not None:
            t = cm._timed(ev, p.spec.einsum, p.axes, p.dtype, p.spec.moves,
                          Options(verify="none"), "brute")
            if isinstance(t, cm.Timed):
                spans.append(t.makespan)
    assert spans and cyc["gemv"] == min(spans)


def test_a_contraction_ops_result_is_the_accumulators_type_or_the_operands(tmp_path):
    import pathlib
    src = (pathlib.Path(__file__).resolve().parents[1] /
           "problems/graphs/contraction_op.yaml").read_text()
    path = tmp_path / "g.yaml"
    path.write_text(src.replace(", dtype: f32, address: 16384", ", dtype: i32, address: "
                                "16384"))
    r = subprocess.run([sys.executable, "-m", "tcplan", "solve", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "tensors.y" in r.stderr and "f32 or bf16" in r.stderr, \
        r.stderr


def test_a_result_cast_back_to_bf16_is_the_rounded_einsum(tmp_path):
    """destination in bf16: the op's graph casts the f32 result (Cast Engine) and trims it
    before the Commit; the values are numpy.einsum's rounded to bf16 (within one bf16
    step of the f32 sum's order)."""
    import pathlib
    src = (pathlib.Path(__file__).resolve().parents[1] /
           "problems/graphs/contraction_op.yaml").read_text()
    path = tmp_path / "g.yaml"
    path.write_text(src.replace(", dtype: f32, address: 16384", ", dtype: bf16, address: 16384"))
    p = api.load(path)
    r = api.solve(p)
    assert r.status == "optimal" and r.verified is True, r.text()
    op = next(row for row in r.plan.ops if row.problem.name == "gemv")
    kinds = [o.problem.kind for o in op.plan.plan.ops]
    assert kinds[-3:] == ["cast", "commit_trim", "commit"]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1024, 128)).astype(ml_dtypes.bfloat16)  # (x over N, K: copies)
    x[:] = x[0]
    w = rng.standard_normal((1024, 128)).astype(ml_dtypes.bfloat16)
    got = api.run(p, {"x": x, "w_hbm": w}).arrays["y"].astype(np.float64)
    ref = np.einsum("k,nk->n", x[0].astype(np.float64), w.astype(np.float64))
    assert got.shape == (1024,)
    assert np.all(np.abs(got - ref) <= 2.0 ** -7 * np.abs(ref) + 1e-3)


def test_a_contracted_axis_the_trf_cannot_take_a_flit_at_a_time_is_a_located_error(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("format: 1\nname: k40\nkind: contraction\ndtype: bf16\n"
                    "axes: {M: 4, N: 8, K: 40}\neinsum: 'MK,NK->MN'\nmoves: {source: hbm}\n")
    r = subprocess.run([sys.executable, "-m", "tcplan", "solve", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "moves" in r.stderr and "pad K to a multiple of 16" in \
        r.stderr, r.stderr
