"""The event loop of the simulator: a virtual clock and a heap of timed callbacks.

Ties are broken by insertion order, so a run depends only on its seed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

MS = 1_000_000
SECOND = 1_000_000_000


class Scheduler:
    """A virtual clock (`now`, integer nanoseconds) and the events due at future times."""

    def __init__(self) -> None:
        self.now = 0
        self._heap: list[tuple[int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0
        self.events_run = 0

    def at(self, when: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` at virtual time `when` (never earlier than now)."""
        if when < self.now:
            when = self.now
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, fn, args))

    def after(self, delay: int, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + delay, fn, *args)

    def run_until(self, end: int, stop: Callable[[], bool] | None = None) -> None:
        """Run events in time order until virtual time `end` (or `stop()` turns true)."""
        heap = self._heap
        pop = heapq.heappop
        while heap and heap[0][0] <= end:
            when, _, fn, args = pop(heap)
            self.now = when
            fn(*args)
            self.events_run += 1
            if stop is not None and stop():
                return
        self.now = max(self.now, end)

    def pending(self) -> int:
        return len(self._heap)
