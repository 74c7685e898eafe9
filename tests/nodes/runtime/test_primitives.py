"""Kafka primitive types: round trips, known encodings, truncation and invalid input."""

from __future__ import annotations

import math
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.runtime.primitives import (
    DecodeError,
    Reader,
    Writer,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    encode_varlong,
    sizeof_uvarint,
    sizeof_varint,
    sizeof_varlong,
    unzigzag,
    zigzag32,
    zigzag64,
)

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=40)
blob = st.binary(max_size=60)
tags = st.dictionaries(st.integers(0, 2**32 - 1), st.binary(max_size=20), max_size=5)

# name -> (value strategy, write(w, v), read(r))
TYPES = {
    "int8": (st.integers(-128, 127), Writer.write_int8, Reader.read_int8),
    "uint8": (st.integers(0, 255), Writer.write_uint8, Reader.read_uint8),
    "int16": (st.integers(-(2**15), 2**15 - 1), Writer.write_int16, Reader.read_int16),
    "uint16": (st.integers(0, 2**16 - 1), Writer.write_uint16, Reader.read_uint16),
    "int32": (int32, Writer.write_int32, Reader.read_int32),
    "uint32": (st.integers(0, 2**32 - 1), Writer.write_uint32, Reader.read_uint32),
    "int64": (int64, Writer.write_int64, Reader.read_int64),
    "float64": (st.floats(allow_nan=False), Writer.write_float64, Reader.read_float64),
    "boolean": (st.booleans(), Writer.write_boolean, Reader.read_boolean),
    "uuid": (st.uuids(), Writer.write_uuid, Reader.read_uuid),
    "uvarint": (st.integers(0, 2**32 - 1), Writer.write_uvarint, Reader.read_uvarint),
    "uvarlong": (st.integers(0, 2**64 - 1), Writer.write_uvarlong, Reader.read_uvarlong),
    "varint": (int32, Writer.write_varint, Reader.read_varint),
    "varlong": (int64, Writer.write_varlong, Reader.read_varlong),
    "string": (text, Writer.write_string, Reader.read_string),
    "nullable_string": (st.none() | text, Writer.write_nullable_string, Reader.read_nullable_string),
    "compact_string": (text, Writer.write_compact_string, Reader.read_compact_string),
    "compact_nullable_string": (
        st.none() | text,
        Writer.write_compact_nullable_string,
        Reader.read_compact_nullable_string,
    ),
    "bytes": (blob, Writer.write_bytes, Reader.read_bytes),
    "nullable_bytes": (st.none() | blob, Writer.write_nullable_bytes, Reader.read_nullable_bytes),
    "compact_bytes": (blob, Writer.write_compact_bytes, Reader.read_compact_bytes),
    "compact_nullable_bytes": (
        st.none() | blob,
        Writer.write_compact_nullable_bytes,
        Reader.read_compact_nullable_bytes,
    ),
    "array_int32": (
        st.lists(int32, max_size=8),
        lambda w, v: w.write_array(v, Writer.write_int32),
        lambda r: r.read_array(Reader.read_int32),
    ),
    "nullable_array_string": (
        st.none() | st.lists(text, max_size=5),
        lambda w, v: w.write_nullable_array(v, Writer.write_string),
        lambda r: r.read_nullable_array(Reader.read_string),
    ),
    "compact_array_varlong": (
        st.lists(int64, max_size=8),
        lambda w, v: w.write_compact_array(v, Writer.write_varlong),
        lambda r: r.read_compact_array(Reader.read_varlong),
    ),
    "compact_nullable_array_bytes": (
        st.none() | st.lists(blob, max_size=4),
        lambda w, v: w.write_compact_nullable_array(v, Writer.write_compact_bytes),
        lambda r: r.read_compact_nullable_array(Reader.read_compact_bytes),
    ),
    "tagged_fields": (tags, Writer.write_tagged_fields, Reader.read_tagged_fields),
}

fields = st.lists(
    st.sampled_from(sorted(TYPES)).flatmap(lambda name: st.tuples(st.just(name), TYPES[name][0])),
    min_size=1,
    max_size=12,
)


def _encode(items: list[tuple[str, object]]) -> bytes:
    w = Writer()
    for name, value in items:
        TYPES[name][1](w, value)
    return w.getvalue()


def _decode(data: bytes, names: list[str]) -> list[object]:
    r = Reader(data)
    out = [TYPES[name][2](r) for name in names]
    r.expect_end()
    return out


@settings(max_examples=300, deadline=None)
@given(fields)
def test_round_trip_of_any_sequence_of_types(items: list[tuple[str, object]]) -> None:
    data = _encode(items)
    assert _decode(data, [n for n, _ in items]) == [v for _, v in items]


@settings(max_examples=200, deadline=None)
@given(fields, st.data())
def test_every_truncation_raises_decode_error(items: list[tuple[str, object]], data: st.DataObject) -> None:
    encoded = _encode(items)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(DecodeError):
        _decode(encoded[:cut], [n for n, _ in items])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=10))
def test_garbage_only_ever_raises_decode_error(garbage: bytes, names: list[str]) -> None:
    r = Reader(garbage)
    try:
        for name in names:
            TYPES[name][2](r)
    except DecodeError:
        pass


