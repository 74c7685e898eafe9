"""Error codes carried in responses and client replies (Kafka's numbering)."""

from __future__ import annotations

import enum


class Error(enum.IntEnum):
    """Kafka error codes used by the quorum.

    For client appends: ``NOT_LEADER_OR_FOLLOWER`` means the command was definitely not appended;
    ``REQUEST_TIMED_OUT`` means it was appended but leadership was lost before it committed, so
    it may or may not take effect (an indeterminate outcome). ``INCONSISTENT_CLUSTER_ID`` answers a
    request from another cluster (its ``cluster_id`` is not ours); the receiver did not act on it.
    """

    NONE = 0
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INCONSISTENT_CLUSTER_ID = 104
