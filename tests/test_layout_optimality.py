"""The layout planner's plan is the cheapest of every plan: 20 generated problems with 3 to 7
free factors (pieces), each enumerated exhaustively (every order of the pieces times every
Packet split, lowered by the DMA lowering, costed by the analytic estimate) and compared with
the planner's choice.  The enumeration is itertools, not the planner's CP-SAT model; it runs
in two worker processes (the machine has two cores)."""

import itertools
import random
from concurrent.futures import ProcessPoolExecutor

from tcplan.model import dma
from tcplan.model.cost import estimate
from tcplan.model.mapping import parse
from tcplan.model.rules import TcplanError
from tcplan.model.tiers import Tensor
from tcplan.planner.layout import FreeElement, SearchRequest, candidate_pieces, search
from tcplan.planner.outcome import Found, unwrap
from tcplan.planner.spec import load_problem_text

#: pieces of the generated problems: 20 problems, up to 7 free factors
SIZES = [3] * 4 + [4] * 4 + [5] * 4 + [6] * 4 + [7] * 2 + [3, 4]


def _terms(rng: random.Random, axes: dict[str, int], split: set[str]) -> list[str]:
    out = []
    for a, v in axes.items():
        if a in split and v >= 4:
            s = rng.choice([d for d in (2, 4) if d < v])
            out += [f"{a} / {s}", f"{a} % {s}"]
        else:
            out.append(a)
    rng.shuffle(out)
    return out


def problem_text(seed: int, want: int) -> str:
    """A random HBM -> DM (or HBM -> HBM) transfer whose free stream has ``want`` pieces:
    both sides split random axes at different digits, in random orders, with one common
    innermost axis (without it no packet is contiguous on both sides and, below 8 bytes,
    nothing aligns: most such problems are infeasible, which a few of them still are).  The
    last two problems are larger than one HBM row (2 MiB), where the order changes the row
    switches."""
    rng = random.Random(seed)
    big = seed >= len(SIZES) - 2
    while True:
        names = ["A", "B", "C", "D"][:rng.choice([3] if big else [2, 3, 4] if want <= 4
                                                   else [3, 4])]
        axes = {a: rng.choice([128, 256] if big else [4, 8, 16]) for a in names}
        hbm = not big and want < 7 and rng.random() < 0.25
        slice_axis = None if hbm else names[0]
        if slice_axis is not None:
            axes[slice_axis] = 64 if big else axes[slice_axis]
        inner = names[-1]
        rest = {a: v for a, v in axes.items() if a != slice_axis}
        src = _terms(rng, {a: v for a, v in axes.items() if a != inner},
                     set(rng.sample(names, rng.randint(0, len(names))))) + [inner]
        dst = _terms(rng, {a: v for a, v in rest.items() if a != inner},
                     set(rng.sample(list(rest), rng.randint(0, len(rest))))) + [inner]
        dest = (f"{{tier: hbm, address: 1048576, element: 'm![{', '.join(dst)}]'}}" if hbm
                else f"{{tier: dm, slice: 'm![{slice_axis} # 64]', "
                     f"element: 'm![{', '.join(dst)}]'}}")
        text = f"""kind: dma
dtype: {rng.choice(['i32', 'bf16', 'i8'] if not big else ['i32', 'bf16'])}
axes: {{{', '.join(f'{a}: {v}' for a, v in axes.items())}}}
source: {{tier: hbm, element: 'm![{', '.join(src)}]'}}
destination: {dest}
stream: {{time: free, packet: free}}
"""
        p = load_problem_text(text, f"<generated {seed}>")
        t = p.tensors
        if len(candidate_pieces(t["source"], t["destination"], t["stream"])[0]) == want:
            return text


def _signature(plan) -> tuple:
    """What the estimate reads of a plan (it is a pure function of it)."""
    return (plan.elem_bytes, plan.pcie, tuple(
        (e.read_chip, e.write_chip, tuple((tuple(c.entries), c.read_base, c.write_base,
                                           c.packet) for c in e.commands))
        for e in plan.engines))


