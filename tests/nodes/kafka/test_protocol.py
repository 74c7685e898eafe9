"""Protocol helpers: versions and header versions, frames, errors, edge cases of the codecs."""

from __future__ import annotations

import contextlib
import struct
import time
import uuid
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.kafka import protocol as P
from nodes.kafka.errors import RETRIABLE, ErrorCode
from nodes.kafka.versions import FIRST_FLEXIBLE, SUPPORTED, ApiKey, header_versions, is_flexible, is_supported
from nodes.runtime import framing
from nodes.runtime.primitives import DecodeError

from .kp_convert import KP_CLASSES

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as kafka_errors
    from kafka.protocol.api_message import ApiMessage


def _all_kp_messages() -> list[type]:
    seen, todo = [], [ApiMessage]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if getattr(sub, "_class_version", None) is None and sub.__dict__.get("_json") is not None:
                seen.append(sub)
    return seen


# --- versions -------------------------------------------------------------------------------------


def test_first_flexible_versions_agree_with_the_kafka_schemas() -> None:
    checked = 0
    for kp_cls in _all_kp_messages():
        flex = kp_cls._flexible_versions
        expected = flex[0] if flex is not None and flex[0] >= 0 else None
        ours = FIRST_FLEXIBLE[kp_cls.API_KEY]
        assert (ours if ours < (1 << 15) else None) == expected, kp_cls.__name__
        checked += 1
    assert checked > 80


def test_supported_ranges_are_valid_kafka_versions() -> None:
    assert set(SUPPORTED) == set(P.REQUEST_TYPES) == set(P.RESPONSE_TYPES)
    for (api_key, _), kp_cls in KP_CLASSES.items():
        lo, hi = SUPPORTED[api_key]
        assert kp_cls.valid_versions[0] <= lo <= hi <= kp_cls.valid_versions[1]


@pytest.mark.parametrize(
    ("api_key", "version", "expected"),
    [
        (ApiKey.API_VERSIONS, 2, (1, 0)),
        (ApiKey.API_VERSIONS, 3, (2, 0)),  # KIP-511: response header stays v0
        (ApiKey.API_VERSIONS, 4, (2, 0)),  # newer than we support, still parseable
        (ApiKey.FETCH, 11, (1, 0)),
        (ApiKey.FETCH, 12, (2, 1)),
        (ApiKey.PRODUCE, 9, (2, 1)),
        (ApiKey.METADATA, 8, (1, 0)),
        (ApiKey.INIT_PRODUCER_ID, 2, (2, 1)),
        (ApiKey.SASL_HANDSHAKE, 1, (1, 0)),
        (ApiKey.VOTE, 0, (2, 1)),
        (999, 3, (1, 0)),
    ],
)
def test_header_versions(api_key: int, version: int, expected: tuple[int, int]) -> None:
    assert header_versions(api_key, version) == expected
    assert is_flexible(api_key, version) == (expected[0] == 2)


def test_is_supported() -> None:
    assert is_supported(ApiKey.FETCH, 12) and not is_supported(ApiKey.FETCH, 13) and not is_supported(ApiKey.FETCH, 3)
    assert is_supported(ApiKey.JOIN_GROUP, 0) and not is_supported(ApiKey.JOIN_GROUP, 8)
    assert not is_supported(ApiKey.DESCRIBE_ACLS, 0)


# --- errors ---------------------------------------------------------------------------------------


def test_error_codes_match_kafka() -> None:
    by_code = {
        c.errno: c
        for c in vars(kafka_errors).values()
        if isinstance(c, type) and issubclass(c, kafka_errors.BrokerResponseError) and c.errno is not None
    }
    for code in ErrorCode:
        assert code.value in by_code, code
    required = [0, 1, 2, 3, 5, 6, 7, 10, 19, 20, 21, 35, 36, 37, 38, 42, 45, 46, 74, 75, 76, 78, 87]
    assert all(ErrorCode(c) is not None for c in required)
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6 and ErrorCode.INVALID_RECORD == 87
    assert ErrorCode.FENCED_LEADER_EPOCH.retriable and not ErrorCode.INVALID_RECORD.retriable
    assert ErrorCode.NOT_ENOUGH_REPLICAS in RETRIABLE
    assert ErrorCode.of(6) is ErrorCode.NOT_LEADER_OR_FOLLOWER and ErrorCode.of(4242) == 4242


