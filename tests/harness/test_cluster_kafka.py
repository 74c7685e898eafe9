"""kafka-python, unmodified, against `kraftwerk cluster up --backend local|netns|docker --nodes 3`: create a
topic with replication factor 3, produce with acks=0/1/all, consume with assign + seek, kill the partition
leader, keep producing (every acknowledged acks=all value is read back), restart the node, `cluster down`
(nothing of the cluster left), and `cluster down` without --dir removing a cluster a crash left."""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.db.nodes import describe_at
from harness.real import cluster_local, cluster_remote
from tests.harness.local_kafka_cluster import create_topic, kraftwerk
from tests.harness.real import realtest
from tests.harness.real.backends.clusters import node_image  # noqa: F401 - fixture
from tests.requirements import need, need_module

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's importlib.resources use
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ROOT = Path(__file__).resolve().parents[2]
TP = TopicPartition("t", 0)


BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("netns", id="netns"),
    pytest.param("docker", marks=[pytest.mark.docker], id="docker"),
]


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, dict[str, Any]]]:
    backend = request.param
    if backend == "netns":
        need("root", "iproute2")
    if backend == "docker":
        request.getfixturevalue("node_image")
    directory = tmp_path_factory.mktemp(f"kafka-{backend}") / "cluster"
    try:
        r = kraftwerk("cluster", "up", "--backend", backend, "--nodes", "3", "--dir", str(directory), timeout=180)
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        yield directory, info
    finally:
        remote = cluster_remote.is_remote(directory)
        down = kraftwerk("cluster", "down", "--dir", str(directory), "--timeout", "10")
        if remote:
            assert down.returncode == 0, down.stderr
            cid = json.loads((directory / "cluster.json").read_text())["cluster"]
            assert realtest.leftovers(cid) == []
        else:
            if down.returncode != 0 and (directory / "cluster.json").exists():
                cluster_local.down(directory, timeout=5)
            if (directory / "cluster.json").exists():
                left = cluster_local.LocalCluster.attach(directory)
                assert not any(left.pids().values()), f"still running: {left.pids()}"


def producer(bootstrap: str, acks: Any, **kwargs: Any) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=bootstrap,
        acks=acks,  # idempotence stays at its default: on for acks=all, off (silently) for acks 0 and 1
        retries=20,
        retry_backoff_ms=200,
        request_timeout_ms=10_000,
        **kwargs,
    )


