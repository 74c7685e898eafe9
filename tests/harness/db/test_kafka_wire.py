"""The queue workload's bodies over the Kafka wire: each body one encoded Kafka request, each answer decoded
(against an in-memory broker speaking the wire protocol), and no answer reported as a Failure."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from harness.db import kafka_wire
from harness.db.kafka_wire import KafkaWire
from nodes.kafka import protocol as kp
from nodes.kafka.records import build_batch, encode_batch, iter_batches
from nodes.runtime.client import ConnectError, RequestTimeoutError
from workloads.protocol import Failure, Reply, Request
from workloads.queue import QueueWorkload
from workloads.queue.bodies import (
    CommitOffsets,
    CreateTopic,
    Fetch,
    Fetched,
    FetchOffsets,
    Metadata,
    MetadataReply,
    OffsetsCommitted,
    OffsetsFetched,
    PartitionInfo,
    Produce,
    Produced,
    TopicCreated,
)
from workloads.queue.groups import GROUP


class FakeBroker:
    """One node's client listener: every partition of t0 led by n2; Produce appends, Fetch reads."""

    def __init__(self) -> None:
        self.logs: dict[int, list[bytes]] = {}
        self.calls: list[tuple[int, int]] = []
        self.fail: BaseException | None = None
        self.producers: list[tuple[int, int, int]] = []  # (producer id, epoch, base sequence) of each batch
        self.fetch_epochs: list[int] = []  # the current_leader_epoch of each Fetch, as decoded from the wire
        self.commits: list[tuple[int, int, int]] = []  # (partition, offset, committed leader epoch) committed
        self.created: list[kp.CreatableTopic] = []  # each CreateTopics topic, as decoded from the wire
        self.lso: int | None = None  # the last stable offset fetches answer (None: the field's default)

    async def send(
        self, api: int, version: int, payload: bytes, *, timeout: float, expect_response: bool = True
    ) -> memoryview | None:
        self.calls.append((api, version))
        if self.fail is not None:
            raise self.fail
        return None if not expect_response else memoryview(self.answer(api, version, bytes(payload)))

    def answer(self, api: int, version: int, payload: bytes) -> bytes:
        if api == kp.ApiKey.METADATA:
            parts = [kp.MetadataResponsePartition(0, i, 2, 1, [1, 2, 3], [2, 3], []) for i in range(3)]
            parts[2] = kp.MetadataResponsePartition(5, 2, -1, 1, [1, 2, 3], [], [])  # leader not available
            topic = kp.MetadataResponseTopic(error_code=0, name="t0", partitions=parts)
            return kp.MetadataResponse(brokers=[], controller_id=1, topics=[topic]).encode(version)
        if api == kp.ApiKey.PRODUCE:
            request = kp.ProduceRequest.decode(payload, version)
            part = request.topic_data[0].partition_data[0]
            log = self.logs.setdefault(part.index, [])
            base = len(log)
            for batch in iter_batches(part.records):
                self.producers.append((batch.producer_id, batch.producer_epoch, batch.base_sequence))
                log.extend(value for _o, _t, _k, value, _h in batch.entries())
            response = kp.PartitionProduceResponse(index=part.index, error_code=0, base_offset=base, record_errors=[])
            topic = kp.TopicProduceResponse(name="t0", partition_responses=[response])
            return kp.ProduceResponse(responses=[topic], throttle_time_ms=0).encode(version)
        if api == kp.ApiKey.FETCH:
            request = kp.FetchRequest.decode(payload, version)
            p = request.topics[0].partitions[0]
            self.fetch_epochs.append(p.current_leader_epoch)
            log = self.logs.get(p.partition, [])
            if p.fetch_offset > len(log):
                answer = kp.FetchResponsePartition(partition_index=p.partition, error_code=1, high_watermark=len(log))
            else:
                # one batch holding everything from offset 1: a fetch from 2 also gets offset 1
                start = max(0, min(p.fetch_offset, 1))
                entries = [(None, v) for v in log[start:]]
                records = encode_batch(build_batch(entries, base_offset=start)) if entries else b""
                answer = kp.FetchResponsePartition(
                    partition_index=p.partition, error_code=0, high_watermark=len(log), records=records
                )
                if self.lso is not None:
                    answer.last_stable_offset = self.lso
            topic = kp.FetchResponseTopic(topic="t0", partitions=[answer])
            return kp.FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[topic]).encode(version)
        if api == kp.ApiKey.OFFSET_COMMIT:
            commit = kp.OffsetCommitRequest.decode(payload, version)
            parts = commit.topics[0].partitions
            self.commits += [(c.partition_index, c.committed_offset, c.committed_leader_epoch) for c in parts]
            done = [kp.OffsetCommitResponsePartition(c.partition_index, 0) for c in parts]
            topics = [kp.OffsetCommitResponseTopic("t0", done)]
            return kp.OffsetCommitResponse(throttle_time_ms=0, topics=topics).encode(version)
        if api == kp.ApiKey.OFFSET_FETCH:
            fetched = [kp.OffsetFetchResponsePartition(p, o, e, "", 0) for p, o, e in self.commits]
            topics = [kp.OffsetFetchResponseTopic("t0", fetched)]
            return kp.OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=0).encode(version)
        if api == kp.ApiKey.INIT_PRODUCER_ID:
            init = kp.InitProducerIdRequest.decode(payload, version)
            assert init.transactional_id is None
            return kp.InitProducerIdResponse(error_code=0, producer_id=4000, producer_epoch=0).encode(version)
        request = kp.CreateTopicsRequest.decode(payload, version)
        t = request.topics[0]
        self.created.append(t)
        assert {(c.name, c.value) for c in t.configs} >= {("min.insync.replicas", "2")}
        result = kp.CreatableTopicResult(name=t.name, error_code=36, error_message="exists")
        return kp.CreateTopicsResponse(throttle_time_ms=0, topics=[result]).encode(version)


