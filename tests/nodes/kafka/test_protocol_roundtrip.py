"""Round trips and fuzzing for every request/response class at every supported version."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodes.kafka.protocol import ApiVersionsResponse, Message, ProtocolError
from nodes.kafka.protocol.schema import decode_message
from nodes.runtime.primitives import DecodeError

from .strategies import all_message_versions, message_instances

CASES = all_message_versions()
IDS = [f"{cls.__name__}-v{v}" for cls, v in CASES]


def _strict(cls: type[Message], raw: bytes, version: int) -> Message:
    """Decode without ApiVersionsResponse's v0 fallback."""
    return decode_message(cls, raw, version)


def _decodes_or_decode_error(cls: type[Message], raw: bytes, version: int) -> None:
    with contextlib.suppress(DecodeError):
        cls.decode(raw, version)


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_and_damage(cls: type[Message], version: int, data: st.DataObject) -> None:
    msg = data.draw(message_instances(cls, version), label="message")
    raw = msg.encode(version)

    # round trip, both ways
    back = cls.decode(raw, version)
    if cls is ApiVersionsResponse and back != msg:
        assert msg.error_code == 35  # read as a v0 downgrade reply first (KIP-511)
    else:
        assert back == msg
    assert back.encode(version) == raw

    # every strict prefix is incomplete; trailing bytes are refused
    if raw:
        cut = data.draw(st.integers(0, len(raw) - 1), label="cut")
        with pytest.raises(DecodeError):
            _strict(cls, raw[:cut], version)
    with pytest.raises(ProtocolError):
        _strict(cls, raw + b"\x00", version)

    # damaged and random bytes: decoded or DecodeError, never anything else
    mutated = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 3), label="flips")):
        if mutated:
            mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    _decodes_or_decode_error(cls, bytes(mutated), version)
    _decodes_or_decode_error(cls, data.draw(st.binary(max_size=100), label="random"), version)


def test_a_request_body_may_be_followed_by_bytes_kafka_ignores() -> None:
    """librdkafka 2.x's all-topics Metadata v12 request, as captured: the body (null topics, two false
    flags, no tags) and 3 more bytes. Kafka's broker ignores them; so does `decode_request` (a response,
    which we decode as a client, stays strict)."""
    from nodes.kafka import protocol as P

    header, body = P.decode_request_frame(bytes.fromhex("0003000c00000003000772646b61666b610000000000010000"))
    assert (header.api_key, header.api_version, header.client_id) == (3, 12, "rdkafka")
    assert body.topics is None and body.allow_auto_topic_creation is False  # type: ignore[attr-defined]
    with pytest.raises(ProtocolError, match="3 trailing"):
        _strict(type(body), bytes.fromhex("00000000010000"), 12)
