"""Broadcast moves (issue 24, item 1; model/broadcast.py, docs/decisions.md item 92): a
destination that carries an axis the source does not holds one copy of the source per value
of that axis, planned with repeated reads and verified copy by copy; a destination asking
for values of an axis the source holds only in part is refused before planning."""

from __future__ import annotations

import itertools
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tcplan
from tcplan.model import hardware as hw
from tcplan.model.broadcast import broadcast_axes, partial_violations
from tcplan.model.rules import TcplanError

ROOT = Path(__file__).resolve().parents[1]
Q = ROOT / "problems/planning/qk_q_broadcast.yaml"


def _problem(axes: str, source: str, destination: str, stream: str = "{time: free, packet: "
             "free}", dtype: str = "bf16") -> str:
    return (f"format: 1\nname: b\nkind: dma\ndtype: {dtype}\naxes: {axes}\n"
            f"source: {source}\ndestination: {destination}\nstream: {stream}\n")


def test_the_query_broadcast_plans_at_its_bound_and_verifies():
    """The issue's reproducer: q [N, G, D] into 64 slice groups.  Derived here: the 4 KiB
    source is 16 requests of 256 B, on 16 channels (bits 8 to 11 vary, the stack bit among
    them), each read 64 times (once per copy): 64 requests on the hottest channel, 64 x 16/3
    = 341.3 cycles; the 64 copies land on slices 0, 4, ..., 252 of cluster 0, 8 in each of
    its 8 DMNs: 8 x 4,096 B / 128 B per cycle = 256 cycles; the channel is the bottleneck:
    500 + 341.3 = 842 (rounded up)."""
    solved = tcplan.solve(Q)
    assert solved.status == "optimal" and solved.verified is True
    channel = 64 * 16 / 3
    dmn = 8 * 4096 / 128
    assert channel > dmn
    assert solved.cycles == solved.lower_bound == int(np.ceil(500 + channel)) == 842
    assert solved.record.checked == 64 * 8 * 2 * 128  # every element of every copy
    # reads repeat: the copies' digit is a stride-0 read entry, written 4 slices apart
    plan = solved.plan
    k = plan.terms.index("T / 8")
    assert plan.unified[k][1] == 0 and plan.unified[k][2] * 2 == 4 * hw.DM_SLICE_STRIDE


def test_every_copy_holds_the_source():
    """tcplan run on the user's q: every slice group's DM holds q, and nothing else."""
    problem = tcplan.load(Q)
    q = (np.arange(8 * 2 * 128, dtype=np.float32).reshape(8, 2, 128) % 97 + 1).astype(
        ml_dtypes.bfloat16)
    dest = tcplan.run(problem, inputs={"source": q}).arrays["destination"]  # over N, G, D, T (T held at its multiples of 8)
    assert dest.shape == (8, 2, 128, 512)
    for t in range(0, 512, 8):
        assert np.array_equal(dest[..., t], q), t
    assert not dest[..., 1].any()  # T % 8 is not carried: those indices are not held


def test_what_a_broadcast_destination_holds():
    """executor.run.held_by, the values a check compares with: the source's q over every
    axis, the same q at every key position T (the axis the destination repeats)."""
    from tcplan.executor.run import held_by
    problem = tcplan.load(Q)
    plan = tcplan.solve(problem).plan
    q = np.arange(8 * 2 * 128).reshape(8, 2, 128)
    held = held_by(q, plan.source, plan.destination, problem.axes)
    assert held.shape == (8, 2, 128, 512)
    assert np.array_equal(held, np.repeat(q[..., None], 512, axis=3))
    assert held_by(q, plan.source, plan.source, {"N": 8, "G": 2, "D": 128}) is q


