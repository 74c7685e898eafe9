"""Unit tests of the simulator's parts: clock/heap, network, disk, clocks, partitions, schedules."""

from __future__ import annotations

import random

import pytest

from harness.nemesis import partitions
from harness.nemesis.schedule import generate, parse_nemeses, parse_partition_kinds
from harness.sim.disk import Disk
from harness.sim.engine import MS, Scheduler
from harness.sim.network import Network


def test_scheduler_orders_by_time_then_insertion() -> None:
    s = Scheduler()
    seen: list[str] = []
    s.at(5, seen.append, "b")
    s.at(5, seen.append, "c")
    s.at(1, seen.append, "a")
    s.at(10, seen.append, "late")
    s.run_until(5)
    assert seen == ["a", "b", "c"] and s.now == 5
    s.run_until(20)
    assert seen[-1] == "late"


def test_network_fifo_partitions_and_one_way() -> None:
    s = Scheduler()
    net = Network(s, random.Random(1), latency_ms=(0.1, 9.0))
    got: list[int] = []
    for i in range(50):
        net.send("n1", "n2", got.append, i)
    s.run_until(10**12)
    assert got == list(range(50)), "a link delivers in order"
    net.partition({"n2": ["n1"]})  # n2 drops packets from n1 only
    back: list[str] = []
    net.send("n1", "n2", back.append, "to-n2")
    net.send("n2", "n1", back.append, "to-n1")
    net.send("n1", "n2", back.append, "client", partitionable=False)
    s.run_until(2 * 10**12)
    assert sorted(back) == ["client", "to-n1"]
    net.heal()
    net.send("n1", "n2", back.append, "healed")
    s.run_until(3 * 10**12)
    assert back[-1] == "healed"


def test_partition_checked_on_arrival() -> None:
    s = Scheduler()
    net = Network(s, random.Random(2), latency_ms=(5.0, 5.0))
    got: list[str] = []
    net.send("n1", "n2", got.append, "in flight")
    s.at(1 * MS, net.partition, {"n2": ["n1"]})
    s.run_until(10 * MS)
    assert got == []


def test_tcp_link_holds_a_message_across_a_short_partition() -> None:
    """A message that meets a partition arrives at the first retransmission after the heal: 200 ms after it
    first arrived, then twice as long each time (0.2 s, 0.6 s, 1.4 s …), as Linux retransmits."""
    s = Scheduler()
    net = Network(s, random.Random(3), latency_ms=(1.0, 1.0))
    got: list[tuple[str, int]] = []

    def arrive(what: str) -> None:
        got.append((what, s.now))

    def send(what: str) -> None:
        net.send("n1", "n2", arrive, what, hold=3000 * MS)

    net.partition({"n2": ["n1"]})
    send("first")
    s.at(100 * MS, send, "behind it")
    s.at(500 * MS, net.heal)  # after the first retransmission (201 ms), before the second (601 ms)
    s.at(550 * MS, send, "after the heal")
    s.run_until(5000 * MS)
    # one connection: what was sent after the heal still waits behind the retransmitted messages
    assert got == [("first", 601 * MS), ("behind it", 601 * MS), ("after the heal", 601 * MS)]
    assert net.dropped == 0 and net.retransmitted == 2


def test_tcp_link_loses_what_the_sender_gave_up_and_what_a_crash_reset() -> None:
    s = Scheduler()
    net = Network(s, random.Random(4), latency_ms=(1.0, 1.0))
    got: list[str] = []
    net.partition({"n2": ["n1"], "n3": ["n1"]})
    net.send("n1", "n2", got.append, "timed out", hold=1000 * MS)  # retransmitted at 0.2, 0.6, 1.4 s
    net.send("n1", "n2", got.append, "still wanted", hold=3000 * MS)
    net.send("n1", "n3", got.append, "to a node that crashes", hold=3000 * MS)
    s.at(1200 * MS, net.heal)
    s.at(300 * MS, net.reset, "n3")
    s.run_until(5000 * MS)
    assert got == ["still wanted"]
    assert net.dropped == 2


