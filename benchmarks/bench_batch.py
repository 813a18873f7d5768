"""Benchmark: `tcplan batch` on the local process pool against a Dask cluster.

    python benchmarks/bench_batch.py [--problems 200] [--jobs 2]

Writes N generated problems (small HBM -> DM transfers with random layouts and a free
stream, each planned, lowered, executed and verified: 0.05 to 0.5 s of work) to a temporary
directory, then times the same command with `--backend local` and `--backend dask` (a local
cluster of --jobs single-threaded workers, started by the command), each as a fresh process,
and prints the wall times side by side with their ratio. It also prints what crosses the
wire per problem (the problem's text out, its row back), and checks that both backends gave
the same rows (apart from the seconds).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def problem_text(seed: int) -> str:
    rng = random.Random(seed)
    names = ["A", "B", "C", "D"][:rng.choice([2, 3, 3, 4])]
    axes = {a: rng.choice([4, 8, 16, 32]) for a in names}
    src, dst = names[:], names[:]
    rng.shuffle(src)
    rng.shuffle(dst)
    slice_axis = dst.pop(0)
    return f"""kind: dma
name: generated_{seed:04d}
dtype: {rng.choice(['i32', 'i8', 'bf16'])}
axes: {{{', '.join(f'{a}: {v}' for a, v in axes.items())}}}
source: {{tier: hbm, element: 'm![{', '.join(src)}]'}}
destination: {{tier: dm, slice: 'm![{slice_axis} # 64]', element: 'm![{', '.join(dst)}]'}}
stream: {{time: free, packet: free}}
"""


def run(directory: Path, backend: str, jobs: int) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tcplan", "-q", "batch", str(directory),
                           "--backend", backend, "--jobs", str(jobs), "--json"],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{backend}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        texts = [problem_text(s) for s in range(args.problems)]
        for s, text in enumerate(texts):
            (d / f"p{s:04d}.yaml").write_text(text)
        local_s, local = run(d, "local", args.jobs)
        dask_s, dask = run(d, "dask", args.jobs)
    strip = ("time", "times", "solve_time")

    def rows(out: dict) -> str:
        return json.dumps([{k: v for k, v in r.items() if k not in strip}
                           for r in out["problems"]], sort_keys=True)
    same = rows(local) == rows(dask)
    work = sum(r.get("time") or 0.0 for r in local["problems"])
    row_bytes = sum(len(json.dumps(r)) for r in local["problems"]) / len(local["problems"])
    from collections import Counter
    status = Counter(r["status"] for r in local["problems"])
    print(f"{args.problems} problems, {args.jobs} workers ("
          + ", ".join(f"{n} {s}" for s, n in sorted(status.items()))
          + f"; {work:.1f} s of work in the workers)")
    print(f"{'backend':<8} {'wall s':>8} {'per problem ms':>15}")
    for name, s in (("local", local_s), ("dask", dask_s)):
        print(f"{name:<8} {s:>8.2f} {1000 * s / args.problems:>15.1f}")
    print(f"dask / local: {dask_s / local_s:.2f}x  (same rows: {'yes' if same else 'NO'})")
    print(f"per problem on the wire: {sum(map(len, texts)) / len(texts):.0f} bytes of "
          f"problem text out, {row_bytes:.0f} bytes of row back")


if __name__ == "__main__":
    main()
