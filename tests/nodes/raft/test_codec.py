"""Binary codec: every message round-trips; malformed bytes raise CodecError and nothing else."""

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.raft import (
    API_KEYS,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    CodecError,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Error,
    FetchRequest,
    FetchResponse,
    Record,
    ReplicaState,
    VoteRequest,
    VoteResponse,
    decode,
    encode,
    is_request,
)

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
ids = st.integers(0, 2**31 - 1)
opt_i32 = st.none() | ids
opt_i64 = st.none() | st.integers(0, 2**63 - 1)
errors = st.sampled_from(list(Error))
records = st.builds(Record, st.integers(0, 2**63 - 1), i32, st.binary(max_size=64), st.booleans())
replicas = st.builds(ReplicaState, i32, opt_i64, opt_i64)


@st.composite
def fetch_responses(draw):
    diverging = draw(st.none() | st.tuples(ids, st.integers(0, 2**63 - 1)))
    return FetchResponse(
        draw(errors),
        draw(i32),
        draw(opt_i32),
        draw(opt_i64),
        () if diverging else tuple(draw(st.lists(records, max_size=5))),
        diverging[0] if diverging else None,
        diverging[1] if diverging else None,
    )


cluster_ids = st.none() | st.text(max_size=40)

messages = st.one_of(
    st.builds(VoteRequest, i32, i32, i32, i64, st.booleans(), cluster_ids),
    st.builds(VoteResponse, errors, i32, opt_i32, st.booleans(), st.booleans()),
    st.builds(BeginQuorumEpochRequest, i32, i32, cluster_ids),
    st.builds(BeginQuorumEpochResponse, errors, i32, opt_i32),
    st.builds(EndQuorumEpochRequest, i32, i32, st.lists(i32, max_size=6).map(tuple), cluster_ids),
    st.builds(EndQuorumEpochResponse, errors, i32, opt_i32),
    st.builds(FetchRequest, i32, i32, i64, i32, i32, opt_i64, cluster_ids),
    fetch_responses(),
    st.builds(DescribeQuorumRequest, cluster_ids),
    st.builds(DescribeQuorumResponse, errors, i32, opt_i32, opt_i64, st.lists(replicas, max_size=5).map(tuple)),
)


@given(messages)
def test_round_trip(message):
    data = encode(message)
    assert decode(data) == message
    assert decode(bytearray(data)) == message


@given(st.binary(max_size=200))
def test_garbage_raises_codec_error_only(data):
    with contextlib.suppress(CodecError):
        decode(data)


@settings(max_examples=200)
@given(messages, st.data())
def test_truncated_and_corrupted_encodings(message, data):
    encoded = encode(message)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(CodecError):
        decode(encoded[:cut])
    with pytest.raises(CodecError):
        decode(encoded + b"\x00")
    position = data.draw(st.integers(0, len(encoded) - 1))
    flipped = bytearray(encoded)
    flipped[position] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(CodecError):
        decode(bytes(flipped))  # may decode to another valid message, or fail cleanly


def test_record_crc_is_checked_inside_fetch_responses():
    encoded = bytearray(encode(FetchResponse(Error.NONE, 1, 1, 0, (Record(0, 1, b"payload"),))))
    encoded[-28] ^= 0xFF  # inside the record payload / fields (before the 20 bytes of trailing fields)
    with pytest.raises(CodecError, match="CRC|corrupt|records"):
        decode(bytes(encoded))


@pytest.mark.parametrize(
    "bad",
    [
        VoteResponse(Error.NONE, 1, -5, True),  # negative optional id
        VoteRequest(2**31, 1, 0, 0),  # out of range
        VoteRequest(1, 1, 0, 0, pre_vote=1),  # not a bool
        VoteRequest(1, 1, 0, 0, cluster_id=7),  # not a str
        VoteRequest(1, 1, 0, 0, cluster_id="x" * 40_000),  # longer than an i16 length
        VoteRequest(1, 1, 0, 0, cluster_id="\ud800"),  # not encodable as UTF-8
        object(),
    ],
)
def test_unencodable_values(bad):
    with pytest.raises(CodecError):
        encode(bad)


def test_non_bytes_input():
    with pytest.raises(CodecError):
        decode("not bytes")


def test_api_keys_and_request_flag():
    assert API_KEYS[FetchRequest] == 1 and API_KEYS[VoteResponse] == 52
    assert is_request(FetchRequest(1, 1, 0, 0)) and not is_request(VoteResponse(Error.NONE, 1, None, False))


def test_requests_carry_the_cluster_id():
    request = BeginQuorumEpochRequest(3, 1, "prod-é")
    encoded = encode(request)
    assert encoded.endswith(b"\x00\x07prod-\xc3\xa9")  # i16 byte length, then UTF-8
    assert decode(encoded) == request
    assert encode(BeginQuorumEpochRequest(3, 1)).endswith(b"\xff\xff")  # None: length -1
    assert Error(104) is Error.INCONSISTENT_CLUSTER_ID
    with pytest.raises(CodecError, match="not UTF-8"):
        decode(encoded[:-2] + b"\xff\xfe")
    with pytest.raises(CodecError, match="invalid string length"):
        decode(encoded[:-9] + b"\xff\xf0")
