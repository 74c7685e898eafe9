"""Fetch and ListOffsets on the leader (docs/kraft.md §3.2/§3.3): visibility, errors, diverging
epochs (KIP-320, KAFKA-13141), the delayed fetch, and OFFSET_NOT_AVAILABLE."""

import pytest

from nodes.broker import (
    Batch,
    BrokerError,
    FetchPartition,
    FetchRecordsRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    NewBatch,
    ProducePartition,
    ProduceRequest,
    TopicPartition,
)
from tests.nodes.broker.fakes import TP, Harness, result

E = BrokerError


def leader_with(committed=2, uncommitted=1):
    h = Harness()
    h.produce(1, *range(committed))
    h.flush()
    h.fetch(committed, replica=2)
    h.fetch(committed, replica=3)
    h.produce(1, *range(uncommitted))
    h.flush()
    assert (h.p.hw, h.p.leo) == (committed, committed + uncommitted)
    return h


@pytest.mark.parametrize(
    "offset, replica, error, offsets",
    [
        (0, -1, E.NONE, [0, 1]),  # consumers read up to the HW
        (2, -1, E.NONE, []),  # between HW and LEO: empty, no error
        (3, -1, E.NONE, []),
        (4, -1, E.OFFSET_OUT_OF_RANGE, []),
        (-1, -1, E.OFFSET_OUT_OF_RANGE, []),
        (0, 2, E.NONE, [0, 1, 2]),  # followers read up to the LEO
        (4, 2, E.OFFSET_OUT_OF_RANGE, []),
    ],
)
def test_visibility(offset, replica, error, offsets):
    h = leader_with()
    r = result(h.fetch(offset, replica=replica))
    assert r.error == error and [b.base_offset for b in r.batches] == offsets
    if error == E.NONE:
        assert (r.high_watermark, r.last_stable_offset, r.log_start_offset) == (2, 2, 0)


@pytest.mark.parametrize(
    "setup, kw, error",
    [
        ({"leader": 2}, {}, E.NOT_LEADER_OR_FOLLOWER),
        ({}, {"epoch": -1}, E.FENCED_LEADER_EPOCH),
        ({}, {"epoch": 1}, E.UNKNOWN_LEADER_EPOCH),
        ({"replicas": (1, 2)}, {"replica": 3}, E.NOT_LEADER_OR_FOLLOWER),  # not a replica
    ],
)
def test_fetch_errors_name_the_current_leader(setup, kw, error):
    h = Harness(**setup)
    r = result(h.fetch(0, **kw))
    assert r.error == error and r.current_leader == (setup.get("leader", 1), 0)


def test_unknown_partition():
    h = Harness()
    box = []
    h.rm.fetch_messages(FetchRecordsRequest((FetchPartition(TopicPartition("x", 0), 0),), max_wait_ms=0), box.append)
    assert result(box).error == E.UNKNOWN_TOPIC_OR_PARTITION


def diverging_leader():
    """Leader log: epoch 0 at offsets 0-2, epoch 2 at 3-4; now leading epoch 4 from offset 5."""
    h = Harness()
    h.produce(1, "a", "b", "c")
    h.change(leader_epoch=2)
    h.produce(1, "d", "e")
    h.change(leader_epoch=4)
    h.flush()
    return h


@pytest.mark.parametrize(
    "last_epoch, offset, diverging",
    [
        (0, 3, None),
        (0, 2, None),
        (0, 4, (0, 3)),  # past the end of epoch 0 on the leader
        (1, 3, (0, 3)),  # the leader never had epoch 1
        (2, 5, None),
        (3, 5, (2, 5)),
        (4, 5, None),  # the leader's own epoch, assigned before any batch (KAFKA-7415)
        (2, 6, (2, 5)),
    ],
)
def test_diverging_epoch(last_epoch, offset, diverging):
    h = diverging_leader()
    r = result(h.fetch(offset, replica=2, last_epoch=last_epoch))
    assert r.diverging_epoch == diverging
    if diverging is not None:
        assert r.batches == () and r.error == E.NONE
        assert h.p.remotes[2].leo is None  # the follower's fetch state is not updated (KAFKA-13141)


