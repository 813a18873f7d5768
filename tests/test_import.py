"""``tcplan import`` (issue 31, item 1): furiosa-opt's Qwen3 kernels, read with a Rust parser,
give the graphs of problems/kernels/qwen3/ op for op, and they solve to the same cycles.

The kernels are furiosa-opt's own files, unchanged (tests/data/furiosa_opt/README.md); the
hand-written graphs were transcribed from them before the importer existed, so the two are
independent readings of the same source."""

from __future__ import annotations

import collections
import json
import pathlib

import numpy as np
import pytest
import yaml

from tcplan.model.mapping import parse
from tcplan.planner.cli import main
from tcplan.planner.rust.importer import import_file

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "data" / "furiosa_opt" / "src" / "transformer" / "kernel"
QWEN3 = ROOT / "problems" / "kernels" / "qwen3"
P4 = {"Cluster": "m![1 # 2]", "Slice": "m![Dummy64, 1 # 4]"}

#: (kernel file, function, generic bindings, the hand-written graph); the bindings are the call
#: sites' (each hand-written file's header names them)
CASES = [
    ("attention", "ng_to_vrf", {"Slice": "m![1 # 256]"}, "attention_ng_to_vrf"),
    ("attention", "ng_to_vrf", {"Slice": P4["Slice"]}, "attention_ng_to_vrf_slicep4"),
    *[("attention", f, {}, f"attention_{f}") for f in (
        "qk_scaled", "row_max", "masked_exp", "row_sum", "weighted_sum", "forward_first",
        "forward")],
    ("attention", "norm", {"Slice": P4["Slice"]}, "attention_norm"),
    *[("projection", f, {}, f"projection_{f}") for f in ("proj_q", "proj_p", "proj_v",
                                                          "proj_o")],
    ("mlp", "forward", {}, "mlp_forward"),
    ("rmsnorm", "forward", P4, "rmsnorm_forward"),
    ("rmsnorm", "forward", {"Cluster": "m![Wp / 4096 % 2]", "Slice": "m![Wp / 16 % 256]"},
     "rmsnorm_forward_lm_head"),
    ("rmsnorm", "forward_q", {}, "rmsnorm_forward_q"),
    ("rmsnorm", "forward_k", {}, "rmsnorm_forward_k"),
    ("rope", "apply_rope", {}, "rope_apply_rope"),
    ("residual", "forward", P4, "residual_forward"),
    ("lm_head", "forward", {}, "lm_head_forward"),
]


def _imported(module: str, function: str, generics: dict) -> dict:
    (done,) = import_file(KERNELS / f"{module}.rs", function, generics)
    assert done.text is not None, done.reason
    return yaml.safe_load(done.text)


def _canon(doc: dict) -> tuple[collections.Counter, collections.Counter]:
    """A graph up to names, order and addresses: its op kinds, and its tensors as (tier,
    dtype, given, canonical mappings).  A register tensor's Chip is m![1] when not written;
    Bottom padding ``#{!}`` is read as ``#`` (the hand-written lm_head predates it)."""
    axes = doc["axes"]
    tensors: collections.Counter = collections.Counter()
    for t in doc["tensors"].values():
        dims = {k: v for k, v in t.items() if k not in ("tier", "dtype", "given", "address")}
        if t["tier"] in ("trf", "vrf"):
            dims.setdefault("chip", "m![1]")
        tensors[(t["tier"], t.get("dtype", "bf16"), bool(t.get("given")),
                 tuple(sorted((k, parse(v.replace("#{!}", "#"), axes).text())
                              for k, v in dims.items())))] += 1
    return tensors, collections.Counter(o["kind"] for o in doc["ops"])


@pytest.mark.parametrize("module,function,generics,hand", CASES, ids=[c[3] for c in CASES])
def test_an_imported_kernel_is_the_hand_written_graph(module, function, generics, hand):
    got = _imported(module, function, generics)
    want = yaml.safe_load((QWEN3 / f"{hand}.yaml").read_text())
    assert got["name"] == hand or generics  # (the name of a binding is the author's)
    assert got["axes"] == want["axes"]
    assert _canon(got) == _canon(want)


