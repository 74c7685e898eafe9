"""The import rules of the layout (docs/design.md "Layout"), read from the import graph of
tests/test_import_cycles.py: every import, at module level, in a function, or under `if TYPE_CHECKING:`.

- `nodes/` imports nothing outside `nodes/` and the standard library (it runs in a bare node image);
- `checkers/` imports nothing from `harness/`, `workloads/` or `nodes/`; `workloads/` only `checkers/`;
- each group of `harness/` imports only the groups `ALLOWED` names for it (its own modules and the
  package root `harness`, which holds `ROOT`, always), save the module-to-module `EXCEPTIONS`, each with
  its reason. An import `ALLOWED` names for a group of harness that nothing makes, or an exception no
  longer taken, fails too: the table says what the code does.

A failure names the importing module, the statement (file:line) and the rule it breaks.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import networkx as nx

from tests.test_import_cycles import ROOT, import_graph, imported_names

PACKAGES = ("harness", "workloads", "checkers", "nodes")
HARNESS = ("core", "nemesis", "sim", "real", "db", "store", "tools", "chaos", "commands", "cli")

# group -> the other groups it may import: the top-level packages, and harness's groups by their subpackage
# (`cli` is harness/cli.py). Only `commands` may import any group of harness; nothing but `cli` imports it.
ALLOWED: dict[str, frozenset[str]] = {
    "nodes": frozenset(),
    "checkers": frozenset(),
    "workloads": frozenset({"checkers"}),
    # the TestSpec validates against the schedule and partition parsers, the backend registry and our nodes'
    # seeded bugs; the interpreter core drives the nemesis interpreter
    "core": frozenset({"nemesis", "real", "db", "workloads", "checkers"}),
    "nemesis": frozenset({"core"}),  # the named random streams
    "sim": frozenset({"core", "nemesis", "store", "nodes", "workloads", "checkers"}),
    "real": frozenset({"core", "nemesis", "db", "store", "workloads", "checkers"}),
    # real: hosts, control, the faults' plumbing; nemesis: the fault packages a DB supports
    "db": frozenset({"core", "nemesis", "real", "nodes", "workloads"}),
    "store": frozenset({"core", "workloads", "checkers"}),  # core: the TestSpec schedule.json embeds
    "tools": frozenset({"core", "nemesis", "sim", "real", "db", "store", "workloads", "checkers"}),
    # the chaos cluster of application tests (and its pytest plugin): a real cluster and the nemesis's faults
    "chaos": frozenset({"core", "nemesis", "real", "db"}),
    "commands": frozenset({*HARNESS, "workloads", "checkers"}) - {"commands", "cli"},
    "cli": frozenset({"core", "checkers"}),  # core: the parser; the commands are imported by name (importlib)
}
ANY = ("commands",)  # groups whose ALLOWED entry is "anything", not a list of what they import today

# (importing module, imported module) -> why this import breaks its group's rule and stays
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("harness.sim.packets", "harness.real.faults.nfqueue"): (
        "a packet's fate is drawn by nfqueue.draw on both runtimes, so a behaviour means the same; nfqueue.py "
        "is copied to each host and run there alone, so the draw cannot live below it in nemesis/"
    ),
}


def group(module: str) -> str:
    """`core` for harness.core.spec, `cli` for harness.cli, `harness` for the package root, else the package."""
    parts = module.split(".")
    if parts[0] != "harness":
        return parts[0]
    return "harness" if len(parts) == 1 else parts[1]


def layout_graph(root: Path = ROOT) -> nx.DiGraph:
    return import_graph(root, PACKAGES)


def violations(graph: nx.DiGraph) -> list[str]:
    """Each import that breaks its group's rule: the statement(s), the modules, and the rule."""
    out = []
    for a, b, data in sorted(graph.edges(data=True)):
        ga, gb = group(a), group(b)
        if ga == gb or (gb == "harness" and ga in HARNESS) or (a, b) in EXCEPTIONS:
            continue
        if gb not in ALLOWED.get(ga, frozenset()):
            may = ", ".join(sorted(ALLOWED.get(ga, ()))) or "nothing outside itself"
            where = "; ".join(data["imports"])
            out.append(f"{a} imports {b} ({where}): {ga} may import {may}, not {gb}")
    return out


