"""A fake BrokerHost and a harness that drives one ReplicaManager directly: metadata is applied
straight to the image (no raft), effects and sent messages are collected, the clock is manual."""

from __future__ import annotations

import json
from typing import Any

from nodes.broker import (
    AppendPartitionLog,
    BrokerConfig,
    FetchPartition,
    FetchRecordsRequest,
    FlushPartition,
    MetadataImage,
    NewBatch,
    ProducePartition,
    ProduceRequest,
    TopicPartition,
)
from nodes.broker.records import (
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from nodes.broker.replica_manager import ReplicaManager
from nodes.raft import MS

TP = TopicPartition("t", 0)


class FatalError(Exception):
    pass


def epoch_of(broker: int) -> int:
    """Broker epochs used by the fake host."""
    return 100 + broker


class FakeHost:
    def __init__(self, node_id: int = 1, brokers: tuple[int, ...] = (1, 2, 3)) -> None:
        self.node_id = node_id
        self.image = MetadataImage()
        self._now = 0
        self.out: list[Any] = []
        self.sent: list[tuple[int, Any]] = []
        self.controller: int | None = 9
        self._corr = 0
        for b in brokers:
            assert self.image.apply_batch(
                (RegisterBrokerRecord(b, epoch_of(b), b), UnfenceBrokerRecord(b, epoch_of(b)))
            )

    @property
    def now(self) -> int:
        return self._now

    def emit(self, effect: Any) -> None:
        self.out.append(effect)

    def send(self, dst: int, message: Any, reply_ctx: Any = None) -> None:
        self.sent.append((dst, message))

    def controller_id(self) -> int | None:
        return self.controller

    def broker_epoch(self) -> int | None:
        reg = self.image.brokers.get(self.node_id)
        return reg.broker_epoch if reg is not None else None

    def next_correlation(self) -> int:
        self._corr += 1
        return self._corr

    def fatal(self, reason: str) -> Any:
        raise FatalError(reason)

    def take(self, kind: type) -> list[Any]:
        """Remove and return the collected effects of one type."""
        hits = [e for e in self.out if isinstance(e, kind)]
        self.out = [e for e in self.out if not isinstance(e, kind)]
        return hits

    def take_sent(self, kind: type) -> list[tuple[int, Any]]:
        hits = [(d, m) for d, m in self.sent if isinstance(m, kind)]
        self.sent = [(d, m) for d, m in self.sent if not isinstance(m, kind)]
        return hits


class Harness:
    """One ReplicaManager for partition ``t-0``."""

    def __init__(
        self,
        node_id: int = 1,
        replicas: tuple[int, ...] = (1, 2, 3),
        isr: tuple[int, ...] | None = None,
        leader: int | None = 1,
        leader_epoch: int = 0,
        bugs: tuple[str, ...] = (),
        config: BrokerConfig | None = None,
        topic_configs: tuple[tuple[str, str], ...] = (),
        logs: dict | None = None,
    ) -> None:
        self.host = FakeHost(node_id)
        self.config = config or BrokerConfig(min_insync_replicas=2, replica_lag_time_max_ms=1_000)
        self.rm = ReplicaManager(self.host, self.config, frozenset(bugs), 1_000)
        self.rm.load(logs or {}, 0)
        isr = replicas if isr is None else isr
        records = (
            TopicRecord("t", "id", topic_configs),
            PartitionRecord("t", 0, replicas, isr, leader, leader_epoch, 0),
        )
        assert self.host.image.apply_batch(records)
        self.step()

    @property
    def p(self) -> Any:
        return self.rm.partitions[TP]

    def step(self) -> None:
        self.rm.refresh()
        self.rm.poll(self.host.now)
        self.rm.settle()

    def advance(self, ms: int) -> None:
        self.host._now += ms * MS
        self.step()

    def change(self, **kw: Any) -> None:
        """Commit a partition change (isr, leader, leader_epoch) on top of the current state."""
        state = self.host.image.partition(TP)
        rec = PartitionChangeRecord(
            "t",
            0,
            state.partition_epoch,
            kw.get("isr", state.isr),
            kw.get("leader", state.leader),
            kw.get("leader_epoch", state.leader_epoch),
        )
        assert self.host.image.apply_batch((rec,))
        self.step()

    def fence(self, broker: int) -> None:
        assert self.host.image.apply_batch((FenceBrokerRecord(broker, epoch_of(broker)),))
        self.step()

    def produce(self, acks: int, *values: Any, timeout_ms: int = 1_000, epoch: int | None = None) -> list[Any]:
        """Start a produce; the returned list receives the response (or ``("closed", why)``)."""
        box: list[Any] = []
        batches = tuple(NewBatch(json.dumps(v).encode(), 1) for v in values)
        request = ProduceRequest(acks, timeout_ms, (ProducePartition(TP, batches, epoch),))
        self.rm.append_records(request, box.append, lambda why: box.append(("closed", why)))
        self.rm.settle()
        return box

    def flush(self) -> None:
        """Complete every requested partition flush."""
        for _ in range(8):
            flushes = self.host.take(FlushPartition)
            if not flushes:
                return
            for f in flushes:
                self.rm.partition_flushed(f.partition, f.up_to_offset)
            self.step()

    def fetch(
        self,
        offset: int,
        replica: int = -1,
        last_epoch: int | None = None,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        epoch: int | None = None,
        broker_epoch: int | None = None,
    ) -> list[Any]:
        box: list[Any] = []
        if broker_epoch is None:
            broker_epoch = epoch_of(replica) if replica >= 0 else -1
        request = FetchRecordsRequest(
            (FetchPartition(TP, offset, 1 << 20, epoch, last_epoch),),
            replica_id=replica,
            broker_epoch=broker_epoch,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
        )
        self.rm.fetch_messages(request, box.append)
        self.rm.settle()
        return box

    def appended(self) -> list[Any]:
        return [b for e in self.host.take(AppendPartitionLog) for b in e.batches]


def result(box: list[Any]) -> Any:
    """The single partition result of a collected produce or fetch response."""
    assert len(box) == 1, box
    return box[0].partitions[0]
