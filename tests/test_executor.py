"""Executor: the six seed DMA examples execute, verify and hit the seed's cycle figures; the
verifier catches corrupted configs; memory rules; `tcplan verify`."""

import copy
import io
import json
import pathlib

import pytest

from tcplan.executor.run import run_dma
from tcplan.model.cost import dma_cycles
from tcplan.model.rules import TcplanError
from tcplan.planner.cli import main
from tcplan.planner.lowering import lower_problem
from tcplan.planner.spec import load_problem, load_problem_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "problems/seed"
SEED_CYCLES = {1: 628, 2: 66_036, 3: 131_572, 4: 655_860, 5: 1_857, 6: 1_192}
#: the acceptance tolerance (docs/decisions.md item 73: Example 4 has 12%, the others 10%) and
#: the gap each example has without needing an explanation (Example 4's is explained there:
#: the seed counts its 2,048 first row opens at 40 cycles; tests/test_hbm_rows.py)
TOLERANCE = {4: 0.12}
UNEXPLAINED = {4: 0.11}


@pytest.mark.parametrize("n", sorted(SEED_CYCLES))
def test_seed_examples_verify_and_time(n):
    p = load_problem(SEED / f"dma_example_{n}.yaml")
    plan = lower_problem(p)
    result = run_dma(p, plan, seed=n)  # full-size tensors (Example 4: 128 MiB, streamed)
    assert result["checked"] == result["moved"] or n == 5
    cycles = dma_cycles(plan).cycles
    want = SEED_CYCLES[n]
    assert abs(cycles - want) <= TOLERANCE.get(n, 0.10) * want  # the acceptance tolerance
    assert abs(cycles - want) <= UNEXPLAINED.get(n, 0.03) * want  # no unexplained gap
    assert cycles == p.expect["cycles"] or abs(cycles - p.expect["cycles"]) <= 0.03 * want


def test_cycle_breakdowns_name_their_causes():
    p4 = dma_cycles(lower_problem(load_problem(SEED / "dma_example_4.yaml")))
    assert p4.bottleneck == "HBM channels"
    assert any("row re-opens" in x and "x 40 cycles" in x and "first opens overlap" in x
               for x in p4.penalties)
    assert p4.hbm["first_opens"] == 2_048 and p4.hbm["reopens"] == 14_336
    p5 = dma_cycles(lower_problem(load_problem(SEED / "dma_example_5.yaml")))
    assert any("only 16 of 32 HBM channels" in x for x in p5.penalties)
    p6 = dma_cycles(lower_problem(load_problem(SEED / "dma_example_6.yaml")))
    assert max(e["commands"] for e in p6.engines) == 2  # the boundary DMN's two commands


def _corrupt(plan, how):
    bad = copy.deepcopy(plan)
    c = bad.engines[0].commands[0]
    if how == "stride":
        n, r, w = c.entries[0]
        c.entries[0] = (n, r, w + 1)
    elif how == "swap":  # swap the write side of two entries (swapping whole entries is legal)
        (n0, r0, w0), (n1, r1, w1) = c.entries[0], c.entries[1]
        c.entries[0], c.entries[1] = (n0, r0, w1), (n1, r1, w0)
    elif how == "base":
        c.write_base += 1
    return bad


@pytest.mark.parametrize("how", ["stride", "swap", "base"])
def test_verifier_catches_corrupted_configs(how):
    p = load_problem(SEED / "dma_example_1.yaml")
    plan = _corrupt(lower_problem(p), how)
    with pytest.raises(TcplanError) as ei:
        run_dma(p, plan, seed=3)
    assert ei.value.code in ("verify-mismatch", "memory-access")
    if ei.value.code == "verify-mismatch":
        assert "destination index" in ei.value.message and "expected" in ei.value.message


def test_bottom_padding_is_never_touched():
    p = load_problem_text("""
kind: dma
axes: {A: 4, B: 6}
source: {tier: hbm, element: 'm![A, B #{!} 8]'}
destination: {tier: hbm, address: 4096, element: 'm![A, B # 8]'}
stream: {time: 'm![A]', packet: 'm![B # 8]'}
""")
    plan = lower_problem(p)
    with pytest.raises(TcplanError) as ei:
        run_dma(p, plan)
    assert ei.value.code == "memory-access" and "Bottom padding" in ei.value.message


