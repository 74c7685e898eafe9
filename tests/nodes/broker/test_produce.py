"""Produce rules (docs/kraft.md §3.1): acks validation, min ISR, NOT_LEADER, leader-epoch fencing,
when each acks level is answered, and the delayed produce's outcomes."""

import pytest

from nodes.broker import (
    BrokerError,
    FetchPartition,
    FetchRecordsRequest,
    ProducePartition,
    ProduceRequest,
    TopicPartition,
)
from tests.nodes.broker.fakes import TP, Harness, result

E = BrokerError


@pytest.mark.parametrize(
    "setup, acks, epoch, error",
    [
        ({}, 2, None, E.INVALID_REQUIRED_ACKS),
        ({}, -2, None, E.INVALID_REQUIRED_ACKS),
        ({"leader": 2}, -1, None, E.NOT_LEADER_OR_FOLLOWER),
        ({"leader": None}, 1, None, E.NOT_LEADER_OR_FOLLOWER),
        ({"isr": (1,)}, -1, None, E.NOT_ENOUGH_REPLICAS),
        ({}, -1, -1, E.FENCED_LEADER_EPOCH),
        ({}, -1, 1, E.UNKNOWN_LEADER_EPOCH),
    ],
)
def test_produce_is_refused_before_appending(setup, acks, epoch, error):
    h = Harness(**setup)
    box = h.produce(acks, "v", epoch=epoch)
    assert result(box).error == error and result(box).base_offset == -1
    assert h.appended() == [] and h.p.leo == 0


def test_unknown_partition_and_empty_batches():
    h = Harness()
    box = []
    request = ProduceRequest(-1, 1000, (ProducePartition(TopicPartition("nope", 0), ()), ProducePartition(TP, ())))
    h.rm.append_records(request, box.append, box.append)
    assert [r.error for r in box[0].partitions] == [E.UNKNOWN_TOPIC_OR_PARTITION, E.CORRUPT_MESSAGE]


def test_isr_below_min_is_fine_for_acks_1_and_topic_config_overrides_min_isr():
    h = Harness(isr=(1,))
    box = h.produce(1, "a")
    h.flush()
    assert result(box).error == E.NONE
    h = Harness(isr=(1,), topic_configs=(("min.insync.replicas", "1"),))
    box = h.produce(-1, "a")
    assert box == []  # accepted, waiting for the HW (the leader's flushed end: it is the whole ISR)
    h.flush()
    assert result(box).error == E.NONE and h.p.hw == 1


def test_acks_0_is_never_answered_and_an_error_closes_the_connection():
    h = Harness()
    assert h.produce(0, "a") == [] and h.p.leo == 1
    h.flush()
    assert h.produce(0, "a", epoch=-1) == [("closed", "acks=0 produce failed for t-0")]


def test_acks_1_is_answered_right_after_the_local_append():
    """As Kafka: acks=1 waits neither for an fsync nor for any follower (so a leader crash can lose it)."""
    h = Harness()
    box = h.produce(1, "a", "b")
    assert h.p.leo == 2 and h.p.hw == 0
    assert result(box).error == E.NONE and result(box).base_offset == 0


def test_acks_all_waits_for_the_high_watermark():
    h = Harness()
    box = h.produce(-1, "a")
    h.flush()
    assert box == [] and h.p.hw == 0
    h.fetch(1, replica=2)
    assert box == []  # replica 3 (in the ISR) has not fetched yet
    h.fetch(1, replica=3)
    assert h.p.hw == 1 and result(box).error == E.NONE and result(box).base_offset == 0


def test_acks_all_times_out_indeterminately_while_followers_lag():
    h = Harness()
    box = h.produce(-1, "a", timeout_ms=500)
    h.flush()
    h.advance(499)
    assert box == []
    h.advance(1)
    assert result(box).error == E.REQUEST_TIMED_OUT
    assert h.p.leo == 1  # still in the log: it may commit later


def test_losing_leadership_fails_a_parked_produce():
    h = Harness()
    box = h.produce(-1, "a")
    h.flush()
    h.change(leader=2, leader_epoch=1)
    assert result(box).error == E.NOT_LEADER_OR_FOLLOWER


def test_not_enough_replicas_after_append_when_the_isr_shrank_below_min():
    h = Harness()
    box = h.produce(-1, "a")
    h.flush()
    h.rm.fetch_messages(_follower_request(1, 2), lambda r: None)
    h.rm.fetch_messages(_follower_request(1, 3), lambda r: None)  # HW -> 1, produce not yet retried
    assert h.p.hw == 1 and box == []
    h.change(isr=(1,))  # the ISR shrinks before the delayed produce is retried
    assert result(box).error == E.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def _follower_request(offset, replica):
    return FetchRecordsRequest((FetchPartition(TP, offset, 1 << 20, 0, 0),), replica, 100 + replica, 0)


def test_leader_stamps_offsets_and_its_epoch():
    h = Harness()
    h.change(leader_epoch=3)
    h.produce(1, "a", "b")
    assert [(b.base_offset, b.leader_epoch) for b in h.appended()] == [(0, 3), (1, 3)]
