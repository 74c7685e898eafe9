"""BrokerNodes on the node tests' cluster (``tests/nodes/raft/cluster.py``: the simulator's parts,
whose nodes keep partition logs that lose unflushed batches on a crash, and whose epoch checker
sees every ``partition-leader`` claim), plus client helpers."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from typing import Any

from harness.sim.disk import BatchDisk
from nodes.broker import (
    Batch,
    BrokerConfig,
    BrokerNode,
    ClientResponse,
    CreateTopicsRequest,
    FetchPartition,
    FetchRecordsRequest,
    NewBatch,
    NewTopic,
    ProducePartition,
    ProduceRequest,
    TopicPartition,
)
from nodes.broker.partition import Role
from nodes.raft import RaftConfig
from tests.nodes.raft.cluster import Cluster

FAST = BrokerConfig(
    min_insync_replicas=2,
    replica_lag_time_max_ms=2_000,
    broker_session_timeout_ms=2_500,
    broker_heartbeat_interval_ms=500,
    replica_fetch_backoff_ms=100,
    request_timeout_ms=1_000,
    default_replication_factor=3,
)


def value_of(batch: Batch) -> Any:
    return json.loads(batch.data)


class BrokerCluster(Cluster):
    def __init__(
        self,
        n: int = 3,
        *,
        seed: int = 0,
        bugs: Iterable[str] = (),
        config: RaftConfig | None = None,
        broker_config: BrokerConfig = FAST,
        **kwargs: Any,
    ) -> None:
        self.broker_config = broker_config
        super().__init__(n, seed=seed, bugs=bugs, config=config, factory=self._make, **kwargs)
        self._rid = 0

    def _make(self, i: int, ids: list[int], config: RaftConfig, rng: random.Random, bugs: frozenset[str]) -> BrokerNode:
        return BrokerNode(i, ids, config, rng, bugs, broker_config=self.broker_config, endpoint=(f"n{i}", 9092))

    @property
    def pdisks(self) -> dict[int, dict[TopicPartition, BatchDisk]]:
        """node id -> its partition logs on disk."""
        return {i: n.partitions for i, n in self.sim.nodes.items()}

    @property
    def closed(self) -> dict[Any, str]:
        """request id -> why the node closed that client's connection (a failed acks=0 produce)."""
        return self.sim.closed

    # -- clients

    def rid(self, prefix: str = "r") -> str:
        self._rid += 1
        return f"{prefix}{self._rid}"

    def request(self, i: int, method: str, request: Any, timeout_ms: int = 5_000) -> Any:
        """Call a client method on node ``i`` and run until its ClientResponse (None if none)."""
        rid = self.rid()
        self.call(i, method, rid, request)
        self.run_until(lambda: rid in self.replies, timeout_ms)
        reply = self.replies.get(rid)
        return reply[1].response if reply is not None and isinstance(reply[1], ClientResponse) else None

    def broker(self, i: int) -> BrokerNode:
        return self.nodes[i]

    def registered(self) -> bool:
        """Every live node sees every live broker registered and unfenced."""
        live = self.alive()
        return all(
            all(self.nodes[j].image.is_eligible(i) for i in live) and self.nodes[j].broker_epoch() is not None
            for j in live
        )

    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, via: int | None = None, **kw: Any) -> Any:
        via = via if via is not None else self.alive()[0]
        response = self.request(via, "create_topics", CreateTopicsRequest((NewTopic(name, partitions, rf, **kw),)))
        return response.topics[0]

    def partition_leader(self, tp: TopicPartition) -> int | None:
        """The live node acting as leader for ``tp`` with the highest leader epoch."""
        best = None
        for i in self.alive():
            p = self.nodes[i].replicas.partitions.get(tp)
            if p is not None and p.role is Role.LEADER and (best is None or p.leader_epoch > best[1]):
                best = (i, p.leader_epoch)
        return best[0] if best else None

    def leader_ready(self, tp: TopicPartition, isr_size: int | None = None) -> int | None:
        """A partition leader that every live replica follows and has fetched from, with an ISR
        of ``isr_size``."""
        lid = self.partition_leader(tp)
        if lid is None:
            return None
        p = self.nodes[lid].replicas.partitions[tp]
        if isr_size is not None and len(p.isr) != isr_size:
            return None
        for i in self.alive():
            q = self.nodes[i].replicas.partitions.get(tp)
            if i in p.replicas and i != lid and (q is None or q.role is not Role.FOLLOWER or q.leader != lid):
                return None
            if i in p.replicas and i != lid and p.remotes[i].leo is None:
                return None
        return lid

    def send_value(self, i: int, tp: TopicPartition, value: Any, acks: int = -1, timeout_ms: int = 3_000) -> str:
        """Start a one-record produce; returns the request id (see ``self.replies``)."""
        rid = self.rid("p")
        batch = NewBatch(json.dumps(value).encode(), 1)
        self.call(i, "produce", rid, ProduceRequest(acks, timeout_ms, (ProducePartition(tp, (batch,)),)))
        return rid

    def produce_result(self, rid: str) -> Any:
        reply = self.replies.get(rid)
        return reply[1].response.partitions[0] if reply is not None else None

    def read_all(self, i: int, tp: TopicPartition, start: int = 0, timeout_ms: int = 3_000) -> list[tuple[int, Any]]:
        """Consume from node ``i`` up to its high watermark: ``[(offset, value), …]``."""
        out: list[tuple[int, Any]] = []
        offset = start
        while True:
            request = FetchRecordsRequest((FetchPartition(tp, offset),), max_wait_ms=0)
            response = self.request(i, "fetch", request, timeout_ms)
            result = response.partitions[0]
            assert result.error == 0, result
            if not result.batches:
                return out
            for batch in result.batches:
                if batch.base_offset >= offset:
                    out.append((batch.base_offset, value_of(batch)))
            offset = result.batches[-1].next_offset

    def log_values(self, i: int, tp: TopicPartition) -> list[tuple[int, Any]]:
        p = self.nodes[i].replicas.partitions[tp]
        return [(b.base_offset, value_of(b)) for b in p.log.batches]
