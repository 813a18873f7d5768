"""Fuzzing as a hostile user would: mutated problem files, mapping strings, JSON lines and
``.npy`` files, each run through the real command line in a bounded child process
(tests/fuzzing.py), each outcome held to the contract of docs/threats.md: no traceback, an
exit of 0, 1 or 2 matching what was printed, time and memory bounds, and an output folder
unchanged by a failed ``tcplan run``.

The example counts are small so that CI stays fast; ``TCPLAN_FUZZ_SCALE=N`` multiplies them
(``python benchmarks/fuzz_long.py`` runs a long campaign with fresh random seeds).
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import shutil
import struct
import tempfile

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from fuzzing import SMALL_LIMITS, judge, run_cli, snapshot

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCALE = float(os.environ.get("TCPLAN_FUZZ_SCALE", "1"))
RANDOM = os.environ.get("TCPLAN_FUZZ_RANDOM") == "1"


def fuzz_settings(n: int):
    return settings(max_examples=max(1, int(n * SCALE)), deadline=None, derandomize=not RANDOM,
                    database=None, suppress_health_check=list(HealthCheck))


#: every problem of the library, the broken files included
CORPUS = sorted(str(p) for p in list((ROOT / "problems").rglob("*.yaml"))
                + list((ROOT / "tests/broken").glob("*.yaml")))
TEXTS = {p: pathlib.Path(p).read_text(errors="replace") for p in CORPUS}

HUGE_INTS = [0, -1, 1, 3, 7, 255, 65_537, 2 ** 31, 2 ** 32 + 1, 2 ** 40, 2 ** 50, 2 ** 61 - 1,
             2 ** 62, 2 ** 63, 2 ** 64, 10 ** 30]
HOSTILE = HUGE_INTS + [1.5, float("nan"), float("inf"), True, False, None, "", "free", "m![",
                       "m![A # 1099511627776]", "m![A / 0]", "m![Z]", "m![A, A]", [], {},
                       [1, 2], {"free": True}, {"free": True, "prefix": "m![A]"}, "\x00",
                       "\u00e9\u4e2d", "a" * 2000, "m![" + "A, " * 300 + "A]",
                       "hbm", "dm", "stream", "i8", "bf16"]
MAPPING_TOKENS = ["A", "B", "C", "D", "Z", "1", "0", "2", "8", "3", "1099511627776",
                  "4611686018427387904", "99999999999999999999999", "/", "%", "=", "#", ",",
                  " ", "(", ")", "[", "]", "m!", "m![", "#{*}", "#{0}", "#{!}", "free", "-1"]


# ---------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------
def mapping_text():
    """A mapping string: a well-formed one over A..D with any sizes and paddings, or token
    soup from the grammar's alphabet."""
    term = st.recursive(
        st.sampled_from(["A", "B", "C", "D", "1", "2"]),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from([" / ", " % ", " = ", " # "]),
                      st.sampled_from(["1", "2", "3", "4", "8", "16", "1099511627776",
                                       "4611686018427387904"])).map("".join),
            st.tuples(inner, st.sampled_from([" #{0} ", " #{!} ", " #{*} "]),
                      st.sampled_from(["4", "64"])).map(
                lambda t: f"{t[0]} #{{{t[1].strip()[2]}}} {t[2]}"),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(" + ", ".join(xs) + ")")),
        max_leaves=6)
    good = st.lists(term, min_size=1, max_size=4).map(lambda ts: "m![" + ", ".join(ts) + "]")
    soup = st.lists(st.sampled_from(MAPPING_TOKENS), max_size=12).map("".join)
    return st.one_of(good, soup)


def _paths(v, at=()):
    yield at
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, at + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _paths(x, at + (i,))


def _set(doc, path, value):
    if not path:
        return value
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


