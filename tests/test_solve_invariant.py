"""The invariant (issue 24, item 2): any plan `solve` reports as optimal or feasible verifies.

Generated problems of every kind tcplan plans (DMA with a free stream, broadcasts included;
a free destination Element; a free HBM source; PCIe; Fetch and Commit with a free or a given
stream, broadcast reads included; expressions; graphs of DMA, Fetch and Commit ops) are
solved with full verification; a problem may have no plan (then it must say why, with a
hardware rule), but a plan it reports must hold, at every live position, what the problem
says it holds.  Hypothesis draws them deterministically (CI sees the same problems every
run); the counts per kind add up to more than 500."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tcplan
from tcplan.model.rules import TcplanError

NAMES = "ABC"
DTYPES = ["i8", "bf16", "f32"]


def _settings(n: int):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _check(text: str) -> str:
    """Solve with full verification; the invariant; the status."""
    try:
        p = tcplan.loads(text, "generated.yaml")
    except TcplanError as e:  # a generated problem tcplan refuses as malformed: said so
        assert e.kind == "input" and e.violations, text
        return "refused"
    r = tcplan.solve(p, time_limit=5.0)
    if r.status in ("optimal", "feasible", "given"):
        assert r.verified is True, text + "\n" + r.text()
    else:
        assert r.status in ("infeasible", "unknown") and r.error is not None, text
        assert r.error.kind in ("hardware", "limit"), text
    return r.status


@st.composite
def axes_of(draw, most: int = 3, sizes=(2, 4, 8, 16, 32)):
    k = draw(st.integers(2, most))
    sizes = [draw(st.sampled_from(sizes)) for _ in range(k)]
    return dict(zip(NAMES[:k], sizes))


def _axes_text(axes: dict[str, int]) -> str:
    return "{" + ", ".join(f"{a}: {n}" for a, n in axes.items()) + "}"


@st.composite
def dma_problems(draw):
    """HBM or DM to HBM or DM; the destination may carry an axis R the source does not (a
    broadcast); the stream free, the engine split free or not."""
    axes = draw(axes_of())
    broadcast = draw(st.booleans())
    if broadcast:
        axes = {**axes, "R": draw(st.sampled_from([2, 4]))}
    src_axes = [a for a in axes if a != "R"]
    src_order = draw(st.permutations(src_axes))
    dtype = draw(st.sampled_from(DTYPES))
    src_tier = draw(st.sampled_from(["hbm", "hbm", "dm"]))
    dst_tier = draw(st.sampled_from(["dm", "dm", "hbm"]))
    dst_axes = list(axes)
    if src_tier == "dm":
        src = (f"{{tier: dm, slice: 'm![{src_order[0]} # 64]', element: "
               f"'m![{', '.join(src_order[1:])}]'}}")
    else:
        src = f"{{tier: hbm, element: 'm![{', '.join(src_order)}]'}}"
    order = draw(st.permutations(dst_axes))
    if dst_tier == "dm":
        dst = (f"{{tier: dm, slice: 'm![{order[0]} # 64]', element: "
               f"'m![{', '.join(order[1:])}]', address: 65536}}")
    else:
        dst = f"{{tier: hbm, address: 1048576, element: 'm![{', '.join(order)}]'}}"
    split = draw(st.sampled_from(["", "cluster: free, slice: free, "]))
    return (f"kind: dma\ndtype: {dtype}\naxes: {_axes_text(axes)}\nsource: {src}\n"
            f"destination: {dst}\nstream: {{{split}time: free, packet: free}}\n")


@st.composite
def free_layout_problems(draw):
    """A free destination Element (DM), or a free HBM source."""
    axes = draw(axes_of(sizes=(4, 8, 16, 32)))
    dtype = draw(st.sampled_from(DTYPES))
    order = draw(st.permutations(list(axes)))
    if draw(st.booleans()):
        src = f"{{tier: hbm, element: 'm![{', '.join(order)}]'}}"
        dst = f"{{tier: dm, slice: 'm![{order[-1]} # 64]', element: free}}"
    else:
        src = "{tier: hbm, element: free}"
        dst = (f"{{tier: dm, slice: 'm![{order[0]} # 64]', element: "
               f"'m![{', '.join(order[1:])}]'}}")
    return (f"kind: dma\ndtype: {dtype}\naxes: {_axes_text(axes)}\nsource: {src}\n"
            f"destination: {dst}\nstream: {{time: free, packet: free}}\n")


@st.composite
def pcie_problems(draw):
    axes = draw(axes_of())
    dtype = draw(st.sampled_from(DTYPES))
    a, b = draw(st.permutations(list(axes))), draw(st.permutations(list(axes)))
    up = draw(st.booleans())
    host = f"{{tier: host, element: 'm![{', '.join(a)}]'}}"
    hbm = f"{{tier: hbm, address: 4096, element: 'm![{', '.join(b)}]'}}"
    src, dst = (host, hbm) if up else (hbm, host)
    return (f"kind: pcie\ndtype: {dtype}\naxes: {_axes_text(axes)}\nsource: {src}\n"
            f"destination: {dst}\nstream: {{time: free, packet: free}}\n")


@st.composite
def tu_problems(draw):
    """A Fetch or a Commit of a DM tensor (its Element an order of the axes, one perhaps
    padded), the stream free, or given as an order of the digits with the innermost ones as
    the Packet, a Fetch's Time perhaps repeating an axis R it does not read (a broadcast)."""
    kind = draw(st.sampled_from(["fetch", "commit"]))
    axes = draw(axes_of())
    dtype = draw(st.sampled_from(DTYPES))
    order = list(draw(st.permutations(list(axes))))
    terms = list(order)
    if draw(st.booleans()):  # pad one term
        k = draw(st.integers(0, len(order) - 1))
        terms[k] = f"{order[k]} # {2 * axes[order[k]]}"
    sl = draw(st.sampled_from(["m![1 # 256]", f"m![{order[0]} # 64]"]))
    if sl != "m![1 # 256]":
        terms, order = terms[1:], order[1:]
    role = "source" if kind == "fetch" else "destination"
    context = draw(st.sampled_from(["main", "sub"]))
    if draw(st.booleans()):
        stream = "{time: free, packet: free}"
    else:
        j = draw(st.integers(0, len(order)))
        inner = order[len(order) - j:]
        time = draw(st.permutations(order[:len(order) - j]))
        time = list(time)
        if kind == "fetch" and draw(st.booleans()):
            axes = {**axes, "R": draw(st.sampled_from([2, 3, 4]))}
            time.insert(draw(st.integers(0, len(time))), "R")
        stream = (f"{{time: 'm![{', '.join(time) or '1'}]', packet: "
                  f"'m![{', '.join(inner) or '1'}]'}}")
    return (f"kind: {kind}\ndtype: {dtype}\naxes: {_axes_text(axes)}\n{role}: {{tier: dm, "
            f"slice: '{sl}', element: 'm![{', '.join(terms)}]'}}\nstream: {stream}\n"
            f"context: {context}\n")


