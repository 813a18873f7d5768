"""A graph run on one set of simulated memories (docs/graphs.md).

Every tensor of the graph is laid out as planned in the same memories; the given ones are
placed with their data (the user's, or seeded); then each op runs in topological order on
what the memories hold, as its kind executes it (``Kind.execute``: a DMA's commands, a
chain's invocations and its Commit), checking its own output as it goes (a DMA's
destination holds its source; a chain's output equals its formula).  At the end every
tensor is read back from the memories and compared with what it must hold, end to end.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tcplan.model.rules import TcplanError, fail
from tcplan.model.tiers import VALUE_TIERS

from .apart import Apart
from .memory import Memories
from .run import as_dtype, clear_bottom, extents, place, tensor_bits, verify


def lifetimes(g) -> dict[str, tuple[int, int]]:
    """Per tensor, the step of ``g.order`` it is born at (written, or, given, placed just
    before its first reader) and the step of its last use (the last op reading or writing
    it); a tensor no op reads after it is written, or a given one no op reads, lives to the
    end (``len(g.order)``: it is checked there).  From each op's ``roles`` alone."""
    end = len(g.order)
    #: where the graph says a tensor nobody reads ends (planner/graph.py ``lifetimes``: a
    #: DM result with its launch, unless it says keep; any other at the end)
    kept = {n: (b if b < end - 1 else end) for n, (_, b) in g.lifetimes().items()} \
        if hasattr(g, "lifetimes") else {}
    born: dict[str, int] = {}
    last: dict[str, int] = {}
    read_last: dict[str, int] = {}
    for step, i in enumerate(g.order):
        op = g.ops[i]
        for r, n in op.roles.items():
            born.setdefault(n, step)
            last[n] = step
            if r in op.read_roles:
                read_last[n] = step
    out = {}
    for n in g.tensors:
        if n not in born:  # (given, read by no op)
            out[n] = (end, end)
        else:  # (its one writer comes before its readers: its last use is a read, if any)
            out[n] = (born[n], last[n] if n in read_last else kept.get(n, end))
    return out


def overwrite(spans: dict, life: dict[str, tuple[int, int]], step: int, writes: list[str],
              live: dict[str, list[str]], op: str) -> None:
    """``verify-mismatch`` when a tensor written (or placed) at ``step`` shares bytes
    (``spans``: a tier and the bytes of a unit, :func:`_spans`) with another tensor of its tier live
    there (``live``: per tier, the tensors born and not yet past their last use)."""
    for w in writes:
        if w not in spans:
            continue
        tier, lo, hi = spans[w]
        for other in live.get(tier, ()):
            if other == w or life[other][1] < step:
                continue
            _, a, b = spans[other]
            if lo < b and a < hi:
                raise fail("verify-mismatch", detail=f"op {op} writes {w} ({tier} bytes "
                           f"{lo:,} to {hi:,} of a unit) over {other} (bytes {a:,} to {b:,}),"
                           f" live from step {life[other][0]} to {life[other][1]}")