@pytest.mark.slow
@pytest.mark.parametrize("module,function,generics,hand", CASES, ids=[c[3] for c in CASES])
def test_an_imported_kernel_solves_to_the_hand_written_cycles(module, function, generics,
                                                               hand, tmp_path, capsys):
    f = tmp_path / f"{hand}.yaml"
    f.write_text(yaml.safe_dump(_imported(module, function, generics), sort_keys=False))
    got = []
    for path in (f, QWEN3 / f"{hand}.yaml"):
        assert main(["solve", str(path), "--json", "-q", "--verify", "sample"]) == 0
        d = json.loads(capsys.readouterr().out)
        got.append((d["status"], d["sum_cycles"], d["verified"]))
    assert got[0] == got[1]


def test_every_function_of_the_kernels_is_imported_or_says_why():
    """Each of the 28 functions of the six files: a graph, or the reason it has none."""
    reasons = {}
    for f in sorted(KERNELS.glob("*.rs")):
        if f.name == "mod.rs":
            continue
        for done in import_file(f):
            if done.text is None:
                reasons[done.name] = done.reason
            else:
                yaml.safe_load(done.text)
    assert reasons == {
        "attention_ng_to_vrf": "generic Slice: give --generic Slice='m![...]'",
        "attention_norm": "generic Slice: give --generic Slice='m![...]'",
        "projection_proj_k": "it moves no data of its own (line 100: result = proj_p(): its "
                             "moves are its own graph; its result is given here)",
        "rmsnorm_forward": "generic Cluster, Slice: give --generic Cluster='m![...]'",
        "residual_forward": "generic Cluster, Slice: give --generic Cluster='m![...]'",
    }


def test_the_header_says_what_the_graph_leaves_out():
    """rope's half copies read tile views of DM (tcplan has no views): left out, each with its
    line; lm_head's loop is one iteration; a callee's result is given."""
    (rope,) = import_file(KERNELS / "rope.rs", "apply_rope")
    head = [ln for ln in rope.text.splitlines() if ln.startswith("#")]
    assert sum("a Fetch from a tile view" in ln for ln in head) == 4
    assert any(ln.startswith("# - line 40: rotate_half_q = DmTensor::new()") for ln in head)
    (lm,) = import_file(KERNELS / "lm_head.rs", "forward")
    assert "# - line 17: the loop over i (0..19): one iteration, i = 0" in lm.text
    (ff,) = import_file(KERNELS / "attention.rs", "forward_first")
    assert "qk = qk_scaled(): its moves are its own graph" in ff.text


def test_a_kernel_written_here_imports(tmp_path):
    """A file of its own (no crate around it): axes!, an alias, a generic bound by --generic,
    a load, a Fetch -> cast -> Commit and a store."""
    f = tmp_path / "k.rs"
    f.write_text('''use furiosa_opt_std::prelude::*;
axes![A = 64, B = 32];
type Cluster = m![1 # 2];
fn step<Slice: M>(ctx: &mut Context, x: &HbmTensor<bf16, m![1], m![A, B]>,
                  y: &mut HbmTensor<f32, m![1], m![A, B]>) {
    let d: DmTensor<bf16, m![1], Cluster, Slice, m![B]> = x.to_dm(&mut ctx.tdma);
    let w: DmTensor<f32, m![1], Cluster, Slice, m![B]> = ctx
        .main
        .begin(d.view())
        .fetch::<m![B / 16], m![B % 16]>()
        .fetch_cast::<f32>()
        .collect::<m![B / 8], m![B % 8]>()
        .commit_trim::<m![B % 8]>()
        .commit();
    w.view().to_hbm_view(&mut ctx.tdma, y.view_mut());
}
''')
    out = tmp_path / "out"
    assert main(["import", str(f), "--generic", "Slice=m![A, 1 # 4]", "-o", str(out)]) == 0
    doc = yaml.safe_load((out / "k_step.yaml").read_text())
    assert doc["axes"] == {"A": 64, "B": 32}
    assert [o["kind"] for o in doc["ops"]] == ["dma", "fetch", "fetch_cast", "collect",
                                             "commit_trim", "commit", "dma"]
    assert doc["tensors"]["d"]["slice"] == "m![A, 1 # 4]"
    assert doc["tensors"]["y"] == {"tier": "hbm", "dtype": "f32", "chip": "m![1]",
                                   "element": "m![A, B]", "address": 1 << 20}
    assert main(["solve", str(out / "k_step.yaml"), "-q"]) == 0


