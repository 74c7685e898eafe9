"""The group coordinator's client calls and answers (core side, like ``messages.py``).

``BrokerNode.group_call(now, request_id, request)`` takes any of the ``*Request`` classes below
and answers with a ``ClientResponse`` carrying the matching ``*Response`` (maybe later: a join
waits for the rebalance, a commit for its replication). The Kafka wire mapping is in
``nodes/runtime/kafkaapi.py``; the simulator's transport builds these directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import BrokerError
from .topic_partition import TopicPartition

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


@dataclass(frozen=True, slots=True)
class FindCoordinatorRequest:
    keys: tuple[str, ...]
    key_type: int = 0  # 0 group, 1 transaction (the transaction coordinator answers)


@dataclass(frozen=True, slots=True)
class CoordinatorInfo:
    key: str
    error: BrokerError
    node_id: int = -1
    host: str = ""
    port: int = -1


@dataclass(frozen=True, slots=True)
class FindCoordinatorResponse:
    coordinators: tuple[CoordinatorInfo, ...]


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    """``require_known_member``: JoinGroup v4+ (KIP-394): an empty member id is answered
    MEMBER_ID_REQUIRED with a fresh id, and the client joins again with it."""

    group_id: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member: bool = False
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error: BrokerError
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, bytes], ...] = ()  # for the leader only: (member id, subscription)


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()  # from the leader only


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error: BrokerError
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation: int
    member_id: str


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: BrokerError


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    member_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: BrokerError
    members: tuple[tuple[str, BrokerError], ...] = ()


@dataclass(frozen=True, slots=True)
class CommitOffset:
    partition: TopicPartition
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    """generation -1 with an empty member id: a commit from outside any group generation
    (accepted only while the group has no members)."""

    group_id: str
    generation: int
    member_id: str
    offsets: tuple[CommitOffset, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    errors: tuple[tuple[TopicPartition, BrokerError], ...]


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    """Offsets committed inside a transaction (KIP-98): written to the group's partition as a
    transactional batch of ``(producer_id, producer_epoch)``; they take effect when the commit
    marker reaches that partition, and are dropped on an abort marker. ``generation`` -1 with an
    empty ``member_id``: no group fencing (TxnOffsetCommit before v3)."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[CommitOffset, ...]
    generation: int = -1
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitResponse:
    errors: tuple[tuple[TopicPartition, BrokerError], ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    """``partitions`` None: every partition the group has an offset for. ``require_stable`` (v7+, KIP-447):
    a partition with a transactional offset commit still pending is answered UNSTABLE_OFFSET_COMMIT."""

    group_id: str
    partitions: tuple[TopicPartition, ...] | None
    require_stable: bool = False


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    partition: TopicPartition
    offset: int  # -1: no committed offset
    leader_epoch: int = -1
    metadata: str = ""
    error: BrokerError = BrokerError.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error: BrokerError
    offsets: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class ListGroupsRequest:
    states: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ListGroupsResponse:
    error: BrokerError
    groups: tuple[tuple[str, str, str], ...] = ()  # (group id, protocol type, state)


@dataclass(frozen=True, slots=True)
class DescribeGroupsRequest:
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: BrokerError
    state: str = "Dead"
    protocol_type: str = ""
    protocol_name: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]


GROUP_REQUESTS = (
    FindCoordinatorRequest,
    JoinGroupRequest,
    SyncGroupRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ListGroupsRequest,
    DescribeGroupsRequest,
)
