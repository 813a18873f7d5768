"""``tcplan import``: the command's flags and its output (docs/cli.md 'import')."""

from __future__ import annotations

import argparse
import json
import pathlib
from typing import Any, TextIO

from tcplan.model.rules import fail

from .emit import emit_rust, planned
from .importer import Imported, import_file


def add_verb(sub) -> None:
    im = sub.add_parser(
        "import", help="read a furiosa-opt kernel (Rust) into tcplan graph problems",
        description="Read a furiosa-opt kernel file with a Rust parser (tree-sitter) and write "
                    "each function that moves data as a tcplan graph: its tensor types, "
                    "to_dm / to_hbm_view moves, Fetch ... Commit pipelines and engine calls. "
                    "What a graph cannot express is listed in the file's header with its "
                    "source line.")
    im.add_argument("kernel", metavar="KERNEL.rs")
    im.add_argument("--function", metavar="NAME", help="import only this function")
    im.add_argument("--generic", metavar="NAME=MAPPING", action="append", default=[],
                    help="bind a generic parameter, e.g. Slice='m![1 # 256]' (repeatable)")
    im.add_argument("-o", "--out", metavar="DIR",
                    help="write each graph to DIR/NAME.yaml (default: print them)")
    im.add_argument("--json", action="store_true",
                    help="print one JSON object: each function's graph or why not")


def _generics(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        name, eq, text = p.partition("=")
        if not eq or not name.strip().isidentifier() or not text.strip():
            raise fail("bad-request", detail=f"--generic {p[:200]!r}: expected NAME=MAPPING",
                       fix="write --generic Slice='m![1 # 256]'")
        out[name.strip()] = text.strip()
    return out


def run_import(args: argparse.Namespace, stdout: TextIO) -> int:
    path = pathlib.Path(args.kernel)
    if not path.is_file():
        raise fail("bad-request", detail=f"{args.kernel}: no such file",
                   fix="give a furiosa-opt kernel file (.rs)")
    done = import_file(path, args.function, _generics(args.generic))
    if args.out is not None:
        _write(pathlib.Path(args.out), done)
    if args.json:
        print(json.dumps({"kernel": str(path), "graphs": [_json(d, args.out) for d in done]}),
              file=stdout)
    else:
        print(_text(done, args.out), file=stdout, end="")
    return 0 if any(d.text is not None for d in done) else 1


def _write(out: pathlib.Path, done: list[Imported]) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        for d in done:
            if d.text is not None:
                (out / f"{d.name}.yaml").write_text(d.text)
    except OSError as e:
        raise fail("bad-request", detail=f"--out {out}: cannot write there ({e.strerror})",
                   fix="name a folder you can write") from e


def _json(d: Imported, out: str | None) -> dict:
    row: dict = {"function": d.function, "name": d.name}
    if d.text is None:
        row["skipped"] = d.reason
    elif out is not None:
        row["file"] = str(pathlib.Path(out) / f"{d.name}.yaml")
    else:
        row["yaml"] = d.text
    return row


def _text(done: list[Imported], out: str | None) -> str:
    """The graphs (YAML documents, ``---`` between), or with ``--out`` one line each; a
    function not imported is a comment line saying why."""
    lines = []
    for d in done:
        if d.text is None:
            lines.append(f"# {d.function}: not imported: {d.reason}\n")
        elif out is not None:
            lines.append(f"{d.function}: wrote {pathlib.Path(out) / (d.name + '.yaml')}\n")
        else:
            lines.append(d.text if not lines else "---\n" + d.text)
    return "".join(lines)


def emit_plan(problem_path: str, solved: Any) -> str:
    """``solve --emit rust``: the solved graph's plan as furiosa-opt code."""
    import yaml
    doc = yaml.safe_load(pathlib.Path(problem_path).read_text())
    p = planned(doc, solved.plan.to_json())
    cycles = f", {solved.cycles:,} cycles" if solved.cycles is not None else ""
    head = [f"Emitted by `tcplan solve --emit rust` from {pathlib.Path(problem_path).name}: "
            f"{solved.status}{cycles}.",
            "The DMAs' streams are the DMA engine's to plan (ctx.tdma); tcplan's plan of "
            "each is in `tcplan solve`'s report."]
    return emit_rust(p, head)
