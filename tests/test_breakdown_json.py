"""The cycle breakdown in JSON carries numbers (issue 17, item 4): every HBM channel used
(requests, first opens, re-opens, busy cycles), every engine's bytes and read/write cycles,
every DMN's bytes and cycles; the prose penalties stay beside them."""

from __future__ import annotations

import io
import json
import pathlib

from tcplan.planner.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]


def breakdown(name: str) -> dict:
    out = io.StringIO()
    assert main(["verify", str(ROOT / f"problems/seed/{name}.yaml"), "--json"],
                stdout=out) == 0
    return json.loads(out.getvalue())["breakdown"]


def test_example_5s_numbers():
    """1 MiB read by 8 engines in 256-byte packets: 4,096 requests on the 16 channels of one
    stack (bit 8 holds D / 256, never moved), 256 each, busy 256 x 16/3 = 1,365.3 cycles,
    32 rows first opened per channel; each engine moves 131,072 B, 512 cycles a side; 16
    DMNs of 65,536 B each at 128 B/cycle."""
    b = breakdown("dma_example_5")
    ch = b["hbm_channels"]
    assert len(ch) == 16 and {c["requests"] for c in ch} == {256}
    assert sum(c["requests"] for c in ch) == 4_096 == 2**20 // 256
    assert {c["busy_cycles"] for c in ch} == {round(256 * 16 / 3, 1)}
    assert {c["reopens"] for c in ch} == {0}
    assert len(b["engines"]) == 8 and {e["bytes"] for e in b["engines"]} == {131_072}
    assert {(e["read_cycles"], e["write_cycles"]) for e in b["engines"]} == {(512.0, 512.0)}
    assert len(b["dmns"]) == 16 and {d["bytes"] for d in b["dmns"]} == {65_536}
    assert {d["cycles"] for d in b["dmns"]} == {512.0}
    assert b["penalties"] and "16 of 32" in " ".join(b["penalties"])


def test_example_4s_hot_channel_is_in_the_list():
    """128 MiB read from HBM into DM: 2**27 / 256 = 524,288 requests, 16,384 on each of the
    32 channels; the hottest one's row opens as the seed's Example 4 reads them."""
    b = breakdown("dma_example_4")
    hot = b["hbm"]
    row = next(c for c in b["hbm_channels"]
               if (c["chip"], c["channel"]) == (hot["chip"], hot["channel"]))
    assert (row["requests"], row["first_opens"], row["reopens"]) == (16_384, 2_048, 14_336)
    assert len(b["hbm_channels"]) == 32
    assert sum(c["requests"] for c in b["hbm_channels"]) == 2**27 // 256


def test_a_dmn_shared_by_several_engines_moves_128_bytes_a_cycle_for_all():
    """docs/hardware.md section 4: a DMN moves 128 B/cycle for its 32 slices, whichever
    engines use them (docs/decisions.md item 91).  attention_v_head_major's destination,
    Slice m![H, S / 64], is 64 slices of cluster 0: DMNs 0 and 1.  Whatever the plan, each
    takes 512 x 8 x 64 x 2 / 2 = 262,144 bytes: 2,048 cycles, plus one start-up."""
    import tcplan
    from tcplan.model.cost import dma_cycles, estimate, lower_bound
    solved = tcplan.solve(ROOT / "problems/planning/attention_v_head_major.yaml",
                          verify="none")
    plan = solved.plan
    report = dma_cycles(plan)
    per_dmn = 512 * 8 * 64 * 2 // 2
    assert [(d["dmn"], d["bytes"]) for d in report.dmns] == [(0, per_dmn), (1, per_dmn)]
    assert report.cycles == estimate(plan).cycles == lower_bound(plan) == \
        500 + per_dmn // 128
    assert report.bottleneck == "a DMN shared by several engines"
    users = {tuple(e["engine"]) for e in report.engines if e["bytes"]}
    assert len(users) > 2  # more engines than DMNs: their bytes add up in each DMN
    assert any("from 4 engine(s)" in p for p in report.penalties)
