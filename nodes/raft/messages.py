"""Quorum RPC messages (KIP-595 shapes, trimmed to what this quorum uses).

Every message carries the sender's ``epoch``; responses also carry the responder's known
``leader_id`` so that the receiver can learn of newer epochs and leaders. Requests carry the
sender's ``cluster_id`` (None: not given, not checked, as Kafka accepts a null ClusterId); a
receiver of another cluster answers INCONSISTENT_CLUSTER_ID. Optional ints use None
("unknown"); the binary codec writes None as -1. Replication is pull-based: followers send
:class:`FetchRequest` to the leader, which doubles as their acknowledgement (fetching at offset N
acknowledges everything below N) and as the leader's liveness signal.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import Error
from .records import Record


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A candidate (or, with ``pre_vote``, a prospective) asks for a vote in ``epoch``.

    ``last_epoch``/``last_offset`` describe the sender's log: the epoch of its last record (0 if
    empty) and its log end offset. A pre-vote carries the sender's current epoch (not bumped).
    """

    epoch: int
    candidate_id: int
    last_epoch: int
    last_offset: int
    pre_vote: bool = False
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: Error
    epoch: int
    leader_id: int | None
    vote_granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    """A new leader announces itself; resent every ``fetch_timeout / 2`` as a heartbeat."""

    epoch: int
    leader_id: int
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: Error
    epoch: int
    leader_id: int | None


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    """A resigning leader asks voters to elect a successor, best-placed first."""

    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...] = ()
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: Error
    epoch: int
    leader_id: int | None


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """Follower pull: "send me records from ``fetch_offset``; my last record has epoch
    ``last_fetched_epoch``". The leader may hold it up to ``max_wait_ms`` if there is nothing new.
    ``lease_token`` (leader leases) echoes the highest ``lease_token`` of the leader's answers received."""

    epoch: int
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 0
    lease_token: int | None = None
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Records from the requested offset, or a divergence point to truncate to.

    ``diverging_epoch``/``diverging_end_offset`` are set together (never with records): the
    follower truncates to ``min(its own end offset for that epoch, diverging_end_offset)``.
    ``lease_token`` (leader leases): the leader's lease clock when it answered; the follower echoes it.
    """

    error: Error
    epoch: int
    leader_id: int | None
    high_watermark: int | None
    records: tuple[Record, ...] = ()
    diverging_epoch: int | None = None
    diverging_end_offset: int | None = None
    lease_token: int | None = None


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest:
    """Admin query: who leads and how far each voter has replicated. Answered by the leader."""

    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One voter or observer as the leader sees it; None = not yet known. ``last_fetch_time`` is leader-local ns."""

    replica_id: int
    log_end_offset: int | None
    last_fetch_time: int | None


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    error: Error
    epoch: int
    leader_id: int | None
    high_watermark: int | None
    voters: tuple[ReplicaState, ...] = ()
    observers: tuple[ReplicaState, ...] = ()


Request = VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | DescribeQuorumRequest
Response = VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse | DescribeQuorumResponse
Message = Request | Response

REQUEST_TYPES: tuple[type, ...] = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    DescribeQuorumRequest,
)
RESPONSE_TYPES: tuple[type, ...] = (
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    DescribeQuorumResponse,
)

API_KEYS: dict[type, int] = {
    FetchRequest: 1,
    FetchResponse: 1,
    VoteRequest: 52,
    VoteResponse: 52,
    BeginQuorumEpochRequest: 53,
    BeginQuorumEpochResponse: 53,
    EndQuorumEpochRequest: 54,
    EndQuorumEpochResponse: 54,
    DescribeQuorumRequest: 55,
    DescribeQuorumResponse: 55,
}
"""Kafka api key of each message type, for drivers that frame messages in Kafka request headers."""


def is_request(message: object) -> bool:
    """True for the five request types."""
    return isinstance(message, REQUEST_TYPES)
