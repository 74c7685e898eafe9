"""The real nemeses' pure parts and their command sequences, on a recording fake transport (no root needed)."""

from __future__ import annotations

import random

import pytest

from harness.nemesis import partitions, schedule
from harness.real.backends.base import Host
from harness.real.control.base import Transport
from harness.real.faults import RealNemesis
from harness.real.faults.clock import faketime_spec
from harness.real.faults.net import (
    CHAIN,
    PacketNemesis,
    describe_grudge,
    netem_args,
    netem_script,
    validate_grudge,
)

NODES = ["n1", "n2", "n3", "n4", "n5"]


class Recorder(Transport):
    """Answers like a healthy node and remembers every command and file."""

    node_side_timeout = False

    def __init__(self, node: str, netem: bool = True, nfqueue: bool = True) -> None:
        super().__init__(node)
        self.commands: list[str] = []
        self.files: dict[str, bytes] = {}
        self.netem = netem
        self.nfqueue = nfqueue

    def _exec(self, command: str, timeout: float | None) -> tuple[int, bytes, bytes]:
        self.commands.append(command)
        if "daemon_helper" in command or "Node-side daemon helper" in command:
            return 0, b'{"pid": 42, "state": "S"}\n', b""
        if "libfaketimeMT" in command:
            return 0, b"/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1\n", b""
        if "handle 9: netem" in command:
            return (0 if self.netem else 2), b"", b""
        if "--probe" in command:
            return (0 if self.nfqueue else 1), b"", b""
        if "-S KRAFTWERK-PKT-IN -v" in command:  # what n2 sent, as n1 counted it
            return 0, (b"-A KRAFTWERK-PKT-IN -s 10.9.0.2/32 -c 40 2000\n" if self.node == "n1" else b""), b""
        if command.startswith("cat /w/n2/kraftwerk-nfqueue."):
            return 0, b'{"packets": 30, "delayed": 28, "reordered": 2, "duplicated": 3}', b""
        return 0, b"", b""

    def put_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        self.files[path] = data.encode() if isinstance(data, str) else data

    def get_file(self, path: str) -> bytes:
        return self.files[path]


def fake_hosts(netem: bool = True, nfqueue: bool = True) -> list[Host]:
    return [Host(n, f"10.9.0.{i}", Recorder(n, netem, nfqueue), f"/w/{n}") for i, n in enumerate(NODES, start=1)]


def test_validate_grudge() -> None:
    assert validate_grudge({"n1": ["n2", "n2"]}, NODES) == {"n1": ["n2"]}
    with pytest.raises(ValueError, match="unknown node 'n9'"):
        validate_grudge({"n9": []}, NODES)
    with pytest.raises(ValueError, match="unknown node"):
        validate_grudge({"n1": ["x"]}, NODES)
    with pytest.raises(ValueError, match="itself"):
        validate_grudge({"n1": ["n1"]}, NODES)


def test_describe_grudge_shapes() -> None:
    rng = random.Random(3)
    halves = describe_grudge(partitions.halves(NODES, rng), NODES)
    assert sorted(map(len, halves["components"])) == [2, 3] and halves["complete"] and halves["one-way"] == []
    assert len(halves["majority"]) == 3
    ring = describe_grudge(partitions.majorities_ring(NODES, rng), NODES)
    assert len(ring["components"]) == 1 and not ring["complete"] and sorted(ring["majority"]) == NODES
    bridge = describe_grudge(partitions.bridge(NODES, rng), NODES)
    assert len(bridge["components"]) == 1 and not bridge["complete"]
    one_way = describe_grudge({"n1": ["n2", "n3", "n4", "n5"]}, NODES)
    assert one_way["one-way"] == [["n1", n] for n in NODES[1:]]
    assert describe_grudge({}, NODES) == {"components": [NODES], "complete": True, "one-way": [], "majority": NODES}


