"""Convert between our message dataclasses and kafka-python's protocol objects (tests only).

Both sides follow the field names of Kafka's message JSON, so the conversion walks our schema and
looks the same names up in kafka-python's. kafka-python differences handled here: the null UUID
is None, and Metadata's authorized-operations int32 is a set of bit numbers named
`authorized_operations`.
"""

from __future__ import annotations

import warnings
from typing import Any

with warnings.catch_warnings():  # kafka-python loads its schemas with deprecated importlib APIs
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol import admin as _kp_admin
    from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
    from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
    from kafka.protocol.consumer import group as _kp_group
    from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
    from kafka.protocol.metadata import find_coordinator as _kp_find
    from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse
    from kafka.protocol.producer import transaction as _kp_txn

from nodes.kafka.protocol import Message
from nodes.kafka.protocol import schema as S
from nodes.runtime.primitives import NULL_UUID

_GROUP_APIS = ("JoinGroup", "SyncGroup", "LeaveGroup", "Heartbeat", "OffsetFetch", "OffsetCommit")
_TXN_APIS = ("AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit", "WriteTxnMarkers")

KP_CLASSES: dict[tuple[int, bool], Any] = {
    (cls.API_KEY, cls.type == "request"): cls
    for cls in (
        ApiVersionsRequest,
        ApiVersionsResponse,
        MetadataRequest,
        MetadataResponse,
        ProduceRequest,
        ProduceResponse,
        FetchRequest,
        FetchResponse,
        ListOffsetsRequest,
        ListOffsetsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        InitProducerIdRequest,
        InitProducerIdResponse,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
        # the group coordinator's APIs
        _kp_find.FindCoordinatorRequest,
        _kp_find.FindCoordinatorResponse,
        *(getattr(_kp_group, f"{api}{kind}") for api in _GROUP_APIS for kind in ("Request", "Response")),
        *(getattr(_kp_admin, f"{api}Groups{kind}") for api in ("List", "Describe") for kind in ("Request", "Response")),
        # the transaction APIs
        *(getattr(_kp_txn, f"{api}{kind}") for api in _TXN_APIS for kind in ("Request", "Response")),
    )
}

_RENAMED = {
    "topic_authorized_operations": "authorized_operations",
    "cluster_authorized_operations": "authorized_operations",
}
_BITFIELDS = {"topic_authorized_operations", "cluster_authorized_operations", "authorized_operations"}


def kp_class(msg_cls: type[Message]) -> Any:
    return KP_CLASSES[(msg_cls.API_KEY, msg_cls.IS_REQUEST)]


def _bits_to_set(value: int) -> set[int] | None:
    bits = {b for b in range(32) if (value & 0xFFFFFFFF) >> b & 1}
    return None if bits == {31} else bits


def _set_to_bits(bits: set[int] | None) -> int:
    value = sum(1 << b for b in ({31} if bits is None else bits))
    return value - (1 << 32) if value >= 1 << 31 else value


def _to_kp_value(wire: S.WireType, value: Any, kp_field: Any, version: int) -> Any:
    if value is None:
        return None
    if isinstance(wire, S.Array):
        item = wire._item_type()
        if isinstance(item, S.StructType):
            return [_to_kp_struct(v, kp_field.data_class, version) for v in value]
        return list(value)
    if isinstance(wire, S.StructType):
        return _to_kp_struct(value, kp_field.data_class, version)
    if wire is S.UUID:
        return None if value == NULL_UUID else value
    if wire is S.RECORDS:
        return bytes(value)
    return value


def _to_kp_struct(obj: S.Struct, kp_cls: Any, version: int) -> Any:
    kwargs = {}
    fields = kp_cls._struct.fields
    for spec in S.field_specs(type(obj)):
        value = getattr(obj, spec.name)
        if spec.tagged_in(version):
            if value == spec.default:
                continue  # kafka-python writes every tagged field it is given; we skip defaults
        elif not spec.present(version):
            continue
        name = _RENAMED.get(spec.name, spec.name)
        if spec.name in _BITFIELDS:
            kwargs[name] = _bits_to_set(value)
            continue
        kwargs[name] = _to_kp_value(spec.type, value, fields[name], version)
    return kp_cls(version=version, **kwargs)


def to_kp(msg: Message, version: int) -> Any:
    """A kafka-python message equal to `msg` at `version` (unknown tags are not carried)."""
    return _to_kp_struct(msg, kp_class(type(msg))[version], version)


def _from_kp_value(wire: S.WireType, value: Any, version: int) -> Any:
    if value is None:
        return NULL_UUID if wire is S.UUID else None
    if isinstance(wire, S.Array):
        item = wire._item_type()
        if isinstance(item, S.StructType):
            return [_from_kp_struct(v, item.cls, version) for v in value]
        return list(value)
    if isinstance(wire, S.StructType):
        return _from_kp_struct(value, wire.cls, version)
    if wire is S.RECORDS or wire is S.BYTES:
        return bytes(value)
    return value


def _from_kp_struct(kp_obj: Any, cls: type[S.Struct], version: int) -> Any:
    kwargs = {}
    for spec in S.field_specs(cls):
        if not (spec.present(version) or spec.tagged_in(version)):
            continue
        name = _RENAMED.get(spec.name, spec.name)
        value = getattr(kp_obj, name)
        if spec.name in _BITFIELDS:
            kwargs[spec.name] = _set_to_bits(value)
            continue
        kwargs[spec.name] = _from_kp_value(spec.type, value, version)
    return cls(**kwargs)


def from_kp(kp_msg: Any, cls: type[Message], version: int) -> Message:
    """Our dataclass for a kafka-python message object."""
    return _from_kp_struct(kp_msg, cls, version)
