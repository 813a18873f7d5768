"""The chain planner: the seed's planning examples, brute force over small formulas (every
(invocation, option) assignment, kept only when the chain validator accepts every chain and
the chains compute the formula on data), the named explanations, and the `solve` contract."""

import io
import itertools
import json
import pathlib

import numpy as np
import pytest

from tcplan.executor.chains import run_plan, verify_plan
from tcplan.model import vector as ve
from tcplan.model.rules import TcplanError
from tcplan.planner.chains import Plan, Solution, build, linearize, plan_expression
from tcplan.planner.cli import main
from tcplan.planner.spec import load_problem, load_problem_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXPRS = sorted((ROOT / "problems/expressions").glob("*.yaml")) + [
    p for p in sorted((ROOT / "problems/infeasible").glob("expr_*.yaml"))]

SMALL = """kind: expression
dtype: {dtype}
axes: {{A: 16}}
input: {{slice: '{slice}', time: 'm![1]', packet: '{packet}'}}
expression: '{expr}'
"""
TRIM = ("m![A / 2]", "m![A % 2 # 8]")  # 2 live lanes: narrow_trim
FULL = ("m![A / 8]", "m![A % 8]")  # 8 live lanes: narrow_split doubles the flits


def small(expr: str, dtype: str = "f32", lanes=TRIM):
    return load_problem_text(SMALL.format(dtype=dtype, expr=expr, slice=lanes[0],
                                          packet=lanes[1]), "<test>")


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    return main(argv, stdout=out, stderr=err), out.getvalue(), err.getvalue()


# ---- the seed's examples ---------------------------------------------------------------------
def test_exp_sqrt_chain_fits_one_invocation():
    plan = plan_expression(small("exp(sqrt(((x + 1) * 2) * 3))"))
    assert len(plan.chains) == 1
    # FpFma, FpMul0, FpMul1, FpFpu, FpExp (docs/hardware.md section 7)
    assert sorted(plan.analyses[0].alus) == sorted(["FpFma", "FpMul0", "FpMul1", "FpFpu",
                                                    "FpExp"])
    assert verify_plan(small("exp(sqrt(((x + 1) * 2) * 3))"), plan, 0)["verified"]


def test_tanh_sqrt_needs_two_invocations():
    p = small("tanh(sqrt(x))")
    plan = plan_expression(p)
    assert len(plan.chains) == 2
    assert [a.alus for a in plan.analyses] == [["FpFpu"], ["FpFpu"]]
    assert verify_plan(p, plan, 1)["verified"]


def test_three_multiplies_spread_over_three_alus():
    plan = plan_expression(small("((x * 2) * 3) * 5"))
    assert len(plan.chains) == 1
    assert sorted(plan.analyses[0].alus) == ["FpFma", "FpMul0", "FpMul1"]


def test_seed_staged_pipeline_is_found():
    p = small("max(sigmoid(x + 100), 0)", "i32")
    plan = plan_expression(p)
    kinds = [s.kind for s in plan.chains[0].steps]
    assert kinds == ["tag", "fxp", "fxp_to_fp", "narrow_trim", "fp_unary", "widen_pad",
                     "fp_to_fxp", "clip", "final"]
    assert verify_plan(p, plan, 0)["verified"]


def test_residual_max_uses_the_stash():
    plan = plan_expression(small("max(2 * x, x)"))
    kinds = [s.kind for s in plan.chains[0].steps]
    assert kinds == ["tag", "stash", "narrow_trim", "fp_binary", "widen_pad", "clip", "final"]


def test_full_lanes_prefer_the_eight_way_clip_add():
    # with 8 live lanes a 4-way section doubles the flits: x + 1 goes to ClipAdd
    plan = plan_expression(small("x + 1", lanes=FULL))
    assert plan.analyses[0].alus == ["ClipAdd"] and plan.cycles == 1 + 1


def test_pair_expressions():
    pair = """kind: expression
dtype: f32
axes: {A: 512, B: 2, I: 2}
input: {cluster: 'm![B]', slice: 'm![A / 2]', time: 'm![I]', packet: 'm![A % 2 # 8]'}
pair_axis: I
expression: 'EXPR'
"""
    for expr, alus in (("exp(group0) * group1", ["FpExp", "FpMul0"]),
                       ("exp(group0) * exp(group1)", ["FpExp", "FpMul0"]),
                       ("group1 - group0", ["FpFma"])):
        p = load_problem_text(pair.replace("EXPR", expr), "<pair>")
        plan = plan_expression(p)
        assert len(plan.chains) == 1 and plan.analyses[0].alus == alus, expr
        assert verify_plan(p, plan, 2)["verified"], expr
    # exp on both groups is one merged step (one FpExp)
    p = load_problem_text(pair.replace("EXPR", "exp(group0) * exp(group1)"), "<pair>")
    steps = plan_expression(p).chains[0].steps
    assert [s.groups for s in steps if s.kind == "fp_unary"] == [(True, True)]


