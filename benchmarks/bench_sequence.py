"""Benchmark: sequencer configs per second, and vectorized vs per-position mapping evaluation.

    python benchmarks/bench_sequence.py [--requests 1000] [--sample 200000]

1. Derives configs for a fixed set of 1,000 mixed requests (seed examples, splits, padding,
   slicing, broadcasts, merges, errors) through the same path as ``tcplan sequence --batch``
   (JSON in, JSON out) in one process, with the parse cache cleared first.  Target: >= 5,000
   configs per second.
2. Evaluates a 16,777,216-position mapping with ``Mapping.evaluate`` (numpy) and with
   ``Mapping.cell`` position by position.  The per-position rate is measured on a random sample
   of positions (evaluating all 16 M one by one would take minutes) in the same run; the
   speed-up is the ratio of the per-position rates.  Target: >= 20x.
"""

from __future__ import annotations

import argparse
import json
import random
import time


import numpy as np  # noqa: E402

from tcplan.model import mapping as mapping_mod  # noqa: E402
from tcplan.model.mapping import parse  # noqa: E402
from tcplan.planner.cli import answer_lines  # noqa: E402

TEMPLATES = [  # (axes, buf, time, packet, extra) with {a},{b},... size placeholders
    ({"N": "a", "C": "b", "H": "c", "W": "d"}, "m![N, C, H, W]", "m![W, H, C, N]", "m![1]", {}),
    ({"N": "a", "C": "b", "H": "c", "W": "d"}, "m![N, C, H, W]", "m![N, C, H]", "m![W]", {}),
    ({"N": "a", "C": "b", "H": "c", "W": "d"}, "m![N, C, H, W]", "m![C]", "m![N, H, W]", {}),
    ({"A": "a", "B": "b", "C": "c"}, "m![A, B, C # {c2}]", "m![B, A]", "m![C # {c2}]", {}),
    ({"A": "a2", "B": "b2", "C": "c"}, "m![A, B, C # {c2}]",
     "m![A % 2, B % 2, A / 2, B / 2]", "m![C # {c2}]", {}),
    ({"A": "a4", "B": "b", "C": "c"}, "m![A, B, C]", "m![A / 4, A % 4 = 3, B]", "m![C]", {}),
    ({"A": "a", "T": "b", "P": "c"}, "m![A]", "m![T, A]", "m![P]", {}),
    ({"N": "a2", "C": "b2", "H": "c2", "W": "d16"}, "m![N, C, H, W]",
     "m![W / 16, H % 2, H / 2, C / 2, C % 2, N / 2, N % 2, W / 8 % 2]", "m![W % 8]", {}),
    ({"A": "a", "B": "b"}, "m![A, B # {b2}]", "m![1]", "m![A, B]", {"mode": "write"}),
    ({"A": "a", "B": "b", "C": "c"}, "m![A, B, C]", "m![A, B]", "m![C]",
     {"engine": "fetch", "dtype": "i8"}),
    ({"A": "a", "B": "b", "C": "c"}, "m![C, A, B]", "m![B, C]", "m![A]",
     {"engine": "dma", "mode": "write"}),
    ({"A": "a", "T": "b"}, "m![A]", "m![T, A]", "m![1]", {"mode": "write"}),  # rejected
]


def make_requests(count: int, seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        axes_t, buf, tm, pk, extra = TEMPLATES[k % len(TEMPLATES)]
        sizes = {"a": rng.randint(2, 16), "b": rng.randint(2, 16), "c": rng.randint(2, 16),
                 "d": rng.randint(2, 16)}
        sizes |= {"a2": 2 * sizes["a"], "b2": 2 * sizes["b"], "c2": 2 * sizes["c"],
                  "a4": 4 * sizes["a"], "d16": 16 * sizes["d"]}
        axes = {name: sizes[key] for name, key in axes_t.items()}
        fmt = {"c2": 2 * axes.get("C", 1), "b2": 2 * axes.get("B", 1)}
        req = {"axes": axes, "buf": buf.format(**fmt), "time": tm.format(**fmt),
               "packet": pk.format(**fmt), **extra, "id": k}
        out.append(json.dumps(req))
    return out


def bench_configs(n: int) -> None:
    lines = make_requests(n)
    mapping_mod.clear_caches()
    t0 = time.perf_counter()
    answers = list(answer_lines(lines))  # the `tcplan sequence --batch` loop
    dt = time.perf_counter() - t0
    errors = sum('"error"' in a for a in answers)
    rate = n / dt
    print(f"configs: {n} requests ({n - errors} configs, {errors} named rejections) in "
          f"{dt * 1e3:.1f} ms -> {rate:,.0f} requests per second, "
          f"{(n - errors) / dt:,.0f} configs per second (target 5,000: {rate / 5000:.2f}x)")
    # the same requests again: parse cache warm
    t0 = time.perf_counter()
    list(answer_lines(lines))
    dt2 = time.perf_counter() - t0
    print(f"configs, parse cache warm: {n / dt2:,.0f} per second")


def bench_mapping(sample: int) -> None:
    axes = {"A": 256, "B": 256, "C": 200}  # C # 256: 56 padding positions in every 256
    m = parse("m![B / 16, A, C # 256, B % 16]", axes)
    total = m.size
    t0 = time.perf_counter()
    coords, status = m.evaluate()
    t_vec = time.perf_counter() - t0
    rng = np.random.default_rng(7)
    positions = rng.integers(0, total, size=sample)
    t0 = time.perf_counter()
    cells = [m.cell(int(i)) for i in positions]
    t_one = time.perf_counter() - t0
    names = ("live", "top", "zero", "bottom", "oob")
    for i, c in zip(positions[:2000], cells[:2000]):  # same answers
        assert c.status == names[int(status[i])]
        if c.live:
            assert c.index == {a: int(coords[a][i]) for a in coords}
    vec_rate = total / t_vec
    one_rate = sample / t_one
    print(f"mapping: vectorized {total:,} positions in {t_vec:.3f} s ({vec_rate:,.0f}/s); "
          f"per-position {sample:,} sampled in {t_one:.3f} s ({one_rate:,.0f}/s, "
          f"~{total / one_rate:.0f} s for all {total:,}) -> speed-up {vec_rate / one_rate:,.0f}x "
          f"(target 20x)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--sample", type=int, default=200_000)
    args = ap.parse_args()
    bench_configs(args.requests)
    bench_mapping(args.sample)


if __name__ == "__main__":
    main()
