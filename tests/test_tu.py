"""Fetch and Commit moves (issue 24, item 3; model/tu.py, planner/kinds/tu.py,
planner/tu_search.py, executor/tu.py): the per-slice config with every sequencer rule and
the three of their own, the accesses and cycles of the guide's examples, the longest run on
one DM bank against a brute-force walk, the free stream against every order and packet,
execution and verification, and graphs where a DMA and a Fetch share a DM tensor."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tcplan
from tcplan.model import tu
from tcplan.model.mapping import parse
from tcplan.model.rules import TcplanError
from tcplan.planner.outcome import Found, NoPlan, TimedOut
from tcplan.planner.tu_search import TuRequest, _joined, _packets, _stream, pieces_of, search


def _problem(kind: str, axes: str, element: str, time: str, packet: str, dtype: str = "bf16",
             context: str = "main", slice_: str = "m![1 # 256]", address: int = 0) -> str:
    role = "source" if kind == "fetch" else "destination"
    stream = ("{time: free, packet: free}" if time == "free" else
              f"{{time: '{time}', packet: '{packet}'}}")
    return (f"kind: {kind}\ndtype: {dtype}\naxes: {axes}\n{role}: {{tier: dm, slice: "
            f"'{slice_}', element: '{element}', address: {address}}}\nstream: {stream}\n"
            f"context: {context}\n")


def _verify(*args, **kw):
    return tcplan.verify(tcplan.loads(_problem(*args, **kw)))


# ---- the guide's examples (book: moving-tensors/fetch-engine.md, commit-engine.md) -------
@pytest.mark.parametrize("time, packet, cycles", [
    ("m![A, B]", "m![C # 8]", 15),     # 15 packets of 8 bytes, one 8-byte read each
    ("m![A]", "m![[B, C] # 16]", 3),   # 3 packets of 16 bytes
])
def test_fetch_packet_padding(time, packet, cycles):
    """The same 30-byte f8 tensor (A=3, B=5, C=2) fetched with padded packets: one read per
    packet, so as many cycles as packets; the padding lanes are read, never checked."""
    r = _verify("fetch", "{A: 3, B: 5, C: 2}", "m![A, B, C]", time, packet, dtype="f8e4m3")
    assert r.verified and r.cycles == cycles and r.checked == 30


@pytest.mark.parametrize("axes, element, dtype, entries, packet_bytes", [
    ("{M: 4, K: 2, L: 32}", "m![M, K, L]", "i8", [(4, 64), (2, 32), (32, 1)], 32),
    ("{M: 4, K: 2, W: 8}", "m![K, M, W]", "f32", [(4, 8), (2, 32), (8, 1)], 32),
    ("{M: 4, K: 2, N: 8}", "m![K, M, N]", "i8", [(4, 8), (2, 32), (8, 1)], 8),
])
def test_commit_examples_write_each_packet_at_once(axes, element, dtype, entries,
                                                     packet_bytes):
    """The guide's three commits (no transpose, a transpose, a transpose of a trimmed
    packet): the configs it prints, one write per packet, 8 packets."""
    t = "m![M, K]"
    p = "m![L]" if "L" in axes else "m![W]" if "W" in axes else "m![N]"
    text = _problem("commit", axes, element, t, p, dtype=dtype)
    plan = tcplan.lower(tcplan.loads(text)).plan
    assert plan.config.entries == entries
    assert plan.accesses_per_packet == 1 and plan.config.packet_bytes == packet_bytes
    r = tcplan.verify(tcplan.loads(text))
    assert r.verified and r.cycles == 8


# The guide's i4 tensor m![N, C, H, W] (N=4, C=3, H=4, W=16) fetched with four packets
# (book: moving-tensors/fetch-engine.md, 'Multi-Read Packet'): the sequencer config it
# prints (in elements, so the same for any dtype), max_access_size, read_size, reads per
# packet and cycles.  tcplan's element types are whole bytes (an i4 problem file is refused),
# so the figures are checked where they are computed: the config and the read in bits.
I4_BATCHES = [
    ("m![N, C, H]", "m![W]", [(4, 192), (3, 64), (4, 16), (16, 1)], 16, 16, 1, 48),
    ("m![N, C, H / 2]", "m![H % 2, W]", [(4, 192), (3, 64), (2, 32), (2, 16), (16, 1)],
     32, 32, 1, 24),
    ("m![N, C]", "m![H, W]", [(4, 192), (3, 64), (4, 16), (16, 1)], 64, 64, 1, 12),
    ("m![N]", "m![C, H, W]", [(4, 192), (3, 64), (4, 16), (16, 1)], 192, 64, 3, 12),
]


@pytest.mark.parametrize("time, packet, raw, max_access, read, reads, cycles", I4_BATCHES)
def test_the_guides_i4_multi_read_fetches(time, packet, raw, max_access, read, reads,
                                          cycles):
    from tcplan.model.sequencer import derive_text
    axes = {"N": 4, "C": 3, "H": 4, "W": 16}
    cfg = derive_text(axes, "m![N, C, H, W]", time, packet, "i8", "read", "fetch")
    assert cfg.raw_entries == raw and cfg.max_access_size == max_access
    assert tu.access_of(cfg.max_access_size, 4, "main") == read
    assert tu.reads_per_packet(cfg.packet_size, read) == reads
    assert parse(time, axes).size * reads == cycles


@pytest.mark.parametrize("packet_bytes, reads", [(24, 3), (64, 2), (96, 3), (128, 4)])
def test_a_fetch_packet_over_32_bytes_takes_several_reads(packet_bytes, reads):
    """A contiguous i8 packet of 24 bytes is read 8 bytes at a time (the guide's example: 3
    reads), one of 64, 96 or 128 bytes 32 at a time; the Fetch's cycles are its packets
    times the reads, and it verifies."""
    r = _verify("fetch", f"{{A: 4, B: {packet_bytes}}}", "m![A, B]", "m![A]", "m![B]",
                dtype="i8")
    assert r.verified and r.breakdown["accesses_per_packet"] == reads
    assert r.breakdown["access_bytes"] == packet_bytes // reads and r.cycles == 4 * reads


def test_a_commit_packet_stays_one_write():
    """A Commit keeps the seed's packet sizes (1 to 32 bytes): a 64-byte packet is refused by
    packet-bytes, named for the Commit only."""
    r = _verify("commit", "{A: 4, B: 64}", "m![A, B]", "m![A]", "m![B]", dtype="i8")
    assert r.verified is False and r.error.code == "packet-bytes"


def test_sub_context_reads_8_bytes():
    """The sub context reads 8 bytes at a time: a 32-byte packet takes 4 accesses."""
    main = _verify("fetch", "{A: 64, B: 16}", "m![A, B]", "m![A]", "m![B]")
    sub = _verify("fetch", "{A: 64, B: 16}", "m![A, B]", "m![A]", "m![B]", context="sub")
    assert (main.cycles, sub.cycles) == (64, 256)
    assert sub.breakdown["access_bytes"] == 8 and sub.breakdown["accesses_per_packet"] == 4


def test_a_packet_not_contiguous_in_dm_is_refused():
    """Packet m![A % 2, B] over Element m![A, B # 16] (bf16) is two runs of 8 elements: the
    seed's Fetch/Commit sequencer takes a packet of more than one element only when it is
    contiguous (seed 000 '제약 조건', packet fetch)."""
    r = _verify("fetch", "{A: 4, B: 8}", "m![A, B # 16]", "m![A / 2]", "m![A % 2, B]")
    assert r.verified is False and r.error.code == "innermost-access"


# ---- the rules of their own -------------------------------------------------------------
def _code(text: str) -> str:
    with pytest.raises(TcplanError) as e:
        tcplan.lower(tcplan.loads(text))
    return {v.rule for v in e.value.violations}


def test_bank_starvation():
    """f32 rows of 128 B read two columns at a time (8-byte packets, one bank each): the
    inner loop over the rows hits one bank R times in a row, then the next bank; 63 in a row
    pass, 64 do not.  Single columns would share a bank with their neighbour: 2 R."""
    def text(r, time="m![C / 2, R]", packet="m![C % 2]"):
        return _problem("fetch", f"{{R: {r}, C: 32}}", "m![R, C]", time, packet, dtype="f32")
    assert tcplan.lower(tcplan.loads(text(63))).plan.bank_run == 63
    assert _code(text(64)) == {"dm-bank-starvation"}
    assert _code(text(32, "m![C, R]", "m![1]")) == {"dm-bank-starvation"}  # 2 x 32 = 64
    # a broadcast read repeating one address 64 times starves a DMA just the same
    rep = _problem("fetch", "{X: 64, C: 16}", "m![C]", "m![C, X]", "m![1]")
    assert _code(rep) == {"dm-bank-starvation"}


def test_commit_align():
    """A Commit writes 8-byte words: a bf16 packet of 2 elements (4 B) and a Time step of
    12 B (bf16 rows of 4 elements padded to 6) are refused; an address off 8 bytes too."""
    assert "commit-align" in _code(_problem("commit", "{A: 64, B: 2}", "m![A, B]", "m![A]",
                                            "m![B]"))
    assert _code(_problem("commit", "{A: 8, B: 4}", "m![A, B # 6]", "m![A]",
                          "m![B]")) == {"commit-align"}
    # the same Fetch is legal: reads are 1-byte aligned
    assert tcplan.lower(tcplan.loads(_problem("fetch", "{A: 8, B: 4}", "m![A, B # 6]",
                                              "m![A]", "m![B]"))).plan.cycles == 8
    assert _code(_problem("commit", "{A: 8, B: 8}", "m![A, B]", "m![A]", "m![B]",
                          address=4)) == {"commit-align"}


def test_tu_placement_and_other_tiers():
    text = _problem("fetch", "{A: 8, B: 16}", "m![A, B]", "m![A]", "m![B]")
    text = text.replace("stream: {", "stream: {slice: 'm![A # 256]', ")
    with pytest.raises(TcplanError) as e:
        tcplan.lower(tcplan.loads(text))
    assert e.value.code == "tu-placement" or "tu-placement" in {
        v.rule for v in e.value.violations}
    trf = ("kind: fetch\ndtype: bf16\naxes: {A: 8, B: 16}\nsource: {tier: vrf, slice: "
           "'m![1 # 256]', element: 'm![A, B]'}\nstream: {time: free, packet: free}\n")
    with pytest.raises(TcplanError) as e:
        tcplan.loads(trf, "t.yaml")
    msg = e.value.to_json()["message"]
    assert e.value.code == "bad-problem" and msg.startswith("t.yaml:4:") and \
        "Collect Engine" in msg


# ---- the longest run on one bank, against brute force -----------------------------------
def _brute_run(entries, width, base):
    addrs = [base]
    for n, s in entries:
        addrs = [a + k * s for a in addrs for k in range(n)]
    best, cur = 0, [0] * 16
    for a in addrs:
        banks = {((a + o) % 128) // 8 for o in range(width)}
        for b in range(16):
            cur[b] = cur[b] + 1 if b in banks else 0
            best = max(best, cur[b])
    return best


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300), st.sampled_from(
    [0, 1, 2, 4, 8, 16, 24, 32, 40, 64, 96, 128, 136, 256, 1000])), max_size=3),
    st.sampled_from([1, 2, 4, 8, 16, 32]), st.integers(0, 255))
def test_longest_bank_run_against_a_walk(entries, width, base):
    if eval("*".join(str(n) for n, _ in entries) or "1") > 20000:
        entries = entries[:1]
    assert tu.longest_bank_run(entries, width, base) == _brute_run(entries, width, base)


# ---- the free stream against every order and packet -------------------------------------
def _brute_best(kind, memory, context):
    """The fewest cycles over every Time order of the search's pieces and every packet of
    their innermost contiguous run (each candidate lowered with every rule)."""
    eb = memory.elem_bytes
    pieces, run = pieces_of(memory, 32 // eb)
    total = 1
    for p in pieces:
        total *= p.count
    best = None
    for j in _packets(pieces, run, eb, context, total):
        rest = list(range(len(pieces) - j))
        for order in itertools.permutations(rest):
            try:
                plan = tu.lower(kind, memory, _stream(memory, pieces, list(order), j),
                                context, 1)
            except TcplanError:
                continue
            best = plan.cycles if best is None else min(best, plan.cycles)
    return best


ELEMENTS = ["m![A, B, C]", "m![C, A, B]", "m![B, C, A]", "m![A, B # {b2}, C]", "m![C, B, A]",
            "m![A # {a2}, C, B]"]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(ELEMENTS), st.sampled_from(["i8", "bf16", "f32"]),
       st.sampled_from(["fetch", "commit"]), st.sampled_from(["main", "sub"]),
       st.sampled_from([(4, 6, 8), (2, 3, 16), (8, 2, 4), (64, 2, 2)]))
def test_free_stream_is_the_best_of_every_order(element, dtype, kind, context, sizes):
    a, b, c = sizes
    element = element.format(a2=2 * a, b2=2 * b)
    text = _problem(kind, f"{{A: {a}, B: {b}, C: {c}}}", element, "free", "", dtype=dtype,
                    context=context)
    p = tcplan.loads(text)
    memory = p.tensors["source" if kind == "fetch" else "destination"]
    want = _brute_best(kind, memory, context)
    out = search(TuRequest(kind, memory, context, 1))
    got = out.record.best().cycles if isinstance(out, Found) else None
    assert got == want, (out.record.rejected, getattr(out, "error", None))
    if isinstance(out, Found):
        assert out.proven
        solved = tcplan.solve(p)
        assert solved.verified is True and solved.cycles == want


def test_free_stream_reaches_the_32_byte_bound():
    r = tcplan.solve(tcplan.loads(_problem("fetch", "{N: 8, G: 2, D: 128}", "m![N, G, D]",
                                           "free", "")))
    assert r.status == "optimal" and r.verified
    assert r.cycles == r.lower_bound == 8 * 2 * 128 * 2 // 32


def test_no_free_stream_is_explained():
    """f32 in rows padded to 12 bytes: no packet of more than one element is contiguous
    beyond 12 bytes and a Commit needs 8-byte steps; the model's core names the rules."""
    text = _problem("commit", "{A: 8, B: 3}", "m![A, B]", "free", "", dtype="f32")
    code, rep = tcplan.explain(tcplan.loads(text)).exit_code, \
        tcplan.explain(tcplan.loads(text)).to_json()
    assert code == 1 and not rep["feasible"]
    rules = {r for it in rep["conflict"] for r in [it["rule"]]}
    assert rules == {"plan-no-layout"}
    assert "commit-align" in rep["conflict"][0]["message"]


# ---- graphs: a DM tensor written by a DMA and read by a Fetch ---------------------------
GRAPH = """format: 1
name: g
kind: graph
dtype: bf16
axes: {N: 8, G: 2, D: 128, T: 512}
tensors:
  q: {tier: hbm, element: 'm![N, G, D]', given: true}
  q_dm: {tier: dm, slice: 'm![T / 8, 1 # 4]', element: ELEMENT}
  q_stream: {tier: stream, slice: 'm![T / 8, 1 # 4]', time: 'm![N, G, D / 16]', packet: 'm![D % 16]'}
  s_in: {tier: stream, slice: 'm![T / 8, 1 # 4]', time: 'm![N, G]', packet: 'm![T % 8]', given: true}
  s_dm: {tier: dm, slice: 'm![T / 8, 1 # 4]', element: 'm![N, G, T % 8]', address: 8192}
ops:
  - {name: load, kind: dma, source: q, destination: q_dm, stream: {cluster: free, slice: free, time: free, packet: free}}
  - {name: fetch, kind: fetch, source: q_dm, stream: q_stream}
  - {name: commit, kind: commit, stream: s_in, destination: s_dm}
"""


def test_graph_with_fetch_and_commit_verifies():
    g = tcplan.loads(GRAPH.replace("ELEMENT", "'m![N, G, D]'"))
    r = tcplan.solve(g)
    assert r.status == "optimal" and r.verified is True
    ops = {o["op"]: o for o in r.to_json()["plan"]["ops"]}
    assert ops["fetch"]["cycles"] == 8 * 2 * 8  # 128 packets of 32 B, one read each
    assert ops["commit"]["cycles"] == 16
    assert ops["load"]["cycles"] == 842  # the broadcast's bound (tests/test_broadcast.py)


def test_graph_chooses_the_dm_layout_for_the_dma_and_the_fetch_jointly():
    """q_dm's Element free over N, G, D: the Fetch's packet D % 16 must be contiguous, so
    only orders ending in D are legal for it; the graph picks one both can run."""
    g = tcplan.loads(GRAPH.replace("ELEMENT", "free, axes: [N, G, D]"))
    r = tcplan.solve(g)
    assert r.status == "optimal" and r.verified is True
    chosen = r.to_json()["plan"]["layouts"]["q_dm"]
    assert chosen.endswith("D]")
    ops = {o["op"]: o for o in r.to_json()["plan"]["ops"]}
    assert ops["fetch"]["cycles"] == 128 and ops["load"]["cycles"] == 842


def test_graph_conflict_across_dma_and_fetch():
    """Element m![D, N, G] for q_dm: the Fetch's packet is not contiguous: the conflict
    names the Fetch."""
    g = tcplan.loads(GRAPH.replace("ELEMENT", "{orders: ['m![D, N, G]', 'm![G, D, N]']}"))
    r = tcplan.solve(g)
    assert r.status == "infeasible"
    e = tcplan.explain(g).to_json()
    assert not e["feasible"] and "fetch" in str(e["conflict"])


def test_run_a_commit_and_a_fetch_on_data():
    """tcplan run: a Commit of the user's stream leaves the DM tensor holding it; a Fetch of
    the user's DM tensor delivers, at every position it holds, the tensor's values (and
    nothing at the indices the tensor does not hold: T % 8 is no digit of it)."""
    import ml_dtypes
    import numpy as np
    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    s = (np.arange(8 * 2 * 512).reshape(8, 2, 512) % 97 + 1).astype(ml_dtypes.bfloat16)
    r = tcplan.run(tcplan.load(root / "problems/planning/commit_qk_logits.yaml"),
                   inputs={"stream": s})
    assert np.array_equal(r.arrays["destination"].view(np.uint16), s.view(np.uint16))
    q = (np.arange(8 * 2 * 128 * 512).reshape(8, 2, 128, 512) % 89 + 1).astype(
        ml_dtypes.bfloat16)
    r = tcplan.run(tcplan.load(root / "problems/planning/fetch_q_free_stream.yaml"),
                   inputs={"source": q})
    st = r.arrays["stream"].view(np.uint16)
    assert np.array_equal(st[..., ::8], q.view(np.uint16)[..., ::8])
    assert not st[..., 1::8].any()


def _best_fetch_cycles(memory, context: str) -> int:
    """An independent oracle for a free Fetch: every live element is read once; a packet is
    whole digits of the tensor's innermost contiguous run (the digits inside it whole, the
    outermost one cut at any divisor of its live values), a power of two of bytes at most
    32; an access takes the packet, or 8 bytes in the sub context.  The fewest cycles are
    the live elements over the widest access any such packet allows."""
    from tcplan.model.mapping import coalesce_factors
    eb = memory.elem_bytes
    fs = list(coalesce_factors(memory.dims["element"].factors))
    live = 1
    for f in fs:
        if f.axis is not None:
            live *= f.count
    best, span = 1, 1
    for f in reversed(fs):
        if f.axis is None or f.count <= 1:
            if f.size > 1:
                break
            continue
        for k in range(1, f.count + 1):
            n = span * k
            if f.count % k == 0 and n * eb <= 32 and (n * eb) & (n * eb - 1) == 0:
                best = max(best, n)
        if f.count != f.size:
            break
        span *= f.size
    most = (32 if context == "main" else 8) // eb
    return live // min(best, most)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["m![A, B]", "m![B, A]", "m![A, B # {b2}]", "m![A = {a1}, B]",
                        "m![A, B = {b1}]", "m![[A, B] # {ab2}]"]),
       st.sampled_from([(4, 6), (6, 4), (4, 24), (2, 48), (8, 3), (5, 12)]),
       st.sampled_from(["i8", "bf16", "f32"]), st.sampled_from(["main", "sub"]))
