"""The controller on a fake host whose "raft" commits appended metadata at once (or on demand):
registration, heartbeats and fencing, elections, AlterPartition validation, CreateTopics."""

import random
from dataclasses import replace

import pytest

from nodes.broker import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerConfig,
    BrokerError,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreateTopicsRequest,
    NewTopic,
    TopicPartition,
)
from nodes.broker.controller import Controller
from nodes.broker.records import PartitionRecord, TopicRecord
from tests.nodes.broker.fakes import FakeHost, epoch_of

E = BrokerError
MS = 1_000_000
TP = TopicPartition("t", 0)


class Ctl:
    def __init__(self, brokers=(1, 2, 3), config=None, auto_commit=True):
        self.host = FakeHost(node_id=1, brokers=brokers)
        self.host.image.last_epoch = 1
        self.offset = 1000
        self.queue = []
        self.auto_commit = auto_commit
        self.ctl = Controller(
            self.host,
            config or BrokerConfig(broker_session_timeout_ms=1000),
            random.Random(0),
            self.append,
            lambda: self.offset,
        )
        self.ctl.update_role(True, 1)

    def append(self, records, done):
        self.queue.append((records, done))
        if self.auto_commit:
            self.commit()

    def commit(self):
        while self.queue:
            records, done = self.queue.pop(0)
            self.host.image.apply_batch(records)
            self.offset += 1
            done(E.NONE)
            self.ctl.image_changed()

    def tick(self, ms=0):
        self.host._now += ms * MS
        for _ in range(5):
            self.ctl.poll(self.host.now)

    def add_partition(self, replicas=(1, 2, 3), isr=None, leader=1):
        assert self.host.image.apply_batch(
            (TopicRecord("t", "id"), PartitionRecord("t", 0, replicas, isr or replicas, leader, 0, 0))
        )

    def replies(self, kind):
        return [m for _, m in self.host.take_sent(kind)]

    def state(self):
        return self.host.image.partition(TP)


def test_inactive_until_the_image_holds_a_record_of_the_current_raft_epoch():
    c = Ctl()
    c.ctl.update_role(True, 2)
    assert not c.ctl.active
    c.ctl.on_heartbeat(2, BrokerHeartbeatRequest(2, epoch_of(2), 0, correlation=7), None)
    assert c.replies(BrokerHeartbeatResponse) == [BrokerHeartbeatResponse(E.NOT_CONTROLLER, True, 7)]
    c.host.image.last_epoch = 2
    c.ctl.update_role(True, 2)
    assert c.ctl.active
    c.ctl.update_role(False, 2)
    assert not c.ctl.active


def test_registration_starts_fenced_and_heartbeats_unfence_once_caught_up():
    c = Ctl(brokers=(1,))
    c.ctl.on_registration(4, BrokerRegistrationRequest(4, 77, "h", 1, correlation=3), None)
    assert c.replies(BrokerRegistrationResponse) == [BrokerRegistrationResponse(E.NONE, 1000, 3)]
    reg = c.host.image.brokers[4]
    assert (reg.broker_epoch, reg.incarnation, reg.fenced) == (1000, 77, True)
    c.ctl.on_registration(4, BrokerRegistrationRequest(4, 77, correlation=4), None)  # same incarnation
    assert c.replies(BrokerRegistrationResponse)[0].broker_epoch == 1000
    c.ctl.on_heartbeat(4, BrokerHeartbeatRequest(4, 1000, metadata_offset=1000), None)  # not caught up
    assert c.host.image.brokers[4].fenced
    c.ctl.on_heartbeat(4, BrokerHeartbeatRequest(4, 1000, metadata_offset=1001), None)
    assert not c.host.image.brokers[4].fenced
    c.ctl.on_heartbeat(4, BrokerHeartbeatRequest(4, 999, 1001, correlation=9), None)
    assert c.replies(BrokerHeartbeatResponse)[-1] == BrokerHeartbeatResponse(E.STALE_BROKER_EPOCH, True, 9)


