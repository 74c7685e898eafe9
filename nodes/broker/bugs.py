"""The seeded broker bugs (DESIGN.md "Seeded bugs") this package reacts to.

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
* ``no-epoch-fence``: a partition leader accepts a batch whose producer epoch is older than the
  producer's (a zombie of a fenced transactional producer still appends, and its write opens a
  transaction on the partition that the producer's next one joins or that holds the LSO back).
* ``lso-ignores-open``: the last stable offset is the high watermark even while a transaction is
  open, so read_committed consumers read records that are later aborted (aborted reads).
* ``marker-partial`` (``txn_coordinator.py``): the coordinator completes a transaction once the
  first partition's marker is written, and the other partitions' markers are not sent again.
* ``lazy-flush`` (shared with the raft core): partition-log writes count as replicated and are
  acknowledged before they are flushed; flushes run only every ``lazy_flush_interval_ms``.
"""

from __future__ import annotations

from ..raft.bugs import LAZY_FLUSH

HW_FROM_LEADER = "hw-from-leader"
NO_TRUNCATE = "no-truncate"
STALE_LEADER_PRODUCE = "stale-leader-produce"
DEDUP_WINDOW_1 = "dedup-window-1"
NO_EPOCH_FENCE = "no-epoch-fence"
LSO_IGNORES_OPEN = "lso-ignores-open"
PRODUCER_STATE_BUGS = frozenset({NO_EPOCH_FENCE, LSO_IGNORES_OPEN})  # a partition's ProducerStateManager's

__all__ = [
    "DEDUP_WINDOW_1",
    "HW_FROM_LEADER",
    "LAZY_FLUSH",
    "LSO_IGNORES_OPEN",
    "NO_EPOCH_FENCE",
    "NO_TRUNCATE",
    "PRODUCER_STATE_BUGS",
    "STALE_LEADER_PRODUCE",
]
