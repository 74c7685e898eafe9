"""Three combined BrokerNodes on the in-test driver: register commands still work, topics are
created through the quorum, acks=all writes survive the loss of the partition leader, restarts
recover partition logs, and the docs/kraft.md §3.4 scenarios S1 (acks=1 loss allowed) and S2
(min ISR 2 refuses instead of losing)."""

from dataclasses import replace

import pytest

from nodes.broker import (
    BrokerError,
    CreateTopicsRequest,
    FetchPartition,
    FetchRecordsRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    MetadataRequest,
    NewTopic,
    TopicPartition,
)
from nodes.kv import OK
from tests.nodes.broker.cluster import BrokerCluster

E = BrokerError
TP = TopicPartition("t0", 0)


def ready_cluster(seed=1, bugs=(), **kw):
    c = BrokerCluster(3, seed=seed, bugs=bugs, **kw).start()
    assert c.run_until(lambda: c.stable_leader() is not None)
    assert c.run_until(c.registered, 20_000)
    return c


def with_topic(seed=1, bugs=(), **kw):
    c = ready_cluster(seed, bugs, **kw)
    assert c.create_topic("t0").error == E.NONE
    assert c.run_until(lambda: c.leader_ready(TP, 3) is not None, 10_000)
    return c


def acked_of(c, rids):
    out = {}
    for value, rid in rids.items():
        r = c.produce_result(rid)
        if r is not None and r.error == E.NONE:
            out[value] = r.base_offset
    return out


def assert_consistent(c):
    assert c.violations == [] and c.fatal == {}


def test_register_commands_work_exactly_as_on_kv_nodes():
    c = ready_cluster()
    lid = c.stable_leader()
    c.call(lid, "submit", "w", "write", "r1", 1)
    c.call(lid, "submit", "c", "cas", "r1", [1, 2])
    c.run_until(lambda: "c" in c.replies)
    c.call(lid, "submit", "r", "read", "r1")
    c.run_until(lambda: "r" in c.replies)
    assert [c.replies[k][1].type for k in "wcr"] == [OK] * 3 and c.replies["r"][1].value == 2
    other = next(i for i in c.ids if i != lid)
    c.call(other, "submit", "x", "write", "r1", 9)
    assert (c.replies["x"][1].error, c.replies["x"][1].leader_id) == ("not-leader", lid)
    c.run_for(1_000)
    assert all(c.nodes[i].machine.registers == {"r1": 2} for i in c.ids)  # metadata records are not registers
    assert_consistent(c)


def test_create_topics_through_any_node_and_metadata_everywhere():
    c = ready_cluster()
    controller = c.stable_leader()
    other = next(i for i in c.ids if i != controller)
    assert c.create_topic("t0", partitions=3, via=other).error == E.NONE  # forwarded to the controller
    request = CreateTopicsRequest((NewTopic("t0", 1, 1), NewTopic("t1", 0, 1), NewTopic("t2", 1, 4)), correlation=4)
    response = c.request(other, "create_topics", request)
    assert response.correlation == 4
    assert [t.error for t in response.topics] == [
        E.TOPIC_ALREADY_EXISTS,
        E.INVALID_PARTITIONS,
        E.INVALID_REPLICATION_FACTOR,
    ]
    c.run_for(1_000)
    for i in c.ids:
        meta = c.request(i, "metadata", MetadataRequest(("t0", "nope")))
        assert meta.controller_id == controller and [b.node_id for b in meta.brokers] == [1, 2, 3]
        t0, nope = meta.topics
        assert nope.error == E.UNKNOWN_TOPIC_OR_PARTITION
        assert [(p.partition, len(p.replicas), p.isr == p.replicas, p.error) for p in t0.partitions] == [
            (k, 3, True, E.NONE) for k in range(3)
        ]
        assert sorted(p.leader for p in t0.partitions) == [1, 2, 3]
    events = [e for e in c.events if e["type"] == "partition-leader"]
    assert events and set(events[0]) == {"node", "time", "type", "partition", "leader_epoch", "leader"}
    assert {e["partition"] for e in events} == {"t0-0", "t0-1", "t0-2"}


