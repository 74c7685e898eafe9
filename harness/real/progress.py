"""Live progress of a real run on stderr: phase, time left, ops/s, ok/fail/info, active faults.

The line is a `harness.core.live.LiveLine`: redrawn on a terminal, with messages printed through `say`
above it; in a log, a line every few seconds and the last state when the run stops. With `quiet` nothing
is shown.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from harness.core.live import LiveLine


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
        self._line = LiveLine(quiet, every=10.0, render=self.line, last=True)

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
        self._line.status(self.line(), force=True)  # a log gets a line at each phase

    def say(self, message: str) -> None:
        self._line.say(message)

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

    def __enter__(self) -> Progress:
        self._line.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._line.__exit__(*exc)
