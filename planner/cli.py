"""The ``tcplan`` command line.

Exit codes: 0 success; 1 a hardware rule stops the request (named rule in the output);
2 malformed input (``parse-error``, ``unknown-axis``, ``bad-mapping``, ``bad-request``).
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import re
import sys
from typing import Any, Iterable, Iterator, Sequence, TextIO

from model import hardware as hw
from model import limits
from model.mapping import parse, parse_axes, validate_axes
from model.rules import MODES, PROFILES, TcplanError, fail
from model import dma, tiers
from model.sequencer import SequencerConfig, derive
from planner.lowering import default_mode, lower_problem
from planner.inputs import Overlong, bounded_lines, open_lines, os_reason
from planner.spec import load_problem

EXIT_OK, EXIT_RULE, EXIT_INPUT = 0, 1, 2


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as ``bad-request`` instead of exiting by itself."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _ArgError(message)


def version() -> str:
    """The installed distribution's version (pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version
    try:
        return dist_version("tcplan")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree, uninstalled
        return "unknown (not installed)"


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tcplan", description="Layout planner and simulator for the RNGD TCP.",
                epilog="tcplan --version prints the version.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    s = sub.add_parser(
        "sequence", help="derive a sequencer config from a (buffer, stream) mapping pair",
        description="Derive the sequencer config [size : stride, ...] : packet for reading a "
                    "buffer mapping as a stream (Time, Packet), or writing the stream back.")
    s.add_argument("--axes", help="axis sizes, e.g. N=4,C=3,H=8,W=8")
    s.add_argument("--buf", help="buffer mapping, e.g. 'm![N, C, H, W]'")
    s.add_argument("--time", help="stream Time mapping")
    s.add_argument("--packet", help="stream Packet mapping")
    s.add_argument("--dtype", choices=list(hw.DTYPE_BYTES), help="element type (default i8)")
    s.add_argument("--mode", choices=list(MODES),
                   help="read (buffer -> stream) or write; default read (write for commit)")
    s.add_argument("--engine", choices=list(PROFILES),
                   help="engine profile whose rules apply (default pseudo)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--batch", metavar="REQUESTS.jsonl",
                   help="one JSON request per line ('-' for stdin); one JSON answer per line")
    t = sub.add_parser(
        "trace", help="where one tensor index lives in every tensor and stream of a problem",
        description="Trace a tensor index through every tensor and stream of a problem: chip, "
                    "cluster, DMN, slice, element offset and byte address (or slice, time step "
                    "and packet lane for a stream). Placement-rule violations are warnings.")
    t.add_argument("problem", metavar="PROBLEM.yaml")
    t.add_argument("--index", required=True, help="the tensor index, e.g. N=1,C=17,H=3,W=5 "
                   "(axes not named are 0)")
    t.add_argument("--json", action="store_true", help="print one JSON object")
    lo = sub.add_parser(
        "lower", help="derive every config of a problem (DMA: per engine and command)",
        description="Lower a problem to the configs the hardware runs: for a DMA, the read, "
                    "write and unified sequencers (elements and bytes) and every engine's "
                    "commands with their base addresses; for a sequence problem, the sequencer.")
    lo.add_argument("problem", metavar="PROBLEM.yaml")
    lo.add_argument("--json", action="store_true", help="print one JSON object")
    v = sub.add_parser(
        "verify", help="lower, execute on simulated memories, verify, and estimate cycles",
        description="Lower a problem, run its configs over simulated memories filled from a "
                    "seed, check that the destination holds the source tensor (the holding "
                    "rule), and report cycles with a breakdown.")
    v.add_argument("problem", metavar="PROBLEM.yaml")
    v.add_argument("--json", action="store_true", help="print one JSON object")
    v.add_argument("--seed", type=_seed, default=0, help="seed of the random source data")
    sub.add_parser(
        "schema", help="print the JSON Schema of problem files",
        description="Print the JSON Schema (draft 2020-12) of tcplan's problem files, "
                    "generated from the definitions the loader checks (point an editor's YAML "
                    "support at it: docs/problem-format.md).")
    r = sub.add_parser(
        "run", help="run a problem's data moves on your data and write every tensor",
        description="Run a problem's data moves (DMA, PCIe, redistribution, gather, scatter, "
                    "vector chain, planned expression, lane fold) on the given input tensors "
                    "(.npy arrays whose dimensions are the axes each carries, in the order of "
                    "the problem's axes block; bf16 and fp8 as ml_dtypes, numpy's void or raw "
                    "bits) and write every tensor to DIR/NAME.npy.")
    r.add_argument("problem", metavar="PROBLEM.yaml")
    r.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input tensor (NAME: source)")
    r.add_argument("--out", default=".", metavar="DIR", help="where to write NAME.npy")
    r.add_argument("--seed", type=_seed, default=0, help="seed for inputs not given")
    r.add_argument("--json", action="store_true",
                   help="print one JSON object: the files written, their dtypes and shapes")
    so = sub.add_parser(
        "solve", help="plan a problem's free choices, lower, verify and estimate cycles",
        description="Plan a problem's free choices, then lower, execute and verify the plan "
                    "and estimate its cycles. A DMA or PCIe problem: the stream's loop order, "
                    "packet and engine split, the destination's Element, Slice or padding, an "
                    "HBM tensor's layout and address, and hops through an intermediate HBM "
                    "layout, as the problem frees them (CP-SAT; the plan is the cycle "
                    "estimate's minimum). An expression problem: the fewest Tensor Unit "
                    "invocations and a valid Intra-Slice Chain for each. Exit 1 naming the "
                    "conflicting rules when no plan exists.")
    so.add_argument("problem", metavar="PROBLEM.yaml")
    so.add_argument("--json", action="store_true", help="print one JSON object")
    so.add_argument("--time-limit", type=_positive, default=10.0, metavar="S",
                    help="solver time limit in seconds (default 10)")
    so.add_argument("--workers", type=_count, default=1, metavar="N",
                    help="solver worker threads (default 1: deterministic)")
    so.add_argument("--seed", type=_seed, default=0,
                    help="solver seed and seed of the verification data")
    ex = sub.add_parser(
        "explain", help="why a problem has no plan, or what binds the plan it has",
        description="For an infeasible problem: a minimal set of conflicting requirements "
                    "(no plan meets them all; without any one of them the others can be "
                    "met), each with its rule id, terms and fix; exit 1. For a feasible one: "
                    "the binding constraints and the bottleneck; exit 0.")
    ex.add_argument("problem", metavar="PROBLEM.yaml")
    ex.add_argument("--json", action="store_true", help="print one JSON object")
    ba = sub.add_parser(
        "batch", help="solve and verify every problem under a directory",
        description="Solve (or verify) every *.yaml under DIR in parallel worker processes "
                    "and check each against its expect block (status, cycles within 10%, "
                    "invocations, verified, error and explanation rule ids). Exit 0 when "
                    "every problem met its expectations, 1 otherwise.")
    ba.add_argument("dir", metavar="DIR")
    ba.add_argument("--jobs", type=_count, default=2, metavar="N",
                    help="worker processes (default 2)")
    ba.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number of seconds")
    return v


