"""Benchmark: planning time and plan quality.

    python benchmarks/bench_planner.py

1. Every planning problem (problems/planning/*.yaml, problems/expressions/*.yaml): solve time
   (search only, one worker; verification is not timed) and, for DMA layout searches, where
   it goes (CP-SAT, lowering, the estimate and floors), modeled cycles and the lower bound;
   then median and p95 solve time (issue 25's targets on a 2-core machine: median <= 0.2 s,
   p95 <= 1 s) and the mean ratio of planned cycles to the lower bound (target <= 1.15).
   The baseline, in the same run: every problem planned again without the DMN floor that
   prices an engine split's options and a free source's (model.cost.dmn_floor, issue 25),
   as the search did before; the ratio of the two medians and p95s.  Then a whole
   `tcplan solve --json -q problems/planning/attention_k_to_dm.yaml` (target under 1 s),
   three runs each way: as it is, and with ml_dtypes imported first (as every command did
   before issue 25) and the DMN floor off; and the import time of the command line.
2. The layout search against an itertools enumeration of every order and packet on small
   generated problems (tests/test_layout_planner.py's generator), in the same run: the ratio of
   the two times.
   Then the seed's Example 4: its given stream against the planned one under the full model.
   Then every problem with a free HBM source, planned two ways in the same run: before, every
   source order an option of its own (the baseline); after, the outer model of the HBM
   address bits (planner/bits.py): option models searched, plans lowered and estimated (the
   propose-estimate-exclude rounds) and seconds.
3. The same on the generated problems with 5 to 7 free factors of
   tests/test_layout_optimality.py (the enumeration there costs 5!*6 to 7!*8 plans).
4. Every graph (problems/graphs/*.yaml): the joint plan against planning each op alone in
   topological order, each op keeping the layouts the ops before it fixed (the first op's
   layout fixed by the first op): the graph's cycles both ways and their ratio, and the
   seconds of the joint plan (every op's candidates planned, then CP-SAT).

   python benchmarks/bench_planner.py --graphs    (only part 4)
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from tcplan.model.cost import lower_bound  # noqa: E402
from tcplan.model.rules import TcplanError  # noqa: E402
from tcplan.planner.chains import plan_expression  # noqa: E402
from tcplan.planner.hops import plan_hops  # noqa: E402
from tcplan.planner.layout import SearchRequest, search  # noqa: E402
from tcplan.planner.dma_plan import plan_free  # noqa: E402
from tcplan.planner.dma_spec import DmaSpec  # noqa: E402
from tcplan.planner.outcome import unwrap  # noqa: E402
from tcplan.planner.spec import load_problem  # noqa: E402


def main() -> None:
    if "--graphs" in sys.argv[1:]:
        _graphs()
        return
    times, ratios, unproven = [], [], []
    print(f"{'problem':<38} {'solve s':>8} {'cp-sat':>7} {'lower':>6} {'estim.':>6} "
          f"{'est. cycles':>11} {'bound':>10} {'rounds':>7}")
    files = sorted((ROOT / "problems/planning").glob("*.yaml")) + \
        sorted((ROOT / "problems/expressions").glob("*.yaml"))
    for f in files:
        p = load_problem(f)
        t0 = time.perf_counter()
        rounds, spent = "-", {}
        try:
            if p.kind == "expression":
                plan = plan_expression(p)
                cycles, bound = plan.cycles, None
            elif isinstance(p.spec, DmaSpec) and p.spec.hops > 1:
                cycles, bound, best = unwrap(plan_hops(p)).cycles, None, None
            elif p.kind in ("fetch", "commit"):
                from tcplan.planner.kinds import Options, kind_of
                _, cycles, _ = kind_of(p).plan(p, Options())
                bound, best = None, None
            else:
                out = plan_free(p)
                found = unwrap(out)
                best, rounds, spent = found.best, found.enumerated, found.times
                if out.status != "optimal":
                    unproven.append(p.name)
                cycles, bound = best.cycles, None
        except TcplanError as e:
            cycles, bound = e.code, None
        dt = time.perf_counter() - t0
        if p.kind != "expression" and isinstance(cycles, int) and best is not None:
            bound = lower_bound(best.plan)
            ratios.append(cycles / bound)
        times.append(dt)
        cp = spent.get("cp-sat", 0.0) + spent.get("outer cp-sat", 0.0)
        cols = (f"{cp:>7.3f} {spent['lowering']:>6.3f} {spent['estimate']:>6.3f}"
                if spent else f"{'-':>7} {'-':>6} {'-':>6}")
        print(f"{p.name:<38} {dt:>8.3f} {cols} {cycles!s:>11} "
              f"{bound if bound else '-'!s:>10} {rounds!s:>7}")
    med, p95 = _median_p95(times)
    with _without_dmn_floor():
        before = [_plan_seconds(load_problem(f)) for f in files]
    bmed, bp95 = _median_p95(before)
    print(f"\nsolve time: median {med:.3f} s (target <= 0.2 s), p95 {p95:.3f} s (target "
          f"<= 1 s); before (no DMN floor, same run): median {bmed:.3f} s, p95 {bp95:.3f} s; "
          f"ratio {med / bmed:.2f} and {p95 / bp95:.2f}")
    _whole_command()
    if ratios:
        print(f"planned cycles / lower bound: mean {statistics.mean(ratios):.3f} "
              "(target <= 1.15)")
    print("every DMA plan proven optimal" if not unproven else
          f"not proven optimal: {', '.join(unproven)}")
    _example_4()
    _free_sources(files)
    # search vs brute force on small generated problems
    from test_layout_planner import brute_force, free_problem
    t_s = t_b = 0.0
    for seed in range(12):
        p = free_problem(seed)
        a, b = _race(p, lambda p=p: brute_force(p))
        t_s, t_b = t_s + a, t_b + b
    print(f"layout search {t_s:.2f} s vs itertools enumeration {t_b:.2f} s on 12 small "
          f"problems: ratio {t_s / t_b:.2f}")
    from test_layout_optimality import SIZES, enumerate_all, problem_text

    from tcplan.planner.spec import load_problem_text
    print("\nfactors  search s  enumeration s  ratio")
    for seed, k in enumerate(SIZES):
        if k < 5:
            continue
        p = load_problem_text(problem_text(seed, k), f"<generated {seed}>")
        a, b = _race(p, lambda seed=seed: enumerate_all(seed))
        print(f"{k:7d}  {a:8.3f}  {b:13.2f}  {a / b:.4f}")
    _graphs()


def _median_p95(times: list[float]) -> tuple[float, float]:
    ts = sorted(times)
    return statistics.median(ts), ts[min(len(ts) - 1, int(round(0.95 * (len(ts) - 1))))]


def _plan_seconds(p) -> float:
    """One problem planned (as part 1 plans it), in seconds."""
    t0 = time.perf_counter()
    try:
        if p.kind == "expression":
            plan_expression(p)
        elif isinstance(p.spec, DmaSpec) and p.spec.hops > 1:
            plan_hops(p)
        elif p.kind in ("dma", "pcie"):
            plan_free(p)
        else:
            from tcplan.planner.kinds import Options, kind_of
            kind_of(p).plan(p, Options())
    except TcplanError:
        pass
    return time.perf_counter() - t0


class _without_dmn_floor:
    """The search as it was before issue 25: no DMN floor in an option's price."""

    def __enter__(self):
        import tcplan.model.cost as cost
        import tcplan.planner.sources as sources
        self.saved = cost.dmn_floor
        cost.dmn_floor = sources.dmn_floor = lambda t: 0

    def __exit__(self, *exc):
        import tcplan.model.cost as cost
        import tcplan.planner.sources as sources
        cost.dmn_floor = sources.dmn_floor = self.saved


