"""MetadataImage: the cluster metadata as of the committed metadata records, applied in raft
log order, deterministically, on every node (brokers, topics, partitions).

A payload's records are applied atomically: if one of them does not apply (a conditional
``partition-change`` whose expected partition epoch is stale, a duplicate topic, a fence for an
old broker epoch…) the whole batch is skipped, on every node alike. The controller re-derives
what still needs doing from the resulting image.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from ..raft import Record
from .records import (
    FenceBrokerRecord,
    MetadataError,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    decode_metadata,
    is_metadata_payload,
)
from .topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    broker_epoch: int
    incarnation: int
    host: str
    port: int
    fenced: bool
    inter_broker_host: str = ""  # where other brokers reach it (empty: its voter address)
    inter_broker_port: int = 0


@dataclass(frozen=True, slots=True)
class PartitionState:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int | None
    leader_epoch: int
    partition_epoch: int
    elr: tuple[int, ...] = ()  # eligible leader replicas (KIP-966): out of the ISR, yet holding the HW


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: str
    configs: dict[str, str]
    partitions: dict[int, PartitionState]


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """A partition appeared (``old`` None) or changed."""

    tp: TopicPartition
    old: PartitionState | None
    new: PartitionState


@dataclass(frozen=True, slots=True)
class BrokerChange:
    broker_id: int
    old: BrokerRegistration | None
    new: BrokerRegistration


ImageChange = PartitionChange | BrokerChange


class _Reject(Exception):
    pass


class MetadataImage:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicImage] = {}
        self.offset = 0  # next raft offset to apply
        self.last_epoch = 0  # raft epoch of the last applied record
        self.rejected = 0  # batches skipped as stale or malformed
        self.next_producer_id = 0  # producer ids below it are allocated (ProducerIdsRecord)

    # -- queries

    def partition(self, tp: TopicPartition) -> PartitionState | None:
        topic = self.topics.get(tp.topic)
        return topic.partitions.get(tp.partition) if topic is not None else None

    def partitions(self) -> Iterator[tuple[TopicPartition, PartitionState]]:
        for name in sorted(self.topics):
            topic = self.topics[name]
            for index in sorted(topic.partitions):
                yield TopicPartition(name, index), topic.partitions[index]

    def is_eligible(self, broker_id: int) -> bool:
        """Registered and not fenced: may lead or join an ISR."""
        reg = self.brokers.get(broker_id)
        return reg is not None and not reg.fenced

    def topic_config(self, topic: str, key: str) -> str | None:
        image = self.topics.get(topic)
        return image.configs.get(key) if image is not None else None

    # -- applying committed raft records

    def apply(self, record: Record) -> list[ImageChange]:
        """Apply one committed raft record (any kind; only metadata payloads change the image).
        Records at offsets already applied are ignored. Returns what changed."""
        if record.offset < self.offset:
            return []
        self.offset = record.offset + 1
        self.last_epoch = record.epoch
        if record.control or not is_metadata_payload(record.payload):
            return []
        try:
            records = decode_metadata(record.payload)
        except MetadataError:
            self.rejected += 1
            return []
        return self.apply_batch(records)

    def apply_batch(self, records: tuple[MetadataRecord, ...]) -> list[ImageChange]:
        """Apply all of ``records`` or, if one does not apply, none of them."""
        undo: list[Callable[[], None]] = []
        changes: list[ImageChange] = []
        try:
            for rec in records:
                self._apply_one(rec, undo, changes)
        except _Reject:
            for step in reversed(undo):
                step()
            self.rejected += 1
            return []
        return changes

    def _set_broker(self, reg: BrokerRegistration, undo: list, changes: list) -> None:
        old = self.brokers.get(reg.broker_id)
        self.brokers[reg.broker_id] = reg
        undo.append(lambda: self._restore_broker(reg.broker_id, old))
        changes.append(BrokerChange(reg.broker_id, old, reg))

    def _restore_broker(self, broker_id: int, old: BrokerRegistration | None) -> None:
        if old is None:
            self.brokers.pop(broker_id, None)
        else:
            self.brokers[broker_id] = old

    def _set_partition(self, tp: TopicPartition, state: PartitionState, undo: list, changes: list) -> None:
        parts = self.topics[tp.topic].partitions
        old = parts.get(tp.partition)
        parts[tp.partition] = state

        def restore() -> None:
            if old is None:
                parts.pop(tp.partition, None)
            else:
                parts[tp.partition] = old

        undo.append(restore)
        changes.append(PartitionChange(tp, old, state))

    def _apply_one(self, rec: MetadataRecord, undo: list, changes: list) -> None:
        if isinstance(rec, RegisterBrokerRecord):
            old = self.brokers.get(rec.broker_id)
            if old is not None and rec.broker_epoch <= old.broker_epoch:
                raise _Reject
            reg = BrokerRegistration(
                rec.broker_id,
                rec.broker_epoch,
                rec.incarnation,
                rec.host,
                rec.port,
                True,
                rec.inter_broker_host,
                rec.inter_broker_port,
            )
            self._set_broker(reg, undo, changes)
        elif isinstance(rec, FenceBrokerRecord | UnfenceBrokerRecord):
            old = self.brokers.get(rec.broker_id)
            if old is None or old.broker_epoch != rec.broker_epoch:
                raise _Reject
            fenced = isinstance(rec, FenceBrokerRecord)
            if old.fenced != fenced:
                self._set_broker(replace(old, fenced=fenced), undo, changes)
        elif isinstance(rec, TopicRecord):
            if rec.name in self.topics:
                raise _Reject
            self.topics[rec.name] = TopicImage(rec.name, rec.topic_id, dict(rec.configs), {})
            undo.append(lambda: self.topics.pop(rec.name, None))
        elif isinstance(rec, PartitionRecord):
            topic = self.topics.get(rec.topic)
            if topic is None or rec.partition in topic.partitions or rec.partition < 0:
                raise _Reject
            _check_shape(rec.replicas, rec.isr, rec.leader, rec.elr)
            state = PartitionState(rec.replicas, rec.isr, rec.leader, rec.leader_epoch, rec.partition_epoch, rec.elr)
            self._set_partition(rec.tp, state, undo, changes)
        elif isinstance(rec, PartitionChangeRecord):
            current = self.partition(rec.tp)
            if current is None or current.partition_epoch != rec.expected_partition_epoch:
                raise _Reject
            if rec.leader_epoch < current.leader_epoch:
                raise _Reject
            _check_shape(current.replicas, rec.isr, rec.leader, rec.elr)
            state = PartitionState(
                current.replicas, rec.isr, rec.leader, rec.leader_epoch, current.partition_epoch + 1, rec.elr
            )
            self._set_partition(rec.tp, state, undo, changes)
        elif isinstance(rec, ProducerIdsRecord):
            old_next = self.next_producer_id
            if rec.next_producer_id <= old_next:
                raise _Reject
            self.next_producer_id = rec.next_producer_id

            def restore_next() -> None:
                self.next_producer_id = old_next

            undo.append(restore_next)
        else:  # pragma: no cover - decode_metadata only yields the types above
            raise _Reject


def _check_shape(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int | None, elr: tuple[int, ...]) -> None:
    """Replicas distinct; ISR and ELR distinct, disjoint subsets of them; the leader in the ISR.
    The ISR may be empty only without a leader (every member was found damaged)."""
    if not replicas or len(set(replicas)) != len(replicas):
        raise _Reject
    if (not isr and leader is not None) or len(set(isr)) != len(isr) or not set(isr) <= set(replicas):
        raise _Reject
    if len(set(elr)) != len(elr) or not set(elr) <= set(replicas) or set(elr) & set(isr):
        raise _Reject
    if leader is not None and leader not in isr:
        raise _Reject
