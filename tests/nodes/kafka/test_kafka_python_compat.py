"""Cross-checks against kafka-python's own protocol classes and record batch code (tests only)."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodes.kafka import protocol as P
from nodes.kafka import records as R
from nodes.kafka.protocol import (
    SUPPORTED,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    Message,
    MetadataRequest,
    MetadataRequestTopic,
    ProduceRequest,
)
from nodes.kafka.protocol import schema as S
from nodes.runtime import framing

from .kp_convert import from_kp, kp_class, to_kp
from .strategies import all_message_versions, batches, message_instances

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.broker_version_data import BrokerVersionData
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

CASES = all_message_versions()
IDS = [f"{cls.__name__}-v{v}" for cls, v in CASES]


def strip_unknown_tags(obj):
    """kafka-python does not carry unknown tags through its constructors: drop them."""
    if isinstance(obj, list):
        return [strip_unknown_tags(x) for x in obj]
    if isinstance(obj, S.Struct):
        changes = {
            spec.name: strip_unknown_tags(getattr(obj, spec.name))
            for spec in S.field_specs(type(obj))
            if isinstance(getattr(obj, spec.name), list | S.Struct)
        }
        return dataclasses.replace(obj, unknown_tags={}, **changes)
    return obj


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_bytes_as_kafka_python(cls: type[Message], version: int, data: st.DataObject) -> None:
    msg = strip_unknown_tags(data.draw(message_instances(cls, version)))
    ours = msg.encode(version)
    normalized = cls.decode(ours, version)  # fields outside `version` back to defaults

    theirs = to_kp(msg, version).encode()
    assert theirs == ours  # kafka-python encodes exactly what we encode
    assert cls.decode(theirs, version) == normalized  # kafka-python → ours

    if cls is ApiVersionsResponse and msg.error_code != 0:
        return  # kafka-python reads any ApiVersions error reply as v0 (so we only send those in v0)
    kp_cls = kp_class(cls)[version]
    assert from_kp(kp_cls.decode(ours), cls, version) == normalized  # ours → kafka-python


# --- frames and headers ---------------------------------------------------------------------------


def test_request_frames_from_kafka_python_decode_with_ours() -> None:
    kp = kp_class(MetadataRequest)[12](
        topics=[kp_class(MetadataRequest).MetadataRequestTopic(name="t0")], allow_auto_topic_creation=False
    )
    kp.with_header(correlation_id=41, client_id="kp-client")
    frame = kp.encode(header=True, framed=True)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header, msg = P.decode_request_frame(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, 41, "kp-client")
    assert header.header_version == 2
    assert msg == MetadataRequest(topics=[MetadataRequestTopic(name="t0")], allow_auto_topic_creation=False)

    kp = kp_class(ProduceRequest)[7](acks=-1, timeout_ms=30_000, topic_data=[])
    kp.with_header(correlation_id=5, client_id=None)
    header, msg = P.decode_request_frame(kp.encode(header=True, framed=True)[4:])
    assert (header.header_version, header.client_id, msg.acks) == (1, None, -1)


@pytest.mark.parametrize(("msg", "version"), [(FetchResponse(throttle_time_ms=3), 12), (FetchResponse(), 11)])
def test_response_frames_from_ours_decode_with_kafka_python(msg: Message, version: int) -> None:
    frame = P.encode_response_frame(msg, version, correlation_id=99)
    kp_msg = kp_class(type(msg))[version].decode(frame, header=True, framed=True)
    assert kp_msg.header.correlation_id == 99
    assert kp_msg.throttle_time_ms == msg.throttle_time_ms


def test_api_versions_v3_uses_response_header_v0_and_kafka_python_agrees() -> None:
    frame = P.encode_response_frame(P.api_versions_response(), 3, correlation_id=1)
    kp_msg = kp_class(ApiVersionsResponse)[3].decode(frame, header=True, framed=True)
    assert {k.api_key: (k.min_version, k.max_version) for k in kp_msg.api_keys} == dict(SUPPORTED)


def test_downgrade_reply_is_understood_by_kafka_python() -> None:
    # kafka-python 3.x opens with ApiVersions v4; we answer in v0 with UNSUPPORTED_VERSION and our range
    kp = kp_class(ApiVersionsRequest)[4](client_software_name="kafka-python", client_software_version="3")
    kp.with_header(correlation_id=1, client_id="c")
    header, body = framing.decode_request(kp.encode(header=True, framed=True)[4:], P.header_versions)
    assert (header.api_version, header.header_version) == (4, 2)
    with pytest.raises(P.UnsupportedVersionError):
        P.decode_request(header.api_key, header.api_version, body)
    reply = P.unsupported_version_frame(header.correlation_id)
    kp_reply = kp_class(ApiVersionsResponse)[4].decode(reply, header=True, framed=True)
    assert kp_reply.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in kp_reply.api_keys] == [(18, 0, 3)]
    ours = ApiVersionsResponse.decode(reply[8:], 3)  # our client reads it as v0 too
    assert ours.error_code == 35 and ours.ranges() == {18: (0, 3)}


def test_kafka_python_infers_a_consistent_broker_version() -> None:
    bvd = BrokerVersionData(api_versions=P.api_versions_response().ranges())
    assert bvd.broker_version == (3, 0)
    # and the versions it would then use are our maxima
    for kp_cls, ours in ((kp_class(FetchRequest), 12), (kp_class(ProduceRequest), 9), (kp_class(MetadataRequest), 12)):
        assert bvd.api_version(kp_cls) == ours


# --- record batches -------------------------------------------------------------------------------

kp_records = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=10),
        st.none() | st.binary(max_size=30),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=6)), max_size=2),
        st.integers(0, 1 << 42),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=40, deadline=None)
@given(kp_records, st.sampled_from([0, 1]), st.sampled_from([(-1, -1, -1), (1234, 2, 17)]))
def test_kafka_python_batches_decode_with_ours(records, codec, producer) -> None:
    pid, epoch, seq = producer
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 20,
    )
    for i, (key, value, headers, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    raw = bytes(builder.build())
    header = R.validate_produce(raw)
    assert header.compression in (0, codec)  # kafka-python sends uncompressed when gzip does not help
    assert (header.record_count, header.producer_id, header.base_sequence) == (len(records), pid, seq)
    batch = R.decode_batch(raw)
    assert list(batch.entries()) == [
        (i, ts, key, value, tuple(headers)) for i, (key, value, headers, ts) in enumerate(records)
    ]
    assert batch.max_timestamp == max(r[3] for r in records)


def test_kafka_python_gzip_batch_decodes_with_ours() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=1,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(10):
        builder.append(i, timestamp=1_000 + i, key=None, value=b"value-%d-" % i + bytes(200), headers=[])
    raw = bytes(builder.build())
    assert R.validate_produce(raw).compression == R.Compression.GZIP
    assert [v for _, _, _, v, _ in R.decode_batch(raw).entries()] == [b"value-%d-" % i + bytes(200) for i in range(10)]


@settings(max_examples=40, deadline=None)
@given(st.lists(batches(), min_size=1, max_size=3))
def test_our_batches_decode_with_kafka_python(bs: list[R.RecordBatch]) -> None:
    payload = b"".join(R.encode_batch(b) for b in bs)
    memory = MemoryRecords(payload)
    for batch in bs:
        kp_batch = memory.next_batch()
        assert kp_batch.validate_crc()
        assert (kp_batch.base_offset, kp_batch.leader_epoch, kp_batch.last_offset_delta) == (
            batch.base_offset,
            batch.partition_leader_epoch,
            batch.last_offset_delta,
        )
        assert (kp_batch.producer_id, kp_batch.producer_epoch, kp_batch.base_sequence) == (
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
        )
        assert kp_batch.compression_type == batch.compression
        assert kp_batch.is_transactional == batch.is_transactional
        got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kp_batch]
        want = [(o, ts, k, v, [(hk, hv) for hk, hv in h]) for o, ts, k, v, h in batch.entries()]
        assert got == want
    assert memory.next_batch() is None
