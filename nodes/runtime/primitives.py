"""Kafka wire-protocol primitive types: a bounds-checked `Reader` and an appending `Writer`.

Covers the types of kafka.apache.org/protocol#protocol_types: fixed-width integers, float64,
booleans, unsigned varints, zig-zag varint/varlong, (nullable/compact) strings and bytes,
(nullable/compact) arrays, tagged-field blocks and UUIDs. Sans-IO, standard library only.

Every read that runs past the end of the buffer, or finds an invalid value (negative length
where none is allowed, over-long varint, bad UTF-8, out-of-order tags), raises `DecodeError`.
Writes of values outside a type's range raise `ValueError`.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

__all__ = [
    "DecodeError",
    "Reader",
    "Writer",
    "NULL_UUID",
    "decode_uvarint",
    "decode_varint",
    "decode_varlong",
    "encode_uvarint",
    "encode_varint",
    "encode_varlong",
    "sizeof_uvarint",
    "sizeof_varint",
    "sizeof_varlong",
    "zigzag32",
    "zigzag64",
    "unzigzag",
]

T = TypeVar("T")

NULL_UUID = _uuid.UUID(int=0)

_I8 = struct.Struct(">b")
_U8 = struct.Struct(">B")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

_U32_LIMIT = 1 << 32
_U64_LIMIT = 1 << 64


class DecodeError(ValueError):
    """The bytes do not hold a well-formed value of the expected type (truncated or invalid)."""


# --- varint helpers (module level so record-batch code can use them on raw buffers) -------------


def zigzag32(value: int) -> int:
    """Map a signed 32-bit int onto an unsigned one (0, -1, 1, -2 … → 0, 1, 2, 3 …)."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"varint out of int32 range: {value}")
    return ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF


def zigzag64(value: int) -> int:
    """Map a signed 64-bit int onto an unsigned one."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong out of int64 range: {value}")
    return ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF


def unzigzag(value: int) -> int:
    """Inverse of `zigzag32` / `zigzag64`."""
    return (value >> 1) ^ -(value & 1)


def encode_uvarint(value: int) -> bytes:
    """Unsigned LEB128 encoding of `value` (0 <= value < 2**64)."""
    if 0 <= value < 0x80:
        return bytes((value,))
    if value < 0 or value >= _U64_LIMIT:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zig-zag varint (int32)."""
    return encode_uvarint(zigzag32(value))


def encode_varlong(value: int) -> bytes:
    """Zig-zag varlong (int64)."""
    return encode_uvarint(zigzag64(value))


