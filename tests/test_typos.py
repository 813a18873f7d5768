"""Typos get the word they miss (issue 17, item 5): a near-miss key or `free` says "did you
mean", a missing tier names the key that was meant, an unquoted mapping says to quote it."""

from __future__ import annotations

import pytest

from tcplan.model.rules import TcplanError
from tcplan.planner.spec import load_problem_text

HEAD = """kind: dma
dtype: i8
axes: {A: 64, B: 32}
"""
SRC = "source: {tier: hbm, element: 'm![A, B]'}\n"
DST = "destination: {tier: dm, slice: 'm![A]', element: 'm![B]'}\n"
STREAM = "stream: {time: free, packet: free}\n"


@pytest.mark.parametrize("text,where,words", [
    (HEAD + SRC + DST + "stream: {time: free, packets: free}\n", "6:22",
     "stream.packets: unknown key (did you mean 'packet'?)"),
    (HEAD + SRC + DST + "stream: {time: free, packet: fre}\n", "6:30",
     "'fre' is not a mapping (did you mean 'free'?)"),
    (HEAD + "source: {teir: hbm, element: 'm![A, B]'}\n" + DST + STREAM, "4:9",
     "missing tier ('teir' is not 'tier')"),
    (HEAD + "source: {tier: hbm, adress: 0, element: 'm![A, B]'}\n" + DST + STREAM, "4:21",
     "unknown key (did you mean 'address'?)"),
    (HEAD + "source: {tier: hbm, element: m![A, B]}\n" + DST + STREAM, "4:",
     "a mapping string must be quoted"),
    (HEAD + SRC + DST + STREAM + "bound: {packet_max_bytes: 64}\n", "7:1",
     "unknown key for a dma problem (did you mean 'bounds'?)"),
])
def test_a_typo_is_named_with_the_word_meant(text, where, words):
    with pytest.raises(TcplanError) as e:
        load_problem_text(text, "p.yaml")
    v = e.value.violations[0]
    assert f"p.yaml:{where}" in v.message and words in v.message, v.message


def test_the_fix_for_an_unknown_tensor_key_lists_address_and_dtype():
    with pytest.raises(TcplanError) as e:
        load_problem_text(HEAD + "source: {tier: hbm, adress: 0, element: 'm![A, B]'}\n"
                          + DST + STREAM, "p.yaml")
    fix = e.value.violations[0].fix
    assert "address" in fix and "dtype" in fix, fix
