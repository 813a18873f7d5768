"""Benchmark: the Tensor Unit's engines run on data, against numpy doing the same computation.

    python benchmarks/bench_engines.py [--repeat N]

For contractions of the Qwen3-0.6B decode shapes (the q projection as a GEMV, hidden 1,024
to 2,048 outputs over 256 slices x 8 lanes; the same as a GEMM of 32 tokens; the q-k
scores of 16 heads against 128 cached keys) and the guide's batched matmul, each on every
slice of both clusters: the seconds of tcplan's stage-by-stage run (executor/contraction.py
``run_stages``: pack, broadcast, the TRF reads, multiply, the two reducers, the fold), of
the whole checked run (the stages, the numpy.einsum reference and the check), and of
``numpy.einsum`` of the same operands in the same run, with the ratios (the issue's target:
the checked run within 100x of numpy).  The best of ``--repeat`` runs (default 3).

Then each Qwen3 function typed with its compute (problems/kernels/qwen3/: the projections
on the user's x and W beside numpy's ``W @ x``; the functions with vector chains on seeded
data beside numpy computing the function's arithmetic), planned once and run on data as
``tcplan.run`` does (executor/graph.py ``run_graph``, every op simulated over the memories
and checked), its seconds split: ``compute`` (the engine ops, the ratio beside it against
numpy's), ``moves`` (DMA, Fetch, Commit and the given tensors placed), ``check`` (every
tensor read back at the end) and ``plan``; the whole beside numpy's.  The best of
``--repeat`` runs each.  ``--functions``: only the functions.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import tcplan
from tcplan.executor.contraction import run_contraction, run_stages
from tcplan.executor.engines import lay_out, stream_index
from tcplan.executor.run import carried_axes, over_axes, tensor_values
from tcplan.model.engines import SPATIAL
from tcplan.planner.kinds import kind_of

H = "cluster: 'm![1 # 2]'"
CASES = {
    # proj_q decode: x (K = 1,024) against W (N = 2,048 x K); N over 256 slices x 8 lanes
    "gemv proj_q (K 1024 -> N 2048)": f"""
kind: contract
dtype: bf16
axes: {{N: 2048, K: 1024}}
source: {{{H}, slice: 'm![N / 8]', time: 'm![K / 16]', packet: 'm![K % 16]'}}
trf: {{tier: trf, {H}, slice: 'm![N / 8]', lane: 'm![N % 8]', element: 'm![K]'}}
stages: {{outer: {{time: 'm![K / 32]', packet: 'm![K % 32]'}}, packet: 'm![1]',
          time: 'm![1]', lane: interleaved}}
destination: {{{H}, slice: 'm![N / 8]', time: 'm![1]', packet: 'm![N % 8]'}}
""",
    # the same as a GEMM of M = 32 tokens (M in Time: every multiplier busy)
    "gemm proj_q (M 32, K 256 -> N 2048)": f"""
kind: contract
dtype: bf16
axes: {{N: 2048, M: 32, K: 256}}
source: {{{H}, slice: 'm![N / 8]', time: 'm![M, K / 16]', packet: 'm![K % 16]'}}
trf: {{tier: trf, {H}, slice: 'm![N / 8]', lane: 'm![N % 8]', element: 'm![K]'}}
stages: {{outer: {{time: 'm![M, K / 32]', packet: 'm![K % 32]'}}, packet: 'm![1]',
          time: 'm![M]', lane: interleaved}}
destination: {{{H}, slice: 'm![N / 8]', time: 'm![M]', packet: 'm![N % 8]'}}
""",
    # qk scores: 16 heads x 128 cached keys, head dim 128; keys over slices and lanes
    "qk scores (H 16, T 128, D 128)": """
kind: contract
dtype: bf16
axes: {H: 16, T: 128, D: 128}
source: {cluster: 'm![H / 8]', slice: 'm![H % 8, T / 8 # 32]', time: 'm![D / 16]',
          packet: 'm![D % 16]'}
trf: {tier: trf, cluster: 'm![H / 8]', slice: 'm![H % 8, T / 8 # 32]', lane: 'm![T % 8]',
       element: 'm![D]'}
