"""`tcplan explain`: why a problem has no plan (a minimal set of conflicting requirements), or,
when it has one, what binds it and where its time goes.

For a free DMA stream the requirements are the layout model's assumption literals: one per
rule instance (an alignment of one stride, the packet cap, the entry limit) and one per bound
of the problem.  An infeasible model's core is shrunk by deletion to a minimal infeasible
set: no plan meets all of it, and without any one of its members the others can be met
(``method: core``).  When the model has plans but the lowering rejects all of them, the
deletion runs over relaxed rules instead (`model.dma.lower(relax=...)`; ``method:
deletion``).  Free placements (Slice, Cluster, Chip, padding) and engine splits are options
of the search, and the core spans them: a rule instance names the option it belongs to, and
a bound of the problem is one requirement for all of them (``planner.layout._joint_core``).
When the time limit cuts the search before any plan, the search still says the rules
that leave no plan where a few of them show it without the model (``method: rules``:
the DMA packet's alignment and bound over every run that can be the packet, the entry
limit, what no order changes; planner/layout.py ``rules_proof``).
For a feasible problem: the requirements whose removal lowers the model's floor, and the
bounds whose removal gives a faster plan.
"""

from __future__ import annotations

from typing import Any

from tcplan.model import hardware as hw
from tcplan.model.rules import RULES, TcplanError

from .dma_spec import DmaSpec
from .layout import BOUND_PACKET as BOUND
from .layout import Search
from .outcome import Dominated, Found, NoPlan, TimedOut
from .problem import Problem


def _feasible(problem: Problem[DmaSpec], keep: set[str], pool: set[str]
              ) -> tuple[bool, set[str]]:
    """Plannable with only ``keep`` enforced (of ``pool``)? Also: rules that newly reject."""
    from .dma_plan import plan_free
    bound = problem.spec.bounds.packet_max_bytes if BOUND in keep else None
    relax = frozenset(r for r in pool if r != BOUND and r not in keep)
    try:
        out = plan_free(problem, relax=relax, bound=bound)
    except TcplanError:  # (a mistake the relaxed problem makes: no plan either)
        return False, set()
    if isinstance(out, Found):
        return True, set()
    return False, set(out.record.rejected) if out.record.searched else set()


def minimal_conflict(problem: Problem[DmaSpec], rejected: set[str]) -> list[str]:
    """A minimal set of requirements that together leave no plan (deletion filter)."""
    pool = set(rejected)
    if problem.spec.bounds.packet_max_bytes is not None:
        pool.add(BOUND)
    # rules can hide behind others: grow the pool until relaxing it all is feasible
    while True:
        ok, more = _feasible(problem, set(), pool)
        if ok or not (more - pool):
            break
        pool |= more
    if not _feasible(problem, set(), pool)[0]:
        # relaxing every rule found still leaves no plan (a rule checked before any piece
        # of the order matters, such as dma-tiers): report what rejected the candidates
        return sorted(rejected)
    core = sorted(pool)
    for r in list(core):
        trial = [x for x in core if x != r]
        ok, _ = _feasible(problem, set(trial), pool)
        if not ok:  # still infeasible without r: r is not needed for the conflict
            core = trial
    return core


