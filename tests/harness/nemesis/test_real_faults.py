"""Real faults on real hosts (netns and docker): partitions block TCP, clocks move, kill/pause stop, loss drops."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from harness.nemesis import partitions
from harness.real.backends.base import Host
from harness.real.faults import RealNemesis
from harness.real.faults.net import CHAIN, PACKET_CHAIN
from tests.harness.real.backends import clusters


@pytest.fixture(scope="module", params=clusters.BACKENDS)
def rig(request: pytest.FixtureRequest) -> Iterator[tuple[list[Host], RealNemesis]]:
    """Three hosts running the probe daemon under libfaketime, and a nemesis over them."""
    kind = request.param
    if kind == "netns":
        clusters.need_root()
        clusters.need_faketime()
    image = request.getfixturevalue("node_image") if kind == "docker" else None
    with clusters.cluster(kind, 3, image) as (_backend, hosts):
        nemesis = RealNemesis(hosts, daemons=lambda h: clusters.probe_spec(h, nemesis.clock.env(h)))
        with nemesis:
            for h in hosts:
                clusters.start_probe(h, nemesis.clock.env(h))
            yield hosts, nemesis


@pytest.fixture
def cluster(rig: tuple[list[Host], RealNemesis]) -> Iterator[tuple[list[Host], RealNemesis]]:
    hosts, nemesis = rig
    yield hosts, nemesis
    nemesis.heal_all()
    for h in hosts:
        clusters.wait_for(lambda h=h: clusters.echoes(h, h), what=f"{h.name} healthy after heal")


def test_partition_blocks_tcp_and_heals(cluster: tuple[list[Host], RealNemesis]) -> None:
    hosts, nemesis = cluster
    n1, n2, n3 = hosts
    grudge = partitions.complete([["n1"], ["n2", "n3"]])
    applied = nemesis.invoke({"f": "start-partition", "value": {"kind": "one", "grudge": grudge}})
    assert applied == {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}
    assert nemesis.partition.rules("n1") == [
        f"-A {CHAIN} -s {n2.address}/32 -j DROP",
        f"-A {CHAIN} -s {n3.address}/32 -j DROP",
    ]
    assert not clusters.can_connect(n2, n1) and not clusters.can_connect(n1, n3)
    assert clusters.echoes(n2, n3) and clusters.echoes(n3, n2)
    assert nemesis.describe()["components"] == [["n1"], ["n2", "n3"]]
    nemesis.invoke({"f": "stop-partition", "value": None})
    assert nemesis.partition.rules("n1") == []
    assert clusters.echoes(n2, n1) and clusters.echoes(n1, n3)


def test_one_way_partition_cuts_only_the_receiver(cluster: tuple[list[Host], RealNemesis]) -> None:
    hosts, nemesis = cluster
    n1, n2, n3 = hosts
    nemesis.partition.start({"n1": ["n2"]})  # n1 drops what n2 sends; nobody else is affected
    assert nemesis.partition.rules("n2") == [] and len(nemesis.partition.rules("n1")) == 1
    assert not clusters.can_connect(n2, n1)
    assert clusters.echoes(n3, n1) and clusters.echoes(n2, n3)
    assert nemesis.describe()["one-way"] == [["n1", "n2"]]


def test_partition_cuts_established_connections(cluster: tuple[list[Host], RealNemesis]) -> None:
    hosts, nemesis = cluster
    n1, n2, _ = hosts
    code = (
        "import socket, sys, time\n"
        f"s = socket.create_connection(({n1.address!r}, {clusters.PORT}), 1)\n"
        "s.settimeout(1)\n"
        "s.sendall(b'a'); assert s.recv(1) == b'a'\n"
        "print('connected', flush=True)\n"
        "time.sleep(1.5)\n"
        "try:\n"
        "    s.sendall(b'b'); s.recv(1); print('still-open')\n"
        "except OSError:\n"
        "    print('cut')\n"
    )
    import threading

    box: dict[str, str] = {}
    t = threading.Thread(target=lambda: box.update(out=n2.control.run([n2.python, "-c", code], timeout=20).stdout))
    t.start()
    time.sleep(0.8)  # the connection is open by now
    nemesis.partition.start({"n1": ["n2"], "n2": ["n1"]})
    t.join(30)
    assert box["out"].split() == ["connected", "cut"]


def test_clock_bump_moves_wall_clock_of_running_process(cluster: tuple[list[Host], RealNemesis]) -> None:
    hosts, nemesis = cluster
    n1, n2, _ = hosts
    assert abs(clusters.fresh_clock_skew(n1)) < 0.05
    nemesis.invoke({"f": "bump-clock", "value": {"n1": {"delta-ms": 5000, "drift-ppm": 0}}})
    assert clusters.fresh_clock_skew(n1) == pytest.approx(5.0, abs=0.05)
    assert abs(clusters.fresh_clock_skew(n2)) < 0.05
    nemesis.clock.bump({"n1": -7250})  # cumulative, and negative
    assert clusters.fresh_clock_skew(n1) == pytest.approx(-2.25, abs=0.05)
    offsets = nemesis.clock.check_offsets()
    assert offsets["n1"] == pytest.approx(-2250, abs=30) and abs(offsets["n2"]) < 30
    assert nemesis.invoke({"f": "reset-clock", "value": None}) == ["n1"]
    assert abs(clusters.fresh_clock_skew(n1)) < 0.05


def test_clock_drift_changes_rate(cluster: tuple[list[Host], RealNemesis]) -> None:
    hosts, nemesis = cluster
    n1 = hosts[0]
    nemesis.clock.drift({"n1": 200_000})  # 20% fast
    first = clusters.fresh_clock_skew(n1)
    time.sleep(1.0)
    second = clusters.fresh_clock_skew(n1)
    assert second - first == pytest.approx(0.2, abs=0.06)


def test_clock_strobe_flips_then_settles(cluster: tuple[list[Host], RealNemesis]) -> None:
    hosts, nemesis = cluster
    n2 = hosts[1]
    nemesis.invoke({"f": "strobe-clock", "value": {"n2": {"delta-ms": 3000, "period-ms": 150, "duration-s": 1.5}}})
    seen = set()
    deadline = time.monotonic() + 1.2
    while time.monotonic() < deadline:
        seen.add(round(clusters.clock_skew(n2)))
        time.sleep(0.04)
    assert {0, 3} <= seen
    time.sleep(1.0)
    assert abs(clusters.fresh_clock_skew(n2)) < 0.05


def test_kill_and_restart(cluster: tuple[list[Host], RealNemesis]) -> None:
    hosts, nemesis = cluster
    n1, n2, _ = hosts
    pid = n2.control.daemon_status(clusters.probe_spec(n2).pidfile).pid
    assert nemesis.invoke({"f": "kill", "value": ["n2"]}) == ["n2"]
    assert not n2.control.daemon_status(clusters.probe_spec(n2).pidfile).running
    assert not clusters.can_connect(n1, n2)
    assert nemesis.invoke({"f": "start", "value": None}) == ["n2"]
    clusters.wait_for(lambda: clusters.echoes(n1, n2), what="restarted probe")
    assert n2.control.daemon_status(clusters.probe_spec(n2).pidfile).pid != pid


def test_pause_and_resume(cluster: tuple[list[Host], RealNemesis]) -> None:
    hosts, nemesis = cluster
    n1, _, n3 = hosts
    assert nemesis.invoke({"f": "pause", "value": "leader"}) == []  # no leader known: nobody (as in the simulator)
    assert not any(h.control.daemon_status(clusters.probe_spec(h).pidfile).paused for h in hosts)
    nemesis.leader = lambda: "n3"
    try:
        assert nemesis.invoke({"f": "pause", "value": "leader"}) == ["n3"]
    finally:
        nemesis.leader = None
    assert n3.control.daemon_status(clusters.probe_spec(n3).pidfile).paused
    assert not clusters.echoes(n1, n3, timeout=0.7)
    assert nemesis.invoke({"f": "resume", "value": None}) == ["n3"]
    assert clusters.echoes(n1, n3)


def test_packet_loss_drops_and_stops(cluster: tuple[list[Host], RealNemesis]) -> None:
    hosts, nemesis = cluster
    n1, n2, n3 = hosts
    done = nemesis.packet.start({"loss": {"percent": 100}}, nodes=["n1"], peers=["n2"])
    assert done["nodes"] == ["n1"]
    assert not clusters.can_connect(n2, n1)  # n1's SYN-ACKs to n2 are lost
    assert clusters.echoes(n3, n1)
    stopped = nemesis.invoke({"f": "stop-packet", "value": None})
    assert set(stopped) == {"n1"} and stopped["n1"]["lost"] == stopped["n1"]["packets"] > 0
    assert clusters.echoes(n2, n1)


def test_packet_delay_adds_latency(cluster: tuple[list[Host], RealNemesis]) -> None:
    """netem where the kernel has it, else the NFQUEUE shaper: either way n1's packets to n2 wait 200 ms."""
    hosts, nemesis = cluster
    n1, n2, _ = hosts
    code = (
        "import socket, time\n"
        f"s = socket.create_connection(({n1.address!r}, {clusters.PORT}), 5)\n"
        "best = 9.0\n"
        "for _ in range(5):\n"
        "    t = time.monotonic(); s.sendall(b'x'); s.recv(1); best = min(best, time.monotonic() - t)\n"
        "print(best)\n"
    )
    base = float(n2.control.sh([n2.python, "-c", code]))
    done = nemesis.packet.start({"delay": {"time-ms": 200, "jitter-ms": 0}}, nodes=["n1"])
    assert done["method"] == ("netem" if nemesis.packet.netem_supported() else "nfqueue")
    delayed = float(n2.control.sh([n2.python, "-c", code], timeout=60))
    assert delayed - base == pytest.approx(0.2, abs=0.05)
    stopped = nemesis.packet.stop()
    assert stopped["n1"]["packets"] >= 5
    if done["method"] == "nfqueue":
        assert (
            stopped["n1"]["delayed"] >= 5
            and not n1.control.daemon_status(f"{n1.workdir}/kraftwerk-nfqueue.pid").running
        )
    assert clusters.echoes(n2, n1)


