"""Log records and their on-disk format (pure functions, no file IO).

A record is ``(offset, epoch, payload)`` plus a ``control`` flag (the LeaderChange record a new
leader writes at the start of its epoch is a control record). On disk and on the wire each record
is framed as::

    length u32 | crc u32 | offset i64 | epoch i32 | flags u8 | payload

``length`` is the number of bytes that follow it (crc + 13 fixed bytes + payload) and ``crc``
is the CRC-32 of everything after it (``offset .. payload``). :func:`recover` reads a log file's bytes
and stops at the first torn (incomplete) or corrupt record, reporting how much was cut off and,
when intact records follow the cut (a damaged record inside the log, not a torn tail), the offset
the log had reached (``seen_end``): the node must fetch up to it again before it may vote.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

_LEN = struct.Struct(">I")
_BODY = struct.Struct(">Iqib")  # crc, offset, epoch, flags
_FIXED = _BODY.size  # 17 bytes counted by ``length`` before the payload
FLAG_CONTROL = 0x01
MAX_PAYLOAD = 64 * 1024 * 1024


class RecordError(ValueError):
    """A record could not be decoded (torn, corrupt or out of range)."""


@dataclass(frozen=True, slots=True)
class Record:
    """One log entry. ``offset`` >= 0, ``epoch`` >= 1 for anything a leader wrote."""

    offset: int
    epoch: int
    payload: bytes
    control: bool = False


@dataclass(frozen=True, slots=True)
class RecoveryInfo:
    """What :func:`recover` kept and cut. ``reason`` is None, ``"torn"``, ``"corrupt"`` or
    ``"non-contiguous"``."""

    valid_bytes: int
    truncated_bytes: int
    reason: str | None = None
    seen_end: int | None = None  # offset after the last intact record found beyond the cut, if any
    seen_epoch: int = 0  # that record's epoch

    @property
    def damaged(self) -> bool:
        """Intact records followed the cut: records were lost inside the log, not only a torn tail."""
        return self.seen_end is not None


def encode_record(record: Record) -> bytes:
    """Frame one record (length, crc, fields, payload)."""
    if not isinstance(record.payload, bytes | bytearray):
        raise RecordError(f"payload must be bytes, got {type(record.payload).__name__}")
    if len(record.payload) > MAX_PAYLOAD:
        raise RecordError(f"payload of {len(record.payload)} bytes exceeds {MAX_PAYLOAD}")
    if record.offset < 0:
        raise RecordError(f"negative offset {record.offset}")
    try:
        fields = struct.pack(">qib", record.offset, record.epoch, FLAG_CONTROL if record.control else 0)
    except struct.error as exc:
        raise RecordError(f"record field out of range: {exc}") from None
    body = fields + bytes(record.payload)
    crc = zlib.crc32(body)
    return _LEN.pack(4 + len(body)) + struct.pack(">I", crc) + body


def encode_records(records: Iterable[Record]) -> bytes:
    """Concatenate :func:`encode_record` of each record."""
    return b"".join(encode_record(r) for r in records)


def decode_record(data: bytes, pos: int = 0, *, check_crc: bool = True) -> tuple[Record, int]:
    """Decode the record at ``pos``; return it and the position after it.

    Raises :class:`RecordError` with ``args[0]`` starting ``"torn"`` if the bytes end early and
    ``"corrupt"`` if the frame or its CRC is wrong (``check_crc=False``, the ``skip-crc`` bug:
    the CRC is not compared).
    """
    if len(data) - pos < _LEN.size:
        raise RecordError("torn: incomplete length prefix")
    (length,) = _LEN.unpack_from(data, pos)
    if length < _FIXED or length > _FIXED + MAX_PAYLOAD:
        raise RecordError(f"corrupt: record length {length} out of range")
    start = pos + _LEN.size
    end = start + length
    if end > len(data):
        raise RecordError(f"torn: record needs {length} bytes, {len(data) - start} left")
    crc, offset, epoch, flags = _BODY.unpack_from(data, start)
    body = bytes(data[start + 4 : end])
    if check_crc and zlib.crc32(body) != crc:
        raise RecordError("corrupt: CRC mismatch")
    if flags & ~FLAG_CONTROL:
        raise RecordError(f"corrupt: unknown flags {flags:#x}")
    if offset < 0:
        raise RecordError(f"corrupt: negative offset {offset}")
    payload = body[_FIXED - 4 :]
    return Record(offset, epoch, payload, bool(flags & FLAG_CONTROL)), end


def recover(data: bytes, start_offset: int = 0, *, check_crc: bool = True) -> tuple[list[Record], RecoveryInfo]:
    """Read records from a log file's bytes, stopping at a torn or corrupt tail.

    Records must be contiguous from ``start_offset`` with non-decreasing epochs; the first record
    that breaks this also ends the valid prefix. The driver should truncate the file to
    ``info.valid_bytes``. ``check_crc=False`` is the ``skip-crc`` bug: recovery trusts the bytes.
    """
    records: list[Record] = []
    pos = 0
    reason: str | None = None
    expected = start_offset
    last_epoch = 0
    while pos < len(data):
        try:
            record, nxt = decode_record(data, pos, check_crc=check_crc)
        except RecordError as exc:
            reason = "torn" if str(exc).startswith("torn") else "corrupt"
            break
        if record.offset != expected or record.epoch < last_epoch:
            reason = "non-contiguous"
            break
        records.append(record)
        expected += 1
        last_epoch = record.epoch
        pos = nxt
    seen_end, seen_epoch = _scan_beyond(data, pos + 1, expected, last_epoch) if reason is not None else (None, 0)
    return records, RecoveryInfo(
        valid_bytes=pos, truncated_bytes=len(data) - pos, reason=reason, seen_end=seen_end, seen_epoch=seen_epoch
    )


def _scan_beyond(data: bytes, pos: int, expected: int, epoch: int) -> tuple[int | None, int]:
    """The offset after the highest intact record (CRC checked) at or after byte ``pos`` whose
    offset is at least ``expected`` (a record lost to the damage, or one after it), and its epoch
    (at least ``epoch``); (None, 0) if there is none.

    A single damaged byte can break a record's length field, so this tries every byte position.
    A torn tail holds no whole frame, so it finds nothing there.
    """
    best: int | None = None
    end = len(data)
    while pos + _LEN.size + _FIXED <= end:
        (length,) = _LEN.unpack_from(data, pos)
        if _FIXED <= length <= end - pos - _LEN.size:
            try:
                record, nxt = decode_record(data, pos)
            except RecordError:
                pass
            else:
                if record.offset >= expected and (best is None or record.offset + 1 > best):
                    best = record.offset + 1
                    epoch = max(epoch, record.epoch)
                pos = nxt
                continue
        pos += 1
    if best is None:
        return None, 0
    # the damaged record itself stood at ``expected``: whatever follows is lost too
    return max(best, expected + 1), epoch


def leader_change_payload(leader_id: int, epoch: int, voters: Iterable[int]) -> bytes:
    """Payload of the LeaderChange control record a leader writes at its epoch start offset."""
    return json.dumps(
        {"type": "leader-change", "leader": leader_id, "epoch": epoch, "voters": sorted(voters)},
        sort_keys=True,
        separators=(",", ":"),
    ).encode()


def digest(record: Record) -> str:
    """Short stable digest of a record's content, for ``logs/<node>.jsonl`` dumps."""
    h = hashlib.sha256(b"\x01" if record.control else b"\x00")
    h.update(record.payload)
    return h.hexdigest()[:16]
