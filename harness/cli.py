"""The `kraftwerk` command line.

A table of the commands: each verb is the module `harness.commands.<verb>`.
Exit codes follow Jepsen: 0 valid, 1 invalid, 2 unknown, 254 bad arguments or
bad input, 255 the harness itself failed. Commands import their machinery
lazily so `kraftwerk check` starts fast.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from types import ModuleType

from checkers.verdict import EXIT_BAD_INPUT, EXIT_INTERNAL
from harness.core.argtypes import Parser, UsageError

# verb → its module (harness.commands.<verb>), in the order `kraftwerk --help` lists them
COMMANDS = (
    "check",
    "test",
    "replay",
    "shrink",
    "explore",
    "suite",
    "analyze",
    "serve",
    "image",
    "report",
    "export",
    "cluster",
    "spark",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only` (a verb), just that command: `kraftwerk check` starts without
    importing the other commands' machinery."""
    parser = Parser(
        prog="kraftwerk",
        description="Jepsen-style fault injection for a KRaft-style quorum and Kafka-style broker.",
        epilog="Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments or input, 255 internal error.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for verb in (only,) if only in COMMANDS else COMMANDS:
        command = _command(verb)
        command.add_arguments(
            sub.add_parser(verb, help=command.HELP, description=command.DESCRIPTION, epilog=command.EPILOG)
        )
    return parser


REFERENCE_WIDTH = 100  # columns of the help text in docs/cli.md, whatever the terminal


def reference() -> str:
    """docs/cli.md: every command's `--help` (and its actions'), generated from the parsers themselves.
    Regenerate with `python -c 'import harness.cli as c; print(c.reference(), end="")' > docs/cli.md`."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(REFERENCE_WIDTH)
    try:
        parser = build_parser()
        parts = [
            "# Command-line reference\n\n"
            "Generated from the parsers by `harness.cli.reference()`; `tests/test_cli_reference.py` fails when this "
            "page is stale. Every command that runs a test takes the same test options (`kraftwerk test --help`).\n",
            f"```\n{parser.format_help()}```\n",
        ]
        for verb, sub in _subparsers(parser):
            parts.append(f"## kraftwerk {verb}\n\n```\n{sub.format_help()}```\n")
            for action, inner in _subparsers(sub):
                parts.append(f"### kraftwerk {verb} {action}\n\n```\n{inner.format_help()}```\n")
        return "\n".join(parts)
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    return [
        (name, sub)
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    ]


def _command(verb: str) -> ModuleType:
    return importlib.import_module(f"harness.commands.{verb}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kraftwerk` console script."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if argv is None and hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID`: where is it stuck?
    parser = build_parser("check" if args_list[:1] == ["check"] else None)
    try:
        args = parser.parse_args(args_list)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_BAD_INPUT
        if args.command in COMMANDS:
            return int(_command(args.command).run(args))
        raise UsageError(f"kraftwerk: unknown command {args.command!r}")  # pragma: no cover
    except UsageError as e:
        print(str(e), file=sys.stderr)
        print("(see 'kraftwerk --help')", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("kraftwerk: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:  # --help and friends
        return int(e.code or 0) if not isinstance(e.code, str) else EXIT_BAD_INPUT
    except Exception:  # noqa: BLE001 - the harness itself failed: say so, exit 255
        import traceback

        traceback.print_exc()
        print("kraftwerk: internal error (this is a bug in kraftwerk)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
