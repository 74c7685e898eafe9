"""Broker figures with kafka-python (issue "The broker"): produce throughput and latency.

A 3-node loopback cluster (``kraftwerk cluster up --backend local``: ``python -m nodes`` processes
on 127.0.0.2-4), one topic per case with one partition and replication factor 3, values of
--size bytes, kafka-python 3.x with ``enable_idempotence=False`` (``--idempotence on|both``: acks=all
also, or only, with the idempotent producer, kafka-python's default). Cases:

* **batched**: ``linger_ms`` 5, ``batch_size`` 64 KiB, --messages asynchronous sends, then flush;
  throughput = messages / (first send to last acknowledgement);
* **unbatched**: ``linger_ms`` 0, one message at a time (send, wait for the acknowledgement,
  next), --unbatched messages; throughput = messages / elapsed.

Latency is per message, from ``send()`` to its acknowledgement (for acks=1 once the leader has
it; for acks=all once every in-sync replica has fsynced it), p50/p99. Each case is preceded by a
short warm-up and run --repeat times; the table gives the median run (by throughput) and the best
throughput. CPU columns: CPU seconds per message of the client process and of the three nodes
together (psutil), to show where the time goes. Consumption is checked: every acknowledged
value is read back.

Usage: .venv/bin/python benchmarks/broker.py [--messages 50000] [--unbatched 2000] [--size 100]
       [--repeat 3] [--idempotence off|on|both] [--profile DIR]
       (--profile: run the nodes under cProfile, one file per node)
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402

from harness.real import cluster_local  # noqa: E402


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def create_topic(bootstrap: str, name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(name, 1, 3)])
    finally:
        admin.close()


def producer(bootstrap: str, acks: Any, batched: bool, idempotent: bool = False) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=bootstrap,
        acks=acks,
        enable_idempotence=idempotent,
        linger_ms=5 if batched else 0,
        batch_size=64 * 1024 if batched else 16 * 1024,
        max_in_flight_requests_per_connection=5,
        request_timeout_ms=30000,
        retries=5,
    )


def run_batched(p: KafkaProducer, topic: str, n: int, size: int, tag: str) -> tuple[float, list[float]]:
    latencies: list[float] = []
    errors: list[BaseException] = []
    pad = b"x" * max(0, size - 16)

    def done(sent: float) -> Any:
        return lambda _md: latencies.append(time.perf_counter() - sent)

    start = time.perf_counter()
    for i in range(n):
        now = time.perf_counter()
        future = p.send(topic, f"{tag}{i:010d}".encode() + pad)
        future.add_callback(done(now))
        future.add_errback(errors.append)
    p.flush(120)
    elapsed = time.perf_counter() - start
    if errors or len(latencies) != n:
        raise SystemExit(f"{tag}: {len(errors)} error(s), {len(latencies)}/{n} acknowledged: {errors[:3]}")
    return n / elapsed, latencies


def run_unbatched(p: KafkaProducer, topic: str, n: int, size: int, tag: str) -> tuple[float, list[float]]:
    latencies = []
    pad = b"x" * max(0, size - 16)
    start = time.perf_counter()
    for i in range(n):
        sent = time.perf_counter()
        p.send(topic, f"{tag}{i:010d}".encode() + pad).get(30)
        latencies.append(time.perf_counter() - sent)
    return n / (time.perf_counter() - start), latencies


def read_back(bootstrap: str, topic: str, expected: int) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, consumer_timeout_ms=5000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    count = 0
    deadline = time.monotonic() + 120
    while count < expected and time.monotonic() < deadline:
        for records in consumer.poll(1000, max_records=100_000).values():
            count += len(records)
    consumer.close()
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=50_000, help="messages per batched case")
    parser.add_argument("--unbatched", type=int, default=2_000, help="messages per unbatched case")
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (median and best are reported)")
    parser.add_argument("--profile", type=Path, default=None, help="profile the nodes (cProfile) into DIR")
    parser.add_argument(
        "--idempotence",
        choices=["off", "on", "both"],
        default="off",
        help="acks=all cases with the idempotent producer: off (default), on, or both side by side",
    )
    args = parser.parse_args()
    cases = [(1, False)]
    if args.idempotence in ("off", "both"):
        cases.append(("all", False))
    if args.idempotence in ("on", "both"):
        cases.append(("all", True))
    logging.basicConfig(level=logging.ERROR)

    with tempfile.TemporaryDirectory(prefix="kraftwerk-bench-broker-") as tmp:
        python = sys.executable
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
            wrapper = Path(tmp) / "python-profiled"
            wrapper.write_text(
                f'#!/bin/sh\nexec {sys.executable} -m cProfile -o "{args.profile.resolve()}/node-$$.prof" "$@"\n'
            )
            wrapper.chmod(0o755)
            python = str(wrapper)
        info = cluster_local.up(Path(tmp) / "cluster", 3, python=python, timeout=60)
        bootstrap = info["bootstrap"]
        pids = cluster_local.LocalCluster.attach(Path(tmp) / "cluster").pids()
        nodes = [psutil.Process(pid) for pid in pids.values()]
        me = psutil.Process()

        def cpu() -> tuple[float, float]:
            own = me.cpu_times()
            return own.user + own.system, sum(p.cpu_times().user + p.cpu_times().system for p in nodes)

        rows = []
        try:
            for acks, idempotent in cases:
                for batched in (True, False):
                    topic = f"bench-{acks}-{'b' if batched else 'u'}{'-idem' if idempotent else ''}"
                    create_topic(bootstrap, topic)
                    p = producer(bootstrap, acks, batched, idempotent)
                    run = run_batched if batched else run_unbatched
                    warm = 2000 if batched else 100
                    run(p, topic, warm, args.size, "w")
                    n = args.messages if batched else args.unbatched
                    runs = []
                    for r in range(args.repeat):
                        client0, nodes0 = cpu()
                        rate, lat = run(p, topic, n, args.size, f"m{r}-")
                        client1, nodes1 = cpu()
                        runs.append((rate, lat, (client1 - client0) / n, (nodes1 - nodes0) / n))
                    p.close(10)
                    total = warm + n * args.repeat
                    got = read_back(bootstrap, topic, total)
                    if got < total:
                        raise SystemExit(f"{topic}: read back {got} of {total} acknowledged values")
                    runs.sort(key=lambda run: run[0])
                    rate, lat, client_cpu, nodes_cpu = runs[len(runs) // 2]
                    best = runs[-1][0]
                    p50, p99 = pct(lat, 50) * 1e3, pct(lat, 99) * 1e3
                    rows.append((acks, idempotent, batched, n, rate, best, p50, p99, client_cpu, nodes_cpu))
                    print(f"  {topic}: {[f'{r[0]:,.0f}' for r in runs]} msg/s", file=sys.stderr, flush=True)
        finally:
            cluster_local.down(Path(tmp) / "cluster", timeout=20)

    print(
        f"\nMachine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; 3 nodes on loopback, {args.size}-byte values, kafka-python\n"
    )
    print(
        "| acks | idempotent | mode | messages | throughput, median (msg/s) | best (msg/s) | latency p50 (ms) "
        "| latency p99 (ms) | client CPU (µs/msg) | nodes CPU (µs/msg) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for acks, idempotent, batched, n, rate, best, p50, p99, client_cpu, nodes_cpu in rows:
        mode = "batched (linger 5 ms, 64 KiB)" if batched else "unbatched (one at a time)"
        print(
            f"| {acks} | {'yes' if idempotent else 'no'} | {mode} | {n:,} | {rate:,.0f} | {best:,.0f} "
            f"| {p50:.1f} | {p99:.1f} "
            f"| {client_cpu * 1e6:.0f} | {nodes_cpu * 1e6:.0f} |"
        )
    print(f"\nLoad average during the run: {os.getloadavg()[0]:.1f} (1 min).")


if __name__ == "__main__":
    main()
