"""`tcplan batch` on one machine and on a Dask cluster (issue 19; docs/batch.md): the same
rows from every backend, a lost worker's problem retried once then reported, results
streamed to JSON Lines and a resumed batch that runs only what is missing."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from tcplan.planner import batch
from tcplan.planner.cli import main

ROOT = Path(__file__).resolve().parents[1]
QUICK = ["seed/dma_example_1.yaml", "seed/dma_example_3.yaml", "seed/scatter.yaml",
         "seed/ve_add_constant.yaml", "planning/attention_v_head_major.yaml",
         "expressions/expr_bias_relu_i32.yaml", "infeasible/dma_slice_32.yaml",
         "graphs/kv_cache_append_then_read.yaml"]


@pytest.fixture
def library(tmp_path: Path) -> Path:
    """A small library: quick problems of every family, and one file that is not YAML."""
    d = tmp_path / "lib"
    for rel in QUICK:
        dst = d / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "problems" / rel, dst)
    (d / "broken.yaml").write_text("kind: dma\naxes: {A: [\n")
    return d


def _batch(*argv: str) -> tuple[int, dict]:
    out = io.StringIO()
    code = main(["-q", "batch", *argv, "--json"], stdout=out, stderr=io.StringIO())
    return code, json.loads(out.getvalue())


def _canonical(rows: list[dict]) -> str:
    return json.dumps([batch.untimed(r) for r in rows], sort_keys=True)


def _table(*argv: str) -> str:
    """The expectations table `batch` prints (without the seconds table after it)."""
    out = io.StringIO()
    main(["-q", "batch", *argv], stdout=out, stderr=io.StringIO())
    return out.getvalue().split("\n\nseconds")[0]


@pytest.mark.slow
def test_every_backend_gives_the_same_rows(library):
    code_l, local = _batch(str(library), "--backend", "local", "--jobs", "2")
    code_d, dask = _batch(str(library), "--backend", "dask", "--jobs", "2")
    assert code_l == code_d == 1  # the broken file fails its row, in both
    assert _canonical(local["problems"]) == _canonical(dask["problems"])
    table = _table(str(library), "--backend", "local", "--seed", "3")
    assert table == _table(str(library), "--backend", "dask", "--seed", "3")
    assert "2,548" in table and f"{len(QUICK)}/{len(QUICK) + 1} met" in table
    rows = {Path(r["path"]).name: r for r in local["problems"]}
    assert rows["broken.yaml"]["status"] == "bad input" and not rows["broken.yaml"]["ok"]
    assert rows["dma_slice_32.yaml"]["ok"]  # an expected error is met
    assert rows["attention_v_head_major.yaml"]["cycles"] == 2548
    assert [r["path"] for r in local["problems"]] == sorted(r["path"] for r in
                                                            local["problems"])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "dask"])
def test_a_lost_worker_is_retried_once_then_reported(library, tmp_path, monkeypatch,
                                                     backend):
    once = library / "seed" / "dma_example_1.yaml"
    once.write_text("# tcplan-test: kill-worker-once\n" + once.read_text())
    always = library / "seed" / "dma_example_3.yaml"
    always.write_text("# tcplan-test: kill-worker\n" + always.read_text())
    (library / "broken.yaml").unlink()
    kills = tmp_path / "kills"
    kills.mkdir()
    monkeypatch.setenv(batch.CRASH_ENV, str(kills))
    code, out = _batch(str(library), "--backend", backend, "--jobs", "2")
    rows = {Path(r["path"]).name: r for r in out["problems"]}
    assert len(rows) == len(QUICK)
    assert rows["dma_example_1.yaml"]["ok"]  # its worker died once: retried, then fine
    assert rows["dma_example_3.yaml"]["status"] == "lost"
    assert "retried once" in rows["dma_example_3.yaml"]["why"]
    others = [r for n, r in rows.items() if n not in ("dma_example_1.yaml",
                                                       "dma_example_3.yaml")]
    assert all(r["ok"] for r in others), [r for r in others if not r["ok"]]
    assert code == 1


def test_rows_stream_to_a_results_file_and_resume_runs_only_what_is_missing(library,
                                                                            tmp_path):
    results = tmp_path / "rows.jsonl"
    code, full = _batch(str(library), "--results", str(results))
    lines = results.read_text().splitlines()
    assert len(lines) == len(QUICK) + 1
    assert {json.loads(x)["path"] for x in lines} == {r["path"] for r in full["problems"]}
    # an interrupted run: three rows written, the fourth cut short
    results.write_text("\n".join(lines[:3]) + "\n" + lines[3][:25])
    ran: list[str] = []
    tasks = batch.tasks_under(str(library))
    rows = batch.run_batch(tasks, results=str(results), resume=True,
                           on_row=lambda row, k, n: ran.append(row["path"]))
    kept = {json.loads(x)["path"] for x in lines[:3]}
    assert len(ran) == len(tasks) - 3 and not kept & set(ran)
    assert _canonical(rows) == _canonical(full["problems"])
    assert len(batch.read_results(str(results))) == len(tasks)


def test_backend_mistakes_are_bad_requests(library, monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    assert main(["batch", str(library), "--backend", "local", "--address", "x:1"],
                stdout=out, stderr=err) == 2
    assert "use --backend dask" in err.getvalue()
    import sys
    monkeypatch.setitem(sys.modules, "dask", None)
    err = io.StringIO()
    assert main(["batch", str(library), "--backend", "dask"], stdout=io.StringIO(),
                stderr=err) == 2
    assert "pip install 'tcplan[dask]'" in err.getvalue()


@pytest.mark.slow
def test_no_scheduler_at_the_address_is_a_bad_request(library):
    err = io.StringIO()
    assert main(["batch", str(library), "--backend", "dask", "--address",
                 "tcp://127.0.0.1:9"], stdout=io.StringIO(), stderr=err) == 2
    assert "no Dask scheduler answers" in err.getvalue()


def test_resume_ignores_what_is_not_a_whole_row(library, tmp_path):
    results = tmp_path / "rows.jsonl"
    paths = [t.path for t in batch.tasks_under(str(library))]
    results.write_bytes(
        (json.dumps({"path": paths[0]}) + "\n"   # no fields
         + json.dumps({"path": paths[1], "problem": 5, "status": "x", "ok": True,
                       "why": ""}) + "\n"       # a field of the wrong type
         + json.dumps(["not", "a", "row"]) + "\n").encode() + b"\xff\xfe junk\n")
    assert batch.read_results(str(results)) == {}
    ran: list[str] = []
    rows = batch.run_batch(batch.tasks_under(str(library)), results=str(results),
                           resume=True, on_row=lambda row, k, n: ran.append(row["path"]))
    assert len(ran) == len(paths) and all(batch._is_row(r) for r in rows)
    err = io.StringIO()
    assert main(["batch", str(library), "--resume"], stdout=io.StringIO(), stderr=err) == 2
    assert "add --results" in err.getvalue()
