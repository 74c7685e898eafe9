"""The NFQUEUE fallback for packet faults: netlink messages, the sans-IO shaper, the draw it shares with the
simulator, the iptables chain, and (as root) the shaper on real packets between two network namespaces."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shlex
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.real.faults import nfqueue
from harness.real.faults.net import PACKET_CHAIN, chain_counts, chain_script, remove_script
from harness.real.faults.nfqueue import MS, Shaper
from harness.sim.packets import Shaping
from tests.requirements import lacking, need

# ------------------------------------------------------------------ netlink messages


def test_bind_message_layout() -> None:
    msg = nfqueue.config_bind(4157, 500, seq=7)
    length, kind, flags, seq, _pid = struct.unpack_from("=IHHII", msg)
    assert length == len(msg) and kind == (3 << 8) | 2 and flags == 1 | 4 and seq == 7
    assert struct.unpack_from("!H", msg, 18)[0] == 4157  # nfgenmsg res_id: the queue, big-endian
    attrs = dict((t, v) for t, v in _attrs(msg))
    assert attrs[1] == struct.pack("!BxH", 1, socket.AF_INET)  # BIND
    assert attrs[2] == struct.pack("!IB", 0xFFFF, 2)  # copy whole packets
    assert attrs[3] == struct.pack("!I", 500)


def test_verdict_message_layout() -> None:
    msg = nfqueue.verdict(4157, 99)
    assert struct.unpack_from("=IHH", msg) == (len(msg), (3 << 8) | 1, 1)
    assert dict(_attrs(msg))[2] == struct.pack("!II", nfqueue.NF_ACCEPT, 99)


def _attrs(msg: bytes) -> Iterator[tuple[int, bytes]]:
    p = 20
    while p < len(msg):
        alen, atype = struct.unpack_from("=HH", msg, p)
        yield atype, msg[p + 4 : p + alen]
        p += (alen + 3) & ~3


def _packet_message(pid: int, payload: bytes) -> bytes:
    attrs = nfqueue.nlattr(1, struct.pack("!IHB", pid, 0x0800, 3)) + nfqueue.nlattr(10 | 0x4000, payload)
    return nfqueue.nfq_message(nfqueue.NFQNL_MSG_PACKET, 4157, attrs)


def test_packet_messages_parse_back_with_their_payload() -> None:
    ip = bytes([0x45]) + bytes(15) + socket.inet_aton("10.1.2.3") + b"tcp!"  # 5 bytes: padding follows
    data = _packet_message(5, ip) + _packet_message(6, ip[:20])
    parsed = [(k, nfqueue.packet_of(a)) for k, _s, a in nfqueue.messages(data)]
    assert parsed == [((3 << 8) | 0, (5, ip)), ((3 << 8) | 0, (6, ip[:20]))]
    assert nfqueue.ipv4_destination(ip) == socket.inet_aton("10.1.2.3")
    assert nfqueue.ipv4_destination(b"\x60" + bytes(40)) == b""  # not IPv4
    err = struct.pack("=IHHII", 20, nfqueue.NLMSG_ERROR, 0, 3, 0) + struct.pack("=i", -1)
    assert list(nfqueue.messages(err)) == [(nfqueue.NLMSG_ERROR, 3, {0: struct.pack("=i", -1)})]
    with pytest.raises(ValueError, match="truncated"):
        list(nfqueue.messages(data[:-8]))


# ------------------------------------------------------------------ the shaper


def feed(shaper: Shaper, packets: list[tuple[int, bytes]], gap: int = MS) -> list[tuple[int, str, int]]:
    """Send (id, destination) packets `gap` ns apart; every action as (time, kind, id), stepping 0.1 ms."""
    out = []
    t = 0
    pending = list(packets)
    while pending or shaper.next_at() is not None:
        if pending and t >= (len(packets) - len(pending)) * gap:
            pid, dst = pending.pop(0)
            shaper.packet(pid, dst, b"p%d" % pid, t)
        out += [(t, kind, pid) for kind, pid, _, _ in shaper.due(t)]
        t += MS // 10
    return out


A, B = b"\x0a\0\0\x02", b"\x0a\0\0\x03"


def test_delay_holds_each_packet_its_time() -> None:
    s = Shaper({"delay": {"time-ms": 30, "jitter-ms": 0}}, random.Random(1))
    acts = feed(s, [(i, A) for i in range(10)])
    assert [(t, k, i) for t, k, i in acts] == [(30 * MS + i * MS, "accept", i) for i in range(10)]
    assert s.counts == {"packets": 10, "delayed": 10, "duplicated": 0, "reordered": 0}


@given(st.integers(0, 2**32), st.integers(0, 40))
def test_jitter_never_reorders_packets_to_one_peer(seed: int, jitter: int) -> None:
    s = Shaper({"delay": {"time-ms": 20, "jitter-ms": jitter}}, random.Random(seed))
    acts = feed(s, [(i, A if i % 3 else B) for i in range(30)], gap=MS // 2)
    to_a = [i for _, _, i in acts if i % 3]
    assert to_a == sorted(to_a) and sorted(i for _, _, i in acts) == list(range(30))


def test_reordered_packets_overtake_the_delayed_ones() -> None:
    s = Shaper({"reorder": {"percent": 30}}, random.Random(4))  # brings the default delay, 50 ± 10 ms
    acts = feed(s, [(i, A) for i in range(200)])
    order = [i for _, _, i in acts]
    assert sorted(order) == list(range(200)) and order != list(range(200))
    assert 30 < s.counts["reordered"] < 90 and s.counts["delayed"] == 200 - s.counts["reordered"]


def test_duplicates_are_copies_after_the_original() -> None:
    s = Shaper({"duplicate": {"percent": 25}, "loss": {"percent": 90}}, random.Random(5))  # loss is iptables'
    acts = feed(s, [(i, A) for i in range(400)])
    accepted = [i for _, k, i in acts if k == "accept"]
    copies = [(t, i) for t, k, i in acts if k == "copy"]
    assert accepted == list(range(400))  # nothing lost here
    assert 60 < len(copies) == s.counts["duplicated"] < 140
    sent = {i: t for t, k, i in acts if k == "accept"}
    assert all(sent[i] <= t <= sent[i] + 2 * MS for t, i in copies)


def test_drain_releases_everything_held_in_order() -> None:
    s = Shaper({"delay": {"time-ms": 1000, "jitter-ms": 0}}, random.Random(0))
    for i in range(5):
        s.packet(i, A, b"", i)
    assert s.due(10) == [] and s.held == 5
    assert s.drain() == [0, 1, 2, 3, 4] and s.next_at() is None


def test_the_simulator_draws_the_same_fates() -> None:
    """One draw for both runtimes: the simulator's datagram links and the shaper see the same delays,
    reorders and duplicates from the same random stream."""
    behaviours = {"delay": {"time-ms": 20, "jitter-ms": 15}, "reorder": {"percent": 20}, "duplicate": {"percent": 30}}
    sim = Shaping(behaviours, ["n1"], ["n2"], random.Random("same"))
    shaper = Shaper(behaviours, random.Random("same"))
    for i in range(300):
        fate = sim.fate(tcp=False, src="n1")
        before = dict(shaper.counts)
        shaper.packet(i, A, b"", 0)
        actions = {kind: at for at, _, kind, pid, _, _ in shaper._heap if pid == i}
        assert fate.skip_queue == (shaper.counts["reordered"] > before["reordered"])
        if fate.skip_queue:
            assert actions["accept"] == 0 and fate.delay == 0
        assert actions.get("copy") == fate.duplicate
        shaper.due(10**12)
        shaper._last.clear()  # the sim's per-link order is its own (Network); compare the draws only
    assert sim.counts["n1"]["reordered"] == shaper.counts["reordered"] > 30
    assert sim.counts["n1"]["duplicated"] == shaper.counts["duplicated"] > 50


# ------------------------------------------------------------------ the chain


def _rules(script: str) -> list[str]:
    """The rules an iptables-restore script feeds it."""
    assert script.startswith("printf '%s\\n' ") and script.endswith(" | iptables-restore -w --noflush")
    return shlex.split(script[len("printf '%s\\n' ") : -len(" | iptables-restore -w --noflush")])


def test_the_sender_queues_and_the_receiver_counts_and_loses() -> None:
    pin = f"{PACKET_CHAIN}-IN"
    script = chain_script([(None, "10.0.0.2"), (None, "10.0.0.3")], [("10.0.0.4", None)], 0.1)
    assert _rules(script) == [
        "*filter",
        f":{PACKET_CHAIN} - [0:0]",
        f":{pin} - [0:0]",
        f"-I OUTPUT 1 -j {PACKET_CHAIN}",
        f"-I INPUT 1 -j {pin}",
        f"-A {PACKET_CHAIN} -m mark --mark 0x4b57 -j RETURN",  # the shaper's own copies pass
        f"-A {PACKET_CHAIN} -d 10.0.0.2 -j NFQUEUE --queue-num 4157 --queue-bypass",
        f"-A {PACKET_CHAIN} -d 10.0.0.3 -j NFQUEUE --queue-num 4157 --queue-bypass",
        f"-A {pin} -s 10.0.0.4",  # counts
        f"-A {pin} -s 10.0.0.4 -m statistic --mode random --probability 0.1000 -j DROP",
        "COMMIT",
    ]
    assert "NFQUEUE" not in chain_script([], [("10.0.0.4", None)], 0.2)
    listing = (
        f"-N {pin}\n"
        f"-A {pin} -s 10.0.0.4/32 -c 100 5000\n"
        f"-A {pin} -s 10.0.0.4/32 -m statistic --mode random --probability 0.10000000009 -c 11 600 -j DROP\n"
        f"-A {pin} -s 10.0.0.5/32 -c 20 1000\n"
    )
    assert chain_counts(listing) == {"10.0.0.4": {"packets": 100, "lost": 11}, "10.0.0.5": {"packets": 20, "lost": 0}}


def test_one_shared_stack_tells_links_apart_by_source() -> None:
    """The local backend: every node on one loopback, so rules, order and counts go by source address."""
    links = [("127.0.0.2", "127.0.0.3"), ("127.0.0.3", "127.0.0.2")]
    script = chain_script(links, links, None, "KW-ab12-P", 5000)
    assert "-A KW-ab12-P -s 127.0.0.2 -d 127.0.0.3 -j NFQUEUE --queue-num 5000 --queue-bypass" in _rules(script)
    assert _rules(script)[-2:] == ["-A KW-ab12-P-IN -s 127.0.0.3 -d 127.0.0.2", "COMMIT"]
    listing = (
        "-A KW-ab12-P-IN -s 127.0.0.2/32 -d 127.0.0.3/32 -c 7 700\n"
        "-A KW-ab12-P-IN -s 127.0.0.3/32 -d 127.0.0.2/32 -c 2 200\n"
    )
    assert chain_counts(listing) == {"127.0.0.2": {"packets": 7, "lost": 0}, "127.0.0.3": {"packets": 2, "lost": 0}}
    s = Shaper({"delay": {"time-ms": 10, "jitter-ms": 9}}, random.Random(2))
    x, y = socket.inet_aton("127.0.0.2"), socket.inet_aton("127.0.0.3")
    for i in range(40):
        s.packet(i, y if i % 2 else x, b"", i * MS // 4, src=x if i % 2 else y)
    order = [pid for _, pid, _, _ in s.due(10**12)]
    assert [i for i in order if i % 2] == sorted(i for i in order if i % 2)  # in order per link
    assert s.sources[x]["packets"] == s.sources[y]["packets"] == 20 and s.counts["packets"] == 40


# ------------------------------------------------------------------ real packets (root: two network namespaces)

ECHO = (
    "import socket, threading\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('0.0.0.0', 7100)); s.listen()\n"
    "def echo(c):\n"
    "    while (d := c.recv(65536)):\n"
    "        c.sendall(d)\n"
    "while True:\n"
    "    threading.Thread(target=echo, args=(s.accept()[0],), daemon=True).start()\n"
)
CLIENT = (
    "import socket, sys, time\n"
    "c = socket.create_connection((sys.argv[1], 7100), 5); rtts = []\n"
    "for _ in range(int(sys.argv[2])):\n"
    "    t = time.monotonic(); c.sendall(b'x' * int(sys.argv[3])); n = 0\n"
    "    while n < int(sys.argv[3]):\n"
    "        n += len(c.recv(65536))\n"
    "    rtts.append(time.monotonic() - t)\n"
    "print(sorted(rtts)[len(rtts) // 2])\n"
)


def _ns(ns: str, *argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, **kw)  # type: ignore[call-overload]


def _netstat(ns: str) -> dict[str, int]:
    lines = [line.split() for line in _ns(ns, "cat", "/proc/net/netstat").stdout.splitlines()]
    out = {}
    for keys, values in zip(lines[::2], lines[1::2], strict=False):
        out.update({k: int(v) for k, v in zip(keys[1:], values[1:], strict=False)})
    return out


NET = f"10.199.{os.getpid() % 250}"
SENDER = f"{NET}.1"


def _snmp(ns: str) -> dict[str, int]:
    rows = [line.split() for line in _ns(ns, "cat", "/proc/net/snmp").stdout.splitlines() if line.startswith("Tcp:")]
    return {k: int(v) for k, v in zip(rows[0][1:], rows[1][1:], strict=False)}


@pytest.fixture
def two_namespaces() -> Iterator[tuple[str, str, str]]:
    """kwpacket-a (10.199.<x>.1) and kwpacket-b (.2) on a veth pair, an echo server in b; removed afterwards."""
    need("root", "iproute2", "iptables")  # network namespaces
    tag = f"{os.getpid() % 10000}"
    a, b = f"kwpacket-a{tag}", f"kwpacket-b{tag}"
    net = NET
    server = None
    try:
        for cmd in (
            ["ip", "netns", "add", a],
            ["ip", "netns", "add", b],
            ["ip", "link", "add", f"kwpa{tag}", "netns", a, "type", "veth", "peer", "name", f"kwpb{tag}", "netns", b],
            ["ip", "-n", a, "addr", "add", f"{net}.1/24", "dev", f"kwpa{tag}"],
            ["ip", "-n", b, "addr", "add", f"{net}.2/24", "dev", f"kwpb{tag}"],
            ["ip", "-n", a, "link", "set", f"kwpa{tag}", "up"],
            ["ip", "-n", b, "link", "set", f"kwpb{tag}", "up"],
        ):
            subprocess.run(cmd, check=True, capture_output=True)
        if _ns(a, sys.executable, nfqueue.__file__, "--probe").returncode != 0:
            lacking("nfnetlink_queue", "this kernel has no nfnetlink_queue (modprobe nfnetlink_queue)")
        server = subprocess.Popen(["ip", "netns", "exec", b, sys.executable, "-c", ECHO])
        deadline = time.monotonic() + 10
        while _ns(a, sys.executable, "-c", f"import socket; socket.create_connection(('{net}.2', 7100), 1)").returncode:
            assert time.monotonic() < deadline, "echo server did not start"
            time.sleep(0.1)
        yield a, b, f"{net}.2"
    finally:
        if server is not None:
            server.kill()
            server.wait()
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@contextlib.contextmanager
def shaping(
    ns: str, receiver: str, peer: str, behaviours: dict, tmp_path: Path, loss: float | None = None
) -> Iterator[dict]:
    """The shaper and the chains (as PacketNemesis puts them on two nodes): `ns` queues what it sends to `peer`,
    `receiver` counts it and loses `loss` of it; the shaper's final stats and the counts afterwards."""
    stats = tmp_path / "stats.json"
    stats.unlink(missing_ok=True)  # a previous shaper's: wait for this one's
    config = {"behaviours": behaviours, "seed": 1, "stats": str(stats)}
    proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, nfqueue.__file__, json.dumps(config)])
    result: dict = {}
    try:
        deadline = time.monotonic() + 10
        while not stats.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "shaper did not start"
            time.sleep(0.05)
        subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", chain_script([(None, peer)], [], None)], check=True)
        receiving = chain_script([], [(SENDER, None)], loss)
        subprocess.run(["ip", "netns", "exec", receiver, "sh", "-c", receiving], check=True)
        yield result
    finally:
        counts = chain_counts(_ns(receiver, "iptables", "-w", "-S", f"{PACKET_CHAIN}-IN", "-v").stdout)
        result["chain"] = counts.get(SENDER, {"packets": 0, "lost": 0})
        for n in (ns, receiver):
            _ns(n, "sh", "-c", remove_script())
        proc.terminate()
        proc.wait(10)
        result.update(json.loads(stats.read_text()))


