"""Per-bank HBM figures of the cycle model (issue 17, item 5): every bank's requests, first
row opens and re-opens (``breakdown.hbm_banks``) add up to its channel's figures, and an
independent recount, request by request in pure Python over every address a plan touches
(decoded by model/tiers.py's ``hbm_decode``), gives the same numbers."""

from __future__ import annotations

import itertools
import pathlib
from collections import defaultdict

import pytest

from tcplan.model.cost import dma_cycles
from tcplan.model.tiers import hbm_decode
from tcplan.planner.lowering import lower_problem
from tcplan.planner.spec import load_problem, load_problem_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEEDS = [f"dma_example_{n}" for n in range(1, 7)] + ["pcie_upload", "pcie_download",
                                                      "hbm_to_dm_cluster_padding"]


def breakdown(path: pathlib.Path) -> dict:
    return dma_cycles(lower_problem(load_problem(path))).to_json()


@pytest.mark.parametrize("name", SEEDS)
def test_bank_figures_add_up_to_their_channels(name):
    b = breakdown(ROOT / "problems/seed" / f"{name}.yaml")
    channels = {(c["chip"], c["channel"]): c for c in b.get("hbm_channels", [])}
    banks = {(r["chip"], r["channel"]): r for r in b.get("hbm_banks", [])}
    assert len(banks) == len(b.get("hbm_banks", []))  # one row per channel used
    assert set(banks) == set(channels)
    for key, r in banks.items():
        c = channels[key]
        assert r["banks"] == sorted(set(r["banks"])) and set(r["banks"]) <= set(range(32))
        assert len(r["requests"]) == len(r["first_opens"]) == len(r["reopens"]) == len(
            r["banks"])
        assert min(r["requests"]) > 0  # only banks used
        assert sum(r["requests"]) == c["requests"]
        assert sum(r["first_opens"]) == c["first_opens"]
        assert sum(r["reopens"]) == c["reopens"]
        assert max(f + o for f, o in zip(r["first_opens"], r["reopens"])) == c[
            "most_opens_of_a_bank"]


def test_example_4_bank_by_bank():
    """Example 4: each of the 32 channels' 32 banks takes 512 requests in 64 rows, each row
    opened 7 more times (the stream returns to it after the other A % 32 rows): 64 first
    opens and 448 re-opens a bank, 2,048 and 14,336 a channel."""
    b = breakdown(ROOT / "problems/seed/dma_example_4.yaml")
    assert len(b["hbm_banks"]) == 32
    for r in b["hbm_banks"]:
        assert r["banks"] == list(range(32))
        assert set(r["requests"]) == {512} and set(r["first_opens"]) == {64}
        assert set(r["reopens"]) == {448}
    assert b["cycles"] == 584_863  # unchanged by the per-bank figures


def recount(plan) -> dict[tuple[int, int, int], list[int]]:
    """Per (chip, channel, bank): [requests, first opens, re-opens], request by request.

    Every engine's one command is walked packet by packet (its loops outermost first, the
    packet's contiguous bytes split into the 256-byte blocks they touch); engines issue
    their i-th requests together (in engine order, each engine's read side before its
    write side), and each bank keeps the row of its last request open: a request to another
    row opens one, a first open if the bank never had that row open before."""
    eb = plan.elem_bytes
    issued = []  # (issue index, engine and side, chip, address)
    for n, e in enumerate(plan.engines):
        assert len(e.commands) == 1, "one command per engine keeps the issue order simple"
        c = e.commands[0]
        for k, tier, base, chip in ((1, plan.source.tier, c.read_base, e.read_chip),
                                    (2, plan.destination.tier, c.write_base, e.write_chip)):
            if tier != "hbm":
                continue
            loops = [tuple(x) for x in c.entries]
            if c.packet > 1 and loops[-1][0] == c.packet:
                loops = loops[:-1]  # the packet's own entry: contiguous bytes
            nbytes, i = c.packet * eb, 0
            for idx in itertools.product(*(range(x[0]) for x in loops)):
                addr = base + sum(j * x[k] for j, x in zip(idx, loops)) * eb
                for block in range(addr // 256, (addr + nbytes - 1) // 256 + 1):
                    issued.append((i, 2 * n + k, chip, block * 256))
                    i += 1
    issued.sort()
    counts: dict[tuple[int, int, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    open_row: dict[tuple[int, int, int], int] = {}
    had: set[tuple[tuple[int, int, int], int]] = set()
    for _, _, chip, addr in issued:
        d = hbm_decode(addr)
        bank = (chip, d["global_channel"], 16 * d["slice"] + 4 * d["bank_group"] + d["bank"])
        counts[bank][0] += 1
        if open_row.get(bank) != d["row"]:
            open_row[bank] = d["row"]
            counts[bank][1 if (bank, d["row"]) not in had else 2] += 1
            had.add((bank, d["row"]))
    return dict(counts)


def model_banks(b: dict) -> dict[tuple[int, int, int], list[int]]:
    return {(r["chip"], r["channel"], k): [q, f, o]
            for r in b["hbm_banks"]
            for k, q, f, o in zip(r["banks"], r["requests"], r["first_opens"], r["reopens"])}


# Example 4 at a small size: four engines, each walking C before the rows of A, so every
# bank returns to rows it had closed
SMALL = """kind: dma
dtype: i8
axes: {A: 4, B: 64, C: 32768}
source: {tier: hbm, address: 0, element: 'm![A, B, C]'}
destination: {tier: dm, slice: 'm![B / 16, A, B / 4 % 4]', element: 'm![B % 4, C]'}
stream: {slice: 'm![B / 16]', time: 'm![B % 4, C / 256, B / 4 % 4, A]', packet: 'm![C % 256]'}
"""


@pytest.mark.parametrize("source", ["small", "dma_example_1", "dma_example_5"])
def test_bank_figures_equal_a_request_by_request_recount(source):
    if source == "small":
        problem = load_problem_text(SMALL, "<small>")
    else:
        problem = load_problem(ROOT / "problems/seed" / f"{source}.yaml")
    plan = lower_problem(problem)
    b = dma_cycles(plan).to_json()
    assert model_banks(b) == recount(plan)
    if source == "small":  # the case that matters: re-opens, several engines
        assert len(plan.engines) == 4 and sum(v[2] for v in recount(plan).values()) > 0


def test_example_4_against_the_recount():
    """524,288 requests, one by one (two seconds)."""
    plan = lower_problem(load_problem(ROOT / "problems/seed/dma_example_4.yaml"))
    assert model_banks(dma_cycles(plan).to_json()) == recount(plan)
