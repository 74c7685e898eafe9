"""Leader-side HW and ISR rules (docs/kraft.md §3.2): lastCaughtUpTime, HW over the maximal ISR held
below min ISR, ISR shrink after replica.lag.time.max.ms and expansion via AlterPartition."""

import pytest

from nodes.broker import AlterPartitionRequest, AlterPartitionResponse, BrokerError
from nodes.broker.partition import RemoteReplica
from tests.nodes.broker.fakes import TP, Harness

MS = 1_000_000


@pytest.mark.parametrize(
    "prev, fetch_offset, leader_leo, caught_up",
    [
        (None, 5, 5, 10),  # reached the leader's LEO at this fetch: now
        (None, 4, 5, None),  # behind, no previous fetch
        ((3, 2, None), 3, 5, 2),  # reached the LEO of the previous fetch: that fetch's time
        ((4, 2, None), 3, 5, None),  # did not
        ((3, 2, 7), 3, 5, 7),  # never goes back
    ],
)
def test_last_caught_up_time(prev, fetch_offset, leader_leo, caught_up):
    r = RemoteReplica(2)
    if prev is not None:
        r.last_fetch_leader_leo, r.last_fetch_time, r.last_caught_up = prev
    r.update(fetch_offset, 10, leader_leo, 102)
    assert r.last_caught_up == caught_up
    assert (r.leo, r.last_fetch_time, r.last_fetch_leader_leo, r.broker_epoch) == (fetch_offset, 10, leader_leo, 102)


def test_hw_is_the_min_leo_over_the_isr_counting_only_the_leaders_flushed_end():
    h = Harness()
    h.produce(1, "a", "b")
    h.fetch(2, replica=2)
    h.fetch(2, replica=3)
    assert h.p.hw == 0  # the leader has not flushed
    h.flush()
    assert h.p.hw == 2
    h.produce(1, "c")
    h.flush()
    h.fetch(3, replica=2)
    assert h.p.hw == 2
    h.fetch(3, replica=3)
    assert h.p.hw == 3


def test_lazy_flush_counts_the_unflushed_leader_log():
    h = Harness(bugs=("lazy-flush",))
    h.produce(1, "a")
    h.fetch(1, replica=2)
    h.fetch(1, replica=3)
    assert h.p.hw == 1 and h.p.flushed == 0


def test_hw_is_held_while_the_isr_is_below_min_isr_kafka_15583():
    h = Harness(isr=(1,))
    h.produce(1, "a")
    h.flush()
    assert h.p.hw == 0
    h.change(isr=(1, 2))
    h.fetch(1, replica=2)
    assert h.p.hw == 1


def test_a_caught_up_replica_outside_the_isr_still_holds_the_hw():
    h = Harness(isr=(1, 2))
    h.produce(1, "a")
    h.flush()
    h.fetch(1, replica=3)  # caught up (at the LEO); it asks to join the ISR
    h.host.sent.clear()
    h.p.pending_isr = None  # pretend the controller refused: 3 stays outside the (maximal) ISR
    h.produce(1, "b")
    h.flush()
    h.fetch(2, replica=2)
    assert h.p.hw == 1  # replica 3 (caught up within the lag time) is at 1
    h.advance(1_001)  # now it is no longer caught up
    h.fetch(2, replica=2)
    assert h.p.hw == 2


def test_hw_never_decreases_when_a_lagging_replica_joins_the_isr():
    h = Harness(isr=(1, 2))
    h.produce(1, "a")
    h.flush()
    h.fetch(1, replica=2)
    assert h.p.hw == 1
    h.change(isr=(1, 2, 3))  # replica 3 has not fetched at all
    assert h.p.hw == 1


def test_shrink_after_the_lag_time_via_alter_partition():
    h = Harness()
    h.produce(1, "a")
    h.flush()
    for _ in range(4):  # replica 2 keeps up, replica 3 never fetches
        h.advance(300)
        h.fetch(1, replica=2)
    ((dst, req),) = h.host.take_sent(AlterPartitionRequest)
    assert dst == 9 and req == AlterPartitionRequest(1, 101, TP, 0, 0, (1, 2), req.correlation)
    assert h.p.pending_isr is not None and h.p.maximal_isr() == (1, 2, 3)  # still counted until committed
    h.advance(600)
    assert h.host.take_sent(AlterPartitionRequest) == []  # one request in flight
    h.rm.on_alter_partition_response(AlterPartitionResponse(BrokerError.NONE, TP, 1, 0, 1, (1, 2), req.correlation))
    h.change(isr=(1, 2))
    assert h.p.pending_isr is None and h.p.isr == (1, 2)


