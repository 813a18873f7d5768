"""Fetch and Commit run over simulated DM (model/tu.py).

Every live slice runs the plan's config over its own DM, from the tensor's address: the loop
nest gives the address of every stream position (Time outer, Packet inner, in order).  A Fetch
reads the live positions into the stream and checks each one against the mathematical tensor
at its index (the holding rule on the stream: the slice's Chip, Cluster and Slice
coordinates plus the position's Time and Packet ones).  A Commit writes every live stream
position, holding T, into DM; the tensor is then read back by :func:`executor.run.verify`,
which also checks that every live slot was written exactly once.  Packet padding lanes are
never delivered or written (docs/hardware.md R3).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from tcplan.model.mapping import LIVE
from tcplan.model.rules import TcplanError, Violation
from tcplan.model.tiers import dm_address
from tcplan.model.tu import SPATIAL, TuPlan

from .memory import Memories
from .run import axis_strides, place, value_text, verify


def _positions(plan: TuPlan, axes: dict[str, int]) -> tuple[np.ndarray, np.ndarray,
                                                           np.ndarray]:
    """Per stream position of one slice: its address offset (elements, from the loop nest),
    its linear index into T (Time and Packet coordinates), and whether it is live."""
    time, packet = plan.stream.dims["time"], plan.stream.dims["packet"]
    n = time.size * packet.size
    pos = np.arange(n, dtype=np.int64)
    addr = np.zeros(n, np.int64)
    rest = n
    for size, stride in plan.config.entries:
        rest //= size
        addr += ((pos // rest) % size) * stride
    tc, ts = time.evaluate(pos // packet.size)
    pc, ps = packet.evaluate(pos % packet.size)
    live = (ts == LIVE) & (ps == LIVE)
    lin = np.zeros(n, np.int64)
    past = np.zeros(n, bool)
    for a, st in axis_strides(axes).items():
        c = np.asarray(tc.get(a, 0) + pc.get(a, 0), np.int64)
        past |= c >= axes[a]
        lin += c * st
    return addr, lin, live & ~past


def _units(plan: TuPlan, axes: dict[str, int]) -> Iterator[tuple[int, int, int, int]]:
    """Every live slice: (chip, cluster, slice, its linear index offset into T)."""
    st = axis_strides(axes)
    evals = [plan.memory.dims[d].evaluate() for d in SPATIAL]
    sizes = [plan.memory.dims[d].size for d in SPATIAL]
    for unit in np.ndindex(*sizes):
        off, live = 0, True
        for (coords, status), p in zip(evals, unit):
            live &= status[p] == LIVE
            for a, c in coords.items():
                off += int(c[p]) * st[a]
        if live:
            yield unit[0], unit[1], unit[2], off


def _address(cluster: int, slice_: int, plan: TuPlan, addr: np.ndarray) -> np.ndarray:
    return dm_address(cluster, slice_, plan.memory.address) + addr * plan.elem_bytes


def run_fetch(mem: Memories, plan: TuPlan, axes: dict[str, int], T: np.ndarray) -> int:
    """Run the Fetch of every live slice over ``mem`` and check the stream it delivers against
    ``T`` (the holding rule); returns the stream positions checked.  The hardware reads
    every position, padding lanes included: each is read here."""
    eb = plan.elem_bytes
    flat = T.reshape(-1).view(np.uint8).reshape(-1, eb)
    addr, lin, live = _positions(plan, axes)
    checked = 0
    for chip, cluster, slice_, off in _units(plan, axes):
        # every position is read, padding lanes too (a read of Bottom padding or past the
        # slice is a memory-access error); the live ones must hold T
        got = mem.space("dm", chip).read(_address(cluster, slice_, plan, addr), eb)[live]
        want = flat[lin[live] + off]
        bad = (got != want).any(axis=1)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            at = int(np.flatnonzero(live)[k])
            index = dict(zip(axes, np.unravel_index(int(lin[live][k] + off),
                                                    tuple(axes.values()))))
            raise TcplanError(Violation("verify-mismatch", (), {"detail": (
                f"the Fetch of chip {chip} cluster {cluster} slice {slice_} delivers, at "
                f"stream position {at} (time {at // plan.stream.dims['packet'].size}, packet "
                f"lane {at % plan.stream.dims['packet'].size}), "
                f"{value_text(got[k], plan.memory.dtype)}; the stream must hold index "
                + ", ".join(f"{a}={int(v)}" for a, v in index.items())
                + f", {value_text(want[k], plan.memory.dtype)}")}))
        checked += int(live.sum())
    return checked


def run_commit(mem: Memories, plan: TuPlan, axes: dict[str, int], T: np.ndarray) -> int:
    """Run the Commit of every live slice: each live stream position, holding ``T``, is
    written into DM; returns the elements written."""
    eb = plan.elem_bytes
    flat = T.reshape(-1).view(np.uint8).reshape(-1, eb)
    addr, lin, live = _positions(plan, axes)
    moved = 0
    for chip, cluster, slice_, off in _units(plan, axes):
        mem.space("dm", chip).write(_address(cluster, slice_, plan, addr[live]),
                                    flat[lin[live] + off])
        moved += int(live.sum())
    return moved


def read_stream(mem: Memories, plan: TuPlan, axes: dict[str, int], dtype) -> np.ndarray:
    """What a Fetch delivers, as the mathematical tensor over every axis: every live stream
    position of every live slice, read from DM through the config (``tcplan run``)."""
    eb = plan.elem_bytes
    out = np.zeros(tuple(axes.values()), dtype)
    flat = out.reshape(-1)
    addr, lin, live = _positions(plan, axes)
    for chip, cluster, slice_, off in _units(plan, axes):
        got = mem.space("dm", chip).read(_address(cluster, slice_, plan, addr[live]), eb)
        flat[lin[live] + off] = got.reshape(-1).view(dtype)
    return out


def run_with_data(plan: TuPlan, axes: dict[str, int], T: np.ndarray) -> np.ndarray:
    """A Fetch or Commit run on the user's tensor ``T`` (over every axis): a Fetch's
    stream, or the DM tensor a Commit leaves, over every axis."""
    from .run import read_tensor
    mem = Memories()
    if plan.engine == "fetch":
        place(mem, plan.memory, axes, T)
        return read_stream(mem, plan, axes, T.dtype)
    place(mem, plan.memory, axes, None)
    run_commit(mem, plan, axes, T)
    return read_tensor(mem, plan.memory, axes, T.dtype)


def simulate(plan: TuPlan, axes: dict[str, int], T: np.ndarray) -> dict:
    """A Fetch or Commit on fresh memories: a Fetch's tensor placed holding ``T`` and its
    stream checked; a Commit's tensor placed unwritten, the stream written, the tensor read
    back (every live slot once, holding T).  Returns what was checked."""
    mem = Memories()
    if plan.engine == "fetch":
        place(mem, plan.memory, axes, T)
        return {"checked": run_fetch(mem, plan, axes, T), "what": "stream positions"}
    place(mem, plan.memory, axes, None)
    moved = run_commit(mem, plan, axes, T)
    return {"checked": verify(mem, plan.memory, axes, T, moved)["checked"],
            "what": "destination elements"}