FORMULAS = ["x + 1", "x * 2", "max(x, 0)", "exp(x)", "sqrt(abs(x))", "tanh(x) * 3",
            "(x + 2) * 3", "min(x * 4, 1)", "x / 7", "exp(sqrt(abs(x)))"]


@st.composite
def expression_problems(draw):
    dtype = draw(st.sampled_from(["f32", "i32"]))
    formula = draw(st.sampled_from(FORMULAS if dtype == "f32" else
                                   ["x + 1", "x * 2", "max(x, 0)", "(x + 2) * 3",
                                    "x >> 1", "max((x + 3) * 5, 0) >> 2"]))
    n = draw(st.sampled_from([1, 2, 4, 16]))
    return (f"kind: expression\ndtype: {dtype}\naxes: {{A: 2048, N: {n}}}\n"
            f"input: {{cluster: 'm![1 # 2]', slice: 'm![A / 8]', time: 'm![N]', packet: "
            f"'m![A % 8]'}}\nexpression: '{formula}'\n")


@st.composite
def graph_problems(draw):
    """An HBM tensor loaded into DM (its Element free or given), fetched; a stream committed
    and stored to HBM."""
    axes = draw(axes_of())
    order = list(draw(st.permutations(list(axes))))
    dtype = draw(st.sampled_from(["bf16", "f32"]))
    dm_el = (f"free, axes: [{', '.join(order[1:])}]" if draw(st.booleans())
             else f"'m![{', '.join(order[1:])}]'")
    sl = f"m![{order[0]} # 64]"
    inner = order[-1]
    time = ", ".join(order[1:-1]) or "1"
    return f"""kind: graph
dtype: {dtype}
axes: {_axes_text(axes)}
tensors:
  x: {{tier: hbm, element: 'm![{', '.join(order)}]', given: true}}
  x_dm: {{tier: dm, slice: '{sl}', element: {dm_el}}}
  x_s: {{tier: stream, slice: '{sl}', time: 'm![{time}]', packet: 'm![{inner}]'}}
  y_s: {{tier: stream, slice: '{sl}', time: 'm![{time}]', packet: 'm![{inner}]', given: true}}
  y_dm: {{tier: dm, slice: '{sl}', element: 'm![{', '.join(order[1:])}]', address: 131072}}
  y: {{tier: hbm, address: 1048576, element: 'm![{', '.join(order)}]'}}
ops:
  - {{name: load, kind: dma, source: x, destination: x_dm, stream: {{time: free, packet: free}}}}
  - {{name: fetch, kind: fetch, source: x_dm, stream: x_s}}
  - {{name: commit, kind: commit, stream: y_s, destination: y_dm}}
  - {{name: store, kind: dma, source: y_dm, destination: y, stream: {{time: free, packet: free}}}}
"""


