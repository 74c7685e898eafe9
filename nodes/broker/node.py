"""BrokerNode: one combined KRaft-style node — raft quorum voter, register service, metadata
controller and broker — behind a single sans-IO driver API.

Driver inputs (``now`` is int ns, as for :class:`~nodes.raft.RaftNode`; each also takes the
driver's monotonic clock as ``mono``, passed on to the quorum core):

* ``start(now, quorum_state, log, partition_logs, damaged=…)`` — once, with what is on disk
  (``damaged``: partitions whose log lost a range to damage, see ``lifecycle.py``);
* ``handle(now, src, message, reply_ctx)`` — a raft RPC or a broker message from node ``src``;
* ``tick(now)`` — when the clock reaches :meth:`BrokerNode.next_deadline`;
* ``flushed(now, offset)`` — a raft-log ``Flush`` completed;
  ``partition_flushed(now, tp, offset)`` — a ``FlushPartition`` completed;
* ``resign(now)`` — graceful raft hand-off; ``shutdown(now, timeout_ms)`` — graceful raft shutdown;
* client calls: ``submit`` (register ops, as KVNode), ``produce``, ``fetch``, ``list_offsets``,
  ``metadata``, ``create_topics``, ``offset_for_leader_epoch``, ``init_producer_id``.

Every input returns a list of effects, to be applied **in order**: the raft effects
(``Send``, ``PersistQuorumState``, ``AppendLog``, ``TruncateLog``, ``Flush``, ``Committed``,
``Event``, ``Fatal``), the register service's ``ClientReply``, and the broker's own
(``effects.py``): ``AppendPartitionLog``, ``TruncatePartitionLog``, ``FlushPartition``,
``ClientResponse``, ``CloseClientConnection``, plus ``Send`` carrying broker messages
(``messages.py``) and ``Event`` carrying ``partition-leader`` lines. Messages a node sends to
itself (its broker talking to its own controller) never leave the core. After a ``Fatal`` the
node is stopped and returns no more effects.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, NoReturn

from ..raft import Committed, Event, Fatal, QuorumState, RaftConfig, Record, Reply, Role, Send
from ..raft.bugs import validate_bugs
from ..raft.config import MS
from ..raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from . import group_messages as gm
from . import txn_messages as tm
from .batch import Batch, NewBatch
from .config import BrokerConfig
from .controller import Controller
from .effects import ClientResponse, CloseClientConnection
from .errors import BrokerError
from .events import partition_leader_event
from .group_coordinator import GroupCoordinator
from .image import ImageChange, MetadataImage, PartitionChange
from .kv_layer import ControllerAppend, RegisterService
from .lifecycle import BrokerLifecycle
from .messages import (
    COORDINATOR_ORIGIN,
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
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
    FetchRecordsRequest,
    FetchRecordsResponse,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    MetadataResponse,
    OffsetForLeaderEpochRequest,
    PartitionMetadata,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    TopicMetadata,
    TxnMarkerResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
    inconsistent_cluster_answer,
    is_broker_request,
)
from .producer_ids import ProducerIdManager
from .producer_state import ABORT, COMMIT, TxnMarker, marker_bytes
from .records import MetadataRecord, encode_metadata
from .replica_manager import ReplicaManager
from .topic_partition import TopicPartition
from .txn_coordinator import TxnCoordinator

RAFT_MESSAGES = (
    VoteRequest,
    VoteResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
)
_SETTLE_ROUNDS = 64


class _InternalCall:
    """The request id of a call the node makes to itself: its answer goes to ``done``."""

    __slots__ = ("done",)

    def __init__(self, done: Callable[[Any], None]) -> None:
        self.done = done


class _Stop(Exception):
    """Raised after a Fatal effect to abandon the rest of the step."""


class BrokerNode:
    """A combined controller + broker node. The first five arguments are RaftNode's (so test
    clusters can build it like a KVNode); ``broker_config`` holds the broker/controller settings
    and ``endpoint`` the (host, port) advertised to clients in Metadata, ``inter_broker`` the one
    registered for other brokers (empty: this node's voter address).

    ``broker=False`` is a controller-only node (``process.roles=controller``): it replays the metadata
    log and, as the raft leader, runs the controller, but never registers as a broker, so it leads and
    follows no partitions."""

    def __init__(
        self,
        node_id: int,
        voters: Iterable[int] | Mapping[int, Any],
        config: RaftConfig | None = None,
        rng: random.Random | None = None,
        bugs: Iterable[str] = frozenset(),
        broker_config: BrokerConfig | None = None,
        endpoint: tuple[str, int] = ("", 0),
        inter_broker: tuple[str, int] = ("", 0),
        broker: bool = True,
    ) -> None:
        self.node_id = node_id
        self.is_broker = broker
        self.bugs = validate_bugs(bugs)
        rng = rng if rng is not None else random.Random(node_id)
        raft_config = config or RaftConfig()
        self.kv = RegisterService(node_id, voters, raft_config, rng, self.bugs)
        self.raft = self.kv.raft
        self.machine = self.kv.machine
        self.broker_config = broker_config or BrokerConfig()
        broker_rng = random.Random(rng.getrandbits(64))
        self.incarnation = broker_rng.getrandbits(62)
        self.image = MetadataImage()
        self.controller = Controller(
            self, self.broker_config, broker_rng, self._controller_append, lambda: self.raft.log_end_offset
        )
        self.replicas = ReplicaManager(self, self.broker_config, self.bugs, raft_config.lazy_flush_interval_ms)
        self.lifecycle = BrokerLifecycle(self, self.broker_config, self.incarnation, endpoint, inter_broker)
        self.producer_ids = ProducerIdManager(self, self.broker_config)
        self.groups = GroupCoordinator(self, self.bugs, self._create_internal_topic)
        self.txn = TxnCoordinator(self, self.bugs, self._create_internal_topic, self.producer_ids)
        self._now = 0
        self._mono = 0  # the driver's monotonic clock at this input (leader leases), `now` when not given
        self._out: list[Any] = []
        self._started = False
        self._failed: str | None = None
        self._loopback: deque[tuple[Any, Any]] = deque()
        self._image_dirty = False
        self._correlation = 0
        self._op_seq = 0
        self._controller_ops: dict[int, Callable[[BrokerError], None]] = {}
        self._forwarded: dict[int, tuple[Any, CreateTopicsRequest, int]] = {}

    # ------------------------------------------------------------------ host interface (for the parts)

    @property
    def now(self) -> int:
        return self._now

    def emit(self, effect: Any) -> None:
        if isinstance(effect, ClientResponse) and isinstance(effect.request_id, _InternalCall):
            effect.request_id.done(effect.response)  # an answer to the node itself (the coordinator's topic)
            return
        self._out.append(effect)

    def send(self, dst: int, message: Any, reply_ctx: Any = None) -> None:
        if is_broker_request(message) and message.cluster_id is None:
            message = replace(message, cluster_id=self.raft.config.cluster_id)
        if dst == self.node_id:
            self._loopback.append((message, reply_ctx))
        else:
            self._out.append(Send(dst, message, reply_ctx))

    def controller_id(self) -> int | None:
        """The raft leader as this node knows it (the active controller, or about to be)."""
        if self.raft.role in (Role.LEADER, Role.FOLLOWER):
            return self.raft.leader_id
        return None

    def broker_epoch(self) -> int | None:
        reg = self.image.brokers.get(self.node_id)
        if reg is None or reg.incarnation != self.incarnation:
            return None
        return reg.broker_epoch

    def next_correlation(self) -> int:
        self._correlation += 1
        return self._correlation

    def fatal(self, reason: str) -> NoReturn:
        self._failed = reason
        self._out.append(Fatal(reason))
        raise _Stop

    # ------------------------------------------------------------------ driver inputs

    def start(
        self,
        now: int,
        persisted: QuorumState | None = None,
        log: Iterable[Record] = (),
        partition_logs: Mapping[TopicPartition, Iterable[Batch]] | None = None,
        *,
        mono: int | None = None,
        damaged: Iterable[TopicPartition] = (),
    ) -> list[Any]:
        """Begin from the durable quorum state, raft log and partition logs (all as recovered).
        ``damaged``: the partitions whose log recovery cut a damaged range (intact records followed
        it), reported to the controller with the registration."""
        if self._started:
            raise RuntimeError("start() may be called once; make a new BrokerNode to restart")
        self._started = True
        records = list(log)

        self.lifecycle.damaged = tuple(sorted(set(damaged)))

        def begin() -> None:
            self.replicas.load(partition_logs or {}, now)
            self._absorb(self.kv.start(now, persisted, records, mono=self._mono))

        return self._run(now, begin, mono=mono)

    def handle(self, now: int, src: int, message: Any, reply_ctx: Any = None, *, mono: int | None = None) -> list[Any]:
        """A message from node ``src``; responses go back as ``Send(src, response, reply_ctx)``."""
        return self._run(now, self._dispatch, src, message, reply_ctx, mono=mono)

    def tick(self, now: int, *, mono: int | None = None) -> list[Any]:
        return self._run(now, lambda: self._absorb(self.kv.tick(now, mono=self._mono)), mono=mono)

    def flushed(self, now: int, offset: int, *, mono: int | None = None) -> list[Any]:
        """A raft-log Flush completed: records below ``offset`` are durable."""
        return self._run(now, lambda: self._absorb(self.kv.flushed(now, offset, mono=self._mono)), mono=mono)

    def partition_flushed(
        self, now: int, partition: TopicPartition, offset: int, *, mono: int | None = None
    ) -> list[Any]:
        """A FlushPartition completed: ``partition``'s log below ``offset`` is durable."""
        return self._run(now, self.replicas.partition_flushed, partition, offset, mono=mono)

    def resign(self, now: int, *, mono: int | None = None) -> list[Any]:
        return self._run(now, lambda: self._absorb(self.kv.resign(now, mono=self._mono)), mono=mono)

    def shutdown(self, now: int, timeout_ms: int, *, mono: int | None = None) -> list[Any]:
        """Graceful raft shutdown (:meth:`~nodes.raft.RaftNode.shutdown`); ``raft.shutdown_status`` tells the end."""
        return self._run(now, lambda: self._absorb(self.kv.shutdown(now, timeout_ms, mono=self._mono)), mono=mono)

    def next_deadline(self) -> int | None:
        """Earliest time (ns) at which :meth:`tick` has work, or None."""
        if self._failed is not None or not self._started:
            return None
        best = None
        for t in (
            self.raft.next_deadline(),
            self.replicas.next_deadline(),
            self.controller.next_deadline(),
            self.lifecycle.next_deadline() if self.is_broker else None,
            self.producer_ids.next_deadline(),
            self.groups.next_deadline(),
            self.txn.next_deadline(),
        ):
            if t is not None and (best is None or t < best):
                best = t
        for _, _, t in self._forwarded.values():
            if t is not None and (best is None or t < best):
                best = t
        return best

    # ------------------------------------------------------------------ client calls

    def submit(
        self, now: int, request_id: Any, f: str, key: str, value: Any = None, *, mono: int | None = None
    ) -> list[Any]:
        """A register operation, exactly as :meth:`nodes.kv.KVNode.submit`."""
        return self._run(
            now, lambda: self._absorb(self.kv.submit(now, request_id, f, key, value, mono=self._mono)), mono=mono
        )

    def produce(self, now: int, request_id: Any, request: ProduceRequest, *, mono: int | None = None) -> list[Any]:
        """ClientResponse(request_id, ProduceResponse) follows, maybe later; none for acks=0."""

        def run() -> None:
            self.replicas.append_records(
                request,
                lambda response: self.emit(ClientResponse(request_id, response)),
                lambda reason: self.emit(CloseClientConnection(request_id, reason)),
            )

        return self._run(now, run, mono=mono)

    def fetch(self, now: int, request_id: Any, request: FetchRecordsRequest, *, mono: int | None = None) -> list[Any]:
        """ClientResponse(request_id, FetchRecordsResponse) follows, maybe after max_wait_ms."""
        respond = lambda r: self.emit(ClientResponse(request_id, r))  # noqa: E731
        return self._run(now, self.replicas.fetch_messages, request, respond, mono=mono)

    def list_offsets(
        self, now: int, request_id: Any, request: ListOffsetsRequest, *, mono: int | None = None
    ) -> list[Any]:
        return self._run(
            now, lambda: self.emit(ClientResponse(request_id, self.replicas.list_offsets(request))), mono=mono
        )

    def offset_for_leader_epoch(
        self, now: int, request_id: Any, request: OffsetForLeaderEpochRequest, *, mono: int | None = None
    ) -> list[Any]:
        """ClientResponse(request_id, OffsetForLeaderEpochResponse) at once (KIP-320)."""
        answer = self.replicas.offset_for_leader_epoch
        return self._run(now, lambda: self.emit(ClientResponse(request_id, answer(request))), mono=mono)

    def init_producer_id(
        self, now: int, request_id: Any, request: InitProducerIdRequest, *, mono: int | None = None
    ) -> list[Any]:
        """ClientResponse(request_id, InitProducerIdResponse) follows, maybe once a block of
        producer ids has been allocated through the quorum (``producer_ids.py``); with a
        transactional id, from its transaction coordinator (``txn_coordinator.py``)."""
        respond = lambda r: self.emit(ClientResponse(request_id, r))  # noqa: E731
        if request.transactional_id is not None:
            return self._run(now, self.txn.init_producer_id, request, respond, mono=mono)
        return self._run(now, self.producer_ids.init_producer_id, request, respond, mono=mono)

    def txn_call(self, now: int, request_id: Any, request: Any, *, mono: int | None = None) -> list[Any]:
        """A transaction coordinator call (``txn_messages``: AddPartitionsToTxn, AddOffsetsToTxn,
        EndTxn); ClientResponse(request_id, the matching response) follows once logged."""

        def run() -> None:
            respond = lambda r: self.emit(ClientResponse(request_id, r))  # noqa: E731
            if isinstance(request, tm.AddPartitionsToTxnRequest):
                self.txn.add_partitions(request, respond)
            elif isinstance(request, tm.AddOffsetsToTxnRequest):
                self.txn.add_offsets(request, respond)
            elif isinstance(request, tm.EndTxnRequest):
                self.txn.end_txn(request, respond)
            else:
                raise TypeError(f"not a transaction coordinator request: {type(request).__name__}")

        return self._run(now, run, mono=mono)

    def write_txn_markers(
        self, now: int, request_id: Any, request: WriteTxnMarkersRequest, *, mono: int | None = None
    ) -> list[Any]:
        """WriteTxnMarkers from a client connection (Kafka's API 27); coordinators send it
        node-to-node through ``handle``."""
        respond = lambda r: self.emit(ClientResponse(request_id, r))  # noqa: E731
        return self._run(now, self._write_txn_markers, request, respond, mono=mono)

    def metadata(
        self, now: int, request_id: Any, request: MetadataRequest | None = None, *, mono: int | None = None
    ) -> list[Any]:
        return self._run(
            now, lambda: self.emit(ClientResponse(request_id, self._metadata(request or MetadataRequest()))), mono=mono
        )

    def create_topics(
        self, now: int, request_id: Any, request: CreateTopicsRequest, *, mono: int | None = None
    ) -> list[Any]:
        """Handled by this node's controller when it is the active one, else forwarded to the
        raft leader; NOT_CONTROLLER per topic when no leader is known, REQUEST_TIMED_OUT if the
        forwarded request is not answered within ``timeout_ms``."""

        def run() -> None:
            respond = lambda r: self.emit(ClientResponse(request_id, r))  # noqa: E731
            controller = self.controller_id()
            if self.controller.active or controller is None or controller == self.node_id:
                self.controller.on_create_topics(request, respond)
                return
            correlation = self.next_correlation()
            deadline = now + max(0, request.timeout_ms) * MS
            self._forwarded[correlation] = (request_id, request, deadline)
            self.send(controller, replace(request, correlation=correlation))

        return self._run(now, run, mono=mono)

    def group_call(self, now: int, request_id: Any, request: Any, *, mono: int | None = None) -> list[Any]:
        """A group coordinator call (``group_messages``: FindCoordinator, JoinGroup, SyncGroup,
        Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups);
        ClientResponse(request_id, the matching response) follows, maybe later."""

        def run() -> None:
            respond = lambda r: self.emit(ClientResponse(request_id, r))  # noqa: E731
            g = self.groups
            if isinstance(request, gm.FindCoordinatorRequest) and request.key_type == 1:
                respond(self.txn.find_coordinator(request))
            elif isinstance(request, gm.FindCoordinatorRequest):
                respond(g.find_coordinator(request))
            elif isinstance(request, gm.TxnOffsetCommitRequest):
                g.txn_commit_offsets(request, respond)
            elif isinstance(request, gm.JoinGroupRequest):
                g.join_group(request, respond)
            elif isinstance(request, gm.SyncGroupRequest):
                g.sync_group(request, respond)
            elif isinstance(request, gm.HeartbeatRequest):
                respond(g.heartbeat(request))
            elif isinstance(request, gm.LeaveGroupRequest):
                respond(g.leave_group(request))
            elif isinstance(request, gm.OffsetCommitRequest):
                g.commit_offsets(request, respond)
            elif isinstance(request, gm.OffsetFetchRequest):
                respond(g.fetch_offsets(request))
            elif isinstance(request, gm.ListGroupsRequest):
                respond(g.list_groups(request))
            elif isinstance(request, gm.DescribeGroupsRequest):
                respond(g.describe_groups(request))
            elif isinstance(request, tuple):  # OffsetFetch naming several groups
                respond(tuple(g.fetch_offsets(r) for r in request))
            else:
                raise TypeError(f"not a group coordinator request: {type(request).__name__}")

        return self._run(now, run, mono=mono)

    def _create_internal_topic(self, request: CreateTopicsRequest, done: Callable[[Any], None]) -> None:
        """CreateTopics on behalf of the node itself (routed as :meth:`create_topics`)."""
        request_id = _InternalCall(done)
        controller = self.controller_id()
        if self.controller.active or controller is None or controller == self.node_id:
            self.controller.on_create_topics(request, lambda r: self.emit(ClientResponse(request_id, r)))
            return
        correlation = self.next_correlation()
        self._forwarded[correlation] = (request_id, request, self._now + max(0, request.timeout_ms) * MS)
        self.send(controller, replace(request, correlation=correlation))

    # ------------------------------------------------------------------ views

    @property
    def failed(self) -> str | None:
        return self._failed

    def status(self) -> dict[str, Any]:
        """A JSON-able snapshot for admin endpoints and debugging."""
        parts = {
            str(tp): {
                "role": p.role.value,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "isr": list(p.isr),
                "high_watermark": p.hw,
                "log_end_offset": p.leo,
                "flushed_offset": p.flushed,
            }
            for tp, p in sorted(self.replicas.partitions.items())
        }
        return {
            **self.raft.status(),
            "broker_epoch": self.broker_epoch(),
            "fenced": not self.image.is_eligible(self.node_id),
            "active_controller": self.controller.active,
            "metadata_offset": self.image.offset,
            "partitions": parts,
        }

    # ------------------------------------------------------------------ step plumbing

    def _run(self, now: int, fn: Callable[..., None], *args: Any, mono: int | None = None) -> list[Any]:
        if self._failed is not None:
            return []
        if not self._started:
            raise RuntimeError("call start() before any other input")
        self._now = now
        self._mono = now if mono is None else mono
        out: list[Any] = []
        self._out = out
        try:
            self.controller.update_role(self.raft.is_leader, self.raft.epoch)
            fn(*args)
            self._settle()
        except _Stop:
            pass
        finally:
            self._out = []
        return out

    def _settle(self) -> None:
        """Run everything the step made due: self-addressed messages, metadata reactions,
        controller and broker timers, delayed operations."""
        now = self._now
        for _ in range(_SETTLE_ROUNDS):
            while self._loopback:
                message, ctx = self._loopback.popleft()
                self._dispatch(self.node_id, message, ctx)
            self.controller.update_role(self.raft.is_leader, self.raft.epoch)
            if self._image_dirty:
                self._image_dirty = False
                self.replicas.refresh()
                self.controller.image_changed()
            self.controller.poll(now)
            if self.is_broker:
                self.lifecycle.poll(now)
            self.producer_ids.poll(now)
            self.replicas.poll(now)
            self.groups.poll()
            self.txn.poll()
            self.replicas.settle()
            self._expire_forwarded(now)
            if not self._loopback and not self._image_dirty:
                return

    def _absorb(self, effects: list[Any]) -> None:
        """Pass raft/register effects through; route the controller's raft replies; apply
        committed records to the metadata image."""
        for effect in effects:
            if isinstance(effect, Reply) and isinstance(effect.request_id, ControllerAppend):
                done = self._controller_ops.pop(effect.request_id.seq, None)
                if done is not None:
                    done(BrokerError(int(effect.error)))
                continue
            self._out.append(effect)
            if isinstance(effect, Committed):
                for record in effect.records:
                    self._on_image_changes(self.image.apply(record))
            elif isinstance(effect, Fatal):
                self._failed = effect.reason
                raise _Stop

    def _on_image_changes(self, changes: list[ImageChange]) -> None:
        if not changes:
            return
        self._image_dirty = True
        for change in changes:
            if isinstance(change, PartitionChange):
                old, new = change.old, change.new
                if old is None or (old.leader, old.leader_epoch) != (new.leader, new.leader_epoch):
                    data = partition_leader_event(self.node_id, self._now, change.tp, new.leader_epoch, new.leader)
                    self._out.append(Event(data))

    def _controller_append(self, records: tuple[MetadataRecord, ...], done: Callable[[BrokerError], None]) -> None:
        self._op_seq += 1
        self._controller_ops[self._op_seq] = done
        request_id = ControllerAppend(self._op_seq)
        self._absorb(
            self.kv.translate(self.raft.append(self._now, encode_metadata(records), request_id, mono=self._mono))
        )

    def _expire_forwarded(self, now: int) -> None:
        for correlation in [c for c, (_, _, deadline) in self._forwarded.items() if now >= deadline]:
            request_id, request, _ = self._forwarded.pop(correlation)
            topics = tuple(
                CreatedTopic(t.name, BrokerError.REQUEST_TIMED_OUT, "no answer from the controller")
                for t in request.topics
            )
            self.emit(ClientResponse(request_id, CreateTopicsResponse(topics, request.correlation)))

    # ------------------------------------------------------------------ messages

    def _dispatch(self, src: int, message: Any, ctx: Any) -> None:
        if is_broker_request(message) and message.cluster_id not in (None, self.raft.config.cluster_id):
            self.send(src, inconsistent_cluster_answer(message), ctx)
        elif isinstance(message, RAFT_MESSAGES):
            self._absorb(self.kv.handle(self._now, src, message, ctx, mono=self._mono))
        elif isinstance(message, FetchRecordsRequest):
            self.replicas.fetch_messages(message, lambda response: self.send(src, response, ctx))
        elif isinstance(message, FetchRecordsResponse):
            self.replicas.fetcher.on_response(src, message)
        elif isinstance(message, BrokerHeartbeatRequest):
            self.controller.on_heartbeat(src, message, ctx)
        elif isinstance(message, BrokerHeartbeatResponse):
            self.lifecycle.on_heartbeat_response(message)
        elif isinstance(message, BrokerRegistrationRequest):
            self.controller.on_registration(src, message, ctx)
        elif isinstance(message, BrokerRegistrationResponse):
            self.lifecycle.on_registration_response(message)
        elif isinstance(message, AlterPartitionRequest):
            self.controller.on_alter_partition(src, message, ctx)
        elif isinstance(message, AlterPartitionResponse):
            self.replicas.on_alter_partition_response(message)
        elif isinstance(message, CreateTopicsRequest):
            self.controller.on_create_topics(message, lambda response: self.send(src, response, ctx))
        elif isinstance(message, CreateTopicsResponse):
            self._on_forwarded_answer(message)
        elif isinstance(message, AllocateProducerIdsRequest):
            self.controller.on_allocate_producer_ids(src, message, ctx)
        elif isinstance(message, AllocateProducerIdsResponse):
            self.producer_ids.on_response(message)
        elif isinstance(message, WriteTxnMarkersRequest):
            self._write_txn_markers(message, lambda response: self.send(src, response, ctx))
        elif isinstance(message, WriteTxnMarkersResponse):
            self.txn.on_markers_response(message)
        else:
            raise TypeError(f"not a quorum or broker message: {type(message).__name__}")

    def _write_txn_markers(
        self, request: WriteTxnMarkersRequest, respond: Callable[[WriteTxnMarkersResponse], None]
    ) -> None:
        """The partition leader's side of WriteTxnMarkers: each marker is appended as a control
        batch (origin coordinator, acks=-1) to its partitions; answered when all are replicated
        or failed. A marker written to a ``__consumer_offsets`` partition also settles the
        producer's transactional offset commits there."""
        if not request.markers:
            respond(WriteTxnMarkersResponse((), request.correlation))
            return
        results: list[TxnMarkerResult | None] = [None] * len(request.markers)
        now_ms = self._now // MS
        timeout_ms = max(1, self.broker_config.request_timeout_ms // 2)  # answered before the sender gives up
        for i, entry in enumerate(request.markers):
            marker = TxnMarker(
                entry.producer_id, entry.producer_epoch, COMMIT if entry.commit else ABORT, entry.coordinator_epoch
            )
            data = marker_bytes(marker, now_ms)
            parts = tuple(ProducePartition(tp, (NewBatch(data, 1, now_ms),)) for tp in dict.fromkeys(entry.partitions))

            def done(response: ProduceResponse, i: int = i, entry: Any = entry) -> None:
                errors = tuple((pp.partition, pp.error) for pp in response.partitions)
                for tp, error in errors:
                    if error is BrokerError.NONE and tp.topic == gm.OFFSETS_TOPIC:
                        self.groups.on_txn_marker(tp.partition, entry.producer_id, entry.commit)
                results[i] = TxnMarkerResult(entry.producer_id, errors)
                if all(r is not None for r in results):
                    respond(WriteTxnMarkersResponse(tuple(results), request.correlation))  # type: ignore[arg-type]

            produce = ProduceRequest(-1, timeout_ms, parts, origin=COORDINATOR_ORIGIN)
            self.replicas.append_records(produce, done, lambda reason: None)

    def _on_forwarded_answer(self, response: CreateTopicsResponse) -> None:
        entry = self._forwarded.pop(response.correlation, None)
        if entry is None:
            return
        request_id, request, _ = entry
        self.emit(ClientResponse(request_id, replace(response, correlation=request.correlation)))

    # ------------------------------------------------------------------ metadata

    def _metadata(self, request: MetadataRequest) -> MetadataResponse:
        image = self.image
        brokers = tuple(BrokerInfo(b, reg.host, reg.port) for b, reg in sorted(image.brokers.items()) if not reg.fenced)
        names = sorted(image.topics) if request.topics is None else list(request.topics)
        topics = []
        for name in names:
            topic = image.topics.get(name)
            if topic is None:
                topics.append(TopicMetadata(BrokerError.UNKNOWN_TOPIC_OR_PARTITION, name, None, ()))
                continue
            parts = []
            for index in sorted(topic.partitions):
                s = topic.partitions[index]
                # a leader fenced in the image but not yet moved (the controller commits the fence and the
                # elections it causes one after the other) is not among the brokers listed: name no leader,
                # as Kafka does for a leader without a live endpoint, not one the client cannot look up
                leader = s.leader if s.leader is not None and image.is_eligible(s.leader) else None
                error = BrokerError.LEADER_NOT_AVAILABLE if leader is None else BrokerError.NONE
                offline = tuple(r for r in s.replicas if not image.is_eligible(r))
                parts.append(PartitionMetadata(error, index, leader, s.leader_epoch, s.replicas, s.isr, offline))
            topics.append(TopicMetadata(BrokerError.NONE, name, topic.topic_id, tuple(parts)))
        # Kafka clients send admin requests to the controller id: the active controller when it is a broker
        # too, else (a controller-only node clients cannot reach, or none known) this broker, which forwards
        # them, as a KRaft broker names a live broker there
        controller = self.controller_id()
        if controller is None or controller not in image.brokers:
            controller = self.node_id if self.is_broker else controller
        return MetadataResponse(brokers, controller, tuple(topics))