def test_dm_access_past_the_backed_slice():
    from tcplan.executor.memory import Memories
    mem = Memories()
    import numpy as np
    with pytest.raises(TcplanError) as ei:
        mem.space("dm", 0).read(np.array([512 * 1024]), 1)
    assert ei.value.code == "memory-access" and "512 KiB" in ei.value.message


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    return main(argv, stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_verify_cli():
    code, out, _ = run(["verify", str(SEED / "dma_example_1.yaml"), "--json", "--seed", "7"])
    assert code == 0
    obj = json.loads(out)
    assert obj["verified"] is True and obj["cycles"] == 628
    assert obj["breakdown"]["bottleneck"] and obj["breakdown"]["startup"] == 500
    code, out, _ = run(["verify", str(SEED / "dma_example_1.yaml")])
    assert code == 0 and "verified" in out and "cycles: 628" in out
    code, out, _ = run(["verify", str(ROOT / "tests/broken/unknown_key.yaml"), "--json"])
    assert code == 2 and json.loads(out)["error"]["code"] == "bad-problem"


def test_verify_cli_reports_a_rule_as_not_verified(tmp_path):
    f = tmp_path / "misaligned.yaml"
    f.write_text("""
kind: dma
axes: {A: 64, C: 12}
source: {tier: hbm, element: 'm![A, C]'}
destination: {tier: dm, slice: 'm![A]', element: 'm![C]'}
stream: {time: 'm![A]', packet: 'm![C]'}
""")
    code, out, _ = run(["verify", str(f), "--json"])
    obj = json.loads(out)
    assert code == 1 and obj["verified"] is False
    assert obj["error"]["code"] == "dma-hbm-dm-align"


@pytest.mark.parametrize("path", sorted(SEED.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_seed_problem_verifies(path):
    if path.stem == "dma_example_4":
        pytest.skip("executed in test_seed_examples_verify_and_time")
    code, out, err = run(["verify", str(path), "--json"])
    assert code == 0, (out, err)
    assert json.loads(out)["verified"] is True


def test_run_cli_on_user_data(tmp_path):
    import numpy as np
    src = (np.arange(8 * 8 * 256) % 251 - 120).astype(np.int8).reshape(8, 8, 256)
    f = tmp_path / "src.npy"
    np.save(f, src)
    out = tmp_path / "out"
    code, text, err = run(["run", str(SEED / "dma_example_1.yaml"), "--input",
                           f"source={f}", "--out", str(out)])
    assert code == 0, err
    dst = np.load(out / "destination.npy")
    assert dst.shape == (8, 8, 256) and np.array_equal(dst, src)  # the same tensor (A, B, C)
    # without an input the source comes from the seed, and the move still preserves it
    code, _, _ = run(["run", str(SEED / "dma_example_6.yaml"), "--out", str(out), "--seed", "4"])
    assert code == 0
    assert np.array_equal(np.load(out / "source.npy"), np.load(out / "destination.npy"))


@pytest.mark.parametrize("argv_tail,fragment", [
    (["--input", "source=/nonexistent.npy"], "cannot read /nonexistent.npy (No such file"),
    (["--input", "weights=x.npy"], "takes source=FILE.npy"),
])
def test_run_cli_bad_input(argv_tail, fragment):
    code, out, err = run(["run", str(SEED / "dma_example_1.yaml"), *argv_tail])
    assert code == 2 and fragment in err


def test_run_cli_wrong_shape(tmp_path):
    import numpy as np
    f = tmp_path / "bad.npy"
    np.save(f, np.zeros((3, 3), np.int8))
    code, out, err = run(["run", str(SEED / "dma_example_1.yaml"), "--input", f"source={f}",
                          "--out", str(tmp_path)])
    assert code == 2 and "expected an array of shape (8, 8, 256)" in err


def test_run_cli_redistribution_and_gather(tmp_path):
    import numpy as np
    out = tmp_path / "r"
    code, _, err = run(["run", str(SEED / "fused_redistribution.yaml"), "--out", str(out)])
    assert code == 0, err
    src, res = np.load(out / "source.npy"), np.load(out / "result.npy")
    assert src.shape == (4, 2, 4, 8, 8) and res.shape == (4, 2, 8)
    for t in range(4):  # out[t, k, d] = in[sources[t], 1 - k, t, [3, 7][k], d]
        for k in range(2):
            assert np.array_equal(res[t, k], src[[1, 2, 3, 0][t], 1 - k, t, [3, 7][k]])
    g = tmp_path / "g"
    code, _, err = run(["run", str(SEED / "gather_scaled.yaml"), "--out", str(g)])
    assert code == 0, err
    tab, idx, dst = (np.load(g / f"{n}.npy") for n in ("table", "index", "destination"))
    assert dst.shape == (128, 512)  # axes order K, D, G: the destination carries D, G
    rows = idx // 256  # scaled: byte offsets of 128 bf16 = 256-byte rows
    assert np.array_equal(dst.T.view(np.uint16), tab[rows].view(np.uint16))


def _problem(text):
    p = load_problem_text(text)
    return p, lower_problem(p)


def test_zero_padding_is_kept_and_checked():
    # moving Top-padding lanes into Zero padding would break its promise: the packet shrinks
    p, plan = _problem("""
kind: dma
axes: {A: 4, B: 6}
source: {tier: hbm, element: 'm![A, B # 8]'}
destination: {tier: hbm, address: 4096, element: 'm![A, B #{0} 8]'}
stream: {time: 'm![A]', packet: 'm![B # 8]'}
""")
    assert plan.packet == 6
    run_dma(p, plan)
    # and a plan that writes garbage into Zero padding is caught
    bad = copy.deepcopy(plan)
    c = bad.engines[0].commands[0]
    c.entries[-1] = (8, 1, 1)
    with pytest.raises(TcplanError) as ei:
        run_dma(p, bad)
    assert ei.value.code == "verify-mismatch" and "Zero padding" in ei.value.message


def test_two_tensors_bottom_padding_both_forbidden():
    p, plan = _problem("""
kind: dma
axes: {A: 4, B: 6}
source: {tier: hbm, element: 'm![A, B #{!} 8]'}
destination: {tier: hbm, address: 4096, element: 'm![A #{!} 8, B # 8]'}
stream: {time: 'm![A]', packet: 'm![B # 8]'}
""")
    with pytest.raises(TcplanError) as ei:
        run_dma(p, plan)
    assert ei.value.code == "memory-access" and "Bottom padding" in ei.value.message


def test_hbm_tensors_high_in_the_address_space():
    p, plan = _problem("""
kind: dma
axes: {A: 8, B: 256}
source: {tier: hbm, address: 40000000000, element: 'm![A, B]'}
destination: {tier: hbm, address: 45000000000, element: 'm![B, A]'}
stream: {time: 'm![A]', packet: 'm![B]'}
""")
    assert run_dma(p, plan)["checked"] == 2048


@pytest.mark.parametrize("how", ["duplicate", "stray"])
def test_extra_writes_are_caught(how):
    p = load_problem(SEED / "dma_example_1.yaml")
    plan = copy.deepcopy(lower_problem(p))
    e = plan.engines[0]
    c = e.commands[0]
    if how == "duplicate":
        e.commands.append(copy.deepcopy(c))
    else:  # a command that writes over the source region
        extra = copy.deepcopy(c)
        extra.write_base = 0
        e.commands.append(extra)
    with pytest.raises(TcplanError) as ei:
        run_dma(p, plan)
    assert ei.value.code == "verify-mismatch"


def test_run_cli_rejects_non_npy_inputs(tmp_path):
    import numpy as np
    z = tmp_path / "a.npz"
    np.savez(z, x=np.zeros(3))
    empty = tmp_path / "e.npy"
    empty.write_bytes(b"")
    for f in (z, empty):
        code, _, err = run(["run", str(SEED / "dma_example_1.yaml"), "--input",
                            f"source={f}", "--out", str(tmp_path)])
        assert code == 2 and "bad-request" in err and "Traceback" not in err
    code, _, err = run(["verify", str(SEED / "dma_example_1.yaml"), "--seed", "-1"])
    assert code == 2 and "not a seed" in err


def test_a_destination_with_bottom_padding_verifies_through_its_views():
    """A tile whose destination is padded with #{!} (as furiosa-opt writes tile views)
    verifies, every live element checked, and its Bottom bytes stay untouched: the check
    is a byte mask, so views that miss the padding keep the fast path
    (benchmarks/bench_bottom_padding.py times it against # padding)."""
    import tcplan
    text = """kind: dma
dtype: bf16
axes: {T: 1000, D: 120}
source: {tier: hbm, element: 'm![T, D]'}
destination: {tier: dm, slice: 'm![T / 8 #{!} 256]', element: 'm![T % 8, D #{!} 128]'}
stream: {time: free, packet: free}
"""
    r = tcplan.verify(tcplan.loads(text, "bottom.yaml"))
    assert r.verified and r.to_json()["checked"] == 1000 * 120