# ---- brute force ------------------------------------------------------------------------------
def _merge_sets(spine, choice):
    """Every set of non-crossing one-to-one merges of the groups' ops with the same step."""
    if not spine.pair:
        return [{}]
    g0 = [i for i, op in enumerate(spine.ops) if op.group == 0]
    g1 = [i for i, op in enumerate(spine.ops) if op.group == 1]
    cand = [(a, b) for a in g0 for b in g1
            if (choice[a].kind, choice[a].op, choice[a].mode)
            == (choice[b].kind, choice[b].op, choice[b].mode)]
    out = []
    for k in range(len(cand) + 1):
        for sub in itertools.combinations(cand, k):
            a_s, b_s = [a for a, _ in sub], [b for _, b in sub]
            if len(set(a_s)) < k or len(set(b_s)) < k:
                continue
            if any(a1 < a2 and b1 > b2 for a1, b1 in sub for a2, b2 in sub):
                continue
            out.append(dict(sub))
    return out


def brute_force(p):
    """Every (invocation, option, merge) assignment; valid = every chain passes the validator
    and the chains compute the formula. Returns (min cycles, invocations of that plan)."""
    f = p.spec.expression
    spine = linearize(f, set())
    n = len(spine.ops)
    best = None
    stream = p.tensors["input"]
    fixed = spine.zip_at + 1 if spine.pair else 1
    for steps in itertools.product((0, 1), repeat=max(n - fixed, 0)):
        inv = [0] * min(fixed, n)
        for s in steps:
            inv.append(inv[-1] + s)
        for choice in itertools.product(*(op.options for op in spine.ops)):
            for merged in _merge_sets(spine, choice):
                sol = Solution("brute", inv, list(choice), 0, merged)
                try:
                    chains = build(spine, sol, stream, p.axes, {}, p.spec.pair_axis)
                    analyses = [ve.analyze(c) for c in chains]
                except TcplanError:
                    continue
                cycles = sum(a.cycles for a in analyses)
                if best is not None and cycles >= best[0]:
                    continue
                plan = Plan(chains, analyses, sol)
                try:
                    verify_plan(p, plan, 0)
                except TcplanError:
                    continue
                best = (cycles, len(chains))
    return best


BRUTE = [("exp(sqrt(x + 1))", "f32", TRIM), ("tanh(sqrt(x))", "f32", TRIM),
         ("max(2 * x, x)", "f32", TRIM), ("x * x", "f32", TRIM), ("abs(x) + 1", "f32", FULL),
         ("sigmoid(x) * 3 - 1", "f32", TRIM), ("max(tanh(x), 0)", "f32", FULL),
         ("1 / (x + 2)", "f32", TRIM), ("sqrt(x) / 3", "f32", FULL),
         ("exp(exp(x))", "f32", TRIM), ("(x * 2) * (x * 2)", "f32", TRIM),
         ("max(sigmoid(x + 100), 0)", "i32", TRIM), ("(x + 1) * 3 - 7", "i32", FULL),
         ("max(x, 0 - x)", "i32", FULL), ("(x << 2) >> 1", "i32", FULL),
         ("max(x + 100, x)", "i32", FULL), ("max(x * 2, 0) >> 1", "i32", FULL),
         ("x * x * x", "f32", FULL), ("fma(x, x, 1)", "f32", TRIM), ("x - x", "f32", FULL),
         ("x ^ 0x80000000", "f32", TRIM), ("tanh(sqrt(x)) * sqrt(x)", "f32", TRIM),
         ("sigmoid(x) + sigmoid(x)", "i32", TRIM), ("-x", "i32", FULL)]
PAIR_SMALL = """kind: expression
dtype: {dtype}
axes: {{A: 16, I: 2}}
input: {{slice: 'm![A / 2]', time: 'm![I]', packet: 'm![A % 2 # 8]'}}
pair_axis: I
expression: '{expr}'
"""
BRUTE_PAIR = [("exp(group0) * group1", "f32"), ("exp(group0) * exp(group1)", "f32"),
              ("(group0 + 1) * (group1 - 1)", "i32"), ("group0 * 10 + group1 * 3", "i32"),
              ("max(group1 - group0, 0)", "f32"), ("(group0 + group1) * (group0 + group1)",
                                                  "f32")]


@pytest.mark.parametrize("expr, dtype", BRUTE_PAIR, ids=[b[0] for b in BRUTE_PAIR])
def test_pair_planner_matches_brute_force(expr, dtype):
    p = load_problem_text(PAIR_SMALL.format(dtype=dtype, expr=expr), "<pair>")
    want = brute_force(p)
    assert want is not None
    plan = plan_expression(p)
    assert (plan.cycles, len(plan.chains)) == want, expr
    assert plan.solution.objective == plan.cycles


@pytest.mark.parametrize("expr, dtype, lanes", BRUTE, ids=[b[0] for b in BRUTE])
def test_planner_matches_brute_force(expr, dtype, lanes):
    p = small(expr, dtype, lanes)
    want = brute_force(p)
    assert want is not None
    plan = plan_expression(p)
    assert (plan.cycles, len(plan.chains)) == want, expr
    # the CP-SAT objective is the chain cycle model, exactly
    assert plan.solution.objective == plan.cycles


