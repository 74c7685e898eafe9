"""CreateTopics (key 19), versions 2-7."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import ClassVar

from ..versions import ApiKey
from .schema import BOOL, INT8, INT16, INT32, STRING, UUID, Array, Message, Struct, kf

__all__ = [
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicConfig",
    "CreatableTopicConfigs",
    "CreatableTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
]


@dataclass(slots=True)
class CreatableReplicaAssignment(Struct):
    partition_index: int = kf(INT32)
    broker_ids: list[int] = kf(Array(INT32))


@dataclass(slots=True)
class CreatableTopicConfig(Struct):
    name: str = kf(STRING)
    value: str | None = kf(STRING, nullable="0+", default=None)


@dataclass(slots=True)
class CreatableTopic(Struct):
    """num_partitions / replication_factor -1 (v4+) mean "broker default" or "from assignments"."""

    name: str = kf(STRING)
    num_partitions: int = kf(INT32, default=-1)
    replication_factor: int = kf(INT16, default=-1)
    assignments: list[CreatableReplicaAssignment] = kf(Array(CreatableReplicaAssignment))
    configs: list[CreatableTopicConfig] = kf(Array(CreatableTopicConfig))


@dataclass(slots=True)
class CreateTopicsRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.CREATE_TOPICS
    IS_REQUEST: ClassVar[bool] = True

    topics: list[CreatableTopic] = kf(Array(CreatableTopic))
    timeout_ms: int = kf(INT32, default=60000)
    validate_only: bool = kf(BOOL, "1+")


@dataclass(slots=True)
class CreatableTopicConfigs(Struct):
    name: str = kf(STRING, "5+")
    value: str | None = kf(STRING, "5+", nullable="5+", default=None)
    read_only: bool = kf(BOOL, "5+")
    config_source: int = kf(INT8, "5+", default=-1)
    is_sensitive: bool = kf(BOOL, "5+")


@dataclass(slots=True)
class CreatableTopicResult(Struct):
    name: str = kf(STRING)
    topic_id: uuid.UUID = kf(UUID, "7+")
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, "1+", nullable="0+", default=None)
    topic_config_error_code: int = kf(INT16, "5+", tag=0)
    num_partitions: int = kf(INT32, "5+", default=-1)
    replication_factor: int = kf(INT16, "5+", default=-1)
    configs: list[CreatableTopicConfigs] | None = kf(Array(CreatableTopicConfigs), "5+", nullable="5+")


@dataclass(slots=True)
class CreateTopicsResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.CREATE_TOPICS
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "2+")
    topics: list[CreatableTopicResult] = kf(Array(CreatableTopicResult))
