"""Packet faults on simulated links: loss, delay, duplication and reordering, as tc netem does them.

A `Shaping` applies to node-to-node messages from its `nodes` to its `peers` (the traffic
those nodes send, as netem on their interfaces) and draws from its own random stream, so
the links' latencies are drawn exactly as without it. What a message meets depends on the
link kind, as on real hosts:

- TCP-like links (the default): a lost segment is retransmitted after the RTO (200 ms, then
  twice as long each time), so loss delays the message and everything behind it; a
  duplicate is discarded by the receiving TCP and a reordered segment is put back in order,
  so both are invisible to the nodes, except for the delay a reordering needs;
- datagram links: a lost message is gone, a duplicate is delivered twice, and a reordered
  message skips the queue (sent at once while the others wait out the delay).

Parameters are netem's (Jepsen's defaults when missing, `harness.real.faults.net`); the
correlation and the delay's distribution are not modelled (the jitter is uniform). Each
message's fate is drawn by `harness.real.faults.nfqueue.draw`, the function the real backends'
userspace shaper draws with, so a behaviour means the same on both runtimes.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.nemesis.faults import PACKET_BEHAVIOURS
from harness.real.faults import nfqueue
from harness.sim.engine import MS

RTO_MIN = 200 * MS
RTO_MAX = 120_000 * MS
DEFAULTS = nfqueue.DEFAULTS
COUNTERS = nfqueue.COUNTERS


def behaviours_with_defaults(behaviours: Mapping[str, Mapping[str, Any] | None]) -> dict[str, dict[str, float]]:
    """Every behaviour's parameters, defaults filled in; reorder brings the default delay; unknown names are a
    ValueError."""
    unknown = sorted(set(behaviours) - set(PACKET_BEHAVIOURS))
    if unknown:
        raise ValueError(
            f"unknown packet behaviour(s) {', '.join(unknown)} on the simulator (one of {', '.join(PACKET_BEHAVIOURS)})"
        )
    return nfqueue.with_defaults(behaviours)


@dataclass(frozen=True)
class Fate:
    """What one message meets: lost, extra delay (ns), a duplicate copy's extra delay, out of order."""

    lost: bool = False
    delay: int = 0
    duplicate: int | None = None
    skip_queue: bool = False


class Shaping:
    """Packet behaviours on messages from `nodes` to `peers`."""

    def __init__(
        self,
        behaviours: Mapping[str, Mapping[str, Any] | None],
        nodes: Iterable[str],
        peers: Iterable[str],
        rng: random.Random,
    ) -> None:
        self.behaviours = behaviours_with_defaults(behaviours)
        self.nodes = frozenset(nodes)
        self.peers = frozenset(peers)
        self.rng = rng
        # per sending node: messages that met the fault, and what they met (recorded at stop-packet)
        self.counts: dict[str, dict[str, int]] = {}

    def applies(self, src: str, dst: str) -> bool:
        return src != dst and src in self.nodes and dst in self.peers

    def fate(self, tcp: bool, src: str | None = None) -> Fate:
        """Draw what the next message (from `src`, for the counters) meets."""
        delay, reordered, lost, duplicated = nfqueue.draw(self.behaviours, self.rng)
        if src is not None:
            c = self.counts.setdefault(src, dict.fromkeys(COUNTERS, 0))
            c["packets"] += 1
            c["delayed"] += delay > 0
            c["lost"] += lost
            c["duplicated"] += duplicated
            c["reordered"] += reordered
        if not tcp:
            return Fate(lost, delay, delay + int(self.rng.random() * MS) if duplicated else None, reordered)
        rto = RTO_MIN
        while lost:  # each retransmission may be lost again
            delay += rto
            rto = min(rto * 2, RTO_MAX)
            lost = nfqueue.happens(self.behaviours, "loss", self.rng)
        return Fate(False, delay)
