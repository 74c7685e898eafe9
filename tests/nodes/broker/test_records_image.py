"""Metadata record encoding (distinct from register commands) and the image's deterministic,
atomic application."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.broker import MetadataImage, TopicPartition
from nodes.broker.image import BrokerChange, PartitionChange
from nodes.broker.records import (
    FenceBrokerRecord,
    MetadataError,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    decode_metadata,
    encode_metadata,
    is_metadata_payload,
)
from nodes.kv import Command, CommandError, decode_command, encode_command
from nodes.raft import Record

TP = TopicPartition("t", 0)
ids = st.integers(0, 1000)
id_tuples = st.lists(ids, min_size=1, max_size=4).map(tuple)
maybe_id_tuples = st.lists(ids, max_size=3).map(tuple)
records = st.one_of(
    st.builds(
        RegisterBrokerRecord,
        ids,
        ids,
        st.integers(0, 2**62),
        st.text(max_size=5),
        st.integers(0, 65535),
        st.text(max_size=5),
        st.integers(0, 65535),
    ),
    st.builds(FenceBrokerRecord, ids, ids),
    st.builds(UnfenceBrokerRecord, ids, ids),
    st.builds(
        TopicRecord,
        st.text(min_size=1, max_size=8),
        st.text(max_size=8),
        st.lists(st.tuples(st.text(), st.text())).map(tuple),
    ),
    st.builds(
        PartitionRecord, st.text(min_size=1), ids, id_tuples, id_tuples, st.none() | ids, ids, ids, maybe_id_tuples
    ),
    st.builds(PartitionChangeRecord, st.text(min_size=1), ids, ids, id_tuples, st.none() | ids, ids, maybe_id_tuples),
)


@given(st.lists(records, min_size=1, max_size=6))
def test_metadata_payload_round_trips_and_is_never_a_register_command(batch):
    payload = encode_metadata(batch)
    assert is_metadata_payload(payload)
    assert decode_metadata(payload) == tuple(batch)
    with pytest.raises(CommandError):
        decode_command(payload)


def test_a_registration_carries_the_inter_broker_endpoint_only_when_there_is_one():
    """A broker-only node registers where other brokers reach it; a combined node's record is unchanged."""
    plain = encode_metadata([RegisterBrokerRecord(1, 0, 7, "h", 9092)])
    assert b"inter_broker" not in plain
    assert plain == encode_metadata([RegisterBrokerRecord(1, 0, 7, "h", 9092, "", 0)])
    image = MetadataImage()
    payload = encode_metadata([RegisterBrokerRecord(4, 0, 7, "h", 9092, "b4", 9091)])
    image.apply(Record(0, 1, payload))
    reg = image.brokers[4]
    assert (reg.host, reg.port, reg.inter_broker_host, reg.inter_broker_port) == ("h", 9092, "b4", 9091)


@given(st.sampled_from(["read", "write", "cas"]), st.text(max_size=5), st.integers())
def test_register_commands_are_never_metadata(f, key, v):
    payload = encode_command(Command(f, key, [v, v] if f == "cas" else v))
    assert not is_metadata_payload(payload)
    with pytest.raises(MetadataError):
        decode_metadata(payload)


@pytest.mark.parametrize(
    "payload",
    [
        b"\x00\x02[]",
        b"\x00\x01not json",
        b"\x00\x01[]",
        b'\x00\x01[{"type":"nope"}]',
        b'\x00\x01[{"type":"fence-broker"}]',
    ],
)
def test_malformed_metadata_payloads_are_rejected(payload):
    with pytest.raises(MetadataError):
        decode_metadata(payload)


def committed(image, offset, *recs, epoch=1):
    return image.apply(Record(offset, epoch, encode_metadata(recs)))


def test_image_applies_registration_fencing_topics_and_partition_changes():
    image = MetadataImage()
    changes = committed(image, 0, RegisterBrokerRecord(1, 0, 7, "h", 9092))
    assert isinstance(changes[0], BrokerChange) and image.brokers[1].fenced
    committed(image, 1, UnfenceBrokerRecord(1, 0))
    assert image.is_eligible(1)
    committed(image, 2, TopicRecord("t", "id", (("min.insync.replicas", "2"),)), PartitionRecord("t", 0, (1,), (1,), 1))
    assert image.partition(TP).leader == 1 and image.topic_config("t", "min.insync.replicas") == "2"
    (change,) = committed(image, 3, PartitionChangeRecord("t", 0, 0, (1,), None, 1))
    assert isinstance(change, PartitionChange) and change.new.partition_epoch == 1 and change.new.leader is None
    assert image.offset == 4
    # an old raft offset is not applied twice; register commands and control records change nothing
    assert committed(image, 1, FenceBrokerRecord(1, 0)) == []
    assert image.apply(Record(4, 1, encode_command(Command("write", "k", 1)))) == []
    assert image.apply(Record(5, 2, b"{}", control=True)) == [] and image.last_epoch == 2


@pytest.mark.parametrize(
    "batch",
    [
        (PartitionChangeRecord("t", 0, 5, (1,), 1, 0),),  # stale expected partition epoch
        (PartitionChangeRecord("t", 0, 0, (1,), 2, 0),),  # leader outside the ISR
        (PartitionChangeRecord("t", 0, 0, (4,), None, 0),),  # ISR outside the replicas
        (PartitionChangeRecord("t", 0, 0, (1,), 1, -1),),  # leader epoch going down
        (PartitionChangeRecord("t", 0, 0, (), 1, 1),),  # a leader with an empty ISR
        (PartitionChangeRecord("t", 0, 0, (1,), 1, 1, (1, 2)),),  # ELR overlapping the ISR
        (PartitionChangeRecord("t", 0, 0, (1,), 1, 1, (4,)),),  # ELR outside the replicas
        (FenceBrokerRecord(1, 99),),  # another broker epoch
        (TopicRecord("t", "x"),),  # duplicate topic
        (RegisterBrokerRecord(1, 0, 8),),  # broker epoch not newer
        # atomic: the valid first record is undone with the invalid second one
        (UnfenceBrokerRecord(2, 5), PartitionChangeRecord("t", 0, 9, (1,), 1, 0)),
        (TopicRecord("u", "y"), PartitionRecord("u", 0, (1, 1), (1,), 1)),
    ],
)
def test_a_batch_with_any_stale_or_invalid_record_is_skipped_whole(batch):
    image = MetadataImage()
    committed(image, 0, RegisterBrokerRecord(1, 0, 7), RegisterBrokerRecord(2, 5, 8))
    committed(image, 1, TopicRecord("t", "id"), PartitionRecord("t", 0, (1, 2, 3), (1, 2), 1))
    before = (dict(image.brokers), {n: dict(t.partitions) for n, t in image.topics.items()})
    assert committed(image, 2, *batch) == []
    assert (dict(image.brokers), {n: dict(t.partitions) for n, t in image.topics.items()}) == before
    assert image.rejected == 1 and image.offset == 3
