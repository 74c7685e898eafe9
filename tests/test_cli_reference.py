"""docs/cli.md is generated from the parsers (`harness.cli.reference()`) and kept current: a new option, a changed
help text or a new command makes this test fail until the page is regenerated."""

from __future__ import annotations

import difflib
from pathlib import Path

from harness.cli import COMMANDS, reference

PAGE = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
REGENERATE = "python -c 'import harness.cli as c; print(c.reference(), end=\"\")' > docs/cli.md"


def test_docs_cli_md_is_current() -> None:
    want, have = reference(), PAGE.read_text(encoding="utf-8")
    if want != have:
        lines = difflib.unified_diff(have.splitlines(True), want.splitlines(True), f"docs/{PAGE.name}", "parsers", n=1)
        diff = "".join(lines)
        raise AssertionError(f"docs/cli.md is stale; regenerate it with\n  {REGENERATE}\n{diff[:3000]}")


def test_every_command_has_its_section() -> None:
    page = PAGE.read_text(encoding="utf-8")
    for verb in COMMANDS:
        assert f"\n## kraftwerk {verb}\n" in page
    assert "--check-time-limit" in page and "--test-count" in page
