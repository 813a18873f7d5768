"""tcplan's own limits: how much a problem file, an input file or a simulated problem may hold.

These are not hardware facts (those live in :mod:`model.hardware`).  They bound what tcplan
reads, simulates and plans, so that a hostile or mistaken input ends in a clean, named error
within a second or two and in bounded memory, instead of a hang or a traceback
(docs/threats.md).  Each limit is checked *before* the work or the allocation it guards, by
:func:`check` (rule ``size-limit``, exit 1) or by the input readers (``bad-problem`` /
``bad-request``, exit 2).
"""

from __future__ import annotations

from typing import Mapping as _Mapping

from .rules import TcplanError, fail

# --- input files (planner/inputs.py, planner/spec.py) -----------------------------------
#: A problem file: a whole model's graph (a 28-layer Qwen3 decode step is a few MB; one
#: kernel's file is under 20 KiB).  libyaml reads 16 MiB in about 3 s.
PROBLEM_FILE_MAX_BYTES = 1 << 24
#: the largest Rust file ``tcplan import`` reads (furiosa-opt's largest Qwen3 kernel file is
#: 16 KiB; its largest example, 60 KiB)
RUST_FILE_MAX_BYTES = 1 << 20
#: Nesting depth of a problem file's YAML (the deepest in problems/ is 5).
YAML_MAX_DEPTH = 32
#: YAML nodes in one problem file (scalars, lists and mappings together): a 28-layer
#: decode step has a few hundred thousand; each costs a few hundred bytes composed.
YAML_MAX_NODES = 1 << 20
#: One line of ``tcplan sequence --batch`` (a request is a few hundred bytes).
JSON_LINE_MAX_BYTES = 1 << 20
#: How much of an overlong batch line is skipped before the batch stops (``/dev/zero``
#: is one endless line).
JSON_LINE_SKIP_MAX_BYTES = 1 << 26
#: A ``.npy`` header (numpy's own default for ``max_header_size``).
NPY_HEADER_MAX_BYTES = 10_000
#: The data of one ``.npy`` input (and never more elements than the problem's tensor T).
NPY_MAX_BYTES = 1 << 32
#: Characters of one number as written (its digits with any sign, ``_``, base prefix or
#: YAML's base-60 ``:``): in a problem file's YAML, a mapping string, an ``--axes`` string,
#: a batch line's JSON, a flag or a ``.npy`` header.  tcplan takes nothing above 2**64 (20
#: digits; sizes and addresses stop at 2**62, 19 digits), so 40 leaves room for
#: separators and hex and keeps formula constants' bound (model/expr.py).  The text is
#: refused by :func:`number_text` before any conversion: Python refuses to convert more than
#: 4,300 digits to or from text (``int_max_str_digits``: a ``ValueError``, also when an
#: error message formats such an int), and a short text in another base (``0xff...``,
#: ``1:59:59:...``) would still give an int too long to print.
NUMBER_MAX_CHARS = 40

# --- simulation, cycle model and planning (executor/, model/cost.py) ---------------------
#: Elements of any one array the simulator materializes: the seeded tensor T over every
#: axis, a tensor read back, an input file.  2**31 elements is 2 GiB of i8, 8 GiB of f32.
SIM_MAX_ELEMENTS = 1 << 31
#: Positions of any one tensor (a stream included) the simulator walks, padding included.
#: It walks them in chunks, so this bounds time, not memory.
SIM_MAX_POSITIONS = 1 << 33
#: Bytes of one simulated memory (one chip's HBM span, the host): mapped whole but backed
#: page by page as touched (executor/memory.py ``lazy_zeros``), so this bounds address
#: space, not memory: a chip's whole HBM (a 28-layer decode step spans 14 GiB, each layer
#: in its own 512 MiB window).
SIM_MAX_MEMORY_BYTES = 48 << 30
#: Positions of one mapping evaluated at once (a Chip, Cluster, Slice or Lane, a vector
#: stream's Time and Packet, a whole small mapping): these arrays are materialized whole.
EVAL_MAX_POSITIONS = 1 << 25
#: Packets of one DMA command the cycle model lists (it models every request).
COST_MAX_PACKETS = 1 << 26
#: Orders of a free HBM source's Element the baseline search enumerates, one option each
#: (6 digits: 720 orders), and allowed orders a problem may list.
SOURCE_MAX_ORDERS = 720
#: Digits of a free HBM source's Element the outer model orders (a circuit of 11 nodes;
#: 10! orders, of which it plans only those whose bound can beat the best plan).
SOURCE_MAX_DIGITS = 10
#: Operations of one formula (an expression or a chain's reference): the chain planner's
#: time grows with them (64 plan in about a second; the seeds' largest has 6).
FORMULA_MAX_OPS = 64
#: Candidate layouts of one free tensor of a graph (5 digits: 120 orders), and layout
#: choices the graph planner evaluates in all (one per op and combination of the
#: candidates of its free tensors: each is a plan of that op).
GRAPH_CANDIDATES_MAX = 120
#: Orders of one free tensor of a graph that one DMA op writing it may order itself, by
#: branch and bound over prefixes (planner/graph_orders.py; 8 digits: 40,320 orders).
GRAPH_ORDERS_MAX = 40_320
#: Positions `--verify sample` checks (a seeded random draw of the destination's live ones).
SAMPLE_POSITIONS = 1 << 16
#: Failed (source order, option) pairs of a free HBM source whose conflicts are joined into
#: one minimal conflict (beyond, the rules that rejected them are named with their counts).
JOINT_CORE_MOST = 120
#: Distinct op plans (op signatures under their layout choices, planner/op_cache.py) one
#: graph may ask for; identical ops (every layer of a model) count once.
GRAPH_EVALUATIONS_MAX = 20_000
#: Bytes of op plans kept on disk between runs (planner/op_cache.py): the oldest go first.
OP_CACHE_MAX_BYTES = 1 << 28
#: Bytes of stream indices the executor keeps between ops (executor/engines.py
#: ``stream_index``): every layer of a model reads its streams with the same mappings.
STREAM_INDEX_CACHE_BYTES = 1 << 28
#: Checks a graph's run keeps apart at once (executor/apart.py), each a forked process
#: with memories of its own (a decode layer's contraction: up to 0.4 GB): at most one per
#: core (``--jobs``), and never more than this, whatever the machine.
APART_MAX_CHECKS = 4
#: Bytes of contractions' TRF reads the model keeps (model/engines/contraction.py
#: ``trf_reads_table``): a moves search lowers each candidate twice.
TRF_READS_CACHE_BYTES = 64 << 20
#: Value combinations of one axis the broadcast check lists exactly (model/broadcast.py);
#: above it, a source that holds an axis in part is compared by digit ranges.
BROADCAST_EXACT_VALUES = 1 << 22
#: A run of accesses on one DM bank is counted exactly up to this (model/tu.py); longer runs
#: are said to be unbounded (a slice's DM holds 2**16 accesses of 8 bytes).
BANK_RUN_CAP = 1 << 40
#: Plans a free Fetch or Commit stream's search lowers before it gives up (each rejected
#: one is excluded from its model: planner/tu_search.py).
TU_SEARCH_MAX_PLANS = 200
PLANNER = "the graph planner"
#: Candidate mappings a contraction's search generates (planner/contraction_search.py): the
#: product over its free axes of their divisors, times the lane and packing choices.
CONTRACTION_MAX_CANDIDATES = 200_000


