"""No import cycles in harness/, workloads/ and checkers/, counting imports inside functions too.

Every `import` / `from … import` of a module (at module level or in a function body) is an edge
of the graph; imports under `if TYPE_CHECKING:` are not (they never run). A cycle fails the test
with the modules that form it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "workloads", "checkers")


def _modules(root: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run (module level, functions, classes), not TYPE_CHECKING ones."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def import_graph(root: Path = ROOT) -> nx.DiGraph:
    modules = _modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = nx.DiGraph()
    for module, path in modules.items():
        graph.add_node(module)
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = package[: len(package) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                resolved = resolve(target)
                if resolved and resolved != module:
                    graph.add_edge(module, resolved)
    return graph


def import_cycles(root: Path = ROOT) -> list[list[str]]:
    """Every cycle, each starting at its smallest module name, in import order."""
    cycles = [c[c.index(min(c)) :] + c[: c.index(min(c))] for c in nx.simple_cycles(import_graph(root))]
    return sorted(cycles, key=lambda c: (len(c), c))


def test_the_graph_sees_function_level_imports() -> None:
    """The walk finds an import inside a function (so the test below can fail on one)."""
    graph = import_graph()
    assert graph.has_edge("harness.cli", "harness.commands.parser")  # module level
    assert graph.has_edge("harness.commands.suite", "harness.tools.suite")
    assert graph.has_edge("harness.tools.suite", "harness.commands.test")  # inside _test_spec / _test_parser


def test_no_import_cycles() -> None:
    cycles = import_cycles()
    listed = "\n".join(" -> ".join([*c, c[0]]) for c in cycles)
    assert not cycles, f"{len(cycles)} import cycle(s) in {', '.join(PACKAGES)}:\n{listed}"


def test_a_cycle_is_found_and_named(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "harness" / "a.py").write_text("import harness.b\n")
    (tmp_path / "harness" / "b.py").write_text("def f():\n    from harness import a\n")
    (tmp_path / "harness" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness import a\n"
    )
    (tmp_path / "harness" / "d.py").write_text("from . import c\n")
    assert import_cycles(tmp_path) == [["harness.a", "harness.b"]]
