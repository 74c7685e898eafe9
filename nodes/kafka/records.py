"""Record batch v2 (magic 2): encode, decode, validate, and rewrite in place.

Batch layout (big-endian; the CRC-32C covers `attributes` to the end of the batch, so the broker
can rewrite `base_offset` and `partition_leader_epoch` without recomputing it)::

    0  base_offset i64       | 8  batch_length i32 (bytes after this field) | 12 partition_leader_epoch i32
    16 magic i8 (= 2)        | 17 crc u32                                    | 21 attributes i16
    23 last_offset_delta i32 | 27 base_timestamp i64 | 35 max_timestamp i64 | 43 producer_id i64
    51 producer_epoch i16    | 53 base_sequence i32  | 57 record_count i32   | 61 records…

Each record: length varint | attributes i8 | timestamp_delta varlong | offset_delta varint |
key_length varint (-1 = null) | key | value_length varint | value | header_count varint |
headers (key_length varint, key, value_length varint (-1 = null), value). Varints are zig-zag.

Errors are `RecordError`s (a `DecodeError`), each carrying the Kafka error code a Produce
response should report: `CorruptRecordError` → CORRUPT_MESSAGE (2) for bytes that are damaged
(bad CRC, impossible lengths, truncation); `InvalidRecordError` → INVALID_RECORD (87) for
well-formed bytes that break the rules (legacy magic, wrong offset deltas or record count, control
batches from clients, malformed records under a valid CRC); `UnsupportedCompressionError` →
UNSUPPORTED_COMPRESSION_TYPE (76) for snappy, lz4 and zstd. Compression: none and gzip.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

from nodes.runtime.primitives import (
    DecodeError,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

from .crc32c import crc32c
from .errors import ErrorCode

__all__ = [
    "BATCH_OVERHEAD",
    "DEFAULT_MAX_DECOMPRESSED",
    "MAGIC",
    "BatchHeader",
    "Compression",
    "CorruptRecordError",
    "Header",
    "InvalidRecordError",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "Record",
    "RecordBatch",
    "RecordError",
    "UnsupportedCompressionError",
    "build_batch",
    "decode_batch",
    "encode_batch",
    "iter_batch_headers",
    "iter_batches",
    "read_batch_header",
    "set_base_offset",
    "set_partition_leader_epoch",
    "stamp_batch",
    "validate_batches",
    "validate_produce",
]

MAGIC = 2
BATCH_OVERHEAD = 61  # header bytes before the first record
_LENGTH_OVERHEAD = 12  # base_offset + batch_length: bytes not counted in batch_length
_MIN_BATCH_LENGTH = BATCH_OVERHEAD - _LENGTH_OVERHEAD
_CRC_START = 21
_MAGIC_OFFSET = 16

NO_PARTITION_LEADER_EPOCH = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40

DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# --- errors ---------------------------------------------------------------------------------------


class RecordError(DecodeError):
    """A record batch failed to decode or validate; `error_code` is what a Produce reply carries."""

    error_code: ErrorCode = ErrorCode.CORRUPT_MESSAGE


class CorruptRecordError(RecordError):
    """Damaged bytes: CRC mismatch, impossible or inconsistent lengths, truncation, bad magic."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(RecordError):
    """Intact bytes that break the rules: legacy magic, bad offset deltas or count, bad records."""

    error_code = ErrorCode.INVALID_RECORD


class UnsupportedCompressionError(RecordError):
    """A compression codec we cannot decode (snappy, lz4, zstd)."""

    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


# --- data -----------------------------------------------------------------------------------------

Header = tuple[str, bytes | None]
"""A record header: (key, value); the key is UTF-8 (undecodable bytes kept as surrogate escapes)."""


@dataclass(frozen=True, slots=True)
class Record:
    """One record, relative to its batch (absolute offset = base_offset + offset_delta)."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    attributes: int = 0


class _BatchAttributes:
    """What a batch header and a decoded batch both derive from their fields."""

    __slots__ = ()
    base_offset: int
    last_offset_delta: int
    attributes: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)


class _BatchHeaderFields(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int


class BatchHeader(_BatchHeaderFields, _BatchAttributes):
    """The fixed 61-byte batch header, read without touching the records."""

    __slots__ = ()

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire."""
        return self.batch_length + _LENGTH_OVERHEAD

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record (wrapping at 2**31 as Kafka does), or -1."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


