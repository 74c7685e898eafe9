"""Transactional throughput (issue 18): a confluent-kafka (librdkafka) transactional producer runs
--transactions transactions of --messages messages each (spread over the 3 partitions of a topic
with replication factor 3; every transaction also sends one consumer offset, as a
consume-transform-produce loop does) and commits each, on a 3-node loopback cluster
(``kraftwerk cluster up --backend local``). Throughput = transactions (and messages) / time from
the first begin_transaction to the last commit's return. Then a read_committed consumer reads the
topic back: every message exactly once. --repeat runs, each on a fresh topic and transactional id.

Usage: .venv/bin/python benchmarks/txn_throughput.py [--transactions 200] [--messages 10]
       [--size 100] [--repeat 3]
Prints a Markdown table and the load average.
"""

from __future__ import annotations

import argparse
import os
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

from harness.real import cluster_local  # noqa: E402

PARTITIONS = 3


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for attempt in range(10):
        try:
            for f in admin.create_topics([NewTopic(name, PARTITIONS, 3)]).values():
                f.result(30)
            return
        except confluent_kafka.KafkaException:
            if attempt == 9:
                raise
            time.sleep(1)


def run(bootstrap: str, topic: str, txns: int, messages: int, size: int) -> tuple[float, float, list[bytes]]:
    """(init seconds, transactions seconds, values committed)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}"})
    group = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}"})
    t0 = time.perf_counter()
    producer.init_transactions(60)
    t1 = time.perf_counter()
    values: list[bytes] = []
    meta = group.consumer_group_metadata()
    for t in range(txns):
        producer.begin_transaction()
        for m in range(messages):
            value = f"{t}-{m}-".encode().ljust(size, b".")
            producer.produce(topic, value, partition=m % PARTITIONS)
            values.append(value)
        producer.send_offsets_to_transaction([confluent_kafka.TopicPartition(topic, 0, t)], meta, 60)
        producer.commit_transaction(60)
    t2 = time.perf_counter()
    group.close()
    return t1 - t0, t2 - t1, values


def read_back(bootstrap: str, topic: str, want: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "isolation.level": "read_committed"}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: list[bytes] = []
    deadline = time.monotonic() + 120
    while len(out) < want and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            out.append(m.value())
    consumer.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--messages", type=int, default=10, help="messages per transaction")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if min(args.transactions, args.messages, args.size, args.repeat) < 1:
        parser.error("every count must be at least 1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        info = cluster_local.up(Path(tmp) / "cluster", 3, timeout=60)
        try:
            bootstrap = info["bootstrap"]
            for r in range(args.repeat):
                topic = f"txn-bench-{r}"
                create_topic(bootstrap, topic)
                init, seconds, values = run(bootstrap, topic, args.transactions, args.messages, args.size)
                read = read_back(bootstrap, topic, len(values))
                counts = Counter(read)
                assert set(counts) == set(values) and max(counts.values()) == 1, "read back != committed"
                rows.append((init, seconds, len(values)))
                print(f"run {r}: init {init:.2f} s, {args.transactions} txns in {seconds:.2f} s", file=sys.stderr)
        finally:
            cluster_local.down(Path(tmp) / "cluster", timeout=20)
    print(f"\n{args.transactions} transactions × {args.messages} messages of {args.size} bytes, {args.repeat} runs\n")
    print("| run | init_transactions (s) | time (s) | transactions/s | messages/s | ms per transaction |")
    print("|---|---:|---:|---:|---:|---:|")
    for i, (init, seconds, n) in enumerate(rows):
        tps = args.transactions / seconds
        print(f"| {i} | {init:.2f} | {seconds:.2f} | {tps:.1f} | {n / seconds:,.0f} | {1000 / tps:.1f} |")
    median = statistics.median(args.transactions / s for _, s, _ in rows)
    print(f"\nMedian {median:.1f} transactions/s. Load average at the end: {os.getloadavg()[0]:.1f} (1 min).")


if __name__ == "__main__":
    main()
