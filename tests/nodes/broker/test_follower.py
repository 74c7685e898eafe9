"""The follower fetcher: requests, flush before the next fetch, appends, HW, truncation on a
diverging epoch (never below the HW), out-of-range, backoff, and the no-truncate bug."""

import pytest

from nodes.broker import (
    Batch,
    BrokerConfig,
    BrokerError,
    FetchedPartition,
    FetchRecordsRequest,
    FetchRecordsResponse,
    FlushPartition,
    TruncatePartitionLog,
)
from tests.nodes.broker.fakes import TP, FatalError, Harness

E = BrokerError


def follower(log_epochs=(), bugs=(), **kw):
    """Node 2 following leader 1 (leader epoch 5), with one record per given epoch in its log."""
    logs = {TP: [Batch(k, 1, e, b"v%d" % k) for k, e in enumerate(log_epochs)]}
    return Harness(node_id=2, leader=1, leader_epoch=5, bugs=bugs, logs=logs, **kw)


def sent_fetch(h):
    fetches = h.host.take_sent(FetchRecordsRequest)
    assert len(fetches) <= 1
    return fetches[0] if fetches else (None, None)


def answer(h, request, **fields):
    part = FetchedPartition(TP, fields.pop("error", E.NONE), **fields)
    h.rm.fetcher.on_response(1, FetchRecordsResponse((part,), request.correlation))
    h.step()


def test_fetch_request_shape():
    h = follower(log_epochs=(0, 0, 3))
    dst, request = sent_fetch(h)
    assert dst == 1 and (request.replica_id, request.broker_epoch) == (2, 102)
    (fp,) = request.partitions
    assert (fp.fetch_offset, fp.current_leader_epoch, fp.last_fetched_epoch) == (3, 5, 3)
    assert sent_fetch(follower())[1].partitions[0].last_fetched_epoch is None  # empty log


def test_append_flush_then_fetch_again_and_hw_is_min_of_leader_hw_and_leo():
    h = follower()
    _, request = sent_fetch(h)
    answer(h, request, high_watermark=9, batches=(Batch(0, 2, 5, b"ab"),))
    assert h.p.leo == 2 and h.p.hw == 2  # min(leader HW 9, own LEO 2)
    assert sent_fetch(h) == (None, None)  # flush first: the fetch offset acknowledges the data
    h.flush()
    _, request = sent_fetch(h)
    assert request.partitions[0].fetch_offset == 2
    answer(h, request, high_watermark=1)
    assert h.p.hw == 2  # never decreases


def test_lazy_flush_fetches_before_flushing():
    h = follower(bugs=("lazy-flush",))
    _, request = sent_fetch(h)
    answer(h, request, high_watermark=0, batches=(Batch(0, 1, 5, b"a"),))
    _, request = sent_fetch(h)
    assert request.partitions[0].fetch_offset == 1 and h.host.take(FlushPartition) == []


def test_stale_or_foreign_batches_are_not_appended():
    h = follower(log_epochs=(3,))
    _, request = sent_fetch(h)
    batches = (Batch(1, 1, 4, b"ok"), Batch(3, 1, 4, b"gap"), Batch(4, 1, 4, b"x"))
    answer(h, request, high_watermark=0, batches=batches)
    assert h.p.leo == 2
    h.flush()
    _, request = sent_fetch(h)
    answer(h, request, high_watermark=0, batches=(Batch(2, 1, 9, b"future epoch"),))
    assert h.p.leo == 2