def test_every_import_keeps_the_layout() -> None:
    found = violations(layout_graph())
    assert not found, 'imports that break the layout (docs/design.md "Layout"):\n' + "\n".join(found)


def test_the_table_is_what_the_code_does() -> None:
    """No group of harness is allowed an import it does not make (save `commands`: anything), and no exception
    is unused. (The top-level rules say what may be, not what is.)"""
    graph = layout_graph()
    used = {(group(a), group(b)) for a, b in graph.edges if (a, b) not in EXCEPTIONS}
    declared = {(g, other) for g, others in ALLOWED.items() if g in HARNESS and g not in ANY for other in others}
    unused = sorted(f"{g} -> {other}" for g, other in declared - used)
    assert not unused, f"ALLOWED names imports nothing makes (remove them here and in docs/design.md): {unused}"
    stale = sorted(f"{a} -> {b}" for a, b in EXCEPTIONS if not graph.has_edge(a, b))
    assert not stale, f"EXCEPTIONS no import takes any more (remove them): {stale}"


def test_the_table_keeps_the_rules() -> None:
    """The rules the table must keep, whatever it grows into."""
    assert set(ALLOWED) == {*HARNESS, "nodes", "checkers", "workloads"}
    assert ALLOWED["nodes"] == ALLOWED["checkers"] == frozenset() and ALLOWED["workloads"] == {"checkers"}
    assert [g for g in HARNESS if "commands" in ALLOWED[g]] == []  # nobody imports commands (cli: by name)
    assert not {"sim", "tools", "commands", "store", "cli"} & ALLOWED["core"]
    assert "real" not in ALLOWED["sim"] and "sim" not in ALLOWED["real"]
    assert [g for g in HARNESS if "nodes" in ALLOWED[g]] == ["sim", "db"]  # our nodes: simulated, or run
    for a, b in EXCEPTIONS:
        assert group(a) in HARNESS and group(b) not in ALLOWED[group(a)], f"{a} -> {b} needs no exception"


def test_nodes_imports_only_the_standard_library() -> None:
    """nodes/ runs in a bare image: every absolute import is of nodes/ or of the standard library."""
    found = []
    for path in sorted((ROOT / "nodes").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and not node.level):
                top = imported_names(module, path, node)[-1].split(".")[0]
                if top != "nodes" and top not in sys.stdlib_module_names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "nodes/ imports outside the standard library:\n" + "\n".join(found)


def test_a_broken_rule_is_named(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    for sub in ("core", "sim", "real", "commands"):
        (tmp_path / "harness" / sub).mkdir()
        (tmp_path / "harness" / sub / "__init__.py").write_text("")
    (tmp_path / "harness" / "sim" / "run.py").write_text("from typing import TYPE_CHECKING\nimport harness\n")
    (tmp_path / "harness" / "real" / "run.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.sim.run import X\n"
    )
    (tmp_path / "harness" / "core" / "spec.py").write_text("def f():\n    from harness.commands import test\n")
    (tmp_path / "harness" / "commands" / "test.py").write_text("from ..core import spec\n")  # allowed
    (tmp_path / "checkers" / "x.py").write_text("from nodes import y\n")
    (tmp_path / "nodes" / "y.py").write_text("")
    assert violations(layout_graph(tmp_path)) == [
        "checkers.x imports nodes.y (checkers/x.py:1: from nodes import y): checkers may import nothing outside "
        "itself, not nodes",
        "harness.core.spec imports harness.commands.test (harness/core/spec.py:2: from harness.commands import test): "
        "core may import checkers, db, nemesis, real, workloads, not commands",
        "harness.real.run imports harness.sim.run (harness/real/run.py:3: from harness.sim.run import X): "
        "real may import checkers, core, db, nemesis, store, workloads, not sim",
    ]
