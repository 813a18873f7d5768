"""The `tcplan sequence` contract: table, JSON, exit codes, batch mode."""

import io
import json
import pathlib
import subprocess
import sys

import pytest

from tcplan.planner.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
NCHW = ["--axes", "N=4,C=3,H=8,W=8", "--buf", "m![N, C, H, W]", "--time", "m![W, H, C, N]",
        "--packet", "m![1]"]


def run(argv, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        old = sys.stdin
        sys.stdin = io.StringIO(stdin)
    try:
        code = main(argv, stdout=out, stderr=err)
    finally:
        if stdin is not None:
            sys.stdin = old
    return code, out.getvalue(), err.getvalue()


def test_table_output():
    code, out, err = run(["sequence", *NCHW])
    assert code == 0 and err == ""
    assert "[8 : 1, 8 : 8, 3 : 64, 4 : 192] : 1" in out
    lines = out.splitlines()
    row = next(line for line in lines if line.split()[:2] == ["0", "time"])
    assert row.split() == ["0", "time", "W", "W", "8", "1", "0"]
    assert "contiguous run       1 element\n" in out  # innermost entry 4 : 192 strides
    assert "max access size      1 element\n" in out


def test_table_shows_merges():
    code, out, _ = run(["sequence", "--axes", "N=8,C=8,H=8,W=32", "--buf", "m![N, C, H, W]",
                        "--time", "m![W / 16, H % 2, H / 2, C / 2, C % 2, N / 2, N % 2, "
                        "W / 8 % 2]", "--packet", "m![W % 8]"])
    assert code == 0
    assert "raw 7, 8: 2 : 8 + 8 : 1 -> 16 : 1" in out
    assert "[2 : 16, 2 : 32, 4 : 64, 8 : 256, 8 : 2048, 16 : 1] : 8" in out


def test_json_output():
    code, out, _ = run(["sequence", *NCHW, "--json", "--dtype", "bf16"])
    assert code == 0
    obj = json.loads(out)
    assert obj["entries"] == [[8, 1], [8, 8], [3, 64], [4, 192]]
    assert obj["raw_entries"] == obj["entries"]
    assert obj["packet_size"] == 1 and obj["contiguous_run"] == 1
    assert obj["max_access_size"] == 1 and obj["accesses_per_packet"] == 1
    assert obj["engine"] == "pseudo" and obj["mode"] == "read" and obj["dtype"] == "bf16"


def test_defaults():
    _, out, _ = run(["sequence", *NCHW, "--json"])
    obj = json.loads(out)
    assert (obj["dtype"], obj["mode"], obj["engine"]) == ("i8", "read", "pseudo")
    # the commit engine only writes: its default mode is write
    _, out, _ = run(["sequence", "--axes", "A=4,B=8", "--buf", "m![A, B]", "--time", "m![A]",
                     "--packet", "m![B]", "--engine", "commit", "--json"])
    assert json.loads(out)["mode"] == "write"


@pytest.mark.parametrize("argv,code,rule", [
    (["--axes", "A=15", "--buf", "m![A % 5, A / 5]", "--time", "m![1]",
      "--packet", "m![A % 3, A / 3]"], 1, "incompatible-decomposition"),
    (["--axes", "A=16,T=4,P=4", "--buf", "m![A]", "--time", "m![T, A]", "--packet", "m![P]",
      "--mode", "write"], 1, "broadcast-write"),
    (["--axes", "A=4", "--buf", "m![A", "--time", "m![1]", "--packet", "m![A]"], 2,
     "parse-error"),
    (["--axes", "A=4", "--buf", "m![B]", "--time", "m![1]", "--packet", "m![A]"], 2,
     "unknown-axis"),
    (["--axes", "A=4", "--buf", "m![A / 3]", "--time", "m![1]", "--packet", "m![A]"], 2,
     "bad-mapping"),
    (["--axes", "A=4", "--buf", "m![A # 2]", "--time", "m![1]", "--packet", "m![A]"], 2,
     "bad-mapping"),
    (["--axes", "A:4", "--buf", "m![A]", "--time", "m![1]", "--packet", "m![A]"], 2,
     "bad-request"),
    (["--axes", "A=4", "--buf", "m![A]", "--time", "m![1]"], 2, "bad-request"),
    (["--axes", "A=4", "--buf", "m![A]", "--time", "m![1]", "--packet", "m![A]",
      "--dtype", "q8"], 2, "bad-request"),
    (["--axes", "A=4", "--buf", "m![A]", "--time", "m![1]", "--packet", "m![A]",
      "--engine", "fetch", "--mode", "write"], 2, "bad-request"),
    (["--axes", "A=4", "--buf", "m![A]", "--time", "m![1]", "--packet", "m![A]",
      "--bogus"], 2, "bad-request"),
])
def test_errors_and_exit_codes(argv, code, rule):
    got, out, err = run(["sequence", *argv, "--json"])
    assert got == code
    obj = json.loads(out)
    assert obj["error"]["code"] == rule
    assert obj["error"]["message"]
    # without --json: the same code, a readable message on stderr, nothing on stdout
    got, out, err = run(["sequence", *argv])
    assert got == code and out == ""
    assert f"error [{rule}]" in err and "fix:" in err


def test_parse_error_names_the_column():
    _, out, _ = run(["sequence", "--axes", "A=4", "--buf", "m![A, , A]", "--time", "m![1]",
                     "--packet", "m![A]", "--json"])
    msg = json.loads(out)["error"]["message"]
    assert msg.startswith("--buf:") and "column 7" in msg


def test_no_command_is_bad_request():
    code, _, err = run([])
    assert code == 2 and "bad-request" in err


# ---- batch -----------------------------------------------------------------------------
SEED_EXPECTED = {  # seed 000 / docs/hardware.md section 2, by hand
    "nchw-whcn-read": [[8, 1], [8, 8], [3, 64], [4, 192]],
    "nchw-whcn-write": [[8, 1], [8, 8], [3, 64], [4, 192]],
    "strided-read": [[8, 512], [16, 32], [32, 1]],
    "strided-write": [[8, 512], [16, 32], [32, 1]],
    "tiling-read": [[2, 4096], [4, 8], [4, 8192], [128, 32], [32, 1]],
    "tiling-write": [[2, 4096], [4, 8], [4, 8192], [128, 32], [32, 1]],
    "transposing": [[8, 32], [8, 256], [16, 1]],
    "splitting": [[2, 64], [4, 8], [4, 128], [2, 32], [32, 1]],
    "slicing": [[4, 256], [3, 64], [2, 32], [2, 8], [8, 1]],
    "broadcasting-read": [[4, 0], [16, 1], [4, 0]],
    "broadcasting-write": "broadcast-write",
    "partial-axis-broadcast": [[4, 0], [512, 1]],
    "merging": [[2, 16], [2, 32], [4, 64], [8, 256], [8, 2048], [16, 1]],
    "padded-write": [[4, 16], [8, 1]],
    "contiguous-packet": [[4, 96], [3, 32], [4, 8], [8, 1]],
    "non-contiguous-packet": [[3, 32], [4, 96], [4, 8], [8, 1]],
    "incompatible-a15": "incompatible-decomposition",
}


def test_seed_batch_file():
    code, out, _ = run(["sequence", "--batch", str(ROOT / "problems/seed/sequencer.jsonl")])
    assert code == 0
    answers = [json.loads(line) for line in out.splitlines()]
    assert {a["id"] for a in answers} == set(SEED_EXPECTED)
    for a in answers:
        want = SEED_EXPECTED[a["id"]]
        if isinstance(want, str):
            assert a["error"]["code"] == want, a
        else:
            assert a["entries"] == want, a


def test_batch_answers_every_line_in_order(tmp_path):
    good = {"axes": {"A": 4, "B": 8}, "buf": "m![A, B]", "time": "m![A]", "packet": "m![B]"}
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps([1, 2]),
        json.dumps({**good, "colour": "red"}),
        json.dumps({**good, "buf": "m![A,"}),
        json.dumps({**good, "axes": {"A": 0}}),
        json.dumps({k: v for k, v in good.items() if k != "packet"}),
        json.dumps({**good, "mode": "write", "time": "m![1]"}),
        "",
        json.dumps({**good, "dtype": "i32", "engine": "fetch", "id": 7}),
    ]
    path = tmp_path / "req.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, out, _ = run(["sequence", "--batch", str(path)])
    assert code == 0
    answers = [json.loads(line) for line in out.splitlines()]
    assert len(answers) == len(lines)
    assert answers[0]["entries"] == [[4, 8], [8, 1]]
    codes = [a.get("error", {}).get("code") for a in answers]
    assert codes == [None, "bad-request", "bad-request", "bad-request", "parse-error",
                     "bad-request", "bad-request", "write-coverage", "bad-request", None]
    assert answers[-1]["id"] == 7 and answers[-1]["packet_bytes"] == 32


