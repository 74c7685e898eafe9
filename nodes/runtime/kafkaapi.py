"""The Kafka wire protocol on the client listener, mapped to the broker core (sans-IO).

Pure functions between the Kafka request/response classes of ``nodes.kafka.protocol`` and the
broker core's messages (``nodes.broker.messages``); the driver (``kafka_service.py``) calls the
core in between. APIs and versions: ``nodes.kafka.versions.SUPPORTED`` (ApiVersions 0-3,
Metadata 1-12, Produce 3-9, Fetch 4-12, ListOffsets 1-7, CreateTopics 2-7, InitProducerId 0-4,
OffsetForLeaderEpoch 0-4).

* **Produce**: every partition's records are checked with
  :func:`nodes.kafka.records.validate_produce` first (exactly one v2 batch, CRC-32C, offset
  deltas, record framing); a bad partition gets that check's error code (CORRUPT_MESSAGE,
  INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE) and never reaches the core. Transactional
  batches go to the core like idempotent ones (the partition leader opens the producer's
  transaction at the first, ``nodes.broker.producer_state``). Idempotent batches (a producer
  id) go to the core, whose partition leader checks their
  sequence (``nodes.broker.producer_state``): a retried batch is answered with its original
  offset, a gap with OUT_OF_ORDER_SEQUENCE_NUMBER, an old producer epoch with
  INVALID_PRODUCER_EPOCH.
* **Fetch** is sessionless (``session_id`` 0; a request naming a session gets
  FETCH_SESSION_ID_NOT_FOUND). Every fetch is a consumer fetch (replicas replicate over the
  controller listener, ``brokerwire.py``), reading up to the high watermark; stored batches are
  sent with their offsets and leader epoch stamped in (:func:`~nodes.kafka.records.stamp_batch`).
  A read_committed fetch reads up to the last stable offset and gets the aborted transactions
  overlapping what it is served (``aborted_transactions``, v4+); ``last_stable_offset`` (v4+)
  is the HW while no transaction is open. v12 carries
  ``diverging_epoch`` and, on leadership errors, ``current_leader``.
* **ListOffsets**: -2 earliest, -1 latest (the high watermark; the last stable offset for
  read_committed, which also bounds a timestamp lookup), or a timestamp; -3 (max
  timestamp, v7) is answered INVALID_REQUEST.
* **Metadata**: registered, unfenced brokers with their advertised client listener; the raft
  leader as controller; partitions with leader (-1 and LEADER_NOT_AVAILABLE while leaderless),
  leader epoch, replicas, ISR, offline replicas. Topics are never created automatically.
* **CreateTopics** goes to the core (forwarded to the active controller when needed); at most
  :data:`MAX_PARTITIONS` partitions per topic.
* **InitProducerId** goes to the core, which hands out producer ids from blocks allocated through
  the quorum (``nodes.broker.producer_ids``); with a transactional id its transaction
  coordinator answers (``nodes.broker.txn_coordinator``; the other transaction APIs are in
  ``txnapi.py``).
* **OffsetForLeaderEpoch** (KIP-320): the partition leader's epoch cache answers where an epoch
  ends; -1/-1 when it has no epoch at or below the one asked about.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nodes.runtime.primitives import NULL_UUID

from ..broker import messages as bm
from ..broker.batch import Batch, NewBatch
from ..broker.errors import BrokerError
from ..broker.group_messages import INTERNAL_TOPICS
from ..broker.topic_partition import TopicPartition
from ..kafka import protocol as kp
from ..kafka.errors import ErrorCode
from ..kafka.records import RecordError, stamp_batch, validate_produce

__all__ = [
    "MAX_FETCH_WAIT_MS",
    "MAX_PARTITIONS",
    "ProducePlan",
    "create_topics_request",
    "create_topics_response",
    "fetch_request",
    "fetch_response",
    "fetch_session_error",
    "init_producer_id_request",
    "init_producer_id_response",
    "offset_for_leader_epoch_request",
    "offset_for_leader_epoch_response",
    "list_offsets_request",
    "list_offsets_response",
    "metadata_request",
    "metadata_response",
    "produce_plan",
    "produce_response",
    "stamped_records",
]

MAX_PARTITIONS = 1_000
"""Largest partition count accepted per topic in CreateTopics (the core itself has no cap)."""
MAX_FETCH_WAIT_MS = 60_000
"""Longest a fetch may park (larger ``max_wait_ms`` values are clamped)."""


def _epoch(value: int) -> int | None:
    return None if value < 0 else value


def _opt(value: int | None) -> int:
    return -1 if value is None else value


# --- Produce ----------------------------------------------------------------------------------


@dataclass(slots=True)
class ProducePlan:
    """A Kafka Produce request split into what goes to the core and what is answered here."""

    request: bm.ProduceRequest
    errors: dict[tuple[str, int], tuple[int, str]] = field(default_factory=dict)

    @property
    def needs_core(self) -> bool:
        return bool(self.request.partitions)


def produce_plan(req: kp.ProduceRequest) -> ProducePlan:
    """Validate every partition's records; build the core's request from the good ones."""
    errors: dict[tuple[str, int], tuple[int, str]] = {}
    parts: list[bm.ProducePartition] = []
    seen: set[tuple[str, int]] = set()
    for topic in req.topic_data:
        for pd in topic.partition_data:
            key = (topic.name, pd.index)
            if key in seen:
                continue  # a repeated partition gets the first occurrence's answer
            seen.add(key)
            try:
                header = validate_produce(pd.records)
            except RecordError as exc:
                errors[key] = (int(exc.error_code), str(exc))
                continue
            batch = NewBatch(bytes(pd.records), header.record_count, header.max_timestamp)  # type: ignore[arg-type]
            parts.append(bm.ProducePartition(TopicPartition(topic.name, pd.index), (batch,)))
    return ProducePlan(bm.ProduceRequest(req.acks, req.timeout_ms, tuple(parts)), errors)


def produce_response(req: kp.ProduceRequest, plan: ProducePlan, resp: bm.ProduceResponse | None) -> kp.ProduceResponse:
    """The Kafka answer, in the request's topic/partition order."""
    by_tp = {} if resp is None else {(p.partition.topic, p.partition.partition): p for p in resp.partitions}
    topics = []
    for topic in req.topic_data:
        out = []
        for pd in topic.partition_data:
            key = (topic.name, pd.index)
            local = plan.errors.get(key)
            if local is not None:
                out.append(kp.PartitionProduceResponse(pd.index, local[0], -1, -1, -1, [], local[1]))
                continue
            produced = by_tp.get(key)
            if produced is None:  # pragma: no cover - the core answers every partition it was given
                out.append(kp.PartitionProduceResponse(pd.index, ErrorCode.UNKNOWN_SERVER_ERROR, -1))
                continue
            ok = produced.error is BrokerError.NONE
            out.append(
                kp.PartitionProduceResponse(
                    pd.index,
                    int(produced.error),
                    produced.base_offset if ok else -1,
                    -1,
                    produced.log_start_offset if ok else -1,
                )
            )
        topics.append(kp.TopicProduceResponse(topic.name, out))
    return kp.ProduceResponse(topics)