def sizeof_uvarint(value: int) -> int:
    """Number of bytes `encode_uvarint(value)` produces."""
    if value < 0:
        raise ValueError(f"unsigned varint out of range: {value}")
    return max(1, (value.bit_length() + 6) // 7)


def sizeof_varint(value: int) -> int:
    return sizeof_uvarint(zigzag32(value))


def sizeof_varlong(value: int) -> int:
    return sizeof_uvarint(zigzag64(value))


def _read_uvarint(buf: memoryview | bytes | bytearray, pos: int, max_bytes: int) -> tuple[int, int]:
    end = len(buf)
    if pos < end:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
    result = 0
    shift = 0
    for i in range(max_bytes):
        if pos >= end:
            raise DecodeError(f"truncated varint at offset {pos}: buffer ends after {i} byte(s)")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise DecodeError(f"varint longer than {max_bytes} bytes at offset {pos - max_bytes}")


def decode_uvarint(buf: memoryview | bytes | bytearray, pos: int = 0) -> tuple[int, int]:
    """Read an unsigned 32-bit varint at `pos`; returns (value, next position)."""
    value, pos = _read_uvarint(buf, pos, 5)
    if value >= _U32_LIMIT:
        raise DecodeError(f"unsigned varint does not fit in 32 bits: {value}")
    return value, pos


def decode_varint(buf: memoryview | bytes | bytearray, pos: int = 0) -> tuple[int, int]:
    """Read a zig-zag int32 varint at `pos`; returns (value, next position)."""
    value, pos = decode_uvarint(buf, pos)
    return unzigzag(value), pos


def decode_varlong(buf: memoryview | bytes | bytearray, pos: int = 0) -> tuple[int, int]:
    """Read a zig-zag int64 varlong at `pos`; returns (value, next position)."""
    value, pos = _read_uvarint(buf, pos, 10)
    if value >= _U64_LIMIT:
        raise DecodeError(f"varlong does not fit in 64 bits: {value}")
    return unzigzag(value), pos


# --- Reader ---------------------------------------------------------------------------------------


class Reader:
    """Sequential reader over a buffer; slices it returns are zero-copy `memoryview`s.

    `read_bytes` & co. return `bytes` copies unless `view=True` is passed, in which case the
    memoryview aliases the underlying buffer (do not mutate that buffer while you hold it).
    """

    __slots__ = ("_buf", "_pos", "_end")

    def __init__(self, data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None) -> None:
        buf = data if isinstance(data, memoryview) else memoryview(data)
        if buf.ndim != 1 or buf.itemsize != 1:
            buf = buf.cast("B")
        self._end = len(buf) if end is None else end
        if not 0 <= offset <= self._end <= len(buf):
            raise ValueError(f"bad reader bounds offset={offset} end={end} len={len(buf)}")
        self._buf = buf[: self._end]
        self._pos = offset

    # position ---------------------------------------------------------------------------------
    @property
    def pos(self) -> int:
        return self._pos

    @property
    def remaining(self) -> int:
        return self._end - self._pos

    def at_end(self) -> bool:
        return self._pos >= self._end

    def expect_end(self, what: str = "message") -> None:
        """Raise `DecodeError` if unread bytes remain."""
        if self._pos != self._end:
            raise DecodeError(f"{self._end - self._pos} unexpected trailing byte(s) after {what}")

    def _need(self, n: int, what: str) -> int:
        pos = self._pos
        if n > self._end - pos:
            raise DecodeError(f"truncated {what} at offset {pos}: need {n} byte(s), {self._end - pos} remaining")
        self._pos = pos + n
        return pos

    def skip(self, n: int) -> None:
        if n < 0:
            raise ValueError("cannot skip a negative count")
        self._need(n, "skip")

    def read_raw(self, n: int) -> memoryview:
        """The next `n` bytes as a zero-copy view."""
        if n < 0:
            raise DecodeError(f"negative length {n}")
        pos = self._need(n, "raw bytes")
        return self._buf[pos : pos + n]

    def read_rest(self) -> memoryview:
        """Everything not yet read, as a zero-copy view."""
        pos = self._pos
        self._pos = self._end
        return self._buf[pos:]

    # fixed width ------------------------------------------------------------------------------
    def _fixed(self, s: struct.Struct, what: str) -> Any:
        pos = self._pos
        try:
            (v,) = s.unpack_from(self._buf, pos)
        except struct.error:
            raise DecodeError(
                f"truncated {what} at offset {pos}: need {s.size} byte(s), {self._end - pos} remaining"
            ) from None
        self._pos = pos + s.size
        return v

    def read_int8(self) -> int:
        return self._fixed(_I8, "int8")

    def read_uint8(self) -> int:
        return self._fixed(_U8, "uint8")

    def read_int16(self) -> int:
        return self._fixed(_I16, "int16")

    def read_uint16(self) -> int:
        return self._fixed(_U16, "uint16")

    def read_int32(self) -> int:
        return self._fixed(_I32, "int32")

    def read_uint32(self) -> int:
        return self._fixed(_U32, "uint32")

    def read_int64(self) -> int:
        return self._fixed(_I64, "int64")

    def read_float64(self) -> float:
        return self._fixed(_F64, "float64")

    def read_boolean(self) -> bool:
        return self._fixed(_U8, "boolean") != 0

    def read_uuid(self) -> _uuid.UUID:
        pos = self._need(16, "uuid")
        return _uuid.UUID(bytes=bytes(self._buf[pos : pos + 16]))

    # varints ----------------------------------------------------------------------------------
    def read_uvarint(self) -> int:
        value, self._pos = decode_uvarint(self._buf, self._pos)
        return value

    def read_varint(self) -> int:
        value, self._pos = decode_varint(self._buf, self._pos)
        return value

    def read_varlong(self) -> int:
        value, self._pos = decode_varlong(self._buf, self._pos)
        return value

    def read_uvarlong(self) -> int:
        value, self._pos = _read_uvarint(self._buf, self._pos, 10)
        if value >= _U64_LIMIT:
            raise DecodeError(f"unsigned varlong does not fit in 64 bits: {value}")
        return value

    # lengths ----------------------------------------------------------------------------------
    def _compact_len(self) -> int:
        """uvarint(len + 1); -1 means null."""
        return self.read_uvarint() - 1

    def _decode_str(self, n: int, what: str) -> str:
        pos = self._need(n, what)
        try:
            return str(self._buf[pos : pos + n], "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"{what} at offset {pos} is not valid UTF-8: {e.reason}") from None

    def _slice(self, n: int, what: str, view: bool) -> bytes | memoryview:
        pos = self._need(n, what)
        mv = self._buf[pos : pos + n]
        return mv if view else mv.tobytes()

    # strings ----------------------------------------------------------------------------------
    def read_string(self) -> str:
        n = self.read_int16()
        if n < 0:
            raise DecodeError(f"non-nullable string has length {n}")
        return self._decode_str(n, "string")

    def read_nullable_string(self) -> str | None:
        n = self.read_int16()
        if n < 0:
            if n != -1:
                raise DecodeError(f"nullable string has invalid length {n}")
            return None
        return self._decode_str(n, "string")

    def read_compact_string(self) -> str:
        n = self._compact_len()
        if n < 0:
            raise DecodeError("non-nullable compact string is null")
        return self._decode_str(n, "compact string")

    def read_compact_nullable_string(self) -> str | None:
        n = self._compact_len()
        if n < 0:
            return None
        return self._decode_str(n, "compact string")

    # bytes ------------------------------------------------------------------------------------
    def read_bytes(self, *, view: bool = False) -> bytes | memoryview:
        n = self.read_int32()
        if n < 0:
            raise DecodeError(f"non-nullable bytes has length {n}")
        return self._slice(n, "bytes", view)

    def read_nullable_bytes(self, *, view: bool = False) -> bytes | memoryview | None:
        n = self.read_int32()
        if n < 0:
            if n != -1:
                raise DecodeError(f"nullable bytes has invalid length {n}")
            return None
        return self._slice(n, "bytes", view)

    def read_compact_bytes(self, *, view: bool = False) -> bytes | memoryview:
        n = self._compact_len()
        if n < 0:
            raise DecodeError("non-nullable compact bytes is null")
        return self._slice(n, "compact bytes", view)

    def read_compact_nullable_bytes(self, *, view: bool = False) -> bytes | memoryview | None:
        n = self._compact_len()
        if n < 0:
            return None
        return self._slice(n, "compact bytes", view)

    # arrays -----------------------------------------------------------------------------------
    def _array_items(self, n: int, item: Callable[[Reader], T]) -> list[T]:
        # Every element takes at least one byte in practice, so a count above the bytes left is a
        # corrupt (or hostile) length: refuse it before allocating anything.
        if n > self._end - self._pos:
            raise DecodeError(f"array claims {n} element(s) but only {self._end - self._pos} byte(s) remain")
        return [item(self) for _ in range(n)]

    def read_array(self, item: Callable[[Reader], T]) -> list[T]:
        """int32 count then elements; `item` reads one element, e.g. `Reader.read_int32`."""
        n = self.read_int32()
        if n < 0:
            raise DecodeError(f"non-nullable array has length {n}")
        return self._array_items(n, item)

    def read_nullable_array(self, item: Callable[[Reader], T]) -> list[T] | None:
        n = self.read_int32()
        if n < 0:
            if n != -1:
                raise DecodeError(f"nullable array has invalid length {n}")
            return None
        return self._array_items(n, item)

    def read_compact_array(self, item: Callable[[Reader], T]) -> list[T]:
        n = self._compact_len()
        if n < 0:
            raise DecodeError("non-nullable compact array is null")
        return self._array_items(n, item)

    def read_compact_nullable_array(self, item: Callable[[Reader], T]) -> list[T] | None:
        n = self._compact_len()
        if n < 0:
            return None
        return self._array_items(n, item)

    # tagged fields ----------------------------------------------------------------------------
    def read_tagged_fields(self) -> dict[int, bytes]:
        """A tagged-field block: uvarint count, then (uvarint tag, uvarint size, data) with
        strictly increasing tags. Returns {tag: raw bytes}; an empty block gives {}."""
        count = self.read_uvarint()
        if count == 0:
            return {}
        if count > self._end - self._pos:
            raise DecodeError(f"tagged-field block claims {count} field(s), only {self.remaining} byte(s) left")
        fields: dict[int, bytes] = {}
        last = -1
        for _ in range(count):
            tag = self.read_uvarint()
            if tag <= last:
                raise DecodeError(f"tagged field {tag} out of order (after {last})")
            last = tag
            size = self.read_uvarint()
            pos = self._need(size, f"tagged field {tag}")
            fields[tag] = self._buf[pos : pos + size].tobytes()
        return fields

    def skip_tagged_fields(self) -> None:
        """Read and discard a tagged-field block (still validating it)."""
        count = self.read_uvarint()
        last = -1
        for _ in range(count):
            tag = self.read_uvarint()
            if tag <= last:
                raise DecodeError(f"tagged field {tag} out of order (after {last})")
            last = tag
            self._need(self.read_uvarint(), f"tagged field {tag}")


# --- Writer ---------------------------------------------------------------------------------------


class Writer:
    """Appends encoded values to an internal bytearray; `getvalue()` returns the bytes."""

    __slots__ = ("_buf",)

    def __init__(self, initial: bytes | bytearray | memoryview = b"") -> None:
        self._buf = bytearray(initial)

    def __len__(self) -> int:
        return len(self._buf)

    def getvalue(self) -> bytes:
        return bytes(self._buf)

    def getbuffer(self) -> bytearray:
        """The live buffer (no copy)."""
        return self._buf

    def write_raw(self, data: bytes | bytearray | memoryview) -> Writer:
        self._buf += data
        return self

    # size prefixes written after the fact (frame sizes, batch lengths, CRCs)
    def reserve(self, n: int) -> int:
        """Append `n` zero bytes and return their offset, to be patched later."""
        pos = len(self._buf)
        self._buf += bytes(n)
        return pos

    def patch_int32(self, pos: int, value: int) -> None:
        _pack_into(_I32, self._buf, pos, value, "int32")

    def patch_uint32(self, pos: int, value: int) -> None:
        _pack_into(_U32, self._buf, pos, value, "uint32")

    # fixed width ------------------------------------------------------------------------------
    def _fixed(self, s: struct.Struct, value: int | float, what: str) -> Writer:
        try:
            self._buf += s.pack(value)
        except struct.error as e:
            raise ValueError(f"{what} out of range: {value!r}") from e
        return self

    def write_int8(self, value: int) -> Writer:
        return self._fixed(_I8, value, "int8")

    def write_uint8(self, value: int) -> Writer:
        return self._fixed(_U8, value, "uint8")

    def write_int16(self, value: int) -> Writer:
        return self._fixed(_I16, value, "int16")

    def write_uint16(self, value: int) -> Writer:
        return self._fixed(_U16, value, "uint16")

    def write_int32(self, value: int) -> Writer:
        return self._fixed(_I32, value, "int32")

    def write_uint32(self, value: int) -> Writer:
        return self._fixed(_U32, value, "uint32")

    def write_int64(self, value: int) -> Writer:
        return self._fixed(_I64, value, "int64")

    def write_float64(self, value: float) -> Writer:
        return self._fixed(_F64, value, "float64")

    def write_boolean(self, value: bool) -> Writer:
        self._buf.append(1 if value else 0)
        return self

    def write_uuid(self, value: _uuid.UUID | bytes) -> Writer:
        raw = value.bytes if isinstance(value, _uuid.UUID) else bytes(value)
        if len(raw) != 16:
            raise ValueError(f"uuid must be 16 bytes, got {len(raw)}")
        self._buf += raw
        return self

    # varints ----------------------------------------------------------------------------------
    def write_uvarint(self, value: int) -> Writer:
        if 0 <= value < 0x80:
            self._buf.append(value)
            return self
        if value < 0 or value >= _U32_LIMIT:
            raise ValueError(f"unsigned varint out of range: {value}")
        self._buf += encode_uvarint(value)
        return self

    def write_uvarlong(self, value: int) -> Writer:
        self._buf += encode_uvarint(value)
        return self

    def write_varint(self, value: int) -> Writer:
        self._buf += encode_uvarint(zigzag32(value))
        return self

    def write_varlong(self, value: int) -> Writer:
        self._buf += encode_uvarint(zigzag64(value))
        return self

    # strings ----------------------------------------------------------------------------------
    @staticmethod
    def _utf8(value: str, limit: int) -> bytes:
        raw = value.encode("utf-8")
        if len(raw) > limit:
            raise ValueError(f"string of {len(raw)} bytes exceeds the maximum {limit}")
        return raw

    def write_string(self, value: str) -> Writer:
        raw = self._utf8(value, 0x7FFF)
        self._buf += _I16.pack(len(raw))
        self._buf += raw
        return self

    def write_nullable_string(self, value: str | None) -> Writer:
        if value is None:
            self._buf += _I16.pack(-1)
            return self
        return self.write_string(value)

    def write_compact_string(self, value: str) -> Writer:
        raw = self._utf8(value, 0x7FFF)
        self.write_uvarint(len(raw) + 1)
        self._buf += raw
        return self

    def write_compact_nullable_string(self, value: str | None) -> Writer:
        if value is None:
            self._buf.append(0)
            return self
        return self.write_compact_string(value)

    # bytes ------------------------------------------------------------------------------------
    def write_bytes(self, value: bytes | bytearray | memoryview) -> Writer:
        n = len(value)
        if n > 0x7FFFFFFF:
            raise ValueError(f"bytes field of {n} bytes too long")
        self._buf += _I32.pack(n)
        self._buf += value
        return self

    def write_nullable_bytes(self, value: bytes | bytearray | memoryview | None) -> Writer:
        if value is None:
            self._buf += _I32.pack(-1)
            return self
        return self.write_bytes(value)

    def write_compact_bytes(self, value: bytes | bytearray | memoryview) -> Writer:
        self.write_uvarint(len(value) + 1)
        self._buf += value
        return self

    def write_compact_nullable_bytes(self, value: bytes | bytearray | memoryview | None) -> Writer:
        if value is None:
            self._buf.append(0)
            return self
        return self.write_compact_bytes(value)

    # arrays -----------------------------------------------------------------------------------
    def write_array(self, items: Iterable[T], item: Callable[[Writer, T], object]) -> Writer:
        """int32 count then elements; `item(writer, value)` writes one, e.g. `Writer.write_int32`."""
        seq = items if isinstance(items, list | tuple) else list(items)
        self._buf += _I32.pack(len(seq))
        for v in seq:
            item(self, v)
        return self

    def write_nullable_array(self, items: Iterable[T] | None, item: Callable[[Writer, T], object]) -> Writer:
        if items is None:
            self._buf += _I32.pack(-1)
            return self
        return self.write_array(items, item)

    def write_compact_array(self, items: Iterable[T], item: Callable[[Writer, T], object]) -> Writer:
        seq = items if isinstance(items, list | tuple) else list(items)
        self.write_uvarint(len(seq) + 1)
        for v in seq:
            item(self, v)
        return self

    def write_compact_nullable_array(self, items: Iterable[T] | None, item: Callable[[Writer, T], object]) -> Writer:
        if items is None:
            self._buf.append(0)
            return self
        return self.write_compact_array(items, item)

    # tagged fields ----------------------------------------------------------------------------
    def write_tagged_fields(self, fields: Mapping[int, bytes | bytearray | memoryview] | None = None) -> Writer:
        """A tagged-field block; tags are written in increasing order. None/{} → one 0 byte."""
        if not fields:
            self._buf.append(0)
            return self
        self.write_uvarint(len(fields))
        for tag in sorted(fields):
            data = fields[tag]
            self.write_uvarint(tag)
            self.write_uvarint(len(data))
            self._buf += data
        return self


def _pack_into(s: struct.Struct, buf: bytearray, pos: int, value: int, what: str) -> None:
    if pos < 0 or pos + s.size > len(buf):
        raise ValueError(f"patch position {pos} outside the buffer")
    try:
        s.pack_into(buf, pos, value)
    except struct.error as e:
        raise ValueError(f"{what} out of range: {value!r}") from e
