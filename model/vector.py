"""The Vector Engine's Intra-Slice Chain: steps, the ALU catalog, and chain validation.

A chain (seed 003; docs/hardware.md section 7) enters with a tag (or, in pair mode, an unzip),
passes the stages in their fixed order (skipping what it does not need) and exits at 8-way with
``final`` or ``inter_slice_reduce``.  :func:`analyze` walks a chain once, checks every rule of
the registry's ``vector`` scope, and returns an :class:`Analysis`: per step its stage, way, dtype
and ALU, and the *arrangement* of the stream (which axis coordinates each Time x Packet position
holds) after every reshaping step, as index maps the executor applies to data.  The arrangement
is how declared mappings (narrow/widen/unzip/reduce targets, the output) are checked:
numerically, position by position, against what the shape semantics produce.

Pure: no data, no numpy values other than index arrays derived from the mappings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import hardware as hw
from . import limits
from .mapping import LIVE, TOP, Mapping, equivalent, join, number
from .rules import fail
from .tiers import Tensor

# ---- stages (docs/hardware.md section 7, first table) -----------------------------------------
#: stage number -> (name, way, stashable, may hand over to the Inter-Slice Reducer)
STAGES: dict[int, tuple[str, int, bool, bool]] = {
    1: ("Tag", 8, True, False),
    2: ("Logic", 8, True, True),
    3: ("Fxp", 8, True, True),
    4: ("FxpToFp", 8, False, True),
    5: ("Narrow", 8, True, False),  # 8 -> 4
    6: ("Fp", 4, True, False),
    7: ("IntraSliceReduce", 4, False, False),
    8: ("FpDiv", 4, True, False),
    9: ("Widen", 4, False, True),  # 4 -> 8
    10: ("FpToFxp", 8, False, True),
    11: ("Clip", 8, True, True),
    12: ("Filter", 8, False, False),
}
STAGE_NAMES = {n: s[0] for n, s in STAGES.items()}
#: stages a chain may stay in for several ops (one ALU each); the others are passed once
REPEATABLE_STAGES = frozenset({2, 3, 6, 11})
#: step kind -> stage number (stash, reinterpret and the exits occupy no stage)
STEP_STAGE = {
    "tag": 1, "unzip": 1, "logic": 2, "logic_zip": 2, "fxp": 3, "fxp_zip": 3, "fxp_to_fp": 4,
    "narrow_split": 5, "narrow_trim": 5, "fp_unary": 6, "fp_binary": 6, "fp_ternary": 6,
    "fp_zip": 6, "reduce": 7, "fp_div": 8, "widen_concat": 9, "widen_pad": 9,
    "fp_to_fxp": 10, "clip": 11, "clip_zip": 11, "filter": 12,
}
STEP_KINDS = tuple(STEP_STAGE) + ("stash", "reinterpret", "final", "inter_slice_reduce")
#: the API method each step kind stands for (for messages)
METHODS = {k: "vector_" + {"tag": "intra_slice_tag", "unzip": "intra_slice_unzip",
                           "reduce": "intra_slice_reduce"}.get(k, k) for k in STEP_KINDS}
EXITS = ("final", "inter_slice_reduce")
ZIPS = ("logic_zip", "fxp_zip", "fp_zip", "clip_zip")

# ---- the ALU catalog (docs/hardware.md section 7, second table) ---------------------------------
#: (operation family, dtype) -> {op: ALU}.  Families: logic, fxp, fp_unary, fp_binary,
#: fp_ternary, reduce, fp_div, clip.  Every ALU may be used once per Tensor Unit invocation.
ALU_CATALOG: dict[tuple[str, str], dict[str, str]] = {
    ("logic", "i32"): {"BitAnd": "LogicAnd", "BitOr": "LogicOr", "BitXor": "LogicXor",
                       "LeftShift": "LogicLshift", "LogicRightShift": "LogicRshift",
                       "ArithRightShift": "LogicRshift"},
    ("logic", "f32"): {"BitAnd": "LogicAnd", "BitOr": "LogicOr", "BitXor": "LogicXor"},
    ("fxp", "i32"): {"AddFxp": "FxpAdd", "AddFxpSat": "FxpAdd", "SubFxp": "FxpAdd",
                     "SubFxpSat": "FxpAdd", "LeftShift": "FxpLshift",
                     "LeftShiftSat": "FxpLshift", "MulFxp": "FxpMul", "MulInt": "FxpMul",
                     "LogicRightShift": "FxpRshift", "ArithRightShift": "FxpRshift",
                     "ArithRightShiftRound": "FxpRshift"},
    ("fp_unary", "f32"): {"Exp": "FpExp", "NegExp": "FpExp", "Sqrt": "FpFpu", "Tanh": "FpFpu",
                          "Sigmoid": "FpFpu", "Erf": "FpFpu", "Log": "FpFpu", "Sin": "FpFpu",
                          "Cos": "FpFpu"},
    ("fp_binary", "f32"): {"AddF": "FpFma", "SubF": "FpFma", "MulF(Mul0)": "FpMul0",
                           "MulF(Mul1)": "FpMul1", "MulF(Fma)": "FpFma", "DivF": "FpFpu"},
    ("fp_ternary", "f32"): {"FmaF": "FpFma"},
    ("reduce", "i32"): {"AddSat": "IntraSliceReduce", "Max": "IntraSliceReduce",
                        "Min": "IntraSliceReduce"},
    ("reduce", "f32"): {"Add": "IntraSliceReduce", "Max": "IntraSliceReduce",
                        "Min": "IntraSliceReduce"},
    ("fp_div", "f32"): {"DivF": "FpDiv"},
    ("clip", "i32"): {"Min": "ClipMin", "AbsMin": "ClipMin", "Max": "ClipMax",
                      "AbsMax": "ClipMax", "AddFxp": "ClipAdd", "AddFxpSat": "ClipAdd"},
    ("clip", "f32"): {"Min": "ClipMin", "AbsMin": "ClipMin", "Max": "ClipMax",
                      "AbsMax": "ClipMax", "Add": "ClipAdd"},
}
#: step kind -> its operation family (zips use their cluster's family)
FAMILY = {"logic": "logic", "logic_zip": "logic", "fxp": "fxp", "fxp_zip": "fxp",
          "fp_unary": "fp_unary", "fp_binary": "fp_binary", "fp_zip": "fp_binary",
          "fp_ternary": "fp_ternary", "reduce": "reduce", "fp_div": "fp_div", "clip": "clip",
          "clip_zip": "clip"}
#: step kinds with one operand (binary) or two (ternary)
BINARY = ("logic", "fxp", "fp_binary", "fp_div", "clip")
TERNARY = ("fp_ternary",)
BINARY_MODES = {"Mode00": ("s", "s"), "Mode01": ("s", "o0"), "Mode10": ("o0", "s"),
                "Mode11": ("o0", "o0")}
TERNARY_MODES = {"Mode012": ("s", "o0", "o1"), "Mode002": ("s", "s", "o1"),
                 "Mode102": ("o0", "s", "o1"), "Mode112": ("o0", "o0", "o1"),
                 "Mode020": ("s", "o1", "s"), "Mode021": ("s", "o1", "o0"),
                 "Mode120": ("o0", "o1", "s")}
#: ops of the Inter-Slice Reducer a chain may hand over to (i32: Add, AddSat, Max, Min;
#: f32: Add, Max, Min, Mul); the reducer itself is not modelled (docs/decisions.md item 39)
INTER_SLICE_OPS = ("Add", "AddSat", "Max", "Min", "Mul")
CMP_OPS = ("Equal", "Less", "Greater", "LessUnsigned", "GreaterUnsigned", "True", "False")
TAG_MODES = ("zero", "comparison", "axis_toggle")
BIT_REQS = ("One", "Zero", "Ignore")
DTYPES = ("i32", "f32")


def ops_of(family: str) -> set[str]:
    """Every op name a family knows, over both dtypes (for input validation)."""
    return {op for (fam, _), ops in ALU_CATALOG.items() if fam == family for op in ops}


# ---- chain description ----------------------------------------------------------------
@dataclass(frozen=True)
class Guard:
    """A TagGuard: ``all``, ``group`` (bit 3 == group) or ``matches`` / ``not_matches`` over
    four BitReqs written LSB first."""

    kind: str = "all"
    bits: tuple[str, ...] = ("Ignore",) * 4
    group: int = 0

    def canonical(self) -> "Guard":
        if self.kind == "matches" and all(b == "Ignore" for b in self.bits):
            return Guard("all")  # stored as all() (seed 003)
        return self

    @property
    def dead(self) -> bool:
        return self.kind == "not_matches" and all(b == "Ignore" for b in self.bits)

    @property
    def unconditional(self) -> bool:
        return self.canonical().kind == "all"

    def admits(self, tags: np.ndarray) -> np.ndarray:
        if self.kind == "all":
            return np.ones(tags.shape, dtype=bool)
        if self.kind == "group":
            return ((tags >> 3) & 1) == self.group
        ok = np.ones(tags.shape, dtype=bool)
        for i, b in enumerate(self.bits):
            if b != "Ignore":
                ok &= ((tags >> i) & 1) == (1 if b == "One" else 0)
        return ok if self.kind == "matches" else ~ok

    def text(self) -> str:
        if self.kind == "all":
            return "all()"
        if self.kind == "group":
            return f"group({self.group})"
        return f"{self.kind}([{', '.join(self.bits)}])"


@dataclass(frozen=True)
class Operand:
    kind: str  # const, vrf, stash
    value: Any = None  # the constant (int for i32, float for f32)
    name: str | None = None  # the VRF tensor

    def text(self) -> str:
        if self.kind == "const":
            return repr(self.value)
        return "Stash" if self.kind == "stash" else f"&{self.name}"


@dataclass(frozen=True)
class Slot:
    guard: Guard
    operand: Operand
    port: str  # imm or rf


#: a plain operand drives one unconditional slot: a constant the first immediate, VRF and
#: stash the register-file port
def plain(op: Operand) -> tuple[Slot, ...]:
    return (Slot(Guard(), op, "imm" if op.kind == "const" else "rf"),)


@dataclass
class Step:
    kind: str
    op: str | None = None
    #: binary: (slots,); ternary: (slots0, slots1); others: ()
    operands: tuple[tuple[Slot, ...], ...] = ()
    mode: str | None = None
    #: pair mode, per group: binary -> (slots | None, slots | None); unary -> (bool, bool)
    groups: tuple | None = None
    int_width: int | None = None
    dtype: str | None = None  # reinterpret target
    axis: str | None = None  # unzip / reduce
    tag: tuple = ("zero",)  # ("zero",) | ("comparison", ((op, value), ...x4)) | ("axis_toggle", a)
    guard: Guard | None = None  # filter
    time: Mapping | None = None  # declared Time after the step
    packet: Mapping | None = None  # declared Packet after the step
    where: str = ""  # source location, for messages

    def title(self) -> str:
        return METHODS[self.kind] + (f" {self.op}" if self.op else "")


@dataclass
class Chain:
    """One Tensor Unit invocation of the Intra-Slice Chain over a collected stream."""

    dtype: str  # the stream's scalar at entry: i32 or f32
    axes: dict[str, int]
    stream: Tensor  # tier stream: chip, cluster, slice, time, packet
    steps: list[Step]
    vrf: dict[str, Tensor] = field(default_factory=dict)
    output: dict[str, Mapping] = field(default_factory=dict)  # declared time / packet


# ---- arrangement: which coordinates every Time x Packet position holds -------------------
@dataclass
class Arrangement:
    """Time x Packet arrangement of a stream: per axis the (T, P) coordinates contributed by
    Time and Packet, and the (T, P) status (LIVE or a padding code)."""

    cells: dict[str, np.ndarray]
    status: np.ndarray

    @property
    def T(self) -> int:
        return self.status.shape[0]

    @property
    def P(self) -> int:
        return self.status.shape[1]

    @property
    def live(self) -> np.ndarray:
        return self.status == LIVE

    @classmethod
    def of(cls, time: Mapping, packet: Mapping) -> "Arrangement":
        if time.size * packet.size > limits.EVAL_MAX_POSITIONS:
            raise limits.size_error(
                time.size * packet.size, limits.EVAL_MAX_POSITIONS, "a stream's Time x Packet",
                "positions", {f"time {time.text()}": time.size,
                              f"packet {packet.text()}": packet.size}, limits.EVALUATION)
        tc, ts = time.evaluate()
        pc, ps = packet.evaluate()
        cells: dict[str, np.ndarray] = {}
        for a in set(tc) | set(pc):
            t = tc.get(a, np.zeros(time.size, np.int64))
            p = pc.get(a, np.zeros(packet.size, np.int64))
            cells[a] = t[:, None] + p[None, :]
        status = np.where(ts[:, None] != LIVE, ts[:, None], ps[None, :]).astype(np.uint8)
        sizes = {**time.axes, **packet.axes}
        for a, c in cells.items():  # summed coordinates past the axis are padding (item 21)
            status[(status == LIVE) & (c >= sizes.get(a, 1 << 62))] = TOP
        dead = status != LIVE
        for a in cells:
            cells[a] = np.where(dead, 0, cells[a])
        return cls(cells, status)

    def take(self, src: np.ndarray, fill: int = TOP) -> "Arrangement":
        """The arrangement whose position (t, p) holds old flat position ``src[t, p]``
        (``-1``: a filler lane with status ``fill``)."""
        flat = {a: c.reshape(-1) for a, c in self.cells.items()}
        st = self.status.reshape(-1)
        hole = src < 0
        s = np.where(hole, 0, src)
        cells = {a: np.where(hole, 0, c[s]) for a, c in flat.items()}
        status = np.where(hole, fill, st[s]).astype(np.uint8)
        return Arrangement(cells, status)

    def axes_present(self) -> set[str]:
        live = self.live
        return {a for a, c in self.cells.items() if (c[live] != 0).any()}

    def mismatch(self, other: "Arrangement") -> str | None:
        """Why two arrangements differ (None when they hold the same cells)."""
        if (self.T, self.P) != (other.T, other.P):
            return f"Time x Packet is {self.T} x {self.P} here, {other.T} x {other.P} declared"
        a_live, b_live = self.live, other.live
        if not np.array_equal(a_live, b_live):
            t, p = np.argwhere(a_live != b_live)[0]
            return (f"position (time {t}, lane {p}) is "
                    f"{'live' if a_live[t, p] else 'padding'} here but "
                    f"{'live' if b_live[t, p] else 'padding'} in the declared mapping")
        for ax in sorted(set(self.cells) | set(other.cells)):
            x = self.cells.get(ax, np.zeros(self.status.shape, np.int64))
            y = other.cells.get(ax, np.zeros(self.status.shape, np.int64))
            bad = (x != y) & a_live
            if bad.any():
                t, p = np.argwhere(bad)[0]
                return (f"position (time {t}, lane {p}) holds {ax} = {x[t, p]} here but "
                        f"{ax} = {y[t, p]} in the declared mapping")
        return None


# ---- analysis ----------------------------------------------------------------------------
@dataclass
class StepInfo:
    index: int  # 0-based
    step: Step
    stage: int | None
    way: int  # after the step
    dtype: str  # after the step
    alu: str | None = None
    phase: str = "single"  # single, paired (before the zip) or merged (after it)
    #: reshaping: new (T, P) -> old flat position (-1: filler lane)
    src: np.ndarray | None = None
    #: reduce: per output time index, the input time indices reduced into it
    groups: list[np.ndarray] | None = None
    #: reduce: the lanes of a flit the step folds by a tree first (4: the axis in Packet,
    #: ``op(op(a, b), op(c, d))``; 1: the axis in Time alone)
    tree: int = 1
    #: reduce: the axis's values in the order the step folds them (the same in every group;
    #: None where the groups differ)
    order: np.ndarray | None = None
    #: unzip: the input time indices of group 0 and group 1, in SplitTime order
    split: tuple[np.ndarray, np.ndarray] | None = None
    #: VRF operands read by this step: name -> (T, P) element position (-1 on padding lanes)
    vrf_index: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Analysis:
    chain: Chain
    infos: list[StepInfo]
    entry: Arrangement
    exit: Arrangement
    spatial: dict[str, np.ndarray]  # axis -> (S,) coordinates from Chip x Cluster x Slice
    spatial_status: np.ndarray  # (S,)
    alus: list[str]
    flits: int  # the most flits any stage passes (per slice)
    stash_used: bool
    dropped_axes: tuple[str, ...]  # the reduce axis and the pair grouping axis

    @property
    def latency(self) -> int:
        return len(self.alus)  # docs/hardware.md section 7: one cycle per ALU used

    @property
    def cycles(self) -> int:
        return self.flits + self.latency

    def fold_orders(self) -> dict[str, tuple[np.ndarray | None, int]]:
        """Per reduced axis: its values in the order the chain folds them and the lanes
        folded by a tree first (what a reference reproduces to be bit for bit)."""
        return {str(i.step.axis): (i.order, i.tree) for i in self.infos
                if i.step.kind == "reduce"}

    def rows(self) -> list[dict[str, Any]]:
        """Per step: stage, way, dtype after it, ALU."""
        return [{"step": i.index + 1, "call": i.step.title(),
                 "stage": STAGE_NAMES.get(i.stage) if i.stage else None, "way": i.way,
                 "dtype": i.dtype, "alu": i.alu, "phase": i.phase} for i in self.infos]

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.rows(), "alus": self.alus, "cycles": self.cycles,
                "breakdown": self.breakdown(), "output": {"time": self.exit.T,
                                                          "packet": self.exit.P}}

    def text(self) -> str:
        lines = [f"chain of {len(self.infos)} step(s), {self.chain.dtype} in; "
                 f"{self.cycles:,} cycles ({self.flits:,} flits + {self.latency} ALU)"]
        for r in self.rows():
            lines.append(f"  {r['step']:>2}. {r['call']:<34} {r['stage'] or '-':<16} "
                         f"{r['way']}-way {r['dtype']}" + (f"  {r['alu']}" if r["alu"] else "")
                         + (f"  [{r['phase']}]" if r["phase"] != "single" else ""))
        return "\n".join(lines)

    def breakdown(self) -> dict[str, Any]:
        ways = sorted({i.way for i in self.infos})
        return {"flits": self.flits, "latency": self.latency, "alus": self.alus,
                "ways": ways, "bottleneck": "4-way section (Fp, reduce, FpDiv)" if 4 in ways else "8-way"}


def _label(i: int, step: Step) -> str:
    return f"step {i + 1} ({step.title()})"


class _Walk:
    """The state machine of one chain walk (rules from the registry, scope ``vector``)."""

    def __init__(self, chain: Chain):
        self.chain = chain
        self.stage = 0  # 0: after vector_init
        self.way = 8
        self.dtype = chain.dtype
        self.phase = "single"
        self.alus: dict[str, int] = {}
        self.stash: tuple | None = None  # ("written", dtype, way, i) / ("read", i)
        self.stash_used = False
        self.exited: tuple[int, str] | None = None
        self.arr = Arrangement.of(chain.stream.dims["time"], chain.stream.dims["packet"])
        self.time_m = chain.stream.dims["time"]
        self.packet_m = chain.stream.dims["packet"]
        self.entry = self.arr
        self.flits = self.arr.T
        self.dropped: list[str] = []
        self.vrf_used: set[str] = set()
        self.infos: list[StepInfo] = []

    # -- helpers ----------------------------------------------------------------------
    def fail(self, rule: str, i: int, step: Step, **detail: Any):
        label = _label(i, step) + (f" at {step.where}" if step.where else "")
        return fail(rule, (step.title(),), step=label, **detail)

    def use_alu(self, alu: str, i: int, step: Step) -> None:
        if alu in self.alus:
            j = self.alus[alu]
            raise self.fail("ve-alu-busy", i, step, alu=alu,
                            other=_label(j, self.chain.steps[j]))
        self.alus[alu] = i

    def enter_stage(self, stage: int, i: int, step: Step) -> None:
        if stage < self.stage or (stage == self.stage and stage not in REPEATABLE_STAGES):
            raise self.fail("ve-stage-order", i, step, stage=STAGE_NAMES[stage],
                            current=STAGE_NAMES.get(self.stage, "Init"))
        self.stage = stage

    def need_way(self, way: int, i: int, step: Step) -> None:
        if self.way != way:
            fix = ("narrow first (vector_narrow_split or vector_narrow_trim)" if way == 4
                   else "widen first (vector_widen_concat or vector_widen_pad)")
            raise self.fail("ve-way", i, step, need=way, way=self.way, remedy=fix)

    def alu_of(self, step: Step, i: int, dtype: str) -> str:
        fam = FAMILY[step.kind]
        ops = ALU_CATALOG.get((fam, dtype), {})
        if step.op not in ops:
            other = [d for d in DTYPES if step.op in ALU_CATALOG.get((fam, d), {})]
            raise self.fail("ve-op-dtype", i, step, op=step.op, dtype=dtype,
                            takes=" or ".join(other) or "no")
        return ops[step.op]

    def reshape(self, i: int, step: Step, natural: Arrangement, time: Mapping,
                packet: Mapping) -> None:
        """Move to a new arrangement: the one the shape semantics produce (``natural``) must
        be the one the step's mappings declare."""
        want = Arrangement.of(time, packet)
        why = natural.mismatch(want)
        if why:
            raise self.fail("ve-shape", i, step, why=why, time=time.text(),
                            packet=packet.text())
        self.arr, self.time_m, self.packet_m = natural, time, packet

    def operand_slots(self, slots: tuple[Slot, ...], i: int, step: Step) -> None:
        """The slot rules (seed 003 "Tag"): three immediates then the rf port; no slot after
        an unconditional one; no guard that admits nothing."""
        imm = 0
        rf = 0
        uncond = None
        for s in slots:
            name = f"reg{imm}" if s.port == "imm" else "rf"
            if s.guard.dead:
                raise self.fail("ve-guard-dead", i, step, slot=name, guard=s.guard.text())
            if uncond is not None:
                raise self.fail("ve-slot-order", i, step, slot=name, before=uncond)
            if s.port == "imm":
                if rf:
                    raise self.fail("ve-operand-slots", i, step,
                                    detail="an immediate after the register-file port")
                imm += 1
                if imm > hw.VE_IMMEDIATES:
                    raise self.fail("ve-operand-slots", i, step,
                                    detail="a fourth immediate: a pass has three")
            else:
                rf += 1
                if rf > 1:
                    raise self.fail("ve-operand-slots", i, step,
                                    detail="a second register-file slot: a pass has one")
            if s.guard.unconditional:
                uncond = name
            if s.guard.kind != "all" and self.phase != "single":
                raise self.fail("ve-pair-forbidden", i, step, what="a guarded operand")

    def read_operand(self, op: Operand, i: int, step: Step, info: StepInfo) -> None:
        if op.kind == "stash":
            if self.phase != "single":
                raise self.fail("ve-pair-forbidden", i, step, what="a Stash operand")
            if self.stash is None:
                raise self.fail("ve-stash-empty", i, step)
            if self.stash[0] == "read":
                raise self.fail("ve-stash-read-twice", i, step,
                                other=_label(self.stash[1], self.chain.steps[self.stash[1]]))
            _, dtype, way, j, arr = self.stash
            if (dtype, way) != (self.dtype, self.way):
                raise self.fail("ve-stash-type", i, step, stashed=f"{dtype} {way}-way",
                                here=f"{self.dtype} {self.way}-way")
            if arr.mismatch(self.arr):
                raise self.fail("ve-stash-type", i, step, stashed=f"the stream as it was at "
                                f"{_label(j, self.chain.steps[j])}",
                                here=f"reshaped ({arr.mismatch(self.arr)})")
            self.stash = ("read", i, j)
        elif op.kind == "vrf":
            name = op.name
            assert name is not None  # a VRF operand names its tensor
            vd = self.chain.vrf[name].dtype
            if vd != self.dtype:
                raise self.fail("ve-op-dtype", i, step, op=f"VRF operand {name} ({vd})",
                                dtype=self.dtype, takes=vd)
            info.vrf_index[name] = self.vrf_operand(name, i, step)
            self.vrf_used.add(name)
        elif op.kind == "const" and self.dtype == "i32" and not isinstance(op.value, int):
            raise self.fail("ve-op-dtype", i, step, op=f"the constant {op.value!r}",
                            dtype="i32", takes="f32")
        elif op.kind == "const" and self.dtype == "f32" and isinstance(op.value, int) and \
                step.kind != "logic" and float(np.float32(op.value)) != op.value:
            raise self.fail("ve-op-dtype", i, step, op=f"the constant {op.value} (not an f32 "
                            "value: it would round)", dtype="f32", takes="i32")

    def vrf_operand(self, name: str, i: int, step: Step) -> np.ndarray:
        """The three VRF operand rules (docs/hardware.md section 7) -> element positions read."""
        from .engines.base import same_units
        v = self.chain.vrf[name]
        s = self.chain.stream
        for d in ("chip", "cluster", "slice"):
            # (the same units hold the same indices: a register file's ``m![1 # 2]`` Cluster
            # is a stream's ``m![1]``)
            if not same_units(v.dims[d], s.dims[d]):
                raise self.fail("vrf-operand-partition", i, step, name=name, dim=d.title(),
                                operand=v.dims[d].text(), stream=s.dims[d].text())
        el = v.dims["element"]
        stream_axes = self.arr.axes_present() | {
            a for d in ("chip", "cluster", "slice") for a in s.dims[d].used_axes}
        stream_axes |= {a for a in self.arr.cells}
        extra = [a for a in el.used_axes if a not in stream_axes]
        if extra:
            raise self.fail("vrf-operand-axes", i, step, name=name, axes=", ".join(extra))
        ec, es = el.evaluate()
        # every axis the operand carries: a lane must find its Time x Packet coordinates of
        # them in the Element (the Chip/Cluster/Slice parts equal the stream's, rule 1)
        used = sorted({a for d in ("chip", "cluster", "slice", "element")
                       for a in v.dims[d].used_axes})
        radix = [self.chain.axes[a] for a in used]

        def key(c: dict[str, np.ndarray], shape: tuple) -> np.ndarray:
            k = np.zeros(shape, np.int64)
            for a, r in zip(used, radix):
                k = k * r + c.get(a, np.zeros(shape, np.int64))
            return k
        live_el = es == LIVE
        ek = key(ec, es.shape)
        order = np.argsort(ek[live_el], kind="stable")
        keys_sorted = ek[live_el][order]
        pos_sorted = np.nonzero(live_el)[0][order]
        sk = key(self.arr.cells, self.arr.status.shape)
        at = np.searchsorted(keys_sorted, sk)
        at_c = np.minimum(at, max(len(keys_sorted) - 1, 0))
        found = (len(keys_sorted) > 0) & (keys_sorted[at_c] == sk) if len(keys_sorted) else \
            np.zeros(sk.shape, bool)
        live = self.arr.live
        if (live & ~found).any():
            t, p = np.argwhere(live & ~found)[0]
            want = {a: int(self.arr.cells.get(a, np.zeros_like(sk))[t, p]) for a in used}
            raise self.fail("vrf-operand-coverage", i, step, name=name, index=want,
                            element=el.text())
        idx = np.where(live, pos_sorted[at_c] if len(keys_sorted) else 0, -1)
        # rule 2: each access is one broadcast address or a contiguous run
        lanes = np.arange(self.arr.P)
        for t in range(self.arr.T):
            row, ok = idx[t], live[t]
            if ok.sum() <= 1:
                continue
            a = row[ok]
            if (a == a[0]).all():
                continue
            base = a[0] - lanes[ok][0]
            if (a == base + lanes[ok]).all():
                continue
            raise self.fail("vrf-operand-packet", i, step, name=name, time=t,
                            addresses=", ".join(str(int(x)) for x in a[:8]),
                            element=el.text())
        return idx


