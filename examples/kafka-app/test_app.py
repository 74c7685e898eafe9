"""The order processor (app.py) tested on a chaos Kafka cluster: kraftwerk's `kafka_chaos` fixture.

Every acknowledged order must be processed at least once while the partition leader is killed, a node is cut
off and the application itself crashes mid-batch. Run with `pytest examples/kafka-app` (a local cluster; add
`--kafka-chaos-backend docker` for containers). `test_commit_before_processing_loses_orders` FAILS on
purpose: it shows what the test reports when the application has the bug.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from app import TOPIC, Crash, run_confluent, run_kafka_python
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError

ORDERS = 300


def produce(bootstrap: str, numbers: range) -> set[str]:
    """Send orders with acks=all; the ones the cluster acknowledged."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=10_000)
    sent = {str(n): producer.send(TOPIC, str(n).encode()) for n in numbers}
    acked = set()
    for order, future in sent.items():
        try:
            future.get(timeout=30)
            acked.add(order)
        except KafkaError:
            pass  # not acknowledged: the application may or may not see it
    producer.close()
    return acked


def scenario(kafka_chaos: Any, run: Callable[..., None], **app: Any) -> None:
    bootstrap = kafka_chaos.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])
    admin.close()
    acked = produce(bootstrap, range(ORDERS // 2))
    processed: list[str] = []

    with pytest.raises(Crash):  # the first instance dies with its third batch polled, not processed
        run(bootstrap, processed, crash_at=3, **app)

    restarted = threading.Thread(target=run, args=(bootstrap, processed), kwargs={"idle_s": 12.0, **app})
    restarted.start()  # the next instance consumes while Kafka fails under it
    time.sleep(1.0)
    kafka_chaos.kill("leader", topic=TOPIC)  # the leader of orders/0
    acked |= produce(bootstrap, range(ORDERS // 2, ORDERS))
    kafka_chaos.partition("one")  # one node cut off from the others
    time.sleep(3.0)
    kafka_chaos.heal()  # reconnect it, restart the killed node
    restarted.join()
    run(bootstrap, processed, idle_s=5.0, **app)  # one more restart drains whatever is left

    lost = acked - set(processed)
    assert not lost, (
        f"{len(lost)} of {len(acked)} acknowledged orders were never processed: {sorted(lost, key=int)[:40]}"
    )


def test_kafka_python_consumer_processes_every_order(kafka_chaos: Any) -> None:
    scenario(kafka_chaos, run_kafka_python)


def test_confluent_consumer_processes_every_order(kafka_chaos: Any) -> None:
    scenario(kafka_chaos, run_confluent)


def test_commit_before_processing_loses_orders(kafka_chaos: Any) -> None:
    """FAILS on purpose: the broken processor commits a batch before processing it, so the crash loses it."""
    scenario(kafka_chaos, run_kafka_python, commit_first=True)
