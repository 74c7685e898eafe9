"""Kafka request/response framing (sans-IO).

A frame is an int32 size followed by that many bytes. A request frame holds a request header
then the body; a response frame holds a response header then the body:

* request header v0: api_key i16, api_version i16, correlation_id i32
* request header v1: v0 + client_id (nullable string, i16 length)
* request header v2: v1 + tagged fields (used exactly when the request version is flexible)
* response header v0: correlation_id i32; v1: v0 + tagged fields (flexible versions, except
  that ApiVersions responses always use v0, KIP-511)

`FrameDecoder` turns a byte stream into frames, checking each size prefix against `max_bytes`
before it buffers any of the frame. Which header version an (api_key, api_version) pair uses is
a property of the API schemas, so decoding takes a `HeaderVersions` callable (see
`classic_header_versions` and `flexible_header_versions`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .primitives import DecodeError, Reader, Writer

__all__ = [
    "API_VERSIONS_KEY",
    "DEFAULT_MAX_BYTES",
    "FrameDecoder",
    "FrameError",
    "HeaderVersions",
    "RequestHeader",
    "ResponseHeader",
    "classic_header_versions",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_request_header",
    "encode_response",
    "encode_response_header",
    "flexible_header_versions",
    "peek_correlation_id",
    "request_frame_parts",
    "response_frame_parts",
]

DEFAULT_MAX_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes
API_VERSIONS_KEY = 18

_SIZE = struct.Struct(">i")
_I32 = struct.Struct(">i")

HeaderVersions = Callable[[int, int], tuple[int, int]]
"""(api_key, api_version) -> (request header version, response header version)."""


class FrameError(DecodeError):
    """A frame or frame header is malformed: bad size prefix, truncated or invalid header."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    header_version: int = 1
    tagged_fields: Mapping[int, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    correlation_id: int
    header_version: int = 0
    tagged_fields: Mapping[int, bytes] = field(default_factory=dict)


def classic_header_versions(api_key: int, api_version: int) -> tuple[int, int]:
    """Non-flexible APIs: request header v1, response header v0."""
    return 1, 0


def flexible_header_versions(is_flexible: Callable[[int, int], bool]) -> HeaderVersions:
    """Header versions from a flexibility predicate: v2/v1 when flexible, else v1/v0, with the
    ApiVersions exception (its response header is always v0)."""

    def versions(api_key: int, api_version: int) -> tuple[int, int]:
        if is_flexible(api_key, api_version):
            return 2, 0 if api_key == API_VERSIONS_KEY else 1
        return 1, 0

    return versions


def _check_request_hv(v: int) -> None:
    if v not in (0, 1, 2):
        raise ValueError(f"unknown request header version {v}")


def _check_response_hv(v: int) -> None:
    if v not in (0, 1):
        raise ValueError(f"unknown response header version {v}")


# --- encoding -------------------------------------------------------------------------------------


def encode_request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None = None,
    *,
    header_version: int = 1,
    tagged_fields: Mapping[int, bytes] | None = None,
) -> bytes:
    """The request header alone (no size prefix)."""
    _check_request_hv(header_version)
    w = Writer()
    w.write_int16(api_key).write_int16(api_version).write_int32(correlation_id)
    if header_version >= 1:
        w.write_nullable_string(client_id)
    if header_version >= 2:
        w.write_tagged_fields(tagged_fields)
    return w.getvalue()


def encode_response_header(
    correlation_id: int, *, header_version: int = 0, tagged_fields: Mapping[int, bytes] | None = None
) -> bytes:
    """The response header alone (no size prefix)."""
    _check_response_hv(header_version)
    if header_version == 0:
        return _I32.pack(correlation_id)
    return Writer(_I32.pack(correlation_id)).write_tagged_fields(tagged_fields).getvalue()


def _prefixed(header: bytes, body_len: int, max_bytes: int | None) -> bytes:
    size = len(header) + body_len
    if size > 0x7FFFFFFF or (max_bytes is not None and size > max_bytes):
        raise ValueError(f"frame of {size} bytes exceeds the maximum {max_bytes or 0x7FFFFFFF}")
    return _SIZE.pack(size) + header


def request_frame_parts(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: bytes | bytearray | memoryview,
    *,
    client_id: str | None = None,
    header_version: int = 1,
    tagged_fields: Mapping[int, bytes] | None = None,
    max_bytes: int | None = None,
) -> tuple[bytes, bytes | bytearray | memoryview]:
    """(size prefix + header, body): write both with `writelines` to avoid copying the body."""
    header = encode_request_header(
        api_key,
        api_version,
        correlation_id,
        client_id,
        header_version=header_version,
        tagged_fields=tagged_fields,
    )
    return _prefixed(header, len(body), max_bytes), body


def response_frame_parts(
    correlation_id: int,
    body: bytes | bytearray | memoryview,
    *,
    header_version: int = 0,
    tagged_fields: Mapping[int, bytes] | None = None,
    max_bytes: int | None = None,
) -> tuple[bytes, bytes | bytearray | memoryview]:
    """(size prefix + header, body): write both with `writelines` to avoid copying the body."""
    header = encode_response_header(correlation_id, header_version=header_version, tagged_fields=tagged_fields)
    return _prefixed(header, len(body), max_bytes), body


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: bytes | bytearray | memoryview = b"",
    *,
    client_id: str | None = None,
    header_version: int = 1,
    tagged_fields: Mapping[int, bytes] | None = None,
) -> bytes:
    """A complete request frame, size prefix included."""
    head, body = request_frame_parts(
        api_key,
        api_version,
        correlation_id,
        body,
        client_id=client_id,
        header_version=header_version,
        tagged_fields=tagged_fields,
    )
    return head + bytes(body)


