"""The transaction coordinator's client calls and answers (core side, like ``group_messages``).

``BrokerNode.txn_call(now, request_id, request)`` takes AddPartitionsToTxn, AddOffsetsToTxn or
EndTxn and answers with a ``ClientResponse`` carrying the matching response (once the
coordinator's log write is replicated). InitProducerId with a transactional id goes through
``BrokerNode.init_producer_id``, FindCoordinator (key type 1) through ``group_call``, and
TxnOffsetCommit (answered by the group coordinator) through ``group_call``. The Kafka wire
mapping is in ``nodes/runtime/txnapi.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import BrokerError
from .topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class AddPartitionsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class AddPartitionsToTxnResponse:
    errors: tuple[tuple[TopicPartition, BrokerError], ...]


@dataclass(frozen=True, slots=True)
class AddOffsetsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass(frozen=True, slots=True)
class AddOffsetsToTxnResponse:
    error: BrokerError


@dataclass(frozen=True, slots=True)
class EndTxnRequest:
    """``commit`` False: abort."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


@dataclass(frozen=True, slots=True)
class EndTxnResponse:
    error: BrokerError


TXN_REQUESTS = (AddPartitionsToTxnRequest, AddOffsetsToTxnRequest, EndTxnRequest)