def _int_arg(text: str, lo: int, hi: int, noun: str, out_of_range: str) -> int:
    """An integer flag value in [lo, hi]; argparse turns the error into `bad-request`."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
    if not lo <= v <= hi:
        raise argparse.ArgumentTypeError(out_of_range.format(text=repr(text), v=v))
    return v


def _count(text: str) -> int:
    return _int_arg(text, 1, 64, "a whole number", "{text} must be 1 to 64")


def _seed(text: str) -> int:
    # (OR-Tools takes a 32-bit random seed; numpy any)
    return _int_arg(text, 0, 2**31 - 1, "a seed", "{v} is not a seed (0 to 2,147,483,647)")


def _error_obj(err: TcplanError) -> dict[str, Any]:
    return {"error": err.to_json()}


def _exit_for(err: TcplanError) -> int:
    return EXIT_INPUT if err.kind == "input" else EXIT_RULE


def format_table(cfg: SequencerConfig, buf: str, time: str, packet: str) -> str:
    lines = [f"buffer {buf}   time {time}   packet {packet}",
             f"dtype {cfg.dtype}, mode {cfg.mode}, engine {cfg.engine}", ""]
    final_of = {}
    for k, g in enumerate(cfg.groups):
        for r in g:
            final_of[r] = k
    head = ("#", "side", "stream term", "piece", "buffer term", "size", "stride", "final")
    rows = [head]
    for k, e in enumerate(cfg.raw):
        rows.append((str(k), e.side, e.term, e.piece or "", e.buffer_term or "(broadcast)",
                     str(e.size), str(e.stride), str(final_of[k])))
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    right = {0, 5, 6, 7}
    for r in rows:
        lines.append("  ".join(x.rjust(w) if c in right else x.ljust(w)
                               for c, (x, w) in enumerate(zip(r, widths))).rstrip())
    if not cfg.raw:
        lines.append("(no entries: every term has size 1)")
    lines.append("")
    merged = [g for g in cfg.groups if len(g) > 1]
    if merged:
        lines.append(f"{len(cfg.raw)} raw entries exceed {hw.MAX_SEQUENCER_ENTRIES}; merged "
                     "physically contiguous pairs:")
        for g in merged:
            k = cfg.groups.index(g)
            parts = " + ".join(f"{cfg.raw[r].size} : {cfg.raw[r].stride}" for r in g)
            n, s = cfg.entries[k]
            lines.append(f"  raw {', '.join(map(str, g))}: {parts} -> {n} : {s}")
    else:
        lines.append(f"entries shown unmerged ({len(cfg.raw)} <= {hw.MAX_SEQUENCER_ENTRIES})")
    lines.append(f"config               {cfg.text()}")
    lines.append(f"packet size          {_elements(cfg.packet_size)} ({cfg.packet_bytes} B)")
    lines.append(f"contiguous run       {_elements(cfg.contiguous_run)}")
    lines.append(f"max access size      {_elements(cfg.max_access_size)}")
    lines.append(f"accesses per packet  {cfg.accesses_per_packet}")
    return "\n".join(lines)


def _elements(n: int) -> str:
    return f"{n} element{'' if n == 1 else 's'}"


def _format_error(err: TcplanError) -> str:
    out = []
    for v in err.violations:
        out.append(f"error [{v.rule}]: {v.message}")
        out.append(f"  fix: {v.fix}")
    return "\n".join(out)


_REQUEST_KEYS = {"axes", "buf", "time", "packet", "dtype", "mode", "engine", "id"}


def answer_request(req: Any) -> dict[str, Any]:
    """One batch request (a decoded JSON value) -> one JSON answer (config or error)."""
    try:
        if not isinstance(req, dict):
            raise fail("bad-request", detail="a request must be a JSON object",
                       fix='{"axes": {...}, "buf": "...", "time": "...", "packet": "..."}')
        extra = sorted(set(req) - _REQUEST_KEYS)
        if extra:
            raise fail("bad-request", detail=f"unknown field(s) {', '.join(extra)}",
                       fix="use only " + ", ".join(sorted(_REQUEST_KEYS)))
        missing = [k for k in ("axes", "buf", "time", "packet") if k not in req]
        if missing:
            raise fail("bad-request", detail=f"missing field(s) {', '.join(missing)}",
                       fix="every request needs axes, buf, time and packet")
        axes = validate_axes(req["axes"], "axes")
        engine = req.get("engine", "pseudo")
        opts = {}
        for key, allowed in (("dtype", list(hw.DTYPE_BYTES)), ("mode", list(MODES)),
                             ("engine", list(PROFILES))):
            if key in req and req[key] not in allowed:
                raise fail("bad-request", detail=f"{key}: {req[key]!r} is not one of "
                           + ", ".join(allowed), fix=f"use one of {', '.join(allowed)}")
            opts[key] = req.get(key)
        cfg = derive(parse(req["buf"], axes, "buf"), parse(req["time"], axes, "time"),
                     parse(req["packet"], axes, "packet"), opts["dtype"] or "i8",
                     default_mode(engine, opts["mode"]), engine)
        out = cfg.to_json()
    except TcplanError as err:
        out = _error_obj(err)
    if isinstance(req, dict) and "id" in req:
        out = {"id": req["id"], **out}
    return out


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def answer_lines(lines: Iterable[str | bytes]) -> Iterator[str]:
    """The batch loop: one JSON answer (without newline) per input line, in order.

    A line may be text or UTF-8 bytes.  Nothing in a line stops the batch: undecodable bytes,
    invalid or absurd JSON (too deep, numbers too long) and bad requests are all answered with
    an error object.  The cyclic garbage collector is held back while answering (a batch
    allocates many small objects and few cycles); its thresholds are restored afterwards.
    """
    old = gc.get_threshold()
    gc.set_threshold(50_000, 50, 50)
    try:
        for lineno, line in enumerate(lines, 1):
            try:
                if isinstance(line, Overlong):
                    raise fail("bad-request", detail=f"line {lineno}: longer than "
                               f"{line.limit:,} bytes (skipped)", fix="one request per line")
                if isinstance(line, bytes):
                    line = line.decode("utf-8")
                req = json.loads(line)
            except TcplanError as err:
                yield _ENCODE(_error_obj(err))
            except UnicodeDecodeError as e:
                err = fail("bad-request", detail=f"line {lineno}: not UTF-8 (byte {e.start + 1})",
                           fix="write requests as UTF-8 JSON")
                yield _ENCODE(_error_obj(err))
            except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
                what = (f"invalid JSON ({e.msg} at column {e.colno})"
                        if isinstance(e, json.JSONDecodeError) else
                        "JSON too deeply nested or with a number too long")
                err = fail("bad-request", detail=f"line {lineno}: {what}",
                           fix="one JSON object per line")
                yield _ENCODE(_error_obj(err))
            else:
                yield _ENCODE(answer_request(req))
    finally:
        gc.set_threshold(*old)


def _run_batch(path: str, stdout: TextIO) -> int:
    try:
        with open_lines(path, sys.stdin) as fh:
            write = stdout.write
            for answer in answer_lines(bounded_lines(fh)):
                write(answer + "\n")
    except TcplanError as err:  # the file cannot be opened or read: a JSON answer still
        print(json.dumps(_error_obj(err)), file=stdout)
        return EXIT_INPUT
    stdout.flush()
    return EXIT_OK


def _cmd_sequence(args: argparse.Namespace, stdout: TextIO) -> int:
    if args.batch is not None:
        given = [f"--{k}" for k in ("axes", "buf", "time", "packet", "dtype", "mode", "engine")
                 if getattr(args, k) is not None]
        if given:
            raise fail("bad-request", detail=f"--batch takes every request from the file; "
                       f"drop {', '.join(given)}", fix="put those fields in each JSON line")
        return _run_batch(args.batch, stdout)
    missing = [f"--{k}" for k in ("axes", "buf", "time", "packet") if getattr(args, k) is None]
    if missing:
        raise fail("bad-request", detail=f"missing {', '.join(missing)}",
                   fix="give --axes, --buf, --time and --packet (or --batch FILE)")
    args.dtype = args.dtype or "i8"
    args.engine = args.engine or "pseudo"
    axes = parse_axes(args.axes)
    buf = parse(args.buf, axes, "--buf")
    time = parse(args.time, axes, "--time")
    packet = parse(args.packet, axes, "--packet")
    cfg = derive(buf, time, packet, args.dtype, default_mode(args.engine, args.mode),
                 args.engine)
    if args.json:
        print(json.dumps(cfg.to_json()), file=stdout)
    else:
        print(format_table(cfg, buf.text(), time.text(), packet.text()), file=stdout)
    return EXIT_OK


COMMANDS = ("sequence", "trace", "lower", "verify", "run", "solve", "explain", "batch",
            "schema")


def _run_data(problem: Any, plan: Any, inputs: dict, seed: int) -> dict:
    """Execute a problem on inputs (seeded where missing); the mathematical output tensors."""
    import numpy as np

    from executor import forms, run
    axes = problem.axes
    if problem.kind in ("dma", "pcie"):
        return run.run_with_data(problem, plan, inputs, seed)
    if problem.kind in ("vector", "expression", "lane_fold"):
        return _run_chains(problem, plan, inputs, seed)
    if problem.kind == "redistribute":
        T = run.embed(inputs.get("source"), plan.source, axes, "source", seed)
        mem = forms.run_redistribution(problem, plan, T)
        return {"source": run.read_tensor(mem, plan.source, axes, T.dtype),
                "result": run.read_tensor(mem, plan.result, axes, T.dtype)}
    data_t = plan.table if problem.kind == "gather" else plan.rows_side
    name = "table" if problem.kind == "gather" else "source"
    T = run.embed(inputs.get(name), data_t, axes, name, seed)
    keys = None
    if "index" in inputs:
        idx = inputs["index"]
        want = tuple(axes[a] for a in run.carried_axes(plan.index, axes))
        if idx.shape != want or not np.issubdtype(idx.dtype, np.integer):
            raise fail("bad-request", detail=f"--input index: expected an integer array of "
                       f"shape {want}, got {idx.shape} {idx.dtype}",
                       fix="save the index tensor with numpy.save")
        keys = forms.index_keys(plan, idx)
    written, holder, index = forms.run_indexed(problem, plan, T, keys, seed)
    return {name: run.read_tensor_from(T, data_t, axes), "index": index,
            "destination": run.read_tensor(holder, written, axes, T.dtype)}


def _run_chains(problem: Any, plan: Any, inputs: dict, seed: int) -> dict:
    """Vector chains, planned expressions and lane folds on the user's tensors: x over the
    problem's axes (a pair's grouping axis is an ordinary axis), VRF operands over theirs."""
    from executor import chains, run
    shapes = {"x": tuple(problem.axes.values())}
    for n, t in problem.tensors.items():
        if n.startswith("vrf:"):
            shapes[n[4:]] = tuple(problem.axes[a] for a in run.carried_axes(t, problem.axes))
    for name, arr in inputs.items():
        dtype = problem.dtype if name == "x" else problem.tensors["vrf:" + name].dtype
        if arr.shape != shapes[name]:
            raise fail("bad-request", detail=f"--input {name}: expected shape "
                       f"{shapes[name]} (the axes in the problem's order), got {arr.shape}",
                       fix="save the tensor with numpy.save in that shape")
        inputs[name] = run.as_dtype(arr, dtype, name)
    if problem.kind == "lane_fold":
        X, out, _ = chains.run_lane_fold(problem, plan, seed, inputs.get("x"))
        return {"x": X, "result": out}
    if problem.kind == "vector":
        r = chains.run_vector(problem, plan, seed, inputs)
    else:
        if set(inputs) - {"x"}:
            raise fail("bad-request", detail="a planned expression reads its VRF operands "
                       "from seeded data", fix="give only x")
        r = chains.run_plan(problem, plan, seed, inputs.get("x"))
    return {"x": r["x"], **r["vrf"], "result": r["out"]}


def _cmd_run(args: argparse.Namespace, stdout: TextIO) -> int:
    from .inputs import load_npy, write_arrays
    problem = load_problem(args.problem)
    names = {"dma": ("source",), "pcie": ("source",), "redistribute": ("source",),
             "gather": ("table", "index"), "scatter": ("source", "index"),
             "lane_fold": ("x",)}
    vrf_names = tuple(n[4:] for n in problem.tensors if n.startswith("vrf:"))
    names["vector"] = names["expression"] = ("x",) + vrf_names
    if problem.kind not in names:
        raise fail("bad-request", detail=f"tcplan run executes data moves; a {problem.kind} "
                   "problem has none", fix="use tcplan verify or trace")
    inputs = {}
    for item in args.input:
        name, eq, path = item.partition("=")
        if not eq or name not in names[problem.kind]:
            raise fail("bad-request", detail=f"--input {item!r}: a {problem.kind} problem "
                       f"takes {', '.join(n + '=FILE.npy' for n in names[problem.kind])}",
                       fix="name one of the problem's input tensors")
        arr = load_npy(path, f"--input {name}", max(1, limits.product(problem.axes.values())))
        inputs[name] = arr
    plan = lower_problem(problem)
    from executor.run import check_sizes
    check_sizes(problem)
    tensors = _run_data(problem, plan, inputs, args.seed)
    written = write_arrays(args.out, tensors)
    if getattr(args, "json", False):
        print(json.dumps({"problem": problem.name, "written": [
            {"tensor": name, "path": str(path), "dtype": str(arr.dtype),
             "shape": list(arr.shape)}
            for (name, arr), path in zip(tensors.items(), written)]}), file=stdout)
        return EXIT_OK
    for path, arr in zip(written, tensors.values()):
        print(f"{path}: {arr.dtype} {arr.shape}", file=stdout)
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace, stdout: TextIO) -> int:
    from executor.verify import verify_problem
    problem = load_problem(args.problem)
    try:
        report = verify_problem(problem, args.seed)
    except TcplanError as err:
        if err.kind == "input":
            raise
        out = {"problem": problem.name, "verified": False, "error": err.to_json()}
        if args.json:
            print(json.dumps(out), file=stdout)
        else:
            print(f"{problem.name}: NOT verified\n" + _format_error(err), file=stdout)
        return EXIT_RULE
    if args.json:
        print(json.dumps({"problem": problem.name, **report}), file=stdout)
    else:
        b = report["breakdown"]
        status = "verified" if report["verified"] else "executed, NOT checked"
        what = "destination" if problem.kind not in ("vector", "lane_fold", "expression") \
            else "output"
        lines = [f"{problem.name}: {status} ({report['checked']:,} {what} elements "
                 f"checked, seed {args.seed}; {report['method']})",
                 "cycles: " + (f"{report['cycles']:,}" if report["cycles"] is not None
                               else "not modelled for this kind yet")]
        if b and problem.kind == "expression":
            lines.append(f"  {report['invocations']} invocation(s) as planned by tcplan solve")
        elif b and problem.kind == "vector":
            lines.append(f"  {b['flits']:,} flit(s) per slice + {b['latency']} cycle(s) of "
                         f"ALU latency ({', '.join(b['alus']) or 'no ALU'}); bottleneck: "
                         f"{b['bottleneck']}")
        elif b and problem.kind == "lane_fold":
            lines.append(f"  {b['flits']:,} flit(s); {b['elements_per_cycle']} of "
                         f"{b['bus_width']} bus lanes carry data per cycle")
        elif b:
            lines.append(f"  start-up {b['startup']:,}, read {b['read']:,.0f}, write "
                         f"{b['write']:,.0f}; bottleneck: {b['bottleneck']}")
            if b.get("hbm"):
                lines.append(_hbm_line(b["hbm"]))
            lines += [f"  penalty: {p}" for p in b["penalties"]]
        print("\n".join(lines), file=stdout)
    return EXIT_OK


def _hbm_line(h: dict[str, Any]) -> str:
    """The hottest HBM channel of a cycle breakdown (docs/decisions.md item 73)."""
    return (f"  HBM: hottest channel {h['channel']} of chip {h['chip']}: {h['requests']:,} "
            f"requests, {h['first_opens']:,} first row opens (overlapped), {h['reopens']:,} "
            f"re-opens (40 cycles each); {h['cycles']:,.0f} cycles")


def _cmd_solve(args: argparse.Namespace, stdout: TextIO) -> int:
    import time

    from executor.chains import verify_plan

    from .chains import plan_expression
    problem = load_problem(args.problem)
    if problem.kind in ("dma", "pcie"):
        return _solve_dma(problem, args, stdout)
    if problem.kind != "expression":
        raise fail("bad-request", detail=f"tcplan solve plans expression and DMA problems; "
                   f"{args.problem} is a {problem.kind} problem",
                   fix="use tcplan verify for a problem with nothing to choose")
    t0 = time.perf_counter()
    try:
        plan = plan_expression(problem, args.time_limit, args.workers, args.seed)
    except TcplanError as err:
        if err.kind == "input":
            raise
        status = "unknown" if err.code in ("plan-time-limit", "size-limit") else "infeasible"
        if args.json:
            print(json.dumps({"problem": problem.name, "status": status,
                              "cycles": None, "plan": None, "verified": None,
                              "explanation": err.to_json()}), file=stdout)
        else:
            print(f"{problem.name}: {status}\n" + _format_error(err), file=stdout)
        return EXIT_RULE
    solve_s = time.perf_counter() - t0
    try:
        report = verify_plan(problem, plan, args.seed)
    except TcplanError as err:  # a plan that does not compute the formula: a tcplan bug
        out = {"problem": problem.name, "status": plan.solution.status, "cycles": plan.cycles,
               "invocations": len(plan.chains), "plan": plan.chains_json(), "verified": False,
               "error": err.to_json()}
        print(json.dumps(out) if args.json else
              f"{problem.name}: planned but NOT verified\n" + _format_error(err), file=stdout)
        return EXIT_RULE
    out = {"problem": problem.name, "status": plan.solution.status, "cycles": plan.cycles,
           "invocations": len(plan.chains), "plan": plan.chains_json(),
           "verified": report["verified"], "checked": report["checked"],
           "method": report["method"], "solve_time": round(solve_s, 3)}
    if plan.solution.status != "optimal":
        out["note"] = "the time limit cut the search: the plan is not proven optimal"
    if args.json:
        print(json.dumps(out), file=stdout)
        return EXIT_OK
    f = problem.params["expression"]
    lines = [f"{problem.name}: {f.text} ({problem.dtype}) -> {len(plan.chains)} Tensor Unit "
             f"invocation(s), {plan.cycles:,} cycles ({out['status']}; solved in "
             f"{solve_s:.2f} s)"]
    if "note" in out:
        lines.append("  note: " + out["note"])
    for c in out["plan"]:
        lines.append(f"  invocation {c['invocation']} ({c['cycles']:,} cycles; ALUs: "
                     f"{', '.join(c['alus']) or 'none'}):")
        lines += [f"    .{s}" for s in c["steps"]]
    lines.append(f"verified: {report['checked']:,} output elements; {report['method']}")
    print("\n".join(lines), file=stdout)
    return EXIT_OK


def _cmd_explain(args: argparse.Namespace, stdout: TextIO) -> int:
    from .explain import explain
    problem = load_problem(args.problem)
    code, rep = explain(problem)
    if args.json:
        print(json.dumps(rep), file=stdout)
        return code
    if not rep["feasible"]:
        lines = [f"{problem.name}: no plan. " + (
            "These requirements conflict (no plan meets them all; "
            + ("without any one of them, the others can be met" if rep.get("minimal", True)
               else "the time limit stopped the search before it showed them minimal")
            + ")" + (f", over {rep['options']} options (source layouts, placements, "
                     "engine splits)" if rep.get("options", 1) > 1 else "") + ":")]
        for it in rep["conflict"]:
            head = f"[{it['rule']}]" if it.get("rule") else "[bound]"
            lines.append(f"  {head} {it['message']}")
            lines.append(f"      fix: {it['fix']}")
    else:
        lines = [f"{problem.name}: plannable, {rep['cycles']:,} cycles"
                 + (f" (lower bound {rep['lower_bound']:,})" if "lower_bound" in rep else "")]
        if "bottleneck" in rep:
            lines.append(f"  bottleneck: {rep['bottleneck']}")
        for pen in rep.get("penalties", []):
            lines.append(f"  penalty: {pen}")
        for b in rep.get("binding", []):
            lines.append("  binding: " + (f"[{b['rule']}] " if b.get("rule") else "")
                         + b["title"] + (f" ({b['candidates_rejected']} candidate(s) "
                                         "rejected)" if "candidates_rejected" in b else "")
                         + (f": {b['detail']}" if "detail" in b else ""))
    print("\n".join(lines), file=stdout)
    return code


def _batch_one(path: str) -> dict[str, Any]:
    """One problem of a batch, in a worker process: solve or verify, then its expectations.
    Whatever happens, a row: a problem that crashes tcplan is a failed row, never the end
    of the batch."""
    import time
    import traceback
    t0 = time.perf_counter()
    try:
        return _batch_row(path, t0)
    except Exception as e:  # noqa: BLE001 - a tcplan bug: reported as the row's failure
        where = traceback.extract_tb(e.__traceback__)[-1]
        return {"problem": path, "status": "crashed", "ok": False,
                "why": f"{type(e).__name__}: {str(e)[:200]} ({where.filename}:{where.lineno})",
                "time": round(time.perf_counter() - t0, 3)}


def _batch_row(path: str, t0: float) -> dict[str, Any]:
    import time
    try:
        problem = load_problem(path)
    except TcplanError as err:
        return {"problem": path, "status": "bad input", "ok": False,
                "why": err.message, "time": 0.0}
    cmd = "solve" if problem.kind in ("expression", "dma", "pcie") else "verify"
    out, err = io.StringIO(), io.StringIO()
    code = main([cmd, path, "--json"], stdout=out, stderr=err)
    dt = time.perf_counter() - t0
    try:
        r = json.loads(out.getvalue().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"problem": problem.name, "status": "crashed", "ok": False,
                "why": err.getvalue()[-300:], "time": dt}
    exp = problem.expect
    status = r.get("status") or ("verified" if r.get("verified") else "failed")
    error = (r.get("explanation") or r.get("error") or {}).get("code")
    if code == 1 and error and status not in ("infeasible",):
        status = "infeasible" if r.get("verified") is not False else status
    why = []
    if "error" in exp:
        if error != exp["error"]:
            why.append(f"expected error {exp['error']}, got {error or 'a plan'}")
    elif code != 0:
        why.append(f"exit {code}: {error}")
    if "explanation" in exp and not error:
        why.append(f"expected the conflict {sorted(exp['explanation'])}, got a plan")
    if "explanation" in exp and error:
        from .explain import explain
        try:
            _, rep = explain(problem)
            got = sorted({it.get("rule") or it["requirement"] for it in rep.get("conflict", [])})
            if got != sorted(exp["explanation"]):
                why.append(f"expected conflict {sorted(exp['explanation'])}, got {got}")
        except TcplanError as e:
            why.append(f"explain: {e.code}")
    for k in ("status", "invocations", "verified"):
        if k in exp and r.get(k) != exp[k]:
            why.append(f"{k}: expected {exp[k]}, got {r.get(k)}")
    if "cycles" in exp and isinstance(r.get("cycles"), int):
        if abs(r["cycles"] - exp["cycles"]) > 0.10 * exp["cycles"]:
            why.append(f"cycles: expected {exp['cycles']:,} (10%), got {r['cycles']:,}")
    return {"problem": problem.name, "status": status, "cycles": r.get("cycles"),
            "lower_bound": r.get("lower_bound"), "solve_time": r.get("solve_time"),
            "time": round(dt, 3), "ok": not why, "why": "; ".join(why)}


def _cmd_batch(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    import multiprocessing
    import pathlib
    root = pathlib.Path(args.dir)
    try:
        if not root.is_dir():
            raise fail("bad-request", detail=f"{args.dir} is not a directory",
                       fix="give a directory of problem files")
        paths = sorted(str(p) for p in root.rglob("*.yaml"))
    except OSError as e:
        raise fail("bad-request", detail=f"{args.dir}: cannot list it ({os_reason(e)})",
                   fix="give a readable directory of problem files") from None
    if not paths:
        raise fail("bad-request", detail=f"no *.yaml under {args.dir}",
                   fix="give a directory of problem files")
    rows: list[dict[str, Any]] = []
    ctx = multiprocessing.get_context("spawn")
    tty = hasattr(stderr, "isatty") and stderr.isatty()
    with ctx.Pool(args.jobs) as pool:
        for k, row in enumerate(pool.imap(_batch_one, paths), 1):
            rows.append(row)
            # a terminal gets one line rewritten in place; a log file a plain line each
            if tty:
                print(f"\r[{k}/{len(paths)}] {row['problem'][:40]:<40}", end="",
                      file=stderr, flush=True)
            else:
                print(f"[{k}/{len(paths)}] {row['problem']}", file=stderr, flush=True)
    if tty:
        print(file=stderr)
    ok = all(r["ok"] for r in rows)
    if args.json:
        print(json.dumps({"ok": ok, "problems": rows}), file=stdout)
    else:
        lines = [f"{'problem':<34} {'status':<11} {'cycles':>10} {'bound':>10} "
                 f"{'solve s':>8}  expectations"]
        for r in rows:
            c = f"{r['cycles']:,}" if isinstance(r.get("cycles"), int) else "-"
            b = f"{r['lower_bound']:,}" if isinstance(r.get("lower_bound"), int) else "-"
            st = f"{r['solve_time']:.2f}" if isinstance(r.get("solve_time"), float) else "-"
            lines.append(f"{r['problem'][:34]:<34} {r['status'][:11]:<11} {c:>10} {b:>10} "
                         f"{st:>8}  {'met' if r['ok'] else 'NOT met: ' + r['why']}")
        lines.append(f"{sum(r['ok'] for r in rows)}/{len(rows)} met their expectations")
        print("\n".join(lines), file=stdout)
    return EXIT_OK if ok else EXIT_RULE


def _no_plan(problem: Any, err: TcplanError, args: argparse.Namespace,
             stdout: TextIO) -> int:
    """`solve` found no plan: infeasible, or unknown when the time limit cut the search."""
    status = "unknown" if err.code == "plan-time-limit" else "infeasible"
    out = {"problem": problem.name, "status": status, "cycles": None, "plan": None,
           "verified": None, "explanation": err.to_json()}
    print(json.dumps(out) if args.json else f"{problem.name}: {status}\n"
          + _format_error(err), file=stdout)
    return EXIT_RULE


def _solve_dma(problem: Any, args: argparse.Namespace, stdout: TextIO) -> int:
    """A DMA with a free stream: search the order and packet, lower, verify, time.  With
    nothing free the problem is verified as given."""
    import time

    from executor.run import run_dma
    from model.cost import dma_cycles, estimate, lower_bound

    from .layout import plan_free, planned
    t = problem.tensors
    t0 = time.perf_counter()
    free = planned(problem)
    if problem.params.get("hops", 1) > 1:
        return _solve_hops(problem, args, stdout)
    try:
        if free:
            found, split = plan_free(problem, args.time_limit, args.seed,
                                     workers=args.workers)
            best = found.best
            plan, status = best.plan, found.status
            chosen = {"time": best.time, "packet": best.packet_text,
                      "cluster": f"m![{split['cluster']}]", "slice": f"m![{split['slice']}]"}
            if best.element is not None:
                chosen["destination_element"] = best.element
            if problem.params.get("free_slice"):
                for dim in problem.params["free_slice"]["dims"]:
                    chosen["destination_" + dim] = plan.destination.dims[dim].text()
            if problem.params.get("free_source"):
                chosen["source_element"] = plan.source.dims["element"].text()
            chosen_hbm = set(problem.params.get("free_address", ())) | (
                {"source"} if problem.params.get("free_source") else set())
            for side in sorted(chosen_hbm, reverse=True):  # the source first
                chosen[side + "_address"] = getattr(plan, side).address
            n_cand, rejected = len(found.candidates), found.rejected
        else:
            plan, status = lower_problem(problem), "given"
            chosen = {"time": t["stream"].dims["time"].text(),
                      "packet": t["stream"].dims["packet"].text()}
            n_cand, rejected = 1, {}
    except TcplanError as err:
        if err.kind == "input":
            raise
        return _no_plan(problem, err, args, stdout)
    solve_s = time.perf_counter() - t0
    est = estimate(plan).cycles
    detailed = dma_cycles(plan)
    bound = lower_bound(plan)
    try:
        checked = run_dma(problem, plan, args.seed)["checked"]
        verified, error = True, None
    except TcplanError as err:
        verified, error, checked = False, err.to_json(), 0
    out = {"problem": problem.name, "status": status, "cycles": detailed.cycles,
           "estimate": est, "lower_bound": bound,
           "bound_ratio": round(detailed.cycles / bound, 3) if bound else None,
           "plan": {"stream": chosen, **plan.to_json()}, "verified": verified,
           "checked": checked, "candidates": n_cand, "rejected": rejected,
           "solve_time": round(solve_s, 3), "breakdown": detailed.to_json()}
    if error:
        out["error"] = error
    if status == "feasible":
        out["note"] = "the time limit cut the search: the plan is not proven optimal"
    if args.json:
        print(json.dumps(out), file=stdout)
    else:
        lines = [f"{problem.name}: "
                 + (f"source Element {chosen['source_element']} (HBM), "
                    if "source_element" in chosen else "")
                 + (f"source address {chosen['source_address']:,}, "
                    if "source_address" in chosen else "") + "stream "
                 + (f"Cluster {chosen['cluster']}, Slice {chosen['slice']}, " if "slice" in
                    chosen else "") + f"Time {chosen['time']}, Packet {chosen['packet']} "
                 + ("into destination " + ", ".join(
                     f"{d.title()} {chosen['destination_' + d]:,}" if d == "address" else
                     f"{d.title()} {chosen['destination_' + d]}"
                     for d in ("chip", "cluster", "slice", "element", "address")
                     if "destination_" + d in chosen) + " "
                    if any(k.startswith("destination_") for k in chosen) else "")
                 + f"({status}; {n_cand} legal layout(s)"
                 + (", rejected: " + ", ".join(f"{r} x{k}" for r, k in rejected.items())
                    if rejected else "") + f"; {solve_s:.2f} s)",
                 format_dma(problem.name, plan),
                 f"cycles: {detailed.cycles:,} (estimate {est:,}; lower bound {bound:,}, "
                 f"ratio {out['bound_ratio']})"] + (
                     [_hbm_line(detailed.hbm)] if detailed.hbm else []) + [
                 f"verified: {checked:,} destination elements" if verified else
                 f"NOT verified [{error['code']}]: " + error["message"]] + (
                     [f"note: {out['note']}"] if "note" in out else [])
        print("\n".join(lines), file=stdout)
    return EXIT_OK if verified else EXIT_RULE


def _solve_hops(problem: Any, args: argparse.Namespace, stdout: TextIO) -> int:
    """Direct or through one intermediate HBM layout: the shortest path of planned hops;
    each hop is executed and verified (so the chain holds the source tensor end to end)."""
    import time

    from executor.run import run_dma
    from model.cost import dma_cycles

    from .hops import plan_hops
    t0 = time.perf_counter()
    try:
        hp = plan_hops(problem, args.time_limit, args.seed)
    except TcplanError as err:
        if err.kind == "input":
            raise
        return _no_plan(problem, err, args, stdout)
    solve_s = time.perf_counter() - t0
    rows, verified, total = [], True, 0
    for h in hp.hops:
        full = dma_cycles(h.plan).cycles
        total += full
        try:
            checked = run_dma(problem, h.plan, args.seed)["checked"]
        except TcplanError:
            verified, checked = False, 0
        rows.append({"source": h.source.describe(), "destination": h.destination.describe(),
                     "stream": h.stream, "cycles": full, "estimate": h.cycles,
                     "checked": checked})
    out = {"problem": problem.name, "status": "optimal", "cycles": total,
           "plan": {"hops": rows}, "verified": verified, "why": hp.direct_error,
           "intermediates_tried": hp.tried, "solve_time": round(solve_s, 3)}
    if args.json:
        print(json.dumps(out), file=stdout)
    else:
        lines = [f"{problem.name}: {len(rows)} hop(s), {total:,} cycles"
                 + (f" ({hp.direct_error})" if hp.direct_error else "")
                 + f"; {hp.tried} intermediate layout(s) tried in {solve_s:.2f} s"]
        for k, r in enumerate(rows, 1):
            lines.append(f"  hop {k}: {r['source']} -> {r['destination']}")
            lines.append(f"         stream {r['stream']}; {r['cycles']:,} cycles; "
                         + (f"verified ({r['checked']:,} elements)" if r["checked"] else
                            "NOT verified"))
        print("\n".join(lines), file=stdout)
    return EXIT_OK if verified else EXIT_RULE


def _cmd_lower(args: argparse.Namespace, stdout: TextIO) -> int:
    problem = load_problem(args.problem)
    plan = lower_problem(problem)
    if args.json:
        print(json.dumps({"problem": problem.name, "kind": problem.kind, **plan.to_json()}),
              file=stdout)
    elif problem.kind in ("layout", "vector", "lane_fold", "expression"):
        print(plan.text(), file=stdout)
    elif problem.kind == "redistribute":
        print(format_redistribution(problem.name, plan), file=stdout)
    elif problem.kind in ("gather", "scatter"):
        print(format_indexed(problem.name, plan), file=stdout)
    elif problem.kind == "sequence":
        t = problem.tensors
        print(format_table(plan, t["buffer"].dims["element"].text(),
                           t["stream"].dims["time"].text(), t["stream"].dims["packet"].text()),
              file=stdout)
    else:
        print(format_dma(problem.name, plan), file=stdout)
    return EXIT_OK


def format_indexed(name: str, plan: Any) -> str:
    what = "byte offsets (row r at r * row_bytes)" if plan.variant == "scaled" else \
        "raw row positions"
    eb = plan.table.elem_bytes
    ent = ", ".join(f"{n} : {_sym(s * eb, 'dm')}" for n, s in plan.dm_entries)
    return "\n".join([
        f"{name}: {plan.variant} {plan.kind} over {plan.gather_axis} of "
        f"{plan.table.describe()}",
        f"  {plan.rows} rows of {plan.row_terms} = {plan.row_elements} elements "
        f"({plan.row_bytes} B); index {plan.index.describe()} holds {what}",
        f"  DM side {plan.rows_side.describe()}: [{ent}] : {plan.row_bytes} B per packet",
    ])


def format_redistribution(name: str, plan: Any) -> str:
    lines = [f"{name}: {plan.source.describe()}"]
    for s in plan.steps:
        if s.sources is not None:
            lines.append(f"  {s.op}({s.sources})")
        elif s.axis is not None:
            lines.append(f"  {s.op}::<{s.axis.text()}, {s.output.text()}>({s.indices})")
        else:
            lines.append(f"  {s.op}()")
    lines.append(f"-> {plan.result.describe()}")
    eb = plan.source.elem_bytes
    for d in plan.descriptors():
        ent = ", ".join(f"{n} : ({r * eb:,}, {w * eb:,})" for n, r, w in d["entries"])
        lines.append(f"  target chip {d['target'][0]} cluster {d['target'][1]}: read chip "
                     f"{d['read'][0]} @ {d['read'][1]:,}, write chip {d['write'][0]} @ "
                     f"{d['write'][1]:,}, [{ent}] : {d['packet'] * eb} B")
    if plan.source.tier == "hbm":
        lines.append("syncs: none derived (an HBM chip shuffle copies whole chips)")
    else:
        lines.append("syncs: " + (", ".join(plan.syncs) if plan.syncs else
                                  "none (local slicing only)"))
    return "\n".join(lines)


def plan_stream_text(plan: Any, dim: str) -> str:
    return plan.stream_dims[dim].text() if hasattr(plan, "stream_dims") else "?"


def _sym(nbytes: int, tier: str) -> str:
    """A DM stride in the seed's symbols (slice_stride, DMN_stride), else bytes."""
    if tier == "dm" and nbytes and nbytes % hw.DM_SLICE_STRIDE == 0:
        for name, unit in (("cluster_stride", hw.DM_CLUSTER_STRIDE),
                           ("DMN_stride", hw.DM_DMN_STRIDE),
                           ("slice_stride", hw.DM_SLICE_STRIDE)):
            if nbytes % unit == 0:
                k = nbytes // unit
                return name if k == 1 else f"{k}*{name}"
    return f"{nbytes:,}"


