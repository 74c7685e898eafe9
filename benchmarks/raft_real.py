"""Real-process quorum figures: leader fail-over time after SIGKILL, KV throughput and latency.

Figures (issue "The quorum"):
- (a) time from SIGKILL of the leader until a surviving node leads a higher epoch ("elected"),
  and until a client write succeeds again ("writable"), p50/p99 over --kills kills, for the
  Kafka default timeouts and for the fast test timeouts;
- (b) KV throughput and latency (p50/p99) with N concurrent clients (one connection each,
  50/50 read/write over 16 keys) against a 3-node loopback cluster.

Every node is a ``python -m nodes`` process on 127.0.0.2-4 (or 127.0.0.1); data in a temp dir.
Usage: .venv/bin/python benchmarks/raft_real.py [--kills 20] [--seconds 5] [--clients 1,4,16,64]
Prints Markdown tables; copy them into benchmarks/RESULTS.md with the machine line.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.db.nodes import FAST_ELECTIONS as FAST  # noqa: E402
from harness.real.cluster_local import LocalCluster  # noqa: E402
from nodes.runtime.kvclient import KvClusterClient  # noqa: E402

DEFAULT = {
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.election.backoff.max.ms": "1000",
    "controller.quorum.request.timeout.ms": "1000",
    "controller.quorum.retry.backoff.ms": "20",
}


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


async def failover(props: dict[str, str], kills: int) -> tuple[list[float], list[float]]:
    """Seconds to a new leader and to the first successful write, per kill."""
    elected: list[float] = []
    writable: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kraftwerk-bench-") as tmp:
        cluster = LocalCluster(Path(tmp), 3, properties=props)
        try:
            cluster.start_all()
            async with KvClusterClient(cluster.addresses(), timeout=1.0) as kv:
                for i in range(kills):
                    leader, epoch = await cluster.wait_leader(30)
                    while (await kv.write("k", i)).type != "ok":
                        await asyncio.sleep(0.01)
                    started = time.monotonic()
                    cluster.kill(leader)
                    while True:
                        statuses = await cluster.statuses(timeout=0.2)
                        if any(s.get("role") == "leader" and s["epoch"] > epoch for s in statuses.values()):
                            break
                        await asyncio.sleep(0.005)
                    elected.append(time.monotonic() - started)
                    while (await kv.write("k", -i)).type != "ok":
                        pass
                    writable.append(time.monotonic() - started)
                    cluster.start(leader)
                    # let the restarted node rejoin before the next kill
                    for _ in range(400):
                        statuses = await cluster.statuses(timeout=0.2)
                        if len(statuses) == 3 and len({s.get("committed_end") for s in statuses.values()}) == 1:
                            break
                        await asyncio.sleep(0.025)
            cluster.terminate_all()
        finally:
            cluster.close()
    return elected, writable


async def throughput(n_clients: int, seconds: float) -> tuple[int, float, list[float], int]:
    """(ok ops, elapsed s, ok latencies in ms, non-ok results) for ``n_clients`` closed-loop clients."""
    with tempfile.TemporaryDirectory(prefix="kraftwerk-bench-") as tmp:
        cluster = LocalCluster(Path(tmp), 3, properties=DEFAULT)
        try:
            cluster.start_all()
            await cluster.wait_leader(30)
            addresses = cluster.addresses()
            latencies: list[float] = []
            errors = 0
            stop = time.monotonic() + seconds

            async def worker(seed: int) -> None:
                nonlocal errors
                rng = random.Random(seed)
                async with KvClusterClient(addresses, timeout=5.0, rng=random.Random(seed)) as kv:
                    while (await kv.read("warm-up")).type != "ok":
                        await asyncio.sleep(0.01)
                    await barrier.wait()
                    while time.monotonic() < stop:
                        key = f"k{rng.randrange(16)}"
                        t0 = time.perf_counter()
                        if rng.random() < 0.5:
                            result = await kv.read(key)
                        else:
                            result = await kv.write(key, rng.randrange(1000))
                        if result.type == "ok":
                            latencies.append((time.perf_counter() - t0) * 1000)
                        else:
                            errors += 1

            barrier = asyncio.Barrier(n_clients + 1)
            tasks = [asyncio.create_task(worker(i)) for i in range(n_clients)]
            await barrier.wait()
            began = time.monotonic()
            stop = began + seconds
            await asyncio.gather(*tasks)
            elapsed = time.monotonic() - began
            cluster.terminate_all()
        finally:
            cluster.close()
    return len(latencies), elapsed, latencies, errors


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", default="1,4,16,64")
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    print(
        f"machine: {platform.node()} — {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.platform()}"
    )
    if not args.skip_failover:
        print()
        print("| leader SIGKILL → | timeouts (election / fetch ms) | kills | p50 (s) | p99 (s) | max (s) |")
        print("|---|---|---|---|---|---|")
        for label, props in (("Kafka defaults", DEFAULT), ("test profile", FAST)):
            elected, writable = await failover(props, args.kills)
            timeouts = (
                f"{label}: {props['controller.quorum.election.timeout.ms']} / "
                f"{props['controller.quorum.fetch.timeout.ms']}"
            )
            for what, values in (("new leader elected", elected), ("first write ok", writable)):
                print(
                    f"| {what} | {timeouts} | {len(values)} | {pct(values, 50):.3f} | {pct(values, 99):.3f} "
                    f"| {max(values):.3f} |",
                    flush=True,
                )
    if not args.skip_throughput:
        print()
        print("| clients | ops/s | p50 latency (ms) | p99 latency (ms) | non-ok |")
        print("|---|---|---|---|---|")
        for n in (int(x) for x in args.clients.split(",")):
            ok, elapsed, lat, errors = await throughput(n, args.seconds)
            print(
                f"| {n} | {ok / elapsed:,.0f} | {pct(lat, 50):.2f} | {pct(lat, 99):.2f} | {errors} |",
                flush=True,
            )


if __name__ == "__main__":
    asyncio.run(main())