def test_free_fetch_reads_as_wide_as_the_tensor_allows(element, sizes, dtype, context):
    """The free Fetch stream's cycles against the oracle above, on tensors with padded,
    resized and odd-sized digits (the search once missed packets cut out of a digit and the
    live part of a padded one)."""
    a, b = sizes
    element = element.format(b2=2 * b, a1=max(1, a - 1), b1=max(1, b - 1), ab2=2 * a * b)
    try:
        p = tcplan.loads(_problem("fetch", f"{{A: {a}, B: {b}}}", element, "free", "",
                                  dtype=dtype, context=context))
    except TcplanError:
        return  # (a mapping the generator made that is no product of digits)
    r = tcplan.solve(p)
    assert r.status == "optimal" and r.verified is True, r.text()
    assert r.cycles == _best_fetch_cycles(p.tensors["source"], context), r.text()


# ---- the review's findings, each a regression test -------------------------------------
def test_a_stream_carries_its_dm_tensors_dtype_in_a_graph():
    """A bf16 stream committed into an f32 tensor is refused by graph-dtype (it crashed, or
    verified reinterpreted bytes); saying the stream's dtype makes the graph plan."""
    text = """kind: graph
dtype: bf16
axes: {N: 4, D: 64}
tensors:
  x: {tier: dm, slice: 'm![1 # 256]', element: 'm![N, D]', address: 0, given: true}
  s: {tier: stream, slice: 'm![1 # 256]', time: 'm![N, D / 8]', packet: 'm![D % 8]'}
  y: {tier: dm, slice: 'm![1 # 256]', element: 'm![N, D]', address: 4096, dtype: f32}
ops:
  - {name: f, kind: fetch, source: x, stream: s}
  - {name: c, kind: commit, stream: s, destination: y}
"""
    r = tcplan.solve(tcplan.loads(text))
    assert r.status == "infeasible" and "graph-dtype" in r.error.to_json()["message"]
    ok = text.replace("x: {tier: dm,", "x: {tier: dm, dtype: f32,").replace(
        "s: {tier: stream,", "s: {tier: stream, dtype: f32,")
    r = tcplan.solve(tcplan.loads(ok))
    assert r.status == "optimal" and r.verified is True


