"""The transaction coordinator (KIP-98, docs/kraft.md §7.3; Kafka's ``TransactionCoordinator``,
``TransactionStateManager`` and ``TransactionMarkerChannelManager``), sans-IO.

Each transactional id lives in one partition of ``__transaction_state`` (Java ``hashCode``
modulo the partition count); the broker leading that partition is the id's coordinator. Every
state change is written there first (origin coordinator, acks=-1) and takes effect in memory when
the write is replicated; while a write is in flight the id answers CONCURRENT_TRANSACTIONS.

States (Kafka's numbering, also in the log): Empty, Ongoing, PrepareCommit, PrepareAbort,
CompleteCommit, CompleteAbort.

* **InitProducerId** with a transactional id: a new id gets a producer id from the broker's
  quorum-allocated blocks (``producer_ids.py``) and epoch 0; a known one gets its epoch bumped,
  which fences the previous instance (a new producer id when the epoch is exhausted). If a
  transaction was Ongoing it is aborted first, at the bumped epoch, and the caller is told
  CONCURRENT_TRANSACTIONS (it retries and gets the next epoch once the abort completed).
* **AddPartitionsToTxn** / **AddOffsetsToTxn** (the group's ``__consumer_offsets`` partition)
  add partitions to the transaction, which becomes Ongoing (its start time is when its timeout
  runs from).
* **EndTxn** writes PrepareCommit/PrepareAbort and answers; then WriteTxnMarkers goes to the
  leader of every partition of the transaction (retried, following leadership, until each is
  written); when all are written, CompleteCommit/CompleteAbort is logged. A retried EndTxn
  after completion is answered NONE; one that contradicts the outcome INVALID_TXN_STATE.
* **Timeouts**: an Ongoing transaction older than its timeout is aborted at a bumped epoch (the
  producer is fenced).
* **Failover**: a broker that becomes leader of a ``__transaction_state`` partition replays its
  log (COORDINATOR_LOAD_IN_PROGRESS until the high watermark covers it), then resends the markers
  of every transaction it finds in PrepareCommit/PrepareAbort and completes them.

The coordinator epoch carried by the markers is the leader epoch of the state partition.

Seeded bug ``marker-partial``: only the first partition's marker is sent, and the transaction is
logged complete (the producer goes on) once it is written; the other partitions keep an open
transaction, which the producer's next one joins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..kafka.protocol.schema import INT8, INT16, INT32, INT64, STRING, Array, Struct, decode_struct, encode_struct, kf
from ..kafka.records import decode_batch
from ..raft.config import MS
from ..runtime.primitives import DecodeError, Reader
from . import txn_messages as tm
from .bugs import MARKER_PARTIAL
from .coordinator_base import CreateTopic, InternalTopicCoordinator, Load, partition_for
from .errors import BrokerError
from .group_messages import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorInfo,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from .messages import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnMarkerEntry,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from .topic_partition import TopicPartition

__all__ = ["TxnCoordinator", "TxnMetadata"]


EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = range(6)
STATE_NAMES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort")
_PREPARED = (PREPARE_COMMIT, PREPARE_ABORT)
_MAX_EPOCH = 32_766  # Kafka bumps to a new producer id rather than reach Short.MaxValue
_RETRY_NS = 100 * MS  # backoff before a marker (or the completion record) is tried again
_GIVE_UP = (BrokerError.INVALID_PRODUCER_EPOCH, BrokerError.TRANSACTION_COORDINATOR_FENCED)

# --- records of __transaction_state (Kafka's TransactionLogKey / TransactionLogValue, version 0)


@dataclass(slots=True)
class _TxnKey(Struct):
    transactional_id: str = kf(STRING)


@dataclass(slots=True)
class _TxnPartitions(Struct):
    topic: str = kf(STRING)
    partition_ids: list[int] = kf(Array(INT32))


@dataclass(slots=True)
class _TxnValue(Struct):
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT16)
    transaction_timeout_ms: int = kf(INT32)
    transaction_status: int = kf(INT8)
    transaction_partitions: list[_TxnPartitions] = kf(Array(_TxnPartitions))
    transaction_last_update_timestamp_ms: int = kf(INT64)
    transaction_start_timestamp_ms: int = kf(INT64)


def _encode(version: int, obj: Struct) -> bytes:
    return version.to_bytes(2, "big", signed=True) + bytes(encode_struct(obj, 0, False).getvalue())


@dataclass
class TxnMetadata:
    """One transactional id: its producer, state and partitions. ``pending``: a log write of
    this id is in flight. ``markers``: partitions whose marker is not yet written (prepared
    states); ``inflight``: those of them a WriteTxnMarkers is out for."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int = EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    start_ns: int = -1
    pending: bool = False
    markers: set[TopicPartition] = field(default_factory=set)
    inflight: set[TopicPartition] = field(default_factory=set)
    retry_at: int | None = None  # when to send the markers (or the completion) again
    abort_at: int = -1  # a timed-out transaction's abort failed: not tried again before this

    def timeout_at(self) -> int:
        """When the coordinator next tries to abort this open transaction for its timeout."""
        return max(self.start_ns + self.timeout_ms * MS, self.abort_at)

    @property
    def state_name(self) -> str:
        return STATE_NAMES[self.state]

    def record(self, now_ms: int, **changes: Any) -> tuple[bytes, bytes]:
        """The log record of this id with ``changes`` applied (not applied to ``self``)."""
        view = {
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "timeout_ms": self.timeout_ms,
            "state": self.state,
            "partitions": self.partitions,
            "start_ns": self.start_ns,
            **changes,
        }
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(view["partitions"]):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        value = _TxnValue(
            view["producer_id"],
            view["producer_epoch"],
            view["timeout_ms"],
            view["state"],
            [_TxnPartitions(t, ps) for t, ps in by_topic.items()],
            now_ms,
            view["start_ns"] // MS if view["start_ns"] >= 0 else -1,
        )
        return _encode(0, _TxnKey(self.transactional_id)), _encode(0, value)


