"""The ``tcplan`` command line.

Exit codes: 0 success; 1 a hardware rule stops the request (named rule in the output);
2 malformed input (``parse-error``, ``unknown-axis``, ``bad-mapping``, ``bad-request``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import pathlib
import re
import sys
from typing import Any, Iterable, Iterator, Mapping, Sequence, TextIO

from tcplan.model import hardware as hw
from tcplan.model import limits
from tcplan.model.mapping import parse, parse_axes, validate_axes
from tcplan.model.rules import MODES, PROFILES, TcplanError, fail
from tcplan.model import tiers
from tcplan.model.sequencer import derive
from tcplan.planner.inputs import Overlong, bounded_lines, open_lines
from tcplan.planner.spec import load_problem

from .render import format_table

from . import api  # noqa: E402
from .progress import for_stream  # noqa: E402
from .kinds import kind_of  # noqa: E402
from .kinds.basic import default_mode  # noqa: E402
from .render import EXIT_INPUT, EXIT_OK, EXIT_RULE  # noqa: E402
from .render import format_error as _format_error  # noqa: E402


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
    for add in (_verb_sequence, _verb_trace, _verb_lower, _verb_verify, _verb_schema,
                _verb_completion, _verb_run, _verb_solve, _verb_explain, _verb_batch,
                _verb_import):
        add(sub)  # each verb's flags, in the order --help lists them
    for parser in (p, *sub.choices.values()):  # before or after the command
        parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                            help="no progress, only results and errors")
        parser.add_argument("-v", "--verbose", action="store_true",
                            default=argparse.SUPPRESS,
                            help="also say where the time goes (search rounds, stages)")
    _picture_flags(sub.choices)
    return p


def _verb_sequence(sub) -> None:
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


def _verb_trace(sub) -> None:
    t = sub.add_parser(
        "trace", help="where one tensor index lives in every tensor and stream of a problem",
        description="Trace a tensor index through every tensor and stream of a problem: chip, "
                    "cluster, DMN, slice, element offset and byte address (or slice, time step "
                    "and packet lane for a stream). Placement-rule violations are warnings.")
    t.add_argument("problem", metavar="PROBLEM.yaml")
    t.add_argument("--index", required=True, help="the tensor index, e.g. N=1,C=17,H=3,W=5 "
                   "(axes not named are 0)")
    t.add_argument("--json", action="store_true", help="print one JSON object")


def _verb_lower(sub) -> None:
    lo = sub.add_parser(
        "lower", help="derive every config of a problem (DMA: per engine and command)",
        description="Lower a problem to the configs the hardware runs: for a DMA, the read, "
                    "write and unified sequencers (elements and bytes) and every engine's "
                    "commands with their base addresses; for a sequence problem, the sequencer.")
    lo.add_argument("problem", metavar="PROBLEM.yaml")
    lo.add_argument("--json", action="store_true", help="print one JSON object")


def _verb_verify(sub) -> None:
    v = sub.add_parser(
        "verify", help="lower, execute on simulated memories, verify, and estimate cycles",
        description="Lower a problem, run its configs over simulated memories filled from a "
                    "seed, check that the destination holds the source tensor (the holding "
                    "rule), and report cycles with a breakdown.")
    v.add_argument("problem", metavar="PROBLEM.yaml")
    v.add_argument("--json", action="store_true", help="print one JSON object")
    v.add_argument("--seed", type=_seed, default=0, help="seed of the random source data")


def _verb_import(sub) -> None:
    from .rust.command import add_verb
    add_verb(sub)


def _verb_schema(sub) -> None:
    sub.add_parser(
        "schema", help="print the JSON Schema of problem files",
        description="Print the JSON Schema (draft 2020-12) of tcplan's problem files, "
                    "generated from the definitions the loader checks (point an editor's YAML "
                    "support at it: docs/problem-format.md).")


def _verb_completion(sub) -> None:
    co = sub.add_parser(
        "completion", help="print a shell completion script",
        description="Print a bash completion script for tcplan, generated from this "
                    "command line's own parser. Use: eval \"$(tcplan completion bash)\" (in "
                    "zsh, after autoload -U bashcompinit && bashcompinit).")
    co.add_argument("shell", choices=("bash",), help="the shell (bash; zsh through "
                    "bashcompinit)")


def _verb_run(sub) -> None:
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


def _verb_solve(sub) -> None:
    so = sub.add_parser(
        "solve", help="plan a problem's free choices, lower, verify and estimate cycles",
        description="Plan a problem's free choices, then lower, execute and verify the plan "
                    "and estimate its cycles. A DMA or PCIe problem: the stream's loop order, "
                    "packet and engine split, the destination's Element, Slice or padding, an "
                    "HBM tensor's layout and address, and hops through an intermediate HBM "
                    "layout, as the problem frees them (CP-SAT; the plan is the cycle "
                    "estimate's minimum). An expression problem: the fewest Tensor Unit "
                    "invocations and a valid Intra-Slice Chain for each. A Fetch or Commit: the "
                    "stream's Time and Packet when free. A graph: every free "
                    "tensor's layout and every op's plan, jointly (docs/graphs.md), then the "
                    "whole graph run end to end. Exit 1 naming the conflicting rules when no "
                    "plan exists.")
    so.add_argument("problem", metavar="PROBLEM.yaml")
    so.add_argument("--json", action="store_true", help="print one JSON object")
    so.add_argument("--verify", choices=("full", "sample", "none"), default="full",
                    help="check every destination position (full), a seeded random sample "
                         "of them (sample), or nothing, not even a run (none)")
    so.add_argument("--time-limit", type=_positive, default=10.0, metavar="S",
                    help="solver time limit in seconds (default 10), per search: a graph "
                         "gives it to each op plan it evaluates")
    so.add_argument("--workers", type=_count, default=1, metavar="N",
                    help="solver worker threads (default 1: deterministic)")
    so.add_argument("--seed", type=_seed, default=0,
                    help="solver seed and seed of the verification data")
    so.add_argument("--jobs", type=_count_or_zero, default=0, metavar="N",
                    help="processes planning a graph's ops and checking its contractions "
                         "apart (default 0: one per core; 1: all in this one)")
    so.add_argument("--dask", metavar="ADDRESS",
                    help="plan a graph's ops on the Dask scheduler at ADDRESS ('local': a "
                         "local cluster; pip install 'tcplan[dask]')")
    so.add_argument("--flat", action="store_true",
                    help="plan a graph as one model, every op plan made (the benchmarks' "
                         "baseline: no reuse, no parts)")
    so.add_argument("--trace", metavar="FILE.json",
                    help="also write a graph's schedule to FILE.json in the Trace Event "
                         "Format (Perfetto, chrome://tracing): one track per context (main, "
                         "sub, DMA), a bar per task, an arrow per hazard; 1 us per cycle")
    so.add_argument("--emit", choices=("rust",),
                    help="print a graph's plan as furiosa-opt code (Rust) instead of the "
                         "report: each tensor's type with its planned mappings, each move's "
                         "call with its type parameters (docs/kernels.md)")


def _verb_explain(sub) -> None:
    ex = sub.add_parser(
        "explain", help="why a problem has no plan, or what binds the plan it has",
        description="For an infeasible problem: a minimal set of conflicting requirements "
                    "(no plan meets them all; without any one of them the others can be "
                    "met), each with its rule id, terms and fix; exit 1. For a feasible one: "
                    "the binding constraints and the bottleneck; exit 0.")
    ex.add_argument("problem", metavar="PROBLEM.yaml")
    ex.add_argument("--json", action="store_true", help="print one JSON object")


def _verb_batch(sub) -> None:
    ba = sub.add_parser(
        "batch", help="solve and verify every problem under a directory",
        description="Solve (or verify) every *.yaml under DIR in parallel worker processes "
                    "(this machine's, or a Dask cluster's: --backend dask) and check each "
                    "against its expect block (status, cycles within 10%, invocations, "
                    "verified, error and explanation rule ids). A crashing problem is a "
                    "failed row; a lost worker's problem is retried once, then reported. "
                    "Rows stream to --results as they finish; --resume skips the ones "
                    "there. Exit 0 when every problem met its expectations, 1 otherwise.")
    ba.add_argument("dir", metavar="DIR")
    ba.add_argument("--jobs", type=_count, default=2, metavar="N",
                    help="worker processes (default 2; with --backend dask and no --address, "
                         "the local cluster's workers)")
    ba.add_argument("--json", action="store_true", help="print one JSON object")
    ba.add_argument("--verify", choices=("full", "sample", "none"), default="full",
                    help="how `solve` checks each planned problem (see tcplan solve --help)")
    ba.add_argument("--seed", type=_seed, default=0,
                    help="solver seed and seed of the verification data, for every problem")
    ba.add_argument("--backend", choices=("local", "dask"), default="local",
                    help="local: worker processes on this machine (default); dask: a Dask "
                         "cluster, local or at --address (pip install 'tcplan[dask]')")
    ba.add_argument("--address", metavar="HOST:PORT",
                    help="the Dask scheduler to connect to (default: start a local cluster "
                         "of --jobs workers)")
    ba.add_argument("--results", metavar="FILE.jsonl",
                    help="append each problem's row to this JSON Lines file as it finishes")
    ba.add_argument("--resume", action="store_true",
                    help="with --results: keep the rows already in the file and run only "
                         "the problems missing from it")


PLOT_HELP = ("also draw the plan of a DMA, PCIe, Fetch or Commit problem, or a graph's "
             "schedule (a row per context, a bar per task, an arrow per hazard) and, beside "
             "it in FILE.<op>.<ext>, each of its DMA, PCIe, Fetch and Commit ops' own, to FILE "
             "(.svg or .png; needs matplotlib: pip install 'tcplan[plot]'); a transfer's: per "
             "chip, the HBM requests, first row opens and row re-opens of every channel and "
             "bank (a heatmap, with per-channel totals); each DMA engine's commands on a "
             "timeline in cycles (start-up, read, write), with the total cycles and the "
             "bottleneck marked; the bytes and cycles of every DMN; a Fetch's or Commit's: a "
             "slice's DM bank accesses and its cycles against its bound (docs/pictures.md)")


def _picture_flags(commands: Mapping[str, argparse.ArgumentParser]) -> None:
    """``--plot`` on verify and solve, ``--report`` on solve (planner/plot.py,
    planner/report.py)."""
    for name in ("verify", "solve"):
        commands[name].add_argument("--plot", metavar="FILE", help=PLOT_HELP)
    commands["solve"].add_argument(
        "--report", metavar="DIR",
        help="also write DIR/index.html, one self-contained page (a DMA or PCIe problem): "
             "the chosen layouts, the lowered configs, the cycles and their breakdown, the "
             "pictures of --plot (inline SVG) and the plan against its lower bound")


def _pictures_asked(args: argparse.Namespace) -> None:
    """Before any work: what ``--plot`` / ``--report`` need (the suffix, matplotlib, a DMA
    or PCIe problem), so that a long solve does not end in a picture it cannot draw."""
    from . import plot
    asked = [(flag, getattr(args, dest, None)) for flag, dest in (("--plot", "plot"),
                                                                  ("--report", "report"))]
    asked = [(flag, target) for flag, target in asked if target is not None]
    if asked:
        problem = load_problem(args.problem)
        for flag, target in asked:
            plot.check(problem, target if flag == "--plot" else None, flag)


def _pictures(args: argparse.Namespace, result: Any) -> int:
    """After the verb's output: draw the picture and write the report; say where on standard
    error.  Nothing to draw (no plan) is a warning; a file that cannot be written is an
    error (exit 2, said on standard error: standard output keeps the verb's one answer)."""
    from . import plot
    from .report import write_report
    for flag, target, write in (("--plot", getattr(args, "plot", None), plot.plot_result),
                                ("--report", getattr(args, "report", None), write_report)):
        if target is None:
            continue
        if not plot.drawable(result) or (flag == "--report" and not (
                result.breakdown or {}).get("engines")):
            LOG.warning("%s: nothing written: %s has no timed plan", flag,
                        result.problem.name)
            continue
        try:
            path = write(result, target, flag)
        except TcplanError as err:
            LOG.error("%s", _format_error(err))
            return _exit_for(err)
        LOG.info("%s: wrote %s", flag, path)
    return EXIT_OK


LOG = logging.getLogger("tcplan")


def _logging(args: argparse.Namespace, stderr: TextIO) -> None:
    """Progress and detail go through the ``tcplan`` logger to ``stderr``: progress at
    INFO (``-q`` hides it), detail at DEBUG (``-v`` shows it)."""
    level = (logging.WARNING if getattr(args, "quiet", False) else
             logging.DEBUG if getattr(args, "verbose", False) else logging.INFO)
    LOG.handlers[:] = [logging.StreamHandler(stderr)]
    LOG.handlers[0].setFormatter(logging.Formatter("%(message)s"))
    LOG.setLevel(level)
    LOG.propagate = False


def _positive(text: str) -> float:
    try:
        v = float(limits.number_text(text))
    except limits.NumberTooLong as e:
        raise argparse.ArgumentTypeError(e.detail) from None
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number of seconds")
    return v


def _int_arg(text: str, lo: int, hi: int, noun: str, out_of_range: str) -> int:
    """An integer flag value in [lo, hi]; argparse turns the error into `bad-request`."""
    try:
        v = limits.to_int(text)
    except limits.NumberTooLong as e:
        raise argparse.ArgumentTypeError(e.detail) from None
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
    if not lo <= v <= hi:
        raise argparse.ArgumentTypeError(out_of_range.format(text=repr(text), v=v))
    return v


def _count(text: str) -> int:
    return _int_arg(text, 1, 64, "a whole number", "{text} must be 1 to 64")


def _count_or_zero(text: str) -> int:
    return _int_arg(text, 0, 64, "a whole number", "{text} must be 0 to 64")


def _seed(text: str) -> int:
    # (OR-Tools takes a 32-bit random seed; numpy any)
    return _int_arg(text, 0, 2**31 - 1, "a seed", "{v} is not a seed (0 to 2,147,483,647)")


def _error_obj(err: TcplanError) -> dict[str, Any]:
    return {"error": err.to_json()}


def _exit_for(err: TcplanError) -> int:
    return EXIT_INPUT if err.kind == "input" else EXIT_RULE


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


def _json_int(text: str) -> int:
    """A batch line's integer, bounded before ``int()`` (json.loads converts it itself)."""
    return int(limits.number_text(text))


def _json_float(text: str) -> float:
    return float(limits.number_text(text))


#: a JSON string (skipped) or a number, to find the column of a number too long
_JSON_NUMBER = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*')


def _long_number_column(line: str) -> int | str:
    for m in _JSON_NUMBER.finditer(line):
        if m.group()[0] != '"' and len(m.group()) > limits.NUMBER_MAX_CHARS:
            return m.start() + 1
    return "?"  # (not reached: json.loads found it)


def answer_lines(lines: Iterable[str | bytes | Overlong]) -> Iterator[str]:
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
                req = json.loads(line, parse_int=_json_int, parse_float=_json_float)
            except TcplanError as err:
                yield _ENCODE(_error_obj(err))
            except limits.NumberTooLong as e:
                assert isinstance(line, str)  # (json.loads raised it: the line is decoded)
                bad = fail("bad-request", detail=f"line {lineno}, column "
                           f"{_long_number_column(line)}: {e.detail}", fix=e.fix)
                yield _ENCODE(_with_id(_error_obj(bad), line))
            except UnicodeDecodeError as e:
                bad = fail("bad-request", detail=f"line {lineno}: not UTF-8 (byte {e.start + 1})",
                           fix="write requests as UTF-8 JSON")
                yield _ENCODE(_error_obj(bad))
            except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
                what = (f"invalid JSON ({e.msg} at column {e.colno})"
                        if isinstance(e, json.JSONDecodeError) else
                        "JSON too deeply nested or with a number too long")
                bad = fail("bad-request", detail=f"line {lineno}: {what}",
                           fix="one JSON object per line")
                yield _ENCODE(_error_obj(bad))
            else:
                yield _ENCODE(answer_request(req))
    finally:
        gc.set_threshold(*old)


_LONG = object()  # (a number too long to take, where a request's id is looked for)


def _with_id(out: dict[str, Any], line: str) -> dict[str, Any]:
    """The error answering a line whose numbers are too long to take, with the request's
    ``id`` (read with those numbers left out) so that a client can match it; as it is
    when the line has no id, or its id is the number too long."""
    def short(text: str, convert: Any) -> Any:
        return _LONG if len(text) > limits.NUMBER_MAX_CHARS else convert(text)
    try:
        req = json.loads(line, parse_int=lambda t: short(t, int),
                         parse_float=lambda t: short(t, float))
    except (ValueError, RecursionError):
        return out
    if isinstance(req, dict) and "id" in req and not _holds_long(req["id"]):
        return {"id": req["id"], **out}
    return out


def _holds_long(x: Any) -> bool:
    """Is ``x`` (a JSON value) or anything in it a number too long to take?"""
    if isinstance(x, dict):
        return any(_holds_long(v) for v in x.values())
    if isinstance(x, list):
        return any(_holds_long(v) for v in x)
    return x is _LONG


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
            "schema", "completion", "import")


