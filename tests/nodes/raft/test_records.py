"""Durable formats: CRC-framed log records with recovery from torn/corrupt tails; quorum-state JSON."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.raft import (
    QuorumState,
    QuorumStateError,
    Record,
    RecordError,
    decode_quorum_state,
    decode_record,
    digest,
    encode_quorum_state,
    encode_record,
    encode_records,
    recover,
)

payloads = st.binary(max_size=100)


@st.composite
def logs(draw):
    epochs = sorted(draw(st.lists(st.integers(1, 10), max_size=8)))
    return [Record(i, e, draw(payloads), draw(st.booleans())) for i, e in enumerate(epochs)]


@given(logs())
def test_round_trip(records):
    data = encode_records(records)
    got, info = recover(data)
    assert got == records
    assert (info.valid_bytes, info.truncated_bytes, info.reason) == (len(data), 0, None)


@given(logs().filter(bool), st.data())
def test_torn_tail_keeps_every_complete_record(records, data):
    encoded = [encode_record(r) for r in records]
    blob = b"".join(encoded)
    cut = data.draw(st.integers(0, len(blob) - 1))
    got, info = recover(blob[:cut])
    boundaries = [sum(len(e) for e in encoded[: i + 1]) for i in range(len(encoded))]
    complete = sum(1 for b in boundaries if b <= cut)
    assert got == records[:complete]
    assert info.valid_bytes == (boundaries[complete - 1] if complete else 0)
    assert info.truncated_bytes == cut - info.valid_bytes
    assert info.reason == ("torn" if info.truncated_bytes else None)


@given(logs().filter(bool), st.data())
def test_corrupt_byte_stops_recovery_at_that_record(records, data):
    encoded = [encode_record(r) for r in records]
    blob = bytearray(b"".join(encoded))
    pos = data.draw(st.integers(0, len(blob) - 1))
    blob[pos] ^= data.draw(st.integers(1, 255))
    got, info = recover(bytes(blob))
    index = next(i for i in range(len(encoded)) if sum(len(e) for e in encoded[: i + 1]) > pos)
    assert got == records[:index]  # everything before the damaged record survives, nothing after
    assert info.reason in ("torn", "corrupt", "non-contiguous")
    assert info.valid_bytes + info.truncated_bytes == len(blob)


def test_non_contiguous_offsets_end_the_valid_prefix():
    data = encode_records([Record(0, 1, b"a"), Record(1, 1, b"b"), Record(3, 1, b"c")])
    got, info = recover(data)
    assert [r.offset for r in got] == [0, 1] and info.reason == "non-contiguous"
    got, info = recover(encode_records([Record(0, 2, b"a"), Record(1, 1, b"b")]))
    assert len(got) == 1 and info.reason == "non-contiguous"


def test_decode_record_errors():
    with pytest.raises(RecordError, match="torn"):
        decode_record(b"\x00\x00")
    with pytest.raises(RecordError, match="corrupt"):
        decode_record(b"\x00\x00\x00\x01" + b"\x00" * 30)
    with pytest.raises(RecordError):
        encode_record(Record(-1, 1, b""))


def test_digest_distinguishes_content():
    assert digest(Record(0, 1, b"a")) == digest(Record(5, 2, b"a"))
    assert digest(Record(0, 1, b"a")) != digest(Record(0, 1, b"b"))
    assert digest(Record(0, 1, b"a")) != digest(Record(0, 1, b"a", control=True))


@given(
    st.integers(0, 2**40),
    st.none() | st.integers(0, 1000),
    st.none() | st.integers(0, 1000),
    st.none() | st.sets(st.integers(0, 1000), min_size=1).map(lambda ids: tuple(sorted(ids))),
)
def test_quorum_state_round_trip(epoch, leader, voted, voters):
    state = QuorumState(epoch, leader, voted, voters=voters)
    data = encode_quorum_state(state)
    assert decode_quorum_state(data) == state


def test_quorum_state_records_the_voter_set_and_loads_files_without_one():
    import json

    assert json.loads(encode_quorum_state(QuorumState(5, 2, 3, voters=(1, 2, 3))))["voters"] == [1, 2, 3]
    old = b'{"epoch": 5, "leader": 2, "voted_for": 3}\n'  # written before the set was recorded
    assert decode_quorum_state(old) == QuorumState(5, 2, 3, voters=None)


def test_quorum_state_shape():
    import json

    doc = json.loads(encode_quorum_state(QuorumState(5, 2, 3)))
    assert doc == {"epoch": 5, "leader": 2, "voted_for": 3}


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{",
        b"[]",
        b'{"leader": 1}',
        b'{"epoch": -1}',
        b'{"epoch": 1, "leader": "n1"}',
        b"\xff\xfe",
        b'{"epoch": true}',
        b'{"epoch": 1, "voters": []}',
        b'{"epoch": 1, "voters": [2, 1]}',
        b'{"epoch": 1, "voters": [1, 1]}',
        b'{"epoch": 1, "voters": ["1"]}',
        b'{"epoch": 1, "voters": 3}',
    ],
)
def test_quorum_state_garbage(data):
    with pytest.raises(QuorumStateError):
        decode_quorum_state(data)
