"""Mapping expressions: docs/hardware.md section 1 examples, errors, printing, vectorized
evaluation."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tcplan.model.mapping import (LIVE, OOB, TOP, ZERO, BOTTOM, Cell, equivalent, parse, parse_axes)
from tcplan.model.rules import TcplanError


def live(**index):
    return Cell("live", index)


# ---- docs/hardware.md section 1 --------------------------------------------------------------
def test_split_equals_whole_axis():
    ax = {"A": 8, "B": 512}
    split = parse("m![B / 64, B % 64]", ax)
    whole = parse("m![B]", ax)
    assert split.size == whole.size == 512
    for i in range(512):
        assert split.cell(i) == whole.cell(i) == live(B=i)
    assert equivalent(split, whole)


def test_nested_split_position_67_is_b_97():
    m = parse("m![B / 64, B % 32, B / 32 % 2]", {"A": 8, "B": 512})
    assert m.cell(67) == live(B=97)
    # the reference's formula: position 64 i + 2 j + k holds B = 64 i + j + 32 k
    for i in range(8):
        for j in range(32):
            for k in range(2):
                assert m.cell(64 * i + 2 * j + k) == live(B=64 * i + j + 32 * k)


def test_padding_row_alignment():
    m = parse("m![C, D # 64]", {"C": 13, "D": 61})
    assert m.size == 13 * 64
    assert m.cell(0) == live(C=0, D=0)
    assert m.cell(60) == live(C=0, D=60)
    for i in (61, 62, 63):
        assert m.cell(i) == Cell("top")
    assert m.cell(64) == live(C=1, D=0)
    assert m.cell(13 * 64) == Cell("oob")


def test_resize_keeps_first_positions():
    m = parse("m![C, D = 2]", {"C": 2, "D": 3})
    assert m.size == 4
    assert [m.cell(i) for i in range(5)] == [
        live(C=0, D=0), live(C=0, D=1), live(C=1, D=0), live(C=1, D=1), Cell("oob")]


def test_number_broadcasts_and_one_is_identity():
    ax = {"A": 4}
    m = parse("m![A, 3]", ax)
    assert m.size == 12
    assert [m.cell(i) for i in range(3)] == [live(A=0)] * 3
    assert m.cell(5) == live(A=1)
    assert equivalent(parse("m![1, A, 1]", ax), parse("m![A]", ax))
    assert parse("m![1]", ax).cell(0) == Cell("live", {})
    assert parse("m![1]", ax).cell(1) == Cell("oob")


def test_padding_kinds():
    ax = {"A": 3}
    assert parse("m![A # 4]", ax).cell(3) == Cell("top")
    assert parse("m![A #{*} 4]", ax).cell(3) == Cell("top")
    assert parse("m![A #{0} 4]", ax).cell(3) == Cell("zero")
    assert parse("m![A #{!} 4]", ax).cell(3) == Cell("bottom")
    assert parse("m![A # 4]", ax) == parse("m![A #{*} 4]", ax)


def test_pair_padding_of_major_wins():
    m = parse("m![A #{0} 4, B #{!} 4]", {"A": 3, "B": 3})
    assert m.cell(3 * 4 + 3) == Cell("zero")  # both padded: the major (A) kind wins
    assert m.cell(0 * 4 + 3) == Cell("bottom")
    assert m.cell(3 * 4 + 0) == Cell("zero")


def test_same_axis_coordinates_add():
    m = parse("m![A / 4, A % 4]", {"A": 16})
    assert m.cell(9) == live(A=9)
    m = parse("m![A % 4, A / 4]", {"A": 16})
    assert m.cell(9) == live(A=4 * 1 + 2)  # position 9 = (A%4 = 2, A/4 = 1)


def test_modulo_and_stride_of_padded_and_resized():
    ax = {"A": 7}
    m = parse("(A # 8) / 2", ax)
    assert [m.cell(i) for i in range(4)] == [live(A=0), live(A=2), live(A=4), live(A=6)]
    m = parse("A # 10 / 2", ax)  # postfix operators are left-associative
    assert [m.cell(i) for i in range(5)] == [live(A=0), live(A=2), live(A=4), live(A=6),
                                             Cell("top")]
    m = parse("A % 7 = 3", ax)
    assert m.size == 3 and m.cell(2) == live(A=2)


def test_grammar_variants_parse_to_equal_mappings():
    ax = {"A": 8, "ChipAxis": 4, "B": 16}
    base = parse("m![ChipAxis, A / 2, B % 4]", ax)
    for text in ("ChipAxis, A / 2, B % 4", "m![ChipAxis, A / 2, B % 4,]",
                 "[ChipAxis, (A / 2), B % 4]", "m![(ChipAxis, A / 2), B % 4]",
                 "  m![ ChipAxis ,A/2,B%4 ]  "):
        assert parse(text, ax) == base, text


def test_trailing_comma_and_brackets():
    ax = {"A": 4, "B": 2}
    assert parse("m![A, B,]", ax) == parse("m![A, B]", ax)
    assert parse("[A, B]", ax) == parse("(A, B)", ax)
    assert parse("m![[A, B] / 2]", ax).cell(1) == live(A=1, B=0)


# ---- errors --------------------------------------------------------------------------
@pytest.mark.parametrize("text,code,column", [
    ("m![A, ", "parse-error", 7),
    ("m![A, )]", "parse-error", 7),
    ("m![A / ]", "parse-error", 8),
    ("m![A B]", "parse-error", 6),
    ("m![A @ 2]", "parse-error", 6),
    ("A,, B", "parse-error", 3),
    ("m![A]]", "parse-error", 6),
    ("(A", "parse-error", 3),
    ("m![Q]", "unknown-axis", 4),
    ("m![A, Zed / 2]", "unknown-axis", 7),
])
def test_syntax_and_axis_errors_name_the_column(text, code, column):
    with pytest.raises(TcplanError) as ei:
        parse(text, {"A": 8, "B": 4})
    err = ei.value
    assert err.code == code
    assert f"column {column}" in err.message
    assert err.kind == "input"


@pytest.mark.parametrize("text,fragment", [
    ("m![A / 3]", "3 does not divide the size 8"),
    ("m![A % 5]", "5 does not divide the size 8"),
    ("m![A # 4]", "padding smaller than the inner size 8"),
    ("m![A = 9]", "resize beyond the size 8"),
    ("m![0]", "not a size"),
])
def test_bad_mappings(text, fragment):
    with pytest.raises(TcplanError) as ei:
        parse(text, {"A": 8})
    assert ei.value.code == "bad-mapping"
    assert fragment in ei.value.message


def test_non_digit_mapping_has_no_factors():
    m = parse("m![(A, B) / 3]", {"A": 3, "B": 8})  # legal, but not a digit decomposition
    assert m.cell(1) == live(A=0, B=3)
    with pytest.raises(TcplanError) as ei:
        m.items()
    assert ei.value.code == "bad-mapping"


def test_parse_axes():
    assert parse_axes("N=4,C=3, H = 8") == {"N": 4, "C": 3, "H": 8}
    assert parse_axes("axes![A = 8, B = 512]") == {"A": 8, "B": 512}
    for bad in ("N=4,C", "N=0", "N=4,N=2", "4=N"):
        with pytest.raises(TcplanError) as ei:
            parse_axes(bad)
        assert ei.value.code == "bad-request"


# ---- printing ------------------------------------------------------------------------
@pytest.mark.parametrize("text,canonical", [
    ("A,B", "m![A, B]"),
    ("m![ (A, B) / 2 ]", "m![(A, B) / 2]"),
    ("A #{*} 16", "m![A # 16]"),
    ("m![A % 4 = 3 #{0} 4, 1 #{!} 2]", "m![A % 4 = 3 #{0} 4, 1 #{!} 2]"),
    ("(A / 2) % 2", "m![A / 2 % 2]"),
    ("m![]", "m![1]"),
])
def test_canonical_text(text, canonical):
    ax = {"A": 8, "B": 4}
    m = parse(text, ax)
    assert m.text() == canonical
    assert parse(m.text(), ax) == m


# ---- vectorized == per position; factors == tree ------------------------------------
AXES = {"A": 6, "B": 4, "C": 8, "D": 3}


def _term(draw):
    """A random item of the grammar (valid by construction)."""
    name = draw(st.sampled_from(sorted(AXES)))
    size = AXES[name]
    text = name
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["/", "%", "=", "#", "#{0}", "#{!}"]))
        divs = [d for d in range(1, size + 1) if size % d == 0]
        if op == "/":
            d = draw(st.sampled_from(divs))
            text, size = f"({text}) / {d}", size // d
        elif op == "%":
            d = draw(st.sampled_from(divs))
            text, size = f"({text}) % {d}", d
        elif op == "=":
            d = draw(st.integers(1, size))
            text, size = f"({text}) = {d}", d
        else:
            d = draw(st.integers(size, size + 3))
            text, size = f"({text}) {op} {d}", d
    return text


@st.composite
def mappings(draw):
    items = [_term(draw) for _ in range(draw(st.integers(1, 3)))]
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), str(draw(st.integers(1, 3))))
    return "m![" + ", ".join(items) + "]"


@settings(max_examples=300, deadline=None)
@given(mappings())
def test_vectorized_equals_per_position(text):
    m = parse(text, AXES)
    coords, status = m.evaluate()
    names = {LIVE: "live", TOP: "top", ZERO: "zero", BOTTOM: "bottom"}
    for i in range(m.size):
        c = m.cell(i)
        assert c.status == names[int(status[i])]
        if c.live:
            assert {a: int(coords[a][i]) for a in coords} == dict(c.index)
    # explicit positions, including out-of-bounds ones
    pos = np.array([-1, 0, m.size - 1, m.size, m.size + 5])
    _, st2 = m.evaluate(pos)
    assert st2[0] == OOB and st2[3] == OOB and st2[4] == OOB
    assert st2[1] == status[0] and st2[2] == status[-1]


@settings(max_examples=300, deadline=None)
@given(mappings())
def test_round_trip_printing(text):
    m = parse(text, AXES)
    again = parse(m.text(), AXES)
    assert again == m
    assert again.text() == m.text()
    assert equivalent(again, m)


def _eval_by_factors(m):
    """Independent evaluation of the factor decomposition: mixed-radix digits."""
    fs = m.factors
    assert math.prod(f.size for f in fs) == m.size
    out = []
    for i in range(m.size):
        rest, status, index = i, "live", {a: 0 for a in m.used_axes}
        digits = []
        for f in reversed(fs):
            digits.append(rest % f.size)
            rest //= f.size
        digits.reverse()
        for f, d in zip(fs, digits):
            kind = f.pad_kind(d)
            if kind != LIVE:
                if status == "live":
                    status = {TOP: "top", ZERO: "zero", BOTTOM: "bottom"}[kind]
            elif f.axis is not None:
                index[f.axis] += f.lo * d
        out.append(Cell(status, index if status == "live" else None))
    return out


@settings(max_examples=300, deadline=None)
@given(mappings())
def test_factor_decomposition_matches_semantics(text):
    m = parse(text, AXES)
    try:
        m.items()
    except TcplanError as e:  # not every legal mapping is a product of digits
        assert e.code == "bad-mapping"
        return
    assert _eval_by_factors(m) == [m.cell(i) for i in range(m.size)]


def test_factor_description():
    m = parse("m![A / 4, B, A % 4 = 3 # 4]", {"A": 16, "B": 5})
    d = m.describe_factors()
    assert [(x["axis"], x["lo"], x["hi"], x["iterations"], x["size"]) for x in d] == [
        ("A", 4, 16, 4, 4), ("B", 1, 5, 5, 5), ("A", 1, 4, 3, 4)]
    assert d[2]["padding"] == [[4, "top"]]


def test_vectorized_sixteen_million_positions():
    ax = {"A": 256, "B": 256, "C": 256}
    m = parse("m![B / 16, A, C # 256, B % 16]", ax)
    assert m.size == 16_777_216
    coords, status = m.evaluate()
    assert coords["B"].shape == (16_777_216,)
    i = 12_345_678
    assert m.cell(i) == Cell("live", {a: int(coords[a][i]) for a in ("B", "A", "C")})


def test_digit_ranges_of_facts_section_1():
    ax = {"A": 64}
    # A / s % m carries [s, s*m); A / s carries [s, size(A)); A % m carries [1, m)
    for text, lo, hi in (("A / 4 % 8", 4, 32), ("A / 4", 4, 64), ("A % 8", 1, 8)):
        (f,) = parse(text, ax).describe_factors()
        assert (f["lo"], f["hi"]) == (lo, hi), text


@settings(max_examples=300, deadline=None)
@given(mappings())
def test_coalesce_factors_keeps_every_cell(text):
    from tcplan.model.mapping import Mapping, coalesce_factors
    m = parse(text, AXES)
    try:
        fs = m.factors
    except TcplanError:
        return
    merged = coalesce_factors(fs)
    assert len(merged) <= len(fs)
    shadow = Mapping(m.raw, m.axes, m.size)
    shadow._factors = merged
    assert _eval_by_factors(shadow) == [m.cell(i) for i in range(m.size)]


def test_coalesce_factors_merges_whole_axis_splits():
    from tcplan.model.mapping import coalesce_factors
    fs = coalesce_factors(parse("m![A / 3, A % 3]", {"A": 12}).factors)
    assert [(f.axis, f.lo, f.radix, f.count, f.size) for f in fs] == [("A", 1, 12, 12, 12)]
    # an inner digit placed outermost is not position-contiguous: nothing merges
    fs = coalesce_factors(parse("m![A % 3, A / 3]", {"A": 12}).factors)
    assert len(fs) == 2