def test_a_non_controller_without_a_known_leader_answers_not_controller():
    c = BrokerCluster(3, seed=1)
    c.start([1])  # alone: no raft leader can be elected
    response = c.request(1, "create_topics", CreateTopicsRequest((NewTopic("t0", 1, 1),)))
    assert response.topics[0].error == E.NOT_CONTROLLER


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_acks_all_writes_survive_the_loss_of_the_partition_leader(seed):
    c = with_topic(seed)
    old = c.leader_ready(TP)
    old_epoch = c.broker(old).replicas.partitions[TP].leader_epoch
    rids = {}
    for k in range(40):
        if c.nodes[old] is not None:
            rids[k] = c.send_value(old, TP, k)
        c.run_for(2)
        if k == 20:
            c.crash(old)
    assert c.run_until(lambda: c.leader_ready(TP) not in (None, old), 20_000)
    new = c.leader_ready(TP)
    assert c.broker(new).replicas.partitions[TP].leader_epoch > old_epoch
    acked = acked_of(c, rids)
    assert len(acked) >= 10
    # a new leader's HW starts at its follower HW (docs/kraft.md §3.4, S8); it catches up within a fetch round
    assert c.run_until(lambda: c.broker(new).replicas.partitions[TP].hw > max(acked.values()), 5_000)
    seen = dict((v, o) for o, v in c.read_all(new, TP))
    assert {k: seen.get(k) for k in acked} == acked  # nothing acknowledged is lost
    # the old leader comes back, truncates whatever was not committed, and catches up
    c.restart(old)
    c.run_until(lambda: c.leader_ready(TP, 3) is not None, 20_000)
    for k in range(100, 105):
        rid = c.send_value(new, TP, k)
        c.run_until(lambda rid=rid: rid in c.replies, 5_000)
        assert c.produce_result(rid).error == E.NONE
    c.run_for(1_000)
    logs = [c.log_values(i, TP) for i in c.ids]
    assert logs[0] == logs[1] == logs[2]
    assert_consistent(c)


def test_consumers_see_only_committed_records_and_list_offsets_the_hw():
    c = with_topic()
    lid = c.leader_ready(TP)
    rids = {k: c.send_value(lid, TP, k) for k in range(5)}
    c.run_until(lambda: all(r in c.replies for r in rids.values()))
    offsets = c.request(
        lid, "list_offsets", ListOffsetsRequest((ListOffsetsPartition(TP, -2), ListOffsetsPartition(TP, -1)))
    )
    assert [(p.error, p.offset) for p in offsets.partitions] == [(E.NONE, 0), (E.NONE, 5)]
    assert c.read_all(lid, TP) == [(k, k) for k in range(5)]
    follower = next(i for i in c.ids if i != lid)
    response = c.request(follower, "fetch", _fetch(0))
    assert response.partitions[0].error == E.NOT_LEADER_OR_FOLLOWER
    assert response.partitions[0].current_leader[0] == lid


def _fetch(offset):
    return FetchRecordsRequest((FetchPartition(TP, offset),), max_wait_ms=0)


def test_a_restarted_follower_recovers_its_log_and_rejoins_the_isr():
    c = with_topic()
    lid = c.leader_ready(TP)
    follower = next(i for i in c.ids if i != lid)
    for k in range(5):
        rid = c.send_value(lid, TP, k)
        c.run_until(lambda rid=rid: rid in c.replies)
    c.run_for(500)
    c.crash(follower)
    recovered = [b.base_offset for b in c.pdisks[follower][TP].durable]
    assert recovered == [0, 1, 2, 3, 4]
    for k in range(5, 8):  # min ISR 2: the leader and the other follower suffice
        rid = c.send_value(lid, TP, k)
        c.run_until(lambda rid=rid: rid in c.replies)
        assert c.produce_result(rid).error == E.NONE
    c.boot(follower)
    assert c.run_until(lambda: c.leader_ready(TP, 3) is not None, 20_000)
    assert c.log_values(follower, TP) == [(k, k) for k in range(8)]
    assert_consistent(c)