def _whole_command() -> None:
    """`tcplan solve --json -q` of attention_k_to_dm end to end, three runs each way: as it
    is, and as before issue 25 (ml_dtypes imported by every command, no DMN floor)."""
    import subprocess
    problem = str(ROOT / "problems/planning/attention_k_to_dm.yaml")
    now = [sys.executable, "-m", "tcplan", "solve", "--json", "-q", problem]
    then = [sys.executable, "-c", "import ml_dtypes, runpy, sys; sys.argv = ['tcplan'] + "
            "sys.argv[1:]; import tcplan.model.cost as c, tcplan.planner.sources as s; "
            "c.dmn_floor = s.dmn_floor = lambda t: 0; runpy.run_module('tcplan', "
            "run_name='__main__')", "solve", "--json", "-q", problem]

    def best(argv: list[str]) -> float:
        out = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            out.append(time.perf_counter() - t0)
        return statistics.median(out)
    a, b = best(now), best(then)
    imp = subprocess.run([sys.executable, "-X", "importtime", "-c", "import tcplan.planner.cli"],
                         capture_output=True, text=True).stderr.strip().splitlines()[-1]
    print(f"tcplan solve --json -q attention_k_to_dm.yaml: {a:.2f} s (target under 1 s); "
          f"before: {b:.2f} s; ratio {a / b:.2f}; import of the command line "
          f"{int(imp.split('|')[1]) / 1e6:.2f} s")


