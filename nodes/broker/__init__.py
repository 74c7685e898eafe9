"""Sans-IO Kafka-style broker core for the combined KRaft node (docs/kraft.md §3).

:class:`BrokerNode` (``node``) owns a raft voter, the register service (``nodes.kv``), the
metadata image (``image``, ``records``) and controller (``controller``), and the broker:
``replica_manager`` (produce/fetch/list-offsets, HW and ISR), ``partition``/``log``/``batch``
(per-partition state and storage), ``fetcher`` (follower replication), ``purgatory``/``delayed``
(delayed operations), ``lifecycle`` (registration and heartbeats). Messages are in ``messages``,
effects in ``effects``, settings in ``config``, seeded bugs in ``bugs``.
"""

from .batch import Batch, BatchError, NewBatch, decode_batch, encode_batch, encode_batches, recover_batches
from .config import PROPERTY_KEYS, TOPIC_CONFIG_KEYS, BrokerConfig
from .effects import AppendPartitionLog, ClientResponse, CloseClientConnection, FlushPartition, TruncatePartitionLog
from .errors import BrokerError
from .image import BrokerRegistration, MetadataImage, PartitionState
from .messages import (
    BROKER_REQUESTS,
    BROKER_RESPONSES,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerInfo,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreatedTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    FetchedPartition,
    FetchPartition,
    FetchRecordsRequest,
    FetchRecordsResponse,
    ListedOffset,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    NewTopic,
    PartitionMetadata,
    ProducedPartition,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    TopicMetadata,
    is_broker_request,
)
from .node import RAFT_MESSAGES, BrokerNode
from .records import METADATA_TAG, MetadataError, decode_metadata, encode_metadata, is_metadata_payload
from .topic_partition import TopicPartition

__all__ = [
    "BROKER_REQUESTS",
    "BROKER_RESPONSES",
    "METADATA_TAG",
    "PROPERTY_KEYS",
    "RAFT_MESSAGES",
    "TOPIC_CONFIG_KEYS",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "AppendPartitionLog",
    "Batch",
    "BatchError",
    "BrokerConfig",
    "BrokerError",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "BrokerInfo",
    "BrokerNode",
    "BrokerRegistration",
    "BrokerRegistrationRequest",
    "BrokerRegistrationResponse",
    "ClientResponse",
    "CloseClientConnection",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "CreatedTopic",
    "FetchPartition",
    "FetchRecordsRequest",
    "FetchRecordsResponse",
    "FetchedPartition",
    "FlushPartition",
    "ListOffsetsPartition",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListedOffset",
    "MetadataError",
    "MetadataImage",
    "MetadataRequest",
    "MetadataResponse",
    "NewBatch",
    "NewTopic",
    "PartitionMetadata",
    "PartitionState",
    "ProducePartition",
    "ProduceRequest",
    "ProduceResponse",
    "ProducedPartition",
    "TopicMetadata",
    "TopicPartition",
    "TruncatePartitionLog",
    "decode_batch",
    "decode_metadata",
    "encode_batch",
    "encode_batches",
    "encode_metadata",
    "is_broker_request",
    "is_metadata_payload",
    "recover_batches",
]
