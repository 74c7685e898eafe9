"""A node's simulated disk: the quorum-state file and the log, with flushes and crashes.

The quorum state is written durably at once (temp + fsync + rename). Log appends
and truncations change the node's view immediately but become durable only when
a flush completes (after a seeded latency); a crash keeps just what was flushed,
like Kafka's MockLog losing its unflushed batches.
"""

from __future__ import annotations

from typing import Any


class Disk:
    def __init__(self) -> None:
        self.quorum_state: Any = None
        self.durable: list[Any] = []  # records that survive a crash
        self.view: list[Any] = []  # what the running node has written (page cache)
        self._dirty_from: int | None = None  # lowest offset changed since the last flush
        self.writes = 0
        self.flushes = 0

    def persist_quorum_state(self, state: Any) -> None:
        self.quorum_state = state
        self.writes += 1

    def _touch(self, offset: int) -> None:
        if self._dirty_from is None or offset < self._dirty_from:
            self._dirty_from = offset

    def append(self, records: tuple[Any, ...]) -> None:
        self._touch(len(self.view))
        self.view.extend(records)

    def truncate(self, from_offset: int) -> None:
        if from_offset < len(self.view):
            self._touch(from_offset)
            del self.view[from_offset:]

    def flush(self) -> None:
        """fsync: the file as the node sees it now (appends and truncations) becomes durable."""
        start = self._dirty_from
        if start is not None:
            del self.durable[start:]
            self.durable.extend(self.view[start:])
            self._dirty_from = None
        self.flushes += 1

    def crash(self) -> None:
        """Lose everything not flushed."""
        self.view = list(self.durable)
        self._dirty_from = None

    def recovered_log(self) -> list[Any]:
        return list(self.durable)


class BatchDisk(Disk):
    """A partition log on disk: batches, truncated at batch boundaries by offset."""

    def truncate_offset(self, from_offset: int) -> None:
        for i, batch in enumerate(self.view):
            if batch.base_offset >= from_offset:
                self.truncate(i)
                return
