"""DMA lowering: the seed's six worked examples, entry by entry (seed 002; docs/hardware.md
R5-R9)."""

import io
import json
import pathlib

import pytest

from tcplan.model import dma
from tcplan.model.rules import TcplanError
from tcplan.planner.cli import main
from tcplan.planner.spec import load_problem, load_problem_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "problems/seed"
SYMBOLS = {"slice_stride": 2**22, "DMN_stride": 2**27}  # docs/hardware.md R10


def plan_of(n):
    p = load_problem(SEED / f"dma_example_{n}.yaml")
    t = p.tensors
    return p, dma.lower(t["source"], t["destination"], t["stream"], p.chips,
                        p.spec.engine_at)


def resolve(entries):
    return [(n, SYMBOLS.get(s, s)) for n, s in entries]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_seed_sequencers(n):
    p, plan = plan_of(n)
    assert plan.read.entries_bytes == resolve(p.expect["read"])
    assert plan.write.entries_bytes == resolve(p.expect["write"])
    assert plan.packet_bytes == p.expect["packet"] == 256
    # the unified sequencer pairs them entry by entry
    assert [(e[0], e[1], e[2]) for e in plan.unified] == [
        (a[0], a[1], b[1]) for a, b in zip(plan.read.entries, plan.write.entries)]
    assert plan.homogeneous


@pytest.mark.parametrize("n", [1, 2, 3])
def test_single_engine_bases(n):
    p, plan = plan_of(n)
    assert len(plan.engines) == 1
    e = plan.engines[0]
    want = p.expect["engines"][0]
    assert (e.read_base, e.write_base) == (want["read_base"], want["write_base"])
    assert e.engine == (0, 0, 0)


@pytest.mark.parametrize("n", [4, 5])
def test_eight_engines_and_their_bases(n):
    _, plan = plan_of(n)
    engines = {(e.cluster, e.pair): e for e in plan.engines}
    assert sorted(engines) == [(i, j) for i in range(2) for j in range(4)]
    for (i, j), e in engines.items():
        assert e.read_base == i * 2**20 + j * 2**18  # HBM @ (i * 2^20 + j * 2^18)
        # DM @ (cluster_i, dmn_j, 0): DMN pair j starts at slice 64 j
        assert e.write_base == i * 2**30 + j * 64 * 2**22
        assert len(e.commands) == 1


def test_example_3_read_stride_of_b_is_256():
    # docs/hardware.md R5: the seed prints `B -> 256 : 1`; from m![A % 4, B, C] it is 256
    _, plan = plan_of(3)
    assert plan.read.entries[0] == (256, 256)


def test_example_6_heterogeneous_commands():
    p, plan = plan_of(6)
    assert not plan.homogeneous
    by = {e.engine: e for e in plan.engines}
    assert sorted(by) == [(c, k, j) for c in range(4) for k in range(2) for j in range(4)]
    for (_, cluster, pair), e in by.items():
        # the HBM destination m![D % 2, B, A, C]: this engine writes A = 4 pair onward
        assert e.write_base == cluster * 32 * 15 * 256 + 4 * pair * 256
        assert e.read_base == cluster * 2**30 + pair * 64 * 2**22
        if pair < 3:  # DMNs 0-2: one command, A' % 2, B, A' / 2 % 2 and C in full
            (c,) = e.commands
            assert c.entries == [(2, 256, 256), (32, 2**22, 15 * 256), (2, 2**27, 512),
                                 (256, 1, 1)]
            assert c.covers == {}
        else:  # DMN 3: A' = 12..14 (15 is padding): two commands
            c0, c1 = e.commands
            # exec #0: A' = 12, 13 (A' / 2 % 2 = 0)
            assert c0.entries == [(2, 256, 256), (32, 2**22, 15 * 256), (256, 1, 1)]
            assert (c0.read_base, c0.write_base) == (e.read_base, e.write_base)
            assert list(c0.covers.values()) == [(0, 1)]
            # exec #1: A' = 14 (A' % 2 = 0, A' / 2 % 2 = 1)
            assert c1.entries == [(32, 2**22, 15 * 256), (256, 1, 1)]
            assert list(c1.covers.values()) == [(0, 1), (1, 2)]
            assert c1.read_base == e.read_base + 2**27  # A' / 2 % 2 = 1: the next DMN
            assert c1.write_base == e.write_base + 2 * 256  # A = 14
    # what the commands cover: every A in 0..14 exactly once per (chip, cluster).  Time is
    # (A' % 2 [entry 0], B [entry 1], A' / 2 % 2 [entry 2]); covers narrows entries 0 and 2
    covered = []
    for pair in range(4):
        for c in by[(0, 0, pair)].commands:
            r = {int(k.split(":")[0]): v for k, v in c.covers.items()}
            d1s, d2s = range(*r.get(0, (0, 2))), range(*r.get(2, (0, 2)))
            covered += [4 * pair + 2 * d2 + d1 for d1 in d1s for d2 in d2s]
    assert sorted(covered) == list(range(15))


