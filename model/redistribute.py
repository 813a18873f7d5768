"""SRAM redistribution and HBM chip shuffles (seed 002 "재분배 연산"; docs/hardware.md section 6).

A redistribution plan runs in the seed's fixed order, fused into one DMA: an optional
``chip_shuffle(sources)`` (target chip t reads source chip ``sources[t]``), an optional
``cluster_swap()`` (exactly two clusters), any number of ``chip_slice::<Axis, Out>(indices)``
(target chip t keeps position ``indices[t]`` of Axis; Axis leaves Element, which becomes Out),
then any number of ``cluster_slice`` (the same per target cluster).  The sub-context slices
``asymmetric_chip_slice`` / ``asymmetric_cluster_slice`` are local copies on their own.

The result keeps Chip, Cluster and Slice; its Element is the last Out.  Its value semantics (which
source chip, cluster and element feed each output position) is :meth:`Redistribution.source_of`,
and :meth:`Redistribution.apply` runs it on a concrete array.  Syncs: ChipSync when a source chip
changes, ClusterSync when a source cluster changes, none for local slicing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import hardware as hw
import math

from .mapping import LIVE, Mapping, coalesce_factors
from .sequencer import coalesce
from .rules import TcplanError, Violation
from .tiers import Tensor, dm_address, placement_violations

ORDER = ("chip_shuffle", "cluster_swap", "chip_slice", "cluster_slice")
SUB_CONTEXT = ("asymmetric_chip_slice", "asymmetric_cluster_slice")


@dataclass
class Step:
    op: str
    sources: list[int] | None = None  # shuffles
    axis: Mapping | None = None  # slices
    output: Mapping | None = None
    indices: list[int] | None = None
    # filled by planning: where the sliced axis sits in the element positions
    outer: int = 1  # positions of Element before the sliced axis (as a block count)
    inner: int = 1  # positions after it

    @property
    def sliced(self) -> tuple[Mapping, Mapping, list[int]]:
        """A slice's axis, its output Element and the index each unit keeps (the loader
        gives all three to every slice)."""
        assert self.axis is not None and self.output is not None, self.op
        return self.axis, self.output, self.indices or []

    @property
    def source_chips(self) -> list[int]:
        """A shuffle's source chip of each target chip."""
        return self.sources or []


