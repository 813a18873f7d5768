"""The layers (issue 25, item 2; ARCHITECTURE.md "Floors"): no import circle anywhere in the
project, and each floor imports only the floors below it.  Every import statement counts,
the ones inside functions too: a lazy import is still an arrow of the design."""

from __future__ import annotations

import ast
import pathlib

import networkx as nx

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = {"model": "tcplan.model", "planner": "tcplan.planner",
            "executor": "tcplan.executor", "tcplan": "tcplan"}

#: the front: what a user calls (the API, the command line and what they draw and batch);
#: the only modules besides the kinds' package that import the kinds
FRONT = {"tcplan", "tcplan.__main__", "tcplan.planner.api", "tcplan.planner.cli",
         "tcplan.planner.batch", "tcplan.planner.plot", "tcplan.planner.report"}


def _name(f: pathlib.Path) -> str:
    parts = list(f.relative_to(ROOT).with_suffix("").parts)
    rest = parts[1:] if parts[-1] != "__init__" else parts[1:-1]
    return ".".join([PACKAGES[parts[0]]] + rest)


def import_graph() -> nx.DiGraph:
    """Module -> module it imports (any import statement, at any depth of the file)."""
    files = [f for d in PACKAGES for f in (ROOT / d).rglob("*.py")]
    mods = {_name(f): f for f in files}
    g = nx.DiGraph()
    for m, f in mods.items():
        g.add_node(m)
        pkg = m if f.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rsplit(".", 1)[0] if "." in t else ""
                if t and t != m:
                    g.add_edge(m, t)
    return g


def test_the_graph_sees_the_project():
    g = import_graph()
    assert {"tcplan.model.mapping", "tcplan.planner.registry", "tcplan.executor.run",
            "tcplan.planner.kinds.dma"} <= set(g)
    assert g.has_edge("tcplan.planner.kinds.dma", "tcplan.planner.registry")


def test_no_import_circle():
    circles = [sorted(c) for c in nx.strongly_connected_components(import_graph())
               if len(c) > 1]
    assert not circles, circles


def test_each_floor_imports_only_what_is_below_it():
    g = import_graph()
    up = []
    for u, v in g.edges():
        if u.startswith("tcplan.model") and not v.startswith("tcplan.model"):
            up.append((u, v))  # the model is pure
        if u.startswith("tcplan.executor") and v.startswith("tcplan.planner"):
            up.append((u, v))  # the executor runs what it is handed
        if v.startswith("tcplan.planner.kinds") and not (
                u.startswith("tcplan.planner.kinds") or u in FRONT):
            up.append((u, v))  # the verbs reach kinds through planner/registry.py only
        if u == "tcplan.planner.registry" and not (
                v.startswith("tcplan.model") or v == "tcplan.planner.render"):
            up.append((u, v))  # the registry sits below every verb
    assert not up, up


def test_a_new_circle_would_be_seen(tmp_path, monkeypatch):
    """The check can fail: a module importing one that imports it back is a circle."""
    g = import_graph()
    g.add_edge("tcplan.planner.registry", "tcplan.planner.kinds.dma")
    assert any(len(c) > 1 for c in nx.strongly_connected_components(g))


def test_functions_read_as_one_page():
    """Every function of the model, the planner and the executor is at most 120 lines
    (issue 25: a longer one is a module waiting to be cut along its steps)."""
    long = []
    for d in ("model", "planner", "executor"):
        for f in sorted((ROOT / d).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = node.end_lineno - node.lineno + 1
                    if n > 120:
                        long.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name} ({n})")
    assert not long, long


# ---- issue 28: the contracts between the stages are values ---------------------------------
def _sources() -> list[tuple[str, ast.AST]]:
    return [(str(f.relative_to(ROOT)), ast.parse(f.read_text()))
            for d in ("model", "planner", "executor") for f in sorted((ROOT / d).rglob("*.py"))]


def params_lookups(trees) -> list[str]:
    """``params[...]`` and ``params.get(...)``: a problem's choices read from a bag of string
    keys (each kind's spec is a typed value read by its fields)."""
    out = []
    for name, tree in trees:
        for node in ast.walk(tree):
            target = (node.value if isinstance(node, ast.Subscript) else
                      node.func.value if isinstance(node, ast.Call) and isinstance(
                          node.func, ast.Attribute) and node.func.attr == "get" else None)
            if isinstance(target, ast.Attribute) and target.attr == "params" or \
                    isinstance(target, ast.Name) and target.id == "params":
                out.append(f"{name}:{node.lineno}")
    return out


def results_on_exceptions(trees) -> list[str]:
    """An attribute set on an error (``err.search = result``) or read back from one that
    the error class does not define (``getattr(e, "search", None)``): a result riding on
    an exception instead of being returned as a value."""
    out = []
    for name, tree in trees:
        errors: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and node.name:
                errors.add(node.name)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    isinstance(node.value.func, ast.Name) and node.value.func.id in (
                        "fail", "TcplanError"):
                errors |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                            t.value.id in errors:
                        out.append(f"{name}:{node.lineno} sets {t.value.id}.{t.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "getattr" and node.args and isinstance(
                        node.args[0], ast.Name) and node.args[0].id in errors and \
                    isinstance(node.args[1], ast.Constant) and node.args[1].value not in (
                        "strerror", "errno"):  # (an OSError's own attributes)
                out.append(f"{name}:{node.lineno} reads {node.args[1].value} off "
                           f"{node.args[0].id}")
    return out


def text_built_to_parse(trees) -> list[str]:
    """``parse(f"m![{...}]")``, ``parse("m![" + ... + "]")``, ``parse(", ".join(...))``:
    mapping text assembled only to be read back (mappings are built as values,
    model/mapping.py; text is parsed where a user wrote it)."""
    out = []
    for name, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args and (
                    isinstance(node.func, ast.Name) and node.func.id == "parse" or
                    isinstance(node.func, ast.Attribute) and node.func.attr == "mapping"):
                arg = node.args[0] if isinstance(node.func, ast.Name) else (
                    node.args[1] if len(node.args) > 1 else None)
                if isinstance(arg, (ast.JoinedStr, ast.BinOp)) or isinstance(
                        arg, ast.Call) and isinstance(arg.func, ast.Attribute) and \
                        arg.func.attr in ("join", "format", "replace"):
                    out.append(f"{name}:{node.lineno}")
    return out


def test_no_choices_read_from_a_bag_of_keys():
    assert not params_lookups(_sources())


def test_no_result_rides_on_an_exception():
    assert not results_on_exceptions(_sources())


def test_no_mapping_text_is_built_to_be_parsed():
    assert not text_built_to_parse(_sources())


def test_the_source_checks_can_fail():
    """Each check finds the pattern it is about (the code before issue 28 had them all)."""
    bad = ast.parse('''
def a(problem, params):
    x = problem.params["free"] + params.get("bounds")
def b():
    try:
        search()
    except TcplanError as e:
        e.search = result
        found = getattr(e, "search", None)
    err = fail("plan-no-layout")
    err.search = result
def c(axes, terms, text):
    parse("m![" + ", ".join(terms) + "]", axes)
    parse(f"m![{text}]", axes)
    ctx.mapping(keys, f"m![{text}]", "element")
''')
    assert len(params_lookups([("x", bad)])) == 2
    assert len(results_on_exceptions([("x", bad)])) == 3
    assert len(text_built_to_parse([("x", bad)])) == 3
