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
from .run import CHUNK, axis_strides, place, value_text, verify


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
    for chip, cluster, slice_, off in _live_units(plan, axes).tolist():
        yield chip, cluster, slice_, off


def _live_units(plan: TuPlan, axes: dict[str, int]) -> np.ndarray:
    """Every live slice as a row (chip, cluster, slice, its linear index offset into T),
    in order: the three dimensions evaluated once, broadcast over every slice."""
    st = axis_strides(axes)
    units = np.indices([plan.memory.dims[d].size for d in SPATIAL]).reshape(3, -1)
    off = np.zeros(units.shape[1], np.int64)
    live = np.ones(units.shape[1], bool)
    for k, d in enumerate(SPATIAL):
        coords, status = plan.memory.dims[d].evaluate()
        live &= status[units[k]] == LIVE
        for a, c in coords.items():
            off += c[units[k]] * st[a]
    return np.stack([*units, off])[:, live].T.astype(np.int64)


def _address(cluster: int, slice_: int, plan: TuPlan, addr: np.ndarray) -> np.ndarray:
    return dm_address(cluster, slice_, plan.memory.address) + addr * plan.elem_bytes


#: the loops of one slice at a time (the path before issue 32): the reference
PER_UNIT = False


def _unit_arrays(plan: TuPlan, axes: dict[str, int]
                 ) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Every live slice, chip by chip, in groups small enough for one index array of
    their stream positions: (chip, cluster and slice as arrays, their offsets into T)."""
    units = _live_units(plan, axes)
    n = max(1, plan.stream.dims["time"].size * plan.stream.dims["packet"].size)
    group = max(1, CHUNK // n)
    for chip in np.unique(units[:, 0]).tolist():
        mine = units[units[:, 0] == chip]
        for lo in range(0, len(mine), group):
            u = mine[lo:lo + group]
            yield chip, u[:, 1], u[:, 2], u[:, 3]


def _addresses(cluster: np.ndarray, slice_: np.ndarray, plan: TuPlan, addr: np.ndarray
               ) -> np.ndarray:
    """The byte address of every position ``addr`` (elements) of every slice given."""
    base = dm_address(cluster, slice_, plan.memory.address)
    return (base[:, None] + addr[None, :] * plan.elem_bytes).ravel()


def run_fetch(mem: Memories, plan: TuPlan, axes: dict[str, int], T: np.ndarray) -> int:
    """Run the Fetch of every live slice over ``mem`` and check the stream it delivers against
    ``T`` (the holding rule); returns the stream positions checked.  The hardware reads
    every position, padding lanes included: each is read here.  Every slice's positions at
    once (index arithmetic over the slices), or slice by slice (``PER_UNIT``)."""
    if PER_UNIT:
        return _run_fetch_units(mem, plan, axes, T)
    eb = plan.elem_bytes
    flat = T.reshape(-1).view(np.uint8).reshape(-1, eb)
    addr, lin, live = _positions(plan, axes)
    checked = 0
    for chip, clusters, slices, offs in _unit_arrays(plan, axes):
        bases = dm_address(clusters, slices, plan.memory.address)  # (each slice's start)
        got = mem.space("dm", chip).read_grid(bases, addr * eb, eb)[:, live]
        want = flat[(offs[:, None] + lin[live][None, :]).ravel()].reshape(got.shape)
        bad = _differ(got, want)
        if bad.any():
            k = int(np.flatnonzero(bad.any(axis=1))[0])
            _fetch_mismatch(plan, axes, (chip, int(clusters[k]), int(slices[k]),
                                         int(offs[k])), lin, live, got[k], want[k])
        checked += int(live.sum()) * len(offs)
    return checked


def _differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element, whether its bytes (the last axis) differ: compared as one word where
    the width is a word's."""
    eb = a.shape[-1]
    if eb in (1, 2, 4, 8):
        return a.view(f"u{eb}")[..., 0] != b.view(f"u{eb}")[..., 0]
    return (a != b).any(axis=-1)


def _fetch_mismatch(plan: TuPlan, axes: dict[str, int], unit: tuple[int, int, int, int],
                    lin: np.ndarray, live: np.ndarray, got: np.ndarray, want: np.ndarray
                    ) -> None:
    """Raise ``verify-mismatch`` at the first live stream position of one slice whose
    bytes ``got`` are not ``want``."""
    chip, cluster, slice_, off = unit
    bad = (got != want).any(axis=1)
    if not bad.any():
        return
    k = int(np.flatnonzero(bad)[0])
    at = int(np.flatnonzero(live)[k])
    index = dict(zip(axes, np.unravel_index(int(lin[live][k] + off), tuple(axes.values()))))
    packet = plan.stream.dims["packet"].size
    raise TcplanError(Violation("verify-mismatch", (), {"detail": (
        f"the Fetch of chip {chip} cluster {cluster} slice {slice_} delivers, at "
        f"stream position {at} (time {at // packet}, packet lane {at % packet}), "
        f"{value_text(got[k], plan.memory.dtype)}; the stream must hold index "
        + ", ".join(f"{a}={int(v)}" for a, v in index.items())
        + f", {value_text(want[k], plan.memory.dtype)}")}))


def _run_fetch_units(mem: Memories, plan: TuPlan, axes: dict[str, int], T: np.ndarray
                     ) -> int:
    """:func:`run_fetch` slice by slice (the reference)."""
    eb = plan.elem_bytes
    flat = T.reshape(-1).view(np.uint8).reshape(-1, eb)
    addr, lin, live = _positions(plan, axes)
    checked = 0
    for chip, cluster, slice_, off in _units(plan, axes):
        # every position is read, padding lanes too (a read of Bottom padding or past the
        # slice is a memory-access error); the live ones must hold T
        got = mem.space("dm", chip).read(_address(cluster, slice_, plan, addr), eb)[live]
        _fetch_mismatch(plan, axes, (chip, cluster, slice_, off), lin, live, got,
                        flat[lin[live] + off])
        checked += int(live.sum())
    return checked


def run_commit(mem: Memories, plan: TuPlan, axes: dict[str, int], T: np.ndarray) -> int:
    """Run the Commit of every live slice: each live stream position, holding ``T``, is
    written into DM; returns the elements written.  Every slice's positions at once, or
    slice by slice (``PER_UNIT``)."""
    eb = plan.elem_bytes
    flat = T.reshape(-1).view(np.uint8).reshape(-1, eb)
    addr, lin, live = _positions(plan, axes)
    moved = 0
    if PER_UNIT:
        for chip, cluster, slice_, off in _units(plan, axes):
            mem.space("dm", chip).write(_address(cluster, slice_, plan, addr[live]),
                                        flat[lin[live] + off])
            moved += int(live.sum())
        return moved
    for chip, clusters, slices, offs in _unit_arrays(plan, axes):
        mem.space("dm", chip).write(_addresses(clusters, slices, plan, addr[live]),
                                    flat[(offs[:, None] + lin[live][None, :]).ravel()])
        moved += int(live.sum()) * len(offs)
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
