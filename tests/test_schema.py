"""`tcplan schema` (issue 17, item 4): a JSON Schema of problem files, generated from the
definitions the loader checks; every problem file validates against it, and the mistakes
the loader refuses by key, tier, dtype or expectation type the schema refuses too."""

from __future__ import annotations

import io
import json
import pathlib

import jsonschema
import pytest
import yaml

from tcplan.model.rules import TcplanError
from tcplan.planner.cli import main
from tcplan.planner.schema import problem_schema
from tcplan.planner.spec import kind_keys, load_problem_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "problems").rglob("*.yaml"))
VALIDATOR = jsonschema.Draft202012Validator(problem_schema())


def test_the_schema_is_a_valid_draft_2020_12_schema_and_the_cli_prints_it():
    jsonschema.Draft202012Validator.check_schema(problem_schema())
    out = io.StringIO()
    assert main(["schema"], stdout=out) == 0
    assert json.loads(out.getvalue()) == problem_schema()


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_problem_file_validates(path):
    errors = list(VALIDATOR.iter_errors(yaml.safe_load(path.read_text())))
    assert not errors, [e.message for e in errors[:3]]


EX = (ROOT / "problems/seed/dma_example_2.yaml").read_text()


@pytest.mark.parametrize("old,new", [
    ("kind: dma", "kind: dma\nhopz: 2"),  # an unknown key
    ("kind: dma", "kind: dma\nsteps: []"),  # a key of another kind
    ("tier: hbm", "tier: hmb"),  # no such tier
    ("tier: hbm", "tier: hbm, dtype: bf17"),  # no such dtype
    ("tier: hbm", "tier: hbm, adress: 0"),  # no such tensor key
])
def test_what_the_loader_refuses_the_schema_refuses(old, new):
    """Both refuse it: the loader by its own checks, the schema by the definitions it was
    generated from."""
    text = EX.replace(old, new, 1)
    assert text != EX
    with pytest.raises(TcplanError):
        load_problem_text(text, "<mutant>")
    assert list(VALIDATOR.iter_errors(yaml.safe_load(text)))


def test_each_kind_allows_exactly_the_loaders_keys():
    """A key one kind allows and another does not: the schema follows the loader."""
    s = problem_schema()
    rules = {b["if"]["properties"]["kind"]["const"]: set(b["then"]["propertyNames"]["enum"])
             for b in s["allOf"]}
    from tcplan.planner.spec import COMMON_KEYS
    assert rules == {k: COMMON_KEYS | extra for k, (extra, _) in kind_keys().items()}


def test_an_expectation_of_the_wrong_type_is_refused():
    text = EX.split("expect:")[0] + "expect: {cycles: 'fast'}\n"
    assert list(VALIDATOR.iter_errors(yaml.safe_load(text)))


def test_the_format_page_names_every_kind_and_every_graph_op():
    """docs/problem-format.md's `kind` row names every registered kind, and its graph
    section every kind a graph's op may be (the registry's ``graph_roles``); before, it
    named four graph op kinds of the registry's many (issue 31)."""
    import re
    from tcplan.planner.registry import kinds
    page = (ROOT / "docs/problem-format.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `kind` |"))
    graph = page[page.index("### `graph`"):page.index("## Example")]
    named = set(re.findall(r"`(\w+)`", row))
    in_graph = set(re.findall(r"`(\w+)`", graph))
    ks = kinds()
    assert set(ks) <= named, sorted(set(ks) - named)
    ops = {n for n, k in ks.items() if getattr(k, "graph_roles", None)}
    assert ops and ops <= in_graph, sorted(ops - in_graph)
