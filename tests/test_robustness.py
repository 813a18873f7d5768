"""Hostile inputs end in a clean, named error, fast and in bounded memory, and a failed
``tcplan run`` leaves its output folder exactly as it was (docs/threats.md).

Each class of issue 13 is here with its exact input, run with tcplan's real limits in a child
process (tests/fuzzing.py) bounded at 2 s of run time and 1 GiB of memory growth; the end-to-end
behaviour of the console script (exit code, no traceback) is checked in a real subprocess.
"""

from __future__ import annotations

import os
import pathlib
import resource
import signal
import struct
import subprocess
import sys

import numpy as np
import pytest

from tcplan.model import limits

from fuzzing import judge, printed_rules, run_cli, snapshot

ROOT = pathlib.Path(__file__).resolve().parents[1]
EX1 = str(ROOT / "problems/seed/dma_example_1.yaml")
BOUND_S = 2.0
HUGE = 2 ** 40


def _write(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _clean(argv, code: int, rule: str | None = None):
    o = run_cli(argv, small_limits=False, time_bound=BOUND_S)
    judge(o, time_bound=BOUND_S)
    assert o.code == code, o.show()
    if rule is not None:
        assert rule in printed_rules(o), o.show()
    return o


# --- 1. YAML alias bomb ------------------------------------------------------------------
def alias_bomb(levels: int = 9, fan: int = 10) -> str:
    lines = ["a0: &a0 [" + ", ".join(["x"] * fan) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fan) + "]")
    return ("format: 1\nkind: dma\naxes: {A: 8}\n" + "\n".join(lines)
            + "\nsource: {tier: hbm, element: 'm![A]'}\n"
              "destination: {tier: hbm, address: 4096, element: 'm![A]'}\n")


@pytest.mark.parametrize("cmd", ["verify", "solve", "explain", "lower"])
def test_alias_bomb_is_refused_at_its_first_alias(tmp_path, cmd):
    o = _clean([cmd, _write(tmp_path, "bomb.yaml", alias_bomb())], 2, "bad-problem")
    assert "bomb.yaml:5:10: YAML: alias *a0 refused" in o.stderr, o.show()


def test_deep_and_large_yaml_are_refused_before_any_walk(tmp_path):
    deep = "format: 1\nkind: dma\naxes: {A: 8}\nx: " + "[" * 5000 + "]" * 5000 + "\n"
    o = _clean(["verify", _write(tmp_path, "deep.yaml", deep)], 2, "bad-problem")
    assert "nested deeper than 32 levels" in o.stderr
    wide = "format: 1\nkind: dma\naxes: {A: 8}\nx: [" + "1," * (limits.YAML_MAX_NODES + 10) \
        + "]\n"
    o = _clean(["verify", _write(tmp_path, "wide.yaml", wide)], 2, "bad-problem")
    assert f"more than {limits.YAML_MAX_NODES:,} values" in o.stderr
    big = "# " + "x" * limits.PROBLEM_FILE_MAX_BYTES + "\n"
    o = _clean(["verify", _write(tmp_path, "big.yaml", big)], 2, "bad-problem")
    assert f"larger than {limits.PROBLEM_FILE_MAX_BYTES:,} bytes" in o.stderr
    digits = "format: 1\nkind: dma\naxes: {A: " + "9" * 5000 + "}\n"
    _clean(["verify", _write(tmp_path, "digits.yaml", digits)], 2, "bad-problem")


def test_a_device_as_problem_file_reads_a_bounded_prefix():
    o = _clean(["verify", "/dev/zero"], 2, "bad-problem")
    assert "larger than" in o.stderr


# --- 2. huge axis in a free stream ---------------------------------------------------------
FREE_HUGE = """format: 1
kind: dma
dtype: i8
chips: {chips}
axes: {{A: {size}}}
source: {{tier: hbm, chip: '{chip}', element: 'm![A{el}]'}}
destination: {{tier: hbm, chip: '{chip}', address: {dst}, element: 'm![A{el}]'}}
stream: {{time: free, packet: free}}
"""