def encode_response(
    correlation_id: int,
    body: bytes | bytearray | memoryview = b"",
    *,
    header_version: int = 0,
    tagged_fields: Mapping[int, bytes] | None = None,
) -> bytes:
    """A complete response frame, size prefix included."""
    head, body = response_frame_parts(correlation_id, body, header_version=header_version, tagged_fields=tagged_fields)
    return head + bytes(body)


# --- decoding (of one frame's payload, without its size prefix) -----------------------------------


def decode_request_header(reader: Reader, header_versions: HeaderVersions | int = 1) -> RequestHeader:
    """Read a request header from `reader`. `header_versions` is a fixed request header version
    or a `HeaderVersions` callable; an exception from that callable propagates unchanged."""
    try:
        api_key = reader.read_int16()
        api_version = reader.read_int16()
        if isinstance(header_versions, int):
            hv = header_versions
        else:
            hv = header_versions(api_key, api_version)[0]
        _check_request_hv(hv)
        correlation_id = reader.read_int32()
        client_id = reader.read_nullable_string() if hv >= 1 else None
        tags = reader.read_tagged_fields() if hv >= 2 else {}
    except FrameError:
        raise
    except DecodeError as e:
        raise FrameError(f"malformed request header: {e}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, hv, tags)


def decode_request(
    frame: bytes | bytearray | memoryview, header_versions: HeaderVersions | int = 1
) -> tuple[RequestHeader, memoryview]:
    """Split a request frame's payload into (header, body view)."""
    r = Reader(frame)
    header = decode_request_header(r, header_versions)
    return header, r.read_rest()


def decode_response(
    frame: bytes | bytearray | memoryview, header_version: int = 0
) -> tuple[ResponseHeader, memoryview]:
    """Split a response frame's payload into (header, body view)."""
    _check_response_hv(header_version)
    r = Reader(frame)
    try:
        correlation_id = r.read_int32()
        tags = r.read_tagged_fields() if header_version >= 1 else {}
    except DecodeError as e:
        raise FrameError(f"malformed response header: {e}") from None
    return ResponseHeader(correlation_id, header_version, tags), r.read_rest()


def peek_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id of a response frame's payload (its first four bytes)."""
    if len(frame) < 4:
        raise FrameError(f"response frame of {len(frame)} bytes is too short for a correlation id")
    return _I32.unpack_from(frame, 0)[0]


# --- stream decoder -------------------------------------------------------------------------------


class FrameDecoder:
    """Incremental splitter of a size-prefixed byte stream into frame payloads.

    `feed(data)` returns every frame completed by `data` (possibly none). A size prefix that is
    negative or above `max_bytes` raises `FrameError` as soon as its four bytes are seen, before
    any of the frame is buffered; the decoder is then unusable (the stream cannot be resynced).
    Memory held is at most the current frame's bytes received so far.
    """

    __slots__ = ("max_bytes", "_prefix", "_size", "_buf", "_failed")

    def __init__(self, max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._prefix = bytearray()
        self._size: int | None = None
        self._buf = bytearray()
        self._failed: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for the frame in progress (prefix included)."""
        return len(self._prefix) + len(self._buf) + (4 if self._size is not None else 0)

    @property
    def expected(self) -> int | None:
        """Declared size of the frame in progress, once its prefix is complete."""
        return self._size

    def in_frame(self) -> bool:
        """True if a partial frame (or partial size prefix) is pending."""
        return self._size is not None or bool(self._prefix)

    def check_eof(self) -> None:
        """Raise `FrameError` if the stream ended in the middle of a frame."""
        if self._size is not None:
            raise FrameError(f"stream ended inside a frame: got {len(self._buf)} of {self._size} bytes")
        if self._prefix:
            raise FrameError(f"stream ended inside a size prefix ({len(self._prefix)} of 4 bytes)")

    def _check_size(self, size: int) -> None:
        if size < 0:
            err = FrameError(f"invalid frame size {size} (negative)")
        elif self.max_bytes is not None and size > self.max_bytes:
            err = FrameError(f"frame size {size} larger than the maximum {self.max_bytes}")
        else:
            return
        self._failed = err
        self._prefix.clear()
        self._buf = bytearray()
        raise err

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._failed is not None:
            raise FrameError(f"decoder already failed: {self._failed}")
        mv = data if isinstance(data, memoryview) else memoryview(data)
        n = len(mv)
        i = 0
        frames: list[bytes] = []
        while i < n:
            size = self._size
            if size is None:
                if not self._prefix and n - i >= 4:
                    size = _SIZE.unpack_from(mv, i)[0]
                    i += 4
                else:
                    take = min(4 - len(self._prefix), n - i)
                    self._prefix += mv[i : i + take]
                    i += take
                    if len(self._prefix) < 4:
                        break
                    size = _SIZE.unpack(self._prefix)[0]
                    self._prefix.clear()
                self._check_size(size)
                self._size = size
            have = len(self._buf)
            if have == 0 and n - i >= size:
                frames.append(mv[i : i + size].tobytes())
                i += size
                self._size = None
                continue
            take = min(size - have, n - i)
            self._buf += mv[i : i + take]
            i += take
            if len(self._buf) == size:
                frames.append(bytes(self._buf))
                self._buf = bytearray()
                self._size = None
        return frames
