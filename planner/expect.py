"""A problem's ``expect`` block against what tcplan gave (``tcplan batch``): a row."""

from __future__ import annotations

from typing import Any

from tcplan.model.rules import TcplanError


def expectations(problem, r: dict[str, Any], code: int, check: str = "full"
                 ) -> dict[str, Any]:
    """The row of a problem: its status, cycles and lower bound, and whether its
    expectations were met (``why`` not, when not).  ``r`` is what ``solve --json`` or
    ``verify --json`` printed, ``code`` the exit code."""
    from . import api
    exp = problem.expect
    status = r.get("status") or ("verified" if r.get("verified") else "failed")
    error = (r.get("explanation") or r.get("error") or {}).get("code")
    if code == 1 and error and status not in ("infeasible",):
        status = "infeasible" if r.get("verified") is not False else status
    why = []
    if "error" in exp:
        if error != exp["error"]:
            why.append(f"expected error {exp['error']}, got {error or 'a plan'}")
    elif code != 0:
        why.append(f"exit {code}: {error}")
    if "explanation" in exp and not error:
        why.append(f"expected the conflict {sorted(exp['explanation'])}, got a plan")
    if "explanation" in exp and error:
        try:
            rep = api.explain(problem).to_json()
            got = sorted({it.get("rule") or it["requirement"] for it in rep.get("conflict", [])})
            if got != sorted(exp["explanation"]):
                why.append(f"expected conflict {sorted(exp['explanation'])}, got {got}")
        except TcplanError as e:
            why.append(f"explain: {e.code}")
    for k in ("status", "invocations", "verified"):
        if k == "verified" and check == "none":
            continue  # (not asked for: nothing ran)
        if k in exp and r.get(k) != exp[k]:
            why.append(f"{k}: expected {exp[k]}, got {r.get(k)}")
    if "cycles" in exp and isinstance(r.get("cycles"), int):
        if abs(r["cycles"] - exp["cycles"]) > 0.10 * exp["cycles"]:
            why.append(f"cycles: expected {exp['cycles']:,} (10%), got {r['cycles']:,}")
    return {"problem": problem.name, "status": status, "cycles": r.get("cycles"),
            "lower_bound": r.get("lower_bound"), "solve_time": r.get("solve_time"),
            "check": r.get("check", "full"), "times": r.get("times"),
            "ok": not why, "why": "; ".join(why)}


