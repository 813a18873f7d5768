"""What the ``contraction`` kind's two paths share (planner/kinds/contraction.py, without
moves; planner/kinds/contraction_with_moves.py, with them): the operands in the einsum's
letter order against the plan's tensors, and the words ``explain`` says of a mapping."""

from __future__ import annotations

from tcplan.model import hardware as hw
from tcplan.model.engines.contraction import ContractionPlan
from tcplan.model.rules import fail

from .. import contraction_search as cs


def to_plan(arr, letters: tuple[str, ...], t, axes: dict[str, int], role: str):
    """A user's operand over its einsum letters as the plan's tensor holds it: over the
    axes the tensor carries, in the axes block's order, constant along the ones it holds
    as copies (the TRF on slices of the stream's axes)."""
    import numpy as np

    from tcplan.executor.run import carried_axes
    want = tuple(axes[a] for a in letters)
    if np.shape(arr) != want:
        raise fail("bad-request", detail=f"--input {role}: expected shape {want} "
                   f"({', '.join(letters)}), got {np.shape(arr)}",
                   fix="save the operand with numpy.save over its einsum letters")
    carried = carried_axes(t, axes)
    order = [a for a in carried if a in letters]
    x = np.transpose(np.asarray(arr), [letters.index(a) for a in order])
    shape = [axes[a] if a in letters else 1 for a in carried]
    return np.ascontiguousarray(np.broadcast_to(x.reshape(shape),
                                                tuple(axes[a] for a in carried)))


def from_plan(arr, t, letters: tuple[str, ...], axes: dict[str, int]):
    """A plan's tensor (over the axes it carries) over the einsum's letters (the first
    copy of an axis it holds as copies)."""
    import numpy as np

    from tcplan.executor.run import carried_axes
    carried = carried_axes(t, axes)
    x = np.asarray(arr)[tuple(slice(None) if a in letters else 0 for a in carried)]
    kept = [a for a in carried if a in letters]
    return np.transpose(x, [kept.index(a) for a in letters])


def trf_use(plan: ContractionPlan) -> dict[str, str]:
    """What the TRF holds a slice, against what its lanes hold (docs/hardware.md)."""
    t = plan.trf
    lanes, per = t.dims["lane"].size, t.dims["element"].size * t.elem_bytes
    cap = hw.TRF_BYTES_PER_LANE * hw.MAX_LANES
    return {"title": f"the TRF holds {lanes * per:,} B a slice ({lanes} lane(s) x {per:,} B) "
                     f"of its {cap:,} B",
            "detail": f"{per:,} B of a lane's {hw.TRF_BYTES_PER_LANE:,}"}


def why(problem, best: cs.Evaluated) -> list[dict[str, str]]:
    """What binds the best mapping, in words: where the contracted axis sits and the
    multipliers that leaves busy, the dimensions the problem fixed and what they cost
    (the best mapping with them free)."""
    plan, c = best.plan, best.candidate
    assert plan is not None
    (k,) = problem.spec.einsum.contracted
    per_lane = hw.CONTRACT_PACKET_BYTES[-1] // hw.DTYPE_BYTES[problem.dtype]
    out = [{"title": f"{k} in Time: 1 of {per_lane} multipliers busy" if c.k_in == "time"
            else f"{k} in the Packet: the Packet Reducer's tree sums it",
            "detail": f"the stream carries {c.flits:,} flits a slice on {c.units:,} units; "
                      f"cycles {plan.cycles:,}"}, trf_use(plan)]
    if problem.spec.fixed:
        free = cs.search(problem.spec.einsum, problem.axes, problem.dtype, {}).best
        cost = ("" if free is None or free.plan is None else
                f"; with them free the best takes {free.cycles:,} cycles at MAC utilization "
                f"{free.plan.mac_utilization:.4f} ({free.candidate.describe()})")
        out.append({"title": "fixed: " + ", ".join(f"{d} {m.text()}" for d, m in
                                                   problem.spec.fixed.items()),
                    "detail": "the search kept only the mappings that hold these" + cost})
    return out