def test_a_stream_asking_for_values_the_tensor_lacks_is_refused():
    with pytest.raises(TcplanError) as e:
        tcplan.loads(_problem("fetch", "{A: 8, B: 8}", "m![A % 4, B]", "m![A]", "m![B]"))
    assert e.value.code == "broadcast-partial"
    # the stream's Time taking digits its Slice carries already
    text = _problem("fetch", "{A: 8, B: 8}", "m![A % 4, B]", "m![A]", "m![B]",
                    slice_="m![A / 4 # 256]")
    assert _code(text) == {"overlapping-dimensions"}


def test_the_same_placement_written_otherwise_is_the_same():
    text = _problem("fetch", "{A: 64, B: 8}", "m![B]", "m![1]", "m![B]",
                    slice_="m![A # 256]").replace(
        "stream: {", "stream: {slice: 'm![[A / 2, A % 2] # 256]', ")
    assert tcplan.verify(tcplan.loads(text)).verified


def test_a_fetch_reads_its_padding_lanes():
    """Padding lanes are read: of Bottom padding, or past the slice, the read fails."""
    bottom = _problem("fetch", "{A: 64}", "m![A #{!} 128]", "m![A # 128 / 16]",
                      "m![A # 128 % 16]")
    past = _problem("fetch", "{A: 4, B: 12}", "m![A, B]", "m![A]", "m![B # 16]",
                    dtype="i8", address=524240)
    for text in (bottom, past):
        r = tcplan.verify(tcplan.loads(text))
        assert r.verified is False and r.error.code == "memory-access"