@pytest.mark.parametrize(
    "log_epochs, diverging, new_end",
    [
        ((0, 0, 1, 1), (0, 2), 2),  # the leader's epoch 0 ends at 2
        ((0, 0, 1, 1), (0, 3), 2),  # our own epoch 0 ends at 2: min(2, 3)
        ((0, 0, 2, 2), (1, 3), 2),  # we lack epoch 1: our epoch 0 ends at 2 (another round may follow)
        ((1, 1), (-1, 0), 0),  # the leader has nothing at or below our epoch
    ],
)
def test_truncation_on_a_diverging_epoch(log_epochs, diverging, new_end):
    h = follower(log_epochs=log_epochs)
    _, request = sent_fetch(h)
    answer(h, request, high_watermark=0, diverging_epoch=diverging)
    assert h.p.leo == new_end
    assert h.host.take(TruncatePartitionLog) == [TruncatePartitionLog(TP, new_end)]
    h.flush()  # the truncation is made durable before the next fetch
    _, request = sent_fetch(h)
    assert request.partitions[0].fetch_offset == new_end


def test_truncating_below_the_hw_is_fatal_unless_unclean_election_is_enabled():
    h = follower(log_epochs=(0, 0, 1))
    h.p.hw = 3
    _, request = sent_fetch(h)
    with pytest.raises(FatalError, match="below the high watermark 3"):
        answer(h, request, high_watermark=3, diverging_epoch=(0, 2))
    h = follower(log_epochs=(0, 0, 1), topic_configs=(("unclean.leader.election.enable", "true"),))
    h.p.hw = 3
    _, request = sent_fetch(h)
    answer(h, request, high_watermark=3, diverging_epoch=(0, 2))
    assert h.p.leo == 2 and h.p.hw == 2


def test_out_of_range_truncates_to_the_leaders_log_end():
    h = follower(log_epochs=(0, 0, 0))
    _, request = sent_fetch(h)
    answer(h, request, error=E.OFFSET_OUT_OF_RANGE, high_watermark=0, log_end_offset=1)
    assert h.p.leo == 1


def test_no_truncate_bug_keeps_the_divergent_suffix():
    h = follower(log_epochs=(0, 0, 1), bugs=("no-truncate",))
    _, request = sent_fetch(h)
    assert request.partitions[0].last_fetched_epoch is None  # the leader cannot detect divergence
    answer(h, request, high_watermark=0, diverging_epoch=(0, 2))
    answer(h, request, error=E.OFFSET_OUT_OF_RANGE, log_end_offset=1)
    assert h.p.leo == 3 and h.host.take(TruncatePartitionLog) == []


def test_errors_back_off_and_responses_to_old_requests_are_ignored():
    h = follower(config=BrokerConfig(replica_fetch_backoff_ms=100))
    _, request = sent_fetch(h)
    answer(h, request, error=E.NOT_LEADER_OR_FOLLOWER)
    h.advance(99)
    assert sent_fetch(h) == (None, None)
    h.advance(1)
    _, newer = sent_fetch(h)
    answer(h, request, high_watermark=0, batches=(Batch(0, 1, 5, b"old"),))  # superseded: ignored
    assert h.p.leo == 0 and newer is not None


@pytest.mark.parametrize("error", [E.INCONSISTENT_CLUSTER_ID, E.NOT_CONTROLLER])
def test_a_whole_fetch_refused_backs_off_every_partition_it_asked_for(error):
    """A leader that refuses the request itself (another cluster's node, say) is not asked again at once."""
    h = follower(config=BrokerConfig(replica_fetch_backoff_ms=100))
    _, request = sent_fetch(h)
    h.rm.fetcher.on_response(1, FetchRecordsResponse((), request.correlation, error))
    h.step()
    assert sent_fetch(h) == (None, None)
    h.advance(99)
    assert sent_fetch(h) == (None, None)
    h.advance(1)
    assert sent_fetch(h)[1] is not None


def test_a_lost_fetch_is_sent_again_after_the_request_timeout():
    h = follower(config=BrokerConfig(request_timeout_ms=1_000, replica_fetch_wait_max_ms=500))
    assert sent_fetch(h)[1] is not None
    h.advance(1_499)
    assert sent_fetch(h) == (None, None)
    h.advance(1)
    assert sent_fetch(h)[1] is not None
