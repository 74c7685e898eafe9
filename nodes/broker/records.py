"""Metadata records and their raft payload.

The metadata shares the raft log with the register commands of ``nodes/kv`` (JSON objects,
so their payload starts with ``{``) and the raft core's LeaderChange control records (flagged
``control``). A metadata payload is::

    0x00 (METADATA_TAG) | 0x01 (format version) | compact UTF-8 JSON array of records

JSON text never starts with a NUL byte, so the two kinds cannot be confused. The records of one
payload form a batch that :class:`~nodes.broker.image.MetadataImage` applies atomically (all
or nothing). Each record is a JSON object with a ``"type"`` field:

=====================  ==================================================================
``register-broker``    ``broker_id, broker_epoch, incarnation, host, port[, inter_broker_host,
                       inter_broker_port]`` (starts fenced)
``fence-broker``       ``broker_id, broker_epoch``
``unfence-broker``     ``broker_id, broker_epoch``
``topic``              ``name, topic_id, configs`` (``[[key, value], ...]``)
``partition``          ``topic, partition, replicas, isr, leader, leader_epoch, partition_epoch[, elr]``
``partition-change``   ``topic, partition, expected_partition_epoch, isr, leader, leader_epoch[, elr]``
``producer-ids``       ``broker_id, broker_epoch, next_producer_id`` (a block of producer ids
                       handed to a broker: everything below ``next_producer_id`` is taken)
=====================  ==================================================================

``leader`` is null for "no leader" (then ``isr`` may be empty: every member was found
damaged). ``elr`` (KIP-966's eligible leader replicas: members that left the ISR while it was
below ``min.insync.replicas``, so the high watermark has not moved since) is written only when
not empty; so are ``inter_broker_host``/``inter_broker_port`` (the endpoint other brokers fetch
from, as Kafka's registration lists the inter-broker listener; absent: the node's voter address).
``broker_epoch`` is the raft offset of the broker's ``register-broker`` record, as in
KRaft.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

from .topic_partition import TopicPartition

METADATA_TAG = b"\x00"
FORMAT_VERSION = 1
_PREFIX = METADATA_TAG + bytes([FORMAT_VERSION])


class MetadataError(ValueError):
    """A metadata payload or record is malformed."""


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    broker_id: int
    broker_epoch: int
    incarnation: int
    host: str = ""
    port: int = 0
    inter_broker_host: str = ""  # the inter-broker endpoint (empty: the node's voter address)
    inter_broker_port: int = 0


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: str
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int | None
    leader_epoch: int = 0
    partition_epoch: int = 0
    elr: tuple[int, ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """Applied only if the partition's epoch is still ``expected_partition_epoch``; it then
    becomes ``expected_partition_epoch + 1``."""

    topic: str
    partition: int
    expected_partition_epoch: int
    isr: tuple[int, ...]
    leader: int | None
    leader_epoch: int
    elr: tuple[int, ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """Kafka's ProducerIdsRecord: ids below ``next_producer_id`` are allocated (the last block to
    ``broker_id``); applied only if it moves the next id forward."""

    broker_id: int
    broker_epoch: int
    next_producer_id: int


MetadataRecord = (
    RegisterBrokerRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | ProducerIdsRecord
)

_TYPES: dict[str, type] = {
    "register-broker": RegisterBrokerRecord,
    "fence-broker": FenceBrokerRecord,
    "unfence-broker": UnfenceBrokerRecord,
    "topic": TopicRecord,
    "partition": PartitionRecord,
    "partition-change": PartitionChangeRecord,
    "producer-ids": ProducerIdsRecord,
}
_NAMES = {cls: name for name, cls in _TYPES.items()}
_INT_TUPLES = {"replicas", "isr", "elr"}
# absent from the JSON when empty (older payloads never have them)
_OMITTED_WHEN_EMPTY = {"elr", "inter_broker_host", "inter_broker_port"}
_OPTIONAL_INTS = {"leader"}
_STRINGS = {"host", "inter_broker_host", "name", "topic_id", "topic"}


def is_metadata_payload(payload: bytes) -> bool:
    """True for payloads written by :func:`encode_metadata` (never for a register command)."""
    return payload[:1] == METADATA_TAG


def encode_metadata(records: tuple[MetadataRecord, ...] | list[MetadataRecord]) -> bytes:
    if not records:
        raise MetadataError("a metadata batch needs at least one record")
    docs = []
    for record in records:
        name = _NAMES.get(type(record))
        if name is None:
            raise MetadataError(f"not a metadata record: {type(record).__name__}")
        doc: dict[str, Any] = {"type": name}
        for f in fields(record):
            value = getattr(record, f.name)
            if f.name in _OMITTED_WHEN_EMPTY and not value:
                continue
            doc[f.name] = [list(kv) for kv in value] if f.name == "configs" else value
        docs.append(doc)
    return _PREFIX + json.dumps(docs, separators=(",", ":"), sort_keys=True).encode()


def decode_metadata(payload: bytes) -> tuple[MetadataRecord, ...]:
    if not payload.startswith(METADATA_TAG):
        raise MetadataError("not a metadata payload")
    if payload[1:2] != bytes([FORMAT_VERSION]):
        raise MetadataError(f"unknown metadata format version {payload[1:2]!r}")
    try:
        docs = json.loads(payload[2:].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MetadataError(f"metadata payload is not JSON: {exc}") from None
    if not isinstance(docs, list) or not docs:
        raise MetadataError("metadata payload must be a non-empty JSON array")
    return tuple(_decode_record(doc) for doc in docs)


def _decode_record(doc: Any) -> MetadataRecord:
    if not isinstance(doc, dict):
        raise MetadataError(f"metadata record must be an object, got {doc!r}")
    cls = _TYPES.get(doc.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise MetadataError(f"unknown metadata record type {doc.get('type')!r}")
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in doc:
            if f.name in _OMITTED_WHEN_EMPTY:
                continue
            raise MetadataError(f"{doc['type']} record lacks {f.name!r}")
        kwargs[f.name] = _field(f.name, doc[f.name])
    return cls(**kwargs)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field(name: str, value: Any) -> Any:
    if name in _INT_TUPLES:
        if not isinstance(value, list) or not all(_is_int(v) for v in value):
            raise MetadataError(f"{name} must be a list of ints, got {value!r}")
        return tuple(value)
    if name == "configs":
        ok = isinstance(value, list) and all(
            isinstance(kv, list) and len(kv) == 2 and all(isinstance(x, str) for x in kv) for kv in value
        )
        if not ok:
            raise MetadataError(f"configs must be a list of [key, value] strings, got {value!r}")
        return tuple((k, v) for k, v in value)
    if name in _STRINGS:
        if not isinstance(value, str):
            raise MetadataError(f"{name} must be a string, got {value!r}")
        return value
    if name in _OPTIONAL_INTS and value is None:
        return None
    if not _is_int(value):
        raise MetadataError(f"{name} must be an int, got {value!r}")
    return value
