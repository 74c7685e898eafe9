"""Consumer groups of real clients through broker kills: kafka-python (its default producer, which
is idempotent) and confluent-kafka (librdkafka, ``enable.idempotence=true`` set explicitly as its
default is off) against `kraftwerk cluster up --backend local --nodes 3`, a topic of 3 partitions
with replication factor 3. One producer produces while a group of 2 consumers of the same client
subscribes, processes each polled batch and commits its offsets synchronously (auto-commit off, so
that every commit is one we recorded); mid-run two different nodes are SIGKILLed one after another:

1. the leader of a partition of the topic that does not lead the group's coordinator partition,
   which is restarted once the producer made progress on the new leaders; then, once every replica
   is back in sync,
2. the group coordinator's node, named by FindCoordinator (kafka-python's admin), cross-checked
   against the leader of the group's ``__consumer_offsets`` partition; restarted the same way.

One node at a time, since with 3 nodes a second kill would cost the quorum.

Exactly once is judged on the record of deliveries (partition, offset, value, member, and the
member's assignment it came in) and of commits (the offsets the client reports committed):

* every acknowledged value is delivered, at the partition and offset it was acknowledged at, and no
  value is in the log twice (the producer is idempotent);
* a delivery of an offset below that partition's committed offset at the time is a duplicate that
  the commits do not allow, as is an offset delivered twice in one assignment of one member: the
  only repeats allowed are of offsets at or above the committed offset, read again after a
  rebalance (Kafka's at-least-once between processing and commit);
* each assignment of a partition starts at its committed offset (0 before any commit);
* committed offsets per partition never go back, and at the end the group's committed offsets (a
  fresh OffsetFetch) are the log end offsets.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nodes.broker.group_coordinator import partition_for
from nodes.broker.group_messages import OFFSETS_TOPIC
from tests.harness.local_kafka_cluster import kraftwerk, local_cluster
from tests.requirements import need_module

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's importlib.resources use
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

confluent_kafka = need_module("confluent_kafka", "confluent-kafka")

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning")]

PARTITIONS = 3
STEP = 150  # acknowledged messages between the run's steps
MEMBERS = 2
ALL = range(PARTITIONS)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    with local_cluster(tmp_path_factory.mktemp("groups-faults")) as (directory, info):
        yield directory, info["bootstrap"]


# -- the record of a run -----------------------------------------------------------------------


@dataclass
class Record:
    """Deliveries, commits and assignments of the whole group, in one order (``seq``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    seq: Iterator[int] = field(default_factory=itertools.count)
    # (seq, member, session, partition, offset, value)
    deliveries: list[tuple[int, int, int, int, int, bytes]] = field(default_factory=list)
    # (seq, member, partition, committed offset)
    commits: list[tuple[int, int, int, int]] = field(default_factory=list)
    # (seq, member, session, partitions)
    assignments: list[tuple[int, int, int, frozenset[int]]] = field(default_factory=list)
    failed_commits: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)  # a member's poll raised: the client gave up
    # (seq before the OffsetFetch was sent, seq after its answer, the group's committed offsets)
    fetched: list[tuple[int, int, dict[int, int]]] = field(default_factory=list)
    events: list[tuple[int, str]] = field(default_factory=list)

    def event(self, what: str) -> int:
        with self.lock:
            s = next(self.seq)
            self.events.append((s, what))
            return s

    def tick(self) -> int:
        with self.lock:
            return next(self.seq)


class Observer:
    """Asks the group's coordinator for its committed offsets (OffsetFetch, from outside the group)
    over and over, so that a coordinator that lost commits is seen even if no member fetches them."""

    def __init__(self, bootstrap: str, group: str, record: Record) -> None:
        self.bootstrap, self.group, self.record = bootstrap, group, record
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="observer", daemon=True)
        self.failures = 0

    def _run(self) -> None:
        admin: KafkaAdminClient | None = None
        while not self.stop.wait(0.3):
            try:
                admin = admin or admin_client(self.bootstrap)
                before = self.record.tick()
                got = admin.list_group_offsets({self.group: None})[self.group]
                after = self.record.tick()
            except Exception:  # the coordinator moved or is loading: ask again with a fresh client
                self.failures += 1
                if admin is not None:
                    admin.close()
                admin = None
                continue
            offsets = {tp.partition: meta.offset for tp, meta in got.items() if meta.offset >= 0}
            with self.record.lock:
                self.record.fetched.append((before, after, offsets))
        if admin is not None:
            admin.close()


