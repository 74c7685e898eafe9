"""CRC recovery of the raft log and of partition logs: whatever a truncation or a flipped bit does to
the bytes, recovery yields a prefix of the records written, never garbage; the skip-crc bug does
not."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.broker.batch import Batch, encode_batches, recover_batches, scan_beyond
from nodes.raft import QuorumState, Record, decode_quorum_state, encode_quorum_state, encode_records, recover
from nodes.raft.quorum_state import with_repair


@st.composite
def logs(draw: st.DrawFn) -> list[Record]:
    payloads = draw(st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=12))
    epochs = sorted(draw(st.lists(st.integers(1, 5), min_size=len(payloads), max_size=len(payloads))))
    return [Record(i, e, p, draw(st.booleans())) for i, (e, p) in enumerate(zip(epochs, payloads, strict=True))]


@st.composite
def batch_logs(draw: st.DrawFn) -> list[Batch]:
    counts = draw(st.lists(st.integers(1, 4), min_size=1, max_size=8))
    out, base = [], 0
    for i, n in enumerate(counts):
        out.append(Batch(base, n, 1 + i // 3, draw(st.binary(min_size=1, max_size=40)), draw(st.integers(-1, 99))))
        base += n
    return out


@settings(max_examples=300, deadline=None)
@given(logs(), st.data())
def test_any_truncation_recovers_a_prefix(records: list[Record], data: st.DataObject) -> None:
    raw = encode_records(records)
    cut = data.draw(st.integers(0, len(raw)))
    got, info = recover(raw[:cut])
    assert got == records[: len(got)]
    assert info.valid_bytes == len(encode_records(got))
    assert info.seen_end is None  # a torn tail is not damage inside the log
    if cut == len(raw):
        assert got == records and info.reason is None


@settings(max_examples=300, deadline=None)
@given(logs(), st.data())
def test_any_flipped_bit_recovers_a_prefix(records: list[Record], data: st.DataObject) -> None:
    raw = bytearray(encode_records(records))
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] ^= 1 << data.draw(st.integers(0, 7))
    got, info = recover(bytes(raw))
    assert got == records[: len(got)]  # never a record that was not written
    assert len(got) < len(records)  # and the damaged one is never kept
    starts = [len(encode_records(records[:i])) for i in range(len(records) + 1)]
    damaged = max(i for i in range(len(records)) if starts[i] <= pos)
    assert len(got) == damaged
    if damaged < len(records) - 1:  # intact records follow the damage: recovery says how far the log went
        assert info.seen_end == len(records)
        assert info.seen_epoch == records[-1].epoch


def test_skip_crc_trusts_a_flipped_payload() -> None:
    records = [Record(i, 1, b'{"f":"write","key":"r1","value":%d}' % i) for i in range(5)]
    raw = bytearray(encode_records(records))
    pos = len(encode_records(records[:2])) + 30  # inside record 2's payload
    raw[pos] ^= 0x01
    good, info = recover(bytes(raw))
    assert good == records[:2] and info.seen_end == 5
    trusted, info = recover(bytes(raw), check_crc=False)
    assert len(trusted) == 5 and trusted[2] != records[2]  # garbage served as a record
    assert info.reason is None


@settings(max_examples=200, deadline=None)
@given(batch_logs(), st.data())
def test_partition_log_damage_recovers_a_prefix(batches: list[Batch], data: st.DataObject) -> None:
    raw = bytearray(encode_batches(batches))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
        torn = True
    else:
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= 1 << data.draw(st.integers(0, 7))
        torn = False
    got, valid = recover_batches(bytes(raw))
    assert got == batches[: len(got)]
    assert valid == len(encode_batches(got))
    seen = scan_beyond(bytes(raw), valid, got[-1].next_offset if got else 0) if valid < len(raw) else None
    if torn:
        assert seen is None
    elif len(got) < len(batches) - 1:
        assert seen == batches[-1].next_offset  # the range that must be fetched again


def test_repair_state_round_trips_and_only_rises() -> None:
    state = QuorumState(3, 1, 1)
    assert encode_quorum_state(state) == encode_quorum_state(QuorumState(3, 1, 1, 0, 0))
    assert b"repair" not in encode_quorum_state(state)  # files written before disk faults stay the same
    repaired = with_repair(state, 40, 2)
    assert repaired == QuorumState(3, 1, 1, 40, 2)
    assert decode_quorum_state(encode_quorum_state(repaired)) == repaired  # type: ignore[arg-type]
    assert with_repair(repaired, 30, 2) is repaired
    assert with_repair(state, None) is state
    assert with_repair(None, 5, 1) == QuorumState(0, None, None, 5, 1)


def test_recovery_is_linear_enough_on_a_long_damaged_log() -> None:
    rng = random.Random(7)
    records = [Record(i, 1 + i // 500, rng.randbytes(rng.randrange(10, 200))) for i in range(3000)]
    raw = bytearray(encode_records(records))
    raw[100] ^= 0x10
    got, info = recover(bytes(raw))
    assert len(got) < 3 and info.seen_end == 3000 and info.seen_epoch == records[-1].epoch