def consume_all(bootstrap: str, start: int | None = None, want: int | None = None) -> list[tuple[int, bytes]]:
    """Every (offset, value) from ``start`` (the beginning if None): ``want`` records, or until a quiet second."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, request_timeout_ms=10_000)
    try:
        consumer.assign([TP])
        if start is None:
            consumer.seek_to_beginning(TP)
        else:
            consumer.seek(TP, start)
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        quiet = 0
        # with `want`, keep polling until it is reached (a busy machine can be quiet for a while)
        while time.monotonic() < deadline and (len(out) < want if want is not None else quiet < 2):
            batch = consumer.poll(500)
            quiet = 0 if batch else quiet + 1
            out.extend((m.offset, m.value) for records in batch.values() for m in records)
        return out
    finally:
        consumer.close()


@pytest.mark.slow
def test_kafka_python_produces_and_consumes_through_a_leader_kill(cluster: tuple[Path, dict[str, Any]]) -> None:
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    directory, info = cluster
    bootstrap = info["bootstrap"]
    assert len(info["nodes"]) == 3

    create_topic(bootstrap, "t", 1)

    # kafka-python's default producer is idempotent: it gets a producer id and writes with sequences
    default = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=10_000)
    assert default.send("t", b"idempotent").get(15).offset == 0
    assert default._transaction_manager.producer_id_and_epoch.producer_id >= 0
    default.close(2)

    # one acknowledged record first: acks=0 has no way to retry, so it must not race the new
    # partition's first leader election or the producer's first metadata (on a busy machine the
    # records of an acks=0 producer that starts too early are legitimately lost)
    warm = producer(bootstrap, "all", linger_ms=0)
    assert warm.send("t", b"warm-up").get(30).offset == 1
    warm.close(5)
    sent: dict[str, list[bytes]] = {"warm": [b"idempotent", b"warm-up"]}
    offsets: dict[bytes, int] = {b"idempotent": 0, b"warm-up": 1}
    for acks in (0, 1, "all"):
        values = [f"acks{acks}-{i}".encode() for i in range(20)]
        p = producer(bootstrap, acks, linger_ms=2)
        futures = [p.send("t", v) for v in values]
        p.flush(20)
        if acks != 0:
            for v, f in zip(values, futures, strict=True):
                offsets[v] = f.get(10).offset
        p.close(5)
        sent[str(acks)] = values
    read = consume_all(bootstrap, want=62)
    assert [o for o, _ in read] == list(range(62))
    assert [v for _, v in read] == sent["warm"] + sent["0"] + sent["1"] + sent["all"]  # acks=0 arrived too
    assert all(read[offsets[v]][1] == v for v in offsets)
    target = sent["all"][5]
    assert consume_all(bootstrap, start=offsets[target], want=1)[0] == (offsets[target], target)  # seek(offset)

    r = kraftwerk("cluster", "kill", "--dir", str(directory), "--leader", "t:0")
    assert r.returncode == 0, r.stderr
    killed = json.loads(r.stdout)["node"]

    p = producer(bootstrap, "all", linger_ms=2)
    after = [f"after-kill-{i}".encode() for i in range(50)]
    acked = []
    for v, f in [(v, p.send("t", v)) for v in after]:
        try:
            f.get(60)
            acked.append(v)
        except KafkaError:
            pass
    assert len(acked) >= 45, f"only {len(acked)} of 50 acknowledged after the leader was killed"
    values_read = {v for _, v in consume_all(bootstrap)}
    assert set(acked) <= values_read, "an acknowledged acks=all value was lost"
    assert set(sent["all"]) | set(sent["1"]) <= values_read

    r = kraftwerk("cluster", "start", "--dir", str(directory), "--node", str(killed))
    assert r.returncode == 0, r.stderr
    final = [f"restarted-{i}".encode() for i in range(10)]
    for v in final:
        p.send("t", v).get(30)
    p.close(5)
    everything = consume_all(bootstrap)
    assert [o for o, _ in everything] == list(range(len(everything)))
    assert set(final) | set(acked) <= {v for _, v in everything}
    restarted = next(n for n in info["nodes"] if n["id"] == killed)
    end = len(everything)
    for _ in range(100):  # the restarted node catches up as a follower
        status = describe_at(restarted["host"], restarted["port"]) or {}
        part = (status.get("broker") or {}).get("partitions", {}).get("t-0", {})
        if part.get("log_end_offset") == end:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"n{killed} did not catch up to {end}: {status}")


def test_confluent_kafka_admin_lists_every_topic(cluster: tuple[Path, dict[str, Any]]) -> None:
    """librdkafka's all-topics Metadata v12 request carries 3 bytes after its body; Kafka's broker
    ignores them, and so must ours (it closed the connection: list_topics() failed with a transport
    error)."""
    confluent_admin = need_module("confluent_kafka.admin", "confluent-kafka")
    bootstrap = cluster[1]["bootstrap"]
    create_topic(bootstrap, "listed", 3)
    client = confluent_admin.AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:  # the new topic reaches every broker's metadata image within moments
        listed = client.list_topics(timeout=20)  # raised KafkaException (transport failure) before the fix
        topic = listed.topics.get("listed")
        if (topic is not None and sorted(topic.partitions) == [0, 1, 2]) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert topic is not None and sorted(topic.partitions) == [0, 1, 2], listed.topics
    assert len(listed.brokers) == 3
