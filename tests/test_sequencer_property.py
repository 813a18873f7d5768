"""Property tests: random compatible (buffer, stream) pairs checked by brute force.

The oracle never looks at how the config was derived.  For every stream position it evaluates
the stream mappings (tree semantics), runs the config's loop nest to get the address, evaluates
the buffer at that address and compares the tensor indices.  The generator builds each axis
from a chain of digits, so it knows which digits the buffer and the stream carry.
"""

import math

import numpy as np
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from tcplan.model.mapping import LIVE, parse
from tcplan.model.rules import TcplanError
from tcplan.model.sequencer import coalesce, derive_text

SETTINGS = settings(max_examples=250, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _partition(draw, k):
    """Random cut of range(k) into consecutive groups [(i, j), ...]."""
    cuts = sorted(draw(st.sets(st.integers(1, k - 1), max_size=k - 1))) if k > 1 else []
    edges = [0] + cuts + [k]
    return list(zip(edges, edges[1:]))


def _term(name, chain, i, j):
    lo = math.prod(chain[:i])
    n = math.prod(chain[i:j])
    text = name
    if lo > 1:
        text += f" / {lo}"
    if j < len(chain):
        text += f" % {n}"
    return text, n


@st.composite
def case(draw):
    """A random buffer/stream pair over digit chains.

    Buffer and stream group each axis's digits independently (so a common refinement always
    exists); either side may drop groups (sub-tensor / broadcast), slice a group with '=',
    or pad it with '#'; reads and writes alike.  Whether the pair is legal is decided by the
    brute-force oracle, not by the generator.
    """
    mode = draw(st.sampled_from(["read", "write"]))
    names = ["A", "B", "C"][: draw(st.integers(1, 3))]
    chains = {a: draw(st.lists(st.sampled_from([2, 3, 4, 5]), min_size=1, max_size=3))
              for a in names}
    axes = {a: math.prod(c) for a, c in chains.items()}
    assume(math.prod(axes.values()) <= 3000)
    buf_terms, stream_terms = [], []
    present: dict[str, set[int]] = {a: set() for a in names}  # buffer digit indices
    pieces = 0
    for a in names:
        chain = chains[a]
        bgroups = _partition(draw, len(chain))
        sgroups = _partition(draw, len(chain))
        bounds = {e for g in bgroups for e in g}
        for i, j in bgroups:
            if draw(st.integers(0, 5)) == 0:  # the buffer does not carry these digits
                continue
            text, n = _term(a, chain, i, j)
            if draw(st.integers(0, 5)) == 0:
                n = draw(st.integers(1, n))
                text = f"{text} = {n}"
            if n > 1:  # a digit with one value carries nothing (A = 1 is m![1])
                present[a].update(range(i, j))
            if draw(st.integers(0, 3)) == 0:
                kind = draw(st.sampled_from(["#", "#{0}", "#{!}", "#{*}"]))
                text = f"{text} {kind} {n + draw(st.integers(0, 2))}"
            buf_terms.append(text)
        for i, j in sgroups:
            if draw(st.integers(0, 5)) == 0:  # the stream does not carry these digits
                continue
            text, n = _term(a, chain, i, j)
            cuts = sorted(e for e in bounds if i < e < j)
            inner = math.prod(chain[i:cuts[-1]]) if cuts else 1  # values below the top piece
            pieces += len(cuts) + 1
            size = n
            if draw(st.integers(0, 4)) == 0:  # slice
                size = inner * draw(st.integers(1, n // inner))
                text = f"{text} = {size}"
            if draw(st.integers(0, 3)) == 0:  # pad (masked lanes on a write)
                extra = draw(st.integers(0, 2)) * inner if cuts else draw(st.integers(0, 3))
                text = f"{text} # {size + extra}"
            stream_terms.append(text)
    if draw(st.integers(0, 3)) == 0:  # a broadcast axis or number
        axes["T"] = draw(st.integers(2, 3))
        stream_terms.append(draw(st.sampled_from(["T", "2", "T # 4"])))
        pieces += 1
    buf_terms = draw(st.permutations(buf_terms))
    stream_terms = draw(st.permutations(stream_terms))
    cut = draw(st.integers(0, len(stream_terms)))
    wrap = lambda ts: "m![" + ", ".join(ts) + "]" if ts else "m![1]"  # noqa: E731
    return dict(axes=axes, chains=chains, present=present, mode=mode,
                buf=wrap(buf_terms), time=wrap(stream_terms[:cut]),
                packet=wrap(stream_terms[cut:]), pieces=pieces)


def _addresses(entries, count):
    """Run the loop nest: the address of every iteration, outermost entry slowest."""
    pos = np.arange(count, dtype=np.int64)
    addr = np.zeros(count, dtype=np.int64)
    rest = count
    for n, s in entries:
        rest //= n
        addr += ((pos // rest) % n) * s
    return addr


def _project(coord, chain, present):
    """Keep only the digits of ``coord`` that the buffer carries."""
    out = np.zeros_like(coord)
    lo = 1
    for k, r in enumerate(chain):
        if k in present:
            out += ((coord // lo) % r) * lo
        lo *= r
    return out


def _stream_cells(axes, time_text, packet_text):
    time, packet = parse(time_text, axes), parse(packet_text, axes)
    count = time.size * packet.size
    pos = np.arange(count, dtype=np.int64)
    tc, ts = time.evaluate(pos // packet.size)
    pc, ps = packet.evaluate(pos % packet.size)
    coords = {}
    for d in (tc, pc):
        for a, c in d.items():
            coords[a] = coords.get(a, 0) + c
    return count, coords, (ts == LIVE) & (ps == LIVE)


def _oracle(case):
    """Is the move legal?  Decided from the mappings' semantics alone."""
    axes = case["axes"]
    buf = parse(case["buf"], axes)
    bcoords, bstatus = buf.evaluate()
    names = list(case["chains"])
    held = {tuple(int(bcoords[a][k]) if a in bcoords else 0 for a in names)
            for k in np.flatnonzero(bstatus == LIVE)}
    count, scoords, slive = _stream_cells(axes, case["time"], case["packet"])
    proj = [_project(scoords.get(a, np.zeros(count, np.int64)), case["chains"][a],
                     case["present"][a])[slive] for a in names]
    streamed = list(zip(*[p.tolist() for p in proj])) if names else []
    if case["mode"] == "read":
        return set(streamed) <= held
    return len(set(streamed)) == len(streamed) and set(streamed) == held


@SETTINGS
@given(case())
def test_config_addresses_hold_the_streamed_cells(case):
    axes = case["axes"]
    legal = _oracle(case)
    try:
        cfg = derive_text(axes, case["buf"], case["time"], case["packet"], mode=case["mode"])
    except TcplanError as e:
        if legal:  # only the entry limit may stop a legal pair; it needs more than 8 pieces
            assert e.code == "entry-limit", (case, str(e))
            assert case["pieces"] > 8
        else:
            assert e.code in ("stream-outside-buffer", "broadcast-write", "write-coverage"), (
                case, str(e))
        return
    assert legal, f"accepted an illegal move: {case}"
    buf = parse(case["buf"], axes)
    count, scoords, slive = _stream_cells(axes, case["time"], case["packet"])
    assert math.prod(n for n, _ in cfg.entries) == count
    assert math.prod(n for n, _ in cfg.raw_entries) == count
    addr = _addresses(cfg.entries, count)
    # merging never changes the address sequence
    assert np.array_equal(addr, _addresses(cfg.raw_entries, count))
    live_addr = addr[slive]
    bcoords, bstatus = buf.evaluate(live_addr)
    assert (bstatus == LIVE).all(), "a live stream position maps to a non-live buffer slot"
    for a, chain in case["chains"].items():
        if not case["present"][a]:
            continue
        want = _project(scoords.get(a, np.zeros(count, np.int64))[slive], chain,
                        case["present"][a])
        assert np.array_equal(bcoords[a], want), a
    if case["mode"] == "write":
        assert len(np.unique(live_addr)) == len(live_addr), "a buffer slot written twice"
        _, all_status = buf.evaluate()
        assert int((all_status == LIVE).sum()) == len(live_addr), "a live slot not written"


@st.composite
def incompatible_case(draw):
    p, q = draw(st.sampled_from([(2, 3), (3, 2), (3, 5), (5, 3), (2, 5), (4, 3), (3, 4)]))
    size = p * q
    mode = draw(st.sampled_from(["read", "write"]))
    # the inner digit outermost: not position-contiguous, so it cannot coalesce back into A
    buf = [f"A % {p}", f"A / {p}"]
    stream = draw(st.permutations([f"A % {q}", f"A / {q}"]))
    cut = draw(st.integers(0, 2))
    wrap = lambda ts: "m![" + ", ".join(ts) + "]" if ts else "m![1]"  # noqa: E731
    return dict(axes={"A": size}, buf=wrap(buf), time=wrap(stream[:cut]),
                packet=wrap(stream[cut:]), mode=mode)


@SETTINGS
@given(incompatible_case())
def test_incompatible_splits_are_rejected(case):
    try:
        derive_text(case["axes"], case["buf"], case["time"], case["packet"], mode=case["mode"])
    except TcplanError as e:
        assert e.code == "incompatible-decomposition"
        assert "A" in e.message
    else:
        raise AssertionError(f"accepted {case}")


@st.composite
def over_limit_case(draw):
    k = draw(st.integers(9, 12))
    axes = {f"X{i}": draw(st.sampled_from([2, 3])) for i in range(k)}
    order = list(range(k))
    # a stream order where no adjacent pair is the buffer's (i, i + 1) pair: nothing merges
    order = draw(st.permutations(order))
    assume(all(order[t + 1] != order[t] + 1 for t in range(k - 1)))
    buf = "m![" + ", ".join(f"X{i}" for i in range(k)) + "]"
    cut = draw(st.integers(0, k))
    names = [f"X{i}" for i in order]
    wrap = lambda ts: "m![" + ", ".join(ts) + "]" if ts else "m![1]"  # noqa: E731
    return dict(axes=axes, buf=buf, time=wrap(names[:cut]), packet=wrap(names[cut:]), k=k)


@SETTINGS
@given(over_limit_case())
def test_over_limit_streams_are_rejected(case):
    try:
        derive_text(case["axes"], case["buf"], case["time"], case["packet"])
    except TcplanError as e:
        assert e.code == "entry-limit"
        assert f"{case['k']} entries" in e.message
    else:
        raise AssertionError(f"accepted {case}")


@SETTINGS
@given(st.integers(65_537, 300_000).filter(lambda n: n % 2 == 0))
def test_iteration_limit_is_rejected(size):
    try:
        derive_text({"A": size}, "m![A]", "m![A]", "m![1]")
    except TcplanError as e:
        assert e.code == "iteration-limit"
        assert str(size) in e.message
    else:
        raise AssertionError("accepted")


@SETTINGS
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 40)), min_size=1, max_size=7),
       st.integers(1, 64))
def test_coalesce_keeps_addresses_and_leaves_nothing_to_merge(entries, limit):
    # make some neighbours contiguous on purpose
    entries = [(n, s) if k == 0 or s % 3 else (n, entries[k - 1][0] * entries[k - 1][1])
               for k, (n, s) in enumerate(entries)]
    merged, groups = coalesce(entries, limit)
    count = math.prod(n for n, _ in entries)
    assert np.array_equal(_addresses(entries, count), _addresses(merged, count))
    assert [k for g in groups for k in g] == list(range(len(entries)))
    for (n1, s1), (n2, s2) in zip(merged, merged[1:]):
        assert s1 != n2 * s2 or n1 * n2 > limit


def _chain(draw, size):
    """A random factorization of ``size`` into digit radices (innermost first)."""
    out = []
    while size > 1:
        divs = [d for d in range(2, size + 1) if size % d == 0]
        d = draw(st.sampled_from(divs))
        out.append(d)
        size //= d
    return out


@st.composite
def unrelated_case(draw):
    """Buffer and stream split each axis independently (often with no common refinement)."""
    mode = draw(st.sampled_from(["read", "write"]))
    names = ["A", "B"][: draw(st.integers(1, 2))]
    axes = {a: draw(st.sampled_from([6, 8, 12, 16, 18, 24, 30])) for a in names}
    bchains = {a: _chain(draw, axes[a]) for a in names}
    present: dict[str, set[int]] = {a: set() for a in names}
    buf_terms, stream_terms = [], []
    for a in names:
        chain = bchains[a]
        for i, j in _partition(draw, len(chain)):
            if draw(st.integers(0, 2)) == 0:
                continue
            text, n = _term(a, chain, i, j)
            if draw(st.integers(0, 4)) == 0:
                text = f"{text} # {n + draw(st.integers(1, 3))}"
            present[a].update(range(i, j))
            buf_terms.append(text)
        schain = _chain(draw, axes[a])
        for i, j in _partition(draw, len(schain)):
            if draw(st.integers(0, 4)) == 0:
                continue
            text, n = _term(a, schain, i, j)
            if draw(st.booleans()):
                text = f"{text} = {draw(st.integers(1, n))}"
            if draw(st.integers(0, 3)) == 0:
                text = f"{text} # {n + draw(st.integers(0, 4))}"
            stream_terms.append(text)
    buf_terms = draw(st.permutations(buf_terms))
    stream_terms = draw(st.permutations(stream_terms))
    cut = draw(st.integers(0, len(stream_terms)))
    wrap = lambda ts: "m![" + ", ".join(ts) + "]" if ts else "m![1]"  # noqa: E731
    return dict(axes=axes, chains=bchains, present=present, mode=mode, buf=wrap(buf_terms),
                time=wrap(stream_terms[:cut]), packet=wrap(stream_terms[cut:]))


@settings(max_examples=600, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(unrelated_case())
def test_accepted_configs_are_sound_for_unrelated_splits(case):
    """Whatever is accepted must address exactly the held cells (broadcasts per the buffer's
    own digits); whatever is rejected must name a rule."""
    axes = case["axes"]
    try:
        cfg = derive_text(axes, case["buf"], case["time"], case["packet"], mode=case["mode"])
    except TcplanError as e:
        assert e.kind == "hardware", (case, str(e))
        return
    buf = parse(case["buf"], axes)
    count, scoords, slive = _stream_cells(axes, case["time"], case["packet"])
    addr = _addresses(cfg.entries, count)[slive]
    bcoords, bstatus = buf.evaluate(addr)
    assert (bstatus == LIVE).all(), f"non-live slot read/written: {case}"
    for a, chain in case["chains"].items():
        if case["present"][a] and a in bcoords:
            want = _project(scoords.get(a, np.zeros(count, np.int64))[slive], chain,
                            case["present"][a])
            assert np.array_equal(bcoords[a], want), (a, case)
    if case["mode"] == "write":
        assert len(np.unique(addr)) == len(addr), f"a slot written twice: {case}"
        _, all_status = buf.evaluate()
        assert int((all_status == LIVE).sum()) == len(addr), f"a slot not written: {case}"