class NumberTooLong(ValueError):
    """A number written with more than :data:`NUMBER_MAX_CHARS` characters: raised by
    :func:`number_text` before the text is converted; each reader turns it into its own
    located error (``bad-problem``, ``bad-mapping``, ``bad-request``) with :attr:`detail`."""

    def __init__(self, text: str):
        self.chars = len(text)
        self.preview = text[:20] + "..."
        super().__init__(self.detail)

    @property
    def detail(self) -> str:
        return (f"the number {self.preview} has {self.chars:,} characters, more than "
                f"{NUMBER_MAX_CHARS}")

    #: the fix every reader gives
    fix = (f"write numbers of at most {NUMBER_MAX_CHARS} characters (tcplan takes none "
           "above 2**64)")


def number_text(text: str) -> str:
    """``text``, one number as written, when it has at most :data:`NUMBER_MAX_CHARS`
    characters; else :class:`NumberTooLong`.  Call it before ``int()`` or any parser that
    converts the number (the YAML loader, ``json.loads``, numpy's ``.npy`` header)."""
    if len(text) > NUMBER_MAX_CHARS:
        raise NumberTooLong(text)
    return text


def to_int(text: str, base: int = 10) -> int:
    """``int(text, base)`` after :func:`number_text`."""
    return int(number_text(text), base)


def count_text(n: int) -> str:
    """A count for a message: ``1,234,567``, or ``more than 2**k`` for one too long to
    print (a product of many axes: Python refuses to print over 4,300 digits)."""
    if isinstance(n, int) and n.bit_length() > 256:  # (numpy's ints are 64-bit)
        return f"more than 2**{n.bit_length() - 1:,}"
    return f"{n:,}"


SIMULATOR = "the simulator"
EVALUATION = "one evaluation of a mapping"
COST_MODEL = "the cycle model"


def check(count: int, limit: int, what: str, unit: str,
          parts: _Mapping[str, int] | None = None, stage: str = SIMULATOR,
          fix: str | None = None) -> None:
    """Raise ``size-limit`` when ``count`` (of ``unit``) exceeds ``limit``, naming the part
    (an axis, a term, a dimension) that contributes most.  Call it before the allocation
    or the loop it guards."""
    if count > limit:
        raise size_error(count, limit, what, unit, parts, stage, fix)


def size_error(count: int, limit: int | str, what: str, unit: str,
               parts: _Mapping[str, int] | None = None,
               stage: str = SIMULATOR, fix: str | None = None) -> TcplanError:
    parts = parts or {}
    big = max(parts, key=lambda k: parts[k]) if parts else ""
    because = f" ({big} has size {count_text(parts[big])})" if big else ""
    fix = fix or (f"shrink {big}" if big else "shrink the problem") + (
        " (an axis no tensor uses can be dropped)" if big.startswith("axis ") else "")
    if stage == SIMULATOR:
        fix += "; `tcplan lower` and `tcplan trace` work at any size"
    return fail("size-limit", (big,) if big else (), what=what, count=count_text(count),
                unit=unit, limit=count_text(limit) if isinstance(limit, int) else limit,
                stage=stage, because=because, fix=fix)


def axes_parts(axes: _Mapping[str, int]) -> dict[str, int]:
    """An axes block as the parts of a size: ``{"axis A": 8, ...}``."""
    return {f"axis {a}": n for a, n in axes.items()}


def product(sizes) -> int:
    out = 1
    for s in sizes:
        out *= int(s)
    return out
