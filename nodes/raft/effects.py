"""Effects returned by the core. A driver applies them **in list order**.

Ordering is the durability contract: a :class:`PersistQuorumState` must be durable (temp file +
fsync + rename) before the driver acts on any later effect of the same list, e.g. before it sends
the VoteResponse that follows it. :class:`AppendLog`/:class:`TruncateLog` may be buffered;
they become durable only when a later :class:`Flush` completes, which the driver reports back
with ``flushed(now, up_to_offset)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import Error
from .messages import Message
from .quorum_state import QuorumState
from .records import Record


@dataclass(frozen=True, slots=True)
class Send:
    """Deliver ``message`` to node ``dst``. For a response, ``reply_ctx`` is whatever the driver
    passed to ``handle()`` with the request (e.g. a connection + correlation id); else None."""

    dst: int
    message: Message
    reply_ctx: Any = None


@dataclass(frozen=True, slots=True)
class PersistQuorumState:
    """Durably replace the quorum-state file before applying any later effect."""

    state: QuorumState


@dataclass(frozen=True, slots=True)
class AppendLog:
    """Append these records (contiguous, starting at the current log end) to the log."""

    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class TruncateLog:
    """Remove every record with ``offset >= from_offset``."""

    from_offset: int


@dataclass(frozen=True, slots=True)
class Flush:
    """Make every record below ``up_to_offset`` durable (fsync), then call
    ``flushed(now, up_to_offset)``. At most one Flush is outstanding at a time."""

    up_to_offset: int


@dataclass(frozen=True, slots=True)
class Committed:
    """The high watermark rose to ``high_watermark``; ``records`` are the newly committed ones
    (offsets from the previous high watermark up to ``high_watermark - 1``, control records
    included). After a restart the node's high watermark starts at 0, so the whole committed
    prefix is delivered again: state machines are rebuilt from it."""

    high_watermark: int
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer to ``append(now, payload, request_id)``.

    ``error`` NONE: committed at ``offset``. NOT_LEADER_OR_FOLLOWER: definitely not appended
    (``leader_id`` is the leader this node knows, or None). REQUEST_TIMED_OUT: appended, but this
    node stopped leading before it committed; the outcome is unknown.
    """

    request_id: Any
    error: Error
    offset: int | None = None
    leader_id: int | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """One line for ``events.jsonl`` (docs/formats.md "Node events"): ``data`` is the JSON object."""

    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Fatal:
    """The node hit an illegal state (e.g. two leaders in one epoch, or an order to truncate below
    its high watermark). It has stopped: every later input returns no effects. The driver should
    log ``reason`` and treat the node as crashed. Effects before it in the same list still apply;
    the step stopped at the failure without changing anything further."""

    reason: str


Effect = Send | PersistQuorumState | AppendLog | TruncateLog | Flush | Committed | Reply | Event | Fatal
