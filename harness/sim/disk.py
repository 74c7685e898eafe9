"""A node's simulated disk: the quorum-state file and the log, with flushes and crashes.

The quorum state is written durably at once (temp + fsync + rename). Log appends
and truncations change the node's view immediately but become durable only when
a flush completes (after a seeded latency); a crash keeps just what was flushed,
like Kafka's MockLog losing its unflushed batches.

For disk faults the log is also bytes: :meth:`Disk.image` encodes what the node wrote (the
synced part and the unsynced tail) in the runtime's on-disk format, the shared damage functions
(``nodes.runtime.diskfault``) tear or flip it, and the next start reads the damaged file back
through the runtime's own CRC recovery (:meth:`Disk.recover`).
"""

from __future__ import annotations

from typing import Any

from nodes.broker.batch import encode_batch, recover_batches, repair_mark, scan_beyond
from nodes.raft import encode_record, recover


class Disk:
    def __init__(self) -> None:
        self.quorum_state: Any = None
        self.durable: list[Any] = []  # records that survive a crash
        self.view: list[Any] = []  # what the running node has written (page cache)
        self._dirty_from: int | None = None  # lowest offset changed since the last flush
        self.writes = 0
        self.flushes = 0
        self.damaged: bytes | None = None  # the file's bytes after a disk fault, read at the next start

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

    # ------------------------------------------------------------------ bytes, for disk faults
    @staticmethod
    def encode(item: Any) -> bytes:
        return encode_record(item)

    def image(self) -> tuple[bytes, int]:
        """The file as the node wrote it (a prefix of its view that is synced, then the unsynced rest) and
        the synced length in bytes."""
        cut = len(self.view) if self._dirty_from is None else self._dirty_from
        synced = b"".join(map(self.encode, self.view[:cut]))
        return synced + b"".join(map(self.encode, self.view[cut:])), len(synced)

    def recover(self, check_crc: bool = True) -> tuple[list[Any], tuple[int, int] | None]:
        """What a start reads: the durable log, or the damaged file through CRC recovery (``check_crc=False``:
        the skip-crc bug); also the position a damaged log had reached, (end offset, last epoch) (None unless
        records were lost inside it). The file is cut to what was recovered, as the runtime's recovery does."""
        if self.damaged is None:
            return list(self.durable), None
        data, self.damaged = self.damaged, None
        items, seen_end = self._recover_bytes(data, check_crc)
        self.durable = list(items)
        self.view = list(items)
        self._dirty_from = None
        return items, seen_end

    @staticmethod
    def _recover_bytes(data: bytes, check_crc: bool) -> tuple[list[Any], Any]:
        records, info = recover(data, check_crc=check_crc)
        return records, (info.seen_end, info.seen_epoch) if info.seen_end else None


class BatchDisk(Disk):
    """A partition log on disk: batches, truncated at batch boundaries by offset. ``repair_to`` is the
    runtime's ``.repair`` sidecar: the offset a log that lost a range had reached, kept (across
    crashes) until a start finds the log back there (``batch.repair_mark``)."""

    def __init__(self) -> None:
        super().__init__()
        self.repair_to: int | None = None

    def recover(self, check_crc: bool = True) -> tuple[list[Any], Any]:
        """As :meth:`Disk.recover`; the second item is ``repair_to`` (None: the log is whole)."""
        items, seen = super().recover(check_crc)
        end = items[-1].next_offset if items else 0
        self.repair_to = repair_mark(end, seen, self.repair_to)
        return items, self.repair_to

    @staticmethod
    def encode(item: Any) -> bytes:
        return encode_batch(item)

    @staticmethod
    def _recover_bytes(data: bytes, check_crc: bool) -> tuple[list[Any], Any]:
        batches, valid = recover_batches(data, check_crc=check_crc)
        seen = scan_beyond(data, valid, batches[-1].next_offset if batches else 0) if valid < len(data) else None
        return batches, seen

    def truncate_offset(self, from_offset: int) -> None:
        for i, batch in enumerate(self.view):
            if batch.base_offset >= from_offset:
                self.truncate(i)
                return