def test_what_no_stream_changes_is_said_before_searching():
    """A Commit at address 4: every stream breaks commit-align; said at once (it was a
    time limit after 200 rejected plans)."""
    text = _problem("commit", "{A: 4, B: 4, C: 4, D: 4}", "m![A, B, C, D]", "free", "",
                    address=4)
    r = tcplan.solve(tcplan.loads(text))
    assert r.status == "infeasible" and r.error.code == "commit-align"


def test_resized_digits_in_a_free_stream():
    r = tcplan.solve(tcplan.loads(_problem("fetch", "{A: 8, B: 8}", "m![A = 5, B]", "free",
                                           "", dtype="i8")))
    assert r.status == "optimal" and r.verified and r.cycles == 5


def test_a_free_stream_conflict_is_minimal():
    """f32 rows of 12 bytes: a packet is 1 element (4 B, not a whole word) or the row (12 B,
    not a packet size): packet-bytes and commit-align, and nothing else."""
    e = tcplan.explain(tcplan.loads(_problem("commit", "{A: 8, B: 3}", "m![A, B]", "free",
                                             "", dtype="f32"))).to_json()
    item, = e["conflict"]
    assert "[packet-bytes]" in item["message"] and "[commit-align]" in item["message"]
    assert "entry-limit" not in item["message"]