# --- Fetch ------------------------------------------------------------------------------------


def fetch_session_error(req: kp.FetchRequest, version: int) -> kp.FetchResponse | None:
    """The answer to a request that names a fetch session (we keep none), else None."""
    if version < 7:
        return None
    if req.session_id != 0:
        code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    elif req.session_epoch not in (-1, 0):
        code = ErrorCode.INVALID_FETCH_SESSION_EPOCH
    else:
        return None
    return kp.FetchResponse(error_code=code, session_id=0, responses=[])


def fetch_request(req: kp.FetchRequest) -> bm.FetchRecordsRequest:
    parts = tuple(
        bm.FetchPartition(
            TopicPartition(t.topic, p.partition),
            p.fetch_offset,
            max(0, p.partition_max_bytes),
            _epoch(p.current_leader_epoch),
            _epoch(p.last_fetched_epoch),
        )
        for t in req.topics
        for p in t.partitions
    )
    return bm.FetchRecordsRequest(
        parts,
        max_wait_ms=min(max(0, req.max_wait_ms), MAX_FETCH_WAIT_MS),
        min_bytes=req.min_bytes,
        max_bytes=max(0, req.max_bytes),
        isolation_level=1 if req.isolation_level == 1 else 0,
    )


def stamped_records(batches: Sequence[Batch]) -> list[bytes]:
    """Stored batches as a Fetch record set: base offset and leader epoch written in."""
    return [stamp_batch(b.data, b.base_offset, b.leader_epoch) for b in batches]


