"""Partition log (batches, epoch cache, whole-batch truncation, reads) and the batch framing."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.broker import Batch, decode_batch, encode_batch, encode_batches, recover_batches
from nodes.broker.batch import BatchError
from nodes.broker.log import NO_EPOCH, PartitionLog, PartitionLogError


def build(spec):
    """spec: [(epoch, count, size), ...] -> PartitionLog"""
    log = PartitionLog()
    for epoch, count, size in spec:
        log.append(Batch(log.end_offset, count, epoch, b"x" * size))
    return log


def test_append_rejects_gaps_and_epochs_going_down():
    log = build([(0, 2, 1), (1, 1, 1)])
    with pytest.raises(PartitionLogError):
        log.append(Batch(5, 1, 1, b""))
    with pytest.raises(PartitionLogError):
        log.append(Batch(3, 1, 0, b""))
    assert (log.end_offset, log.last_epoch, log.latest_epoch) == (3, 1, 1)


@pytest.mark.parametrize(
    "asked, expected",
    [(-1, (NO_EPOCH, 0)), (0, (0, 3)), (1, (0, 3)), (2, (2, 5)), (3, (2, 5)), (4, (4, 6)), (9, (4, 6))],
)
def test_end_offset_for_epoch_is_the_largest_epoch_at_or_below(asked, expected):
    log = build([(0, 3, 1), (2, 2, 1), (4, 1, 1)])
    assert log.end_offset_for_epoch(asked) == expected


def test_a_new_leader_assigns_its_epoch_at_the_log_end_kafka_7415():
    log = build([(0, 3, 1)])
    log.assign_epoch(5)
    assert log.end_offset_for_epoch(3) == (0, 3)
    assert log.end_offset_for_epoch(5) == (5, 3) and log.last_epoch == 0 and log.latest_epoch == 5
    # truncating at the end drops the never-written epoch
    assert log.truncate(3) == 3 and log.latest_epoch == 0


@pytest.mark.parametrize("offset, end", [(0, 0), (1, 0), (2, 2), (3, 2), (4, 4), (5, 5), (9, 5)])
def test_truncation_removes_whole_batches(offset, end):
    log = build([(0, 2, 1), (1, 2, 1), (3, 1, 1)])
    assert log.truncate(offset) == end == log.end_offset
    assert all(b.next_offset <= end for b in log.batches)


def test_reads_return_whole_batches_below_the_limit_and_the_first_even_if_too_big():
    log = build([(0, 2, 10), (0, 1, 10), (1, 3, 10)])
    assert [b.base_offset for b in log.read(1, 6, 100)] == [0, 2, 3]
    assert [b.base_offset for b in log.read(0, 5, 100)] == [0, 2]  # batch 3..5 ends past 5
    assert [b.base_offset for b in log.read(0, 6, 5)] == [0]
    assert log.read(6, 6, 100) == ()
    assert log.bytes_between(0, 6) == 30 and log.bytes_between(2, 5) == 10 and log.bytes_between(3, 3) == 0


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4), st.integers(0, 20)), max_size=12), st.data())
def test_bytes_between_matches_an_uncapped_read(spec, data):
    spec = sorted(spec, key=lambda s: s[0])  # epochs non-decreasing
    log = build(spec)
    start = data.draw(st.integers(0, log.end_offset))
    limit = data.draw(st.integers(start, log.end_offset))
    assert log.bytes_between(start, limit) == sum(b.size for b in log.read(start, limit, 1 << 30))


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 5), st.binary(max_size=30)), max_size=8))
def test_batch_framing_round_trips_and_recovery_stops_at_a_torn_tail(spec):
    batches, base = [], 0
    for epoch, count, data in sorted(spec, key=lambda s: s[0]):
        batches.append(Batch(base, count, epoch, data, max_timestamp=base * 10))
        base += count
    blob = encode_batches(batches)
    assert recover_batches(blob) == (batches, len(blob))
    if batches:
        assert decode_batch(encode_batch(batches[-1]))[0] == batches[-1]
        torn = blob[:-1]
        recovered, valid = recover_batches(torn)
        assert recovered == batches[:-1] and valid == len(encode_batches(batches[:-1]))


def test_corrupt_frames_are_detected():
    blob = bytearray(encode_batch(Batch(0, 1, 0, b"abc")))
    blob[-1] ^= 0xFF
    with pytest.raises(BatchError, match="corrupt"):
        decode_batch(bytes(blob))
    assert recover_batches(bytes(blob)) == ([], 0)
