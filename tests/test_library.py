"""The whole problem library meets its own expectations (issue 31: `tcplan batch problems/`
failed 4 of its 153 problems and nothing ran it): every `*.yaml` under problems/ solved as
`tcplan batch` solves it, each row checked against its file's `expect` block."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tcplan.planner.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_tcplan_batch_of_the_whole_library_meets_every_expectation(tmp_path):
    out = io.StringIO()
    code = main(["batch", str(ROOT / "problems"), "--json", "--jobs", "2",
                 "--verify", "sample"], stdout=out, stderr=io.StringIO())
    report = json.loads(out.getvalue())
    rows = report["problems"]
    assert len(rows) == len(list((ROOT / "problems").rglob("*.yaml")))
    missed = [(r["problem"], r["status"], r.get("why")) for r in rows if not r["ok"]]
    assert code == 0 and report["ok"] and not missed, missed