@pytest.mark.parametrize("destination, extra", [
    ("{tier: dm, slice: 'm![[R, A / 4] # 64]', element: 'm![A % 4, B]'}", ["R"]),
    ("{tier: dm, slice: 'm![A # 64]', element: 'm![R, B]'}", ["R"]),
    ("{tier: dm, slice: 'm![[A / 2, R / 2] # 64]', element: 'm![R % 2, A % 2, B]'}", ["R"]),
    ("{tier: hbm, address: 65536, element: 'm![A, R, B]'}", ["R"]),
])
def test_small_broadcasts_plan_and_verify(destination, extra):
    text = _problem("{A: 8, B: 64, R: 4}", "{tier: hbm, element: 'm![A, B]'}", destination)
    p = tcplan.loads(text)
    assert broadcast_axes(p.tensors["source"], p.tensors["destination"]) == extra
    solved = tcplan.solve(p)
    assert solved.status == "optimal" and solved.verified is True, solved.text()
    # every copy of every element was checked: the destination holds 8 x 64 x 4 elements
    assert solved.record.checked == 8 * 64 * 4


def test_a_given_broadcast_stream_verifies_and_a_missing_copy_does_not():
    base = ("{A: 8, B: 64, R: 4}", "{tier: hbm, element: 'm![A, B]'}",
            "{tier: dm, slice: 'm![A # 64]', element: 'm![R, B]'}")
    ok = tcplan.verify(tcplan.loads(_problem(*base, "{time: 'm![A, R]', packet: 'm![B]'}")))
    assert ok.verified and ok.checked == 8 * 4 * 64
    # a stream that writes only R = 0 leaves copies unwritten: write-coverage, before running
    with pytest.raises(TcplanError) as e:
        tcplan.lower(tcplan.loads(_problem(*base, "{time: 'm![A]', packet: 'm![B]'}")))
    assert e.value.code == "write-coverage"


@pytest.mark.parametrize("source, destination", [
    ("m![A % 4, B]", "m![A, B]"),          # the source is A < 4; the destination asks for all
    ("m![A = 6, B]", "m![A, B]"),          # a resized source: A < 6
    ("m![A / 2, B]", "m![A, B]"),          # the source holds even A only
    ("m![A = 6, B]", "m![A / 2 = 4, A % 2, B]"),  # asks for A = 6, 7
])
def test_a_destination_asking_for_values_the_source_lacks_is_refused(source, destination):
    text = _problem("{A: 8, B: 64}", f"{{tier: hbm, element: '{source}'}}",
                    f"{{tier: hbm, address: 65536, element: '{destination}'}}")
    with pytest.raises(TcplanError) as e:
        tcplan.loads(text, "p.yaml")
    assert e.value.code == "broadcast-partial" and e.value.kind == "input"
    msg = str(e.value.to_json()["message"])
    assert msg.startswith("p.yaml:7:") and "carries A" in msg


@pytest.mark.parametrize("source, destination", [
    ("m![A, B]", "m![A % 4, B]"),      # a sub-tensor move (docs/hardware.md R9)
    ("m![A = 6, B]", "m![A % 4, B]"),  # asks only for values the source holds
    ("m![A / 2, A % 2, B]", "m![A, B]"),
    ("m![A / 2, B]", "m![A / 2 % 2, B]"),
])
def test_a_destination_within_the_source_is_accepted(source, destination):
    text = _problem("{A: 8, B: 64}", f"{{tier: hbm, element: '{source}'}}",
                    f"{{tier: hbm, address: 65536, element: '{destination}'}}")
    p = tcplan.loads(text)
    assert partial_violations(p.tensors["source"], p.tensors["destination"], "x") == []


