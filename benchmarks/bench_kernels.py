"""Benchmark: the Qwen3 decode kernels, their own layouts and mappings against planned ones.

    python benchmarks/bench_kernels.py [--verify]

For every kernel function of problems/kernels/qwen3/ (a graph of its moves and engine ops,
each layout as the kernel types it: ``<function>.yaml``) and its free variant
(``<function>_free.yaml``: its DM and HBM Elements free and, in proj_q, proj_p, proj_o and
mlp, each contraction one ``contraction`` op whose mapping, Fetch streams, TRF fill and
Commit tcplan chooses), both solved in the same run: each graph's makespan on the three
contexts (planner/schedule.py; the free variant is planned for it, ``objective:
makespan``), the ratio kernel / planned and the seconds of each plan; beside them each
graph's cycles summed over its own ops (where a contraction is one op its sum counts the
op's whole graph, fill and main path, where the kernel's counts each engine op: the
sums' ratio is not a speed-up, the makespans' is).  Then each contraction op beside the
kernel's ``contract``: the engine's cycles and MAC utilization, and the chosen mapping;
then every other op whose cycles differ, with the planned layouts.  The same planner plans
both, so a ratio is what the kernel's choices cost under the model, nothing else.
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
    print(f"{'kernel function':<34} {'ops k/f':>7} {'kernel sum':>11} {'planned':>9} "
          f"{'ratio':>6} {'kernel makespan':>15} {'planned':>9} {'ratio':>6} "
          f"{'s (kernel)':>10} {'s (free)':>9}")
    diffs, total_k, total_f, span_k, span_f = [], 0, 0, 0, 0
    planned: list = []
    for given, free in pairs:
        rk, sk = _solve(given, check)
        rf, sf = _solve(free, check)
        ck, cf = rk.get("sum_cycles"), rf.get("sum_cycles")
        mk, mf = _makespan(rk), _makespan(rf)
        print(f"{given.stem:<34} {f'{len(_ops(rk))}/{len(_ops(rf))}':>7} {_n(ck):>11} {_n(cf):>9} "
              f"{_ratio(ck, cf):>6} {_n(mk):>15} {_n(mf):>9} {_ratio(mk, mf):>6} "
              f"{sk:>10.2f} {sf:>9.2f}")
        if ck and cf and mk and mf:
            total_k, total_f = total_k + ck, total_f + cf
            span_k, span_f = span_k + mk, span_f + mf
        layouts = (rf.get("plan") or {}).get("layouts", {})
        kernel_ops, free_ops = _ops(rk), _ops(rf)
        for name, op in kernel_ops.items():
            other = free_ops.get(name)
            if other and other["kind"] == op["kind"] and op["cycles"] != other["cycles"]:
                diffs.append((given.stem, name, op["cycles"], other["cycles"], layouts))
        contracts = [o for o in kernel_ops.values() if o["kind"] == "contract"]
        mine = [o for o in free_ops.values() if o["kind"] == "contraction"]
        if mine:
            planned.append((given.stem, contracts, mine))
    if total_f:
        print(f"{'all functions':<34} {'':>7} {total_k:>11,} {total_f:>9,} "
              f"{total_k / total_f:>6.2f} {span_k:>15,} {span_f:>9,} {span_k / span_f:>6.2f}")
    _contractions(planned)
    if diffs:
        print("\nother ops whose cycles differ (kernel -> planned), with the planned layouts:")
        for fn, op, a, b, layouts in diffs:
            print(f"  {fn}: {op}: {a:,} -> {b:,} ({a / b:.2f}x)")
            for t, el in sorted(layouts.items()):
                print(f"      {t}: {el}")


def _contractions(planned: list) -> None:
    """Each planned contraction op beside the kernel's contract ops (in graph order)."""
    if not planned:
        return
    print("\ncontractions: the kernel's contract -> the planned op's (cycles, MAC "
          "utilization), the op's TRF fill, its mapping")
    for fn, contracts, mine in planned:
        for k, o in zip(contracts, mine):
            print(f"  {fn}: {k['op']} {k['cycles']:,} ({k['mac_utilization']:.2f}) -> "
                  f"{o['op']} {o['contraction_cycles']:,} ({o['mac_utilization']:.2f}); "
                  f"fill {o['trf_fill_cycles']:,}")
            print("      " + ", ".join(f"{d} {v}" for d, v in o["mapping"].items()))


if __name__ == "__main__":
    main()
