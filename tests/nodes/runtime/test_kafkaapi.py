"""The Kafka wire mapping (``kafkaapi.py``): Kafka requests to core requests and core answers back."""

from __future__ import annotations

import uuid

from nodes.broker import messages as bm
from nodes.broker.batch import Batch
from nodes.broker.errors import BrokerError
from nodes.broker.producer_state import producer_of
from nodes.broker.topic_partition import TopicPartition
from nodes.kafka import protocol as kp
from nodes.kafka.errors import ErrorCode
from nodes.kafka.records import build_batch, encode_batch, iter_batches
from nodes.runtime import kafkaapi as ka


def records(*values: bytes, **kwargs: object) -> bytes:
    return encode_batch(build_batch([(None, v, (), 1000 + i) for i, v in enumerate(values)], **kwargs))  # type: ignore[arg-type]


def produce(
    acks: int = -1, transactional_id: str | None = None, **parts: list[tuple[int, bytes | None]]
) -> kp.ProduceRequest:
    return kp.ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=1500,
        topic_data=[
            kp.TopicProduceData(name, [kp.PartitionProduceData(i, data) for i, data in entries])
            for name, entries in parts.items()
        ],
    )


def test_produce_validates_each_partition_and_keeps_request_order() -> None:
    good = records(b"a", b"b")
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    req = produce(t=[(1, good), (0, bytes(bad_crc)), (2, None)], u=[(0, records(b"c"))])
    plan = ka.produce_plan(req)
    assert [p.partition for p in plan.request.partitions] == [TopicPartition("t", 1), TopicPartition("u", 0)]
    first = plan.request.partitions[0].batches[0]
    assert (first.data, first.record_count, first.max_timestamp) == (good, 2, 1001)
    assert plan.request.acks == -1 and plan.request.timeout_ms == 1500
    assert plan.errors[("t", 0)][0] == ErrorCode.CORRUPT_MESSAGE and "CRC" in plan.errors[("t", 0)][1]
    assert plan.errors[("t", 2)][0] == ErrorCode.INVALID_RECORD

    core = bm.ProduceResponse(
        (
            bm.ProducedPartition(TopicPartition("u", 0), BrokerError.NOT_LEADER_OR_FOLLOWER),
            bm.ProducedPartition(TopicPartition("t", 1), BrokerError.NONE, 40, 0),
        )
    )
    resp = ka.produce_response(req, plan, core)
    t, u = resp.responses
    assert [(p.index, p.error_code, p.base_offset) for p in t.partition_responses] == [
        (1, 0, 40),
        (0, ErrorCode.CORRUPT_MESSAGE, -1),
        (2, ErrorCode.INVALID_RECORD, -1),
    ]
    assert (u.partition_responses[0].error_code, u.partition_responses[0].base_offset) == (6, -1)
    for version in (3, 8, 9):  # encodes at every version (error messages from v8)
        decoded = kp.ProduceResponse.decode(resp.encode(version), version)
        assert decoded.responses[0].partition_responses[1].error_code == ErrorCode.CORRUPT_MESSAGE


def test_produce_passes_producer_ids_and_transactional_batches() -> None:
    plan = ka.produce_plan(produce(t=[(0, records(b"a", producer_id=7, producer_epoch=0, base_sequence=0))]))
    assert plan.errors == {} and plan.needs_core  # the leader checks the sequence
    data = records(b"a", producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    plan = ka.produce_plan(produce(transactional_id="tx", t=[(0, data)]))
    assert plan.errors == {} and plan.needs_core
    info = producer_of(plan.request.partitions[0].batches[0])
    assert info is not None and info.transactional and (info.producer_id, info.producer_epoch) == (7, 0)
    init = ka.init_producer_id_response(bm.InitProducerIdResponse(BrokerError.NONE, 1000, 0))
    assert (init.error_code, init.producer_id, init.producer_epoch) == (0, 1000, 0)
    fenced = bm.InitProducerIdResponse(BrokerError.PRODUCER_FENCED)
    assert ka.init_producer_id_response(fenced, 4).error_code == ErrorCode.PRODUCER_FENCED
    assert ka.init_producer_id_response(fenced, 3).error_code == ErrorCode.INVALID_PRODUCER_EPOCH  # before KIP-588


def test_offset_for_leader_epoch_maps_both_ways() -> None:
    req = kp.OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            kp.OffsetForLeaderTopic("t", [kp.OffsetForLeaderPartition(0, 3, 2), kp.OffsetForLeaderPartition(1, -1, 0)])
        ],
    )
    core = ka.offset_for_leader_epoch_request(req)
    assert core.partitions == (
        bm.EpochQuery(TopicPartition("t", 0), 2, 3),
        bm.EpochQuery(TopicPartition("t", 1), 0, None),
    )
    resp = ka.offset_for_leader_epoch_response(
        req,
        bm.OffsetForLeaderEpochResponse(
            (
                bm.EpochEndOffset(TopicPartition("t", 0), BrokerError.NONE, 2, 17),
                bm.EpochEndOffset(TopicPartition("t", 1), BrokerError.FENCED_LEADER_EPOCH),
            )
        ),
    )
    for version in (2, 3, 4):
        out = kp.OffsetForLeaderEpochResponse.decode(resp.encode(version), version)
        got = [(p.error_code, p.partition, p.leader_epoch, p.end_offset) for p in out.topics[0].partitions]
        assert got[0] == (0, 0, 2, 17)
        assert got[1] == (ErrorCode.FENCED_LEADER_EPOCH, 1, -1, -1)
        back = kp.OffsetForLeaderEpochRequest.decode(req.encode(version), version)
        assert back.topics[0].partitions[0].leader_epoch == 2


