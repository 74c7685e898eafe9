"""argparse value types shared by the subcommands (errors become exit 254 through the CLI)."""

from __future__ import annotations

import argparse


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
