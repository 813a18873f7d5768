"""Benchmark: executor throughput and memory (issue 16).

    python benchmarks/bench_executor.py [--reference-elements 200000]

Each scenario runs in a fresh process, so that its peak resident memory is its own.

1. Example 2 (HBM -> DM, 16 MiB): ``executor.run.execute`` (strided views, write counts
   included) against numpy copying between the very same strided views (``np.copyto``, no
   counting), timed in the same process, best of 3 each; target >= 25% of numpy's rate.
   Then the per-element Python reference (one address computation, one read and one write per
   element) on the first elements of the same transfer, and the fast path's agreement with it.
2. Example 4 (HBM -> DM, 128 MiB): place + execute + verify wall time and peak resident
   memory; targets <= 10 s and < 2 GiB.
3. A 1 GiB bf16 KV cache re-laid out in HBM (benchmarks/problems/kv_cache_1gib.yaml): each
   stage's time, the copy's rate against numpy between the same views, and peak memory
   (what it holds: T, both simulated tensors and the write counters, no index arrays).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from tcplan.executor import strided  # noqa: E402
from tcplan.executor.memory import Memories  # noqa: E402
from tcplan.executor.run import execute, extents, place, run_dma, tensor_bits, verify  # noqa: E402
from tcplan.planner.lowering import lower_problem  # noqa: E402
from tcplan.planner.spec import load_problem  # noqa: E402


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
        ra = rs.physical(np.array([r], np.int64))[0]
        wa = ws.physical(np.array([w], np.int64))[0]
        ws.data[wa: wa + eb] = rs.data[ra: ra + eb]
        moved += 1
    return moved


def numpy_copy(mem: Memories, plan) -> float:
    """Seconds numpy takes to copy between the plan's own strided views (merged), no
    bookkeeping: the baseline."""
    eb = plan.elem_bytes
    t0 = time.perf_counter()
    for e in plan.engines:
        rs = mem.space(plan.source.tier, e.read_chip)
        ws = mem.space(plan.destination.tier, e.write_chip)
        for c in e.commands:
            shape = tuple(n for n, _, _ in c.entries)
            src = strided.view(rs, c.read_base, shape, tuple(r * eb for _, r, _ in c.entries),
                               eb)
            dst = strided.view(ws, c.write_base, shape,
                               tuple(w * eb for _, _, w in c.entries), eb)
            src, dst = strided.merged(src, dst)
            np.copyto(dst, src)
    return time.perf_counter() - t0


def _prepared(path: Path):
    p = load_problem(path)
    plan = lower_problem(p)
    mem = Memories(extents([plan.source, plan.destination]))
    T = tensor_bits(p.axes, plan.source.dtype, 0)
    return p, plan, mem, T


def _best(f, n: int = 3) -> float:
    return min(f() for _ in range(n))


def example_2(args) -> dict:
    p, plan, mem, T = _prepared(ROOT / "problems/seed/dma_example_2.yaml")
    place(mem, plan.source, p.axes, T)
    place(mem, plan.destination, p.axes, None)
    nbytes = execute(mem, plan) * plan.elem_bytes  # (touches every page once)
    t_np = _best(lambda: numpy_copy(mem, plan))

    def ours() -> float:
        t0 = time.perf_counter()
        execute(mem, plan)
        return time.perf_counter() - t0
    t_ex = _best(ours)
    t0 = time.perf_counter()
    n_ref = reference(mem, plan, args.reference_elements)
    t_ref = time.perf_counter() - t0
    return {"bytes": nbytes, "executor_s": t_ex, "numpy_s": t_np,
            "reference_bytes": n_ref * plan.elem_bytes, "reference_s": t_ref}


def example_4(args) -> dict:
    p = load_problem(ROOT / "problems/seed/dma_example_4.yaml")
    plan = lower_problem(p)
    t0 = time.perf_counter()
    r = run_dma(p, plan, seed=0)
    return {"bytes": r["moved"] * plan.elem_bytes, "seconds": time.perf_counter() - t0}


def kv_cache(args) -> dict:
    p, plan, mem, T = _prepared(ROOT / "benchmarks/problems/kv_cache_1gib.yaml")
    out = {}
    t0 = time.perf_counter()
    place(mem, plan.source, p.axes, T)
    place(mem, plan.destination, p.axes, None)
    out["place_s"] = time.perf_counter() - t0
    t_np = numpy_copy(mem, plan)
    t0 = time.perf_counter()
    moved = execute(mem, plan)
    out["execute_s"] = time.perf_counter() - t0
    out["numpy_s"] = t_np
    t0 = time.perf_counter()
    out["checked"] = verify(mem, plan.destination, p.axes, T, moved)["checked"]
    out["verify_s"] = time.perf_counter() - t0
    out["bytes"] = moved * plan.elem_bytes
    return out


SCENARIOS = {"example_2": example_2, "example_4": example_4, "kv_cache": kv_cache}


def child(name: str, args) -> dict:
    """Run one scenario in a fresh interpreter: its result and its own peak memory."""
    cmd = [sys.executable, __file__, "--scenario", name,
           "--reference-elements", str(args.reference_elements)]
    got = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(got.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference-elements", type=int, default=200_000)
    ap.add_argument("--scenario", choices=SCENARIOS)
    args = ap.parse_args()
    if args.scenario:
        out = SCENARIOS[args.scenario](args)
        out["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps(out))
        return
    mib, gib = 2**20, 2**30
    e2 = child("example_2", args)
    rate = e2["bytes"] / e2["executor_s"]
    np_rate = e2["bytes"] / e2["numpy_s"]
    ref_rate = e2["reference_bytes"] / e2["reference_s"]
    print(f"Example 2 ({e2['bytes'] / mib:,.0f} MiB): executor {rate / mib:,.0f} MiB/s, numpy "
          f"copy between the same views {np_rate / mib:,.0f} MiB/s: "
          f"{rate / np_rate:.0%} of numpy (target >= 25%); per-element reference "
          f"{ref_rate / mib:,.2f} MiB/s ({rate / ref_rate:,.0f}x slower than the executor)")
    e4 = child("example_4", args)
    print(f"Example 4 ({e4['bytes'] / mib:,.0f} MiB): place + execute + verify "
          f"{e4['seconds']:.1f} s (target <= 10 s), peak RSS {e4['peak_rss'] / gib:.2f} GiB "
          f"(target < 2 GiB)")
    kv = child("kv_cache", args)
    total = kv["place_s"] + kv["execute_s"] + kv["verify_s"]
    print(f"KV cache ({kv['bytes'] / gib:.0f} GiB, HBM -> HBM): place {kv['place_s']:.1f} s, "
          f"execute {kv['execute_s']:.1f} s ({kv['bytes'] / kv['execute_s'] / gib:.2f} GiB/s; "
          f"numpy between the same views {kv['bytes'] / kv['numpy_s'] / gib:.2f} GiB/s, "
          f"{kv['numpy_s'] / kv['execute_s']:.0%}), verify {kv['verify_s']:.1f} s; "
          f"{total:.1f} s in all; peak RSS {kv['peak_rss'] / gib:.2f} GiB "
          f"({kv['peak_rss'] / kv['bytes']:.1f}x the bytes moved: T, source, destination "
          f"and write counters)")


if __name__ == "__main__":
    main()