def analyze(chain: Chain) -> Analysis:
    """Validate a chain step by step (raises TcplanError naming the rule and the step) and
    return what the executor and the cycle model need."""
    w = _Walk(chain)
    steps = chain.steps
    if not steps:
        raise fail("ve-entry", (), step="the chain",
                   detail="an empty chain: start with tag (or unzip) and end with final")
    if w.arr.P != hw.VE_PACKET_LANES:
        s0 = steps[0]
        raise w.fail("ve-packet-size", 0, s0, size=w.arr.P, packet=w.packet_m.text())
    for i, step in enumerate(steps):
        k = step.kind
        if w.exited is not None:
            j, how = w.exited
            reads_stash = any(sl.operand.kind == "stash" for o in step.operands for sl in o)
            if how == "inter_slice_reduce" and reads_stash:
                raise w.fail("ve-stash-dropped", i, step, other=_label(j, steps[j]))
            raise w.fail("ve-after-exit", i, step, other=_label(j, steps[j]))
        info = StepInfo(i, step, STEP_STAGE.get(k), w.way, w.dtype, phase=w.phase)
        if i == 0 and k not in ("tag", "unzip"):
            raise w.fail("ve-entry", i, step,
                         detail="a chain starts with vector_intra_slice_tag, or "
                                "vector_intra_slice_unzip in pair mode")
        if i > 0 and k in ("tag", "unzip"):
            raise w.fail("ve-entry", i, step, detail=f"{METHODS[k]} only starts a chain")
        if k == "tag":
            w.enter_stage(1, i, step)
            if step.tag[0] == "axis_toggle":
                raise w.fail("ve-tag-mode", i, step)
        elif k == "unzip":
            w.enter_stage(1, i, step)
            _unzip(w, i, step, info)
        elif k == "stash":
            if w.phase != "single":
                raise w.fail("ve-pair-forbidden", i, step, what="vector_stash")
            if not STAGES[w.stage][2]:
                raise w.fail("ve-stash-stage", i, step, stage=STAGE_NAMES[w.stage])
            if w.stash is not None:
                j = w.stash[3] if w.stash[0] == "written" else w.stash[2]
                raise w.fail("ve-stash-twice", i, step, other=_label(j, steps[j]))
            w.stash = ("written", w.dtype, w.way, i, w.arr)
            w.stash_used = True
            info.stage = w.stage
        elif k == "reinterpret":
            assert step.dtype is not None  # a reinterpret step names its target scalar
            w.dtype = step.dtype
        elif k in EXITS:
            if w.phase == "paired":
                raise w.fail("ve-pair-unzipped", i, step)
            if w.way != 8:
                raise w.fail("ve-exit-way", i, step, way=w.way)
            if k == "inter_slice_reduce" and not STAGES[w.stage][3]:
                raise w.fail("ve-handover-stage", i, step, stage=STAGE_NAMES[w.stage])
            w.exited = (i, k)
        else:
            _staged(w, i, step, info)
        info.way, info.dtype, info.phase = w.way, w.dtype, w.phase
        w.infos.append(info)
        flits = w.arr.T * (2 if w.phase == "paired" else 1)
        w.flits = max(w.flits, flits)
    if w.exited is None:
        last = steps[-1]
        raise w.fail("ve-no-exit", len(steps) - 1, last)
    if chain.output:
        out_t = chain.output.get("time", w.time_m)
        out_p = chain.output.get("packet", w.packet_m)
        why = w.arr.mismatch(Arrangement.of(out_t, out_p))
        if why:
            j = w.exited[0]
            raise w.fail("ve-shape", j, steps[j], why=why, time=out_t.text(),
                         packet=out_p.text())
    need = sum(chain.vrf[n].dims["element"].size * hw.DTYPE_BYTES[chain.vrf[n].dtype]
               for n in sorted(w.vrf_used))
    room = hw.VRF_BYTES_PER_SLICE - (hw.VE_STASH_RESERVED_BYTES if w.stash_used else 0)
    if need > room:
        raise fail("vrf-capacity", tuple(sorted(w.vrf_used)),
                   need=need, room=room,
                   stash=" (1,024 B are reserved for the stash)" if w.stash_used else "")
    sp = [chain.stream.dims[d] for d in ("chip", "cluster", "slice")]
    spatial, sp_status = _spatial(sp)
    return Analysis(chain, w.infos, w.entry, w.arr, spatial, sp_status,
                    list(w.alus), w.flits, w.stash_used, tuple(w.dropped))


