"""The graph an imported function becomes, built as its body is read: tensors (in the order
they come to be), ops, and the notes on what the file could not express (each with its
source line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcplan.model import hardware as hw
from tcplan.model.arith import round_up
from tcplan.model.mapping import parse

from .types import TensorType

#: DM tensors start on 1 KiB boundaries, HBM tensors on 1 MiB ones (as the hand-written
#: Qwen3 graphs do: docs/kernels.md); a register file's tensors on 64 bytes
from ..graph_memory import ALIGN  # noqa: E402  (one table of address alignments)
#: the stream's DMA options of every imported DMA: furiosa-opt's ``tdma`` plans them
FREE_STREAM = {"cluster": "free", "slice": "free", "time": "free", "packet": "free"}


@dataclass
class Tensor:
    """A tensor of the graph: its type (a stream's dims: cluster, slice, time, packet) and
    whether the function is handed it."""

    name: str
    type: TensorType
    given: bool = False


@dataclass
class Graph:
    """The graph being built."""

    name: str
    axes: dict[str, int]
    tensors: dict[str, Tensor] = field(default_factory=dict)
    ops: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fresh(self, base: str, tier: str = "") -> str:
        """``base``, or ``base_TIER`` (``weight_dm``), or ``base_2``, ``base_3``... the first
        not taken (tensor and op names)."""
        taken = set(self.tensors) | {o["name"] for o in self.ops}
        if base in taken and tier and f"{base}_{tier}" not in taken:
            return f"{base}_{tier}"
        name, k = base, 2
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        return name

    def add(self, base: str, ttype: TensorType, given: bool = False) -> str:
        name = self.fresh(base, ttype.tier if ttype.tier != "stream" else "")
        self.tensors[name] = Tensor(name, ttype, given)
        return name

    def op(self, base: str, kind: str, **fields: Any) -> None:
        self.ops.append({"name": self.fresh(base), "kind": kind, **fields})

    def note(self, line: int, text: str) -> None:
        self.notes.append(f"line {line}: {text}")

    def used(self) -> list[str]:
        """The tensors some op reads or writes, in the order they came to be."""
        named = {n for o in self.ops for n in touched(o)}
        return [n for n in self.tensors if n in named]


#: an op's keys that name a tensor it reads (besides ``vrf``'s values), and the one it writes
READ_KEYS = ("source", "stream", "trf", "index")
WRITE_KEY = "destination"


def touched(o: dict[str, Any], write: bool = True) -> list[str]:
    """The tensors an op names: those it reads, and (``write``) the one it writes."""
    keys = READ_KEYS + ((WRITE_KEY,) if write else ())
    return [o[k] for k in keys if isinstance(o.get(k), str)] + list(o.get("vrf", {}).values())


def _reads(o: dict[str, Any]) -> set[str]:
    return set(touched(o, write=False))


def _pipeline(g: Graph, k: int) -> list[int]:
    """The ops that feed op ``k`` through streams, back to its Fetch (indices, ascending)."""
    out, want = [k], {g.ops[k]["source"]}
    for j in range(k - 1, -1, -1):
        o = g.ops[j]
        dest = o.get("stream") if o["kind"] == "fetch" else o.get("destination")
        if isinstance(dest, str) and dest in want and g.tensors[dest].type.tier == "stream":
            out.append(j)
            want |= {o["source"]} if o["kind"] != "fetch" else set()
    return sorted(out)


def sink_register_loads(g: Graph, result: str | None) -> list[str]:
    """Each register file's load (its Fetch ... ``to_vrf`` / ``to_trf``) moved down to just
    before the pipeline of the first op that reads the register, where the kernel loads it
    earlier: a register tensor then holds the register file only while it is needed
    (docs/decisions.md item 117).  A load no op of the graph reads (only callees do: their
    graphs give the register) is left out, unless it is the function's ``result``.  Returns
    a note per change."""
    notes = []
    for dest in [o["destination"] for o in g.ops if o["kind"] in ("to_vrf", "to_trf")]:
        k = next(i for i, o in enumerate(g.ops) if o.get("destination") == dest)
        first = next((i for i, o in enumerate(g.ops) if i > k and dest in _reads(o)), None)
        if first is None and dest == result:
            continue
        group = _pipeline(g, k)
        ops = [g.ops[i] for i in group]
        rest = [o for i, o in enumerate(g.ops) if i not in group]
        if first is None:
            g.ops = rest
            notes.append(f"{dest}: loaded for callees only (their graphs give it): left out")
            continue
        start = min(j for j in _pipeline(g, first) if j > k)
        if start == k + 1:
            continue
        at = rest.index(g.ops[start])
        g.ops = rest[:at] + ops + rest[at:]
        notes.append(f"{dest}: loaded where it is first read, later than the kernel loads "
                     "it (a register tensor holds its file only while it is read)")
    return notes


def _bytes(g: Graph, t: Tensor) -> int:
    size = parse(t.type.dim("element"), g.axes).size
    return size * hw.DTYPE_BYTES[t.type.dtype]


def addresses(g: Graph, names: list[str]) -> dict[str, int]:
    """Each memory tensor's address: DM and HBM tensors one after the other in the order
    they came to be; a register file's tensor at the lowest address no tensor alive with it
    holds (the kernels reuse the VRF and the TRF between their uses)."""
    life = _lifetimes(g, names)
    out: dict[str, int] = {}
    top = {"dm": 0, "hbm": 0}
    for n in names:
        t = g.tensors[n]
        tier, size = t.type.tier, 0
        if tier == "stream":
            continue
        size = _bytes(g, t)
        if tier in top:
            out[n] = top[tier]
            top[tier] = round_up(top[tier] + size, ALIGN[tier])
            continue
        out[n] = _first_fit(g, n, size, life, out)
    return out


def _first_fit(g: Graph, n: str, size: int, life: dict[str, tuple[int, int]],
               placed: dict[str, int]) -> int:
    a, b = life[n]
    busy = sorted((placed[m], placed[m] + _bytes(g, g.tensors[m])) for m in placed
                  if g.tensors[m].type.tier == g.tensors[n].type.tier and
                  not (life[m][1] < a or b < life[m][0]))
    at = 0
    for lo, hi in busy:
        if at + size <= lo:
            break
        at = max(at, round_up(hi, ALIGN[g.tensors[n].type.tier]))
    return at


def _lifetimes(g: Graph, names: list[str]) -> dict[str, tuple[int, int]]:
    life: dict[str, tuple[int, int]] = {}
    for k, o in enumerate(g.ops):
        for n in touched(o):
            lo, hi = life.get(n, (k, k))
            life[n] = (min(lo, k), max(hi, k))
    return {n: (0 if g.tensors[n].given else life[n][0], life[n][1]) for n in names}
