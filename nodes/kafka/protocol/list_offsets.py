"""ListOffsets (key 2), versions 1-7. Timestamp -1 = latest, -2 = earliest, -3 = max timestamp (v7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..versions import ApiKey
from .schema import INT8, INT16, INT32, INT64, STRING, Array, Message, Struct, kf

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
    "MAX_TIMESTAMP",
]

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


@dataclass(slots=True)
class ListOffsetsPartition(Struct):
    partition_index: int = kf(INT32)
    current_leader_epoch: int = kf(INT32, "4+", default=-1)
    timestamp: int = kf(INT64)


@dataclass(slots=True)
class ListOffsetsTopic(Struct):
    name: str = kf(STRING)
    partitions: list[ListOffsetsPartition] = kf(Array(ListOffsetsPartition))


@dataclass(slots=True)
class ListOffsetsRequest(Message):
    """isolation_level: 0 read_uncommitted (latest = HW), 1 read_committed (latest = LSO)."""

    API_KEY: ClassVar[int] = ApiKey.LIST_OFFSETS
    IS_REQUEST: ClassVar[bool] = True

    replica_id: int = kf(INT32, default=-1)
    isolation_level: int = kf(INT8, "2+")
    topics: list[ListOffsetsTopic] = kf(Array(ListOffsetsTopic))


@dataclass(slots=True)
class ListOffsetsPartitionResponse(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)
    timestamp: int = kf(INT64, "1+", default=-1)
    offset: int = kf(INT64, "1+", default=-1)
    leader_epoch: int = kf(INT32, "4+", default=-1)


@dataclass(slots=True)
class ListOffsetsTopicResponse(Struct):
    name: str = kf(STRING)
    partitions: list[ListOffsetsPartitionResponse] = kf(Array(ListOffsetsPartitionResponse))


@dataclass(slots=True)
class ListOffsetsResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.LIST_OFFSETS
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "2+")
    topics: list[ListOffsetsTopicResponse] = kf(Array(ListOffsetsTopicResponse))
