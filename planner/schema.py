"""A JSON Schema of the problem format (`tcplan schema`), generated from the definitions the
loader checks (planner/spec.py): the kinds and the keys each allows and requires, the tiers
and their dimensions, the tensor keys, dtypes, expectations and their types.  Editors use it
to complete and check problem files; a test validates every file of `problems/` against it.

The schema says what a key holds in shape (a mapping is a string, a free choice is `free`
or an object, an axis size is a positive whole number); the loader still checks the
meaning (a mapping's grammar, a digit range, a placement rule) and says where it fails.
"""

from __future__ import annotations

from typing import Any

from tcplan.model import hardware as hw
from tcplan.model.tiers import TIER_DIMS

from .spec import (COMMON_KEYS, EXPECT_KEYS, EXPECT_TYPES, STEP_OPS, kind_keys,
                   TENSOR_KEYS)

SCHEMA_ID = "https://tcplan.invalid/problem.schema.json"

_JSON_TYPES = {int: "integer", bool: "boolean", str: "string", list: "array"}
#: the keys of each kind that hold one tensor
_TENSOR_KEYS = {"source", "destination", "table", "index", "buffer", "trf"}
_WHOLE = {"type": "integer", "minimum": 0}
_POSITIVE = {"type": "integer", "minimum": 1}
_MAPPING = {"type": "string", "description": "a mapping expression, e.g. 'm![A / 4, B]'"}
_FREE_OBJECT = {"type": "object", "properties": {
    "free": {"const": True}, "prefix": _MAPPING,
    "allowed": {"type": "array", "items": _MAPPING},
    "max_footprint_bytes": _POSITIVE}, "additionalProperties": False}


def _dimension() -> dict[str, Any]:
    """A tensor's dimension: a mapping, ``free``, or a bounded free choice."""
    return {"anyOf": [_MAPPING, {"const": "free"}, _FREE_OBJECT]}


def _tensor(stream: bool = False) -> dict[str, Any]:
    dims = sorted({d for ds in TIER_DIMS.values() for d in ds})
    props: dict[str, Any] = {d: _dimension() for d in dims}
    if not stream:
        props["tier"] = {"enum": sorted(TIER_DIMS)}
        props["dtype"] = {"enum": sorted(hw.DTYPE_BYTES)}
        props["address"] = {"anyOf": [_WHOLE, {"const": "free"}]}
        props["bounds"] = {"type": "object", "properties": {
            "align_bytes": _POSITIVE,
            "range": {"type": "array", "items": _WHOLE, "minItems": 2, "maxItems": 2}},
            "additionalProperties": False}
        assert set(props) - {"bounds"} <= TENSOR_KEYS | set(dims)
    return {"type": "object", "properties": props, "additionalProperties": False}


def _graph_tensor() -> dict[str, Any]:
    """A graph's tensor: a tensor, ``given`` when it holds data at the start, and a free
    Element as ``free`` over its ``axes``, ``{digits: [...]}`` or ``{orders: [...]}``."""
    t = _tensor()
    texts = {"type": "array", "items": {"type": "string"}, "minItems": 1}
    t["properties"] = {**t["properties"], "given": {"type": "boolean"}, "axes": texts,
                       "element": {"anyOf": [_MAPPING, {"const": "free"}, {
                           "type": "object", "properties": {"digits": texts, "orders": texts},
                           "minProperties": 1, "maxProperties": 1,
                           "additionalProperties": False}]}}
    return t


def _kind_properties(kind: str) -> dict[str, Any]:
    """What a key holds where it means something of its own in one kind."""
    if kind == "layout":
        return {"tensors": {"type": "object", "additionalProperties": _tensor()}}
    if kind == "graph":
        from .graph import op_roles
        return {"tensors": {"type": "object", "additionalProperties": _graph_tensor(),
                            "minProperties": 1},
                "objective": {"enum": ["sum", "critical_path", "makespan"]},
                "ops": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["kind"],
                    "properties": {"name": {"type": "string"},
                                   "kind": {"enum": sorted(op_roles())}},
                    "description": "an op: its kind's keys (docs/graphs.md), tensors by "
                                   "name"}}}
    return {}


