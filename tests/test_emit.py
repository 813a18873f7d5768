"""``tcplan solve --emit rust`` (issue 31, item 2): a planned graph printed as furiosa-opt
code, and that code read back by ``tcplan import`` gives the same plan: every tensor's
planned layout, every op, and the same cycles."""

from __future__ import annotations

import collections
import json
import pathlib

import pytest
import yaml

from tcplan.planner.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
QWEN3 = ROOT / "problems" / "kernels" / "qwen3"


def _solve(path: pathlib.Path, capsys, *extra: str) -> dict:
    assert main(["solve", str(path), "--json", "-q", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _round_trip(path: pathlib.Path, tmp_path: pathlib.Path, capsys) -> tuple[str, dict]:
    assert main(["solve", str(path), "--emit", "rust", "-q"]) == 0
    code = capsys.readouterr().out
    rs = tmp_path / "kernel.rs"
    rs.write_text(code)
    assert main(["import", str(rs), "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    (yml,) = (tmp_path / "out").glob("*.yaml")
    return code, yaml.safe_load(yml.read_text())


@pytest.mark.parametrize("name", ["attention_row_max_free", "attention_weighted_sum_free",
                                  "attention_forward_free", "rmsnorm_forward_free"])
def test_the_emitted_kernel_imports_to_the_same_plan(name, tmp_path, capsys):
    """Every tensor the plan lays out has that layout in the imported graph; every op comes
    back; the imported graph, its layouts now given, solves to the plan's cycles."""
    original = yaml.safe_load((QWEN3 / f"{name}.yaml").read_text())
    plan = _solve(QWEN3 / f"{name}.yaml", capsys, "--verify", "none")
    code, back = _round_trip(QWEN3 / f"{name}.yaml", tmp_path, capsys)
    layouts = plan["plan"]["layouts"]
    assert layouts and all(back["tensors"][n]["element"] == m for n, m in layouts.items())
    assert collections.Counter(o["kind"] for o in back["ops"]) == \
        collections.Counter(o["kind"] for o in original["ops"])
    f = tmp_path / "back.yaml"
    f.write_text(yaml.safe_dump(back, sort_keys=False))
    again = _solve(f, capsys, "--verify", "sample")
    assert (again["status"], again["sum_cycles"], again["verified"]) == \
        ("optimal", plan["sum_cycles"], True)


def test_a_planned_contraction_is_emitted_as_its_calls(tmp_path, capsys):
    """proj_p's `contraction` op: its planned TRF layout and Fetch come back as the TRF's
    load and the four contract stages; the graph read back, each op now a kernel call,
    solves to the typed kernel's cycles (problems/kernels/qwen3/projection_proj_p.yaml)."""
    plan = _solve(QWEN3 / "projection_proj_p_free.yaml", capsys, "--verify", "none")
    code, back = _round_trip(QWEN3 / "projection_proj_p_free.yaml", tmp_path, capsys)
    mapping = next(o for o in plan["plan"]["ops"] if o["kind"] == "contraction")["mapping"]
    (trf,) = [t for t in back["tensors"].values() if t["tier"] == "trf"]
    assert (trf["lane"], trf["element"]) == (mapping["lane"], mapping["element"])
    assert f".fetch::<{mapping['time']}, {mapping['packet']}>()" in code
    assert ".contract_outer::<" in code and "LaneMode::Interleaved" in code
    typed = _solve(QWEN3 / "projection_proj_p.yaml", capsys, "--verify", "none")
    f = tmp_path / "back.yaml"
    f.write_text(yaml.safe_dump(back, sort_keys=False))
    assert _solve(f, capsys, "--verify", "none")["sum_cycles"] == typed["sum_cycles"]


def test_emit_needs_a_graph(capsys):
    assert main(["solve", str(ROOT / "problems" / "walkthrough" / "weight.yaml"), "--emit",
                 "rust", "-q"]) == 2
    assert "--emit rust writes a graph's kernel" in capsys.readouterr().err


def test_what_emit_does_not_write_is_refused_by_name(capsys):
    assert main(["solve", str(ROOT / "problems" / "graphs" / "embedding_lookup_then_store.yaml"),
                 "--emit", "rust", "-q"]) == 2
    assert "op lookup is a gather, which tcplan does not write" in capsys.readouterr().err


def test_dimensions_a_graph_leaves_out_are_written_with_their_defaults(tmp_path, capsys):
    """tu_path_collect_cast gives no Chip or Cluster: the code types them as tcplan reads
    them (m![1], m![1 # 2]), and reads back."""
    code, back = _round_trip(ROOT / "problems" / "graphs" / "tu_path_collect_cast.yaml",
                             tmp_path, capsys)
    assert "DmTensor<bf16, m![1], m![1 # 2]," in code or "DmTensor<f32, m![1], m![1 # 2]," \
        in code
    assert back["ops"]