def test_session_timeout_fences_and_the_leader_moves_to_the_next_isr_member():
    c = Ctl()
    c.add_partition()
    c.tick(0)
    for _ in range(3):
        c.tick(400)
        for b in (2, 3):
            c.ctl.on_heartbeat(b, BrokerHeartbeatRequest(b, epoch_of(b), 10**6), None)
    assert c.host.image.brokers[1].fenced and not c.host.image.brokers[2].fenced
    s = c.state()
    assert (s.leader, s.leader_epoch, s.isr, s.partition_epoch) == (2, 1, (2, 3), 1)


def test_a_fenced_sole_isr_member_leaves_the_partition_leaderless_and_is_re_elected_when_back():
    c = Ctl()
    c.add_partition(isr=(1,))
    c.tick(1_001)
    s = c.state()
    assert (s.leader, s.leader_epoch, s.isr) == (None, 1, (1,))
    # re-register (a restart): still fenced, unfenced when caught up, then elected again
    c.ctl.on_registration(1, BrokerRegistrationRequest(1, 555), None)
    new_epoch = c.host.image.brokers[1].broker_epoch
    c.ctl.on_heartbeat(1, BrokerHeartbeatRequest(1, new_epoch, new_epoch + 1), None)
    c.tick(0)
    s = c.state()
    assert (s.leader, s.leader_epoch, s.isr) == (1, 2, (1,))


def test_unclean_election_picks_an_out_of_sync_replica_only_when_enabled():
    for unclean, expected in [(False, (None, (1,))), (True, (2, (2,)))]:
        c = Ctl(config=BrokerConfig(broker_session_timeout_ms=1000, unclean_leader_election_enable=unclean))
        c.add_partition(isr=(1,))
        c.tick(600)
        for b in (2, 3):
            c.ctl.on_heartbeat(b, BrokerHeartbeatRequest(b, epoch_of(b), 10**6), None)
        c.tick(600)
        assert (c.state().leader, c.state().isr) == expected


def test_a_restarted_broker_is_fenced_and_loses_its_leaderships_before_it_is_unfenced():
    c = Ctl()
    c.add_partition()
    c.ctl.on_registration(1, BrokerRegistrationRequest(1, 999), None)  # new incarnation of broker 1
    c.tick(0)
    s = c.state()
    assert c.host.image.brokers[1].fenced and (s.leader, s.leader_epoch, s.isr) == (2, 1, (2, 3))


def test_unfence_waits_while_the_broker_still_leads():
    c = Ctl(auto_commit=False)
    c.add_partition()
    c.ctl.on_registration(1, BrokerRegistrationRequest(1, 999), None)
    c.commit()  # registered (fenced); the leadership change is not committed yet
    c.tick(0)
    reg = c.host.image.brokers[1]
    c.ctl.on_heartbeat(1, BrokerHeartbeatRequest(1, reg.broker_epoch, 10**6), None)
    assert [type(r[0]).__name__ for r, _ in c.queue] == ["PartitionChangeRecord"]  # no unfence
    c.commit()
    c.ctl.on_heartbeat(1, BrokerHeartbeatRequest(1, reg.broker_epoch, 10**6), None)
    c.commit()
    assert not c.host.image.brokers[1].fenced


def restart(c, broker, incarnation, damaged=()):
    """Broker ``broker`` comes back (a new incarnation, maybe naming damaged partition logs) and
    heartbeats until unfenced; the controller reconciles."""
    c.ctl.on_registration(broker, BrokerRegistrationRequest(broker, incarnation, damaged=damaged), None)
    epoch = c.host.image.brokers[broker].broker_epoch
    for _ in range(3):
        c.tick(0)
        c.ctl.on_heartbeat(broker, BrokerHeartbeatRequest(broker, epoch, epoch + 1), None)
    c.tick(0)


def test_a_damaged_last_isr_member_is_not_re_elected_and_the_partition_stays_leaderless():
    # broker 1, the last ISR member (min ISR 1: nobody else holds what it acknowledged), comes back
    # with a log that lost a range: out of the ISR at once, and never elected on that log
    c = Ctl()
    c.add_partition(isr=(1,))
    c.tick(1_001)
    assert (c.state().leader, c.state().isr) == (None, (1,))
    restart(c, 1, 555, damaged=(TP, TopicPartition("gone", 0)))
    s = c.state()
    assert (s.leader, s.isr, s.elr) == (None, (), ())
    assert not c.host.image.brokers[1].fenced  # it leads nothing: unfenced, a follower once there is a leader
    # a clean restart of the same broker does not bring it back either: it is no longer an ISR member
    restart(c, 1, 556)
    assert (c.state().leader, c.state().isr) == (None, ())


