"""Record batches as the broker stores them (opaque bytes plus a small header) and their
on-disk framing (pure functions, no file IO).

The broker never parses ``data``: it is the producer's record batch exactly as received. The
wire layer rewrites ``baseOffset`` and ``partitionLeaderEpoch`` in the v2 batch header from
:attr:`Batch.base_offset` and :attr:`Batch.leader_epoch` when it serves a fetch (the CRC does
not cover them). On disk each batch is framed as::

    length u32 | crc u32 | base_offset i64 | leader_epoch i32 | record_count i32 | max_timestamp i64 | data

``length`` counts the bytes after it; ``crc`` is the CRC-32 of everything after it.
:func:`recover_batches` stops at the first torn or corrupt frame, like the raft log's recovery;
:func:`scan_beyond` says whether intact batches followed the cut (a damaged batch inside the log);
:func:`repair_mark` keeps that offset until the log has reached it again.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from .producer_state import ProducerBatch, TxnMarker

_LEN = struct.Struct(">I")
_HEAD = struct.Struct(">Iqiiq")  # crc, base_offset, leader_epoch, record_count, max_timestamp
MAX_BATCH = 64 * 1024 * 1024


class BatchError(ValueError):
    """A batch frame could not be decoded (torn or corrupt) or is out of range."""


@dataclass(frozen=True, slots=True)
class NewBatch:
    """What a producer sends for one partition: the batch bytes and how many records they hold.
    ``max_timestamp`` (ms, -1 if unknown) serves ListOffsets by timestamp. ``producer``: the
    idempotent producer's fields when the caller knows them and ``data`` is not a v2 record
    batch (the simulator), or a :class:`~nodes.broker.producer_state.TxnMarker` for a transaction
    marker; else they are read from ``data`` (``producer_state.producer_of`` / ``marker_of``)."""

    data: bytes
    record_count: int
    max_timestamp: int = -1
    producer: ProducerBatch | TxnMarker | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Batch:
    """A stored batch: records ``base_offset .. base_offset + record_count - 1``, written by the
    leader of ``leader_epoch``."""

    base_offset: int
    record_count: int
    leader_epoch: int
    data: bytes
    max_timestamp: int = -1
    producer: ProducerBatch | TxnMarker | None = field(default=None, compare=False)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count

    @property
    def size(self) -> int:
        return len(self.data)


def encode_batch(batch: Batch) -> bytes:
    """Frame one batch for the partition's log file."""
    if batch.record_count < 1 or batch.base_offset < 0:
        raise BatchError(f"bad batch header: base {batch.base_offset}, count {batch.record_count}")
    if len(batch.data) > MAX_BATCH:
        raise BatchError(f"batch of {len(batch.data)} bytes exceeds {MAX_BATCH}")
    try:
        fields = struct.pack(">qiiq", batch.base_offset, batch.leader_epoch, batch.record_count, batch.max_timestamp)
    except struct.error as exc:
        raise BatchError(f"batch field out of range: {exc}") from None
    body = fields + bytes(batch.data)
    return _LEN.pack(4 + len(body)) + struct.pack(">I", zlib.crc32(body)) + body


def encode_batches(batches: Iterable[Batch]) -> bytes:
    return b"".join(encode_batch(b) for b in batches)


def decode_batch(data: bytes, pos: int = 0, *, check_crc: bool = True) -> tuple[Batch, int]:
    """Decode the frame at ``pos``; return the batch and the position after it. Raises
    :class:`BatchError` whose message starts with ``"torn"`` or ``"corrupt"``. ``check_crc=False``
    (the ``skip-crc`` bug) does not compare the CRC."""
    if len(data) - pos < _LEN.size:
        raise BatchError("torn: incomplete length prefix")
    (length,) = _LEN.unpack_from(data, pos)
    if length < _HEAD.size or length > _HEAD.size + MAX_BATCH:
        raise BatchError(f"corrupt: frame length {length} out of range")
    start = pos + _LEN.size
    end = start + length
    if end > len(data):
        raise BatchError(f"torn: frame needs {length} bytes, {len(data) - start} left")
    crc, base, epoch, count, max_ts = _HEAD.unpack_from(data, start)
    body = bytes(data[start + 4 : end])
    if check_crc and zlib.crc32(body) != crc:
        raise BatchError("corrupt: CRC mismatch")
    if base < 0 or count < 1:
        raise BatchError(f"corrupt: base offset {base}, record count {count}")
    return Batch(base, count, epoch, body[_HEAD.size - 4 :], max_ts), end


def recover_batches(data: bytes, *, check_crc: bool = True) -> tuple[list[Batch], int]:
    """Read a partition log file: the contiguous valid prefix (from offset 0, epochs not going
    down) and its length in bytes; the driver truncates the file to that length.
    ``check_crc=False`` is the ``skip-crc`` bug: recovery trusts the bytes."""
    batches: list[Batch] = []
    pos = 0
    expected = 0
    last_epoch = -1
    while pos < len(data):
        try:
            batch, nxt = decode_batch(data, pos, check_crc=check_crc)
        except BatchError:
            break
        if batch.base_offset != expected or batch.leader_epoch < last_epoch:
            break
        batches.append(batch)
        expected, last_epoch, pos = batch.next_offset, batch.leader_epoch, nxt
    return batches, pos


def scan_beyond(data: bytes, pos: int, expected: int) -> int | None:
    """The offset after the highest intact batch (CRC checked) starting after byte ``pos`` whose
    records reach ``expected`` or beyond; None if there is none (a torn tail, or nothing left)."""
    best: int | None = None
    end = len(data)
    pos += 1
    while pos + _LEN.size + _HEAD.size <= end:
        (length,) = _LEN.unpack_from(data, pos)
        if _HEAD.size <= length <= end - pos - _LEN.size:
            try:
                batch, nxt = decode_batch(data, pos)
            except BatchError:
                pass
            else:
                if batch.next_offset > expected and (best is None or batch.next_offset > best):
                    best = batch.next_offset
                pos = nxt
                continue
        pos += 1
    return best


def repair_mark(end: int, seen: int | None, mark: int | None) -> int | None:
    """The offset a recovered partition log must reach again before its replica counts as whole:
    the furthest of ``seen`` (from :func:`scan_beyond`: this recovery cut a damaged range) and the
    ``mark`` an earlier recovery left, or None once the log (ending at ``end``) has got there.
    Kept on disk until then, so a broker that stops again before its damage report is committed
    reports it again."""
    reached = max((x for x in (seen, mark) if x is not None), default=None)
    return reached if reached is not None and reached > end else None
