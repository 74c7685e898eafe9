"""Transactions, partition side (docs/kraft.md §7.3): transactional and control batches in the partition
log, the last stable offset, the aborted-transaction index, read_committed fetches, producer-epoch
fencing of batches and markers, and all of it rebuilt from the log on a new leader or a restart."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.broker import BrokerError, FetchPartition, FetchRecordsRequest, ProducePartition, ProduceRequest
from nodes.broker.batch import Batch, NewBatch, encode_batches, recover_batches
from nodes.broker.config import BrokerConfig
from nodes.broker.log import PartitionLog
from nodes.broker.messages import COORDINATOR_ORIGIN, ListOffsetsPartition, ListOffsetsRequest
from nodes.broker.producer_state import (
    ABORT,
    COMMIT,
    AbortedTxn,
    ProducerBatch,
    ProducerStateManager,
    TxnMarker,
    is_control,
    marker_bytes,
    marker_of,
    producer_of,
)
from nodes.kafka.records import build_batch, decode_batch, encode_batch
from tests.nodes.broker.fakes import TP, Harness, result
from tests.nodes.broker.test_node_cluster import TP as TP0
from tests.nodes.broker.test_node_cluster import with_topic

E = BrokerError


def txn(pid, seq, count=1, epoch=0):
    return ProducerBatch(pid, epoch, seq, count, transactional=True)


# ---------------------------------------------------------------------------- producer state


def test_markers_and_transactional_batches_from_v2_bytes():
    data = encode_batch(
        build_batch([(None, b"a"), (None, b"b")], producer_id=9, producer_epoch=2, base_sequence=0, transactional=True)
    )
    assert producer_of(NewBatch(data, 2)) == ProducerBatch(9, 2, 0, 2, True)
    assert producer_of(NewBatch(data, 2)).transactional and marker_of(NewBatch(data, 2)) is None
    for kind in (ABORT, COMMIT):
        raw = marker_bytes(TxnMarker(9, 3, kind, coordinator_epoch=4), 1_000)
        decoded = decode_batch(raw)
        assert decoded.is_control and decoded.is_transactional and decoded.record_count == 1
        assert decoded.records[0].key == bytes([0, 0, 0, kind])  # version 0, type
        assert marker_of(NewBatch(raw, 1)) == TxnMarker(9, 3, kind, 4)
        assert is_control(NewBatch(raw, 1)) and producer_of(NewBatch(raw, 1)) is None
    assert not is_control(NewBatch(data, 2)) and not is_control(NewBatch(b"{}", 1))
    assert is_control(NewBatch(b"", 1, producer=TxnMarker(1, 0, COMMIT)))


def test_an_open_transaction_holds_the_first_unstable_offset_until_its_marker():
    m = ProducerStateManager()
    m.appended(ProducerBatch(5, 0, 0, 1), 0, 0)  # idempotent, not transactional
    assert m.first_unstable_offset() is None
    m.appended(txn(7, 0, 2), 1, 2)
    m.appended(txn(8, 0), 3, 3)
    m.appended(txn(7, 2), 4, 4)  # same transaction: still starts at 1
    assert m.ongoing == {7: 1, 8: 3} and m.first_unstable_offset() == 1
    m.marker_appended(TxnMarker(7, 0, COMMIT), 5)
    assert m.first_unstable_offset() == 3 and m.aborted == []
    m.marker_appended(TxnMarker(8, 0, ABORT), 6)
    assert m.first_unstable_offset() is None and m.aborted == [AbortedTxn(8, 3, 6)]
    m.appended(txn(7, 3), 7, 7)  # the producer's next transaction
    assert m.first_unstable_offset() == 7


def test_aborted_transactions_overlapping_a_range():
    m = ProducerStateManager()
    m.aborted = [AbortedTxn(1, 0, 4), AbortedTxn(2, 2, 6), AbortedTxn(3, 8, 9)]
    assert m.aborted_between(0, 10) == tuple(m.aborted)
    assert m.aborted_between(5, 8) == (AbortedTxn(2, 2, 6),)  # 1 ended before 5; 3 starts at 8
    assert m.aborted_between(7, 9) == (AbortedTxn(3, 8, 9),)
    assert m.aborted_between(0, 1) == (AbortedTxn(1, 0, 4),)
    assert m.aborted_between(10, 20) == () and m.aborted_between(3, 3) == ()


def test_old_epochs_are_fenced_for_batches_and_markers():
    m = ProducerStateManager()
    m.appended(txn(7, 0, epoch=1), 0, 0)
    assert m.validate_marker(TxnMarker(7, 0, COMMIT)) is E.INVALID_PRODUCER_EPOCH
    assert m.validate([txn(7, 1, epoch=0)]) is E.INVALID_PRODUCER_EPOCH
    assert m.validate_marker(TxnMarker(7, 1, COMMIT)) is None
    assert m.validate_marker(TxnMarker(99, 0, ABORT)) is None  # a producer with no state here
    # the coordinator bumps the epoch and aborts: the old epoch is fenced from then on
    m.marker_appended(TxnMarker(7, 2, ABORT), 1)
    assert m.producers[7].epoch == 2 and m.aborted == [AbortedTxn(7, 0, 1)]
    assert m.validate([txn(7, 1, epoch=1)]) is E.INVALID_PRODUCER_EPOCH
    assert m.validate_marker(TxnMarker(7, 1, ABORT)) is E.INVALID_PRODUCER_EPOCH
    assert m.validate([txn(7, 0, epoch=2)]) is None


def test_a_marker_from_an_older_coordinator_epoch_is_fenced_and_rebuilt_from_the_log():
    """A deposed coordinator's marker (an older coordinator epoch than the producer's last marker here)
    must not end the producer's next transaction: TRANSACTION_COORDINATOR_FENCED, as Kafka."""
    m = ProducerStateManager()
    m.appended(txn(7, 0), 0, 0)
    m.marker_appended(TxnMarker(7, 0, COMMIT, coordinator_epoch=1), 1)  # the new coordinator's commit
    m.appended(txn(7, 1), 2, 2)  # the producer's next transaction, same epoch
    stale = TxnMarker(7, 0, COMMIT, coordinator_epoch=0)  # the old coordinator's, for the first one
    assert m.validate_marker(stale) is E.TRANSACTION_COORDINATOR_FENCED
    assert m.validate_marker(TxnMarker(7, 0, ABORT, coordinator_epoch=1)) is None
    assert m.validate_marker(TxnMarker(7, 0, ABORT, coordinator_epoch=2)) is None
    assert m.validate_marker(TxnMarker(99, 0, ABORT, coordinator_epoch=0)) is None  # no state here
    assert m.first_unstable_offset() == 2
    log = [
        Batch(0, 1, 0, b"", producer=txn(7, 0)),
        Batch(1, 1, 0, b"", producer=TxnMarker(7, 0, COMMIT, coordinator_epoch=1)),
        Batch(2, 1, 0, b"", producer=txn(7, 1)),
    ]
    rebuilt = ProducerStateManager()
    rebuilt.rebuild(log)
    assert rebuilt.validate_marker(stale) is E.TRANSACTION_COORDINATOR_FENCED
    assert rebuilt.producers[7].coordinator_epoch == 1 and rebuilt.first_unstable_offset() == 2