def test_value_sets_against_brute_force():
    """The check's value sets (a prefix fast path, explicit sets) against a brute-force walk
    of every position of small mappings."""
    from tcplan.model.broadcast import _holds_all
    from tcplan.model.mapping import parse
    axes = {"A": 12}  # (values past 11 are padding, not indices)
    terms = ["A", "A % 4", "A / 4", "A / 2", "A % 2", "A / 3", "A % 3", "A = 5", "A / 4 = 2",
             "A % 6 = 4", "A # 16", "A # 16 / 4", "A # 16 % 4", "A # 14 / 2"]
    def values(text):
        m = parse(f"m![{text}]", axes)
        c, st = m.evaluate()
        return {int(v) for v, s in zip(c.get("A", np.zeros(m.size, int)), st) if s == 0
                and v < 12}
    for s, d in itertools.product(terms, terms):
        src, dst = parse(f"m![{s}]", axes), parse(f"m![{d}]", axes)
        fs = [f for f in src.factors if f.axis and f.count > 1]
        fd = [f for f in dst.factors if f.axis and f.count > 1]
        if not fs or not fd:
            continue
        assert _holds_all(fs, fd, 12) == (values(d) <= values(s)), (s, d)


def test_a_graph_broadcast_and_its_store():
    text = """format: 1
name: g
kind: graph
dtype: bf16
axes: {N: 8, G: 2, D: 128, T: 512}
tensors:
  q_hbm: {tier: hbm, element: 'm![N, G, D]', given: true}
  q_dm: {tier: dm, slice: 'm![T / 8, 1 # 4]', element: 'm![N, G, D]'}
  q_back: {tier: hbm, address: 65536, element: 'm![T / 8, N, G, D]'}
ops:
  - {name: load, kind: dma, source: q_hbm, destination: q_dm, stream: {time: free, packet: free}}
  - {name: store, kind: dma, source: q_dm, destination: q_back, stream: {time: free, packet: free}}
"""
    g = tcplan.loads(text)
    solved = tcplan.solve(g)
    assert solved.status == "optimal" and solved.verified is True
    q = np.asarray(np.random.default_rng(1).integers(0, 60000, (8, 2, 128)), np.uint16)
    q = q.view(ml_dtypes.bfloat16)
    back = tcplan.run(g, inputs={"q_hbm": q}).arrays["q_back"]  # over N, G, D, T
    for t in range(0, 512, 8):  # (as bits: random bit patterns hold NaNs)
        assert np.array_equal(back[..., t].view(np.uint16), q.view(np.uint16)), t
    # the store's source carries T / 8 and the load's source does not: a read of fewer axes
    # than the op's written tensor is a broadcast, a store of fewer is refused
    bad = text.replace("q_back: {tier: hbm, address: 65536, element: 'm![T / 8, N, G, D]'}",
                       "q_back: {tier: hbm, address: 65536, element: 'm![N, G, D]'}")
    with pytest.raises(TcplanError) as e:
        tcplan.loads(bad, "g.yaml")
    assert e.value.code == "bad-problem" and "carries the axes" in str(e.value.to_json())


# ---- a broadcast written with a bare number (issue 31) -----------------------------------
BARE = """kind: dma
dtype: bf16
axes: {F: 64%EXTRA%}
source: {tier: hbm, element: 'm![F]'}
destination: {tier: dm, slice: '%SLICE%', element: 'm![F]'}
stream: {time: free, packet: free}
"""


def test_a_bare_number_in_a_destination_is_a_broadcast():
    """``Slice m![2, 1 # 128]`` (two copies, as furiosa-opt writes a broadcast) plans and
    verifies as the same destination with the copies named (``m![R, 1 # 128]``, R = 2),
    every copy checked (before: refused by write-coverage); the copies' axis is named
    ``copies`` and joins the problem's axes."""
    bare = tcplan.loads(BARE.replace("%EXTRA%", "").replace("%SLICE%", "m![2, 1 # 128]"))
    named = tcplan.loads(BARE.replace("%EXTRA%", ", R: 2").replace("%SLICE%",
                                                                   "m![R, 1 # 128]"))
    assert bare.axes == {"F": 64, "copies": 2}
    assert bare.tensors["destination"].dims["slice"].text() == "m![copies, 1 # 128]"
    a, b = tcplan.solve(bare), tcplan.solve(named)
    assert a.status == b.status == "optimal" and a.verified and b.verified
    assert a.cycles == b.cycles
    assert a.to_json()["checked"] == b.to_json()["checked"] == 64 * 2
