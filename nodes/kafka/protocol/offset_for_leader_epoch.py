"""OffsetForLeaderEpoch (key 23), versions 2-4 (KIP-101, KIP-320): for each partition, the end
offset of the largest leader epoch at or below the one asked about; clients use it to find a
log truncation after a leader change."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..versions import ApiKey
from .schema import INT16, INT32, INT64, STRING, Array, Message, Struct, kf

__all__ = [
    "EpochEndOffsetResult",
    "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse",
    "OffsetForLeaderPartition",
    "OffsetForLeaderTopic",
    "OffsetForLeaderTopicResult",
]


@dataclass(slots=True)
class OffsetForLeaderPartition(Struct):
    partition: int = kf(INT32)
    current_leader_epoch: int = kf(INT32, "2+", default=-1)
    leader_epoch: int = kf(INT32)


@dataclass(slots=True)
class OffsetForLeaderTopic(Struct):
    topic: str = kf(STRING)
    partitions: list[OffsetForLeaderPartition] = kf(Array(OffsetForLeaderPartition))


@dataclass(slots=True)
class OffsetForLeaderEpochRequest(Message):
    """replica_id: -1 for a consumer (only the leader answers), a broker id for a follower."""

    API_KEY: ClassVar[int] = ApiKey.OFFSET_FOR_LEADER_EPOCH
    IS_REQUEST: ClassVar[bool] = True

    replica_id: int = kf(INT32, "3+", default=-2)
    topics: list[OffsetForLeaderTopic] = kf(Array(OffsetForLeaderTopic))


@dataclass(slots=True)
class EpochEndOffsetResult(Struct):
    error_code: int = kf(INT16)
    partition: int = kf(INT32)
    leader_epoch: int = kf(INT32, "1+", default=-1)
    end_offset: int = kf(INT64, default=-1)


@dataclass(slots=True)
class OffsetForLeaderTopicResult(Struct):
    topic: str = kf(STRING)
    partitions: list[EpochEndOffsetResult] = kf(Array(EpochEndOffsetResult))


@dataclass(slots=True)
class OffsetForLeaderEpochResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.OFFSET_FOR_LEADER_EPOCH
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "2+")
    topics: list[OffsetForLeaderTopicResult] = kf(Array(OffsetForLeaderTopicResult))
