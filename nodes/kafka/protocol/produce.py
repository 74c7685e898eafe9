"""Produce (key 0), versions 3-9 (record batch v2 only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..versions import ApiKey
from .schema import INT16, INT32, INT64, RECORDS, STRING, Array, Message, Struct, kf

__all__ = [
    "BatchIndexAndErrorMessage",
    "PartitionProduceData",
    "PartitionProduceResponse",
    "ProduceRequest",
    "ProduceResponse",
    "TopicProduceData",
    "TopicProduceResponse",
]

Records = bytes | bytearray | memoryview | list | tuple | None


@dataclass(slots=True)
class PartitionProduceData(Struct):
    index: int = kf(INT32)
    records: Records = kf(RECORDS, nullable="0+")


@dataclass(slots=True)
class TopicProduceData(Struct):
    name: str = kf(STRING)
    partition_data: list[PartitionProduceData] = kf(Array(PartitionProduceData))


@dataclass(slots=True)
class ProduceRequest(Message):
    """acks: 0 (no response is sent), 1 (leader append) or -1 (all in-sync replicas)."""

    API_KEY: ClassVar[int] = ApiKey.PRODUCE
    IS_REQUEST: ClassVar[bool] = True

    transactional_id: str | None = kf(STRING, nullable="0+", default=None)
    acks: int = kf(INT16)
    timeout_ms: int = kf(INT32)
    topic_data: list[TopicProduceData] = kf(Array(TopicProduceData))


@dataclass(slots=True)
class BatchIndexAndErrorMessage(Struct):
    batch_index: int = kf(INT32, "8+")
    batch_index_error_message: str | None = kf(STRING, "8+", nullable="8+", default=None)


@dataclass(slots=True)
class PartitionProduceResponse(Struct):
    index: int = kf(INT32)
    error_code: int = kf(INT16)
    base_offset: int = kf(INT64)
    log_append_time_ms: int = kf(INT64, "2+", default=-1)
    log_start_offset: int = kf(INT64, "5+", default=-1)
    record_errors: list[BatchIndexAndErrorMessage] = kf(Array(BatchIndexAndErrorMessage), "8+")
    error_message: str | None = kf(STRING, "8+", nullable="8+", default=None)


@dataclass(slots=True)
class TopicProduceResponse(Struct):
    name: str = kf(STRING)
    partition_responses: list[PartitionProduceResponse] = kf(Array(PartitionProduceResponse))


@dataclass(slots=True)
class ProduceResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.PRODUCE
    IS_REQUEST: ClassVar[bool] = False

    responses: list[TopicProduceResponse] = kf(Array(TopicProduceResponse))
    throttle_time_ms: int = kf(INT32, "1+")