@given(int32)
def test_varint_helpers_agree_with_reader_and_sizes(v: int) -> None:
    enc = encode_varint(v)
    assert len(enc) == sizeof_varint(v) == sizeof_uvarint(zigzag32(v))
    assert decode_varint(enc) == (v, len(enc))
    assert unzigzag(zigzag32(v)) == v


@given(int64)
def test_varlong_helpers(v: int) -> None:
    enc = encode_varlong(v)
    assert len(enc) == sizeof_varlong(v)
    assert decode_varlong(enc + b"\x00") == (v, len(enc))
    assert unzigzag(zigzag64(v)) == v


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"), (-65, b"\x81\x01")],
)
def test_known_zigzag_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert encode_varlong(value) == encoded


def test_known_fixed_and_string_encodings() -> None:
    w = Writer()
    w.write_int16(1).write_int32(-2).write_string("ab").write_nullable_string(None)
    w.write_compact_string("ab").write_compact_nullable_string(None).write_uvarint(300)
    w.write_tagged_fields({})
    assert w.getvalue() == (
        b"\x00\x01" + b"\xff\xff\xff\xfe" + b"\x00\x02ab" + b"\xff\xff" + b"\x03ab" + b"\x00" + b"\xac\x02" + b"\x00"
    )


def test_uuid_and_float_specials() -> None:
    u = uuid.uuid4()
    w = Writer().write_uuid(u).write_uuid(u.bytes).write_float64(math.inf)
    r = Reader(w.getvalue())
    assert r.read_uuid() == u and r.read_uuid() == u and r.read_float64() == math.inf


@pytest.mark.parametrize(
    ("data", "read", "message"),
    [
        (b"\xff\xff\xff\xff\xff\x01", Reader.read_uvarint, "longer than 5"),
        (b"\xff\xff\xff\xff\x7f", Reader.read_uvarint, "32 bits"),
        (b"\x80", Reader.read_varint, "truncated varint"),
        (b"\xff" * 10 + b"\x01", Reader.read_varlong, "longer than 10"),
        (b"\xff\xff", Reader.read_string, "length -1"),
        (b"\xff\xfe", Reader.read_nullable_string, "invalid length -2"),
        (b"\x00\x02\xc3\x28", Reader.read_string, "UTF-8"),
        (b"\x00", Reader.read_compact_string, "null"),
        (b"\x00\x05ab", Reader.read_string, "need 5"),
        (b"\xff\xff\xff\xff", Reader.read_bytes, "length -1"),
        (b"\x00", Reader.read_compact_bytes, "null"),
        (b"\x00\x00\x00\x01\x02", Reader.read_int64, "int64"),
        (b"", Reader.read_int8, "int8"),
        (b"\x01\x02\x03", Reader.read_uuid, "uuid"),
        (b"\x02\x05\x00\x03\x00", Reader.read_tagged_fields, "out of order"),
        (b"\x01\x00\x09ab", Reader.read_tagged_fields, "tagged field 0"),
    ],
)
def test_invalid_input_raises_clear_decode_error(data: bytes, read, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        read(Reader(data))


def test_huge_array_count_is_refused_before_allocating() -> None:
    data = b"\x7f\xff\xff\xff" + b"\x00" * 8
    with pytest.raises(DecodeError, match="2147483647 element"):
        Reader(data).read_array(Reader.read_int8)
    with pytest.raises(DecodeError, match="element"):
        Reader(encode_uvarint(2**32 - 1)).read_compact_array(Reader.read_int8)
    with pytest.raises(DecodeError, match="field"):
        Reader(encode_uvarint(2**31)).read_tagged_fields()


def test_reader_views_offsets_and_trailing_bytes() -> None:
    data = bytearray(Writer().write_bytes(b"hello").write_int8(7).getvalue())
    r = Reader(memoryview(data), offset=0, end=9)
    view = r.read_bytes(view=True)
    assert isinstance(view, memoryview) and view == b"hello"
    assert r.remaining == 0 and r.at_end()
    r2 = Reader(data)
    r2.read_bytes()
    with pytest.raises(DecodeError, match="trailing"):
        r2.expect_end()
    assert r2.read_rest() == b"\x07"
    with pytest.raises(DecodeError, match="truncated"):
        Reader(b"abc").read_raw(4)


@pytest.mark.parametrize(
    "write",
    [
        lambda w: w.write_int8(128),
        lambda w: w.write_int16(-(2**15) - 1),
        lambda w: w.write_int32(2**31),
        lambda w: w.write_int64(2**63),
        lambda w: w.write_uint32(-1),
        lambda w: w.write_uvarint(2**32),
        lambda w: w.write_uvarint(-1),
        lambda w: w.write_varint(2**31),
        lambda w: w.write_varlong(-(2**63) - 1),
        lambda w: w.write_string("x" * 40000),
        lambda w: w.write_uuid(b"short"),
    ],
)
def test_writer_rejects_out_of_range_values(write) -> None:
    with pytest.raises(ValueError):
        write(Writer())


def test_writer_reserve_and_patch() -> None:
    w = Writer()
    pos = w.reserve(4)
    w.write_string("payload")
    w.patch_int32(pos, len(w) - 4)
    r = Reader(w.getvalue())
    assert r.read_int32() == 9 and r.read_string() == "payload"
    with pytest.raises(ValueError):
        w.patch_int32(len(w) - 2, 1)