@dataclass
class _Inflight:
    meta: TxnMetadata
    partitions: tuple[TopicPartition, ...]
    deadline: int


Respond = Callable[[Any], None]


class TxnCoordinator(InternalTopicCoordinator):
    """The coordinator of every transactional id whose ``__transaction_state`` partition this
    broker leads. ``producer_ids`` hands out producer ids (``ProducerIdManager``)."""

    TOPIC = TRANSACTION_STATE_TOPIC

    def __init__(
        self,
        host: Any,
        bugs: frozenset[str],
        create_topic: CreateTopic,
        producer_ids: Any,
        *,
        num_partitions: int = 5,
        replication_factor: int = 3,
        max_timeout_ms: int = 900_000,
    ) -> None:
        super().__init__(host, bugs, create_topic, num_partitions, replication_factor)
        self.producer_ids = producer_ids
        self.max_timeout_ms = max_timeout_ms
        self.txns: dict[str, TxnMetadata] = {}
        self._inflight: dict[int, _Inflight] = {}  # correlation -> markers out to one leader

    # ------------------------------------------------------------------ helpers

    def _status(self, txn_id: str) -> BrokerError:
        if not txn_id:
            return BrokerError.INVALID_REQUEST
        return self._load_status(self.partition_of(txn_id))

    def _coordinator_epoch(self, txn_id: str) -> int:
        load = self.loads.get(self.partition_of(txn_id))  # type: ignore[arg-type]
        return load.leader_epoch if load is not None else -1

    def _current(self, meta: TxnMetadata) -> bool:
        return self.txns.get(meta.transactional_id) is meta

    def _check(self, txn_id: str, producer_id: int, producer_epoch: int) -> tuple[BrokerError, TxnMetadata | None]:
        """The checks AddPartitionsToTxn, AddOffsetsToTxn and EndTxn share."""
        error = self._status(txn_id)
        if error is not BrokerError.NONE:
            return error, None
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            return BrokerError.INVALID_PRODUCER_ID_MAPPING, None
        if meta.producer_epoch != producer_epoch:
            return BrokerError.PRODUCER_FENCED, None
        if meta.pending:
            return BrokerError.CONCURRENT_TRANSACTIONS, None
        return BrokerError.NONE, meta

    def _write(self, meta: TxnMetadata, done: Callable[[BrokerError], None], **changes: Any) -> None:
        """Log ``meta`` with ``changes``; apply them when replicated, then ``done(error)``."""
        meta.pending = True
        index = self.partition_of(meta.transactional_id)
        if index is None:
            meta.pending = False
            done(BrokerError.COORDINATOR_NOT_AVAILABLE)
            return

        def written(error: BrokerError) -> None:
            meta.pending = False
            if not self._current(meta):
                done(BrokerError.NOT_COORDINATOR)  # unloaded (or replaced) meanwhile
                return
            if error is BrokerError.NONE:
                for name, value in changes.items():
                    setattr(meta, name, value)
            done(error)

        self._append_to(index, [meta.record(self.now // MS, **changes)], written)

    # ------------------------------------------------------------------ FindCoordinator

    def find_coordinator(self, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
        out = []
        for key in request.keys:
            if not key:
                out.append(CoordinatorInfo(key, BrokerError.INVALID_REQUEST))
            else:
                out.append(self.locate(key))
        return FindCoordinatorResponse(tuple(out))

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(self, request: InitProducerIdRequest, respond: Respond) -> None:
        txn_id = request.transactional_id or ""
        if not 0 < request.transaction_timeout_ms <= self.max_timeout_ms:
            respond(InitProducerIdResponse(BrokerError.INVALID_TRANSACTION_TIMEOUT))
            return
        error = self._status(txn_id)
        if error is not BrokerError.NONE:
            respond(InitProducerIdResponse(error))
            return
        meta = self.txns.get(txn_id)
        if meta is None:
            self._new_id(request, respond)
            return
        if meta.pending or meta.state in _PREPARED:
            respond(InitProducerIdResponse(BrokerError.CONCURRENT_TRANSACTIONS))
            return
        if request.producer_id >= 0 and (request.producer_id, request.producer_epoch) != (
            meta.producer_id,
            meta.producer_epoch,
        ):
            respond(InitProducerIdResponse(BrokerError.PRODUCER_FENCED))  # KIP-360: not the current instance
            return
        if meta.state == ONGOING:
            # fence the old instance and abort its transaction; the caller retries
            self._end(meta, commit=False, bump=True)
            respond(InitProducerIdResponse(BrokerError.CONCURRENT_TRANSACTIONS))
            return
        if meta.producer_epoch >= _MAX_EPOCH:
            self._new_id(request, respond, meta)
            return
        epoch = meta.producer_epoch + 1

        def written(error: BrokerError) -> None:
            if error is not BrokerError.NONE:
                respond(InitProducerIdResponse(error))
                return
            respond(InitProducerIdResponse(BrokerError.NONE, meta.producer_id, meta.producer_epoch))

        self._write(
            meta,
            written,
            producer_epoch=epoch,
            timeout_ms=request.transaction_timeout_ms,
            state=EMPTY,
            partitions=frozenset(),
            start_ns=-1,
        )

    def _new_id(self, request: InitProducerIdRequest, respond: Respond, old: TxnMetadata | None = None) -> None:
        """A fresh producer id for ``request``'s transactional id (new, or its epoch exhausted)."""
        txn_id = request.transactional_id or ""
        if old is not None:
            old.pending = True

        def allocated(response: InitProducerIdResponse) -> None:
            if old is not None:
                old.pending = False
            if response.error is not BrokerError.NONE:
                respond(InitProducerIdResponse(response.error))
                return
            error = self._status(txn_id)
            if error is not BrokerError.NONE or self.txns.get(txn_id) is not old:
                respond(
                    InitProducerIdResponse(
                        error if error is not BrokerError.NONE else BrokerError.CONCURRENT_TRANSACTIONS
                    )
                )
                return
            meta = TxnMetadata(txn_id, response.producer_id, 0, request.transaction_timeout_ms)
            self.txns[txn_id] = meta

            def written(error: BrokerError) -> None:
                if error is not BrokerError.NONE:
                    if self.txns.get(txn_id) is meta and old is None:
                        del self.txns[txn_id]  # never logged: forget it (a retry allocates again)
                    elif self.txns.get(txn_id) is meta:
                        self.txns[txn_id] = old  # type: ignore[assignment]
                    respond(InitProducerIdResponse(error))
                    return
                respond(InitProducerIdResponse(BrokerError.NONE, meta.producer_id, meta.producer_epoch))

            self._write(meta, written)

        self.producer_ids.init_producer_id(InitProducerIdRequest(None), allocated)

    # ------------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn

    def add_partitions(self, request: tm.AddPartitionsToTxnRequest, respond: Respond) -> None:
        def answer(errors: dict[TopicPartition, BrokerError] | BrokerError) -> None:
            if isinstance(errors, BrokerError):
                errors = dict.fromkeys(request.partitions, errors)
            respond(tm.AddPartitionsToTxnResponse(tuple(errors.items())))

        error, meta = self._check(request.transactional_id, request.producer_id, request.producer_epoch)
        if error is not BrokerError.NONE:
            answer(error)
            return
        unknown = {tp for tp in request.partitions if self.host.image.partition(tp) is None}
        if unknown:
            answer(
                {
                    tp: BrokerError.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else BrokerError.OPERATION_NOT_ATTEMPTED
                    for tp in request.partitions
                }
            )
            return
        self._add(meta, frozenset(request.partitions), answer)  # type: ignore[arg-type]

    def add_offsets(self, request: tm.AddOffsetsToTxnRequest, respond: Respond) -> None:
        error, meta = self._check(request.transactional_id, request.producer_id, request.producer_epoch)
        if error is not BrokerError.NONE:
            respond(tm.AddOffsetsToTxnResponse(error))
            return
        if not request.group_id:
            respond(tm.AddOffsetsToTxnResponse(BrokerError.INVALID_GROUP_ID))
            return
        groups = self.host.groups
        index = groups.partition_of(request.group_id)
        if index is None:
            groups.locate(request.group_id)  # creates the offsets topic
            respond(tm.AddOffsetsToTxnResponse(BrokerError.COORDINATOR_NOT_AVAILABLE))
            return
        tp = TopicPartition(OFFSETS_TOPIC, index)
        self._add(meta, frozenset((tp,)), lambda e: respond(tm.AddOffsetsToTxnResponse(e)))  # type: ignore[arg-type]

    def _add(self, meta: TxnMetadata, partitions: frozenset[TopicPartition], answer: Respond) -> None:
        if meta.state in _PREPARED:
            answer(BrokerError.CONCURRENT_TRANSACTIONS)
            return
        if meta.state == ONGOING and partitions <= meta.partitions:
            answer(BrokerError.NONE)
            return
        start = meta.start_ns if meta.state == ONGOING else self.now
        base = meta.partitions if meta.state == ONGOING else frozenset()
        self._write(meta, answer, state=ONGOING, partitions=base | partitions, start_ns=start)

    # ------------------------------------------------------------------ EndTxn

    def end_txn(self, request: tm.EndTxnRequest, respond: Respond) -> None:
        error, meta = self._check(request.transactional_id, request.producer_id, request.producer_epoch)
        if error is not BrokerError.NONE:
            respond(tm.EndTxnResponse(error))
            return
        assert meta is not None
        commit = request.commit
        state = meta.state
        if state == ONGOING:
            self._end(meta, commit, respond=lambda e: respond(tm.EndTxnResponse(e)))
            return
        if state == (COMPLETE_COMMIT if commit else COMPLETE_ABORT):
            respond(tm.EndTxnResponse(BrokerError.NONE))  # a retry of the call that completed it
        elif state == (PREPARE_COMMIT if commit else PREPARE_ABORT):
            respond(tm.EndTxnResponse(BrokerError.CONCURRENT_TRANSACTIONS))
        else:
            respond(tm.EndTxnResponse(BrokerError.INVALID_TXN_STATE))

    def _end(
        self,
        meta: TxnMetadata,
        commit: bool,
        respond: Callable[[BrokerError], None] | None = None,
        *,
        bump: bool = False,
    ) -> None:
        """Write PrepareCommit/PrepareAbort (``bump``: at the next epoch, fencing the producer),
        answer, then send the markers."""
        epoch = meta.producer_epoch + 1 if bump else meta.producer_epoch

        def written(error: BrokerError) -> None:
            if error is BrokerError.NONE:
                meta.markers = set(meta.partitions)
                meta.inflight = set()
                meta.retry_at = None
            if respond is not None:
                respond(error)
            if error is BrokerError.NONE:
                self._send_markers(meta)

        self._write(meta, written, state=PREPARE_COMMIT if commit else PREPARE_ABORT, producer_epoch=epoch)

    # ------------------------------------------------------------------ markers

    def _send_markers(self, meta: TxnMetadata) -> None:
        """WriteTxnMarkers for every partition of ``meta`` still to be marked and not in flight,
        one request per leader; partitions without a live leader wait for the retry."""
        if not self._current(meta) or meta.state not in _PREPARED:
            return
        if not meta.markers and not meta.pending:
            self._complete(meta)
            return
        by_leader: dict[int, list[TopicPartition]] = {}
        waiting = False
        image = self.host.image
        if MARKER_PARTIAL in self.bugs and len(meta.markers) > 1:
            first = min(meta.markers)
            meta.markers.intersection_update({first})  # seeded bug: the others are forgotten
        for tp in sorted(meta.markers - meta.inflight):
            state = image.partition(tp)
            if state is None:  # the topic is gone: nothing to mark
                meta.markers.discard(tp)
                continue
            if state.leader is None or not image.is_eligible(state.leader):
                waiting = True
                continue
            by_leader.setdefault(state.leader, []).append(tp)
        commit = meta.state == PREPARE_COMMIT
        deadline = self.now + self.host.broker_config.request_timeout_ms * MS
        for leader, tps in sorted(by_leader.items()):
            correlation = self.host.next_correlation()
            parts = tuple(tps)
            self._inflight[correlation] = _Inflight(meta, parts, deadline)
            meta.inflight.update(parts)
            entry = TxnMarkerEntry(
                meta.producer_id, meta.producer_epoch, commit, self._coordinator_epoch(meta.transactional_id), parts
            )
            self.host.send(leader, WriteTxnMarkersRequest((entry,), correlation))
        if waiting:
            meta.retry_at = self.now + _RETRY_NS
        if not meta.markers and not meta.inflight and not meta.pending:
            self._complete(meta)

    def on_markers_response(self, response: WriteTxnMarkersResponse) -> None:
        inflight = self._inflight.pop(response.correlation, None)
        if inflight is None:
            return
        meta = inflight.meta
        meta.inflight.difference_update(inflight.partitions)
        if not self._current(meta) or meta.state not in _PREPARED:
            return
        errors = {tp: e for result in response.markers for tp, e in result.errors}
        retry = False
        for tp in inflight.partitions:
            error = errors.get(tp, BrokerError.UNKNOWN_TOPIC_OR_PARTITION)
            if error is BrokerError.NONE or error in _GIVE_UP:
                # written; or refused as older than the producer's epoch on that partition: a newer
                # epoch's marker has ended it (Kafka stops sending too)
                meta.markers.discard(tp)
            else:
                retry = True  # not leader (any more), not enough replicas, timed out: again later
        if retry and meta.retry_at is None:
            meta.retry_at = self.now + _RETRY_NS
        if not meta.markers and not meta.inflight and not meta.pending:
            self._complete(meta)

    def _complete(self, meta: TxnMetadata) -> None:
        state = COMPLETE_COMMIT if meta.state == PREPARE_COMMIT else COMPLETE_ABORT
        meta.retry_at = None

        def written(error: BrokerError) -> None:
            if error is not BrokerError.NONE and self._current(meta) and meta.state in _PREPARED:
                meta.retry_at = self.now + _RETRY_NS  # the markers are written: log the completion again

        self._write(meta, written, state=state, partitions=frozenset(), start_ns=-1)

    # ------------------------------------------------------------------ leadership, loading, timers

    def poll(self) -> None:
        """Follow leadership of the state partitions; resume prepared transactions once a
        partition is loaded; resend markers; abort timed-out transactions."""
        self._follow_leadership()
        now = self.now
        for index, load in self.loads.items():
            if not load.resumed and self._load_status(index) is BrokerError.NONE:
                load.resumed = True
                self._resume(index)
        for correlation in [c for c, f in self._inflight.items() if now >= f.deadline]:
            lost = self._inflight.pop(correlation)
            lost.meta.inflight.difference_update(lost.partitions)
            if lost.meta.retry_at is None:
                lost.meta.retry_at = now
        for meta in list(self.txns.values()):
            if meta.pending:
                continue
            if meta.retry_at is not None and now >= meta.retry_at and meta.state in _PREPARED:
                meta.retry_at = None
                self._send_markers(meta)
            elif (
                meta.state == ONGOING
                and now >= meta.timeout_at()
                and self._status(meta.transactional_id) is BrokerError.NONE
            ):
                meta.abort_at = now + _RETRY_NS  # if the abort's write fails at once, time must still move
                self._end(meta, commit=False, bump=True)

    def _resume(self, index: int) -> None:
        n = self._partition_count()
        for meta in list(self.txns.values()):
            if n is not None and partition_for(meta.transactional_id, n) == index and meta.state in _PREPARED:
                meta.markers = set(meta.partitions)
                meta.inflight = set()
                self._send_markers(meta)

    def _unload(self, index: int, n: int) -> None:
        for txn_id in [t for t in self.txns if partition_for(t, n) == index]:
            del self.txns[txn_id]

    def _load(self, index: int, n: int, p: Any) -> None:
        self.loads[index] = Load(p.leader_epoch, p.leo)
        for batch in p.log.batches:
            try:
                records = decode_batch(batch.data).records
            except (ValueError, DecodeError):
                continue  # not a coordinator batch
            for record in records:
                try:
                    self._replay(record.key, record.value)
                except (ValueError, DecodeError):
                    continue  # a record of a layout this coordinator does not write

    def _replay(self, key: bytes | None, value: bytes | None) -> None:
        if key is None or len(key) < 2 or int.from_bytes(key[:2], "big", signed=True) != 0:
            return
        txn_id = decode_struct(_TxnKey, Reader(memoryview(key)[2:]), 0, False).transactional_id
        if value is None:
            self.txns.pop(txn_id, None)
            return
        v = decode_struct(_TxnValue, Reader(memoryview(value)[2:]), 0, False)
        if not 0 <= v.transaction_status < len(STATE_NAMES):
            return
        partitions = frozenset(TopicPartition(t.topic, i) for t in v.transaction_partitions for i in t.partition_ids)
        start = v.transaction_start_timestamp_ms
        self.txns[txn_id] = TxnMetadata(
            txn_id,
            v.producer_id,
            v.producer_epoch,
            v.transaction_timeout_ms,
            v.transaction_status,
            partitions,
            start * MS if start >= 0 else -1,
        )

    def next_deadline(self) -> int | None:
        times: list[int] = [f.deadline for f in self._inflight.values()]
        for meta in self.txns.values():
            if meta.pending:
                continue
            if meta.retry_at is not None and meta.state in _PREPARED:
                times.append(meta.retry_at)
            elif meta.state == ONGOING and self._status(meta.transactional_id) is BrokerError.NONE:
                times.append(meta.timeout_at())  # (while loading, every step polls)
        create = self._create_deadline()
        if create is not None:
            times.append(create)
        return min(times) if times else None
