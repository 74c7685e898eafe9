"""The simulated network: per-link latency, FIFO links, partitions, and TCP-like holding.

Each link draws its latencies from its own random stream (derived from the run's
seed and the link), so removing traffic on one link does not reshuffle the
timing of every other message — that keeps failures stable while a schedule is
shrunk. A partition is a *grudge*: for each destination, the set of sources it drops
packets from (so one-way partitions are natural). Grudges are checked when a
message arrives, as with iptables INPUT rules. Messages to a crashed node are
lost; messages to a paused node wait until it resumes (its socket buffers).

Links are TCP-like by default, as between real nodes whose partitions are iptables
DROP rules: a message that meets a partition is not lost but retransmitted, after
200 ms and then twice as long each time (Linux's minimum RTO and its backoff), and
arrives at the first retransmission after the heal, with everything sent behind it
on that link (one connection, in order). It is lost only when the connection is
given up first: the sender's request timeout for that connection (`hold`), or a
crash at either end. With `tcp=False` a message that meets a partition is lost at
once (datagram links: how runs stored before TCP-like links were simulated).

Packet faults (`shaping`, `harness.sim.packets`) add loss, delay, duplication and
reordering to node-to-node messages on the links they cover.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

from harness.core.streams import stream
from harness.sim.engine import MS, SECOND, Scheduler
from harness.sim.packets import Shaping

RTO_MIN = 200 * MS  # Linux's TCP_RTO_MIN: the first retransmission on a low-latency link
RTO_MAX = 120 * SECOND  # Linux's TCP_RTO_MAX


class _Held:
    """A link's messages waiting for a retransmission to get through: (given up at, deliver, args)."""

    __slots__ = ("messages", "rto")

    def __init__(self) -> None:
        self.messages: deque[tuple[int, Callable[..., Any], tuple[Any, ...]]] = deque()
        self.rto = RTO_MIN


class Network:
    def __init__(
        self,
        sched: Scheduler,
        rng: random.Random,
        latency_ms: tuple[float, float] = (0.5, 5.0),
        loss: float = 0.0,
        tcp: bool = True,
    ) -> None:
        self.sched = sched
        self.rng = rng
        self._seed = rng.random()
        self._link_rng: dict[tuple[str, str], random.Random] = {}
        self.latency = (int(latency_ms[0] * MS), int(latency_ms[1] * MS))
        self.loss = loss
        self.tcp = tcp
        self.grudge: dict[str, frozenset[str]] = {}
        self.shaping: Shaping | None = None
        self._last: dict[tuple[str, str], int] = {}
        self._held: dict[tuple[str, str], _Held] = {}
        self.sent = 0
        self.dropped = 0
        self.retransmitted = 0
        self.shaped = 0  # messages that met a packet fault
        self.duplicated = 0

    def partition(self, grudge: dict[str, list[str]]) -> None:
        self.grudge = {dst: frozenset(srcs) for dst, srcs in grudge.items() if srcs}

    def heal(self) -> None:
        self.grudge = {}

    def cut(self, src: str, dst: str) -> bool:
        blocked = self.grudge.get(dst)
        return blocked is not None and src in blocked

    def send(
        self,
        src: str,
        dst: str,
        deliver: Callable[..., Any],
        *args: Any,
        partitionable: bool = True,
        hold: int = 0,
    ) -> None:
        """Schedule `deliver(*args)` at the destination after the link's latency (FIFO per link).

        `hold`: nanoseconds the sender's connection waits before it gives the message up (TCP-like
        links only): a partition in between delays the message rather than losing it.
        """
        self.sent += 1
        link = (src, dst)
        rng = self._link_rng.get(link)
        if rng is None:
            rng = self._link_rng[link] = stream("link", self._seed, src, dst)
        if self.loss and partitionable and rng.random() < self.loss:
            self.dropped += 1
            return
        lo, hi = self.latency
        now = self.sched.now
        when = now + lo + int(rng.random() * (hi - lo))
        give_up = now + hold if self.tcp and partitionable else 0
        if self.shaping is not None and partitionable and self.shaping.applies(src, dst):
            fate = self.shaping.fate(self.tcp, src)
            self.shaped += 1
            if fate.lost:
                self.dropped += 1
                return
            if fate.duplicate is not None:
                self.duplicated += 1
                self.sched.at(when + fate.duplicate, self._arrive, src, dst, deliver, args, partitionable, give_up)
            if fate.skip_queue:
                self.sched.at(when, self._arrive, src, dst, deliver, args, partitionable, give_up)
                return
            when += fate.delay
        last = self._last.get(link, 0)
        if when <= last:
            when = last + 1
        self._last[link] = when
        self.sched.at(when, self._arrive, src, dst, deliver, args, partitionable, give_up)

    def _arrive(
        self, src: str, dst: str, deliver: Callable[..., Any], args: tuple[Any, ...], part: bool, give_up: int
    ) -> None:
        if part and (self._held or self.grudge):  # nothing held and no partition: straight through
            held = self._held.get((src, dst))
            if held is not None:  # behind a message being retransmitted: in order, on the same connection
                held.messages.append((give_up, deliver, args))
                return
            if self.cut(src, dst):
                if give_up <= self.sched.now:
                    self.dropped += 1
                    return
                held = self._held[(src, dst)] = _Held()
                held.messages.append((give_up, deliver, args))
                self.sched.after(held.rto, self._retransmit, src, dst, held)
                return
        deliver(*args)

    def _retransmit(self, src: str, dst: str, held: _Held) -> None:
        link = (src, dst)
        if self._held.get(link) is not held:
            return  # the connection was reset (a crash) since this retransmission was armed
        now = self.sched.now
        messages = held.messages
        while messages and messages[0][0] <= now:  # given up by the sender: its connection was reset
            messages.popleft()
            self.dropped += 1
        if not messages:
            del self._held[link]
            return
        self.retransmitted += 1
        if self.cut(src, dst):
            held.rto = min(held.rto * 2, RTO_MAX)
            self.sched.after(held.rto, self._retransmit, src, dst, held)
            return
        del self._held[link]
        for give_up, deliver, args in messages:
            if give_up > now:
                deliver(*args)
            else:
                self.dropped += 1

    def reset(self, node: str) -> None:
        """`node` crashed: its connections are gone, with every message they still held."""
        for link in [link for link in self._held if node in link]:
            self.dropped += len(self._held.pop(link).messages)