@pytest.mark.parametrize("argv,code,words", [
    (["import", "nowhere.rs"], 2, "no such file"),
    (["import", str(KERNELS / "attention.rs"), "--function", "nope"], 2, "no function nope"),
    (["import", str(KERNELS / "attention.rs"), "--function", "norm"], 2, "--generic Slice"),
    (["import", str(KERNELS / "attention.rs"), "--generic", "Slice"], 2, "NAME=MAPPING"),
    (["import", str(KERNELS / "attention.rs"), "--function", "norm", "--generic",
      "Slice=m![Zed]"], 2, "Zed"),
])
def test_bad_input_is_a_located_error(argv, code, words, capsys):
    assert main(argv) == code
    assert words in capsys.readouterr().err


def test_a_file_that_is_not_rust_is_located(tmp_path, capsys):
    f = tmp_path / "bad.rs"
    f.write_text("fn f( {\n")
    assert main(["import", str(f)]) == 2
    assert "bad.rs:1" in capsys.readouterr().err


#: furiosa-opt's own example kernels (tests/data/furiosa_opt/src/), each function's graph
EXAMPLES = {
    "fetch_commit": ["fetch_commit_simple"],
    "switch_engine": ["custom_broadcast", "custom_broadcast_ring2", "custom_broadcast_ring8",
                      "custom_broadcast_multi", "custom_broadcast_moved_axis",
                      "custom_broadcast_transpose", "custom_broadcast_split_tile"],
    "reshape": ["reshape"],
    "dma": ["dup_two", "dup_one", "dup_many", "mixed_inplace_and_returned_outputs",
            "padded_tail_alignment"],
    "memory_op": ["dm_relayout", "commit_view_bottom_pad"],
    "transpose": ["transpose_simple"],
}
EXAMPLE_DIR = ROOT / "tests" / "data" / "furiosa_opt" / "src"


@pytest.mark.parametrize("module", list(EXAMPLES))
def test_furiosa_opt_examples_import(module):
    done = import_file(EXAMPLE_DIR / f"{module}.rs")
    assert [d.function for d in done if d.text is not None] == EXAMPLES[module]


def test_a_tuple_result_is_one_move_per_item():
    (d,) = import_file(EXAMPLE_DIR / "dma.rs", "dup_many")
    doc = yaml.safe_load(d.text)
    stores = [o for o in doc["ops"] if o["kind"] == "dma" and
              doc["tensors"][o["destination"]]["tier"] == "hbm"]
    assert [o["source"] for o in stores] == ["da", "db"] * 4


@pytest.mark.slow
@pytest.mark.parametrize("module,function", [(m, f) for m, fs in EXAMPLES.items()
                                             for f in fs])
