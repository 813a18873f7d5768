"""Mappings built as values (issue 28, item 1): each construction operation of
model/mapping.py against its post-condition, checked position by position on the reference
semantics (``Mapping.cell``) and against the parser (the same mapping written as text)."""

import itertools

import pytest
from hypothesis import assume, given, settings, strategies as st

from tcplan.model.mapping import (BOTTOM, ZERO, Cell, Mapping, axis, equivalent,
                                  from_factor, from_factors, join, number, parse, split_inner)
from tcplan.model.rules import TcplanError

from test_mapping import AXES, _eval_by_factors, mappings


def _cells(m: Mapping) -> list[Cell]:
    return [m.cell(i) for i in range(m.size)]


def _held(m: Mapping) -> list[Cell]:
    """Cells with zero coordinates dropped: what a position holds, whichever axes the
    mapping names (``A % 1`` holds what ``1`` holds)."""
    return [Cell(c.status, {a: v for a, v in c.index.items() if v}) if c.live else c
            for c in _cells(m)]


def _factorable(m: Mapping) -> bool:
    try:
        m.factors
    except TcplanError as e:
        assert e.code == "bad-mapping"
        return False
    return True


def _pair_cell(a: Cell, b: Cell) -> Cell:
    """The cell of the pair (a, b): the major part's padding wins, coordinates add."""
    if not a.live:
        return a
    if not b.live:
        return b
    index = dict(a.index)
    for k, v in b.index.items():
        index[k] = index.get(k, 0) + v
    return Cell("live", index)


# ---- the notation's operators ---------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(mappings(), st.data())
def test_operators_equal_the_parsed_text(text, data):
    m = parse(text, AXES)
    divs = [d for d in range(1, m.size + 1) if m.size % d == 0]
    d = data.draw(st.sampled_from(divs))
    r = data.draw(st.integers(1, m.size))
    p = data.draw(st.integers(m.size, m.size + 4))
    for made, op, n in ((m.div(d), "/", d), (m / d, "/", d), (m.mod(d), "%", d),
                        (m % d, "%", d), (m.resize(r), "=", r), (m.pad(p), "#", p),
                        (m.pad(p, ZERO), "#{0}", p), (m.pad(p, BOTTOM), "#{!}", p)):
        written = parse(f"m![[{m.body()}] {op} {n}]", AXES)
        assert made == written and made.text() == written.text()
        assert made.size == written.size


