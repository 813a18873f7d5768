"""HBM row opens as real HBM behaves (docs/decisions.md item 73, amending item 12): a first
open overlaps the other banks' transfers (16/3 cycles), a re-open of a row the bank already
closed serializes (40 cycles), and a bank opens at most one row per 40 cycles."""

from __future__ import annotations

import pathlib

import numpy as np
from hypothesis import given, settings, strategies as st

from tcplan.model.cost import (HBM_CHANNELS, channel_time, dma_cycles, estimate, floor, lower_bound,
                        row_opens)
from tcplan.planner.lowering import lower_problem
from tcplan.planner.spec import load_problem, load_problem_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
S, R = 16 / 3, 40  # a request's service time; a serialized row open


def opens(reqs):
    """row_opens over (channel, bank, row) requests given in issue order."""
    c, b, r = (np.array(x, np.int64) for x in zip(*reqs))
    return row_opens(c, b, r, np.arange(len(reqs)))


def test_first_opens_overlap():
    # channel 3: 8 banks, one row each, 4 requests per bank: 8 first opens, all overlapped
    ro = opens([(3, bank, 7) for bank in range(8) for _ in range(4)])
    assert ro.requests[3] == 32 and ro.first[3] == 8 and ro.reopens[3] == 0
    assert ro.bank_opens[3] == 1
    assert ro.times()[3] == 32 * S  # 170.7: no row cost at all
    assert ro.times()[:3].sum() == 0


def test_a_reopen_serializes():
    # one bank: 20 requests in row 0, 20 in row 1, 20 back in row 0: the return re-opens
    ro = opens([(0, 5, 0)] * 20 + [(0, 5, 1)] * 20 + [(0, 5, 0)] * 20)
    assert (ro.first[0], ro.reopens[0], ro.bank_opens[0]) == (2, 1, 3)
    assert ro.times()[0] == 60 * S + (R - S)  # 354.7 = 320 + 34.7
    # the same requests grouped by row: no re-open
    ro = opens([(0, 5, 0)] * 40 + [(0, 5, 1)] * 20)
    assert (ro.first[0], ro.reopens[0], ro.times()[0]) == (2, 0, 60 * S)


def test_the_bank_floor():
    # one bank asked for ten rows, one request each: 10 first opens, no re-open, but one
    # open per 40 cycles: 400 cycles, not 10 x 16/3
    ro = opens([(1, 2, row) for row in range(10)])
    assert (ro.first[1], ro.reopens[1], ro.bank_opens[1]) == (10, 0, 10)
    assert ro.times()[1] == 10 * R
    # the floor binds per bank, not per channel: ten banks with a row each are bus-bound
    ro = opens([(1, bank, 0) for bank in range(10)])
    assert ro.times()[1] == max(10 * S, R)


def brute(reqs):
    """The reading request by request, with Python dicts and sets."""
    open_row, seen = {}, set()
    req = [0] * HBM_CHANNELS
    first, reopen = [0] * HBM_CHANNELS, [0] * HBM_CHANNELS
    per_bank = {}
    for c, b, r in reqs:
        req[c] += 1
        if open_row.get((c, b)) != r:
            open_row[(c, b)] = r
            per_bank[(c, b)] = per_bank.get((c, b), 0) + 1
            if (c, b, r) in seen:
                reopen[c] += 1
            else:
                seen.add((c, b, r))
                first[c] += 1
    most = [max([n for (c2, _), n in per_bank.items() if c2 == c], default=0)
            for c in range(HBM_CHANNELS)]
    return [max(req[c] * S + reopen[c] * (R - S), most[c] * R) for c in range(HBM_CHANNELS)]


requests = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 4)),
                    min_size=1, max_size=80)


@settings(max_examples=300, deadline=None)
@given(requests)
def test_row_opens_equal_a_request_by_request_brute_force(reqs):
    assert np.allclose(opens(reqs).times(), brute(reqs))


