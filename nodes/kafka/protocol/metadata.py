"""Metadata (key 3), versions 1-12."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import ClassVar

from nodes.runtime.primitives import NULL_UUID

from ..versions import ApiKey
from .schema import BOOL, INT16, INT32, STRING, UUID, Array, Message, Struct, kf

__all__ = [
    "AUTHORIZED_OPERATIONS_OMITTED",
    "MetadataRequest",
    "MetadataRequestTopic",
    "MetadataResponse",
    "MetadataResponseBroker",
    "MetadataResponsePartition",
    "MetadataResponseTopic",
]

AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)


@dataclass(slots=True)
class MetadataRequestTopic(Struct):
    topic_id: uuid.UUID = kf(UUID, "10+")
    name: str | None = kf(STRING, nullable="10+")


@dataclass(slots=True)
class MetadataRequest(Message):
    """`topics=None` asks for every topic (v1+); `[]` for none."""

    API_KEY: ClassVar[int] = ApiKey.METADATA
    IS_REQUEST: ClassVar[bool] = True

    topics: list[MetadataRequestTopic] | None = kf(Array(MetadataRequestTopic), nullable="1+")
    allow_auto_topic_creation: bool = kf(BOOL, "4+", default=True)
    include_cluster_authorized_operations: bool = kf(BOOL, "8-10")
    include_topic_authorized_operations: bool = kf(BOOL, "8+")

    def topic_names(self) -> list[str] | None:
        """Requested topic names (None = all topics); topics asked for by id only are skipped."""
        if self.topics is None:
            return None
        return [t.name for t in self.topics if t.name is not None]


@dataclass(slots=True)
class MetadataResponseBroker(Struct):
    node_id: int = kf(INT32)
    host: str = kf(STRING)
    port: int = kf(INT32)
    rack: str | None = kf(STRING, "1+", nullable="1+", default=None)


@dataclass(slots=True)
class MetadataResponsePartition(Struct):
    error_code: int = kf(INT16)
    partition_index: int = kf(INT32)
    leader_id: int = kf(INT32)
    leader_epoch: int = kf(INT32, "7+", default=-1)
    replica_nodes: list[int] = kf(Array(INT32))
    isr_nodes: list[int] = kf(Array(INT32))
    offline_replicas: list[int] = kf(Array(INT32), "5+")


@dataclass(slots=True)
class MetadataResponseTopic(Struct):
    error_code: int = kf(INT16)
    name: str | None = kf(STRING, nullable="12+")
    topic_id: uuid.UUID = kf(UUID, "10+", default=NULL_UUID)
    is_internal: bool = kf(BOOL, "1+")
    partitions: list[MetadataResponsePartition] = kf(Array(MetadataResponsePartition))
    topic_authorized_operations: int = kf(INT32, "8+", default=AUTHORIZED_OPERATIONS_OMITTED)


@dataclass(slots=True)
class MetadataResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.METADATA
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "3+")
    brokers: list[MetadataResponseBroker] = kf(Array(MetadataResponseBroker))
    cluster_id: str | None = kf(STRING, "2+", nullable="2+", default=None)
    controller_id: int = kf(INT32, "1+", default=-1)
    topics: list[MetadataResponseTopic] = kf(Array(MetadataResponseTopic))
    cluster_authorized_operations: int = kf(INT32, "8-10", default=AUTHORIZED_OPERATIONS_OMITTED)
