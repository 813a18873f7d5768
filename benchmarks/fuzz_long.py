"""A long fuzz campaign: the fuzz suite with many more examples, fresh random ones each run.

    python benchmarks/fuzz_long.py [--scale 20] [--seed N]

Runs ``tests/test_fuzz.py`` with its example counts multiplied by ``--scale`` and
randomized examples (CI runs the same tests at scale 1, derandomized), then prints how many
cases ran and how long the campaign took.  Every case is held to the contract of
docs/threats.md by tests/fuzzing.py; a failing case is printed with its argv and output,
and hypothesis prints the draws that reproduce it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=20.0,
                    help="multiply each fuzz test's example count (default 20)")
    ap.add_argument("--seed", type=int, default=None,
                    help="hypothesis seed (default: fresh)")
    args = ap.parse_args()
    env = dict(os.environ, TCPLAN_FUZZ_SCALE=str(args.scale), TCPLAN_FUZZ_RANDOM="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           str(ROOT / "tests/test_fuzz.py")]
    if args.seed is not None:
        cmd.append(f"--hypothesis-seed={args.seed}")
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env=env)
    dt = time.perf_counter() - t0
    per_scale = 60 + 400 + 12 + 10 + 25  # the example counts of tests/test_fuzz.py at scale 1
    print(f"fuzz campaign: scale {args.scale:g} (about {int(per_scale * args.scale):,} cases, "
          f"{int((per_scale - 400) * args.scale):,} of them whole command lines) in "
          f"{dt:.0f} s: {'no failure' if r.returncode == 0 else 'FAILURES above'}")
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
