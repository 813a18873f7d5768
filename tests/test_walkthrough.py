"""docs/walkthrough.md (issue 31, item 6): every figure and output line the page quotes is
what the commands print, so the page cannot drift from the tool."""

from __future__ import annotations

import io
from pathlib import Path

import tcplan
from tcplan.planner.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs/walkthrough.md").read_text()
WALK = ROOT / "problems/walkthrough"


def _said(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue() + err.getvalue()


def test_the_pages_problem_is_the_file():
    """The YAML the page shows is problems/walkthrough/weight.yaml (less its comments and
    its expect block)."""
    shown = PAGE.split("```yaml\n", 1)[1].split("```", 1)[0]
    body = [ln for ln in (WALK / "weight.yaml").read_text().splitlines()
            if not ln.startswith(("#", "expect:"))]
    assert shown.splitlines() == body


def test_the_given_stream_says_what_the_page_quotes():
    code, text = _said(["solve", str(WALK / "weight.yaml")])
    assert code == 0
    for line in text.splitlines()[-3:]:
        assert line in PAGE, line
    code, text = _said(["explain", str(WALK / "weight.yaml")])
    assert code == 0 and text.strip() in PAGE


def test_the_free_stream_plans_at_its_bound_as_quoted():
    r = tcplan.solve(WALK / "weight_free.yaml")
    assert (r.status, r.cycles, r.verified) == ("optimal", 671, True)
    assert r.to_json()["lower_bound"] == 671
    head = _said(["solve", str(WALK / "weight_free.yaml")])[1].splitlines()[0]
    quoted = head.split(" (optimal;")[0]
    assert quoted in PAGE and "16,884" in PAGE and "25 times faster" in PAGE
    assert 16884 // 671 == 25


def test_the_broken_problems_say_what_the_page_quotes(tmp_path):
    free = (WALK / "weight_free.yaml").read_text().replace("name: weight_free", "name: weight")
    tiny = tmp_path / "weight_tiny.yaml"
    tiny.write_text(free + "bounds: {packet_max_bytes: 4}\n")
    code, text = _said(["explain", str(tiny)])
    assert code == 1
    for line in text.strip().splitlines():
        assert line in PAGE, line
    typo = tmp_path / "weight_typo.yaml"
    typo.write_text(free.replace("element: 'm![N % 4, K]'", "element: 'm![N % 2, K]'"))
    code, text = _said(["solve", str(typo)])
    warning = [ln for ln in text.splitlines() if ln.startswith("warning [sub-tensor]")]
    assert code == 0 and len(warning) == 1
    assert warning[0].replace(str(tmp_path) + "/", "") in PAGE
