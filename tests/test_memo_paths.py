"""The faster paths of cold planning give what the paths they replace gave: the HBM decode
and the bank rows of model/cost.py, a command side's sample shared across bases, the held
indices kept on a mapping, the CP-SAT model without ortools' aliases, the pool's order."""

import numpy as np
import pytest

from tcplan.model import cost
from tcplan.model import hardware as hw
from tcplan.model.mapping import axis, held_indices, join


def _decode_bit_by_bit(addr):
    ch = np.zeros_like(addr)
    for i, b in enumerate(hw.HBM_CHANNEL_BITS):
        v = np.zeros_like(addr)
        for off in hw.HBM_CHANNEL_XOR_OFFSETS:
            v ^= (addr >> (b + off)) & 1
        ch |= v << i
    return ((addr >> hw.HBM_STACK_BIT) & 1) * 16 + ch


def _bank_rows_sorted(channel, bank, row):
    bank_of = channel * cost.HBM_BANKS + bank
    span = int(row.max()) + 1 if row.size else 1
    per = np.bincount(np.unique(bank_of * span + row) // span,
                      minlength=cost.HBM_CHANNELS * cost.HBM_BANKS).reshape(
        cost.HBM_CHANNELS, cost.HBM_BANKS)
    return (per > 0).sum(axis=1).astype(float), per.max(axis=1).astype(float)


@pytest.mark.parametrize("rows", [1, 3, cost.BANK_ROWS_DENSE, cost.BANK_ROWS_DENSE + 1, 900])
@pytest.mark.parametrize("n", [0, 1, 5000])
def test_decode_and_bank_rows_match_the_direct_reading(rows, n):
    rng = np.random.default_rng(rows * 7 + n)
    addr = rng.integers(40 << 21, (40 + rows) << 21, n, dtype=np.int64)
    channel, bank, row = cost._decode(addr)
    assert np.array_equal(channel, _decode_bit_by_bit(addr))
    got, want = cost._bank_rows(channel, bank, row), _bank_rows_sorted(channel, bank, row)
    assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want))


def test_a_side_sample_is_the_same_from_every_base_of_its_offset():
    outer = ((4, 1024, 96), (3, 80, 8))
    for base in (0, 72, 256 * 9 + 72, 1 << 33):
        low = base % cost.REQUEST_BYTES
        paddr, req, partial, rpp = cost._side_sample(outer, low, 1, 2, 12, 40)
        direct = cost._packet_addr_at(outer, base, 1, 2, np.arange(12))
        assert np.array_equal(paddr + base - low, direct)
        r, p = cost._requests(direct, 40)
        assert np.array_equal(req + base - low, r) and np.array_equal(partial, p)
        assert np.array_equal(rpp, cost._per_packet_requests(direct, 40))
    with pytest.raises(ValueError):
        paddr[0] = 1  # (read-only: shared by every caller)


def test_held_indices_are_kept_read_only():
    m = join([axis("A", 6).pad(8), axis("B", 3)])
    (c1, h1), (c2, h2) = held_indices(m), held_indices(m)
    assert h1 is h2 and c1 == c2 and c1 is not c2  # (the dict is the caller's own)
    assert int(h1.sum()) == 18
    with pytest.raises(ValueError):
        h1[0] = False


def test_the_fast_model_solves_and_clones_as_cp_model_does():
    from ortools.sat.python import cp_model

    from tcplan.planner import cpsat
    m = cpsat.model()
    x = m.new_int_var(0, 9, "x")
    m.add(x >= 4)
    m.minimize(x)
    c = m.clone()
    assert type(c) is type(m) and isinstance(c, cp_model.CpModel)
    for model in (m, c):
        sv = cpsat.solver(1.0, 0)
        assert sv.solve(model) == cp_model.OPTIMAL and sv.objective_value == 4


def test_the_pool_hands_out_the_slow_kinds_first():
    from types import SimpleNamespace

    from tcplan.planner.op_pool import _slow_first
    todo = [(SimpleNamespace(kind=k), {}) for k in ("fetch", "dma", "chain", "contraction",
                                                     "dma")]
    assert _slow_first(todo) == [3, 1, 4, 0, 2]


def test_the_pool_hands_out_an_ops_many_layouts_before_one_search():
    """An op's rows are one task: a DMA over 36 layouts (a decode layer's load_attn, 1.6 s)
    goes before a contraction's one search (a few tenths), a DMA over 4 after it, and
    ties keep their order."""
    from types import SimpleNamespace

    from tcplan.planner.op_pool import _slow_first
    rows = [SimpleNamespace(layouts=[{}] * n) for n in (4, 36, 12)]
    todo = [(SimpleNamespace(kind="dma"), rows[0]), (SimpleNamespace(kind="contraction"), {}),
            (SimpleNamespace(kind="dma"), rows[1]), (SimpleNamespace(kind="chain"), {}),
            (SimpleNamespace(kind="dma"), rows[2]), (SimpleNamespace(kind="contraction"), {})]
    assert _slow_first(todo) == [2, 4, 1, 5, 0, 3]