def format_dma(name: str, plan: Any) -> str:
    eb = plan.elem_bytes
    src, dst = plan.source.tier, plan.destination.tier
    n_cmd = sum(len(e.commands) for e in plan.engines)
    kind = "homogeneous" if plan.homogeneous else "heterogeneous"
    engine = "PCIe DMA" if plan.pcie else f"{kind} aggregate"
    lines = [f"{name}: {src.upper()} -> {dst.upper()}, {plan.source.dtype}, packet "
             f"{plan.packet} elements ({plan.packet_bytes} B); {engine}: "
             f"{len(plan.engines)} engine(s), {n_cmd} command(s)"]
    if plan.default_stream:
        lines.append("stream (default: destination order, innermost term as Packet): "
                     + ", ".join(f"{d} {plan_stream_text(plan, d)}" for d in ("time", "packet")))
    lines.append("")
    width = max((len(t) for t in plan.terms), default=0)
    for label, k, tier in (("read", 1, src), ("write", 2, dst)):
        lines.append(f"{label} = [")
        for t, e in zip(plan.terms, plan.unified):
            lines.append(f"  {t.ljust(width)} -> {e[0]} : {_sym(e[k] * eb, tier)},")
        lines.append(f"] : {plan.packet_bytes} B")
    lines.append("unified = [")
    for t, (n, r, w) in zip(plan.terms, plan.unified):
        lines.append(f"  {t.ljust(width)} -> {n} : ({_sym(r * eb, src)}, {_sym(w * eb, dst)}),")
    lines.append(f"] : {plan.packet_bytes} B   (strides in bytes)")
    lines.append("")
    for e in plan.engines:
        head = (f"PCIe engine of chip {e.chip}" if plan.pcie else
                f"engine chip {e.chip}, cluster {e.cluster}, DMN pair {e.pair}")
        if e.read_chip != e.chip or e.write_chip != e.chip:
            head += f" (reads chip {e.read_chip}, writes chip {e.write_chip})"
        if len(e.commands) == 1 and not e.commands[0].covers:
            lines.append(f"{head}: read {src.upper()} @ {e.read_base:,}, write {dst.upper()} "
                         f"@ {e.write_base:,}")
            continue
        lines.append(f"{head}: {len(e.commands)} commands")
        for i, c in enumerate(e.commands):
            cov = ", ".join(f"{k.split(':', 1)[1]} in [{a}, {b})" for k, (a, b) in
                            c.covers.items())
            ent = ", ".join(f"{n} : ({r * eb:,}, {w * eb:,})" for n, r, w in c.entries)
            lines.append(f"  exec #{i}: [{ent}] read @ {c.read_base:,}, write @ "
                         f"{c.write_base:,}; covers {cov}")
    from model.hbm_bits import moved_by, report_lines
    for side, t, other in (("source", plan.source, plan.destination),
                           ("destination", plan.destination, plan.source)):
        if t.tier == "hbm":
            lines += report_lines(side, t, moved_by(other))
    return "\n".join(lines)