def test_netem_arguments_follow_jepsen_defaults() -> None:
    assert netem_args({"delay": None}) == ["delay", "50ms", "10ms", "25%", "distribution", "normal"]
    assert netem_args({"loss": {"percent": 5}}) == ["loss", "5%", "75%"]
    # reorder needs a delay: the default one is added
    assert netem_args({"reorder": None})[:4] == ["delay", "50ms", "10ms", "25%"]
    assert netem_args({"rate": {"mbit": 2}}) == ["rate", "2mbit"]
    with pytest.raises(ValueError, match="unknown packet behaviour"):
        netem_args({"flood": None})


def test_netem_script_shapes_only_peers() -> None:
    script = netem_script("eth0", ["10.0.0.2", "10.0.0.3"], {"delay": {"time-ms": 100}})
    lines = script.splitlines()
    assert lines[0] == "tc qdisc del dev eth0 root 2>/dev/null; true"
    steps = lines[1].split(" && ")
    assert steps[0].startswith("tc qdisc add dev eth0 root handle 1: prio bands 4")
    assert steps[1] == "tc qdisc add dev eth0 parent 1:4 handle 40: netem delay 100ms 10ms 25% distribution normal"
    assert steps[2:] == [
        f"tc filter add dev eth0 parent 1:0 protocol ip prio 3 u32 match ip dst {ip}/32 flowid 1:4"
        for ip in ("10.0.0.2", "10.0.0.3")
    ]


def test_packet_nemesis_uses_netem_when_the_kernel_has_it() -> None:
    hosts = fake_hosts(netem=True)
    p = PacketNemesis(hosts)
    done = p.start({"delay": {"time-ms": 80}}, nodes=["n1"], peers=["n2", "n3"])
    assert done["method"] == "netem"
    cmds = hosts[0].control.commands  # type: ignore[attr-defined]
    assert any("netem delay 80ms" in c and "match ip dst 10.9.0.2/32" in c and "10.9.0.3/32" in c for c in cmds)
    assert not any("netem delay" in c for c in hosts[1].control.commands)  # type: ignore[attr-defined]
    p.teardown()
    assert any("tc qdisc del dev eth0 root" in c for c in hosts[1].control.commands)  # type: ignore[attr-defined]


def test_packet_nemesis_without_netem_or_nfqueue_does_loss_with_iptables_only() -> None:
    hosts = fake_hosts(netem=False, nfqueue=False)
    p = PacketNemesis(hosts)
    done = p.start(["loss"], nodes=["n2"])
    assert done["method"] == "iptables" and done["behaviours"] == {"loss": {"percent": 20}}
    # what n2 sends to its peers (as netem and the simulator), lost where it arrives: in the peers' INPUT
    for peer in (hosts[0], *hosts[2:]):
        cmds = " ".join(peer.control.commands)  # type: ignore[attr-defined]
        assert "'-A KRAFTWERK-PKT-IN -s 10.9.0.2 -m statistic --mode random --probability 0.2000 -j DROP'" in cmds
        assert "'-I INPUT 1 -j KRAFTWERK-PKT-IN'" in cmds and "-A KRAFTWERK-PKT -d" not in cmds
    assert "statistic" not in " ".join(hosts[1].control.commands)  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="delay cannot be done with iptables.*no NFQUEUE"):
        p.start({"delay": None, "loss": None})
    assert p.capabilities() == {"loss"}
    p.teardown()