def test_fetch_answers_at_once_with_data_or_max_wait_zero_else_parks():
    h = leader_with()
    assert result(h.fetch(0, max_wait_ms=500)).batches  # enough bytes
    assert result(h.fetch(2, max_wait_ms=0)).batches == ()
    parked = h.fetch(2, max_wait_ms=500)
    assert parked == [] and len(h.rm.fetch_purgatory) == 1
    h.advance(499)
    assert parked == []
    h.advance(1)
    assert result(parked).batches == ()  # expired: answered empty


def test_parked_consumer_fetch_completes_when_the_hw_moves():
    h = leader_with()
    parked = h.fetch(2, max_wait_ms=500)
    h.fetch(3, replica=2)
    assert parked == []
    h.fetch(3, replica=3)
    assert [b.base_offset for b in result(parked).batches] == [2]


def test_parked_follower_fetch_completes_on_append_and_on_hw_change():
    h = leader_with(committed=2, uncommitted=0)
    parked = h.fetch(2, replica=2, max_wait_ms=500, last_epoch=0)
    h.produce(1, "x")
    assert [b.base_offset for b in result(parked).batches] == [2]
    h.flush()
    waiting = h.fetch(3, replica=2, max_wait_ms=500, last_epoch=0)
    assert waiting == []
    h.fetch(3, replica=3)  # HW 2 -> 3: the parked follower learns it now
    assert result(waiting).high_watermark == 3


def test_parked_fetch_completes_with_an_error_when_leadership_moves():
    h = leader_with()
    parked = h.fetch(2, max_wait_ms=500)
    h.change(leader=2, leader_epoch=1)
    assert result(parked).error == E.NOT_LEADER_OR_FOLLOWER


def list_offsets(h, *timestamps, epoch=None):
    request = ListOffsetsRequest(tuple(ListOffsetsPartition(TP, ts, epoch) for ts in timestamps))
    return [(r.error, r.offset) for r in h.rm.list_offsets(request).partitions]


def test_list_offsets_earliest_latest_and_errors():
    h = leader_with()
    assert list_offsets(h, -2, -1) == [(E.NONE, 0), (E.NONE, 2)]
    assert list_offsets(h, -1, epoch=-1) == [(E.FENCED_LEADER_EPOCH, -1)]
    assert list_offsets(h, -3) == [(E.INVALID_REQUEST, -1)]
    assert list_offsets(Harness(leader=2), -1) == [(E.NOT_LEADER_OR_FOLLOWER, -1)]


def test_list_offsets_latest_is_not_available_while_a_new_leaders_hw_is_below_its_epoch_start():
    h = Harness(node_id=2, leader=1)
    h.rm.follower_append(h.p, tuple(_batches(3)))  # replicated 3 records, HW still 0 here
    h.change(leader=2, leader_epoch=1)
    assert h.p.epoch_start_offset == 3 and h.p.hw == 0
    assert list_offsets(h, -1) == [(E.OFFSET_NOT_AVAILABLE, -1)]
    h.flush()
    h.fetch(3, replica=1, last_epoch=0)
    h.fetch(3, replica=3, last_epoch=0)
    assert list_offsets(h, -1) == [(E.NONE, 3)]


def _batches(n):
    return [Batch(k, 1, 0, b"v") for k in range(n)]


def test_list_offsets_by_timestamp_finds_the_first_batch_at_or_after_it():
    h = Harness(isr=(1,), topic_configs=(("min.insync.replicas", "1"),))
    box = []
    batches = (NewBatch(b"a", 1, 100), NewBatch(b"b", 2, 200), NewBatch(b"c", 1, 300))
    h.rm.append_records(ProduceRequest(1, 1000, (ProducePartition(TP, batches),)), box.append, box.append)
    h.flush()
    assert h.p.hw == 4
    response = h.rm.list_offsets(ListOffsetsRequest((ListOffsetsPartition(TP, 150), ListOffsetsPartition(TP, 999))))
    assert [(r.timestamp, r.offset) for r in response.partitions] == [(200, 1), (-1, -1)]
