"""Rust source read with tree-sitter (its Rust grammar): the syntax tree and the few views of
it the importer needs.  No regular expression reads Rust here: every name, type argument and
``m![...]`` comes from the parser's nodes and tokens.

tree-sitter is an extra (``pip install 'tcplan[rust]'``); without it the importer says so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from tcplan.model.rules import fail

Node = Any  # a tree_sitter.Node (the extra may be absent: no import at module level)


def _parser() -> Any:
    try:
        import tree_sitter
        import tree_sitter_rust
    except ImportError as e:  # pragma: no cover - the test extra installs both
        raise fail("bad-request", detail=f"tcplan import needs tree-sitter ({e.name} is not "
                   "installed)", fix="pip install 'tcplan[rust]'") from e
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_rust.language()))


@dataclass(frozen=True)
class Source:
    """One Rust file: its path (for messages) and its syntax tree's root."""

    path: str
    root: Node

    def line(self, node: Node) -> int:
        return int(node.start_point[0]) + 1


def parse_source(text: str, path: str) -> Source:
    """The file's syntax tree; a file the grammar cannot read is a located ``bad-problem``."""
    tree = _parser().parse(text.encode())
    bad = first_error(tree.root_node)
    if bad is not None:
        raise fail("bad-problem", where=f"{path}:{bad.start_point[0] + 1}",
                   detail=f"not Rust the parser can read near {text_of(bad)[:40]!r}",
                   fix="give a file that compiles (cargo check)")
    return Source(path, tree.root_node)


def first_error(node: Node) -> Node | None:
    if node.type == "ERROR" or node.is_missing:
        return node
    if not node.has_error:
        return None
    for c in node.children:
        found = first_error(c)
        if found is not None:
            return found
    return node


def text_of(node: Node) -> str:
    return bytes(node.text).decode()


def named(node: Node) -> list[Node]:
    """The node's named children, comments left out."""
    return [c for c in node.named_children if c.type not in ("line_comment", "block_comment")]


def walk(node: Node) -> Iterator[Node]:
    yield node
    for c in node.children:
        yield from walk(c)


def tokens(tree: Node) -> list[str]:
    """A token tree's tokens in order, its own brackets left out (nested ones kept)."""
    out: list[str] = []
    for c in tree.children[1:-1]:
        if c.type in ("line_comment", "block_comment"):
            continue
        if c.type == "token_tree":
            out += [text_of(c.children[0]), *tokens(c), text_of(c.children[-1])]
        else:
            out.append(text_of(c))
    return out


def is_mapping_macro(node: Node) -> bool:
    """``m![...]``: a macro invocation named ``m``."""
    return node.type == "macro_invocation" and text_of(node.child_by_field_name("macro")) == "m"


def macro_tree(node: Node) -> Node:
    return next(c for c in node.children if c.type == "token_tree")


def type_arguments(node: Node) -> list[Node]:
    """The arguments of a ``generic_type`` or a turbofish (``type_arguments``), in order,
    lifetimes left out."""
    args = node if node.type == "type_arguments" else node.child_by_field_name("type_arguments")
    if args is None:
        return []
    return [c for c in named(args) if c.type != "lifetime"]
