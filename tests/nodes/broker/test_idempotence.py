"""Idempotent producers: the per-partition sequence rules (producer_state), producer id blocks
through the quorum, and duplicates recognised across a leader change on three BrokerNodes."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.broker import BrokerError, ProducePartition, ProduceRequest
from nodes.broker.batch import Batch, NewBatch
from nodes.broker.messages import InitProducerIdRequest
from nodes.broker.producer_state import Duplicate, ProducerBatch, ProducerStateManager, producer_of
from nodes.kafka.records import build_batch, encode_batch
from tests.nodes.broker.test_node_cluster import TP, with_topic

E = BrokerError


def pb(seq, count=1, pid=7, epoch=0):
    return ProducerBatch(pid, epoch, seq, count)


def appended(m, info, offset):
    assert m.validate([info]) is None
    m.appended(info, offset, offset + info.record_count - 1)


def test_in_sequence_duplicates_and_gaps():
    m = ProducerStateManager()
    assert m.validate([pb(5)]) is None  # no state: any sequence (Kafka since KIP-360)
    appended(m, pb(0, 2), 0)
    for i, seq in enumerate(range(2, 8)):
        appended(m, pb(seq), 2 + i)
    assert m.validate([pb(7)]) == Duplicate(7, 7)
    assert m.validate([pb(3)]) == Duplicate(3, 3)  # 5 batches retained: 3..7
    assert m.validate([pb(2)]) is E.OUT_OF_ORDER_SEQUENCE_NUMBER  # fell out of the window
    assert m.validate([pb(0, 2)]) is E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert m.validate([pb(9)]) is E.OUT_OF_ORDER_SEQUENCE_NUMBER  # a gap
    assert m.validate([pb(8)]) is None
    assert m.validate([pb(8), pb(9)]) is None and m.validate([pb(8), pb(10)]) is E.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epochs():
    m = ProducerStateManager()
    appended(m, pb(0, epoch=3), 0)
    assert m.validate([pb(1, epoch=2)]) is E.INVALID_PRODUCER_EPOCH
    assert m.validate([pb(4, epoch=4)]) is E.OUT_OF_ORDER_SEQUENCE_NUMBER  # a new epoch starts at 0
    appended(m, pb(0, epoch=4), 1)
    assert m.validate([pb(0, epoch=3)]) is E.INVALID_PRODUCER_EPOCH
    assert m.validate([pb(0, epoch=4)]) == Duplicate(1, 1)


def test_sequence_wraps():
    m = ProducerStateManager()
    appended(m, pb((1 << 31) - 1), 0)
    assert m.validate([pb(0)]) is None


def test_dedup_window_1_appends_an_older_retry():
    m = ProducerStateManager(window=1, lenient=True)
    appended(m, pb(0), 0)
    appended(m, pb(1), 1)
    assert m.validate([pb(1)]) == Duplicate(1, 1)
    assert m.validate([pb(0)]) is None  # the bug: a retried older batch would be appended again


def test_producer_fields_from_a_v2_batch_and_rebuild():
    data = encode_batch(build_batch([(None, b"a"), (None, b"b")], producer_id=42, producer_epoch=1, base_sequence=9))
    assert producer_of(NewBatch(data, 2)) == ProducerBatch(42, 1, 9, 2)
    assert producer_of(NewBatch(encode_batch(build_batch([(None, b"a")])), 1)) is None
    assert producer_of(NewBatch(b"x" * 80, 1)) is None
    m = ProducerStateManager()
    m.rebuild([Batch(0, 2, 0, data), Batch(2, 1, 0, b"raw", producer=pb(11, pid=42, epoch=1))])
    assert m.validate([ProducerBatch(42, 1, 9, 2)]) == Duplicate(0, 1)
    assert m.validate([pb(12, pid=42, epoch=1)]) is None


@given(st.lists(st.tuples(st.integers(0, 9), st.booleans()), max_size=40))
@settings(max_examples=60, deadline=None)
def test_no_sequence_is_appended_twice(attempts):
    """Any order of first sends and retries: each sequence is in the log at most once, in order."""
    m = ProducerStateManager()
    log = []
    for seq, rebuild in attempts:
        if rebuild:
            m.rebuild(Batch(o, 1, 0, b"", producer=pb(s)) for o, s in enumerate(log))
        verdict = m.validate([pb(seq)])
        if verdict is None:
            m.appended(pb(seq), len(log), len(log))
            log.append(seq)
        elif isinstance(verdict, Duplicate):
            assert log[verdict.first_offset] == seq
    assert len(set(log)) == len(log)
    assert all(b == a + 1 for a, b in zip(log, log[1:]))


# ---------------------------------------------------------------------------- on a cluster


def send(c, node, value, pid, seq, epoch=0, acks=-1):
    rid = c.rid("p")
    batch = NewBatch(json.dumps(value).encode(), 1, producer=ProducerBatch(pid, epoch, seq, 1))
    c.call(node, "produce", rid, ProduceRequest(acks, 3_000, (ProducePartition(TP, (batch,)),)))
    return rid


def result(c, rid):
    assert c.run_until(lambda: rid in c.replies, 5_000)
    return c.produce_result(rid)


def test_producer_ids_come_in_blocks_through_the_quorum():
    c = with_topic()
    got = [c.request(i, "init_producer_id", InitProducerIdRequest()) for i in (1, 2, 3, 1)]
    assert all(r.error is E.NONE and r.producer_epoch == 0 for r in got)
    pids = [r.producer_id for r in got]
    assert len(set(pids)) == 4 and pids[3] == pids[0] + 1
    c.run_for(500)
    assert all(c.broker(i).image.next_producer_id == 3_000 for i in c.ids)
    # (with a transactional id the transaction coordinator answers: tests/nodes/broker/test_txn_coordinator.py)
    # a restarted broker never reuses its old block
    c.crash(1)
    c.boot(1)
    assert c.run_until(lambda: c.broker(1).broker_epoch() is not None, 20_000)
    again = c.request(1, "init_producer_id", InitProducerIdRequest(), timeout_ms=10_000)
    assert again.error is E.NONE and again.producer_id >= 3_000


def test_a_retry_after_a_leader_change_is_not_appended_twice():
    c = with_topic()
    old = c.leader_ready(TP)
    pid = c.request(old, "init_producer_id", InitProducerIdRequest()).producer_id
    offsets = [result(c, send(c, old, v, pid, v)).base_offset for v in range(3)]
    assert offsets == [0, 1, 2]
    assert result(c, send(c, old, 1, pid, 1)).base_offset == 1  # a retry on the same leader
    assert result(c, send(c, old, 9, pid, 7)).error is E.OUT_OF_ORDER_SEQUENCE_NUMBER
    c.crash(old)
    assert c.run_until(lambda: c.leader_ready(TP) not in (None, old), 30_000)
    new = c.leader_ready(TP)
    for v in range(3):  # every batch retried against the new leader (its state rebuilt from its log)
        r = result(c, send(c, new, v, pid, v))
        assert (r.error, r.base_offset) == (E.NONE, v)
    assert result(c, send(c, new, 3, pid, 3)).base_offset == 3
    c.boot(old)
    c.run_for(3_000)
    assert [v for _, v in c.read_all(new, TP)] == [0, 1, 2, 3]


def test_dedup_window_1_duplicates_an_older_retry_on_a_cluster():
    for bugs, expected in (((), [0, 1, 2]), (("dedup-window-1",), [0, 1, 2, 0])):
        c = with_topic(bugs=bugs)
        lid = c.leader_ready(TP)
        for v in range(3):
            assert result(c, send(c, lid, v, 5, v)).error is E.NONE
        result(c, send(c, lid, 0, 5, 0))
        assert [v for _, v in c.read_all(lid, TP)] == expected


def test_producer_state_survives_a_restart_of_every_node():
    """Rebuilt from the partition logs on disk: a retry after a whole-cluster restart is a duplicate."""
    c = with_topic()
    lid = c.leader_ready(TP)
    for v in range(3):
        assert result(c, send(c, lid, v, 9, v)).error is E.NONE
    c.run_for(1_000)
    for i in c.ids:
        c.crash(i)
    for i in c.ids:
        c.boot(i)
    assert c.run_until(lambda: c.leader_ready(TP, 3) is not None, 30_000)
    lid = c.leader_ready(TP, 3)
    r = result(c, send(c, lid, 1, 9, 1))
    assert (r.error, r.base_offset) == (E.NONE, 1)
    assert result(c, send(c, lid, 5, 9, 5)).error is E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert result(c, send(c, lid, 3, 9, 3)).base_offset == 3
    assert [v for _, v in c.read_all(lid, TP)] == [0, 1, 2, 3]