def wire_with(broker: FakeBroker) -> KafkaWire:
    wire = KafkaWire({"n1": ("127.0.0.1", 1), "n2": ("127.0.0.1", 2)}, random.Random(0))
    wire._conn = lambda node, timeout: broker  # type: ignore[method-assign,assignment,return-value]
    return wire


def call(wire: KafkaWire, body: Any, node: str = "n2") -> Reply | Failure:
    return asyncio.run(wire.call(Request(node, body, 1.0)))


def test_each_queue_body_is_one_kafka_request_and_its_answer_decoded() -> None:
    broker = FakeBroker()
    wire = wire_with(broker)
    meta = call(wire, Metadata("t0"))
    assert isinstance(meta, Reply)
    led = PartitionInfo(0, "n2", 2, 0, 1), PartitionInfo(1, "n2", 2, 0, 1), PartitionInfo(2, None, 0, 5, 1)
    assert meta.body == MetadataReply(led)
    for value in (b"41", b"42", b"43"):
        produced = call(wire, Produce("t0", 1, value, -1))
        assert isinstance(produced, Reply) and produced.body.error == 0
    assert produced.body == Produced(0, "none", 2)
    assert broker.logs == {1: [b"41", b"42", b"43"]}
    fetched = call(wire, Fetch("t0", 1, 2))
    assert fetched == Reply(Fetched(0, "none", 3, ((1, b"42"), (2, b"43")), 3))  # the client drops offset 1
    out_of_range = call(wire, Fetch("t0", 1, 9))
    assert out_of_range == Reply(Fetched(1, "offset_out_of_range"))
    created = call(wire, workload_topic())
    assert created == Reply(TopicCreated(36, "topic_already_exists", "exists"))
    assert [api for api, _ in broker.calls] == [3, 0, 0, 0, 1, 1, 19]
    assert [(t.num_partitions, t.replication_factor, t.assignments) for t in broker.created] == [(3, 3, [])]


def test_a_create_topic_with_assignments_sends_kafkas_replica_assignment() -> None:
    broker = FakeBroker()
    placement = {0: ["n2", "n3", "n1"], 1: ["n3", "n1", "n2"], 2: ["n1", "n2", "n3"]}
    body = QueueWorkload(["n1", "n2", "n3"], 0, assignment=placement).create_topic()
    assert call(wire_with(broker), body) == Reply(TopicCreated(36, "topic_already_exists", "exists"))
    (t,) = broker.created
    assert (t.num_partitions, t.replication_factor) == (-1, -1)
    assert [(a.partition_index, a.broker_ids) for a in t.assignments] == [
        (0, [2, 3, 1]),
        (1, [3, 1, 2]),
        (2, [1, 2, 3]),
    ]


def workload_topic() -> CreateTopic:
    return QueueWorkload(["n1"], 0).create_topic()


def test_an_acks_0_produce_expects_no_answer() -> None:
    broker = FakeBroker()
    assert call(wire_with(broker), Produce("t0", 0, b"5", 0)) == Reply(None)
    assert broker.logs == {}  # the fake answers nothing when no answer is expected


