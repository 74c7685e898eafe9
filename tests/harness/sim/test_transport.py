"""The simulator's transport carries the queue client's leader epochs (KIP-320) to and from the broker."""

from __future__ import annotations

from harness.sim.transport import broker_answer, broker_call
from nodes import broker as bm
from nodes.broker import group_messages as gm
from workloads.queue import QueueWorkload
from workloads.queue.bodies import (
    CommitOffsets,
    Fetch,
    FetchOffsets,
    Metadata,
    MetadataReply,
    OffsetsFetched,
    PartitionInfo,
)
from workloads.queue.groups import GROUP


def test_a_fetch_carries_its_current_leader_epoch_and_none_without_one() -> None:
    method, request = broker_call(Fetch("t0", 1, 145, leader_epoch=9))
    assert method == "fetch" and request.partitions[0].current_leader_epoch == 9
    assert request.partitions[0].fetch_offset == 145
    _, request = broker_call(Fetch("t0", 1, 145))
    assert request.partitions[0].current_leader_epoch is None


def test_metadata_answers_name_each_partitions_leader_epoch() -> None:
    parts = (
        bm.PartitionMetadata(bm.BrokerError.NONE, 0, 3, 6, (1, 2, 3), (1, 3), ()),
        bm.PartitionMetadata(bm.BrokerError.LEADER_NOT_AVAILABLE, 1, None, 8, (1, 2, 3), (), ()),
    )
    response = bm.MetadataResponse((), 1, (bm.TopicMetadata(bm.BrokerError.NONE, "t0", None, parts),))
    reply = broker_answer(Metadata("t0"), response)
    assert reply == MetadataReply((PartitionInfo(0, "n3", 2, 0, 6), PartitionInfo(1, None, 0, 5, 8)))


def test_commits_and_offset_fetches_carry_the_committed_leader_epoch() -> None:
    method, request = broker_call(CommitOffsets(GROUP, 3, "m1", "t0", ((0, 145), (1, 4)), ((0, 9),)))
    assert method == "group_call"
    assert [(o.partition.partition, o.offset, o.leader_epoch) for o in request.offsets] == [(0, 145, 9), (1, 4, -1)]
    tp = bm.TopicPartition("t0", 0)
    answer = gm.OffsetFetchResponse(bm.BrokerError.NONE, (gm.FetchedOffset(tp, 145, 9),))
    reply = broker_answer(FetchOffsets(GROUP, "t0", (0,)), answer)
    assert reply == OffsetsFetched(0, "none", ((0, 145),), ((0, 9),))


def test_a_create_topic_with_assignments_places_the_replicas_and_sends_no_counts() -> None:
    w = QueueWorkload(["n1", "n2", "n3"], 0, partitions=2, assignment={0: ["n3", "n1", "n2"], 1: ["n1", "n2", "n3"]})
    method, request = broker_call(w.create_topic())
    (topic,) = request.topics
    assert method == "create_topics"
    assert (topic.num_partitions, topic.replication_factor) == (-1, -1)  # as Kafka: counts or a placement
    assert topic.assignments == ((0, (3, 1, 2)), (1, (1, 2, 3)))
    assert ("min.insync.replicas", "2") in topic.configs
    _, request = broker_call(QueueWorkload(["n1", "n2", "n3"], 0).create_topic())
    assert (request.topics[0].num_partitions, request.topics[0].replication_factor, request.topics[0].assignments) == (
        3,
        3,
        (),
    )
