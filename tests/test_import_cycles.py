"""No import cycles in harness/, workloads/ and checkers/, counting imports inside functions and under
`if TYPE_CHECKING:` too.

Every `import` / `from … import` of a module is an edge of the graph: at module level, in a function or
class body, and under `if TYPE_CHECKING:` (it never runs, but it still makes the importer depend on the
imported module: a type one of them needs from the other is declared as a Protocol where it is used, or
moved to the lower module). A cycle fails the test with the modules that form it. Each edge keeps the
import statements that make it (`file:line: statement`); tests/test_layout.py reads the same graph.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "workloads", "checkers")


def _modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement: module level, functions, classes, and under `if TYPE_CHECKING:`."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def imported_names(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute names an import statement of `module` (the file `path`) imports: `a.b` for `import a.b`,
    `a.b` and `a.b.c` for `from a.b import c` (a module or a name in `a.b`), relative imports resolved."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = node.module or ""
    if node.level:
        up = package[: len(package) - (node.level - 1)]
        base = ".".join([*up, base] if base else up)
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> nx.DiGraph:
    """Modules of `packages` and the imports between them; edge attribute `imports`: `file:line: statement`."""
    modules = _modules(root, packages)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = nx.DiGraph()
    for module, path in modules.items():
        graph.add_node(module)
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            names = imported_names(module, path, node)
            if isinstance(node, ast.ImportFrom):  # `from a import b`: the module a.b if there is one, else a
                names = [n if n in modules else names[-1] for n in names[:-1]]
            where = f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}"
            for resolved in {resolve(name) for name in names}:
                if resolved and resolved != module:
                    graph.add_edge(module, resolved)
                    graph.edges[module, resolved].setdefault("imports", []).append(where)
    return graph


def import_cycles(root: Path = ROOT) -> list[list[str]]:
    """Every cycle, each starting at its smallest module name, in import order."""
    cycles = [c[c.index(min(c)) :] + c[: c.index(min(c))] for c in nx.simple_cycles(import_graph(root))]
    return sorted(cycles, key=lambda c: (len(c), c))


def test_the_graph_sees_function_level_imports() -> None:
    """The walk finds an import inside a function (so the test below can fail on one)."""
    graph = import_graph()
    assert graph.has_edge("harness.cli", "harness.core.argtypes")  # module level
    assert graph.has_edge("harness.commands.suite", "harness.tools.suite")
    assert graph.has_edge("harness.tools.suite", "harness.core.spec")  # inside _test_spec / _test_parser


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
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness import d\n"
    )
    (tmp_path / "harness" / "d.py").write_text("from . import c\n")
    (tmp_path / "harness" / "e.py").write_text("from harness import a\n")  # no cycle: nothing imports e
    assert import_cycles(tmp_path) == [["harness.a", "harness.b"], ["harness.c", "harness.d"]]
    edge = import_graph(tmp_path).edges["harness.c", "harness.d"]
    assert edge["imports"] == ["harness/c.py:3: from harness import d"]
