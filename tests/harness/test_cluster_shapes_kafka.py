"""librdkafka (confluent-kafka) and kafka-python, each with its default producer and consumer settings, against
`kraftwerk cluster up --backend docker --nodes 6 --controllers 3` (n1..n3 controller-only voters, n4..n6
broker-only observers): produce to a topic replicated on the brokers while the active controller is SIGKILLed
(`cluster kill --controller`), then consume: every acknowledged value is read back, and another controller leads."""

from __future__ import annotations

import json
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.db.nodes import describe_at
from tests.harness.local_kafka_cluster import create_topic, kraftwerk
from tests.harness.real import realtest
from tests.harness.real.backends.clusters import node_image  # noqa: F401 - fixture
from tests.requirements import need_module

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's importlib.resources use
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.docker, pytest.mark.slow]

CONTROLLERS = {1, 2, 3}
PRODUCE_S = 6.0  # seconds of producing: ~2 before the kill, the rest after it


@pytest.fixture(scope="module")
def cluster(
    node_image: str,  # noqa: F811 - fixture
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, dict[str, Any]]]:
    directory = tmp_path_factory.mktemp("shapes-docker") / "cluster"
    up = ("cluster", "up", "--backend", "docker", "--nodes", "6", "--controllers", "3", "--dir", str(directory))
    try:
        r = kraftwerk(*up, timeout=180)
        assert r.returncode == 0, r.stderr
        yield directory, json.loads(r.stdout)
    finally:
        down = kraftwerk("cluster", "down", "--dir", str(directory))
        assert down.returncode == 0, down.stderr
        cid = json.loads((directory / "cluster.json").read_text())["cluster"]
        assert realtest.leftovers(cid) == []


def quorum_leader(info: dict[str, Any]) -> int | None:
    """The node every answering node names as the quorum leader, if they agree."""
    seen = {(describe_at(n["host"], n["port"]) or {}).get("leader") for n in info["nodes"]}
    seen.discard(None)
    return seen.pop() if len(seen) == 1 else None


def confluent_run(bootstrap: str, topic: str, stop: threading.Event, acked: list[bytes]) -> None:
    confluent = need_module("confluent_kafka", "confluent-kafka")
    p = confluent.Producer({"bootstrap.servers": bootstrap})

    def report(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.value())

    i = 0
    while not stop.is_set():
        p.produce(topic, f"c-{i}".encode(), on_delivery=report)
        p.poll(0)
        i += 1
        time.sleep(0.005)
    assert p.flush(30) == 0, "records still in flight 30 s after the end"


def confluent_read(bootstrap: str, topic: str, want: set[bytes]) -> set[bytes]:
    confluent = need_module("confluent_kafka", "confluent-kafka")
    c = confluent.Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}"})
    try:
        c.assign([confluent.TopicPartition(topic, p, confluent.OFFSET_BEGINNING) for p in range(3)])
        return _read(lambda: [m.value() for m in c.consume(500, 0.5) if m.error() is None], want)
    finally:
        c.close()


def kafka_python_run(bootstrap: str, topic: str, stop: threading.Event, acked: list[bytes]) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap)
    i = 0
    while not stop.is_set():
        value = f"k-{i}".encode()
        p.send(topic, value).add_callback(lambda _md, v=value: acked.append(v))
        i += 1
        time.sleep(0.005)
    p.flush(30)
    p.close(5)


def kafka_python_read(bootstrap: str, topic: str, want: set[bytes]) -> set[bytes]:
    c = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        parts = [TopicPartition(topic, p) for p in range(3)]
        c.assign(parts)
        c.seek_to_beginning(*parts)
        return _read(lambda: [m.value for ms in c.poll(500).values() for m in ms], want)
    finally:
        c.close()


def _read(poll: Callable[[], list[bytes]], want: set[bytes]) -> set[bytes]:
    """Poll until every value of `want` is read, or 20 s went by."""
    got: set[bytes] = set()
    deadline = time.monotonic() + 20
    while not want <= got and time.monotonic() < deadline:
        got.update(poll())
    return got


CLIENTS = {
    "confluent-kafka": (confluent_run, confluent_read),
    "kafka-python": (kafka_python_run, kafka_python_read),
}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_default_clients_lose_nothing_acknowledged_when_the_active_controller_dies(
    cluster: tuple[Path, dict[str, Any]], client: str
) -> None:
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    started = time.monotonic()
    directory, info = cluster
    bootstrap = info["bootstrap"]
    brokers = {n["id"] for n in info["nodes"] if n["roles"] == "broker"}
    assert brokers == {4, 5, 6} and len(bootstrap.split(",")) == 3
    run, read = CLIENTS[client]
    topic = f"t-{client}"
    create_topic(bootstrap, topic, 3)

    stop, acked = threading.Event(), []
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            run(bootstrap, topic, stop, acked)
        except BaseException as e:  # reported by the test thread
            errors.append(e)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    time.sleep(PRODUCE_S / 3)
    before = len(acked)
    r = kraftwerk("cluster", "kill", "--dir", str(directory), "--controller")
    assert r.returncode == 0, r.stderr
    killed = json.loads(r.stdout)
    assert killed["killed"] and killed["node"] in CONTROLLERS, killed
    time.sleep(PRODUCE_S * 2 / 3)
    stop.set()
    producer.join(60)
    assert not producer.is_alive() and not errors, errors
    assert before > 0 and len(acked) > before, f"{before} acknowledged before the kill, {len(acked)} in all"

    got = read(bootstrap, topic, set(acked))
    lost = set(acked) - got
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged values not read back, e.g. {sorted(lost)[:5]}"
    leader = quorum_leader(info)
    assert leader in CONTROLLERS - {killed["node"]}, f"no new active controller: {leader}"

    r = kraftwerk("cluster", "start", "--dir", str(directory), "--node", str(killed["node"]))
    assert r.returncode == 0, r.stderr
    print(
        f"\n{client}: {len(acked)} acknowledged ({before} before killing n{killed['node']}), "
        f"{len(got)} read, 0 lost, new active controller n{leader}, {time.monotonic() - started:.1f}s"
    )
