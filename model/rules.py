"""The rule registry: every hardware rule and every input-error kind, defined once.

A :class:`Rule` carries its id, the engine profiles and modes it applies to, a message template,
a fix hint and the seed or docs/hardware.md section it comes from.  Checks anywhere in tcplan
(validator, CP-SAT encoding, diagnostics) refer to rules by id through :data:`RULES`; a violated
rule becomes a :class:`Violation` (data, not a string) and is raised inside a
:class:`TcplanError`.

Two kinds of rules exist:

* ``kind="input"``: the request itself is malformed (bad syntax, unknown axis, ...).  The CLI
  exits 2.
* ``kind="hardware"``: the request is well formed but the hardware cannot run it.  The CLI exits 1.
* ``kind="limit"``: the request is well formed but larger than tcplan simulates or plans
  (:mod:`model.limits`).  The CLI exits 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from . import hardware as hw

#: Engine profiles a sequencer can be derived for (docs/hardware.md R1).
PROFILES = ("pseudo", "fetch", "commit", "dma")
#: The Tensor Unit's engines between Fetch and Commit, each a profile of its own rules
#: (model/engines/, one module each; issue 29).
ENGINE_PROFILES = ("collect", "cast", "to_trf", "to_vrf", "transpose", "switch", "contract",
                   "commit_trim", "fetch_cast", "inter_slice_reduce", "commit_cast",
                   "commit_cast_relu")
ALL_PROFILES = frozenset(PROFILES)  # (a rule's default: the sequencer's profiles)
MODES = ("read", "write")
#: what a rule constrains (the module that checks it): see ARCHITECTURE.md
SCOPES = ("input", "sequencer", "tier", "dma", "redistribute", "vector", "lane", "planner",
          "limits", "engine")
ALL_MODES = frozenset(MODES)


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str  # "input", "hardware" or "limit"
    title: str
    message: str  # str.format template over the violation's detail fields
    fix: str  # str.format template: what to change
    source: str  # seed / docs/hardware.md section or R entry / docs/decisions.md item
    profiles: frozenset[str] = ALL_PROFILES
    modes: frozenset[str] = ALL_MODES
    scope: str = "sequencer"  # what it constrains: one of SCOPES

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
        "write the mapping in the m![...] grammar of docs/hardware.md section 1",
        "docs/hardware.md section 1 (grammar)",
        scope="input",
    ),
    Rule(
        "unknown-axis", "input", "axis not declared",
        "{what}: axis {axis!r} at column {column} is not declared (declared: {declared})",
        "declare it in --axes / the axes block, or fix the spelling",
        "docs/hardware.md section 1 (axes are declared with sizes)",
        scope="input",
    ),
    Rule(
        "bad-mapping", "input", "mapping is not well formed",
        "{what}: {detail}",
        "{fix}",
        "docs/hardware.md section 1 (semantics table)",
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
    Rule(
        "broadcast-partial", "input", "a destination asks for values its source does not hold",
        "{where}: {dst} carries {axis} through {terms}, but the source holds only the {axis} "
        "values its {src_terms} give: a copy at any other value of {axis} would hold "
        "nothing the source has",
        "give the source every digit of {axis} the destination carries; or drop those digits "
        "from the destination (it then holds the sub-tensor at {axis} digit 0); or, to "
        "replicate the source, name the copies with an axis the source does not carry "
        "(a broadcast, docs/problem-format.md)",
        "docs/decisions.md item 92; docs/hardware.md R9",
        scope="input",
    ),
    Rule(
        "sub-tensor", "input", "a move leaves digits of its source behind",
        "{where}: the destination carries {axis} {kept}, the source {held}: {dropped} "
        "not moved ({moved:,} of the source's {total:,} elements move)",
        "give the destination every digit of {axis} the source holds; or, if moving part "
        "of the tensor is meant, say so with sub_tensor: true",
        "docs/decisions.md item 113 (issue 31: a typo moved half a tensor silently)",
        scope="input",
    ),
    # ---- tcplan's own limits (exit 1; model/limits.py) -----------------------------------
    Rule(
        "size-limit", "limit", "larger than tcplan simulates or plans",
        "{what} has {count} {unit}{because}: {stage} holds at most {limit}",
        "{fix}",
        "docs/threats.md (bounded sizes)",
        scope="limits",
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
        "seed 001 '제약 조건'; docs/hardware.md R4",
        scope="tier",
    ),
    Rule(
        "slice-size", "hardware", "Slice mapping must have size 64, 128 or 256",
        "{tensor}: Slice mapping {mapping} has size {size}, not 64, 128 or 256",
        "{hint}",
        "seed 001 '제약 조건' (Slice::SIZE == 256); docs/hardware.md R4",
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
        "seed 001 '제약 조건' (Element size); docs/hardware.md section 3",
        scope="tier",
    ),
    Rule(
        "overlapping-dimensions", "hardware", "dimensions must carry disjoint digit ranges",
        "{tensor}: {detail}",
        "give every digit range of an axis to exactly one dimension",
        "docs/hardware.md section 1 (holding semantics: partial indices add up)",
        scope="tier",
    ),
    # ---- sequencer rules (exit 1) ----------------------------------------------------
    Rule(
        "incompatible-decomposition", "hardware", "buffer and stream split an axis incompatibly",
        "{detail}",
        "{fix}",
        "seed 000 '호환되는 축 분해'; docs/hardware.md section 2",
    ),
    Rule(
        "stream-outside-buffer", "hardware", "stream reads an index the buffer does not hold",
        "{detail}",
        "shrink the stream term (e.g. with '= n') to the part the buffer holds, or store the "
        "missing part in the buffer",
        "docs/hardware.md section 1 (holding semantics); seed 000 (read preserves values)",
        modes=frozenset({"read"}),
    ),
    Rule(
        "entry-limit", "hardware", "more than 8 sequencer entries",
        "{count} entries after merging every physically contiguous pair; the limit is "
        f"{hw.MAX_SEQUENCER_ENTRIES}: {{entries}}",
        "reorder the stream so that more adjacent terms are contiguous in the buffer (they then "
        "merge), or split the move into several sequencer calls",
        "seed 000 '제약 조건' (entry limit); docs/hardware.md R2",
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
        "seed 000 (broadcasting_write is rejected); docs/hardware.md R3",
        modes=frozenset({"write"}),
    ),
    Rule(
        "write-coverage", "hardware", "a write must hit every live buffer slot exactly once",
        "{detail}",
        "make the stream carry every live digit of the buffer (no slicing with '=' on a write)",
        "seed 000 (each Buf slot has exactly one source position); docs/hardware.md R3",
        modes=frozenset({"write"}),
    ),
    Rule(
        "unread-axis", "hardware", "a Fetch leaves part of a live buffer axis unread",
        "{detail}",
        "add the buffer term to the stream's Time or Packet mapping",
        "docs/hardware.md R1 (Fetch profile only)",
        profiles=frozenset({"fetch"}),
        modes=frozenset({"read"}),
    ),
    Rule(
        "packet-bytes", "hardware", "a Commit packet must be 1, 2, 4, 8, 16 or 32 bytes",
        "packet of {packet} elements x {elem_bytes} B = {bytes} B is not one of "
        + ", ".join(str(b) for b in hw.ACCESS_BYTES) + " bytes",
        "{fix}",
        "seed 000 '제약 조건' (packet size); docs/hardware.md R1; a Fetch reads a larger "
        "packet in several reads (book: moving-tensors/fetch-engine.md, 'Multi-Read Packet'; "
        "docs/decisions.md item 96)",
        profiles=frozenset({"commit"}),
    ),
    Rule(
        "innermost-access", "hardware", "innermost entry must be a contiguous or discrete access",
        "{detail}",
        "{fix}",
        "seed 000 '제약 조건' (packet fetch); docs/hardware.md R1",
        profiles=frozenset({"fetch", "commit"}),
    ),
    Rule(
        "dma-engines", "hardware", "a DMA stream's Slice mapping selects at most 4 engines",
        "the stream's Slice mapping {mapping} has size {size}; each cluster has "
        f"{hw.DMA_ENGINES_PER_CLUSTER} DMA engines (one per DMN pair)",
        "map at most 4 positions to the stream's Slice (pad with #), the rest to Time",
        "docs/hardware.md section 6 and R8",
        scope="dma",
    ),
    Rule(
        "dma-chip-loop", "hardware", "a DMA command runs on one chip",
        "stream term {term} steps across the Chip dimension of the {side} ({tensor})",
        "give the Chip digits to the stream's Chip mapping so that each chip's engines move "
        "their own part",
        "seed 002 (engines per chip); docs/hardware.md R8",
        scope="dma",
    ),
    Rule(
        "hbm-address-range", "hardware", "a tensor must fit in its allowed HBM addresses",
        "{tensor}: its {bytes:,} B do not fit in its allowed addresses [{lo:,}, {hi:,}) "
        "({room:,} B)",
        "widen the tensor's bounds.range (HBM holds {capacity:,} B per chip), or spread the "
        "tensor over more chips",
        "docs/hardware.md section 5 (48 GB per chip); docs/decisions.md item 78",
        scope="tier",
    ),
    Rule(
        "hbm-address-align", "hardware",
        "a free HBM address must be aligned as the problem asks and leave room",
        "{tensor}: no multiple of {align:,} B in [{lo:,}, {hi:,}) leaves room for its "
        "{bytes:,} B{besides}",
        "lower bounds.align_bytes, widen bounds.range, or move the other tensor",
        "docs/decisions.md item 78",
        scope="tier",
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
        "docs/hardware.md sections 1 (#{{!}} padding), 4 and 5",
        scope="dma",
    ),
    Rule(
        "verify-mismatch", "hardware", "the destination does not hold the source tensor",
        "{detail}",
        "the configs do not compute what the problem states: compare them with `tcplan "
        "lower`",
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
        "see seed 002 'Scatter와 Gather': table [K, row], DM [index positions, row] (the row "
        "may be split over the Slice and the Element, its innermost digits innermost in the "
        "Element), i32 index",
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
        "seed 002 '제약 조건' (alignment table); docs/hardware.md section 6",
        scope="dma",
    ),
    Rule(
        "dma-hbm-dm-align", "hardware", "a write from HBM into DM needs 8-byte aligned "
        "addresses and packets",
        "the {side} side breaks {align}-byte alignment: {what}",
        "pad the innermost terms (#) so that rows and packets are multiples of 8 bytes",
        "seed 002 '제약 조건'; the written memory's width binds (docs/decisions.md item 115)",
        scope="dma",
    ),
    Rule(
        "dma-split", "hardware", "an engine's part cannot be split into commands",
        "{detail}",
        "{fix}",
        "seed 002 Example 6; docs/hardware.md R7",
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
        "docs/hardware.md section 6 and R1",
        profiles=frozenset({"dma"}),
    ),
    Rule(
        "tu-placement", "hardware", "a Fetch or Commit moves each slice's own DM",
        "the stream's {dim} mapping {stream} is not the DM tensor's {memory}: the Fetch and "
        "Commit sequencers of each slice read and write that slice's DM only",
        "give the stream the tensor's {dim} ({memory}); to move data between slices use the "
        "Switch Engine (not modelled) or a DMA",
        "seed 000 (Fetch and Commit each address DM with one sequencer); book: "
        "moving-tensors/fetch-engine.md and commit-engine.md; docs/hardware.md section 4",
        profiles=frozenset({"fetch", "commit"}),
    ),
    Rule(
        "commit-align", "hardware", "a Commit writes whole 8-byte bank words",
        "the Commit writes {what}, not a multiple of "
        f"{hw.COMMIT_ALIGN_BYTES} bytes",
        "lay the tensor out so that every Time term outside the packet steps a multiple of "
        f"{hw.COMMIT_ALIGN_BYTES} bytes (pad the inner terms with #), commit packets of 8, 16 "
        "or 32 bytes, and place the tensor at a multiple of 8 bytes",
        "book: moving-tensors/commit-engine.md ('Constraints'); docs/hardware.md section 4",
        profiles=frozenset({"commit"}), modes=frozenset({"write"}),
    ),
    Rule(
        "dm-bank-starvation", "hardware",
        "a Fetch or Commit must not hit one DM bank 64 or more times in a row",
        "the {engine} config {config} accesses one DM bank {run} times in a row; DMA is "
        "the lowest priority at a bank, so a concurrent DMA would wait past the NoC's "
        "4,096-cycle timeout (a cluster reset)",
        "make consecutive accesses move across banks: stream the tensor's contiguous "
        "innermost terms as the Packet and innermost Time, or avoid a Time term that "
        "repeats one address (a broadcast) or steps a multiple of 128 bytes "
        f"{hw.DM_BANK_STARVATION_ACCESSES} or more times",
        "seed 002 '시작 지연 시간과 패킷 분할'; book: moving-tensors/memory-performance.md "
        "('Bank Starvation'); docs/hardware.md section 4",
        profiles=frozenset({"fetch", "commit"}),
    ),
    Rule(
        "bad-formula", "input", "formula is not valid",
        "{what}: column {column}: {detail}",
        "write the formula in the grammar of docs/problem-format.md (Formulas)",
        "docs/problem-format.md", scope="input",
    ),
    # ---- Vector Engine: Intra-Slice Chain (seed 003; docs/hardware.md section 7) ----------------
    Rule(
        "ve-entry", "hardware", "a chain enters with a tag or an unzip",
        "{step}: {detail}",
        "start the chain with tag (or unzip for pair mode) and never repeat it",
        "seed 003 (파이프라인); docs/hardware.md section 7", scope="vector",
    ),
    Rule(
        "ve-stage-order", "hardware", "stages run in their fixed order",
        "{step}: the {stage} stage cannot follow the {current} stage (order: Tag, Logic, "
        "Fxp, FxpToFp, Narrow, Fp, IntraSliceReduce, FpDiv, Widen, FpToFxp, Clip, Filter; "
        "only Logic, Fxp, Fp and Clip take several ops)",
        "move the op before the later stages, or split the chain into two Tensor Unit "
        "invocations", "seed 003 (파이프라인, 단계); docs/hardware.md section 7", scope="vector",
    ),
    Rule(
        "ve-way", "hardware", "each stage runs at its way",
        "{step}: this stage runs {need}-way but the stream is {way}-way here",
        "{remedy}", "seed 003 (Narrow, Widen); docs/hardware.md section 7", scope="vector",
    ),
    Rule(
        "ve-exit-way", "hardware", "a chain exits at 8-way",
        "{step}: the stream is {way}-way; vector_final and vector_inter_slice_reduce need "
        "8-way", "widen first (vector_widen_concat or vector_widen_pad)",
        "seed 003 (파이프라인); docs/hardware.md section 7", scope="vector",
    ),
    Rule(
        "ve-no-exit", "hardware", "a chain ends with an exit",
        "{step} is the last step; a chain ends with vector_final or "
        "vector_inter_slice_reduce", "add final", "seed 003 (파이프라인)", scope="vector",
    ),
    Rule(
        "ve-after-exit", "hardware", "nothing follows the exit",
        "{step} follows the exit at {other}", "end the chain at its exit, or move the step "
        "before it", "seed 003 (파이프라인)", scope="vector",
    ),
    Rule(
        "ve-handover-stage", "hardware", "the Inter-Slice hand-over leaves from its stages",
        "{step}: the chain is at the {stage} stage, which cannot hand over to the "
        "Inter-Slice Reducer (Logic, Fxp, FxpToFp, Widen, FpToFxp and Clip can)",
        "add a step of a hand-over stage, or widen first",
        "docs/hardware.md section 7 (stage table)", scope="vector",
    ),
    Rule(
        "ve-alu-busy", "hardware", "each ALU at most once per Tensor Unit invocation",
        "{step}: {alu} is already in use by {other}",
        "pick an op on another ALU (e.g. MulF(Mul1) instead of MulF(Mul0)) or split the "
        "chain into two invocations", "seed 003 (단계); docs/hardware.md section 7 (ALU table)",
        scope="vector",
    ),
    Rule(
        "ve-op-dtype", "hardware", "an op runs on its dtype",
        "{step}: {op} takes {takes} but the stream is {dtype} here",
        "convert first (vector_fxp_to_fp / vector_fp_to_fxp) or reinterpret the bits",
        "seed 003 (Logic/Fxp/Float/Clip Cluster); docs/hardware.md section 7", scope="vector",
    ),
    Rule(
        "ve-packet-size", "hardware", "an 8-way stream carries 8-lane packets",
        "the stream's Packet {packet} has {size} lanes; the Vector Engine takes one flit of "
        "8 lanes", "pad the Packet to 8 (e.g. m![... # 8])", "seed 003 (Narrow)",
        scope="vector",
    ),
    Rule(
        "ve-shape", "hardware", "a step's declared mappings are the ones it produces",
        "{step}: the declared Time {time} / Packet {packet} do not match what the step "
        "produces: {why}", "declare the mappings the shape semantics give (docs/hardware.md "
        "section 7: split [T, P / 4], [P % 4]; trim [T], [P = 4]; concat the inverse; pad "
        "[P # 8])", "seed 003 (Narrow, Widen); docs/hardware.md section 7", scope="vector",
    ),
    Rule(
        "ve-trim-live", "hardware", "narrow_trim drops only padding",
        "{step}: lane {lane} of time step {time} holds data, but trim keeps only the front "
        "four lanes of {packet}", "use vector_narrow_split", "seed 003 (Narrow)",
        scope="vector",
    ),
    Rule(
        "ve-reduce-axis", "hardware",
        "intra-slice reduce folds an axis in Time and whole four-way flits of it in Packet",
        "{step}: cannot reduce {axis}: {detail}",
        "reduce an axis the stream carries in Time, or in a Packet of four lanes holding it "
        "alone (the tree: output packet m![1 # 4])",
        "seed 003 (IntraSliceReduce); guide computing-tensors/vector-engine/"
        "intra-slice-reduce.md",
        scope="vector",
    ),
    Rule(
        "ve-reduce-slots", "hardware", "the reducer holds at most 8 partial sums",
        "{step}: reducing {axis} keeps {slots} partial sums open at once; the accumulator "
        "holds {limit}", "move {axis} inward in Time so fewer other time steps sit inside it",
        "furiosa-opt IntraSliceReduce check", scope="vector",
    ),
    Rule(
        "ve-stash-stage", "hardware", "stash at a Stashable stage",
        "{step}: the {stage} stage has no VRF write port (Stashable: Tag, Logic, Fxp, "
        "Narrow, Fp, FpDiv, Clip)", "stash before this stage, or after a later Clip op",
        "seed 003 (피연산자)", scope="vector",
    ),
    Rule(
        "ve-stash-twice", "hardware", "the stash is written once",
        "{step}: the stash was already written by {other}",
        "keep one stash per invocation; put a value needed more often in the VRF",
        "seed 003 (피연산자)", scope="vector",
    ),
    Rule(
        "ve-stash-read-twice", "hardware", "the stash is read once",
        "{step}: the stash was already read by {other}",
        "put a value read twice in the VRF and pass it as &vrf", "seed 003 (피연산자)",
        scope="vector",
    ),
    Rule(
        "ve-stash-empty", "hardware", "a Stash read needs an earlier stash",
        "{step}: reads the stash, but nothing was stashed", "add vector_stash where the "
        "value is on the stream", "seed 003 (피연산자)", scope="vector",
    ),
    Rule(
        "ve-stash-type", "hardware", "the stash is typed",
        "{step}: the stash holds {stashed} but the stream is {here} here",
        "reinterpret (or narrow / widen) back before reading the stash",
        "seed 003 (피연산자)", scope="vector",
    ),
    Rule(
        "ve-stash-dropped", "hardware", "the stash is dropped at the Inter-Slice hand-over",
        "{step}: reads a stash dropped at the hand-over in {other}",
        "read the stash before vector_inter_slice_reduce", "seed 003 (피연산자)",
        scope="vector",
    ),
    Rule(
        "vrf-operand-partition", "hardware", "a VRF operand is partitioned like the stream",
        "{step}: VRF operand {name} has {dim} {operand} but the stream has {stream}",
        "place the operand under the stream's Chip / Cluster / Slice mappings",
        "seed 003 (피연산자, rule 1)", scope="vector",
    ),
    Rule(
        "vrf-operand-packet", "hardware", "one VRF access is a broadcast or a contiguous run",
        "{step}: VRF operand {name} ({element}) would be read at elements {addresses} in time "
        "step {time}: neither one broadcast address nor consecutive elements",
        "make the packet axes the operand's innermost contiguous axes, or drop them from it",
        "seed 003 (피연산자, rule 2)", scope="vector",
    ),
    Rule(
        "vrf-operand-axes", "hardware", "a VRF operand's axes are the stream's",
        "{step}: the stream leaves operand axes unmatched: {axes} (VRF operand {name})",
        "drop the axis from the operand (a broadcast), or widen the stream to cover it",
        "seed 003 (피연산자, rule 3)", scope="vector",
    ),
    Rule(
        "vrf-operand-coverage", "hardware", "a VRF operand holds what the stream reads",
        "{step}: VRF operand {name} ({element}) holds no element for {index}",
        "give the operand's Element mapping the stream's per-slice coordinates",
        "seed 003 (피연산자)", scope="vector",
    ),
    Rule(
        "vrf-capacity", "hardware", "VRF operands fit the slice's VRF",
        "the invocation's VRF operands take {need:,} B per slice; {room:,} B are free{stash}",
        "shrink the operands or split the work", "seed 003 (피연산자: 8 KiB, stash 1 KiB)",
        scope="vector",
    ),
    Rule(
        "ve-tag-mode", "hardware", "TagMode AxisToggle is not compilable",
        "{step}: TagMode::AxisToggle is declared but not compilable",
        "use vector_intra_slice_unzip for groups, or a Comparison tag", "seed 003 (Tag)",
        scope="vector",
    ),
    Rule(
        "ve-guard-dead", "hardware", "a guard must admit some tag",
        "{step}: {slot}'s guard {guard} is satisfied by no execution id, so it would never "
        "fire", "drop the slot, or guard it with a pattern some tag matches",
        "seed 003 (Tag)", scope="vector",
    ),
    Rule(
        "ve-slot-order", "hardware", "no slot after an unconditional one",
        "{step}: slot {before} is unconditional and claims every element left, so slot "
        "{slot} could never fire", "fill the slot before the unconditional one, or guard it",
        "seed 003 (Tag)", scope="vector",
    ),
    Rule(
        "ve-operand-slots", "hardware", "a pass has three immediates and one rf port",
        "{step}: {detail}", "use at most three immediates, then at most one VRF / stash slot "
        "last", "seed 003 (Tag)", scope="vector",
    ),
    Rule(
        "ve-pair-forbidden", "hardware", "pair mode has no stash, filter, reduce or guards",
        "{step}: {what} is not available in pair mode",
        "run it in a separate invocation, outside pair mode", "seed 003 (Pair Mode)",
        scope="vector",
    ),
    Rule(
        "ve-pair-trim", "hardware", "pairs narrow by split and widen by concat",
        "{step}: trim and pad are not available on a pair", "use {alt}",
        "seed 003 (Pair Mode)", scope="vector",
    ),
    Rule(
        "ve-pair-unzipped", "hardware", "the groups are zipped before the exit",
        "{step}: the stream is still two groups; no exit or inter-slice reduce before the zip",
        "merge the groups with a _zip op first", "seed 003 (Pair Mode)", scope="vector",
    ),
    Rule(
        "ve-pair-args", "hardware", "pair-mode ops take one argument per group",
        "{step}: in pair mode an op takes one argument per group (groups: [g0, g1], null to "
        "skip a side)", "give groups: [...] with at least one side", "seed 003 (Pair Mode)",
        scope="vector",
    ),
    Rule(
        "ve-pair-only", "hardware", "per-group arguments need pair mode",
        "{step}: groups are given but the stream is not unzipped",
        "start the chain with unzip, or give a single operand", "seed 003 (Pair Mode)",
        scope="vector",
    ),
    Rule(
        "ve-zip-unpaired", "hardware", "a _zip op merges the two groups of a pair",
        "{step}: there are no groups to zip", "start the chain with unzip",
        "seed 003 (Pair Mode)", scope="vector",
    ),
    Rule(
        "ve-unzip-axis", "hardware", "unzip splits a 2-way Time axis",
        "{step}: cannot unzip {axis}: {detail}", "unzip along a size-2 axis of the Time "
        "mapping", "seed 003 (Pair Mode)", scope="vector",
    ),
    Rule(
        "ve-unzip-cache", "hardware", "a group fits the VE register-file cache",
        "{step}: {inner} elements sit inside the group axis {axis}, over the {max} one group "
        "may hold", "move {axis} inward in Time so at most {max} elements follow it",
        "furiosa-opt vector_intra_slice_unzip check", scope="vector",
    ),
    # ---- chain planning (planner/chains.py) --------------------------------------------------
    Rule(
        "plan-no-alu", "hardware", "every op of a formula has an ALU for its dtype",
        "{formula}: no Vector Engine ALU computes {op} on {dtype}", "{hint}",
        "docs/hardware.md section 7 (ALU table)", scope="planner",
    ),
    Rule(
        "plan-two-streams", "hardware", "a chain carries one stream",
        "{formula}: {a} and {b}: {detail}", "{fix}",
        "seed 003 (피연산자: constant, VRF tensor or Stash)", scope="planner",
    ),
    Rule(
        "plan-stash-reach", "hardware", "a value read again must be stashed in its invocation",
        "{formula}: {value} is needed again by {reader}, but no plan keeps it: the stash is "
        "written once, read once, lives for one Tensor Unit invocation and is typed by way, "
        "and the ALUs force the reader into another invocation",
        "load {value} as a VRF operand (it can be read many times), or restructure the "
        "formula so the reader fits the value's invocation", "seed 003 (피연산자)",
        scope="planner",
    ),
    Rule(
        "plan-pair", "hardware", "a pair formula zips its two groups once",
        "{formula}: {detail}", "{fix}", "seed 003 (Pair Mode)", scope="planner",
    ),
    Rule(
        "plan-no-layout", "hardware", "a free stream has a legal layout",
        "no order of the pieces {pieces} (with any packet) is legal: {rules}",
        "run `tcplan explain` for the conflicting requirements and a fix for each (e.g. pad "
        "or re-split the destination so its pieces align), or give part of the stream",
        "seed 002; planner/layout.py", scope="planner",
    ),
    Rule(
        "plan-time-limit", "hardware", "a search finds a plan within its time limit",
        "the time limit ({limit} s) ran out before the search found a legal plan ({lowered} "
        "proposed plan(s) lowered and rejected)",
        "raise --time-limit, or fix part of the stream or the destination",
        "planner/layout.py, planner/chains.py", scope="planner",
    ),
    Rule(
        "contraction-no-mapping", "hardware", "a contraction has a mapping every rule allows",
        "no mapping of {einsum} meets every rule ({candidates} candidates): each breaks one "
        "of {rules}",
        "change what the rules name: free a fixed dimension, or pad or split an axis",
        "planner/contraction_search.py; docs/contractions.md", scope="planner",
    ),
    Rule(
        "contraction-fixed", "hardware", "what a contraction fixes is a mapping tcplan plans",
        "the contraction's mappings that hold {fixed} (of {candidates} candidates) break the "
        "rules named beside it, or there are none",
        "fix a dimension as a candidate holds it (docs/contractions.md, 'The candidates'), "
        "or leave it free",
        "planner/contraction_search.py; docs/contractions.md", scope="planner",
    ),
    Rule(
        "graph-no-layout", "hardware", "a graph's shared tensors have layouts every op plans",
        "no choice of the free tensors' layouts plans the ops {ops} together: {detail}",
        "{remedy}",
        "docs/graphs.md; planner/graph_plan.py", scope="planner",
    ),
    Rule(
        "graph-memory", "hardware", "a graph's live tensors fit their memory",
        "{tier}: at op {op} the tensors live together need {bytes:,} B of a {unit}, past its "
        "{capacity:,} B: {live}",
        "end a tensor's life earlier (another launch), split the launch, or give the "
        "tensors fewer bytes per {unit}",
        "docs/graphs.md; planner/graph_memory.py", scope="planner",
    ),
    Rule(
        "graph-derived-layout", "input", "a graph's derived tensor is declared as it is made",
        "{tensor} is declared {have}; op {op} leaves it {want}",
        "declare {tensor} as {want}",
        "docs/graphs.md; model/redistribute.py (the result of a redistribution)",
        scope="input",
    ),
    Rule(
        "graph-dtype", "hardware", "a graph's op reads and writes tensors of its dtypes",
        "{tensor} is {have}; op {op} {verb} {want}",
        "declare {tensor} with dtype: {want}, or convert in the chain",
        "seed 003 (a chain streams i32 or f32; its steps convert); docs/graphs.md",
        scope="planner",
    ),
    Rule(
        "graph-chain-placement", "hardware",
        "a chain's tensors lie in DM on the slices it streams",
        "{tensor} is {have}; the chain of op {op} streams {want}",
        "place {tensor} in DM with the chain input's Chip, Cluster and Slice mappings",
        "seed 003 (the Tensor Unit reads and writes its slice's DM); docs/graphs.md",
        scope="planner",
    ),
    # ---- Contraction Engine: Lane Folder (seed 004; docs/hardware.md section 8) -----------------
    Rule(
        "lane-fold-packet", "hardware", "the folder takes packets of 1 to 32 elements",
        "Packet {packet} has {size} elements per lane; the Lane Folder takes 1, 2, 4, 8, 16 "
        "or 32", "reduce or pad the packet to one of those sizes",
        "seed 004; docs/hardware.md section 8", scope="lane",
    ),
    Rule(
        "lane-fold-lanes", "hardware", "the folder takes 1, 2, 4 or 8 lanes",
        "Lane {lane} has {size} lanes", "use 1, 2, 4 or 8 lanes",
        "seed 004; docs/hardware.md section 8", scope="lane",
    ),
    Rule(
        "lane-fold-shape", "hardware", "the declared output is the fold's",
        "{mode}: the declared OutTime {time} / OutPacket {packet} do not match the fold: "
        "{why}", "declare OutTime {want_time} and OutPacket {want_packet}",
        "seed 004; docs/hardware.md section 8", scope="lane",
    ),
    # --- the Tensor Unit's engines between Fetch and Commit (model/engines/, issue 29) ----
    Rule(
        "flit-packet", "hardware", "the engine's packet is one 32-byte flit",
        "{engine}: the {side} packet {packet} is {elements} x {elem_bytes} B = {bytes} B, not "
        f"one {hw.FLIT_BYTES}-byte flit",
        "{fix}",
        "book: computing-tensors/collect-engine.md, cast-engine.md ('Output = exactly one "
        "flit'); docs/engines.md",
        profiles=frozenset(ENGINE_PROFILES), scope="engine",
    ),
    Rule(
        "engine-layout", "hardware", "the declared output stream is the one the engine makes",
        "{engine}: the declared {dim} {got} is not the engine's output {want} ({why})",
        "declare {dim} {want}",
        "book: computing-tensors/collect-engine.md ('Pad', 'Split'), cast-engine.md "
        "('repads'); docs/engines.md",
        profiles=frozenset(ENGINE_PROFILES), scope="engine",
    ),
    Rule(
        "flit-split", "hardware", "the packet's flits are digits of its mapping",
        "Collect: the packet {packet}, cut into flits of {flit} elements, has no digits "
        "that hold each flit (a flit ends inside a digit whose values do not split there)",
        "pad the packet's inner axis so that every flit ends on a digit boundary (e.g. "
        "Packet m![A, B # 16] for flits of 16 elements)",
        "book: computing-tensors/collect-engine.md ('Split'); docs/engines.md",
        profiles=frozenset({"collect"}), scope="engine",
    ),
    Rule(
        "engine-spatial", "hardware", "the engine keeps the stream's Chip, Cluster and Slice",
        "{engine}: the output's {dim} {got} is not the input's {want}: each slice runs its "
        "own pipeline, and only the Switch Engine moves a stream between slices",
        "declare the output's {dim} {want}",
        "book: computing-tensors/index.md ('Most engines preserve the spatial dimensions'); "
        "docs/engines.md",
        profiles=frozenset(ENGINE_PROFILES), scope="engine",
    ),
    Rule(
        "transpose-shape", "hardware", "the Transpose Engine's matrix fits its parameters",
        "Transpose of Time {time}, Packet {packet} into Time {out_time}, Packet "
        "{out_packet}: {why}",
        "read at most 8 valid elements per flit (the packet's leading ones), at most 8, 4 or "
        "2 rows (8-, 16-, 32-bit elements) that divide Time, a row of 1, 2 or 4 packets; "
        "declare OutPacket as the rows padded to one flit (R # F)",
        "book: computing-tensors/transpose-engine.md ('Parameters'); docs/engines.md",
        profiles=frozenset({"transpose"}), scope="engine",
    ),
    Rule(
        "switch-shape", "hardware", "a switch's configuration cuts its input",
        "{config} of Slice {slice}, Time {time}: {why}",
        "choose slice1 and slice0 whose product divides the Slice, time0 dividing the Time, "
        "an output Slice of the input's size, and new axes for the broadcast copies",
        "book: computing-tensors/switch-engine.md ('Regular Configurations'); "
        "docs/engines.md",
        profiles=frozenset({"switch"}), scope="engine",
    ),
    Rule(
        "switch-custom", "hardware", "a custom bitmap moves each element within its sub-ring",
        "CustomBroadcast (ring {ring}) of Slice {slice}, Time {time} to Slice {out_slice}, "
        "Time {out_time}: {why}",
        "choose a ring_size that spans every slice an element moves between (it divides the "
        "Slice), keep the slice count, and keep every live value",
        "book: computing-tensors/switch-engine.md ('Custom Configurations', 'Constraints'); "
        "docs/engines.md",
        profiles=frozenset({"switch"}), scope="engine",
    ),
    Rule(
        "inter-slice-shape", "hardware",
        "the Inter-Slice Reducer reduces the Slice's innermost factors into a dummy or a "
        "broadcast",
        "Inter-Slice Reducer ({op}) of Slice {slice} to {out_slice}: {why}",
        "keep the Slice's outer factors, replace its innermost reduced ones by 1 # r or a "
        "new axis of r, keep Time and Packet, and use an operation of the stream's type",
        "book: computing-tensors/vector-engine/inter-slice-reducer.md ('Constraints'); "
        "docs/engines.md",
        profiles=frozenset({"inter_slice_reduce"}), scope="engine",
    ),
    Rule(
        "commit-trim", "hardware", "a trim keeps the leading 8, 16, 24 or 32 bytes",
        "commit_trim: Packet {out} ({bytes} B) is not the leading 8, 16, 24 or 32 bytes of "
        "the flit {packet}",
        "declare the trimmed packet as the flit's leading elements (m![W # 32] to m![W]; "
        "m![N] to m![N = 8])",
        "book: computing-tensors/commit-adapter.md ('Trimming'); docs/engines.md",
        profiles=frozenset({"commit_trim"}), scope="engine",
    ),
    Rule(
        "commit-cast-types", "hardware", "the Commit Adapter casts f32 to bf16 only",
        "{op}: the Commit Adapter casts {have} to {want}; it converts f32 to bf16 and "
        "nothing else",
        "narrow other types in the Cast Engine (cast: {{to: ...}}) before the trim",
        "book: computing-tensors/commit-adapter.md ('Type Casting'); docs/engines.md",
        profiles=frozenset({"commit_cast", "commit_cast_relu"}), scope="engine",
    ),
    Rule(
        "commit-cast-width", "hardware", "a converting commit reads a multiple of 16 bytes",
        "{op}: the trimmed packet {packet} is {bytes} B, not a multiple of {unit} B",
        "trim the flit to {legal} before the cast",
        "book: computing-tensors/commit-adapter.md ('Type Casting'); furiosa-opt-lower "
        "config_commit_cast; docs/engines.md",
        profiles=frozenset({"commit_cast", "commit_cast_relu"}), scope="engine",
    ),
    Rule(
        "contract-lanes", "hardware", "a contraction broadcasts over 1, 2, 4 or 8 lanes",
        "contract: the TRF operand's Lane has {lanes} lanes",
        "store the TRF operand in 1, 2, 4 or 8 lanes",
        "book: contraction-engine/outer.md ('Constraints'); docs/engines.md",
        profiles=frozenset({"contract"}), scope="engine",
    ),
    Rule(
        "contract-outer-packet", "hardware", "the Outer stage's packet is 32 or 64 bytes",
        "contract: OutPacket {packet} is {elements} elements, {bytes} B",
        "declare an OutPacket of one flit (PackSize 1) or two (PackSize 2: the innermost "
        "Time digit of size 2 packed in)",
        "book: contraction-engine/outer.md ('Packing', 'Constraints'); docs/engines.md",
        profiles=frozenset({"contract"}), scope="engine",
    ),
    Rule(
        "contract-pack", "hardware", "the Outer stage's packet packs the stream's flits",
        "contract: OutPacket {packet} is not {pack} flit(s) of the stream, {want}",
        "declare OutPacket [Time % PackSize, Packet]: the stream's packet innermost, the "
        "innermost Time digit outside it when PackSize is 2",
        "book: contraction-engine/outer.md ('Packing'); furiosa-opt config_stream_adapter; "
        "docs/engines.md",
        profiles=frozenset({"contract"}), scope="engine",
    ),
    Rule(
        "contract-broadcast", "hardware", "the Outer stage's time is the stream's, broadcast "
        "innermost",
        "contract: OutTime {out_time} does not start with the stream's packed Time "
        "{outer} (TimeBroadcast digits come innermost)",
        "declare OutTime [Time / PackSize, the broadcast digits]",
        "book: contraction-engine/outer.md ('Broadcast'); furiosa-opt config_stream_adapter; "
        "docs/engines.md",
        profiles=frozenset({"contract"}), scope="engine",
    ),
    Rule(
        "contract-trf", "hardware", "the TRF holds what each lane multiplies",
        "contract: at lane {lane}, OutTime position {time}, OutPacket position {packet} "
        "the product needs an element the TRF's lane does not hold (Element {element})",
        "store the TRF operand so that each lane holds the elements its products read "
        "(Lane the output digits of the weight, Element the contracted ones)",
        "book: contraction-engine/outer.md ('TRF Sequencer'); docs/engines.md",
        profiles=frozenset({"contract"}), scope="engine",
    ),
    Rule(
        "contract-dtypes", "hardware", "the Multiplier takes the operand pairs it widens",
        "contract: a {stream} stream against a {weight} TRF operand{detail}",
        "use i8 x i8 (to i32), or a matching float pair: bf16, f8e4m3 or f8e5m2 (to f32); "
        "the result is the pair's accumulator type",
        "book: contraction-engine/outer.md ('Operand types'); docs/engines.md",
        profiles=frozenset({"contract"}), scope="engine",
    ),
    Rule(
        "contract-packet-reduce", "hardware", "the Packet Reducer keeps Packet / 2^d",
        "contract: the Packet Reducer's OutPacket {out} of Packet {packet}: {why}",
        "declare OutPacket as Packet without its innermost 2^d elements (m![1] sums the "
        "whole packet), at most 32 elements",
        "book: contraction-engine/packet-reducer.md ('Architecture'); docs/engines.md",
        profiles=frozenset({"contract"}), scope="engine",
    ),
    Rule(
        "contract-time-reduce", "hardware", "the Time Reducer keeps Time's terms in order",
        "contract: the Time Reducer's OutTime {out} is not a subsequence of the terms of "
        "Time {time}",
        "declare OutTime as the terms of Time that survive, in their order (the rest are "
        "summed away); write Time so that each survives or goes whole",
        "book: contraction-engine/time-reducer.md ('Architecture'); docs/engines.md",
        profiles=frozenset({"contract"}), scope="engine",
    ),
    Rule(
        "contract-slots", "hardware", "the Time Reducer's slots fit its accumulator",
        "contract: InnerTime {inner} slots, the accumulator holds {slots} in {mode} "
        "mode ({lanes} lane(s), {packet}-element packets)",
        "sum the Time digits that vary fastest first (put the summed digit innermost), "
        "split the kept inner ones, or switch the lane mode",
        "book: contraction-engine/time-reducer.md ('Constraints'); docs/engines.md",
        profiles=frozenset({"contract"}), scope="engine",
    ),
    Rule(
        "contract-reduce-axes", "hardware", "the reducers sum only contracted axes",
        "contract: the reducers sum digits of {axes}, which the result carries",
        "keep the result's axes out of the summed digits (in the kept Time terms, the "
        "surviving Packet or the Lane), or drop them from the result",
        "book: contraction-engine/index.md (Broadcast, Multiply, Reduce); docs/engines.md",
        profiles=frozenset({"contract"}), scope="engine",
    ),
    Rule(
        "trf-lanes", "hardware", "a TRF store fills 1, 2, 4 or 8 lanes, each a run of flits",
        "to_trf: Lane {lanes} over the stream's Time {time}: {why}",
        "store into 1, 2, 4 or 8 lanes whose count divides the stream's Time, its outer "
        "factors (Lane = Time / FlitsPerLane)",
        "book: computing-tensors/register-files.md ('From Collect Engine'); docs/engines.md",
        profiles=frozenset({"to_trf"}), scope="engine",
    ),
    Rule(
        "register-capacity", "hardware", "a register-file tensor fits its region",
        "{tier} tensor {tensor} needs {bytes:,} B of {what}, which holds {capacity:,} B",
        "store fewer elements per lane or slice (more lanes, more slices, or a smaller "
        "tile), or the full region",
        "book: computing-tensors/register-files.md ('Architecture', 'Double Buffering'); "
        "docs/engines.md",
        profiles=frozenset({"to_trf", "to_vrf"}), scope="engine",
    ),
    Rule(
        "cast-types", "hardware", "the Cast Engine narrows i32 and f32 only",
        "the Cast Engine converts {have} to {want}: it narrows i32 to "
        + ", ".join(hw.CAST_ENGINE_CASTS["i32"]) + " and f32 to "
        + ", ".join(hw.CAST_ENGINE_CASTS["f32"]),
        "{fix}",
        "book: computing-tensors/cast-engine.md ('Supported Casts'); docs/engines.md",
        profiles=frozenset({"cast"}), scope="engine",
    ),
    Rule(
        "fetch-cast-types", "hardware", "the Fetch Adapter widens to i32 / f32 or narrows f32 "
        "to bf16",
        "the Fetch Adapter casts {have} to {want}: {why}",
        "{fix}",
        "book: computing-tensors/fetch-adapter.md ('Type Casting'); docs/engines.md",
        profiles=frozenset({"fetch_cast"}), scope="engine",
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

    def __reduce__(self):
        """Pickled with its violations (an op plan's error sent from a worker or kept on
        disk: planner/op_cache.py)."""
        return (type(self), (self.violations,))

    @property
    def code(self) -> str:
        return self.violations[0].rule

    @property
    def kind(self) -> str:
        return self.violations[0].kind

    @property
    def message(self) -> str:
        return self.violations[0].message

    @property
    def fix(self) -> str:
        """What to change, for the headline violation (its rule's fix, with its terms)."""
        return self.violations[0].fix

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

