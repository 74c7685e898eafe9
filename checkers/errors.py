"""Errors for bad input: every one names the file and line so a user can fix it."""

from __future__ import annotations


class InputError(ValueError):
    """Malformed input (a history, an events file, an option). The CLI maps it to exit 254."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line

    def located(self, file: str | None = None, line: int | None = None) -> InputError:
        """Return this error with a file/line filled in where it had none."""
        if self.file is None and file is not None:
            self.file = file
        if self.line is None and line is not None:
            self.line = line
        return self

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = f"{self.file}:{self.line}: " if self.line is not None else f"{self.file}: "
        elif self.line is not None:
            where = f"line {self.line}: "
        return where + self.message