def test_furiosa_opt_examples_plan_and_verify(module, function, tmp_path, capsys):
    (d,) = import_file(EXAMPLE_DIR / f"{module}.rs", function)
    f = tmp_path / "k.yaml"
    f.write_text(d.text)
    assert main(["solve", str(f), "--json", "-q", "--verify", "sample"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["status"], got["verified"]) == ("optimal", True)


@pytest.mark.parametrize("content,words", [
    ("fn f(ctx: &mut Context) { let x = " + "(" * 3000 + "1" + ")" * 3000 + "; }\n",
     "nested too deeply"),
    ("// x\n" * 300_000, "larger than 1,048,576 bytes"),
    (b"\xff\xfe fn", "not UTF-8"),
])
def test_hostile_files_are_refused_by_name(content, words, tmp_path, capsys):
    f = tmp_path / "k.rs"
    if isinstance(content, bytes):
        f.write_bytes(content)
    else:
        f.write_text(content)
    assert main(["import", str(f)]) == 2
    assert words in capsys.readouterr().err


def _sig(v):
    return 1 / (1 + np.exp(-v))


@pytest.mark.parametrize("steps,want", [
    ([{"fp_binary": {"op": "SubF", "mode": "Mode00", "operand": 1.0}}], lambda x, a, b: x - x),
    ([{"fp_binary": {"op": "AddF", "mode": "Mode11", "operand": {"vrf": "a"}}}],
     lambda x, a, b: a + a),
    ([{"fp_binary": {"op": "SubF", "mode": "Mode10", "operand": {"vrf": "a"}}}],
     lambda x, a, b: a - x),
    (["stash", {"fp_unary": "Sigmoid"}, {"fp_binary": {"op": "MulF(Mul0)", "operand": "stash"}}],
     lambda x, a, b: _sig(x) * x),
    ([{"fp_binary": {"op": "SubF", "operand": {"vrf": "a"}}},
      {"fp_binary": {"op": "MulF(Fma)", "operand": {"vrf": "b"}}}],
     lambda x, a, b: (x - a) * b),
    ([{"clip": {"op": "Add", "operand": -1.5}}, {"clip": {"op": "Max", "operand": {"vrf": "b"}}},
      {"fp_div": {"op": "DivF", "operand": 4.0}}], lambda x, a, b: np.maximum(x - 1.5, b) / 4),
    ([{"fp_binary": {"op": "MulF(Mul1)", "operand": {"vrf": "a"}}},
      {"fp_binary": {"op": "SubF", "mode": "Mode10", "operand": {"vrf": "b"}}},
      {"fp_unary": "Exp"}], lambda x, a, b: np.exp(b - x * a)),
])
def test_a_chain_s_formula_is_what_its_steps_compute(steps, want):
    """The importer's reference (planner/rust/formula.py), evaluated by tcplan's formula
    evaluator, against the steps computed here directly (each argument mode as the Vector
    Engine orders the stream and the operand)."""
    from tcplan.model.expr import evaluate, parse_formula
    from tcplan.planner.rust.formula import reference
    rng = np.random.default_rng(7)
    x, a, b = (rng.uniform(-2, 2, 16).astype(np.float32) for _ in range(3))
    text = reference([{"tag": "zero"}, *steps, "final"])
    f = parse_formula(text, "f32", {"a", "b"}, {"A": 16})
    got = evaluate(f, {"x": x, "a": a, "b": b}, ["A"])
    np.testing.assert_allclose(got, want(x, a, b), rtol=1e-5, atol=1e-6)


#: a kernel file's head for the small cases below: D a DM f32 tensor over H, V a VRF one
HEAD = """axes![H = 64];
type D = DmTensor<f32, m![1], m![1 # 2], m![1 # 256], m![H]>;
type V = VrfTensor<f32, m![1], m![1 # 2], m![1 # 256], m![H]>;
type O = HbmTensor<f32, m![1], m![H]>;
"""
P = "ctx.main.begin(d.view()).fetch::<m![H / 8], m![H % 8]>()"


def _one(tmp_path, body: str, args: str = "d: &D, o: &mut O") -> tuple[dict | None, str]:
    f = tmp_path / "k.rs"
    f.write_text(HEAD + f"fn k(ctx: &mut Context, {args}) {{\n{body}\n}}\n")
    (done,) = import_file(f)
    return (yaml.safe_load(done.text) if done.text else None), (done.text or done.reason)


@pytest.mark.parametrize("body,words", [
    ("let s;", "let s without a value"),
    ("let x: D = ctx.main.begin().fetch::<m![H / 8], m![H % 8]>().commit();",
     "begin() takes the tensor"),
    (f"{P}.commit_view();", "commit_view() takes the view"),
    ("d.view().to_hbm_view(&mut ctx.tdma);", "to_hbm_view() takes"),
    (f"let x: D = {P}.fetch_cast().commit();", "fetch_cast without its element type"),
    (f"let x: D = {P}.contract_outer::<m![H], m![1]>().commit();", "takes the TRF tensor"),
    ("let x: D = ctx.main.begin(o.view()).fetch::<m![H / 8], m![H % 8]>().commit();",
     "a Fetch reads a DM tensor"),
    ("let x: D = ctx.main.begin(d.view()).collect::<m![H / 8], m![H % 8]>().commit();",
     "before a fetch"),
    (f"let x: D = {P}.vector_final().commit();", "vector_final() without vector_init()"),
    ("let x: D = ctx.main.begin(d.view()).commit();", "commit() before a fetch"),
    (f"let x: D = {P}.vector_init().vector_fp_unary(FpUnaryOp::Exp).commit();",
     "commit() inside vector_init()"),
    (f"let x: D = {P}.switch::<m![1 # 256], m![H / 8]>(SwitchConfig::Broadcast1 "
     "{ slice1, slice0: 4 }).commit();", "is not a whole number"),
    ("let x = -d;", "a negated value that is not a number"),
])
def test_what_the_importer_cannot_read_is_left_out_with_its_reason(body, words, tmp_path):
    """Each is said (in the header, or as why nothing was imported), never a traceback."""
    _, text = _one(tmp_path, body + "\nd.view().to_hbm_view(&mut ctx.tdma, o.view_mut());")
    assert words in text


def test_a_block_s_names_end_with_it(tmp_path):
    doc, _ = _one(tmp_path, """let y: D = o.to_dm(&mut ctx.tdma);
{ let y: D = o.to_dm(&mut ctx.tdma); }
y.view().to_hbm_view(&mut ctx.tdma, o.view_mut());""")
    store = doc["ops"][-1]
    assert (store["source"], doc["ops"][0]["destination"]) == ("y", "y")


def test_vrf_operands_keep_their_own_names(tmp_path):
    """``v`` and ``v_vrf`` are two operands (two names), and a variable called ``x_vrf``
    does not become the chain's input ``x``."""
    doc, _ = _one(tmp_path, f"""let y: D = {P}.vector_init()
    .vector_fp_binary(FpBinaryOp::MulF(FpMulAlu::Mul0), &v)
    .vector_fp_binary(FpBinaryOp::AddF, &v_vrf)
    .vector_fp_binary(FpBinaryOp::SubF, &x_vrf).vector_final().commit();""",
                  "d: &D, v: &V, v_vrf: &V, x_vrf: &V")
    (chain,) = [o for o in doc["ops"] if o["kind"] == "chain"]
    assert chain["vrf"] == {"v": "v", "v_vrf": "v_vrf", "x_vrf": "x_vrf"}
    assert chain["reference"] == "((x * v) + v_vrf) - x_vrf"


def test_a_tile_written_then_read_is_one_tensor(tmp_path):
    doc, _ = _one(tmp_path, """d.view().to_hbm_view(&mut ctx.tdma, o.view_mut().tile::<m![H], 2, m![H / 2]>(1));
let z: DmTensor<f32, m![1], m![1 # 2], m![1 # 256], m![H / 2]> = o.tile::<m![H], 2, m![H / 2]>(1).to_dm(&mut ctx.tdma);""")
    store, load = doc["ops"]
    assert store["destination"] == load["source"] == "o_tile1"
    assert not doc["tensors"]["o_tile1"].get("given")


def test_paths_resolve_through_the_crate(tmp_path):
    """``use crate::...`` of the root's items, ``super::f`` and ``crate::a::f`` calls."""
    (tmp_path / "Cargo.toml").write_text("[package]\nname = 'k'\n")
    src = tmp_path / "src"
    (src / "k").mkdir(parents=True)
    (src / "lib.rs").write_text("axes![H = 64];\npub type Chip = m![1];\npub mod k;\n")
    (src / "k" / "mod.rs").write_text(
        "use crate::{Chip, H};\npub mod a;\n"
        "pub fn helper(ctx: &mut Context, x: &HbmTensor<f32, Chip, m![H]>) "
        "-> DmTensor<f32, Chip, m![1 # 2], m![1 # 256], m![H]> { x.to_dm(&mut ctx.tdma) }\n")
    (src / "k" / "a.rs").write_text(
        "use crate::*;\n"
        "fn f(ctx: &mut Context, x: &HbmTensor<f32, Chip, m![H]>, o: &mut HbmTensor<f32, Chip, "
        "m![H]>) {\n    let y = super::helper(ctx, x);\n    let z = crate::k::helper(ctx, x);\n"
        "    y.view().to_hbm_view(&mut ctx.tdma, o.view_mut());\n}\n")
    (done,) = import_file(src / "k" / "a.rs")
    assert "y = super::helper(): its moves are its own graph" in done.text
    assert "z = crate::k::helper(): its moves are its own graph" in done.text
    assert yaml.safe_load(done.text)["tensors"]["y"]["given"] is True
