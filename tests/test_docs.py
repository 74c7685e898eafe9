"""The repository carries its own docs: every citation of a docs/ section names a file and a section
that exist, and nothing cites documents or data outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SKIP_DIRS = {"__pycache__", "build", "store", "node_modules"}
DATA = ROOT / "tests" / "data"  # third-party files, kept as they came

# `docs/NAME.md "Section"` (several: `"A", "B"`), or `docs/NAME.md §1.4` (several: `§3.2/§3.3/§7`, `§3 and §7`)
CITATION = re.compile(
    r"docs/(?P<file>[\w-]+\.md)`?"
    r"(?:\s*(?P<quoted>\"[^\"\n]+\"(?:\s*,\s*\"[^\"\n]+\")*)"
    r"|\s*(?P<numbered>§\d+(?:\.\d+)*(?:\s*(?:/|,|and)\s*§\d+(?:\.\d+)*)*))?"
)
NUMBER = re.compile(r"§(\d+(?:\.\d+)*)")
QUOTED = re.compile(r"\"([^\"\n]+)\"")
HEADING_NUMBER = re.compile(r"(\d+(?:\.\d+)*)\.?\s")
# documents and data that lived beside the repository once; the names are built so this file does not cite them
OUTSIDE = re.compile(
    r"\b(?:" + "|".join(("DESIGN", "KRAFT", "JEPSEN", "LINEARIZABILITY", "ECOSYSTEM")) + r")\.md\b"
    r"|\.\./" + "shared" + r"\b"
    r"|KRAFTWERK_" + "SHARED"
    r"|parent\s*/\s*[\"']" + "shared" + r"[\"']"
)


def _files(suffixes: tuple[str, ...]) -> list[Path]:
    out = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(part.startswith(".") or part in SKIP_DIRS for part in rel.parts) or DATA in path.parents:
            continue
        if path.is_file() and (path.suffix in suffixes or path.name in ("run", "README.md")):
            out.append(path)
    return sorted(out)


def _headings(path: Path) -> list[str]:
    """Markdown headings (any level) outside code fences."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            out.append(line.lstrip("#").strip())
    return out


def _sections() -> dict[str, tuple[set[str], set[str]]]:
    """docs file name -> (its section titles, the section numbers its titles start with)."""
    out = {}
    for doc in sorted(DOCS.glob("*.md")):
        titles = set(_headings(doc))
        numbers = {m.group(1) for t in titles if (m := HEADING_NUMBER.match(t))}
        out[doc.name] = (titles, numbers)
    return out


def citations(text: str) -> list[tuple[str, str | None, str]]:
    """(docs file, section or None, the citation as written) for every citation of docs/ in `text`."""
    found = []
    for m in CITATION.finditer(text):
        name = m.group("file")
        if m.group("quoted"):
            found += [(name, title, m.group(0)) for title in QUOTED.findall(m.group("quoted"))]
        elif m.group("numbered"):
            found += [(name, "§" + number, m.group(0)) for number in NUMBER.findall(m.group("numbered"))]
        else:
            found.append((name, None, m.group(0)))
    return found


def test_the_citation_parser() -> None:
    text = (
        'see docs/formats.md "History"; `docs/design.md` "Store", "Seeded bugs" and docs/kraft.md §3.2/§3.3/§7, '
        "docs/kraft.md §3 and §7 (docs/kraft.md §1.1, §1.4) in `docs/kraft.md`."
    )
    assert [(f, s) for f, s, _ in citations(text)] == [
        ("formats.md", "History"),
        ("design.md", "Store"),
        ("design.md", "Seeded bugs"),
        ("kraft.md", "§3.2"),
        ("kraft.md", "§3.3"),
        ("kraft.md", "§7"),
        ("kraft.md", "§3"),
        ("kraft.md", "§7"),
        ("kraft.md", "§1.1"),
        ("kraft.md", "§1.4"),
        ("kraft.md", None),
    ]


def test_the_docs_are_there() -> None:
    assert {"design.md", "formats.md", "kraft.md"} <= set(_sections())


def test_every_cited_section_exists() -> None:
    sections = _sections()
    missing = []
    for path in _files((".py", ".md")):
        if path == Path(__file__).resolve():
            continue  # this file's citations are examples
        for name, section, written in citations(path.read_text(encoding="utf-8")):
            where = f"{path.relative_to(ROOT)}: {written}"
            if name not in sections:
                missing.append(f"{where}: no docs/{name}")
                continue
            titles, numbers = sections[name]
            if section is None:
                continue
            if section.startswith("§") and section[1:] not in numbers:
                missing.append(f"{where}: docs/{name} has no section numbered {section[1:]}")
            elif not section.startswith("§") and section not in titles:
                missing.append(f'{where}: docs/{name} has no section "{section}"')
    assert not missing, "citations of sections that do not exist:\n" + "\n".join(missing)


def test_kraft_md_cross_references_exist() -> None:
    """Inside docs/kraft.md a bare "§4" means its own section 4."""
    _, numbers = _sections()["kraft.md"]
    text = (DOCS / "kraft.md").read_text(encoding="utf-8")
    bad = sorted({n for n in NUMBER.findall(text) if n not in numbers})
    assert not bad, f"docs/kraft.md refers to sections it does not have: {bad}"


def test_nothing_cites_or_reads_outside_the_repository() -> None:
    hits = []
    for path in _files((".py", ".md", ".toml", ".cfg", ".sh", ".yml", ".yaml")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in OUTSIDE.finditer(text):
            hits.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    assert not hits, "references to documents or data outside the repository:\n" + "\n".join(hits)
