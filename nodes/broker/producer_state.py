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

**Transactions, partition side** (KIP-98; Kafka's ``ProducerStateManager`` ongoing transactions
and ``TransactionIndex``). A transactional batch (attributes bit 4) opens a transaction for its
producer at its first offset unless one is already open; a control batch (bit 5) carrying an end
marker (:class:`TxnMarker`: one record whose key is ``version int16 | type int16``, 0 ABORT, 1
COMMIT) closes it. An aborted transaction is remembered as :class:`AbortedTxn` ``(producer id,
first offset, marker offset)`` so a read_committed fetch can list the ones overlapping what it
serves; the earliest open transaction's first offset bounds the last stable offset
(:meth:`ProducerStateManager.first_unstable_offset`). A marker whose producer epoch is older than
the producer's current one is refused with INVALID_PRODUCER_EPOCH, as an idempotent or
transactional batch is; a newer one becomes the producer's epoch. A marker whose coordinator epoch
(the leader epoch of the transaction coordinator's ``__transaction_state`` partition) is older than
that of the producer's last marker here is refused with TRANSACTION_COORDINATOR_FENCED, as Kafka's
``ProducerAppendInfo.appendEndTxnMarker`` does: a deposed coordinator that still believes it leads
(paused, then resumed) may send the markers of a transaction its successor already completed, and
the same producer id and epoch may have opened its next transaction here since, which such a
marker would end. All of this is rebuilt from the log with the sequence state.

Seeded bug ``dedup-window-1``: only the last batch is retained, and a batch before it that is not
recognised as a duplicate is taken for a producer whose older state is gone and accepted, so a
retried older batch is appended a second time.
"""

from __future__ import annotations

import bisect
import functools
import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..kafka.records import Record, RecordBatch, RecordError, decode_batch, encode_batch
from .errors import BrokerError

__all__ = [
    "ABORT",
    "BATCHES_TO_RETAIN",
    "COMMIT",
    "AbortedTxn",
    "Duplicate",
    "ProducerBatch",
    "ProducerEntry",
    "ProducerStateManager",
    "TxnMarker",
    "is_control",
    "marker_bytes",
    "marker_of",
    "producer_of",
]

BATCHES_TO_RETAIN = 5
_SEQ_WRAP = 1 << 31
_V2_HEADER = 61
_LENGTH_OVERHEAD = 12  # base offset (8) and batch length (4) are not counted in the batch length
_PRODUCER = struct.Struct(">qhi")  # producer id, producer epoch, base sequence at byte 43
_CONTROL_BIT = 0x20
_TRANSACTIONAL_BIT = 0x10
_MARKER_KEY = struct.Struct(">hh")  # control record key: version, type

ABORT = 0
"""Control record type of an abort marker."""
COMMIT = 1
"""Control record type of a commit marker."""


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """The idempotence fields of one batch."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    transactional: bool = False

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.record_count - 1) % _SEQ_WRAP


def producer_of(batch: object) -> ProducerBatch | None:
    """The producer fields of a ``Batch`` or ``NewBatch``, or None for a batch without a producer
    id (or a control batch). Explicit fields win; else the data is read as a v2 record batch."""
    explicit = getattr(batch, "producer", None)
    if explicit is not None:
        if isinstance(explicit, TxnMarker):
            return None
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
    return ProducerBatch(pid, epoch, seq, max(1, count), bool(attributes & _TRANSACTIONAL_BIT))


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """An end-of-transaction marker (a control batch): the producer's transaction ends, committed
    (``control_type`` :data:`COMMIT`) or aborted (:data:`ABORT`)."""

    producer_id: int
    producer_epoch: int
    control_type: int
    coordinator_epoch: int = 0

    @property
    def commit(self) -> bool:
        return self.control_type == COMMIT


def marker_of(batch: object) -> TxnMarker | None:
    """The end marker a ``Batch`` or ``NewBatch`` carries, or None. An explicit
    :class:`TxnMarker` in ``producer`` wins; else a v2 control batch with a producer id is
    decoded: its first record's key is ``version int16 | type int16`` (types other than ABORT and
    COMMIT, and undecodable control batches, are not markers)."""
    explicit = getattr(batch, "producer", None)
    if explicit is not None:
        return explicit if isinstance(explicit, TxnMarker) else None
    data = batch.data  # type: ignore[attr-defined]
    if len(data) < _V2_HEADER or data[16] != 2:
        return None
    (attributes,) = struct.unpack_from(">h", data, 21)
    if not attributes & _CONTROL_BIT:
        return None
    if type(data) is bytes:  # as stored: the same control batch is served again and again, decoded once
        return _control_marker_cached(data)
    return _control_marker(data)


@functools.lru_cache(maxsize=4096)
def _control_marker_cached(data: bytes) -> TxnMarker | None:
    return _control_marker(data)


def _control_marker(data: bytes | bytearray | memoryview) -> TxnMarker | None:
    """The marker in a v2 control batch's bytes, or None."""
    try:
        decoded = decode_batch(data)
    except RecordError:
        return None
    if decoded.producer_id < 0 or not decoded.records:
        return None
    key, value = decoded.records[0].key, decoded.records[0].value
    if key is None or len(key) < _MARKER_KEY.size:
        return None
    _version, kind = _MARKER_KEY.unpack_from(key)
    if kind not in (ABORT, COMMIT):
        return None
    coordinator_epoch = struct.unpack_from(">i", value, 2)[0] if value is not None and len(value) >= 6 else 0
    return TxnMarker(decoded.producer_id, decoded.producer_epoch, kind, coordinator_epoch)


