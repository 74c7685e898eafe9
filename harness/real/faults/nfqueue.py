"""Packet faults without tc netem: a userspace shaper on NFQUEUE, and the draw both runtimes share.

Why NFQUEUE: kernels without `sch_netem` (this machine's) still have
`nfnetlink_queue` and the `NFQUEUE` target. Packets a node sends to its peers go
through an iptables rule in its OUTPUT chain to a netlink queue; this program
reads them and gives each its verdict when it is due. That keeps the faults at
the packet level, as netem has them, so each node's real TCP meets them:

- **delay** (time ± uniform jitter): the verdict waits; the packets to one peer keep
  their order (a packet never overtakes the one before it), as netem without reorder;
- **reorder**: a reordered packet gets its verdict at once, overtaking the delayed ones
  (netem's rule, so reorder needs a delay, and gets the default one);
- **duplicate**: the packet is accepted and an exact copy is sent again through a raw
  socket up to 1 ms later (marked `MARK`, which the queue rule skips);
- **loss** is not done here: an iptables `statistic` DROP rule in the receiver's
  INPUT drops in the kernel (`harness.real.faults.net`), where the sender's TCP
  cannot tell (a drop in the sender's own OUTPUT is reported to its TCP, which
  just sends again).

A per-node TCP proxy was the other option. It sees bytes, not segments: it can only
delay or stall a stream, because duplicating or reordering bytes of a TCP stream
corrupts it (something real TCP links never do) — TCP's own handling of lost,
duplicated and reordered segments (retransmits, duplicate ACKs, D-SACK) would never
run. A queue also needs no change to the nodes' addresses or ports.

The module is standard library only: it is copied to each host and run there with
the host's `python3` (`python3 nfqueue.py CONFIG-JSON`). `draw` is the one place
where a packet's fate is drawn; the simulator's links (`harness.sim.packets`) use it
too, so a behaviour means the same on both runtimes. The netlink part (`Queue`) is
thin; the scheduling (`Shaper`) is sans-IO.

While it runs it rewrites a stats file (JSON: packets, delayed, reordered,
duplicated, held, bound) every half second and when it ends; on SIGTERM or SIGINT
it lets every held packet go (accepted, in order) before it exits.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any

MS = 1_000_000  # nanoseconds
QUEUE_NUM = 4157  # the netlink queue the rules send to (one per network namespace)
MARK = 0x4B57  # packets the shaper sends itself (duplicates): the queue rule lets them pass
DEFAULTS: dict[str, dict[str, float]] = {
    "delay": {"time-ms": 50, "jitter-ms": 10},
    "loss": {"percent": 20},
    "duplicate": {"percent": 20},
    "reorder": {"percent": 20},
}

# what a packet fault did, per sending node, on both runtimes (recorded by stop-packet): packets that met it,
# and of those the ones delayed, lost, duplicated and reordered
COUNTERS = ("packets", "delayed", "lost", "duplicated", "reordered")

# ------------------------------------------------------------------ the draw (shared with the simulator)


def happens(behaviours: Mapping[str, Mapping[str, Any]], name: str, rng: random.Random) -> bool:
    """Whether behaviour `name` (if on) strikes this packet: one draw against its percent."""
    b = behaviours.get(name)
    return b is not None and rng.random() * 100.0 < float(b["percent"])


def draw(behaviours: Mapping[str, Mapping[str, Any]], rng: random.Random) -> tuple[int, bool, bool, bool]:
    """One packet's fate (parameters filled in): (delay ns, reordered, lost, duplicated), drawn in that order.

    A reordered packet has no delay (netem sends it at once)."""
    delay = 0
    if "delay" in behaviours:
        d = behaviours["delay"]
        jitter = float(d.get("jitter-ms", 0))
        delay = max(0, int((float(d["time-ms"]) + rng.uniform(-jitter, jitter)) * MS))
    reordered = happens(behaviours, "reorder", rng)
    if reordered:
        delay = 0
    return delay, reordered, happens(behaviours, "loss", rng), happens(behaviours, "duplicate", rng)


def with_defaults(behaviours: Mapping[str, Mapping[str, Any] | None]) -> dict[str, dict[str, float]]:
    """Parameters filled in from `DEFAULTS` (names must be known there); reorder brings the default delay."""
    full = {name: {**DEFAULTS[name], **(params or {})} for name, params in behaviours.items()}
    if "reorder" in full and "delay" not in full:
        full["delay"] = dict(DEFAULTS["delay"])
    return full


# ------------------------------------------------------------------ the shaper (sans-IO)


class Shaper:
    """When each queued packet gets its verdict, and which are sent twice.

    `packet(id, dst, payload, now, src)` takes a packet; `due(now)` returns the actions whose time has come, in
    order: ("accept", id, dst, payload) or ("copy", id, dst, payload). `next_at()` is the next action's time.
    Packets keep their order per link (source, destination); `counts` and `sources` (per source) say what was done.
    """

    def __init__(self, behaviours: Mapping[str, Mapping[str, Any] | None], rng: random.Random) -> None:
        self.behaviours = with_defaults({k: v for k, v in behaviours.items() if k != "loss"})
        self.rng = rng
        self._heap: list[tuple[int, int, str, int, bytes, bytes]] = []
        self._seq = 0
        self._last: dict[tuple[bytes, bytes], int] = {}  # per link: when its last in-order packet goes
        self.counts = {k: 0 for k in COUNTERS if k != "lost"}
        self.sources: dict[bytes, dict[str, int]] = {}

    def _push(self, at: int, kind: str, pid: int, dst: bytes, payload: bytes) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, pid, dst, payload))

    def packet(self, pid: int, dst: bytes, payload: bytes, now: int, src: bytes = b"") -> None:
        delay, reordered, _lost, duplicated = draw(self.behaviours, self.rng)
        done = ["packets"]
        at = now + delay
        if reordered:
            done.append("reordered")
        else:
            at = max(at, self._last.get((src, dst), 0))  # in order behind the packets before it
            self._last[(src, dst)] = at
            if at > now:
                done.append("delayed")
        self._push(at, "accept", pid, dst, payload)
        if duplicated:
            done.append("duplicated")
            self._push(now + delay + int(self.rng.random() * MS), "copy", pid, dst, payload)
        by_source = self.sources.get(src)
        if by_source is None:
            by_source = self.sources[src] = dict.fromkeys(self.counts, 0)
        for k in done:
            self.counts[k] += 1
            by_source[k] += 1

    def next_at(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def due(self, now: int) -> list[tuple[str, int, bytes, bytes]]:
        out = []
        while self._heap and self._heap[0][0] <= now:
            _, _, kind, pid, dst, payload = heapq.heappop(self._heap)
            out.append((kind, pid, dst, payload))
        return out

    def drain(self) -> list[int]:
        """Every held packet id, in the order it was due (copies forgotten): to accept all at once."""
        ids = [pid for _, _, kind, pid, _, _ in sorted(self._heap) if kind == "accept"]
        self._heap.clear()
        return ids

    @property
    def held(self) -> int:
        return sum(1 for e in self._heap if e[2] == "accept")


# ------------------------------------------------------------------ nfnetlink_queue messages

NETLINK_NETFILTER = 12
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN = 1, 2, 3
NFQNL_CFG_CMD_BIND, NFQNL_CFG_CMD_UNBIND = 1, 2
NFQNL_COPY_PACKET = 2
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_PAYLOAD = 1, 2, 10
NF_DROP, NF_ACCEPT = 0, 1
NLA_TYPE_MASK = 0x3FFF  # without NLA_F_NESTED / NLA_F_NET_BYTEORDER


def _align(n: int) -> int:
    return (n + 3) & ~3


def nlattr(kind: int, value: bytes) -> bytes:
    """One netlink attribute, padded to 4 bytes."""
    raw = struct.pack("=HH", 4 + len(value), kind) + value
    return raw + b"\0" * (_align(len(raw)) - len(raw))


def nfq_message(msg: int, queue: int, attrs: bytes, seq: int = 0, flags: int = NLM_F_REQUEST) -> bytes:
    """A netlink message to the queue subsystem: nlmsghdr, nfgenmsg (AF_UNSPEC, version 0, queue), attributes."""
    body = struct.pack("=BBH", 0, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq, 0) + body


def config_bind(queue: int, maxlen: int, seq: int = 1) -> bytes:
    """Bind `queue` to this socket, copy whole packets, hold up to `maxlen` of them."""
    attrs = (
        nlattr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, socket.AF_INET))
        + nlattr(NFQA_CFG_PARAMS, struct.pack("!IB", 0xFFFF, NFQNL_COPY_PACKET))
        + nlattr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", maxlen))
    )
    return nfq_message(NFQNL_MSG_CONFIG, queue, attrs, seq, NLM_F_REQUEST | NLM_F_ACK)


def config_unbind(queue: int, seq: int = 2) -> bytes:
    attrs = nlattr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_UNBIND, socket.AF_INET))
    return nfq_message(NFQNL_MSG_CONFIG, queue, attrs, seq, NLM_F_REQUEST | NLM_F_ACK)


def verdict(queue: int, packet_id: int, decision: int = NF_ACCEPT) -> bytes:
    return nfq_message(NFQNL_MSG_VERDICT, queue, nlattr(NFQA_VERDICT_HDR, struct.pack("!II", decision, packet_id)))


def messages(data: bytes) -> Iterator[tuple[int, int, dict[int, bytes]]]:
    """(type, seq, attributes) per netlink message in `data`; an NLMSG_ERROR's attributes are {0: errno bytes}."""
    off = 0
    while off + 16 <= len(data):
        length, kind, _flags, seq, _pid = struct.unpack_from("=IHHII", data, off)
        if length < 16 or off + length > len(data):
            raise ValueError(f"truncated netlink message at byte {off} (length {length}, have {len(data) - off})")
        if kind == NLMSG_ERROR:
            yield kind, seq, {0: data[off + 16 : off + 20]}
        else:
            attrs: dict[int, bytes] = {}
            p = off + 20  # past nlmsghdr and nfgenmsg
            while p + 4 <= off + length:
                alen, atype = struct.unpack_from("=HH", data, p)
                if alen < 4:
                    break
                attrs[atype & NLA_TYPE_MASK] = data[p + 4 : p + alen]
                p += _align(alen)
            yield kind, seq, attrs
        off += _align(length)