def enumerate_all(seed: int) -> tuple[int | None, int, int]:
    """(the least estimate over every legal plan or None, plans, legal plans)."""
    p = load_problem_text(problem_text(seed, SIZES[seed]), f"<generated {seed}>")
    t = p.tensors
    pieces, _ = candidate_pieces(t["source"], t["destination"], t["stream"])
    axes = dict(p.axes)
    best, plans, legal = None, 0, 0
    memo: dict[tuple, int] = {}
    for order in itertools.permutations(range(len(pieces))):
        terms = [pieces[i].term() for i in order]
        for k in range(len(pieces) + 1):
            plans += 1
            dims = dict(t["stream"].dims)
            dims["time"] = parse("m![" + (", ".join(terms[:len(terms) - k]) or "1") + "]",
                                 axes)
            dims["packet"] = parse("m![" + (", ".join(terms[len(terms) - k:]) or "1") + "]",
                                   axes)
            try:
                plan = dma.lower(t["source"], t["destination"],
                                 Tensor("stream", "stream", t["source"].dtype, dims), p.chips)
            except TcplanError:
                continue
            legal += 1
            key = _signature(plan)
            if key not in memo:
                memo[key] = estimate(plan).cycles
            best = memo[key] if best is None else min(best, memo[key])
    return best, plans, legal


def test_generated_problems_have_up_to_seven_free_factors():
    assert len(SIZES) >= 20 and max(SIZES) == 7


def test_planner_plan_is_the_cheapest_of_every_plan():
    with ProcessPoolExecutor(2) as pool:
        truth = list(pool.map(enumerate_all, range(len(SIZES))))
    feasible = 0
    for seed, (want, plans, legal) in enumerate(truth):
        p = load_problem_text(problem_text(seed, SIZES[seed]), f"<generated {seed}>")
        t = p.tensors
        assert plans == sum(len(list(itertools.permutations(range(SIZES[seed]))))
                            for _ in range(SIZES[seed] + 1))
        out = search(SearchRequest(t["source"], t["destination"], t["stream"], p.chips))
        if not isinstance(out, Found):
            assert want is None, (seed, want, out)
            continue
        got = out.record
        feasible += 1
        assert out.status == "optimal", seed
        assert got.best.cycles == want, (seed, SIZES[seed], got.best.cycles, want)
        assert estimate(got.best.plan).cycles == want
        # the model proposed few plans: the floor prunes the rest
        assert got.enumerated <= legal
    assert feasible >= 14  # most generated problems have a plan


def free_element_text(seed: int) -> str:
    """A random HBM -> DM transfer whose destination Element order is free too."""
    rng = random.Random(1000 + seed)
    names = ["A", "B", "C", "D"][:rng.choice([3, 4])]
    axes = {a: rng.choice([4, 8, 16]) for a in names}
    src = _terms(rng, axes, set(rng.sample(names, rng.randint(0, 1))))
    return f"""kind: dma
dtype: {rng.choice(['i32', 'bf16', 'i8'])}
axes: {{{', '.join(f'{a}: {v}' for a, v in axes.items())}}}
source: {{tier: hbm, element: 'm![{', '.join(src)}]'}}
destination: {{tier: dm, slice: 'm![{names[0]} # 64]', element: free}}
stream: {{time: free, packet: free}}
"""


def _every_plan(p, destination, align: int | None = None) -> tuple[int | None, int]:
    """(least estimate over every Element order x stream order x Packet split into this
    destination (its Element free), plans); with ``align``, only Element orders whose rows
    (every Element stride above one element) are multiples of it."""
    t = p.tensors
    pieces, _ = candidate_pieces(t["source"], destination, t["stream"])
    element = [x for x in pieces if any(f.axis == x.axis and f.lo <= x.lo
                                        and x.hi <= f.lo * f.count
                                        for f in destination.dims["element"].factors)]
    axes = dict(p.axes)
    best, plans = None, 0
    for e_order in itertools.permutations(element):
        dims = dict(destination.dims)
        dims["element"] = parse("m![" + ", ".join(x.term() for x in e_order) + "]", axes)
        dst = Tensor("destination", "dm", destination.dtype, dims, destination.address)
        if align is not None:
            strides, step = [], dst.elem_bytes
            for x in reversed(e_order):
                strides.append(step)
                step *= x.count
            if any(s > dst.elem_bytes and s % align for s in strides):
                continue
        c, n = _stream_plans(p, dst, pieces)
        plans += n
        if c is not None:
            best = c if best is None else min(best, c)
    return best, plans


def enumerate_free_element(seed: int) -> tuple[int | None, int]:
    p = load_problem_text(free_element_text(seed), f"<free element {seed}>")
    return _every_plan(p, p.tensors["destination"])


FREE_SLICE = """kind: dma
dtype: {dtype}
axes: {{A: 64, B: {b}, C: 8}}
source: {{tier: hbm, element: 'm![{src}]'}}
destination: {{tier: dm, slice: free, element: free}}
stream: {{time: free, packet: free}}
"""
SLICE_CASES = [("i32", 4, "A, B, C"), ("bf16", 2, "B, A, C"), ("i8", 4, "C, A, B")]


