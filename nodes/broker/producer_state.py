"""Idempotent producers' state on one partition (KIP-98; Kafka's ProducerStateManager and
ProducerAppendInfo), pure state.

Every batch an idempotent producer writes carries ``(producer id, producer epoch, base
sequence)``; the last sequence is ``base + record_count - 1``. Per producer the leader keeps its
epoch and the last :data:`BATCHES_TO_RETAIN` batches' sequence ranges and offsets. A batch from
a client is judged, in Kafka's order:

1. a **duplicate** (same epoch, same first and last sequence as a retained batch) is not appended
   again: the answer is the original batch's offsets;
2. an epoch older than the producer's is INVALID_PRODUCER_EPOCH;
3. a new epoch must start at sequence 0, the same epoch must continue at ``last + 1`` (wrapping
   at 2**31): else OUT_OF_ORDER_SEQUENCE_NUMBER;
4. a producer this partition has no state for is accepted at any sequence (Kafka since KIP-360
   no longer answers UNKNOWN_PRODUCER_ID: its state may have gone with the log's head).

The state is a function of the log: a replica rebuilds it from its batches when it becomes leader
(:meth:`ProducerStateManager.rebuild`), so a batch retried after a leader change is recognised by
the new leader as long as that leader's log has it. The producer fields come from
:attr:`~nodes.broker.batch.NewBatch.producer` when the caller set it (the simulator), else from the
v2 record-batch header in the data (:func:`producer_of`).

Seeded bug ``dedup-window-1``: only the last batch is retained, and a batch before it that is not
recognised as a duplicate is taken for a producer whose older state is gone and accepted, so a
retried older batch is appended a second time.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import BrokerError

__all__ = [
    "BATCHES_TO_RETAIN",
    "Duplicate",
    "ProducerBatch",
    "ProducerEntry",
    "ProducerStateManager",
    "producer_of",
]

BATCHES_TO_RETAIN = 5
_SEQ_WRAP = 1 << 31
_V2_HEADER = 61
_LENGTH_OVERHEAD = 12  # base offset (8) and batch length (4) are not counted in the batch length
_PRODUCER = struct.Struct(">qhi")  # producer id, producer epoch, base sequence at byte 43
_CONTROL_BIT = 0x20


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """The idempotence fields of one batch."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.record_count - 1) % _SEQ_WRAP


def producer_of(batch: object) -> ProducerBatch | None:
    """The producer fields of a ``Batch`` or ``NewBatch``, or None for a batch without a producer
    id (or a control batch). Explicit fields win; else the data is read as a v2 record batch."""
    explicit = getattr(batch, "producer", None)
    if explicit is not None:
        return explicit if explicit.producer_id >= 0 and explicit.base_sequence >= 0 else None
    data = batch.data  # type: ignore[attr-defined]
    if len(data) < _V2_HEADER or data[16] != 2:
        return None
    (length,) = struct.unpack_from(">i", data, 8)
    if length + _LENGTH_OVERHEAD != len(data):
        return None
    (attributes,) = struct.unpack_from(">h", data, 21)
    if attributes & _CONTROL_BIT:
        return None
    pid, epoch, seq = _PRODUCER.unpack_from(data, 43)
    if pid < 0 or seq < 0:
        return None
    (count,) = struct.unpack_from(">i", data, 57)
    return ProducerBatch(pid, epoch, seq, max(1, count))


@dataclass(frozen=True, slots=True)
class _Retained:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    """One producer on one partition: its epoch and its last batches (oldest first)."""

    producer_id: int
    epoch: int
    batches: deque[_Retained]

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, info: ProducerBatch) -> _Retained | None:
        if info.producer_epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == info.base_sequence and b.last_seq == info.last_sequence:
                return b
        return None

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch, deque(self.batches, maxlen=self.batches.maxlen))


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A retried batch already in the log: answered with these offsets, not appended."""

    first_offset: int
    last_offset: int


class ProducerStateManager:
    """The producers of one partition replica."""

    def __init__(self, window: int = BATCHES_TO_RETAIN, lenient: bool = False) -> None:
        self.window = window
        self.lenient = lenient  # dedup-window-1: a batch before the retained one is accepted
        self.producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def rebuild(self, batches: Iterable[object]) -> None:
        """Forget everything and replay ``batches`` (a log, oldest first)."""
        self.producers = {}
        for batch in batches:
            info = producer_of(batch)
            if info is not None:
                self._update(self.producers, info, batch.base_offset, batch.base_offset + batch.record_count - 1)  # type: ignore[attr-defined]

    def validate(self, infos: Sequence[ProducerBatch | None]) -> BrokerError | Duplicate | None:
        """Judge one partition's batches from a client, in order: an error for the whole append, a
        :class:`Duplicate`, or None (append them all, then :meth:`appended`). Changes nothing."""
        scratch: dict[int, ProducerEntry] = {}
        error_dup = BrokerError.OUT_OF_ORDER_SEQUENCE_NUMBER
        for info in infos:
            if info is None:
                continue
            entry = scratch.get(info.producer_id)
            if entry is None:
                known = self.producers.get(info.producer_id)
                entry = known.copy() if known is not None else None
            if entry is not None:
                dup = entry.find_duplicate(info)
                if dup is not None:  # (a batch repeated within one request has no offsets yet)
                    return Duplicate(dup.first_offset, dup.last_offset) if dup.first_offset >= 0 else error_dup
                error = self._check(entry, info)
                if error is not None:
                    return error
            # offsets are not known yet; -1 placeholders only steer the later batches' checks
            self._update(scratch, info, -1, -1, base=entry)
        return None

    def appended(self, info: ProducerBatch | None, first_offset: int, last_offset: int) -> None:
        """A batch validated by :meth:`validate` was appended at these offsets."""
        if info is not None:
            self._update(self.producers, info, first_offset, last_offset)

    # ------------------------------------------------------------------ rules

    def _check(self, entry: ProducerEntry, info: ProducerBatch) -> BrokerError | None:
        if info.producer_epoch < entry.epoch:
            return BrokerError.INVALID_PRODUCER_EPOCH
        if info.producer_epoch != entry.epoch:
            return None if info.base_sequence == 0 else BrokerError.OUT_OF_ORDER_SEQUENCE_NUMBER
        last = entry.last_seq
        if last < 0 or info.base_sequence == (last + 1) % _SEQ_WRAP:
            return None
        if self.lenient and info.base_sequence <= last:
            return None
        return BrokerError.OUT_OF_ORDER_SEQUENCE_NUMBER

    def _update(
        self,
        into: dict[int, ProducerEntry],
        info: ProducerBatch,
        first_offset: int,
        last_offset: int,
        base: ProducerEntry | None = None,
    ) -> None:
        entry = into.get(info.producer_id)
        if entry is None:
            entry = base.copy() if base is not None else None
            if entry is None:
                entry = ProducerEntry(info.producer_id, info.producer_epoch, deque(maxlen=self.window))
            into[info.producer_id] = entry
        if info.producer_epoch > entry.epoch:
            entry.epoch = info.producer_epoch
            entry.batches.clear()
        entry.batches.append(_Retained(info.base_sequence, info.last_sequence, first_offset, last_offset))
