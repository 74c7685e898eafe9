"""The group coordinator's Kafka APIs mapped to the broker core (sans-IO, like ``kafkaapi.py``).

:func:`core_request` turns a decoded Kafka request (FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups) into the core's
``group_messages`` request for ``BrokerNode.group_call``; :func:`kafka_response` turns the core's
answer back into the Kafka response of that version. OffsetFetch v8 may name several groups: the
core request is then a tuple of one-group requests and the answer a tuple of answers.
"""

from __future__ import annotations

from typing import Any

from ..broker import group_messages as gm
from ..broker.errors import BrokerError
from ..broker.topic_partition import TopicPartition
from ..kafka import protocol as kp
from ..kafka.versions import ApiKey

__all__ = ["GROUP_API_KEYS", "core_request", "kafka_response"]

GROUP_API_KEYS = frozenset(int(cls.API_KEY) for cls in kp.GROUP_REQUESTS)


def core_request(key: int, msg: Any, version: int, client_id: str | None, client_host: str) -> Any:
    """The core request for a decoded group API request."""
    if key == ApiKey.FIND_COORDINATOR:
        return gm.FindCoordinatorRequest(tuple(msg.keys(version)), msg.key_type)
    if key == ApiKey.JOIN_GROUP:
        return gm.JoinGroupRequest(
            msg.group_id,
            msg.member_id,
            msg.session_timeout_ms,
            msg.rebalance_timeout_ms if version >= 1 else msg.session_timeout_ms,
            msg.protocol_type,
            tuple((p.name, bytes(p.metadata)) for p in msg.protocols),
            require_known_member=version >= 4,
            client_id=client_id or "",
            client_host=client_host,
        )
    if key == ApiKey.SYNC_GROUP:
        return gm.SyncGroupRequest(
            msg.group_id,
            msg.generation_id,
            msg.member_id,
            tuple((a.member_id, bytes(a.assignment)) for a in msg.assignments),
        )
    if key == ApiKey.HEARTBEAT:
        return gm.HeartbeatRequest(msg.group_id, msg.generation_id, msg.member_id)
    if key == ApiKey.LEAVE_GROUP:
        ids = (msg.member_id,) if version < 3 else tuple(m.member_id for m in msg.members)
        return gm.LeaveGroupRequest(msg.group_id, ids)
    if key == ApiKey.OFFSET_COMMIT:
        offsets = tuple(
            gm.CommitOffset(
                TopicPartition(t.name, p.partition_index),
                p.committed_offset,
                p.committed_leader_epoch,
                p.committed_metadata or "",
            )
            for t in msg.topics
            for p in t.partitions
        )
        return gm.OffsetCommitRequest(msg.group_id, msg.generation_id_or_member_epoch, msg.member_id, offsets)
    if key == ApiKey.OFFSET_FETCH:
        if version >= 8:
            return tuple(
                gm.OffsetFetchRequest(g.group_id, _partitions(g.topics), msg.require_stable) for g in msg.groups
            )
        return gm.OffsetFetchRequest(msg.group_id, _partitions(msg.topics), version >= 7 and msg.require_stable)
    if key == ApiKey.LIST_GROUPS:
        return gm.ListGroupsRequest(tuple(msg.states_filter))
    if key == ApiKey.DESCRIBE_GROUPS:
        return gm.DescribeGroupsRequest(tuple(msg.groups))
    raise ValueError(f"not a group API: {key}")


def _partitions(topics: list[kp.OffsetFetchRequestTopic] | None) -> tuple[TopicPartition, ...] | None:
    if topics is None:
        return None
    return tuple(TopicPartition(t.name, i) for t in topics for i in t.partition_indexes)


def _offset_topics(offsets: tuple[gm.FetchedOffset, ...], error: BrokerError) -> list[kp.OffsetFetchResponseTopic]:
    by_topic: dict[str, list[kp.OffsetFetchResponsePartition]] = {}
    for o in offsets:
        by_topic.setdefault(o.partition.topic, []).append(
            kp.OffsetFetchResponsePartition(
                o.partition.partition,
                o.offset,
                o.leader_epoch,
                o.metadata,
                int(o.error if error is BrokerError.NONE else error),
            )
        )
    return [kp.OffsetFetchResponseTopic(name, parts) for name, parts in by_topic.items()]


