"""Benchmark: executor throughput and memory.

    python benchmarks/bench_executor.py [--reference-elements 200000]

1. Example 2 (HBM -> DM, 16 MiB): simulated bytes per second of ``executor.run.execute``
   against a per-element Python reference (one address computation, one read and one write per
   element) run on the first elements of the same transfer, in the same run; target >= 100x.
2. Example 4 (HBM -> DM, 128 MiB through bounded chunks): wall time of place + execute +
   verify, and the process's peak resident memory; target < 4 GiB.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from executor.memory import Memories  # noqa: E402
from executor.run import execute, extents, place, run_dma, tensor_values  # noqa: E402
from planner.lowering import lower_problem  # noqa: E402
from planner.spec import load_problem  # noqa: E402


def reference(mem: Memories, plan, limit: int) -> int:
    """Per-element Python: the loop nest one iteration at a time."""
    eb = plan.elem_bytes
    e = plan.engines[0]
    c = e.commands[0]
    rs = mem.space(plan.source.tier, e.read_chip)
    ws = mem.space(plan.destination.tier, e.write_chip)
    sizes = [n for n, _, _ in c.entries]
    moved = 0
    for i in range(limit):
        rest, r, w = i, c.read_base, c.write_base
        for k in range(len(sizes) - 1, -1, -1):
            d = rest % sizes[k]
            rest //= sizes[k]
            r += d * c.entries[k][1] * eb
            w += d * c.entries[k][2] * eb
        ra = rs.physical(_one(r))[0]
        wa = ws.physical(_one(w))[0]
        ws.data[wa: wa + eb] = rs.data[ra: ra + eb]
        moved += 1
    return moved


def _one(x: int):
    import numpy as np
    return np.array([x], np.int64)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference-elements", type=int, default=200_000)
    args = ap.parse_args()
    rows = []

    p2 = load_problem(ROOT / "problems/seed/dma_example_2.yaml")
    plan2 = lower_problem(p2)
    mem = Memories(extents([plan2.source, plan2.destination]))
    T = tensor_values(p2.axes, plan2.source.dtype, 0)
    place(mem, plan2.source, p2.axes, T)
    t0 = time.perf_counter()
    moved = execute(mem, plan2)
    t_vec = time.perf_counter() - t0
    vec_rate = moved * plan2.elem_bytes / t_vec
    t0 = time.perf_counter()
    n_ref = reference(mem, plan2, args.reference_elements)
    t_ref = time.perf_counter() - t0
    ref_rate = n_ref * plan2.elem_bytes / t_ref
    rows.append(("Example 2 executor", f"{moved * plan2.elem_bytes / 2**20:,.0f} MiB",
                 f"{t_vec:.2f} s", f"{vec_rate / 2**20:,.1f} MiB/s", ""))
    rows.append(("Example 2 per-element reference", f"{n_ref * plan2.elem_bytes / 2**20:,.2f} MiB",
                 f"{t_ref:.2f} s", f"{ref_rate / 2**20:,.3f} MiB/s",
                 f"speed-up {vec_rate / ref_rate:,.0f}x (target 100x)"))
    del mem, T

    p4 = load_problem(ROOT / "problems/seed/dma_example_4.yaml")
    plan4 = lower_problem(p4)
    t0 = time.perf_counter()
    r = run_dma(p4, plan4, seed=0)
    t4 = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    rows.append(("Example 4 place+execute+verify", f"{r['moved'] / 2**20:,.0f} MiB",
                 f"{t4:.1f} s", f"peak RSS {peak / 2**30:.2f} GiB", "target < 4 GiB"))

    head = ("run", "data", "time", "rate / memory", "note")
    widths = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]
    for row in [head] + rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip())


if __name__ == "__main__":
    main()
