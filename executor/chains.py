"""`tcplan verify` / `run` for Vector Engine chains and lane folds: seeded inputs with edge
values, execution, and the check against the reference formula (docs/hardware.md R13)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tcplan.model import expr as ex
from tcplan.model.mapping import LIVE
from tcplan.model.numeric import NP
from tcplan.model.rules import fail

from .run import carried_axes, tensor_shape, tensor_values
from .vector import bits_of, live_coordinates, output_tensor, run_chain

EDGES = {
    "i32": [-(2**31), 2**31 - 1, 0, -1, 1, -(2**31) + 1, 2**31 - 2, 100, -100, 7],
    "f32": [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 3.4028235e38, 1.1754944e-38,
            1e-45, -2.5, 0.5, 100.0, -100.0, 88.7, -88.7],
}


def with_edges(axes: dict[str, int], dtype: str, seed: int,
               parts: list[np.ndarray] | None = None) -> np.ndarray:
    """Seeded random values with every edge value of the dtype planted in each part (a bool
    mask over the tensor: the positions a stream holds, or one per group of a pair), each part
    in its own order so that edges meet different edges."""
    if parts is None:
        v = tensor_values(axes, dtype, seed)
        parts = [np.ones(v.shape, bool)]
    else:  # (drawn where the chain reads only: a stream on a few of an axis's values, e.g.
        # a slice per 16th of a vocabulary, reads a sliver of the whole tensor)
        v = np.zeros(tensor_shape(axes), NP[dtype])
        read = np.flatnonzero(np.logical_or.reduce([p.reshape(-1) for p in parts]))
        v.reshape(-1)[read] = tensor_values({"n": read.size}, dtype, seed)
    flat = v.reshape(-1)
    e = np.array(EDGES[dtype], NP[dtype])
    for k, part in enumerate(parts):
        held = np.flatnonzero(part.reshape(-1))
        if not held.size:
            continue
        n = min(len(e), held.size)
        pos = held[(np.arange(n) * max(1, held.size // n)) % held.size]
        flat[pos] = np.roll(e, 3 * k)[:n]
    return v


def held_parts(problem, an) -> list[np.ndarray]:
    """The input positions a chain reads (per group in pair mode), over all the axes."""
    axes = list(an.chain.axes)
    held = np.zeros(tensor_shape(an.chain.axes, "the input over every axis"), bool)
    held[live_coordinates(an, an.entry, list(an.chain.axes))[2]] = True
    pair = next((i.step.axis for i in an.infos if i.step.kind == "unzip"), None)
    if pair is None:
        return [held]
    k = axes.index(pair)
    parts = []
    for g in (0, 1):
        sel = np.zeros_like(held)
        ix: list[slice | int] = [slice(None)] * len(axes)
        ix[k] = g
        sel[tuple(ix)] = held[tuple(ix)]
        parts.append(sel)
    return parts


def vrf_values(problem, seed: int) -> dict[str, np.ndarray]:
    """Seeded VRF operands with edge values, drawn where each operand holds an element."""
    from .engines import stream_index
    out = {}
    for i, (name, t) in enumerate(sorted((n[4:], t) for n, t in problem.tensors.items()
                                         if n.startswith("vrf:"))):
        axes = {a: problem.axes[a] for a in carried_axes(t, problem.axes)}
        lin, held = stream_index(t, axes)
        part = np.zeros(tensor_shape(axes), bool)
        part.reshape(-1)[lin[held]] = True
        out[name] = with_edges(axes, t.dtype, seed + 1 + i, [part])
    return out


def formula_inputs(problem, X: np.ndarray, vrf: dict[str, np.ndarray], pair_axis: str | None
                   ) -> tuple[dict[str, np.ndarray], list[str]]:
    """The formula's names as arrays over its frame (the problem's axes, less the pair axis)."""
    axes = list(problem.axes)
    frame = [a for a in axes if a != pair_axis]
    inputs: dict[str, np.ndarray] = {}
    if pair_axis is None:
        inputs["x"] = X
    else:
        k = axes.index(pair_axis)
        inputs["group0"] = np.take(X, 0, axis=k)
        inputs["group1"] = np.take(X, 1, axis=k)
    for name, V in vrf.items():
        t = problem.tensors["vrf:" + name]
        vax = carried_axes(t, problem.axes)
        inputs[name] = ex._align(V, vax, frame)
    return inputs, frame


def compare(got: np.ndarray, want: np.ndarray, mask: np.ndarray, dtype: str,
            transcendental: bool) -> dict[str, Any] | None:
    """The first disagreement (None when all agree): bit-exact (any NaN equals any NaN), or
    within 2 ulp (f32) / 1 (i32 rounded from a transcendental) where the formula has a
    transcendental function (docs/hardware.md R13)."""
    want = np.broadcast_to(want, got.shape)
    if dtype == "f32":
        gn, wn = np.isnan(got), np.isnan(want)
        gi = bits_of(got).astype(np.int64)
        wi = bits_of(np.ascontiguousarray(want)).astype(np.int64)
        # ulp distance on the ordered integer line of floats
        go = np.where(gi >= 2**31, 2**31 - gi, gi)
        wo = np.where(wi >= 2**31, 2**31 - wi, wi)
        dist = np.abs(go - wo)
        bad = ~(gn & wn) & ((gn != wn) | (dist > (2 if transcendental else 0)))
    else:
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        bad = diff > (1 if transcendental else 0)
    bad &= mask
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return {"index": list(idx), "got": _show(got[idx]), "want": _show(want[idx]),
            "mismatches": int(bad.sum())}


def _show(v) -> Any:
    v = v.item()
    return repr(v) if isinstance(v, float) and not np.isfinite(v) else v


def run_vector(problem, an, seed: int, inputs: dict[str, np.ndarray] | None = None
               ) -> dict[str, Any]:
    """Execute a chain on seeded (or given) inputs: the input and output tensors."""
    inputs = inputs or {}
    X = inputs.get("x")
    if X is None:
        X = with_edges(problem.axes, problem.dtype, seed, held_parts(problem, an))
    vrf = vrf_values(problem, seed)
    vrf.update({k: v for k, v in inputs.items() if k in vrf})
    res = run_chain(an, X, vrf)
    out, written = output_tensor(an, res)
    return {"x": X, "vrf": vrf, "out": out, "written": written, "dtype": res.dtype}


def input_coverage(an) -> np.ndarray:
    """Which output coordinates the input stream holds (the kept axes of its live cells)."""
    axes = [a for a in an.chain.axes if a not in an.dropped_axes]
    held = np.zeros(tuple(an.chain.axes[a] for a in axes), bool)
    held[live_coordinates(an, an.entry, axes)[2]] = True
    return held


def verify_vector(problem, an, seed: int, X: np.ndarray | None = None,
                  vrf: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Execute a chain on seeded inputs with edge values (or on ``X`` and ``vrf``) and check
    it against its reference formula; the report carries the run (``run``)."""
    given = {**({} if X is None else {"x": X}), **(vrf or {})}
    r = run_vector(problem, an, seed, given or None)
    f: ex.Formula | None = problem.spec.formula
    report: dict[str, Any] = {"cycles": an.cycles, "breakdown": an.breakdown(),
                              "alus": an.alus}
    filtered = any(i.step.kind == "filter" for i in an.infos)
    held = input_coverage(an)
    gap = held & ~r["written"] if not filtered else np.zeros_like(held)
    extra = r["written"] & ~held
    if gap.any() or extra.any():
        idx = tuple(int(i) for i in np.argwhere(gap | extra)[0])
        what = ("never writes", "holds") if gap[idx] else ("writes", "does not hold")
        raise fail("verify-mismatch", detail=f"the chain's output {what[0]} index "
                   f"{list(idx)}, which the input {what[1]}")
    report["run"] = r
    if f is None:
        return {**report, "verified": None, "checked": 0,
                "method": "executed; no reference formula to check against"}
    pair_axis = next((i.step.axis for i in an.infos if i.step.kind == "unzip"), None)
    kept = [a for a in problem.axes if a not in an.dropped_axes]
    at = _written_lattice(problem, kept, r["written"])
    X = r["x"][np.ix_(*(at[a] for a in problem.axes))] if problem.axes else r["x"]
    vrf = {n: V[np.ix_(*(at[a] for a in carried_axes(problem.tensors["vrf:" + n],
                                                     problem.axes)))] if V.ndim else V
           for n, V in r["vrf"].items()}
    ins, frame = formula_inputs(problem, X, vrf, pair_axis)
    want = ex.evaluate(f, ins, frame, an.fold_orders())  # (in the chain's folding order)
    want = ex._align(want, [a for a in frame if a in kept], kept)
    sub = np.ix_(*(at[a] for a in kept)) if kept else ()
    bad = compare(r["out"][sub], want, r["written"][sub], r["dtype"], f.transcendental)
    if bad:
        bad["index"] = [int(at[a][i]) for a, i in zip(kept, bad["index"])]
        raise fail("verify-mismatch", detail=f"output index {bad['index']} holds {bad['got']} "
                   f"but {f.text} gives {bad['want']} ({bad['mismatches']} mismatching "
                   "element(s))")
    tol = "within 2 ulp (transcendental)" if f.transcendental else "bit-exact"
    return {**report, "verified": True, "checked": int(r["written"].sum()),
            "method": f"executed the chain on seeded inputs with edge values; output equals "
                      f"{f.text} {tol}"}


