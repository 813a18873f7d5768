"""The formula a kernel's vector chain computes, read off its steps: the ``reference`` a
graph's chain op is checked against (docs/problem-format.md 'chain').  ``x`` is the chain's
input, a VRF operand its name, the stash the value stashed."""

from __future__ import annotations

from typing import Any

#: a binary step's operation -> the formula operator (``{a}`` the stream, ``{b}`` the operand)
BINARY = {"SubF": "{a} - {b}", "AddF": "{a} + {b}", "MulF(Mul0)": "{a} * {b}",
          "MulF(Mul1)": "{a} * {b}", "DivF": "{a} / {b}", "Add": "{a} + {b}",
          "Max": "max({a}, {b})", "Min": "min({a}, {b})"}
#: the argument mode that swaps the operands (``operand - x``)
SWAPPED = {"Mode10"}
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
    return repr(float(o))


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
        elif key in ("fp_binary", "clip", "fp_div") and arg["op"] in BINARY:
            a, b = _group(e), _operand(arg["operand"], stash)
            if arg.get("mode") in SWAPPED:
                a, b = b, a
            e = BINARY[arg["op"]].format(a=a, b=b)
        else:
            return None
    return e
