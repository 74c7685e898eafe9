"""Real Kafka clients judge the transaction coordinator (issue 18): confluent-kafka (librdkafka)
and kafka-python transactional producers (init, begin, produce to every partition of a
3-partition topic, send offsets to the transaction, commit or abort) on `kraftwerk cluster up
--backend local --nodes 3`; then read_committed consumers of both libraries read the topic from
the beginning, and the group's committed offset is fetched. Every committed transaction must be
visible whole, no aborted one ever visible (not even in part), nothing twice; the committed
offset is the last committed transaction's, never an aborted one's.

The slow case kills mid-run, with SIGKILL, first the leader of partition 0 and then the
transaction coordinator of the producer's transactional id (each restarted before the next
fault, so the quorum survives). The producer treats errors as an application would: a
retriable commit is retried, an abortable one aborted, a fatal one (fenced, or the client gave
up) starts a new producer with the same transactional id, whose InitProducerId completes or
aborts what the old one left; a transaction whose commit failed that way has an unknown outcome
and must then be visible whole or not at all.

The brokers close connections idle for 10 s (``connections.max.idle.ms``; Kafka's default is
10 minutes). librdkafka (2.10 and later, at least up to 2.16) decommissions a broker that a
Metadata response no longer lists, which Kafka and our brokers do while a killed broker is
fenced; if that broker was the cached group coordinator, send_offsets_to_transaction waits for a
broker state change that never comes, past its timeout (confluentinc/librdkafka#5511, #5456: the
coordinator request re-runs only when some broker connection goes up or down). The same wait
follows three COORDINATOR_NOT_AVAILABLE answers to its FindCoordinator (the retries of that
request run out), e.g. while __consumer_offsets is being created in the first transaction; a
wait longer than the transaction timeout ends in INVALID_PRODUCER_EPOCH for the TxnOffsetCommit
(the coordinator aborted the transaction at a bumped epoch). With the idle timeout, the
producer's idle connections are closed within seconds and it looks the coordinator up again, as
it would against Kafka after 10 minutes.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nodes.broker.coordinator_base import partition_for
from tests.harness.local_kafka_cluster import create_topic, kraftwerk, local_cluster
from tests.requirements import need_module

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's importlib.resources use
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
    from kafka.errors import KafkaError, KafkaTimeoutError

confluent_kafka = need_module("confluent_kafka", "confluent-kafka")

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning")]

PARTITIONS = 3
TXN_STATE_PARTITIONS = 5  # the coordinator's default partition count for __transaction_state
IDLE_MS = "10000"  # connections.max.idle.ms of the brokers (see the module docstring)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    overrides = {"connections.max.idle.ms": IDLE_MS}
    with local_cluster(tmp_path_factory.mktemp("txn-local"), overrides=overrides) as (directory, info):
        yield directory, info["bootstrap"]


# -- what the producers did --------------------------------------------------------------------


class Ledger:
    """Each transaction's values and outcome: committed, aborted or unknown (a commit that
    failed with an error after which the producer could not tell)."""

    def __init__(self) -> None:
        self.values: dict[int, list[bytes]] = {}
        self.outcome: dict[int, str] = {}
        self.offset_of: dict[int, int] = {}  # the group offset sent with the transaction
        self.errors: list[str] = []
        self.dropped: dict[int, list[bytes]] = {}  # sends the client failed in a transaction it committed
        self.lock = threading.Lock()

    def begin(self, txn: int, values: list[bytes], offset: int) -> None:
        with self.lock:
            self.values[txn] = values
            self.offset_of[txn] = offset

    def end(self, txn: int, outcome: str, error: str = "") -> None:
        with self.lock:
            self.outcome[txn] = outcome
            if error:
                self.errors.append(f"txn {txn}: {error}")

    def drop(self, txn: int, failed: list[bytes]) -> None:
        """The client committed ``txn`` though it failed these sends (kafka-python expires unsent
        batches without failing the transaction): the transaction holds the others only."""
        with self.lock:
            self.dropped[txn] = failed
            self.values[txn] = [v for v in self.values[txn] if v not in set(failed)]

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcome.values() if o == outcome)


def values_of(prefix: str, txn: int) -> list[bytes]:
    """Two records per partition: every transaction spans the whole topic."""
    return [f"{prefix}-{txn}-{p}-{k}".encode() for p in range(PARTITIONS) for k in range(2)]


# -- confluent-kafka ---------------------------------------------------------------------------


class ConfluentTxnProducer:
    def __init__(self, bootstrap: str, txn_id: str) -> None:
        self.bootstrap = bootstrap
        self.txn_id = txn_id
        self.restarts = 0
        self._new()

    def _new(self) -> None:
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.txn_id,
                "transaction.timeout.ms": 20_000,
                "message.timeout.ms": 20_000,
            }
        )
        self.producer.init_transactions(60)
        self.group = confluent_kafka.Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": f"{self.txn_id}-group", "enable.auto.commit": False}
        )

    def close(self) -> None:
        self.group.close()
        self.producer.flush(10)

    def run(self, txn: int, topic: str, values: list[bytes], offset: int, commit: bool, ledger: Ledger) -> None:
        ledger.begin(txn, values, offset)
        p = self.producer
        try:
            p.begin_transaction()
            for i, v in enumerate(values):
                p.produce(topic, v, partition=i * PARTITIONS // len(values))
            meta = self.group.consumer_group_metadata()
            p.send_offsets_to_transaction([confluent_kafka.TopicPartition(topic, 0, offset)], meta, 60)
            if not commit:
                p.abort_transaction(60)
                ledger.end(txn, "aborted")
                return
            for _ in range(20):
                try:
                    p.commit_transaction(60)
                    ledger.end(txn, "committed")
                    return
                except confluent_kafka.KafkaException as e:
                    if not e.args[0].retriable():
                        raise
            raise AssertionError(f"txn {txn}: commit still retriable after 20 tries")
        except confluent_kafka.KafkaException as e:
            error = e.args[0]
            if error.txn_requires_abort():
                try:
                    p.abort_transaction(60)
                    ledger.end(txn, "aborted", f"abortable: {error}")
                    return
                except confluent_kafka.KafkaException as e2:
                    error = e2.args[0]
            # fatal, or the abort failed: a new instance fences this one and settles the transaction
            ledger.end(txn, "aborted" if not commit else "unknown", f"fatal: {error}")
            self.restarts += 1
            self.group.close()
            self._new()


# -- kafka-python --------------------------------------------------------------------------------


class KafkaPythonTxnProducer:
    """``offsets=False``: no send_offsets_to_transaction. kafka-python 3.0.12 loses a
    TxnOffsetCommit whose send fails because the group coordinator just died (sender.py raises the
    connection error once the target node is set, so the handler is never re-enqueued), and
    send_offsets_to_transaction then waits forever (it takes no timeout); the fault case avoids
    that path with this client. It also commits a transaction whose batches expired unsent
    (sender.py fails them without the abortable error the Java client moves to): the ledger then
    holds only that transaction's acknowledged sends (``Ledger.drop``)."""

    def __init__(self, bootstrap: str, txn_id: str, offsets: bool = True) -> None:
        self.bootstrap = bootstrap
        self.txn_id = txn_id
        self.offsets = offsets
        self.restarts = 0
        self._new()

    def _new(self) -> None:
        self.producer = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            transactional_id=self.txn_id,
            transaction_timeout_ms=20_000,
            request_timeout_ms=10_000,
            delivery_timeout_ms=30_000,
        )
        self.producer.init_transactions()

    def close(self) -> None:
        self.producer.close(10)

    def run(self, txn: int, topic: str, values: list[bytes], offset: int, commit: bool, ledger: Ledger) -> None:
        ledger.begin(txn, values, offset)
        p = self.producer
        try:
            p.begin_transaction()
            futures = [p.send(topic, v, partition=i * PARTITIONS // len(values)) for i, v in enumerate(values)]
            if self.offsets:
                group = f"{self.txn_id}-group"
                offsets = {TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)}
                bounded(lambda: p.send_offsets_to_transaction(offsets, group))
            if commit:
                bounded(p.commit_transaction)
                ledger.end(txn, "committed")
                failed = [v for v, f in zip(values, futures, strict=True) if f.failed()]
                if failed:
                    ledger.drop(txn, failed)
            else:
                bounded(p.abort_transaction)
                ledger.end(txn, "aborted")
        except KafkaError as e:
            try:
                bounded(p.abort_transaction)
                ledger.end(txn, "aborted", f"abortable: {e!r}")
                return
            except KafkaError as e2:
                ledger.end(txn, "aborted" if not commit else "unknown", f"fatal: {e2!r} after {e!r}")
            self.restarts += 1
            with contextlib.suppress(KafkaError):
                p.close(5)
            self._new()


def bounded(call: Callable[[], Any], timeout: float = 60) -> Any:
    """``call()``, or KafkaTimeoutError after ``timeout`` s: kafka-python's transactional calls take no
    timeout, and one whose request was lost to a dying coordinator waits forever (see the class
    docstring); an application then gives up on the instance, as the test does (a new one fences it)."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box.append((False, e))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if not box:
        raise KafkaTimeoutError(f"kafka-python call still blocked after {timeout:.0f} s")
    ok, value = box[0]
    if not ok:
        raise value
    return value


PRODUCERS: dict[str, Callable[[str, str], Any]] = {
    "confluent-kafka": ConfluentTxnProducer,
    "kafka-python": KafkaPythonTxnProducer,
}


# -- reading back ------------------------------------------------------------------------------


def read_kafka_python(bootstrap: str, topic: str, want: set[bytes], timeout: float = 60) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, request_timeout_ms=10_000, isolation_level="read_committed"
    )
    parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    try:
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline and (not want <= set(out) or quiet < 4):
            batch = consumer.poll(500)
            quiet = 0 if batch else quiet + 1
            out.extend(m.value for records in batch.values() for m in records)
        return out
    finally:
        consumer.close()


def read_confluent(bootstrap: str, topic: str, want: set[bytes], timeout: float = 60) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline and (not want <= set(out) or quiet < 8):
            m = consumer.poll(0.25)
            quiet = quiet + 1 if m is None else 0
            if m is not None and m.error() is None:
                out.append(m.value())
        return out
    finally:
        consumer.close()


def committed_offset(bootstrap: str, group: str, topic: str) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close()


def judge(ledger: Ledger, read: list[bytes], reader: str) -> list[str]:
    problems: list[str] = []
    counts = Counter(read)
    twice = sorted(v for v, n in counts.items() if n > 1)
    if twice:
        problems.append(f"{reader}: {len(twice)} values read twice, e.g. {twice[:3]}")
    seen = set(read)
    for txn, values in sorted(ledger.values.items()):
        outcome = ledger.outcome.get(txn, "unknown")
        visible = [v for v in values if v in seen]
        if outcome == "committed" and len(visible) != len(values):
            problems.append(f"{reader}: committed txn {txn} shows {len(visible)}/{len(values)} values")
        elif outcome == "aborted" and visible:
            problems.append(f"{reader}: aborted txn {txn} is visible: {visible[:3]}")
        elif outcome == "unknown" and visible and len(visible) != len(values):
            problems.append(f"{reader}: txn {txn} (outcome unknown) is torn: {len(visible)}/{len(values)}")
    known = {v for values in ledger.values.values() for v in values}
    known |= {v for values in ledger.dropped.values() for v in values}
    strangers = sorted(seen - known)
    if strangers:
        problems.append(f"{reader}: values nobody sent: {strangers[:3]}")
    return problems


def check(bootstrap: str, topic: str, group: str | None, ledger: Ledger) -> str:
    """Judge what both libraries' read_committed consumers read (and the group's offset, unless
    ``group`` is None: no offsets were sent); a summary line."""
    want = {v for txn, values in ledger.values.items() if ledger.outcome.get(txn) == "committed" for v in values}
    problems = judge(ledger, read_kafka_python(bootstrap, topic, want), "kafka-python")
    problems += judge(ledger, read_confluent(bootstrap, topic, want), "confluent-kafka")
    committed = [t for t, o in sorted(ledger.outcome.items()) if o == "committed"]
    offset = committed_offset(bootstrap, group, topic) if group is not None else None
    last = ledger.offset_of[committed[-1]] if committed and group is not None else None
    # a later transaction of unknown outcome may have committed its offset too
    allowed = {last} | {
        ledger.offset_of[t] for t, o in ledger.outcome.items() if o == "unknown" and t > (committed or [-1])[-1]
    }
    if group is not None and offset not in allowed:
        problems.append(f"group offset {offset}, expected that of the last committed transaction ({last})")
    assert not problems, "\n".join(problems + ledger.errors[-5:])
    return (
        f"{ledger.count('committed')} committed, {ledger.count('aborted')} aborted,"
        f" {ledger.count('unknown')} unknown; group offset {offset};"
        f" committed by the client with failed sends: {sorted(ledger.dropped)}"
    )


# -- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("client", sorted(PRODUCERS))
def test_committed_transactions_are_visible_whole_and_aborted_ones_never(
    cluster: tuple[Path, str], client: str
) -> None:
    _, bootstrap = cluster
    topic = f"txn-{client}"
    create_topic(bootstrap, topic)
    txn_id = f"{client}-happy"
    producer = PRODUCERS[client](bootstrap, txn_id)
    ledger = Ledger()
    try:
        for txn in range(12):
            producer.run(txn, topic, values_of(client, txn), 100 + txn, commit=txn % 3 != 1, ledger=ledger)
    finally:
        producer.close()
    assert ledger.count("committed") == 8 and ledger.count("aborted") == 4, ledger.errors
    check(bootstrap, topic, f"{txn_id}-group", ledger)


def test_read_committed_consumers_wait_for_a_pending_transactional_offset_commit(cluster: tuple[Path, str]) -> None:
    """KIP-447: a read_committed consumer's OffsetFetch (require_stable) is answered UNSTABLE_OFFSET_COMMIT
    while a transaction holding an offset for the partition is open, and librdkafka retries until it is
    settled; read_uncommitted sees no offset until the commit marker."""
    _, bootstrap = cluster
    topic, group = "txn-stable", "txn-stable-group"
    create_topic(bootstrap, topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "stable"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"x", partition=0)
    meta = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group}).consumer_group_metadata()
    producer.send_offsets_to_transaction([confluent_kafka.TopicPartition(topic, 0, 42)], meta, 30)

    def consumer(isolation: str) -> Any:
        return confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation}
        )

    committed, uncommitted = consumer("read_committed"), consumer("read_uncommitted")
    tp = [confluent_kafka.TopicPartition(topic, 0)]
    try:
        with pytest.raises(confluent_kafka.KafkaException, match="Timed out"):
            committed.committed(tp, timeout=3)
        assert uncommitted.committed(tp, timeout=10)[0].offset == confluent_kafka.OFFSET_INVALID
        producer.commit_transaction(30)
        assert committed.committed(tp, timeout=10)[0].offset == 42
        assert uncommitted.committed(tp, timeout=10)[0].offset == 42
    finally:
        committed.close()
        uncommitted.close()
        producer.flush(10)


def kill(directory: Path, *how: str) -> int:
    r = kraftwerk("cluster", "kill", "--dir", str(directory), *how)
    assert r.returncode == 0, r.stderr
    return int(json.loads(r.stdout)["node"])


def start(directory: Path, node: int) -> None:
    r = kraftwerk("cluster", "start", "--dir", str(directory), "--node", str(node))
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("client", sorted(PRODUCERS))
def test_transactions_survive_killing_a_partition_leader_and_the_coordinator(
    cluster: tuple[Path, str], client: str
) -> None:
    directory, bootstrap = cluster
    topic = f"txn-faults-{client}"
    create_topic(bootstrap, topic)
    txn_id = f"{client}-faults"
    ledger = Ledger()
    done = threading.Event()
    failure: list[BaseException] = []
    restarts: list[int] = []
    committed_after_faults = [-1]

    offsets = client != "kafka-python"  # (see KafkaPythonTxnProducer)

    def produce() -> None:
        producer = (
            PRODUCERS[client](bootstrap, txn_id, offsets) if not offsets else PRODUCERS[client](bootstrap, txn_id)
        )
        try:
            txn = 0
            after = None  # committed when the faults were over
            give_up = time.monotonic() + 300
            while after is None or ledger.count("committed") < after + 3:  # it commits again after the faults
                producer.run(txn, topic, values_of(client, txn), 1_000 + txn, commit=txn % 4 != 3, ledger=ledger)
                txn += 1
                if after is None and done.is_set():
                    after = committed_after_faults[0] = ledger.count("committed")
                if txn >= 400 or time.monotonic() > give_up:
                    break
        except BaseException as e:  # noqa: BLE001 - reported by the test
            failure.append(e)
        finally:
            restarts.append(producer.restarts)
            with contextlib.suppress(Exception):  # closing after a fault may fail; the ledger is what counts
                producer.close()

    thread = threading.Thread(target=produce, daemon=True)  # a stuck client must not keep pytest alive
    thread.start()
    try:
        wait = time.monotonic() + 60
        while len(ledger.outcome) < 5 and time.monotonic() < wait and thread.is_alive():
            time.sleep(0.05)
        victim = kill(directory, "--leader", f"{topic}:0")
        time.sleep(4)
        start(directory, victim)
        time.sleep(4)
        index = partition_for(txn_id, TXN_STATE_PARTITIONS)
        coordinator = kill(directory, "--leader", f"__transaction_state:{index}")
        time.sleep(4)
        start(directory, coordinator)
        time.sleep(4)
    finally:
        done.set()
        thread.join(330)
    assert not thread.is_alive(), "the producer is stuck"
    assert not failure, repr(failure[0])
    summary = check(bootstrap, topic, f"{txn_id}-group" if offsets else None, ledger)
    print(f"{client}: {summary}; producer restarts {restarts}; errors {ledger.errors[:5]}")
    assert committed_after_faults[0] >= 0, "the producer was still in its first transactions after the faults"
    assert ledger.count("committed") >= committed_after_faults[0] + 3, "it did not commit again after the faults"
