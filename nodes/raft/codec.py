"""Compact binary codec for the quorum messages (``messages.py``), struct-based.

Layout: ``tag u8 | version u8 (0) | fields``, big-endian. Ints are i32/i64; optional ids and
offsets write None as -1; bools are one byte (0/1); errors are i16 Kafka codes; optional strings
(a request's ``cluster_id``) are an i16 byte length, -1 for None, then UTF-8; lists are a u32
count then the items; records use the CRC-checked framing of ``records.py``. A driver framing
these in Kafka request headers can take the api key from ``messages.API_KEYS``.

:func:`decode` raises :class:`CodecError` (a ValueError) for any malformed input and never any
other exception; :func:`encode` raises it for values that do not fit the format.
"""

from __future__ import annotations

import struct
from typing import Any

from .errors import Error
from .messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    Message,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from .records import Record, RecordError, decode_record, encode_record

VERSION = 0
MAX_ITEMS = 1 << 20


class CodecError(ValueError):
    """Bytes that are not a valid message, or a message that cannot be encoded."""


_S = {
    "u8": struct.Struct(">B"),
    "i16": struct.Struct(">h"),
    "i32": struct.Struct(">i"),
    "i64": struct.Struct(">q"),
    "u32": struct.Struct(">I"),
}

# (message type, tag, ((field, kind), ...)); tags are part of the format: never renumber
_SPECS: tuple[tuple[type, int, tuple[tuple[str, str], ...]], ...] = (
    (
        VoteRequest,
        1,
        (
            ("epoch", "i32"),
            ("candidate_id", "i32"),
            ("last_epoch", "i32"),
            ("last_offset", "i64"),
            ("pre_vote", "bool"),
            ("cluster_id", "ostr"),
        ),
    ),
    (
        VoteResponse,
        2,
        (("error", "error"), ("epoch", "i32"), ("leader_id", "oi32"), ("vote_granted", "bool"), ("pre_vote", "bool")),
    ),
    (BeginQuorumEpochRequest, 3, (("epoch", "i32"), ("leader_id", "i32"), ("cluster_id", "ostr"))),
    (BeginQuorumEpochResponse, 4, (("error", "error"), ("epoch", "i32"), ("leader_id", "oi32"))),
    (
        EndQuorumEpochRequest,
        5,
        (("epoch", "i32"), ("leader_id", "i32"), ("preferred_successors", "ids"), ("cluster_id", "ostr")),
    ),
    (EndQuorumEpochResponse, 6, (("error", "error"), ("epoch", "i32"), ("leader_id", "oi32"))),
    (
        FetchRequest,
        7,
        (
            ("epoch", "i32"),
            ("replica_id", "i32"),
            ("fetch_offset", "i64"),
            ("last_fetched_epoch", "i32"),
            ("max_wait_ms", "i32"),
            ("lease_token", "oi64"),
            ("cluster_id", "ostr"),
        ),
    ),
    (
        FetchResponse,
        8,
        (
            ("error", "error"),
            ("epoch", "i32"),
            ("leader_id", "oi32"),
            ("high_watermark", "oi64"),
            ("records", "records"),
            ("diverging_epoch", "oi32"),
            ("diverging_end_offset", "oi64"),
            ("lease_token", "oi64"),
        ),
    ),
    (DescribeQuorumRequest, 9, (("cluster_id", "ostr"),)),
    (
        DescribeQuorumResponse,
        10,
        (
            ("error", "error"),
            ("epoch", "i32"),
            ("leader_id", "oi32"),
            ("high_watermark", "oi64"),
            ("voters", "replicas"),
            ("observers", "replicas"),
        ),
    ),
)
_BY_TYPE = {cls: (tag, fields) for cls, tag, fields in _SPECS}
_BY_TAG = {tag: (cls, fields) for cls, tag, fields in _SPECS}


# ---------------------------------------------------------------- encoding


