"""Identical work planned once (issue 32, item 1; docs/graphs.md 'At scale').

An op's plan depends only on its kind, its own keys, its tensors' layouts (as written,
with the Element chosen) and the graph's dtype, chips and the axes they use: not on the
names of the op or of its tensors.  :func:`op_signature` is that, as text: the op's keys
with every tensor it names replaced by its role, and its tensors by role.  Every op of a
run with the same signature shares one plan (:class:`OpPlans`: the in-memory table, its
hits and misses), across the ops, layers and graphs of one run.

:class:`DiskCache` keeps the plans between runs: one file per signature (its SHA-256 with
tcplan's version), a pickle of (plan, cycles, proven, error).  It is safe to delete; it is
bounded (:data:`model.limits.OP_CACHE_MAX_BYTES`: the oldest files go first); ``TCPLAN_CACHE``
names its directory (``off``: none).  Axis names are kept in the signature: a plan names its
axes, so a plan of other axes would need translating (docs/decisions.md item 124).
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import pickle
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from tcplan.model import limits

#: the key prefix of an avoided plan's floor on disk (planner/graph_bound.py)
FLOOR = "floor\0"
#: what one op plan is: (plan, modelled cycles or None, proven, the error rejecting it)
Entry = tuple[Any, "int | None", bool, Any]
#: an op plan as kept: the entry and the shifts of the op it was made for (:func:`op_shifts`)
Kept = tuple[Entry, dict[str, int]]


def op_signature(g, op, layout: dict[str, str]) -> str:
    """What an op's plan depends on, without names: its kind, its keys (each tensor it
    names replaced by its role), its tensors by role as written with their chosen
    Elements, the axes they use, the graph's dtype and chips."""
    shifts = op_shifts(g, op)
    return json.dumps({"kind": op.kind, "data": canonical_data(op),
                       "tensors": {r: [_moved(g.tensors[t].spec, -shifts.get(r, 0)),
                                       layout.get(t)] for r, t in op.roles.items()},
                       # (a list: the order of the axes is the order of a tensor's values)
                       "axes": list(g.axes_of(op.roles.values()).items()),
                       "dtype": g.base["dtype"],
                       "chips": g.base["chips"]}, sort_keys=True, default=str)


def op_shifts(g, op) -> dict[str, int]:
    """The bytes each HBM tensor of the op lies above its address modulo the HBM decode's
    period (model/hardware.py ``HBM_DECODE_PERIOD``), for the roles its kind moves a plan
    with (``Kind.graph_rebases``): ops that differ only there share one plan, moved."""
    from tcplan.model.hardware import HBM_DECODE_PERIOD

    from .registry import kinds
    out = {}
    for role in kinds()[op.kind].graph_rebases:
        spec = g.tensors[op.roles[role]].spec if role in op.roles else {}
        at = spec.get("address", 0)
        if spec.get("tier") == "hbm" and isinstance(at, int) and at >= HBM_DECODE_PERIOD:
            out[role] = at - at % HBM_DECODE_PERIOD
    return out


def moved(op, kept: Kept, shifts: dict[str, int], problem) -> Entry:
    """A kept plan for an op whose HBM tensors lie ``shifts`` above (its kind moves it;
    ``problem()`` makes the op's problem)."""
    from .registry import kinds
    entry, origin = kept
    if shifts == origin or entry[0] is None:
        return entry
    delta = {r: shifts.get(r, 0) - origin.get(r, 0) for r in {*shifts, *origin}}
    return (kinds()[op.kind].graph_rebase(entry[0], delta, problem), *entry[1:])


def _moved(spec: dict[str, Any], by: int) -> dict[str, Any]:
    return {**spec, "address": spec["address"] + by} if by else spec


def canonical_data(op) -> dict[str, Any]:
    """An op's keys without its name and launch, each tensor it names replaced by its
    role (``<source>``)."""
    from .registry import kinds
    data = {k: v for k, v in op.data.items() if k not in ("name", "launch")}
    for role in op.roles:
        if role in data:
            data[role] = f"<{role}>"
    for role, (_, at) in kinds()[op.kind].graph_extra_roles(op.data).items():
        data = _replaced(data, at, f"<{role}>")
    return data


def _replaced(data: dict, at: tuple, value: str) -> dict:
    """``data`` with the value at the keys ``at`` replaced (copies along the path)."""
    if not at:
        return data
    out = dict(data)
    if len(at) == 1:
        out[at[0]] = value
    elif isinstance(out.get(at[0]), dict):
        out[at[0]] = _replaced(out[at[0]], at[1:], value)
    return out


