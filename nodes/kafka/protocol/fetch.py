"""Fetch (key 1), versions 4-12. Sessionless (session_id 0, session_epoch -1); followers fetch
with replica_id >= 0 (the replica_state form only exists from v15, beyond our range)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..versions import ApiKey
from .schema import INT8, INT16, INT32, INT64, RECORDS, STRING, Array, Message, Struct, kf

__all__ = [
    "AbortedTransaction",
    "EpochEndOffset",
    "FetchPartition",
    "FetchRequest",
    "FetchResponse",
    "FetchResponsePartition",
    "FetchResponseTopic",
    "FetchTopic",
    "ForgottenTopic",
    "LeaderIdAndEpoch",
    "SnapshotId",
]

Records = bytes | bytearray | memoryview | list | tuple | None


@dataclass(slots=True)
class FetchPartition(Struct):
    partition: int = kf(INT32)
    current_leader_epoch: int = kf(INT32, "9+", default=-1)
    fetch_offset: int = kf(INT64)
    last_fetched_epoch: int = kf(INT32, "12+", default=-1)
    log_start_offset: int = kf(INT64, "5+", default=-1)
    partition_max_bytes: int = kf(INT32)


@dataclass(slots=True)
class FetchTopic(Struct):
    topic: str = kf(STRING)
    partitions: list[FetchPartition] = kf(Array(FetchPartition))


@dataclass(slots=True)
class ForgottenTopic(Struct):
    topic: str = kf(STRING, "7+")
    partitions: list[int] = kf(Array(INT32), "7+")


@dataclass(slots=True)
class FetchRequest(Message):
    """replica_id -1 for consumers, the follower's broker id for replication."""

    API_KEY: ClassVar[int] = ApiKey.FETCH
    IS_REQUEST: ClassVar[bool] = True

    cluster_id: str | None = kf(STRING, "12+", nullable="12+", tag=0, default=None)
    replica_id: int = kf(INT32, default=-1)
    max_wait_ms: int = kf(INT32)
    min_bytes: int = kf(INT32)
    max_bytes: int = kf(INT32, "3+", default=0x7FFFFFFF)
    isolation_level: int = kf(INT8, "4+")
    session_id: int = kf(INT32, "7+")
    session_epoch: int = kf(INT32, "7+", default=-1)
    topics: list[FetchTopic] = kf(Array(FetchTopic))
    forgotten_topics_data: list[ForgottenTopic] = kf(Array(ForgottenTopic), "7+")
    rack_id: str = kf(STRING, "11+")


@dataclass(slots=True)
class EpochEndOffset(Struct):
    epoch: int = kf(INT32, default=-1)
    end_offset: int = kf(INT64, default=-1)


@dataclass(slots=True)
class LeaderIdAndEpoch(Struct):
    leader_id: int = kf(INT32, default=-1)
    leader_epoch: int = kf(INT32, default=-1)


@dataclass(slots=True)
class SnapshotId(Struct):
    end_offset: int = kf(INT64, default=-1)
    epoch: int = kf(INT32, default=-1)


@dataclass(slots=True)
class AbortedTransaction(Struct):
    producer_id: int = kf(INT64)
    first_offset: int = kf(INT64)


@dataclass(slots=True)
class FetchResponsePartition(Struct):
    """`records` holds whole record batches (the last one may be cut short by max_bytes)."""

    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)
    high_watermark: int = kf(INT64)
    last_stable_offset: int = kf(INT64, "4+", default=-1)
    log_start_offset: int = kf(INT64, "5+", default=-1)
    diverging_epoch: EpochEndOffset | None = kf(EpochEndOffset, "12+", tag=0, default=None)
    current_leader: LeaderIdAndEpoch | None = kf(LeaderIdAndEpoch, "12+", tag=1, default=None)
    snapshot_id: SnapshotId | None = kf(SnapshotId, "12+", tag=2, default=None)
    aborted_transactions: list[AbortedTransaction] | None = kf(Array(AbortedTransaction), "4+", nullable="4+")
    preferred_read_replica: int = kf(INT32, "11+", default=-1)
    records: Records = kf(RECORDS, nullable="0+")


@dataclass(slots=True)
class FetchResponseTopic(Struct):
    topic: str = kf(STRING)
    partitions: list[FetchResponsePartition] = kf(Array(FetchResponsePartition))


@dataclass(slots=True)
class FetchResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.FETCH
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "1+")
    error_code: int = kf(INT16, "7+")
    session_id: int = kf(INT32, "7+")
    responses: list[FetchResponseTopic] = kf(Array(FetchResponseTopic))
