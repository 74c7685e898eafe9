"""What the group and transaction coordinators share (docs/kraft.md §7), sans-IO: an internal topic
whose partitions are led by the coordinators, created on first use through the controller; the
key → partition mapping (Java ``hashCode`` modulo the partition count, as Kafka); FindCoordinator
answers; appends through the replica manager with origin coordinator and acks=-1; following the
leadership of the topic's partitions (load when this broker starts leading one, unload when it
stops).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..kafka.records import build_batch, encode_batch
from ..raft.config import MS
from . import group_messages as gm
from .batch import NewBatch
from .errors import BrokerError
from .messages import (
    COORDINATOR_ORIGIN,
    CreateTopicsRequest,
    CreateTopicsResponse,
    NewTopic,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
)
from .partition import Role
from .topic_partition import TopicPartition

WRITE_TIMEOUT_MS = 5_000
_CREATE_RETRY_NS = 1_000 * MS

CreateTopic = Callable[[CreateTopicsRequest, Callable[[CreateTopicsResponse], None]], None]


@functools.lru_cache(maxsize=4096)
def java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as Kafka maps a key to a partition
    (memoised: the coordinators hash the same group and transactional ids over and over)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    h = java_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass
class Load:
    """A partition of the internal topic this broker leads: loaded from its log up to
    ``ready_at_offset``, served once the high watermark reaches it."""

    leader_epoch: int
    ready_at_offset: int
    resumed: bool = False  # (transactions) the work the log left half done was picked up


def coordinator_error(error: BrokerError) -> BrokerError:
    """Kafka's mapping of an append error to what a coordinator's client is told."""
    if error is BrokerError.NONE:
        return error
    if error in (BrokerError.NOT_LEADER_OR_FOLLOWER, BrokerError.FENCED_LEADER_EPOCH):
        return BrokerError.NOT_COORDINATOR
    return BrokerError.COORDINATOR_NOT_AVAILABLE


class InternalTopicCoordinator:
    """Base of the coordinators: ``TOPIC`` is the internal topic; ``host`` the BrokerNode."""

    TOPIC = ""

    def __init__(
        self, host: Any, bugs: frozenset[str], create_topic: CreateTopic, num_partitions: int, replication_factor: int
    ) -> None:
        self.host = host
        self.bugs = bugs
        self.create_topic = create_topic
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.loads: dict[int, Load] = {}  # partitions of TOPIC this broker leads (loaded or loading)
        self._create_after = 0
        self._creating = False
        self._followed: tuple[int, int] | None = None  # (leadership version, partition count) last followed

    @property
    def now(self) -> int:
        return self.host.now

    def _partition_count(self) -> int | None:
        topic = self.host.image.topics.get(self.TOPIC)
        return len(topic.partitions) if topic is not None and topic.partitions else None

    def partition_of(self, key: str) -> int | None:
        n = self._partition_count()
        return None if n is None else partition_for(key, n)

    def _load_status(self, index: int | None) -> BrokerError:
        """NONE if this broker leads partition ``index`` and has loaded it, else why not."""
        if index is None:
            return BrokerError.COORDINATOR_NOT_AVAILABLE
        load = self.loads.get(index)
        if load is None:
            return BrokerError.NOT_COORDINATOR
        p = self.host.replicas.partitions.get(TopicPartition(self.TOPIC, index))
        if p is None or p.hw < load.ready_at_offset:
            return BrokerError.COORDINATOR_LOAD_IN_PROGRESS
        return BrokerError.NONE

    def locate(self, key: str) -> gm.CoordinatorInfo:
        """FindCoordinator for one key: the leader of the key's partition (creating the topic
        when it does not exist yet)."""
        index = self.partition_of(key)
        if index is None:
            self._ensure_topic()
            return gm.CoordinatorInfo(key, BrokerError.COORDINATOR_NOT_AVAILABLE)
        state = self.host.image.partition(TopicPartition(self.TOPIC, index))
        leader = None if state is None else state.leader
        reg = None if leader is None else self.host.image.brokers.get(leader)
        if reg is None or reg.fenced:
            return gm.CoordinatorInfo(key, BrokerError.COORDINATOR_NOT_AVAILABLE)
        return gm.CoordinatorInfo(key, BrokerError.NONE, leader, reg.host, reg.port)

    def _ensure_topic(self) -> None:
        if self._creating or self.now < self._create_after:
            return
        brokers = sum(1 for reg in self.host.image.brokers.values() if not reg.fenced)
        if brokers == 0:
            return
        self._creating = True
        rf = max(1, min(self.replication_factor, brokers))
        request = CreateTopicsRequest((NewTopic(self.TOPIC, self.num_partitions, rf),), timeout_ms=10_000)

        def done(response: CreateTopicsResponse) -> None:
            self._creating = False
            if any(t.error not in (BrokerError.NONE, BrokerError.TOPIC_ALREADY_EXISTS) for t in response.topics):
                self._create_after = self.now + _CREATE_RETRY_NS

        self.create_topic(request, done)

    def _create_deadline(self) -> int | None:
        return self._create_after if self._creating is False and self._create_after > self.now else None

    def _append_to(
        self,
        index: int,
        records: list[tuple[bytes, bytes | None]],
        done: Callable[[BrokerError], None],
        producer: tuple[int, int] | None = None,
    ) -> None:
        """Append ``records`` to partition ``index`` of the topic (acks=-1, origin coordinator);
        ``done(error)`` once replicated or failed. ``producer`` (id, epoch): a transactional
        batch of that producer (no sequence: the coordinator's own writes are not deduplicated)."""
        now_ms = self.now // MS
        if producer is None:
            batch = build_batch(records, timestamp=now_ms)
        else:
            batch = build_batch(
                records, timestamp=now_ms, producer_id=producer[0], producer_epoch=producer[1], transactional=True
            )
        data = encode_batch(batch)
        tp = TopicPartition(self.TOPIC, index)
        new = NewBatch(data, len(records), now_ms)
        request = ProduceRequest(-1, WRITE_TIMEOUT_MS, (ProducePartition(tp, (new,)),), origin=COORDINATOR_ORIGIN)

        def respond(response: ProduceResponse) -> None:
            done(coordinator_error(response.partitions[0].error))

        self.host.replicas.append_records(request, respond, lambda reason: done(BrokerError.NOT_COORDINATOR))

    def _follow_leadership(self) -> None:
        """Load the partitions of the topic this broker now leads, unload those it stopped leading
        (or leads in a new leader epoch: reloaded)."""
        n = self._partition_count()
        if n is None:
            return
        key = (self.host.replicas.leadership_version, n)
        if key == self._followed:
            return  # no partition changed role or leader epoch since: the loads are up to date
        led = {}
        for index in range(n):
            p = self.host.replicas.partitions.get(TopicPartition(self.TOPIC, index))
            if p is not None and p.role is Role.LEADER:
                led[index] = p
        for index in [i for i in self.loads if i not in led or self.loads[i].leader_epoch != led[i].leader_epoch]:
            del self.loads[index]
            self._unload(index, n)
        for index, p in led.items():
            if index not in self.loads:
                self._load(index, n, p)
        self._followed = key

    def _unload(self, index: int, n: int) -> None:
        raise NotImplementedError

    def _load(self, index: int, n: int, p: Any) -> None:
        raise NotImplementedError
