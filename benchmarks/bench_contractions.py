"""Benchmark: a contraction planned from its einsum (issue 30, item 7; docs/contractions.md).

    python benchmarks/bench_contractions.py [--repeat N]

For every problem of problems/contractions/: the seconds of tcplan's search
(planner/contraction_search.py ``search``: the candidates in the order of their bound, the
CP-SAT choice) beside a baseline in the same run, an enumeration of every candidate mapping
(each lowered by the Contraction Engine's model, the best kept), with their ratio, the
candidates each evaluated and the cycles each found (they must agree); then the median of
the search's seconds (the issue's target: under 1 s).  The best of ``--repeat`` runs
(default 3).  Planning only: the check on data is ``tcplan solve``'s.

Then, for the problems with ``moves:`` (planner/contraction_moves.py ``search``: the
candidates' graphs in the order of their bound), the seconds of that search beside a
baseline that plans every candidate's graph (op plans reused across the graphs in both,
so the ratio is the bound's), the graphs each planned and the makespans (they must
agree).  One run each (``--repeat`` does not apply: they take seconds).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import tcplan
from tcplan.planner import contraction_search as cs

ROOT = Path(__file__).resolve().parents[1]


def _best(f, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def enumerate_all(p) -> tuple[int, int]:
    """The baseline: every candidate lowered, the least (cycles, engaged, units) kept."""
    e, axes, dtype = p.spec.einsum, p.axes, p.dtype
    held, _ = cs.family(e, axes, dtype, lambda c: cs.matches(c, p.spec.fixed, axes))
    rows = [cs.evaluate(c, e, axes, dtype) for c in held]
    ok = [r for r in rows if r.plan is not None]
    best = min(ok, key=lambda r: (r.cycles, r.engaged, r.candidate.units))
    return best.cycles, len(rows)


def main() -> None:
    args = sys.argv[1:]
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 3
    print(f"{'contraction':<22} {'einsum':<14} {'cands':>6} {'search s':>9} {'evaluated':>9} "
          f"{'enumerate s':>11} {'ratio':>7} {'cycles':>7}")
    times = []
    for path in sorted((ROOT / "problems/contractions").glob("*.yaml")):
        p = tcplan.load(path)
        t_s, out = _best(lambda: cs.search(p.spec.einsum, p.axes, p.dtype, p.spec.fixed),
                         repeat)
        t_e, (cycles, n) = _best(lambda: enumerate_all(p), repeat)
        assert out.best is not None and out.best.cycles == cycles, path.name
        times.append(t_s)
        print(f"{path.stem:<22} {p.spec.einsum.text():<14} {n:>6} {t_s:>9.3f} "
              f"{out.evaluated:>9} {t_e:>11.3f} {t_e / t_s:>6.1f}x {cycles:>7,}", flush=True)
    print(f"\nmedian search: {statistics.median(times):.3f} s over {len(times)} contractions "
          "(target: under 1 s)")
    moves()


def every_graph(p) -> tuple[int, int]:
    """The baseline with moves: every candidate's graph planned, the least makespan."""
    from tcplan.planner import contraction_moves as cm
    from tcplan.planner.registry import Options, OpPlans
    e, axes, dtype, s = p.spec.einsum, p.axes, p.dtype, p.spec
    opts = Options(op_plans=OpPlans(), verify="none")
    spans, planned = [], 0
    held, _ = cs.family(e, axes, dtype, lambda c: cs.matches(c, s.fixed, axes)
                        and cm.given_dm(c, e, axes, dtype, s.moves))
    for c in held:
        r = cs.evaluate(c, e, axes, dtype)
        if r.plan is not None:
            t = cm._timed(r, e, axes, dtype, s.moves, opts, p.name)
            planned += 1
            if isinstance(t, cm.Timed):
                spans.append(t.makespan)
    return min(spans), planned


def moves() -> None:
    from tcplan.planner import contraction_moves as cm
    from tcplan.planner.registry import Options
    print(f"\n{'with moves':<22} {'einsum':<14} {'cands':>6} {'search s':>9} {'graphs':>7} "
          f"{'every s':>8} {'graphs':>7} {'ratio':>7} {'makespan':>9}")
    for path in sorted((ROOT / "problems/contractions").glob("*.yaml")):
        p = tcplan.load(path)
        if p.spec.moves is None:
            continue
        t_e, (span, n) = _best(lambda: every_graph(p), 1)  # (first: it pays the imports)
        t_s, out = _best(lambda: cm.search(p.spec.einsum, p.axes, p.dtype, p.spec.fixed,
                                           p.spec.moves, Options(time_limit=600), p.name), 1)
        assert out.best is not None and out.best.makespan == span, path.name
        print(f"{path.stem:<22} {p.spec.einsum.text():<14} {out.candidates:>6} {t_s:>9.2f} "
              f"{out.planned:>7} {t_e:>8.2f} {n:>7} {t_e / t_s:>6.1f}x {span:>9,}", flush=True)


if __name__ == "__main__":
    main()