@dataclass(slots=True)
class RecordBatch(_BatchAttributes):
    """A decoded batch. `encode_batch` derives batch_length, crc and record_count."""

    base_offset: int = 0
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    attributes: int = 0
    last_offset_delta: int = -1
    base_timestamp: int = -1
    max_timestamp: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    records: list[Record] = field(default_factory=list)

    @property
    def record_count(self) -> int:
        return len(self.records)

    def entries(self) -> Iterator[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]]:
        """(offset, timestamp, key, value, headers) with absolute offsets and timestamps. With
        LogAppendTime every record carries max_timestamp, as in Kafka."""
        log_append = self.timestamp_type == 1
        for r in self.records:
            ts = self.max_timestamp if log_append else self.base_timestamp + r.timestamp_delta
            yield self.base_offset + r.offset_delta, ts, r.key, r.value, r.headers


# --- header access --------------------------------------------------------------------------------


def _check_magic(data: bytes | bytearray | memoryview, pos: int) -> None:
    if len(data) - pos <= _MAGIC_OFFSET:
        raise CorruptRecordError(f"record batch at {pos} truncated: {len(data) - pos} byte(s), need {BATCH_OVERHEAD}")
    magic = data[pos + _MAGIC_OFFSET]
    if magic == MAGIC:
        return
    if magic in (0, 1):
        raise InvalidRecordError(f"message format v{magic} (magic {magic}) is not supported: record batch v2 only")
    raise CorruptRecordError(f"invalid magic byte {magic - 256 if magic > 127 else magic} in batch at {pos}")


