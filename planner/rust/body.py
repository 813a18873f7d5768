"""A kernel function's body read into a graph: its statements in order, each expression
evaluated to a value (planner/rust/values.py), each engine call an op (flow.py), each move a
``dma`` op.  A statement tcplan cannot express is left out with a note naming its line and
why; what depends on it is left out in turn."""

from __future__ import annotations

from typing import Any

from .build import FREE_STREAM, Graph
from .flow import FlowReader
from .syntax import Node, named, text_of, type_arguments
from .types import Scope, TensorType, local_aliases
from .values import Const, Context, Enum, Flow, Slot, Struct, Tile, Unsupported


class BodyReader:
    """Reads one function's body into ``graph``: ``scope`` resolves its types, ``callee``
    reads a call of another function (planner/rust/importer.py)."""

    def __init__(self, graph: Graph, scope: Scope, fn: Node, callee: Any):
        self.g, self.scope, self.fn, self.callee = graph, scope, fn, callee
        self.env: dict[str, Any] = {}
        self.tuple_types: tuple[TensorType | None, ...] = ()  # a tuple result's types
        self.tiles: dict[tuple[int, str, int], str] = {}  # a tile's tensor, once there is one
        self.flows = FlowReader(graph, scope, self.read, self.write)

    # -- tensors: read (a given tensor on first read) and written (a new version) ----------
    def read(self, value: Any, node: Node) -> str:
        if isinstance(value, Tile):
            key = (id(value.slot), value.element, value.index)
            if key in self.tiles:
                return self.tiles[key]
            if value.slot.type.tier != "hbm":
                raise Unsupported(node, "a tile view of a DM tensor read at an offset: "
                                  "tcplan has no views")
            t = value.slot.type.with_dims(element=value.element)
            self.tiles[key] = self.g.add(f"{value.slot.base}_tile{value.index}", t,
                                         given=True)
            return self.tiles[key]
        if not isinstance(value, Slot):
            raise Unsupported(node, "a value that is not a tensor where a tensor is read")
        if value.tensor is None:
            value.tensor = self.g.add(value.base, value.type, given=True)
        return value.tensor

    def write(self, value: Any, node: Node) -> str:
        if isinstance(value, Tile):
            t = value.slot.type.with_dims(element=value.element)
            key = (id(value.slot), value.element, value.index)
            self.tiles[key] = self.g.add(f"{value.slot.base}_tile{value.index}", t)
            return self.tiles[key]
        if not isinstance(value, Slot):
            raise Unsupported(node, "a write into a value that is not a tensor")
        value.tensor = self.g.add(value.base if value.tensor is None else
                                  f"{value.base}_out", value.type)
        return value.tensor

    # -- statements ------------------------------------------------------------------------
    def run(self, params: dict[str, Any], ret: Any, name: str = "result") -> Any:
        """The body read with ``params`` bound; ``ret`` the result's type (a tuple's: one
        per item)."""
        if isinstance(ret, tuple):
            self.tuple_types, ret = ret, None
        self.env.update(params)
        self.env["ctx"] = Context("ctx")
        body = self.fn.child_by_field_name("body")
        self.scope.local.update(local_aliases(body))
        return self.block(body, ret, name)

    def block(self, body: Node, ret: TensorType | None, name: str) -> Any:
        """A block's statements in order; its tail (no ``;``) is its value.  What it binds
        ends with it (the tensors it wrote stay written: a ``Slot`` is shared)."""
        items = named(body)
        out, outer = None, dict(self.env)
        for k, st in enumerate(items):
            tail = k == len(items) - 1 and st.type != "let_declaration" and \
                (st.child_count == 0 or text_of(st.children[-1]) != ";")
            try:
                out = self.statement(st, ret if tail else None, name if tail else "")
            except Unsupported as e:
                self.g.note(self.scope.module.source.line(e.node), e.reason)
        self.env = outer
        return out

    def statement(self, st: Node, expected: TensorType | None, name: str) -> Any:
        if st.type in ("type_item", "const_item", "empty_statement", "attribute_item"):
            return None
        if st.type == "let_declaration":
            pat = st.child_by_field_name("pattern")
            if pat.type == "mut_pattern":
                pat = named(pat)[-1]
            name = text_of(pat)
            tnode = st.child_by_field_name("type")
            t = self.scope.tensor(tnode) if tnode is not None else None
            value = st.child_by_field_name("value")
            try:
                if value is None:
                    raise Unsupported(st, f"let {name} without a value")
                self.env[name] = self.expr(value, t, name)
            except Unsupported:
                self.env.pop(name, None)  # (shadowed: what follows finds it unbound)
                raise
            return None
        if st.type == "expression_statement":
            inner = named(st)[0]
            if inner.type == "for_expression":
                return self.loop(inner)
            return self.expr(inner, expected, name)
        return self.expr(st, expected, name)

    def loop(self, node: Node) -> None:
        """``for i in a..b { ... }``: the body once, as iteration ``i = a``."""
        rng = node.child_by_field_name("value")
        var = text_of(node.child_by_field_name("pattern"))
        if rng.type != "range_expression" or not named(rng):
            raise Unsupported(node, "a loop over something other than a range")
        start = self.expr(named(rng)[0], None, "")
        if not isinstance(start, Const):
            raise Unsupported(node, "a loop whose range does not start at a number")
        self.g.note(self.scope.module.source.line(node),
                    f"the loop over {var} ({text_of(rng)}): one iteration, {var} = "
                    f"{int(start.value)}")
        outer = dict(self.env)
        self.env[var] = start
        self.block(node.child_by_field_name("body"), None, "")
        self.env = outer

    # -- expressions -----------------------------------------------------------------------
    def expr(self, node: Node, expected: TensorType | None, name: str) -> Any:
        t = node.type
        if t in ("reference_expression", "parenthesized_expression"):
            return self.expr(named(node)[-1], expected, name)
        if t == "unsafe_block":
            return self.block(named(node)[0], expected, name)
        if t == "block":
            return self.block(node, expected, name)
        if t == "identifier":
            return self.name(node)
        if t == "field_expression":
            base = text_of(node.child_by_field_name("value"))
            if base == "ctx":
                return Context(text_of(node.child_by_field_name("field")))
            raise Unsupported(node, f"the field {text_of(node)}")
        if t in ("integer_literal", "float_literal"):
            return Const(_number(node))
        if t == "unary_expression" and text_of(node).startswith("-"):
            v = self.expr(named(node)[0], None, name)
            if not isinstance(v, Const):
                raise Unsupported(node, "a negated value that is not a number")
            return Const(-v.value)
        if t == "scoped_identifier":
            return Enum(text_of(node.child_by_field_name("name")))
        if t == "struct_expression":
            return self.struct(node)
        if t == "tuple_expression":
            items = named(node)
            types = self.tuple_types if len(self.tuple_types) == len(items) else \
                (None,) * len(items)
            return tuple(self.expr(i, e, f"{name or 'result'}_{k}")
                         for k, (i, e) in enumerate(zip(items, types)))
        if t == "call_expression":
            return self.call(node, expected, name)
        raise Unsupported(node, f"an expression tcplan does not read ({t})")

    def name(self, node: Node) -> Any:
        n = text_of(node)
        if n in self.env:
            return self.env[n]
        found = self.scope.crate.resolve(self.scope.module, n, "consts")
        if found is not None:
            return Const(_number(found[1]))
        if n == "Stash":
            return Enum(n)
        raise Unsupported(node, f"{n} has no value here (left out above, or not a tensor)")

    def struct(self, node: Node) -> Struct:
        tname = node.child_by_field_name("name")
        variant = text_of(tname.child_by_field_name("name")) if \
            tname.type == "scoped_type_identifier" else text_of(tname)
        fields = {}
        for f in named(node.child_by_field_name("body")):
            v = self.expr(f.child_by_field_name("value"), None, "") \
                if f.type == "field_initializer" else None
            if not isinstance(v, Const) or v.value != int(v.value):
                raise Unsupported(f, f"{variant}'s field {text_of(f)} is not a whole number")
            fields[text_of(f.child_by_field_name("field"))] = int(v.value)
        return Struct(variant, fields)

    def call(self, node: Node, expected: TensorType | None, name: str) -> Any:
        fn = node.child_by_field_name("function")
        targs: list[Node] = []
        if fn.type == "generic_function":
            targs = type_arguments(fn.child_by_field_name("type_arguments"))
            fn = fn.child_by_field_name("function")
        args = named(node.child_by_field_name("arguments"))
        if fn.type == "field_expression":
            recv = self.expr(fn.child_by_field_name("value"), None, name)
            method = text_of(fn.child_by_field_name("field"))
            return self.method(recv, method, (node, targs, args), expected, name)
        if fn.type == "scoped_identifier" and text_of(fn) in ("DmTensor::new",):
            if expected is None:
                raise Unsupported(node, "DmTensor::new() with no type written")
            self.g.note(self.scope.module.source.line(node), f"{name} = DmTensor::new(), "
                        "written through tile views: given, as those writes leave it")
            return Slot(expected, name)
        if fn.type == "scoped_identifier" and text_of(fn).split("::")[0][:1].isupper():
            inner = [self.expr(a, None, "") for a in args]
            return Enum(f"{text_of(fn.child_by_field_name('name'))}("
                        f"{', '.join(v.name for v in inner if isinstance(v, Enum))})")
        return self.callee(self, fn, args, expected, name)

    def method(self, recv: Any, method: str, c: tuple, expected: TensorType | None,
               name: str) -> Any:
        node, targs, argn = c
        if method in ("view", "view_mut") and not argn:
            return recv
        if isinstance(recv, Context) and method == "begin":
            if len(argn) != 1:
                raise Unsupported(node, "begin() takes the tensor it reads")
            src = self.expr(argn[0], None, name)
            if isinstance(src, Tile):
                raise Unsupported(node, "a Fetch from a tile view: tcplan has no views")
            return Flow(recv.name, self.read(src, node), name or _base(src))
        values = [self.expr(a, None, "") for a in argn]
        if isinstance(recv, Flow):
            return self.finish(recv, method, (node, targs, values), expected, name)
        return self.tensor_method(recv, method, (node, targs, values), expected, name)

    def finish(self, flow: Flow, method: str, c: tuple, expected: TensorType | None,
               name: str) -> Any:
        node = c[0]
        if method in ("commit", "commit_view", "to_trf", "to_vrf") and (
                flow.steps is not None or flow.stream is None):
            raise Unsupported(node, f"{method}() " + ("inside vector_init() ... "
                              "vector_final()" if flow.steps is not None else
                              "before a fetch"))
        if method == "commit":
            if expected is None or expected.tier != "dm":
                raise Unsupported(node, "commit() whose DM tensor type is not written "
                                  "(annotate the let or the function's result)")
            dest = self.g.add(name or flow.base, expected)
            self.flows.commit(flow, dest)
            return Slot(expected, name or flow.base, dest)
        if method == "commit_view":
            if len(c[2]) != 1:
                raise Unsupported(node, "commit_view() takes the view it writes")
            self.flows.commit(flow, self.write(c[2][0], node))
            return None
        if method in ("to_trf", "to_vrf"):
            return self.flows.register(flow, method[3:], expected, name or flow.base, node)
        return self.flows.call(flow, method, c)

    def tensor_method(self, recv: Any, method: str, c: tuple, expected: TensorType | None,
                      name: str) -> Any:
        node, targs, values = c
        if method == "tile" and isinstance(recv, Slot) and len(targs) == 3 and values and \
                isinstance(values[0], Const):
            return Tile(recv, self.scope.mapping(targs[2]), int(values[0].value))
        if method in ("to_dm", "to_hbm"):
            return self.move(recv, method[3:], c, expected, name)
        if method == "to_hbm_view":
            if len(values) != 2:
                raise Unsupported(node, "to_hbm_view() takes the DMA context and a view")
            src = self.read(recv, node)
            dest = self.write(values[1], node)
            self.g.op(f"store_{dest}", "dma", source=src, destination=dest,
                      stream=dict(FREE_STREAM))
            return None
        if method == "reshape":
            if expected is None:
                raise Unsupported(node, "reshape() with no type written")
            if isinstance(recv, Slot) and recv.tensor is not None:
                self.g.note(self.scope.module.source.line(node), f"{name}: the reshape "
                            "moves nothing; the reshaped tensor is given (tcplan has no views)")
            return Slot(expected, name)
        if method == "dma_scatter" and len(values) == 2:
            src, index = self.read(recv, node), self.read(values[0], node)
            dest = self.write(values[1], node)
            self.g.op(f"scatter_{_base(recv)}", "scatter", source=src, index=index,
                      destination=dest)
            return None
        raise Unsupported(node, f".{method}() on a tensor is not a move tcplan models")


    def move(self, recv: Any, tier: str, c: tuple, expected: TensorType | None,
             name: str) -> Slot:
        """``to_dm`` / ``to_hbm``: a DMA into a new tensor of the type written (the let's,
        or the turbofish's: ``to_dm::<Cluster, Slice, Element>``, ``to_hbm::<Element>``)."""
        node, targs, _ = c
        src_type = recv.slot.type if isinstance(recv, Tile) else \
            recv.type if isinstance(recv, Slot) else None
        dims = TIER_ARGS[tier]
        if targs and src_type is not None and len(targs) == len(dims):
            expected = TensorType(tier, src_type.dtype, (("chip", src_type.dim("chip")),) + tuple(
                (d, self.scope.mapping(a)) for d, a in zip(dims, targs)))
        if expected is None or expected.tier != tier:
            raise Unsupported(node, f"to_{tier}() whose {tier.upper()} tensor type is not "
                              "written (annotate the let or give its type arguments)")
        src = self.read(recv, node)
        dest = self.g.add(name or f"{_base(recv)}_{tier}", expected)
        self.g.op(f"{'load' if tier == 'dm' else 'store'}_{dest}", "dma", source=src,
                  destination=dest, stream=dict(FREE_STREAM))
        return Slot(expected, name, dest)


#: a move's turbofish: the destination's dimensions after its Chip
TIER_ARGS = {"dm": ("cluster", "slice", "element"), "hbm": ("element",)}


def _base(value: Any) -> str:
    return value.base if isinstance(value, Slot) else \
        value.slot.base if isinstance(value, Tile) else "t"


def _number(node: Node) -> float:
    """A literal's value (``6.25e-8f32``, ``11.313_708``, ``128f32``); a ``const`` item's."""
    text = text_of(node).replace("_", "")
    for suffix in ("f32", "f64", "i32", "u32", "i64", "u64", "usize", "isize"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    try:
        return float(text)
    except ValueError:
        raise Unsupported(node, f"{text_of(node)} is not a number") from None