def _parse_index(text: str, axes: dict[str, int]) -> dict[str, int]:
    index: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, eq, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not re.fullmatch(r"-?[0-9]{1,19}", value):
            raise fail("bad-request", detail=f"--index: cannot read {part.strip()[:40]!r} as "
                       "AXIS=COORDINATE", fix="e.g. --index N=1,C=17,H=3,W=5")
        if name not in axes:
            raise fail("bad-request", detail=f"--index: {name!r} is not an axis of the problem "
                       f"({', '.join(axes)})", fix="name the problem's axes")
        v = int(value)
        if not 0 <= v < axes[name]:
            raise fail("bad-request", detail=f"--index: {name} = {v} is outside 0..{axes[name] - 1}",
                       fix="give a coordinate inside the axis")
        if name in index:
            raise fail("bad-request", detail=f"--index: {name} given twice", fix="name it once")
        index[name] = v
    return index


def _cmd_trace(args: argparse.Namespace, stdout: TextIO) -> int:
    problem = load_problem(args.problem)
    index = _parse_index(args.index, problem.axes)
    full = {a: index.get(a, 0) for a in problem.axes}
    rows = {name: tiers.trace(t, full) for name, t in problem.tensors.items()}
    if problem.kind in ("dma", "pcie") and rows.get("stream", {}).get("held"):
        rows["stream"]["engine"] = True  # its Slice position is a DMN pair (an engine)
    warnings = []
    for name, t in problem.tensors.items():
        if problem.kind in ("dma", "pcie") and name == "stream":
            # a DMA stream's Chip/Cluster/Slice select engines, not placements
            warnings += dma._stream_engine_violations(t, problem.chips)
        else:
            warnings += tiers.placement_violations(t, problem.chips)
    if args.json:
        out = {"problem": problem.name, "index": full, "tensors": rows,
               "warnings": [v.to_json() for v in warnings]}
        print(json.dumps(out), file=stdout)
        return EXIT_OK
    lines = [f"problem {problem.name}: index "
             + ", ".join(f"{a}={v}" for a, v in full.items())]
    width = max((len(n) for n in problem.tensors), default=0)
    if not problem.tensors:
        lines.append("(no placed tensors: a lane fold works on the Contraction Engine's "
                     "accumulators)")
    for name, t in problem.tensors.items():
        lines.append(f"{name.ljust(width)}  {t.describe()}")
        lines.append(f"{''.ljust(width)}  -> {_trace_text(rows[name])}")
    if warnings:
        lines.append("warnings (placement rules; planning and lowering enforce them):")
        lines += [f"  [{v.rule}] {v.message}" for v in warnings]
    print("\n".join(lines), file=stdout)
    return EXIT_OK


