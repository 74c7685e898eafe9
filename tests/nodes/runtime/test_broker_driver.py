"""The driver running BrokerNodes: Kafka APIs on the client listener, replication over the controller
listener, partition logs on disk. Three in-process nodes on 127.0.0.1 ephemeral ports."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nodes.broker import BrokerConfig, BrokerError, BrokerNode, TopicPartition
from nodes.broker.messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from nodes.kafka import protocol as kp
from nodes.kafka.errors import ErrorCode
from nodes.runtime import brokerwire, framing
from nodes.runtime.client import ClientConnection
from nodes.runtime.config import NodeConfig
from nodes.runtime.kvclient import KvClient
from nodes.runtime.partition_store import PartitionStore, partition_file_name

from ._kafka import KafkaWire, batch_bytes, fetch, produce, values
from ._support import RawClient, run
from .test_driver import FAST, HOST, Cluster

BROKER = BrokerConfig(
    broker_session_timeout_ms=1500,
    broker_heartbeat_interval_ms=100,
    replica_fetch_wait_max_ms=50,
    replica_fetch_backoff_ms=100,
    replica_lag_time_max_ms=3000,
    request_timeout_ms=500,
)


class BrokerCluster(Cluster):
    def config(self, node_id: int) -> NodeConfig:
        return dataclasses.replace(super().config(node_id), roles=frozenset({"controller", "broker"}), broker=BROKER)

    def wire(self, node_id: int, timeout: float = 5.0) -> KafkaWire:
        return KafkaWire(HOST, self.ports[node_id][1], timeout)

    def core(self, node_id: int) -> BrokerNode:
        core = self.drivers[node_id].core
        assert isinstance(core, BrokerNode)
        return core

    async def wait_brokers(self, timeout: float = 10.0) -> None:
        """Every live broker registered and unfenced, as every live node's image says."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        live = [d.node_id for d in self.live()]
        while loop.time() < deadline:
            if all(
                sorted(b for b, reg in self.core(i).image.brokers.items() if not reg.fenced) == sorted(live)
                for i in live
            ):
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"brokers not all unfenced: {[d.status() for d in self.live()]}")

    async def create(self, name: str, partitions: int = 1, rf: int = 3, via: int = 1, **configs: str) -> None:
        request = kp.CreateTopicsRequest(
            topics=[
                kp.CreatableTopic(name, partitions, rf, [], [kp.CreatableTopicConfig(k, v) for k, v in configs.items()])
            ],
            timeout_ms=5000,
        )
        async with self.wire(via) as w:
            resp = await w.call(request, 7)
        assert resp.topics[0].error_code == 0, resp
        await self.wait_partition(TopicPartition(name, 0))

    async def wait_partition(self, tp: TopicPartition, exclude: int | None = None, timeout: float = 10.0) -> int:
        """The leader of ``tp`` once every live node's image agrees on one (not ``exclude``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            states = [self.core(d.node_id).image.partition(tp) for d in self.live()]
            leaders = {s.leader if s is not None else None for s in states}
            if len(leaders) == 1 and None not in leaders and exclude not in leaders:
                leader = leaders.pop()
                assert leader is not None
                if self.core(leader).replicas.partitions[tp].role.value == "leader":
                    return leader
            await asyncio.sleep(0.02)
        raise AssertionError(f"no agreed leader for {tp}")


def with_brokers(tmp_path: Path, body: Callable[[BrokerCluster], Any], timeout: float = 30.0, **kwargs: Any) -> Any:
    async def main() -> Any:
        cluster = BrokerCluster(tmp_path, **kwargs)
        try:
            await cluster.start()
            await cluster.wait_leader()
            await cluster.wait_brokers()
            return await body(cluster)
        finally:
            await cluster.close()

    return run(main(), timeout)


TP = TopicPartition("t", 0)


def test_produce_fetch_list_offsets_and_metadata(tmp_path: Path) -> None:
    async def body(c: BrokerCluster) -> None:
        controller = (await c.wait_leader()).node_id
        other = next(i for i in c.ids if i != controller)
        await c.create("t", via=other)  # forwarded to the active controller
        leader = await c.wait_partition(TP)
        async with c.wire(leader) as w:
            md = await w.call(kp.MetadataRequest(topics=None), 12)
            assert sorted((b.node_id, b.port) for b in md.brokers) == sorted((i, c.ports[i][1]) for i in c.ids)
            assert md.controller_id == controller
            (part,) = md.topics[0].partitions
            assert part.leader_id == leader and sorted(part.isr_nodes) == c.ids

            r = await w.call(produce("t", 0, batch_bytes(b"a", b"b"), acks=-1), 9)
            first = r.responses[0].partition_responses[0]
            assert (first.error_code, first.base_offset) == (0, 0)
            r = await w.call(produce("t", 0, batch_bytes(b"c"), acks=1), 3)
            assert r.responses[0].partition_responses[0].base_offset == 2
            await w.send_only(produce("t", 0, batch_bytes(b"d"), acks=0), 7)

            for _ in range(50):  # acks=1 and acks=0 become visible once replicated: a parked fetch waits
                f = await w.call(fetch("t", 0, 3, max_wait_ms=200), 12)
                if f.responses[0].partitions[0].records:
                    break
            f = await w.call(fetch("t", 0, 0), 12)
            assert values(f.responses[0].partitions[0].records) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
            f = await w.call(fetch("t", 0, 2), 4)
            assert values(f.responses[0].partitions[0].records)[0] == (2, b"c")  # whole batches from offset 2

            earliest_latest = [kp.ListOffsetsPartition(0, -1, -2), kp.ListOffsetsPartition(0, -1, -1)]
            lo = kp.ListOffsetsRequest(topics=[kp.ListOffsetsTopic("t", earliest_latest)])
            offsets = await w.call(lo, 7)
            assert [p.offset for p in offsets.topics[0].partitions] == [0, 4]

        follower = next(i for i in c.ids if i != leader)
        async with c.wire(follower) as w:
            r = await w.call(produce("t", 0, batch_bytes(b"x"), acks=-1), 8)
            assert r.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            f = await w.call(fetch("t", 0, 0), 12)
            assert f.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        async with KvClient(HOST, c.ports[controller][1]) as kv:  # the KV API keeps working
            assert (await kv.write("k", 1)).type == "ok" and (await kv.read("k")).value == 1

        await asyncio.sleep(0.3)  # followers fetch and flush
        for i in c.ids:
            path = c.base / f"n{i}" / "partitions" / partition_file_name(TP)
            assert path.stat().st_size > 0, f"n{i} has no partition log"
        status = c.drivers[leader].status()
        assert status["broker"]["partitions"]["t-0"]["high_watermark"] == 4
        assert c.drivers[leader].metrics()["partition_fsyncs"] >= 1

    with_brokers(tmp_path, body)


def test_bad_requests_close_only_their_connection(tmp_path: Path) -> None:
    async def body(c: BrokerCluster) -> None:
        await c.create("t")
        leader = await c.wait_partition(TP)
        port = c.ports[leader][1]
        async with c.wire(leader) as good:
            bad = bytearray(batch_bytes(b"a"))
            bad[-1] ^= 0x55
            r = await good.call(produce("t", 0, bytes(bad)), 9)
            part = r.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.CORRUPT_MESSAGE and "CRC" in part.error_message

            versions = await good.call(kp.ApiVersionsRequest(), 3)
            assert versions.ranges()[kp.ApiKey.FETCH] == (4, 12)
            init = await good.call(kp.InitProducerIdRequest(transaction_timeout_ms=1000), 4)
            assert init.error_code == ErrorCode.NONE and init.producer_id >= 0 and init.producer_epoch == 0

            # an ApiVersions version we do not know: the v0 downgrade reply
            raw = await RawClient.open(port)
            raw.writer.write(framing.encode_request(18, 9, 5, b"\x00", client_id="x", header_version=2))
            corr, out = await raw.recv()
            down = kp.ApiVersionsResponse.decode(out, 0)
            assert corr == 5 and down.error_code == ErrorCode.UNSUPPORTED_VERSION and down.ranges()[18] == (0, 3)
            await raw.close()

            closers = [
                framing.encode_request(0, 2, 1, b"", client_id="old produce"),
                framing.encode_request(11, 5, 1, b"", client_id="JoinGroup"),
                framing.encode_request(3, 9, 1, b"\x07garbage", header_version=2),
                kp.encode_request_frame(produce("t", 0, bytes(bad), acks=0), 7, 1),  # acks=0 failure
                b"\xff\xff\xff\xfe",  # negative size prefix
            ]
            for frame in closers:
                raw = await RawClient.open(port)
                raw.writer.write(frame)
                assert await raw.closed_by_peer(), frame[:20]
                await raw.close()

            r = await good.call(produce("t", 0, batch_bytes(b"ok")), 9)  # the first connection still works
            assert r.responses[0].partition_responses[0].error_code == 0
        assert c.drivers[leader].core is not None

    with_brokers(tmp_path, body)


def test_a_broker_request_of_another_cluster_is_answered_inconsistent_cluster_id(tmp_path: Path) -> None:
    async def body(c: BrokerCluster) -> None:
        controller = (await c.wait_leader()).node_id
        other = next(i for i in c.ids if i != controller)
        epoch = c.core(other).lifecycle.epoch
        conn = ClientConnection(HOST, c.ports[controller][0])
        try:
            for cluster in ("another-cluster", "kraftwerk"):
                request = BrokerHeartbeatRequest(other, epoch, 0, want_fence=True, correlation=9, cluster_id=cluster)
                key, data = brokerwire.encode(other, request)
                answers = brokerwire.decode(key, bytes(await conn.send(key, 0, data, timeout=5) or b""))[1]
                assert isinstance(answers, BrokerHeartbeatResponse) and answers.correlation == 9
                if cluster == "another-cluster":
                    assert answers.error is BrokerError.INCONSISTENT_CLUSTER_ID
                    assert not c.core(controller).image.brokers[other].fenced  # the want_fence was not acted on
                else:
                    assert answers.error is BrokerError.NONE
        finally:
            await conn.close()

    with_brokers(tmp_path, body)


def test_leader_crash_restart_and_torn_partition_tail(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def body(c: BrokerCluster) -> None:
        await c.create("t")
        leader = await c.wait_partition(TP)
        async with c.wire(leader) as w:
            for i in range(5):
                r = await w.call(produce("t", 0, batch_bytes(f"v{i}".encode()), acks=-1), 9)
                assert r.responses[0].partition_responses[0].base_offset == i
        await c.crash(leader)
        new = await c.wait_partition(TP, exclude=leader)
        async with c.wire(new) as w:
            r = await w.call(produce("t", 0, batch_bytes(b"after"), acks=-1, timeout_ms=3000), 9)
            assert r.responses[0].partition_responses[0].base_offset == 5

        with (c.base / f"n{leader}" / "partitions" / partition_file_name(TP)).open("ab") as f:
            f.write(b"\x00\x00\x02\x00torn")
        with caplog.at_level(logging.WARNING):
            restarted = await c.restart(leader)
        assert "torn or corrupt tail" in caplog.text
        await c.wait_brokers()
        for _ in range(200):
            p = restarted.core.replicas.partitions.get(TP) if isinstance(restarted.core, BrokerNode) else None
            if p is not None and p.leo == 6:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the restarted node did not catch up")
        async with c.wire(await c.wait_partition(TP)) as w:
            f = await w.call(fetch("t", 0, 0), 12)
            assert [v for _, v in values(f.responses[0].partitions[0].records)] == [
                b"v0",
                b"v1",
                b"v2",
                b"v3",
                b"v4",
                b"after",
            ]

    with_brokers(tmp_path, body)


def test_lazy_flush_holds_partition_appends_in_the_process(tmp_path: Path) -> None:
    raft = dataclasses.replace(FAST, lazy_flush_interval_ms=60_000)

    async def body(c: BrokerCluster) -> None:
        await c.create("t", rf=1)
        leader = await c.wait_partition(TP)
        async with c.wire(leader) as w:
            r = await w.call(produce("t", 0, batch_bytes(b"a", b"b"), acks=-1), 9)
            assert r.responses[0].partition_responses[0].error_code == 0  # acknowledged, never fsynced
        path = c.base / f"n{leader}" / "partitions" / partition_file_name(TP)
        assert path.stat().st_size == 0, "held appends must stay in the process"
        await c.crash(leader)
        store = PartitionStore(c.base / f"n{leader}")
        assert store.open()[TP] == []
        store.close(sync=False)

    with_brokers(tmp_path, body, bugs=["lazy-flush"], raft=raft)
