"""The simulated network: per-link latency and loss, FIFO links, and partitions.

Each link draws its latencies from its own random stream (derived from the run's
seed and the link), so removing traffic on one link does not reshuffle the
timing of every other message — that keeps failures stable while a schedule is
shrunk. A partition is a *grudge*: for each destination, the set of sources it drops
packets from (so one-way partitions are natural). Grudges are checked when a
message is delivered, as with iptables INPUT rules. Messages to a crashed node
are lost; messages to a paused node wait until it resumes (its socket buffers).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from harness.sim.engine import MS, Scheduler


class Network:
    def __init__(
        self,
        sched: Scheduler,
        rng: random.Random,
        latency_ms: tuple[float, float] = (0.5, 5.0),
        loss: float = 0.0,
    ) -> None:
        self.sched = sched
        self.rng = rng
        self._seed = rng.random()
        self._link_rng: dict[tuple[str, str], random.Random] = {}
        self.latency = (int(latency_ms[0] * MS), int(latency_ms[1] * MS))
        self.loss = loss
        self.grudge: dict[str, frozenset[str]] = {}
        self._last: dict[tuple[str, str], int] = {}
        self.sent = 0
        self.dropped = 0

    def partition(self, grudge: dict[str, list[str]]) -> None:
        self.grudge = {dst: frozenset(srcs) for dst, srcs in grudge.items() if srcs}

    def heal(self) -> None:
        self.grudge = {}

    def cut(self, src: str, dst: str) -> bool:
        blocked = self.grudge.get(dst)
        return blocked is not None and src in blocked

    def send(self, src: str, dst: str, deliver: Callable[..., Any], *args: Any, partitionable: bool = True) -> None:
        """Schedule `deliver(*args)` at the destination after the link's latency (FIFO per link)."""
        self.sent += 1
        link = (src, dst)
        rng = self._link_rng.get(link)
        if rng is None:
            rng = self._link_rng[link] = random.Random(f"{self._seed}-{src}-{dst}")
        if self.loss and partitionable and rng.random() < self.loss:
            self.dropped += 1
            return
        lo, hi = self.latency
        when = self.sched.now + lo + int(rng.random() * (hi - lo))
        last = self._last.get(link, 0)
        if when <= last:
            when = last + 1
        self._last[link] = when
        self.sched.at(when, self._arrive, src, dst, deliver, args, partitionable)

    def _arrive(self, src: str, dst: str, deliver: Callable[..., Any], args: tuple[Any, ...], part: bool) -> None:
        if part and self.cut(src, dst):
            self.dropped += 1
            return
        deliver(*args)
