"""The core's in-memory mirror of one partition's log: batches plus the leader-epoch cache.

The driver owns the durable copy (``AppendPartitionLog``/``TruncatePartitionLog`` effects); the
core changes this mirror in the same step. Offsets start at 0 (no retention: the log start
offset is always 0). Truncation works on whole batches, as Kafka's does: truncating "to" an
offset inside a batch removes that whole batch.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from .batch import Batch

NO_EPOCH = -1
"""``end_offset_for_epoch`` answer when no local epoch is at or below the one asked about."""


class PartitionLogError(ValueError):
    """A batch does not fit the log (gap, overlap or leader epoch going backwards)."""


class PartitionLog:
    def __init__(self, batches: Iterable[Batch] = ()) -> None:
        self._batches: list[Batch] = []
        self._bases: list[int] = []
        self._cum: list[int] = [0]  # _cum[i]: bytes in batches[:i]
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self.end_offset = 0
        """Log end offset (LEO): the offset the next record gets (kept up to date by append and truncate)."""
        for batch in batches:
            self.append(batch)

    def __len__(self) -> int:
        return len(self._batches)

    @property
    def last_epoch(self) -> int | None:
        """Leader epoch of the last batch, None for an empty log (a follower's lastFetchedEpoch)."""
        return self._batches[-1].leader_epoch if self._batches else None

    @property
    def latest_epoch(self) -> int | None:
        """Newest epoch in the epoch cache (includes an epoch a new leader assigned before it
        appended anything)."""
        return self._epochs[-1] if self._epochs else None

    @property
    def batches(self) -> tuple[Batch, ...]:
        return tuple(self._batches)

    def append(self, batch: Batch) -> None:
        if batch.base_offset != self.end_offset:
            raise PartitionLogError(f"batch base offset {batch.base_offset} != log end offset {self.end_offset}")
        if batch.record_count < 1:
            raise PartitionLogError(f"batch with {batch.record_count} records")
        if self._epochs and batch.leader_epoch < self._epochs[-1]:
            raise PartitionLogError(f"batch epoch {batch.leader_epoch} < latest epoch {self._epochs[-1]}")
        if not self._epochs or batch.leader_epoch > self._epochs[-1]:
            self._epochs.append(batch.leader_epoch)
            self._starts.append(batch.base_offset)
        self._batches.append(batch)
        self.end_offset = batch.base_offset + batch.record_count
        self._bases.append(batch.base_offset)
        self._cum.append(self._cum[-1] + batch.size)

    def assign_epoch(self, epoch: int) -> None:
        """A new leader records ``(epoch, LEO)`` in its epoch cache before appending (KAFKA-7415)."""
        if not self._epochs or epoch > self._epochs[-1]:
            self._epochs.append(epoch)
            self._starts.append(self.end_offset)

    def truncate(self, offset: int) -> int:
        """Remove every batch holding an offset ``>= offset`` and every epoch-cache entry starting
        at or after the new end; return the new log end offset (``<= offset``: a batch that
        straddles ``offset`` goes entirely)."""
        if offset >= self.end_offset:
            while self._starts and self._starts[-1] >= offset:  # epochs assigned but never written
                self._starts.pop()
                self._epochs.pop()
            return self.end_offset
        cut = max(0, bisect.bisect_right(self._bases, offset) - 1)
        if self._batches and self._batches[cut].next_offset <= offset:
            cut += 1
        del self._batches[cut:]
        del self._bases[cut:]
        del self._cum[cut + 1 :]
        end = self.end_offset = self._batches[-1].next_offset if self._batches else 0
        while self._starts and self._starts[-1] >= end:
            self._starts.pop()
            self._epochs.pop()
        return end

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(E, end)``: the largest local epoch ``E <= epoch`` and the offset where it ends (the
        next epoch's start, or the LEO). ``(NO_EPOCH, 0)`` when no such epoch exists."""
        i = bisect.bisect_right(self._epochs, epoch) - 1
        if i < 0:
            return NO_EPOCH, 0
        end = self._starts[i + 1] if i + 1 < len(self._starts) else self.end_offset
        return self._epochs[i], end

    def epoch_for_offset(self, offset: int) -> int | None:
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def _index_of(self, offset: int) -> int:
        """Index of the batch holding ``offset`` (len(batches) at the log end)."""
        if offset >= self.end_offset:
            return len(self._batches)
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def read(self, start: int, limit: int, max_bytes: int) -> tuple[Batch, ...]:
        """Whole batches from the one holding ``start``, each ending at or below ``limit``
        (exclusive), at most ``max_bytes`` in total except that the first is always returned."""
        i = self._index_of(start)
        out: list[Batch] = []
        total = 0
        while i < len(self._batches):
            batch = self._batches[i]
            if batch.next_offset > limit:
                break
            if out and total + batch.size > max_bytes:
                break
            out.append(batch)
            total += batch.size
            i += 1
        return tuple(out)

    def bytes_between(self, start: int, limit: int) -> int:
        """Bytes a read from ``start`` up to ``limit`` would return (without a byte cap)."""
        if start >= limit:
            return 0
        i = self._index_of(start)
        j = bisect.bisect_right(self._bases, limit) - 1  # last batch starting at or below limit
        while j >= i and self._batches[j].next_offset > limit:
            j -= 1
        return self._cum[j + 1] - self._cum[i] if j >= i else 0

    def offset_for_timestamp(self, timestamp: int, limit: int) -> tuple[int, int] | None:
        """``(max_timestamp, base_offset)`` of the first batch below ``limit`` whose max
        timestamp is ``>= timestamp``, or None."""
        for batch in self._batches:
            if batch.next_offset > limit:
                return None
            if batch.max_timestamp >= timestamp:
                return batch.max_timestamp, batch.base_offset
        return None
