"""Verification of the problem kinds other than DMA: layout, sequence, redistribute, gather,
scatter.  Each executes what it can over simulated memories and checks the result against the
mappings' semantics; cycles are modelled for DMA transfers only (for now: ``cycles: None``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tcplan.model.mapping import LIVE
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import dm_address

from .memory import Memories
from .run import axis_strides, extents, place, positions, tensor_values, verify


def _report(checked: int, method: str) -> dict[str, Any]:
    return {"verified": True, "cycles": None, "checked": checked, "method": method,
            "breakdown": {}}


def verify_layout(problem, plan, seed: int) -> dict[str, Any]:
    """Place every stored tensor and read it back through the holding rule."""
    checked = 0
    for t in problem.tensors.values():
        if t.tier == "stream":
            continue
        mem = Memories(extents([t]))
        T = tensor_values(problem.axes, t.dtype, seed)
        place(mem, t, problem.axes, T)
        checked += verify(mem, t, problem.axes, T)["checked"]
    return _report(checked, "placed every tensor and read it back (holding rule)")


def verify_sequence(problem, cfg, seed: int) -> dict[str, Any]:
    """Run the sequencer config over the buffer: a write must leave the buffer holding T; a
    read must deliver, at every live stream position, the buffer's value of that index."""
    t = problem.tensors
    buf = t["buffer"].dims["element"]
    time, packet = t["stream"].dims["time"], t["stream"].dims["packet"]
    axes = problem.axes
    T = tensor_values(axes, t["buffer"].dtype, seed)
    n = time.size * packet.size
    pos = np.arange(n, dtype=np.int64)
    addr = np.zeros(n, np.int64)
    rest = n
    for size, stride in cfg.entries:
        rest //= size
        addr += ((pos // rest) % size) * stride
    tc, ts = time.evaluate(pos // packet.size)
    pc, ps = packet.evaluate(pos % packet.size)
    live = (ts == LIVE) & (ps == LIVE)
    strides = axis_strides(axes)
    lin = np.zeros(n, np.int64)
    for a in axes:
        c = tc.get(a, 0) + pc.get(a, 0)
        lin = lin + np.asarray(c) * strides[a]
    bc, bs = buf.evaluate()
    blin = np.zeros(buf.size, np.int64)
    for a in axes:
        blin = blin + bc.get(a, 0) * strides[a]
    flat = T.reshape(-1)
    if cfg.mode == "write":
        memory = np.full(buf.size, -1, np.int64)  # which T element each slot holds
        a_live = addr[live]
        if ((a_live < 0) | (a_live >= buf.size)).any():
            raise _mismatch("a write address falls outside the buffer")
        memory[a_live] = lin[live]
        slots = np.flatnonzero(bs == LIVE)
        bad = slots[memory[slots] != blin[slots]]
        if bad.size:
            raise _mismatch(f"buffer slot {int(bad[0])} holds T[{int(memory[bad[0]])}], "
                            f"expected T[{int(blin[bad[0]])}]")
        checked = slots.size
    else:
        a_live = addr[live]
        inside = (a_live >= 0) & (a_live < buf.size)
        if not inside.all():
            raise _mismatch("a read address falls outside the buffer")
        if (bs[a_live] != LIVE).any():
            raise _mismatch("a live stream position reads a padding slot")
        got = flat[blin[a_live]]
        # the buffer holds T restricted to its digits: compare on what it carries
        want = flat[_project(lin[live], buf, axes, strides)]
        if not np.array_equal(got, want):
            k = int(np.flatnonzero(got != want)[0])
            raise _mismatch(f"stream position {int(np.flatnonzero(live)[k])} reads "
                            f"{got[k]!r}, expected {want[k]!r}")
        checked = int(live.sum())
    return _report(checked, "ran the config's loop nest over the buffer (brute force)")


def _project(lin: np.ndarray, buf, axes: dict[str, int], strides: dict[str, int]
             ) -> np.ndarray:
    """Keep, of each index, only the digits the buffer carries (the rest read as 0)."""
    coords = {a: (lin // strides[a]) % axes[a] for a in axes}
    out = np.zeros_like(lin)
    for f in buf.factors:
        if f.axis is not None and f.count > 1:
            out += ((coords[f.axis] // f.lo) % f.radix) * f.lo * strides[f.axis]
    return out


def _mismatch(detail: str) -> TcplanError:
    return TcplanError(Violation("verify-mismatch", (), {"detail": detail}))


def verify_redistribution(problem, plan, seed: int) -> dict[str, Any]:
    """Execute the fused plan's commands over memory; compare every result element with the
    source element the plan's value semantics names."""
    src, res = plan.source, plan.result
    eb = src.elem_bytes
    T = tensor_values(problem.axes, src.dtype, seed)
    mem = run_redistribution(problem, plan, T)
    hbm = src.tier == "hbm"
    chips = src.dims["chip"].size
    clusters = 1 if hbm else src.dims["cluster"].size
    first = 0 if hbm else int(np.flatnonzero(src.dims["slice"].evaluate()[1] == LIVE)[0])

    def image(t) -> np.ndarray:
        n = t.dims["element"].size
        out = np.zeros((chips, clusters, n, eb), np.uint8)
        for p in range(chips):
            for k in range(clusters):
                base = t.address if hbm else dm_address(k, first, t.address)
                out[p, k] = mem.space(t.tier, p).read(base + np.arange(n) * eb, eb)
        return out

    before, after = image(src), image(res)
    for t in range(chips):
        for k in range(clusters):
            for e in range(after.shape[2]):
                p, q, ein = plan.source_of(t, k, e)
                if not (after[t, k, e] == before[p, q, ein]).all():
                    raise _mismatch(f"target chip {t} cluster {k} element {e} differs from "
                                    f"source chip {p} cluster {q} element {ein}")
    return _report(int(after.shape[0] * after.shape[1] * after.shape[2]),
                   "executed the fused commands over memory; value semantics")


def verify_indexed(problem, plan, seed: int, T: np.ndarray | None = None,
             keys: np.ndarray | None = None, want_mem: bool = False) -> Any:
    """Gather/scatter over simulated memories: rows move between the HBM table and the DM
    tensor at random valid index values (or the given ``keys``: the table row of each index
    entry), then the written tensor is read back through the holding rule (gather:
    out[g, d] = table[index[g], d]; scatter: table[index[k], d] = data[k, d])."""
    rng = np.random.default_rng(seed)
    axes = problem.axes
    strides = axis_strides(axes)
    table, side = plan.table, plan.rows_side
    eb, rb = table.elem_bytes, plan.row_bytes
    table_rows = table.dims["element"].size // plan.row_elements
    gather_axis = table.dims["element"].items()[0][1][0].axis  # the table's outermost digit
    row_axes = set(plan.row.used_axes)
    # the DM rows in the order the DM side's loop nest walks them, keyed by index coordinates
    wc, _ = plan.walk.evaluate()
    idx_axes = [a for a in axes if a in wc and a not in row_axes]
    n_keys = int(np.prod([axes[a] for a in idx_axes])) if idx_axes else 1

    def key_of(coords: dict[str, np.ndarray], n: int) -> np.ndarray:
        k = np.zeros(n, np.int64)
        for a in idx_axes:
            k = k * axes[a] + coords[a]
        return k

    if keys is not None:
        row_of_key = keys
    elif plan.kind == "scatter":
        if n_keys > table_rows:
            raise _mismatch(f"{n_keys} scattered rows do not fit {table_rows} table rows")
        row_of_key = rng.permutation(table_rows)[:n_keys]
    else:
        row_of_key = rng.integers(0, table_rows, size=n_keys)
    rows = row_of_key[key_of(wc, plan.walk.size)]
    plan.apply(np.zeros((table_rows, 1)), rows * rb if plan.variant == "scaled" else rows)
    mem = Memories(extents([table]))
    if T is None:
        T = tensor_values(axes, table.dtype, seed)
    flat = T.reshape(-1).view(np.uint8).reshape(-1, eb)
    if plan.kind == "gather":
        place(mem, table, axes, T)
        place(mem, side, axes, None)
    else:
        place(mem, side, axes, T)
        place(mem, table, axes, None)
    # every element of every row: the DM side's loop nest (one packet per walk position,
    # a row perhaps spread over several slices), each packet contiguous in its HBM row
    addr = np.array([dm_address(0, 0, side.address)], np.int64)
    for n, st in plan.dm_entries:
        addr = (addr[:, None] + np.arange(n, dtype=np.int64) * st * eb).ravel()
    hbm, dm = mem.space("hbm", 0), mem.space("dm", 0)
    starts = plan.row_offsets(wc, plan.walk.size)  # each packet's place in its row
    hbm_addr = (table.address + rows[:, None] * rb + (
        starts[:, None] + np.arange(plan.packet_elements, dtype=np.int64)) * eb).ravel()
    if plan.kind == "gather":
        dm.write(addr, hbm.read(hbm_addr, eb))
        check_t, holder = side, dm
    else:
        hbm.write(hbm_addr, dm.read(addr, eb))
        check_t, holder = table, hbm
    if want_mem:
        index = row_of_key * rb if plan.variant == "scaled" else row_of_key
        shape = tuple(axes[a] for a in idx_axes)
        return check_t, holder, index.astype(np.int32).reshape(shape)
    key_of_row = np.full(table_rows, -1, np.int64)
    key_of_row[row_of_key] = np.arange(n_keys) if plan.kind == "scatter" else -1
    checked = 0
    for _, a, lin, status in positions(check_t, axes):
        live = status == LIVE
        if not live.any():
            continue
        coords = {x: (lin[live] // strides[x]) % axes[x] for x in axes}
        want = np.zeros(int(live.sum()), np.int64)
        if plan.kind == "gather":  # DM element (g..., d) holds table[row(g), d]
            r = row_of_key[key_of(coords, want.size)]
            for x in axes:
                if x == gather_axis:
                    want += r * strides[x]
                elif x in row_axes:
                    want += coords[x] * strides[x]
            keep = np.ones(want.size, bool)
        else:  # table element (r, d) of a scattered row holds data[key(r), d]
            k = key_of_row[coords[gather_axis]]
            keep = k >= 0
            rem = k[keep]
            for x in reversed(idx_axes):
                want[keep] += (rem % axes[x]) * strides[x]
                rem //= axes[x]
            for x in axes:
                if x in row_axes:
                    want[keep] += coords[x][keep] * strides[x]
        got = holder.read(a[live][keep], eb)
        bad = (got != flat[want[keep]]).any(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise _mismatch(f"{plan.kind}: the element at address {int(a[live][keep][i]):,} "
                            f"holds the wrong value")
        checked += int(keep.sum())
    return _report(checked, f"moved {plan.rows} rows over simulated memories at random valid "
                            f"indices; holding rule")


def index_keys(plan, index: np.ndarray) -> np.ndarray:
    """The table row of every index entry, from a user's index tensor."""
    vals = np.asarray(index, np.int64).reshape(-1)
    plan.apply(np.zeros((plan.table.dims["element"].size // plan.row_elements, 1)), vals)
    return vals // plan.row_bytes if plan.variant == "scaled" else vals


def run_indexed(problem, plan, T: np.ndarray, keys: np.ndarray | None, seed: int):
    """Execute a gather/scatter on T (and index keys); return (tensor written, values)."""
    return verify_indexed(problem, plan, seed, T=T, keys=keys, want_mem=True)


def run_redistribution(problem, plan, T: np.ndarray):
    """Execute a redistribution's commands on T; return the result tensor's memory space."""
    src, res = plan.source, plan.result
    mem = Memories(extents([src, res]))
    place(mem, src, problem.axes, T)
    eb = src.elem_bytes
    for d in plan.descriptors():
        rchip, raddr = d["read"]
        wchip, waddr = d["write"]
        r = np.array([raddr], np.int64)
        w = np.array([waddr], np.int64)
        for n, rs, ws in d["entries"]:
            k = np.arange(n, dtype=np.int64)
            r = (r[:, None] + k * rs * eb).ravel()
            w = (w[:, None] + k * ws * eb).ravel()
        mem.space(src.tier, wchip).write(w, mem.space(src.tier, rchip).read(r, eb))
    return mem