def test_a_damaged_last_isr_member_hands_the_partition_to_an_eligible_leader_replica():
    c = Ctl(config=BrokerConfig(broker_session_timeout_ms=1000, min_insync_replicas=2))
    c.add_partition()
    c.ctl.on_alter_partition(1, AlterPartitionRequest(1, epoch_of(1), TP, 0, 0, (1, 2)), None)
    assert (c.state().isr, c.state().elr) == ((1, 2), ())  # at min ISR: the HW moves, no ELR
    c.ctl.on_alter_partition(1, AlterPartitionRequest(1, epoch_of(1), TP, 0, 1, (1,)), None)
    assert (c.state().isr, c.state().elr) == ((1,), (2,))  # below: the HW is held, 2 has all of it
    c.tick(1_001)  # every broker's session expires
    assert (c.state().leader, c.state().isr, c.state().elr) == (None, (1,), (2,))
    restart(c, 1, 555, damaged=(TP,))
    s = c.state()
    assert (s.leader, s.isr, s.elr) == (None, (), (2,))  # 2 is still fenced
    restart(c, 2, 556)
    s = c.state()
    assert (s.leader, s.isr, s.elr) == (2, (2,), ())
    # a clean last member comes back as the leader, as before
    c.tick(1_001)
    restart(c, 2, 557)
    assert (c.state().leader, c.state().isr) == (2, (2,))


def test_a_damage_report_waits_for_a_partition_change_in_flight():
    c = Ctl(auto_commit=False)
    c.add_partition(isr=(1, 2))
    c.ctl.on_alter_partition(1, AlterPartitionRequest(1, epoch_of(1), TP, 0, 0, (1, 2, 3)), None)
    c.ctl.on_registration(2, BrokerRegistrationRequest(2, 555, correlation=4, damaged=(TP,)), None)
    assert c.replies(BrokerRegistrationResponse) == [BrokerRegistrationResponse(E.OPERATION_NOT_ATTEMPTED, -1, 4)]
    c.commit()
    c.ctl.on_registration(2, BrokerRegistrationRequest(2, 555, correlation=5, damaged=(TP,)), None)
    c.commit()
    assert c.replies(BrokerRegistrationResponse)[-1].error == E.NONE
    assert (c.state().leader, c.state().isr) == (1, (1, 3))


@pytest.mark.parametrize(
    "change, error",
    [
        ({}, E.NONE),
        ({"broker_id": 2, "broker_epoch": epoch_of(2)}, E.NOT_LEADER_OR_FOLLOWER),
        ({"broker_epoch": 5}, E.STALE_BROKER_EPOCH),
        ({"leader_epoch": -1}, E.FENCED_LEADER_EPOCH),
        ({"leader_epoch": 1}, E.UNKNOWN_LEADER_EPOCH),
        ({"partition_epoch": 3}, E.INVALID_UPDATE_VERSION),
        ({"new_isr": (2, 3)}, E.INVALID_REQUEST),  # without the leader
        ({"new_isr": (1, 4)}, E.INVALID_REQUEST),  # not a replica
        ({"new_isr": (1, 3), "fence": 3}, E.INELIGIBLE_REPLICA),
        ({"partition": TopicPartition("x", 0)}, E.UNKNOWN_TOPIC_OR_PARTITION),
    ],
)
def test_alter_partition_validation(change, error):
    c = Ctl()
    c.add_partition(isr=(1, 2))
    fence = change.pop("fence", None)
    if fence:
        c.host.image.brokers[fence] = replace(c.host.image.brokers[fence], fenced=True)
    fields = {
        "broker_id": 1,
        "broker_epoch": epoch_of(1),
        "partition": TP,
        "leader_epoch": 0,
        "partition_epoch": 0,
        "new_isr": (1, 2, 3),
        "correlation": 5,
    }
    fields.update(change)
    c.ctl.on_alter_partition(1, AlterPartitionRequest(**fields), None)
    (reply,) = c.replies(AlterPartitionResponse)
    assert reply.error == error and reply.correlation == 5
    if error == E.NONE:
        assert (reply.isr, reply.partition_epoch) == ((1, 2, 3), 1) == (c.state().isr, c.state().partition_epoch)