@settings(max_examples=200, deadline=None)
@given(mappings(), st.data())
def test_operators_keep_their_cells(text, data):
    m = parse(text, AXES)
    cells = _cells(m)
    d = data.draw(st.sampled_from([d for d in range(1, m.size + 1) if m.size % d == 0]))
    assert _cells(m / d) == [cells[i * d] for i in range(m.size // d)]
    assert _cells(m % d) == cells[:d]
    r = data.draw(st.integers(1, m.size))
    assert _cells(m.resize(r)) == cells[:r]
    p = data.draw(st.integers(m.size, m.size + 4))
    assert _cells(m.pad(p)) == cells + [Cell("top")] * (p - m.size)


def test_operator_errors_are_the_parsers():
    a = axis("A", 6)
    with pytest.raises(TcplanError) as e:
        a / 4
    assert e.value.code == "bad-mapping" and "4 does not divide the size 6" in str(e.value)
    assert "column" not in str(e.value)  # built, not read: no column to name
    with pytest.raises(TcplanError) as e:
        a.pad(4)
    assert e.value.code == "bad-mapping" and "padding smaller" in str(e.value)
    with pytest.raises(TcplanError) as e:
        axis("not an axis", 3)
    assert e.value.code == "bad-request"


# ---- join, terms, take, drop ----------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(mappings(), mappings())
def test_join_pairs_cells_outer_major(t1, t2):
    a, b = parse(t1, AXES), parse(t2, AXES)
    assume(a.size * b.size <= 4096)  # (cell by cell in Python: keep each case small)
    ab = join([a, b])
    assert ab.size == a.size * b.size
    ca, cb = _cells(a), _cells(b)
    assert _cells(ab) == [_pair_cell(x, y) for x, y in itertools.product(ca, cb)]
    assert ab == parse(f"m![[{a.body()}], [{b.body()}]]", AXES)


@settings(max_examples=200, deadline=None)
@given(mappings())
def test_terms_join_back_and_take(text):
    m = parse(text, AXES)
    terms = m.terms
    assert join(terms) == m and join(terms).text() == m.text()
    for i in range(len(terms) + 1):
        assert m.take(i).terms == terms[i:] or (i == len(terms) and m.take(i) == number(1))
        assert join([m.take(0, i), m.take(i)]) == m or i in (0, len(terms))
    assert m.drop(terms[0]) == m.take(1)  # the first occurrence only
    assert m.drop(number(7)) == m  # (no such term: nothing to drop)


def test_join_of_nothing_is_the_identity_and_sizes_must_agree():
    assert join([]) == parse("m![1]", {}) and join([]).size == 1
    assert join([axis("A", 4)]) is axis("A", 4)  # one value per mapping, as parse keeps
    with pytest.raises(TcplanError) as e:
        join([axis("A", 4), axis("A", 8)])
    assert e.value.code == "bad-mapping"


def test_a_built_mapping_is_the_parsed_one():
    ax = {"S": 512, "H": 16, "D": 64}
    time = join([axis("S", 512) / 64, axis("S", 512) % 64, axis("H", 16) % 2])
    assert time == parse("m![S / 64, S % 64, H % 2]", ax)
    assert time.text() == "m![S / 64, S % 64, H % 2]"
    assert (axis("D", 64) % 32).pad(40).text() == "m![D % 32 # 40]"
    assert join([number(1), axis("D", 64)]).text() == "m![1, D]"


# ---- factors --------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(mappings())
def test_from_factor_holds_the_digit(text):
    m = parse(text, AXES)
    if not _factorable(m):
        return
    for f in m.factors:
        made = from_factor(f, AXES)
        shadow = Mapping(made.raw, made.axes, made.size)
        shadow._factors = (f,)  # the digit itself, evaluated as mixed-radix digits
        assert _cells(made) == _eval_by_factors(shadow)


@settings(max_examples=300, deadline=None)
@given(mappings())
def test_from_factors_holds_the_mapping(text):
    m = parse(text, AXES)
    if not _factorable(m):
        return
    assert equivalent(from_factors(m.factors, AXES), m)


def test_from_factor_of_a_padded_axis_pads_it_first():
    ax = {"A": 14}
    (outer, inner) = parse("m![A # 16 / 4, A # 16 % 4]", ax).factors
    assert from_factor(outer, ax).text() == "m![A # 16 / 4]"
    assert from_factor(inner, ax).text() == "m![A # 16 % 4]"
    assert from_factor(parse("m![A = 5 # 8]", ax).factors[0], ax).text() == "m![A = 5 # 8]"


# ---- split at a boundary --------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(mappings(), st.data())
def test_split_inner_keeps_every_cell(text, data):
    m = parse(text, AXES)
    if not _factorable(m):
        return
    n = data.draw(st.sampled_from([d for d in range(1, m.size + 1) if m.size % d == 0]))
    try:
        outer, inner = split_inner(m, n)
    except TcplanError as e:
        assert e.code == "bad-mapping"
        # refused only where the cut falls inside a digit that does not split there: its
        # size is no multiple of what is left to cut, or its live values end part-way
        rest = n
        for f in reversed(m.factors):
            if rest % f.size:
                break
            rest //= f.size
        assert f.size % rest or (f.count < f.size and f.count % rest) or any(
            end % rest for end, _ in f.pads)
        return
    assert inner.size == n and outer.size * n == m.size
    assert _held(join([outer, inner])) == _held(m)


def test_split_inner_at_a_flit():
    ax = {"K": 64, "N": 8}
    outer, inner = split_inner(parse("m![N, K]", ax), 16)  # 16 bf16 = one 32-byte flit
    assert (outer.text(), inner.text()) == ("m![N, K / 16]", "m![K % 16]")
    with pytest.raises(TcplanError) as e:
        split_inner(parse("m![K = 5 # 8]", ax), 4)
    assert e.value.code == "bad-mapping"
    with pytest.raises(TcplanError):
        split_inner(parse("m![K]", ax), 3)


# ---- moving a term between a tensor's dimensions --------------------------------------------
def _held_indices(t) -> list[tuple]:
    """Every index the tensor holds (one per live position of all its dimensions), sorted."""
    from collections import Counter
    out: Counter = Counter()
    dims = list(t.dims.values())
    for pos in itertools.product(*(range(m.size) for m in dims)):
        cells = [m.cell(i) for m, i in zip(dims, pos)]
        if all(c.live for c in cells):
            index: dict[str, int] = {}
            for c in cells:
                for a, v in c.index.items():
                    index[a] = index.get(a, 0) + v
            out[tuple(sorted((a, v) for a, v in index.items() if v))] += 1
    return sorted(out.items())


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_move_keeps_what_the_tensor_holds(data):
    from tcplan.model.tiers import Tensor
    ax = {"A": 4, "B": 6, "C": 2}
    slice_ = parse(data.draw(st.sampled_from(["m![A / 2]", "m![C, A / 2]", "m![1]"])), ax)
    time = parse(data.draw(st.sampled_from(["m![B]", "m![B / 2, C]", "m![B % 3 # 4]"])), ax)
    packet = parse("m![A % 2]" if "A" in slice_.used_axes else "m![A]", ax)
    t = Tensor("s", "stream", "i8", {"slice": slice_, "time": time, "packet": packet})
    src = data.draw(st.sampled_from(["slice", "time"]))
    dst = "packet" if src == "time" else data.draw(st.sampled_from(["time", "packet"]))
    term = data.draw(st.sampled_from(t.dims[src].terms))
    moved = t.move(term, src, dst, inner=data.draw(st.booleans()))
    assert moved.dims[src].size * moved.dims[dst].size == t.dims[src].size * t.dims[dst].size
    assert _held_indices(moved) == _held_indices(t)
    assert t.dims[src].terms.count(term) == moved.dims[src].terms.count(term) + 1 or \
        moved.dims[src] == number(1)


def test_move_a_slice_digit_to_time():
    from tcplan.model.tiers import Tensor
    ax = {"H": 16, "S": 64}
    t = Tensor("s", "stream", "bf16", {"slice": parse("m![H / 2]", ax),
                                        "time": parse("m![S, H % 2]", ax),
                                        "packet": parse("m![1]", ax)})
    moved = t.move(axis("H", 16) / 2, "slice", "time", inner=False)
    assert moved.dims["slice"].text() == "m![1]"
    assert moved.dims["time"].text() == "m![H / 2, S, H % 2]"
    assert t.dims["slice"].text() == "m![H / 2]"  # a value: the original is unchanged
    with pytest.raises(ValueError):
        t.move(axis("S", 64), "slice", "time")
