"""``tcplan import KERNEL.rs``: a furiosa-opt kernel's functions as tcplan graphs.

Each function that moves data of its own becomes one graph (docs/kernels.md 'Importing a
kernel'): its tensor arguments and its callees' results are given tensors, every
``to_dm`` / ``to_hbm_view`` a ``dma`` op with a free stream, every Tensor Unit call its op.
What the graph cannot say is listed in the file's header with its source line."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Any, Mapping

import yaml

from tcplan.model.mapping import parse
from tcplan.model.rules import TcplanError, fail

from .body import BodyReader
from .build import Graph, addresses, sink_register_loads
from .crate import Crate, Module, absolute, path_parts
from .syntax import Node, named, text_of, type_arguments
from .types import Scope, TensorType
from .values import Context, Slot, Unsupported


@dataclass(frozen=True)
class Imported:
    """One function's graph as YAML text (None: not imported, ``reason`` says why)."""

    function: str
    name: str
    text: str | None
    reason: str = ""
    error: TcplanError | None = None  # a located error in its source, when that is why


def import_file(path: pathlib.Path, function: str | None = None,
                generics: Mapping[str, str] | None = None, text: str | None = None
                ) -> list[Imported]:
    """Every function of the file (or the one named), each as a graph or a reason."""
    try:
        return _import(path, function, generics, text)
    except RecursionError:
        raise fail("bad-problem", where=str(path), detail="nested too deeply to read",
                   fix="give a kernel as rustfmt writes it") from None


def _import(path: pathlib.Path, function: str | None, generics: Mapping[str, str] | None,
            text: str | None) -> list[Imported]:
    crate = Crate(path, text)
    fns = crate.main.fns
    if function is not None and function not in fns:
        raise fail("bad-request", detail=f"{path}: no function {function} (it has "
                   f"{', '.join(fns) or 'none'})", fix="name one of its functions")
    chosen = [function] if function is not None else list(fns)
    out = [_one(crate, crate.main, fns[f], dict(generics or {}), path) for f in chosen]
    if function is not None and out[0].error is not None:
        raise out[0].error
    if function is not None and out[0].text is None:
        raise fail("bad-request", detail=f"{path}: {function}: {out[0].reason}",
                   fix="import a function that moves data, or bind its generics "
                       "(--generic NAME='m![...]')")
    return out


def _stem(path: pathlib.Path) -> str:
    return path.stem if path.stem not in ("mod", "lib", "main") else path.parent.name


def _one(crate: Crate, mod: Module, fn: Node, generics: dict[str, str],
         path: pathlib.Path) -> Imported:
    name = text_of(fn.child_by_field_name("name"))
    gname = f"{_stem(path)}_{name}"
    params = _generic_params(fn)
    unbound = [p for p in params if p not in generics]
    if unbound:
        return Imported(name, gname, None, f"generic {', '.join(unbound)}: give "
                        f"--generic {unbound[0]}='m![...]'")
    scope = Scope(crate, mod, generics={})
    scope.generics = {p: _generic_text(scope, fn, generics[p]) for p in params}
    g = Graph(gname, scope.axes)
    reader = BodyReader(g, scope, fn, _callee)
    try:
        args = _params(scope, fn)
        out = reader.run(args, _result_type(scope, fn))
    except Unsupported as e:
        return Imported(name, gname, None, e.reason)
    except TcplanError as e:
        return Imported(name, gname, None, e.message, e)
    g.notes += sink_register_loads(g, out.tensor if isinstance(out, Slot) else None)
    if not g.ops:
        return Imported(name, gname, None, "it moves no data of its own" +
                        (f" ({g.notes[0]})" if g.notes else ""))
    return Imported(name, gname, document(g, path, name, generics))


def _result_type(scope: Scope, fn: Node) -> Any:
    """The function's result type: a tensor type, a tuple of them, or None."""
    node = fn.child_by_field_name("return_type")
    if node is not None and node.type == "tuple_type":
        return tuple(scope.tensor(c) for c in named(node))
    return scope.tensor(node) if node is not None else None


def _generic_params(fn: Node) -> list[str]:
    tp = fn.child_by_field_name("type_parameters")
    if tp is None:
        return []
    out = []
    for p in named(tp):
        n = p.child_by_field_name("name") if p.type != "type_identifier" else p
        if n is not None and p.type not in ("lifetime", "lifetime_parameter",
                                            "const_parameter"):
            out.append(text_of(n))
    return out


def _generic_text(scope: Scope, fn: Node, text: str) -> str:
    """A ``--generic`` binding's mapping, its axes checked (those the crate declares)."""
    try:
        m = parse(text, _crate_axes(scope))
    except TcplanError as e:
        raise fail("bad-request", detail=f"--generic: {text!r}: {e}",
                   fix="give a mapping over axes the kernel's crate declares") from e
    for a in m.used_axes:
        scope.axes[a] = _crate_axes(scope)[a]
    return text


def _crate_axes(scope: Scope) -> dict[str, int]:
    """The axes of the modules the file imports names from (an ``axes![...]`` there)."""
    out: dict[str, int] = dict(scope.module.axes)
    for target in [*scope.module.uses.values()]:
        m = scope.crate.module(target[:-1])
        if m is not None:
            out.update(m.axes)
    for g in scope.module.globs:
        m = scope.crate.module(g)
        if m is not None:
            out.update(m.axes)
    return out


def _params(scope: Scope, fn: Node) -> dict[str, Slot]:
    out = {}
    for p in named(fn.child_by_field_name("parameters")):
        if p.type != "parameter":
            continue
        t = scope.tensor(p.child_by_field_name("type"))
        pat = p.child_by_field_name("pattern")
        if t is not None:
            n = text_of(named(pat)[-1] if pat.type == "mut_pattern" else pat)
            out[n] = Slot(t, n)
    return out