#: per kind, how many problems: 540 in all
COUNTS = {"dma": 200, "free_layout": 60, "pcie": 30, "tu": 180, "expression": 30, "graph": 40}
STATUS: dict[str, dict[str, int]] = {}


def _tally(kind: str, status: str) -> None:
    STATUS.setdefault(kind, {}).setdefault(status, 0)
    STATUS[kind][status] += 1


@_settings(COUNTS["dma"])
@given(dma_problems())
def test_dma_plans_verify(text):
    _tally("dma", _check(text))


@_settings(COUNTS["free_layout"])
@given(free_layout_problems())
def test_free_layout_plans_verify(text):
    _tally("free_layout", _check(text))


@_settings(COUNTS["pcie"])
@given(pcie_problems())
def test_pcie_plans_verify(text):
    _tally("pcie", _check(text))


@_settings(COUNTS["tu"])
@given(tu_problems())
def test_fetch_and_commit_plans_verify(text):
    _tally("tu", _check(text))


@_settings(COUNTS["expression"])
@given(expression_problems())
def test_expression_plans_verify(text):
    _tally("expression", _check(text))


@_settings(COUNTS["graph"])
@given(graph_problems())
def test_graph_plans_verify(text):
    _tally("graph", _check(text))


def test_the_generators_reach_plans():
    """The tally of the runs above (same module, in order): at least 500 problems, and each
    kind with plans among them, so that the invariant is exercised and not vacuous."""
    if len(STATUS) < len(COUNTS):
        pytest.skip("run with the generated tests (the whole module)")
    total = sum(sum(v.values()) for v in STATUS.values())
    assert total >= 500, STATUS
    for kind, seen in STATUS.items():
        planned = sum(n for s, n in seen.items() if s in ("optimal", "feasible", "given"))
        assert planned >= COUNTS[kind] // 4, (kind, seen)

