"""A kernel's crate, as far as the importer needs it: its modules (files and inline
``mod`` blocks), and in each the type aliases, constants, functions, ``use`` imports and the
axes an ``axes![...]`` declares.  Names resolve as Rust resolves them: the module's own
items, then its imports (named, then globs); ``crate::``, ``super::`` and ``self::`` paths
are followed to files found as cargo finds them (``a.rs`` or ``a/mod.rs`` beside the
parent).  A path into another crate (``furiosa_opt_std``) resolves to nothing."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field

from tcplan.model import limits
from tcplan.model.rules import fail

from ..inputs import read_text

from .syntax import Node, Source, is_mapping_macro, macro_tree, named, parse_source, text_of
from .syntax import tokens

Path = tuple[str, ...]


@dataclass
class Module:
    """One module's items: name -> syntax node (types, consts, fns, inline mods), its
    imports (name -> absolute path of the item) and glob imports (module paths)."""

    path: Path
    source: Source
    types: dict[str, Node] = field(default_factory=dict)
    consts: dict[str, Node] = field(default_factory=dict)
    fns: dict[str, Node] = field(default_factory=dict)
    mods: dict[str, Node] = field(default_factory=dict)
    uses: dict[str, Path] = field(default_factory=dict)
    globs: list[Path] = field(default_factory=list)
    axes: dict[str, int] = field(default_factory=dict)
    file: pathlib.Path | None = None


def crate_root(file: pathlib.Path) -> tuple[pathlib.Path | None, Path]:
    """The crate's ``src`` folder and the file's module path in it; a file outside a cargo
    crate is a crate of its own (``None``, ``()``)."""
    for up in file.resolve().parents:
        if (up / "Cargo.toml").is_file() and (up / "src").is_dir() and \
                up / "src" in file.resolve().parents:
            rel = file.resolve().relative_to(up / "src").with_suffix("").parts
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            return up / "src", tuple(rel)
    return None, ()


class Crate:
    """The modules of one crate, loaded on first use."""

    def __init__(self, file: pathlib.Path, text: str | None = None):
        self.src, self.main_path = crate_root(file)
        self.modules: dict[Path, Module] = {}
        source = parse_source(text if text is not None else _read(file), str(file))
        self.modules[self.main_path] = _module(self.main_path, source, source.root, file)

    @property
    def main(self) -> Module:
        return self.modules[self.main_path]

    def module(self, path: Path) -> Module | None:
        """The module at ``path`` (``()``: the crate's root, lib.rs or main.rs), loaded from
        its parent's inline ``mod`` or its file; None where there is none."""
        if path in self.modules:
            return self.modules[path]
        if self.src is None:
            return None
        if not path:
            return self._root()
        parent = self.module(path[:-1])
        if parent is None:
            return None
        if path[-1] in parent.mods and parent.mods[path[-1]].child_by_field_name("body"):
            node = parent.mods[path[-1]].child_by_field_name("body")
            mod = _module(path, parent.source, node, parent.file)
        else:
            file = _child_file(parent, path[-1], self.src)
            if file is None:
                return None
            src = parse_source(_read(file), str(file))
            mod = _module(path, src, src.root, file)
        self.modules[path] = mod
        return mod

    def _root(self) -> Module | None:
        assert self.src is not None
        for name in ("lib.rs", "main.rs"):
            if (self.src / name).is_file():
                src = parse_source(_read(self.src / name), str(self.src / name))
                self.modules[()] = _module((), src, src.root, self.src / name)
                return self.modules[()]
        return None

    def resolve(self, mod: Module, name: str, kind: str, seen: frozenset = frozenset()
                ) -> tuple[Module, Node] | None:
        """The item ``name`` of ``kind`` (types, consts, fns) visible in ``mod``."""
        key = (mod.path, name, kind)
        if key in seen:
            return None
        seen = seen | {key}
        own = getattr(mod, kind)
        if name in own:
            return mod, own[name]
        if name in mod.uses:
            target = mod.uses[name]
            where = self.module(target[:-1])
            if where is not None:
                return self.resolve(where, target[-1], kind, seen)
        for g in mod.globs:
            where = self.module(g)
            if where is not None:
                found = self.resolve(where, name, kind, seen)
                if found is not None:
                    return found
        return None

    def axis(self, mod: Module, name: str, seen: frozenset = frozenset()) -> int | None:
        """The size of axis ``name`` as an ``axes![...]`` visible in ``mod`` declares it."""
        if (mod.path, name) in seen:
            return None
        seen = seen | {(mod.path, name)}
        if name in mod.axes:
            return mod.axes[name]
        targets = ([mod.uses[name][:-1]] if name in mod.uses else []) + list(mod.globs)
        for t in targets:
            where = self.module(t)
            if where is not None:
                size = self.axis(where, name, seen)
                if size is not None:
                    return size
        return None


def _read(file: pathlib.Path) -> str:
    return read_text(file, max_bytes=limits.RUST_FILE_MAX_BYTES)


def _child_file(parent: Module, name: str, src: pathlib.Path) -> pathlib.Path | None:
    f = parent.file
    base = src if f is None else (f.parent if f.name in ("mod.rs", "lib.rs", "main.rs")
                                  else f.parent / f.stem)
    for cand in (base / f"{name}.rs", base / name / "mod.rs"):
        if cand.is_file():
            return cand
    return None


def _module(path: Path, source: Source, node: Node, file: pathlib.Path | None) -> Module:
    mod = Module(path, source, file=file)
    for item in named(node):
        name_node = item.child_by_field_name("name")
        name = text_of(name_node) if name_node is not None else ""
        if item.type == "type_item":
            mod.types[name] = item.child_by_field_name("type")
        elif item.type == "const_item":
            mod.consts[name] = item.child_by_field_name("value")
        elif item.type == "function_item":
            mod.fns[name] = item
        elif item.type == "mod_item":
            mod.mods[name] = item
        elif item.type == "use_declaration":
            _use(mod, item.child_by_field_name("argument"), path)
        elif item.type in ("macro_invocation", "expression_statement"):
            mac = item if item.type == "macro_invocation" else item.named_children[0]
            if mac.type == "macro_invocation" and \
                    text_of(mac.child_by_field_name("macro")) == "axes":
                mod.axes.update(_axes(source, mac))
    return mod


def _axes(source: Source, mac: Node) -> dict[str, int]:
    """``axes![A = 4, B = 8]``: each name and its size."""
    toks = tokens(macro_tree(mac))
    out = {}
    for k in range(0, len(toks), 4):
        entry = toks[k:k + 4]
        name, eq, size = (entry + ["", "", ""])[:3]
        if eq != "=" or not size.replace("_", "").isdigit() or \
                entry[3:] not in ([], [","]) or not name.isidentifier():
            raise fail("bad-problem", where=f"{source.path}:{source.line(mac)}",
                       detail=f"axes!: expected NAME = SIZE, got {' '.join(entry)}",
                       fix="write axes![A = 4, B = 8]")
        out[name] = int(size.replace("_", ""))
    return out


def absolute(parts: list[str], here: Path) -> Path | None:
    """A ``use`` path made absolute; ``None`` for another crate's."""
    if parts[0] == "crate":
        return tuple(parts[1:])
    if parts[0] == "super":
        up = here
        while parts and parts[0] == "super":
            up, parts = up[:-1], parts[1:]
        return up + tuple(parts)
    if parts[0] == "self":
        return here + tuple(parts[1:])
    return None  # (an external crate: furiosa_opt_std and the like)


def _use(mod: Module, arg: Node, here: Path, prefix: tuple[str, ...] = ()) -> None:
    """Record a ``use`` tree's names in ``mod`` (absolute paths)."""
    t = arg.type
    if t in ("scoped_identifier", "identifier", "self", "crate", "super"):
        parts = [*prefix, *path_parts(arg)]
        p = absolute(parts, here)
        if p is not None and p:
            mod.uses[p[-1]] = p
    elif t == "use_as_clause":
        parts = [*prefix, *path_parts(arg.child_by_field_name("path"))]
        p = absolute(parts, here)
        if p:
            mod.uses[text_of(arg.child_by_field_name("alias"))] = p
    elif t == "use_wildcard":
        base = [*prefix, *path_parts(arg.named_children[0])] if arg.named_children else \
            list(prefix)
        p = absolute(base, here)
        if p is not None:
            mod.globs.append(p)
    elif t == "scoped_use_list":
        path = arg.child_by_field_name("path")
        pre = (*prefix, *path_parts(path)) if path is not None else prefix
        for c in named(arg.child_by_field_name("list")):
            _use(mod, c, here, pre)
    elif t == "use_list":
        for c in named(arg):
            _use(mod, c, here, prefix)


def path_parts(node: Node) -> list[str]:
    if node.type == "scoped_identifier":
        path = node.child_by_field_name("path")
        return ([*path_parts(path)] if path is not None else []) + \
            [text_of(node.child_by_field_name("name"))]
    return [text_of(node)]


def mapping_tokens(node: Node) -> list[str] | None:
    """An ``m![...]`` type's tokens, or ``None`` if the node is not one."""
    return tokens(macro_tree(node)) if is_mapping_macro(node) else None