def test_batch_thousand_requests_one_process(tmp_path):
    reqs = []
    for k in range(1000):
        n = 2 + k % 7
        reqs.append(json.dumps({"axes": {"A": n, "B": 8, "C": 4}, "buf": "m![A, B, C]",
                                "time": "m![C, A]", "packet": "m![B]", "id": k}))
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(reqs) + "\n")
    code, out, _ = run(["sequence", "--batch", str(path)])
    assert code == 0
    answers = [json.loads(line) for line in out.splitlines()]
    assert [a["id"] for a in answers] == list(range(1000))
    for k, a in enumerate(answers):
        n = 2 + k % 7
        assert a["entries"] == [[4, 1], [n, 32], [8, 4]]  # C : 1, A : B*C, B : C


def test_batch_stdin_and_missing_file():
    req = json.dumps({"axes": {"A": 4}, "buf": "m![A]", "time": "m![1]", "packet": "m![A]"})
    code, out, _ = run(["sequence", "--batch", "-"], stdin=req + "\n")
    assert code == 0 and json.loads(out)["entries"] == [[4, 1]]
    code, out, err = run(["sequence", "--batch", "/nonexistent/x.jsonl"])
    assert code == 2 and "bad-request" in out


def test_console_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "tcplan", "sequence", *NCHW, "--json"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["entries"] == [[8, 1], [8, 8], [3, 64], [4, 192]]
    proc = subprocess.run([sys.executable, "-m", "tcplan", "sequence", "--axes", "A=15",
                           "--buf", "m![A % 5, A / 5]", "--time", "m![1]", "--packet",
                           "m![A % 3, A / 3]"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


# ---- hostile input: named errors, never a traceback ---------------------------------------
@pytest.mark.parametrize("buf,code", [
    ("(" * 400 + "A" + ")" * 400, "parse-error"),
    ("A" + " # 8" * 1000, "parse-error"),
    ("A # " + "9" * 4400, "bad-mapping"),
    ("", "parse-error"),
    ("   ", "parse-error"),
    ("m![A, Ä]", "parse-error"),
])
def test_hostile_mappings(buf, code):
    got, out, _ = run(["sequence", "--axes", "A=8", "--buf", buf, "--time", "m![1]",
                       "--packet", "m![A]", "--json"])
    assert got == 2 and json.loads(out)["error"]["code"] == code


@pytest.mark.parametrize("axes", ["", "A=" + "9" * 4400, "A=0", "A=4,A=4", "A"])
def test_hostile_axes(axes):
    got, out, _ = run(["sequence", "--axes", axes, "--buf", "A", "--time", "1", "--packet", "A",
                       "--json"])
    assert got == 2 and json.loads(out)["error"]["code"] == "bad-request"


def test_batch_survives_hostile_lines(tmp_path):
    good = json.dumps({"axes": {"A": 4}, "buf": "A", "time": "1", "packet": "A"})
    lines = [
        b'{"id": ' + b"9" * 5000 + b"}",
        b"[" * 100_000,
        b"\xff\xfe",
        json.dumps({"axes": {"A": "4"}, "buf": "A", "time": "1", "packet": "A"}).encode(),
        json.dumps({"axes": {"A": 4.0}, "buf": "A", "time": "1", "packet": "A"}).encode(),
        json.dumps({"axes": {"A": True}, "buf": "A", "time": "1", "packet": "A"}).encode(),
        json.dumps({"axes": {"A": 2**70}, "buf": "A", "time": "1", "packet": "A"}).encode(),
        json.dumps({"axes": {"A": 4}, "buf": 5, "time": "1", "packet": "A"}).encode(),
        json.dumps({"axes": {"A": 4}, "buf": "A", "time": "1", "packet": "A",
                    "dtype": ["i8"]}).encode(),
        good.encode(),
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    code, out, _ = run(["sequence", "--batch", str(path)])
    assert code == 0
    answers = [json.loads(line) for line in out.splitlines()]
    assert len(answers) == len(lines)
    assert all(a["error"]["code"] == "bad-request" for a in answers[:-1])
    assert answers[-1]["entries"] == [[4, 1]]
    assert "not UTF-8" in answers[2]["error"]["message"]


def test_batch_rejects_per_request_flags():
    code, out, _ = run(["sequence", "--batch", "-", "--engine", "fetch", "--json"], stdin="")
    assert code == 2 and "--engine" in json.loads(out)["error"]["message"]


def test_broken_pipe_is_quiet(tmp_path):
    req = json.dumps({"axes": {"A": 4}, "buf": "A", "time": "1", "packet": "A"})
    path = tmp_path / "many.jsonl"
    path.write_text((req + "\n") * 20000)
    proc = subprocess.run(
        f"{sys.executable} -m tcplan "
        f"sequence --batch {path} | head -1", shell=True, capture_output=True, text=True,
        cwd=ROOT)
    assert json.loads(proc.stdout)["entries"] == [[4, 1]]
    assert "Traceback" not in proc.stderr


def test_version_is_the_distributions():
    from importlib.metadata import version

    from tcplan.planner.cli import main
    out = io.StringIO()
    assert main(["--version"], stdout=out) == 0
    assert out.getvalue().strip() == f"tcplan {version('tcplan')}"
