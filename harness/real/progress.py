"""Live progress of a real run on stderr (rich): phase, time left, ops/s, ok/fail/info, active faults.

Messages printed through `say` appear above the live line. With `quiet` nothing is shown.
On a non-terminal stderr rich does not animate; the last state is printed when it stops.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any


class Progress:
    """Counts completions as the interpreter reports them and renders one status line."""

    def __init__(self, quiet: bool, faults: Callable[[], dict[str, Any]] | None = None) -> None:
        self.quiet = quiet
        self.faults = faults or (lambda: {})
        self.counts = {"ok": 0, "fail": 0, "info": 0}
        self.nemesis_events = 0
        self.phase = "setup"
        self.deadline: float | None = None
        self._recent: deque[float] = deque()
        self._live: Any = None
        self._console: Any = None
        if not quiet:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False, soft_wrap=True)

    # ------------------------------------------------------------------ inputs
    def on_event(self, event: dict[str, Any]) -> None:
        if event.get("process") == "nemesis":
            self.nemesis_events += 1
            return
        kind = event.get("type")
        if kind in self.counts:
            self.counts[kind] += 1
            self._recent.append(time.monotonic())

    def set_phase(self, phase: str, seconds: float | None = None) -> None:
        self.phase = phase
        self.deadline = None if seconds is None else time.monotonic() + seconds
        if self._live is not None:
            self._live.refresh()

    def say(self, message: str) -> None:
        if self._console is not None:
            self._console.print(message, markup=False)

    # ------------------------------------------------------------------ rendering
    def rate(self, window: float = 5.0) -> float:
        now = time.monotonic()
        while self._recent and self._recent[0] < now - window:
            self._recent.popleft()
        return len(self._recent) / window

    def line(self) -> str:
        left = ""
        if self.deadline is not None:
            left = f" {max(0.0, self.deadline - time.monotonic()):4.0f}s left"
        c = self.counts
        try:
            faults = self.faults()
        except RuntimeError:  # the nemesis changed its sets while the refresh thread read them
            faults = {}
        active = "; ".join(f"{k} {v}" for k, v in faults.items()) if faults else "none"
        return (
            f"[{self.phase}{left}] {self.rate():5.1f} ops/s  ok {c['ok']}  fail {c['fail']}  info {c['info']}  "
            f"nemesis {self.nemesis_events}  faults: {active}"
        )

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(self.line())

    def __enter__(self) -> Progress:
        if self._console is not None:
            from rich.live import Live

            self._live = Live(self, console=self._console, refresh_per_second=4, transient=False)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
            if not self._console.is_terminal:  # rich leaves the last line open when it cannot animate
                self._console.print()
