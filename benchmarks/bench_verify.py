"""Benchmark: a graph's run and end-to-end check at scale (issue 32 item 5).

    python benchmarks/bench_verify.py [--layers 28] [--kernels mlp_forward,...] [--old]

Each scenario runs in a fresh process, so that its peak resident memory is its own: the
typed Qwen3 kernels of ``problems/kernels/qwen3`` one by one, then a synthetic decode step
of ``--layers`` decoder layers (every typed kernel of a layer, each copy's tensors and ops
renamed with a prefix, its HBM tensors at addresses of their own, each kernel a launch of
its own; the loader's byte-sharing check and the schedule left out: the copies' kernels
are not connected, each copy's results are scratch to the next), planned once, then run
and verified (``executor/graph.py`` ``run_graph``) two ways: as it runs now (strided views spanning every unit, given tensors placed just before
their first reader, values dropped after their last use, HBM pages released) and the old
way (``run_graph(..., legacy=True)``: one view per unit, every tensor placed first and
checked at the end; for the synthetic graph, whose copies share DM bytes, the old views
with every value kept, in the new order), with the ratio.  Planning is not timed.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QWEN3 = ROOT / "problems/kernels/qwen3"

#: the typed kernels of one decoder layer, in the order a decode step runs them
LAYER = ("rmsnorm_forward", "projection_proj_q", "projection_proj_p", "projection_proj_v",
         "rmsnorm_forward_q", "rmsnorm_forward_k", "rope_apply_rope", "attention_qk_scaled",
         "attention_row_max", "attention_masked_exp", "attention_row_sum",
         "attention_weighted_sum", "attention_norm", "attention_ng_to_vrf",
         "attention_ng_to_vrf_slicep4", "attention_forward", "projection_proj_o",
         "residual_forward", "mlp_forward")
#: the kernels run one by one (the typed files: their ``_free`` twins plan the same run)
KERNELS = LAYER + ("lm_head_forward", "rmsnorm_forward_lm_head", "attention_forward_first")

HBM_ALIGN = 1 << 20


def big_graph(layers: int, kernels: tuple[str, ...] = LAYER) -> str:
    """``layers`` copies of ``kernels`` as one graph file (YAML text): every tensor and op
    of copy ``c`` of kernel ``k`` renamed ``L{c}_{k}_NAME``, its HBM tensors shifted past
    every earlier copy's, each kernel copy a launch of its own.  The axes are the union of
    the kernels' (the typed Qwen3 kernels agree on every shared axis)."""
    import yaml
    docs = {k: yaml.safe_load((QWEN3 / f"{k}.yaml").read_text()) for k in kernels}
    axes: dict[str, int] = {}
    for k, d in docs.items():
        for a, n in d["axes"].items():
            if axes.setdefault(a, n) != n:
                raise ValueError(f"{k}: axis {a} is {n}, another kernel's {axes[a]}")
    from tcplan.planner import graph as pg
    launches = "launch" in getattr(pg, "GRAPH_OP_KEYS", ())  # (else in the file's order)
    tensors: dict[str, Any] = {}
    ops: list[dict[str, Any]] = []
    hbm = 0
    for c in range(layers):
        for k, d in docs.items():
            pre = f"L{c}_{k}_"
            names = set(d["tensors"])
            top = hbm
            for n, t in d["tensors"].items():
                t = dict(t)
                if t.get("tier") == "hbm":
                    t["address"] = int(t["address"]) + hbm
                    top = max(top, t["address"] + _bytes(t, d["axes"]))
                tensors[pre + n] = t
            hbm = -(-top // HBM_ALIGN) * HBM_ALIGN
            for o in d["ops"]:
                ops.append({**_renamed(o, names, pre),
                            **({"launch": pre.rstrip("_")} if launches else {})})
    class NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True  # (problem files take no anchors: every copy written out)
    return yaml.dump({"format": 1, "name": f"decode_{layers}_layers", "kind": "graph",
                      "dtype": "bf16", "axes": axes, "tensors": tensors, "ops": ops},
                     Dumper=NoAliases, sort_keys=False, width=1 << 16)


def _renamed(o: dict[str, Any], names: set[str], pre: str) -> dict[str, Any]:
    """An op with its name and the tensors it names (its roles, its VRF operands' tensors)
    prefixed; its chain's operand names are its own."""
    def r(v: Any) -> Any:
        return pre + v if isinstance(v, str) and v in names else v
    out = {k: (pre + v if k == "name" else r(v)) for k, v in o.items()}
    if isinstance(o.get("vrf"), dict):
        out["vrf"] = {k: r(v) for k, v in o["vrf"].items()}
    return out


def _bytes(t: dict[str, Any], axes: dict[str, int]) -> int:
    """An upper bound on an HBM tensor's bytes: its axes' product, 4 bytes an element."""
    from tcplan.model.mapping import parse
    m = parse(t["element"], axes)
    return m.size * 4


def load_big(text: str):
    """The synthetic graph loaded: the file-size and YAML-node limits raised, and the
    loader's byte-sharing check left to launches (two copies' DM tensors share bytes: one
    copy is done before the next starts), and no schedule made."""
    from tcplan.model import limits
    from tcplan.planner import graph as pg
    import tcplan
    limits.PROBLEM_FILE_MAX_BYTES = 1 << 30
    limits.YAML_MAX_NODES = 1 << 26

    def spans_only(g) -> None:
        g.spans = pg._spans(g)
    pg._disjoint = spans_only  # type: ignore[assignment]
    from tcplan.planner import schedule
    # (the schedule is not what is measured, and its hazards between launches sharing
    # bytes are the lead's launches work: the graph is planned without it)
    from types import SimpleNamespace
    schedule.schedule_of = (  # type: ignore[assignment]
        lambda *a, **k: SimpleNamespace(status="optimal"))
    from tcplan.executor import graph as run_graph_mod
    lifetimes = run_graph_mod.lifetimes

    def scratch(g) -> dict[str, tuple[int, int]]:
        """A copy's results die with their writer: nothing connects the copies."""
        life, last = lifetimes(g), {}
        for step, i in enumerate(g.order):
            for n in g.ops[i].roles.values():
                last[n] = step
        return {n: (a, last.get(n, b)) for n, (a, b) in life.items()}
    run_graph_mod.lifetimes = scratch  # type: ignore[assignment]
    return tcplan.loads(text, "decode")


def scenario(which: str, legacy: bool, layers: int) -> dict[str, Any]:
    """One run in this process: (plan seconds, run seconds, peak RSS MiB, checked)."""
    import tcplan
    from tcplan.executor.graph import run_graph
    from tcplan.planner.registry import kinds
    t0 = time.perf_counter()
    if which == "big":
        p = load_big(big_graph(layers))
    elif which.endswith(".yaml"):  # (a decode step: problems/kernels/qwen3/decode_step.py)
        from tcplan.model import limits
        limits.PROBLEM_FILE_MAX_BYTES = max(limits.PROBLEM_FILE_MAX_BYTES, 1 << 30)
        limits.YAML_MAX_NODES = max(limits.YAML_MAX_NODES, 1 << 26)
        p = tcplan.load(which)
    else:
        p = tcplan.load(QWEN3 / f"{which}.yaml")
    plan = tcplan.lower(p).plan
    t_plan = time.perf_counter() - t0
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t1 = time.perf_counter()
    if which == "big" and legacy or which.endswith(".yaml") and legacy:
        # the old path places every given tensor first: the copies' DM tensors, sharing
        # bytes, would clobber each other; the baseline is the old views (one a unit, one
        # a slice for Fetch and Commit) with every value kept, run in the new order
        from tcplan.executor import run as run_mod, tu as tu_mod
        run_mod.PER_UNIT = tu_mod.PER_UNIT = True
        _, rep = run_graph(p.spec.graph, plan, kinds(), 0)
    else:
        _, rep = run_graph(p.spec.graph, plan, kinds(), 0, keep=(), legacy=legacy)
    return {"plan_s": t_plan, "run_s": time.perf_counter() - t1, "checked": rep["checked"],
            "ops": len(p.spec.graph.ops), "base_mib": base,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def fresh(which: str, legacy: bool, layers: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--one", which, "--layers", str(layers)]
                         + (["--old"] if legacy else []),
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--old", action="store_true", help="(with --one) the old path")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--no-old", action="store_true", help="skip the old path (slow at scale)")
    ap.add_argument("--decode", help="also a decode step's graph file (decode_step.py -o)")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(scenario(args.one, args.old, args.layers)))
        return
    print(f"{'graph':<28} {'ops':>6} {'checked':>12} {'old s':>8} {'new s':>8} {'ratio':>6} "
          f"{'old MiB':>8} {'new MiB':>8}")
    for which in [*[k for k in args.kernels.split(",") if k], "big",
                  *([args.decode] if args.decode else [])]:
        new = fresh(which, False, args.layers)
        old = None if args.no_old else fresh(which, True, args.layers)
        name = (f"{args.layers} layers" if which == "big" else Path(which).stem
                if which.endswith(".yaml") else which)
        print(f"{name:<28} {new['ops']:>6,} {new['checked']:>12,} "
              + (f"{old['run_s']:>8.2f} " if old else f"{'-':>8} ")
              + f"{new['run_s']:>8.2f} "
              + (f"{old['run_s'] / new['run_s']:>5.1f}x " if old else f"{'-':>6} ")
              + (f"{old['peak_mib']:>8.0f} " if old else f"{'-':>8} ")
              + f"{new['peak_mib']:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
