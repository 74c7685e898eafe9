"""A cluster laid out as KRaft is deployed: 3 controller-only node processes vote, 2 broker-only ones
(``process.roles=broker``) observe the quorum and serve Kafka clients. kafka-python with its default
settings creates a replication-factor-2 topic through the brokers, produces and consumes; the active
controller is SIGKILLed mid-produce and nothing acknowledged is lost. The brokers never vote: the
quorum lists them as observers. Also mixed: combined voters and broker-only nodes replicate each
other's partitions."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.db.nodes import FAST_ELECTIONS, describe_at
from nodes.raft import API_KEYS, DescribeQuorumRequest, DescribeQuorumResponse, decode, encode
from nodes.runtime.client import ClientConnection

from ._support import run

CONTROLLERS = (1, 2, 3)
BROKERS = (4, 5)
HOST = "127.0.0.1"
TOPIC = "split"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class SplitCluster:
    """Node processes with their own node.properties under ``directory``: controllers and brokers."""

    def __init__(self, directory: Path, controller_roles: str = "controller") -> None:
        self.dir = directory
        ids = CONTROLLERS + BROKERS
        ports = iter(_free_ports(2 * len(ids)))
        self.node_port = {i: next(ports) for i in ids}  # CONTROLLER (controllers) or BROKER (brokers)
        self.client_port = {i: next(ports) for i in ids}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        voters = ",".join(f"{i}@{HOST}:{self.node_port[i]}" for i in CONTROLLERS)
        for i in ids:
            node = "CONTROLLER" if i in CONTROLLERS else "BROKER"
            props = {
                "node.id": str(i),
                "process.roles": controller_roles if i in CONTROLLERS else "broker",
                "controller.quorum.voters": voters,
                "listeners": f"{node}://{HOST}:{self.node_port[i]},CLIENT://{HOST}:{self.client_port[i]}",
                "log.dirs": str(directory / f"n{i}" / "data"),
                "broker.session.timeout.ms": "3000",
                "broker.heartbeat.interval.ms": "300",
                **FAST_ELECTIONS,
            }
            (directory / f"n{i}").mkdir(parents=True)
            self.config(i).write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")

    def config(self, i: int) -> Path:
        return self.dir / f"n{i}" / "node.properties"

    def start(self, i: int) -> None:
        out = open(self.dir / f"n{i}" / "out.log", "ab")  # noqa: SIM115 - the child keeps it
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "nodes", "--config", str(self.config(i))], stdout=out, stderr=out, env=env
        )
        out.close()

    def kill(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait(10)

    def status(self, i: int) -> dict[str, Any] | None:
        return describe_at(HOST, self.client_port[i], timeout=1.0)

    def wait(self, what: str, predicate: Any, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}\n{self.outputs()}")

    def leader(self) -> int | None:
        for i in CONTROLLERS:
            if self.procs[i].poll() is None:
                s = self.status(i)
                if s is not None and s.get("role") == "leader":
                    return i
        return None

    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{self.client_port[i]}" for i in BROKERS)

    def outputs(self) -> str:
        return "\n".join(
            f"--- n{i}\n" + "\n".join((self.dir / f"n{i}" / "out.log").read_text(errors="replace").splitlines()[-15:])
            for i in self.procs
        )

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in self.procs.values():
            p.wait(10)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SplitCluster]:
    c = SplitCluster(tmp_path)
    try:
        for i in CONTROLLERS + BROKERS:
            c.start(i)
        yield c
    finally:
        c.close()


def describe_quorum(port: int) -> DescribeQuorumResponse:
    async def ask() -> Any:
        conn = ClientConnection(HOST, port)
        try:
            return await conn.send(API_KEYS[DescribeQuorumRequest], 0, encode(DescribeQuorumRequest()))
        finally:
            await conn.close()

    response = decode(bytes(run(ask()) or b""))
    assert isinstance(response, DescribeQuorumResponse)
    return response


def _unfenced(c: SplitCluster) -> bool:
    statuses = [c.status(i) for i in BROKERS]
    return all(s is not None and (s.get("broker") or {}).get("fenced") is False for s in statuses)


@pytest.mark.slow
def test_controllers_and_broker_only_nodes_serve_kafka_clients_across_a_controller_kill(cluster: SplitCluster) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.admin import NewTopic
    c = cluster
    leader = c.wait("a controller leader", c.leader)
    c.wait("both brokers registered and unfenced", lambda: _unfenced(c))
    for i in CONTROLLERS:  # controllers run no broker: no broker status, no Kafka listener for clients
        status = c.status(i)
        assert status is not None and "broker" not in status and status["roles"] == ["controller"]
    for i in BROKERS:
        status = c.status(i)
        assert status is not None and status["role"] == "follower" and status["voted_for"] is None, status
        assert status["controller"] is None and status["inter_broker"] == f"{HOST}:{c.node_port[i]}"

    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap())
    try:
        result = admin.create_topics([NewTopic(TOPIC, 2, 2)])
        assert [t["error_code"] for t in result["topics"]] == [0], result
    finally:
        admin.close()
    quorum = describe_quorum(c.node_port[leader])
    assert {v.replica_id for v in quorum.voters} == set(CONTROLLERS)
    assert {o.replica_id for o in quorum.observers} == set(BROKERS)

    producer = KafkaProducer(bootstrap_servers=c.bootstrap())  # defaults: idempotent, acks=all
    acked: list[bytes] = []
    failed: list[Exception] = []
    try:
        for k in range(300):
            value = f"v{k}".encode()
            future = producer.send(TOPIC, value)
            future.add_callback(lambda _md, value=value: acked.append(value))
            future.add_errback(failed.append)
            if k == 100:
                producer.flush(30)
                c.kill(leader)  # the active controller, under load
            time.sleep(0.005)
        producer.flush(60)
    finally:
        producer.close(10)
    assert len(acked) >= 250, (len(acked), failed[:3])
    new_leader = c.wait("a new controller leader", c.leader)
    assert new_leader != leader

    consumer = KafkaConsumer(bootstrap_servers=c.bootstrap(), group_id=None)
    parts = [TopicPartition(TOPIC, p) for p in range(2)]
    try:
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        read: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not set(acked) <= set(read):
            batch = consumer.poll(500)
            read.extend(m.value for records in batch.values() for m in records)
    finally:
        consumer.close()
    lost = set(acked) - set(read)
    assert not lost, f"{len(lost)} acknowledged value(s) lost, e.g. {sorted(lost)[:5]}"

    def observed() -> bool:  # the new leader learns of each observer from its fetches
        leader = c.leader()
        quorum = describe_quorum(c.node_port[leader]) if leader is not None else None
        return (
            quorum is not None
            and {v.replica_id for v in quorum.voters} == set(CONTROLLERS)
            and set(BROKERS) == {o.replica_id for o in quorum.observers}
        )

    c.wait("the brokers as observers of the new leader", observed, 10)
    for i in BROKERS:
        assert c.procs[i].poll() is None, c.outputs()

    def replicated() -> bool:  # both brokers hold both partitions, in sync, over the inter-broker listeners
        parts = [((c.status(i) or {}).get("broker") or {}).get("partitions", {}) for i in BROKERS]
        return all(
            sorted(p.get(f"{TOPIC}-{n}", {}).get("isr", [])) == list(BROKERS)
            and len({q.get(f"{TOPIC}-{n}", {}).get("high_watermark") for q in parts}) == 1
            for p in parts
            for n in range(2)
        )

    c.wait("both partitions replicated on both brokers", replicated, 15)

    live = [i for i, p in c.procs.items() if p.poll() is None]
    for i in live:  # a graceful stop of every role: exit code 0
        c.procs[i].send_signal(signal.SIGTERM)
    assert {i: c.procs[i].wait(15) for i in live} == dict.fromkeys(live, 0), c.outputs()


def test_a_broker_only_node_listed_as_a_voter_does_not_start(tmp_path: Path) -> None:
    """The config rule as the process applies it: exit 2 naming the key."""
    c = SplitCluster(tmp_path)
    text = c.config(4).read_text()
    bad = text.replace("controller.quorum.voters=", f"controller.quorum.voters=4@{HOST}:{c.node_port[4]},")
    c.config(4).write_text(bad)
    done = subprocess.run(
        [sys.executable, "-m", "nodes", "--config", str(c.config(4))],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    assert done.returncode == 2 and "controller.quorum.voters" in done.stderr and "broker-only" in done.stderr


@pytest.mark.slow
def test_combined_voters_and_broker_only_nodes_replicate_both_ways(tmp_path: Path) -> None:
    """3 ``controller,broker`` voters and 2 broker-only observers: a broker-only node fetches from a combined
    one at its voter address, a combined one from a broker-only one at the inter-broker endpoint it registered."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaAdminClient, KafkaProducer
        from kafka.admin import NewTopic
    c = SplitCluster(tmp_path, controller_roles="controller,broker")
    ids = CONTROLLERS + BROKERS
    try:
        for i in ids:
            c.start(i)
        c.wait("a controller leader", c.leader)

        def unfenced() -> bool:
            statuses = [c.status(i) for i in ids]
            return all(s is not None and (s.get("broker") or {}).get("fenced") is False for s in statuses)

        c.wait("every broker registered and unfenced", unfenced)
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap())
        try:
            result = admin.create_topics([NewTopic(TOPIC, 5, 3)])
            assert [t["error_code"] for t in result["topics"]] == [0], result
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=c.bootstrap())
        futures = [producer.send(TOPIC, f"v{k}".encode(), partition=k % 5) for k in range(50)]
        producer.flush(30)
        producer.close(10)
        assert all(f.succeeded() for f in futures)

        def in_sync() -> bool:  # every replica of every partition caught up: ISR of 3 at every replica
            found: dict[str, list[tuple[int, Any]]] = {}
            for i in ids:
                parts = ((c.status(i) or {}).get("broker") or {}).get("partitions", {})
                for name, p in parts.items():
                    found.setdefault(name, []).append((i, (len(p["isr"]), p["high_watermark"])))
            return len(found) == 5 and all(len(v) == 3 and {x for _, x in v} == {(3, 10)} for v in found.values())

        c.wait("every partition replicated on its 3 replicas", in_sync, 15)
        held = [((c.status(i) or {}).get("broker") or {}).get("partitions", {}) for i in BROKERS]
        roles = {(p["role"], p["leader"] in CONTROLLERS) for parts in held for p in parts.values()}
        assert ("leader", False) in roles and ("follower", True) in roles, roles  # both directions
        quorum = describe_quorum(c.node_port[c.wait("a leader", c.leader)])
        assert {v.replica_id for v in quorum.voters} == set(CONTROLLERS)
        assert {o.replica_id for o in quorum.observers} == set(BROKERS)
    finally:
        c.close()
