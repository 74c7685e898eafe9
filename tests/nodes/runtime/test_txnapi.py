"""The transaction APIs mapped between the Kafka wire classes and the broker core (txnapi.py)."""

from __future__ import annotations

from nodes.broker import group_messages as gm
from nodes.broker import messages as bm
from nodes.broker import txn_messages as tm
from nodes.broker.errors import BrokerError
from nodes.broker.topic_partition import TopicPartition
from nodes.kafka import protocol as kp
from nodes.kafka.errors import ErrorCode
from nodes.kafka.versions import ApiKey
from nodes.runtime import txnapi

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_add_partitions_maps_both_ways_and_fenced_is_old_epoch_before_v2() -> None:
    msg = kp.AddPartitionsToTxnRequest("tx", 5, 2, [kp.AddPartitionsToTxnTopic("t", [0, 1])])
    for version in range(4):
        decoded = kp.AddPartitionsToTxnRequest.decode(msg.encode(version), version)
        core = txnapi.core_request(ApiKey.ADD_PARTITIONS_TO_TXN, decoded)
        assert core == tm.AddPartitionsToTxnRequest("tx", 5, 2, (T0, T1))
    answer = tm.AddPartitionsToTxnResponse(((T0, BrokerError.PRODUCER_FENCED), (T1, BrokerError.PRODUCER_FENCED)))
    for version, code in ((1, ErrorCode.INVALID_PRODUCER_EPOCH), (2, ErrorCode.PRODUCER_FENCED)):
        r = txnapi.kafka_response(ApiKey.ADD_PARTITIONS_TO_TXN, msg, version, answer)
        r = kp.AddPartitionsToTxnResponse.decode(r.encode(version), version)
        parts = r.results_by_topic_v3_and_below[0].results_by_partition
        assert [(p.partition_index, p.partition_error_code) for p in parts] == [(0, code), (1, code)]


def test_end_txn_add_offsets_txn_offset_commit_and_markers() -> None:
    end = kp.EndTxnRequest("tx", 5, 2, True)
    assert txnapi.core_request(ApiKey.END_TXN, end) == tm.EndTxnRequest("tx", 5, 2, True)
    r = txnapi.kafka_response(ApiKey.END_TXN, end, 3, tm.EndTxnResponse(BrokerError.CONCURRENT_TRANSACTIONS))
    assert r.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    add = kp.AddOffsetsToTxnRequest("tx", 5, 2, "g")
    assert txnapi.core_request(ApiKey.ADD_OFFSETS_TO_TXN, add) == tm.AddOffsetsToTxnRequest("tx", 5, 2, "g")
    commit = kp.TxnOffsetCommitRequest(
        "tx", "g", 5, 2, 7, "m", None, [kp.TxnOffsetCommitRequestTopic("t", [kp.TxnOffsetCommitRequestPartition(1, 9)])]
    )
    core = txnapi.core_request(ApiKey.TXN_OFFSET_COMMIT, commit)
    assert core == gm.TxnOffsetCommitRequest("tx", "g", 5, 2, (gm.CommitOffset(T1, 9, -1, ""),), 7, "m")
    assert txnapi.CORE_METHOD[ApiKey.TXN_OFFSET_COMMIT] == "group_call"
    markers = kp.WriteTxnMarkersRequest([kp.WritableTxnMarker(5, 3, False, [kp.WritableTxnMarkerTopic("t", [0])], 4)])
    core = txnapi.core_request(ApiKey.WRITE_TXN_MARKERS, markers)
    assert core == bm.WriteTxnMarkersRequest((bm.TxnMarkerEntry(5, 3, False, 4, (T0,)),))
    answer = bm.WriteTxnMarkersResponse((bm.TxnMarkerResult(5, ((T0, BrokerError.NOT_LEADER_OR_FOLLOWER),)),))
    r = txnapi.kafka_response(ApiKey.WRITE_TXN_MARKERS, markers, 1, answer)
    assert r.markers[0].topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
