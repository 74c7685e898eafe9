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
* ``lazy-flush`` (shared with the raft core): partition-log writes count as replicated and are
  acknowledged before they are flushed; flushes run only every ``lazy_flush_interval_ms``.
"""

from __future__ import annotations

from ..raft.bugs import LAZY_FLUSH

HW_FROM_LEADER = "hw-from-leader"
NO_TRUNCATE = "no-truncate"
STALE_LEADER_PRODUCE = "stale-leader-produce"
DEDUP_WINDOW_1 = "dedup-window-1"

__all__ = ["DEDUP_WINDOW_1", "HW_FROM_LEADER", "LAZY_FLUSH", "NO_TRUNCATE", "STALE_LEADER_PRODUCE"]
