"""argparse for every `kraftwerk` command: its parser (a bad option is a `UsageError`, exit 254) and the value
types the commands share."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any


class UsageError(Exception):
    """A bad option or argument: exit 254 with the message."""


class Parser(argparse.ArgumentParser):
    """argparse, raising UsageError instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


class OldSpelling(argparse.Action):
    """An option whose last option string is its old spelling: it still works for one release, with a warning
    on stderr naming the new one (`p.add_argument("--new", "--old", action=OldSpelling, …)`)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        old, new = self.option_strings[-1], self.option_strings[0]
        if option_string == old:
            print(
                f"{parser.prog}: {old} is deprecated, use {new} (the old spelling goes in a later release)",
                file=sys.stderr,
            )
        setattr(namespace, self.dest, values)


SPARK_MASTER = re.compile(r"^(local(\[(\*|[1-9][0-9]*)\])?|spark://[^\s/:]+:[0-9]+)$")


def positive_float(text: str) -> float:
    """A positive number of seconds."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return v


def positive_int(text: str) -> int:
    """A positive whole number."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return v


def non_negative_int(text: str) -> int:
    """A whole number, 0 or more."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return v


def non_negative_float(text: str) -> float:
    """A number of seconds, 0 or more."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not v >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return v


def master_problem(verb: str, master: str) -> str | None:
    """Why `--master` is not a Spark master kraftwerk can use (the message `kraftwerk VERB` prints), or None."""
    if SPARK_MASTER.match(master):
        return None
    return f"kraftwerk {verb}: --master {master!r}: expected local[*], local[N] or spark://HOST:PORT"