@st.composite
def structural_mutation(draw, text: str) -> str:
    """Parse, change one node (a hostile value, a mutated mapping, a scaled axis, a deleted
    or an unknown key), dump."""
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        return text
    for _ in range(draw(st.integers(1, 3))):
        if not isinstance(doc, dict):
            break  # the whole document was replaced
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        cur = _get(doc, path)
        op = draw(st.sampled_from(["hostile", "mapping", "axis", "delete", "unknown"]))
        if op == "axis" and isinstance(doc.get("axes"), dict) and doc["axes"]:
            a = draw(st.sampled_from(sorted(map(str, doc["axes"]))))
            doc["axes"][a] = draw(st.sampled_from(HUGE_INTS + [2, 4, 6, 16, 24, 1000]))
        elif op == "mapping" and isinstance(cur, str):
            doc = _set(doc, path, draw(mapping_text()))
        elif op == "delete" and path and isinstance(_get(doc, path[:-1]), (dict, list)):
            parent = _get(doc, path[:-1])
            parent.pop(path[-1])
        elif op == "unknown" and isinstance(cur, dict):
            cur[draw(st.sampled_from(["teir", "adress", "packets", "free", "x", "element"]))] = \
                copy.deepcopy(draw(st.sampled_from(HOSTILE)))
        else:
            doc = _set(doc, path, copy.deepcopy(draw(st.sampled_from(HOSTILE))))
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


@st.composite
def textual_mutation(draw, text: str) -> str:
    """Edit the bytes: insert hostile tokens, delete or duplicate spans, truncate."""
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "duplicate", "truncate"]))
        if op == "insert":
            tok = draw(st.sampled_from(
                ["&a ", "*a", "<<: *a", "{", "}", "[", "]", ":", "- ", "\n", "\t", "'", '"',
                 "!!python/object:os.system ", "!!binary ", "!!set ", "? ", "%YAML 1.1\n",
                 "---\n", "...\n", "#", "1099511627776", "-", "0x", "\x00", "\ufeff",
                 " # free", "~"]))
            text = text[:i] + tok + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 40)):]
        elif op == "duplicate":
            j = min(len(text), i + draw(st.integers(1, 80)))
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i]
    return text


@st.composite
def problem_text(draw) -> str:
    text = TEXTS[draw(st.sampled_from(CORPUS))]
    if draw(st.booleans()):
        try:
            return draw(structural_mutation(text))
        except yaml.YAMLError:
            pass
    return draw(textual_mutation(text))


def _argv(draw, path: str, out: str) -> list:
    cmd = draw(st.sampled_from(["verify", "solve", "explain", "lower", "trace", "run"]))
    argv = [cmd, path]
    if cmd in ("solve", "explain"):
        argv += ["--time-limit", "1"]
    if cmd == "trace":
        argv += ["--index", draw(st.sampled_from(["A=0", "A=1,B=2", "Z=0", "A=99999999999",
                                                  "A=-1", "garbage", ""]))]
    if cmd == "run":
        argv += ["--out", out]
    if cmd != "run" and draw(st.booleans()):
        argv.append("--json")
    return argv


class Scratch:
    """A fresh folder per example, removed afterwards."""

    def __enter__(self) -> str:
        self.path = tempfile.mkdtemp(prefix="tcplan-fuzz-")
        return self.path

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _populated_out(scratch: str) -> str:
    out = os.path.join(scratch, "out")
    os.mkdir(out)
    for name in ("source", "destination", "result", "x"):
        with open(os.path.join(out, name + ".npy"), "wb") as fh:
            fh.write(b"previous " + name.encode())
    return out


# ---------------------------------------------------------------------------------------
# The fuzz tests
# ---------------------------------------------------------------------------------------
@fuzz_settings(60)
@given(st.data())
def test_fuzz_problem_files(data):
    """Mutated problem files through every command: the contract holds, and a failed run
    leaves its output folder as it was."""
    text = data.draw(problem_text())
    with Scratch() as d:
        path = os.path.join(d, "p.yaml")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(text)
        out = _populated_out(d)
        before = snapshot(out)
        o = run_cli(_argv(data.draw, path, out))
        judge(o)
        if o.argv[0] == "run" and o.code != 0:
            assert snapshot(out) == before, o.show()


