"""One home per problem kind (issue 17, item 0; docs/decisions.md item 84): every kind is
registered once, and nothing outside planner/kinds/ tests a problem's kind."""

from __future__ import annotations

import pathlib
import re

from tcplan.planner.kinds import REGISTRY, Kind, kind_of
from tcplan.planner.spec import load_problem

#: the kinds docs/problem-format.md documents
KINDS = ("layout", "sequence", "dma", "pcie", "fetch", "commit", "redistribute", "gather",
         "scatter", "vector", "lane_fold", "expression", "graph", "collect", "cast",
         "to_trf", "to_vrf", "transpose", "switch", "contract", "commit_trim", "chain", "fetch_cast",
         "inter_slice_reduce", "commit_cast", "commit_cast_relu", "contraction")

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_kind_is_registered_once():
    assert set(REGISTRY) == set(KINDS)
    for name, k in REGISTRY.items():
        assert isinstance(k, Kind) and name in k.names


def test_no_kind_chains_outside_the_registry():
    """`problem.kind ==`, `!=`, `in`, `not in`: only planner/kinds/ decides by kind."""
    chain = re.compile(r"\b(problem|p)\.kind\s*(==|!=|in\b|not in\b)")
    found = []
    for f in sorted((ROOT / "planner").rglob("*.py")) + sorted((ROOT / "executor").rglob("*.py")):
        if "kinds" in f.parts:
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if chain.search(line):
                found.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, found


def test_each_library_problem_has_its_kinds_protocol():
    """A problem of each kind: it lowers and renders through its kind."""
    seen = set()
    for f in sorted((ROOT / "problems").rglob("*.yaml")):
        p = load_problem(f)
        if p.kind in seen or "error" in p.expect:
            continue
        k = kind_of(p)
        plan = k.lower(p)
        assert isinstance(k.render(p, plan), str) and k.render(p, plan)
        seen.add(p.kind)
    from tcplan.planner.spec import load_problem_text
    seq = load_problem_text("""kind: sequence
axes: {A: 8, B: 4}
buffer: {tier: dm, slice: 'm![1 # 64]', element: 'm![A, B]'}
stream: {time: 'm![B]', packet: 'm![A]'}
""", "<sequence>")  # (the library's sequence examples are JSON lines)
    text = kind_of(seq).render(seq, kind_of(seq).lower(seq))
    assert isinstance(text, str) and "m![A, B]" in text
    seen.add("sequence")
    assert seen == set(KINDS), set(KINDS) - seen
