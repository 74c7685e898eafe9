"""The follower side of replication: one fetch session per leader broker (Kafka's
``ReplicaFetcherThread``), pull-based.

For every leader this broker follows partitions of, at most one ``FetchRecordsRequest`` is in
flight. A follower flushes what it appended before its next fetch (its fetch offset is its
acknowledgement, so it must be durable) unless ``lazy-flush`` is on. Responses append batches,
move the follower's HW, or truncate on a diverging epoch; errors back the partition off for
``replica.fetch.backoff.ms`` until the metadata names a new leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..raft.config import MS
from . import bugs as B
from .errors import BrokerError
from .log import NO_EPOCH
from .messages import FetchedPartition, FetchPartition, FetchRecordsRequest, FetchRecordsResponse
from .partition import Partition, Role
from .topic_partition import TopicPartition

if TYPE_CHECKING:
    from .replica_manager import ReplicaManager


@dataclass(slots=True)
class _Session:
    leader: int
    correlation: int | None = None  # of the request in flight
    deadline: int = 0  # when to give up on it
    epochs: dict[TopicPartition, int] = field(default_factory=dict)  # leader epoch per requested partition


class ReplicaFetcher:
    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm
        self.sessions: dict[int, _Session] = {}
        self._ordered: list[Partition] = []  # rm.partitions by partition (partitions are only ever added)
        self._by_leader: dict[int, list[Partition]] = {}
        self._by_leader_version = -1  # rm.leadership_version that _by_leader was computed at
        # Every followed leader had a fetch in flight at the end of the last poll: until the leadership
        # changes (this version), a response arrives (on_response clears it) or the first of those fetches
        # times out (this time; None: nothing followed), poll has nothing to do and next_deadline is that time.
        self._quiet: tuple[int, int | None] | None = None

    def _followed(self) -> dict[int, list[Partition]]:
        """The partitions this broker follows, by leader (in partition order; not to be mutated)."""
        if self._by_leader_version == self.rm.leadership_version:
            return self._by_leader
        partitions = self.rm.partitions
        ordered = self._ordered
        if len(ordered) != len(partitions):
            ordered = self._ordered = [partitions[tp] for tp in sorted(partitions)]
        by_leader: dict[int, list[Partition]] = {}
        follower = Role.FOLLOWER
        for p in ordered:
            if p.role is follower and p.leader is not None:
                by_leader.setdefault(p.leader, []).append(p)
        self._by_leader = by_leader
        self._by_leader_version = self.rm.leadership_version
        return by_leader

    def _waiting_for_flush(self, p: Partition) -> bool:
        if self.rm.lazy:
            return False
        return p.flushed < p.leo or p.flushed_truncations < p.truncations

    def poll(self, now: int) -> None:
        """Send a fetch to every leader that has none in flight (and time out lost ones)."""
        quiet = self._quiet
        if quiet is not None and quiet[0] == self.rm.leadership_version and (quiet[1] is None or now < quiet[1]):
            return
        self._quiet = None
        host = self.rm.host
        config = self.rm.config
        broker_epoch = host.broker_epoch()
        followed = self._followed()
        for leader in list(self.sessions):
            if leader not in followed:
                del self.sessions[leader]
        if broker_epoch is None:
            return
        no_truncate = B.NO_TRUNCATE in self.rm.bugs
        for leader, parts in followed.items():
            session = self.sessions.setdefault(leader, _Session(leader))
            if session.correlation is not None:
                if now < session.deadline:
                    continue
                session.correlation = None  # lost request or response: send again
            if any(self._waiting_for_flush(p) for p in parts):
                continue  # flushed() will call poll again
            ready = [p for p in parts if p.fetch_backoff_until is None or now >= p.fetch_backoff_until]
            if not ready:
                continue
            for p in ready:
                p.fetch_backoff_until = None
            wanted = tuple(
                FetchPartition(
                    p.tp,
                    p.leo,
                    config.replica_fetch_max_bytes,
                    p.leader_epoch,
                    None if no_truncate else p.log.latest_epoch,
                )
                for p in ready
            )
            correlation = host.next_correlation()
            request = FetchRecordsRequest(
                wanted,
                replica_id=self.rm.node_id,
                broker_epoch=broker_epoch,
                max_wait_ms=config.replica_fetch_wait_max_ms,
                min_bytes=config.replica_fetch_min_bytes,
                max_bytes=config.replica_fetch_response_max_bytes,
                correlation=correlation,
            )
            session.correlation = correlation
            session.deadline = now + (config.replica_fetch_wait_max_ms + config.request_timeout_ms) * MS
            session.epochs = {p.tp: p.leader_epoch for p in ready}
            host.send(leader, request)
        deadlines = []
        for leader in followed:
            session = self.sessions.get(leader)
            if session is None or session.correlation is None:
                return
            deadlines.append(session.deadline)
        self._quiet = (self.rm.leadership_version, min(deadlines) if deadlines else None)

    def on_response(self, src: int, response: FetchRecordsResponse) -> None:
        session = self.sessions.get(src)
        if session is None or session.correlation != response.correlation:
            return  # stale: a newer request superseded it, or we stopped following src
        session.correlation = None
        self._quiet = None
        if response.error is not BrokerError.NONE:  # the request itself refused: back off all it asked for
            until = self.rm.host.now + self.rm.config.replica_fetch_backoff_ms * MS
            for tp, epoch in session.epochs.items():
                p = self.rm.partitions.get(tp)
                if p is not None and p.role is Role.FOLLOWER and p.leader == src and p.leader_epoch == epoch:
                    p.fetch_backoff_until = until
            return
        for result in response.partitions:
            p = self.rm.partitions.get(result.partition)
            if p is None or p.role is not Role.FOLLOWER or p.leader != src:
                continue
            if session.epochs.get(result.partition) != p.leader_epoch:
                continue  # the partition's leadership changed while the fetch was out
            self._handle(p, result)

    def _handle(self, p: Partition, result: FetchedPartition) -> None:
        rm = self.rm
        now = rm.host.now
        no_truncate = B.NO_TRUNCATE in rm.bugs
        if result.error is BrokerError.NONE:
            if result.diverging_epoch is not None:
                if no_truncate:
                    return
                epoch, end = result.diverging_epoch
                local_epoch, local_end = p.log.end_offset_for_epoch(epoch)
                target = 0 if local_epoch == NO_EPOCH else min(local_end, end)
                rm.follower_truncate(p, target, f"diverging epoch {epoch} ending at {end}")
                return
            rm.follower_append(p, result.batches)
            rm.follower_high_watermark(p, result.high_watermark)
            return
        if result.error is BrokerError.OFFSET_OUT_OF_RANGE and not no_truncate:
            leader_end = result.log_end_offset
            if 0 <= leader_end < p.leo:
                rm.follower_truncate(p, leader_end, f"offset out of range, leader log end {leader_end}")
                return
        p.fetch_backoff_until = now + rm.config.replica_fetch_backoff_ms * MS

    def next_deadline(self) -> int | None:
        """When :meth:`poll` next has work on its own: a fetch timing out, or the end of the
        backoff of a leader's partitions. (Flushes and responses arrive as inputs.)"""
        now = self.rm.host.now
        quiet = self._quiet
        if quiet is not None and quiet[0] == self.rm.leadership_version and (quiet[1] is None or now < quiet[1]):
            return quiet[1]
        times: list[int] = []
        for leader, parts in self._followed().items():
            session = self.sessions.get(leader)
            if session is not None and session.correlation is not None:
                times.append(session.deadline)
            elif not any(self._waiting_for_flush(p) for p in parts):
                backoffs = [p.fetch_backoff_until for p in parts if p.fetch_backoff_until is not None]
                if len(backoffs) == len(parts):
                    times.append(min(backoffs))
        due = [t for t in times if t > now]
        return min(due) if due else None
