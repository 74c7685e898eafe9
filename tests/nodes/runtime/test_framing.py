"""Request/response framing and the incremental frame decoder."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.runtime.framing import (
    API_VERSIONS_KEY,
    FrameDecoder,
    FrameError,
    RequestHeader,
    ResponseHeader,
    classic_header_versions,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    flexible_header_versions,
    peek_correlation_id,
    request_frame_parts,
)

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
tags = st.dictionaries(st.integers(0, 1000), st.binary(max_size=10), max_size=3)


def _payload(frame: bytes) -> bytes:
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return frame[4:]


@settings(max_examples=200, deadline=None)
@given(
    int16,
    int16,
    int32,
    st.none() | st.text(max_size=30),
    st.sampled_from([0, 1, 2]),
    tags,
    st.binary(max_size=200),
)
def test_request_round_trip(api_key, api_version, corr, client_id, hv, tagged, body) -> None:
    frame = encode_request(
        api_key, api_version, corr, body, client_id=client_id, header_version=hv, tagged_fields=tagged
    )
    header, got = decode_request(_payload(frame), hv)
    assert header == RequestHeader(
        api_key,
        api_version,
        corr,
        client_id if hv >= 1 else None,
        hv,
        tagged if hv >= 2 else {},
    )
    assert got == body


@settings(max_examples=200, deadline=None)
@given(int32, st.sampled_from([0, 1]), tags, st.binary(max_size=200))
def test_response_round_trip(corr, hv, tagged, body) -> None:
    frame = encode_response(corr, body, header_version=hv, tagged_fields=tagged)
    payload = _payload(frame)
    assert peek_correlation_id(payload) == corr
    header, got = decode_response(payload, hv)
    assert header == ResponseHeader(corr, hv, tagged if hv else {})
    assert got == body


def test_known_request_bytes() -> None:
    frame = encode_request(API_VERSIONS_KEY, 0, 1, b"", client_id="a")
    assert frame == b"\x00\x00\x00\x0b" + b"\x00\x12" + b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01a"
    flex = encode_request(API_VERSIONS_KEY, 3, 1, b"\x00", client_id=None, header_version=2)
    assert flex == b"\x00\x00\x00\x0c\x00\x12\x00\x03\x00\x00\x00\x01\xff\xff\x00\x00"


def test_header_version_hooks() -> None:
    versions = flexible_header_versions(lambda key, version: version >= 3)
    assert versions(API_VERSIONS_KEY, 3) == (2, 0)  # KIP-511: ApiVersions responses stay v0
    assert versions(1, 12) == (2, 1)
    assert versions(1, 2) == classic_header_versions(1, 2) == (1, 0)
    frame = encode_request(1, 12, 7, b"body", client_id="c", header_version=2, tagged_fields={0: b"x"})
    header, body = decode_request(_payload(frame), versions)
    assert header.header_version == 2 and header.tagged_fields == {0: b"x"} and body == b"body"


@pytest.mark.parametrize(
    ("payload", "hv"),
    [
        (b"", 1),
        (b"\x00\x01\x00", 1),
        (b"\x00\x01\x00\x00\x00\x00\x00", 0),
        (b"\x00\x01\x00\x00\x00\x00\x00\x01", 1),  # client id length missing
        (b"\x00\x01\x00\x00\x00\x00\x00\x01\x00\x05ab", 1),  # client id shorter than declared
        (b"\x00\x01\x00\x00\x00\x00\x00\x01\xff\xff", 2),  # tagged fields missing
        (b"\x00\x01\x00\x00\x00\x00\x00\x01\xff\xfe", 1),  # invalid nullable length
    ],
)
def test_truncated_or_malformed_request_header(payload: bytes, hv: int) -> None:
    with pytest.raises(FrameError, match="malformed request header"):
        decode_request(payload, hv)


def test_truncated_response_header() -> None:
    with pytest.raises(FrameError):
        decode_response(b"\x00\x00\x01", 0)
    with pytest.raises(FrameError):
        decode_response(b"\x00\x00\x00\x01", 1)
    with pytest.raises(FrameError):
        peek_correlation_id(b"\x00")


def _stream(bodies: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=12), st.data())
def test_decoder_yields_same_frames_for_any_split(bodies: list[bytes], data: st.DataObject) -> None:
    stream = _stream(bodies)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    dec = FrameDecoder(max_bytes=300)
    out: list[bytes] = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        out.extend(dec.feed(stream[prev:cut]))
        prev = cut
        assert dec.buffered <= 304
    assert out == bodies
    assert not dec.in_frame()
    dec.check_eof()


def test_decoder_byte_at_a_time_and_zero_size_frames() -> None:
    stream = _stream([b"", b"abc", b""])
    dec = FrameDecoder()
    out = [f for i in range(len(stream)) for f in dec.feed(stream[i : i + 1])]
    assert out == [b"", b"abc", b""]


@pytest.mark.parametrize("size", [1001, 2**31 - 1])
def test_oversize_prefix_rejected_before_buffering(size: int) -> None:
    dec = FrameDecoder(max_bytes=1000)
    with pytest.raises(FrameError, match=f"frame size {size} larger than the maximum 1000"):
        dec.feed(struct.pack(">i", size) + b"x" * 500)
    assert dec.buffered == 0
    with pytest.raises(FrameError, match="already failed"):
        dec.feed(b"more")


def test_oversize_prefix_split_across_feeds() -> None:
    dec = FrameDecoder(max_bytes=10)
    prefix = struct.pack(">i", 11)
    assert dec.feed(prefix[:3]) == []
    with pytest.raises(FrameError, match="larger than the maximum"):
        dec.feed(prefix[3:] + b"y" * 11)
    assert dec.buffered == 0


def test_negative_prefix_rejected() -> None:
    dec = FrameDecoder(max_bytes=None)
    with pytest.raises(FrameError, match="negative"):
        dec.feed(struct.pack(">i", -1))


def test_decoder_refuses_to_continue_after_an_error() -> None:
    dec = FrameDecoder(max_bytes=10)
    with pytest.raises(FrameError):
        dec.feed(_stream([b"ok"]) + struct.pack(">i", 99))
    # The caller closes the connection on error, so the good frame's loss is by design; what
    # matters is that the decoder refuses to continue.
    with pytest.raises(FrameError):
        dec.feed(b"")


def test_check_eof_reports_partial_frames() -> None:
    dec = FrameDecoder()
    dec.feed(b"\x00\x00")
    with pytest.raises(FrameError, match="size prefix"):
        dec.check_eof()
    dec.feed(b"\x00\x05ab")
    assert dec.expected == 5 and dec.in_frame()
    with pytest.raises(FrameError, match="got 2 of 5"):
        dec.check_eof()


def test_frame_parts_respect_max_bytes() -> None:
    head, body = request_frame_parts(0, 0, 1, b"x" * 100, client_id=None)
    assert head[:4] == struct.pack(">i", 10 + 100) and body == b"x" * 100
    with pytest.raises(ValueError, match="exceeds"):
        request_frame_parts(0, 0, 1, b"x" * 100, max_bytes=50)