stages: {outer: {time: 'm![D / 32]', packet: 'm![D % 32]'}, packet: 'm![1]',
          time: 'm![1]', lane: interleaved}
destination: {cluster: 'm![H / 8]', slice: 'm![H % 8, T / 8 # 32]', time: 'm![1]',
               packet: 'm![T % 8]'}
""",
}


def _guide() -> str:
    from pathlib import Path
    return (Path(__file__).resolve().parents[1]
            / "problems/guide/contract_bmatmul_m_in_time.yaml").read_text()


def _best(f, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def bench(name: str, text: str, repeat: int) -> None:
    p = tcplan.loads(text, name)
    plan = kind_of(p).lower(p)
    axes = p.axes
    S = tensor_values({a: axes[a] for a in carried_axes(plan.src, axes)}, "bf16", 0)
    W = tensor_values({a: axes[a] for a in carried_axes(plan.trf, axes)}, "bf16", 1)
    Sf = over_axes(S, carried_axes(plan.src, axes), axes)  # (the stages' layout: all axes)
    Wf = over_axes(W, carried_axes(plan.trf, axes), axes)
    units = {d: plan.src.dims[d] for d in SPATIAL}
    flits = lay_out(plan.src, Sf, axes)
    trf = lay_out(plan.trf.with_dims(**units), Wf, axes)
    live = stream_index(plan.src, axes)[1].reshape(flits.shape[0], -1).any(axis=1)
    flits, trf = flits[live], trf[live]  # (as the executor runs: the units holding data)
    names = {a: chr(ord("a") + i) for i, a in enumerate(axes)}
    o_ax = carried_axes(plan.out, axes)
    spec = (f"{''.join(names[a] for a in carried_axes(plan.src, axes))},"
            f"{''.join(names[a] for a in carried_axes(plan.trf, axes))}->"
            f"{''.join(names[a] for a in o_ax)}")
    s32, w32 = S.astype(np.float32), W.astype(np.float32)
    t_np = _best(lambda: np.einsum(spec, s32, w32), repeat)
    t_stages = _best(lambda: run_stages(plan, flits, trf), repeat)
    t_run = _best(lambda: run_contraction(plan, S, W), repeat)
    print(f"{name:<38} {plan.cycles:>8,} {plan.mac_utilization:>6.3f} {t_np * 1e3:>9.2f} "
          f"{t_stages * 1e3:>10.2f} {t_stages / t_np:>7.1f}x {t_run * 1e3:>10.2f} "
          f"{t_run / t_np:>7.1f}x", flush=True)


#: the Qwen3 functions typed with their compute: name -> (rows, columns, how the graph's
#: arguments are given from x and W, the result tensor)
FUNCTIONS = {
    "projection_proj_q": (2048, 1024, lambda x, w: {"input": np.broadcast_to(x, w.shape),
                                                    "weight": w}, "gathered"),
    "projection_proj_p": (1024, 1024, lambda x, w: {"input": np.broadcast_to(x, w.shape),
                                                    "weight": w}, "gathered"),
    "projection_proj_o": (1024, 2048, lambda x, w: {
        "input": np.broadcast_to(x[:, None], w.T.shape), "weight": w.T}, "out"),
}


#: the kinds of ops that compute (the Tensor Unit's engines between Fetch and Commit); every
#: other op moves data (DMA, Fetch, Commit, gather, scatter)
COMPUTE = ("contract", "chain", "collect", "cast", "fetch_cast", "switch", "transpose",
           "to_trf", "to_vrf", "commit_trim", "commit_cast", "commit_cast_relu",
           "inter_slice_reduce")


def run_function(name: str, given: dict, repeat: int) -> dict[str, float]:
    """A Qwen3 function run whole on ``given`` (as ``tcplan.run`` does: planned, then every
    op simulated over the memories and checked), its seconds split: ``plan`` (the graph's
    planning), ``compute`` (its engine ops run on data and checked), ``moves`` (its DMA,
    Fetch and Commit ops and the given tensors placed), ``check`` (every tensor read back
    at the end); the best of ``repeat`` runs of the planned graph."""
    from pathlib import Path
    from tcplan.executor.graph import run_graph
    from tcplan.planner.registry import kinds
    from tcplan.planner.kinds.graph import _graph
    path = Path(__file__).resolve().parents[1] / f"problems/kernels/qwen3/{name}.yaml"
    t0 = time.perf_counter()
    p = tcplan.load(path)
    plan = tcplan.lower(p).plan
    t_plan = time.perf_counter() - t0
    g = _graph(p)
    kind = {op.name: op.kind for op in g.ops}
    best: dict[str, float] = {}
    for _ in range(repeat):  # (the best of ``repeat`` runs, each part on its own)
        sec = run_graph(g, plan, kinds(), 0, given)[1]["seconds"]
        run = {"compute": sum(t for n, t in sec["ops"].items() if kind[n] in COMPUTE),
               "moves": sec["given"] + sum(t for n, t in sec["ops"].items()
                                           if kind[n] not in COMPUTE),
               "check": sec["end_to_end"]}
        best = {k: min(v, best.get(k, v)) for k, v in run.items()}
    return {"plan": t_plan, **best, "cycles": plan.cycles}


def _row(name: str, t_np: float, t: dict[str, float]) -> None:
    whole = t["plan"] + t["compute"] + t["moves"] + t["check"]
    print(f"{name:<24} {t['cycles']:>7,} {t_np * 1e3:>8.3f} {t['compute'] * 1e3:>10.1f} "
          f"{t['compute'] / t_np:>7.0f}x {t['moves'] * 1e3:>9.1f} {t['check'] * 1e3:>8.1f} "
          f"{t['plan'] * 1e3:>8.1f} {whole * 1e3:>9.1f} {whole / t_np:>8.0f}x", flush=True)


def bench_function(name: str, repeat: int) -> None:
    """A projection run whole on the user's x and W beside numpy's ``W @ x``."""
    from tcplan.model.numeric import NP_DTYPES
    rows, cols, given, result = FUNCTIONS[name]
    rng = np.random.default_rng(0)
    bf16 = NP_DTYPES["bf16"]
    x = rng.standard_normal(cols).astype(np.float32).astype(bf16)
    w = rng.standard_normal((rows, cols)).astype(np.float32).astype(bf16)
    w32, x32 = w.astype(np.float32), x.astype(np.float32)
    t_np = _best(lambda: (w32 @ x32).astype(bf16), repeat)
    _row(name, t_np, run_function(name, given(x, w), repeat))


def _bf(rng, *shape, scale: float = 1.0):
    from tcplan.model.numeric import NP_DTYPES
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(NP_DTYPES["bf16"])


def _f(a):
    return np.asarray(a, np.float32)


def _silu(g):
    return g / (1 + np.exp(-g))


#: the Qwen3 functions whose compute has vector chains: name -> (the graph's given tensors
#: from a generator, what numpy computes of them: the function's arithmetic alone)
CHAINED = {
    "attention_qk_scaled": (
        lambda r: {"q": _bf(r, 8, 2, 128), "k": _bf(r, 8, 128, 512)},
        lambda g: np.einsum("ngd,ndt->ngt", _f(g["q"]), _f(g["k"])) / np.float32(11.313708)),
    "attention_row_max": (lambda r: {"qk": _bf(r, 8, 2, 512)},
                          lambda g: _f(g["qk"]).max(axis=-1)),
    "attention_row_sum": (lambda r: {"masked_exp": _f(r.random((8, 2, 512)))},
                          lambda g: g["masked_exp"].sum(axis=-1) + np.float32(6.25e-8)),
    "attention_masked_exp": (
        lambda r: {"qk": _bf(r, 8, 2, 512), "max_vrf": _f(r.random((8, 2))) + 3,
                   "mask_hbm": _f(r.random(512))},
        lambda g: np.minimum(np.exp(_f(g["qk"]) - g["max_vrf"][..., None]), g["mask_hbm"])),
    "attention_norm": (
        lambda r: {"input": _bf(r, 8, 2, 128, 64), "sum_hbm": _f(r.random((8, 2))) + 1},
        lambda g: _f(g["input"]) / g["sum_hbm"][..., None, None]),
    "residual_forward": (lambda r: {"input": _bf(r, 1024, 64), "residual": _bf(r, 1024, 64)},
                         lambda g: _f(g["input"]) + _f(g["residual"])),
    "rmsnorm_forward": (
        lambda r: {"input": _bf(r, 1024, 64), "rms_weight": _bf(r, 1024)},
        lambda g: _f(g["input"]) * _f(g["rms_weight"])[:, None] / np.sqrt(
            (_f(g["input"]) ** 2).mean(axis=0) + np.float32(6.25e-8))),
    "rope_apply_rope": (
        lambda r: {"q": _bf(r, 8, 2, 128), "rotate_half_q": _bf(r, 8, 2, 128),
                   "k": _bf(r, 8, 128), "rotate_half_k": _bf(r, 8, 128),
                   "cos_hbm": _bf(r, 128), "sin_hbm": _bf(r, 128)},
        lambda g: (_f(g["q"]) * _f(g["cos_hbm"]) + _f(g["rotate_half_q"]) * _f(g["sin_hbm"]),
                   _f(g["k"]) * _f(g["cos_hbm"]) + _f(g["rotate_half_k"]) * _f(g["sin_hbm"]))),
    "mlp_forward": (
        lambda r: (lambda x: {"x": np.broadcast_to(x, (3072, 1024)),
                              "x_ug": np.broadcast_to(x, (3072, 1024)),
                              "up_weight": _bf(r, 3072, 1024, scale=1 / 32),
                              "gate_weight": _bf(r, 3072, 1024, scale=1 / 32),
                              "down_weight": _bf(r, 3072, 1024, scale=1 / 32)})(_bf(r, 1024)),
        lambda g: _f(g["down_weight"]).T @ (_silu(_f(g["gate_weight"]) @ _f(g["x"][0]))
                                            * (_f(g["up_weight"]) @ _f(g["x"][0])))),
    "attention_forward": (
        lambda r: {"max": _f(r.random((8, 2))), "max_hbm_in": _f(r.random((8, 2))),
                   "expsum": _f(r.random((8, 2))), "sum_hbm_in": _f(r.random((8, 2))),
                   "out_hbm_in": _bf(r, 8, 2, 128), "result": _bf(r, 8, 2, 128)},
        lambda g: (lambda new: (lambda a: (g["sum_hbm_in"] * a + g["expsum"],
                                           _f(g["out_hbm_in"]) * a[..., None]
                                           + _f(g["result"])))(
            np.exp(g["max_hbm_in"] - new)))(np.maximum(g["max"], g["max_hbm_in"]))),
}


def bench_chained(name: str, repeat: int) -> None:
    """A kernel function with vector chains run whole on seeded data beside numpy computing
    the function's arithmetic on the same data."""
    make, numpy_fn = CHAINED[name]
    given = make(np.random.default_rng(0))
    t_np = _best(lambda: numpy_fn(given), repeat)
    _row(name, t_np, run_function(name, given, repeat))


def main() -> None:
    args = sys.argv[1:]
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 3
    print(f"{'contraction':<38} {'cycles':>8} {'MACs':>6} {'numpy ms':>9} "
          f"{'stages ms':>10} {'ratio':>8} {'checked ms':>10} {'ratio':>8}")
    for name, text in {} if "--functions" in args else {**CASES, "guide bmatmul, M in Time": _guide()}.items():
        bench(name, "format: 1\nname: bench\n" + text if "format:" not in text else text,
              repeat)
    print(f"\n{'Qwen3 function':<24} {'cycles':>7} {'numpy ms':>8} {'compute ms':>10} "
          f"{'ratio':>8} {'moves ms':>9} {'check ms':>8} {'plan ms':>8} {'whole ms':>9} "
          f"{'ratio':>9}")
    for name in FUNCTIONS:
        bench_function(name, repeat)
    for name in CHAINED:
        bench_chained(name, repeat)


if __name__ == "__main__":
    main()
