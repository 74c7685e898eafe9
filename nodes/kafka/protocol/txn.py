"""The transaction APIs at the versions of Kafka 3.0: AddPartitionsToTxn (24) 0-3,
AddOffsetsToTxn (25) 0-3, EndTxn (26) 0-3, TxnOffsetCommit (28) 0-3 (flexible from v3), and
WriteTxnMarkers (27) v1 only (flexible; v0 was removed by KIP-896). Field names are those of
Kafka's message JSON. InitProducerId is in ``init_producer_id.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..versions import ApiKey
from .schema import BOOL, INT16, INT32, INT64, STRING, Array, Message, Struct, kf

__all__ = [
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "AddPartitionsToTxnPartitionResult",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "AddPartitionsToTxnTopic",
    "AddPartitionsToTxnTopicResult",
    "EndTxnRequest",
    "EndTxnResponse",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitRequestPartition",
    "TxnOffsetCommitRequestTopic",
    "TxnOffsetCommitResponse",
    "TxnOffsetCommitResponsePartition",
    "TxnOffsetCommitResponseTopic",
    "WritableTxnMarker",
    "WritableTxnMarkerPartitionResult",
    "WritableTxnMarkerResult",
    "WritableTxnMarkerTopic",
    "WritableTxnMarkerTopicResult",
    "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse",
]

# --- AddPartitionsToTxn -----------------------------------------------------------------------


@dataclass(slots=True)
class AddPartitionsToTxnTopic(Struct):
    name: str = kf(STRING)
    partitions: list[int] = kf(Array(INT32))


@dataclass(slots=True)
class AddPartitionsToTxnRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.ADD_PARTITIONS_TO_TXN
    IS_REQUEST: ClassVar[bool] = True

    v3_and_below_transactional_id: str = kf(STRING)
    v3_and_below_producer_id: int = kf(INT64)
    v3_and_below_producer_epoch: int = kf(INT16)
    v3_and_below_topics: list[AddPartitionsToTxnTopic] = kf(Array(AddPartitionsToTxnTopic))


@dataclass(slots=True)
class AddPartitionsToTxnPartitionResult(Struct):
    partition_index: int = kf(INT32)
    partition_error_code: int = kf(INT16)


@dataclass(slots=True)
class AddPartitionsToTxnTopicResult(Struct):
    name: str = kf(STRING)
    results_by_partition: list[AddPartitionsToTxnPartitionResult] = kf(Array(AddPartitionsToTxnPartitionResult))


@dataclass(slots=True)
class AddPartitionsToTxnResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.ADD_PARTITIONS_TO_TXN
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32)
    results_by_topic_v3_and_below: list[AddPartitionsToTxnTopicResult] = kf(Array(AddPartitionsToTxnTopicResult))


# --- AddOffsetsToTxn / EndTxn -----------------------------------------------------------------


@dataclass(slots=True)
class AddOffsetsToTxnRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.ADD_OFFSETS_TO_TXN
    IS_REQUEST: ClassVar[bool] = True

    transactional_id: str = kf(STRING)
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT16)
    group_id: str = kf(STRING)


@dataclass(slots=True)
class AddOffsetsToTxnResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.ADD_OFFSETS_TO_TXN
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)


@dataclass(slots=True)
class EndTxnRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.END_TXN
    IS_REQUEST: ClassVar[bool] = True

    transactional_id: str = kf(STRING)
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT16)
    committed: bool = kf(BOOL)


@dataclass(slots=True)
class EndTxnResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.END_TXN
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)


# --- WriteTxnMarkers --------------------------------------------------------------------------


@dataclass(slots=True)
class WritableTxnMarkerTopic(Struct):
    name: str = kf(STRING)
    partition_indexes: list[int] = kf(Array(INT32))


@dataclass(slots=True)
class WritableTxnMarker(Struct):
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT16)
    transaction_result: bool = kf(BOOL)  # False abort, True commit
    topics: list[WritableTxnMarkerTopic] = kf(Array(WritableTxnMarkerTopic))
    coordinator_epoch: int = kf(INT32)


@dataclass(slots=True)
class WriteTxnMarkersRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.WRITE_TXN_MARKERS
    IS_REQUEST: ClassVar[bool] = True

    markers: list[WritableTxnMarker] = kf(Array(WritableTxnMarker))


@dataclass(slots=True)
class WritableTxnMarkerPartitionResult(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)


@dataclass(slots=True)
class WritableTxnMarkerTopicResult(Struct):
    name: str = kf(STRING)
    partitions: list[WritableTxnMarkerPartitionResult] = kf(Array(WritableTxnMarkerPartitionResult))


@dataclass(slots=True)
class WritableTxnMarkerResult(Struct):
    producer_id: int = kf(INT64)
    topics: list[WritableTxnMarkerTopicResult] = kf(Array(WritableTxnMarkerTopicResult))


@dataclass(slots=True)
class WriteTxnMarkersResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.WRITE_TXN_MARKERS
    IS_REQUEST: ClassVar[bool] = False

    markers: list[WritableTxnMarkerResult] = kf(Array(WritableTxnMarkerResult))


# --- TxnOffsetCommit --------------------------------------------------------------------------


@dataclass(slots=True)
class TxnOffsetCommitRequestPartition(Struct):
    partition_index: int = kf(INT32)
    committed_offset: int = kf(INT64)
    committed_leader_epoch: int = kf(INT32, "2+", default=-1)
    committed_metadata: str | None = kf(STRING, nullable="0+", default="")


@dataclass(slots=True)
class TxnOffsetCommitRequestTopic(Struct):
    name: str = kf(STRING)
    partitions: list[TxnOffsetCommitRequestPartition] = kf(Array(TxnOffsetCommitRequestPartition))


@dataclass(slots=True)
class TxnOffsetCommitRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.TXN_OFFSET_COMMIT
    IS_REQUEST: ClassVar[bool] = True

    transactional_id: str = kf(STRING)
    group_id: str = kf(STRING)
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT16)
    generation_id: int = kf(INT32, "3+", default=-1)
    member_id: str = kf(STRING, "3+")
    group_instance_id: str | None = kf(STRING, "3+", nullable="3+", default=None)
    topics: list[TxnOffsetCommitRequestTopic] = kf(Array(TxnOffsetCommitRequestTopic))


@dataclass(slots=True)
class TxnOffsetCommitResponsePartition(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)


@dataclass(slots=True)
class TxnOffsetCommitResponseTopic(Struct):
    name: str = kf(STRING)
    partitions: list[TxnOffsetCommitResponsePartition] = kf(Array(TxnOffsetCommitResponsePartition))


@dataclass(slots=True)
class TxnOffsetCommitResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.TXN_OFFSET_COMMIT
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32)
    topics: list[TxnOffsetCommitResponseTopic] = kf(Array(TxnOffsetCommitResponseTopic))