def test_fetch_maps_epochs_and_stamps_stored_batches() -> None:
    req = kp.FetchRequest(
        replica_id=-1,
        max_wait_ms=10**9,
        min_bytes=1,
        max_bytes=1000,
        isolation_level=1,
        topics=[
            kp.FetchTopic("t", [kp.FetchPartition(0, 4, 30, 3, -1, 500), kp.FetchPartition(1, -1, 0, -1, -1, 10)]),
            kp.FetchTopic("u", [kp.FetchPartition(0, 2, 9, 1, -1, 10)]),
        ],
    )
    core_req = ka.fetch_request(req)
    assert core_req.replica_id == -1 and core_req.max_wait_ms == ka.MAX_FETCH_WAIT_MS
    assert core_req.isolation_level == 1
    assert core_req.partitions[0] == bm.FetchPartition(TopicPartition("t", 0), 30, 500, 4, 3)
    assert core_req.partitions[1] == bm.FetchPartition(TopicPartition("t", 1), 0, 10, None, None)

    stored = records(b"x", b"y")  # stored as the producer sent it: base offset 0, no epoch
    core = bm.FetchRecordsResponse(
        (
            bm.FetchedPartition(TopicPartition("t", 0), BrokerError.NONE, 42, 42, 0, (Batch(30, 2, 4, stored),)),
            bm.FetchedPartition(TopicPartition("t", 1), BrokerError.NONE, 9, 9, 0, (), (2, 7)),
            bm.FetchedPartition(TopicPartition("u", 0), BrokerError.FENCED_LEADER_EPOCH, current_leader=(None, 5)),
        )
    )
    for version in (4, 11, 12):
        resp = kp.FetchResponse.decode(ka.fetch_response(req, core, version).encode(version), version)
        assert [t.topic for t in resp.responses] == ["t", "u"]
        p0, p1 = resp.responses[0].partitions
        assert (p0.high_watermark, p0.last_stable_offset, p0.aborted_transactions) == (42, 42, [])
        batch = next(iter_batches(bytes(p0.records)))
        assert (batch.base_offset, batch.partition_leader_epoch) == (30, 4)
        assert [v for _, _, _, v, _ in batch.entries()] == [b"x", b"y"]
        fenced = resp.responses[1].partitions[0]
        assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH and fenced.high_watermark == -1
        if version == 12:
            assert (p1.diverging_epoch.epoch, p1.diverging_epoch.end_offset) == (2, 7)
            assert (fenced.current_leader.leader_id, fenced.current_leader.leader_epoch) == (-1, 5)
        else:
            assert p1.diverging_epoch is None and fenced.current_leader is None


def test_fetch_carries_the_lso_and_the_aborted_transactions() -> None:
    """read_committed gets the core's aborted list (v4+); read_uncommitted a null one."""
    tp = TopicPartition("t", 0)
    core = bm.FetchRecordsResponse(
        (bm.FetchedPartition(tp, BrokerError.NONE, 9, 3, 0, aborted_transactions=((7, 0), (8, 2))),)
    )
    for isolation, expected in ((1, [(7, 0), (8, 2)]), (0, None)):
        req = kp.FetchRequest(
            replica_id=-1, isolation_level=isolation, topics=[kp.FetchTopic("t", [kp.FetchPartition(0, -1, 0)])]
        )
        for version in (4, 12):
            resp = kp.FetchResponse.decode(ka.fetch_response(req, core, version).encode(version), version)
            p = resp.responses[0].partitions[0]
            assert (p.high_watermark, p.last_stable_offset) == (9, 3)
            got = p.aborted_transactions
            assert (None if got is None else [(a.producer_id, a.first_offset) for a in got]) == expected


