"""The transaction APIs mapped to the broker core (sans-IO, like ``groupapi.py``).

:func:`core_request` turns a decoded AddPartitionsToTxn, AddOffsetsToTxn, EndTxn (for
``BrokerNode.txn_call``), TxnOffsetCommit (for ``group_call``: the group coordinator answers it)
or WriteTxnMarkers (for ``write_txn_markers``) into the core's request; :func:`kafka_response`
turns the core's answer back into the Kafka response of that version. PRODUCER_FENCED (KIP-588)
is INVALID_PRODUCER_EPOCH for the versions before it (AddPartitionsToTxn, AddOffsetsToTxn and
EndTxn below v2, InitProducerId below v4), as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from ..broker import group_messages as gm
from ..broker import messages as bm
from ..broker import txn_messages as tm
from ..broker.errors import BrokerError
from ..broker.topic_partition import TopicPartition
from ..kafka import protocol as kp
from ..kafka.versions import ApiKey

__all__ = ["CORE_METHOD", "TXN_API_KEYS", "core_request", "fenced_code", "kafka_response"]

TXN_API_KEYS = frozenset(int(cls.API_KEY) for cls in kp.TXN_REQUESTS)
CORE_METHOD = {
    ApiKey.ADD_PARTITIONS_TO_TXN: "txn_call",
    ApiKey.ADD_OFFSETS_TO_TXN: "txn_call",
    ApiKey.END_TXN: "txn_call",
    ApiKey.TXN_OFFSET_COMMIT: "group_call",
    ApiKey.WRITE_TXN_MARKERS: "write_txn_markers",
}
_FENCED_SINCE = {
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
    ApiKey.INIT_PRODUCER_ID: 4,
}


def fenced_code(key: int, version: int, error: BrokerError) -> int:
    """The error code to send: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH before KIP-588."""
    if error is BrokerError.PRODUCER_FENCED and version < _FENCED_SINCE.get(key, 0):
        return int(BrokerError.INVALID_PRODUCER_EPOCH)
    return int(error)


def core_request(key: int, msg: Any) -> Any:
    """The core request for a decoded transaction API request."""
    if key == ApiKey.ADD_PARTITIONS_TO_TXN:
        tps = tuple(TopicPartition(t.name, i) for t in msg.v3_and_below_topics for i in t.partitions)
        return tm.AddPartitionsToTxnRequest(
            msg.v3_and_below_transactional_id, msg.v3_and_below_producer_id, msg.v3_and_below_producer_epoch, tps
        )
    if key == ApiKey.ADD_OFFSETS_TO_TXN:
        return tm.AddOffsetsToTxnRequest(msg.transactional_id, msg.producer_id, msg.producer_epoch, msg.group_id)
    if key == ApiKey.END_TXN:
        return tm.EndTxnRequest(msg.transactional_id, msg.producer_id, msg.producer_epoch, msg.committed)
    if key == ApiKey.TXN_OFFSET_COMMIT:
        offsets = tuple(
            gm.CommitOffset(
                TopicPartition(t.name, p.partition_index),
                p.committed_offset,
                p.committed_leader_epoch,
                p.committed_metadata or "",
            )
            for t in msg.topics
            for p in t.partitions
        )
        return gm.TxnOffsetCommitRequest(
            msg.transactional_id,
            msg.group_id,
            msg.producer_id,
            msg.producer_epoch,
            offsets,
            msg.generation_id,
            msg.member_id,
        )
    if key == ApiKey.WRITE_TXN_MARKERS:
        return bm.WriteTxnMarkersRequest(
            tuple(
                bm.TxnMarkerEntry(
                    m.producer_id,
                    m.producer_epoch,
                    m.transaction_result,
                    m.coordinator_epoch,
                    tuple(TopicPartition(t.name, i) for t in m.topics for i in t.partition_indexes),
                )
                for m in msg.markers
            )
        )
    raise ValueError(f"not a transaction API: {key}")


def _by_topic(errors: Any, key: int, version: int) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for tp, error in errors:
        out.setdefault(tp.topic, []).append((tp.partition, fenced_code(key, version, error)))
    return out


def kafka_response(key: int, msg: Any, version: int, r: Any) -> Any:
    """The Kafka response (for ``msg`` at ``version``) to the core's answer ``r``."""
    if key == ApiKey.ADD_PARTITIONS_TO_TXN:
        return kp.AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=[
                kp.AddPartitionsToTxnTopicResult(
                    name, [kp.AddPartitionsToTxnPartitionResult(i, code) for i, code in parts]
                )
                for name, parts in _by_topic(r.errors, key, version).items()
            ]
        )
    if key == ApiKey.ADD_OFFSETS_TO_TXN:
        return kp.AddOffsetsToTxnResponse(error_code=fenced_code(key, version, r.error))
    if key == ApiKey.END_TXN:
        return kp.EndTxnResponse(error_code=fenced_code(key, version, r.error))
    if key == ApiKey.TXN_OFFSET_COMMIT:
        return kp.TxnOffsetCommitResponse(
            topics=[
                kp.TxnOffsetCommitResponseTopic(
                    name, [kp.TxnOffsetCommitResponsePartition(i, code) for i, code in parts]
                )
                for name, parts in _by_topic(r.errors, key, version).items()
            ]
        )
    if key == ApiKey.WRITE_TXN_MARKERS:
        return kp.WriteTxnMarkersResponse(
            markers=[
                kp.WritableTxnMarkerResult(
                    m.producer_id,
                    [
                        kp.WritableTxnMarkerTopicResult(
                            name, [kp.WritableTxnMarkerPartitionResult(i, code) for i, code in parts]
                        )
                        for name, parts in _by_topic(m.errors, key, version).items()
                    ],
                )
                for m in r.markers
            ]
        )
    raise ValueError(f"not a transaction API: {key}")
