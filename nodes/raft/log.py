"""The core's in-memory view of its replicated log, with the epoch cache used for divergence.

The driver owns the durable copy; the core mirrors every change it asks for (AppendLog,
TruncateLog) here in the same step. Offsets start at 0 and equal list indices (no snapshots).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from .records import Record


class LogError(ValueError):
    """A record does not fit the log (gap, overlap or epoch going backwards)."""


class RaftLog:
    """Records plus ``(epoch, start_offset)`` entries for each epoch present."""

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self._records: list[Record] = []
        self._epoch_epochs: list[int] = []
        self._epoch_starts: list[int] = []
        for record in records:
            self.append(record)

    def __len__(self) -> int:
        return len(self._records)

    @property
    def end_offset(self) -> int:
        """Log end offset (LEO): the offset the next record will get."""
        return len(self._records)

    @property
    def last_epoch(self) -> int:
        """Epoch of the last record, 0 for an empty log."""
        return self._records[-1].epoch if self._records else 0

    def append(self, record: Record) -> None:
        if record.offset != len(self._records):
            raise LogError(f"record offset {record.offset} != log end offset {len(self._records)}")
        if record.epoch < self.last_epoch:
            raise LogError(f"record epoch {record.epoch} < last epoch {self.last_epoch}")
        if not self._epoch_epochs or record.epoch != self._epoch_epochs[-1]:
            self._epoch_epochs.append(record.epoch)
            self._epoch_starts.append(record.offset)
        self._records.append(record)

    def truncate(self, from_offset: int) -> None:
        """Drop every record at or above ``from_offset``."""
        del self._records[from_offset:]
        while self._epoch_starts and self._epoch_starts[-1] >= from_offset:
            self._epoch_starts.pop()
            self._epoch_epochs.pop()

    def slice(self, start: int, max_count: int) -> tuple[Record, ...]:
        return tuple(self._records[start : start + max_count])

    def records(self, start: int = 0, end: int | None = None) -> tuple[Record, ...]:
        return tuple(self._records[start:end])

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(E, end)``: the largest local epoch ``E <= epoch`` and the offset where it ends.

        With no such epoch, ``(0, 0)``: the empty prefix.
        """
        i = bisect.bisect_right(self._epoch_epochs, epoch) - 1
        if i < 0:
            return 0, 0
        end = self._epoch_starts[i + 1] if i + 1 < len(self._epoch_starts) else len(self._records)
        return self._epoch_epochs[i], end