@settings(max_examples=max(1, int(400 * SCALE)), deadline=2000, derandomize=not RANDOM,
          database=None)
@given(mapping_text(), st.dictionaries(st.sampled_from(["A", "B", "C", "D"]),
                                       st.sampled_from(HUGE_INTS[2:] + [2, 4, 8, 16]),
                                       min_size=1))
def test_fuzz_mapping_strings(text, axes):
    """A mapping string parses to a mapping whose canonical text parses back to it, or is a
    located input error; evaluating it works or names the size limit, within 2 s."""
    from tcplan.model import limits
    from tcplan.model.mapping import parse
    from tcplan.model.rules import TcplanError
    keep = limits.EVAL_MAX_POSITIONS
    limits.EVAL_MAX_POSITIONS = SMALL_LIMITS["EVAL_MAX_POSITIONS"]  # as in the fuzz children
    try:
        _parse_and_evaluate(text, axes, parse, limits, TcplanError)
    finally:
        limits.EVAL_MAX_POSITIONS = keep


def _parse_and_evaluate(text, axes, parse, limits, TcplanError):
    try:
        m = parse(text, axes, "fuzz")
    except TcplanError as e:
        assert e.kind == "input", e
        return
    assert parse(m.text(), axes, "fuzz") == m
    try:
        coords, status = m.evaluate()
    except TcplanError as e:
        assert e.violations[0].rule == "size-limit" and m.size > limits.EVAL_MAX_POSITIONS
        return
    assert status.shape == (m.size,)
    try:
        m.factors
    except TcplanError as e:
        assert e.kind == "input"


@fuzz_settings(12)
@given(st.data())
def test_fuzz_mapping_strings_in_problems(data):
    """A mapping of a problem file replaced by a fuzzed one, through verify and solve."""
    path = data.draw(st.sampled_from([p for p in CORPUS if "/problems/" in p]))
    doc = yaml.safe_load(TEXTS[path])
    strings = [p for p in _paths(doc) if p and isinstance(_get(doc, p), str)
               and "m![" in _get(doc, p)]
    if not strings:
        return
    _set(doc, data.draw(st.sampled_from(strings)), data.draw(mapping_text()))
    with Scratch() as d:
        p = os.path.join(d, "p.yaml")
        with open(p, "w") as fh:
            yaml.safe_dump(doc, fh, sort_keys=False)
        cmd = data.draw(st.sampled_from(["verify", "solve", "explain"]))
        judge(run_cli([cmd, p] + (["--time-limit", "1"] if cmd != "verify" else [])))


def _request_line(draw) -> bytes:
    kind = draw(st.sampled_from(["good", "json", "garbage", "long", "deep"]))
    if kind == "good":
        req = json.loads(draw(st.sampled_from(SEQ_LINES)))
        if isinstance(req, dict) and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(req) + ["axes", "extra"]))
            req[key] = draw(st.one_of(st.sampled_from(HOSTILE[:-4]), mapping_text()))
        return json.dumps(req).encode()
    if kind == "json":
        return json.dumps(draw(st.recursive(
            st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
            lambda c: st.one_of(st.lists(c, max_size=3),
                                st.dictionaries(st.text(max_size=5), c, max_size=3)),
            max_leaves=8))).encode()
    if kind == "garbage":
        return draw(st.binary(max_size=60)).replace(b"\n", b"")
    if kind == "long":
        return b'{"axes": {"A": 8}, "buf": "m![' + b"A, " * 500_000 + b'A]"}'
    return b"[" * 100_000 + b"]" * 100_000


SEQ_LINES = [line for line in (ROOT / "problems/seed/sequencer.jsonl").read_text().splitlines()
             if line.strip()]