def test_s1_acks_1_loss_is_allowed_but_never_visible():
    c = with_topic()
    old = c.leader_ready(TP)
    c.isolate(old)
    rid = c.send_value(old, TP, "m", acks=1)
    c.run_until(lambda: rid in c.replies)
    assert c.produce_result(rid).error == E.NONE and c.produce_result(rid).base_offset == 0
    assert c.read_all(old, TP) == []  # above the HW: no consumer ever sees it
    c.crash(old)
    c.heal()
    assert c.run_until(lambda: c.leader_ready(TP) not in (None, old), 20_000)
    c.restart(old)
    assert c.run_until(lambda: c.leader_ready(TP, 3) is not None, 20_000)
    c.run_for(1_000)
    assert all(c.log_values(i, TP) == [] for i in c.ids)  # m is gone everywhere, consistently
    assert_consistent(c)


def s2_cluster(min_isr, unclean):
    """RF 2 on the two nodes that are not the controller; their link is cut, the controller
    still reaches both (Jepsen 2013's "acks=all with the ISR shrunk to 1")."""
    c = ready_cluster(seed=2)
    controller = c.stable_leader()
    leader, follower = [i for i in c.ids if i != controller]
    configs = (("min.insync.replicas", str(min_isr)), ("unclean.leader.election.enable", str(unclean).lower()))
    topic = NewTopic("t0", assignments=((0, (leader, follower)),), configs=configs)
    assert c.request(controller, "create_topics", CreateTopicsRequest((topic,))).topics[0].error == E.NONE
    assert c.run_until(lambda: c.leader_ready(TP, 2) == leader, 10_000)
    c.cut(leader, follower)
    c.cut(follower, leader)
    c.send_value(leader, TP, "warm-up", acks=1)  # a follower at the leader's LEO is never out of sync
    assert c.run_until(lambda: c.broker(leader).replicas.partitions[TP].isr == (leader,), 10_000)
    rids = {k: c.send_value(leader, TP, k) for k in range(3)}
    c.run_until(lambda: all(r in c.replies for r in rids.values()))
    return c, leader, follower, rids


def test_s2_min_isr_2_refuses_writes_once_the_isr_shrinks_to_one():
    c, leader, follower, rids = s2_cluster(min_isr=2, unclean=False)
    assert {c.produce_result(r).error for r in rids.values()} == {E.NOT_ENOUGH_REPLICAS}
    c.crash(leader)
    c.run_for(5_000)
    assert c.partition_leader(TP) is None  # the follower is out of the ISR: no clean leader
    meta = c.request(follower, "metadata", MetadataRequest(("t0",)))
    assert meta.topics[0].partitions[0].error == E.LEADER_NOT_AVAILABLE


def test_metadata_names_no_leader_that_it_does_not_list_as_a_broker():
    """Between the controller's fence of a broker and the leader elections that follow it (two commits),
    a node's image has the partition's leader fenced: Metadata lists only unfenced brokers, so it must
    not name that leader (kafka-python's fetcher raised UnknownBrokerIdError out of poll())."""
    c = with_topic()
    leader = c.partition_leader(TP)
    other = next(i for i in c.ids if i != leader)
    image = c.broker(other).image
    image.brokers[leader] = replace(image.brokers[leader], fenced=True)  # the fence applied, no election yet
    meta = c.request(other, "metadata", MetadataRequest(("t0",)))
    assert leader not in {b.node_id for b in meta.brokers}
    part = meta.topics[0].partitions[0]
    assert (part.error, part.leader) == (E.LEADER_NOT_AVAILABLE, None)
    assert leader in part.offline_replicas


def test_s2_with_min_isr_1_and_unclean_election_loses_acknowledged_writes():
    c, leader, follower, rids = s2_cluster(min_isr=1, unclean=True)
    acked = acked_of(c, rids)
    assert len(acked) == 3
    c.crash(leader)
    assert c.run_until(lambda: c.leader_ready(TP) == follower, 20_000)
    assert c.read_all(follower, TP) == []  # every acknowledged write is gone: expected here
