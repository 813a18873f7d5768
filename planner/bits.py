"""HBM address bits as CP-SAT variables: where a free HBM Element's digits land, and how many
of the 32 channels a transfer then reaches (issue 15; docs/decisions.md item 77).

A free Element is an order of digits.  In that order a digit's low address bit is the log2
of the element bytes plus the log2 sizes of the digits inside it, and it occupies
``[low, low + log2 size)`` when every size is a power of two (and the base address is
aligned past the tensor).  The address decode (``model/hardware.py``) reads five channel
outputs: the stack bit (8) and four channel-hash bits, each the XOR of four address bits
(9 + c, 13 + c, 21 + c, 25 + c).  Every address bit feeds at most one output, so the bits a
transfer varies reach ``2 ** k`` channels, ``k`` the outputs that read a varying bit, with
the requests spread evenly over them (:func:`channels_reached`).

Where a size is not a power of two (or the base address is not aligned), a digit's values
carry into every bit above its lowest one; the model then lets it reach any output at or
above that bit.  That can only overcount the channels, so the bus floor stays a lower bound.

:class:`SourceMaster` is the planner's outer model for a free HBM source: it chooses the
source Element order and a placement/engine-split option, with the objective a lower bound
of every plan with that choice: the option's engine floor (:func:`model.cost.engine_floor`)
and the HBM bus floor over the channels the order reaches.  The layout search then plans
the proposed pair exactly, and the master excludes it, until its bound reaches the best
plan (:func:`planner.layout.search_sources`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Iterable

from tcplan.model import hardware as hw
from tcplan.model.mapping import Mapping

if TYPE_CHECKING:  # (CP-SAT is imported where a model is built)
    from ortools.sat.python.cp_model import IntVar

#: the address bits each channel output reads: the stack bit, then each channel-hash bit
CHANNEL_INPUTS: tuple[tuple[int, ...], ...] = ((hw.HBM_STACK_BIT,),) + tuple(
    tuple(b + off for off in hw.HBM_CHANNEL_XOR_OFFSETS) for b in hw.HBM_CHANNEL_BITS)
#: names of the outputs, for reports
OUTPUT_NAMES = ("stack",) + tuple(f"channel {c}" for c in range(len(hw.HBM_CHANNEL_BITS)))
#: the highest address bit a channel output reads
TOP_BIT = max(max(bits) for bits in CHANNEL_INPUTS)


def outputs_reached(varying: Iterable[int]) -> int:
    """How many channel outputs read at least one of the ``varying`` address bits."""
    v = set(varying)
    return sum(1 for bits in CHANNEL_INPUTS if v.intersection(bits))


def channels_reached(varying: Iterable[int]) -> int:
    """The channels addresses reach when exactly the ``varying`` bits take every combination
    (the others fixed): each output is the XOR of disjoint bits, so ``2 ** outputs``."""
    return 1 << outputs_reached(varying)


def _log2(n: int) -> int:
    return n.bit_length() - 1


def _twos(n: int) -> int:
    return (n & -n).bit_length() - 1


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass(frozen=True)
class Digit:
    """One digit of a free HBM Element: its term, positions, and whether the transfer
    moves it (varies it); a digit it does not move stays at one value."""

    term: Mapping
    size: int
    moved: bool

    @property
    def label(self) -> str:
        """The digit's term as text (names, messages)."""
        return self.term.body()


def exact_bits(digits: list[Digit], elem_bytes: int, base: int) -> bool:
    """Do the digits occupy whole bit ranges, with no carries (every size a power of two,
    and the base address aligned past the tensor)?"""
    top = _log2(elem_bytes) + sum(max(d.size - 1, 0).bit_length() for d in digits)
    return all(_pow2(d.size) for d in digits) and base % (1 << top) == 0


class OrderBits:
    """The channel outputs a free Element order reaches, in CP-SAT model ``m``:
    ``carried[o]`` is true only if a moved digit lands on (or, inexact, may carry into) one
    of output ``o``'s bits; ``outputs`` is their sum.  ``inside(i, j)`` is a literal (or a
    constant) that digit ``j`` lies inside digit ``i`` in the order."""

    def __init__(self, m, digits: list[Digit], elem_bytes: int, base: int,
                 inside: Callable[[int, int], Any], pre: str):
        self.exact = exact_bits(digits, elem_bytes, base)
        n = len(digits)
        lowest = _log2(elem_bytes)
        weight = [_log2(d.size) if self.exact else _twos(d.size) for d in digits]
        self.low = []
        for i in range(n):
            lo = m.new_int_var(lowest, lowest + sum(weight), f"{pre}low_bit_{i}")
            m.add(lo == lowest + sum(weight[j] * inside(i, j) for j in range(n)
                                     if j != i and weight[j]))
            self.low.append(lo)
        self.carried = []
        for o, bits in enumerate(CHANNEL_INPUTS):
            ways = []
            for i, d in enumerate(digits):
                if not d.moved or d.size < 2:
                    continue  # fixed in the transfer: its bits do not vary
                for b in bits:
                    c = m.new_bool_var(f"{pre}digit_{i}_on_bit_{b}")
                    m.add(self.low[i] <= b).only_enforce_if(c)
                    if self.exact:  # the digit's bits end below its top
                        m.add(self.low[i] + _log2(d.size) > b).only_enforce_if(c)
                    ways.append(c)
            k = m.new_bool_var(f"{pre}reaches_{OUTPUT_NAMES[o].replace(' ', '_')}")
            if ways:
                m.add_bool_or(ways).only_enforce_if(k)
            else:
                m.add(k == 0)
            self.carried.append(k)
        self.outputs = m.new_int_var(0, len(CHANNEL_INPUTS), f"{pre}channel_outputs")
        m.add(self.outputs == sum(self.carried))


