"""Checks run apart (executor/apart.py; issue 32, item 5): a graph's contraction replayed
in the run and run in full, checked, in a forked process meanwhile.  The run's values,
its count of checked elements and its failures are those of the run that checks every op
itself."""

from __future__ import annotations

import os
import pathlib
import time

import numpy as np
import pytest

from tcplan.executor.apart import Apart, CheckDied
from tcplan.executor.graph import run_graph
from tcplan.model.rules import TcplanError, fail
from tcplan.planner.graph_plan import plan_graph
from tcplan.planner.kinds.graph import _graph
from tcplan.planner.outcome import unwrap
from tcplan.planner.registry import Options, kinds
from tcplan.planner.spec import load_problem

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="checks apart fork")

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def planned():
    """problems/graphs/contraction_op.yaml planned: a DMA, then a contraction whose own
    graph (Fetches, TRF fill, the contraction, its Commit) is the op checked apart."""
    g = _graph(load_problem(str(ROOT / "problems/graphs/contraction_op.yaml")))
    return g, unwrap(plan_graph(g, Options()))


def _failure(g, gp, apart: int) -> tuple[str, str]:
    with pytest.raises(TcplanError) as e:
        run_graph(g, gp, kinds(), 0, apart=apart)
    return e.value.code, e.value.message


def test_a_run_checking_its_contraction_apart_is_the_run_checking_it_here(planned):
    g, gp = planned
    here, report_here = run_graph(g, gp, kinds(), 0)
    apart, report_apart = run_graph(g, gp, kinds(), 0, apart=2)
    assert report_here["checked_apart"] == 0 and report_apart["checked_apart"] == 1
    assert report_apart["checked"] == report_here["checked"] > 0
    assert sorted(apart) == sorted(here) and "y" in here
    for n, v in here.items():
        assert apart[n].dtype == v.dtype and apart[n].tobytes() == v.tobytes(), n


def test_a_contraction_failing_its_check_apart_fails_the_run_as_here(planned, monkeypatch):
    """The reference off by one: the contraction's own check fails in the child, and the
    run raises what the run checking it here raises."""
    import tcplan.executor.contraction as C
    real = C.reference

    def off_by_one(plan, S, W):
        exact, bound = real(plan, S, W)
        return exact + 1.0, bound
    monkeypatch.setattr(C, "reference", off_by_one)
    g, gp = planned
    here = _failure(g, gp, 0)
    assert here[0] == "verify-mismatch" and "the contraction's result" in here[1]
    assert _failure(g, gp, 2) == here


def test_a_replay_other_than_the_run_fails_the_check_apart(planned, monkeypatch):
    """The engine's replay (the values the run goes on with) made other than its run: the
    child compares the two, bit for bit.  The run checking here never replays: it passes."""
    from tcplan.planner.kinds.contract import Contract
    real = Contract.replay

    def skewed(self, *args):
        out = real(self, *args)
        return {r: v + np.ones((), v.dtype) for r, v in out.items()}
    monkeypatch.setattr(Contract, "replay", skewed)
    g, gp = planned
    run_graph(g, gp, kinds(), 0)
    code, message = _failure(g, gp, 2)
    assert code == "verify-mismatch"
    assert "op gemv: its run made y other than its replay" in message


def _raises(detail: str, delay: float = 0.0):
    def check() -> None:
        time.sleep(delay)
        raise fail("verify-mismatch", detail=detail)
    return check


def test_the_oldest_failure_is_raised_first():
    """Two checks failing, the later one sooner: the earlier op's failure is the run's."""
    a = Apart(2)
    a.start("first", _raises("the first", 0.3))
    a.start("second", _raises("the second"))
    with pytest.raises(TcplanError, match="the first"):
        a.finish()
    assert not a.pending


def test_a_full_set_of_checks_waits_for_its_oldest():
    """With one check at a time, starting a second waits for the first (and raises its
    failure there)."""
    a = Apart(1)
    a.start("first", _raises("the first"))
    with pytest.raises(TcplanError, match="the first"):
        a.start("second", lambda: None)
    a.close()


def test_a_check_that_dies_or_crashes_is_said_so():
    a = Apart(2)
    a.start("killed", lambda: os._exit(3))
    with pytest.raises(CheckDied, match="killed, run apart, ended without a verdict"):
        a.finish()
    a.start("buggy", lambda: 1 / 0)
    with pytest.raises(CheckDied, match="(?s)buggy, run apart, crashed.*ZeroDivisionError"):
        a.finish()


def test_closing_stops_the_checks_still_running():
    a = Apart(2)
    a.start("slow", lambda: time.sleep(30))
    t = time.perf_counter()
    a.close()
    assert not a.pending and time.perf_counter() - t < 5


def test_the_command_lines_allocator_tuning_is_taken_where_glibc_is():
    """planner/allocator.py: mallopt takes the three parameters on glibc (this machine and
    CI), again when asked again, and numpy asks for huge pages no more."""
    import platform

    from tcplan.planner.allocator import tune
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's mallopt")
    assert tune() is True and tune() is True
    core = getattr(np, "_core", None) or np.core  # (numpy 2, or 1.26)
    assert core.multiarray._get_madvise_hugepage() is False


def test_how_many_checks_run_apart():
    """``--jobs 1`` checks every op in the run; more, one check a process, at most
    APART_MAX_CHECKS (each has memories of its own)."""
    from types import SimpleNamespace

    from tcplan.model.limits import APART_MAX_CHECKS
    from tcplan.planner.op_pool import checkers
    assert [checkers(SimpleNamespace(jobs=j)) for j in (1, 2, 3, 64)] == [
        0, 2, min(3, APART_MAX_CHECKS), APART_MAX_CHECKS]
    assert APART_MAX_CHECKS == 4