@cache
def version() -> str:
    """tcplan's installed version (read once: the package metadata is parsed from disk)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as v
    try:
        return v("tcplan")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout, not installed
        return "0"


@dataclass
class DiskCache:
    """Op plans on disk, by signature; every failure to read or write is a miss."""

    root: pathlib.Path
    salt: str = ""  # what else a plan depends on: the solver's seed
    max_bytes: int = limits.OP_CACHE_MAX_BYTES
    written: int = 0

    @staticmethod
    def default(salt: str = "") -> "DiskCache | None":
        """``$TCPLAN_CACHE`` (``off``: None), else ``$XDG_CACHE_HOME/tcplan`` or
        ``~/.cache/tcplan``."""
        env = os.environ.get("TCPLAN_CACHE")
        if env == "off":
            return None
        base = pathlib.Path(env) if env else pathlib.Path(
            os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "tcplan"
        return DiskCache(base / "ops", salt)

    def path(self, signature: str) -> pathlib.Path:
        h = hashlib.sha256(f"{version()}\0{self.salt}\0{signature}".encode()).hexdigest()
        return self.root / h[:2] / f"{h}.pickle"

    def _load(self, signature: str) -> Any:
        try:
            with open(self.path(signature), "rb") as f:
                return pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError,
                ValueError, TypeError):
            return None

    def get(self, signature: str) -> Kept | None:
        got = self._load(signature)
        ok = isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], tuple) \
            and len(got[0]) == 4 and isinstance(got[1], dict)
        return got if ok else None

    def get_floor(self, signature: str) -> int | None:
        """The floor kept for an op plan avoided (planner/graph_bound.py)."""
        got = self._load(FLOOR + signature)
        return got if isinstance(got, int) and not isinstance(got, bool) else None

    def put(self, signature: str, entry: Kept | int) -> None:
        p = self.path(signature)
        try:
            p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = p.with_suffix(f".{os.getpid()}.tmp")
            with open(tmp, "wb") as f:
                pickle.dump(entry, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, p)
            self.written += p.stat().st_size
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            return
        if self.written > self.max_bytes // 8:
            self.trim()

    def trim(self) -> None:
        """Drop the oldest files until the cache holds at most ``max_bytes``."""
        self.written = 0
        try:
            files = [(p.stat().st_mtime, p.stat().st_size, p)
                     for p in self.root.glob("*/*.pickle")]
        except OSError:
            return
        total = sum(s for _, s, _ in files)
        for _, size, p in sorted(files):
            if total <= self.max_bytes:
                break
            try:
                p.unlink()
                total -= size
            except OSError:
                pass


@dataclass
class OpPlans:
    """Op plans by signature (:func:`op_signature`) for one run, over a disk cache when
    there is one; how often one was found here (``hits``), on disk (``disk_hits``) or
    made (``misses``)."""

    plans: dict[str, Kept] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    disk_hits: int = 0
    disk: DiskCache | None = None
    floors: dict[str, int] = field(default_factory=dict)  # avoided plans' floors
    avoided: int = 0  # op plans avoided by their floors (planner/graph_bound.py)

    def get(self, signature: str) -> Kept | None:
        if signature in self.plans:
            self.hits += 1
            return self.plans[signature]
        got = self.disk.get(signature) if self.disk is not None else None
        if got is not None:
            self.disk_hits += 1
            self.plans[signature] = got
        return got

    def floor(self, signature: str) -> int | None:
        """An avoided plan's floor (planner/graph_bound.py), here or on disk."""
        if signature not in self.floors and self.disk is not None:
            got = self.disk.get_floor(signature)
            if got is not None:
                self.floors[signature] = got
        return self.floors.get(signature)

    def put_floor(self, signature: str, cycles: int) -> None:
        self.floors[signature] = cycles
        if self.disk is not None:
            self.disk.put(FLOOR + signature, cycles)

    def put(self, signature: str, entry: Kept) -> None:
        self.misses += 1
        self.plans[signature] = entry
        if self.disk is not None and entry[0][2]:  # (proven: not cut by a time limit)
            self.disk.put(signature, entry)

    @property
    def asked(self) -> int:
        return self.hits + self.disk_hits + self.misses + self.avoided

    def to_json(self) -> dict[str, Any]:
        return {"asked": self.asked, "hits": self.hits, "disk_hits": self.disk_hits,
                "planned": self.misses, "avoided": self.avoided,
                "hit_rate": round((self.hits + self.disk_hits) / self.asked, 4)
                if self.asked else None}
