"""The formula a kernel's vector chain computes, read off its steps: the ``reference`` a
graph's chain op is checked against (docs/problem-format.md 'chain').  ``x`` is the chain's
input, a VRF operand its name, the stash the value stashed."""

from __future__ import annotations

from typing import Any

from tcplan.model.vector import BINARY_MODES

#: each binary step's operations -> the formula they compute (``{a}`` the first operand,
#: ``{b}`` the second, as the step's argument mode orders the stream and its operand)
BINARY = {
    "fp_binary": {"AddF": "{a} + {b}", "SubF": "{a} - {b}", "MulF(Mul0)": "{a} * {b}",
                  "MulF(Mul1)": "{a} * {b}", "MulF(Fma)": "{a} * {b}", "DivF": "{a} / {b}"},
    "clip": {"Add": "{a} + {b}", "Max": "max({a}, {b})", "Min": "min({a}, {b})"},
    "fp_div": {"DivF": "{a} / {b}"},
}
REDUCE = {"Add": "sum", "Max": "rmax", "Min": "rmin"}
UNARY = {"Exp": "exp", "Sqrt": "sqrt", "Sigmoid": "sigmoid", "Tanh": "tanh", "Log": "log",
         "Erf": "erf", "Sin": "sin", "Cos": "cos", "NegExp": "negexp"}


def _group(e: str) -> str:
    return e if e.replace("_", "").isalnum() or e.endswith(")") and _balanced(e) else f"({e})"


def _balanced(e: str) -> bool:
    """``f(...)`` whole: its first parenthesis closes at its end."""
    depth = 0
    for k, ch in enumerate(e):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and ch == ")":
            return k == len(e) - 1
    return False


def _operand(o: Any, stash: str) -> str:
    if o == "stash":
        return _group(stash)
    if isinstance(o, dict):
        return str(o["vrf"])
    return repr(float(o)) if float(o) >= 0 else f"({float(o)!r})"


def reference(steps: list[Any]) -> str | None:
    """The chain's formula, or None where a step has none here."""
    e, stash = "x", "x"
    for s in steps:
        if s in ("final", "stash"):
            stash = e if s == "stash" else stash
            continue
        (key, arg), = s.items()
        if key in ("tag", "narrow_split", "widen_concat", "narrow_trim", "widen_pad"):
            continue
        if key == "fp_unary" and arg in UNARY:
            e = f"{UNARY[arg]}({e})"
        elif key == "reduce" and arg["op"] in REDUCE:
            e = f"{REDUCE[arg['op']]}({e}, {arg['axis']})"
        elif key in BINARY and arg["op"] in BINARY[key] and \
                arg.get("mode", "Mode01") in BINARY_MODES:
            side = {"s": _group(e), "o0": _operand(arg["operand"], stash)}
            first, second = BINARY_MODES[arg.get("mode", "Mode01")]
            e = BINARY[key][arg["op"]].format(a=side[first], b=side[second])
        else:
            return None
    return e