def _expect() -> dict[str, Any]:
    props: dict[str, Any] = {k: {} for k in sorted(EXPECT_KEYS)}
    for k, t in EXPECT_TYPES.items():
        props[k] = {"type": _JSON_TYPES[t]}
    return {"type": "object", "properties": props, "additionalProperties": False}


def _value(key: str) -> dict[str, Any]:
    """What a top-level key holds."""
    if key in _TENSOR_KEYS:
        return _tensor()
    simple: dict[str, dict[str, Any]] = {
        "format": {"const": 1}, "name": {"type": "string"}, "description": {"type": "string"},
        "kind": {"enum": list(kind_keys())}, "chips": _POSITIVE,
        "dtype": {"enum": sorted(hw.DTYPE_BYTES)},
        "axes": {"type": "object", "additionalProperties": _POSITIVE, "minProperties": 1},
        "expect": _expect(), "stream": _tensor(stream=True), "hops": {"enum": [1, 2]},
        "sub_tensor": {"type": "boolean", "description": "a move meant to leave digits of "
                       "its source behind (no sub-tensor warning)"},
        "bounds": {"type": "object", "properties": {"packet_max_bytes": _POSITIVE,
                                                    "align_bytes": _POSITIVE},
                   "additionalProperties": False},
        "steps": {"type": "array", "items": {"type": "object", "properties": {
            "op": {"enum": list(STEP_OPS)}}}},
        "tensors": {"type": "object", "description": "named tensors (per kind below)"},
        "einsum": {"type": "string", "pattern": "^[^,]+,[^,]+->.+$",
                   "description": "a contraction: the streamed operand, the TRF operand -> "
                                  "the result, a letter per axis (docs/contractions.md)"},
        "fix": {"type": "object", "additionalProperties": False,
                "properties": {d: _MAPPING for d in ("cluster", "slice", "time", "packet",
                                                     "lane", "element")},
                "description": "a contraction's dimensions fixed (docs/contractions.md)"},
        "moves": {"type": "object", "additionalProperties": False,
                  "description": "a contraction's moves: where each operand starts and the "
                                 "result goes (docs/contractions.md 'The moves')",
                  "properties": {r: {"oneOf": [
                      {"enum": ["hbm", "dm"]},
                      {"type": "object", "required": ["tier"], "additionalProperties": False,
                       "properties": {"tier": {"enum": ["hbm", "dm"]},
                                      "element": _MAPPING, "cluster": _MAPPING,
                                      "slice": _MAPPING,
                                      "dtype": {"enum": sorted(hw.DTYPE_BYTES)}}}]}
                      for r in ("source", "trf", "result")}},
        "stages": {"type": "object", "description": "a contraction's stages (docs/engines.md)",
                   "required": ["outer", "packet", "time", "lane"],
                   "additionalProperties": False, "properties": {
                       "outer": {"type": "object", "required": ["time", "packet"],
                                 "additionalProperties": False,
                                 "properties": {"time": _MAPPING, "packet": _MAPPING}},
                       "packet": _MAPPING, "time": _MAPPING,
                       "lane": {"enum": ["interleaved", "sequential"]}}},
    }
    return simple.get(key, {"description": "checked by the loader (planner/spec.py)"})


def problem_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a problem file."""
    kinds = kind_keys()
    every = sorted(COMMON_KEYS | {k for extra, _ in kinds.values() for k in extra})
    per_kind = []
    for kind, (extra, required) in kinds.items():
        allowed = sorted(COMMON_KEYS | extra)
        per_kind.append({
            "if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
            "then": {"required": sorted(required | {"axes", "kind"}),
                     "propertyNames": {"enum": allowed},
                     **({"properties": _kind_properties(kind)}
                        if _kind_properties(kind) else {})}})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "tcplan problem",
        "description": "A tcplan problem file (docs/problem-format.md).",
        "type": "object",
        "required": ["kind", "axes"],
        "properties": {k: _value(k) for k in every},
        "additionalProperties": False,
        "allOf": per_kind,
    }
