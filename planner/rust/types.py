"""furiosa-opt tensor types read as tcplan tensors: ``HbmTensor<bf16, Chip, m![P, H]>`` ->
an HBM tensor's dtype and mappings.  Aliases (``type Slice = m![...]``), a function's own
aliases and its generic parameters resolve through :class:`Scope`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tcplan.model import hardware as hw
from tcplan.model.mapping import parse
from tcplan.model.rules import TcplanError, fail

from .crate import Crate, Module
from .syntax import Node, is_mapping_macro, macro_tree, named, text_of, tokens, type_arguments

#: the tensor types and the dimensions their type arguments give, after the dtype
TENSOR_TYPES = {
    "HbmTensor": ("hbm", ("chip", "element")),
    "HbmTensorView": ("hbm", ("chip", "element")),
    "HbmTensorViewMut": ("hbm", ("chip", "element")),
    "DmTensor": ("dm", ("chip", "cluster", "slice", "element")),
    "DmTensorView": ("dm", ("chip", "cluster", "slice", "element")),
    "DmTensorViewMut": ("dm", ("chip", "cluster", "slice", "element")),
    "TrfTensor": ("trf", ("chip", "cluster", "slice", "lane", "element")),
    "VrfTensor": ("vrf", ("chip", "cluster", "slice", "element")),
}

#: furiosa-opt's element types are tcplan's dtypes, by the same names (model/hardware.py)
DTYPES = tuple(hw.DTYPE_BYTES)


@dataclass(frozen=True)
class TensorType:
    """A tensor's tier, dtype and mappings (tcplan's mapping text, ``m![...]``)."""

    tier: str
    dtype: str
    dims: tuple[tuple[str, str], ...]

    def dim(self, name: str) -> str:
        return dict(self.dims)[name]

    def with_dims(self, **dims: str) -> "TensorType":
        d = dict(self.dims)
        d.update(dims)
        return replace(self, dims=tuple(d.items()))


@dataclass
class Scope:
    """Where a type's names resolve: the crate, the module, a function's own aliases and its
    generic parameters bound to mapping text."""

    crate: Crate
    module: Module
    local: dict[str, Node] = field(default_factory=dict)
    generics: dict[str, str] = field(default_factory=dict)
    axes: dict[str, int] = field(default_factory=dict)

    def where(self, node: Node) -> str:
        return f"{self.module.source.path}:{self.module.source.line(node)}"

    def bad(self, node: Node, detail: str, fix: str) -> Exception:
        return fail("bad-problem", where=self.where(node), detail=detail, fix=fix)

    def alias(self, name: str) -> tuple["Scope", Node] | None:
        if name in self.local:
            return self, self.local[name]
        found = self.crate.resolve(self.module, name, "types")
        if found is None:
            return None
        mod, node = found
        return Scope(self.crate, mod, axes=self.axes), node

    def mapping(self, node: Node) -> str:
        """The mapping text a type argument stands for (``m![...]``, an alias of one or a
        bound generic parameter); every axis it names is recorded in ``axes``."""
        if is_mapping_macro(node):
            text = "m![" + self._join(node, tokens(macro_tree(node))) + "]"
            try:
                parse(text, self.axes)
            except TcplanError as e:
                raise self.bad(node, f"{text}: {e.message}", e.fix) from None
            return text
        name = text_of(node)
        if node.type == "type_identifier" and name in self.generics:
            return self.generics[name]
        if node.type == "type_identifier":
            found = self.alias(name)
            if found is not None:
                return found[0].mapping(found[1])
        raise self.bad(node, f"{name} is not a mapping (m![...]) this file defines or imports",
                       "define it (type X = m![...];) or give a generic's mapping with "
                       "--generic NAME='m![...]'")

    def _join(self, node: Node, toks: list[str]) -> str:
        """Tokens as mapping text: ``P / 32, 1 #{!} 19``."""
        out: list[str] = []
        for t in toks:
            if t[0].isalpha() or t[0] == "_":
                self.axis(node, t)
            open_brace = bool(out) and out[-1].startswith("#{") and not out[-1].endswith("}")
            if t == "," and out or open_brace or t == "{" and out and out[-1] == "#":
                out[-1] += t
            else:
                out.append(t)
        return " ".join(out)

    def axis(self, node: Node, name: str) -> None:
        size = self.crate.axis(self.module, name)
        if size is None:
            raise self.bad(node, f"axis {name} is not declared by an axes![...] this file "
                           "sees", f"declare it (axes![{name} = SIZE]) or import it (use ...)")
        self.axes[name] = size

    def dtype(self, node: Node) -> str:
        name = text_of(node)
        if name in DTYPES:
            return name
        found = self.alias(name) if node.type == "type_identifier" else None
        if found is not None:
            return found[0].dtype(found[1])
        raise self.bad(node, f"{name} is not an element type tcplan knows",
                       f"use one of {', '.join(DTYPES)}")

    def tensor(self, node: Node) -> TensorType | None:
        """The tensor type a type node names (through references and aliases), or None."""
        while node.type == "reference_type":
            node = node.child_by_field_name("type")
        if node.type == "type_identifier":
            found = self.alias(text_of(node))
            return found[0].tensor(found[1]) if found is not None else None
        if node.type != "generic_type":
            return None
        name = text_of(node.child_by_field_name("type"))
        if name not in TENSOR_TYPES:
            return None
        tier, dims = TENSOR_TYPES[name]
        args = type_arguments(node)
        if len(args) != 1 + len(dims):
            raise self.bad(node, f"{name} takes {1 + len(dims)} type arguments, got "
                           f"{len(args)}", f"write {name}<dtype, {', '.join(dims)}>")
        return TensorType(tier, self.dtype(args[0]),
                          tuple((d, self.mapping(a)) for d, a in zip(dims, args[1:])))


def local_aliases(body: Node) -> dict[str, Node]:
    """A function body's own ``type X = ...;`` items (its top-level statements)."""
    out = {}
    for item in named(body):
        if item.type == "type_item":
            out[text_of(item.child_by_field_name("name"))] = item.child_by_field_name("type")
    return out
