"""The node-to-node broker message codec: every message round-trips; junk only ever raises BrokerWireError."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.broker import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    Batch,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreatedTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    FetchedPartition,
    FetchPartition,
    FetchRecordsRequest,
    FetchRecordsResponse,
    NewTopic,
    TopicPartition,
)
from nodes.broker.errors import BrokerError
from nodes.runtime import brokerwire
from nodes.runtime.brokerwire import BrokerWireError, decode, encode

ints = st.integers(-(2**40), 2**40)
small = st.integers(0, 1000)
opt = st.none() | small
errors = st.sampled_from(list(BrokerError))
tps = st.builds(TopicPartition, st.text(min_size=1, max_size=12), small)
batches = st.builds(Batch, small, st.integers(1, 50), small, st.binary(max_size=64), ints)
isr = st.lists(small, max_size=4).map(tuple)

messages = st.one_of(
    st.builds(
        FetchRecordsRequest,
        st.lists(st.builds(FetchPartition, tps, ints, small, opt, opt), max_size=3).map(tuple),
        small,
        ints,
        small,
        small,
        small,
        st.sampled_from([0, 1]),
        small,
    ),
    st.builds(
        FetchRecordsResponse,
        st.lists(
            st.builds(
                FetchedPartition,
                tps,
                errors,
                ints,
                ints,
                ints,
                st.lists(batches, max_size=3).map(tuple),
                st.none() | st.tuples(small, ints),
                st.none() | st.tuples(opt, small),
                ints,
            ),
            max_size=3,
        ).map(tuple),
        small,
        errors,
    ),
    st.builds(BrokerRegistrationRequest, small, ints, st.text(max_size=20), small, small),
    st.builds(BrokerRegistrationResponse, errors, ints, small),
    st.builds(BrokerHeartbeatRequest, small, ints, ints, st.booleans(), small),
    st.builds(BrokerHeartbeatResponse, errors, st.booleans(), small),
    st.builds(AlterPartitionRequest, small, ints, tps, small, small, isr, small),
    st.builds(AlterPartitionResponse, errors, tps, opt, ints, ints, isr, small),
    st.builds(
        CreateTopicsRequest,
        st.lists(
            st.builds(
                NewTopic,
                st.text(max_size=10),
                st.integers(-1, 100),
                st.integers(-1, 5),
                st.lists(st.tuples(small, isr), max_size=3).map(tuple),
                st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=2).map(tuple),
            ),
            max_size=3,
        ).map(tuple),
        small,
        st.booleans(),
        small,
    ),
    st.builds(
        CreateTopicsResponse,
        st.lists(st.builds(CreatedTopic, st.text(max_size=8), errors, st.none() | st.text(max_size=8)), max_size=3).map(
            tuple
        ),
        small,
    ),
)


@settings(max_examples=300)
@given(messages, st.integers(0, 100))
def test_every_message_round_trips(message: object, src: int) -> None:
    api_key, body = encode(src, message)
    assert api_key == brokerwire.API_KEYS[type(message)]
    assert decode(api_key, body) == (src, message)


@settings(max_examples=300)
@given(messages, st.data())
def test_damaged_bodies_raise_only_broker_wire_errors(message: object, data: st.DataObject) -> None:
    api_key, body = encode(3, message)
    damaged = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "extend"]))
        if kind == "flip" and damaged:
            i = data.draw(st.integers(0, len(damaged) - 1))
            damaged[i] ^= data.draw(st.integers(1, 255))
        elif kind == "cut":
            del damaged[data.draw(st.integers(0, len(damaged))) :]
        else:
            damaged += data.draw(st.binary(min_size=1, max_size=8))
    key = data.draw(st.sampled_from([api_key, *sorted(brokerwire.BROKER_API_KEYS)]))
    with contextlib.suppress(BrokerWireError):
        decode(key, bytes(damaged))


@given(st.binary(max_size=200))
def test_random_bytes(body: bytes) -> None:
    with pytest.raises(BrokerWireError):
        decode(1100, body)


def test_wrong_api_key_and_source() -> None:
    message = BrokerHeartbeatRequest(2, 7, 10, False, 1)
    api_key, body = encode(2, message)
    with pytest.raises(BrokerWireError, match="not a broker message for api key"):
        decode(1100, body)
    assert brokerwire.source_of(message) == 2
    assert brokerwire.source_of(CreateTopicsRequest(())) is None
    with pytest.raises(BrokerWireError):
        encode(1, "not a message")
