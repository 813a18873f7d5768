"""Benchmark: planning a whole decode step of Qwen3-0.6B, 1 to 28 layers (issue 32 item 7).

    python benchmarks/bench_scale.py [--quick] [--baseline-limit S]

Each case is problems/kernels/qwen3/decode_step.py's graph (``--layers N``, typed or
``--free``), solved by ``tcplan solve FILE --json`` in a child process: the
wall time and the child's peak RSS (``resource.getrusage(RUSAGE_CHILDREN)``, each case in
a fresh child so the peak is its own), the cycles and, where ``solve --json`` reports it,
the op-plan cache's hit rate and the op plans branch and bound avoided (``op_plans``),
cold (an empty disk cache) and warm (the same cache again).  Beside each, the baseline:
the same solve with :data:`BASELINE_FLAGS` (the flat planner of before issue 32: every op
plan made, one joint model), stopped at
``--baseline-limit`` seconds (then ``stopped``), the ratio baseline / cold, and whether it
found the same cycles.  ``--quick``: 1 and 2 layers only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "problems/kernels/qwen3/decode_step.py"
TCPLAN = [sys.executable, "-m", "tcplan"]

#: the flags that make ``tcplan solve`` plan the flat baseline
BASELINE_FLAGS: list[str] = ["--flat"]


def _generate(layers: int, free: bool, out: Path) -> str | None:
    """The case's file, or why the generator refused it."""
    cmd = [sys.executable, str(GENERATOR), "--layers", str(layers), "-o", str(out)]
    r = subprocess.run(cmd + (["--free"] if free else []), capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


def _solve(path: Path, flags: list[str], limit: float | None, cache: str,
           verify: str) -> dict:
    """One solve in a fresh child (``TCPLAN_CACHE`` = ``cache``): its JSON, wall seconds,
    peak RSS (MiB)."""
    code = ("import resource, subprocess, sys, json, time; t = time.perf_counter(); "
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "w = time.perf_counter() - t; "
            "r = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
            "print(json.dumps({'rc': p.returncode, 'wall': w, 'rss': r, 'out': p.stdout, "
            "'err': p.stderr[-2000:]}))")
    cmd = [sys.executable, "-c", code, *TCPLAN, "solve", str(path), "--json", "--verify",
           verify, *flags]
    t0 = time.perf_counter()
    # (a session of its own: a stopped case's solve, a grandchild, is stopped with it, not
    # left running beside the next case)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "TCPLAN_CACHE": cache}, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return {"stopped": True, "wall": time.perf_counter() - t0}
    got = json.loads(out)
    try:
        record = json.loads(got["out"])
    except json.JSONDecodeError:
        record = {"error": {"message": got["err"].strip().splitlines()[-1:]}}
    return {"record": record, "wall": got["wall"], "rss": got["rss"] / 1024}


def _hits(record: dict) -> str:
    rate = (record.get("op_plans") or {}).get("hit_rate")
    return f"{rate:.1%}" if isinstance(rate, float) else "-"


def _avoided(record: dict) -> str:
    """The op plans branch and bound avoided (planner/graph_bound.py)."""
    n = (record.get("op_plans") or {}).get("avoided")
    return f"{n:,}" if isinstance(n, int) else "-"


def _cycles(record: dict) -> str:
    c = record.get("cycles")
    return f"{c:,}" if isinstance(c, int) else str(record.get("status") or "error")


def _row(layers: int, free: bool, limit: float, verify: str) -> str:
    """A case: cold (an empty disk cache), warm (the same cache again), the baseline
    (``--flat``, no cache), and whether the baseline found the same cycles."""
    label = f"{layers:>3} {'free' if free else 'typed':<6}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "step.yaml"
        why = _generate(layers, free, path)
        if why:
            return f"{label} not generated: {why}"
        size = os.path.getsize(path) / 2**20
        cache = str(Path(tmp) / "cache")
        cold = _solve(path, [], None, cache, verify)
        warm = _solve(path, [], None, cache, verify)
        base = _solve(path, BASELINE_FLAGS, limit, "off", verify)
    rec = cold.get("record", {})
    if base.get("stopped"):
        b_wall, ratio, same = f"stopped at {limit:.0f} s", "-", "-"
    else:
        b_wall, ratio = f"{base['wall']:.1f} s", f"{base['wall'] / cold['wall']:.2f}x"
        same = "same" if base["record"].get("cycles") == rec.get("cycles") else "DIFFER"
    verified = {True: "yes", False: "NO", None: "-"}[rec.get("verified")]
    return (f"{label} {size:>5.1f} MiB {_cycles(rec):>12} {verified:>4} {cold['wall']:>7.1f} s "
            f"{warm['wall']:>7.1f} s {cold['rss']:>7.0f} MiB {_hits(rec):>6} "
            f"{_avoided(rec):>7}   {b_wall:>16} "
            f"{ratio:>7} {same:>6}"
            + ("" if "error" not in rec else f"   error: {rec['error'].get('message')}"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 and 2 layers only")
    ap.add_argument("--baseline-limit", type=float, default=600.0,
                    help="seconds each baseline solve may take (default 600)")
    ap.add_argument("--verify", choices=("full", "none"), default="full",
                    help="run and check every op end to end (default) or plan only")
    ap.add_argument("--layers", type=int, nargs="*", help="the cases (default 1 2 4 28)")
    a = ap.parse_args()
    print(f"baseline flags: {' '.join(BASELINE_FLAGS)}; verify {a.verify}; "
          f"{os.cpu_count()} cores")
    print(f"{'lay':>3} {'kind':<6} {'file':>9} {'cycles':>12} {'ver':>4} {'cold':>9} "
          f"{'warm':>9} {'peak RSS':>11} {'hits':>6} {'avoided':>7}   {'baseline wall':>16} "
          f"{'ratio':>7} "
          f"{'cycles':>6}")
    for layers in a.layers or ((1, 2) if a.quick else (1, 2, 4, 28)):
        for free in (False, True):
            print(_row(layers, free, a.baseline_limit, a.verify), flush=True)


if __name__ == "__main__":
    main()
