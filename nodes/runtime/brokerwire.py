"""Node-to-node broker messages on the controller listener: private api keys, JSON plus blobs.

The broker core's node-to-node messages (``nodes/broker/messages.py``: follower fetches,
broker registration and heartbeats, AlterPartition, forwarded CreateTopics) travel like the raft
RPCs: Kafka framing (request header v1, response header v0, ``api_version`` 0) on the
controller listener, with these private api keys (a request and its response share one):

=====  ==============================================================
1100   ``FetchRecordsRequest`` / ``FetchRecordsResponse`` (replication)
1101   ``BrokerRegistrationRequest`` / ``BrokerRegistrationResponse``
1102   ``BrokerHeartbeatRequest`` / ``BrokerHeartbeatResponse``
1103   ``AlterPartitionRequest`` / ``AlterPartitionResponse``
1104   ``CreateTopicsRequest`` / ``CreateTopicsResponse`` (forwarded to the active controller)
1110   ``AllocateProducerIdsRequest`` / ``AllocateProducerIdsResponse`` (producer id blocks)
1111   ``WriteTxnMarkersRequest`` / ``WriteTxnMarkersResponse`` (transaction coordinator → leaders)
=====  ==============================================================

Body::

    version u8 (0) | src i32 | json_length u32 | JSON (UTF-8) | blob…

``src`` is the sending node's id. The JSON is ``[type name, [field values in declaration
order]]``; a nested dataclass is the list of its fields, a ``TopicPartition`` is ``[topic,
partition]``, an error is its Kafka code, None is null. A ``Batch`` is ``[base_offset,
record_count, leader_epoch, max_timestamp, data_length]`` and its bytes follow the JSON as a
blob (blobs in the order their batches appear), so record data is never re-encoded. Decoding is
driven by the dataclasses' type hints and rejects anything that does not fit with
:class:`BrokerWireError` (never another exception).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import struct
import types
import typing
from functools import cache
from typing import Any

from ..broker.batch import Batch
from ..broker.messages import (
    BROKER_REQUESTS,
    BROKER_RESPONSES,
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    FetchRecordsRequest,
    FetchRecordsResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from ..broker.topic_partition import TopicPartition

__all__ = ["API_KEYS", "BROKER_API_KEYS", "BrokerWireError", "decode", "encode", "source_of"]

VERSION = 0
_HEAD = struct.Struct(">BiI")

API_KEYS: dict[type, int] = {
    FetchRecordsRequest: 1100,
    FetchRecordsResponse: 1100,
    BrokerRegistrationRequest: 1101,
    BrokerRegistrationResponse: 1101,
    BrokerHeartbeatRequest: 1102,
    BrokerHeartbeatResponse: 1102,
    AlterPartitionRequest: 1103,
    AlterPartitionResponse: 1103,
    CreateTopicsRequest: 1104,
    CreateTopicsResponse: 1104,
    AllocateProducerIdsRequest: 1110,
    AllocateProducerIdsResponse: 1110,
    WriteTxnMarkersRequest: 1111,
    WriteTxnMarkersResponse: 1111,
}
BROKER_API_KEYS = frozenset(API_KEYS.values())
_BY_NAME: dict[str, type] = {cls.__name__: cls for cls in (*BROKER_REQUESTS, *BROKER_RESPONSES)}


class BrokerWireError(ValueError):
    """Bytes that are not a valid broker message (or a value that cannot be encoded)."""


def source_of(message: Any) -> int | None:
    """The broker id a request claims to come from (None for a forwarded CreateTopics)."""
    if isinstance(message, FetchRecordsRequest):
        return message.replica_id
    if isinstance(message, BrokerRegistrationRequest | BrokerHeartbeatRequest | AlterPartitionRequest):
        return message.broker_id
    if isinstance(message, AllocateProducerIdsRequest):
        return message.broker_id
    return None


# --- encoding -----------------------------------------------------------------------------------


def _plain(value: Any, blobs: list[bytes]) -> Any:
    if isinstance(value, Batch):
        blobs.append(value.data)
        return [value.base_offset, value.record_count, value.leader_epoch, value.max_timestamp, len(value.data)]
    if isinstance(value, TopicPartition):
        return [value.topic, value.partition]
    if isinstance(value, enum.Enum):
        return int(value.value)
    if dataclasses.is_dataclass(value):
        return [_plain(getattr(value, f.name), blobs) for f in dataclasses.fields(value)]
    if isinstance(value, tuple | list):
        return [_plain(v, blobs) for v in value]
    return value


def encode(src: int, message: Any) -> tuple[int, bytes]:
    """(api key, body) of a broker message sent by node ``src``."""
    cls = type(message)
    if cls not in API_KEYS:
        raise BrokerWireError(f"{cls.__name__} is not a broker message")
    blobs: list[bytes] = []
    try:
        doc = json.dumps([cls.__name__, _plain(message, blobs)], separators=(",", ":")).encode()
        head = _HEAD.pack(VERSION, src, len(doc))
    except (TypeError, ValueError, struct.error) as exc:
        raise BrokerWireError(f"cannot encode {cls.__name__}: {exc}") from None
    return API_KEYS[cls], b"".join((head, doc, *blobs))


# --- decoding -----------------------------------------------------------------------------------


@cache
def _hints(cls: type) -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


class _Blobs:
    __slots__ = ("data", "pos")

    def __init__(self, data: memoryview, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise BrokerWireError("batch data runs past the end of the body")
        out = bytes(self.data[self.pos : end])
        self.pos = end
        return out


def _int(value: Any) -> int:
    if type(value) is not int:
        raise BrokerWireError(f"expected an integer, got {value!r:.40}")
    return value


def _typed(hint: Any, value: Any, blobs: _Blobs) -> Any:
    if hint is int:
        return _int(value)
    if hint is bool:
        if type(value) is not bool:
            raise BrokerWireError(f"expected a boolean, got {value!r:.40}")
        return value
    if hint is str:
        if type(value) is not str:
            raise BrokerWireError(f"expected a string, got {value!r:.40}")
        return value
    if hint is type(None):
        if value is not None:
            raise BrokerWireError(f"expected null, got {value!r:.40}")
        return None
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        arms = [a for a in args if a is not type(None)]
        for i, arm in enumerate(arms):
            try:
                return _typed(arm, value, blobs)
            except BrokerWireError:
                if i == len(arms) - 1:
                    raise
        raise BrokerWireError(f"no type fits {value!r:.40}")
    if origin is tuple:
        if not isinstance(value, list):
            raise BrokerWireError(f"expected a list, got {value!r:.40}")
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_typed(args[0], v, blobs) for v in value)
        if len(args) != len(value):
            raise BrokerWireError(f"expected {len(args)} items, got {len(value)}")
        return tuple(_typed(a, v, blobs) for a, v in zip(args, value, strict=True))
    if hint is TopicPartition:
        if not isinstance(value, list) or len(value) != 2:
            raise BrokerWireError(f"expected [topic, partition], got {value!r:.40}")
        return TopicPartition(_typed(str, value[0], blobs), _int(value[1]))
    if hint is Batch:
        if not isinstance(value, list) or len(value) != 5:
            raise BrokerWireError(f"expected a batch header, got {value!r:.40}")
        base, count, epoch, max_ts, size = (_int(v) for v in value)
        return Batch(base, count, epoch, blobs.take(size), max_ts)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(_int(value))
        except ValueError:
            raise BrokerWireError(f"unknown {hint.__name__} {value!r}") from None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _struct(hint, value, blobs)
    raise BrokerWireError(f"cannot decode a {hint!r}")  # pragma: no cover - every message field is covered


def _struct(cls: type, value: Any, blobs: _Blobs) -> Any:
    specs = _hints(cls)
    if not isinstance(value, list) or len(value) != len(specs):
        raise BrokerWireError(f"{cls.__name__}: expected {len(specs)} fields, got {value!r:.60}")
    kwargs = {name: _typed(hint, v, blobs) for (name, hint), v in zip(specs, value, strict=True)}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise BrokerWireError(f"{cls.__name__}: {exc}") from None


def decode(api_key: int, body: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """(src, message) from a body received under ``api_key``."""
    view = memoryview(body)
    if len(view) < _HEAD.size:
        raise BrokerWireError("body shorter than its header")
    version, src, length = _HEAD.unpack_from(view, 0)
    if version != VERSION:
        raise BrokerWireError(f"unknown broker wire version {version}")
    end = _HEAD.size + length
    if end > len(view):
        raise BrokerWireError("JSON part runs past the end of the body")
    try:
        doc = json.loads(bytes(view[_HEAD.size : end]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BrokerWireError(f"body is not JSON: {exc}") from None
    if not isinstance(doc, list) or len(doc) != 2 or not isinstance(doc[0], str):
        raise BrokerWireError("expected [type, fields]")
    cls = _BY_NAME.get(doc[0])
    if cls is None or API_KEYS[cls] != api_key:
        raise BrokerWireError(f"{doc[0]!r:.40} is not a broker message for api key {api_key}")
    blobs = _Blobs(view, end)
    try:
        message = _struct(cls, doc[1], blobs)
    except RecursionError:
        raise BrokerWireError("nesting too deep") from None
    if blobs.pos != len(view):
        raise BrokerWireError(f"{len(view) - blobs.pos} trailing byte(s)")
    return src, message