def _int(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise CodecError(f"{name} must be an int, got {type(value).__name__}")
    return value


def _pack(fmt: str, value: int, name: str) -> bytes:
    try:
        return _S[fmt].pack(value)
    except struct.error:
        raise CodecError(f"{name}={value} does not fit {fmt}") from None


def _encode_field(kind: str, value: Any, name: str) -> bytes:
    if kind in ("i32", "i64"):
        return _pack(kind, _int(value, name), name)
    if kind in ("oi32", "oi64"):
        if value is None:
            return _pack(kind[1:], -1, name)
        if _int(value, name) < 0:
            raise CodecError(f"{name} must be >= 0 or None, got {value}")
        return _pack(kind[1:], value, name)
    if kind == "bool":
        if not isinstance(value, bool):
            raise CodecError(f"{name} must be a bool, got {type(value).__name__}")
        return b"\x01" if value else b"\x00"
    if kind == "ostr":
        if value is None:
            return _pack("i16", -1, name)
        if not isinstance(value, str):
            raise CodecError(f"{name} must be a str or None, got {type(value).__name__}")
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            raise CodecError(f"{name} is not encodable as UTF-8") from None
        return _pack("i16", len(data), name) + data
    if kind == "error":
        try:
            return _pack("i16", int(Error(value)), name)
        except ValueError:
            raise CodecError(f"{name}: unknown error code {value!r}") from None
    items = list(value)
    head = _pack("u32", len(items), name)
    if kind == "ids":
        return head + b"".join(_pack("i32", _int(v, name), name) for v in items)
    if kind == "records":
        try:
            return head + b"".join(encode_record(r) for r in items)
        except (RecordError, AttributeError) as exc:
            raise CodecError(f"{name}: {exc}") from None
    if kind == "replicas":
        return head + b"".join(
            _encode_field("i32", r.replica_id, name)
            + _encode_field("oi64", r.log_end_offset, name)
            + _encode_field("oi64", r.last_fetch_time, name)
            for r in items
        )
    raise AssertionError(kind)


def encode(message: Message) -> bytes:
    """Serialise one message."""
    spec = _BY_TYPE.get(type(message))
    if spec is None:
        raise CodecError(f"not a quorum message: {type(message).__name__}")
    tag, fields = spec
    parts = [bytes((tag, VERSION))]
    parts += [_encode_field(kind, getattr(message, name), name) for name, kind in fields]
    return b"".join(parts)


# ---------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: str) -> int:
        s = _S[fmt]
        if self.pos + s.size > len(self.data):
            raise CodecError(
                f"truncated message: needed {s.size} bytes at {self.pos}, have {len(self.data) - self.pos}"
            )
        (value,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return value

    def count(self, min_item_size: int) -> int:
        n = self.unpack("u32")
        if n > MAX_ITEMS or n * min_item_size > len(self.data) - self.pos:
            raise CodecError(f"list of {n} items cannot fit in {len(self.data) - self.pos} bytes")
        return n


def _decode_field(r: _Reader, kind: str, name: str) -> Any:
    if kind in ("i32", "i64"):
        return r.unpack(kind)
    if kind in ("oi32", "oi64"):
        value = r.unpack(kind[1:])
        if value < -1:
            raise CodecError(f"{name}: invalid optional value {value}")
        return None if value == -1 else value
    if kind == "bool":
        value = r.unpack("u8")
        if value > 1:
            raise CodecError(f"{name}: invalid bool byte {value}")
        return bool(value)
    if kind == "ostr":
        size = r.unpack("i16")
        if size < -1:
            raise CodecError(f"{name}: invalid string length {size}")
        if size == -1:
            return None
        if r.pos + size > len(r.data):
            raise CodecError(f"{name}: truncated string: needed {size} bytes at {r.pos}")
        try:
            text = r.data[r.pos : r.pos + size].decode("utf-8")
        except UnicodeDecodeError:
            raise CodecError(f"{name}: not UTF-8") from None
        r.pos += size
        return text
    if kind == "error":
        code = r.unpack("i16")
        try:
            return Error(code)
        except ValueError:
            raise CodecError(f"{name}: unknown error code {code}") from None
    if kind == "ids":
        return tuple(r.unpack("i32") for _ in range(r.count(4)))
    if kind == "records":
        records: list[Record] = []
        for _ in range(r.count(21)):
            try:
                record, r.pos = decode_record(r.data, r.pos)
            except RecordError as exc:
                raise CodecError(f"{name}: {exc}") from None
            records.append(record)
        return tuple(records)
    if kind == "replicas":
        return tuple(
            ReplicaState(r.unpack("i32"), _decode_field(r, "oi64", name), _decode_field(r, "oi64", name))
            for _ in range(r.count(20))
        )
    raise AssertionError(kind)


def decode(data: bytes) -> Message:
    """Parse one message; :class:`CodecError` for anything malformed (including trailing bytes)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise CodecError(f"expected bytes, got {type(data).__name__}")
    r = _Reader(bytes(data))
    tag = r.unpack("u8")
    spec = _BY_TAG.get(tag)
    if spec is None:
        raise CodecError(f"unknown message tag {tag}")
    version = r.unpack("u8")
    if version != VERSION:
        raise CodecError(f"unsupported message version {version}")
    cls, fields = spec
    values = {name: _decode_field(r, kind, name) for name, kind in fields}
    if r.pos != len(r.data):
        raise CodecError(f"{len(r.data) - r.pos} trailing bytes after {cls.__name__}")
    if cls is FetchResponse and (values["diverging_epoch"] is None) != (values["diverging_end_offset"] is None):
        raise CodecError("diverging_epoch and diverging_end_offset must be set together")
    return cls(**values)