def explain(problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
    """(exit code, report): 1 with the conflict for an infeasible problem, 0 otherwise (the
    problem's kind says how: planner/kinds/)."""
    from .registry import kind_of
    return kind_of(problem).explain(problem, seed)


def explain_dma(problem: Problem[DmaSpec], seed: int = 0) -> tuple[int, dict[str, Any]]:
    """A DMA or PCIe problem: its minimal conflict, or what binds its plan."""
    from tcplan.model.cost import dma_cycles, lower_bound

    from .dma_plan import plan_free
    from .lowering import lower_problem
    spec = problem.spec
    if spec.hops > 1:
        from .hops import plan_hops
        try:
            hops = plan_hops(problem)
        except TcplanError:
            hops = None
        if isinstance(hops, Found):
            hp = hops.record
            return 0, {"problem": problem.name, "feasible": True, "cycles": hp.cycles,
                       "bottleneck": "; ".join(dma_cycles(h.plan).bottleneck
                                               for h in hp.hops),
                       "penalties": [p for h in hp.hops for p in dma_cycles(h.plan).penalties],
                       "binding": [{"rule": None, "title": f"{len(hp.hops)} hop(s)"
                                    + (f": {hp.direct_error}" if hp.direct_error else "")}]}
    found: Search | None = None
    try:
        if spec.planned:
            out = plan_free(problem)
            if not isinstance(out, Found):
                assert not isinstance(out, Dominated)  # (no plan to beat was given)
                if out.error.kind == "input":
                    raise out.error
                return 1, _no_plan(problem, out)
            found = out.record
            plan = found.best.plan
        else:
            plan = lower_problem(problem)
    except TcplanError as e:
        if e.kind == "input":
            raise
        # no search behind it (a given stream): every broken rule is its own conflict
        return 1, {"problem": problem.name, "feasible": False,
                   "conflict": [_item(v.rule, v.to_json()) for v in e.violations]}
    cost = dma_cycles(plan)
    bound = lower_bound(plan)
    binding = [packet_item(plan)] + _freed_item(problem, bound, seed)
    if found is not None:
        assert isinstance(out, Found)
        from .layout import binding as bind
        best = found.best.cycles
        for b in bind(found, seed=seed):
            title = RULES[b["rule"]].title if b["rule"] else f"the bound {b['requirement']}"
            what = ("without it DMA packets over the cap become possible (not costed)"
                    if not b["floor_without"] else
                    f"without it the model's floor falls from {b['floor']:,} to "
                    f"{b['floor_without']:,} cycles")
            binding.append({"rule": b["rule"], "requirement": b["requirement"],
                            "title": title, "detail": f"{b['message']}; {what}"})
        binding += _bounds_binding(problem, best, seed)
        from .sources import binding_bits
        sides = (("source",) if spec.free_source else ()) + (
            ("destination",) if spec.free_element is not None
            and plan.destination.tier == "hbm" else ())
        binding += binding_bits(plan, best, sides)
        for r, n in sorted(found.rejected.items()):  # rules only the lowering checks
            binding.append({"rule": r, "candidates_rejected": n, "title": RULES[r].title})
        binding.append({"rule": None, "title": f"{found.enumerated} plan(s) lowered; "
                        f"the chosen one is the fastest by the estimate ({best:,} cycles), "
                        + ("proven" if out.proven else "not proven")
                        + " optimal"})
    return 0, {"problem": problem.name, "feasible": True, "cycles": cost.cycles,
               "lower_bound": bound, "bottleneck": cost.bottleneck,
               "penalties": cost.penalties, "binding": binding}


def _no_plan(problem: Problem[DmaSpec], out: NoPlan[Search] | TimedOut[Search]
             ) -> dict[str, Any]:
    """The report of a search without a plan: the solver's core (``method: core``), a
    deletion filter over the rules that rejected its plans (``deletion``), or the error."""
    e, found = out.error, out.record
    if not found.searched:  # options lowered as given: every broken rule is its own
        items = [_item(v.rule, v.to_json()) for v in e.violations]
        return {"problem": problem.name, "feasible": False, "conflict": items}
    if found.conflict:  # the solver's core, shrunk (rule instances and bounds)
        items = _grouped(problem, [
            _bound_item(problem, r.key) if r.rule is None else
            {**_item(r.rule, r.violation.to_json()), "requirement": r.key,
             "option": r.option} for r in found.conflict])
        return {"problem": problem.name, "feasible": False, "conflict": items,
                "pieces": [p.term() for p in found.pieces],
                "method": "core" if found.proof == "model" else found.proof,
                "options": len(found.options), "minimal": found.minimal}
    if isinstance(out, TimedOut) and not found.rejected:
        # the time limit, no plan lowered and no cheap proof: nothing a deletion filter
        # could relax (each of its trials would spend the time limit again)
        return {"problem": problem.name, "feasible": False, "method": "error",
                "conflict": [_item(v.rule, v.to_json()) for v in e.violations]}
    core = minimal_conflict(problem, set(found.rejected))
    if not core:  # nothing to shrink: the error itself
        return {"problem": problem.name, "feasible": False, "method": "error",
                "conflict": [_item(v.rule, v.to_json()) for v in e.violations]}
    items = []
    for r in core:
        if r == BOUND:
            items.append(_bound_item(problem))
        else:
            v = found.examples.get(r)
            items.append(_item(r, v.to_json() if v is not None else None))
    return {"problem": problem.name, "feasible": False, "conflict": items,
            "pieces": [p.term() for p in found.pieces], "method": "deletion"}


def _bounds_binding(problem, best: int, seed: int) -> list[dict[str, Any]]:
    """The problem's bounds that bind: planned again without one, a faster plan exists (it
    may sit in another Slice candidate or padding, which one search does not see)."""
    from .layout import BOUND_ALIGN, BOUND_FOOTPRINT, BOUND_PACKET
    from .dma_plan import PROBLEM, plan_free
    bounds, fs = problem.spec.bounds, problem.spec.free_slice
    present = [k for k, on in ((BOUND_PACKET, bounds.packet_max_bytes is not None),
                               (BOUND_ALIGN, bounds.align_bytes is not None),
                               (BOUND_FOOTPRINT, fs is not None
                                and fs.max_footprint_bytes is not None)) if on]
    out = []
    for key in present:
        try:
            got = plan_free(problem, seed=seed, relax=frozenset({key}),
                            bound=None if key == BOUND_PACKET else PROBLEM)
        except TcplanError:
            continue
        if not isinstance(got, Found):
            continue
        found = got.record
        if found.best.cycles < best:
            out.append({"rule": None, "requirement": key, "title": f"the bound {key}",
                        "detail": f"without it a plan takes {found.best.cycles:,} cycles "
                                  f"(estimate), against {best:,}"})
    return out


def _freed_item(problem: Problem[DmaSpec], bound: int, seed: int) -> list[dict[str, Any]]:
    """The given DM layout's remark (planner/dma_plan.py ``layout_freed``), when it binds."""
    from .dma_plan import layout_freed
    freed = layout_freed(problem, bound, seed)
    if freed is None:
        return []
    return [{"rule": None, "about": "layout", "title": freed.title(),
             "detail": freed.detail(), "freed": freed.to_json()}]


def packet_item(plan: Any) -> dict[str, Any]:
    """What sets a DMA's packet, and the requests it makes: the loop just outside the
    packet (the unified sequencer's next entry) and which side it leaves contiguous."""
    from tcplan.model.cost import total_packets
    eb, axi = plan.elem_bytes, hw.DMA_REQUEST_BYTES
    packets = total_packets(plan)
    requests = packets * -(-plan.packet_bytes // axi)
    head = (f"packet {plan.packet_bytes:,} B ({plan.packet} elements): {packets:,} packets, "
            f"{requests:,} requests of at most {axi} B")
    packet = plan.stream_dims["packet"].text()
    outer = [(t, e) for t, e in zip(plan.terms, plan.unified)][:-1] \
        if plan.unified and plan.unified[-1][0] == plan.packet else []
    if not outer:
        return {"rule": None, "about": "packet", "title": head,
                "detail": f"the packet {packet} is the whole transfer"}
    term, (n, r, w) = outer[-1]
    read, write = r == plan.packet, w == plan.packet
    loop = (f"the loop outside it ({'' if '*' in term else term + ': '}{n:,} steps of "
            f"{r * eb:,} B in the source, {w * eb:,} B in the destination)")
    if read and write:
        why = (f"{loop} continues both sides in memory: a longer packet is possible"
               + (" but makes no fewer requests" if plan.packet_bytes >= axi else ""))
    elif read or write:
        keeps, breaks = ("source", "destination") if read else ("destination", "source")
        element = getattr(plan, breaks).dims["element"].text()
        why = (f"{loop} continues the {keeps} in memory, not the {breaks} (its Element "
               f"{element})")
    elif r == w and r % plan.packet == 0:
        split = ", ".join(f"{d.title()} {plan.stream_dims[d].text()}" for d in
                          ("cluster", "slice") if plan.stream_dims[d].size > 1)
        why = (f"{loop} continues neither side in memory: the values between are other "
               "engines'" + (f" (the stream's {split})" if split else ""))
    else:
        why = f"{loop} continues neither side in memory"
    return {"rule": None, "about": "packet", "title": head, "detail": why}


def _grouped(problem: Problem[DmaSpec], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The core's items, one per rule and message: a rule broken the same way under many
    placements or engine splits is one item saying under which (``options``); its fix
    kept only where applying it can help under the problem's bounds."""
    out: dict[tuple, dict[str, Any]] = {}
    for it in items:
        key = (it.get("rule"), it["message"])
        if key not in out:
            out[key] = {**it, "options": [], "requirements": []}
            out[key].pop("option", None)
        out[key]["requirements"].append(it["requirement"])
        if it.get("option"):
            out[key]["options"].append(it["option"])
    return [_where(_helps(problem, it)) for it in out.values()]


def _where(item: dict[str, Any]) -> dict[str, Any]:
    """The item's message says the placements or engine splits it holds under."""
    opts = item.pop("options")
    if not opts:
        return item
    shown = "; ".join(opts[:3]) + (f"; and {len(opts) - 3} more" if len(opts) > 3 else "")
    said = f"with {opts[0]}" if len(opts) == 1 else f"with each of {len(opts)} ({shown})"
    return {**item, "options": opts, "message": f"{said}: {item['message']}"}


#: fixes that need a packet of at least so many bytes (a bound below makes them useless)
FIX_NEEDS_PACKET = {"dma-hbm-dm-align": hw.DMA_HBM_DM_ALIGN}


def _helps(problem: Problem[DmaSpec], item: dict[str, Any]) -> dict[str, Any]:
    """The item with its fix dropped where the problem's bounds keep it from helping (to
    align packets to 8 B under ``packet_max_bytes: 4``): the bound is then what to change,
    and the bound's own item says so."""
    need = FIX_NEEDS_PACKET.get(item.get("rule") or "")
    most = problem.spec.bounds.packet_max_bytes
    if need is None or most is None or most >= need:
        return item
    return {**item, "fix": f"(none under bounds.packet_max_bytes {most}: the fix needs "
                           f"packets of {need} B)", "fix_helps": False}


def _bound_item(problem: Problem[DmaSpec], key: str = BOUND) -> dict[str, Any]:
    from .layout import BOUND_ALIGN, BOUND_FOOTPRINT
    bounds = problem.spec.bounds
    if key == BOUND_FOOTPRINT:
        fs = problem.spec.free_slice
        assert fs is not None and fs.max_footprint_bytes is not None  # (its key says so)
        most = fs.max_footprint_bytes
        cut = [c.label for c in fs.candidates
               if c.destination.dims["element"].size * c.destination.elem_bytes > most]
        return {"requirement": key, "rule": None,
                "message": f"the problem bounds a slice's footprint to {most:,} B, which "
                           f"excludes {', '.join(cut)}",
                "fix": "raise or drop max_footprint_bytes"}
    if key == BOUND_ALIGN:
        a = bounds.align_bytes
        return {"requirement": key, "rule": None,
                "message": f"the problem wants every destination Element row on a multiple "
                           f"of {a:,} B", "fix": "lower or drop bounds.align_bytes, or pad "
                                                 "the rows (`# free`)"}
    b = bounds.packet_max_bytes
    return {"requirement": BOUND, "rule": None,
            "message": f"the problem bounds the packet to {b:,} B",
            "fix": "raise or drop bounds.packet_max_bytes"}


def _item(rule: str, v: dict | None) -> dict[str, Any]:
    r = RULES[rule]
    return {"requirement": rule, "rule": rule, "title": r.title,
            "message": v["message"] if v else r.title, "fix": v["fix"] if v else r.fix,
            "terms": (v or {}).get("terms", [])}


def explain_expression(problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
    from .chains import plan_expression
    try:
        plan = plan_expression(problem)
    except TcplanError as e:
        if e.kind == "input":
            raise
        return 1, {"problem": problem.name, "feasible": False,
                   "conflict": [_item(v.rule, v.to_json()) for v in e.violations]}
    binding = []
    if len(plan.chains) > 1:
        used: dict[str, int] = {}
        for a in plan.analyses:
            for alu in a.alus:
                used[alu] = used.get(alu, 0) + 1
        again = [alu for alu, k in used.items() if k > 1]
        rule = "ve-alu-busy" if again else "ve-stage-order"
        binding.append({"rule": rule, "title": RULES[rule].title,
                        "detail": ("needed more than once: " + ", ".join(again)) if again
                        else "an op's stage comes before an earlier op's"})
    return 0, {"problem": problem.name, "feasible": True, "cycles": plan.cycles,
               "invocations": len(plan.chains), "binding": binding,
               "bottleneck": [a.breakdown()["bottleneck"] for a in plan.analyses]}
