"""Randomised election timeouts and the two election backoffs (docs/kraft.md §1.1, §1.4), in ns.

All randomness comes from the ``random.Random`` the driver gives the node, so a seeded simulator
replays the same timeouts.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from .config import ELECTION_BACKOFF_BASE_MS, MS, RaftConfig


def election_timeout(config: RaftConfig, rng: random.Random) -> int:
    """Uniform in ``[T, 2T)`` ms, returned in ns."""
    t = config.election_timeout_ms
    return rng.randrange(t, 2 * t) * MS


def fetch_timeout(config: RaftConfig, rng: random.Random) -> int:
    """Uniform in ``[F/2, F)`` for ``F = fetch.timeout.ms``, in ns.

    A deliberate departure from Kafka, whose followers all wait exactly ``F``: followers that last
    heard from a dead leader in the same fetch round would otherwise time out together, all stand
    at once and split the vote, costing a whole extra election round. ``F/2`` stays well above
    the longest a healthy follower goes without a fetch response (the leader answers a parked
    fetch within ``fetch_max_wait_ms``).
    """
    f = config.fetch_timeout_ms
    return int(f * (0.5 + 0.5 * rng.random())) * MS


def binary_exponential_backoff(config: RaftConfig, rng: random.Random, retries: int) -> int:
    """``min(100 ms * U{0 .. 2**retries - 1}, election.backoff.max.ms)`` in ns (retries >= 1)."""
    retries = max(1, min(retries, 30))
    return min(ELECTION_BACKOFF_BASE_MS * rng.randrange(1 << retries), config.election_backoff_max_ms) * MS


def strict_exponential_backoff(config: RaftConfig, node_id: int, preferred: Sequence[int]) -> int:
    """Delay before a follower stands after its leader's EndQuorumEpoch, in ns.

    Position 0 in ``preferred`` stands at once; a node not in the list waits the maximum;
    position ``p`` waits ``(max >> (n - 1)) << (p - 1)``.
    """
    cap = config.election_backoff_max_ms
    if node_id not in preferred:
        return cap * MS
    p = list(preferred).index(node_id)
    if p == 0:
        return 0
    n = len(preferred)
    return ((cap >> (n - 1)) << (p - 1)) * MS


def next_lazy_flush(now: int, interval_ns: int) -> int:
    """When the ``lazy-flush`` bug's timer fires next: the first multiple of the interval after ``now``.

    Phased by the clock, not by when the process started, so every node flushes at the same instants and
    a replay can start its main phase in the phase a simulated run had (``kraftwerk replay``)."""
    return (now // interval_ns + 1) * interval_ns
