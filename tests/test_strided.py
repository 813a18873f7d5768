"""The executor's strided fast path (executor/strided.py, issue 16) against the index-array
path it replaces, which stays the reference: the same memories byte for byte, the same write
counts, the same tensors read back; chunked with a tiny chunk so that the chunking is
exercised; and every mismatch still found and named."""

from __future__ import annotations

import itertools
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tcplan.executor.run as run
import tcplan.executor.strided as strided
from tcplan.executor.memory import Space
from tcplan.model.limits import product
from tcplan.model.rules import TcplanError
from tcplan.planner.lowering import lower_problem
from tcplan.planner.spec import load_problem

ROOT = pathlib.Path(__file__).resolve().parents[1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(-12, 12)), min_size=1, max_size=4),
       st.sampled_from([1, 2, 4]))
def test_injective_never_says_yes_to_a_view_that_writes_twice(dims, eb):
    """Every index of the view enumerated: when ``injective`` says so, no two elements
    share a byte."""
    shape = tuple(n for n, _ in dims)
    strides = tuple(s * eb for _, s in dims)
    if not strided.injective(shape, strides, eb):
        return
    seen = set()
    for idx in itertools.product(*[range(n) for n in shape]):
        start = sum(i * s for i, s in zip(idx, strides))
        span = set(range(start, start + eb))
        assert not seen & span, (shape, strides, idx)
        seen |= span


def test_dm_views_step_whole_slices_and_stay_inside_one():
    """A stride of whole 4 MiB windows steps whole backed 512 KiB slices; an access whose
    extremes are past a slice's backed part is the memory's error; one whose extremes are
    fine but whose middle leaves the backed part (4 MiB - 256 KiB, then 256 KiB) is no
    view, and the index path finds the bad address."""
    dm = Space("dm", 1 << 30, 1 << 25)
    v = strided.view(dm, 0, (64, 2), (1 << 22, 1 << 18), 1)
    assert v is not None and v.strides == (1 << 19, 1 << 18, 1)
    with pytest.raises(TcplanError, match="backed part"):
        strided.view(dm, 0, (64, 3), (1 << 22, 1 << 18), 1)
    assert strided.view(dm, 0, (2, 2), ((1 << 22) - (1 << 18), 1 << 18), 1) is None
    with pytest.raises(TcplanError, match="backed part"):
        dm.read(np.array([(1 << 22) - (1 << 18)]), 1)


def _small_dma_problems():
    out = []
    for f in sorted((ROOT / "problems/seed").glob("*.yaml")) + \
            sorted((ROOT / "problems/planning").glob("*.yaml")):
        p = load_problem(f)
        if p.kind not in ("dma", "pcie") or p.spec.hops > 1:
            continue
        if product(p.axes.values()) > 1 << 18:
            continue
        out.append(f)
    return out


def _run(p, plan, fast: bool, monkeypatch):
    """place, execute, verify and read back, through the views (tiny chunks) or the index
    arrays only; returns the memories and the tensor read back."""
    with monkeypatch.context() as m:
        if fast:
            m.setattr(strided, "CHUNK", 1024)
        else:
            m.setattr(run, "_place_fast", lambda *a: False)
            m.setattr(run, "_verify_fast", lambda *a: None)
            m.setattr(run, "_read_fast", lambda *a: False)
            m.setattr(strided, "copy_command", lambda *a: False)
        dst = plan.destination
        T = run.tensor_values(p.axes, plan.source.dtype, 0)
        mem, moved = run.simulate(plan, p.axes, T)
        checked = run.verify(mem, dst, p.axes, T, moved)["checked"]
        back = run.read_tensor(mem, dst, p.axes, T.dtype)
    return mem, moved, checked, back


@pytest.mark.parametrize("path", _small_dma_problems(), ids=lambda f: f.stem)
def test_views_and_index_arrays_agree_byte_for_byte(path, monkeypatch):
    p = load_problem(path)
    plan = lower_problem(p)
    a = _run(p, plan, True, monkeypatch)
    b = _run(p, plan, False, monkeypatch)
    assert a[1:3] == b[1:3]
    assert np.array_equal(a[3], b[3])
    assert set(a[0].spaces) == set(b[0].spaces)
    for (tier, chip), s in a[0].spaces.items():
        o = b[0].spaces[tier, chip]
        at = _footprint(p, plan, tier, chip, s)
        assert np.array_equal(s.data[at], o.data[at]), (tier, chip)
        assert np.array_equal(s.writes[at], o.writes[at]), (tier, chip)


def _footprint(p, plan, tier: str, chip: int, space) -> np.ndarray:
    """Every physical byte of a space the plan's tensors hold (a whole 256 MiB DM space,
    read, would become resident: reading an untouched page maps it here)."""
    parts = [np.zeros(0, np.int64)]
    for t in (plan.source, plan.destination):
        if t.tier != tier:
            continue
        for c, addr, _, _ in run.positions(t, p.axes):
            if c == chip and addr.size:
                phys = space.physical(addr)
                parts.append((phys[:, None] + np.arange(t.elem_bytes)).ravel())
    return np.unique(np.concatenate(parts))


def test_a_wrong_byte_is_still_found_and_named(monkeypatch):
    """After the move, one destination element changed: the views see a difference, the
    index path names the index and the address."""
    p = load_problem(ROOT / "problems/seed/dma_example_2.yaml")
    plan = lower_problem(p)
    dst = plan.destination
    T = run.tensor_values(p.axes, plan.source.dtype, 0)
    mem, moved = run.simulate(plan, p.axes, T)
    monkeypatch.setattr(strided, "CHUNK", 4096)
    space = mem.space(dst.tier, 0)
    live = np.flatnonzero(space.writes)
    space.data[live[len(live) // 2]] ^= 0xFF
    with pytest.raises(TcplanError, match="verify-mismatch|holds"):
        run.verify(mem, dst, p.axes, T, moved)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=5), st.integers(0, 2**32 - 1))
def test_merged_views_hold_the_same_elements_in_the_same_order(shape, seed):
    """Random views (some dimensions contiguous, some not, some reversed) of one shape:
    merged, they list the same elements in the same order, with no more dimensions."""
    rng = np.random.default_rng(seed)
    base = np.arange(4096, dtype=np.uint8)
    views = []
    for _ in range(2):
        strides, step = [], 1
        for n in reversed(shape):
            strides.insert(0, int(step * rng.choice([1, 1, -1])))
            step *= n * int(rng.choice([1, 1, 2]))
        start = sum(-(n - 1) * s for n, s in zip(shape, strides) if s < 0)
        views.append(np.lib.stride_tricks.as_strided(base[start:], tuple(shape),
                                                     tuple(strides)))
    got = strided.merged(*views)
    for g, v in zip(got, views):
        assert g.ndim <= v.ndim
        assert np.array_equal(g.reshape(-1), v.reshape(-1))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.integers(1, 40))
def test_pieces_cover_every_element_once_in_order(shape, chunk):
    """Cut into pieces of at most ``chunk`` elements, a view is every element once, in
    order, piece by piece."""
    a = np.arange(int(np.prod(shape))).reshape(shape)[..., ::-1]  # not contiguous
    old = strided.CHUNK
    strided.CHUNK = chunk
    try:
        got = [p for (p,) in strided.pieces(a)]
    finally:
        strided.CHUNK = old
    assert all(p.size <= chunk for p in got) or chunk < a.shape[-1]
    assert np.array_equal(np.concatenate([p.reshape(-1) for p in got]), a.reshape(-1))