def test_a_follower_that_keeps_reaching_the_previous_leo_stays_in_sync():
    h = Harness()
    for k in range(10):
        before = h.p.leo
        h.produce(1, k)
        h.flush()
        h.advance(300)
        h.fetch(before, replica=2)  # always one append behind, but at the LEO of its last fetch
        h.fetch(h.p.leo, replica=3)
    assert h.host.take_sent(AlterPartitionRequest) == []


def test_a_refused_shrink_is_retried_after_the_next_check():
    h = Harness()
    h.advance(1_600)
    ((_, req),) = h.host.take_sent(AlterPartitionRequest)
    assert req.new_isr == (1,)  # neither follower ever fetched; the leader stays
    h.rm.on_alter_partition_response(
        AlterPartitionResponse(BrokerError.INVALID_UPDATE_VERSION, TP, correlation=req.correlation)
    )
    assert h.p.pending_isr is None
    h.advance(600)
    assert [r.new_isr for _, r in h.host.take_sent(AlterPartitionRequest)] == [(1,)]


@pytest.mark.parametrize(
    "follower_leo, fence, broker_epoch, expands",
    [
        (2, False, None, True),
        (1, False, None, False),  # below the HW
        (2, True, None, False),  # fenced broker
        (2, False, 999, False),  # stale broker epoch (KIP-903)
    ],
)
def test_expand_when_caught_up_to_the_hw_and_eligible(follower_leo, fence, broker_epoch, expands):
    h = Harness(isr=(1, 2))
    h.produce(1, "a", "b")
    h.flush()
    h.fetch(2, replica=2)
    assert h.p.hw == 2
    if fence:
        h.fence(3)
    h.fetch(follower_leo, replica=3, broker_epoch=broker_epoch)
    sent = [r.new_isr for _, r in h.host.take_sent(AlterPartitionRequest)]
    assert sent == ([(1, 2, 3)] if expands else [])
    if expands:
        assert h.p.maximal_isr() == (1, 2, 3)


def test_expand_also_needs_the_leader_epoch_start_offset_kafka_7128():
    h = Harness(isr=(1, 2))
    h.produce(1, "a", "b")
    h.flush()
    h.change(leader_epoch=1)  # new epoch starts at 2; the HW (0 before followers fetch) is lower
    h.p.hw = 0
    h.fetch(1, replica=3, last_epoch=0)
    assert h.host.take_sent(AlterPartitionRequest) == []
    h.fetch(2, replica=3, last_epoch=0)
    assert [r.new_isr for _, r in h.host.take_sent(AlterPartitionRequest)] == [(1, 2, 3)]


def test_an_unanswered_expansion_is_asked_again_and_keeps_holding_the_hw():
    # the controller may commit an expansion whose answer is lost or late: while it can, the HW must not
    # pass the joining replica's LEO (else it joins the ISR without records below the HW, and may lead)
    h = Harness(isr=(1, 2))
    h.produce(1, "a", "b")
    h.flush()
    h.fetch(2, replica=2)
    h.fetch(2, replica=3)  # caught up to the HW: asks to join
    ((_, first),) = h.host.take_sent(AlterPartitionRequest)
    assert first.new_isr == (1, 2, 3)
    h.produce(1, "c")
    h.flush()
    h.fetch(3, replica=2)
    assert h.p.hw == 2  # replica 3, joining, is at 2
    h.rm.on_alter_partition_response(
        AlterPartitionResponse(BrokerError.NOT_CONTROLLER, TP, correlation=first.correlation)
    )  # maybe appended before that controller lost its role
    h.advance(3_001)  # request.timeout.ms
    ((_, again),) = h.host.take_sent(AlterPartitionRequest)
    assert (again.new_isr, again.partition_epoch) == ((1, 2, 3), 0) and again.correlation != first.correlation
    h.fetch(3, replica=2)
    assert h.p.hw == 2 and h.p.maximal_isr() == (1, 2, 3)
    h.change(isr=(1, 2, 3))  # it committed after all
    h.fetch(3, replica=3)
    assert h.p.pending_isr is None and h.p.hw == 3