def _cmd_run(args: argparse.Namespace, stdout: TextIO) -> int:
    from .inputs import load_npy
    problem = load_problem(args.problem)
    names = kind_of(problem).inputs(problem)
    if not names:
        api.run(problem, seed=args.seed)  # says what the kind has not
    inputs = {}
    for item in args.input:
        name, eq, path = item.partition("=")
        if not eq or name not in names:
            raise fail("bad-request", detail=f"--input {item!r}: a {problem.kind} problem "
                       f"takes {', '.join(n + '=FILE.npy' for n in names) or 'no input'}",
                       fix="name one of the problem's input tensors")
        inputs[name] = load_npy(path, f"--input {name}",
                                max(1, limits.product(problem.axes.values())))
    ran = api.run(problem, inputs, seed=args.seed)
    written = ran.save(args.out)
    if getattr(args, "json", False):
        print(json.dumps({"problem": problem.name, "written": [
            {**t, "path": str(path)} for t, path in zip(ran.to_json()["tensors"], written)]}),
            file=stdout)
        return EXIT_OK
    for path, arr in zip(written, ran.arrays.values()):
        print(f"{path}: {arr.dtype} {arr.shape}", file=stdout)
    return EXIT_OK


@contextlib.contextmanager
def _progress(stderr: TextIO) -> Iterator[Any]:
    """The long stages' progress on stderr (planner/progress.py); -q silences it."""
    progress = for_stream(stderr)
    try:
        yield progress
    finally:
        if progress is not None:
            progress.close()


