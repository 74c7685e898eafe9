"""The group coordinator's APIs (classic protocol), at the versions of Kafka 3.0:
FindCoordinator (10) 0-4, JoinGroup (11) 0-7, Heartbeat (12) 0-4, LeaveGroup (13) 0-4,
SyncGroup (14) 0-5, DescribeGroups (15) 0-5, ListGroups (16) 0-4, OffsetCommit (8) 2-8,
OffsetFetch (9) 1-8."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..versions import ApiKey
from .schema import BOOL, BYTES, INT8, INT16, INT32, INT64, STRING, Array, Message, Struct, kf

__all__ = [
    "Coordinator",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribedGroup",
    "DescribedGroupMember",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupRequest",
    "JoinGroupRequestProtocol",
    "JoinGroupResponse",
    "JoinGroupResponseMember",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "LeaveMemberResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListedGroup",
    "MemberIdentity",
    "OffsetCommitRequest",
    "OffsetCommitRequestPartition",
    "OffsetCommitRequestTopic",
    "OffsetCommitResponse",
    "OffsetCommitResponsePartition",
    "OffsetCommitResponseTopic",
    "OffsetFetchRequest",
    "OffsetFetchRequestGroup",
    "OffsetFetchRequestTopic",
    "OffsetFetchResponse",
    "OffsetFetchResponseGroup",
    "OffsetFetchResponsePartition",
    "OffsetFetchResponseTopic",
    "SyncGroupRequest",
    "SyncGroupRequestAssignment",
    "SyncGroupResponse",
]

AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)

# --- FindCoordinator --------------------------------------------------------------------------


@dataclass(slots=True)
class FindCoordinatorRequest(Message):
    """``key`` (v0-3) or ``coordinator_keys`` (v4+, KIP-699); key type 0 = group, 1 = transaction."""

    API_KEY: ClassVar[int] = ApiKey.FIND_COORDINATOR
    IS_REQUEST: ClassVar[bool] = True

    key: str = kf(STRING, "0-3")
    key_type: int = kf(INT8, "1+")
    coordinator_keys: list[str] = kf(Array(STRING), "4+")

    def keys(self, version: int) -> list[str]:
        return list(self.coordinator_keys) if version >= 4 else [self.key]


@dataclass(slots=True)
class Coordinator(Struct):
    key: str = kf(STRING, "4+")
    node_id: int = kf(INT32, "4+")
    host: str = kf(STRING, "4+")
    port: int = kf(INT32, "4+")
    error_code: int = kf(INT16, "4+")
    error_message: str | None = kf(STRING, "4+", nullable="4+", default=None)


@dataclass(slots=True)
class FindCoordinatorResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.FIND_COORDINATOR
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "1+")
    error_code: int = kf(INT16, "0-3")
    error_message: str | None = kf(STRING, "1-3", nullable="1-3", default=None)
    node_id: int = kf(INT32, "0-3", default=-1)
    host: str = kf(STRING, "0-3")
    port: int = kf(INT32, "0-3", default=-1)
    coordinators: list[Coordinator] = kf(Array(Coordinator), "4+")


# --- JoinGroup --------------------------------------------------------------------------------


@dataclass(slots=True)
class JoinGroupRequestProtocol(Struct):
    name: str = kf(STRING)
    metadata: bytes = kf(BYTES)


@dataclass(slots=True)
class JoinGroupRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.JOIN_GROUP
    IS_REQUEST: ClassVar[bool] = True

    group_id: str = kf(STRING)
    session_timeout_ms: int = kf(INT32)
    rebalance_timeout_ms: int = kf(INT32, "1+", default=-1)
    member_id: str = kf(STRING)
    group_instance_id: str | None = kf(STRING, "5+", nullable="5+", default=None)
    protocol_type: str = kf(STRING)
    protocols: list[JoinGroupRequestProtocol] = kf(Array(JoinGroupRequestProtocol))


@dataclass(slots=True)
class JoinGroupResponseMember(Struct):
    member_id: str = kf(STRING)
    group_instance_id: str | None = kf(STRING, "5+", nullable="5+", default=None)
    metadata: bytes = kf(BYTES)


@dataclass(slots=True)
class JoinGroupResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.JOIN_GROUP
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "2+")
    error_code: int = kf(INT16)
    generation_id: int = kf(INT32, default=-1)
    protocol_type: str | None = kf(STRING, "7+", nullable="7+", default=None)
    protocol_name: str | None = kf(STRING, nullable="7+", default="")
    leader: str = kf(STRING)
    member_id: str = kf(STRING)
    members: list[JoinGroupResponseMember] = kf(Array(JoinGroupResponseMember))


# --- SyncGroup --------------------------------------------------------------------------------


@dataclass(slots=True)
class SyncGroupRequestAssignment(Struct):
    member_id: str = kf(STRING)
    assignment: bytes = kf(BYTES)


@dataclass(slots=True)
class SyncGroupRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.SYNC_GROUP
    IS_REQUEST: ClassVar[bool] = True

    group_id: str = kf(STRING)
    generation_id: int = kf(INT32)
    member_id: str = kf(STRING)
    group_instance_id: str | None = kf(STRING, "3+", nullable="3+", default=None)
    protocol_type: str | None = kf(STRING, "5+", nullable="5+", default=None)
    protocol_name: str | None = kf(STRING, "5+", nullable="5+", default=None)
    assignments: list[SyncGroupRequestAssignment] = kf(Array(SyncGroupRequestAssignment))


@dataclass(slots=True)
class SyncGroupResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.SYNC_GROUP
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "1+")
    error_code: int = kf(INT16)
    protocol_type: str | None = kf(STRING, "5+", nullable="5+", default=None)
    protocol_name: str | None = kf(STRING, "5+", nullable="5+", default=None)
    assignment: bytes = kf(BYTES)


# --- Heartbeat --------------------------------------------------------------------------------


@dataclass(slots=True)
class HeartbeatRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.HEARTBEAT
    IS_REQUEST: ClassVar[bool] = True

    group_id: str = kf(STRING)
    generation_id: int = kf(INT32)
    member_id: str = kf(STRING)
    group_instance_id: str | None = kf(STRING, "3+", nullable="3+", default=None)


@dataclass(slots=True)
class HeartbeatResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.HEARTBEAT
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "1+")
    error_code: int = kf(INT16)


# --- LeaveGroup -------------------------------------------------------------------------------


@dataclass(slots=True)
class MemberIdentity(Struct):
    member_id: str = kf(STRING, "3+")
    group_instance_id: str | None = kf(STRING, "3+", nullable="3+", default=None)


@dataclass(slots=True)
class LeaveGroupRequest(Message):
    """``member_id`` (v0-2) or a batch of ``members`` (v3+)."""

    API_KEY: ClassVar[int] = ApiKey.LEAVE_GROUP
    IS_REQUEST: ClassVar[bool] = True

    group_id: str = kf(STRING)
    member_id: str = kf(STRING, "0-2")
    members: list[MemberIdentity] = kf(Array(MemberIdentity), "3+")


@dataclass(slots=True)
class LeaveMemberResponse(Struct):
    member_id: str = kf(STRING, "3+")
    group_instance_id: str | None = kf(STRING, "3+", nullable="3+", default=None)
    error_code: int = kf(INT16, "3+")


@dataclass(slots=True)
class LeaveGroupResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.LEAVE_GROUP
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "1+")
    error_code: int = kf(INT16)
    members: list[LeaveMemberResponse] = kf(Array(LeaveMemberResponse), "3+")


# --- ListGroups / DescribeGroups --------------------------------------------------------------


@dataclass(slots=True)
class ListGroupsRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.LIST_GROUPS
    IS_REQUEST: ClassVar[bool] = True

    states_filter: list[str] = kf(Array(STRING), "4+")


@dataclass(slots=True)
class ListedGroup(Struct):
    group_id: str = kf(STRING)
    protocol_type: str = kf(STRING)
    group_state: str = kf(STRING, "4+")


@dataclass(slots=True)
class ListGroupsResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.LIST_GROUPS
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "1+")
    error_code: int = kf(INT16)
    groups: list[ListedGroup] = kf(Array(ListedGroup))


@dataclass(slots=True)
class DescribeGroupsRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.DESCRIBE_GROUPS
    IS_REQUEST: ClassVar[bool] = True

    groups: list[str] = kf(Array(STRING))
    include_authorized_operations: bool = kf(BOOL, "3+")


@dataclass(slots=True)
class DescribedGroupMember(Struct):
    member_id: str = kf(STRING)
    group_instance_id: str | None = kf(STRING, "4+", nullable="4+", default=None)
    client_id: str = kf(STRING)
    client_host: str = kf(STRING)
    member_metadata: bytes = kf(BYTES)
    member_assignment: bytes = kf(BYTES)


@dataclass(slots=True)
class DescribedGroup(Struct):
    error_code: int = kf(INT16)
    group_id: str = kf(STRING)
    group_state: str = kf(STRING)
    protocol_type: str = kf(STRING)
    protocol_data: str = kf(STRING)
    members: list[DescribedGroupMember] = kf(Array(DescribedGroupMember))
    authorized_operations: int = kf(INT32, "3+", default=AUTHORIZED_OPERATIONS_OMITTED)


@dataclass(slots=True)
class DescribeGroupsResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.DESCRIBE_GROUPS
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "1+")
    groups: list[DescribedGroup] = kf(Array(DescribedGroup))


# --- OffsetCommit -----------------------------------------------------------------------------


@dataclass(slots=True)
class OffsetCommitRequestPartition(Struct):
    partition_index: int = kf(INT32)
    committed_offset: int = kf(INT64)
    committed_leader_epoch: int = kf(INT32, "6+", default=-1)
    committed_metadata: str | None = kf(STRING, nullable="0+", default="")


@dataclass(slots=True)
class OffsetCommitRequestTopic(Struct):
    name: str = kf(STRING)
    partitions: list[OffsetCommitRequestPartition] = kf(Array(OffsetCommitRequestPartition))


@dataclass(slots=True)
class OffsetCommitRequest(Message):
    """generation -1 and an empty member id: a commit from outside any group (manual assignment)."""

    API_KEY: ClassVar[int] = ApiKey.OFFSET_COMMIT
    IS_REQUEST: ClassVar[bool] = True

    group_id: str = kf(STRING)
    generation_id_or_member_epoch: int = kf(INT32, "1+", default=-1)
    member_id: str = kf(STRING, "1+")
    group_instance_id: str | None = kf(STRING, "7+", nullable="7+", default=None)
    retention_time_ms: int = kf(INT64, "2-4", default=-1)
    topics: list[OffsetCommitRequestTopic] = kf(Array(OffsetCommitRequestTopic))


@dataclass(slots=True)
class OffsetCommitResponsePartition(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)


@dataclass(slots=True)
class OffsetCommitResponseTopic(Struct):
    name: str = kf(STRING)
    partitions: list[OffsetCommitResponsePartition] = kf(Array(OffsetCommitResponsePartition))


@dataclass(slots=True)
class OffsetCommitResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.OFFSET_COMMIT
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "3+")
    topics: list[OffsetCommitResponseTopic] = kf(Array(OffsetCommitResponseTopic))


# --- OffsetFetch ------------------------------------------------------------------------------


@dataclass(slots=True)
class OffsetFetchRequestTopic(Struct):
    name: str = kf(STRING)
    partition_indexes: list[int] = kf(Array(INT32))


@dataclass(slots=True)
class OffsetFetchRequestGroup(Struct):
    group_id: str = kf(STRING, "8+")
    topics: list[OffsetFetchRequestTopic] | None = kf(Array(OffsetFetchRequestTopic), "8+", nullable="8+")


@dataclass(slots=True)
class OffsetFetchRequest(Message):
    """One group (v1-7: ``group_id``, ``topics``; None = every topic, v2+) or several (v8+)."""

    API_KEY: ClassVar[int] = ApiKey.OFFSET_FETCH
    IS_REQUEST: ClassVar[bool] = True

    group_id: str = kf(STRING, "0-7")
    topics: list[OffsetFetchRequestTopic] | None = kf(Array(OffsetFetchRequestTopic), "0-7", nullable="2-7")
    groups: list[OffsetFetchRequestGroup] = kf(Array(OffsetFetchRequestGroup), "8+")
    require_stable: bool = kf(BOOL, "7+")


@dataclass(slots=True)
class OffsetFetchResponsePartition(Struct):
    partition_index: int = kf(INT32)
    committed_offset: int = kf(INT64, default=-1)
    committed_leader_epoch: int = kf(INT32, "5+", default=-1)
    metadata: str | None = kf(STRING, nullable="0+", default="")
    error_code: int = kf(INT16)


@dataclass(slots=True)
class OffsetFetchResponseTopic(Struct):
    name: str = kf(STRING)
    partitions: list[OffsetFetchResponsePartition] = kf(Array(OffsetFetchResponsePartition))


@dataclass(slots=True)
class OffsetFetchResponseGroup(Struct):
    group_id: str = kf(STRING, "8+")
    topics: list[OffsetFetchResponseTopic] = kf(Array(OffsetFetchResponseTopic), "8+")
    error_code: int = kf(INT16, "8+")


@dataclass(slots=True)
class OffsetFetchResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.OFFSET_FETCH
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32, "3+")
    topics: list[OffsetFetchResponseTopic] = kf(Array(OffsetFetchResponseTopic), "0-7")
    error_code: int = kf(INT16, "2-7")
    groups: list[OffsetFetchResponseGroup] = kf(Array(OffsetFetchResponseGroup), "8+")
