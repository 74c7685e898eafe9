"""The seeded broker bugs (docs/design.md "Seeded bugs") this package reacts to.

* ``hw-from-leader``: an acks=-1 produce is answered once the leader's own append is durable,
  as for acks=1, instead of when the high watermark covers it.
* ``no-truncate``: a follower never truncates: it fetches without ``last_fetched_epoch`` (so the
  leader never reports a diverging epoch) and ignores OFFSET_OUT_OF_RANGE, keeping a divergent
  suffix after a leader change and reporting its whole log end as replicated.
* ``stale-leader-produce``: a broker that has led a partition keeps accepting produce for it
  after the metadata moved leadership away (or fenced it), appending at its old epoch.
* ``dedup-window-1``: a partition leader remembers only each idempotent producer's last batch,
  and takes an older batch it does not recognise for one whose state is gone (accepted at any
  sequence), so a batch retried after a newer one was appended is appended twice.
* ``commit-stale-generation``: the group coordinator accepts an offset commit from a fenced
  generation or an unknown member (``group_coordinator.py``).
* ``coordinator-no-reload``: a broker that becomes leader of a ``__consumer_offsets`` partition
  serves its groups at once from an empty cache instead of replaying the partition's log first,
  so the groups' committed offsets (and generations) are lost when a coordinator moves.
* ``marker-partial``: the transaction coordinator logs a transaction complete once the first
  partition's marker is written and never sends the others (``txn_coordinator.py``): those
  partitions keep the producer's transaction open, its next transaction joins it, and an abort
  of that one takes the committed records with it (a committed transaction seen in part).
* ``lso-ignores-open``: a partition's last stable offset is its high watermark even while a
  transaction is open, so read_committed consumers read records before their commit or abort
  (aborted reads).
* ``no-epoch-fence``: a partition leader accepts batches (and markers) of a producer epoch older
  than the producer's current one: a fenced zombie can still append, and its records join the
  new instance's transaction.
* ``lazy-flush`` (shared with the raft core): partition-log writes count as replicated and are
  acknowledged before they are flushed; flushes run only every ``lazy_flush_interval_ms``.
"""

from __future__ import annotations

from ..raft.bugs import LAZY_FLUSH

HW_FROM_LEADER = "hw-from-leader"
NO_TRUNCATE = "no-truncate"
STALE_LEADER_PRODUCE = "stale-leader-produce"
DEDUP_WINDOW_1 = "dedup-window-1"
MARKER_PARTIAL = "marker-partial"
LSO_IGNORES_OPEN = "lso-ignores-open"
NO_EPOCH_FENCE = "no-epoch-fence"

__all__ = [
    "DEDUP_WINDOW_1",
    "HW_FROM_LEADER",
    "LAZY_FLUSH",
    "LSO_IGNORES_OPEN",
    "MARKER_PARTIAL",
    "NO_EPOCH_FENCE",
    "NO_TRUNCATE",
    "STALE_LEADER_PRODUCE",
]