@fuzz_settings(10)
@given(st.data())
def test_fuzz_batch_lines(data):
    """``tcplan sequence --batch``: one JSON answer per line, whatever the lines hold."""
    lines = [_request_line(data.draw) for _ in range(data.draw(st.integers(1, 25)))]
    with Scratch() as d:
        path = os.path.join(d, "b.jsonl")
        with open(path, "wb") as fh:
            fh.write(b"\n".join(lines) + b"\n")
        o = run_cli(["sequence", "--batch", path])
        judge(o)
        assert o.code == 0, o.show()
        answers = o.stdout.splitlines()
        assert len(answers) == len(lines), o.show()
        for a in answers:
            v = json.loads(a)
            assert isinstance(v, dict) and ("error" in v or "entries" in v), a


@st.composite
def npy_file(draw) -> bytes:
    """A .npy file: a real one with its bytes damaged, or a header made up field by field."""
    if draw(st.booleans()):
        import io
        buf = io.BytesIO()
        dt = draw(st.sampled_from(["i1", "i2", "f4", "u1", "V2", "S3", "c8", "?"]))
        shape = draw(st.sampled_from([(8, 8, 256), (3, 3), (), (0,), (8, 8, 255)]))
        np.save(buf, np.zeros(shape, dt))
        raw = bytearray(buf.getvalue())
        for _ in range(draw(st.integers(0, 3))):
            i = draw(st.integers(0, len(raw)))
            op = draw(st.sampled_from(["flip", "cut", "grow"]))
            if op == "flip" and i < len(raw):
                raw[i] ^= draw(st.integers(1, 255))
            elif op == "cut":
                del raw[i:]
            else:
                raw[i:i] = b"\0" * draw(st.integers(1, 64))
        return bytes(raw)
    descr = draw(st.sampled_from(["'|i1'", "'<i2'", "'|O'", "'<V2'", "'x'", "[('a', '<i4')]",
                                  "'<f4'", "'|S0'", "0"]))
    shape = draw(st.sampled_from(["(8, 8, 256)", "(1099511627776, 1099511627776)", "(-1,)",
                                  "()", "(8, 8, 256, 1)", "('a',)", "(2**62,)",
                                  "(4611686018427387904, 4)", "(8, 8, 256.0)"]))
    fortran = draw(st.sampled_from(["False", "True", "'x'"]))
    header = f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}".encode()
    version = draw(st.sampled_from([b"\x01\x00", b"\x02\x00", b"\x03\x00", b"\x09\x09"]))
    pad = 64 - ((10 + len(header) + 1) % 64)
    h = header + b" " * pad + b"\n"
    size = struct.pack("<H", len(h)) if version == b"\x01\x00" else struct.pack("<I", len(h))
    data = b"\0" * draw(st.sampled_from([0, 16, 16384, 16385]))
    return b"\x93NUMPY" + version + size + h + data


@fuzz_settings(25)
@given(npy_file(), st.sampled_from(["problems/seed/dma_example_1.yaml",
                                    "problems/seed/lane_sequential.yaml",
                                    "problems/seed/gather_scaled.yaml"]))
def test_fuzz_npy_inputs(raw, problem):
    """``tcplan run --input NAME=FILE.npy`` with a damaged or made-up file: the contract
    holds, and a failure leaves the output folder as it was."""
    names = {"dma_example_1": "source", "lane_sequential": "x", "gather_scaled": "table"}
    with Scratch() as d:
        f = os.path.join(d, "in.npy")
        with open(f, "wb") as fh:
            fh.write(raw)
        out = _populated_out(d)
        before = snapshot(out)
        o = run_cli(["run", str(ROOT / problem), "--input",
                     f"{names[pathlib.Path(problem).stem]}={f}", "--out", out])
        judge(o)
        if o.code != 0:
            assert snapshot(out) == before, o.show()