@pytest.mark.parametrize("cmd", ["solve", "explain", "verify"])
def test_free_stream_over_a_huge_axis_gives_capacity_first(tmp_path, cmd):
    text = FREE_HUGE.format(chips=1, size=HUGE, chip="m![1]", el="", dst=HUGE)
    _clean([cmd, _write(tmp_path, "p.yaml", text)], 1, "capacity")


@pytest.mark.parametrize("size", [2 ** 40, 2 ** 61 - 1, 2 ** 62, 3 ** 39])
def test_free_stream_over_huge_axes_spread_over_chips_ends_in_a_named_limit(tmp_path, size):
    """Within capacity (1,024 chips): the search runs over the factors of the axis size (a
    prime, a power of two, a power of three), and the full cycle model or the simulator
    names its limit."""
    chips = 1024
    per_chip = -(-size // chips)
    text = FREE_HUGE.format(chips=chips, size=size, chip=f"m![A / {per_chip}]" if
                            size % chips == 0 else f"m![A / {per_chip} # {chips}]",
                            el=f" % {per_chip}", dst=1 << 35)
    path = _write(tmp_path, "p.yaml", text)
    for cmd in ("solve", "explain"):
        o = run_cli([cmd, path, "--time-limit", "1"], small_limits=False, time_bound=BOUND_S)
        judge(o, time_bound=BOUND_S)
        assert o.code in (1, 2), o.show()


# --- 3. huge unused axis -----------------------------------------------------------------
UNUSED = 2 ** 50


def _with_unused_axis(path: str, tmp_path) -> str:
    text = pathlib.Path(ROOT / path).read_text()
    i = text.index("axes: {") + len("axes: {")
    return _write(tmp_path, "p.yaml", text[:i] + f"Z: {UNUSED}, " + text[i:])


@pytest.mark.parametrize("path", ["problems/seed/dma_example_1.yaml",
                                  "problems/expressions/expr_bias_relu_i32.yaml",
                                  "problems/seed/lane_sequential.yaml",
                                  "problems/seed/ve_add_constant.yaml",
                                  "problems/seed/gather_scaled.yaml",
                                  "problems/seed/chip_shuffle.yaml"])
def test_huge_unused_axis_is_named_before_allocating(tmp_path, path):
    p = _with_unused_axis(path, tmp_path)
    o = _clean(["verify", p], 1, "size-limit")
    text = o.stdout + o.stderr
    assert f"axis Z has size {UNUSED:,}" in text, o.show()
    assert "shrink axis Z" in text
    o = run_cli(["solve", p], small_limits=False, time_bound=BOUND_S)
    judge(o, time_bound=BOUND_S)


# --- 4. huge stream axis or padding ------------------------------------------------------
DMA_STREAM = """format: 1
kind: dma
dtype: i8
axes: {{A: 8, B: 8, C: 256, S: {size}}}
source: {{tier: hbm, address: 0, element: 'm![A, B, C]'}}
destination: {{tier: hbm, address: 16384, element: 'm![B, A, C]'}}
stream: {{time: '{time}', packet: 'm![C]'}}
"""


@pytest.mark.parametrize("time", [f"m![A, B # {HUGE}]", f"m![A # {HUGE}, B]",
                                  "m![A, B, S]", "m![S, A, B]"])
@pytest.mark.parametrize("cmd", ["verify", "solve", "explain"])
def test_huge_dma_stream_ends_cleanly(tmp_path, time, cmd):
    p = _write(tmp_path, "p.yaml", DMA_STREAM.format(size=HUGE, time=time))
    o = run_cli([cmd, p], small_limits=False, time_bound=BOUND_S)
    judge(o, time_bound=BOUND_S)


@pytest.mark.parametrize("dim,text", [("time", f"m![N # {HUGE}]"), ("packet", f"m![A % 8 # {HUGE}]"),
                                      ("slice", f"m![A / 8 # {HUGE}]")])
@pytest.mark.parametrize("cmd", ["verify", "solve", "explain"])
def test_huge_vector_stream_ends_cleanly(tmp_path, dim, text, cmd):
    src = (ROOT / "problems/expressions/expr_bias_relu_i32.yaml").read_text()
    old = {"time": "time: 'm![N]'", "packet": "packet: 'm![A % 8]'",
           "slice": "slice: 'm![A / 8]'"}[dim]
    p = _write(tmp_path, "p.yaml", src.replace(old, f"{dim}: '{text}'"))
    o = run_cli([cmd, p], small_limits=False, time_bound=BOUND_S)
    judge(o, time_bound=BOUND_S)
    assert o.code in (1, 2), o.show()


def test_huge_destination_padding_is_named(tmp_path):
    text = DMA_STREAM.format(size=8, time="m![A, B]").replace(
        "element: 'm![B, A, C]'", f"element: 'm![B, A # {HUGE}, C]'")
    o = _clean(["verify", _write(tmp_path, "p.yaml", text)], 1)
    assert printed_rules(o)[0] in ("capacity", "size-limit"), o.show()


# --- 5. huge .npy header -------------------------------------------------------------------
def npy_bytes(header: bytes, data: bytes = b"", version: bytes = b"\x01\x00") -> bytes:
    pad = 64 - ((10 + len(header) + 1) % 64)
    h = header + b" " * pad + b"\n"
    return b"\x93NUMPY" + version + struct.pack("<H", len(h)) + h + data


@pytest.mark.parametrize("header", [
    b"{'descr': '|i1', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }",
    b"{'descr': '|i1', 'fortran_order': False, 'shape': (8, 8, 256), }",  # no data
    b"{'descr': '|O', 'fortran_order': False, 'shape': (8, 8, 256), }",
    b"{'descr': '|i1', 'fortran_order': False, 'shape': (-1, 8, 256), }",
    b"{'descr': '|i1', 'fortran_order': 'x', 'shape': (8, 8, 256), }",
    b"{'descr': '<i1', 'shape': (8, 8, 256)}",
    b"not a dict at all",
])
def test_bad_npy_headers_are_input_errors(tmp_path, header):
    f = tmp_path / "in.npy"
    f.write_bytes(npy_bytes(header, b"\0" * 100))
    out = tmp_path / "out"
    out.mkdir()
    (out / "source.npy").write_bytes(b"keep")
    before = snapshot(str(out))
    _clean(["run", EX1, "--input", f"source={f}", "--out", str(out)], 2, "bad-request")
    assert snapshot(str(out)) == before


def test_npy_loader_reads_a_good_file_and_refuses_trailing_bytes(tmp_path):
    from tcplan.planner.inputs import load_npy
    from tcplan.model.rules import TcplanError
    a = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    np.save(tmp_path / "a.npy", a)
    assert (load_npy(str(tmp_path / "a.npy"), "x") == a).all()
    np.save(tmp_path / "f.npy", np.asfortranarray(a))
    assert (load_npy(str(tmp_path / "f.npy"), "x") == a).all()
    with open(tmp_path / "a.npy", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(TcplanError, match="the file has"):
        load_npy(str(tmp_path / "a.npy"), "x")


# --- 6. run never damages files ----------------------------------------------------------
def _outputs(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "source.npy").write_bytes(b"old source")
    (out / "destination.npy").write_bytes(b"old destination")
    (out / "other.txt").write_text("unrelated")
    return out


def test_a_failing_run_leaves_existing_outputs(tmp_path):
    out = _outputs(tmp_path)
    before = snapshot(str(out))
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((3, 3), np.int8))
    _clean(["run", EX1, "--input", f"source={bad}", "--out", str(out)], 2, "bad-request")
    assert snapshot(str(out)) == before
    (out / "destination.npy").unlink()
    (out / "destination.npy").mkdir()  # the second output cannot be written
    before = snapshot(str(out))
    o = _clean(["run", EX1, "--out", str(out)], 2, "bad-request")
    assert snapshot(str(out)) == before
    assert "None" not in o.stderr


def _run_with_file_size_limit(argv, limit_bytes):
    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return subprocess.run([sys.executable, "-m", "tcplan", *argv], capture_output=True,
                          text=True, preexec_fn=cap, cwd=ROOT, timeout=120)


def test_running_out_of_space_leaves_no_truncated_file(tmp_path):
    """The kernel refuses the write past 10 KiB (RLIMIT_FSIZE, as a full disk would): the
    run fails with the OS's reason, and the folder holds what it held."""
    out = _outputs(tmp_path)
    before = snapshot(str(out))
    r = _run_with_file_size_limit(["run", EX1, "--out", str(out)], 10 * 1024)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert "File too large" in r.stderr and "nothing was changed" in r.stderr, r.stderr
    assert snapshot(str(out)) == before
    fresh = tmp_path / "new" / "deeper"
    r = _run_with_file_size_limit(["run", EX1, "--out", str(fresh)], 10 * 1024)
    assert r.returncode == 2 and not (tmp_path / "new").exists(), r.stderr


def test_a_successful_run_replaces_outputs_and_leaves_no_temporary_files(tmp_path):
    out = _outputs(tmp_path)
    _clean(["run", EX1, "--out", str(out)], 0)
    names = sorted(os.listdir(out))
    assert names == ["destination.npy", "other.txt", "source.npy"], names
    src = np.load(out / "source.npy")
    assert (np.load(out / "destination.npy") == src).all() and src.shape == (8, 8, 256)
    mode = (out / "source.npy").stat().st_mode & 0o777
    mask = os.umask(0)
    os.umask(mask)
    assert mode == 0o666 & ~mask


def test_console_script_exit_codes_without_tracebacks(tmp_path):
    cases = [(["verify", _write(tmp_path, "bomb.yaml", alias_bomb())], 2),
             (["verify", _with_unused_axis("problems/seed/dma_example_1.yaml", tmp_path)], 1)]
    for argv, code in cases:
        r = subprocess.run([sys.executable, "-m", "tcplan", *argv], capture_output=True,
                           text=True, cwd=ROOT, timeout=120)
        assert r.returncode == code, r.stderr
        assert "Traceback" not in r.stderr, r.stderr
        assert ("error [bad-problem]" if code == 2 else "[size-limit]") in r.stdout + r.stderr


# --- found by a hostile black-box review ---------------------------------------------------
def test_a_seed_beyond_32_bits_is_bad_input():
    o = _clean(["solve", str(ROOT / "problems/expressions/expr_abs_f32.yaml"), "--seed",
                str(2 ** 31)], 2, "bad-request")
    assert "0 to 2,147,483,647" in o.stderr
    _clean(["solve", str(ROOT / "problems/expressions/expr_abs_f32.yaml"), "--seed",
            str(2 ** 31 - 1)], 0)


@pytest.mark.parametrize("value", ["!!int ''", "!!timestamp abc", "!!bool maybe",
                                   "!!float ''", "true", "1.0"])
def test_tagged_or_mistyped_yaml_values_are_located(tmp_path, value):
    text = (ROOT / "problems/seed/dma_example_1.yaml").read_text().replace(
        "format: 1", f"format: {value}")
    o = _clean(["verify", _write(tmp_path, "t.yaml", text)], 2, "bad-problem")
    assert "t.yaml:2:" in o.stderr, o.show()


def test_a_list_as_a_key_is_refused(tmp_path):
    text = (ROOT / "problems/seed/dma_example_1.yaml").read_text() + "x: !!omap [{[1]: 2}]\n"
    _clean(["verify", _write(tmp_path, "t.yaml", text)], 2, "bad-problem")


@pytest.mark.parametrize("index", ["A=--1", "A=\u00b2", "A=1e3", "A=0x1"])
def test_trace_index_must_be_ascii_digits(index):
    _clean(["trace", EX1, "--index", index], 2, "bad-request")


def test_names_too_long_are_input_errors(tmp_path):
    long = str(tmp_path / ("a" * 300))
    o = _clean(["run", EX1, "--out", long], 2, "bad-request")
    assert "File name too long" in o.stderr and "nothing was changed" in o.stderr
    _clean(["run", EX1, "--out", long + "/x"], 2, "bad-request")
    _clean(["batch", long], 2, "bad-request")
    assert os.listdir(tmp_path) == []


def test_fifos_never_hang(tmp_path):
    fifo = tmp_path / "p.yaml"
    os.mkfifo(fifo)
    _clean(["verify", str(fifo)], 2, "bad-problem")
    _clean(["run", EX1, "--input", f"source={fifo}", "--out", str(tmp_path / "o")], 2,
           "bad-request")
    assert not (tmp_path / "o").exists()
    shutil_copy = (ROOT / "problems/seed/dma_example_1.yaml").read_text()
    (tmp_path / "ok.yaml").write_text(shutil_copy)
    o = run_cli(["batch", str(tmp_path), "--jobs", "1"], small_limits=False, time_bound=20)
    judge(o, time_bound=20)
    assert "bad input" in o.stdout and "1/2 met" in o.stdout, o.show()


def test_an_endless_batch_line_ends_the_batch():
    o = _clean(["sequence", "--batch", "/dev/zero"], 2)
    lines = o.stdout.splitlines()
    assert "longer than 1,048,576 bytes" in lines[0] and "does not end within" in lines[1]


def test_a_problem_that_crashes_is_a_failed_row(monkeypatch, tmp_path):
    from tcplan.planner import batch

    def boom(task, check="full", seed=0):
        raise ZeroDivisionError("a planted bug")
    monkeypatch.setattr(batch, "_row", boom)
    row = batch.solve_row(batch.Task(EX1, "kind: dma\n"))
    assert row["status"] == "crashed" and not row["ok"]
    assert "ZeroDivisionError: a planted bug" in row["why"]
    bad = (ROOT / "problems/seed/dma_example_1.yaml").read_text().replace(
        "cycles: 628", "cycles: abc")
    o = _clean(["verify", _write(tmp_path, "t.yaml", bad)], 2, "bad-problem")
    assert "expect.cycles: 'abc' is not a whole number" in o.stderr


@pytest.mark.parametrize("expression", ["abs(x) + 0x" + "f" * 300, "abs(x) + " + "9" * 5000,
                                        "*".join(["x"] * 100)])
def test_formula_constants_and_sizes_are_bounded(tmp_path, expression):
    text = (ROOT / "problems/expressions/expr_abs_f32.yaml").read_text().replace(
        "expression: 'abs(x)'", f"expression: '{expression}'")
    o = _clean(["solve", _write(tmp_path, "e.yaml", text)], 2, "bad-problem")
    if "*" in expression:
        assert "99 operations" in o.stderr and "at most 64" in o.stderr


def test_a_chain_search_cut_by_its_time_limit_says_so():
    """A time limit too short to decide is `plan-time-limit` (status unknown), not a
    made-up reason such as plan-pair or plan-stash-reach."""
    for name in ("expr_abs_f32", "expr_gelu_like"):
        o = _clean(["solve", str(ROOT / f"problems/expressions/{name}.yaml"), "--time-limit",
                    "1e-300", "--json"], 1, "plan-time-limit")
        assert '"status": "unknown"' in o.stdout


def test_a_huge_sparse_npy_is_refused_from_its_header(tmp_path):
    """A header promising 2**31 f8 values over a sparse 16 GiB file (no disk used): the
    problem's tensor T has 16,384 elements, so the input is refused before any read."""
    f = tmp_path / "big.npy"
    head = npy_bytes(b"{'descr': '<f8', 'fortran_order': False, 'shape': (2147483648,), }")
    with open(f, "wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + 8 * 2 ** 31)
    o = _clean(["run", EX1, "--input", f"source={f}", "--out", str(tmp_path / "o")], 2,
               "bad-request")
    assert "this input holds at most 16,384" in o.stderr, o.show()


def test_a_memory_the_machine_cannot_map_is_named(tmp_path):
    """The destination 7 GiB above the source: a 7 GiB simulated span, within the 8 GiB
    limit but past this child's address-space cap (3 GiB of headroom)."""
    text = (ROOT / "problems/seed/dma_example_1.yaml").read_text().replace(
        "address: 16384", f"address: {7 << 30}")
    o = _clean(["verify", _write(tmp_path, "far.yaml", text)], 1, "size-limit")
    assert "what it can map" in o.stdout + o.stderr, o.show()


def test_objective_bounds_read_as_whole_cycles():
    from tcplan.planner.layout import _cycles_of
    assert _cycles_of(1079.9999999999998, 2) == 540  # CP-SAT's float for 1,080
    assert _cycles_of(2 * 540 + 1, 2) == 540  # a tie-break below one cycle
    assert _cycles_of(540 * 10 ** 7 + 10 ** 7 - 1, 10 ** 7) == 540


# --- numbers too long to convert (issue 25, item 4) ----------------------------------------
#: Python refuses to convert more than 4,300 digits to or from text; a number is refused at
#: its place before that (model/limits.py NUMBER_MAX_CHARS)
DIGITS = "1" + "0" * 4999
REGROUP = ROOT / "problems/planning/dm_regroup.yaml"


@pytest.mark.parametrize("where,line,old,new", [
    # the fuzzer's find: the number in a mapping string and in an axis size
    ("both", 6, ("A: 64", "'m![A]'"), (f"A: 64, S: {DIGITS}", f"'m![S # {DIGITS}]'")),
    ("mapping", 7, ("A: 64", "'m![A]'"), ("A: 64, S: 64", f"'m![S # {DIGITS}]'")),
    ("axis size", 6, ("C: 128",), (f"C: {DIGITS}",)),
    ("numeric key", 8, ("address: 262144",), (f"address: 0x{'f' * 5000}",)),
    ("base 60", 8, ("address: 262144",), ("address: 1" + ":59" * 2000,)),
    # a product of terms past 4,300 digits was formatted into the message: the traceback
    ("product of terms", 7, ("'m![B, C]'",),
     ("'m![B, C, " + ", ".join(["4611686018427387904"] * 800) + "]'",)),
])
def test_a_number_too_long_to_convert_is_located(tmp_path, where, line, old, new):
    text = REGROUP.read_text()
    for a, b in zip(old, new):
        assert a in text
        text = text.replace(a, b, 1)
    p = _write(tmp_path, "dm_regroup.yaml", text)
    o = _clean(["explain", "--json", p], 2)
    assert printed_rules(o)[0] in ("bad-problem", "bad-mapping"), o.show()
    assert f"dm_regroup.yaml:{line}:" in o.stdout, o.show()
    assert ("more than 4,611,686,018,427,387,904 positions" if where == "product of terms"
            else "characters, more than 40") in o.stdout, o.show()
    assert len(o.stdout) < 2000, o.show()  # (the number is shown cut, never whole)


def test_a_count_too_long_to_print_is_named(tmp_path):
    """300 unused axes of 2**62: the tensor T over every axis has over 18,000 digits of
    elements, said as a power of two."""
    text = (ROOT / "problems/seed/dma_example_1.yaml").read_text()
    i = text.index("axes: {") + len("axes: {")
    extra = "".join(f"Z{k}: {2 ** 62}, " for k in range(300))
    o = _clean(["verify", _write(tmp_path, "p.yaml", text[:i] + extra + text[i:])], 1,
               "size-limit")
    assert "more than 2**18,614 elements" in o.stdout + o.stderr, o.show()


@pytest.mark.parametrize("shape", [b"(0x" + b"f" * 5000 + b",)", b"(" + b"9" * 5000 + b",)"])
def test_npy_header_numbers_are_bounded_before_numpy_reads_them(tmp_path, shape):
    f = tmp_path / "in.npy"
    f.write_bytes(npy_bytes(b"{'descr': '|i1', 'fortran_order': False, 'shape': " + shape
                            + b", }"))
    o = _clean(["run", EX1, "--input", f"source={f}", "--out", str(tmp_path / "o")], 2,
               "bad-request")
    assert "the .npy header: the number" in o.stderr, o.show()
    many = b"(" + b"4611686018427387904, " * 300 + b")"
    f.write_bytes(npy_bytes(b"{'descr': '|i1', 'fortran_order': False, 'shape': " + many
                            + b", }"))
    o = _clean(["run", EX1, "--input", f"source={f}", "--out", str(tmp_path / "o")], 2,
               "bad-request")
    assert "more than 2**18,600 elements" in o.stderr, o.show()


@pytest.mark.parametrize("argv", [
    ["verify", EX1, "--seed", DIGITS], ["solve", EX1, "--time-limit", DIGITS],
    ["solve", EX1, "--workers", DIGITS], ["trace", EX1, "--index", f"A={DIGITS}"],
    ["sequence", "--axes", f"A={DIGITS}", "--buf", "m![A]", "--time", "m![A]",
     "--packet", "m![1]"],
    ["sequence", "--axes", "A=8", "--buf", f"m![A # {DIGITS}]", "--time", "m![A]",
     "--packet", "m![1]", "--json"],
])
def test_flags_with_a_number_too_long_are_bad_input(argv):
    o = _clean(argv, 2)
    assert "has 5,000 characters, more than 40" in o.stdout + o.stderr, o.show()


def test_a_batch_line_with_a_number_too_long_is_answered_at_its_column(tmp_path):
    good = '{"axes": {"A": 8}, "buf": "m![A]", "time": "m![A]", "packet": "m![1]"'
    lines = [good.replace("8", DIGITS, 1) + "}", good + ', "id": -' + DIGITS + ".5}",
             good + "}"]
    p = _write(tmp_path, "b.jsonl", "\n".join(lines) + "\n")
    o = _clean(["sequence", "--batch", p], 0)
    out = o.stdout.splitlines()
    assert len(out) == 3 and '"entries"' in out[2], o.show()
    assert "line 1, column 16: the number 10000" in out[0], o.show()
    assert f"line 2, column {len(good) + 9}: the number -" in out[1], o.show()


def test_a_batch_line_with_a_number_too_long_keeps_its_id(tmp_path):
    """The answer to a line refused for a number too long carries the request's ``id``
    (before: none, so a client could not match it, issue 31); a line whose id is that
    number is answered without one."""
    import json
    good = '{"axes": {"A": 8}, "buf": "m![A]", "time": "m![A]", "packet": "m![1]"'
    lines = [good.replace("8", DIGITS, 1) + ', "id": "r1"}',
             good + ', "id": 7, "x": ' + DIGITS + "}",
             good + ', "id": ' + DIGITS + "}",
             good + ', "id": [1, ' + DIGITS + "]}"]
    p = _write(tmp_path, "ids.jsonl", "\n".join(lines) + "\n")
    o = _clean(["sequence", "--batch", p], 0)
    out = [json.loads(line) for line in o.stdout.splitlines()]
    assert [a.get("id") for a in out] == ["r1", 7, None, None], o.show()
    assert all(a["error"]["code"] == "bad-request" for a in out), o.show()
