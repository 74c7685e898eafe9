"""The active controller (the raft leader of the combined node): broker registration and
heartbeats, fencing on session timeout, CreateTopics, AlterPartition, and partition leader
elections. Its decisions are metadata records appended through raft; they take effect (in the
image, on every node) only once committed.

The controller acts only once it is *ready*: raft leader, with a committed record of its own
raft epoch applied (so the image holds everything any earlier controller committed;
KAFKA-15345). Elections are level-triggered: after every image change it re-derives, for each
partition with no change of its own in flight, what the partition should look like:

* ISR members that are fenced or unregistered are removed, unless none would remain;
* a fenced/unregistered leader is replaced by the first eligible ISR member in replica order
  (leader epoch + 1); with none, the partition has no leader (epoch + 1) — unless unclean
  election is enabled, which picks the first eligible replica and makes it the whole ISR.

Eligible leader replicas (KIP-966): the leader holds the high watermark while the ISR is below
``min.insync.replicas``, so members that leave the ISR then still hold every committed record.
They are kept in the partition's ELR until the ISR is back at ``min.insync.replicas``; when the
ISR is empty (below) the first eligible ELR member is elected and becomes the ISR.

A broker that registers (re-registers after a restart) starts fenced with a new broker epoch,
so the rules above move its leaderships away (bumping the epoch) before it is unfenced: it is
unfenced only once it heartbeats having applied its own registration and leads nothing. A
registration that names partitions whose log was found damaged at start-up (a range lost,
records beyond it intact) also takes the broker out of their ISR and ELR, in the same batch,
even where it is the last ISR member: its log may lack committed records, so it must not lead
them again until it has caught up from a leader and rejoined the ISR. The partition stays
leaderless (an empty ISR) until an ELR member can lead, or for good without one — unless unclean
election is enabled. (KIP-966 does this for every partition of a broker that shut down
uncleanly; here the broker knows which logs were damaged.)
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Callable
from typing import Any

from ..raft.config import MS
from .config import TOPIC_CONFIG_KEYS, BrokerConfig, parse_bool
from .errors import BrokerError
from .host import BrokerHost
from .image import PartitionState
from .messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreatedTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    NewTopic,
)
from .records import (
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from .topic_partition import TopicPartition

AppendFn = Callable[[tuple[MetadataRecord, ...], Callable[[BrokerError], None]], None]
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class _Plan(Exception):
    """A topic that cannot be created: carries the error and message."""

    def __init__(self, error: BrokerError, message: str) -> None:
        super().__init__(message)
        self.error = error


class Controller:
    def __init__(
        self,
        host: BrokerHost,
        config: BrokerConfig,
        rng: random.Random,
        append: AppendFn,
        next_offset: Callable[[], int],
    ) -> None:
        self.host = host
        self.config = config
        self.rng = rng
        self._append = append
        self._next_offset = next_offset
        self.active_epoch: int | None = None
        self.heartbeats: dict[int, int] = {}
        self.pending_brokers: set[int] = set()
        self.pending_partitions: set[TopicPartition] = set()
        self.pending_topics: set[str] = set()
        self._dirty = False
        self._next_producer_id = 0  # beyond the image's while a ProducerIdsRecord is in flight

    @property
    def active(self) -> bool:
        return self.active_epoch is not None

    # ------------------------------------------------------------------ activation

    def update_role(self, is_leader: bool, raft_epoch: int) -> None:
        """Called every step with the raft role: activate once ready, deactivate on loss."""
        image = self.host.image
        if not is_leader or (self.active_epoch is not None and self.active_epoch != raft_epoch):
            self.active_epoch = None
            self.heartbeats = {}
        if is_leader and self.active_epoch is None and image.last_epoch == raft_epoch:
            self.active_epoch = raft_epoch
            now = self.host.now
            self.heartbeats = dict.fromkeys(image.brokers, now)  # a grace period for everyone
            self.pending_brokers.clear()
            self.pending_partitions.clear()
            self.pending_topics.clear()
            self._next_producer_id = 0
            self._dirty = True

    def image_changed(self) -> None:
        self._dirty = True

    # ------------------------------------------------------------------ broker lifecycle

    def on_registration(self, src: int, req: BrokerRegistrationRequest, ctx: Any) -> None:
        def reply(error: BrokerError, epoch: int = -1) -> None:
            self.host.send(src, BrokerRegistrationResponse(error, epoch, req.correlation), ctx)

        if not self.active:
            reply(BrokerError.NOT_CONTROLLER)
            return
        image = self.host.image
        reg = image.brokers.get(req.broker_id)
        if reg is not None and reg.incarnation == req.incarnation:
            self.heartbeats[req.broker_id] = self.host.now
            reply(BrokerError.NONE, reg.broker_epoch)
            return
        if req.broker_id in self.pending_brokers:
            return  # a change for this broker is in flight; the broker retries
        damaged = self._damage_changes(req.broker_id, req.damaged)
        if damaged is None:
            reply(BrokerError.OPERATION_NOT_ATTEMPTED)  # a damaged partition has a change in flight: retry
            return
        epoch = self._next_offset()
        self.pending_brokers.add(req.broker_id)
        tps = {c.tp for c in damaged}
        self.pending_partitions |= tps

        def done(error: BrokerError) -> None:
            self.pending_brokers.discard(req.broker_id)
            self.pending_partitions -= tps
            self._dirty = True
            now_reg = self.host.image.brokers.get(req.broker_id)
            if error is BrokerError.NONE and now_reg is not None and now_reg.broker_epoch == epoch:
                self.heartbeats[req.broker_id] = self.host.now
                reply(BrokerError.NONE, epoch)
            else:
                reply(BrokerError.NOT_CONTROLLER)

        record = RegisterBrokerRecord(
            req.broker_id, epoch, req.incarnation, req.host, req.port, req.inter_broker_host, req.inter_broker_port
        )
        self._append((record, *damaged), done)

    def _damage_changes(
        self, broker_id: int, damaged: tuple[TopicPartition, ...]
    ) -> list[PartitionChangeRecord] | None:
        """The changes that take ``broker_id`` out of the ISR and ELR of every partition in
        ``damaged`` (None: one of them has a change in flight)."""
        changes = []
        for tp in sorted(set(damaged)):
            state = self.host.image.partition(tp)
            if state is None or (broker_id not in state.isr and broker_id not in state.elr):
                continue
            if tp in self.pending_partitions:
                return None
            change = self._desired(tp, state, frozenset((broker_id,)))
            if change is not None:
                changes.append(change)
        return changes

    def on_allocate_producer_ids(self, src: int, req: AllocateProducerIdsRequest, ctx: Any) -> None:
        """Hand the broker the next block of producer ids: a ProducerIdsRecord through raft, answered
        once committed (Kafka's AllocateProducerIds)."""

        def reply(error: BrokerError, start: int = -1, length: int = 0) -> None:
            self.host.send(src, AllocateProducerIdsResponse(error, start, length, req.correlation), ctx)

        if not self.active:
            reply(BrokerError.NOT_CONTROLLER)
            return
        reg = self.host.image.brokers.get(req.broker_id)
        if reg is None or reg.broker_epoch != req.broker_epoch:
            reply(BrokerError.STALE_BROKER_EPOCH)
            return
        size = self.config.producer_id_block_size
        start = max(self.host.image.next_producer_id, self._next_producer_id)
        self._next_producer_id = start + size

        def done(error: BrokerError) -> None:
            if error is BrokerError.NONE and self.host.image.next_producer_id >= start + size:
                reply(BrokerError.NONE, start, size)
            else:
                reply(BrokerError.NOT_CONTROLLER if error is BrokerError.NONE else error)

        self._append((ProducerIdsRecord(req.broker_id, req.broker_epoch, start + size),), done)

    def on_heartbeat(self, src: int, req: BrokerHeartbeatRequest, ctx: Any) -> None:
        def reply(error: BrokerError, fenced: bool = True) -> None:
            self.host.send(src, BrokerHeartbeatResponse(error, fenced, req.correlation), ctx)

        if not self.active:
            reply(BrokerError.NOT_CONTROLLER)
            return
        image = self.host.image
        reg = image.brokers.get(req.broker_id)
        if reg is None or reg.broker_epoch != req.broker_epoch:
            reply(BrokerError.STALE_BROKER_EPOCH)
            return
        self.heartbeats[req.broker_id] = self.host.now
        busy = req.broker_id in self.pending_brokers
        if reg.fenced and not req.want_fence and not busy and req.metadata_offset > reg.broker_epoch:
            if not any(state.leader == req.broker_id for _, state in image.partitions()):
                self._change_broker(UnfenceBrokerRecord(req.broker_id, reg.broker_epoch))
        elif not reg.fenced and req.want_fence and not busy:
            self._change_broker(FenceBrokerRecord(req.broker_id, reg.broker_epoch))
        reply(BrokerError.NONE, reg.fenced)

    def _change_broker(self, record: FenceBrokerRecord | UnfenceBrokerRecord) -> None:
        self.pending_brokers.add(record.broker_id)

        def done(error: BrokerError) -> None:
            self.pending_brokers.discard(record.broker_id)
            self._dirty = True

        self._append((record,), done)

    # ------------------------------------------------------------------ timers and elections

    def poll(self, now: int) -> None:
        if not self.active:
            return
        session = self.config.broker_session_timeout_ms * MS
        for broker_id, reg in sorted(self.host.image.brokers.items()):
            if reg.fenced or broker_id in self.pending_brokers:
                continue
            last = self.heartbeats.setdefault(broker_id, now)
            if now - last > session:
                self._change_broker(FenceBrokerRecord(broker_id, reg.broker_epoch))
        if self._dirty:
            self._dirty = False
            self._reconcile()

    def next_deadline(self) -> int | None:
        if not self.active:
            return None
        session = self.config.broker_session_timeout_ms * MS
        times = [
            self.heartbeats.get(b, self.host.now) + session + 1
            for b, reg in self.host.image.brokers.items()
            if not reg.fenced and b not in self.pending_brokers
        ]
        return min(times) if times else None

    def _reconcile(self) -> None:
        changes: list[PartitionChangeRecord] = []
        for tp, state in self.host.image.partitions():
            if tp in self.pending_partitions:
                continue
            record = self._desired(tp, state)
            if record is not None:
                changes.append(record)
        if not changes:
            return
        tps = {c.tp for c in changes}
        self.pending_partitions |= tps

        def done(error: BrokerError) -> None:
            self.pending_partitions -= tps
            self._dirty = True

        self._append(tuple(changes), done)

    def _unclean(self, topic: str) -> bool:
        value = self.host.image.topic_config(topic, "unclean.leader.election.enable")
        if value is None:
            return self.config.unclean_leader_election_enable
        return parse_bool("unclean.leader.election.enable", value)

    def _min_isr(self, topic: str) -> int:
        value = self.host.image.topic_config(topic, "min.insync.replicas")
        return int(value) if value is not None else self.config.min_insync_replicas

    def _elr(
        self, tp: TopicPartition, state: PartitionState, isr: tuple[int, ...], damaged: frozenset[int] = frozenset()
    ) -> tuple[int, ...]:
        """The ELR once ``state``'s ISR becomes ``isr``: empty at ``min.insync.replicas`` or above
        (the high watermark moves again); below it, the old ELR plus the members leaving the ISR,
        less the new ISR and the ``damaged`` replicas."""
        if len(isr) >= self._min_isr(tp.topic):
            return ()
        keep = (set(state.elr) | set(state.isr)) - set(isr) - damaged
        return tuple(r for r in state.replicas if r in keep)

    def _desired(
        self, tp: TopicPartition, state: PartitionState, damaged: frozenset[int] = frozenset()
    ) -> PartitionChangeRecord | None:
        """What the partition should look like now; ``damaged`` replicas are neither eligible nor
        kept in the ISR or ELR, even as the last member."""
        image = self.host.image

        def eligible(r: int) -> bool:
            return r not in damaged and image.is_eligible(r)

        members = tuple(r for r in state.isr if r not in damaged)
        isr = tuple(r for r in members if eligible(r)) or members
        leader = state.leader if state.leader is not None and eligible(state.leader) else None
        elr: tuple[int, ...] | None = None
        if leader is None:
            candidates = [r for r in state.replicas if r in isr and eligible(r)]
            from_elr = [r for r in state.replicas if r in state.elr and eligible(r)] if not isr else []
            if candidates:
                leader = candidates[0]
            elif from_elr:
                leader, isr = from_elr[0], (from_elr[0],)
            elif self._unclean(tp.topic):
                unclean = [r for r in state.replicas if eligible(r)]
                if unclean:
                    leader, isr, elr = unclean[0], (unclean[0],), ()
        if leader is not None and leader not in isr:
            isr = (*isr, leader)
        if elr is None:
            elr = self._elr(tp, state, isr, damaged)
        if isr == state.isr and leader == state.leader and elr == state.elr:
            return None
        epoch = state.leader_epoch + (1 if leader != state.leader else 0)
        return PartitionChangeRecord(tp.topic, tp.partition, state.partition_epoch, isr, leader, epoch, elr)

    # ------------------------------------------------------------------ AlterPartition

    def on_alter_partition(self, src: int, req: AlterPartitionRequest, ctx: Any) -> None:
        tp = req.partition

        def reply(error: BrokerError, state: PartitionState | None = None) -> None:
            if state is None:
                response = AlterPartitionResponse(error, tp, correlation=req.correlation)
            else:
                response = AlterPartitionResponse(
                    error, tp, state.leader, state.leader_epoch, state.partition_epoch, state.isr, req.correlation
                )
            self.host.send(src, response, ctx)

        error, state = self._validate_alter(req)
        if error is not BrokerError.NONE or state is None:
            reply(error, state)
            return
        new_isr = tuple(r for r in state.replicas if r in set(req.new_isr))
        if set(new_isr) == set(state.isr):
            reply(BrokerError.NONE, state)
            return
        self.pending_partitions.add(tp)

        def done(result: BrokerError) -> None:
            self.pending_partitions.discard(tp)
            self._dirty = True
            now_state = self.host.image.partition(tp)
            applied = now_state is not None and now_state.partition_epoch == state.partition_epoch + 1
            if result is BrokerError.NONE and applied and now_state is not None and now_state.isr == new_isr:
                reply(BrokerError.NONE, now_state)
            elif result is BrokerError.NONE:
                reply(BrokerError.INVALID_UPDATE_VERSION)
            else:
                reply(BrokerError.NOT_CONTROLLER)

        record = PartitionChangeRecord(
            tp.topic,
            tp.partition,
            state.partition_epoch,
            new_isr,
            state.leader,
            state.leader_epoch,
            self._elr(tp, state, new_isr),
        )
        self._append((record,), done)

    def _validate_alter(self, req: AlterPartitionRequest) -> tuple[BrokerError, PartitionState | None]:
        if not self.active:
            return BrokerError.NOT_CONTROLLER, None
        image = self.host.image
        reg = image.brokers.get(req.broker_id)
        if reg is None or reg.broker_epoch != req.broker_epoch:
            return BrokerError.STALE_BROKER_EPOCH, None
        state = image.partition(req.partition)
        if state is None:
            return BrokerError.UNKNOWN_TOPIC_OR_PARTITION, None
        if state.leader != req.broker_id:
            return BrokerError.NOT_LEADER_OR_FOLLOWER, state
        if req.leader_epoch < state.leader_epoch:
            return BrokerError.FENCED_LEADER_EPOCH, state
        if req.leader_epoch > state.leader_epoch:
            return BrokerError.UNKNOWN_LEADER_EPOCH, state
        if req.partition_epoch != state.partition_epoch:
            return BrokerError.INVALID_UPDATE_VERSION, state
        new = req.new_isr
        if not new or len(set(new)) != len(new) or not set(new) <= set(state.replicas) or req.broker_id not in new:
            return BrokerError.INVALID_REQUEST, state
        if any(not image.is_eligible(r) for r in set(new) - set(state.isr)):
            return BrokerError.INELIGIBLE_REPLICA, state
        if req.partition in self.pending_partitions:
            return BrokerError.OPERATION_NOT_ATTEMPTED, state
        return BrokerError.NONE, state

    # ------------------------------------------------------------------ CreateTopics

    def on_create_topics(self, req: CreateTopicsRequest, respond: Callable[[CreateTopicsResponse], None]) -> None:
        """Answer once every topic's records committed (or failed)."""
        names = [t.name for t in req.topics]
        results: dict[int, CreatedTopic] = {}
        outstanding: set[int] = set()
        state = {"issued": False, "answered": False}

        def finish() -> None:
            if state["issued"] and not outstanding and not state["answered"]:
                state["answered"] = True
                ordered = tuple(results[i] for i in range(len(req.topics)))
                respond(CreateTopicsResponse(ordered, req.correlation))

        for i, topic in enumerate(req.topics):
            if not self.active:
                results[i] = CreatedTopic(topic.name, BrokerError.NOT_CONTROLLER, "not the active controller")
                continue
            if names.count(topic.name) > 1:
                results[i] = CreatedTopic(topic.name, BrokerError.INVALID_REQUEST, "duplicate topic in the request")
                continue
            try:
                records, partitions, rf = self._plan(topic)
            except _Plan as exc:
                results[i] = CreatedTopic(topic.name, exc.error, str(exc))
                continue
            if req.validate_only:
                results[i] = CreatedTopic(topic.name, BrokerError.NONE, None, partitions, rf)
                continue
            outstanding.add(i)
            self.pending_topics.add(topic.name)
            self._append(records, self._topic_done(i, topic.name, partitions, rf, results, outstanding, finish))
        state["issued"] = True
        finish()

    def _topic_done(
        self,
        i: int,
        name: str,
        partitions: int,
        rf: int,
        results: dict[int, CreatedTopic],
        outstanding: set[int],
        finish: Callable[[], None],
    ) -> Callable[[BrokerError], None]:
        def done(error: BrokerError) -> None:
            self.pending_topics.discard(name)
            self._dirty = True
            if error is BrokerError.NONE and name in self.host.image.topics:
                results[i] = CreatedTopic(name, BrokerError.NONE, None, partitions, rf)
            elif error is BrokerError.NONE:
                results[i] = CreatedTopic(name, BrokerError.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
            elif error is BrokerError.REQUEST_TIMED_OUT:
                results[i] = CreatedTopic(name, error, "controller lost leadership before the topic committed")
            else:
                results[i] = CreatedTopic(name, BrokerError.NOT_CONTROLLER, "not the active controller")
            outstanding.discard(i)
            finish()

        return done

    def _plan(self, topic: NewTopic) -> tuple[tuple[MetadataRecord, ...], int, int]:
        image = self.host.image
        name = topic.name
        if not _LEGAL_TOPIC.match(name) or name in (".", ".."):
            raise _Plan(BrokerError.INVALID_TOPIC_EXCEPTION, f"illegal topic name {name!r}")
        if name in image.topics or name in self.pending_topics:
            raise _Plan(BrokerError.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        configs = self._topic_configs(topic)
        if topic.assignments:
            assignment = self._manual_assignment(topic)
        else:
            assignment = self._auto_assignment(topic)
        topic_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        records: list[MetadataRecord] = [TopicRecord(name, topic_id, configs)]
        for index, replicas in enumerate(assignment):
            isr = tuple(r for r in replicas if image.is_eligible(r))
            records.append(PartitionRecord(name, index, replicas, isr, isr[0], 0, 0))
        return tuple(records), len(assignment), len(assignment[0])

    def _topic_configs(self, topic: NewTopic) -> tuple[tuple[str, str], ...]:
        out = []
        for key, value in sorted(topic.configs):
            if key not in TOPIC_CONFIG_KEYS:
                raise _Plan(BrokerError.INVALID_CONFIG, f"unsupported topic config {key!r}")
            try:
                if key == "min.insync.replicas":
                    if int(value) < 1:
                        raise ValueError(value)
                else:
                    parse_bool(key, value)
            except ValueError:
                raise _Plan(BrokerError.INVALID_CONFIG, f"invalid value {value!r} for {key}") from None
            out.append((key, value.strip().lower()))
        return tuple(out)

    def _manual_assignment(self, topic: NewTopic) -> list[tuple[int, ...]]:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise _Plan(BrokerError.INVALID_REQUEST, "give either assignments or partitions/replication factor")
        by_index = dict(topic.assignments)
        if len(by_index) != len(topic.assignments) or sorted(by_index) != list(range(len(by_index))):
            raise _Plan(BrokerError.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1, once each")
        brokers = self.host.image.brokers
        sizes = {len(r) for r in by_index.values()}
        out = []
        for index in range(len(by_index)):
            replicas = tuple(by_index[index])
            if not replicas or len(set(replicas)) != len(replicas) or len(sizes) != 1:
                raise _Plan(BrokerError.INVALID_REPLICA_ASSIGNMENT, f"bad replica list {replicas} for {index}")
            if any(r not in brokers for r in replicas):
                raise _Plan(BrokerError.INVALID_REPLICA_ASSIGNMENT, f"unregistered broker in {replicas}")
            if not any(self.host.image.is_eligible(r) for r in replicas):
                raise _Plan(BrokerError.INVALID_REPLICA_ASSIGNMENT, f"every broker in {replicas} is fenced")
            out.append(replicas)
        return out

    def _auto_assignment(self, topic: NewTopic) -> list[tuple[int, ...]]:
        partitions = self.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        rf = self.config.default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
        if partitions < 1:
            raise _Plan(BrokerError.INVALID_PARTITIONS, f"number of partitions must be >= 1, got {partitions}")
        if rf < 1:
            raise _Plan(BrokerError.INVALID_REPLICATION_FACTOR, f"replication factor must be >= 1, got {rf}")
        live = sorted(b for b, reg in self.host.image.brokers.items() if not reg.fenced)
        if rf > len(live):
            raise _Plan(
                BrokerError.INVALID_REPLICATION_FACTOR,
                f"replication factor {rf} is larger than the {len(live)} available broker(s)",
            )
        start = self.rng.randrange(len(live))
        return [tuple(live[(start + p + j) % len(live)] for j in range(rf)) for p in range(partitions)]
