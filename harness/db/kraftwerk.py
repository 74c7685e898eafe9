"""Our KRaft-style nodes as a registered DB (harness.db.registry): their options, what they can do, their factory.

Light on purpose (the simulator reads these options too): the real-cluster DB, `harness.db.nodes.NodeDB`,
is imported only when a real run builds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.argtypes import non_negative_int
from harness.db.registry import DBContext, DBKind
from harness.nemesis.schedule import PACKAGES
from nodes.raft import bugs as node_bugs
from nodes.runtime.config import CLOCK_SOURCES
from workloads.options import option


@dataclass(frozen=True)
class NodesOptions:
    """The options only our nodes understand (`{"kraftwerk": {...}}` in test.json)."""

    lose_unsynced: bool = option(
        False,
        "--lose-unsynced",
        "real backends: nodes keep log appends in the process until they fsync them, so a kill loses "
        "unsynced writes as a power loss would (Jepsen's lazyfs idea); the simulator's disk always does",
    )
    fsync_delay: int = option(
        0,
        "--fsync-delay",
        "nodes wait MS milliseconds before each fsync of their logs (a slow disk; in the simulator, on top of "
        "its 1-10 ms); with --lose-unsynced a kill in that window loses appends the followers already hold",
        key="fsync-delay-ms",
        parse=non_negative_int,
        metavar="MS",
    )
    clock_source: str = option(
        "wall",
        "--clock-source",
        "the clock the nodes' timers read (node setting clock.source): wall (as Kafka's Time.milliseconds(), "
        "so clock faults move elections, sessions and timeouts) or monotonic",
        choices=CLOCK_SOURCES,
    )
    lease_reads: bool = option(
        False,
        "--lease-reads",
        "leader leases: the leader answers register reads from its state, without a log round trip, while "
        "its lease lasts (the election timeout less a drift margin, on the monotonic clock, from the last fetch "
        "round a majority acknowledged); off by default. The seeded bug lease-wall-clock turns them on",
    )

    def problem(self) -> str | None:
        if self.fsync_delay < 0:
            return f"--fsync-delay must be 0 or more, got {self.fsync_delay}"
        if self.clock_source not in CLOCK_SOURCES:
            return f"--clock-source must be one of {', '.join(CLOCK_SOURCES)}, got {self.clock_source!r}"
        return None

    def properties(self) -> dict[str, str]:
        """The node.properties settings these options make."""
        return {
            **({"kraftwerk.volatile.writes": "true"} if self.lose_unsynced else {}),
            **({"kraftwerk.fsync.delay.ms": str(self.fsync_delay)} if self.fsync_delay else {}),
            "clock.source": self.clock_source,
            **({"kraftwerk.lease.reads": "true"} if self.lease_reads else {}),
        }


def _parts() -> dict[str, str]:
    """{seeded bug: the part of the nodes it lives in} (nodes/raft/bugs.py)."""
    parts = {
        "raft": node_bugs.RAFT_BUGS,
        "kv": node_bugs.KV_BUGS,
        "broker": node_bugs.BROKER_BUGS,
        "group": node_bugs.GROUP_BUGS,
        "txn": node_bugs.TXN_BUGS,
        "storage": node_bugs.STORAGE_BUGS,
    }
    found = {bug: part for part, bugs in parts.items() for bug in sorted(bugs)}
    if "dedup-window-1" in found:
        found["dedup-window-1"] = "idempotence"  # the producer-id dedup window, a broker bug of its own kind
    return found


def build(ctx: DBContext) -> Any:
    """Our nodes on the run's hosts; brokers too for a workload that speaks Kafka (clients on the client
    listener, topic defaults from the workload's options)."""
    from harness.db.nodes import NodeDB, broker_properties

    brokers = ctx.workload.api == "kafka"
    return NodeDB(
        ctx.hosts,
        bugs=list(ctx.bugs),
        seed=ctx.seed,
        ports=ctx.ports,
        listen_any=ctx.listen_any,
        broker=brokers,
        shape=ctx.shape,
        properties={**(broker_properties(ctx.workload.options()) if brokers else {}), **ctx.options.properties()},
    )


KIND = DBKind(
    name="kraftwerk",
    summary="our KRaft-style nodes (register and queue workloads, seeded bugs, every backend and fault)",
    options=NodesOptions,
    backends=("docker", "netns", "ssh", "local", "sim"),
    apis=("kv", "kafka"),
    nemeses=PACKAGES,
    bugs=_parts(),
    ports=2,  # (controller, client)
    factory=build,
)