def test_no_answer_is_a_failure_sent_unless_the_connection_never_opened() -> None:
    broker = FakeBroker()
    wire = wire_with(broker)
    broker.fail = ConnectError("refused")
    assert call(wire, Produce("t0", 0, b"5", -1)) == Failure("connect: refused", sent=False)
    broker.fail = RequestTimeoutError("slow")
    assert call(wire, Produce("t0", 0, b"5", -1)) == Failure("timeout", sent=True)
    broker.fail = ConnectionResetError("reset")
    answer = call(wire, Fetch("t0", 0, 0))
    assert isinstance(answer, Failure) and answer.sent and "reset" in answer.reason


def test_the_sans_io_client_over_the_wire_sends_and_polls() -> None:
    """The shared client driven over this transport: find the leader, send, poll from the position."""
    broker = FakeBroker()
    wire = wire_with(broker)
    w = QueueWorkload(["n1", "n2"], 3)
    client = w.client(0, 0)

    def run(op: dict[str, Any]) -> Any:
        step = client.invoke(op)
        while isinstance(step, Request):
            step = client.receive(asyncio.run(wire.call(step)))
        return step

    assert run({"f": "send", "key": "t0-0", "value": 7}).value == [0, 7]
    assert broker.calls[0] == (kp.ApiKey.INIT_PRODUCER_ID, 1)  # idempotent (acks=all): an id first
    assert broker.producers == [(4000, 0, 0)]
    assert run({"f": "send", "key": "t0-0", "value": 9}).value == [1, 9]
    assert broker.producers[-1] == (4000, 0, 1)
    assert run({"f": "send", "key": "t0-2", "value": 8}).error == "leader-not-available"
    assert run({"f": "assign", "key": None, "value": ["t0-0"]}).type == "ok"
    assert run({"f": "poll", "key": "t0-0"}).value == [[0, 7], [1, 9]]
    assert run({"f": "poll", "key": "t0-0"}).value == []


def test_a_fetch_puts_the_current_leader_epoch_on_the_wire_and_commits_carry_theirs() -> None:
    """KIP-320: the Fetch version used carries current_leader_epoch (v9+), and OffsetCommit (v6+) and
    OffsetFetch (v5+) carry the committed leader epoch; -1 (none) stays -1."""
    assert kafka_wire.FETCH_VERSION >= 9 and kafka_wire.METADATA_VERSION >= 7
    assert kafka_wire.OFFSET_COMMIT_VERSION >= 6 and kafka_wire.OFFSET_FETCH_VERSION >= 5
    broker = FakeBroker()
    wire = wire_with(broker)
    assert isinstance(call(wire, Fetch("t0", 1, 0, leader_epoch=7)), Reply)
    assert isinstance(call(wire, Fetch("t0", 1, 0)), Reply)
    assert broker.fetch_epochs == [7, -1]
    commit = CommitOffsets(GROUP, 3, "m1", "t0", ((0, 145), (1, 4)), ((0, 9), (1, -1)))
    assert call(wire, commit) == Reply(OffsetsCommitted(0, "none"))
    assert broker.commits == [(0, 145, 9), (1, 4, -1)]
    fetched = call(wire, FetchOffsets(GROUP, "t0", (0, 1)))
    assert fetched == Reply(OffsetsFetched(0, "none", ((0, 145), (1, 4)), ((0, 9), (1, -1))))


def test_the_sans_io_client_over_the_wire_fetches_with_the_epoch_metadata_named() -> None:
    broker = FakeBroker()
    wire = wire_with(broker)
    client = QueueWorkload(["n1", "n2"], 3, idempotent=False).client(0, 0)
    client.invoke({"f": "assign", "key": None, "value": ["t0-0"]})
    step = client.invoke({"f": "poll", "key": "t0-0"})
    while isinstance(step, Request):
        step = client.receive(asyncio.run(wire.call(step)))
    assert step.type == "ok" and broker.fetch_epochs == [1]  # the fake's metadata names leader epoch 1


def test_a_read_committed_fetch_says_when_an_open_transaction_holds_back_the_end() -> None:
    """The last stable offset below the high watermark: read_committed reached the LSO, not the end."""
    broker = FakeBroker()
    broker.logs[0] = [b"1", b"2", b"3"]
    wire = wire_with(broker)
    broker.lso = 1
    held = call(wire, Fetch("t0", 0, 1, isolation_level=1))
    assert isinstance(held, Reply) and held.body.open_txn and held.body.high_watermark == 1
    broker.lso = 3
    done = call(wire, Fetch("t0", 0, 3, isolation_level=1))
    assert isinstance(done, Reply) and not done.body.open_txn and done.body.high_watermark == 3
    broker.lso = 1  # read_uncommitted reads to the high watermark: nothing is held back
    plain = call(wire, Fetch("t0", 0, 3))
    assert isinstance(plain, Reply) and not plain.body.open_txn and plain.body.high_watermark == 3