def _tcp_counters(h: Host) -> dict[str, int]:
    """The host's TCP counters (/proc/net/snmp Tcp and /proc/net/netstat TcpExt, its own network namespace)."""
    out: dict[str, int] = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        lines = [line.split() for line in h.control.sh(["cat", path]).splitlines()]
        for keys, values in zip(lines[::2], lines[1::2], strict=False):
            if keys[0] in ("Tcp:", "TcpExt:"):
                out.update({k: int(v) for k, v in zip(keys[1:], values[1:], strict=False)})
    return out


def test_packet_loss_duplication_and_reordering_reach_tcp(cluster: tuple[list[Host], RealNemesis]) -> None:
    """What n2 sends n1 is lost, duplicated and reordered: n2's TCP retransmits, n1's sees segments it already
    has (D-SACKs sent) and segments out of order (its out-of-order queue)."""
    hosts, nemesis = cluster
    n1, n2, _ = hosts
    bulk = (
        "import socket\n"
        f"s = socket.create_connection(({n1.address!r}, {clusters.PORT}), 5)\n"
        "for _ in range(30):\n"
        "    s.sendall(b'x' * 40000); n = 0\n"
        "    while n < 40000:\n"
        "        n += len(s.recv(65536))\n"
    )
    sender, receiver = _tcp_counters(n2), _tcp_counters(n1)
    behaviours = {"loss": {"percent": 5}, "duplicate": {"percent": 30}, "reorder": {"percent": 30}}
    nemesis.packet.start(behaviours, nodes=["n2"], peers=["n1"])
    n2.control.sh([n2.python, "-c", bulk], timeout=120)
    done = nemesis.invoke({"f": "stop-packet", "value": None})["n2"]
    sent, got = _tcp_counters(n2), _tcp_counters(n1)
    assert done["lost"] > 0, done
    if "duplicated" in done:  # the NFQUEUE shaper counts them (netem does not)
        assert done["duplicated"] > 20 and done["reordered"] > 20, done
    assert sent["RetransSegs"] > sender["RetransSegs"]
    assert got["TCPDSACKOldSent"] > receiver["TCPDSACKOldSent"]
    assert got["TCPOFOQueue"] > receiver["TCPOFOQueue"]