def test_alignment_rules():
    base = """
format: 1
kind: dma
dtype: i8
axes: {A: 64, C: 12}
source: {tier: hbm, element: 'm![A, C]'}
destination: {tier: dm, slice: 'm![A]', element: 'm![C]'}
stream: {slice: 'm![1]', time: 'm![A]', packet: 'm![C]'}
"""
    p = load_problem_text(base)
    with pytest.raises(TcplanError) as ei:
        dma.lower(p.tensors["source"], p.tensors["destination"], p.tensors["stream"], 1)
    assert ei.value.code == "dma-hbm-dm-align"  # 12-byte rows and packets
    fixed = (base.replace("element: 'm![A, C]'", "element: 'm![A, C # 16]'")
             .replace("element: 'm![C]'", "element: 'm![C # 16]'")
             .replace("packet: 'm![C]'", "packet: 'm![C # 16]'"))
    p = load_problem_text(fixed)
    plan = dma.lower(p.tensors["source"], p.tensors["destination"], p.tensors["stream"], 1)
    assert plan.packet_bytes == 16
    assert plan.read.entries == [(64, 16), (16, 1)]
    assert plan.write.entries == [(64, 2**22), (16, 1)]


def test_engine_count_rule():
    p = load_problem_text("""
kind: dma
axes: {A: 64, C: 256}
source: {tier: hbm, element: 'm![A, C]'}
destination: {tier: dm, slice: 'm![A]', element: 'm![C]'}
stream: {slice: 'm![A / 8]', time: 'm![A % 8]', packet: 'm![C]'}
""")
    with pytest.raises(TcplanError) as ei:
        dma.lower(p.tensors["source"], p.tensors["destination"], p.tensors["stream"], 1)
    assert ei.value.code == "dma-engines"


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    return main(argv, stdout=out, stderr=err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize("n", range(1, 7))
def test_lower_cli(n):
    code, out, _ = run(["lower", str(SEED / f"dma_example_{n}.yaml"), "--json"])
    assert code == 0
    obj = json.loads(out)
    assert obj["kind"] == "dma" and obj["packet_bytes"] == 256
    code, out, _ = run(["lower", str(SEED / f"dma_example_{n}.yaml")])
    assert code == 0 and "unified = [" in out


def test_lower_cli_table_uses_the_seed_symbols():
    _, out, _ = run(["lower", str(SEED / "dma_example_2.yaml")])
    assert "A / 4 % 32 -> 32 : slice_stride," in out
    assert "A / 128    -> 2 : DMN_stride," in out


def test_engine_at_overrides_the_default_engine():
    text = (SEED / "dma_example_3.yaml").read_text()
    p = load_problem_text(text)
    plan = dma.lower(p.tensors["source"], p.tensors["destination"], p.tensors["stream"], 1)
    assert plan.engines[0].engine == (0, 0, 0)  # local to the source's first slice
    p = load_problem_text(text + "engine_at: {chip: 0, cluster: 1, pair: 2}\n")
    plan = dma.lower(p.tensors["source"], p.tensors["destination"], p.tensors["stream"], 1,
                     p.spec.engine_at)
    assert plan.engines[0].engine == (0, 1, 2)
