"""The group coordinator (classic rebalance protocol, docs/kraft.md §7.1), sans-IO.

Each group lives in one partition of ``__consumer_offsets`` (Java ``hashCode`` of the group id
modulo the partition count); the broker leading that partition is the group's coordinator. It
keeps the groups of the partitions it leads in memory, and writes group metadata (after each
SyncGroup of a new generation) and committed offsets as records of that partition through the
replica manager's append path (origin coordinator, acks=-1). A commit is answered once its
records are replicated; only then does it enter the cache that OffsetFetch reads.

When this broker becomes leader of an offsets partition (a new leader epoch), it replays that
partition's log into the cache and answers COORDINATOR_LOAD_IN_PROGRESS until the high watermark
covers everything it loaded; when it stops leading it, it drops those groups (NOT_COORDINATOR).

Membership: JoinGroup starts (or joins) a rebalance; the join completes when every known member
has rejoined or the rebalance timeout passed (members that did not rejoin are removed); then the
generation goes up and every joiner is answered, the leader with the members' subscriptions. The
leader's SyncGroup carries the assignment, which is written to the log before anyone gets theirs.
Heartbeat, SyncGroup and OffsetCommit from another generation get ILLEGAL_GENERATION, from an
unknown member UNKNOWN_MEMBER_ID; a member silent for its session timeout is removed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..kafka.protocol.schema import BYTES, INT32, INT64, STRING, Array, Struct, decode_struct, encode_struct, kf
from ..kafka.records import decode_batch
from ..raft.config import MS
from ..runtime.primitives import DecodeError, Reader
from . import group_messages as gm
from .coordinator_base import CreateTopic, InternalTopicCoordinator, Load, java_hash, partition_for
from .errors import BrokerError
from .group_messages import OFFSETS_TOPIC
from .producer_state import marker_of
from .topic_partition import TopicPartition

__all__ = ["GroupCoordinator", "java_hash", "offset_record", "partition_for"]

COMMIT_STALE_GENERATION = "commit-stale-generation"
COORDINATOR_NO_RELOAD = "coordinator-no-reload"

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"

# --- records of __consumer_offsets (Kafka's key/value layouts: key version 1 = offset, 2 = group)


@dataclass(slots=True)
class _OffsetKey(Struct):
    group: str = kf(STRING)
    topic: str = kf(STRING)
    partition: int = kf(INT32)


@dataclass(slots=True)
class _GroupKey(Struct):
    group: str = kf(STRING)


@dataclass(slots=True)
class _OffsetValue(Struct):
    offset: int = kf(INT64)
    leader_epoch: int = kf(INT32, default=-1)
    metadata: str = kf(STRING)
    commit_timestamp: int = kf(INT64)


@dataclass(slots=True)
class _MemberValue(Struct):
    member_id: str = kf(STRING)
    group_instance_id: str | None = kf(STRING, nullable="0+", default=None)
    client_id: str = kf(STRING)
    client_host: str = kf(STRING)
    rebalance_timeout: int = kf(INT32)
    session_timeout: int = kf(INT32)
    subscription: bytes = kf(BYTES)
    assignment: bytes = kf(BYTES)


@dataclass(slots=True)
class _GroupValue(Struct):
    protocol_type: str = kf(STRING)
    generation: int = kf(INT32)
    protocol: str | None = kf(STRING, nullable="0+", default=None)
    leader: str | None = kf(STRING, nullable="0+", default=None)
    current_state_timestamp: int = kf(INT64, default=-1)
    members: list[_MemberValue] = kf(Array(_MemberValue))


_OFFSET_KEY_VERSION, _GROUP_KEY_VERSION, _OFFSET_VALUE_VERSION, _GROUP_VALUE_VERSION = 1, 2, 3, 3


def _versioned(version: int, obj: Struct) -> bytes:
    w = encode_struct(obj, 0, False)
    return version.to_bytes(2, "big", signed=True) + bytes(w.getvalue())


def offset_record(group: str, offset: gm.CommitOffset, now_ms: int) -> tuple[bytes, bytes]:
    key = _versioned(_OFFSET_KEY_VERSION, _OffsetKey(group, offset.partition.topic, offset.partition.partition))
    value = _OffsetValue(offset.offset, offset.leader_epoch, offset.metadata, now_ms)
    return key, _versioned(_OFFSET_VALUE_VERSION, value)


# --- state -------------------------------------------------------------------------------------


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    last_seen: int = 0
    join: Callable[[gm.JoinGroupResponse], None] | None = None  # a JoinGroup waiting for the rebalance
    sync: Callable[[gm.SyncGroupResponse], None] | None = None  # a SyncGroup waiting for the assignment

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)  # member ids handed out (v4+ joins) -> expiry
    rebalance_deadline: int | None = None
    offsets: dict[TopicPartition, gm.FetchedOffset] = field(default_factory=dict)
    pending_commits: int = 0
    # offsets committed inside a transaction, per producer id, until its marker (TxnOffsetCommit)
    txn_offsets: dict[int, dict[TopicPartition, gm.FetchedOffset]] = field(default_factory=dict)


class GroupCoordinator(InternalTopicCoordinator):
    """The coordinator of every group whose ``__consumer_offsets`` partition this broker leads.

    ``host`` is the BrokerNode (clock, image, node id, ``replicas``); ``create_topic(request,
    done)`` asks the controller for the offsets topic; answers go to the callbacks each call gets.
    """

    TOPIC = OFFSETS_TOPIC

    def __init__(
        self,
        host: Any,
        bugs: frozenset[str],
        create_topic: CreateTopic,
        *,
        num_partitions: int = 5,
        replication_factor: int = 3,
        min_session_timeout_ms: int = 1_000,
        max_session_timeout_ms: int = 300_000,
    ) -> None:
        super().__init__(host, bugs, create_topic, num_partitions, replication_factor)
        self.min_session_ms = min_session_timeout_ms
        self.max_session_ms = max_session_timeout_ms
        self.groups: dict[str, Group] = {}
        self._member_ids = itertools.count(1)

    # ------------------------------------------------------------------ helpers

    def _status(self, group_id: str) -> BrokerError:
        """NONE if this broker coordinates ``group_id`` and has loaded it, else why not."""
        if not group_id:
            return BrokerError.INVALID_GROUP_ID
        return self._load_status(self.partition_of(group_id))

    def _group(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        return group

    # ------------------------------------------------------------------ FindCoordinator

    def find_coordinator(self, request: gm.FindCoordinatorRequest) -> gm.FindCoordinatorResponse:
        out = []
        for key in request.keys:
            if request.key_type != 0:
                out.append(gm.CoordinatorInfo(key, BrokerError.INVALID_REQUEST))
                continue
            if not key:
                out.append(gm.CoordinatorInfo(key, BrokerError.INVALID_GROUP_ID))
                continue
            out.append(self.locate(key))
        return gm.FindCoordinatorResponse(tuple(out))

    # ------------------------------------------------------------------ JoinGroup

    def join_group(self, request: gm.JoinGroupRequest, respond: Callable[[gm.JoinGroupResponse], None]) -> None:
        error = self._status(request.group_id)
        if error is BrokerError.NONE and not (self.min_session_ms <= request.session_timeout_ms <= self.max_session_ms):
            error = BrokerError.INVALID_SESSION_TIMEOUT
        if error is BrokerError.NONE and (not request.protocol_type or not request.protocols):
            error = BrokerError.INCONSISTENT_GROUP_PROTOCOL
        if error is not BrokerError.NONE:
            respond(gm.JoinGroupResponse(error, member_id=request.member_id))
            return
        group = self._group(request.group_id)
        if group.state == DEAD:  # pragma: no cover - dead groups are removed from the map
            respond(gm.JoinGroupResponse(BrokerError.COORDINATOR_NOT_AVAILABLE, member_id=request.member_id))
            return
        if group.members and (
            request.protocol_type != group.protocol_type or not self._supports_common(group, request.protocols)
        ):
            respond(gm.JoinGroupResponse(BrokerError.INCONSISTENT_GROUP_PROTOCOL, member_id=request.member_id))
            return
        member_id = request.member_id
        if not member_id:
            member_id = f"{request.client_id or 'member'}-{self.host.node_id}-{next(self._member_ids)}"
            if request.require_known_member:
                group.pending[member_id] = self.now + request.session_timeout_ms * MS
                respond(gm.JoinGroupResponse(BrokerError.MEMBER_ID_REQUIRED, member_id=member_id))
                return
        elif member_id not in group.members and member_id not in group.pending:
            respond(gm.JoinGroupResponse(BrokerError.UNKNOWN_MEMBER_ID, member_id=member_id))
            return
        group.pending.pop(member_id, None)
        member = group.members.get(member_id)
        if member is None:
            member = Member(
                member_id,
                request.client_id,
                request.client_host,
                request.session_timeout_ms,
                request.rebalance_timeout_ms if request.rebalance_timeout_ms > 0 else request.session_timeout_ms,
                request.protocol_type,
                request.protocols,
            )
            group.members[member_id] = member
            if group.protocol_type is None or len(group.members) == 1:
                group.protocol_type = request.protocol_type
            changed = True
        else:
            changed = member.protocols != request.protocols or group.state != STABLE or member_id == group.leader
            member.protocols = request.protocols
            member.session_timeout_ms = request.session_timeout_ms
            if request.rebalance_timeout_ms > 0:
                member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if member.join is not None:  # a second join from the same member: the first is superseded
            member.join(gm.JoinGroupResponse(BrokerError.UNKNOWN_MEMBER_ID, member_id=member_id))
        member.join = respond
        member.last_seen = self.now
        if group.state == STABLE and not changed and member_id != group.leader:
            # a follower rejoining with the same subscription: answer with the current generation
            member.join = None
            respond(self._join_answer(group, member))
            return
        if group.state != PREPARING:
            self._prepare_rebalance(group)
        self._maybe_complete_join(group)

    @staticmethod
    def _supports_common(group: Group, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        names = {name for name, _ in protocols}
        common = set.intersection(*({n for n, _ in m.protocols} for m in group.members.values()))
        return bool(names & common)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.state == COMPLETING:  # members waiting in SyncGroup must rejoin
            for member in group.members.values():
                if member.sync is not None:
                    sync, member.sync = member.sync, None
                    sync(gm.SyncGroupResponse(BrokerError.REBALANCE_IN_PROGRESS))
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.state = PREPARING
        group.rebalance_deadline = self.now + timeout * MS

    def _maybe_complete_join(self, group: Group, expired: bool = False) -> None:
        if group.state != PREPARING or group.pending_commits:
            # commits of the ending generation still being replicated: the next generation must
            # see them in OffsetFetch, so the join completes when they are answered
            return
        waiting = [m for m in group.members.values() if m.join is None]
        if waiting and not expired:
            return
        for member in waiting:  # did not rejoin within the rebalance timeout
            del group.members[member.member_id]
        if group.leader not in group.members:
            group.leader = next(iter(group.members), None)
        group.generation += 1
        group.rebalance_deadline = None
        if not group.members:
            group.state = EMPTY
            group.protocol = None
            group.leader = None
            self._write_group(group, lambda error: None)
            return
        group.protocol = self._select_protocol(group)
        group.state = COMPLETING
        for member in group.members.values():
            member.assignment = b""
            join, member.join = member.join, None
            member.last_seen = self.now
            if join is not None:
                join(self._join_answer(group, member))

    def _join_answer(self, group: Group, member: Member) -> gm.JoinGroupResponse:
        members: tuple[tuple[str, bytes], ...] = ()
        if member.member_id == group.leader:
            members = tuple((m.member_id, m.metadata(group.protocol)) for m in group.members.values())
        return gm.JoinGroupResponse(
            BrokerError.NONE,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader or "",
            member.member_id,
            members,
        )

    @staticmethod
    def _select_protocol(group: Group) -> str | None:
        members = list(group.members.values())
        common = [name for name, _ in members[0].protocols if all(name in dict(m.protocols) for m in members)]
        if not common:
            return None
        votes = {name: 0 for name in common}
        for m in members:  # each member votes for its most preferred common protocol
            votes[next(name for name, _ in m.protocols if name in votes)] += 1
        return max(common, key=lambda name: (votes[name], -common.index(name)))

    # ------------------------------------------------------------------ SyncGroup

    def sync_group(self, request: gm.SyncGroupRequest, respond: Callable[[gm.SyncGroupResponse], None]) -> None:
        error = self._status(request.group_id)
        group = self.groups.get(request.group_id)
        member = None if group is None else group.members.get(request.member_id)
        if error is BrokerError.NONE and member is None:
            error = BrokerError.UNKNOWN_MEMBER_ID
        if error is BrokerError.NONE and request.generation != group.generation:  # type: ignore[union-attr]
            error = BrokerError.ILLEGAL_GENERATION
        if error is BrokerError.NONE and group.state == PREPARING:  # type: ignore[union-attr]
            error = BrokerError.REBALANCE_IN_PROGRESS
        if error is not BrokerError.NONE:
            respond(gm.SyncGroupResponse(error))
            return
        assert group is not None and member is not None
        member.last_seen = self.now
        if group.state == STABLE:
            respond(self._sync_answer(group, member))
            return
        member.sync = respond
        if request.member_id != group.leader:
            return
        assignments = dict(request.assignments)
        generation = group.generation
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")

        def written(error: BrokerError) -> None:
            if (
                group.generation != generation
                or group.state != COMPLETING
                or self.groups.get(group.group_id) is not group
            ):
                return
            if error is BrokerError.NONE:
                group.state = STABLE
                for m in group.members.values():
                    if m.sync is not None:
                        sync, m.sync = m.sync, None
                        sync(self._sync_answer(group, m))
                return
            for m in group.members.values():
                m.assignment = b""
                if m.sync is not None:
                    sync, m.sync = m.sync, None
                    sync(gm.SyncGroupResponse(error))
            self._prepare_rebalance(group)

        self._write_group(group, written)

    @staticmethod
    def _sync_answer(group: Group, member: Member) -> gm.SyncGroupResponse:
        return gm.SyncGroupResponse(BrokerError.NONE, member.assignment, group.protocol_type, group.protocol)

    # ------------------------------------------------------------------ Heartbeat / LeaveGroup

    def heartbeat(self, request: gm.HeartbeatRequest) -> gm.HeartbeatResponse:
        error = self._status(request.group_id)
        if error is not BrokerError.NONE:
            return gm.HeartbeatResponse(error)
        group = self.groups.get(request.group_id)
        member = None if group is None else group.members.get(request.member_id)
        if group is None or member is None:
            return gm.HeartbeatResponse(BrokerError.UNKNOWN_MEMBER_ID)
        if request.generation != group.generation:
            return gm.HeartbeatResponse(BrokerError.ILLEGAL_GENERATION)
        member.last_seen = self.now
        if group.state == PREPARING:
            return gm.HeartbeatResponse(BrokerError.REBALANCE_IN_PROGRESS)
        return gm.HeartbeatResponse(BrokerError.NONE)

    def leave_group(self, request: gm.LeaveGroupRequest) -> gm.LeaveGroupResponse:
        error = self._status(request.group_id)
        if error is not BrokerError.NONE:
            return gm.LeaveGroupResponse(error)
        group = self.groups.get(request.group_id)
        results = []
        for member_id in request.member_ids:
            member = None if group is None else group.members.get(member_id)
            if member is None:
                results.append((member_id, BrokerError.UNKNOWN_MEMBER_ID))
                continue
            results.append((member_id, BrokerError.NONE))
            self._remove_member(group, member)  # type: ignore[arg-type]
        top = results[0][1] if len(results) == 1 else BrokerError.NONE
        return gm.LeaveGroupResponse(top, tuple(results))

    def _remove_member(self, group: Group, member: Member) -> None:
        del group.members[member.member_id]
        if member.join is not None:
            join, member.join = member.join, None
            join(gm.JoinGroupResponse(BrokerError.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        if member.sync is not None:
            sync, member.sync = member.sync, None
            sync(gm.SyncGroupResponse(BrokerError.UNKNOWN_MEMBER_ID))
        if group.state in (STABLE, COMPLETING):
            self._prepare_rebalance(group)
        self._maybe_complete_join(group)

    # ------------------------------------------------------------------ offsets

    def commit_offsets(
        self, request: gm.OffsetCommitRequest, respond: Callable[[gm.OffsetCommitResponse], None]
    ) -> None:
        def answer(error: BrokerError) -> None:
            respond(gm.OffsetCommitResponse(tuple((o.partition, error) for o in request.offsets)))

        error = self._status(request.group_id)
        if error is not BrokerError.NONE:
            answer(error)
            return
        group = self._group(request.group_id)
        error = self._commit_fence(group, request)
        if error is not BrokerError.NONE:
            answer(error)
            return
        if request.member_id in group.members:
            group.members[request.member_id].last_seen = self.now
        if not request.offsets:
            answer(BrokerError.NONE)
            return
        now_ms = self.now // MS
        records = [offset_record(group.group_id, o, now_ms) for o in request.offsets]
        group.pending_commits += 1

        def written(error: BrokerError) -> None:
            group.pending_commits -= 1
            if error is BrokerError.NONE and self.groups.get(group.group_id) is group:
                for o in request.offsets:
                    group.offsets[o.partition] = gm.FetchedOffset(o.partition, o.offset, o.leader_epoch, o.metadata)
            answer(error)
            if group.state == PREPARING and group.rebalance_deadline is not None:
                self._maybe_complete_join(group, expired=self.now >= group.rebalance_deadline)

        self._append(group.group_id, records, written)

    def _commit_fence(self, group: Group, request: gm.OffsetCommitRequest) -> BrokerError:
        if COMMIT_STALE_GENERATION in self.bugs:
            return BrokerError.NONE
        if request.generation < 0 and not request.member_id:
            # a commit from outside the group protocol (manual assignment): only while nobody is a member
            return BrokerError.NONE if not group.members else BrokerError.ILLEGAL_GENERATION
        if request.member_id not in group.members:
            return BrokerError.UNKNOWN_MEMBER_ID
        if request.generation != group.generation:
            return BrokerError.ILLEGAL_GENERATION
        if group.state == COMPLETING:
            return BrokerError.REBALANCE_IN_PROGRESS
        return BrokerError.NONE

    def fetch_offsets(self, request: gm.OffsetFetchRequest) -> gm.OffsetFetchResponse:
        error = self._status(request.group_id)
        if error is not BrokerError.NONE:
            return gm.OffsetFetchResponse(error)
        group = self.groups.get(request.group_id)
        known = {} if group is None else group.offsets
        if request.partitions is None:
            return gm.OffsetFetchResponse(BrokerError.NONE, tuple(known[tp] for tp in sorted(known)))
        unstable: set[TopicPartition] = set()
        if request.require_stable and group is not None:
            unstable = {tp for pending in group.txn_offsets.values() for tp in pending}
        return gm.OffsetFetchResponse(
            BrokerError.NONE,
            tuple(
                gm.FetchedOffset(tp, -1, error=BrokerError.UNSTABLE_OFFSET_COMMIT)
                if tp in unstable
                else known.get(tp, gm.FetchedOffset(tp, -1))
                for tp in request.partitions
            ),
        )

    # ------------------------------------------------------------------ transactional offsets

    def txn_commit_offsets(
        self, request: gm.TxnOffsetCommitRequest, respond: Callable[[gm.TxnOffsetCommitResponse], None]
    ) -> None:
        """TxnOffsetCommit: the offsets are written now, as a transactional batch of the
        producer, and applied when its commit marker reaches the group's partition
        (:meth:`on_txn_marker`); an abort marker drops them."""

        def answer(error: BrokerError) -> None:
            respond(gm.TxnOffsetCommitResponse(tuple((o.partition, error) for o in request.offsets)))

        error = self._status(request.group_id)
        if error is not BrokerError.NONE:
            answer(error)
            return
        index = self.partition_of(request.group_id)
        p = self.host.replicas.partitions.get(TopicPartition(OFFSETS_TOPIC, index))  # type: ignore[arg-type]
        entry = None if p is None else p.producers.producers.get(request.producer_id)
        if entry is not None and request.producer_epoch < entry.epoch:
            answer(BrokerError.INVALID_PRODUCER_EPOCH)
            return
        group = self._group(request.group_id)
        if request.generation >= 0 or request.member_id:  # KIP-447 (v3+): fenced like a commit
            fence = gm.OffsetCommitRequest(request.group_id, request.generation, request.member_id, ())
            error = self._commit_fence(group, fence)
            if error is not BrokerError.NONE:
                answer(error)
                return
        if not request.offsets:
            answer(BrokerError.NONE)
            return
        now_ms = self.now // MS
        records = [offset_record(group.group_id, o, now_ms) for o in request.offsets]
        pid = request.producer_id

        def written(error: BrokerError) -> None:
            if error is BrokerError.NONE and self.groups.get(group.group_id) is group:
                pending = group.txn_offsets.setdefault(pid, {})
                for o in request.offsets:
                    pending[o.partition] = gm.FetchedOffset(o.partition, o.offset, o.leader_epoch, o.metadata)
            answer(error)

        self._append(group.group_id, records, written, (pid, request.producer_epoch))

    def on_txn_marker(self, index: int, producer_id: int, commit: bool) -> None:
        """A transaction marker of ``producer_id`` was appended (and replicated) to the offsets
        partition ``index`` led here: its pending offsets take effect (commit) or are dropped."""
        n = self._partition_count()
        if n is not None and index in self.loads:
            self._txn_completed(index, n, producer_id, commit)

    def _txn_completed(self, index: int, n: int, producer_id: int, commit: bool) -> None:
        for group_id, group in self.groups.items():
            if partition_for(group_id, n) != index:
                continue
            pending = group.txn_offsets.pop(producer_id, None)
            if pending and commit:
                group.offsets.update(pending)

    # ------------------------------------------------------------------ ListGroups / DescribeGroups

    def list_groups(self, request: gm.ListGroupsRequest) -> gm.ListGroupsResponse:
        wanted = {s.lower() for s in request.states}
        out = []
        for group_id, group in sorted(self.groups.items()):
            if self._status(group_id) is not BrokerError.NONE:
                continue
            if wanted and group.state.lower() not in wanted:
                continue
            out.append((group_id, group.protocol_type or "", group.state))
        return gm.ListGroupsResponse(BrokerError.NONE, tuple(out))

    def describe_groups(self, request: gm.DescribeGroupsRequest) -> gm.DescribeGroupsResponse:
        out = []
        for group_id in request.group_ids:
            error = self._status(group_id)
            group = self.groups.get(group_id)
            if error is not BrokerError.NONE or group is None:
                state = "Dead" if error is BrokerError.NONE else ""
                out.append(gm.DescribedGroup(group_id, error, state))
                continue
            stable = group.state == STABLE
            members = tuple(
                gm.DescribedMember(
                    m.member_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(group.protocol) if stable else b"",
                    m.assignment if stable else b"",
                )
                for m in group.members.values()
            )
            out.append(
                gm.DescribedGroup(
                    group_id, BrokerError.NONE, group.state, group.protocol_type or "", group.protocol or "", members
                )
            )
        return gm.DescribeGroupsResponse(tuple(out))

    # ------------------------------------------------------------------ the log

    def _group_record(self, group: Group) -> tuple[bytes, bytes]:
        value = _GroupValue(
            group.protocol_type or "",
            group.generation,
            group.protocol,
            group.leader,
            self.now // MS,
            [
                _MemberValue(
                    m.member_id,
                    None,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(group.protocol),
                    m.assignment,
                )
                for m in group.members.values()
            ],
        )
        return _versioned(_GROUP_KEY_VERSION, _GroupKey(group.group_id)), _versioned(_GROUP_VALUE_VERSION, value)

    def _write_group(self, group: Group, done: Callable[[BrokerError], None]) -> None:
        self._append(group.group_id, [self._group_record(group)], done)

    def _append(
        self,
        group_id: str,
        records: list[tuple[bytes, bytes]],
        done: Callable[[BrokerError], None],
        producer: tuple[int, int] | None = None,
    ) -> None:
        index = self.partition_of(group_id)
        if index is None:
            done(BrokerError.COORDINATOR_NOT_AVAILABLE)
            return
        self._append_to(index, records, done, producer)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ leadership, loading, timers

    def poll(self) -> None:
        """Follow leadership of the offsets partitions (load / unload) and expire members."""
        self._follow_leadership()
        self._expire()

    def _unload(self, index: int, n: int) -> None:
        for group_id in [g for g in self.groups if partition_for(g, n) == index]:
            group = self.groups.pop(group_id)
            for member in group.members.values():
                if member.join is not None:
                    join, member.join = member.join, None
                    join(gm.JoinGroupResponse(BrokerError.NOT_COORDINATOR, member_id=member.member_id))
                if member.sync is not None:
                    sync, member.sync = member.sync, None
                    sync(gm.SyncGroupResponse(BrokerError.NOT_COORDINATOR))

    def _load(self, index: int, n: int, p: Any) -> None:
        if COORDINATOR_NO_RELOAD in self.bugs:
            # serves at once from an empty cache: the groups and offsets in the log are not read
            self.loads[index] = Load(p.leader_epoch, 0)
            return
        self.loads[index] = Load(p.leader_epoch, p.leo)
        for batch in p.log.batches:
            marker = marker_of(batch)
            if marker is not None:
                self._txn_completed(index, n, marker.producer_id, marker.commit)
                continue
            try:
                decoded = decode_batch(batch.data)
            except (ValueError, DecodeError):
                continue  # not a coordinator batch
            txn = decoded.producer_id if decoded.is_transactional and not decoded.is_control else None
            for record in decoded.records:
                try:
                    self._replay(record.key, record.value, batch.max_timestamp, txn)
                except (ValueError, DecodeError):
                    continue  # a record of a layout this coordinator does not write
        for group_id, group in self.groups.items():
            if partition_for(group_id, n) == index:
                for member in group.members.values():
                    member.last_seen = self.now

    def _replay(self, key: bytes | None, value: bytes | None, timestamp: int, txn: int | None = None) -> None:
        if key is None or len(key) < 2:
            return
        version = int.from_bytes(key[:2], "big", signed=True)
        reader = Reader(memoryview(key)[2:])
        if version in (0, _OFFSET_KEY_VERSION):
            k = decode_struct(_OffsetKey, reader, 0, False)
            tp = TopicPartition(k.topic, k.partition)
            group = self._group(k.group)
            if value is None:
                group.offsets.pop(tp, None)
                return
            v = decode_struct(_OffsetValue, Reader(memoryview(value)[2:]), 0, False)
            offset = gm.FetchedOffset(tp, v.offset, v.leader_epoch, v.metadata)
            if txn is not None:  # pending until the producer's marker follows in the log
                group.txn_offsets.setdefault(txn, {})[tp] = offset
            else:
                group.offsets[tp] = offset
        elif version == _GROUP_KEY_VERSION:
            k2 = decode_struct(_GroupKey, reader, 0, False)
            group = self._group(k2.group)
            if value is None:
                group.members.clear()
                group.state = EMPTY
                return
            g = decode_struct(_GroupValue, Reader(memoryview(value)[2:]), 0, False)
            group.generation = g.generation
            group.protocol_type = g.protocol_type or None
            group.protocol = g.protocol
            group.leader = g.leader
            group.members = {
                m.member_id: Member(
                    m.member_id,
                    m.client_id,
                    m.client_host,
                    m.session_timeout,
                    m.rebalance_timeout,
                    g.protocol_type,
                    ((g.protocol or "", m.subscription),),
                    m.assignment,
                    self.now,
                )
                for m in g.members
            }
            group.state = STABLE if group.members else EMPTY

    def _expire(self) -> None:
        now = self.now
        for group in list(self.groups.values()):
            for member_id, expiry in list(group.pending.items()):
                if now >= expiry:
                    del group.pending[member_id]
            for member in list(group.members.values()):
                if (
                    member.join is None
                    and member.sync is None
                    and now >= member.last_seen + member.session_timeout_ms * MS
                ):
                    self._remove_member(group, member)
            if group.state == PREPARING and group.rebalance_deadline is not None and now >= group.rebalance_deadline:
                self._maybe_complete_join(group, expired=True)

    def next_deadline(self) -> int | None:
        times: list[int] = []
        for group in self.groups.values():
            times.extend(group.pending.values())
            for m in group.members.values():
                if m.join is None and m.sync is None:
                    times.append(m.last_seen + m.session_timeout_ms * MS)
            if group.state == PREPARING and group.rebalance_deadline is not None and not group.pending_commits:
                times.append(group.rebalance_deadline)
        create = self._create_deadline()
        if create is not None:
            times.append(create)
        return min(times) if times else None
