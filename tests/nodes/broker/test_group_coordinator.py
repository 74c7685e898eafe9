"""The group coordinator on three simulated BrokerNodes: FindCoordinator creates the offsets topic,
members join (KIP-394 member ids), sync and heartbeat; generations fence commits, heartbeats and
syncs; silent members expire; commits survive the coordinator's crash (the new leader of the
offsets partition reloads them from its log); clients may not write the internal topic."""

from __future__ import annotations

from typing import Any

import pytest

from nodes.broker import BrokerError, NewBatch, ProducePartition, ProduceRequest, TopicPartition
from nodes.broker import group_messages as gm
from nodes.broker.group_coordinator import java_hash, partition_for
from tests.nodes.broker.cluster import BrokerCluster

E = BrokerError
GROUP = "g1"
TP = TopicPartition("t0", 0)


def ready(seed: int = 1, bugs: tuple[str, ...] = ()) -> BrokerCluster:
    c = BrokerCluster(3, seed=seed, bugs=bugs).start()
    assert c.run_until(lambda: c.stable_leader() is not None)
    assert c.run_until(c.registered, 20_000)
    return c


def coordinator(c: BrokerCluster, group: str = GROUP) -> int:
    """Ask until FindCoordinator names a node that has loaded the group's partition."""
    found: list[int] = []

    def ask() -> bool:
        r = c.request(c.alive()[0], "group_call", gm.FindCoordinatorRequest((group,)), 500)
        info = None if r is None else r.coordinators[0]
        if info is None or info.error is not E.NONE or info.node_id not in c.alive():
            return False
        hb = c.request(info.node_id, "group_call", gm.HeartbeatRequest(group, 0, "nobody"), 500)
        if hb is None or hb.error is not E.UNKNOWN_MEMBER_ID:  # loaded: it answers for members
            return False
        found.append(info.node_id)
        return True

    assert c.run_until(ask, 30_000)
    return found[-1]


def join(c: BrokerCluster, node: int, member: str = "", session_ms: int = 6_000) -> str:
    """Start a JoinGroup; the request id (answer in c.replies)."""
    rid = c.rid("join")
    request = gm.JoinGroupRequest(
        GROUP, member, session_ms, 10_000, "consumer", (("range", b"sub"),), require_known_member=True
    )
    c.call(node, "group_call", rid, request)
    return rid


def answer(c: BrokerCluster, rid: str, timeout_ms: int = 5_000) -> Any:
    c.run_until(lambda: rid in c.replies, timeout_ms)
    reply = c.replies.get(rid)
    return None if reply is None else reply[1].response


def join_once(c: BrokerCluster, node: int) -> gm.JoinGroupResponse:
    first = answer(c, join(c, node))
    assert first.error is E.MEMBER_ID_REQUIRED and first.member_id
    done = answer(c, join(c, node, first.member_id))
    assert done.error is E.NONE, done
    return done


def sync(c: BrokerCluster, node: int, j: gm.JoinGroupResponse, assignments: Any = ()) -> gm.SyncGroupResponse:
    return answer(c, call(c, node, gm.SyncGroupRequest(GROUP, j.generation, j.member_id, tuple(assignments))))


def call(c: BrokerCluster, node: int, request: Any) -> str:
    rid = c.rid("g")
    c.call(node, "group_call", rid, request)
    return rid


def commit(c: BrokerCluster, node: int, generation: int, member: str, offset: int) -> BrokerError:
    r = answer(c, call(c, node, gm.OffsetCommitRequest(GROUP, generation, member, (gm.CommitOffset(TP, offset),))))
    return r.errors[0][1]


def fetched(c: BrokerCluster, node: int) -> Any:
    return c.request(node, "group_call", gm.OffsetFetchRequest(GROUP, (TP,)))


def test_java_hash_and_partition_mapping_match_kafka() -> None:
    assert java_hash("") == 0
    assert java_hash("hello") == 99162322
    assert java_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE: Kafka's abs maps it to 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50