def enumerate_free_slice(case: int) -> tuple[int | None, int, int]:
    """(least estimate over every Slice candidate x Element order x stream plan, plans,
    Slice candidates)."""
    dtype, b, src = SLICE_CASES[case]
    p = load_problem_text(FREE_SLICE.format(dtype=dtype, b=b, src=src), f"<free slice {case}>")
    best, plans = None, 0
    cands = p.spec.free_slice.candidates
    for cand in cands:
        c, n = _every_plan(p, cand.destination)
        plans += n
        if c is not None:
            best = c if best is None else min(best, c)
    return best, plans, len(cands)


def test_free_slice_plan_is_the_cheapest_of_every_plan():
    from tcplan.planner.dma_plan import plan_free
    with ProcessPoolExecutor(2) as pool:
        truth = list(pool.map(enumerate_free_slice, range(len(SLICE_CASES))))
    for case, (want, plans, n_cands) in enumerate(truth):
        dtype, b, src = SLICE_CASES[case]
        p = load_problem_text(FREE_SLICE.format(dtype=dtype, b=b, src=src), "<free slice>")
        assert n_cands == 2  # m![A] and m![A / 2 # 64]
        out = plan_free(p)
        if not isinstance(out, Found):
            assert want is None, (case, out)
            continue
        found = out.record
        assert found.best.cycles == want, (case, found.best.cycles, want, plans)


def test_free_element_plan_is_the_cheapest_of_every_plan():
    from tcplan.planner.dma_plan import plan_free
    with ProcessPoolExecutor(2) as pool:
        truth = list(pool.map(enumerate_free_element, range(6)))
    feasible = 0
    for seed, (want, plans) in enumerate(truth):
        p = load_problem_text(free_element_text(seed), f"<free element {seed}>")
        assert p.spec.free_element == FreeElement(p.spec.free_element.terms, ())
        out = plan_free(p)
        if not isinstance(out, Found):
            assert want is None, (seed, want, out)
            continue
        found = out.record
        feasible += 1
        assert out.status == "optimal" and found.best.cycles == want, (
            seed, found.best.cycles, want, plans)
        assert found.best.element is not None
    assert feasible >= 4


def _stream_plans(p, dst, pieces=None) -> tuple[int | None, int]:
    """(least estimate over every stream order x Packet split into a given destination,
    plans)."""
    t = p.tensors
    if pieces is None:
        pieces, _ = candidate_pieces(t["source"], dst, t["stream"])
    best, plans = None, 0
    for order in itertools.permutations(pieces):
        terms = [x.term() for x in order]
        for k in range(len(pieces) + 1):
            plans += 1
            sd = dict(t["stream"].dims)
            sd["time"] = parse("m![" + (", ".join(terms[:len(terms) - k]) or "1") + "]",
                               p.axes)
            sd["packet"] = parse("m![" + (", ".join(terms[len(terms) - k:]) or "1") + "]",
                                 p.axes)
            try:
                plan = dma.lower(t["source"], dst,
                                 Tensor("stream", "stream", t["source"].dtype, sd), 1)
            except TcplanError:
                continue
            c = estimate(plan).cycles
            best = c if best is None else min(best, c)
    return best, plans


def test_free_padding_plan_is_the_cheapest_of_every_candidate():
    import pathlib

    from tcplan.planner.dma_plan import plan_free
    from tcplan.planner.spec import load_problem
    p = load_problem(pathlib.Path(__file__).parents[1]
                     / "problems/planning/free_padding_rows.yaml")
    cands = p.spec.free_slice.candidates
    assert [c.label for c in cands] == ["m![B, C]", "m![B, C # 6]", "m![B, C # 8]",
                                        "m![B, C # 16]"]
    costs = [_stream_plans(p, c.destination)[0] for c in cands]
    assert costs[0] is None  # 5-byte rows: nothing aligns
    found = unwrap(plan_free(p))
    assert found.best.cycles == min(c for c in costs if c is not None)
    assert found.best.plan.destination.dims["element"].text() == "m![B, C # 8]"


