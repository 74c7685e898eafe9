"""Everything `kraftwerk` imports at run time is a runtime dependency in pyproject.toml, not a dev extra: a user who
installs the package (not its dev tools) can run every command."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("nodes", "harness", "workloads", "checkers")


def imported_top_levels() -> dict[str, str]:
    """Top-level module → the first file importing it, over the shipped packages (lazy imports included)."""
    found: dict[str, str] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.partition(".")[0], str(path.relative_to(ROOT)))
    return found


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].strip().lower().replace("_", "-") for r in requirements}


def test_every_third_party_import_is_a_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = requirement_names(project["dependencies"])
    distributions = importlib.metadata.packages_distributions()
    missing = []
    for module, where in sorted(imported_top_levels().items()):
        if module in sys.stdlib_module_names or module in PACKAGES or module == "__future__":
            continue
        dists = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not dists & runtime:
            missing.append(f"{module} ({where}): {sorted(dists)}")
    assert not missing, "imported at run time but not in [project].dependencies: " + "; ".join(missing)