def test_a_graph_and_a_problem_agree_on_a_one_value_digit():
    """A source m![A = 1, B] carries no A: its destination m![A, B] is a broadcast, in a
    graph as alone."""
    text = """kind: graph
dtype: i8
axes: {A: 16, B: 8}
tensors:
  src: {tier: hbm, element: 'm![A = 1, B]', address: 0, given: true}
  dst: {tier: dm, slice: 'm![1 # 256]', element: 'm![A, B]', address: 0}
ops:
  - {name: load, kind: dma, source: src, destination: dst, stream: {time: free, packet: free}}
"""
    r = tcplan.solve(tcplan.loads(text))
    assert r.status == "optimal" and r.verified is True


@pytest.mark.parametrize("tensor, words", [
    ("{tier: stream, slice: 'm![1 # 256]', time: free, packet: free}", "stream is given"),
])
def test_graph_stream_mistakes_are_located(tensor, words):
    text = f"""kind: graph
dtype: i8
axes: {{A: 8, B: 8}}
tensors:
  x: {{tier: dm, slice: 'm![1 # 256]', element: 'm![A, B]', given: true}}
  s: {tensor}
ops:
  - {{name: f, kind: fetch, source: x, stream: s}}
"""
    with pytest.raises(TcplanError) as e:
        tcplan.loads(text, "g.yaml")
    msg = e.value.to_json()["message"]
    assert msg.startswith("g.yaml:6:") and words in msg


