"""Broker requests and responses (small frozen dataclasses).

Client requests (``ProduceRequest``, ``FetchRecordsRequest``, ``ListOffsetsRequest``,
``MetadataRequest``, ``CreateTopicsRequest``) reach the node through its client calls and are
answered with a ``ClientResponse`` effect. Node-to-node messages travel in ``Send`` effects and
arrive through ``handle(now, src, message, reply_ctx)``, like the raft RPCs; a response goes back
as ``Send(src, response, reply_ctx)``. Node-to-node kinds: follower fetches
(``FetchRecordsRequest`` with ``replica_id >= 0`` → ``FetchRecordsResponse``), and the
broker-to-controller RPCs ``BrokerRegistration*``, ``BrokerHeartbeat*``, ``AlterPartition*`` and
a forwarded ``CreateTopics*``, and the transaction coordinator's ``WriteTxnMarkers*`` to partition
leaders. ``correlation`` lets the sender match a response to its request
(the runtime may map it to the Kafka correlation id); a core never reuses one.

Node-to-node requests carry the sender's ``cluster_id`` (the raft ``cluster.id``; None from a
client, and not checked); a node of another cluster answers :func:`inconsistent_cluster_answer`.

Optional ints are None when absent (the wire encodes -1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .batch import Batch, NewBatch
from .errors import BrokerError
from .topic_partition import TopicPartition

CONSUMER_REPLICA_ID = -1
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

# ---------------------------------------------------------------------------- produce


@dataclass(frozen=True, slots=True)
class ProducePartition:
    partition: TopicPartition
    batches: tuple[NewBatch, ...]
    current_leader_epoch: int | None = None


COORDINATOR_ORIGIN = "coordinator"


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    """``acks`` -1 (all in-sync replicas), 0 (no answer) or 1 (leader only)."""

    acks: int
    timeout_ms: int
    partitions: tuple[ProducePartition, ...]
    origin: str = "client"  # "coordinator" (COORDINATOR_ORIGIN) may write internal topics


@dataclass(frozen=True, slots=True)
class ProducedPartition:
    """``base_offset`` is the offset of the first record appended, -1 on error."""

    partition: TopicPartition
    error: BrokerError
    base_offset: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    partitions: tuple[ProducedPartition, ...]


# ---------------------------------------------------------------------------- fetch


@dataclass(frozen=True, slots=True)
class FetchPartition:
    partition: TopicPartition
    fetch_offset: int
    max_bytes: int = 1_048_576
    current_leader_epoch: int | None = None
    last_fetched_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class FetchRecordsRequest:
    """A consumer (``replica_id`` -1) or follower (``replica_id`` = its broker id, with its
    ``broker_epoch``) fetch. ``isolation_level`` 0 read_uncommitted (a consumer reads up to the
    high watermark), 1 read_committed (up to the last stable offset)."""

    partitions: tuple[FetchPartition, ...]
    replica_id: int = CONSUMER_REPLICA_ID
    broker_epoch: int = -1
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    isolation_level: int = 0
    correlation: int = 0
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """``diverging_epoch`` is ``(epoch, end_offset)`` (KIP-320); ``current_leader`` is
    ``(leader_id, leader_epoch)`` as this broker knows it, on leadership errors.
    ``log_end_offset`` is filled for follower fetches (the leader's LEO).
    ``aborted_transactions``: for a read_committed consumer fetch, the ``(producer id, first
    offset)`` of each aborted transaction with records in the range served (None otherwise)."""

    partition: TopicPartition
    error: BrokerError
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    batches: tuple[Batch, ...] = ()
    diverging_epoch: tuple[int, int] | None = None
    current_leader: tuple[int | None, int] | None = None
    log_end_offset: int = -1
    aborted_transactions: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True, slots=True)
class FetchRecordsResponse:
    partitions: tuple[FetchedPartition, ...]
    correlation: int = 0
    error: BrokerError = BrokerError.NONE


# ---------------------------------------------------------------------------- list offsets


@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    """``timestamp`` -2 earliest, -1 latest (the high watermark; the last stable offset for
    read_committed), else ms."""

    partition: TopicPartition
    timestamp: int
    current_leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    partitions: tuple[ListOffsetsPartition, ...]
    replica_id: int = CONSUMER_REPLICA_ID
    isolation_level: int = 0


@dataclass(frozen=True, slots=True)
class ListedOffset:
    partition: TopicPartition
    error: BrokerError
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    partitions: tuple[ListedOffset, ...]


# ---------------------------------------------------------------------------- metadata


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    """``topics`` None means every topic."""

    topics: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    error: BrokerError
    partition: int
    leader: int | None
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    error: BrokerError
    name: str
    topic_id: str | None
    partitions: tuple[PartitionMetadata, ...]


@dataclass(frozen=True, slots=True)
class MetadataResponse:
    """``brokers`` are the registered, unfenced brokers; ``controller_id`` the raft leader, or the
    answering broker when that leader is no broker."""

    brokers: tuple[BrokerInfo, ...]
    controller_id: int | None
    topics: tuple[TopicMetadata, ...]


# ---------------------------------------------------------------------------- create topics


@dataclass(frozen=True, slots=True)
class NewTopic:
    """-1 means "the broker default" for ``num_partitions``/``replication_factor``; with
    ``assignments`` (``(partition, replicas)`` pairs) both must be -1."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    topics: tuple[NewTopic, ...]
    timeout_ms: int = 30_000
    validate_only: bool = False
    correlation: int = 0
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    error: BrokerError
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class CreateTopicsResponse:
    topics: tuple[CreatedTopic, ...]
    correlation: int = 0


# ---------------------------------------------------------------------------- broker -> controller


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    """Sent by each broker incarnation (``incarnation`` is new on every start). ``damaged``: the
    partitions whose log lost a range to damage found at start-up (records beyond it were intact:
    the log had reached further); the controller takes the broker out of their ISR and ELR even
    where it is the last member (KIP-966's unclean-shutdown handling, per partition).
    ``host``/``port``: the client endpoint; ``inter_broker_host``/``inter_broker_port``: where other
    brokers send replica fetches and transaction markers (Kafka's ``inter.broker.listener.name``
    endpoint; empty: the node's voter address)."""

    broker_id: int
    incarnation: int
    host: str = ""
    port: int = 0
    correlation: int = 0
    damaged: tuple[TopicPartition, ...] = ()
    cluster_id: str | None = None
    inter_broker_host: str = ""
    inter_broker_port: int = 0


@dataclass(frozen=True, slots=True)
class BrokerRegistrationResponse:
    error: BrokerError
    broker_epoch: int = -1
    correlation: int = 0


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    """``metadata_offset``: the next raft offset the broker's image will apply."""

    broker_id: int
    broker_epoch: int
    metadata_offset: int
    want_fence: bool = False
    correlation: int = 0
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponse:
    error: BrokerError
    is_fenced: bool = True
    correlation: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    """A partition leader asks to change the ISR (shrink or expand), based on the state it
    knows (``leader_epoch``, ``partition_epoch``)."""

    broker_id: int
    broker_epoch: int
    partition: TopicPartition
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    correlation: int = 0
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    error: BrokerError
    partition: TopicPartition
    leader: int | None = None
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()
    correlation: int = 0


# ---------------------------------------------------------------------------- offsets for leader epochs


@dataclass(frozen=True, slots=True)
class EpochQuery:
    """KIP-320: where does ``leader_epoch`` end in the leader's log?"""

    partition: TopicPartition
    leader_epoch: int
    current_leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochRequest:
    partitions: tuple[EpochQuery, ...]
    replica_id: int = CONSUMER_REPLICA_ID


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """The largest epoch at or below the one asked about and its end offset (-1, -1: none)."""

    partition: TopicPartition
    error: BrokerError
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochResponse:
    partitions: tuple[EpochEndOffset, ...]


# ---------------------------------------------------------------------------- idempotent producers


@dataclass(frozen=True, slots=True)
class InitProducerIdRequest:
    """A client asks for a producer id: an idempotent producer (no transactional id, any broker
    answers) or a transactional one (its transaction coordinator answers, ``txn_coordinator``).
    ``producer_id``/``producer_epoch`` (InitProducerId v3+, KIP-360): the id and epoch the
    producer has, to bump instead of starting over (-1: none)."""

    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class InitProducerIdResponse:
    error: BrokerError
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsRequest:
    """A broker asks the active controller for a block of producer ids (Kafka's API 67)."""

    broker_id: int
    broker_epoch: int
    correlation: int = 0
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsResponse:
    error: BrokerError
    producer_id_start: int = -1
    producer_id_len: int = 0
    correlation: int = 0


# ---------------------------------------------------------------------------- transaction markers


@dataclass(frozen=True, slots=True)
class TxnMarkerEntry:
    """One producer's end-of-transaction marker for ``partitions`` (``commit`` False: abort)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class WriteTxnMarkersRequest:
    """The transaction coordinator asks a partition leader to append markers (Kafka's API 27).
    Answered once each marker is replicated (acks=-1) or failed."""

    markers: tuple[TxnMarkerEntry, ...]
    correlation: int = 0
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class TxnMarkerResult:
    producer_id: int
    errors: tuple[tuple[TopicPartition, BrokerError], ...]


@dataclass(frozen=True, slots=True)
class WriteTxnMarkersResponse:
    markers: tuple[TxnMarkerResult, ...]
    correlation: int = 0


BrokerRequest = (
    FetchRecordsRequest
    | BrokerRegistrationRequest
    | BrokerHeartbeatRequest
    | AlterPartitionRequest
    | CreateTopicsRequest
    | AllocateProducerIdsRequest
    | WriteTxnMarkersRequest
)
BrokerResponse = (
    FetchRecordsResponse
    | BrokerRegistrationResponse
    | BrokerHeartbeatResponse
    | AlterPartitionResponse
    | CreateTopicsResponse
    | AllocateProducerIdsResponse
    | WriteTxnMarkersResponse
)
BROKER_REQUESTS = (
    FetchRecordsRequest,
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    AlterPartitionRequest,
    CreateTopicsRequest,
    AllocateProducerIdsRequest,
    WriteTxnMarkersRequest,
)
BROKER_RESPONSES = (
    FetchRecordsResponse,
    BrokerRegistrationResponse,
    BrokerHeartbeatResponse,
    AlterPartitionResponse,
    CreateTopicsResponse,
    AllocateProducerIdsResponse,
    WriteTxnMarkersResponse,
)


def is_broker_request(message: object) -> bool:
    """True for node-to-node broker requests (the runtime sends these as requests and feeds the
    answer back to ``handle``); False for responses and for anything else."""
    return isinstance(message, BROKER_REQUESTS)


def inconsistent_cluster_answer(request: BrokerRequest) -> BrokerResponse:
    """The answer to a node-to-node request of another cluster: INCONSISTENT_CLUSTER_ID throughout."""
    error = BrokerError.INCONSISTENT_CLUSTER_ID
    m: Any = request
    if isinstance(m, FetchRecordsRequest):
        return FetchRecordsResponse((), m.correlation, error)
    if isinstance(m, BrokerRegistrationRequest):
        return BrokerRegistrationResponse(error, correlation=m.correlation)
    if isinstance(m, BrokerHeartbeatRequest):
        return BrokerHeartbeatResponse(error, correlation=m.correlation)
    if isinstance(m, AlterPartitionRequest):
        return AlterPartitionResponse(error, m.partition, correlation=m.correlation)
    if isinstance(m, CreateTopicsRequest):
        return CreateTopicsResponse(tuple(CreatedTopic(t.name, error) for t in m.topics), m.correlation)
    if isinstance(m, AllocateProducerIdsRequest):
        return AllocateProducerIdsResponse(error, correlation=m.correlation)
    if isinstance(m, WriteTxnMarkersRequest):
        results = tuple(TxnMarkerResult(e.producer_id, tuple((tp, error) for tp in e.partitions)) for e in m.markers)
        return WriteTxnMarkersResponse(results, m.correlation)
    raise TypeError(f"not a node-to-node broker request: {type(m).__name__}")
