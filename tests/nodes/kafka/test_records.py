"""Record batch v2: round trips, header helpers, in-place rewrites, validation and fuzzing."""

from __future__ import annotations

import contextlib
import gzip
import struct

import crc32c as reference
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.kafka import records as R
from nodes.kafka.errors import ErrorCode
from nodes.runtime.primitives import DecodeError

from .strategies import batches

BATCHES = settings(max_examples=60, deadline=None)  # each example builds and encodes whole batches


def _recrc(buf: bytearray, pos: int = 0) -> None:
    """Recompute the CRC of the batch at `pos` (to test rules that lie under a valid CRC)."""
    size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
    struct.pack_into(">I", buf, pos + 17, reference.crc32c(bytes(buf[pos + 21 : pos + size])))


def _simple(n: int = 3, **kw) -> bytes:
    return R.encode_batch(R.build_batch([(b"k%d" % i, b"v%d" % i) for i in range(n)], timestamp=1_000, **kw))


# --- encoding / decoding ------------------------------------------------------------------------------


@BATCHES
@given(batches())
def test_round_trip(batch: R.RecordBatch) -> None:
    raw = R.encode_batch(batch)
    assert R.decode_batch(raw) == batch
    header = R.read_batch_header(raw)
    assert header.size == len(raw)
    assert header.crc == reference.crc32c(raw[21:])
    assert header.record_count == len(batch.records)
    assert (header.base_offset, header.partition_leader_epoch) == (batch.base_offset, batch.partition_leader_epoch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
    )
    assert R.validate_produce(raw) == header


