"""`kraftwerk export SOURCE`: write a history as Jepsen EDN (what Knossos and Elle read) or as our JSONL.

SOURCE is a run directory (its ``history.jsonl``) or a history file in any format `kraftwerk check` reads.
By default the EDN of a run goes to ``RUN_DIR/history.edn`` (the name Jepsen's store uses); anything
else goes to standard output unless ``--output`` names a file. Reading the output back gives the
same operations (docs/formats.md "History").
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from checkers.verdict import EXIT_BAD_INPUT

HELP = "write a run's history as Jepsen EDN (history.edn) or JSONL"
DESCRIPTION = (
    "Write the history of RUN_DIR (or of a history file: jsonl, Jepsen/Knossos edn or a Jepsen log) as a "
    "Jepsen-compatible EDN vector of op maps, or as kraftwerk's history.jsonl."
)
EPILOG = (
    "By default `--format edn` of a run directory writes RUN_DIR/history.edn and prints its path; "
    "every other case writes to standard output unless --output FILE is given ('-' is standard output). "
    "Exit code: 0 written, 254 bad options or a malformed history (the message names the file and line), "
    "255 internal error."
)

FORMATS = ("edn", "jsonl")
HISTORY = "history.jsonl"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from checkers.formats import FORMATS as INPUT_FORMATS

    p.add_argument("source", metavar="SOURCE", help="a run directory (store/<test>/<time>/) or a history file")
    p.add_argument("--format", choices=FORMATS, default="edn", help="what to write (default edn)")
    p.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        default="auto",
        help="the format of a SOURCE file (default auto: from its name and first bytes)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help="where to write ('-': standard output; default RUN_DIR/history.edn for a run's EDN, else '-')",
    )


def _destination(source: Path, fmt: str, output: str | None) -> str:
    if output is not None:
        return output
    return str(source / "history.edn") if source.is_dir() and fmt == "edn" else "-"


def run(args: argparse.Namespace) -> int:
    """Export one history; 254 with the file and line on bad input."""
    from checkers.errors import InputError
    from checkers.formats import load, to_edn
    from checkers.history import dumps_op

    source = Path(args.source)
    path = source / HISTORY if source.is_dir() else source
    if source.is_dir() and not path.is_file():
        print(f"kraftwerk export: {source} is not a run directory (it has no {HISTORY})", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        history = load(path, args.input_format)
    except InputError as e:
        print(f"kraftwerk export: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    text = to_edn(history) if args.format == "edn" else "".join(dumps_op(op) + "\n" for op in history.ops)
    destination = _destination(source, args.format, args.output)
    if destination == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    target = Path(destination)
    if target.resolve() == path.resolve():
        print(f"kraftwerk export: --output {destination} is the history being read", file=sys.stderr)
        return EXIT_BAD_INPUT
    tmp = target.with_name(target.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as e:
        print(f"kraftwerk export: --output {destination}: {e.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(target)
    return 0
