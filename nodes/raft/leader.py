"""Leader bookkeeping: voters' fetch positions, the high watermark rule (§1.5) and check-quorum.

The leader's own entry in ``end_offsets`` is its *flushed* end offset (KAFKA-10533), so an
unflushed tail never counts toward the majority.
"""

from __future__ import annotations

from collections.abc import Iterable

from .config import CHECK_QUORUM_FACTOR, MS, RaftConfig


class LeaderState:
    """Per-epoch state of a leader. ``high_watermark`` is None until first established: a new
    leader does not inherit a previous value."""

    def __init__(
        self,
        epoch: int,
        local_id: int,
        voters: Iterable[int],
        epoch_start_offset: int,
        now: int,
        *,
        require_current_epoch: bool = True,
    ) -> None:
        self.epoch = epoch
        self.local_id = local_id
        self.voters = tuple(sorted(voters))
        self.epoch_start_offset = epoch_start_offset
        self.require_current_epoch = require_current_epoch
        self.end_offsets: dict[int, int | None] = {v: None for v in self.voters}
        self.last_fetch: dict[int, int | None] = {v: None for v in self.voters if v != local_id}
        # leader leases: the highest lease token each other voter echoed (see node.py)
        self.lease_tokens: dict[int, int] = {}
        # observers (fetchers outside the voter set): replica -> (fetch offset, last fetch); never in the HW
        self.observers: dict[int, tuple[int, int]] = {}
        self._grace_start = now
        self.high_watermark: int | None = None
        self._deadline_cache: tuple[int, int] | None = None  # (fetch timeout, deadline)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def update_local(self, end_offset: int) -> bool:
        """The leader's durable end offset moved; returns True if the high watermark rose."""
        self.end_offsets[self.local_id] = end_offset
        return self._recompute()

    def record_fetch(self, replica_id: int, now: int) -> None:
        """Any epoch-valid Fetch from a voter keeps it alive for check-quorum."""
        if replica_id in self.last_fetch:
            self.last_fetch[replica_id] = now
            self._deadline_cache = None

    def record_lease(self, replica_id: int, token: int) -> None:
        """A voter echoed ``token``: it received an answer sent at that time and promised not to vote before
        a minimum election timeout has passed."""
        if replica_id in self.last_fetch:
            self.lease_tokens[replica_id] = max(token, self.lease_tokens.get(replica_id, token))

    def lease_start(self) -> int | None:
        """The time a majority (this leader included) last acknowledged: the (majority - 1)-th highest token
        of the other voters; None without such a majority. A single voter needs nobody (its lease never ends)."""
        need = self.majority - 1
        if need == 0:
            return None
        tokens = sorted(self.lease_tokens.values(), reverse=True)
        return tokens[need - 1] if len(tokens) >= need else None

    def update_replica(self, replica_id: int, fetch_offset: int, now: int = 0) -> bool:
        """A replica fetched at a valid position ``fetch_offset``; returns True if the HW rose. Only
        voters count toward the high watermark; an observer's position is only recorded."""
        if replica_id not in self.end_offsets:
            self.observers[replica_id] = (fetch_offset, now)
            return False
        if replica_id == self.local_id:
            return False
        self.end_offsets[replica_id] = fetch_offset
        return self._recompute()

    def _recompute(self) -> bool:
        offsets = sorted((-1 if o is None else o for o in self.end_offsets.values()), reverse=True)
        candidate = offsets[len(self.voters) // 2]
        if candidate < 0:
            return False
        if self.require_current_epoch and candidate <= self.epoch_start_offset:
            return False  # must commit an entry of our own epoch first (KAFKA-12619: strictly past)
        if self.high_watermark is not None and candidate <= self.high_watermark:
            return False  # never decreases
        self.high_watermark = candidate
        return True

    def check_quorum_deadline(self, config: RaftConfig) -> int | None:
        """Time (ns) at which the leader must resign unless more voters fetch; None if alone."""
        if len(self.voters) == 1:
            return None
        cached = self._deadline_cache
        if cached is not None and cached[0] == config.fetch_timeout_ms:
            return cached[1]
        window = int(CHECK_QUORUM_FACTOR * config.fetch_timeout_ms * MS)
        times = sorted(
            (self._grace_start if t is None else max(t, self._grace_start) for t in self.last_fetch.values()),
            reverse=True,
        )
        # the leader counts itself, so it needs majority - 1 recent fetchers
        deadline = times[self.majority - 2] + window
        self._deadline_cache = (config.fetch_timeout_ms, deadline)
        return deadline

    def preferred_successors(self) -> tuple[int, ...]:
        """Other voters by fetched offset, highest first (ties by id)."""
        others = [v for v in self.voters if v != self.local_id]
        offsets = {v: (-1 if self.end_offsets[v] is None else self.end_offsets[v]) for v in others}
        return tuple(sorted(others, key=lambda v: (-offsets[v], v)))