def test_layout_of_a_known_batch() -> None:
    raw = R.encode_batch(R.build_batch([(b"k", b"v", [("h", b"x")])], timestamp=1000))
    assert raw[:8] == bytes(8)  # base offset
    assert struct.unpack_from(">i", raw, 8)[0] == len(raw) - 12
    assert struct.unpack_from(">i", raw, 12)[0] == -1  # partition leader epoch
    assert raw[16] == 2  # magic
    assert struct.unpack_from(">hiqq", raw, 21) == (0, 0, 1000, 1000)
    assert struct.unpack_from(">qhii", raw, 43) == (-1, -1, -1, 1)
    # record: len=12, attrs 0, ts delta 0, offset delta 0, key len 1 'k', value len 1 'v', 1 header 'h'='x'
    assert raw[61:] == bytes([24, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([2, 2]) + b"h" + bytes([2]) + b"x"


def test_build_batch_deltas_and_entries() -> None:
    batch = R.build_batch(
        [(b"a", b"1", (), 5_000), (None, None, [("t", None)], 5_010), (b"c", b"3")],
        timestamp=4_990,
        base_offset=40,
    )
    assert [r.offset_delta for r in batch.records] == [0, 1, 2]
    assert batch.base_timestamp == 5_000 and batch.max_timestamp == 5_010
    decoded = R.decode_batch(R.encode_batch(batch))
    assert list(decoded.entries()) == [
        (40, 5_000, b"a", b"1", ()),
        (41, 5_010, None, None, (("t", None),)),
        (42, 4_990, b"c", b"3", ()),
    ]
    assert (decoded.last_offset, decoded.next_offset, decoded.record_count) == (42, 43, 3)
    with pytest.raises(ValueError):
        R.build_batch([])


def test_header_keys_that_are_not_utf8_survive() -> None:
    rec = R.Record(0, 0, None, b"v", (("\udcff\udcfe", b"x"),))
    raw = R.encode_batch(R.RecordBatch(last_offset_delta=0, records=[rec]))
    assert R.decode_batch(raw).records == [rec]


@BATCHES
@given(batches(compression=st.just(R.Compression.GZIP)))
def test_gzip(batch: R.RecordBatch) -> None:
    raw = R.encode_batch(batch)
    assert R.read_batch_header(raw).compression == R.Compression.GZIP
    assert gzip.decompress(raw[61:])  # a real gzip stream
    assert R.decode_batch(raw) == batch
    R.validate_produce(raw)


def test_gzip_bomb_and_damage_are_refused() -> None:
    batch = R.build_batch([(None, bytes(100_000))], compression=R.Compression.GZIP)
    raw = R.encode_batch(batch)
    with pytest.raises(R.CorruptRecordError, match="inflates beyond"):
        R.decode_batch(raw, max_decompressed=10_000)
    buf = bytearray(raw[:-6])  # cut the gzip trailer, fix up the length and CRC
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    _recrc(buf)
    with pytest.raises(R.CorruptRecordError, match="truncated"):
        R.decode_batch(bytes(buf))
    buf = bytearray(raw)
    buf[61:63] = b"xx"  # not a gzip header
    _recrc(buf)
    with pytest.raises(R.CorruptRecordError, match="gzip"):
        R.decode_batch(bytes(buf))


@pytest.mark.parametrize("codec", [R.Compression.SNAPPY, R.Compression.LZ4, R.Compression.ZSTD])
def test_other_codecs_are_unsupported(codec: R.Compression) -> None:
    buf = bytearray(_simple())
    struct.pack_into(">h", buf, 21, int(codec))
    _recrc(buf)
    with pytest.raises(R.UnsupportedCompressionError) as e:
        R.validate_produce(bytes(buf))
    assert e.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE == 76
    with pytest.raises(R.UnsupportedCompressionError):
        R.decode_batch(bytes(buf))
    with pytest.raises(R.UnsupportedCompressionError):
        R.encode_batch(R.RecordBatch(attributes=int(codec)))
    struct.pack_into(">h", buf, 21, 5)  # no such codec
    _recrc(buf)
    with pytest.raises(R.CorruptRecordError, match="unknown compression"):
        R.decode_batch(bytes(buf))


# --- headers, concatenation and in-place rewrites -----------------------------------------------------


@BATCHES
@given(st.lists(batches(), min_size=1, max_size=4), st.integers(0, 60))
def test_concatenated_batches_and_partial_tail(bs: list[R.RecordBatch], cut: int) -> None:
    raws = [R.encode_batch(b) for b in bs]
    payload = b"".join(raws)
    assert list(R.iter_batches(payload)) == bs
    positions = [pos for pos, _ in R.iter_batch_headers(payload)]
    assert positions == [sum(len(r) for r in raws[:i]) for i in range(len(raws))]
    # a Fetch payload cut inside the last batch: the complete ones still decode
    truncated = payload[: len(payload) - 1 - cut % len(raws[-1])]
    assert list(R.iter_batches(truncated)) == bs[:-1]
    with pytest.raises(R.CorruptRecordError):
        list(R.iter_batches(truncated, allow_partial_tail=False))
    with pytest.raises(R.CorruptRecordError):
        R.validate_batches(truncated)
    assert R.validate_batches(payload) == [R.read_batch_header(r) for r in raws]


def test_set_offsets_and_epoch_in_place_keeps_crc_valid() -> None:
    raw = _simple(3)
    buf = bytearray(raw)
    R.set_base_offset(buf, 1234)
    R.set_partition_leader_epoch(buf, 7)
    header = R.read_batch_header(buf)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (1234, 7, R.read_batch_header(raw).crc)
    assert (header.last_offset, header.next_offset) == (1236, 1237)
    assert R.decode_batch(bytes(buf)).base_offset == 1234  # CRC still verifies

    two = raw + _simple(2)
    stamped = R.stamp_batch(two, 100, 9)
    assert [(h.base_offset, h.partition_leader_epoch) for _, h in R.iter_batch_headers(stamped)] == [(100, 9), (103, 9)]
    assert [b.next_offset for b in R.iter_batches(stamped)] == [103, 105]
    for pos, h in R.iter_batch_headers(two):  # everything from the magic byte on is untouched
        assert stamped[pos + 16 : pos + h.size] == two[pos + 16 : pos + h.size]


def test_header_properties() -> None:
    raw = _simple(4, producer_id=77, producer_epoch=3, base_sequence=(1 << 31) - 2, transactional=True)
    h = R.read_batch_header(raw)
    assert h.has_producer_id and h.is_transactional and not h.is_control
    assert h.last_sequence == 1  # wraps at 2**31
    assert h.timestamp_type == 0
    assert R.read_batch_header(_simple(1, log_append_time=True)).timestamp_type == 1


# --- validation errors ---------------------------------------------------------------------------------


def test_bad_crc_is_corrupt_message() -> None:
    raw = _simple()
    buf = bytearray(raw)
    buf[-2] ^= 0x01  # a byte of the last value
    with pytest.raises(R.CorruptRecordError, match="CRC mismatch") as e:
        R.validate_produce(bytes(buf))
    assert e.value.error_code == ErrorCode.CORRUPT_MESSAGE == 2
    with pytest.raises(R.CorruptRecordError):
        R.decode_batch(bytes(buf))
    assert R.decode_batch(bytes(buf), verify_crc=False).records[-1].value == b"v3"  # parses when asked not to check


@BATCHES
@given(batches(), st.data())
def test_any_flip_under_the_crc_is_detected(batch: R.RecordBatch, data: st.DataObject) -> None:
    buf = bytearray(R.encode_batch(batch))
    i = data.draw(st.integers(21, len(buf) - 1))
    buf[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(R.CorruptRecordError):
        R.validate_produce(bytes(buf))


@pytest.mark.parametrize(
    ("mutate", "error", "match"),
    [
        (lambda b: b.__setitem__(16, 1), R.InvalidRecordError, "magic"),
        (lambda b: b.__setitem__(16, 0), R.InvalidRecordError, "magic"),
        (lambda b: b.__setitem__(16, 3), R.CorruptRecordError, "magic"),
        (lambda b: struct.pack_into(">i", b, 8, 10), R.CorruptRecordError, "minimum"),
        (lambda b: struct.pack_into(">i", b, 8, len(b)), R.CorruptRecordError, "remain"),
    ],
)
def test_header_level_errors(mutate, error, match) -> None:
    buf = bytearray(_simple())
    mutate(buf)
    with pytest.raises(error, match=match):
        R.validate_produce(bytes(buf))


def _rule_breaker(**changes) -> bytes:
    recs = changes.pop("records", None)
    batch = R.build_batch([(b"k", b"a"), (b"k", b"b"), (b"k", b"c")])
    if recs is not None:
        batch.records = recs
    for k, v in changes.items():
        setattr(batch, k, v)
    return R.encode_batch(batch)


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (_rule_breaker(last_offset_delta=5), "does not match last offset delta"),
        (_rule_breaker(last_offset_delta=-1), "invalid offset range"),
        (_rule_breaker(records=[R.Record(d, 0, None, b"x") for d in (0, 2, 1)]), "offset delta 2, expected 1"),
        (_rule_breaker(attributes=0x20), "control batch"),
        (_rule_breaker(producer_id=5, producer_epoch=0, base_sequence=-1), "no base sequence"),
    ],
)
def test_rule_violations_are_invalid_record(raw: bytes, match: str) -> None:
    with pytest.raises(R.InvalidRecordError, match=match) as e:
        R.validate_produce(raw)
    assert e.value.error_code == ErrorCode.INVALID_RECORD == 87


def test_record_count_disagreeing_with_records() -> None:
    buf = bytearray(_simple(3))
    struct.pack_into(">i", buf, 57, 2)  # count 2 (and last offset delta 1) but three records
    struct.pack_into(">i", buf, 23, 1)
    _recrc(buf)
    with pytest.raises(R.InvalidRecordError, match="left after 2 record"):
        R.validate_produce(bytes(buf))
    struct.pack_into(">i", buf, 57, 1_000_000)
    struct.pack_into(">i", buf, 23, 999_999)
    _recrc(buf)
    with pytest.raises(R.InvalidRecordError, match="impossible"):
        R.validate_produce(bytes(buf))
    struct.pack_into(">i", buf, 57, -3)
    _recrc(buf)
    with pytest.raises(R.CorruptRecordError, match="negative record count"):
        R.decode_batch(bytes(buf))


def test_produce_needs_exactly_one_batch() -> None:
    with pytest.raises(R.InvalidRecordError, match="exactly one"):
        R.validate_produce(_simple() + _simple())
    with pytest.raises(R.InvalidRecordError, match="null"):
        R.validate_produce(None)
    with pytest.raises(R.CorruptRecordError, match="empty"):
        R.validate_produce(b"")
    with pytest.raises(R.CorruptRecordError, match="too short"):
        R.validate_produce(_simple() + b"\x00" * 10)


# --- fuzzing ---------------------------------------------------------------------------------------


@given(st.binary(max_size=200))
def test_random_bytes_only_raise_record_errors(data: bytes) -> None:
    for fn in (R.decode_batch, R.validate_batches, lambda d: list(R.iter_batches(d)), R.read_batch_header):
        with contextlib.suppress(R.RecordError):
            fn(data)


@BATCHES
@given(batches(), st.data())
def test_damaged_records_under_a_valid_crc_only_raise_record_errors(batch: R.RecordBatch, data: st.DataObject) -> None:
    buf = bytearray(R.encode_batch(batch))
    for _ in range(data.draw(st.integers(1, 4))):
        buf[data.draw(st.integers(21, len(buf) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        cut = data.draw(st.integers(61, len(buf)))
        del buf[cut:]
        struct.pack_into(">i", buf, 8, len(buf) - 12)
    _recrc(buf)
    for fn in (R.decode_batch, R.validate_produce):
        try:
            fn(bytes(buf))
        except R.RecordError as e:
            assert isinstance(e, DecodeError)
            assert e.error_code in (2, 76, 87)
