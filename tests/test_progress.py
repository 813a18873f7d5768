"""Progress of long stages (issue 17, item 3): the executor and the search report through a
callback; planner/progress.py draws bars on a terminal and writes plain lines in a log."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

import tcplan
from tcplan.executor import run
from tcplan.planner.lowering import lower_problem
from tcplan.planner.progress import Progress, for_stream

ROOT = Path(__file__).resolve().parents[1]
EX2 = ROOT / "problems/seed/dma_example_2.yaml"
EX6 = ROOT / "problems/seed/dma_example_6.yaml"


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def record():
    events: list[tuple] = []
    return events, lambda stage, done, total=None, note="": events.append(
        (stage, done, total, note))


def test_a_log_gets_a_plain_line_every_few_seconds(caplog):
    clock = Clock()
    p = Progress(io.StringIO(), tty=False, delay=1.0, every=10.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="tcplan"):
        for t, done in ((0.0, 0), (0.5, 10), (1.5, 20), (5.0, 30), (12.0, 40), (13.0, 50)):
            clock.t = t
            p("verify", done, 100, "")
        clock.t = 14.0
        p("verify", 100, 100, "")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["verify: 20/100 (20%) (2 s)", "verify: 40/100 (40%) (12 s)",
                     "verify: done in 14.0 s"]


def test_a_short_stage_says_nothing(caplog):
    clock = Clock()
    p = Progress(io.StringIO(), tty=False, clock=clock)
    with caplog.at_level(logging.INFO, logger="tcplan"):
        for done in range(0, 11):
            clock.t = done * 0.05
            p("execute", done, 10, "")
    assert caplog.records == []


def test_a_terminal_gets_a_bar_that_goes_when_the_stage_ends():
    clock, out = Clock(), io.StringIO()
    p = Progress(out, tty=True, delay=1.0, clock=clock)
    clock.t = 0.0
    p("search", 1, None, "bound 900 cycles")
    clock.t = 2.0
    p("search", 7, None, "best 1,183, bound 1,100 cycles")
    text = out.getvalue()
    assert "search" in text and "7" in text and "best 1,183, bound 1,100 cycles" in text
    assert p.stages["search"].bar is not None
    p.close()
    assert p.stages == {}


def test_quiet_means_no_progress():
    log = logging.getLogger("tcplan")
    old = log.level
    try:
        log.setLevel(logging.WARNING)
        assert for_stream(io.StringIO()) is None
        log.setLevel(logging.INFO)
        assert isinstance(for_stream(io.StringIO()), Progress)
    finally:
        log.setLevel(old)


@pytest.mark.parametrize("path", [EX2, EX6])
def test_execute_and_verify_report_up_to_their_totals(path):
    problem = tcplan.load(path)
    plan = lower_problem(problem)
    events, cb = record()
    result = run.run_dma(problem, plan, 0, "full", cb)
    commands = sum(len(e.commands) for e in plan.engines)
    ex = [e for e in events if e[0] == "execute"]
    assert [e[1] for e in ex] == list(range(1, commands + 1))
    assert all(e[2] == commands for e in ex)
    ver = [e for e in events if e[0] == "verify"]
    positions = 1
    for m in plan.destination.dims.values():
        positions *= m.size
    assert ver[-1][1:3] == (positions, positions)
    assert [e[1] for e in ver] == sorted(e[1] for e in ver)
    assert result["checked"] > 0


def test_the_index_path_reports_too(monkeypatch):
    problem = tcplan.load(EX2)
    plan = lower_problem(problem)
    monkeypatch.setattr(run, "_verify_fast", lambda *a, **k: None)
    monkeypatch.setattr(run, "_verify_whole", lambda *a, **k: None)  # (one view per chip)
    events, cb = record()
    run.run_dma(problem, plan, 0, "full", cb)
    ver = [e for e in events if e[0] == "verify"]
    assert len(ver) > 2 and ver[-1][1] == ver[-1][2]
    assert [e[1] for e in ver] == sorted(e[1] for e in ver)


@pytest.mark.parametrize("name", ["attention_v_head_major", "dma_example_4_free_source"])
def test_a_search_reports_its_rounds_with_the_bound(name):
    events, cb = record()
    solved = tcplan.solve(ROOT / f"problems/planning/{name}.yaml", verify="none", progress=cb)
    search = [e for e in events if e[0] == "search"]
    assert search and [e[1] for e in search] == list(range(1, len(search) + 1))
    assert all(e[2] is None and "bound" in e[3] for e in search)
    bounds = [int(e[3].split("bound ")[1].split()[0].replace(",", "")) for e in search
              if "option" not in e[3]]  # (an option's own bound binds only that option)
    assert max(bounds, default=0) <= solved.cycles  # a lower bound of the plan found
    best = [int(e[3].split()[1].rstrip(",").replace(",", "")) for e in search
            if e[3].startswith("best")]  # the best so far: it only falls, to the plan's
    assert best == sorted(best, reverse=True) and min(best, default=solved.cycles) >= \
        solved.cycles