def _callee(reader: BodyReader, fn: Node, args: list[Node], expected: TensorType | None,
            name: str) -> Any:
    """A call of another kernel function: its moves are its own graph; its result, a
    tensor, is given here."""
    scope = reader.scope
    fname = text_of(fn)
    found = _function(scope, fn)
    if found is None:
        raise Unsupported(fn, f"{fname}() is not a function this crate defines")
    mod, node = found
    values = [v for v in (reader.expr(a, None, "") for a in args)
              if not isinstance(v, Context)]
    callee_scope = Scope(scope.crate, mod, axes=scope.axes)
    callee_scope.generics = _unify(callee_scope, node, values)
    ret_node = node.child_by_field_name("return_type")
    try:
        ret = callee_scope.tensor(ret_node) if ret_node is not None else None
    except (TcplanError, Unsupported):
        ret = None
    line = scope.module.source.line(fn)
    if ret is None:
        reader.g.note(line, f"{fname}(): its moves are its own graph")
        return None
    if ret.tier in ("vrf", "trf"):  # a register file's load: part of this launch, inlined
        names = [text_of(p.child_by_field_name("pattern")) for p in _value_params(node)]
        sub = BodyReader(reader.g, callee_scope, node, _callee)
        return sub.run(dict(zip(names, values)), ret, name or "result")
    reader.g.note(line, f"{name} = {fname}(): its moves are its own graph; its result is "
                  "given here")
    return Slot(expected or ret, name)


def _function(scope: Scope, fn: Node) -> tuple[Module, Node] | None:
    """The function a call names: ``f`` as the module sees it, or a path (``m::f``,
    ``super::f``, ``crate::a::f``) from this module, its imports or the crate's root."""
    if fn.type == "identifier":
        return scope.crate.resolve(scope.module, text_of(fn), "fns")
    if fn.type != "scoped_identifier" or fn.child_by_field_name("path") is None:
        return None
    parts = path_parts(fn.child_by_field_name("path"))
    here, name = scope.module, text_of(fn.child_by_field_name("name"))
    first = here.uses.get(parts[0])
    for cand in (absolute(parts, here.path), here.path + tuple(parts),
                 first + tuple(parts[1:]) if first else None,
                 *(g + tuple(parts) for g in here.globs)):
        m = scope.crate.module(cand) if cand is not None else None
        if m is not None and name in m.fns:
            return m, m.fns[name]
    return None


def _value_params(fn: Node) -> list[Node]:
    """A function's parameters but its context (``ctx: &mut Context``): those a call's
    values (its arguments less ``ctx``) bind, in order."""
    return [p for p in named(fn.child_by_field_name("parameters")) if p.type == "parameter"
            and not text_of(p.child_by_field_name("type")).endswith("Context")]


def _unify(scope: Scope, fn: Node, values: list[Any]) -> dict[str, str]:
    """The callee's generic parameters bound by its tensor arguments' types."""
    params = set(_generic_params(fn))
    out: dict[str, str] = {}
    for p, v in zip(_value_params(fn), values):
        if not isinstance(v, Slot):
            continue
        tnode = p.child_by_field_name("type")
        while tnode.type == "reference_type":
            tnode = tnode.child_by_field_name("type")
        targs = type_arguments(tnode) if tnode.type == "generic_type" else []
        for (dim, text), a in zip(v.type.dims, targs[1:]):
            if a.type == "type_identifier" and text_of(a) in params:
                out[text_of(a)] = text
    return out


def _tensor_spec(g: Graph, n: str, address: int | None) -> dict[str, Any]:
    t = g.tensors[n]
    spec: dict[str, Any] = {"tier": t.type.tier}
    if t.type.dtype != "bf16":
        spec["dtype"] = t.type.dtype
    spec.update(dict(t.type.dims))
    if address is not None:
        spec["address"] = address
    if t.given:
        spec["given"] = True
    return spec


def _line(key: str, value: Any) -> str:
    return yaml.safe_dump({key: value}, default_flow_style=True, width=10 ** 6,
                          sort_keys=False).strip()[1:-1]


def document(g: Graph, path: pathlib.Path, function: str, generics: Mapping[str, str]
             ) -> str:
    """The graph as a problem file: a header (source, generics, what is left out), then
    one line per tensor and per op."""
    names = g.used()
    addr = addresses(g, names)
    head = [f"# Imported by `tcplan import` from {path.name}, function `{function}`"
            + (f" ({', '.join(f'{k} = {v}' for k, v in generics.items())})" if generics
               else "") + "."]
    if g.notes:
        head.append("# Not expressed as written (tcplan has no views, loops or calls):")
        head += [f"# - {n}" for n in g.notes]
    used_axes = {a: s for a, s in g.axes.items() if any(
        a in parse(v, g.axes).used_axes for n in names for _, v in g.tensors[n].type.dims)}
    chips = max([parse(t.type.dim("chip"), g.axes).size for n in names
                 if "chip" in dict((t := g.tensors[n]).type.dims)] + [1])
    body = ["format: 1", f"name: {g.name}", "kind: graph", "dtype: bf16",
            *([f"chips: {chips}"] if chips > 1 else []),
            _line("axes", used_axes), "tensors:"]
    body += [f"  {_line(n, _tensor_spec(g, n, addr.get(n)))}" for n in names]
    body.append("ops:")
    body += [f"  - {_line('x', o)[3:]}" for o in g.ops]
    return "\n".join(head + body) + "\n"