def _trace_text(r: dict[str, Any]) -> str:
    if not r["held"]:
        return f"not held: {r['reason']}"
    if r["tier"] == "stream":
        where = "engine: DMN pair" if r.get("engine") else "slice"
        return (f"chip {r['chip']}, cluster {r['cluster']}, {where} {r['slice']}, "
                f"time {r['time']:,}, packet {r['packet']}")
    parts = []
    for key in ("chip", "cluster"):
        if key in r:
            parts.append(f"{key} {r[key]}")
    if "dmn" in r:
        parts.append(f"DMN {r['dmn']}")
    if "slice" in r:
        parts.append(f"slice {r['slice']}")
    if "lane" in r:
        parts.append(f"lane {r['lane']}")
    parts.append(f"element offset {r['element_offset']:,}")
    parts.append(f"byte offset {r['byte_offset']:,}")
    if "byte_address" in r and r["tier"] == "dm":
        parts.append(f"DM address {r['byte_address']:#x}")
    if "hbm" in r:
        h = r["hbm"]
        parts.append(f"HBM stack {h['stack']} channel {h['channel']} bank group "
                     f"{h['bank_group']} bank {h['bank']} row {h['row']}")
    return ", ".join(parts)


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    want_json = "--json" in argv
    if argv[:1] in (["--version"], ["-V"]):
        print(f"tcplan {version()}", file=stdout)
        return EXIT_OK
    try:
        try:
            args = _build_parser().parse_args(argv)
        except _ArgError as e:
            cmd = next((a for a in argv if not a.startswith("-")), None)
            raise fail("bad-request", detail=str(e),
                       fix=f"see tcplan {cmd + ' ' if cmd in COMMANDS else ''}--help") from None
        if args.command == "schema":
            from .schema import problem_schema
            print(json.dumps(problem_schema(), indent=2), file=stdout)
            return EXIT_OK
        if args.command == "trace":
            return _cmd_trace(args, stdout)
        if args.command == "lower":
            return _cmd_lower(args, stdout)
        if args.command == "verify":
            return _cmd_verify(args, stdout)
        if args.command == "run":
            return _cmd_run(args, stdout)
        if args.command == "solve":
            return _cmd_solve(args, stdout)
        if args.command == "explain":
            return _cmd_explain(args, stdout)
        if args.command == "batch":
            return _cmd_batch(args, stdout, stderr)
        return _cmd_sequence(args, stdout)
    except TcplanError as err:
        if want_json:
            print(json.dumps(_error_obj(err)), file=stdout)
        else:
            print(_format_error(err), file=stderr)
        return _exit_for(err)


def entry_point() -> None:  # console script
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + 13  # killed by SIGPIPE, by shell convention
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry_point()
