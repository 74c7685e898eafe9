"""The simulator's Faults port: strobe clocks and packet faults (loss, delay, duplicate, reorder) on links."""

from __future__ import annotations

import random
from typing import Any

import pytest

from harness.core.spec import TestSpec
from harness.sim.cluster import SimPlan
from harness.sim.engine import MS, SECOND, Scheduler
from harness.sim.network import Network
from harness.sim.packets import Shaping
from harness.sim.runs import simulate
from harness.sim.runtime import SimRuntime

# ------------------------------------------------------------------ strobe


def test_strobe_flips_the_wall_clock_then_settles_on_its_offset() -> None:
    sim = SimRuntime(TestSpec(seed=3, nodes=3))
    node = sim.nodes[2]
    node.clock_offset = 7 * MS
    sim.faults.clock_strobe({"n2": {"delta-ms": 500, "period-ms": 100, "duration-s": 1}})
    seen = []
    for t in range(50, 1300, 100):  # between flips
        sim.sched.run_until(t * MS)
        seen.append(node.clock_offset // MS)
    assert seen[:10] == [507, 7] * 5  # ten flips of 100 ms
    assert seen[10:] == [7, 7, 7]  # then the offset it started from, and no more flips
    assert sim.nodes[1].clock_offset == 0


def test_reset_ends_a_strobe_and_a_new_strobe_flips_around_the_same_offset() -> None:
    sim = SimRuntime(TestSpec(seed=3, nodes=3))
    node = sim.nodes[1]
    sim.faults.clock_strobe({"n1": {"delta-ms": 40, "period-ms": 10, "duration-s": 10}})
    sim.sched.run_until(5 * MS)
    assert node.clock_offset == 40 * MS
    sim.faults.clock_strobe({"n1": {"delta-ms": 80, "period-ms": 10, "duration-s": 10}})  # mid-flip
    sim.sched.run_until(25 * MS)
    assert node.clock_offset == 80 * MS  # flips at 5, 15, 25 ms between 0 and 80, not around 40
    assert sim.faults.clock_reset(["n1", "n2"]) == ["n1"]
    sim.sched.run_until(200 * MS)
    assert node.clock_offset == 0


def test_a_run_with_strobes_is_recorded_and_deterministic() -> None:
    strobe = {"n1": {"delta-ms": 300, "period-ms": 50, "duration-s": 3}}
    events = [
        {"at": 2 * SECOND, "package": "clock", "f": "strobe-clock", "value": strobe},
        {"at": 4 * SECOND, "package": "clock", "f": "reset-clock", "value": None},
    ]
    spec, plan = TestSpec(seed=11, time_limit=8, nemeses=["clock"]), SimPlan(schedule=events)
    runs = [SimRuntime(spec, plan).run() for _ in (1, 2)]
    assert runs[0].stats["history-sha256"] == runs[1].stats["history-sha256"]
    nemesis = [(op.f, op.value) for op in runs[0].recorder.ops if op.process == "nemesis"]
    assert nemesis[0] == ("strobe-clock", strobe)
    assert nemesis[1][0] == "reset-clock"
    assert [f for f, _ in nemesis[2:]] == ["stop-partition", "resume", "start", "reset-clock"]


# ------------------------------------------------------------------ packets


def link(tcp: bool, behaviours: dict[str, Any], n: int = 400, gap_ms: float = 1.0) -> tuple[Network, list[tuple]]:
    """Send n numbered messages n1 → n2 (and n2 → n1, which no fault covers) under `behaviours`."""
    sched = Scheduler()
    net = Network(sched, random.Random("net"), tcp=tcp)
    net.shaping = Shaping(behaviours, ["n1"], ["n2", "n3"], random.Random("packets"))
    got: list[tuple] = []
    for i in range(n):
        sched.at(int(i * gap_ms * MS), net.send, "n1", "n2", lambda i=i, t=i: got.append(("n1", i, sched.now, t)))
        sched.at(int(i * gap_ms * MS), net.send, "n2", "n1", lambda i=i: got.append(("n2", i, sched.now, 0)))
    sched.run_until(600 * SECOND)
    return net, got


def shaped(got: list[tuple]) -> list[int]:
    return [i for src, i, _, _ in got if src == "n1"]


def untouched(got: list[tuple]) -> list[int]:
    return [i for src, i, _, _ in got if src == "n2"]


def test_no_behaviour_is_the_plain_link() -> None:
    for tcp in (True, False):
        _, got = link(tcp, {"delay": {"time-ms": 0, "jitter-ms": 0}})
        assert shaped(got) == untouched(got) == list(range(400))


def test_delay_adds_its_time_to_the_covered_links_only() -> None:
    _, got = link(True, {"delay": {"time-ms": 100, "jitter-ms": 10}})
    latency = {(src, i): at - i * MS for src, i, at, _ in got}
    assert all(latency[("n1", i)] >= 90 * MS for i in range(400))
    assert all(latency[("n2", i)] <= 6 * MS for i in range(400))  # the link's own 0.5–5 ms
    assert shaped(got) == list(range(400))  # TCP keeps the order


def test_loss_drops_on_datagram_links_and_delays_on_tcp_links() -> None:
    net, got = link(False, {"loss": {"percent": 25}})
    assert 60 < 400 - len(shaped(got)) < 140 and len(untouched(got)) == 400
    net, got = link(True, {"loss": {"percent": 25}})
    assert shaped(got) == list(range(400))  # retransmitted, in order
    late = [at - i * MS for src, i, at, _ in got if src == "n1" and at - i * MS >= 200 * MS]
    assert len(late) > 60 and net.dropped == 0


def test_duplicates_reach_a_datagram_receiver_twice_and_a_tcp_one_once() -> None:
    net, got = link(False, {"duplicate": {"percent": 30}})
    assert 80 < net.duplicated < 160 and len(shaped(got)) == 400 + net.duplicated
    assert sorted(set(shaped(got))) == list(range(400))
    net, got = link(True, {"duplicate": {"percent": 30}})
    assert shaped(got) == list(range(400))


def test_reorder_breaks_the_order_of_datagrams_only() -> None:
    _, got = link(False, {"reorder": {"percent": 30}})
    order = shaped(got)
    assert sorted(order) == list(range(400)) and order != list(range(400))
    assert untouched(got) == list(range(400))
    _, got = link(True, {"reorder": {"percent": 30}})
    assert shaped(got) == list(range(400))


@pytest.mark.parametrize("tcp", [True, False])
def test_packet_faults_are_deterministic(tcp: bool) -> None:
    behaviours = {"loss": {"percent": 10}, "delay": {"time-ms": 20, "jitter-ms": 20}, "duplicate": {"percent": 5}}
    assert link(tcp, behaviours)[1] == link(tcp, behaviours)[1]


def test_unknown_behaviour_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown packet behaviour.*corrupt"):
        Shaping({"corrupt": None}, ["n1"], ["n2"], random.Random(0))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_run_with_packet_faults_is_valid_and_deterministic(seed: int) -> None:
    spec = TestSpec(seed=seed, time_limit=20, interval=2.0, nemeses=["partition", "kill", "packet"])
    checked = simulate(spec)
    sim, a, b = checked.runtime, checked.sim, SimRuntime(spec).run()
    assert sim.net.shaped > 100  # the packet faults met real traffic
    assert a.stats["history-sha256"] == b.stats["history-sha256"]
    fs = [op.f for op in a.recorder.ops if op.process == "nemesis"]
    assert "start-packet" in fs
    assert fs[-5:] == ["stop-partition", "stop-packet", "resume", "start", "reset-clock"]  # heal: every package
    verdict = checked.results
    assert verdict["valid"] is True, verdict


def test_packet_faults_are_recorded_as_on_real_backends() -> None:
    """start-packet: behaviours with parameters filled in, nodes, peers, method; stop-packet: per sending node
    what the fault did (the counters `harness.real.faults.nfqueue.COUNTERS` the real backends record)."""
    from harness.real.faults.nfqueue import COUNTERS

    a = SimRuntime(TestSpec(seed=2, time_limit=20, interval=2.0, nemeses=("packet",))).run()
    ops = [op for op in a.recorder.ops if op.process == "nemesis"]
    starts = [op.value for op in ops if op.f == "start-packet"]
    stops = [op.value for op in ops if op.f == "stop-packet"]
    assert starts and len(stops) == len(starts) + 1 and stops[-1] == {}  # the final heal: nothing in force
    for start, stop in zip(starts, stops, strict=False):
        assert set(start) == {"behaviours", "nodes", "peers", "method"} and start["method"] == "sim"
        assert all("percent" in p or "time-ms" in p for p in start["behaviours"].values())
        assert set(stop) <= set(start["nodes"]) and all(list(c) == list(COUNTERS) for c in stop.values())
    assert sum(c["packets"] for stop in stops for c in stop.values()) > 100