# --- frames ---------------------------------------------------------------------------------------


def test_request_frame_round_trip() -> None:
    req = P.FetchRequest(
        replica_id=2,
        max_wait_ms=500,
        min_bytes=1,
        isolation_level=0,
        topics=[
            P.FetchTopic("t0", [P.FetchPartition(0, current_leader_epoch=4, fetch_offset=10, last_fetched_epoch=3)])
        ],
        rack_id="r1",
    )
    frame = P.encode_request_frame(req, 12, correlation_id=7, client_id="broker-2")
    header, back = P.decode_request_frame(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (1, 12, 7, "broker-2")
    assert back == req


def test_response_frame_round_trip() -> None:
    resp = P.FetchResponse(
        responses=[
            P.FetchResponseTopic(
                "t0",
                [
                    P.FetchResponsePartition(
                        0,
                        high_watermark=5,
                        diverging_epoch=P.EpochEndOffset(2, 4),
                        current_leader=P.LeaderIdAndEpoch(1, 3),
                        records=b"",
                    )
                ],
            )
        ]
    )
    for version in (4, 11, 12):
        frame = P.encode_response_frame(resp, version, correlation_id=3)
        header, back = P.decode_response_frame(frame[4:], ApiKey.FETCH, version)
        assert header.correlation_id == 3
        assert back == P.FetchResponse.decode(resp.encode(version), version)
    assert back.responses[0].partitions[0].diverging_epoch == P.EpochEndOffset(2, 4)


def test_unserved_api_and_unsupported_version_are_reported_with_the_header() -> None:
    frame = framing.encode_request(ApiKey.DESCRIBE_ACLS, 1, 11, b"\x00\x01", client_id="x")
    with pytest.raises(P.UnsupportedVersionError) as e:
        P.decode_request_frame(frame[4:])
    assert e.value.header.correlation_id == 11 and e.value.error_code == ErrorCode.UNSUPPORTED_VERSION
    frame = framing.encode_request(ApiKey.FETCH, 13, 12, b"", client_id="x", header_version=2)
    with pytest.raises(P.UnsupportedVersionError, match="13") as e:
        P.decode_request_frame(frame[4:])
    assert e.value.header.api_version == 13
    frame = framing.encode_request(ApiKey.METADATA, 1, 13, b"\x00\x00", client_id="x")
    with pytest.raises(P.ProtocolError) as e:
        P.decode_request_frame(frame[4:])
    assert e.value.header.correlation_id == 13


def test_downgrade_reply_bytes() -> None:
    body = P.unsupported_version_response()
    assert body == struct.pack(">hihhh", 35, 1, 18, 0, 3)
    frame = P.unsupported_version_frame(77)
    assert frame == struct.pack(">ii", 4 + len(body), 77) + body


@given(st.binary(max_size=150))
def test_random_request_frames_only_raise_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        P.decode_request_frame(data)


@given(st.sampled_from(sorted(SUPPORTED)), st.integers(-3, 20), st.binary(max_size=60))
def test_random_bodies_for_any_version(api_key: int, version: int, body: bytes) -> None:
    for fn in (P.decode_request, P.decode_response):
        with contextlib.suppress(DecodeError):
            fn(api_key, version, body)


# --- codec edge cases -----------------------------------------------------------------------------


def test_absurd_array_length_is_refused_before_allocating() -> None:
    body = struct.pack(">ii", 0, 0x7FFFFFFF)  # throttle, then brokers: 2**31-1 entries
    start = time.perf_counter()
    with pytest.raises(P.ProtocolError, match="array claims"):
        P.MetadataResponse.decode(body, 3)
    compact = bytes([0, 0, 0, 0]) + b"\xff\xff\xff\xff\x07"  # v9 compact array of 2**31-2
    with pytest.raises(P.ProtocolError, match="array claims"):
        P.MetadataResponse.decode(compact, 9)
    assert time.perf_counter() - start < 0.5


def test_unsupported_versions_are_refused_both_ways() -> None:
    with pytest.raises(P.UnsupportedVersionError):
        P.ProduceRequest.decode(b"", 2)
    with pytest.raises(P.UnsupportedVersionError):
        P.ProduceRequest().encode(10)
    with pytest.raises(P.UnsupportedVersionError):
        P.decode_response(ApiKey.FETCH, 3, b"")


def test_none_in_a_non_nullable_field_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"MetadataRequestTopic\.name at version 9"):
        P.MetadataRequest(topics=[P.MetadataRequestTopic(name=None)]).encode(9)
    assert P.MetadataRequest.decode(P.MetadataRequest(topics=[P.MetadataRequestTopic(name=None)]).encode(10), 10)
    with pytest.raises(ValueError, match="int16"):
        P.ProduceRequest(acks=1 << 20).encode(3)