def test_datagram_links_lose_a_message_at_a_partition() -> None:
    s = Scheduler()
    net = Network(s, random.Random(5), latency_ms=(1.0, 1.0), tcp=False)
    got: list[str] = []
    net.partition({"n2": ["n1"]})
    net.send("n1", "n2", got.append, "lost", hold=3000 * MS)
    s.at(100 * MS, net.heal)
    s.run_until(5000 * MS)
    assert got == [] and net.dropped == 1 and net.retransmitted == 0


def test_disk_loses_unflushed_writes_on_crash() -> None:
    d = Disk()
    d.append(("r0", "r1"))
    d.flush()
    d.append(("r2",))
    d.truncate(1)
    d.append(("x1", "x2"))
    assert d.view == ["r0", "x1", "x2"]
    d.crash()
    assert d.view == ["r0", "r1"] == d.recovered_log()
    d.truncate(1)
    d.flush()
    d.crash()
    assert d.recovered_log() == ["r0"]


NODES = ["n1", "n2", "n3", "n4", "n5"]


@pytest.mark.parametrize("kind", ["halves", "one", "majorities-ring", "bridge"])
def test_partition_shapes_are_symmetric(kind: str) -> None:
    g = partitions.make(kind, NODES, random.Random(3))
    for a, blocked in g.items():
        for b in blocked:
            assert a in g.get(b, []), (kind, a, b)


def test_majorities_ring_each_node_sees_a_distinct_majority() -> None:
    g = partitions.majorities_ring(NODES, random.Random(4))
    views = [frozenset(n for n in NODES if n not in g[node]) for node in NODES]
    assert all(len(v) == 3 for v in views)
    assert len(set(views)) == 5


def test_bridge_and_one_way() -> None:
    g = partitions.bridge(NODES, random.Random(5))
    [middle] = [n for n, blocked in g.items() if not blocked]
    assert all(middle not in blocked for blocked in g.values())
    g = partitions.one_way(NODES, random.Random(6))
    [(victim, blocked)] = g.items()
    assert sorted(blocked) == sorted(n for n in NODES if n != victim)


def test_schedules_are_seeded_and_alternate() -> None:
    a = generate(7, NODES, ["partition", "kill", "pause", "clock"], 60)
    assert a == generate(7, NODES, ["partition", "kill", "pause", "clock"], 60)
    assert a != generate(8, NODES, ["partition", "kill", "pause", "clock"], 60)
    assert [e["at"] for e in a] == sorted(e["at"] for e in a)
    for package in ("partition", "kill", "pause", "clock"):
        fs = [e["f"] for e in a if e["package"] == package]
        assert fs and all(f != fs[i + 1] for i, f in enumerate(fs[:-1])), fs


def test_parse_nemeses() -> None:
    assert parse_nemeses("partition,kill") == ["partition", "kill"]
    assert parse_nemeses("none") == [] and parse_nemeses("all") == ["partition", "kill", "pause", "clock"]
    assert parse_nemeses("packet,kill") == ["packet", "kill"]  # asked for by name, not part of all
    with pytest.raises(ValueError, match="unknown nemesis bogus"):
        parse_nemeses("partition,bogus")


def test_partition_kinds_restrict_the_schedule() -> None:
    assert parse_partition_kinds("leader, one,leader") == ("leader", "one")
    assert parse_partition_kinds("all") == partitions.KINDS
    with pytest.raises(ValueError, match="unknown partition kind ring"):
        parse_partition_kinds("halves,ring")
    default = generate(7, NODES, ["partition"], 120)
    assert default == generate(7, NODES, ["partition"], 120, partition_kinds=partitions.KINDS)
    only = generate(7, NODES, ["partition"], 120, partition_kinds=("leader", "one"))
    starts = [e["value"] for e in only if e["value"]]
    assert {v["kind"] for v in starts} == {"leader", "one"}
    assert all("grudge" not in v for v in starts if v["kind"] == "leader")  # resolved when it fires
