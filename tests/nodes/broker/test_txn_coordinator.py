"""The transaction coordinator on three simulated BrokerNodes (docs/kraft.md §7.3): InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn with its markers
on every partition (and the offsets partition), zombie fencing by the epoch bump, the timeout
abort, and failover: a new coordinator finishes a transaction its predecessor left in
PrepareCommit. Visibility is judged as a read_committed consumer sees it (records below the last
stable offset, minus the aborted transactions the fetch lists)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodes.broker import BrokerError, FetchPartition, FetchRecordsRequest, NewBatch, ProducePartition, ProduceRequest
from nodes.broker import group_messages as gm
from nodes.broker import txn_messages as tm
from nodes.broker.messages import InitProducerIdRequest
from nodes.broker.producer_state import ProducerBatch, is_control, marker_of, producer_of
from nodes.broker.topic_partition import TopicPartition
from nodes.broker.txn_coordinator import COMPLETE_ABORT, COMPLETE_COMMIT, ONGOING, PREPARE_COMMIT
from tests.nodes.broker.cluster import BrokerCluster

E = BrokerError
TXN = "tx-1"
GROUP = "g1"
P0, P1 = TopicPartition("t0", 0), TopicPartition("t0", 1)
SEEDS_DEPOSED = [1, 2, 3]
RETRY = (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE)


def ready(seed: int = 1, bugs: tuple[str, ...] = ()) -> BrokerCluster:
    c = BrokerCluster(3, seed=seed, bugs=bugs).start()
    assert c.run_until(lambda: c.stable_leader() is not None)
    assert c.run_until(c.registered, 20_000)
    assert c.create_topic("t0", partitions=2).error is E.NONE
    for tp in (P0, P1):
        assert c.run_until(lambda tp=tp: c.leader_ready(tp, 3) is not None, 10_000)
    return c


class Producer:
    """A transactional producer as a client library drives the coordinator."""

    def __init__(self, c: BrokerCluster, txn_id: str = TXN, timeout_ms: int = 60_000) -> None:
        self.c = c
        self.txn_id = txn_id
        self.timeout_ms = timeout_ms
        self.pid = -1
        self.epoch = -1
        self.seq: dict[TopicPartition, int] = {}

    def coordinator(self) -> int:
        found: list[int] = []

        def ask() -> bool:
            live = running(self.c)
            r = self.c.request(live[0], "group_call", gm.FindCoordinatorRequest((self.txn_id,), 1), 500)
            info = None if r is None else r.coordinators[0]
            if info is None or info.error is not E.NONE or info.node_id not in live:
                return False
            found.append(info.node_id)
            return True

        assert self.c.run_until(ask, 30_000)
        return found[-1]

    def call(self, method: str, request: Any, error_of: Any = lambda r: r.error) -> Any:
        """Ask the coordinator, retrying what a client retries (concurrent, loading, moved)."""
        answer: list[Any] = []

        def attempt() -> bool:
            if answer:  # (run_until asks its predicate once more after it held)
                return True
            r = self.c.request(self.coordinator(), method, request, 2_000)
            if r is None or error_of(r) in RETRY:
                self.c.run_for(100)
                return False
            answer.append(r)
            return True

        assert self.c.run_until(attempt, 30_000)
        return answer[-1]

    def init(self) -> None:
        r = self.call("init_producer_id", InitProducerIdRequest(self.txn_id, self.timeout_ms))
        assert r.error is E.NONE, r
        self.pid, self.epoch, self.seq = r.producer_id, r.producer_epoch, {}

    def add(self, *tps: TopicPartition) -> BrokerError:
        r = self.call("txn_call", tm.AddPartitionsToTxnRequest(self.txn_id, self.pid, self.epoch, tps), _first)
        return _first(r)

    def add_offsets(self, group: str = GROUP) -> BrokerError:
        return self.call("txn_call", tm.AddOffsetsToTxnRequest(self.txn_id, self.pid, self.epoch, group)).error

    def commit_offsets(self, tp: TopicPartition, offset: int, group: str = GROUP) -> BrokerError:
        request = gm.TxnOffsetCommitRequest(self.txn_id, group, self.pid, self.epoch, (gm.CommitOffset(tp, offset),))
        node = group_coordinator(self.c, group)
        r = self.c.request(node, "group_call", request)
        return r.errors[0][1]

    def send(self, tp: TopicPartition, value: Any) -> BrokerError:
        seq = self.seq.get(tp, 0)
        batch = NewBatch(
            json.dumps(value).encode(), 1, producer=ProducerBatch(self.pid, self.epoch, seq, 1, transactional=True)
        )
        leader = self.c.partition_leader(tp)
        r = self.c.request(leader, "produce", ProduceRequest(-1, 3_000, (ProducePartition(tp, (batch,)),)))
        error = r.partitions[0].error
        if error is E.NONE:
            self.seq[tp] = seq + 1
        return error

    def end(self, commit: bool) -> BrokerError:
        return self.call("txn_call", tm.EndTxnRequest(self.txn_id, self.pid, self.epoch, commit)).error


def running(c: BrokerCluster) -> list[int]:
    """The live nodes that are not paused (a paused node's answers wait for its resume)."""
    return [i for i in c.alive() if not c.sim.nodes[i].paused]


def _first(r: Any) -> BrokerError:
    return r.errors[0][1]


def group_coordinator(c: BrokerCluster, group: str = GROUP) -> int:
    found: list[int] = []

    def ask() -> bool:
        r = c.request(c.alive()[0], "group_call", gm.FindCoordinatorRequest((group,)), 500)
        info = None if r is None else r.coordinators[0]
        if info is None or info.error is not E.NONE or info.node_id not in c.alive():
            return False
        fetched = c.request(info.node_id, "group_call", gm.OffsetFetchRequest(group, ()), 500)
        if fetched is None or fetched.error is not E.NONE:
            return False
        found.append(info.node_id)
        return True

    assert c.run_until(ask, 30_000)
    return found[-1]


def committed_offset(c: BrokerCluster, tp: TopicPartition, group: str = GROUP) -> int:
    r = c.request(group_coordinator(c, group), "group_call", gm.OffsetFetchRequest(group, (tp,)))
    return r.offsets[0].offset


def stable_offset(c: BrokerCluster, tp: TopicPartition, group: str = GROUP) -> tuple[int, BrokerError]:
    """OffsetFetch with require_stable (what read_committed consumers send): (offset, partition error)."""
    r = c.request(group_coordinator(c, group), "group_call", gm.OffsetFetchRequest(group, (tp, P1), True))
    assert r.offsets[1].error is E.NONE  # no transactional commit touches P1 in these tests
    return r.offsets[0].offset, r.offsets[0].error


def visible(c: BrokerCluster, tp: TopicPartition) -> list[Any]:
    """What a read_committed consumer reads from ``tp`` (a client's aborted-transaction filter)."""
    out: list[Any] = []
    offset = 0
    aborting: set[int] = set()
    while True:
        leader = c.partition_leader(tp)
        request = FetchRecordsRequest((FetchPartition(tp, offset),), max_wait_ms=0, isolation_level=1)
        r = c.request(leader, "fetch", request).partitions[0]
        assert r.error is E.NONE, r
        if not r.batches:
            return out
        aborted = sorted(r.aborted_transactions or (), key=lambda a: a[1])
        for batch in r.batches:
            for pid, first in aborted:
                if first <= batch.base_offset:
                    aborting.add(pid)
            aborted = [(pid, first) for pid, first in aborted if first > batch.base_offset]
            if is_control(batch):
                marker = marker_of(batch)
                if marker is not None:
                    aborting.discard(marker.producer_id)
                continue
            info = producer_of(batch)
            if info is not None and info.producer_id in aborting:
                continue
            out.append(json.loads(batch.data))
        offset = r.batches[-1].next_offset


def meta_of(c: BrokerCluster, txn_id: str = TXN) -> Any:
    for i in running(c):
        meta = c.broker(i).txn.txns.get(txn_id)
        if meta is not None and c.broker(i).txn._status(txn_id) is E.NONE:
            return meta
    return None


def settled(c: BrokerCluster, state: int, txn_id: str = TXN) -> bool:
    meta = meta_of(c, txn_id)
    return meta is not None and meta.state == state and not meta.pending


# ---------------------------------------------------------------------------- tests


def test_commit_makes_every_partition_and_the_offsets_visible_at_once() -> None:
    c = ready()
    p = Producer(c)
    p.init()
    assert (p.pid >= 0, p.epoch) == (True, 0)
    assert p.add(P0, P1) is E.NONE and meta_of(c).state == ONGOING
    assert p.send(P0, "a") is E.NONE and p.send(P1, "b") is E.NONE and p.send(P0, "c") is E.NONE
    assert p.add_offsets() is E.NONE
    assert p.commit_offsets(P0, 7) is E.NONE
    c.run_for(500)
    assert visible(c, P0) == [] and visible(c, P1) == []  # the open transaction holds the LSO
    assert committed_offset(c, P0) == -1  # the offset waits for the commit marker
    assert stable_offset(c, P0) == (-1, E.UNSTABLE_OFFSET_COMMIT)  # KIP-447: a pending commit is unstable
    assert p.end(commit=True) is E.NONE
    assert c.run_until(lambda: settled(c, COMPLETE_COMMIT), 10_000)
    assert visible(c, P0) == ["a", "c"] and visible(c, P1) == ["b"]
    assert committed_offset(c, P0) == 7
    assert stable_offset(c, P0) == (7, E.NONE)
    assert p.end(commit=True) is E.NONE  # a retried EndTxn after completion
    assert p.end(commit=False) is E.INVALID_TXN_STATE  # one that contradicts it
    # the next transaction of the same producer
    assert p.add(P1) is E.NONE and p.send(P1, "d") is E.NONE and p.end(commit=True) is E.NONE
    assert c.run_until(lambda: visible(c, P1) == ["b", "d"], 10_000)
    assert c.violations == [] and c.fatal == {}


def test_abort_hides_the_records_and_drops_the_offsets() -> None:
    c = ready(seed=2)
    p = Producer(c)
    p.init()
    assert p.add(P0, P1) is E.NONE and p.add_offsets() is E.NONE
    assert p.send(P0, "x") is E.NONE and p.send(P1, "y") is E.NONE
    assert p.commit_offsets(P1, 3) is E.NONE
    assert p.end(commit=False) is E.NONE
    assert c.run_until(lambda: settled(c, COMPLETE_ABORT), 10_000)
    assert p.add(P0) is E.NONE and p.send(P0, "z") is E.NONE and p.end(commit=True) is E.NONE
    assert c.run_until(lambda: visible(c, P0) == ["z"], 10_000)
    assert visible(c, P1) == []
    assert committed_offset(c, P1) == -1
    r = c.request(group_coordinator(c), "group_call", gm.OffsetFetchRequest(GROUP, (P1,), True))
    assert (r.offsets[0].offset, r.offsets[0].error) == (-1, E.NONE)  # the abort dropped the pending commit
    # read_uncommitted still sees the aborted records (they are in the log)
    leader = c.partition_leader(P1)
    raw = c.request(leader, "fetch", FetchRecordsRequest((FetchPartition(P1, 0),), max_wait_ms=0)).partitions[0]
    assert [json.loads(b.data) for b in raw.batches if not is_control(b)] == ["y"]


def test_a_new_instance_fences_the_zombie_and_aborts_its_transaction() -> None:
    c = ready(seed=3)
    zombie = Producer(c)
    zombie.init()
    assert zombie.add(P0, P1) is E.NONE and zombie.send(P0, "old") is E.NONE
    fresh = Producer(c)
    fresh.init()  # CONCURRENT_TRANSACTIONS while the zombie's transaction is aborted, then a new epoch
    assert fresh.pid == zombie.pid and fresh.epoch == zombie.epoch + 2  # +1 for the abort, +1 for the init
    assert zombie.end(commit=True) is E.PRODUCER_FENCED
    assert zombie.add(P1) is E.PRODUCER_FENCED
    assert zombie.send(P0, "late") is E.INVALID_PRODUCER_EPOCH  # the abort marker raised the partition's epoch
    assert fresh.add(P0) is E.NONE and fresh.send(P0, "new") is E.NONE and fresh.end(commit=True) is E.NONE
    assert c.run_until(lambda: visible(c, P0) == ["new"], 10_000)
    assert visible(c, P1) == []


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    c = ready(seed=4)
    p = Producer(c, timeout_ms=1_000)
    p.init()
    assert p.add(P0) is E.NONE and p.send(P0, "slow") is E.NONE
    assert c.run_until(lambda: settled(c, COMPLETE_ABORT), 5_000)
    assert meta_of(c).producer_epoch == p.epoch + 1
    assert p.end(commit=True) is E.PRODUCER_FENCED
    assert visible(c, P0) == []
    p.init()  # the application starts over
    assert p.add(P0) is E.NONE and p.send(P0, "again") is E.NONE and p.end(commit=True) is E.NONE
    assert c.run_until(lambda: visible(c, P0) == ["again"], 10_000)


@pytest.mark.parametrize("seed", [5, 6])
def test_a_new_coordinator_finishes_a_prepared_commit(seed: int) -> None:
    c = ready(seed=seed)
    p = Producer(c)
    p.init()
    assert p.add(P0, P1) is E.NONE and p.add_offsets() is E.NONE
    assert p.send(P0, "a") is E.NONE and p.send(P1, "b") is E.NONE
    assert p.commit_offsets(P0, 11) is E.NONE
    old = p.coordinator()
    c.broker(old).txn._send_markers = lambda meta: None  # it dies before any marker leaves
    assert p.end(commit=True) is E.NONE
    assert meta_of(c).state == PREPARE_COMMIT
    c.run_for(1_000)
    assert visible(c, P0) == [] and visible(c, P1) == []
    c.crash(old)
    assert c.run_until(lambda: p.coordinator() != old and settled(c, COMPLETE_COMMIT), 30_000)
    assert c.run_until(lambda: visible(c, P0) == ["a"] and visible(c, P1) == ["b"], 10_000)
    assert committed_offset(c, P0) == 11
    assert c.violations == [] and c.fatal == {}


@pytest.mark.parametrize("seed", SEEDS_DEPOSED)
def test_a_deposed_coordinator_that_wakes_up_cannot_end_the_producers_next_transaction(seed: int) -> None:
    """A coordinator paused (SIGSTOP) after its followers fetched a PrepareCommit, but before it heard
    so, is deposed; its successor completes that commit and the producer (same id and epoch) opens its
    next transaction on the partition. When the old coordinator resumes, the queued fetches complete
    its PrepareCommit write and it sends that commit's markers again, with the old coordinator epoch:
    the partition leader must refuse them (TRANSACTION_COORDINATOR_FENCED, as Kafka's
    ProducerStateManager does), else the marker ends the next transaction there as committed and its
    later abort marker finds nothing open (the G1a of a CI run of test_txn_on_local_is_valid)."""
    c = ready(seed=seed)
    p = Producer(c)
    p.init()
    old = p.coordinator()
    tp = next((tp for tp in (P0, P1) if c.partition_leader(tp) != old), None)
    assert tp is not None, "a partition that the coordinator does not lead"
    leader = c.partition_leader(tp)
    assert p.add(tp) is E.NONE and p.send(tp, "a") is E.NONE
    state = TopicPartition(gm.TRANSACTION_STATE_TOPIC, c.broker(old).txn.partition_of(TXN))
    end = c.broker(old).replicas.partitions[state].leo
    followers = [i for i in c.alive() if i != old]
    c.call(old, "txn_call", c.rid(), tm.EndTxnRequest(TXN, p.pid, p.epoch, True))
    # every follower has the PrepareCommit; the coordinator has not yet seen them acknowledge it
    assert c.run_until(lambda: all(c.broker(f).replicas.partitions[state].leo > end for f in followers), 2_000)
    stale = c.broker(old).txn.txns[TXN]
    assert stale.pending and stale.state == ONGOING
    c.sim.nodes[old].pause()
    assert p.end(commit=True) is E.NONE  # the successor completes it
    assert p.coordinator() != old
    assert c.run_until(lambda: settled(c, COMPLETE_COMMIT), 10_000)
    assert c.run_until(lambda: visible(c, tp) == ["a"], 10_000)
    assert c.partition_leader(tp) == leader
    assert p.add(tp) is E.NONE and p.send(tp, "b") is E.NONE  # the next transaction, same id and epoch
    c.sim.nodes[old].resume()
    c.run_for(500)
    assert stale.state == PREPARE_COMMIT  # its write completed: it did send its markers again
    assert p.end(commit=False) is E.NONE
    assert c.run_until(lambda: settled(c, COMPLETE_ABORT), 10_000)
    c.run_for(1_000)
    assert visible(c, tp) == ["a"]
    assert c.violations == [] and c.fatal == {}


def test_errors_for_unknown_ids_wrong_producers_and_bad_timeouts() -> None:
    c = ready(seed=7)
    p = Producer(c)
    p.init()
    node = p.coordinator()
    r = c.request(node, "txn_call", tm.AddPartitionsToTxnRequest("nobody", p.pid, 0, (P0,)))
    assert _first(r) is E.INVALID_PRODUCER_ID_MAPPING
    r = c.request(node, "txn_call", tm.EndTxnRequest(TXN, p.pid + 1, p.epoch, True))
    assert r.error is E.INVALID_PRODUCER_ID_MAPPING
    assert c.request(node, "txn_call", tm.EndTxnRequest(TXN, p.pid, p.epoch, True)).error is E.INVALID_TXN_STATE
    r = c.request(node, "txn_call", tm.AddPartitionsToTxnRequest(TXN, p.pid, p.epoch, (P0, TopicPartition("nope", 0))))
    assert dict(r.errors) == {P0: E.OPERATION_NOT_ATTEMPTED, TopicPartition("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    r = c.request(node, "init_producer_id", InitProducerIdRequest(TXN, 0))
    assert r.error is E.INVALID_TRANSACTION_TIMEOUT
    other = next(i for i in c.alive() if i != node)
    assert c.request(other, "init_producer_id", InitProducerIdRequest(TXN, 1_000)).error is E.NOT_COORDINATOR
    # KIP-360: a bump asked for by a producer that is not the current instance
    r = c.request(node, "init_producer_id", InitProducerIdRequest(TXN, 1_000, p.pid, p.epoch + 5))
    assert r.error is E.PRODUCER_FENCED
    r = c.request(node, "init_producer_id", InitProducerIdRequest(TXN, 1_000, p.pid, p.epoch))
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, p.pid, p.epoch + 1)


# ---------------------------------------------------------------------------- seeded bugs


@pytest.mark.parametrize("bugs", [(), ("marker-partial",)])
def test_marker_partial_leaves_a_committed_transaction_half_visible(bugs: tuple[str, ...]) -> None:
    c = ready(seed=8, bugs=bugs)
    p = Producer(c)
    p.init()
    assert p.add(P0, P1) is E.NONE and p.send(P0, "a") is E.NONE and p.send(P1, "b") is E.NONE
    assert p.end(commit=True) is E.NONE
    assert c.run_until(lambda: settled(c, COMPLETE_COMMIT), 10_000)
    c.run_for(2_000)
    seen = visible(c, P0) + visible(c, P1)
    assert seen == (["a"] if bugs else ["a", "b"])  # with the bug, P1's marker was never written
    # the producer's next transaction joins P1's open one; aborting it takes "b" (committed) with it
    assert p.add(P1) is E.NONE and p.send(P1, "c") is E.NONE and p.end(commit=False) is E.NONE
    assert c.run_until(lambda: settled(c, COMPLETE_ABORT), 10_000)
    c.run_for(1_000)
    assert visible(c, P1) == ([] if bugs else ["b"])


@pytest.mark.parametrize("bugs", [(), ("lso-ignores-open",)])
def test_lso_ignores_open_lets_read_committed_see_an_open_then_aborted_transaction(bugs: tuple[str, ...]) -> None:
    c = ready(seed=9, bugs=bugs)
    p = Producer(c)
    p.init()
    assert p.add(P0) is E.NONE and p.send(P0, "open") is E.NONE
    c.run_for(500)
    read_early = visible(c, P0)
    assert read_early == (["open"] if bugs else [])  # an aborted read in the making
    assert p.end(commit=False) is E.NONE
    assert c.run_until(lambda: settled(c, COMPLETE_ABORT), 10_000)
    assert visible(c, P0) == []  # once the marker is there, the aborted list hides it again


@pytest.mark.parametrize("bugs", [(), ("no-epoch-fence",)])
def test_no_epoch_fence_lets_a_zombie_append_into_the_new_instances_transaction(bugs: tuple[str, ...]) -> None:
    c = ready(seed=10, bugs=bugs)
    zombie = Producer(c)
    zombie.init()
    assert zombie.add(P0) is E.NONE and zombie.send(P0, "old") is E.NONE
    fresh = Producer(c)
    fresh.init()
    assert fresh.add(P0) is E.NONE and fresh.send(P0, "new") is E.NONE
    late = zombie.send(P0, "late")
    assert late is (E.NONE if bugs else E.INVALID_PRODUCER_EPOCH)
    assert fresh.end(commit=True) is E.NONE
    assert c.run_until(lambda: "new" in visible(c, P0), 10_000)
    assert visible(c, P0) == (["new", "late"] if bugs else ["new"])  # the zombie's write committed