def _median_rtt(ns: str, peer: str, n: int = 20, size: int = 1) -> float:
    r = _ns(ns, sys.executable, "-c", CLIENT, peer, str(n), str(size), timeout=120)
    assert r.returncode == 0, r.stderr
    return float(r.stdout)


def test_shaper_delays_duplicates_and_reorders_real_tcp(two_namespaces: tuple[str, str, str], tmp_path: Path) -> None:
    ns, receiver, peer = two_namespaces
    base = _median_rtt(ns, peer)
    with shaping(ns, receiver, peer, {"delay": {"time-ms": 80, "jitter-ms": 0}}, tmp_path) as done:
        delayed = _median_rtt(ns, peer)
    assert delayed - base == pytest.approx(0.08, abs=0.03)
    assert done["bound"] is False and done["held"] == 0 and done["delayed"] >= 20
    # the receiver counted what the shaper let through (but for the last packets, still on their way)
    assert done["packets"] > 20 and abs(done["chain"]["packets"] - done["packets"]) <= 3
    before = _netstat(receiver)
    faults = {"duplicate": {"percent": 40}, "reorder": {"percent": 40}}
    sent_before = _snmp(ns)["RetransSegs"]
    with shaping(ns, receiver, peer, faults, tmp_path, loss=0.05) as done:
        _median_rtt(ns, peer, n=40, size=60_000)  # bulk: many segments in flight
    after = _netstat(receiver)
    assert done["duplicated"] > 50 and done["reordered"] > 50 and done["chain"]["lost"] > 0
    # the receiving TCP meets them: D-SACKs for segments it already had, an out-of-order queue for reordering
    assert after["TCPDSACKOldSent"] > before["TCPDSACKOldSent"]
    assert after["TCPOFOQueue"] > before["TCPOFOQueue"]
    assert _snmp(ns)["RetransSegs"] > sent_before  # the sender's TCP resent what the receiver lost
    assert _ns(ns, "iptables", "-w", "-S", "OUTPUT").stdout.count(PACKET_CHAIN) == 0
    assert _ns(receiver, "iptables", "-w", "-S", "INPUT").stdout.count(PACKET_CHAIN) == 0
