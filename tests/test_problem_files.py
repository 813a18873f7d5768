"""Problem files: every seed problem loads and lowers; every broken file gets its located error.

Each file in tests/broken/ states on its first line what it must produce:
``# expect: CODE LINE:COLUMN TEXT`` (``0:0`` when the file cannot be read at all).
"""

import io
import json
import pathlib
import re

import pytest

from tcplan.planner.cli import main
from tcplan.planner.lowering import lower_problem
from tcplan.planner.spec import load_problem

ROOT = pathlib.Path(__file__).resolve().parents[1]
BROKEN = sorted((ROOT / "tests/broken").glob("*.yaml"))
SEED = sorted((ROOT / "problems/seed").glob("*.yaml"))


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    return main(argv, stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_corpus_is_large_enough():
    assert len(BROKEN) >= 15


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.stem)
def test_broken_problem_is_located(path):
    head = path.read_bytes().split(b"\n", 1)[0].decode()
    m = re.match(r"# expect: (\S+) (\d+):(\d+) (.*)", head)
    assert m, f"{path.name}: first line must state the expectation"
    code, line, col, text = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
    for cmd in ("lower", "trace"):
        argv = [cmd, str(path), "--json"] + (["--index", "A=0"] if cmd == "trace" else [])
        got, out, err = run(argv)
        assert got == 2, (path.name, cmd, out, err)
        e = json.loads(out)["error"]
        assert e["code"] == code, (path.name, e)
        where = f"{path}:{line}:{col}" if line else str(path)
        assert e["message"].startswith(where), (path.name, e["message"])
        assert text in e["message"] or text in e["fix"], (path.name, e)
        assert "Traceback" not in err


@pytest.mark.parametrize("path", SEED, ids=lambda p: p.stem)
def test_seed_problems_load_and_lower(path):
    p = load_problem(path)
    lower_problem(p)
    for argv in (["lower", str(path), "--json"], ["lower", str(path)],
                 ["trace", str(path), "--index", ",".join(f"{a}=0" for a in p.axes)]):
        code, out, err = run(argv)
        assert code == 0, (argv, out, err)