def test_alter_partition_while_a_change_is_pending_is_not_attempted():
    c = Ctl(auto_commit=False)
    c.add_partition(isr=(1, 2))
    request = AlterPartitionRequest(1, epoch_of(1), TP, 0, 0, (1, 2, 3))
    c.ctl.on_alter_partition(1, request, None)
    c.ctl.on_alter_partition(1, request, None)
    assert [r.error for r in c.replies(AlterPartitionResponse)] == [E.OPERATION_NOT_ATTEMPTED]
    c.commit()
    assert [r.error for r in c.replies(AlterPartitionResponse)] == [E.NONE]


def create(c, *topics, validate_only=False):
    box = []
    c.ctl.on_create_topics(CreateTopicsRequest(topics, validate_only=validate_only, correlation=3), box.append)
    assert len(box) == 1 and box[0].correlation == 3
    return [(t.name, t.error) for t in box[0].topics]


@pytest.mark.parametrize(
    "topic, error",
    [
        (NewTopic("a", 3, 3), E.NONE),
        (NewTopic("a", 0, 1), E.INVALID_PARTITIONS),
        (NewTopic("a", -5, 1), E.INVALID_PARTITIONS),
        (NewTopic("a", 1, 0), E.INVALID_REPLICATION_FACTOR),
        (NewTopic("a", 1, 4), E.INVALID_REPLICATION_FACTOR),  # only 3 brokers
        (NewTopic("bad name!", 1, 1), E.INVALID_TOPIC_EXCEPTION),
        (NewTopic("a", 1, 1, configs=(("retention.ms", "1"),)), E.INVALID_CONFIG),
        (NewTopic("a", 1, 1, configs=(("min.insync.replicas", "0"),)), E.INVALID_CONFIG),
        (NewTopic("a", assignments=((0, (1, 2)), (1, (2, 3)))), E.NONE),
        (NewTopic("a", assignments=((0, (1, 2)), (2, (2, 3)))), E.INVALID_REPLICA_ASSIGNMENT),
        (NewTopic("a", assignments=((0, (1, 9)),)), E.INVALID_REPLICA_ASSIGNMENT),
        (NewTopic("a", assignments=((0, (1, 1)),)), E.INVALID_REPLICA_ASSIGNMENT),
        (NewTopic("a", 1, -1, assignments=((0, (1,)),)), E.INVALID_REQUEST),
    ],
)
def test_create_topics_validation(topic, error):
    assert create(Ctl(), topic) == [("a" if topic.name == "a" else topic.name, error)]


def test_create_topics_assigns_round_robin_with_defaults_and_refuses_duplicates():
    c = Ctl(config=BrokerConfig(num_partitions=3, default_replication_factor=2))
    assert create(c, NewTopic("a", configs=(("min.insync.replicas", "2"),))) == [("a", E.NONE)]
    topic = c.host.image.topics["a"]
    assert topic.configs == {"min.insync.replicas": "2"}
    states = [topic.partitions[p] for p in range(3)]
    assert all(len(s.replicas) == 2 and s.isr == s.replicas and s.leader == s.replicas[0] for s in states)
    assert sorted(s.leader for s in states) == [1, 2, 3]
    assert create(c, NewTopic("a", 1, 1)) == [("a", E.TOPIC_ALREADY_EXISTS)]
    assert create(c, NewTopic("b", 1, 1), NewTopic("b", 1, 1)) == [("b", E.INVALID_REQUEST)] * 2
    assert create(c, NewTopic("c", 1, 1), validate_only=True) == [("c", E.NONE)] and "c" not in c.host.image.topics
    c.ctl.update_role(False, 1)
    assert create(c, NewTopic("d", 1, 1)) == [("d", E.NOT_CONTROLLER)]