def _aborted(r: bm.FetchedPartition) -> list[kp.AbortedTransaction]:
    return [kp.AbortedTransaction(pid, first) for pid, first in r.aborted_transactions or ()]


def fetch_response(req: kp.FetchRequest, resp: bm.FetchRecordsResponse, version: int) -> kp.FetchResponse:
    """Kafka FetchResponse: the core's results (one per requested partition, in order) grouped
    like the request's topics."""
    results = iter(resp.partitions)
    read_committed = req.isolation_level == 1
    topics = []
    for t in req.topics:
        out = []
        for p in t.partitions:
            r = next(results)
            ok = r.error is BrokerError.NONE
            diverging = None
            leader = None
            if version >= 12 and r.diverging_epoch is not None:
                diverging = kp.EpochEndOffset(*r.diverging_epoch)
            if version >= 12 and r.current_leader is not None and not ok:
                leader = kp.LeaderIdAndEpoch(_opt(r.current_leader[0]), r.current_leader[1])
            out.append(
                kp.FetchResponsePartition(
                    partition_index=p.partition,
                    error_code=int(r.error),
                    high_watermark=r.high_watermark,
                    last_stable_offset=r.last_stable_offset,
                    log_start_offset=r.log_start_offset,
                    diverging_epoch=diverging,
                    current_leader=leader,
                    aborted_transactions=_aborted(r) if read_committed else None,
                    preferred_read_replica=-1,
                    records=stamped_records(r.batches) if r.batches else b"",
                )
            )
        topics.append(kp.FetchResponseTopic(t.topic, out))
    return kp.FetchResponse(error_code=int(resp.error), session_id=0, responses=topics)


# --- ListOffsets ------------------------------------------------------------------------------


def list_offsets_request(req: kp.ListOffsetsRequest) -> bm.ListOffsetsRequest:
    parts = tuple(
        bm.ListOffsetsPartition(TopicPartition(t.name, p.partition_index), p.timestamp, _epoch(p.current_leader_epoch))
        for t in req.topics
        for p in t.partitions
    )
    return bm.ListOffsetsRequest(parts, isolation_level=1 if req.isolation_level == 1 else 0)


def list_offsets_response(req: kp.ListOffsetsRequest, resp: bm.ListOffsetsResponse) -> kp.ListOffsetsResponse:
    results = iter(resp.partitions)
    topics = []
    for t in req.topics:
        out = []
        for p in t.partitions:
            r = next(results)
            out.append(
                kp.ListOffsetsPartitionResponse(
                    p.partition_index, int(r.error), r.timestamp, r.offset, _opt(r.leader_epoch)
                )
            )
        topics.append(kp.ListOffsetsTopicResponse(t.name, out))
    return kp.ListOffsetsResponse(topics=topics)


# --- Metadata ---------------------------------------------------------------------------------


def metadata_request(req: kp.MetadataRequest) -> bm.MetadataRequest:
    names = req.topic_names()
    return bm.MetadataRequest(None if names is None else tuple(dict.fromkeys(names)))


def _uuid(text: str | None) -> uuid.UUID:
    if not text:
        return NULL_UUID
    try:
        return uuid.UUID(text)
    except ValueError:
        return NULL_UUID


def metadata_response(resp: bm.MetadataResponse, cluster_id: str) -> kp.MetadataResponse:
    brokers = [kp.MetadataResponseBroker(b.node_id, b.host, b.port, None) for b in resp.brokers]
    topics = [
        kp.MetadataResponseTopic(
            error_code=int(t.error),
            name=t.name,
            topic_id=_uuid(t.topic_id),
            is_internal=t.name in INTERNAL_TOPICS,
            partitions=[
                kp.MetadataResponsePartition(
                    int(p.error),
                    p.partition,
                    _opt(p.leader),
                    p.leader_epoch,
                    list(p.replicas),
                    list(p.isr),
                    list(p.offline_replicas),
                )
                for p in t.partitions
            ],
        )
        for t in resp.topics
    ]
    return kp.MetadataResponse(
        brokers=brokers, cluster_id=cluster_id, controller_id=_opt(resp.controller_id), topics=topics
    )