def _spatial(maps: list[Mapping]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Chip x Cluster x Slice positions (row-major) -> per-axis coordinates and status."""
    coords: dict[str, np.ndarray] = {}
    status = np.zeros(1, np.uint8)
    for m in maps:
        c, st = m.evaluate()
        n = m.size
        for a in coords:
            coords[a] = np.repeat(coords[a], n)
        for a, v in c.items():
            base = coords.get(a, np.zeros(len(status) * n, np.int64)) if a in coords else \
                np.zeros(len(status) * n, np.int64)
            coords[a] = base + np.tile(v, len(status))
        status = np.where(np.repeat(status, n) != LIVE, np.repeat(status, n),
                          np.tile(st, len(status))).astype(np.uint8)
    return coords, status


def _unzip(w: _Walk, i: int, step: Step, info: StepInfo) -> None:
    ax = step.axis
    arr = w.arr
    if ax not in arr.cells or w.chain.axes.get(ax) != 2:
        raise w.fail("ve-unzip-axis", i, step, axis=ax,
                     detail=f"{ax} is not in the stream's Time x Packet"
                     if ax not in arr.cells else f"{ax} has size {w.chain.axes.get(ax)}, not 2")
    c = arr.cells[ax]
    live = arr.live
    # the group axis must be a Time axis: constant along each row's live lanes
    row = np.where(live, c, -1).max(axis=1)
    if ((c != row[:, None]) & live).any():
        raise w.fail("ve-unzip-axis", i, step, axis=ax,
                     detail=f"{ax} varies within a packet; unzip splits Time")
    flat = np.where(live, c, 0).reshape(-1)
    first1 = np.nonzero(flat == 1)[0]
    inner = int(first1[0]) if first1.size else 0
    if inner > hw.VE_UNZIP_MAX_INNER:
        raise w.fail("ve-unzip-cache", i, step, axis=ax, inner=inner,
                     max=hw.VE_UNZIP_MAX_INNER)
    g0 = np.nonzero(row == 0)[0]
    g1 = np.nonzero(row == 1)[0]
    # all-padding rows belong to neither group; the groups must pair up row for row
    if len(g0) != len(g1):
        raise w.fail("ve-unzip-axis", i, step, axis=ax,
                     detail="the two groups have different numbers of time steps")
    P = arr.P
    src0 = (g0[:, None] * P + np.arange(P)[None, :])
    natural = arr.take(src0)
    natural.cells.pop(ax, None)
    other = arr.take(g1[:, None] * P + np.arange(P)[None, :])
    other.cells.pop(ax, None)
    if natural.mismatch(other):
        raise w.fail("ve-unzip-axis", i, step, axis=ax,
                     detail="group 0 and group 1 do not hold the same positions")
    time = step.time if step.time is not None else number(1)
    w.reshape(i, step, natural, time, w.packet_m)
    w.dropped.append(ax)
    info.split = (g0, g1)
    w.phase = "paired"


def _staged(w: _Walk, i: int, step: Step, info: StepInfo) -> None:
    """Every step that passes a stage (after the entry)."""
    k = step.kind
    stage = STEP_STAGE[k]
    if k in ZIPS and w.phase != "paired":
        raise w.fail("ve-zip-unpaired", i, step)
    if w.phase != "single" and k in ("reduce", "filter"):
        raise w.fail("ve-pair-forbidden", i, step, what=METHODS[k])
    if w.phase == "paired" and k in ("narrow_trim", "widen_pad"):
        raise w.fail("ve-pair-trim", i, step,
                     alt="vector_narrow_split" if k == "narrow_trim" else
                     "vector_widen_concat")
    w.enter_stage(stage, i, step)
    # way of the stage
    if k in ("narrow_split", "narrow_trim"):
        w.need_way(8, i, step)
    elif k in ("widen_concat", "widen_pad"):
        w.need_way(4, i, step)
    else:
        w.need_way(STAGES[stage][1], i, step)
    # dtype and ALU
    if k in FAMILY:
        alu = w.alu_of(step, i, w.dtype)
        w.use_alu(alu, i, step)
        info.alu = alu
    if k == "fxp_to_fp":
        if w.dtype != "i32":
            raise w.fail("ve-op-dtype", i, step, op="FxpToFp", dtype=w.dtype, takes="i32")
        w.dtype = "f32"
    elif k == "fp_to_fxp":
        if w.dtype != "f32":
            raise w.fail("ve-op-dtype", i, step, op="FpToFxp", dtype=w.dtype, takes="f32")
        w.dtype = "i32"
    elif k in ("narrow_split", "narrow_trim", "widen_concat", "widen_pad"):
        _narrow_widen(w, i, step, info)
    elif k == "reduce":
        _reduce(w, i, step, info)
    elif k == "filter":
        g = step.guard or Guard()
        if g.dead:
            raise w.fail("ve-guard-dead", i, step, slot="filter", guard=g.text())
    elif k in ZIPS:
        w.phase = "merged"
    # operands
    if k in BINARY or k in TERNARY:
        _operands(w, i, step, info)
    elif k == "fp_unary" and w.phase == "paired" and step.groups is None:
        raise w.fail("ve-pair-args", i, step)
    elif k == "fp_unary" and w.phase != "paired" and step.groups is not None:
        raise w.fail("ve-pair-only", i, step)


def _operands(w: _Walk, i: int, step: Step, info: StepInfo) -> None:
    k = step.kind
    modes = TERNARY_MODES if k in TERNARY else BINARY_MODES
    mode = step.mode or ("Mode012" if k in TERNARY else "Mode01")
    slots_used = {x for x in modes[mode] if x != "s"}
    if w.phase == "paired":
        if step.groups is None:
            raise w.fail("ve-pair-args", i, step)
        sides = [g for g in step.groups if g is not None]
        if not sides:
            raise w.fail("ve-pair-args", i, step)
        for g in sides:
            for slots in g:
                w.operand_slots(slots, i, step)
                for sl in slots:
                    w.read_operand(sl.operand, i, step, info)
        return
    if step.groups is not None:
        raise w.fail("ve-pair-only", i, step)
    need = 2 if "o1" in slots_used else 1 if "o0" in slots_used else 0
    if len(step.operands) < need:
        raise w.fail("ve-operand-slots", i, step,
                     detail=f"{mode} reads {need} operand(s), {len(step.operands)} given")
    for slots in step.operands:
        w.operand_slots(slots, i, step)
        for sl in slots:
            w.read_operand(sl.operand, i, step, info)
    # one pass: three immediates and one register-file port for all its operands together
    imm = sum(sl.port == "imm" for o in step.operands for sl in o)
    rf = sum(sl.port == "rf" for o in step.operands for sl in o)
    if imm > hw.VE_IMMEDIATES or rf > 1:
        raise w.fail("ve-operand-slots", i, step,
                     detail=f"the operands need {imm} immediate(s) and {rf} register-file "
                            f"read(s); a pass has {hw.VE_IMMEDIATES} and 1")


def _narrow_widen(w: _Walk, i: int, step: Step, info: StepInfo) -> None:
    k = step.kind
    arr = w.arr
    T, P = arr.T, arr.P
    half = hw.VE_PACKET_LANES // 2
    if k == "narrow_split":
        # [T], [P] -> [T, P / 4], [P % 4]: front four lanes, then the back four
        src = (np.arange(T)[:, None, None] * P + np.arange(2)[None, :, None] * half
               + np.arange(half)[None, None, :]).reshape(T * 2, half)
        time = step.time or join([w.time_m, w.packet_m / half])
        packet = step.packet or w.packet_m % half
        w.way = 4
    elif k == "narrow_trim":
        back = arr.live[:, half:]
        if back.any():
            t, p = np.argwhere(back)[0]
            raise w.fail("ve-trim-live", i, step, time=int(t), lane=int(p) + half,
                         packet=w.packet_m.text())
        src = np.arange(T)[:, None] * P + np.arange(half)[None, :]
        time = w.time_m
        packet = step.packet or w.packet_m.resize(half)
        w.way = 4
    elif k == "widen_concat":
        if T % 2:
            raise w.fail("ve-shape", i, step, why=f"concat pairs time steps, but Time has "
                         f"{T} (odd)", time="-", packet="-")
        src = (np.arange(T // 2)[:, None, None] * 2 * P + np.arange(2)[None, :, None] * P
               + np.arange(P)[None, None, :]).reshape(T // 2, 2 * P)
        if step.time is None or step.packet is None:
            raise w.fail("ve-shape", i, step, why="widen_concat needs its Time and Packet "
                         "mappings", time="?", packet="?")
        time, packet = step.time, step.packet
        w.way = 8
    else:  # widen_pad: [T], [P] -> [T], [P # 8]
        src = np.concatenate([np.arange(T)[:, None] * P + np.arange(P)[None, :],
                              -np.ones((T, P), np.int64)], axis=1)
        time = w.time_m
        packet = step.packet or w.packet_m.pad(2 * P)
        w.way = 8
    info.src = src
    w.reshape(i, step, arr.take(src), time, packet)


def _reduce(w: _Walk, i: int, step: Step, info: StepInfo) -> None:
    ax = step.axis
    arr = w.arr
    live = arr.live
    if ax not in arr.cells:
        raise w.fail("ve-reduce-axis", i, step, axis=ax,
                     detail=f"{ax} is not in the stream's Time x Packet")
    c = arr.cells[ax]
    row = np.where(live, c, -1).max(axis=1)
    tree = ((c != row[:, None]) & live).any()  # (the axis in Packet: a tree within a flit)
    if tree and (why := _not_a_tree(arr, ax)):
        raise w.fail("ve-reduce-axis", i, step, axis=ax, detail=why)
    # group time steps by everything except the reduced axis
    others = sorted(a for a in arr.cells if a != ax)
    sig = np.stack([arr.cells[a] for a in others] + [arr.status.astype(np.int64)], axis=-1) \
        if others else arr.status.astype(np.int64)[..., None]
    keys: dict[bytes, int] = {}
    groups: list[list[int]] = []
    first_last: list[list[int]] = []
    for t in range(arr.T):
        if not live[t].any():
            continue
        kb = sig[t].tobytes()
        g = keys.setdefault(kb, len(groups))
        if g == len(groups):
            groups.append([])
            first_last.append([t, t])
        groups[g].append(t)
        first_last[g][1] = t
    # accumulator slots: groups open at once while the stream passes
    events = sorted([(a, 1) for a, _ in first_last] + [(b + 0.5, -1) for _, b in first_last])
    open_, most = 0, 0
    for _, d in events:
        open_ += d
        most = max(most, open_)
    if most > hw.VE_REDUCE_SLOTS:
        raise w.fail("ve-reduce-slots", i, step, axis=ax, slots=most,
                     limit=hw.VE_REDUCE_SLOTS)
    src = np.array([g[0] for g in groups], np.int64)[:, None] * arr.P + \
        np.arange(arr.P)[None, :]
    if tree:  # (one value a flit, in its first lane; the others padding)
        src[:, 1:] = -1
        info.tree = arr.P
    natural = arr.take(src)
    natural.cells.pop(ax, None)
    if step.time is None or step.packet is None:
        raise w.fail("ve-shape", i, step, why="intra_slice_reduce needs its Time and Packet "
                     "mappings", time="?", packet="?")
    info.groups = [np.array(g, np.int64) for g in groups]
    info.order = _fold_order(c, info.groups, bool(tree))
    w.reshape(i, step, natural, step.time, step.packet)
    w.dropped.append(ax)


def _not_a_tree(arr: Arrangement, ax: str) -> str | None:
    """Why a reduce over an axis in the Packet cannot run as the per-flit tree (None: it
    can): the tree folds a whole four-way flit that holds one value of every other axis."""
    live = arr.live
    rows = live.any(axis=1)
    if arr.P != 4:
        return f"{ax} varies within a packet of {arr.P} lanes; the tree folds four-way flits"
    if (live[rows] != True).any():  # noqa: E712 - (an array, elementwise)
        return (f"a flit holds padding among the {ax} values it folds (the Valid Count "
                "Generator's cases are not modelled)")
    for a, c in arr.cells.items():
        if a != ax and (c[rows] != c[rows][:, :1]).any():
            return f"a flit holds several values of {a} besides {ax}; the tree folds them all"
    return None


def _fold_order(c: np.ndarray, groups: list[np.ndarray], tree: bool) -> np.ndarray | None:
    """The reduced axis's values in the order a group folds them (flit by flit, each flit's
    lanes in order when ``tree``); None where the groups fold in different orders."""
    def order(g: np.ndarray) -> np.ndarray:
        return c[g].reshape(-1) if tree else c[g, 0]
    first = order(groups[0])
    return first if all(np.array_equal(order(g), first) for g in groups[1:]) else None