def read_batch_header(data: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos` (magic and batch_length checked; CRC not)."""
    _check_magic(data, pos)
    if len(data) - pos < BATCH_OVERHEAD:
        raise CorruptRecordError(f"record batch at {pos} truncated: {len(data) - pos} byte(s), need {BATCH_OVERHEAD}")
    header = BatchHeader._make(_HEADER.unpack_from(data, pos))
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at {pos} has batch_length {header.batch_length}, below the minimum {_MIN_BATCH_LENGTH}"
        )
    return header


def iter_batch_headers(
    data: bytes | bytearray | memoryview, *, allow_partial_tail: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch in a concatenation of batches. A batch cut short at the
    end (normal in a Fetch payload limited by max_bytes) ends the iteration if
    `allow_partial_tail`, else raises `CorruptRecordError`."""
    n = len(data)
    pos = 0
    while pos < n:
        if n - pos < BATCH_OVERHEAD:
            if allow_partial_tail:
                return
            raise CorruptRecordError(f"trailing {n - pos} byte(s) at {pos} are too short for a record batch")
        header = read_batch_header(data, pos)
        if header.size > n - pos:
            if allow_partial_tail:
                return
            raise CorruptRecordError(
                f"batch at {pos} declares {header.size} bytes but only {n - pos} remain (batch_length inconsistent)"
            )
        yield pos, header
        pos += header.size


def _verify_crc(data: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> None:
    mv = memoryview(data)[pos + _CRC_START : pos + header.size]
    actual = crc32c(mv)
    if actual != header.crc:
        raise CorruptRecordError(
            f"CRC mismatch in batch at {pos} (base offset {header.base_offset}): "
            f"stored 0x{header.crc:08x}, computed 0x{actual:08x}"
        )


# --- in-place rewrites ----------------------------------------------------------------------------


def set_base_offset(buf: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Overwrite the base offset of the batch at `pos` (not covered by the CRC)."""
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, epoch: int, pos: int = 0) -> None:
    """Overwrite the partition leader epoch of the batch at `pos` (not covered by the CRC)."""
    _I32.pack_into(buf, pos + 12, epoch)


def stamp_batch(data: bytes | bytearray | memoryview, base_offset: int, partition_leader_epoch: int) -> bytes:
    """A copy of the batch(es) in `data` with offsets assigned from `base_offset` and the leader
    epoch set, as the leader does on append. Batches keep their own deltas; the next batch's base
    offset follows the previous batch's last offset."""
    buf = bytearray(data)
    offset = base_offset
    for pos, header in iter_batch_headers(buf):
        _I64.pack_into(buf, pos, offset)
        _I32.pack_into(buf, pos + 12, partition_leader_epoch)
        offset += header.last_offset_delta + 1
    return bytes(buf)


# --- decoding -------------------------------------------------------------------------------------


def _decompress(header: BatchHeader, payload: memoryview, pos: int, max_decompressed: int) -> bytes | memoryview:
    codec = header.compression
    if codec == Compression.NONE:
        return payload
    if codec == Compression.GZIP:
        d = zlib.decompressobj(wbits=31)
        try:
            out = d.decompress(payload, max_decompressed)
        except zlib.error as e:
            raise CorruptRecordError(f"gzip data of batch at {pos} is corrupt: {e}") from None
        if d.unconsumed_tail:
            raise CorruptRecordError(f"gzip data of batch at {pos} inflates beyond {max_decompressed} bytes")
        if not d.eof:
            raise CorruptRecordError(f"gzip data of batch at {pos} is truncated")
        return out
    if codec in (Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        raise UnsupportedCompressionError(
            f"batch at {pos} uses {Compression(codec).name.lower()} compression; only none and gzip are supported"
        )
    raise CorruptRecordError(f"batch at {pos} has unknown compression type id {codec}")


def _utf8(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _decode_records(buf: bytes | memoryview, count: int, where: str) -> list[Record]:
    """Parse exactly `count` records filling `buf`. Failures raise `InvalidRecordError`."""
    records: list[Record] = []
    n = len(buf)
    if count > n // 7:  # a record takes at least 7 bytes
        raise InvalidRecordError(f"{where}: record count {count} impossible in {n} byte(s)")
    pos = 0
    try:
        for i in range(count):
            length, pos = decode_varint(buf, pos)
            start = pos
            end = pos + length
            if length < 6 or end > n:
                raise InvalidRecordError(f"{where}: record {i} has invalid length {length} ({n - pos} byte(s) left)")
            attributes = buf[pos]
            pos += 1
            ts_delta, pos = decode_varlong(buf, pos)
            off_delta, pos = decode_varint(buf, pos)
            klen, pos = decode_varint(buf, pos)
            if klen < -1 or pos + max(klen, 0) > end:
                raise InvalidRecordError(f"{where}: record {i} has invalid key length {klen}")
            if klen >= 0:
                key = bytes(buf[pos : pos + klen])
                pos += klen
            else:
                key = None
            vlen, pos = decode_varint(buf, pos)
            if vlen < -1 or pos + max(vlen, 0) > end:
                raise InvalidRecordError(f"{where}: record {i} has invalid value length {vlen}")
            if vlen >= 0:
                value = bytes(buf[pos : pos + vlen])
                pos += vlen
            else:
                value = None
            hcount, pos = decode_varint(buf, pos)
            if hcount < 0 or hcount > (end - pos) // 2:
                raise InvalidRecordError(f"{where}: record {i} has invalid header count {hcount}")
            headers: list[Header] = []
            for _ in range(hcount):
                hklen, pos = decode_varint(buf, pos)
                if hklen < 0 or pos + hklen > end:
                    raise InvalidRecordError(f"{where}: record {i} has invalid header key length {hklen}")
                hkey = _utf8(bytes(buf[pos : pos + hklen]))
                pos += hklen
                hvlen, pos = decode_varint(buf, pos)
                if hvlen < -1 or pos + max(hvlen, 0) > end:
                    raise InvalidRecordError(f"{where}: record {i} has invalid header value length {hvlen}")
                if hvlen >= 0:
                    hval: bytes | None = bytes(buf[pos : pos + hvlen])
                    pos += hvlen
                else:
                    hval = None
                headers.append((hkey, hval))
            if pos != end:
                raise InvalidRecordError(
                    f"{where}: record {i} declares {length} byte(s) but its fields take {pos - start}"
                )
            records.append(Record(off_delta, ts_delta, key, value, tuple(headers), attributes))
    except InvalidRecordError:
        raise
    except DecodeError as e:
        raise InvalidRecordError(f"{where}: malformed record: {e}") from None
    if pos != n:
        raise InvalidRecordError(f"{where}: {n - pos} byte(s) left after {count} record(s)")
    return records


def _decode_at(
    data: bytes | bytearray | memoryview, pos: int, header: BatchHeader, verify_crc: bool, max_decompressed: int
) -> RecordBatch:
    if verify_crc:
        _verify_crc(data, pos, header)
    if header.record_count < 0:
        raise CorruptRecordError(f"batch at {pos} has negative record count {header.record_count}")
    payload = memoryview(data)[pos + BATCH_OVERHEAD : pos + header.size]
    body = _decompress(header, payload, pos, max_decompressed)
    records = _decode_records(body, header.record_count, f"batch at {pos}")
    return RecordBatch(
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=header.attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records=records,
    )


def decode_batch(
    data: bytes | bytearray | memoryview, *, verify_crc: bool = True, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> RecordBatch:
    """Decode `data`, which must be exactly one batch."""
    header = read_batch_header(data, 0)
    if header.size != len(data):
        raise CorruptRecordError(f"batch_length says {header.size} bytes but the buffer holds {len(data)}")
    return _decode_at(data, 0, header, verify_crc, max_decompressed)


def iter_batches(
    data: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    allow_partial_tail: bool = True,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> Iterator[RecordBatch]:
    """Decode concatenated batches (a Fetch payload). An incomplete last batch is skipped, as
    clients do, unless `allow_partial_tail` is False."""
    for pos, header in iter_batch_headers(data, allow_partial_tail=allow_partial_tail):
        yield _decode_at(data, pos, header, verify_crc, max_decompressed)


# --- validation -----------------------------------------------------------------------------------


def _validate_at(data: bytes | bytearray | memoryview, pos: int, header: BatchHeader, max_decompressed: int) -> None:
    _verify_crc(data, pos, header)
    where = f"batch at {pos}"
    if header.record_count < 0:
        raise CorruptRecordError(f"{where} has negative record count {header.record_count}")
    if header.last_offset_delta < 0:
        raise InvalidRecordError(f"{where} has an invalid offset range (last offset delta {header.last_offset_delta})")
    if header.last_offset_delta + 1 != header.record_count:
        raise InvalidRecordError(
            f"{where}: record count {header.record_count} does not match last offset delta {header.last_offset_delta}"
        )
    if header.is_control:
        raise InvalidRecordError(f"{where} is a control batch; clients may not write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(f"{where} has producer id {header.producer_id} but no base sequence")
    payload = memoryview(data)[pos + BATCH_OVERHEAD : pos + header.size]
    body = _decompress(header, payload, pos, max_decompressed)
    records = _decode_records(body, header.record_count, where)
    for i, r in enumerate(records):
        if r.offset_delta != i:
            raise InvalidRecordError(f"{where}: record {i} has offset delta {r.offset_delta}, expected {i}")


def validate_batches(
    data: bytes | bytearray | memoryview, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> list[BatchHeader]:
    """Check every batch in `data` as a leader must before appending: complete batches with
    consistent lengths, magic 2, CRC, record count = last offset delta + 1, offset deltas
    0..n-1, well-formed records, no control batches, a sequence when there is a producer id.
    Returns the headers; raises a `RecordError` subclass naming the first problem."""
    headers = []
    for pos, header in iter_batch_headers(data):
        _validate_at(data, pos, header, max_decompressed)
        headers.append(header)
    if not headers:
        raise CorruptRecordError("record set is empty")
    return headers


def validate_produce(
    data: bytes | bytearray | memoryview | None, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> BatchHeader:
    """`validate_batches` for one partition of a Produce request (v3+): exactly one batch."""
    if data is None:
        raise InvalidRecordError("produce request partition has null records")
    headers = validate_batches(data, max_decompressed=max_decompressed)
    if len(headers) != 1:
        raise InvalidRecordError(f"produce requests v3+ must carry exactly one record batch, got {len(headers)}")
    return headers[0]


# --- encoding -------------------------------------------------------------------------------------


def _encode_record(out: bytearray, r: Record) -> None:
    body = bytearray()
    body.append(r.attributes & 0xFF)
    body += encode_varlong(r.timestamp_delta)
    body += encode_varint(r.offset_delta)
    if r.key is None:
        body += encode_varint(-1)
    else:
        body += encode_varint(len(r.key))
        body += r.key
    if r.value is None:
        body += encode_varint(-1)
    else:
        body += encode_varint(len(r.value))
        body += r.value
    body += encode_varint(len(r.headers))
    for hkey, hval in r.headers:
        raw = hkey.encode("utf-8", "surrogateescape")
        body += encode_varint(len(raw))
        body += raw
        if hval is None:
            body += encode_varint(-1)
        else:
            body += encode_varint(len(hval))
            body += hval
    out += encode_varint(len(body))
    out += body


def encode_batch(batch: RecordBatch, *, compresslevel: int = 6) -> bytes:
    """Serialise `batch`; gzip-compresses the records when `batch.compression` is GZIP."""
    records = bytearray()
    for r in batch.records:
        _encode_record(records, r)
    codec = batch.compression
    if codec == Compression.GZIP:
        c = zlib.compressobj(compresslevel, zlib.DEFLATED, 31)
        payload: bytes | bytearray = c.compress(records) + c.flush()
    elif codec == Compression.NONE:
        payload = records
    else:
        raise UnsupportedCompressionError(f"cannot encode with compression type id {codec}")
    size = BATCH_OVERHEAD + len(payload)
    if size - _LENGTH_OVERHEAD > 0x7FFFFFFF:
        raise ValueError(f"record batch of {size} bytes is too large")
    out = bytearray(BATCH_OVERHEAD)
    out += payload
    try:
        _HEADER.pack_into(
            out,
            0,
            batch.base_offset,
            size - _LENGTH_OVERHEAD,
            batch.partition_leader_epoch,
            MAGIC,
            0,
            batch.attributes,
            batch.last_offset_delta,
            batch.base_timestamp,
            batch.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            len(batch.records),
        )
    except struct.error as e:
        raise ValueError(f"record batch header field out of range: {e}") from None
    _U32.pack_into(out, 17, crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)


RecordInput = tuple  # (key, value) | (key, value, headers) | (key, value, headers, timestamp)


def build_batch(
    records: Iterable[RecordInput | Record],
    *,
    base_offset: int = 0,
    timestamp: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    compression: int = Compression.NONE,
    transactional: bool = False,
    log_append_time: bool = False,
) -> RecordBatch:
    """A client-style batch: offset deltas 0..n-1, timestamps relative to the first record.
    Each input is a `Record` or a tuple (key, value[, headers[, timestamp_ms]]); records without
    a timestamp get `timestamp` (sans-IO: the caller supplies the clock)."""
    items: list[tuple[bytes | None, bytes | None, tuple[Header, ...], int]] = []
    for item in records:
        if isinstance(item, Record):
            items.append((item.key, item.value, item.headers, timestamp + item.timestamp_delta))
            continue
        key, value, *rest = item
        headers = tuple(rest[0]) if rest else ()
        ts = rest[1] if len(rest) > 1 else timestamp
        items.append((key, value, headers, ts))
    if not items:
        raise ValueError("a record batch needs at least one record")
    base_ts = items[0][3]
    out = [
        Record(offset_delta=i, timestamp_delta=ts - base_ts, key=k, value=v, headers=h)
        for i, (k, v, h, ts) in enumerate(items)
    ]
    attributes = int(compression) & _COMPRESSION_MASK
    if log_append_time:
        attributes |= _TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= _TRANSACTIONAL_BIT
    return RecordBatch(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=len(out) - 1,
        base_timestamp=base_ts,
        max_timestamp=max(ts for *_, ts in items),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records=out,
    )
