"""The argument parser every `kraftwerk` command uses: a bad option is a `UsageError` (exit 254)."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """A bad option or argument: exit 254 with the message."""


class Parser(argparse.ArgumentParser):
    """argparse, raising UsageError instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")