def kafka_response(key: int, msg: Any, version: int, r: Any) -> Any:
    """The Kafka response (for ``msg`` at ``version``) to the core's answer ``r``."""
    if key == ApiKey.FIND_COORDINATOR:
        if version >= 4:
            return kp.FindCoordinatorResponse(
                coordinators=[
                    kp.Coordinator(c.key, c.node_id, c.host, c.port, int(c.error), None) for c in r.coordinators
                ]
            )
        c = r.coordinators[0]
        return kp.FindCoordinatorResponse(error_code=int(c.error), node_id=c.node_id, host=c.host, port=c.port)
    if key == ApiKey.JOIN_GROUP:
        return kp.JoinGroupResponse(
            error_code=int(r.error),
            generation_id=r.generation,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name if r.protocol_name is not None or version >= 7 else "",
            leader=r.leader,
            member_id=r.member_id,
            members=[kp.JoinGroupResponseMember(m, None, meta) for m, meta in r.members],
        )
    if key == ApiKey.SYNC_GROUP:
        return kp.SyncGroupResponse(
            error_code=int(r.error),
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name,
            assignment=r.assignment,
        )
    if key == ApiKey.HEARTBEAT:
        return kp.HeartbeatResponse(error_code=int(r.error))
    if key == ApiKey.LEAVE_GROUP:
        if version < 3:
            return kp.LeaveGroupResponse(error_code=int(r.error))
        top = r.error if r.error in (BrokerError.NOT_COORDINATOR, BrokerError.COORDINATOR_LOAD_IN_PROGRESS) else None
        return kp.LeaveGroupResponse(
            error_code=int(top) if top is not None else int(BrokerError.NONE) if r.members else int(r.error),
            members=[kp.LeaveMemberResponse(m, None, int(e)) for m, e in r.members],
        )
    if key == ApiKey.OFFSET_COMMIT:
        errors = {(tp.topic, tp.partition): e for tp, e in r.errors}
        return kp.OffsetCommitResponse(
            topics=[
                kp.OffsetCommitResponseTopic(
                    t.name,
                    [
                        kp.OffsetCommitResponsePartition(p.partition_index, int(errors[(t.name, p.partition_index)]))
                        for p in t.partitions
                    ],
                )
                for t in msg.topics
            ]
        )
    if key == ApiKey.OFFSET_FETCH:
        if version >= 8:
            return kp.OffsetFetchResponse(
                groups=[
                    kp.OffsetFetchResponseGroup(g.group_id, _offset_topics(a.offsets, BrokerError.NONE), int(a.error))
                    for g, a in zip(msg.groups, r, strict=True)
                ]
            )
        if r.error is not BrokerError.NONE and version < 2:  # no top-level error before v2
            parts = tuple(gm.FetchedOffset(tp, -1, error=r.error) for tp in _partitions(msg.topics) or ())
            return kp.OffsetFetchResponse(topics=_offset_topics(parts, r.error))
        return kp.OffsetFetchResponse(topics=_offset_topics(r.offsets, BrokerError.NONE), error_code=int(r.error))
    if key == ApiKey.LIST_GROUPS:
        return kp.ListGroupsResponse(
            error_code=int(r.error), groups=[kp.ListedGroup(g, ptype, state) for g, ptype, state in r.groups]
        )
    if key == ApiKey.DESCRIBE_GROUPS:
        return kp.DescribeGroupsResponse(
            groups=[
                kp.DescribedGroup(
                    int(g.error),
                    g.group_id,
                    g.state,
                    g.protocol_type,
                    g.protocol_name,
                    [
                        kp.DescribedGroupMember(m.member_id, None, m.client_id, m.client_host, m.metadata, m.assignment)
                        for m in g.members
                    ],
                )
                for g in r.groups
            ]
        )
    raise ValueError(f"not a group API: {key}")
