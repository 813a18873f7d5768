"""Benchmark: planning a whole decode step of Qwen3-0.6B, 1 to 28 layers (issue 32 item 7).

    python benchmarks/bench_scale.py [--quick] [--baseline-limit S]

Each case is problems/kernels/qwen3/decode_step.py's graph (``--layers N``, typed or
``--free``), solved by ``tcplan solve FILE --json --verify none`` in a child process: the
wall time and the child's peak RSS (``resource.getrusage(RUSAGE_CHILDREN)``, each case in
a fresh child so the peak is its own), the cycles and, where ``solve --json`` reports it,
the op-plan cache's hit rate (``op_plans``; ``-`` where absent).  Beside each, the
baseline: the same solve with :data:`BASELINE_FLAGS` (the flat planner, once solve has a
flag for it), stopped at ``--baseline-limit`` seconds (then ``stopped``), and the ratio
baseline / current.  ``--quick``: 1 and 2 layers only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "problems/kernels/qwen3/decode_step.py"
TCPLAN = [sys.executable, "-m", "tcplan"]

#: the flags that make ``tcplan solve`` plan the flat baseline (the hook: none yet, so the
#: baseline is today's solve)
BASELINE_FLAGS: list[str] = []


def _generate(layers: int, free: bool, out: Path) -> str | None:
    """The case's file, or why the generator refused it."""
    cmd = [sys.executable, str(GENERATOR), "--layers", str(layers), "-o", str(out)]
    r = subprocess.run(cmd + (["--free"] if free else []), capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


def _solve(path: Path, flags: list[str], limit: float | None) -> dict:
    """One solve in a fresh child: its JSON, wall seconds, peak RSS (MiB)."""
    code = ("import resource, subprocess, sys, json, time; t = time.perf_counter(); "
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "w = time.perf_counter() - t; "
            "r = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
            "print(json.dumps({'rc': p.returncode, 'wall': w, 'rss': r, 'out': p.stdout, "
            "'err': p.stderr[-2000:]}))")
    cmd = [sys.executable, "-c", code, *TCPLAN, "solve", str(path), "--json", "--verify",
           "none", *flags]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"stopped": True, "wall": time.perf_counter() - t0}
    got = json.loads(r.stdout)
    try:
        record = json.loads(got["out"])
    except json.JSONDecodeError:
        record = {"error": {"message": got["err"].strip().splitlines()[-1:]}}
    return {"record": record, "wall": got["wall"], "rss": got["rss"] / 1024}


def _hits(record: dict) -> str:
    plans = record.get("op_plans")
    if not isinstance(plans, dict):
        return "-"
    hits, misses = plans.get("hits"), plans.get("misses")
    if isinstance(hits, int) and isinstance(misses, int) and hits + misses:
        return f"{hits / (hits + misses):.0%}"
    return str(plans.get("hit_rate", "-"))


def _cycles(record: dict) -> str:
    c = record.get("cycles")
    return f"{c:,}" if isinstance(c, int) else str(record.get("status") or "error")


def _row(layers: int, free: bool, limit: float) -> str:
    label = f"{layers:>3} {'free' if free else 'typed':<6}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "step.yaml"
        why = _generate(layers, free, path)
        if why:
            return f"{label} not generated: {why}"
        size = os.path.getsize(path) / 2**20
        cur = _solve(path, [], None)
        base = _solve(path, BASELINE_FLAGS, limit)
    rec = cur.get("record", {})
    if base.get("stopped"):
        b_wall, ratio = f"stopped at {limit:.0f} s", "-"
    else:
        b_wall, ratio = f"{base['wall']:.1f} s", f"{base['wall'] / cur['wall']:.2f}x"
    return (f"{label} {size:>5.1f} MiB {_cycles(rec):>12} {cur['wall']:>8.1f} s "
            f"{cur['rss']:>7.0f} MiB {_hits(rec):>6}   {b_wall:>16} {ratio:>7}"
            + ("" if "error" not in rec else f"   error: {rec['error'].get('message')}"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 and 2 layers only")
    ap.add_argument("--baseline-limit", type=float, default=600.0,
                    help="seconds each baseline solve may take (default 600)")
    a = ap.parse_args()
    flags = " ".join(BASELINE_FLAGS) or "(none yet: the baseline is the current solve)"
    print(f"baseline flags: {flags}")
    print(f"{'lay':>3} {'kind':<6} {'file':>9} {'cycles':>12} {'wall':>10} {'peak RSS':>11} "
          f"{'hits':>6}   {'baseline wall':>16} {'ratio':>7}")
    for layers in (1, 2) if a.quick else (1, 2, 4, 28):
        for free in (False, True):
            print(_row(layers, free, a.baseline_limit), flush=True)


if __name__ == "__main__":
    main()