def test_a_fetch_stream_naming_a_memory_tensor_says_so():
    text = """kind: graph
dtype: i8
axes: {A: 8, B: 8}
tensors:
  x: {tier: dm, slice: 'm![1 # 256]', element: 'm![A, B]', given: true}
  h: {tier: hbm, address: 0, element: 'm![A, B]'}
ops:
  - {name: f, kind: fetch, source: x, stream: h}
"""
    with pytest.raises(TcplanError) as e:  # (an op's own keys are read when it is planned)
        tcplan.solve(tcplan.loads(text, "g.yaml"))
    msg = e.value.to_json()["message"]
    assert e.value.kind == "input" and msg.startswith("g.yaml:6:")
    assert "stream is the Tensor Unit's" in msg


# ---- the search's values (issue 28): built mappings, outcomes, typed records --------------
def _written(p) -> str:
    """A piece's term as the search wrote it as text before it built mappings."""
    radix = p.radix or p.count
    text = p.axis if p.lo == 1 else f"{p.axis} / {p.lo}"
    if p.lo * radix < p.size:
        text += f" % {radix}"
    return text + (f" = {p.count}" if p.count < radix else "")


@pytest.mark.parametrize("axes, element, dtype", [
    ("{A: 4, B: 6, C: 8}", "m![A, B, C]", "bf16"),
    ("{A: 64, B: 2, C: 2}", "m![C, A, B]", "i8"),
    ("{N: 8, G: 2, D: 128}", "m![N, G, D]", "bf16"),
    ("{A: 8, B: 8}", "m![A = 5, B]", "i8"),
    ("{A: 8, B: 8}", "m![A, B = 7]", "i8"),
    ("{A: 4, B: 6}", "m![A, B # 12]", "f32"),
    ("{A: 5, B: 12}", "m![[A, B] # 120]", "i8"),
    ("{A: 64, B: 16}", "m![B, A]", "i8"),
])
def test_a_piece_is_built_as_the_term_it_was_written_as(axes, element, dtype):
    """Every piece's mapping is the mapping its term's text parses to (the same canonical
    text), its label that text; every stream of them (each packet, Time in the pieces' order
    and reversed) the one the joined texts parse to."""
    p = tcplan.loads(_problem("fetch", axes, element, "free", "", dtype=dtype))
    memory = p.tensors["source"]
    ax = memory.dims["element"].axes
    pieces, run = pieces_of(memory, 32 // memory.elem_bytes)
    assert pieces
    for piece in pieces + _joined(pieces):
        written = parse(f"m![{_written(piece)}]", ax)
        assert piece.mapping == written and piece.mapping.text() == written.text()
        assert piece.term() == _written(piece)
    n = len(pieces)
    for j in range(run + 1):
        for order in (list(range(n - j)), list(range(n - j))[::-1]):
            stream = _stream(memory, pieces, order, j)
            for dim, ps in (("time", [pieces[i] for i in order]), ("packet", pieces[n - j:])):
                text = ", ".join(_written(x) for x in _joined(ps)) or "1"
                assert stream.dims[dim].text() == parse(f"m![{text}]", ax).text()


def test_pieces_cover_every_form_of_a_term():
    """(The cases above write ``A / lo``, ``% radix`` and ``= count``.)"""
    forms = set()
    for axes, element, dtype in [("{N: 8, G: 2, D: 128}", "m![N, G, D]", "bf16"),
                                 ("{A: 8, B: 8}", "m![A = 5, B]", "i8")]:
        memory = tcplan.loads(_problem("fetch", axes, element, "free", "",
                                       dtype=dtype)).tensors["source"]
        for piece in pieces_of(memory, 32 // memory.elem_bytes)[0]:
            forms |= {c for c in "/%=" if c in piece.term()}
    assert forms == {"/", "%", "="}


def test_no_plan_is_a_value_naming_the_rules():
    """The model's conflict (f32 rows of 12 bytes committed), the rules that rejected every
    plan the model proposed (i8 rows of 128 bytes: every order starves a bank) and what no
    stream changes (an address off 8 bytes) are NoPlan outcomes with the errors they were."""
    text = _problem("commit", "{A: 8, B: 3}", "m![A, B]", "free", "", dtype="f32")
    out = search(TuRequest("commit", tcplan.loads(text).tensors["destination"]))
    assert isinstance(out, NoPlan) and out.record.plan is None and out.record.lowered == 0
    v, = out.error.violations
    assert v.rule == "plan-no-layout" and v.terms == ("packet-bytes", "commit-align")
    assert v.detail["pieces"] == "A, B"
    text = _problem("fetch", "{A: 64, B: 2}", "m![A, B # 128]", "free", "", dtype="i8")
    out = search(TuRequest("fetch", tcplan.loads(text).tensors["source"]))
    assert isinstance(out, NoPlan) and out.record.lowered == 3
    assert out.record.rejected == {"dm-bank-starvation": 3}
    assert out.error.to_json()["terms"] == ["dm-bank-starvation"]
    assert out.error.message.startswith("no order of the pieces A, B (with any packet) is "
                                        "legal: [dm-bank-starvation] the Fetch config "
                                        "[64 : 128, 2 : 1] : 2 accesses one DM bank 64 times")
    r = tcplan.solve(tcplan.loads(text))
    assert r.status == "infeasible" and r.to_json() == {
        "problem": "<problem>", "status": "infeasible", "cycles": None, "plan": None,
        "verified": None, "explanation": out.error.to_json()}
    text = _problem("commit", "{A: 4, B: 4, C: 4, D: 4}", "m![A, B, C, D]", "free", "",
                    address=4)
    out = search(TuRequest("commit", tcplan.loads(text).tensors["destination"]))
    assert isinstance(out, NoPlan) and out.error.code == "commit-align"
    assert out.record.pieces == () and out.record.lowered == 0


def test_the_time_limit_is_a_timed_out_outcome(monkeypatch):
    """A solver stopped by the time limit before any plan (made certain here: every solve
    says UNKNOWN): TimedOut with plan-time-limit; a solve of it is ``unknown``."""
    from ortools.sat.python import cp_model
    monkeypatch.setattr(cp_model.CpSolver, "solve",
                        lambda self, model, *args, **kw: cp_model.UNKNOWN)
    p = tcplan.loads(_problem("fetch", "{N: 8, G: 2, D: 128}", "m![N, G, D]", "free", ""))
    out = search(TuRequest("fetch", p.tensors["source"], time_limit=0.5))
    assert isinstance(out, TimedOut) and out.record.lowered == 0
    v, = out.error.violations
    assert v.rule == "plan-time-limit" and v.detail == {"limit": 0.5, "lowered": 0}
    r = tcplan.solve(p, time_limit=0.5)
    assert r.status == "unknown" and r.cycles is None and r.error.code == "plan-time-limit"
    assert r.to_json()["explanation"] == out.error.to_json()


def test_a_solve_record_is_typed_and_prints_its_fields():
    from tcplan.planner.kinds.tu import TuSolved
    p = tcplan.loads(_problem("fetch", "{N: 8, G: 2, D: 128}", "m![N, G, D]", "free", ""))
    for verify in ("full", "none"):
        r = tcplan.solve(p, verify=verify)
        assert isinstance(r.record, TuSolved) and r.record.rejected == {}
        j = r.to_json()
        assert list(j) == ["problem", "status", "cycles", "lower_bound", "bound_ratio", "plan",
                           "rejected", "check", "solve_time", "breakdown", "verified",
                           "checked", "times"]
        assert (j["status"], j["cycles"], j["lower_bound"], j["bound_ratio"]) == (
            "optimal", 128, 128, 1.0)
        assert j["plan"]["stream"]["time"] == "m![N, G, D / 16]"
        assert j["plan"]["stream"]["packet"] == "m![D % 16]"
        assert (j["verified"], j["checked"]) == ((True, 2048) if verify == "full" else
                                                 (None, 0))
        lines = r.text().splitlines()
        assert lines[0].startswith("<problem>: Fetch stream Time m![N, G, D / 16], Packet "
                                   "m![D % 16] (optimal; ")
        assert lines[-2:] == ["cycles: 128 (lower bound 128, ratio 1.0)",
                              "verified: 2,048 positions" if verify == "full" else
                              "not verified (--verify none)"]


def test_trace_of_a_free_fetch_stream_follows_the_planned_stream():
    """`tcplan trace` of a Fetch whose stream is free follows the planned stream (Time
    m![N, G, D / 16], Packet m![D % 16]: `tcplan solve`'s), not a placeholder (issue 31):
    the time step and lane computed by hand."""
    import io
    import json
    from pathlib import Path
    from tcplan.planner.cli import main
    path = Path(__file__).resolve().parents[1] / "problems/planning/fetch_q_free_stream.yaml"
    out = io.StringIO()
    N, G, D, T = 5, 1, 100, 24
    assert main(["trace", str(path), "--index", f"N={N},G={G},D={D},T={T}", "--json"],
                stdout=out, stderr=io.StringIO()) == 0
    stream = json.loads(out.getvalue())["tensors"]["stream"]
    assert (stream["time"], stream["packet"]) == ((N * 2 + G) * 8 + D // 16, D % 16)


@settings(max_examples=60, deadline=None)
@given(nbytes=st.sampled_from([1, 2, 3, 4, 8]), start=st.integers(0, 600),
       step=st.integers(1, 9), count=st.integers(1, 40),
       slices=st.lists(st.integers(0, 255), min_size=1, max_size=6, unique=True),
       shift=st.sampled_from([0, 1, 2, 4, 4096, (1 << 19) - 700, (1 << 19) - 100]))
def test_a_grid_read_is_the_reads_address_by_address(nbytes, start, step, count, slices,
                                                      shift):
    """Space.read_grid (the spans' ends checked, one word a position where aligned)
    against Space.read of every address: the same bytes, or the same memory-access error
    (a span past the backed 512 KiB of its window, shifted there)."""
    import numpy as np

    from tcplan.executor.memory import Memories
    from tcplan.model import hardware as hw
    space = Memories().space("dm", 0)
    rng = np.random.default_rng(start + 7 * step)
    for s in slices:  # (bytes near each slice's start and its backed part's end)
        for at in (s * hw.DM_SLICE_STRIDE, s * hw.DM_SLICE_STRIDE + (1 << 19) - 2048):
            space.write(np.array([at]), rng.integers(0, 256, (1, 2048), dtype=np.uint8),
                        count=False)
    bases = np.array(slices, np.int64) * hw.DM_SLICE_STRIDE + shift
    offsets = start + step * np.arange(count, dtype=np.int64) * nbytes
    try:
        want = space.read((bases[:, None] + offsets[None, :]).ravel(), nbytes)
    except TcplanError as e:
        with pytest.raises(TcplanError) as got:
            space.read_grid(bases, offsets, nbytes)
        assert got.value.code == e.code == "memory-access"
        return
    assert np.array_equal(space.read_grid(bases, offsets, nbytes),
                          want.reshape(len(slices), count, nbytes))


@pytest.mark.parametrize("slice_, element, time", [
    ("m![A # 8 / 2, 1 # 64]", "m![A # 8 % 2, B, C]", "m![A # 8 % 2, B]"),
    ("m![B, A # 8 / 2, 1 # 32]", "m![A # 8 % 2, C]", "m![A # 8 % 2]")])
def test_the_live_slices_are_the_cells_one_by_one(slice_, element, time):
    """executor/tu.py _live_units (the spatial dimensions broadcast over every slice)
    against Mapping.cell at every (chip, cluster, slice): live where all three cells are
    (a padded A's slices are not), with the offset of their coordinates into T."""
    from tcplan.executor.tu import _live_units
    from tcplan.planner.kinds import kind_of
    problem = tcplan.loads(_problem("fetch", "{A: 6, B: 2, C: 8}", element, time, "m![C]",
                                    slice_=slice_))
    plan = kind_of(problem).lower(problem)
    axes = {"A": 6, "B": 2, "C": 8}
    want = []
    dims = [plan.memory.dims[d] for d in ("chip", "cluster", "slice")]
    for unit in itertools.product(*(range(m.size) for m in dims)):
        cells = [m.cell(i) for m, i in zip(dims, unit)]
        coord = {a: sum((c.index or {}).get(a, 0) for c in cells) for a in axes}
        if all(c.status == "live" for c in cells) and all(coord[a] < n for a, n in
                                                          axes.items()):
            want.append([*unit, (coord["A"] * 2 + coord["B"]) * 8 + coord["C"]])
    assert _live_units(plan, axes).tolist() == want and 0 < len(want) < 256