def marker_bytes(marker: TxnMarker, timestamp: int) -> bytes:
    """The v2 control batch a partition leader appends for ``marker`` (Kafka's end transaction
    marker): transactional and control attributes, no sequence, one record whose key is
    ``version 0 | type`` and value ``version 0 | coordinator epoch``."""
    record = Record(
        0,
        0,
        _MARKER_KEY.pack(0, marker.control_type),
        struct.pack(">hi", 0, marker.coordinator_epoch),
    )
    batch = RecordBatch(
        attributes=_CONTROL_BIT | _TRANSACTIONAL_BIT,
        last_offset_delta=0,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=marker.producer_id,
        producer_epoch=marker.producer_epoch,
        records=[record],
    )
    return encode_batch(batch)


def is_control(batch: object) -> bool:
    """A control batch: an explicit :class:`TxnMarker`, or a v2 batch with attributes bit 5."""
    explicit = getattr(batch, "producer", None)
    if explicit is not None:
        return isinstance(explicit, TxnMarker)
    data = batch.data  # type: ignore[attr-defined]
    return len(data) >= _V2_HEADER and data[16] == 2 and bool(data[22] & _CONTROL_BIT)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction: its producer, its first offset and the offset of its marker."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class _Retained:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    """One producer on one partition: its epoch, its last batches (oldest first) and the
    coordinator epoch of its last transaction marker (-1: none yet)."""

    producer_id: int
    epoch: int
    batches: deque[_Retained]
    coordinator_epoch: int = -1

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
        batches = deque(self.batches, maxlen=self.batches.maxlen)
        return ProducerEntry(self.producer_id, self.epoch, batches, self.coordinator_epoch)


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A retried batch already in the log: answered with these offsets, not appended."""

    first_offset: int
    last_offset: int


class ProducerStateManager:
    """The producers of one partition replica."""

    def __init__(self, window: int = BATCHES_TO_RETAIN, lenient: bool = False, fence: bool = True) -> None:
        self.window = window
        self.lenient = lenient  # dedup-window-1: a batch before the retained one is accepted
        self.fence = fence  # False (no-epoch-fence): older producer epochs are accepted
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[AbortedTxn] = []  # in marker offset order

    def __len__(self) -> int:
        return len(self.producers)

    def rebuild(self, batches: Iterable[object]) -> None:
        """Forget everything and replay ``batches`` (a log, oldest first)."""
        self.producers = {}
        self.ongoing = {}
        self.aborted = []
        for batch in batches:
            base = batch.base_offset  # type: ignore[attr-defined]
            info = producer_of(batch)
            if info is not None:
                self.appended(info, base, base + batch.record_count - 1)  # type: ignore[attr-defined]
                continue
            marker = marker_of(batch)
            if marker is not None:
                self.marker_appended(marker, base)

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
            if info.transactional and info.producer_id not in self.ongoing:
                self.ongoing[info.producer_id] = first_offset

    # ------------------------------------------------------------------ transactions

    def validate_marker(self, marker: TxnMarker) -> BrokerError | None:
        """INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch,
        TRANSACTION_COORDINATOR_FENCED for one from an older coordinator epoch than the producer's
        last marker here (a deposed coordinator's), else None."""
        entry = self.producers.get(marker.producer_id)
        if entry is None:
            return None
        if marker.producer_epoch < entry.epoch and self.fence:
            return BrokerError.INVALID_PRODUCER_EPOCH
        if marker.coordinator_epoch < entry.coordinator_epoch:
            return BrokerError.TRANSACTION_COORDINATOR_FENCED
        return None

    def marker_appended(self, marker: TxnMarker, offset: int) -> None:
        """A marker validated by :meth:`validate_marker` was appended at ``offset``: the
        producer's open transaction (if any; else the marker alone) ends there."""
        pid = marker.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, marker.producer_epoch, deque(maxlen=self.window))
        elif marker.producer_epoch > entry.epoch:
            entry.epoch = marker.producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = marker.coordinator_epoch
        first = self.ongoing.pop(pid, offset)
        if not marker.commit:
            self.aborted.append(AbortedTxn(pid, first, offset))

    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest open transaction, None when none is open."""
        return min(self.ongoing.values()) if self.ongoing else None

    def aborted_between(self, start: int, end: int) -> tuple[AbortedTxn, ...]:
        """Aborted transactions with records in ``[start, end)``: marker at or after ``start``,
        first offset before ``end`` (Kafka's ``collectAbortedTransactions``)."""
        if start >= end or not self.aborted:
            return ()
        lo = bisect.bisect_left(self.aborted, start, key=lambda a: a.last_offset)
        return tuple(a for a in self.aborted[lo:] if a.first_offset < end)

    # ------------------------------------------------------------------ rules

    def _check(self, entry: ProducerEntry, info: ProducerBatch) -> BrokerError | None:
        if info.producer_epoch < entry.epoch:
            return BrokerError.INVALID_PRODUCER_EPOCH if self.fence else None
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