def _graphs() -> None:
    """Joint graph plans against each op planned alone (the first op's layout fixed)."""
    from tcplan.planner.graph_plan import choose, evaluate, greedy
    from tcplan.planner.kinds import Options
    print(f"\n{'graph':<34} {'objective':>13} {'joint':>9} {'op by op':>9} {'ratio':>7} "
          f"{'plans':>6} {'plan s':>7}")
    for f in sorted((ROOT / "problems" / "graphs").glob("*.yaml")):
        g = load_problem(f).spec.graph
        t0 = time.perf_counter()
        table = evaluate(g, Options())
        joint = unwrap(choose(g, table))
        secs = time.perf_counter() - t0
        alone = greedy(g, table)
        alone_c = None if alone is None else (
            alone.sum_cycles if g.objective == "sum" else alone.critical_path_cycles)
        ratio = ("-" if alone_c is None or not joint.cycles
                 else f"{alone_c / joint.cycles:.2f}x")
        alone_t = "no plan" if alone_c is None else f"{alone_c:,}"
        print(f"{f.stem[:34]:<34} {g.objective:>13} {joint.cycles:>9,} {alone_t:>9} "
              f"{ratio:>7} {joint.evaluations:>6} {secs:>7.2f}")


def _example_4() -> None:
    """The seed's Example 4: its given stream and the planned one under the full model
    (docs/decisions.md item 73: first row opens overlap, re-opens serialize)."""
    from tcplan.model.cost import dma_cycles
    from tcplan.planner.lowering import lower_problem
    given = dma_cycles(lower_problem(load_problem(ROOT / "problems/seed/dma_example_4.yaml")))
    best = unwrap(plan_free(load_problem(ROOT / "problems/planning/dma_example_4_free.yaml"))
                  ).best
    t0 = time.perf_counter()
    planned = dma_cycles(best.plan)
    t_full = time.perf_counter() - t0
    bound = lower_bound(best.plan)
    print(f"\nExample 4, full model: given stream {given.cycles:,} cycles (seed 655,860; "
          f"{given.hbm['first_opens']:,} first opens and {given.hbm['reopens']:,} re-opens on "
          f"its hottest channel), planned {planned.cycles:,} (bus floor {bound:,}; "
          f"{planned.hbm['reopens']:,} re-opens): {given.cycles / planned.cycles:.2f}x; the "
          f"full model (every request) took {t_full:.2f} s (target <= 2 s)")


def _free_sources(files) -> None:
    """Problems with a free HBM source: every order an option (before) against the outer
    model of the address bits (after), in the same run."""
    print(f"\n{'free HBM source':<38} {'cycles':>7} {'models':>13} {'rounds':>11} "
          f"{'seconds':>13} {'speed-up':>8}")
    print(f"{'':<38} {'':>7} {'before after':>13} {'before after':>11} "
          f"{'before  after':>13}")
    for f in files:
        p = load_problem(f)
        if not isinstance(p.spec, DmaSpec) or p.spec.free_source is None:
            continue
        runs = []
        for method in ("options", "bits"):
            t0 = time.perf_counter()
            try:
                found = unwrap(plan_free(p, method=method))
                runs.append((found.best.cycles, found.models, found.enumerated,
                             time.perf_counter() - t0))
            except TcplanError as e:
                runs.append((e.code, "-", "-", time.perf_counter() - t0))
        (ca, ma, ra, ta), (cb, mb, rb, tb) = runs
        same = "" if ca == cb else f" (before: {ca})"
        print(f"{p.name:<38} {cb!s:>7} {ma!s:>6} {mb!s:>6} {ra!s:>5} {rb!s:>5} "
              f"{ta:>6.2f} {tb:>6.2f} {ta / tb:>7.1f}x{same}")


def _race(p, enumeration) -> tuple[float, float]:
    """Seconds of the layout search and of the enumeration on one problem."""
    t = p.tensors
    t0 = time.perf_counter()
    search(SearchRequest(t["source"], t["destination"], t["stream"], p.chips))
    t1 = time.perf_counter()
    enumeration()
    return t1 - t0, time.perf_counter() - t1

if __name__ == "__main__":
    main()