# --- CreateTopics -----------------------------------------------------------------------------


def create_topics_request(req: kp.CreateTopicsRequest) -> tuple[bm.CreateTopicsRequest, dict[int, tuple[int, str]]]:
    """The core's request, plus answers decided here (index in the request -> (code, message))
    for topics asking for more than :data:`MAX_PARTITIONS` partitions."""
    topics = []
    refused: dict[int, tuple[int, str]] = {}
    for i, t in enumerate(req.topics):
        if t.num_partitions > MAX_PARTITIONS or len(t.assignments) > MAX_PARTITIONS:
            refused[i] = (ErrorCode.INVALID_PARTITIONS, f"at most {MAX_PARTITIONS} partitions per topic")
            continue
        topics.append(
            bm.NewTopic(
                t.name,
                t.num_partitions,
                t.replication_factor,
                tuple((a.partition_index, tuple(a.broker_ids)) for a in t.assignments),
                tuple((c.name, c.value) for c in t.configs if c.value is not None),
            )
        )
    return bm.CreateTopicsRequest(tuple(topics), max(0, req.timeout_ms), req.validate_only), refused


def create_topics_response(
    req: kp.CreateTopicsRequest,
    refused: dict[int, tuple[int, str]],
    resp: bm.CreateTopicsResponse | None,
    topic_id: Callable[[str], str | None] = lambda name: None,
) -> kp.CreateTopicsResponse:
    results = iter(() if resp is None else resp.topics)
    out = []
    for i, t in enumerate(req.topics):
        if i in refused:
            code, message = refused[i]
            out.append(kp.CreatableTopicResult(name=t.name, error_code=code, error_message=message, configs=[]))
            continue
        r = next(results)
        ok = r.error is BrokerError.NONE
        out.append(
            kp.CreatableTopicResult(
                name=r.name,
                topic_id=_uuid(topic_id(r.name)) if ok else NULL_UUID,
                error_code=int(r.error),
                error_message=r.error_message,
                num_partitions=r.num_partitions,
                replication_factor=r.replication_factor,
                configs=[],
            )
        )
    return kp.CreateTopicsResponse(topics=out)


# --- InitProducerId ---------------------------------------------------------------------------


def init_producer_id_request(req: kp.InitProducerIdRequest) -> bm.InitProducerIdRequest:
    return bm.InitProducerIdRequest(
        req.transactional_id, req.transaction_timeout_ms, req.producer_id, req.producer_epoch
    )


def init_producer_id_response(resp: bm.InitProducerIdResponse, version: int = 4) -> kp.InitProducerIdResponse:
    """PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4 (KIP-588)."""
    error = resp.error
    if error is BrokerError.PRODUCER_FENCED and version < 4:
        error = BrokerError.INVALID_PRODUCER_EPOCH
    return kp.InitProducerIdResponse(
        error_code=int(error), producer_id=resp.producer_id, producer_epoch=resp.producer_epoch
    )


# --- OffsetForLeaderEpoch ---------------------------------------------------------------------


def offset_for_leader_epoch_request(req: kp.OffsetForLeaderEpochRequest) -> bm.OffsetForLeaderEpochRequest:
    parts = tuple(
        bm.EpochQuery(TopicPartition(t.topic, p.partition), p.leader_epoch, _epoch(p.current_leader_epoch))
        for t in req.topics
        for p in t.partitions
    )
    return bm.OffsetForLeaderEpochRequest(parts, req.replica_id if req.replica_id >= 0 else -1)


def offset_for_leader_epoch_response(
    req: kp.OffsetForLeaderEpochRequest, resp: bm.OffsetForLeaderEpochResponse
) -> kp.OffsetForLeaderEpochResponse:
    results = iter(resp.partitions)
    topics = []
    for t in req.topics:
        out = []
        for p in t.partitions:
            r = next(results)
            out.append(kp.EpochEndOffsetResult(int(r.error), p.partition, r.leader_epoch, r.end_offset))
        topics.append(kp.OffsetForLeaderTopicResult(t.topic, out))
    return kp.OffsetForLeaderEpochResponse(topics=topics)
