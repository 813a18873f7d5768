"""Which HBM address bits each Element digit lands on (model/hbm_bits.py), against the
addresses themselves."""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
from hypothesis import given, settings, strategies as st

from tcplan.model.hbm_bits import bit_report, bit_role, element_spans, moved_by
from tcplan.planner.cli import main
from tcplan.planner.spec import load_problem, load_problem_text

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_example_5_puts_a_digit_it_never_moves_on_the_stack_bit():
    """The seed's Example 5 loses half its bandwidth: bit 8 holds D / 256, and only D % 256
    is moved (docs/decisions.md item 75)."""
    p = load_problem(ROOT / "problems/seed/dma_example_5.yaml")
    rows = {r["bit"]: r for r in bit_report(p.tensors["source"],
                                            moved_by(p.tensors["destination"]))}
    assert rows[8]["role"] == "stack" and rows[8]["holds"] == "D / 256"
    assert rows[8]["varies"] is False
    assert [rows[b]["holds"] for b in (9, 10, 11)] == ["C % 2", "C / 2 % 2", "C / 4"]
    assert all(rows[b]["varies"] for b in range(9, 21))


def test_example_4_moves_the_stack_bit_and_rows_on_a():
    p = load_problem(ROOT / "problems/seed/dma_example_4.yaml")
    rows = {r["bit"]: r for r in bit_report(p.tensors["source"],
                                            moved_by(p.tensors["destination"]))}
    assert rows[8]["holds"] == "C / 256 % 2" and rows[8]["varies"]
    assert [rows[b]["holds"] for b in range(21, 27)] == [
        "A % 2", "A / 2 % 2", "A / 4 % 2", "A / 8 % 2", "A / 16 % 2", "A / 32"]
    assert "row" in rows[21]["role"] and "channel 0 hash" in rows[21]["role"]
    assert bit_role(13) == "channel 0 hash, bank group" and bit_role(17) == "bank"


ORDER = st.permutations(["A", "B", "C"])
SIZES = st.tuples(*[st.sampled_from([2, 4, 8, 16, 64]) for _ in range(3)])


@settings(max_examples=60, deadline=None)
@given(ORDER, SIZES, st.sampled_from(["i8", "bf16", "f32"]),
       st.sampled_from([0, 1 << 24, 3 << 20]))
def test_each_reported_bit_is_the_named_digit_in_every_address(order, sizes, dtype, address):
    check_bits(order, sizes, dtype, address)


def test_carries_past_the_top_digit_are_said():
    """8 MiB at 3 MiB: the base address's carries reach bit 23, above every digit."""
    check_bits(("A", "B", "C"), (128, 128, 128), "f32", 3 << 20)


def check_bits(order, sizes, dtype, address):
    """Brute force over every position: bit b of the byte address equals bit k of the axis
    coordinate the report names (``X / 2**k % 2``), for every bit a digit occupies."""
    axes = ", ".join(f"{a}: {n}" for a, n in zip("ABC", sizes))
    text = (f"kind: layout\ndtype: {dtype}\naxes: {{{axes}}}\ntensors:\n  t: {{tier: hbm, "
            f"address: {address}, element: 'm![{', '.join(order)}]'}}\n")
    t = load_problem_text(text, "<bits>").tensors["t"]
    el = t.dims["element"]
    coords, _ = el.evaluate()
    addr = address + np.arange(el.size, dtype=np.int64) * t.elem_bytes
    seen = 0
    for r in bit_report(t):
        bit, holds = r["bit"], r["holds"]
        got = (addr >> bit) & 1
        if holds.startswith("address bit") and "carries" in holds:
            assert got.min() != got.max(), r  # a carry from the digits below crosses it
            continue
        if holds.startswith("address bit"):
            assert (got == int(holds.split()[-1])).all(), r
            continue
        if "carries" in holds:
            continue
        axis, *rest = holds.split()
        sub = int(rest[1]) if len(rest) > 1 and rest[0] == "/" else 1
        assert (got == (coords[axis] // sub) % 2).all(), (order, sizes, dtype, r)
        seen += 1
    assert seen or max(s.hi for s in element_spans(t)) <= 8


def test_a_digit_not_a_power_of_two_is_said_to_mix_its_bits():
    t = load_problem_text("kind: layout\ndtype: i8\naxes: {A: 6, B: 512}\ntensors:\n  t: "
                          "{tier: hbm, element: 'm![A, B]'}\n", "<mix>").tensors["t"]
    rows = {r["bit"]: r for r in bit_report(t)}
    assert "mix" in rows[9]["holds"] and rows[9]["holds"].startswith("A")


def test_lower_prints_and_returns_the_bits():
    out = io.StringIO()
    assert main(["lower", str(ROOT / "problems/seed/dma_example_5.yaml")], stdout=out) == 0
    assert "bit 8 (stack) <- D / 256 (fixed in this transfer)" in out.getvalue()
    out = io.StringIO()
    assert main(["lower", str(ROOT / "problems/seed/dma_example_5.yaml"), "--json"],
                stdout=out) == 0
    bits = json.loads(out.getvalue())["hbm_bits"]
    assert set(bits) == {"source"} and bits["source"][0] == {
        "bit": 8, "role": "stack", "holds": "D / 256", "varies": False}