class Member:
    """One consumer of the group in a thread: poll, record the batch, commit its next offsets."""

    def __init__(self, index: int, record: Record) -> None:
        self.index = index
        self.record = record
        self.session = 0
        self.assigned: frozenset[int] = frozenset()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"member-{index}", daemon=True)

    def assigned_now(self, partitions: list[int]) -> None:
        """Called by the client's rebalance callback: a new assignment (each one a new session)."""
        with self.record.lock:
            self.session += 1
            self.assigned = frozenset(partitions)
            self.record.assignments.append((next(self.record.seq), self.index, self.session, self.assigned))

    def revoked_now(self) -> None:
        with self.record.lock:
            self.assigned = frozenset()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                batch = self.poll()
                if not batch:
                    continue
                r = self.record
                with r.lock:
                    for partition, offset, value in batch:
                        r.deliveries.append((next(r.seq), self.index, self.session, partition, offset, value))
                upto: dict[int, int] = {}
                for partition, offset, _ in batch:
                    upto[partition] = max(upto.get(partition, 0), offset + 1)
                try:
                    done = self.commit(upto)
                except Exception as e:  # a failed commit is retried by the next batch's, as applications do
                    with r.lock:
                        r.failed_commits.append(f"member {self.index}: {e!r}")
                    continue
                with r.lock:
                    s = next(r.seq)
                    r.commits.extend((s, self.index, p, o) for p, o in sorted(done.items()))
        except Exception as e:  # the test fails on it (kafka-python raised UnknownBrokerIdError from poll)
            with self.record.lock:
                self.record.crashes.append(f"member {self.index}: {e!r}")
        finally:
            self.close()

    def poll(self) -> list[tuple[int, int, bytes]]:
        raise NotImplementedError

    def commit(self, offsets: dict[int, int]) -> dict[int, int]:
        """Commit synchronously; the offsets the client reports committed, or raise."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


# -- the two clients -----------------------------------------------------------------------------


class KafkaPythonMember(Member):
    def __init__(self, index: int, record: Record, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(index, record)
        self.topic = topic
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
        )
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.revoked_now()

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.assigned_now(sorted(tp.partition for tp in assigned))

        self.consumer.subscribe([topic], listener=Listener())

    def poll(self) -> list[tuple[int, int, bytes]]:
        out = []
        for tp, records in self.consumer.poll(200).items():
            out.extend((tp.partition, r.offset, r.value) for r in records)
        return out

    def commit(self, offsets: dict[int, int]) -> dict[int, int]:
        self.consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
        return offsets  # commit() raises unless every offset was committed

    def close(self) -> None:
        self.consumer.close(autocommit=False)


class LibrdkafkaMember(Member):
    def __init__(self, index: int, record: Record, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(index, record)
        self.topic = topic
        self.consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _c, tps: self.assigned_now(sorted(tp.partition for tp in tps)),
            on_revoke=lambda _c, _tps: self.revoked_now(),
        )

    def poll(self) -> list[tuple[int, int, bytes]]:
        out = []
        for m in self.consumer.consume(100, 0.2):
            if m.error() is None:
                out.append((m.partition(), m.offset(), m.value()))
        return out

    def commit(self, offsets: dict[int, int]) -> dict[int, int]:
        tps = [confluent_kafka.TopicPartition(self.topic, p, o) for p, o in offsets.items()]
        done = self.consumer.commit(offsets=tps, asynchronous=False)
        errors = [tp for tp in done if tp.error is not None]
        if errors:
            raise confluent_kafka.KafkaException(errors[0].error)
        return {tp.partition: tp.offset for tp in done}

    def close(self) -> None:
        self.consumer.close()


class Producer:
    """Produces ``{prefix}-{i}`` to partition i % 3 until stopped; records each acknowledgement."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.errors: list[str] = []
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def _run(self) -> None:
        for i in itertools.count():
            if self.stop.is_set():
                break
            self.send(f"{self.prefix}-{i}".encode(), i % PARTITIONS)
            self.sent += 1
            time.sleep(0.005)
        self.flush()

    def ack(self, value: bytes, partition: int, offset: int) -> None:
        self.acked[value] = (partition, offset)

    def send(self, value: bytes, partition: int) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError


class KafkaPythonProducer(Producer):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__("kp")
        self.topic = topic
        self.producer = KafkaProducer(bootstrap_servers=bootstrap)  # the defaults: acks=all, idempotent
        assert self.producer.config["enable_idempotence"] is True

    def send(self, value: bytes, partition: int) -> None:
        future = self.producer.send(self.topic, value, partition=partition)
        future.add_callback(lambda meta: self.ack(value, meta.partition, meta.offset))
        future.add_errback(lambda e: self.errors.append(repr(e)))

    def flush(self) -> None:
        self.producer.flush(120)
        self.producer.close(10)


class LibrdkafkaProducer(Producer):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__("ck")
        self.topic = topic
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.ack(msg.value(), msg.partition(), msg.offset())
        else:
            self.errors.append(str(err))

    def send(self, value: bytes, partition: int) -> None:
        self.producer.produce(self.topic, value, partition=partition, on_delivery=self._delivered)
        self.producer.poll(0)

    def flush(self) -> None:
        assert self.producer.flush(120) == 0


CLIENTS: dict[str, tuple[Callable[[str, str], Producer], type[Member]]] = {
    "kafka-python": (KafkaPythonProducer, KafkaPythonMember),
    "librdkafka": (LibrdkafkaProducer, LibrdkafkaMember),
}


# -- the cluster -------------------------------------------------------------------------------


def admin_client(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)


def describe(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], dict[str, Any]]:
    admin = admin_client(bootstrap)
    try:
        return {(t["name"], p["partition_index"]): p for t in admin.describe_topics(topics) for p in t["partitions"]}
    finally:
        admin.close()


def coordinator_of(bootstrap: str, group: str) -> int:
    """The group's coordinator by FindCoordinator (a fresh admin client: it caches coordinators)."""
    admin = admin_client(bootstrap)
    try:
        return int(admin._manager.run(admin._find_coordinator_id, group))
    finally:
        admin.close()


