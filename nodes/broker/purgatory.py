"""A purgatory of delayed operations (Kafka's ``DelayedOperationPurgatory``), driven by ``now``.

Operations are watched under keys (partition names). ``check_and_complete(key)`` retries the
operations watching a key when something they wait for moved (high watermark, log end, flush,
leadership); :meth:`Purgatory.expire` force-completes the ones whose deadline passed, in deadline
order, from a heap. The same code runs under the simulator's virtual clock and the runtime's.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterable


class DelayedOperation:
    """Subclasses implement :meth:`try_complete` (call :meth:`force_complete` and return True
    when done), :meth:`on_complete` and optionally :meth:`on_expiration`."""

    def __init__(self, deadline: int) -> None:
        self.deadline = deadline
        self.completed = False

    def force_complete(self) -> bool:
        """Complete once; True if this call completed it."""
        if self.completed:
            return False
        self.completed = True
        self.on_complete()
        return True

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called just before :meth:`on_complete` when the deadline passed."""


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, list[DelayedOperation]] = {}
        self._heap: list[tuple[int, int, DelayedOperation]] = []
        self._seq = itertools.count()

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can; else watch it under every key and arm its deadline.
        Returns True if it completed."""
        if op.try_complete():
            return True
        for key in keys:
            self._watchers.setdefault(key, []).append(op)
        heapq.heappush(self._heap, (op.deadline, next(self._seq), op))
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Retry the operations watching ``key``; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        done = 0
        for op in list(ops):
            if not op.completed and op.try_complete():
                done += 1
        remaining = [op for op in self._watchers.get(key, ()) if not op.completed]
        if remaining:
            self._watchers[key] = remaining
        else:
            self._watchers.pop(key, None)
        return done

    def expire(self, now: int) -> int:
        """Force-complete every operation whose deadline is ``<= now``; returns how many."""
        expired = 0
        while self._heap and self._heap[0][0] <= now:
            _, _, op = heapq.heappop(self._heap)
            if op.completed:
                continue
            op.completed = True
            op.on_expiration()
            op.on_complete()
            expired += 1
        if expired:
            self._purge()
        return expired

    def next_deadline(self) -> int | None:
        while self._heap and self._heap[0][2].completed:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def watched(self, key: Hashable) -> int:
        """Pending operations watching ``key``."""
        return sum(1 for op in self._watchers.get(key, ()) if not op.completed)

    def __len__(self) -> int:
        return sum(1 for _, _, op in self._heap if not op.completed)

    def _purge(self) -> None:
        for key in list(self._watchers):
            ops = [op for op in self._watchers[key] if not op.completed]
            if ops:
                self._watchers[key] = ops
            else:
                del self._watchers[key]
