"""Seeded bug names (docs/design.md "Seeded bugs") and validation of a node's ``bugs`` set.

Each name turns on one known-wrong behaviour. The raft core reacts to the raft ones, the register
state machine to ``stale-read``; the broker bugs are accepted here (a node gets the whole ``--bug``
list) and ignored by this package. ``skip-crc`` is a storage bug: the drivers' recovery
(``records.recover``, ``broker.batch.recover_batches``) trusts the log without checking CRCs.

``lease-wall-clock`` turns leader leases on (``RaftConfig.lease_reads``) and measures them on the
clock the timers read (``now``: the wall clock under ``clock.source=wall``) instead of the
monotonic one: a step back of the old leader's wall clock (a negative bump, or the reset after a
positive one) stretches its lease past the election of the next leader, and it answers stale
reads (linearizability); without clock faults it is as correct as the monotonic lease.
"""

from __future__ import annotations

from collections.abc import Iterable

FORGET_VOTE = "forget-vote"
RESTART_AS_LEADER = "restart-as-leader"
VOTE_IGNORES_LOG = "vote-ignores-log"
STALE_READ = "stale-read"
COMMIT_OLD_EPOCH = "commit-old-epoch"
LAZY_FLUSH = "lazy-flush"
LEASE_WALL_CLOCK = "lease-wall-clock"

RAFT_BUGS = frozenset(
    {FORGET_VOTE, RESTART_AS_LEADER, VOTE_IGNORES_LOG, COMMIT_OLD_EPOCH, LAZY_FLUSH, LEASE_WALL_CLOCK}
)
KV_BUGS = frozenset({STALE_READ})
BROKER_BUGS = frozenset({"hw-from-leader", "no-truncate", "stale-leader-produce", "dedup-window-1"})
# the group coordinator's (nodes/broker/group_coordinator.py)
GROUP_BUGS = frozenset({"commit-stale-generation", "coordinator-no-reload"})
# transactions: the transaction coordinator's and the partitions' (nodes/broker/bugs.py)
TXN_BUGS = frozenset({"marker-partial", "lso-ignores-open", "no-epoch-fence"})
SKIP_CRC = "skip-crc"
STORAGE_BUGS = frozenset({SKIP_CRC})
ALL_BUGS = RAFT_BUGS | KV_BUGS | BROKER_BUGS | GROUP_BUGS | TXN_BUGS | STORAGE_BUGS


def validate_bugs(bugs: Iterable[str]) -> frozenset[str]:
    """Return ``bugs`` as a frozenset; raise ValueError naming any unknown bug."""
    result = frozenset(bugs)
    unknown = sorted(result - ALL_BUGS)
    if unknown:
        raise ValueError(f"unknown bug name(s) {unknown}; known: {sorted(ALL_BUGS)}")
    return result
