"""One partition replica on this broker: its log, role, high watermark, last stable offset and,
while leading, the followers' fetch state and the ISR rules (docs/kraft.md §3.2/§3.3/§7; Kafka's
``Partition``/``Replica``).

Pure state: the replica manager turns what these methods report into effects and messages.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .batch import Batch, NewBatch
from .image import PartitionState
from .log import PartitionLog
from .producer_state import ProducerStateManager
from .topic_partition import TopicPartition


class Role(enum.Enum):
    NONE = "none"  # not hosting (offline partition, not a replica, or not registered yet)
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class RemoteReplica:
    """The leader's view of one follower (Kafka's ``Replica``). Times in ns, None = never."""

    broker_id: int
    leo: int | None = None
    last_caught_up: int | None = None
    last_fetch_time: int | None = None
    last_fetch_leader_leo: int | None = None
    broker_epoch: int | None = None

    def update(self, fetch_offset: int, now: int, leader_leo: int, broker_epoch: int | None) -> None:
        """A valid fetch at ``fetch_offset``. ``lastCaughtUpTime`` is this fetch's time if it
        reached the leader's LEO now, else the previous fetch's time if it reached the LEO the
        leader had at that previous fetch."""
        if fetch_offset >= leader_leo:
            self.last_caught_up = now if self.last_caught_up is None else max(self.last_caught_up, now)
        elif (
            self.last_fetch_leader_leo is not None
            and self.last_fetch_time is not None
            and fetch_offset >= self.last_fetch_leader_leo
        ):
            prev = self.last_fetch_time
            self.last_caught_up = prev if self.last_caught_up is None else max(self.last_caught_up, prev)
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_time = now
        self.leo = fetch_offset
        self.broker_epoch = broker_epoch

    def caught_up(self, leader_leo: int, now: int, lag_ns: int) -> bool:
        if self.leo is None:
            return False
        if self.leo == leader_leo:
            return True
        return self.last_caught_up is not None and now - self.last_caught_up <= lag_ns


@dataclass(slots=True)
class PendingIsr:
    """An AlterPartition in flight: the ISR asked for, based on ``partition_epoch``."""

    new_isr: tuple[int, ...]
    partition_epoch: int
    sent_at: int
    correlation: int
    acked: bool = False  # the controller accepted it; cleared when the image applies it

    def is_expand(self, isr: Sequence[int]) -> bool:
        return set(self.new_isr) > set(isr)


class Partition:
    def __init__(self, tp: TopicPartition, node_id: int, log: PartitionLog) -> None:
        self.tp = tp
        self.node_id = node_id
        self.log = log
        self.role = Role.NONE
        self.leader: int | None = None
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.hw = 0
        self.flushed = log.end_offset
        self.flush_inflight: int | None = None
        # truncations become durable with the next flush: count them to know when one is due
        self.truncations = 0
        self.flush_truncations = 0  # truncations covered by the flush in flight
        self.flushed_truncations = 0  # truncations covered by completed flushes
        self.epoch_start_offset = 0
        self.remotes: dict[int, RemoteReplica] = {}
        self.pending_isr: PendingIsr | None = None
        self.led_epoch: int | None = None  # last epoch this broker led in (stale-leader-produce)
        self.fetch_backoff_until: int | None = None  # follower: skip fetching until then
        self._producers: ProducerStateManager | None = None  # rebuilt from the log when needed
        self.producer_window: tuple[int, bool] = (5, False)  # (batches retained, lenient): seeded bug
        self.epoch_fence = True  # False: seeded bug no-epoch-fence
        self.lso_ignores_open = False  # seeded bug lso-ignores-open

    @property
    def producers(self) -> ProducerStateManager:
        """The idempotent producers' state and their open and aborted transactions, rebuilt from
        the log after a role change or truncation."""
        if self._producers is None:
            window, lenient = self.producer_window
            self._producers = ProducerStateManager(window, lenient, fence=self.epoch_fence)
            self._producers.rebuild(self.log.batches)
        return self._producers

    # -- views

    @property
    def leo(self) -> int:
        return self.log.end_offset

    @property
    def last_stable_offset(self) -> int:
        """LSO: the HW, or the first offset of the earliest open transaction if that is lower."""
        if self.lso_ignores_open:
            return self.hw
        first = self.producers.first_unstable_offset()
        return self.hw if first is None else min(self.hw, first)

    def durable_end(self, lazy: bool) -> int:
        """The end offset this replica may count as replicated: flushed, or all with lazy-flush."""
        return self.leo if lazy else min(self.flushed, self.leo)

    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR plus a pending expansion (a pending shrink still counts the old members)."""
        if self.pending_isr is not None and self.pending_isr.is_expand(self.isr):
            return self.pending_isr.new_isr
        return self.isr

    # -- role changes (driven by the metadata image)

    def set_state(self, state: PartitionState) -> None:
        self.replicas, self.isr = state.replicas, state.isr
        self.leader, self.leader_epoch = state.leader, state.leader_epoch
        if state.partition_epoch != self.partition_epoch:
            self.pending_isr = None  # whatever we asked for has been decided
        self.partition_epoch = state.partition_epoch

    def become_leader(self, state: PartitionState, now: int) -> None:
        self.set_state(state)
        self.role = Role.LEADER
        self._producers = None
        self.led_epoch = state.leader_epoch
        self.epoch_start_offset = self.leo
        self.log.assign_epoch(state.leader_epoch)
        self.pending_isr = None
        self.remotes = {
            r: RemoteReplica(r, last_caught_up=now if r in state.isr else None)
            for r in state.replicas
            if r != self.node_id
        }
        self.fetch_backoff_until = None

    def become_follower(self, state: PartitionState) -> None:
        self.set_state(state)
        self.role = Role.FOLLOWER
        self._producers = None
        self.remotes = {}
        self.pending_isr = None
        self.fetch_backoff_until = None

    def become_none(self, state: PartitionState | None) -> None:
        if state is not None:
            self.set_state(state)
        self.role = Role.NONE
        self.remotes = {}
        self.pending_isr = None

    def update_replicas_for_leader(self) -> None:
        """Keep one RemoteReplica per follower after an ISR-only change."""
        for r in self.replicas:
            if r != self.node_id and r not in self.remotes:
                self.remotes[r] = RemoteReplica(r)

    # -- leader side

    def append_as_leader(self, batches: Sequence[NewBatch], epoch: int) -> tuple[Batch, ...]:
        out = []
        for new in batches:
            batch = Batch(self.leo, new.record_count, epoch, bytes(new.data), new.max_timestamp, new.producer)
            self.log.append(batch)
            out.append(batch)
        return tuple(out)

    def maybe_increment_hw(
        self, now: int, lag_ns: int, min_isr: int, lazy: bool, eligible: Callable[[int, int | None], bool]
    ) -> bool:
        """Leader: HW = min LEO over the maximal ISR (plus caught-up eligible replicas), the
        leader counting only its durable end; held while |ISR| < min ISR (KAFKA-15583); never
        decreases. Returns True if it rose."""
        if self.role is not Role.LEADER or len(self.isr) < min_isr:
            return False
        leader_leo = self.leo
        new = self.durable_end(lazy)
        maximal = self.maximal_isr()
        for rid, remote in self.remotes.items():
            if rid in maximal:
                if remote.leo is None:
                    return False
                new = min(new, remote.leo)
            elif remote.caught_up(leader_leo, now, lag_ns) and eligible(rid, remote.broker_epoch):
                new = min(new, remote.leo if remote.leo is not None else new)
        if new > self.hw:
            self.hw = new
            return True
        return False

    def out_of_sync(self, now: int, lag_ns: int) -> tuple[int, ...]:
        """ISR followers that have not caught up within ``lag_ns`` (and whose LEO differs from
        the leader's)."""
        leo = self.leo
        out = []
        for rid in self.isr:
            if rid == self.node_id:
                continue
            remote = self.remotes.get(rid)
            if remote is None or remote.leo == leo:
                continue
            if remote.last_caught_up is None or now - remote.last_caught_up > lag_ns:
                out.append(rid)
        return tuple(out)

    def may_join_isr(self, rid: int, eligible: Callable[[int, int | None], bool]) -> bool:
        """A follower outside the ISR joins once ``LEO >= HW`` and ``LEO >= epoch start``
        (KAFKA-7128) and it is eligible (registered, unfenced, current broker epoch)."""
        remote = self.remotes.get(rid)
        if remote is None or remote.leo is None or rid in self.maximal_isr():
            return False
        if remote.leo < self.hw or remote.leo < self.epoch_start_offset:
            return False
        return eligible(rid, remote.broker_epoch)

    # -- follower side

    def acceptable_prefix(self, batches: Sequence[Batch]) -> tuple[Batch, ...]:
        """The fetched batches that continue this log: contiguous from the LEO, epochs not going
        down and not above the leader's epoch. A stale or malformed chunk keeps its valid prefix."""
        out: list[Batch] = []
        expected = self.leo
        last = self.log.latest_epoch if self.log.latest_epoch is not None else -1
        for batch in batches:
            if batch.base_offset != expected or batch.record_count < 1:
                break
            if batch.leader_epoch < last or batch.leader_epoch > self.leader_epoch:
                break
            out.append(batch)
            expected, last = batch.next_offset, batch.leader_epoch
        return tuple(out)

    def truncate(self, offset: int) -> int:
        """Truncate the log (whole batches); returns the new LEO."""
        end = self.log.truncate(offset)
        self._producers = None
        self.flushed = min(self.flushed, end)
        if self.flush_inflight is not None:
            self.flush_inflight = min(self.flush_inflight, end)
        return end