def test_brute_force_can_fail():
    # a wrong formula for the same chains: the brute force's numeric check rejects them
    p = small("max(2 * x, x)")
    plan = plan_expression(p)
    p2 = small("max(3 * x, x)")
    with pytest.raises(TcplanError):
        verify_plan(p2, plan, 0)


# ---- explanations --------------------------------------------------------------------------------
@pytest.mark.parametrize("expr, dtype, code, words", [
    ("abs(x)", "i32", "plan-no-alu", "max(x, 0 - x)"),
    ("x / 3", "i32", "plan-no-alu", "no Vector Engine ALU divides integers"),
    ("max(tanh(sqrt(x)), x)", "f32", "plan-stash-reach", "VRF operand"),
    ("exp(x) * sqrt(x)", "f32", "plan-two-streams", "VRF operand"),
    ("max(exp(sqrt(x)), sqrt(x))", "i32", "plan-two-streams", "neither is an earlier"),
])
def test_explanations(expr, dtype, code, words):
    with pytest.raises(TcplanError) as e:
        plan_expression(small(expr, dtype))
    v = e.value.violations[0]
    assert v.rule == code and e.value.kind == "hardware"
    assert words in v.message + v.fix


def test_plan_is_deterministic():
    a = plan_expression(small("sigmoid(x) * 3 - 1")).chains_json()
    b = plan_expression(small("sigmoid(x) * 3 - 1")).chains_json()
    assert a == b


# ---- problems and the CLI contract ---------------------------------------------------------------
def test_expression_library_size():
    good = [p for p in EXPRS if "error" not in load_problem(p).expect]
    assert len(good) >= 5 and len(EXPRS) - len(good) >= 2


@pytest.mark.parametrize("path", EXPRS, ids=lambda p: p.stem)
def test_expression_problems_solve_as_expected(path):
    p = load_problem(path)
    code, out, err = run(["solve", str(path), "--json"])
    r = json.loads(out)
    assert set(r) >= {"status", "cycles", "plan", "verified"}
    if "error" in p.expect:
        assert code == 1 and r["status"] == "infeasible", (out, err)
        assert r["explanation"]["code"] == p.expect["error"]
        assert r["plan"] is None
        return
    assert code == 0, (out, err)
    assert r["status"] == p.expect["status"] and r["verified"] is True
    assert r["invocations"] == p.expect["invocations"] == len(r["plan"])
    if "cycles" in p.expect:
        assert r["cycles"] == p.expect["cycles"]
    assert r["cycles"] == sum(c["cycles"] for c in r["plan"])


def test_solve_text_and_bad_input(tmp_path):
    code, out, _ = run(["solve", str(ROOT / "problems/expressions/expr_tanh_sqrt.yaml")])
    assert code == 0 and "2 Tensor Unit invocation(s)" in out and "verified" in out
    code, out, _ = run(["solve", str(ROOT / "problems/seed/chip_shuffle.yaml")])
    assert code == 2  # nothing to plan in a redistribution
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMALL.format(dtype="f32", expr="exp(x", slice=TRIM[0], packet=TRIM[1]))
    code, out, err = run(["solve", str(bad), "--json"])
    assert code == 2 and json.loads(out)["error"]["code"] == "bad-problem"
    code, out, err = run(["solve", str(bad), "--time-limit", "-1"])
    assert code == 2


def test_run_plan_on_given_data():
    p = small("(x + 1) * 3 - 7", "i32", FULL)
    plan = plan_expression(p)
    x = np.arange(16, dtype=np.int32) - 8
    r = run_plan(p, plan, 0, x)
    assert np.array_equal(r["out"], (x + 1) * 3 - 7)


def test_pair_explanations_name_the_clash():
    p = load_problem_text(PAIR_SMALL.format(dtype="f32", expr="tanh(group0) * sqrt(group1)"),
                          "<pair>")
    with pytest.raises(TcplanError) as e:
        plan_expression(p)
    assert e.value.code == "plan-pair" and "FpFpu" in e.value.message


def test_vrf_operands_in_plans():
    text = SMALL.format(dtype="f32", expr="x - v", slice=FULL[0], packet=FULL[1]) + \
        "vrf:\n  v: {slice: 'm![A / 8]', element: 'm![A % 8]', cluster: 'm![1]'}\n"
    p = load_problem_text(text, "<vrf>")
    plan = plan_expression(p)
    assert verify_plan(p, plan, 0)["verified"] and len(plan.chains) == 1
    bad = load_problem_text(text.replace("'x - v'", "'x * (v + 1)'"), "<vrf>")
    with pytest.raises(TcplanError) as e:
        plan_expression(bad)
    assert e.value.code == "plan-two-streams"


def test_pair_axis_must_be_a_time_term(tmp_path):
    bad = tmp_path / "q.yaml"
    bad.write_text(PAIR_SMALL.format(dtype="f32", expr="group0 * group1").replace(
        "time: 'm![I]'", "time: 'm![1]', cluster: 'm![I]'"))
    code, out, _ = run(["solve", str(bad), "--json"])
    assert code == 2 and "pair_axis" in json.loads(out)["error"]["message"]