def test_alignment_bound_plan_is_the_cheapest_of_every_aligned_plan():
    """bounds.align_bytes on a free Element: the planner's plan is the cheapest of the plans
    whose Element rows are multiples of the bound (brute force), and a bound no order meets
    is the whole conflict."""
    from tcplan.planner.explain import explain
    from tcplan.planner.dma_plan import plan_free
    feasible = 0
    for case in range(3):
        dtype, b, src = SLICE_CASES[case]
        text = FREE_SLICE.format(dtype=dtype, b=b, src=src).replace(
            "slice: free", "slice: 'm![A]'") + "bounds: {align_bytes: 16}\n"
        p = load_problem_text(text, f"<aligned {case}>")
        want, _ = _every_plan(p, p.tensors["destination"], align=16)
        out = plan_free(p)
        if not isinstance(out, Found):
            assert want is None and out.error.code == "plan-no-layout", case
            continue
        found = out.record
        feasible += 1
        assert found.best.cycles == want, (case, found.best.cycles, want)
    assert feasible
    p = load_problem_text(FREE_SLICE.format(dtype="i8", b=4, src="A, B, C").replace(
        "slice: free", "slice: 'm![A]'") + "bounds: {align_bytes: 64}\n", "<aligned 64>")
    code, rep = explain(p)  # rows of at most 8 bytes cannot sit on 64-byte multiples
    assert code == 1 and [it["requirement"] for it in rep["conflict"]] == [
        "bound:align_bytes"]
    assert unwrap(plan_free(p, relax=frozenset({"bound:align_bytes"}))).candidates


FREE_ENGINES = """kind: dma
dtype: {dtype}
axes: {{A: 64, B: 4, C: {c}}}
source: {{tier: hbm, element: 'm![{src}]'}}
destination: {{tier: dm, slice: 'm![A]', element: 'm![B, C]'}}
stream: {{cluster: free, slice: free, time: free, packet: free}}
"""
ENGINE_CASES = [("i8", 64, "A, B, C"), ("bf16", 16, "A / 4, B, A % 4, C"),
                ("i32", 8, "B, A / 16, A % 16, C"), ("i8", 32, "A / 8, B, A % 8, C")]


def enumerate_free_engines(case: int) -> tuple[int | None, int, int]:
    """(least estimate over every engine split x stream order x Packet split, plans, splits):
    each split's stream spelled out and lowered, independent of the search's options."""
    from tcplan.planner.dma_plan import engine_splits
    dtype, c, src = ENGINE_CASES[case]
    p = load_problem_text(FREE_ENGINES.format(dtype=dtype, c=c, src=src), f"<engines {case}>")
    t = p.tensors
    best, plans = None, 0
    splits = engine_splits(t["source"], t["destination"], t["stream"], ["cluster", "slice"])
    for split in splits:
        dims = dict(t["stream"].dims)
        try:
            for d, v in split.items():
                dims[d] = parse(v.text(), p.axes, d)  # (spelled out, read again)
        except TcplanError:
            continue
        stream = Tensor("stream", "stream", t["stream"].dtype, dims)
        try:
            pieces, _ = candidate_pieces(t["source"], t["destination"], stream)
        except TcplanError:
            continue
        for order in itertools.permutations(pieces):
            terms = [x.term() for x in order]
            for k in range(len(pieces) + 1):
                plans += 1
                sd = dict(dims)
                sd["time"] = parse("m![" + (", ".join(terms[:len(terms) - k]) or "1") + "]",
                                   p.axes)
                sd["packet"] = parse("m![" + (", ".join(terms[len(terms) - k:]) or "1")
                                     + "]", p.axes)
                try:
                    plan = dma.lower(t["source"], t["destination"],
                                     Tensor("stream", "stream", t["source"].dtype, sd), 1)
                except TcplanError:
                    continue
                cyc = estimate(plan).cycles
                best = cyc if best is None else min(best, cyc)
    return best, plans, len(splits)


def test_free_engine_split_plan_is_the_cheapest_of_every_plan():
    """Every engine split is an option of the search: its plan is the least estimate over
    every split, order and Packet (brute force)."""
    from tcplan.planner.dma_plan import plan_free
    with ProcessPoolExecutor(2) as pool:
        truth = list(pool.map(enumerate_free_engines, range(len(ENGINE_CASES))))
    for case, (want, plans, n_splits) in enumerate(truth):
        dtype, c, src = ENGINE_CASES[case]
        p = load_problem_text(FREE_ENGINES.format(dtype=dtype, c=c, src=src), "<engines>")
        assert n_splits > 4 and want is not None, (case, n_splits)
        out = plan_free(p)
        found = unwrap(out)
        assert out.status == "optimal" and found.best.cycles == want, (
            case, found.best.cycles, want, plans)