def test_packet_nemesis_without_netem_shapes_with_the_nfqueue_shaper() -> None:
    hosts = fake_hosts(netem=False)
    p = PacketNemesis(hosts)
    assert p.capabilities() == {"loss", "delay", "duplicate", "reorder"}
    done = p.start({"delay": {"time-ms": 80}, "loss": {"percent": 5}}, nodes=["n2"], peers=["n1"])
    assert done == {
        "behaviours": {"delay": {"time-ms": 80, "jitter-ms": 10}, "loss": {"percent": 5}},
        "nodes": ["n2"],
        "peers": ["n1"],
        "method": "nfqueue",
    }
    n2 = hosts[1].control
    assert n2.files["/w/n2/kraftwerk-nfqueue.py"].startswith(b'"""Packet faults without tc netem')  # type: ignore[attr-defined]
    cmds = " ".join(n2.commands)  # type: ignore[attr-defined]
    (start,) = [c for c in n2.commands if "kraftwerk-nfqueue.pid" in c and "start" in c]  # type: ignore[attr-defined]
    assert "time-ms" in start and "loss" not in start  # loss is the receiver's statistic rule
    assert "-d 10.9.0.1 -j NFQUEUE --queue-num 4157 --queue-bypass" in cmds
    n1 = " ".join(hosts[0].control.commands)  # type: ignore[attr-defined]
    assert "-A KRAFTWERK-PKT -d" not in n1 and "'-A KRAFTWERK-PKT-IN -s 10.9.0.2 -m statistic" in n1
    assert "-A KRAFTWERK" not in " ".join(hosts[2].control.commands)  # type: ignore[attr-defined]  # not involved
    with pytest.raises(Exception, match="corrupt cannot be done with nfqueue"):
        p.start({"corrupt": None})
    stopped = p.stop()
    assert stopped == {"n2": {"packets": 40, "delayed": 28, "lost": 0, "duplicated": 3, "reordered": 2}}
    later = " ".join(n2.commands)  # type: ignore[attr-defined]
    assert later.index("iptables -w -D OUTPUT -j KRAFTWERK-PKT") < later.rindex("stop")  # rules out, then the shaper
    p.teardown()
    assert "rm -f /w/n2/kraftwerk-nfqueue.py" in " ".join(n2.commands)  # type: ignore[attr-defined]


def test_faketime_spec() -> None:
    assert faketime_spec(0) == "+0"
    assert faketime_spec(5) == "+5.000000s"
    assert faketime_spec(-0.25) == "-0.250000s"
    assert faketime_spec(0, 1.02) == "+0s x1.020000"
    assert faketime_spec(-3, 0.99) == "-3.000000s x0.990000"


def test_every_scheduled_event_applies_and_everything_heals() -> None:
    hosts = fake_hosts()
    # every package but disk: its faults run `python -m nodes disk-fault` on a data directory (test_real_disk.py)
    packages = [p for p in schedule.PACKAGES if p != "disk"]
    events = schedule.generate(7, NODES, packages, time_limit_s=60, interval_s=3)
    assert {e["f"] for e in events} >= {"start-partition", "kill", "pause", "bump-clock"}
    from harness.real.control import DaemonSpec

    with RealNemesis(hosts, daemons=lambda h: DaemonSpec(["node"], f"{h.workdir}/pid", f"{h.workdir}/log")) as nem:
        assert all(h.control.files[f"{h.workdir}/faketime"] == b"+0\n" for h in hosts)  # type: ignore[attr-defined]
        for event in events:
            nem.invoke(event)
        nem.heal_all()
        assert nem.partition.active == {} and not nem.process.paused and not nem.process.killed  # type: ignore[union-attr]
        assert all(v == 0 for v in nem.clock.offsets.values())
        assert not any(nem.interpreter.in_force().values())
    first = hosts[0].control.commands  # type: ignore[attr-defined]
    jump = next(i for i, c in enumerate(first) if f"iptables -w -I INPUT 1 -j {CHAIN}" in c)  # set up (with the clock)
    assert jump < next(i for i, c in enumerate(first) if "-j DROP" in c)  # before any partition
    assert f"iptables -w -X {CHAIN}" in " ".join(first)
    assert any("rm -rf -- /w/n1/faketime" in c for c in first)


def test_clock_env_fakes_monotonic_only_when_asked() -> None:
    from harness.real.faults.clock import ClockNemesis

    hosts = fake_hosts()
    for monotonic in (False, True):
        clock = ClockNemesis(hosts, monotonic=monotonic)
        with pytest.raises(Exception, match="setup"):
            clock.env(hosts[0])
        clock.setup()
        env = clock.env("n2")
        assert env["LD_PRELOAD"].endswith("libfaketimeMT.so.1") and env["FAKETIME_NO_CACHE"] == "1"
        assert env["FAKETIME_TIMESTAMP_FILE"] == "/w/n2/faketime"
        assert ("FAKETIME_DONT_FAKE_MONOTONIC" in env) is not monotonic
        clock.bump({"n2": 1500})
        assert hosts[1].control.files["/w/n2/faketime"] == b"+1.500000s\n"  # type: ignore[attr-defined]
        clock.teardown()