def packet_of(attrs: Mapping[int, bytes]) -> tuple[int, bytes]:
    """(packet id, IP packet) of an NFQNL_MSG_PACKET's attributes."""
    (pid,) = struct.unpack_from("!I", attrs[NFQA_PACKET_HDR])
    return pid, attrs.get(NFQA_PAYLOAD, b"")


class Queue:
    """A bound nfnetlink queue (needs CAP_NET_ADMIN in the network namespace)."""

    def __init__(self, queue: int = QUEUE_NUM, maxlen: int = 10_000) -> None:
        self.queue = queue
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind((0, 0))
        self._request(config_bind(queue, maxlen, 1), 1)

    def _request(self, msg: bytes, seq: int) -> None:
        self.sock.send(msg)
        while True:
            for kind, s, attrs in messages(self.sock.recv(65536)):
                if kind == NLMSG_ERROR and s == seq:
                    (err,) = struct.unpack("=i", attrs[0])
                    if err:
                        raise OSError(-err, f"nfnetlink_queue: {os.strerror(-err)} (queue {self.queue})")
                    return

    def fileno(self) -> int:
        return self.sock.fileno()

    def receive(self) -> list[tuple[int, bytes]]:
        """The packets waiting now (packet id, IP packet); [] if none (non-blocking)."""
        out = []
        try:
            data = self.sock.recv(1 << 17, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return out
        except OSError as e:  # ENOBUFS: the kernel dropped queue messages (those packets are lost, as in a full netem)
            if e.errno == 105:
                return out
            raise
        for kind, _seq, attrs in messages(data):
            if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                out.append(packet_of(attrs))
        return out

    def accept(self, packet_id: int) -> None:
        self.sock.send(verdict(self.queue, packet_id, NF_ACCEPT))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._request(config_unbind(self.queue, 2), 2)
        self.sock.close()


def ipv4_destination(packet: bytes) -> bytes:
    return packet[16:20] if len(packet) >= 20 and packet[0] >> 4 == 4 else b""


def ipv4_source(packet: bytes) -> bytes:
    return packet[12:16] if len(packet) >= 20 and packet[0] >> 4 == 4 else b""


# ------------------------------------------------------------------ the program


def run(config: Mapping[str, Any]) -> None:
    """Shape until SIGTERM/SIGINT: config {"behaviours", "seed", "stats", "queue"?}."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    shaper = Shaper(config["behaviours"], random.Random(config.get("seed", 0)))
    queue = Queue(int(config.get("queue", QUEUE_NUM)))
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    raw.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_MARK", 36), MARK)
    stats_path = config["stats"]

    def write_stats(bound: bool) -> None:
        tmp = f"{stats_path}.tmp"
        with open(tmp, "w") as f:
            sources = {socket.inet_ntoa(s): c for s, c in shaper.sources.items() if len(s) == 4}
            json.dump({**shaper.counts, "held": shaper.held, "bound": bound, "sources": sources}, f)
        os.replace(tmp, stats_path)

    write_stats(True)
    next_stats = time.monotonic() + 0.5
    try:
        while not stop:
            now = time.monotonic_ns()
            nxt = shaper.next_at()
            wait = 0.2 if nxt is None else min(0.2, max(0.0, (nxt - now) / 1e9))
            try:
                ready, _, _ = select.select([queue], [], [], wait)
            except InterruptedError:
                continue
            if ready:
                now = time.monotonic_ns()
                for pid, packet in queue.receive():
                    shaper.packet(pid, ipv4_destination(packet), packet, now, ipv4_source(packet))
            for kind, pid, dst, packet in shaper.due(time.monotonic_ns()):
                if kind == "accept":
                    queue.accept(pid)
                elif dst:
                    with contextlib.suppress(OSError):  # a copy that cannot be sent is a copy lost
                        raw.sendto(packet, (socket.inet_ntoa(dst), 0))
            if time.monotonic() >= next_stats:
                write_stats(True)
                next_stats = time.monotonic() + 0.5
    finally:
        for pid in shaper.drain():
            queue.accept(pid)
        queue.close()
        raw.close()
        write_stats(False)


def probe(queue: int = QUEUE_NUM) -> None:
    """Bind and unbind the queue (an OSError if this kernel or namespace cannot)."""
    Queue(queue, 16).close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--probe"]:
        try:
            probe(int(sys.argv[2]) if len(sys.argv) > 2 else QUEUE_NUM)
        except OSError as e:
            print(f"nfqueue: {e}", file=sys.stderr)
            sys.exit(1)
        print("ok")
    else:
        run(json.loads(sys.argv[1]))
