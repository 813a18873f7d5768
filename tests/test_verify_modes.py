"""`--verify full|sample|none` on solve and batch (issue 17, item 3)."""

from __future__ import annotations

import io
import json
import pathlib
import shutil

import numpy as np
import pytest

import tcplan.executor.run as run
from tcplan.model.rules import TcplanError
from tcplan.planner.cli import main
from tcplan.planner.lowering import lower_problem
from tcplan.planner.spec import load_problem

ROOT = pathlib.Path(__file__).resolve().parents[1]
EX5 = str(ROOT / "problems/planning/dma_example_5_free_source.yaml")


def solve(*argv: str) -> dict:
    out = io.StringIO()
    main(["solve", *argv, "--json"], stdout=out)
    return json.loads(out.getvalue())


def test_sample_checks_a_seeded_sample_and_says_so():
    r = solve(EX5, "--verify", "sample")
    assert r["verified"] is True and r["check"] == "sample"
    assert r["checked"] == run.SAMPLE_POSITIONS  # Example 5's destination has no padding
    full = solve(EX5)
    assert full["check"] == "full" and full["checked"] == 8 * 64 * 8 * 256
    out = io.StringIO()
    main(["solve", EX5, "--verify", "sample"], stdout=out)
    assert "verified at a sample" in out.getvalue()


def test_none_runs_nothing_and_says_so():
    r = solve(EX5, "--verify", "none")
    assert r["verified"] is None and r["check"] == "none" and r["checked"] == 0
    assert r["cycles"] == 1_183  # still planned and timed
    e = solve(str(ROOT / "problems/expressions/expr_abs_f32.yaml"), "--verify", "none")
    assert e["verified"] is None and e["check"] == "none"


def test_a_sampled_check_finds_a_wrong_destination():
    """Every byte the move wrote flipped: any sampled live position shows it, named."""
    p = load_problem(ROOT / "problems/seed/dma_example_5.yaml")
    plan = lower_problem(p)
    T = run.tensor_bits(p.axes, plan.source.dtype, 0)
    mem, _ = run.simulate(plan, p.axes, T)
    dst = plan.destination
    dm = mem.space("dm", 0)
    dm.data[np.flatnonzero(dm.writes)] ^= 0xFF
    with pytest.raises(TcplanError, match="a sampled position"):
        run.verify_sample(mem, dst, p.axes, T, 100, 0)


def test_batch_passes_the_mode_to_solve(tmp_path):
    shutil.copy(EX5, tmp_path)
    shutil.copy(ROOT / "problems/expressions/expr_abs_f32.yaml", tmp_path)
    out = io.StringIO()
    code = main(["batch", str(tmp_path), "--json", "--verify", "none", "--jobs", "1"],
                stdout=out, stderr=io.StringIO())
    r = json.loads(out.getvalue())
    assert code == 0 and r["ok"], r  # `verified: true` is not asked of an unrun problem
    assert {x["check"] for x in r["problems"]} == {"none"}


def test_batch_reports_each_stages_time(tmp_path):
    """plan, lower, execute and verify seconds, per row, in the table and in JSON."""
    shutil.copy(EX5, tmp_path)
    shutil.copy(ROOT / "problems/seed/chip_shuffle.yaml", tmp_path)  # a redistribution
    out = io.StringIO()
    assert main(["batch", str(tmp_path), "--json", "--jobs", "1"], stdout=out,
                stderr=io.StringIO()) == 0
    rows = {r["problem"]: r for r in json.loads(out.getvalue())["problems"]}
    planned = rows["dma_example_5_free_source"]["times"]
    assert set(planned) == {"plan", "lower", "execute", "verify"}
    assert planned["plan"] > 0 and planned["verify"] > 0
    verified = rows["chip_shuffle"]["times"]
    assert set(verified) == {"lower", "verify"}
    table = io.StringIO()
    main(["batch", str(tmp_path), "--jobs", "1"], stdout=table, stderr=io.StringIO())
    seconds = table.getvalue().split("\n\nseconds")[1].splitlines()
    assert seconds[0].split() == ["plan", "lower", "exec", "verify", "total"]
    row = next(x for x in seconds if x.startswith("dma_example_5_free_source")).split()
    # (another run's; its verify may take under 5 ms now: one strided view per chip)
    assert len(row) == 6 and float(row[1]) > 0 and float(row[4]) >= 0
    chip = next(x for x in seconds if x.startswith("chip_shuffle")).split()
    assert chip[1] == "-" and chip[3] == "-" and float(chip[4]) >= 0  # verified, not planned


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_lines_in_a_log_and_nothing_when_quiet(tmp_path):
    shutil.copy(EX5, tmp_path)
    shutil.copy(ROOT / "problems/seed/dma_example_1.yaml", tmp_path)
    term = _Terminal()
    assert main(["batch", str(tmp_path), "--jobs", "1"], stdout=io.StringIO(),
                stderr=term) == 0
    assert "\r" in term.getvalue() and "2/2" in term.getvalue()  # tqdm, redrawn in place
    log = io.StringIO()
    main(["batch", str(tmp_path), "--jobs", "1"], stdout=io.StringIO(), stderr=log)
    assert "\r" not in log.getvalue() and "[2/2] " in log.getvalue()
    quiet = io.StringIO()
    main(["-q", "batch", str(tmp_path), "--jobs", "1"], stdout=io.StringIO(), stderr=quiet)
    assert quiet.getvalue() == ""
    loud = io.StringIO()
    main(["batch", str(tmp_path), "--jobs", "1", "-v"], stdout=io.StringIO(), stderr=loud)
    assert "stages:" in loud.getvalue()


def test_verbose_solve_says_where_the_search_time_goes():
    err = io.StringIO()
    main(["solve", EX5, "-v"], stdout=io.StringIO(), stderr=err)
    assert "option model(s)" in err.getvalue() and "cp-sat" in err.getvalue()
