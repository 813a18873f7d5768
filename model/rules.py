"""The rule registry: every hardware rule and every input-error kind, defined once.

A :class:`Rule` carries its id, the engine profiles and modes it applies to, a message template,
a fix hint and the seed/facts section it comes from.  Checks anywhere in tcplan (validator,
CP-SAT encoding, diagnostics) refer to rules by id through :data:`RULES`; a violated rule becomes
a :class:`Violation` (data, not a string) and is raised inside a :class:`TcplanError`.

Two kinds of rules exist:

* ``kind="input"``: the request itself is malformed (bad syntax, unknown axis, ...).  The CLI
  exits 2.
* ``kind="hardware"``: the request is well formed but the hardware cannot run it.  The CLI exits 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from . import hardware as hw

#: Engine profiles a sequencer can be derived for (decisions.md item 1).
PROFILES = ("pseudo", "fetch", "commit", "dma")
ALL_PROFILES = frozenset(PROFILES)
MODES = ("read", "write")
ALL_MODES = frozenset(MODES)


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str  # "input" or "hardware"
    title: str
    message: str  # str.format template over the violation's detail fields
    fix: str  # str.format template: what to change
    source: str  # seed / facts / decisions section
    profiles: frozenset[str] = ALL_PROFILES
    modes: frozenset[str] = ALL_MODES
    scope: str = "sequencer"  # what it constrains: input, sequencer, tier, dma

    def applies(self, profile: str, mode: str) -> bool:
        return profile in self.profiles and mode in self.modes


def _rules(*rules: Rule) -> dict[str, Rule]:
    out: dict[str, Rule] = {}
    for r in rules:
        if r.id in out:  # pragma: no cover - guards the registry itself
            raise ValueError(f"rule {r.id} defined twice")
        out[r.id] = r
    return out


RULES: dict[str, Rule] = _rules(
    # ---- input errors (exit 2) -------------------------------------------------------
    Rule(
        "parse-error", "input", "mapping syntax error",
        "{what}: expected {expected} at column {column}, found {found}",
        "write the mapping in the m![...] grammar of facts.md section 1",
        "facts.md section 1 (grammar)",
        scope="input",
    ),
    Rule(
        "unknown-axis", "input", "axis not declared",
        "{what}: axis {axis!r} at column {column} is not declared (declared: {declared})",
        "declare it in --axes / the axes block, or fix the spelling",
        "facts.md section 1 (axes are declared with sizes)",
        scope="input",
    ),
    Rule(
        "bad-mapping", "input", "mapping is not well formed",
        "{what}: {detail}",
        "{fix}",
        "facts.md section 1 (semantics table)",
        scope="input",
    ),
    Rule(
        "bad-request", "input", "malformed request",
        "{detail}",
        "{fix}",
        "tcplan CLI contract (issue #2)",
        scope="input",
    ),
    Rule(
        "bad-problem", "input", "problem file is not valid",
        "{where}: {detail}",
        "{fix}",
        "docs/problem-format.md",
        scope="input",
    ),
    # ---- tier placement rules (exit 1; warnings for `tcplan trace`) -------------------
    Rule(
        "chip-count", "hardware", "Chip mapping must match the number of chips",
        "{tensor}: Chip mapping {mapping} has size {size}, the problem has {chips} chip(s)",
        "pad the Chip mapping to the chip count, e.g. m![{inner} # {chips}]",
        "seed 001 '제약 조건' (Chip::SIZE == NUM_CHIPS)",
        scope="tier",
    ),
    Rule(
        "cluster-size", "hardware", "Cluster mapping must have size 1 or 2",
        "{tensor}: Cluster mapping {mapping} has size {size}",
        "use at most 2 clusters; pad a single one with m![1 # 2]",
        "seed 001 '제약 조건'; decisions.md item 4",
        scope="tier",
    ),
    Rule(
        "slice-size", "hardware", "Slice mapping must have size 64, 128 or 256",
        "{tensor}: Slice mapping {mapping} has size {size}, not 64, 128 or 256",
        "pad the Slice mapping with #, e.g. m![{inner} # {pad}]",
        "seed 001 '제약 조건' (Slice::SIZE == 256); decisions.md item 4",
        scope="tier",
    ),
    Rule(
        "lane-limit", "hardware", "a TRF tensor has at most 8 lanes",
        "{tensor}: Lane mapping {mapping} has size {size} > 8",
        "move part of the Lane mapping into Element",
        "seed 001 '제약 조건' (Lane::SIZE <= 8)",
        scope="tier",
    ),
    Rule(
        "capacity", "hardware", "Element exceeds the unit's capacity",
        "{tensor}: Element {mapping} holds {elements} x {elem_bytes} B{where}, ending at "
        "{bytes:,} B of a {unit}, past its {capacity:,} B",
        "spread the tensor over more {spread} (move Element terms into {dim})",
        "seed 001 '제약 조건' (Element size); facts.md section 3",
        scope="tier",
    ),
    Rule(
        "overlapping-dimensions", "hardware", "dimensions must carry disjoint digit ranges",
        "{tensor}: {detail}",
        "give every digit range of an axis to exactly one dimension",
        "facts.md section 1 (holding semantics: partial indices add up)",
        scope="tier",
    ),
    # ---- sequencer rules (exit 1) ----------------------------------------------------
    Rule(
        "incompatible-decomposition", "hardware", "buffer and stream split an axis incompatibly",
        "{detail}",
        "{fix}",
        "seed 000 '호환되는 축 분해'; facts.md section 2",
    ),
    Rule(
        "stream-outside-buffer", "hardware", "stream reads an index the buffer does not hold",
        "{detail}",
        "shrink the stream term (e.g. with '= n') to the part the buffer holds, or store the "
        "missing part in the buffer",
        "facts.md section 1 (holding semantics); seed 000 (read preserves values)",
        modes=frozenset({"read"}),
    ),
    Rule(
        "entry-limit", "hardware", "more than 8 sequencer entries",
        "{count} entries after merging every physically contiguous pair; the limit is "
        f"{hw.MAX_SEQUENCER_ENTRIES}: {{entries}}",
        "reorder the stream so that more adjacent terms are contiguous in the buffer (they then "
        "merge), or split the move into several sequencer calls",
        "seed 000 '제약 조건' (entry limit); decisions.md item 2",
    ),
    Rule(
        "iteration-limit", "hardware", "an entry iterates more than 65,536 times",
        "entry {entry} ({term}) iterates {size} times; the limit is "
        f"{hw.MAX_ENTRY_ITERATIONS:,}",
        "{hint}",
        "seed 000 '제약 조건' (iteration limit)",
    ),
    Rule(
        "broadcast-write", "hardware", "a write carries a position the buffer does not",
        "{detail}",
        "remove the term from the stream, or add it to the buffer mapping",
        "seed 000 (broadcasting_write is rejected); decisions.md item 3",
        modes=frozenset({"write"}),
    ),
    Rule(
        "write-coverage", "hardware", "a write must hit every live buffer slot exactly once",
        "{detail}",
        "make the stream carry every live digit of the buffer (no slicing with '=' on a write)",
        "seed 000 (each Buf slot has exactly one source position); decisions.md item 3",
        modes=frozenset({"write"}),
    ),
    Rule(
        "unread-axis", "hardware", "a Fetch leaves part of a live buffer axis unread",
        "{detail}",
        "add the buffer term to the stream's Time or Packet mapping",
        "decisions.md item 1 (Fetch profile only)",
        profiles=frozenset({"fetch"}),
        modes=frozenset({"read"}),
    ),
    Rule(
        "packet-bytes", "hardware", "Fetch/Commit packet must be 1, 2, 4, 8, 16 or 32 bytes",
        "packet of {packet} elements x {elem_bytes} B = {bytes} B is not one of "
        + ", ".join(str(b) for b in hw.FETCH_COMMIT_PACKET_BYTES) + " bytes",
        "{fix}",
        "seed 000 '제약 조건' (packet size); decisions.md item 1",
        profiles=frozenset({"fetch", "commit"}),
    ),
    Rule(
        "innermost-access", "hardware", "innermost entry must be a contiguous or discrete access",
        "{detail}",
        "{fix}",
        "seed 000 '제약 조건' (packet fetch); decisions.md item 1",
        profiles=frozenset({"fetch", "commit"}),
    ),
    Rule(
        "dma-engines", "hardware", "a DMA stream's Slice mapping selects at most 4 engines",
        "the stream's Slice mapping {mapping} has size {size}; each cluster has "
        f"{hw.DMA_ENGINES_PER_CLUSTER} DMA engines (one per DMN pair)",
        "map at most 4 positions to the stream's Slice (pad with #), the rest to Time",
        "facts.md section 6; decisions.md item 8",
        scope="dma",
    ),
    Rule(
        "dma-chip-loop", "hardware", "a DMA command runs on one chip",
        "stream term {term} steps across the Chip dimension of the {side} ({tensor})",
        "give the Chip digits to the stream's Chip mapping so that each chip's engines move "
        "their own part",
        "seed 002 (engines per chip); decisions.md item 8",
        scope="dma",
    ),
    Rule(
        "dma-overlap", "hardware", "source and destination must not share bytes",
        "{tier} source bytes {src} and destination bytes {dst} overlap in {units} shared "
        "chip/cluster/slice unit(s): the result would depend on the order of the moves",
        "place the destination at an address past the source (or in other units)",
        "seed 002 (a DMA is a tensor move: the output holds the input's values)",
        scope="dma",
    ),
    Rule(
        "memory-access", "hardware", "an access outside memory or into Bottom padding",
        "{tier} access at {address}: {why}",
        "check the strides and bases (this is a lowering or plan bug)",
        "facts.md sections 1 (#{{!}} padding), 4 and 5",
        scope="dma",
    ),
    Rule(
        "verify-mismatch", "hardware", "the destination does not hold the source tensor",
        "{detail}",
        "the configs move data to the wrong place: compare them with `tcplan lower`",
        "seed 002 (a DMA is a mathematical tensor move)",
        scope="dma",
    ),
    Rule(
        "dma-tiers", "hardware", "which tiers a DMA engine moves between",
        "{detail}",
        "{fix}",
        "seed 002 (tdma: HBM <-> HBM, HBM <-> DM, DM <-> DM; pdma: host <-> HBM)",
        scope="dma",
    ),
    Rule(
        "indexed-shape", "hardware", "scatter/gather tensors must fit together",
        "{detail}",
        "see seed 002 'Scatter와 Gather': table [K, row], DM [index positions, row], i32 index",
        "seed 002 'Scatter와 Gather'",
        scope="dma",
    ),
    Rule(
        "indexed-offset", "hardware", "an index value must select a whole row of the table",
        "{detail}",
        "scaled indices are byte offsets r * row_bytes; unscaled are row positions 0..rows-1",
        "seed 002 'Scatter와 Gather'",
        scope="dma",
    ),
    Rule(
        "dma-dtype", "hardware", "a DMA moves one dtype",
        "source is {src}, destination is {dst}",
        "give both tensors the same dtype (conversion is a Tensor Unit job)",
        "seed 002 (a DMA is a mathematical tensor move)",
        scope="dma",
    ),
    Rule(
        "dma-dm-write-align", "hardware", "DM writes must be 8-byte aligned",
        "the {side} side breaks {align}-byte alignment: {what}",
        "pad the destination's innermost terms so that rows are multiples of 8 bytes",
        "seed 002 '제약 조건' (alignment table); facts.md section 6",
        scope="dma",
    ),
    Rule(
        "dma-hbm-dm-align", "hardware", "HBM <-> DM needs 8-byte aligned addresses and packets",
        "the {side} side breaks {align}-byte alignment: {what}",
        "pad the innermost terms (#) so that rows and packets are multiples of 8 bytes",
        "seed 002 '제약 조건' (HBM <-> DM: read, write and packet 8-byte aligned)",
        scope="dma",
    ),
    Rule(
        "dma-split", "hardware", "an engine's part cannot be split into commands",
        "{detail}",
        "{fix}",
        "seed 002 Example 6; decisions.md item 7",
        scope="dma",
    ),
    Rule(
        "redistribute-order", "hardware", "redistribution steps run in the seed's order",
        "{detail}",
        "{fix}",
        "seed 002 '단계 결합' (shuffle, swap, chip slices, cluster slices)",
        scope="redistribute",
    ),
    Rule(
        "shuffle-permutation", "hardware", "a chip shuffle's sources are a permutation",
        "sources {sources} are not a permutation of the {chips} chip positions",
        "list every chip position exactly once (sources[target] = source)",
        "seed 002 '재분배 제약 조건'",
        scope="redistribute",
    ),
    Rule(
        "inactive-source", "hardware", "every active target reads an active source",
        "{detail}",
        "read from a live chip or cluster position",
        "seed 002 '재분배 제약 조건'",
        scope="redistribute",
    ),
    Rule(
        "swap-two-clusters", "hardware", "cluster_swap needs exactly two clusters",
        "the Cluster mapping {mapping} has {size} live cluster(s)",
        "use a Cluster mapping of two live clusters",
        "seed 002 '재분배 제약 조건'",
        scope="redistribute",
    ),
    Rule(
        "slice-axis", "hardware", "a slice removes one contiguous axis from Element",
        "{detail}",
        "{fix}",
        "seed 002 'Chip Slice', '재분배 제약 조건'",
        scope="redistribute",
    ),
    Rule(
        "slice-index", "hardware", "one active index per target",
        "{detail}",
        "{fix}",
        "seed 002 '재분배 제약 조건'",
        scope="redistribute",
    ),
    Rule(
        "dma-packet-max", "hardware", "DMA packets are at most 4,096 bytes",
        "packet of {packet} elements x {elem_bytes} B = {bytes} B exceeds "
        f"{hw.DMA_MAX_PACKET_BYTES:,} B",
        "move part of the Packet mapping into Time (e.g. {suggestion})",
        "facts.md section 6; decisions.md item 1",
        profiles=frozenset({"dma"}),
    ),
)


@dataclass
class Violation:
    """One broken rule: which rule, the offending terms or entries, and the details."""

    rule: str
    terms: tuple[str, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rule not in RULES:  # pragma: no cover - programming error
            raise KeyError(f"unregistered rule {self.rule}")

    @property
    def kind(self) -> str:
        return RULES[self.rule].kind

    @property
    def message(self) -> str:
        return RULES[self.rule].message.format(**self.detail)

    @property
    def fix(self) -> str:
        return RULES[self.rule].fix.format(**self.detail)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.rule, "message": self.message, "fix": self.fix}
        if self.terms:
            out["terms"] = list(self.terms)
        return out

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message} (fix: {self.fix})"


class TcplanError(Exception):
    """Raised with one or more violations; the first one is the headline."""

    def __init__(self, violations: Violation | Sequence[Violation]):
        if isinstance(violations, Violation):
            violations = [violations]
        self.violations: list[Violation] = list(violations)
        super().__init__("; ".join(str(v) for v in self.violations))

    @property
    def code(self) -> str:
        return self.violations[0].rule

    @property
    def kind(self) -> str:
        return self.violations[0].kind

    @property
    def message(self) -> str:
        return self.violations[0].message

    def to_json(self) -> dict[str, Any]:
        head = self.violations[0].to_json()
        if len(self.violations) > 1:
            head["also"] = [v.to_json() for v in self.violations[1:]]
        return head


def fail(rule_id: str, terms: Iterable[str] = (), **detail: Any) -> TcplanError:
    """Build (not raise) the error for one violation: ``raise fail("entry-limit", ...)``."""
    return TcplanError(Violation(rule_id, tuple(terms), dict(detail)))


def rules_for(profile: str, mode: str, scope: str = "sequencer") -> list[Rule]:
    """The rules of a scope that apply to a profile and mode, in registry order."""
    return [r for r in RULES.values() if r.scope == scope and r.applies(profile, mode)]