def wait_in_sync(bootstrap: str, topics: list[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            parts = describe(bootstrap, topics)
            lagging = {k: p["isr_nodes"] for k, p in parts.items() if len(p["isr_nodes"]) < 3 or p["leader_id"] < 0}
        except KafkaError as e:
            lagging = {("?", -1): repr(e)}
        if not lagging:
            return
        assert time.monotonic() < deadline, f"replicas not back in sync: {lagging}"
        time.sleep(0.5)


def wait_for(what: str, condition: Callable[[], bool], timeout: float = 90, about: Callable[[], str] = str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}; {about()}"
        time.sleep(0.05)


def group_state(bootstrap: str, group: str, record: Record) -> str:
    """What the coordinator says of the group, and the run's record of it (for a failure message)."""
    try:
        admin = admin_client(bootstrap)
        try:
            described = str(admin.describe_groups([group]))
        finally:
            admin.close()
    except KafkaError as e:
        described = repr(e)
    return (
        f"group {described}; crashed members {record.crashes}; assignments {record.assignments};"
        f" events {record.events};"
        f" failed commits {record.failed_commits[-5:]}; last commits {record.commits[-5:]}"
    )


def kill(directory: Path, node: int) -> None:
    r = kraftwerk("cluster", "kill", "--dir", str(directory), "--node", str(node))
    assert r.returncode == 0, r.stderr


def start(directory: Path, node: int) -> None:
    r = kraftwerk("cluster", "start", "--dir", str(directory), "--node", str(node))
    assert r.returncode == 0, r.stderr


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, request_timeout_ms=10_000)
    try:
        ends = c.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
        return {tp.partition: o for tp, o in ends.items()}
    finally:
        c.close()


def group_offsets(bootstrap: str, group: str) -> dict[int, int]:
    admin = admin_client(bootstrap)
    try:
        got = admin.list_group_offsets({group: None})[group]
        return {tp.partition: meta.offset for tp, meta in got.items()}
    finally:
        admin.close()


# -- the judgement -------------------------------------------------------------------------------


def judge(record: Record, acked: dict[bytes, tuple[int, int]], final: dict[int, int], ends: dict[int, int]) -> str:
    """Raise AssertionError naming every violation; else a one-line summary of the run."""
    problems: list[str] = []
    # the producer: every acknowledged value delivered where it was acknowledged, no value in two places
    where: dict[bytes, set[tuple[int, int]]] = defaultdict(set)
    for _, _, _, p, o, v in record.deliveries:
        where[v].add((p, o))
    lost = sorted(v for v in acked if v not in where)
    if lost:
        problems.append(f"{len(lost)} acknowledged values never delivered, e.g. {lost[:5]}")
    moved = sorted(v for v, at in acked.items() if v in where and where[v] != {at})
    if moved:
        problems.append(f"{len(moved)} values delivered at other offsets than acknowledged: {moved[:5]}")
    twice = sorted(v for v, at in where.items() if len(at) > 1)
    if twice:
        problems.append(f"{len(twice)} values in the log twice, e.g. {[(v, where[v]) for v in twice[:5]]}")

    # committed offsets never go back
    history: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for s, m, p, o in record.commits:
        history[p].append((s, m, o))
    for p, commits in history.items():
        back = [(a, b) for a, b in itertools.pairwise(commits) if b[2] < a[2]]
        if back:
            problems.append(f"partition {p}: a committed offset went back (seq, member, offset): {back[:3]}")

    def committed_at(p: int, seq: int) -> int:
        return max((o for s, _, o in history[p] if s < seq), default=0)

    # ... nor as the coordinator answers OffsetFetch: at least every commit answered before it was asked,
    # and never less than an answer it gave before
    for before, _, offsets in record.fetched:
        for p in ALL:
            if offsets.get(p, 0) < committed_at(p, before):
                problems.append(
                    f"OffsetFetch at {before} answered {offsets}, partition {p} was committed to"
                    f" {committed_at(p, before)}"
                )
    for (_, a_after, a), (b_before, _, b) in itertools.pairwise(record.fetched):
        if a_after < b_before and any(b.get(p, 0) < a.get(p, 0) for p in ALL):
            problems.append(f"OffsetFetch went back: {a}, then {b}")

    # deliveries: no repeat the commits do not allow
    sessions: dict[tuple[int, int, int], list[tuple[int, int]]] = defaultdict(list)
    below = []
    for s, m, session, p, o, _ in record.deliveries:
        sessions[(m, session, p)].append((s, o))
        if o < committed_at(p, s):
            below.append((p, o, m, committed_at(p, s)))
    if below:
        problems.append(
            f"{len(below)} deliveries below the committed offset (partition, offset, member, committed): {below[:5]}"
        )
    started = {(m, session): s for s, m, session, _ in record.assignments}
    for (m, session, p), got in sorted(sessions.items()):
        offsets = [o for _, o in got]
        if any(b <= a for a, b in itertools.pairwise(offsets)):
            problems.append(f"member {m}, assignment {session}, partition {p}: offsets not increasing: {offsets[:20]}")
        if session == 0:
            problems.append(f"member {m} delivered partition {p} before any assignment")
            continue
        expect = committed_at(p, started[(m, session)])
        if offsets[0] != expect:
            problems.append(
                f"member {m}, assignment {session}, partition {p} started at {offsets[0]}, committed was {expect}"
            )
    counts = Counter((p, o) for _, _, _, p, o, _ in record.deliveries)
    repeats = sum(n - 1 for n in counts.values())

    # the end: everything committed, and the group's committed offsets are the last ones recorded
    last = {p: commits[-1][2] for p, commits in history.items() if commits}
    if final != ends:
        problems.append(f"the group's committed offsets {final} are not the log end offsets {ends}")
    if any(final.get(p, 0) < o for p, o in last.items()):
        problems.append(f"committed offsets went back: recorded {last}, fetched {final}")
    problems += [f"{c} (the member's poll raised)" for c in record.crashes]
    assert not problems, (
        "\n".join(problems) + f"\n({repeats} repeats allowed; {len(record.failed_commits)} failed commits, e.g."
        f" {record.failed_commits[:3]}; assignments {record.assignments}; events {record.events})"
    )
    return (
        f"{len(acked)} acknowledged, {len(record.deliveries)} deliveries ({repeats} allowed repeats),"
        f" {len(record.commits)} commits ({len(record.failed_commits)} failed), {len(record.assignments)} assignments,"
        f" {len(record.fetched)} OffsetFetches;"
        f" events {[e for _, e in record.events]}"
    )


# -- the test --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_group_through_leader_and_coordinator_kills(cluster: tuple[Path, str], client: str) -> None:
    directory, bootstrap = cluster
    topic, group = f"gk-{client}", f"gk-{client}-group"
    admin = admin_client(bootstrap)
    try:
        result = admin.create_topics([NewTopic(topic, PARTITIONS, 3)])
        assert [t["error_code"] for t in result["topics"]] == [0], result
    finally:
        admin.close()
    make_producer, make_member = CLIENTS[client]
    record = Record()
    members = [make_member(i, record, bootstrap, topic, group) for i in range(MEMBERS)]
    for m in members:
        m.thread.start()
    producer = make_producer(bootstrap, topic)
    observer = Observer(bootstrap, group, record)
    down: int | None = None
    try:
        wait_for(
            "the group to split the partitions between its members",
            lambda: (
                all(m.assigned for m in members)
                and frozenset().union(*(m.assigned for m in members)) == set(range(PARTITIONS))
            ),
        )
        producer.thread.start()
        observer.thread.start()

        def progress(n: int) -> None:
            target = len(producer.acked) + n
            wait_for(f"{n} more acknowledgements", lambda: len(producer.acked) >= target)

        def kill_and_restart(node: int, what: str) -> int:
            """SIGKILL `node`, go on until the group has committed since, then start it again; the
            kill's event number."""
            nonlocal down
            down = node
            kill(directory, node)
            seq = record.event(f"killed {what}")
            progress(STEP)
            wait_for("a commit after the kill", lambda: any(s > seq for s, *_ in record.commits))
            start(directory, node)
            down = None
            record.event(f"restarted {node}")
            return seq

        progress(STEP)
        # 1. the leader of a partition of the topic that is not the coordinator's node
        coordinator = coordinator_of(bootstrap, group)
        parts = describe(bootstrap, [topic])
        victim = next((p["leader_id"] for k, p in sorted(parts.items()) if p["leader_id"] != coordinator), None)
        assert victim is not None, f"every partition is led by the coordinator {coordinator}: {parts}"
        kill_and_restart(victim, f"partition leader {victim} (coordinator {coordinator})")
        wait_in_sync(bootstrap, [topic, OFFSETS_TOPIC])
        progress(STEP)
        # 2. the group coordinator's node
        coordinator = coordinator_of(bootstrap, group)
        offsets_partitions = len(describe(bootstrap, [OFFSETS_TOPIC]))
        leader = describe(bootstrap, [OFFSETS_TOPIC])[(OFFSETS_TOPIC, partition_for(group, offsets_partitions))]
        assert leader["leader_id"] == coordinator, (leader, coordinator)
        s = kill_and_restart(coordinator, f"coordinator {coordinator}")
        progress(STEP)
        # 3. a member leaves and another joins: every partition is assigned again, from the offsets the
        # new coordinator holds
        members[0].stop.set()
        members[0].thread.join(60)
        members.append(make_member(MEMBERS, record, bootstrap, topic, group))
        members[-1].thread.start()
        record.event(f"member 0 left, member {MEMBERS} joined")
        wait_for(
            "the new member's assignment",
            lambda: bool(members[-1].assigned),
            about=lambda: group_state(bootstrap, group, record),
        )
        progress(STEP)
        producer.stop.set()
        producer.thread.join(150)
        assert not producer.thread.is_alive()
        acked = dict(producer.acked)
        assert len(acked) >= producer.sent * 9 // 10, (
            f"{len(acked)} of {producer.sent} acknowledged: {producer.errors[:3]}"
        )
        assert not any("fatal" in e.lower() for e in producer.errors), producer.errors[:3]
        ends = end_offsets(bootstrap, topic)

        def caught_up() -> bool:
            with record.lock:
                last: dict[int, int] = {}
                for _, _, p, o in record.commits:
                    last[p] = o
            return last == ends

        wait_for("the group to commit the log end offsets", caught_up, timeout=120)
    finally:
        producer.stop.set()
        observer.stop.set()
        for m in members:
            m.stop.set()
        if producer.thread.is_alive():  # a failure mid-run: the producer flushes before the next test
            producer.thread.join(150)
        for m in members:
            m.thread.join(60)
        observer.thread.join(30)
        if down is not None:
            start(directory, down)
    print(judge(record, acked, group_offsets(bootstrap, group), ends))
    # the run met what it was to meet: both members consumed, and commits went through each kill
    assert {m for _, m, *_ in record.deliveries} == set(range(MEMBERS + 1))
    assert any(before > s for before, _, _ in record.fetched), "no OffsetFetch answered after the coordinator kill"