def run_graph(g, gp, kinds: dict, seed: int = 0,
              inputs: dict[str, np.ndarray] | None = None,
              progress=None, keep=None, legacy: bool = False,
              twins: dict[str, Any] | None = None, checked: set | None = None,
              memory: bool = True, apart: int = 0
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Run a planned graph: (the tensors' mathematical values, the report).  ``kinds``:
    the problem kinds by name, each op run by its own (the planner hands its registry in:
    the executor imports nothing of the planner).  ``inputs``: given tensors by name, and a
    chain op's VRF operands as ``OP.NAME``.  ``keep``: the tensors whose values to return
    (None: every one); the others' are dropped after their last use, once checked.
    ``legacy``: the run before issue 32 (every given tensor placed first, every tensor
    checked at the end, one view per unit), kept as the baseline.  ``twins``: op name ->
    its plan's key (ops with one key have one plan, at the same addresses);
    an op whose key is in ``checked`` (the keys of ops run and checked so far, this run's
    added) is replayed (``Kind.replay``: its values written where its plan puts them,
    its commands not run again), where its kind can.  ``memory``: False for a run of
    values only (every op replayed, on memories of its own: a replayed op's own graph),
    no memory simulated, nothing read back; an op that cannot replay raises
    :class:`NeedsMemory`.  ``apart``: how many checks may run at once in forked processes
    (executor/apart.py: an op whose kind ``checks_apart`` is replayed here and run in full,
    checked, there); 0: every op runs here."""
    if legacy:
        from . import run as run_mod, tu as tu_mod
        saved = run_mod.PER_UNIT, tu_mod.PER_UNIT
        run_mod.PER_UNIT = tu_mod.PER_UNIT = True
        try:
            return _run_legacy(g, gp, kinds, seed, inputs or {}, progress)
        finally:
            run_mod.PER_UNIT, tu_mod.PER_UNIT = saved
    return _run(g, gp, kinds, seed, inputs or {}, progress, keep,
                _Twins(twins or {}, set() if checked is None else checked, Apart(apart)),
                memory)


class NeedsMemory(Exception):
    """A run of values only met an op its kind cannot replay."""


class _Twins:
    """Which ops ran and were checked, by their plans' keys; how many were replayed."""

    def __init__(self, keys: dict[str, Any], checked: set, apart: Apart):
        self.keys, self.checked, self.replayed = keys, checked, 0
        self.apart = apart

    def step(self, g, gp, kinds: dict, op, i: int, mem: Memories | None, tensors: dict,
             values: dict, inputs: dict[str, np.ndarray], seed: int) -> list[str]:
        """The op replayed where its twin was checked and its kind can, else run."""
        key = self.keys.get(op.name)
        if key is not None and key in self.checked:
            made = _step(g, gp, kinds, op, i, mem, tensors, values, inputs, seed, True)
            if made is not None:
                self.replayed += 1
                return made
        if mem is None:
            raise NeedsMemory(op.name)
        if self.apart.usable() and getattr(kinds[op.kind], "checks_apart", False):
            made = _step(g, gp, kinds, op, i, mem, tensors, values, inputs, seed, True)
            if made is not None:
                self.apart.start(op.name, lambda: _check_apart(
                    g, gp, kinds, op, i, tensors, values, inputs, seed, made))
                if key is not None:
                    self.checked.add(key)
                return made
        ran = _step(g, gp, kinds, op, i, mem, tensors, values, inputs, seed)
        assert ran is not None  # (run, not replayed: it makes its tensors)
        if key is not None:
            self.checked.add(key)
        return ran


def _run(g, gp, kinds: dict, seed: int, inputs: dict[str, np.ndarray], progress, keep,
         twins: _Twins, memory: bool) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Each given tensor seeded (``seed + k``, ``k`` its index in ``g.tensors``) and placed
    when its life starts; each op run and checked; each tensor read back when its life
    ends, then its values dropped (unless kept) and its HBM pages released; an op writing
    over a live tensor's bytes is refused.  Lives: the graph's (``g.lifetimes()``: a
    launch's DM and HBM tensors live through it), else :func:`lifetimes`."""
    clock = time.perf_counter()
    tensors = {n: g.tensor(n, gp.layout) for n in g.tensors}
    mem = Memories(extents(list(tensors.values()))) if memory else None
    spans = _spans(tensors)
    # (the graph's own, where it says them: a launch's DM and HBM tensors live through it)
    life = g.lifetimes() if callable(getattr(g, "lifetimes", None)) else lifetimes(g)
    index = {n: k for k, n in enumerate(g.tensors)}
    reads = readers(g)
    end = len(g.order)
    births: dict[int, list[str]] = {}
    deaths: dict[int, list[str]] = {}
    for n, (a, b) in life.items():
        if g.tensors[n].given:
            births.setdefault(a, []).append(n)
        deaths.setdefault(b, []).append(n)
    live: dict[str, list[str]] = {}
    values: dict[str, np.ndarray] = {}
    seconds: dict[str, Any] = {"given": 0.0, "ops": {}, "end_to_end": 0.0}
    checked = 0
    try:
        for step in range(end + 1):
            op = g.ops[g.order[step]] if step < end else None
            name = op.name if op is not None else "the end"
            clock = time.perf_counter()
            for n in births.get(step, ()):
                t = tensors[n]
                overwrite(spans, life, step, [n], live, f"{name} (placing given {n})")
                values[n] = _given(g, gp, kinds, n, t, inputs.get(n), seed + index[n],
                                   reads.get(n, []))
                if t.tier not in VALUE_TIERS and mem is not None:  # (a given stream: the
                    place(mem, t, g.axes_of([n]), values[n])  # Tensor Unit computed it)
                _born(spans, live, n)
            seconds["given"] += time.perf_counter() - clock
            if op is not None:
                clock = time.perf_counter()
                made = twins.step(g, gp, kinds, op, g.order[step], mem, tensors, values,
                                  inputs, seed)
                overwrite(spans, life, step, made, live, op.name)
                for n in made:
                    _born(spans, live, n)
                seconds["ops"][op.name] = time.perf_counter() - clock
                if progress is not None:
                    progress("ops", step + 1, end, op.name)
            clock = time.perf_counter()
            for n in deaths.get(step, ()):
                t = tensors[n]
                if n in values and t.tier not in VALUE_TIERS and mem is not None:
                    checked += verify(mem, t, g.axes_of([n]), values[n])["checked"]
                if t.tier not in VALUE_TIERS and mem is not None:
                    clear_bottom(mem, t, g.axes_of([n]))
                if keep is not None and n not in keep:
                    values.pop(n, None)
                if n in spans and n in live.get(spans[n][0], ()):
                    live[spans[n][0]].remove(n)
                    _release(mem, spans[n], live.get(spans[n][0], []), spans)
            seconds["end_to_end"] += time.perf_counter() - clock
        twins.apart.finish()
    except TcplanError:  # (a check run apart of an earlier op fails first)
        twins.apart.finish()
        raise
    finally:
        twins.apart.close()
    return values, {"verified": True, "checked": checked, "seconds": seconds,
                    "replayed": twins.replayed, "checked_apart": twins.apart.started,
                    "method": "ran every op in topological order on one set of simulated "
                              "memories, each checked as it ran (an op whose twin, the "
                              "same plan at the same addresses, ran and was checked "
                              "before: its values written where its plan puts them; an "
                              "op checked apart: replayed here, run in full and checked "
                              "in a process of its own), and "
                              "every tensor read back against what it must hold (holding "
                              "rule) after its last use; no op wrote over a live tensor's "
                              "bytes"}


def _spans(tensors: dict) -> dict[str, tuple[str, int, int]]:
    """Each memory tensor's tier and the bytes ``[lo, hi)`` it reaches in a unit, in the
    layout the plan chose (``g.spans`` as the loader records it, with a free tensor's
    chosen Element; a stream holds none)."""
    return {n: (t.tier, t.address, t.address + t.dims["element"].size * t.elem_bytes)
            for n, t in tensors.items() if t.tier != "stream"}


def _born(spans: dict, live: dict[str, list[str]], n: str) -> None:
    if n in spans:
        live.setdefault(spans[n][0], []).append(n)


def _release(mem: Memories | None, span: tuple[str, int, int], live: list[str],
             spans: dict) -> None:
    """A dead HBM or host tensor's whole pages given back to the system (they read as
    zeros again), but for pages a live tensor's bytes reach."""
    tier, lo, hi = span
    if tier not in ("hbm", "host") or mem is None:
        return
    for other in live:
        _, a, b = spans[other]
        if a < hi and lo < b:
            return
    for (s_tier, _), space in mem.spaces.items():
        if s_tier == tier:
            space.release(lo, hi)


def _step(g, gp, kinds: dict, op, i: int, mem: Memories | None, tensors: dict, values: dict,
          inputs: dict[str, np.ndarray], seed: int, replay: bool = False
          ) -> list[str] | None:
    """Run one op on what the memories hold (``replay``: replay it, None where its kind
    cannot); its outputs' values into ``values``; returns the tensors it wrote."""
    row = gp.ops[i]
    reads = {r: values[op.roles[r]] for r in op.read_roles}
    reads.update({"vrf:" + k.split(".", 1)[1]: v for k, v in inputs.items()
                  if k.startswith(op.name + ".")})  # (a chain's VRF operands)
    kind = kinds[op.kind]
    roles = {r: tensors[n] for r, n in op.roles.items()}
    if replay:
        out = kind.replay(row.problem, row.plan, mem, roles, reads, seed)
        if out is None:
            return None
    else:
        out = kind.execute(row.problem, row.plan, mem, roles, reads, seed)
    made = []
    for role, v in out.items():
        name = op.roles[role]
        want = tuple(g.axes_of([name]).values())
        if np.shape(v) != want:  # (every tensor's values are over the axes it carries)
            raise fail("verify-mismatch", detail=f"op {op.name} made {name} over a "
                       f"shape {np.shape(v)}, not its axes' {want}")
        values[name] = np.ascontiguousarray(v)
        made.append(name)
    return made


def _check_apart(g, gp, kinds: dict, op, i: int, tensors: dict, values: dict,
                 inputs: dict[str, np.ndarray], seed: int, made: list[str]) -> None:
    """In a child (executor/apart.py): the op run in full, checked, on memories of its own
    (its kind's ``checks_apart``: it reads only the values), and what it made compared
    with what its replay made, bit for bit."""
    own = Memories(extents([tensors[n] for n in op.roles.values()]))
    ran = dict(values)
    _step(g, gp, kinds, op, i, own, tensors, ran, inputs, seed)
    for n in made:
        a, b = values[n], ran[n]
        if a.dtype != b.dtype or a.tobytes() != b.tobytes():
            bits = np.flatnonzero(a.reshape(-1).view(np.uint8) != b.reshape(-1).view(np.uint8))
            raise fail("verify-mismatch", detail=f"op {op.name}: its run made {n} other "
                       f"than its replay (first at byte {int(bits[0]) if bits.size else 0:,})")


def _run_legacy(g, gp, kinds: dict, seed: int, inputs: dict[str, np.ndarray], progress
                ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The run before issue 32: every given tensor placed first, every tensor read back at
    the end."""
    clock = time.perf_counter()
    tensors = {n: g.tensor(n, gp.layout) for n in g.tensors}
    mem = Memories(extents(list(tensors.values())))
    values: dict[str, np.ndarray] = {}
    reads = readers(g)
    for k, (n, t) in enumerate(tensors.items()):
        if g.tensors[n].given:
            values[n] = _given(g, gp, kinds, n, t, inputs.get(n), seed + k,
                               reads.get(n, []))
            if t.tier not in VALUE_TIERS:  # (a given stream: the Tensor Unit computed it)
                place(mem, t, g.axes_of([n]), values[n])
    seconds: dict[str, Any] = {"given": time.perf_counter() - clock, "ops": {}}
    for step, i in enumerate(g.order, 1):
        clock = time.perf_counter()
        _step(g, gp, kinds, g.ops[i], i, mem, tensors, values, inputs, seed)
        seconds["ops"][g.ops[i].name] = time.perf_counter() - clock
        if progress is not None:
            progress("ops", step, len(g.order), g.ops[i].name)
    checked = 0
    clock = time.perf_counter()
    for n, t in tensors.items():  # end to end: what every tensor holds now
        if t.tier not in VALUE_TIERS:  # (a stream or register file: by the op making it)
            checked += verify(mem, t, g.axes_of([n]), values[n])["checked"]
    seconds["end_to_end"] = time.perf_counter() - clock
    return values, {"verified": True, "checked": checked, "seconds": seconds,
                    "method": "ran every op in topological order on one set of simulated "
                              "memories, each checked as it ran; then every tensor read "
                              "back against what it must hold (holding rule)"}


def readers(g) -> dict[str, list[tuple[int, str]]]:
    """Per tensor, the ops reading it in the order they run: (op index, role)."""
    out: dict[str, list[tuple[int, str]]] = {}
    for i in g.order:
        op = g.ops[i]
        for role in op.read_roles:
            out.setdefault(op.roles[role], []).append((i, role))
    return out


def _given(g, gp, kinds: dict, name: str, t, user: np.ndarray | None, seed: int,
           reads: list[tuple[int, str]]) -> np.ndarray:
    """A given tensor's data: the user's (over its axes, in its dtype), or seeded: as the
    first op reading it asks (``reads``: its :func:`readers`; an index tensor: valid
    rows), else random bits."""
    axes = g.axes_of([name])
    if user is None:
        for i, role in reads:
            op, row = g.ops[i], gp.ops[i]
            v = kinds[op.kind].given_values(row.problem, row.plan, role, seed)
            if v is not None:
                return v
        return tensor_bits(axes, t.dtype, seed)
    shape = tuple(axes.values())
    if user.shape != shape:
        raise fail("bad-request", detail=f"--input {name}: expected shape {shape} "
                   f"({', '.join(axes)}), got {user.shape}",
                   fix="save the tensor with numpy.save over its axes, in the graph's order")
    return as_dtype(user, t.dtype, name)