# A log as a list of actions: ("data", pid, transactional) or ("end", pid, commit)
_ACTION = st.one_of(
    st.tuples(st.just("data"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
)


def _log_of(actions):
    """Batches of one record each; returns the log and, per offset, whether a read_committed
    consumer must see that record (data not in an aborted or still-open transaction)."""
    batches, seq, open_txn, fate = [], {}, {}, {}
    for offset, (kind, pid, flag) in enumerate(actions):
        if kind == "data":
            info = ProducerBatch(pid, 0, seq.get(pid, 0), 1, flag)
            seq[pid] = seq.get(pid, 0) + 1
            batches.append(Batch(offset, 1, 0, b"d", producer=info))
            if flag:
                open_txn.setdefault(pid, []).append(offset)
            else:
                fate[offset] = True
        else:
            batches.append(Batch(offset, 1, 0, b"m", producer=TxnMarker(pid, 0, COMMIT if flag else ABORT)))
            for o in open_txn.pop(pid, []):
                fate[o] = flag
    return batches, fate, open_txn


def _consume(served, aborted):
    """What a read_committed client keeps (Kafka's consumer): skip a producer's batches from the
    first offset of one of its aborted transactions until its abort marker."""
    pending = sorted(aborted, key=lambda a: a[1])
    skipping: set[int] = set()
    kept = []
    for batch in served:
        while pending and pending[0][1] <= batch.base_offset:
            skipping.add(pending.pop(0)[0])
        marker = marker_of(batch)
        if marker is not None:
            if not marker.commit:
                skipping.discard(marker.producer_id)
            continue
        info = producer_of(batch)
        if info is not None and info.transactional and info.producer_id in skipping:
            continue
        kept.append(batch.base_offset)
    return kept


@given(st.lists(_ACTION, min_size=1, max_size=30), st.integers(1, 5))
@settings(max_examples=80, deadline=None)
def test_read_committed_sees_exactly_the_committed_records(actions, chunk):
    """Served in chunks up to the LSO with the aborted list, a consumer keeps exactly the records
    of committed transactions and non-transactional ones; the rebuilt state is the incremental one."""
    batches, fate, still_open = _log_of(actions)
    m = ProducerStateManager()
    for b in batches:
        if producer_of(b) is not None:
            m.appended(producer_of(b), b.base_offset, b.last_offset)
        else:
            m.marker_appended(marker_of(b), b.base_offset)
    rebuilt = ProducerStateManager()
    rebuilt.rebuild(batches)
    assert (rebuilt.ongoing, rebuilt.aborted) == (m.ongoing, m.aborted)
    lso = m.first_unstable_offset()
    lso = len(batches) if lso is None else lso
    assert lso == min([len(batches), *(offsets[0] for offsets in still_open.values())])
    log = PartitionLog(batches)
    kept, offset = [], 0
    while offset < lso:
        served = log.read(offset, lso, chunk)
        aborted = m.aborted_between(offset, served[-1].next_offset)
        kept += _consume(served, [(a.producer_id, a.first_offset) for a in aborted])
        offset = served[-1].next_offset
    assert kept == [o for o in sorted(fate) if fate[o] and o < lso]


# ---------------------------------------------------------------------------- on the leader


def single():
    """A one-replica leader: its HW follows its flushed log end."""
    return Harness(replicas=(1,), config=BrokerConfig(min_insync_replicas=1, replica_lag_time_max_ms=1_000))


def v2(pid, seq, *values, epoch=0, transactional=True):
    records = [(None, json.dumps(v).encode()) for v in values]
    data = encode_batch(
        build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional)
    )
    return NewBatch(data, len(values))


def marker(pid, commit, epoch=0):
    return NewBatch(marker_bytes(TxnMarker(pid, epoch, COMMIT if commit else ABORT), 0), 1)


def produce(h, *batches, origin="client"):
    box = []
    h.rm.append_records(ProduceRequest(1, 1_000, (ProducePartition(TP, batches),), origin), box.append, box.append)
    h.rm.settle()
    h.flush()
    return result(box)


def fetch(h, offset, isolation=1, max_wait_ms=0):
    box = []
    request = FetchRecordsRequest((FetchPartition(TP, offset),), max_wait_ms=max_wait_ms, isolation_level=isolation)
    h.rm.fetch_messages(request, box.append)
    h.rm.settle()
    return box


def offsets(r):
    return [b.base_offset for b in r.batches]


def latest(h, isolation, timestamp=-1):
    request = ListOffsetsRequest((ListOffsetsPartition(TP, timestamp),), isolation_level=isolation)
    return h.rm.list_offsets(request).partitions[0].offset


def test_lso_held_by_an_open_transaction_and_read_committed_stops_there():
    h = single()
    assert produce(h, NewBatch(b"1", 1)).error is E.NONE  # offset 0: plain
    assert produce(h, v2(7, 0, "a", "b")).error is E.NONE  # 1-2: transaction of 7 opens at 1
    assert produce(h, NewBatch(b"3", 1, 100)).error is E.NONE  # 3: plain, after the open transaction
    assert (h.p.hw, h.p.last_stable_offset) == (4, 1)
    r = result(fetch(h, 0))
    assert offsets(r) == [0] and (r.high_watermark, r.last_stable_offset, r.aborted_transactions) == (4, 1, ())
    assert result(fetch(h, 1)).batches == ()
    u = result(fetch(h, 0, isolation=0))  # read_uncommitted reads to the HW, reports the LSO
    assert offsets(u) == [0, 1, 3] and u.last_stable_offset == 1 and u.aborted_transactions is None
    assert (latest(h, 0), latest(h, 1)) == (4, 1)
    assert (latest(h, 0, timestamp=50), latest(h, 1, timestamp=50)) == (3, -1)  # 3 is above the LSO
    # a read_committed fetch parked at the LSO wakes when the commit marker moves it
    parked = fetch(h, 1, max_wait_ms=5_000)
    assert parked == []
    assert produce(h, marker(7, commit=True), origin=COORDINATOR_ORIGIN).error is E.NONE  # 4
    woken = result(parked)  # at once: the marker (not yet under the HW) released 1-3
    assert offsets(woken) == [1, 3] and woken.last_stable_offset == 4 and woken.aborted_transactions == ()
    assert h.p.last_stable_offset == h.p.hw == 5 and offsets(result(fetch(h, 1))) == [1, 3, 4]


def test_an_aborted_transaction_is_listed_for_the_ranges_that_overlap_it():
    h = single()
    produce(h, v2(7, 0, "a"))  # 0
    produce(h, v2(8, 0, "x"))  # 1
    produce(h, v2(7, 1, "b"))  # 2
    assert h.p.last_stable_offset == 0
    produce(h, marker(7, commit=False), origin=COORDINATOR_ORIGIN)  # 3: 7 aborted
    assert h.p.last_stable_offset == 1  # 8 still open
    produce(h, marker(8, commit=True), origin=COORDINATOR_ORIGIN)  # 4
    produce(h, NewBatch(b"5", 1))  # 5
    assert h.p.last_stable_offset == h.p.hw == 6
    r = result(fetch(h, 0))
    assert offsets(r) == [0, 1, 2, 3, 4, 5] and r.aborted_transactions == ((7, 0),)
    assert result(fetch(h, 3)).aborted_transactions == ((7, 0),)  # its marker is still served
    assert result(fetch(h, 4)).aborted_transactions == ()
    assert result(fetch(h, 0, isolation=0)).aborted_transactions is None


def test_fenced_and_client_control_batches_are_refused():
    h = single()
    assert produce(h, v2(7, 0, "a", epoch=1)).error is E.NONE
    assert produce(h, v2(7, 1, "z", epoch=0)).error is E.INVALID_PRODUCER_EPOCH
    assert produce(h, marker(7, True, epoch=0), origin=COORDINATOR_ORIGIN).error is E.INVALID_PRODUCER_EPOCH
    assert produce(h, marker(7, True, epoch=1)).error is E.INVALID_RECORD  # clients may not write markers
    assert h.p.leo == 1
    # InitProducerId bumped the epoch: the coordinator aborts with epoch 2; the zombie at 1 is fenced
    assert produce(h, marker(7, False, epoch=2), origin=COORDINATOR_ORIGIN).error is E.NONE
    assert produce(h, v2(7, 1, "zombie", epoch=1)).error is E.INVALID_PRODUCER_EPOCH
    assert produce(h, v2(7, 0, "new", epoch=2)).error is E.NONE
    assert h.p.leo == 3 and h.p.last_stable_offset == 2
    assert result(fetch(h, 0)).aborted_transactions == ((7, 0),)


def _state(h):
    st_ = h.p.producers
    return h.p.last_stable_offset, dict(st_.ongoing), list(st_.aborted), {p: e.epoch for p, e in st_.producers.items()}


def test_transaction_state_is_rebuilt_on_a_new_leader_epoch_and_after_a_restart():
    h = single()
    produce(h, v2(7, 0, "a", epoch=1))  # 0: aborted below
    produce(h, v2(8, 0, "x"))  # 1: left open
    produce(h, marker(7, False, epoch=1), origin=COORDINATOR_ORIGIN)  # 2
    produce(h, v2(9, 0, "c"))  # 3: committed below
    produce(h, marker(9, True), origin=COORDINATOR_ORIGIN)  # 4
    before = _state(h)
    assert before == (1, {8: 1}, [AbortedTxn(7, 0, 2)], {7: 1, 8: 0, 9: 0})
    h.change(leader_epoch=1)  # a new leadership: the state is rebuilt from the log
    assert h.p._producers is None and _state(h) == before
    # a restart: the log recovered from its on-disk framing (raw v2 bytes, no in-memory fields)
    disk = encode_batches(h.p.log.batches)
    recovered, _ = recover_batches(disk)
    again = Harness(
        replicas=(1,), config=BrokerConfig(min_insync_replicas=1, replica_lag_time_max_ms=1_000), logs={TP: recovered}
    )
    again.change(leader_epoch=2)
    again.flush()
    assert again.p.hw == 5 and _state(again) == before
    r = result(fetch(again, 0))
    assert offsets(r) == [0] and r.last_stable_offset == 1 and r.aborted_transactions == ((7, 0),)
    assert produce(again, v2(7, 1, "zombie", epoch=0)).error is E.INVALID_PRODUCER_EPOCH
    assert produce(again, marker(8, True), origin=COORDINATOR_ORIGIN).error is E.NONE
    assert again.p.last_stable_offset == again.p.hw == 6
    assert offsets(result(fetch(again, 0))) == [0, 1, 2, 3, 4, 5]


def test_truncation_forgets_a_transaction_and_its_abort():
    h = single()
    produce(h, v2(7, 0, "a"))
    produce(h, marker(7, False), origin=COORDINATOR_ORIGIN)
    assert h.p.producers.aborted == [AbortedTxn(7, 0, 1)]
    h.p.truncate(1)  # the marker goes: the transaction is open again
    assert h.p.producers.ongoing == {7: 0} and h.p.producers.aborted == []


# ---------------------------------------------------------------------------- three brokers


def test_a_new_leader_after_a_crash_holds_the_lso_and_lists_the_abort():
    c = with_topic()
    old = c.leader_ready(TP0)

    def send(node, *batches, origin="client"):
        rid = c.rid("p")
        c.call(node, "produce", rid, ProduceRequest(-1, 3_000, (ProducePartition(TP0, batches),), origin))
        assert c.run_until(lambda: rid in c.replies, 5_000)
        return c.produce_result(rid).error

    assert send(old, v2(7, 0, "a")) is E.NONE  # 0
    assert send(old, marker(7, False), origin=COORDINATOR_ORIGIN) is E.NONE  # 1
    assert send(old, v2(8, 0, "x")) is E.NONE  # 2: open
    c.crash(old)
    assert c.run_until(lambda: c.leader_ready(TP0) not in (None, old), 30_000)
    new = c.leader_ready(TP0)
    assert c.run_until(lambda: c.broker(new).replicas.partitions[TP0].hw == 3, 10_000)
    request = FetchRecordsRequest((FetchPartition(TP0, 0),), max_wait_ms=0, isolation_level=1)
    r = c.request(new, "fetch", request).partitions[0]
    assert (r.error, r.last_stable_offset, r.aborted_transactions) == (E.NONE, 2, ((7, 0),))
    assert [b.base_offset for b in r.batches] == [0, 1]
    assert send(new, v2(8, 0, "x", epoch=0), marker(8, True)) is E.INVALID_RECORD
    assert send(new, marker(8, True), origin=COORDINATOR_ORIGIN) is E.NONE
    r = c.request(new, "fetch", request).partitions[0]
    assert r.last_stable_offset == 4 and [b.base_offset for b in r.batches] == [0, 1, 2, 3]
