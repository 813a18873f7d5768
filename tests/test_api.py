"""The Python API (issue 17, item 2; docs/api.md): one import package, typed results whose
to_json() is what the command line prints with --json, and the documented example."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

import tcplan
from tcplan.planner.cli import main

ROOT = Path(__file__).resolve().parents[1]
V = str(ROOT / "problems/planning/attention_v_head_major.yaml")
EX2 = str(ROOT / "problems/seed/dma_example_2.yaml")
SLICE32 = str(ROOT / "problems/infeasible/dma_slice_32.yaml")
ODD = str(ROOT / "problems/infeasible/free_source_odd_rows.yaml")
TIMES = ("solve_time", "times")  # wall-clock seconds: the only fields two runs differ in


def _cli(*argv: str) -> tuple[int, dict]:
    out = io.StringIO()
    code = main([*argv, "--json"], stdout=out, stderr=io.StringIO())
    return code, json.loads(out.getvalue())


def _untimed(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in TIMES}


def test_docs_example_runs(monkeypatch):
    """docs/api.md's worked example, as written, from the repository's root."""
    monkeypatch.chdir(ROOT)
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs/api.md").read_text(), re.S)
    assert blocks, "docs/api.md lost its example"
    for code in blocks:
        exec(compile(code, "docs/api.md", "exec"), {})


def test_solve_result_is_what_solve_prints():
    solved = tcplan.solve(V)
    code, printed = _cli("solve", V)
    assert (solved.exit_code, _untimed(solved.to_json())) == (code, _untimed(printed))
    assert (solved.status, solved.cycles, solved.lower_bound, solved.verified) == \
        ("optimal", 2548, 2548, True)  # the README's quick start: at its 2-DMN bound
    assert solved.plan.source.dtype == "bf16" and solved.error is None
    text = solved.text()
    assert text.startswith("attention_v_head_major: stream") and "cycles: 2,548" in text


def test_verify_result_is_what_verify_prints():
    checked = tcplan.verify(tcplan.load(EX2))
    code, printed = _cli("verify", EX2)
    assert (checked.exit_code, _untimed(checked.to_json())) == (code, _untimed(printed))
    assert checked.verified and checked.checked > 0
    assert checked.cycles == printed["cycles"] and checked.breakdown["hbm"]


def test_a_broken_rule_is_an_answer_not_an_exception():
    checked = tcplan.verify(SLICE32)
    assert (checked.verified, checked.exit_code, checked.error.code) == (False, 1, "slice-size")
    assert checked.text().startswith("dma_slice_32: NOT verified")
    why = tcplan.explain(SLICE32)
    assert not why.feasible and [c["rule"] for c in why.conflict] == ["slice-size"]
    assert why.to_json() == _cli("explain", SLICE32)[1]
    with pytest.raises(tcplan.TcplanError) as e:  # lower must hand back configs
        tcplan.lower(SLICE32)
    assert (e.value.kind, e.value.code) == ("hardware", "slice-size")


def test_an_infeasible_solve_names_its_rule():
    solved = tcplan.solve(ODD)
    assert (solved.status, solved.plan, solved.exit_code) == ("infeasible", None, 1)
    assert solved.error.code == solved.to_json()["explanation"]["code"]
    assert "infeasible" in solved.text().splitlines()[0]


def test_bad_input_raises_located_errors():
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.loads("name: x\nkind: dma\naxes: {A: 4}\nteir: hbm\n", name="typo.yaml")
    assert e.value.kind == "input" and "typo.yaml" in e.value.message
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.run(V, {"src": np.zeros(4)})
    assert e.value.kind == "input" and "source" in e.value.message
    with pytest.raises(ValueError):
        tcplan.solve(V, verify="some")


def test_lower_and_run_results():
    lowered = tcplan.lower(V)
    assert lowered.to_json() == _cli("lower", V)[1]
    out = io.StringIO()
    assert main(["lower", V], stdout=out) == 0 and out.getvalue() == lowered.text() + "\n"
    ran = tcplan.run(V, seed=3)
    src, dst = ran.arrays["source"], ran.arrays["destination"]
    assert src.dtype.name == "bfloat16" and src.shape == (512, 8, 64)
    assert np.array_equal(src.view(np.uint16), dst.view(np.uint16))
    assert ran.to_json()["tensors"][1] == {"tensor": "destination", "dtype": "bfloat16",
                                           "shape": [512, 8, 64]}


def test_run_saves_files_numpy_loads_back(tmp_path):
    ran = tcplan.run(V, seed=1)
    paths = ran.save(tmp_path)
    assert [p.name for p in paths] == ["source.npy", "destination.npy"]
    back = np.load(paths[1])
    assert back.dtype.name == "bfloat16"
    assert np.array_equal(back.view(np.uint16), ran.arrays["destination"].view(np.uint16))


def test_version_is_the_distribution_version():
    from importlib.metadata import version
    assert tcplan.__version__ == version("tcplan")
    assert set(tcplan.__all__) <= set(dir(tcplan))


# ---- issue 31's smaller defects: the documented error fields, a problem as a mapping ------
def test_an_errors_fix_is_a_field_as_documented():
    """docs/api.md: an input error's ``code``, ``message`` and ``fix``; ``fix`` is the
    headline rule's fix with its terms (before, the attribute did not exist)."""
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.loads("format: 1\nkind: dma\nbogus: 1\n", "p.yaml")
    assert e.value.code == "bad-problem" and e.value.fix.startswith("allowed keys: ")
    assert e.value.fix == e.value.to_json()["fix"]


def test_a_problem_loads_from_its_mapping():
    """``tcplan.loads`` takes the mapping ``yaml.safe_load`` gives (before: an
    AttributeError): the same plan as the file, errors naming its keys; anything else is a
    located input error."""
    import yaml
    data = yaml.safe_load(Path(V).read_text())
    assert tcplan.solve(tcplan.loads(data), verify="none").cycles == \
        tcplan.solve(V, verify="none").cycles == 2548
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.loads({**data, "bogus": 1}, "mine")
    assert e.value.kind == "input" and "bogus" in e.value.message and "mine" in \
        e.value.message
    with pytest.raises(tcplan.TcplanError) as e:
        tcplan.loads(3)  # type: ignore[arg-type]
    assert e.value.code == "bad-problem" and "not int" in e.value.message
