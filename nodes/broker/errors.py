"""Kafka error codes used by the broker and the controller (Kafka's numbering)."""

from __future__ import annotations

import enum


class BrokerError(enum.IntEnum):
    """Per-partition / per-topic / per-RPC error codes.

    Produce outcomes for a queue workload: NONE is definite success; UNKNOWN_TOPIC_OR_PARTITION,
    INVALID_REQUIRED_ACKS, NOT_ENOUGH_REPLICAS, CORRUPT_MESSAGE, FENCED/UNKNOWN_LEADER_EPOCH and
    a NOT_LEADER_OR_FOLLOWER answered *at once* mean nothing was appended; REQUEST_TIMED_OUT,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND and a NOT_LEADER_OR_FOLLOWER from a parked (acks=-1)
    produce are indeterminate: the records are in the old leader's log and may still commit.
    """

    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    INVALID_TOPIC_EXCEPTION = 17
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    OPERATION_NOT_ATTEMPTED = 55
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    INVALID_UPDATE_VERSION = 96
    INELIGIBLE_REPLICA = 107
