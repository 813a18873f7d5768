"""The fuzz harness: run one ``tcplan`` command line in a fresh child process, bounded in time
and memory, and judge its outcome as a user would.

Each case runs in its own process forked from a fork server that has imported tcplan once
(``multiprocessing`` "forkserver" context): a hang is killed at the time bound, an
allocation past the memory bound fails inside the child (``RLIMIT_AS``), and nothing a case
does reaches the test process.  The child calls ``tcplan.planner.cli.main`` exactly as the console
script does and reports its exit code, its output, any traceback, its time and its peak
memory growth.

:func:`judge` states the contract every case must meet (docs/threats.md):
no traceback; an exit of 0, 1 or 2 that matches what was printed (2: an input-error rule,
1: another rule or an unverified result, 0: no error); within the time and memory bounds.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import re
import resource
import time
import traceback
from dataclasses import dataclass

#: per case: wall time (the issue's "a second or two", with room for a busy CI machine)
TIME_BOUND_S = 5.0
#: per case: growth of the child's resident memory over the fork server's
MEMORY_BOUND_BYTES = 1 << 30
#: the child's address-space cap above what it starts with: past it, allocations fail
ADDRESS_HEADROOM_BYTES = 3 << 30

#: the simulator's limits in fuzz children: small, so every accepted case runs fast (the
#: real limits are exercised by tests/test_robustness.py in real subprocesses)
SMALL_LIMITS = {"SIM_MAX_ELEMENTS": 1 << 20, "SIM_MAX_POSITIONS": 1 << 22,
                "SIM_MAX_MEMORY_BYTES": 1 << 29, "EVAL_MAX_POSITIONS": 1 << 20,
                "COST_MAX_PACKETS": 1 << 18}


@dataclass
class Outcome:
    argv: list
    code: int | None  # None: killed at the time bound
    stdout: str
    stderr: str
    traceback: str
    seconds: float
    rss_growth: int  # bytes

    def show(self) -> str:
        return (f"argv={self.argv}\ncode={self.code} ({self.seconds:.2f} s, "
                f"+{self.rss_growth / 2**20:.0f} MiB)\nstdout={self.stdout[-1500:]}\n"
                f"stderr={self.stderr[-1500:]}\ntraceback={self.traceback[-3000:]}")


def _vm(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _child(conn, argv: list, small: bool) -> None:
    """Runs in the forked child: cap the address space, run the CLI, report."""
    import tcplan.model.limits as limits
    from tcplan.planner.cli import main
    if small:
        for k, v in SMALL_LIMITS.items():
            setattr(limits, k, v)
    cap = _vm("VmSize") + ADDRESS_HEADROOM_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    rss0 = _vm("VmRSS")
    out, err, tb, code = io.StringIO(), io.StringIO(), "", None
    t0 = time.perf_counter()
    try:
        code = main(argv, stdout=out, stderr=err)
    except BaseException:  # noqa: BLE001 - any escape is what the fuzzer looks for
        tb = traceback.format_exc()
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    conn.send({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue(),
               "traceback": tb, "seconds": dt, "rss_growth": max(0, peak - rss0)})
    conn.close()


_CTX = None


def _context():
    global _CTX
    if _CTX is None:
        _CTX = multiprocessing.get_context("forkserver")
        _CTX.set_forkserver_preload(["tcplan.planner.cli", "tcplan.planner.lowering", "tcplan.planner.layout",
                                     "tcplan.model.limits", "fuzzing"])
    return _CTX


def run_cli(argv: list, small_limits: bool = True, time_bound: float = TIME_BOUND_S
            ) -> Outcome:
    """Run ``tcplan ARGV`` in a fresh child; kill it at twice the time bound."""
    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(send, list(argv), small_limits))
    t0 = time.perf_counter()
    p.start()
    send.close()
    got = None
    if recv.poll(2 * time_bound):
        try:
            got = recv.recv()
        except EOFError:  # the child died without reporting (killed by the kernel?)
            got = {"code": None, "stdout": "", "stderr": "", "seconds": 0.0, "rss_growth": 0,
                   "traceback": f"child died (exit code {p.exitcode})"}
    p.join(5)
    if got is None:
        p.kill()
        p.join()
        return Outcome(list(argv), None, "", "", "killed at the time bound",
                       time.perf_counter() - t0, 0)
    return Outcome(list(argv), **got)


# ---------------------------------------------------------------------------------------
# The contract
# ---------------------------------------------------------------------------------------
#: ``error [id]``, ``NOT verified [id]``, and explain's indented ``[id]`` lines
_RULE = re.compile(r"(?:^\s*|error |NOT verified )\[([a-z0-9-]+)\]", re.M)
_NOT_DONE = ("NOT verified", "not verified", "infeasible", "no layout", "unknown",
             "NOT met")  # (the last: a batch whose expectations were not all met)


def printed_rules(o: Outcome) -> list[str]:
    """The rule ids an outcome printed: ``error [id]`` lines, or the JSON ``code`` fields."""
    ids = _RULE.findall(o.stderr) + _RULE.findall(o.stdout)
    for line in o.stdout.splitlines():
        if line.startswith("{"):
            try:
                ids += _json_codes(json.loads(line))
            except ValueError:
                pass
    return ids


_MESSAGE = re.compile(r"(?:^|\n)\s*error \[[a-z0-9-]+\]: ([^\n]*)")


def first_message(o: Outcome) -> str:
    """The first error message an outcome printed: an ``error [id]: ...`` line's text, or
    the ``message`` of a JSON error object (``""`` if none)."""
    for line in o.stdout.splitlines():
        if line.startswith("{"):
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if isinstance(v, dict) and isinstance(v.get("error"), dict):
                return str(v["error"].get("message", ""))
    m = _MESSAGE.search(o.stderr) or _MESSAGE.search(o.stdout)
    return m.group(1) if m else ""


def _json_codes(v) -> list[str]:
    """Rule ids in printed JSON: an error's ``code``, or an explanation item's ``rule``
    (``tcplan explain --json``: each conflicting requirement names its rule)."""
    if isinstance(v, dict):
        out = [v[k] for k in ("code", "rule") if isinstance(v.get(k), str) and "message" in v]
        for x in v.values():
            out += _json_codes(x)
        return out
    if isinstance(v, list):
        return [c for x in v for c in _json_codes(x)]
    return []


def judge(o: Outcome, time_bound: float = TIME_BOUND_S,
          memory_bound: int = MEMORY_BOUND_BYTES) -> None:
    """Assert the contract of docs/threats.md on one outcome."""
    from tcplan.model.rules import RULES
    assert not o.traceback, "traceback:\n" + o.show()
    assert o.code in (0, 1, 2), "exit code:\n" + o.show()
    assert o.seconds <= time_bound, "too slow:\n" + o.show()
    assert o.rss_growth <= memory_bound, "too much memory:\n" + o.show()
    ids = printed_rules(o)
    assert all(i in RULES for i in ids), "unregistered rule printed:\n" + o.show()
    if o.code == 2:
        assert ids and ids[0] in RULES and RULES[ids[0]].kind == "input", \
            "exit 2 without an input-error rule:\n" + o.show()
    elif o.code == 1:
        assert (ids and RULES[ids[0]].kind != "input") or any(
            s in o.stdout for s in _NOT_DONE), "exit 1 without a rule:\n" + o.show()
    else:  # (a batch answers each line on stdout, errors included, and exits 0)
        assert "error [" not in o.stderr, "exit 0 with an error:\n" + o.show()


def snapshot(folder: str) -> dict:
    """Every entry under a folder with its bytes and mtime: compare before and after."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.join(root, d)] = "dir"
        for f in files:
            p = os.path.join(root, f)
            st = os.stat(p)
            with open(p, "rb") as fh:
                out[p] = (fh.read(), st.st_mtime_ns, st.st_mode)
    return out