def _written_lattice(problem, kept: list[str], written: np.ndarray
                     ) -> dict[str, np.ndarray]:
    """Per axis, the values the check evaluates the formula at: of a kept axis, those some
    written output holds (a stream on 512 of a vocabulary's 155,648 values is checked on
    those 512, not the whole axis); of a reduced one, all (the reduction reads them)."""
    at = {a: np.arange(n) for a, n in problem.axes.items()}
    for k, a in enumerate(kept):
        others = tuple(j for j in range(len(kept)) if j != k)
        at[a] = np.flatnonzero(written.any(axis=others) if others else written)
    return at


def run_lane_fold(problem, lf, seed: int, X: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold seeded (or given) values: (input tensor, output tensor, written mask)."""
    if X is None:
        X = tensor_values(problem.axes, problem.dtype, seed)
    axes = list(problem.axes)
    live = lf.entry_status == LIVE
    idx = tuple(np.where(live, lf.entry.get(a, np.zeros(live.shape, np.int64)), 0)
                for a in axes)
    vals_in = X[idx] if axes else np.broadcast_to(X, live.shape)
    flat = vals_in.reshape(-1)
    src = lf.src
    vals_out = np.where(src < 0, 0, flat[np.where(src < 0, 0, src)])
    arr = lf.exit
    out = np.zeros(X.shape, X.dtype)
    written = np.zeros(X.shape, bool)
    ol = arr.live
    oidx = tuple(arr.cells.get(a, np.zeros(ol.shape, np.int64))[ol] for a in axes)
    out[oidx] = vals_out[ol]
    written[oidx] = True
    return X, out, written


def verify_lane_fold(problem, lf, seed: int) -> dict[str, Any]:
    X, out, written = run_lane_fold(problem, lf, seed)
    held = np.zeros(X.shape, bool)
    live = lf.entry_status == LIVE
    idx = tuple(lf.entry.get(a, np.zeros(live.shape, np.int64))[live] for a in problem.axes)
    held[idx] = True
    if not np.array_equal(written, held):
        i = tuple(int(v) for v in np.argwhere(written != held)[0])
        raise fail("verify-mismatch", detail=f"index {list(i)} is "
                   f"{'written' if written[i] else 'not written'} by the fold but "
                   f"{'held' if held[i] else 'not held'} by the input")
    bad = written & (out.view(np.uint8 if out.dtype.itemsize == 1 else
                              f"u{out.dtype.itemsize}") != X.view(
        np.uint8 if X.dtype.itemsize == 1 else f"u{X.dtype.itemsize}"))
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        raise fail("verify-mismatch", detail=f"index {list(i)} holds {_show(out[i])} after "
                   f"the fold, {_show(X[i])} before")
    return {"verified": True, "checked": int(written.sum()), "cycles": lf.cycles,
            "breakdown": lf.breakdown(),
            "method": "folded seeded values; every input element lands once, unchanged, at "
                      "the position the output mappings give it (no summing)"}


def run_plan(problem, plan, seed: int, X: np.ndarray | None = None,
             vrf_given: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Run a planned expression: each invocation's output tensor is the next one's input.
    VRF operands not given are seeded."""
    if X is None:
        X = with_edges(problem.axes, problem.dtype, seed, held_parts(problem, plan.analyses[0]))
    vrf = {**vrf_values(problem, seed), **(vrf_given or {})}
    cur = X
    dtype = problem.dtype
    written = None
    for an in plan.analyses:
        res = run_chain(an, cur, vrf)
        cur, written = output_tensor(an, res)
        dtype = res.dtype
    return {"x": X, "vrf": vrf, "out": cur, "written": written, "dtype": dtype}


def verify_plan(problem, plan, seed: int, X: np.ndarray | None = None,
                vrf: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Execute a plan on seeded inputs with edge values (or on ``X`` and ``vrf``); compare
    with the formula.  The report carries the run (``run``)."""
    f: ex.Formula = problem.spec.expression
    r = run_plan(problem, plan, seed, X, vrf)
    pair_axis = problem.spec.pair_axis if f.pair else None
    ins, frame = formula_inputs(problem, r["x"], r["vrf"], pair_axis)
    want = ex.evaluate(f, ins, frame)
    bad = compare(r["out"], want, r["written"], r["dtype"], f.transcendental)
    if not r["written"].all() or bad:
        detail = (f"output index {bad['index']} holds {bad['got']} but {f.text} gives "
                  f"{bad['want']}" if bad else "the plan leaves output elements unwritten")
        raise fail("verify-mismatch", detail=detail)
    return {"verified": True, "checked": int(r["written"].sum()), "run": r,
            "method": "ran every invocation on seeded inputs with edge values; output equals "
                      f"{f.text} " + ("within 2 ulp" if f.transcendental else "bit-exact")}