def _cmd_verify(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    _pictures_asked(args)
    with _progress(stderr) as progress:
        checked = api.verify(load_problem(args.problem), seed=args.seed, progress=progress)
    print(json.dumps(checked.to_json()) if args.json else checked.text(), file=stdout)
    return _pictures(args, checked) or checked.exit_code


def _cmd_solve(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    _pictures_asked(args)
    _trace_asked(args)
    if args.emit is not None and load_problem(args.problem).kind != "graph":
        raise fail("bad-request", detail=f"--emit rust writes a graph's kernel; "
                   f"{args.problem} is a {load_problem(args.problem).kind} problem",
                   fix="use --emit rust on a graph (kind: graph)")
    with _progress(stderr) as progress:
        solved = api.solve(load_problem(args.problem), time_limit=args.time_limit,
                           workers=args.workers, seed=args.seed, verify=args.verify,
                           progress=progress, jobs=args.jobs, dask=args.dask,
                           flat=args.flat)
    if args.emit is not None and solved.plan is not None:
        from .rust.command import emit_plan
        print(emit_plan(args.problem, solved), file=stdout, end="")
        return _pictures(args, solved) or _trace(args, solved) or solved.exit_code
    print(json.dumps(solved.to_json()) if args.json else solved.text(), file=stdout)
    return _pictures(args, solved) or _trace(args, solved) or solved.exit_code


def _trace_asked(args: argparse.Namespace) -> None:
    """Before any work: ``--trace`` names a .json file and the problem has a schedule."""
    if args.trace is None:
        return
    if not str(args.trace).lower().endswith(".json"):
        raise fail("bad-request", detail=f"--trace {str(args.trace)[:200]}: a trace is "
                   "written as JSON", fix="name the file NAME.json")
    problem = load_problem(args.problem)
    if not kind_of(problem).has_schedule(problem):
        raise fail("bad-request", detail=f"--trace writes a schedule of contexts; "
                   f"{problem.name} is a {problem.kind} problem, which has none",
                   fix="use --trace on a graph (kind: graph)")


def _trace(args: argparse.Namespace, solved: Any) -> int:
    """After the verb's output: the schedule as a Chrome trace (nothing to write without a
    plan: a warning)."""
    if args.trace is None:
        return EXIT_OK
    schedule = getattr(solved.plan, "schedule", None)
    if schedule is None:
        LOG.warning("--trace: nothing written: %s has no schedule", solved.problem.name)
        return EXIT_OK
    from .plot import write_file
    try:
        path = write_file(pathlib.Path(args.trace),
                          json.dumps(schedule.trace(), indent=1).encode(), "--trace")
    except TcplanError as err:
        LOG.error("%s", _format_error(err))
        return _exit_for(err)
    LOG.info("--trace: wrote %s", path)
    return EXIT_OK


def _cmd_explain(args: argparse.Namespace, stdout: TextIO) -> int:
    why = api.explain(load_problem(args.problem))
    print(json.dumps(why.to_json()) if args.json else why.text(), file=stdout)
    return why.exit_code


def _cmd_batch(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from .batch import run_batch, tasks_under
    tasks = tasks_under(args.dir)
    tty = hasattr(stderr, "isatty") and stderr.isatty()
    bar = None
    if tty and LOG.isEnabledFor(logging.INFO):  # a terminal: one bar, redrawn in place
        from tqdm import tqdm
        bar = tqdm(total=len(tasks), file=stderr, unit="problem", desc="batch")

    def on_row(row: dict[str, Any], k: int, n: int) -> None:
        if bar is not None:
            bar.set_postfix_str(row["problem"][:40])
            bar.update()
        else:  # a log: a plain line per problem
            LOG.info("[%d/%d] %s", k, n, row["problem"])
        LOG.debug("  %s: %s in %.2f s (stages: %s)", row["problem"], row["status"],
                  row.get("time") or 0.0, row.get("times"))
    try:
        rows = run_batch(tasks, args.backend, args.jobs, args.verify, args.seed,
                         args.address, args.results, args.resume, on_row)
    finally:
        if bar is not None:
            bar.close()
    ok = all(r["ok"] for r in rows)
    if args.json:
        print(json.dumps({"ok": ok, "problems": rows}), file=stdout)
    else:
        print(format_batch(rows), file=stdout)
    return EXIT_OK if ok else EXIT_RULE


def format_batch(rows: list[dict[str, Any]]) -> str:
    """The batch's two tables: the expectations (one row per problem, then how many met
    them: the same from every backend, byte for byte) and the seconds of each stage."""
    lines = [f"{'problem':<34} {'status':<11} {'cycles':>10} {'bound':>10}  expectations"]
    for r in rows:
        c = f"{r['cycles']:,}" if isinstance(r.get("cycles"), int) else "-"
        b = f"{r['lower_bound']:,}" if isinstance(r.get("lower_bound"), int) else "-"
        lines.append(f"{r['problem'][:34]:<34} {r['status'][:11]:<11} {c:>10} {b:>10}  "
                     + ("met" if r["ok"] else "NOT met: " + r["why"]))
    lines.append(f"{sum(r['ok'] for r in rows)}/{len(rows)} met their expectations")
    lines += ["", f"{'seconds':<34} {'plan':>7} {'lower':>6} {'exec':>6} {'verify':>6} "
              f"{'total':>7}"]
    for r in rows:
        tm = r.get("times") or {}
        stages = " ".join(f"{tm[k]:>{w}.2f}" if isinstance(tm.get(k), (int, float))
                          else f"{'-':>{w}}" for k, w in (("plan", 7), ("lower", 6),
                                                           ("execute", 6), ("verify", 6)))
        lines.append(f"{r['problem'][:34]:<34} {stages} {r.get('time') or 0.0:>7.2f}")
    return "\n".join(lines)


def _cmd_lower(args: argparse.Namespace, stdout: TextIO) -> int:
    lowered = api.lower(load_problem(args.problem))
    print(json.dumps(lowered.to_json()) if args.json else lowered.text(), file=stdout)
    return EXIT_OK


def _parse_index(text: str, axes: dict[str, int]) -> dict[str, int]:
    index: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, eq, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not re.fullmatch(r"-?[0-9]+", value):
            raise fail("bad-request", detail=f"--index: cannot read {part.strip()[:40]!r} as "
                       "AXIS=COORDINATE", fix="e.g. --index N=1,C=17,H=3,W=5")
        try:
            v = limits.to_int(value)
        except limits.NumberTooLong as e:
            raise fail("bad-request", detail=f"--index: {name[:40]}: {e.detail}",
                       fix=e.fix) from None
        if name not in axes:
            raise fail("bad-request", detail=f"--index: {name!r} is not an axis of the problem "
                       f"({', '.join(axes)})", fix="name the problem's axes")
        if not 0 <= v < axes[name]:
            raise fail("bad-request", detail=f"--index: {name} = {v} is outside 0..{axes[name] - 1}",
                       fix="give a coordinate inside the axis")
        if name in index:
            raise fail("bad-request", detail=f"--index: {name} given twice", fix="name it once")
        index[name] = v
    return index


def _cmd_trace(args: argparse.Namespace, stdout: TextIO) -> int:
    problem = load_problem(args.problem)
    kind = kind_of(problem)
    kind.trace_check(problem)
    index = _parse_index(args.index, problem.axes)
    full = {a: index.get(a, 0) for a in problem.axes}
    tensors = kind.traced_tensors(problem)  # (a free layout as planned: lower's, verify's)
    rows = {name: tiers.trace(t, full) for name, t in tensors.items()}
    if kind.engine_stream and rows.get("stream", {}).get("held"):
        rows["stream"]["engine"] = True  # its Slice position is a DMN pair (an engine)
    warnings = []
    for name, t in tensors.items():
        warnings += kind.trace_warnings(problem, name, t)
    planned = [n for n, t in tensors.items() if t is not problem.tensors.get(n)]
    if args.json:
        out = {"problem": problem.name, "index": full, "tensors": rows, "planned": planned,
               "warnings": [v.to_json() for v in warnings]}
        print(json.dumps(out), file=stdout)
        return EXIT_OK
    lines = [f"problem {problem.name}: index "
             + ", ".join(f"{a}={v}" for a, v in full.items())]
    width = max((len(n) for n in tensors), default=0)
    if not tensors:
        lines.append("(no placed tensors: a lane fold works on the Contraction Engine's "
                     "accumulators)")
    for name, t in tensors.items():
        lines.append(f"{name.ljust(width)}  {t.describe()}")
        lines.append(f"{''.ljust(width)}  -> {_trace_text(rows[name])}")
    if planned:
        lines.append(f"planned: {', '.join(planned)} (the free choices as solve, lower and "
                     "verify take them)")
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
        _logging(args, stderr)
        if args.command == "completion":
            from .completion import bash_script
            print(bash_script(_build_parser()), file=stdout, end="")
            return EXIT_OK
        if args.command == "schema":
            from .schema import problem_schema
            print(json.dumps(problem_schema(), indent=2), file=stdout)
            return EXIT_OK
        if args.command == "trace":
            return _cmd_trace(args, stdout)
        if args.command == "lower":
            return _cmd_lower(args, stdout)
        if args.command == "verify":
            return _cmd_verify(args, stdout, stderr)
        if args.command == "run":
            return _cmd_run(args, stdout)
        if args.command == "solve":
            return _cmd_solve(args, stdout, stderr)
        if args.command == "explain":
            return _cmd_explain(args, stdout)
        if args.command == "batch":
            return _cmd_batch(args, stdout, stderr)
        if args.command == "import":
            from .rust.command import run_import
            return run_import(args, stdout)
        return _cmd_sequence(args, stdout)
    except TcplanError as err:
        if want_json:
            print(json.dumps(_error_obj(err)), file=stdout)
        else:
            print(_format_error(err), file=stderr)
        return _exit_for(err)


def entry_point() -> None:  # console script
    from .allocator import tune
    tune()  # (large arrays reused, not mapped afresh: planner/allocator.py)
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + 13  # killed by SIGPIPE, by shell convention
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry_point()