def test_unknown_fault_is_refused(cluster: tuple[list[Host], RealNemesis]) -> None:
    _, nemesis = cluster
    with pytest.raises(ValueError, match="unknown nemesis op"):
        nemesis.invoke({"f": "flood", "value": None})
    with pytest.raises(ValueError, match="unknown node"):
        nemesis.partition.start({"n9": ["n1"]})


@pytest.mark.parametrize("kind", clusters.BACKENDS)
def test_teardown_removes_every_trace(kind: str, request: pytest.FixtureRequest) -> None:
    if kind == "netns":
        clusters.need_root()
        clusters.need_faketime()
    image = request.getfixturevalue("node_image") if kind == "docker" else None
    with clusters.cluster(kind, 2, image) as (_backend, hosts):
        nemesis = RealNemesis(hosts, daemons=lambda h: clusters.probe_spec(h, nemesis.clock.env(h)))
        with nemesis:
            for h in hosts:
                clusters.start_probe(h, nemesis.clock.env(h))
            nemesis.invoke({"f": "start-partition", "value": {"grudge": {"n1": ["n2"]}}})
            nemesis.invoke({"f": "bump-clock", "value": {"n1": {"delta-ms": 1000}}})
            nemesis.invoke({"f": "strobe-clock", "value": {"n2": {"delta-ms": 100, "period-ms": 50, "duration-s": 60}}})
            nemesis.invoke({"f": "start-packet", "value": {"behaviours": {"loss": {"percent": 30}, "delay": None}}})
            nemesis.invoke({"f": "pause", "value": ["n2"]})
            assert "KRAFTWERK" in hosts[0].control.sh("iptables -w -S")
        for h in hosts:
            rules = h.control.sh("iptables -w -S")
            assert CHAIN not in rules and PACKET_CHAIN not in rules
            assert "netem" not in h.control.sh(f"tc qdisc show dev {h.iface}")
            assert not h.control.exists(f"{h.workdir}/faketime")
            assert not h.control.exists(f"{h.workdir}/faketime-strobe.pid")
            assert not h.control.exists(f"{h.workdir}/kraftwerk-nfqueue.py")
            assert "kraftwerk-nfqueue" not in h.control.sh("ps -eo args")
            st = h.control.daemon_status(clusters.probe_spec(h).pidfile)
            assert st.running and not st.paused  # resumed, left to the cluster to stop
            assert "sh -c i=0" not in h.control.sh("ps -eo args")
        assert clusters.echoes(hosts[0], hosts[1]) and abs(clusters.fresh_clock_skew(hosts[0])) < 0.05
