"""librdkafka (confluent-kafka) produce throughput with the idempotent producer on and off, side by
side on one cluster (issue 17: "produce and consume throughput with idempotence on and off").

A 3-node loopback cluster (``kraftwerk cluster up --backend local``), one topic per case with 3
partitions and replication factor 3, acks=all, values of --size bytes, librdkafka's defaults
otherwise (``linger.ms`` 5). Per case: --messages asynchronous ``produce()`` calls, then
``flush()``; throughput = acknowledged messages / (first produce to flush's return). Then a
librdkafka consumer reads the topic back (throughput = messages / time to read them all), and every
acknowledged value must be there exactly once. Cases alternate (off, on, off, on, ...) --repeat
times; the table gives the median run and the best.

Usage: .venv/bin/python benchmarks/idempotence.py [--messages 20000] [--size 100] [--repeat 3]
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
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from harness import cluster_local  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes (at least 12)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="kraftwerk-bench-idem-") as tmp:
        info = cluster_local.up(Path(tmp) / "cluster", 3, timeout=60)
        bootstrap = info["bootstrap"]
        try:
            for r in range(args.repeat):
                for idempotent in (False, True):
                    topic = f"bench-idem-{'on' if idempotent else 'off'}-{r}"
                    create_topic(bootstrap, topic)
                    rate, acked = produce(bootstrap, topic, args.messages, args.size, idempotent)
                    read_rate, seen = consume(bootstrap, topic, len(acked))
                    if set(seen) < acked or (idempotent and max(seen.values(), default=1) > 1):
                        raise SystemExit(f"{topic}: lost or duplicated values")
                    runs[idempotent].append((rate, read_rate))
                    print(f"  {topic}: produce {rate:,.0f} msg/s, consume {read_rate:,.0f} msg/s", file=sys.stderr)
        finally:
            cluster_local.down(Path(tmp) / "cluster", timeout=20)
    print(
        f"\nMachine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"librdkafka {confluent_kafka.libversion()[0]}; 3 nodes on loopback, {PARTITIONS} partitions x RF 3, "
        f"acks=all, {args.size}-byte values, {args.messages:,} messages per run, {args.repeat} runs per case\n"
    )
    print("| idempotence | produce, median (msg/s) | produce, best (msg/s) | consume, median (msg/s) |")
    print("|---|---:|---:|---:|")
    for idempotent in (False, True):
        produced = [p for p, _ in runs[idempotent]]
        consumed = [c for _, c in runs[idempotent]]
        print(
            f"| {'on' if idempotent else 'off'} | {statistics.median(produced):,.0f} | {max(produced):,.0f} "
            f"| {statistics.median(consumed):,.0f} |"
        )
    print(f"\nLoad average at the end: {os.getloadavg()[0]:.1f} (1 min).")


if __name__ == "__main__":
    main()