def bus_floor(reads: float, writes: float, outputs: int) -> int:
    """What a chip's HBM takes at least when its ``reads`` requests land on ``2 ** outputs``
    channels and its ``writes`` requests anywhere: the start-up, then the busiest channel's
    requests at 16/3 cycles each, and at least one row open of 40 cycles where any request
    is (docs/decisions.md item 73)."""
    per = max(reads / (1 << outputs), (reads + writes) / hw.HBM_CHANNELS)
    opens = hw.HBM_ROW_SWITCH_CYCLES if reads + writes > 0 else 0
    return math.ceil(hw.DMA_STARTUP_CYCLES + max(per * hw.HBM_REQUEST_CYCLES, opens))


#: log2 of an HBM request's bytes: a packet below it still costs one request
REQUEST_BITS = _log2(hw.DMA_REQUEST_BYTES)


def request_floor(moved: int, packet_bits: int) -> int:
    """An engine moving ``moved`` bytes in packets of at most ``2 ** packet_bits`` bytes
    issues at least ``moved / min(that, 256)`` requests, one per cycle, after its start-up."""
    per = 1 << min(packet_bits, REQUEST_BITS)
    return math.ceil(hw.DMA_STARTUP_CYCLES + moved / per / (
        hw.DMA_ENGINE_BYTES_PER_CYCLE / hw.DMA_REQUEST_BYTES))


@dataclass
class Proposal:
    order: tuple[int, ...]  # digit indices, outermost first
    option: int
    bound: int  # what every plan with this order and option takes at least (cycles)


class Spent(Enum):
    """Why the outer model proposes no pair: every pair is tried or none can beat the best
    plan (``ALL``: the search is done, proven), or the time ran out (``TIME``)."""

    ALL = "all"
    TIME = "time"


