"""One live status line for long work (`test` on a real backend, `explore`, `shrink`), redrawn with rich.

On a terminal the status line stays at the bottom and messages (`say`) scroll above it. When stderr is not a
terminal (CI logs, pipes) nothing is redrawn: the status is printed as a plain line at most every `every`
seconds, so that a log still shows the work moving, and once more at the end if `last` asks for it. `quiet`
shows nothing at all. The line is either the text last given to `status`, or what `render()` returns now
(a line that changes by itself, such as a real run's counters and time left).

    with LiveLine(quiet=args.quiet) as live:
        live.say("looking for smaller starts…")
        live.status(f"attempt {n}: {rate:.1f} runs/s")
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["LiveLine"]


class LiveLine:
    """A status line and messages on stderr."""

    def __init__(
        self,
        quiet: bool = False,
        every: float = 5.0,
        *,
        render: Callable[[], str] | None = None,
        last: bool = False,
    ) -> None:
        self.quiet = quiet
        self.every = every
        self.render = render
        self.last = last  # print the final line when leaving (the last state stays on screen or in the log)
        self._text = ""
        self._last_line = ""
        self._printed = 0.0
        self._live: Any = None
        self._console: Any = None
        if not quiet:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False, soft_wrap=True)

    @property
    def animated(self) -> bool:
        """Is the status redrawn in place (stderr is a terminal, not quiet)?"""
        return self._console is not None and self._console.is_terminal

    def __enter__(self) -> LiveLine:
        if self.animated:
            from rich.live import Live

            self._live = Live(self, console=self._console, refresh_per_second=4, transient=not self.last)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        elif self.last and self._console is not None:
            self._print(self.line())

    def line(self) -> str:
        """The status line as it reads now."""
        return self.render() if self.render is not None else self._text

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(self.line())

    def __call__(self, message: str) -> None:
        self.say(message)

    def say(self, message: str) -> None:
        """A message that stays (above the status line on a terminal)."""
        if self._console is not None:
            self._console.print(message, markup=False)
        elif not self.quiet:
            print(message, file=sys.stderr, flush=True)

    def status(self, text: str, force: bool = False) -> None:
        """The current state; redrawn on a terminal, else printed at most every `every` s (or if `force`)."""
        self._text = text
        if self.quiet or self._console is None:
            return
        if self._live is not None:
            self._live.refresh()
            return
        now = time.monotonic()
        if force or now - self._printed >= self.every:
            self._printed = now
            self._print(self.line())

    def _print(self, line: str) -> None:
        if line != self._last_line:  # a log does not repeat a line that did not change
            self._last_line = line
            self._console.print(line, markup=False)