@settings(max_examples=300, deadline=None)
@given(requests, st.randoms(use_true_random=False))
def test_visiting_each_row_once_never_costs_more(reqs, rnd):
    """The same requests: grouped so each bank visits each of its rows once, against any
    interleaving."""
    grouped = sorted(reqs)
    shuffled = list(reqs)
    rnd.shuffle(shuffled)
    assert (opens(grouped).times() <= opens(shuffled).times() + 1e-9).all()
    assert opens(grouped).reopens.sum() == 0


HBM_PROBLEM = """kind: dma
dtype: i8
axes: {{A: {a}, B: {b}, C: {c}}}
source: {{tier: hbm, element: 'm![A, B, C]'}}
destination: {{tier: hbm, address: {dst}, element: 'm![A, B, C]'}}
stream: {{time: '{time}', packet: 'm![C]'}}
"""


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([16, 32, 64, 128]), st.sampled_from([64, 256, 1024, 2048]),
       st.sampled_from([256, 512, 1024]))
def test_a_row_major_stream_never_costs_more_than_one_that_interleaves_rows(a, b, c):
    """Over random tensors: the stream that walks the source row by row (Time A, B) against
    the one that jumps between rows (Time B, A), same packets, same engine."""
    dst = 1 << (a * b * c - 1).bit_length() + 1
    cost = {}
    for time in ("m![A, B]", "m![B, A]"):
        p = load_problem_text(HBM_PROBLEM.format(a=a, b=b, c=c, dst=dst, time=time), "<rows>")
        cost[time] = dma_cycles(lower_problem(p)).cycles
    assert cost["m![A, B]"] <= cost["m![B, A]"]


def test_example_4_first_opens_and_reopens_in_the_breakdown():
    """The given stream: 16,384 requests on the hottest channel; its 32 banks open each of
    their 64 rows once (2,048 first opens, overlapped) and re-open rows 14,336 times (the
    stream leaves each row after one 1 KiB packet and comes back): 500 + 16,384 x 16/3 +
    14,336 x (40 - 16/3) = 584,863, within 12% of the seed's 655,860 (which counts the
    2,048 first opens at 40 too: 655,860 - 584,863 = 70,997 = 2,048 x 34.67)."""
    r = dma_cycles(lower_problem(load_problem(ROOT / "problems/seed/dma_example_4.yaml")))
    assert r.hbm["requests"] == 16_384 and r.hbm["first_opens"] == 2_048
    assert r.hbm["reopens"] == 14_336
    assert r.cycles == int(np.ceil(500 + 16_384 * S + 14_336 * (R - S))) == 584_863
    assert abs(r.cycles - 655_860) <= 0.12 * 655_860
    assert abs(655_860 - r.cycles - 2_048 * (R - S)) < 1
    assert any("re-opens" in x and "14,336 x 40 cycles" in x for x in r.penalties)
    j = r.to_json()["hbm"]
    assert (j["first_opens"], j["reopens"]) == (2_048, 14_336)


def test_estimate_floor_and_bound_follow_the_reading():
    """Example 4 given: the estimate within 10% of the full model; its floor and lower bound
    are the bus floor, 500 + 16,384 x 16/3 = 87,881.3 (every bank opens its 64 rows once,
    2,560 cycles: far below)."""
    plan = lower_problem(load_problem(ROOT / "problems/seed/dma_example_4.yaml"))
    full = dma_cycles(plan).cycles
    assert abs(estimate(plan).cycles - full) <= 0.10 * full
    assert floor(plan) == lower_bound(plan) == 87_882
    assert channel_time(16_384, 0, 64) == 16_384 * S


def test_verify_reports_the_hottest_channel():
    import io
    import json

    from tcplan.planner.cli import main
    ex2 = str(ROOT / "problems/seed/dma_example_1.yaml")
    out = io.StringIO()
    assert main(["verify", ex2], stdout=out) == 0
    assert "HBM: hottest channel" in out.getvalue() and "first row opens" in out.getvalue()
    out = io.StringIO()
    assert main(["verify", ex2, "--json"], stdout=out) == 0
    h = json.loads(out.getvalue())["breakdown"]["hbm"]
    # HBM -> HBM, 16 KiB: 64 read and 64 write requests over the channels
    assert set(h) >= {"chip", "channel", "requests", "first_opens", "reopens"}
    assert h["reopens"] == 0 and h["first_opens"] >= 1