class SourceMaster:
    """The outer model of a free HBM source: the source Element order (a circuit over the
    digits; ``prefix`` outermost, or one of ``allowed``) and an option (placement and engine
    split) whose engine floor is ``floors[k]``.  The objective, a lower bound of the
    estimate of every plan with the pair: the option's floor, and the bus floor of
    ``reads`` (per chip) over the channels the order reaches plus ``writes`` anywhere.
    :meth:`propose` gives the pair of least bound not yet excluded."""

    def __init__(self, digits: list[Digit], elem_bytes: int, base: int, prefix: list[int],
                 allowed: list[tuple[int, ...]] | None, floors: list[tuple[int, int]],
                 reads: float, writes: float, chain: list[int] | None, seed: int = 0):
        from ortools.sat.python import cp_model
        self.cp_model = cp_model
        self.m = m = cp_model.CpModel()
        self.seed = seed
        n = self.n = len(digits)
        D = n  # outside the Element: D -> outermost, innermost -> D
        self.x = {(i, j): m.new_bool_var(f"next_{i}_{j}") for i in range(n + 1)
                  for j in range(n + 1) if i != j}
        m.add_circuit([(i, j, lit) for (i, j), lit in self.x.items()])
        self.pos = [m.new_int_var(0, max(n - 1, 0), f"depth_{d.label}") for d in digits]
        for i in range(n):
            m.add(self.pos[i] == 0).only_enforce_if(self.x[D, i])
            for j in range(n):
                if i != j:
                    m.add(self.pos[j] == self.pos[i] + 1).only_enforce_if(self.x[i, j])
        for k, i in enumerate(prefix):
            m.add(self.pos[i] == k)
        if allowed is not None:
            m.add_allowed_assignments(self.pos, [tuple(o.index(i) for i in range(n))
                                                 for o in allowed])
        inside_of: dict[tuple[int, int], Any] = {}

        def inside(i: int, j: int) -> Any:
            if (i, j) not in inside_of:
                b = m.new_bool_var(f"inside_{i}_{j}")
                m.add(self.pos[j] > self.pos[i]).only_enforce_if(b)
                m.add(self.pos[j] < self.pos[i]).only_enforce_if(~b)
                inside_of[i, j] = b
            return inside_of[i, j]
        self.bits = OrderBits(m, digits, elem_bytes, base, inside, "")
        self.option = [m.new_bool_var(f"option_{k}") for k in range(len(floors))]
        m.add_exactly_one(self.option)
        # the bus floor by (channel outputs reached, log2 of the packet bytes at most): a
        # packet under 256 bytes is still a request
        per = REQUEST_BITS + 1
        scale = [(1 << REQUEST_BITS) / (1 << v) for v in range(per)]
        table = [bus_floor(reads * scale[v], writes * scale[v], k)
                 for k in range(len(CHANNEL_INPUTS) + 1) for v in range(per)]
        self.table = table
        packet = self._packet_bits(m, digits, elem_bytes, chain)
        self.bus = m.new_int_var(min(table), max(table), "bus_floor")
        m.add_element(self.bits.outputs * per + packet, table, self.bus)
        most = max([t for f, moved in floors for t in (f, request_floor(moved, 0))] + table)
        self.floor = m.new_int_var(0, most, "floor")
        m.add(self.floor >= self.bus)
        m.add(self.floor >= sum(f * o for (f, _), o in zip(floors, self.option)))
        for (_, moved), o in zip(floors, self.option):  # requests of packets under 256 B
            need = m.new_int_var(0, most, "")
            m.add_element(packet, [request_floor(moved, v) for v in range(REQUEST_BITS + 1)],
                          need)
            m.add(self.floor >= need).only_enforce_if(o)
        m.minimize(self.floor)
        self.rounds = 0

    def _packet_bits(self, m, digits: list[Digit], elem_bytes: int, chain: list[int] | None):
        """log2 of the most bytes a DMA packet can hold (at most a request's 8): the packet
        is contiguous on both sides, so it lies in the innermost digits of the source that
        continue ``chain``, the destination's contiguous digits innermost first, in its
        order (None: unknown, no bound)."""
        lowest = _log2(elem_bytes)
        D, order = self.n, chain or []
        run: list[IntVar] = []
        terms = []
        for k, i in enumerate(order):
            r = m.new_bool_var(f"packet_holds_{i}")
            step = self.x[i, D] if k == 0 else self.x[i, order[k - 1]]
            m.add_bool_and([step] + run[-1:]).only_enforce_if(r)
            m.add_bool_or([~step] + [~q for q in run[-1:]] + [r])
            run.append(r)
            terms.append(max(digits[i].size - 1, 0).bit_length() * r)
        bits = m.new_int_var(lowest, lowest + sum(max(digits[i].size - 1, 0).bit_length()
                                                  for i in chain or []), "packet_bits")
        m.add(bits == lowest + sum(terms))
        capped = m.new_int_var(0, REQUEST_BITS, "packet_bits_capped")
        if chain is None:
            m.add(capped == REQUEST_BITS)
        else:
            m.add_min_equality(capped, [bits, REQUEST_BITS])
        return capped

    def propose(self, beat: int | None, seconds: float) -> Proposal | Spent:
        """The pair of least bound; :attr:`Spent.ALL` when no pair is left or none can beat
        ``beat`` (the best plan so far); :attr:`Spent.TIME` when the time ran out first."""
        cp = self.cp_model
        s = cp.CpSolver()
        s.parameters.num_workers = 1
        s.parameters.random_seed = self.seed
        s.parameters.max_time_in_seconds = max(seconds, 0.05)
        st = s.solve(self.m)
        if st == cp.INFEASIBLE:
            return Spent.ALL
        if st != cp.OPTIMAL:
            return Spent.TIME
        bound = round(s.objective_value)
        if beat is not None and bound >= beat:
            return Spent.ALL
        self.rounds += 1
        order = tuple(sorted(range(self.n), key=lambda i: s.value(self.pos[i])))
        option = next(k for k, o in enumerate(self.option) if s.value(o))
        return Proposal(order, option, bound)

    def bound_of(self, order: tuple[int, ...], option: int) -> int | None:
        """The model's bound for one pair (None: the pair is not allowed or excluded)."""
        cp = self.cp_model
        m = self.m.clone()
        for depth, i in enumerate(order):
            m.add(m.get_int_var_from_proto_index(self.pos[i].index) == depth)
        m.add(m.get_bool_var_from_proto_index(self.option[option].index) == 1)
        s = cp.CpSolver()
        s.parameters.num_workers = 1
        s.parameters.max_time_in_seconds = 10.0
        if s.solve(m) != cp.OPTIMAL:
            return None
        return round(s.objective_value)

    def drop(self, option: int) -> None:
        """Never propose this option (it breaks a rule no order changes)."""
        self.m.add(self.option[option] == 0)

    def exclude_order(self, order: tuple[int, ...]) -> None:
        """Never propose this order again, with any option."""
        D = self.n
        chain = [D, *order, D] if self.n else []
        self.m.add_bool_or([~self.x[a, b] for a, b in zip(chain, chain[1:])])

    def exclude(self, p: Proposal) -> None:
        """Never propose this pair again."""
        D = self.n
        chain = [D, *p.order, D] if self.n else []
        arcs = [self.x[a, b] for a, b in zip(chain, chain[1:])]
        self.m.add_bool_or([~lit for lit in arcs] + [~self.option[p.option]])