@dataclass
class Redistribution:
    source: Tensor
    result: Tensor
    steps: list[Step]
    syncs: list[str] = field(default_factory=list)

    def source_of(self, chip: int, cluster: int, element: int) -> tuple[int, int, int]:
        """The source (chip, cluster, element position) feeding one output position."""
        p, k, e = chip, cluster, element
        # undo the slices, innermost (last) first: each re-inserts its axis position
        for s in reversed(self.steps):
            if s.op in ("chip_slice", "asymmetric_chip_slice", "cluster_slice",
                        "asymmetric_cluster_slice"):
                axis, _, indices = s.sliced
                sel = indices[chip] if "chip" in s.op else indices[cluster]
                size = axis.size
                outer, inner = divmod(e, s.inner)
                e = (outer * size + sel) * s.inner + inner
        for s in self.steps:
            if s.op in ("chip_shuffle", "hbm_chip_shuffle"):
                p = s.source_chips[chip]
            elif s.op == "cluster_swap":
                k = 1 - cluster
        return p, k, e

    def apply(self, data: np.ndarray) -> np.ndarray:
        """Run the plan on ``data[chip, cluster, element]`` (``[chip, element]`` for HBM)."""
        hbm = self.source.tier == "hbm"
        arr = data[:, None, :] if hbm else data
        chips, clusters = arr.shape[0], arr.shape[1]
        n_out = self.result.dims["element"].size
        out = np.empty((chips, clusters, n_out), dtype=arr.dtype)
        for t in range(chips):
            for k in range(clusters):
                src = [self.source_of(t, k, e) for e in range(n_out)]
                p = np.array([x[0] for x in src])
                q = np.array([x[1] for x in src])
                e = np.array([x[2] for x in src])
                out[t, k] = arr[p, q, e]
        return out[:, 0, :] if hbm else out

    def descriptors(self) -> list[dict[str, Any]]:
        """The fused DMA, one command per target chip and cluster: unified entries over the
        result's slices and element positions, read and write addresses (bytes, DM virtual
        addresses of docs/hardware.md R10, or HBM per-chip addresses) on their chips."""
        eb = self.source.elem_bytes
        hbm = self.source.tier == "hbm"
        out_el = self.result.dims["element"]
        fs = list(coalesce_factors(out_el.factors))
        weights, w = [], 1
        for f in reversed(fs):
            weights.append(w)
            w *= f.size
        weights.reverse()
        entries: list[tuple[int, int, int]] = []
        if not hbm:  # the same slices on both sides
            sl = self.result.dims["slice"]
            sws, sw = [], 1
            sfs = list(coalesce_factors(sl.factors))
            for f in reversed(sfs):
                sws.append(sw)
                sw *= f.size
            for f, x in zip(sfs, reversed(sws)):
                if f.count > 1:
                    step = x * hw.DM_SLICE_STRIDE // eb
                    entries.append((f.count, step, step))
        cmds = []
        n_chips = self.source.dims["chip"].size
        n_clusters = 1 if hbm else self.source.dims["cluster"].size
        chip_live = self.source.dims["chip"].evaluate()[1] == LIVE
        cl_live = np.ones(1, bool) if hbm else self.source.dims["cluster"].evaluate()[1] == LIVE
        first_slice = 0 if hbm else int(np.flatnonzero(
            self.result.dims["slice"].evaluate()[1] == LIVE)[0])
        for t in range(n_chips):
            for k in range(n_clusters):
                if not chip_live[t] or not cl_live[k]:
                    continue
                p0, k0, e0 = self.source_of(t, k, 0)
                ents = list(entries)
                for f, x in zip(fs, weights):
                    if f.size > 1:
                        _, _, e1 = self.source_of(t, k, x)
                        ents.append((f.size, e1 - e0, x))
                if hbm:
                    ra, wa = self.source.address + e0 * eb, self.result.address
                else:
                    ra = dm_address(k0, first_slice, self.source.address + e0 * eb)
                    wa = dm_address(k, first_slice, self.result.address)
                merged, _ = coalesce(ents)
                run = merged[-1][0] if merged and merged[-1][1:] == (1, 1) else 1
                packet = math.gcd(run, max(1, hw.DMA_MAX_PACKET_BYTES // eb))
                cmds.append({"target": [t, k], "engine": [p0, k0, first_slice //
                                                          (2 * hw.SLICES_PER_DMN)],
                             "read": [p0, ra], "write": [t, wa],
                             "entries": [list(e) for e in ents], "packet": packet})
        return cmds

    def to_json(self) -> dict[str, Any]:
        return {
            "descriptors": self.descriptors(),
            "source": self.source.describe(), "result": self.result.describe(),
            "element": self.result.dims["element"].text(), "syncs": self.syncs,
            "steps": [{"op": s.op, **({"sources": s.sources} if s.sources else {}),
                       **({"axis": s.sliced[0].text(), "output": s.sliced[1].text(),
                           "indices": s.indices} if s.axis is not None else {})}
                      for s in self.steps],
        }


def plan(source: Tensor, steps: list[Step], chips: int) -> Redistribution:
    """Check a plan against every constraint and derive its result, or raise naming them."""
    violations: list[Violation] = list(placement_violations(source, chips))
    ops = [s.op for s in steps]
    hbm = source.tier == "hbm"
    if hbm:
        if ops != ["hbm_chip_shuffle"]:
            violations.append(Violation("redistribute-order", tuple(ops), {
                "detail": "an HBM tensor takes exactly one hbm_chip_shuffle",
                "fix": "use hbm_chip_shuffle on HBM; redistribute DM tensors"}))
    elif source.tier != "dm":
        violations.append(Violation("redistribute-order", tuple(ops), {
            "detail": f"a {source.tier} tensor cannot be redistributed",
            "fix": "redistribute DM tensors (hbm_chip_shuffle for HBM)"}))
    elif any(op in SUB_CONTEXT for op in ops):
        if len(ops) != 1:
            violations.append(Violation("redistribute-order", tuple(ops), {
                "detail": "a sub-context slice runs alone (it is a local copy, not a fused "
                          "redistribution)",
                "fix": "run the asymmetric slice as its own step"}))
    else:
        rank = [ORDER.index(op) if op in ORDER else -1 for op in ops]
        bad = [op for op, r in zip(ops, rank) if r < 0]
        if bad or rank != sorted(rank) or ops.count("chip_shuffle") > 1 or \
                ops.count("cluster_swap") > 1:
            violations.append(Violation("redistribute-order", tuple(ops), {
                "detail": "steps must be: optional chip_shuffle, optional cluster_swap, any "
                          f"chip_slice, any cluster_slice; got {', '.join(ops) or 'none'}",
                "fix": "reorder the steps (each kind once for shuffle and swap)"}))
    if violations:
        raise TcplanError(violations)
    chip_m = source.dims["chip"]
    n_chips = chip_m.size
    cluster_m = source.dims.get("cluster")
    n_clusters = cluster_m.size if cluster_m is not None else 1
    chip_live = chip_m.evaluate()[1] == LIVE
    cluster_live = (cluster_m.evaluate()[1] == LIVE) if cluster_m is not None else \
        np.ones(1, bool)
    element = source.dims["element"]
    syncs: list[str] = []
    for s in steps:
        if s.op in ("chip_shuffle", "hbm_chip_shuffle"):
            src = s.sources or []
            if sorted(src) != list(range(n_chips)):
                violations.append(Violation("shuffle-permutation", (str(src),), {
                    "sources": src, "chips": n_chips}))
                continue
            for t in range(n_chips):
                if chip_live[t] and not chip_live[src[t]]:
                    violations.append(Violation("inactive-source", (f"chip {t}",), {
                        "detail": f"target chip {t} reads source chip {src[t]}, a padding "
                                  f"position of the Chip mapping {chip_m.text()}"}))
            if src != list(range(n_chips)) and s.op == "chip_shuffle":
                syncs.append("ChipSync")
        elif s.op == "cluster_swap":
            if n_clusters != hw.CLUSTERS_PER_CHIP or not cluster_live.all():
                shown = cluster_m.text() if cluster_m is not None else "m![1]"  # (HBM)
                violations.append(Violation("swap-two-clusters", (shown,), {
                    "mapping": shown, "size": int(cluster_live.sum())}))
                continue
            syncs.append("ClusterSync")
        else:  # a slice
            per = n_chips if "chip" in s.op else n_clusters
            live = chip_live if "chip" in s.op else cluster_live
            v = _place_slice(s, element, per, live)
            if v:
                violations += v
                continue
            element = s.sliced[1]
    if violations:
        raise TcplanError(violations)
    dims = dict(source.dims)
    dims["element"] = element
    # a new tensor (to_dm materializes one): placed right after the source, 8-byte aligned
    end = source.address + source.dims["element"].size * source.elem_bytes
    result = Tensor(f"{source.name}'", source.tier, source.dtype, dims, -(-end // 8) * 8)
    return Redistribution(source, result, steps, syncs)


def _place_slice(s: Step, element: Mapping, per: int, live: np.ndarray) -> list[Violation]:
    """Find the sliced axis inside Element; check Out and the indices."""
    out: list[Violation] = []
    axis, output, idx = s.sliced
    ef = list(coalesce_factors(element.factors))
    af = list(coalesce_factors(axis.factors))
    of = list(coalesce_factors(output.factors))
    pos = next((i for i in range(len(ef) - len(af) + 1) if ef[i:i + len(af)] == af), None)
    if pos is None or not af:
        out.append(Violation("slice-axis", (axis.text(),), {
            "detail": f"{s.op}: {axis.text()} is not one contiguous part of the Element "
                      f"mapping {element.text()}",
            "fix": "slice axes that sit next to each other in Element, one call per "
                   "separated axis"}))
        return out
    rest = ef[:pos] + ef[pos + len(af):]
    if list(coalesce_factors(rest)) != of:
        out.append(Violation("slice-axis", (output.text(),), {
            "detail": f"{s.op}: removing {axis.text()} from {element.text()} leaves "
                      f"m![...] of {_sizes(rest)}, not Out {output.text()}",
            "fix": "give as Out the Element mapping without the sliced axis"}))
        return out
    s.inner = int(np.prod([f.size for f in ef[pos + len(af):]], dtype=np.int64))
    s.outer = int(np.prod([f.size for f in ef[:pos]], dtype=np.int64))
    axis_live = axis.evaluate()[1] == LIVE
    if len(idx) != per:
        out.append(Violation("slice-index", (str(idx),), {
            "detail": f"{s.op} needs one index per target ({per}), got {len(idx)}",
            "fix": f"give {per} indices, one per target"}))
        return out
    for t, i in enumerate(idx):
        if not live[t]:
            continue
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < axis.size \
                or not axis_live[i]:
            out.append(Violation("slice-index", (str(i),), {
                "detail": f"{s.op}: target {t} selects {i!r}, not a live position of "
                          f"{axis.text()} (0..{axis.size - 1})",
                "fix": "select one live position per target"}))
    return out


def _sizes(fs: list) -> str:
    return " x ".join(str(f.size) for f in fs) or "1"