def test_fetch_sessions_are_refused() -> None:
    assert ka.fetch_session_error(kp.FetchRequest(session_id=0, session_epoch=-1), 7) is None
    assert ka.fetch_session_error(kp.FetchRequest(session_id=0, session_epoch=0), 12) is None
    assert ka.fetch_session_error(kp.FetchRequest(session_id=9, session_epoch=3), 4) is None  # no sessions before v7
    err = ka.fetch_session_error(kp.FetchRequest(session_id=9, session_epoch=3), 12)
    assert err is not None and err.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    err = ka.fetch_session_error(kp.FetchRequest(session_id=0, session_epoch=4), 12)
    assert err is not None and err.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_list_offsets() -> None:
    req = kp.ListOffsetsRequest(
        isolation_level=0,
        topics=[kp.ListOffsetsTopic("t", [kp.ListOffsetsPartition(0, 3, -1), kp.ListOffsetsPartition(1, -1, -2)])],
    )
    core_req = ka.list_offsets_request(req)
    assert core_req.partitions == (
        bm.ListOffsetsPartition(TopicPartition("t", 0), -1, 3),
        bm.ListOffsetsPartition(TopicPartition("t", 1), -2, None),
    )
    core = bm.ListOffsetsResponse(
        (
            bm.ListedOffset(TopicPartition("t", 0), BrokerError.NONE, -1, 17, 3),
            bm.ListedOffset(TopicPartition("t", 1), BrokerError.NOT_LEADER_OR_FOLLOWER),
        )
    )
    resp = kp.ListOffsetsResponse.decode(ka.list_offsets_response(req, core).encode(7), 7)
    p0, p1 = resp.topics[0].partitions
    assert (p0.error_code, p0.offset, p0.leader_epoch) == (0, 17, 3)
    assert (p1.partition_index, p1.error_code, p1.offset, p1.leader_epoch) == (1, 6, -1, -1)


def test_metadata() -> None:
    assert ka.metadata_request(kp.MetadataRequest(topics=None)).topics is None
    named = kp.MetadataRequest(topics=[kp.MetadataRequestTopic(name="a"), kp.MetadataRequestTopic(name="a")])
    assert ka.metadata_request(named).topics == ("a",)
    topic_id = str(uuid.uuid4())
    core = bm.MetadataResponse(
        (bm.BrokerInfo(1, "127.0.0.2", 9092), bm.BrokerInfo(3, "127.0.0.4", 9094)),
        None,
        (
            bm.TopicMetadata(
                BrokerError.NONE,
                "t",
                topic_id,
                (
                    bm.PartitionMetadata(BrokerError.NONE, 0, 3, 7, (3, 1, 2), (3, 1), (2,)),
                    bm.PartitionMetadata(BrokerError.LEADER_NOT_AVAILABLE, 1, None, 2, (2,), (), (2,)),
                ),
            ),
            bm.TopicMetadata(BrokerError.UNKNOWN_TOPIC_OR_PARTITION, "gone", None, ()),
        ),
    )
    for version in (1, 9, 12):
        resp = kp.MetadataResponse.decode(ka.metadata_response(core, "c-1").encode(version), version)
        assert resp.cluster_id == ("c-1" if version >= 2 else None)
        assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(1, "127.0.0.2", 9092), (3, "127.0.0.4", 9094)]
        assert resp.controller_id == -1
        t, gone = resp.topics
        assert gone.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        p0, p1 = t.partitions
        assert (p0.leader_id, p0.replica_nodes, p0.isr_nodes) == (3, [3, 1, 2], [3, 1])
        assert (p1.error_code, p1.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
        if version >= 7:
            assert p0.leader_epoch == 7
        if version >= 10:
            assert str(t.topic_id) == topic_id


def test_create_topics() -> None:
    req = kp.CreateTopicsRequest(
        topics=[
            kp.CreatableTopic(
                "a", 3, 2, [], [kp.CreatableTopicConfig("min.insync.replicas", "2"), kp.CreatableTopicConfig("x", None)]
            ),
            kp.CreatableTopic("huge", ka.MAX_PARTITIONS + 1, 1, [], []),
            kp.CreatableTopic("b", -1, -1, [kp.CreatableReplicaAssignment(0, [1, 2])], []),
        ],
        timeout_ms=5000,
        validate_only=False,
    )
    core_req, refused = ka.create_topics_request(req)
    assert core_req.topics == (
        bm.NewTopic("a", 3, 2, (), (("min.insync.replicas", "2"),)),
        bm.NewTopic("b", -1, -1, ((0, (1, 2)),), ()),
    )
    assert core_req.timeout_ms == 5000 and refused[1][0] == ErrorCode.INVALID_PARTITIONS
    topic_id = str(uuid.uuid4())
    core = bm.CreateTopicsResponse(
        (
            bm.CreatedTopic("a", BrokerError.NONE, None, 3, 2),
            bm.CreatedTopic("b", BrokerError.TOPIC_ALREADY_EXISTS, "exists"),
        )
    )
    resp = ka.create_topics_response(req, refused, core, lambda name: topic_id)
    for version in (2, 5, 7):
        decoded = kp.CreateTopicsResponse.decode(resp.encode(version), version)
        assert [(t.name, t.error_code) for t in decoded.topics] == [
            ("a", 0),
            ("huge", ErrorCode.INVALID_PARTITIONS),
            ("b", ErrorCode.TOPIC_ALREADY_EXISTS),
        ]
        if version >= 5:
            assert (decoded.topics[0].num_partitions, decoded.topics[0].replication_factor) == (3, 2)
        if version >= 7:
            assert str(decoded.topics[0].topic_id) == topic_id
