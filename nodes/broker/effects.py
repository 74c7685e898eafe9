"""Effects of the broker core, besides the raft ones it passes through (``nodes/raft/effects``)
and the register service's ``ClientReply``.

Partition logs follow the raft log's durability contract: ``AppendPartitionLog`` and
``TruncatePartitionLog`` may sit in a page cache; ``FlushPartition(tp, n)`` asks for fsync, and
the driver answers ``partition_flushed(now, tp, n)``. At most one flush per partition is
outstanding. A crash loses whatever was not flushed; on restart the driver passes what survived to
``start(..., partition_logs=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .batch import Batch
from .topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class AppendPartitionLog:
    """Append ``batches`` (contiguous, from the partition's current log end). Creates the
    partition's log if it does not exist yet."""

    partition: TopicPartition
    batches: tuple[Batch, ...]


@dataclass(frozen=True, slots=True)
class TruncatePartitionLog:
    """Remove every batch with ``base_offset >= from_offset`` (always a batch boundary)."""

    partition: TopicPartition
    from_offset: int


@dataclass(frozen=True, slots=True)
class FlushPartition:
    """Make the partition's log below ``up_to_offset`` durable (including earlier truncations),
    then call ``partition_flushed(now, partition, up_to_offset)``."""

    partition: TopicPartition
    up_to_offset: int


@dataclass(frozen=True, slots=True)
class ClientResponse:
    """The answer to a client call (``produce``, ``fetch``, ``list_offsets``, ``metadata``,
    ``create_topics``) made with ``request_id``. Never emitted for an acks=0 produce."""

    request_id: Any
    response: Any


@dataclass(frozen=True, slots=True)
class CloseClientConnection:
    """An acks=0 produce failed for some partition: Kafka closes the client's connection
    instead of answering."""

    request_id: Any
    reason: str