# -- the judgement on made-up records ------------------------------------------------------------


def made_up(*steps: tuple[Any, ...]) -> Record:
    """A record of partition 0 from steps ("assign", member, session), ("deliver", member, session,
    offset), ("commit", member, offset) and ("fetch", offset), in that order."""
    r = Record()
    for kind, *args in steps:
        s = r.tick()
        if kind == "assign":
            r.assignments.append((s, args[0], args[1], frozenset({0})))
        elif kind == "deliver":
            r.deliveries.append((s, args[0], args[1], 0, args[2], b"v%d" % args[2]))
        elif kind == "commit":
            r.commits.append((s, args[0], 0, args[1]))
        else:
            r.fetched.append((s, s, {0: args[0]}))
    return r


ACKED = {b"v0": (0, 0), b"v1": (0, 1), b"v2": (0, 2)}
FIRST = (("assign", 0, 1), ("deliver", 0, 1, 0), ("deliver", 0, 1, 1), ("commit", 0, 2), ("fetch", 2))


def test_judge_allows_a_repeat_above_the_committed_offset() -> None:
    # member 0 read offset 2 but its commit of it was lost; member 1 reads it again from the commit
    record = made_up(
        *FIRST, ("deliver", 0, 1, 2), ("assign", 1, 1), ("deliver", 1, 1, 2), ("commit", 1, 3), ("fetch", 3)
    )
    assert "1 allowed repeats" in judge(record, ACKED, {0: 3}, {0: 3})


