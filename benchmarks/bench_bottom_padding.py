"""Benchmark: verifying a move whose destination has Bottom padding (issue 31).

    python benchmarks/bench_bottom_padding.py

A KV-cache-like tile (1,000 x 120 bf16, rows padded to 128, slices to 256) moved from HBM
into DM, its destination padded with ``#{!}`` (Bottom: never to be touched), as furiosa-opt
writes every tile view, and the same with ``#`` (Top) as the baseline, both verified in this
run (`tcplan.verify`, best of 3). Before the Bottom padding became a byte mask, every
access searched a sorted set of the padding's addresses and the strided views were off:
24 s against 1.5 s on this problem (350 to 540 s on furiosa-opt's example tiles).
"""

from __future__ import annotations

import time

import tcplan

PROBLEM = """kind: dma
dtype: bf16
axes: {{T: 1000, D: 120}}
source: {{tier: hbm, element: 'm![T, D]'}}
destination: {{tier: dm, slice: 'm![T / 8 {pad} 256]', element: 'm![T % 8, D {pad} 128]'}}
stream: {{time: free, packet: free}}
"""


def best(pad: str) -> float:
    p = tcplan.loads(PROBLEM.format(pad=pad), f"pad {pad}")
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = tcplan.verify(p)
        times.append(time.perf_counter() - t0)
        assert r.verified, r.text()
    return min(times)


def main() -> None:
    top, bottom = best("#"), best("#{!}")
    print(f"verify, Top padding (#):       {top:7.2f} s")
    print(f"verify, Bottom padding (#{{!}}): {bottom:7.2f} s   ratio {bottom / top:.2f}x")


if __name__ == "__main__":
    main()
