"""Divergence detection by the leader and truncation by the follower, never below the HW."""

import pytest

from nodes.raft import AppendLog, Error, Fatal, FetchRequest, FetchResponse, QuorumState, Record, TruncateLog
from nodes.raft.log import LogError, RaftLog

from .helpers import boot, fetch, log_of, make_leader, of, sent


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [(0, (0, 0)), (1, (1, 2)), (2, (1, 2)), (3, (3, 4)), (4, (3, 4)), (9, (3, 4))],
)
def test_end_offset_for_epoch(epoch, expected):
    log = RaftLog(log_of(1, 1, 3, 3))
    assert log.end_offset_for_epoch(epoch) == expected


def test_log_rejects_gaps_and_epoch_regressions():
    log = RaftLog(log_of(1, 2))
    with pytest.raises(LogError):
        log.append(Record(5, 2, b""))
    with pytest.raises(LogError):
        log.append(Record(2, 1, b""))
    log.truncate(1)
    assert log.end_offset == 1 and log.last_epoch == 1 and log.end_offset_for_epoch(2) == (1, 1)


# leader of epoch 4 whose log is [1, 1, 3, 3] + LeaderChange(4) at offset 4
@pytest.mark.parametrize(
    ("fetch_offset", "last_epoch", "diverging"),
    [
        (3, 2, (1, 2)),  # epoch 2 unknown to the leader: its largest epoch <= 2 is 1, ending at 2
        (5, 3, (3, 4)),  # follower has more epoch-3 entries than the leader
        (9, 4, (4, 5)),  # beyond the leader's end in its own epoch
        (4, 3, None),  # valid
        (0, 0, None),  # empty follower
    ],
)
def test_leader_validates_fetch_position(fetch_offset, last_epoch, diverging):
    node, _ = make_leader(1, epoch=4, log=log_of(1, 1, 3, 3))
    response = fetch(node, 2, fetch_offset, last_epoch)
    got = None if response.diverging_epoch is None else (response.diverging_epoch, response.diverging_end_offset)
    assert got == diverging
    if diverging:
        assert response.records == ()
        assert node._leader.end_offsets[2] is None  # a diverging position is not an acknowledgement
    else:
        assert node._leader.end_offsets[2] == fetch_offset


def follower_with(log, hw=None):
    node, _ = boot(2, persisted=QuorumState(5, 1, None), log=log)
    if hw is not None:
        node.handle(1, 1, FetchResponse(Error.NONE, 5, 1, hw, ()))
    return node


def test_follower_truncates_to_the_divergence_point_and_refetches():
    node = follower_with(log_of(1, 1, 2, 2, 2))
    effects = node.handle(2, 1, FetchResponse(Error.NONE, 5, 1, None, (), 1, 2))
    assert of(effects, TruncateLog) == [TruncateLog(2)]
    assert node.log_end_offset == 2
    (request,) = sent(effects, FetchRequest)
    assert (request.fetch_offset, request.last_fetched_epoch) == (2, 1)


def test_follower_truncates_to_its_own_end_of_the_largest_epoch_below():
    node = follower_with(log_of(1, 1, 3))  # the leader says epoch 2 ends at 5; we have no epoch 2
    node.handle(2, 1, FetchResponse(Error.NONE, 5, 1, None, (), 2, 5))
    assert node.log_end_offset == 2


def test_follower_never_truncates_below_its_high_watermark():
    node = follower_with(log_of(1, 1, 2, 2, 2), hw=4)
    assert node.high_watermark == 4
    effects = node.handle(2, 1, FetchResponse(Error.NONE, 5, 1, None, (), 1, 2))
    assert of(effects, TruncateLog) == []
    (fatal,) = of(effects, Fatal)
    assert "below the high watermark" in fatal.reason
    assert node.log_end_offset == 5 and node.failed


def test_follower_ignores_records_that_do_not_start_at_its_end():
    node = follower_with(log_of(1, 1))
    effects = node.handle(2, 1, FetchResponse(Error.NONE, 5, 1, None, (Record(5, 5, b"x"),)))
    assert of(effects, AppendLog) == [] and node.log_end_offset == 2
    effects = node.handle(3, 1, FetchResponse(Error.NONE, 5, 1, None, (Record(2, 5, b"x"), Record(3, 9, b"y"))))
    assert of(effects, AppendLog) == [AppendLog((Record(2, 5, b"x"),))]  # epoch 9 > fetch epoch: dropped


def test_truncation_caps_an_outstanding_flush():
    node = follower_with(log_of(1, 1))
    node.handle(2, 1, FetchResponse(Error.NONE, 5, 1, None, (Record(2, 2, b"a"), Record(3, 2, b"b"))))
    assert node._flush_inflight == 4
    node.handle(3, 1, FetchResponse(Error.NONE, 5, 1, None, (), 1, 2))
    assert node.log_end_offset == 2
    node.flushed(4, 4)  # the flush issued before the truncation cannot vouch for later appends
    assert node.flushed_offset == 2