def test_join_sync_commit_fetch_and_generation_fencing() -> None:
    c = ready()
    node = coordinator(c)
    a = join_once(c, node)
    assert a.generation == 1 and a.leader == a.member_id and a.members == ((a.member_id, b"sub"),)
    assert sync(c, node, a, [(a.member_id, b"all")]) == gm.SyncGroupResponse(E.NONE, b"all", "consumer", "range")
    assert commit(c, node, a.generation, a.member_id, 5) is E.NONE
    assert fetched(c, node).offsets[0].offset == 5

    # a second member: the join waits until the first member rejoins, then generation 2
    first = answer(c, join(c, node))
    b_rid = join(c, node, first.member_id)
    c.run_for(200)
    assert b_rid not in c.replies
    hb = c.request(node, "group_call", gm.HeartbeatRequest(GROUP, a.generation, a.member_id))
    assert hb.error is E.REBALANCE_IN_PROGRESS
    assert commit(c, node, a.generation, a.member_id, 6) is E.NONE  # still its generation: allowed
    a2 = answer(c, join(c, node, a.member_id))
    b = answer(c, b_rid)
    assert a2.generation == b.generation == 2 and a2.leader == a.member_id
    assert {m for m, _ in a2.members} == {a.member_id, b.member_id} and b.members == ()
    b_sync = call(c, node, gm.SyncGroupRequest(GROUP, 2, b.member_id))
    c.run_for(100)
    assert b_sync not in c.replies  # a follower waits for the leader's assignment
    assert sync(c, node, a2, [(a.member_id, b"x"), (b.member_id, b"y")]).assignment == b"x"
    assert answer(c, b_sync).assignment == b"y"

    # generation 1 is fenced everywhere
    assert commit(c, node, 1, a.member_id, 7) is E.ILLEGAL_GENERATION
    assert c.request(node, "group_call", gm.HeartbeatRequest(GROUP, 1, a.member_id)).error is E.ILLEGAL_GENERATION
    assert sync(c, node, a).error is E.ILLEGAL_GENERATION
    assert commit(c, node, 2, "stranger", 7) is E.UNKNOWN_MEMBER_ID
    assert commit(c, node, -1, "", 7) is E.ILLEGAL_GENERATION  # a simple commit while the group has members
    assert fetched(c, node).offsets[0].offset == 6

    described = c.request(node, "group_call", gm.DescribeGroupsRequest((GROUP,))).groups[0]
    assert described.state == "Stable" and len(described.members) == 2
    listed = c.request(node, "group_call", gm.ListGroupsRequest())
    assert (GROUP, "consumer", "Stable") in listed.groups

    # b leaves; a is told to rejoin, and the group continues with a alone
    left = c.request(node, "group_call", gm.LeaveGroupRequest(GROUP, (b.member_id,)))
    assert left.error is E.NONE
    a3 = answer(c, join(c, node, a.member_id))
    assert a3.generation == 3 and a3.members == ((a.member_id, b"sub"),)


def test_commit_stale_generation_bug_accepts_fenced_commits() -> None:
    c = ready(bugs=("commit-stale-generation",))
    node = coordinator(c)
    a = join_once(c, node)
    sync(c, node, a, [(a.member_id, b"all")])
    assert commit(c, node, a.generation + 5, "stranger", 9) is E.NONE
    assert fetched(c, node).offsets[0].offset == 9


def test_a_silent_member_expires_and_the_group_rebalances() -> None:
    c = ready()
    node = coordinator(c)
    a = join_once(c, node)
    sync(c, node, a, [(a.member_id, b"all")])
    c.run_for(7_000)  # past its 6 s session without a heartbeat
    described = c.request(node, "group_call", gm.DescribeGroupsRequest((GROUP,))).groups[0]
    assert described.state == "Empty" and described.members == ()
    assert c.request(node, "group_call", gm.HeartbeatRequest(GROUP, 1, a.member_id)).error is E.UNKNOWN_MEMBER_ID
    assert commit(c, node, -1, "", 3) is E.NONE  # an empty group takes simple commits


@pytest.mark.parametrize("seed", [1, 2])
def test_commits_survive_the_coordinators_crash(seed: int) -> None:
    c = ready(seed)
    node = coordinator(c)
    a = join_once(c, node)
    sync(c, node, a, [(a.member_id, b"all")])
    assert commit(c, node, a.generation, a.member_id, 41) is E.NONE
    c.crash(node)
    new = coordinator(c)
    assert new != node
    # the new coordinator loaded the group (members and generation) and its offsets from the log
    assert fetched(c, new).offsets[0].offset == 41
    hb = c.request(new, "group_call", gm.HeartbeatRequest(GROUP, a.generation, a.member_id))
    assert hb.error is E.NONE
    assert commit(c, new, a.generation, a.member_id, 42) is E.NONE
    # the old coordinator comes back as a follower: NOT_COORDINATOR, and the group stays where it is
    c.restart(node)
    c.run_for(3_000)
    if c.partition_leader(TopicPartition(gm.OFFSETS_TOPIC, partition_for(GROUP, 5))) != node:
        assert fetched(c, node).error is E.NOT_COORDINATOR
    assert fetched(c, coordinator(c)).offsets[0].offset == 42
    assert c.violations == [] and c.fatal == {}


def test_coordinator_no_reload_bug_loses_commits_when_the_coordinator_moves() -> None:
    c = ready(bugs=("coordinator-no-reload",))
    node = coordinator(c)
    a = join_once(c, node)
    sync(c, node, a, [(a.member_id, b"all")])
    assert commit(c, node, a.generation, a.member_id, 41) is E.NONE
    assert fetched(c, node).offsets[0].offset == 41
    c.crash(node)
    new = coordinator(c)
    assert new != node
    assert fetched(c, new).offsets[0].offset == -1  # the commit is in its log, but it never read it
    hb = c.request(new, "group_call", gm.HeartbeatRequest(GROUP, a.generation, a.member_id))
    assert hb.error is E.UNKNOWN_MEMBER_ID  # nor the group's members


def test_clients_cannot_write_the_offsets_topic() -> None:
    c = ready()
    node = coordinator(c)
    tp = TopicPartition(gm.OFFSETS_TOPIC, partition_for(GROUP, 5))
    request = ProduceRequest(-1, 1_000, (ProducePartition(tp, (NewBatch(b"x", 1),)),))
    r = c.request(node, "produce", request)
    assert r.partitions[0].error is E.INVALID_TOPIC_EXCEPTION