def test_fields_outside_a_version_are_dropped() -> None:
    resp = P.MetadataResponse(topics=[P.MetadataResponseTopic(name="t", topic_id=uuid.uuid4(), is_internal=True)])
    back = P.MetadataResponse.decode(resp.encode(1), 1)
    assert back.topics[0].topic_id == uuid.UUID(int=0) and back.topics[0].is_internal
    assert back.cluster_id is None and back.controller_id == -1


def test_records_may_be_given_as_a_list_of_buffers() -> None:
    parts = [b"abc", bytearray(b"de"), memoryview(b"fgh")]
    for version in (3, 9):
        joined = P.ProduceRequest(
            acks=1, topic_data=[P.TopicProduceData("t", [P.PartitionProduceData(0, b"abcdefgh")])]
        )
        split = P.ProduceRequest(acks=1, topic_data=[P.TopicProduceData("t", [P.PartitionProduceData(0, parts)])])
        assert split.encode(version) == joined.encode(version)
        assert P.ProduceRequest.decode(split.encode(version), version) == joined
    null = P.ProduceRequest(topic_data=[P.TopicProduceData("t", [P.PartitionProduceData(0, None)])])
    assert P.ProduceRequest.decode(null.encode(9), 9) == null


def test_tagged_fields() -> None:
    part = P.FetchResponsePartition(0, current_leader=P.LeaderIdAndEpoch(3, 9), unknown_tags={7: b"\x01\x02"})
    resp = P.FetchResponse(responses=[P.FetchResponseTopic("t", [part])])
    raw = resp.encode(12)
    assert P.FetchResponse.decode(raw, 12) == resp
    # in a non-flexible version tagged and unknown fields vanish
    assert P.FetchResponse.decode(resp.encode(11), 11).responses[0].partitions[0] == P.FetchResponsePartition(0)
    # defaults are not written: a default-valued tagged struct costs nothing
    plain = P.FetchResponse(responses=[P.FetchResponseTopic("t", [P.FetchResponsePartition(0)])]).encode(12)
    assert len(raw) == len(plain) + 1 + (1 + 1 + 8) + (1 + 1 + 2) - 0
    # a known tag whose payload is too long is malformed
    req = P.FetchRequest(cluster_id="c").encode(12)
    assert req[-5:] == b"\x01\x00\x02\x02c"  # one tag: 0, size 2, compact string "c"
    with pytest.raises(P.ProtocolError, match="tagged field 0"):
        P.FetchRequest.decode(req[:-5] + b"\x01\x00\x03\x02cc", 12)
    with pytest.raises(P.ProtocolError, match="out of order"):
        P.FetchRequest.decode(req[:-5] + b"\x02\x05\x00\x01\x00", 12)
    with pytest.raises(ValueError, match="collides"):
        P.FetchRequest(cluster_id="c", unknown_tags={0: b""}).encode(12)


def test_decoding_accepts_memoryviews_and_bytearrays() -> None:
    raw = P.api_versions_response().encode(3)
    assert P.ApiVersionsResponse.decode(memoryview(raw), 3) == P.ApiVersionsResponse.decode(bytearray(raw), 3)
    assert P.ApiVersionsResponse.decode(raw, 3).ranges() == dict(SUPPORTED)
