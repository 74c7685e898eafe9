"""Quorum timing configuration (Kafka's ``controller.quorum.*`` settings, in milliseconds).

The core's clock (``now``) is in integer nanoseconds; these settings are milliseconds, as in Kafka,
and are converted with :data:`MS`.
"""

from __future__ import annotations

from dataclasses import dataclass

MS = 1_000_000
"""Nanoseconds per millisecond."""

ELECTION_BACKOFF_BASE_MS = 100
"""Unit of the binary exponential election backoff (Kafka's RETRY_BACKOFF_BASE_MS)."""

CHECK_QUORUM_FACTOR = 1.5
"""A leader resigns if a majority has not fetched within this many fetch timeouts."""

DEFAULT_CLUSTER_ID = "kraftwerk"
"""The cluster id of a node not given one (``cluster.id``), as Metadata reports it."""


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Timing and batching knobs. Defaults follow Kafka except where noted.

    ``request_timeout_ms`` defaults to 1000 (Kafka: 2000) so that a lost Fetch is retried before
    ``fetch_timeout_ms`` expires; the core has no other way to learn that a message was lost.
    ``lazy_flush_interval_ms`` is used only with the ``lazy-flush`` bug.

    ``lease_reads``: the leader answers reads from its state, without a log round trip, while its
    lease lasts: ``election_timeout_ms - lease_drift_margin_ms`` on the monotonic clock from the
    last fetch round a majority acknowledged (``node.py``, "Leader leases"). Off by default.

    ``cluster_id``: carried by every request this node sends; a request that carries another is
    answered INCONSISTENT_CLUSTER_ID and otherwise ignored.
    """

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 1000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500
    fetch_max_records: int = 256
    pre_vote: bool = False
    lazy_flush_interval_ms: int = 1000
    lease_reads: bool = False
    lease_drift_margin_ms: int = 100
    cluster_id: str = DEFAULT_CLUSTER_ID

    def __post_init__(self) -> None:
        for name in (
            "election_timeout_ms",
            "fetch_timeout_ms",
            "election_backoff_max_ms",
            "request_timeout_ms",
            "retry_backoff_ms",
            "fetch_max_records",
            "lazy_flush_interval_ms",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"RaftConfig.{name} must be a positive int, got {value!r}")
        margin = self.lease_drift_margin_ms
        if not isinstance(margin, int) or isinstance(margin, bool) or margin < 0:
            raise ValueError(f"RaftConfig.lease_drift_margin_ms must be an int >= 0, got {margin!r}")
        if not isinstance(self.cluster_id, str) or not self.cluster_id:
            raise ValueError(f"RaftConfig.cluster_id must be a non-empty string, got {self.cluster_id!r}")
        if not isinstance(self.fetch_max_wait_ms, int) or self.fetch_max_wait_ms < 0:
            raise ValueError(f"RaftConfig.fetch_max_wait_ms must be an int >= 0, got {self.fetch_max_wait_ms!r}")

    @property
    def lease_ns(self) -> int:
        """How long a leader's read lease lasts from the fetch round that granted it, in ns (0 when the
        margin is as long as the election timeout: every read then goes through the log)."""
        return max(0, self.election_timeout_ms - self.lease_drift_margin_ms) * MS