@pytest.mark.parametrize(
    ("steps", "final", "problem"),
    [
        # member 1 is handed the partition at 1, below the commit of 2
        ((("assign", 1, 1), ("deliver", 1, 1, 1), ("deliver", 1, 1, 2), ("commit", 1, 3)), 3, "below the committed"),
        # ... or at 3, past the commit of 2: offset 2 never delivered
        ((("assign", 1, 1), ("deliver", 1, 1, 3), ("commit", 1, 4)), 4, "never delivered"),
        # one assignment delivers an offset twice
        ((("deliver", 0, 1, 2), ("deliver", 0, 1, 2), ("commit", 0, 3)), 3, "not increasing"),
        # a commit goes back
        ((("deliver", 0, 1, 2), ("commit", 0, 3), ("commit", 0, 1)), 3, "went back"),
        # OffsetFetch answers less than what was committed before it was asked
        ((("deliver", 0, 1, 2), ("commit", 0, 3), ("fetch", 1)), 3, "OffsetFetch at"),
        # ... the group's committed offsets at the end are behind the log's end
        ((("deliver", 0, 1, 2), ("commit", 0, 3)), 2, "not the log end offsets"),
    ],
)
def test_judge_finds(steps: tuple[tuple[Any, ...], ...], final: int, problem: str) -> None:
    with pytest.raises(AssertionError, match=problem):
        judge(made_up(*FIRST, *steps), ACKED, {0: final}, {0: 3})
