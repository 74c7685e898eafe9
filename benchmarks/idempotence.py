"""Produce and consume throughput with the idempotent producer on and off, side by side on one
cluster (issue 17: "produce and consume throughput with idempotence on and off"), for librdkafka
(confluent-kafka) and, with ``--client kafka-python|both``, kafka-python.

A 3-node loopback cluster (``kraftwerk cluster up --backend local``), one topic per case with 3
partitions and replication factor 3, acks=all, values of --size bytes, each client's defaults
otherwise, but for kafka-python ``linger_ms`` 5 (librdkafka's default ``linger.ms``; kafka-python's
is 0). Per case: --messages asynchronous sends, then a flush; throughput = acknowledged messages /
(first send to the flush's return). Then a consumer of the same client reads the topic back
(assigned partitions from offset 0; throughput = messages / time to read them all), and every
acknowledged value must be there, with idempotence exactly once. Cases alternate (client by client:
off, on, off, on, ...) --repeat times; the table gives the median run and the best.

Usage: .venv/bin/python benchmarks/idempotence.py [--messages 20000] [--size 100] [--repeat 3]
       [--client librdkafka|kafka-python|both]
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from harness.real import cluster_local  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's importlib.resources use
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
    from kafka import __version__ as kafka_version  # noqa: E402

PARTITIONS = 3


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures resolve
    for f in admin.create_topics([NewTopic(name, PARTITIONS, 3)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, n: int, size: int, idempotent: bool) -> tuple[float, set[bytes]]:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": idempotent}
    )
    acked: set[bytes] = set()

    def delivered(err: object, msg: confluent_kafka.Message) -> None:
        if err is None:
            acked.add(msg.value())

    pad = b"x" * max(0, size - 12)
    start = time.perf_counter()
    for i in range(n):
        value = b"%011d-" % i + pad
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain
                producer.poll(0.01)
        producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left:
        raise SystemExit(f"{topic}: {left} messages still undelivered")
    return len(acked) / elapsed, acked


def kp_produce(bootstrap: str, topic: str, n: int, size: int, idempotent: bool) -> tuple[float, set[bytes]]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, enable_idempotence=idempotent)
    acked: set[bytes] = set()
    pad = b"x" * max(0, size - 12)
    start = time.perf_counter()
    for i in range(n):
        value = b"%011d-" % i + pad
        producer.send(topic, value).add_callback(lambda _meta, v=value: acked.add(v))
    producer.flush(120)
    elapsed = time.perf_counter() - start
    producer.close(10)
    return len(acked) / elapsed, acked


def kp_consume(bootstrap: str, topic: str, want: int) -> tuple[float, Counter[bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    seen: Counter[bytes] = Counter()
    start = time.perf_counter()
    deadline = time.monotonic() + 120
    try:
        while sum(seen.values()) < want and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                for r in records:
                    seen[r.value] += 1
        return sum(seen.values()) / (time.perf_counter() - start), seen
    finally:
        consumer.close()


def consume(bootstrap: str, topic: str, want: int) -> tuple[float, Counter[bytes]]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: Counter[bytes] = Counter()
    start = time.perf_counter()
    deadline = time.monotonic() + 120
    try:
        while sum(seen.values()) < want and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    seen[m.value()] += 1
        return sum(seen.values()) / (time.perf_counter() - start), seen
    finally:
        consumer.close()


CLIENTS: dict[str, tuple[Callable[..., tuple[float, set[bytes]]], Callable[..., tuple[float, Counter[bytes]]]]] = {
    "librdkafka": (produce, consume),
    "kafka-python": (kp_produce, kp_consume),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes (at least 12)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--client", choices=[*CLIENTS, "both"], default="librdkafka")
    args = parser.parse_args()
    if args.size < 12:
        parser.error("--size must be at least 12")
    clients = list(CLIENTS) if args.client == "both" else [args.client]
    runs: dict[tuple[str, bool], list[tuple[float, float]]] = {(c, i): [] for c in clients for i in (False, True)}
    with tempfile.TemporaryDirectory(prefix="kraftwerk-bench-idem-") as tmp:
        info = cluster_local.up(Path(tmp) / "cluster", 3, timeout=60)
        bootstrap = info["bootstrap"]
        try:
            for r in range(args.repeat):
                for (client, idempotent), results in runs.items():
                    send, read = CLIENTS[client]
                    topic = f"bench-idem-{client}-{'on' if idempotent else 'off'}-{r}"
                    create_topic(bootstrap, topic)
                    rate, acked = send(bootstrap, topic, args.messages, args.size, idempotent)
                    read_rate, seen = read(bootstrap, topic, len(acked))
                    if not acked <= set(seen) or (idempotent and max(seen.values(), default=1) > 1):
                        raise SystemExit(f"{topic}: lost or duplicated values")
                    results.append((rate, read_rate))
                    print(f"  {topic}: produce {rate:,.0f} msg/s, consume {read_rate:,.0f} msg/s", file=sys.stderr)
        finally:
            cluster_local.down(Path(tmp) / "cluster", timeout=20)
    print(
        f"\nMachine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"librdkafka {confluent_kafka.libversion()[0]}, kafka-python {kafka_version}; 3 nodes on loopback, "
        f"{PARTITIONS} partitions x RF 3, "
        f"acks=all, {args.size}-byte values, {args.messages:,} messages per run, {args.repeat} runs per case\n"
    )
    print("| client | idempotence | produce, median (msg/s) | produce, best (msg/s) | consume, median (msg/s) |")
    print("|---|---|---:|---:|---:|")
    for (client, idempotent), results in runs.items():
        produced = [p for p, _ in results]
        consumed = [c for _, c in results]
        print(
            f"| {client} | {'on' if idempotent else 'off'} | {statistics.median(produced):,.0f} "
            f"| {max(produced):,.0f} | {statistics.median(consumed):,.0f} |"
        )
    print(f"\nLoad average at the end: {os.getloadavg()[0]:.1f} (1 min).")


if __name__ == "__main__":
    main()
