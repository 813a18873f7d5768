"""Benchmark: the Qwen3 decode kernels' data movement, their own layouts against planned ones.

    python benchmarks/bench_kernels.py [--verify]

For every kernel function of problems/kernels/qwen3/ (a graph of its to_dm, to_hbm_view,
Fetch and Commit moves, each layout as the kernel types it: ``<function>.yaml``), and the
same graph with its DM and HBM Elements free (``<function>_free.yaml``): both solved in the
same run (DMA streams planned in both; Fetch and Commit streams as the computation fixes
them): each graph's cycles summed over its ops, its makespan on the three contexts (the
schedule, planner/schedule.py; the free variant is planned for it: ``objective:
makespan``), the ratios kernel / planned and the seconds of each plan; then, per op whose
cycles differ, the two layouts.  The same
planner plans both, so the ratio is what the kernel's layout choice costs, nothing else.
``--verify`` also runs both plans over simulated memories (slower).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import tcplan

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "problems/kernels/qwen3"


def _solve(path: Path, check: str) -> tuple[dict, float]:
    t0 = time.perf_counter()
    r = tcplan.solve(path, verify=check)
    return r.to_json(), time.perf_counter() - t0


def _makespan(record: dict) -> int | None:
    return (record.get("schedule") or {}).get("makespan")


def _n(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


def _ratio(a: int | None, b: int | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def _ops(record: dict) -> dict[str, dict]:
    return {o["op"]: o for o in (record.get("plan") or {}).get("ops", [])}


def main() -> None:
    check = "full" if "--verify" in sys.argv[1:] else "none"
    pairs = [(f, f.with_name(f.stem + "_free.yaml")) for f in sorted(KERNELS.glob("*.yaml"))
             if not f.stem.endswith("_free") and f.with_name(f.stem + "_free.yaml").exists()]
    print(f"{'kernel function':<34} {'ops':>4} {'kernel sum':>11} {'planned':>9} "
          f"{'ratio':>6} {'kernel makespan':>15} {'planned':>9} {'ratio':>6} "
          f"{'s (kernel)':>10} {'s (free)':>9}")
    diffs, total_k, total_f, span_k, span_f = [], 0, 0, 0, 0
    for given, free in pairs:
        rk, sk = _solve(given, check)
        rf, sf = _solve(free, check)
        ck, cf = rk.get("sum_cycles"), rf.get("sum_cycles")
        mk, mf = _makespan(rk), _makespan(rf)
        print(f"{given.stem:<34} {len(_ops(rk)) or '-':>4} {_n(ck):>11} {_n(cf):>9} "
              f"{_ratio(ck, cf):>6} {_n(mk):>15} {_n(mf):>9} {_ratio(mk, mf):>6} "
              f"{sk:>10.2f} {sf:>9.2f}")
        if ck and cf and mk and mf:
            total_k, total_f = total_k + ck, total_f + cf
            span_k, span_f = span_k + mk, span_f + mf
        layouts = (rf.get("plan") or {}).get("layouts", {})
        for name, op in _ops(rk).items():
            other = _ops(rf).get(name)
            if other and op["cycles"] != other["cycles"]:
                diffs.append((given.stem, name, op["cycles"], other["cycles"], layouts))
    if total_f:
        print(f"{'all functions':<34} {'':>4} {total_k:>11,} {total_f:>9,} "
              f"{total_k / total_f:>6.2f} {span_k:>15,} {span_f:>9,} {span_k / span_f:>6.2f}")
    if diffs:
        print("\nops whose cycles differ (kernel -> planned), with the planned free layouts:")
        for fn, op, a, b, layouts in diffs:
            print(f"  {fn}: {op}: {a:,} -> {b:,} ({a / b:.2f}x)")
            for t, el in sorted(layouts.items()):
                print(f"      {t}: {el}")


if __name__ == "__main__":
    main()
