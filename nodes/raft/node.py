"""RaftNode: the sans-IO KRaft-style quorum core (docs/kraft.md §1).

The node never touches sockets, clocks, threads or files. Each public method takes ``now`` (the
driver's clock, **integer nanoseconds**: the simulator's virtual clock or ``time.monotonic_ns()``;
config values are milliseconds) and returns a list of effects (``effects.py``).

Driver contract:

* Apply effects **in list order**. ``PersistQuorumState`` must be durable before anything after
  it is acted on (so a vote is on disk before the VoteResponse leaves).
* ``AppendLog``/``TruncateLog`` change the log (they may stay in a page cache); ``Flush(n)`` asks
  for fsync, and the driver answers later with ``flushed(now, n)``. A crash loses what was never
  flushed; on restart build a *new* RaftNode and call ``start(now, quorum_state, recovered_log)``.
* Timers are poll-style, like ``KafkaRaftClient.poll()``: after every call ask
  :meth:`RaftNode.next_deadline` and call :meth:`RaftNode.tick` once the clock reaches it
  (early or extra calls are harmless).
* ``handle(now, src, message, reply_ctx)``: responses come back as ``Send(src, response,
  reply_ctx)``, possibly in a later call (a parked Fetch is answered when data arrives or
  ``max_wait_ms`` expires; a parked Fetch superseded by a newer one from the same replica is
  dropped unanswered).
* After a ``Fatal`` effect the node is stopped and returns no more effects.

Inputs: :meth:`~RaftNode.start`, :meth:`~RaftNode.handle`, :meth:`~RaftNode.tick`,
:meth:`~RaftNode.flushed`, :meth:`~RaftNode.append` (client command, leader only),
:meth:`~RaftNode.resign` (graceful hand-off), :meth:`~RaftNode.shutdown` (graceful shutdown, bounded
by a timer; :attr:`~RaftNode.shutdown_status` says when the node may stop). Each also takes ``mono``, the
driver's monotonic clock (ns), when ``now`` is a wall clock (``clock.source=wall``); left out, it
is ``now``. Only leader leases read it.

Leader leases (``RaftConfig.lease_reads``; :meth:`~RaftNode.lease_holds`): every successful
FetchResponse carries ``lease_token``, the leader's monotonic time when it answered, and each
follower echoes the highest token it received in its next FetchRequests. A follower that receives
a successful FetchResponse promises, on its own monotonic clock, not to vote for anyone nor to
stand for ``election_timeout_ms`` (the "minimum election timeout" rule of the Raft thesis,
§4.2.3/§6.4): it answers VoteRequests of any epoch with a refusal that changes nothing, and holds
its election timers until the promise ends; a node that (re)starts promises the same, for what it
may have promised before it crashed. The token a follower echoes was sent no later than the
follower received it, so once a majority (the leader included) has echoed tokens, no other leader
can be elected until ``election_timeout_ms`` after the majority-th highest token; the lease ends
``lease_drift_margin_ms`` before that (clock-rate drift). With the seeded bug ``lease-wall-clock``
the tokens and the lease's end are read on ``now`` (the wall clock, by default) instead: a step
back, or a slow clock, on the old leader stretches its lease past the next leader's election.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import bugs as B
from .bugs import validate_bugs
from .config import MS, RaftConfig
from .effects import (
    AppendLog,
    Committed,
    Effect,
    Event,
    Fatal,
    Flush,
    PersistQuorumState,
    Reply,
    Send,
    TruncateLog,
)
from .errors import Error
from .events import hw_event, state_event
from .leader import LeaderState
from .log import RaftLog
from .messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    Message,
    ReplicaState,
    VoteRequest,
    VoteResponse,
    is_request,
)
from .quorum_state import QuorumState, check_voters
from .records import MAX_PAYLOAD, Record, leader_change_payload
from .state import PERSISTED, Role, Startup, Trigger, check_transition, startup_state
from .timing import (
    binary_exponential_backoff,
    election_timeout,
    fetch_timeout,
    next_lazy_flush,
    strict_exponential_backoff,
)


class _Stop(Exception):
    """Raised internally after a Fatal effect to abandon the rest of the step."""


class RaftNode:
    """One member of the quorum: a voter, or an observer when ``node_id`` is not in the voter set.

    ``voters`` is the static voter set: a list of ids or a mapping ``id -> (host, port)`` (only the
    keys are used; addressing is the driver's job). ``rng`` supplies every random choice; pass a
    seeded ``random.Random`` for reproducible runs. ``bugs`` turns on seeded bugs (``bugs.py``).
    An observer (Kafka's ``process.roles=broker``) replicates the log but never votes, stands or
    leads: it fetches from the known leader, and with none known from a voter drawn at random
    (``rng``), pausing ``retry_backoff_ms`` between attempts (``pollUnattachedAsObserver``).
    """

    def __init__(
        self,
        node_id: int,
        voters: Iterable[int] | Mapping[int, Any],
        config: RaftConfig | None = None,
        rng: random.Random | None = None,
        bugs: Iterable[str] = frozenset(),
    ) -> None:
        ids = frozenset(int(v) for v in (voters.keys() if isinstance(voters, Mapping) else voters))
        if not ids:
            raise ValueError(f"node {node_id}: the voter set is empty")
        self.node_id = node_id
        self.voters = ids
        self.observer = node_id not in ids
        self.config = config or RaftConfig()
        self.bugs = validate_bugs(bugs)
        self._lazy = B.LAZY_FLUSH in self.bugs  # appends count as durable at once (the lazy-flush bug)
        self._lease_wall = B.LEASE_WALL_CLOCK in self.bugs  # the lease measured on `now` (the bug)
        self._lease = self.config.lease_reads or self._lease_wall
        self._rng = rng if rng is not None else random.Random(node_id)
        self._log = RaftLog()
        self._started = False
        self._failed: str | None = None
        self._now = 0
        self._mono = 0
        self._out: list[Effect] = []
        # election state (persisted part: epoch, leader_id, voted_for)
        self.role = Role.UNATTACHED
        self.epoch = 0
        self.leader_id: int | None = None
        self.voted_for: int | None = None
        self._last_state: tuple | None = None
        # high watermark: _hw is this node's monotonic, locally-durable view; _raw_hw is what the
        # current leader (or our LeaderState) says, reset on every role change
        self._hw = 0
        self._raw_hw: int | None = None
        # > 0 after recovery lost records inside the log: neither vote nor stand until the flushed
        # log reaches it again (persisted in the quorum state)
        self._repair_to = 0
        self._repair_epoch = 0
        self._flushed = 0
        self._flush_inflight: int | None = None
        # timers (ns); None = not armed
        self._election_at: int | None = None
        self._backoff_at: int | None = None
        self._fetch_deadline: int | None = None
        self._fetch_timeout_at: int | None = None
        self._fetch_retry_at: int | None = None
        self._bqe_at: int | None = None
        self._eqe_at: int | None = None
        self._lazy_flush_at: int | None = None
        # candidate / prospective
        self._retries = 0
        self._granted: set[int] = set()
        self._rejected: set[int] = set()
        # follower
        self._fetch_inflight = False
        self._has_fetched = False
        # leader
        self._leader: LeaderState | None = None
        self._parked: dict[int, tuple[FetchRequest, Any, int]] = {}
        self._pending: dict[int, Any] = {}
        # resigned
        self._preferred: tuple[int, ...] = ()
        self._eqe_unacked: set[int] = set()
        # leader leases: a follower's promise not to vote or stand before this monotonic time, and the
        # highest lease token of the current leader's answers it received
        self._promise_until: int | None = None
        self._lease_token: int | None = None
        # graceful shutdown: the bound (ns, on `now`) once shutdown() was called, and how it ended
        self._shutdown_at: int | None = None
        self._shutdown_end: str | None = None

    # ------------------------------------------------------------------ public inputs

    def start(
        self, now: int, persisted: QuorumState | None = None, log: Iterable[Record] = (), *, mono: int | None = None
    ) -> list[Effect]:
        """Begin (or resume after a restart) from the durable quorum state and the recovered log.

        ``log`` must be what is on disk after recovery (contiguous from offset 0); all of it counts
        as flushed. Applies the §1.3 start-up rules: a former leader restarts Resigned, a node that
        voted keeps its vote, and so on. Emits a PersistQuorumState (Kafka rewrites the file, now with
        this node's voter set) and a state event. Raises :class:`~nodes.raft.VoterSetMismatch` if
        ``persisted`` records another voter set.
        """
        if self._started:
            raise RuntimeError("start() may be called once; make a new RaftNode to restart")
        check_voters(persisted, self.voters)
        self._started = True
        records = list(log)
        return self._run(now, self._on_start, persisted, records, mono=mono)

    def handle(
        self, now: int, src: int, message: Message, reply_ctx: Any = None, *, mono: int | None = None
    ) -> list[Effect]:
        """A message from node ``src``. Responses to it are ``Send(src, response, reply_ctx)``."""
        return self._run(now, self._on_message, src, message, reply_ctx, mono=mono)

    def tick(self, now: int, *, mono: int | None = None) -> list[Effect]:
        """Fire every timer due at ``now``."""
        return self._run(now, lambda: None, mono=mono)

    def flushed(self, now: int, offset: int, *, mono: int | None = None) -> list[Effect]:
        """The driver finished a Flush: records below ``offset`` are durable."""
        return self._run(now, self._on_flushed, offset, mono=mono)

    def append(self, now: int, payload: bytes, request_id: Any, *, mono: int | None = None) -> list[Effect]:
        """Leader only: append a client command. A Reply for ``request_id`` follows (maybe later)."""
        if not isinstance(payload, bytes | bytearray):
            raise TypeError(f"payload must be bytes, got {type(payload).__name__}")
        if len(payload) > MAX_PAYLOAD:
            raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
        return self._run(now, self._on_append, bytes(payload), request_id, mono=mono)

    def resign(self, now: int, *, mono: int | None = None) -> list[Effect]:
        """Graceful hand-off: a leader becomes Resigned and sends EndQuorumEpoch naming its
        preferred successors (other voters by replicated offset). No-op for non-leaders."""
        return self._run(now, self._on_resign, mono=mono)

    def shutdown(self, now: int, timeout_ms: int, *, mono: int | None = None) -> list[Effect]:
        """Begin a graceful shutdown, bounded by ``timeout_ms`` (KafkaRaftClient's ``shutdown``).

        A leader resigns at once (EndQuorumEpoch naming its successors) and stays Resigned; a
        candidate keeps its election going and resigns if it wins; no role stands for election any
        more. The shutdown completes when this node knows another leader (a follower at once), or
        when it is the only voter, or fails when the bound passes; :attr:`shutdown_status` then
        says ``completed`` or ``timed-out`` and the node takes no more inputs. The bound is a
        timer of :meth:`next_deadline`. A second call changes nothing.
        """
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise ValueError(f"timeout_ms must be an int >= 0, got {timeout_ms!r}")
        return self._run(now, self._on_shutdown, timeout_ms, mono=mono)

    @property
    def shutdown_status(self) -> str | None:
        """None before :meth:`shutdown`; ``running`` while it lasts; then ``completed`` (another
        leader is known, or this node is the only voter) or ``timed-out``: the node may stop."""
        if self._shutdown_at is None:
            return None
        return self._shutdown_end or "running"

    def lease_holds(self, now: int, *, mono: int | None = None) -> bool:
        """May this leader answer a read from its state now, without a log round trip? True while its lease
        lasts, once it has committed an entry of its own epoch (so its state holds every acknowledged write)."""
        leader = self._leader
        if not self._lease or self._failed is not None or self.role is not Role.LEADER or leader is None:
            return False
        hw = leader.high_watermark
        if hw is None or hw <= leader.epoch_start_offset or self._hw < hw:
            return False
        if len(leader.voters) == 1:
            return True
        start = leader.lease_start()
        if start is None:
            return False
        clock = now if self._lease_wall or mono is None else mono
        return clock < start + self.config.lease_ns

    def next_deadline(self) -> int | None:
        """Earliest time (ns) at which :meth:`tick` has work, or None."""
        if self._failed is not None or not self._started or self._shutdown_end is not None:
            return None
        role = self.role
        if role is Role.FOLLOWER:  # the common case, without building a tuple (this runs after every step)
            best = self._lazy_flush_at
            for t in (self._fetch_deadline, self._fetch_timeout_at if self._fetch_inflight else self._fetch_retry_at):
                if t is not None and (best is None or t < best):
                    best = t
            return best if self._shutdown_at is None else min(self._shutdown_at, best or self._shutdown_at)
        times: tuple[int | None, ...]
        if role is Role.LEADER and self._leader is not None:
            times = (self._leader.check_quorum_deadline(self.config), self._bqe_at)
            if self._parked:
                times += tuple(deadline for _, _, deadline in self._parked.values())
        elif self.observer and role is Role.UNATTACHED:
            times = (self._fetch_timeout_at if self._fetch_inflight else self._fetch_retry_at,)
        elif role in (Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE):
            times = (self._election_at,)
        elif role is Role.CANDIDATE:
            times = (self._election_at, self._backoff_at)
        elif role is Role.RESIGNED:
            times = (self._election_at, self._eqe_at)
        else:
            times = ()
        best = self._lazy_flush_at
        for t in times + (self._shutdown_at,):
            if t is not None and (best is None or t < best):
                best = t
        return best

    # ------------------------------------------------------------------ read-only views

    @property
    def high_watermark(self) -> int:
        """This node's committed prefix length (monotonic; 0 right after a restart)."""
        return self._hw

    @property
    def log_end_offset(self) -> int:
        return self._log.end_offset

    @property
    def last_log_epoch(self) -> int:
        return self._log.last_epoch

    @property
    def flushed_offset(self) -> int:
        return min(self._flushed, self._log.end_offset)

    @property
    def failed(self) -> str | None:
        """The Fatal reason once the node has stopped, else None."""
        return self._failed

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def log_records(self, start: int = 0, end: int | None = None) -> tuple[Record, ...]:
        return self._log.records(start, end)

    def status(self) -> dict[str, Any]:
        """A JSON-able snapshot for admin endpoints and debugging."""
        return {
            "node": self.node_id,
            "role": self.role.value,
            "epoch": self.epoch,
            "leader": self.leader_id,
            "voted_for": self.voted_for,
            "high_watermark": self._hw,
            "log_end_offset": self._log.end_offset,
            "flushed_offset": self.flushed_offset,
            "failed": self._failed,
            "shutdown": self.shutdown_status,
        }

    # ------------------------------------------------------------------ step plumbing

    def _run(self, now: int, fn: Callable[..., None], *args: Any, mono: int | None = None) -> list[Effect]:
        if self._failed is not None or self._shutdown_end is not None:
            return []
        if not self._started:
            raise RuntimeError("call start() before any other input")
        self._now = now
        self._mono = now if mono is None else mono
        out: list[Effect] = []
        self._out = out
        try:
            fn(*args)
            self._poll_timers()
            if self._shutdown_at is not None:
                self._check_shutdown()
        except _Stop:
            pass
        finally:
            self._out = []
        return out

    def _emit(self, effect: Effect) -> None:
        self._out.append(effect)

    def _send(self, dst: int, message: Message, reply_ctx: Any = None) -> None:
        self._out.append(Send(dst, message, reply_ctx))

    def _fatal(self, reason: str) -> None:
        self._failed = reason
        self._out.append(Fatal(reason))
        raise _Stop

    def _others(self) -> list[int]:
        return sorted(v for v in self.voters if v != self.node_id)

    def _is_majority(self, ids: set[int]) -> bool:
        return len(ids & self.voters) > len(self.voters) // 2

    def _cannot_win(self) -> bool:
        """Enough rejections that the granted set can no longer reach a majority."""
        return len(self.voters) - len(self._rejected & self.voters) <= len(self.voters) // 2

    def _timeout(self) -> int:
        return self._now + election_timeout(self.config, self._rng)

    def _lease_clock(self) -> int:
        """The clock lease tokens are read on: monotonic, or `now` with the lease-wall-clock bug."""
        return self._now if self._lease_wall else self._mono

    def _promise(self) -> None:
        """Leader leases: promise not to vote or stand for a minimum election timeout from now (monotonic)."""
        until = self._mono + self.config.election_timeout_ms * MS
        if self._promise_until is None or until > self._promise_until:
            self._promise_until = until

    def _promise_left(self) -> int:
        """Nanoseconds (monotonic) until this node's lease promise ends; 0 when it holds none."""
        if not self._lease or self._promise_until is None:
            return 0
        return max(0, self._promise_until - self._mono)

    def _durable_end(self) -> int:
        """End offset this node may acknowledge: flushed, or everything with ``lazy-flush``."""
        leo = self._log.end_offset
        return leo if self._lazy else min(self._flushed, leo)

    # ------------------------------------------------------------------ state changes

    def _persist(self, epoch: int, leader: int | None, voted: int | None) -> None:
        if B.FORGET_VOTE in self.bugs:
            voted = None  # the bug: the vote lives only in memory
        state = QuorumState(epoch, leader, voted, self._repair_to, self._repair_epoch, tuple(sorted(self.voters)))
        self._emit(PersistQuorumState(state))

    def _display_role(self) -> Role:
        # a prospective is reported as the role it will fall back to: nothing durable changed
        return self._fallback_role() if self.role is Role.PROSPECTIVE else self.role

    def _fallback_role(self) -> Role:
        if self.leader_id == self.node_id:
            return Role.RESIGNED
        if self.leader_id is not None:
            return Role.FOLLOWER
        if self.voted_for is not None:
            return Role.VOTED
        return Role.UNATTACHED

    def _emit_state(self, force: bool = False) -> None:
        key = (self.epoch, self._display_role(), self.leader_id, self.voted_for)
        if force or key != self._last_state:
            self._last_state = key
            self._emit(
                Event(state_event(self.node_id, self._now, self.epoch, key[1].value, self.leader_id, self.voted_for))
            )

    def _switch(self, trigger: Trigger, role: Role, epoch: int, leader: int | None, voted: int | None) -> None:
        """Table-checked role change: persist first, then change memory, then report."""
        check_transition(self.role, trigger, role, self.config.pre_vote)
        if PERSISTED[role]:
            self._persist(epoch, leader, voted)
        was_leader = self.role is Role.LEADER
        parked = list(self._parked.items()) if was_leader else []
        pending = sorted(self._pending.items()) if was_leader else []
        self._election_at = self._backoff_at = None
        self._fetch_deadline = self._fetch_timeout_at = self._fetch_retry_at = None
        self._fetch_inflight = False
        self._bqe_at = self._eqe_at = None
        self._leader = None
        self._parked = {}
        self._pending = {}
        self._eqe_unacked = set()
        self._raw_hw = None
        self._lease_token = None
        self.role, self.epoch, self.leader_id, self.voted_for = role, epoch, leader, voted
        self._emit_state()
        hint = leader if leader != self.node_id else None
        for _, request_id in pending:
            # appended but not committed: it may still commit under the next leader
            self._emit(Reply(request_id, Error.REQUEST_TIMED_OUT, None, hint))
        for replica, (_, ctx, _) in parked:
            self._send(replica, self._fetch_error(Error.NOT_LEADER_OR_FOLLOWER), ctx)

    def _to_unattached(self, trigger: Trigger, epoch: int) -> None:
        keep = self.role in (Role.UNATTACHED, Role.VOTED, Role.CANDIDATE, Role.PROSPECTIVE)
        remaining = self._election_at if keep else None
        self._switch(trigger, Role.UNATTACHED, epoch, None, None)
        self._retries = 0
        if self.observer:
            self._fetch_any_voter()
            return
        self._election_at = remaining if remaining is not None else self._timeout()

    def _to_voted(self, trigger: Trigger, candidate: int) -> None:
        self._switch(trigger, Role.VOTED, self.epoch, None, candidate)
        self._retries = 0
        self._election_at = self._timeout()  # granting a vote resets the election timer

    def _to_follower(self, trigger: Trigger, epoch: int, leader: int) -> None:
        voted = self.voted_for if epoch == self.epoch else None
        self._switch(trigger, Role.FOLLOWER, epoch, leader, voted)
        self._retries = 0
        self._has_fetched = False
        self._fetch_deadline = self._now + fetch_timeout(self.config, self._rng)
        self._maybe_fetch()

    def _to_candidate(self, trigger: Trigger) -> None:
        self._switch(trigger, Role.CANDIDATE, self.epoch + 1, None, self.node_id)
        self._retries += 1
        self._start_vote_round()

    def _start_vote_round(self) -> None:
        self._granted, self._rejected = {self.node_id}, set()
        self._backoff_at = None
        self._election_at = self._timeout()
        if self._repair_to:
            return  # restarted as a candidate with records lost: ask for no votes until repaired
        if self._is_majority(self._granted):
            self._to_leader()
            return
        request = VoteRequest(
            self.epoch, self.node_id, self._log.last_epoch, self._log.end_offset, cluster_id=self.config.cluster_id
        )
        for voter in self._others():
            self._send(voter, request)

    def _to_prospective(self, trigger: Trigger) -> None:
        self._switch(trigger, Role.PROSPECTIVE, self.epoch, self.leader_id, self.voted_for)
        self._granted, self._rejected = {self.node_id}, set()
        self._election_at = self._timeout()
        if self._is_majority(self._granted):
            self._to_candidate(Trigger.PREVOTE_WON)
            return
        request = VoteRequest(
            self.epoch,
            self.node_id,
            self._log.last_epoch,
            self._log.end_offset,
            pre_vote=True,
            cluster_id=self.config.cluster_id,
        )
        for voter in self._others():
            self._send(voter, request)

    def _stand(self, trigger: Trigger) -> None:
        """Start an election: through pre-vote when enabled; not while repairing a damaged log; with leader
        leases, not before this node's promise ends (its timer is set again for then, on the timer clock).
        Never while shutting down: the timer that fired is disarmed and the node waits. An observer
        never stands: it forgets the leader it lost and looks for one among the voters."""
        if self.observer:
            self._to_unattached(Trigger.OBSERVER_FETCH_TIMEOUT, self.epoch)
            return
        if self._shutdown_at is not None:
            if self.role is Role.FOLLOWER:
                self._fetch_deadline = None
            elif self.role is Role.CANDIDATE:
                self._backoff_at = None
            else:
                self._election_at = None
            return
        if self._repair_to:
            if self.role is Role.FOLLOWER:
                self._fetch_deadline = self._now + fetch_timeout(self.config, self._rng)
            elif self.role is Role.CANDIDATE:
                self._backoff_at = self._now + binary_exponential_backoff(self.config, self._rng, self._retries)
            else:
                self._election_at = self._timeout()
            return
        wait = self._promise_left()
        if wait:
            if self.role is Role.FOLLOWER:
                self._fetch_deadline = self._now + wait
            elif self.role is Role.CANDIDATE:
                self._backoff_at = self._now + wait
            else:
                self._election_at = self._now + wait
            return
        if self.config.pre_vote:
            self._to_prospective(trigger)
        else:
            self._to_candidate(trigger)

    def _prevote_lost(self) -> None:
        target = self._fallback_role()
        if target is Role.FOLLOWER:
            assert self.leader_id is not None
            self._to_follower(Trigger.PREVOTE_LOST, self.epoch, self.leader_id)
            return
        self._switch(Trigger.PREVOTE_LOST, target, self.epoch, self.leader_id, self.voted_for)
        self._election_at = self._timeout()

    def _to_leader(self) -> None:
        self._switch(Trigger.ELECTION_WON, Role.LEADER, self.epoch, self.node_id, self.voted_for)
        self._retries = 0
        self._begin_leadership()
        if self._shutdown_at is not None and self._leader is not None:
            self._to_resigned(Trigger.RESIGN, self._leader.preferred_successors())  # won while shutting down

    def _begin_leadership(self) -> None:
        start = self._log.end_offset
        self._leader = LeaderState(
            self.epoch,
            self.node_id,
            self.voters,
            start,
            self._now,
            require_current_epoch=B.COMMIT_OLD_EPOCH not in self.bugs,
        )
        self._leader.update_local(self._durable_end())
        payload = leader_change_payload(self.node_id, self.epoch, self.voters)
        self._append_local(Record(start, self.epoch, payload, control=True))
        self._send_begin_quorum_epoch()

    def _to_resigned(self, trigger: Trigger, preferred: tuple[int, ...]) -> None:
        self._switch(trigger, Role.RESIGNED, self.epoch, self.node_id, self.voted_for)
        self._enter_resigned(preferred)

    def _enter_resigned(self, preferred: tuple[int, ...]) -> None:
        self._preferred = preferred
        self._eqe_unacked = set(self._others())
        self._send_end_quorum_epoch()
        self._election_at = self._timeout()

    # ------------------------------------------------------------------ start-up

    def _on_start(self, persisted: QuorumState | None, records: list[Record]) -> None:
        alone = self.voters == {self.node_id}
        if self._lease and not alone:
            self._promise()  # what it promised before a crash is forgotten: keep the longest promise anew
        self._log = RaftLog(records)
        self._flushed = self._log.end_offset
        repair_to = persisted.repair_to if persisted is not None else 0
        if repair_to > self._log.end_offset and not alone:  # a lone voter has no copy to repair from; an observer does
            self._repair_to = repair_to
            self._repair_epoch = persisted.repair_epoch if persisted is not None else 0
        if self._lazy:
            self._lazy_flush_at = next_lazy_flush(self._now, self.config.lazy_flush_interval_ms * MS)
        s = startup_state(persisted, self._log.last_epoch, self.node_id, self.voters)
        if self.observer and s.role is not Role.FOLLOWER:
            s = Startup(Role.UNATTACHED, s.epoch, None, None, "observer")  # it never votes or leads
        self.epoch, self.leader_id, self.voted_for = s.epoch, s.leader_id, s.voted_for
        if s.role is Role.RESIGNED and B.RESTART_AS_LEADER in self.bugs:
            # the bug (KAFKA-10527): resume leading the old epoch after a restart
            self.role = Role.LEADER
            self._persist(self.epoch, self.node_id, self.voted_for)
            self._emit_state(force=True)
            self._begin_leadership()
            return
        self.role = s.role
        persisted_leader = s.leader_id
        self._persist(self.epoch, persisted_leader, self.voted_for)
        self._emit_state(force=True)
        if s.role is Role.CANDIDATE:
            self._retries = 1
            if self._promise_left():
                self._backoff_at = self._now + self._promise_left()
            else:
                self._start_vote_round()
        elif s.role is Role.FOLLOWER:
            self._has_fetched = False
            self._fetch_deadline = self._now + fetch_timeout(self.config, self._rng)
            self._maybe_fetch()
        elif alone:
            self._to_candidate(Trigger.ONLY_VOTER)  # Kafka's isOnlyVoter: no election timeout to wait for
        elif s.role is Role.RESIGNED:
            self._enter_resigned(())
        elif self.observer:
            self._fetch_any_voter()
        else:
            self._election_at = self._timeout()

    # ------------------------------------------------------------------ timers

    def _due(self, t: int | None) -> bool:
        return t is not None and self._now >= t

    def _poll_timers(self) -> None:
        if self._lazy and self._due(self._lazy_flush_at):
            self._lazy_flush_at = next_lazy_flush(self._now, self.config.lazy_flush_interval_ms * MS)
            if self._flush_inflight is None and self._flushed < self._log.end_offset:
                self._flush_inflight = self._log.end_offset
                self._emit(Flush(self._log.end_offset))
        for _ in range(64):
            if not self._fire_one_timer():
                return

    def _fire_one_timer(self) -> bool:
        role = self.role
        now = self._now
        # each `t is not None and now >= t` below is `self._due(t)`, inlined: this runs after every input
        if role is Role.FOLLOWER:
            t = self._fetch_deadline
            if t is not None and now >= t:
                self._stand(Trigger.FETCH_TIMEOUT)
                return True
            if self._fetch_inflight:
                t = self._fetch_timeout_at
                if t is not None and now >= t:
                    self._fetch_inflight = False  # the request or its response was lost: send again
                    self._fetch_timeout_at = None
                    self._maybe_fetch()
                    return True
            else:
                t = self._fetch_retry_at
                if t is not None and now >= t:
                    self._fetch_retry_at = None
                    self._maybe_fetch()
                    return True
            return False
        if role is Role.LEADER:
            if self._leader is None:
                return False
            t = self._leader.check_quorum_deadline(self.config)
            if t is not None and now >= t:
                self._to_resigned(Trigger.CHECK_QUORUM_FAILED, ())
                return True
            t = self._bqe_at
            if t is not None and now >= t:
                self._send_begin_quorum_epoch()
                return True
            if not self._parked:
                return False
            expired = [r for r, (_, _, deadline) in self._parked.items() if now >= deadline]
            for replica in expired:
                request, ctx, _ = self._parked.pop(replica)
                self._send(replica, self._fetch_answer(request), ctx)
            return bool(expired)
        if self.observer and role is Role.UNATTACHED:
            return self._observer_timers()
        if role in (Role.UNATTACHED, Role.VOTED, Role.RESIGNED) and self._due(self._election_at):
            self._stand(Trigger.ELECTION_TIMEOUT)
            return True
        if role is Role.PROSPECTIVE and self._due(self._election_at):
            self._prevote_lost()
            return True
        if role is Role.CANDIDATE:
            if self._due(self._election_at):
                self._start_backoff()
                return True
            if self._due(self._backoff_at):
                self._backoff_at = None
                self._stand(Trigger.BACKOFF_EXPIRED)
                return True
        if role is Role.RESIGNED and self._due(self._eqe_at):
            self._send_end_quorum_epoch()
            return True
        return False

    def _observer_timers(self) -> bool:
        """An unattached observer: a lost Fetch is retried at once, a backoff ends with a new attempt."""
        if self._fetch_inflight:
            if not self._due(self._fetch_timeout_at):
                return False
            self._fetch_inflight = False
            self._fetch_timeout_at = None
        elif not self._due(self._fetch_retry_at):
            return False
        self._fetch_retry_at = None
        self._fetch_any_voter()
        return True

    def _fetch_any_voter(self) -> None:
        """An observer with no known leader asks a voter drawn at random; any answer names the epoch and
        leader it knows (``_observe``), else the observer backs off and draws again."""
        if self.role is not Role.UNATTACHED or self._fetch_inflight:
            return
        if self._fetch_retry_at is not None and self._now < self._fetch_retry_at:
            return
        self._fetch_retry_at = None
        voter = self._rng.choice(sorted(self.voters))
        request = FetchRequest(self.epoch, self.node_id, self._log.end_offset, self._log.last_epoch, 0)
        self._send(voter, request)
        self._fetch_inflight = True
        self._fetch_timeout_at = self._now + self.config.request_timeout_ms * MS

    def _start_backoff(self) -> None:
        """A candidate that timed out or lost waits a random, growing delay before standing again; while
        shutting down it keeps this election going instead (asks again those that have not answered)."""
        self._election_at = None
        if self._shutdown_at is not None:
            self._backoff_at = None
            if not self._cannot_win() and not self._repair_to:
                request = VoteRequest(self.epoch, self.node_id, self._log.last_epoch, self._log.end_offset)
                for voter in self._others():
                    if voter not in self._granted and voter not in self._rejected:
                        self._send(voter, request)
                self._election_at = self._now + self.config.request_timeout_ms * MS
            return
        if self._backoff_at is None:
            self._backoff_at = self._now + binary_exponential_backoff(self.config, self._rng, self._retries)

    def _send_begin_quorum_epoch(self) -> None:
        request = BeginQuorumEpochRequest(self.epoch, self.node_id, self.config.cluster_id)
        for voter in self._others():
            self._send(voter, request)
        self._bqe_at = self._now + self.config.fetch_timeout_ms * MS // 2

    def _send_end_quorum_epoch(self) -> None:
        request = EndQuorumEpochRequest(self.epoch, self.node_id, self._preferred, self.config.cluster_id)
        for voter in sorted(self._eqe_unacked):
            self._send(voter, request)
        self._eqe_at = self._now + self.config.request_timeout_ms * MS if self._eqe_unacked else None

    # ------------------------------------------------------------------ messages

    def _on_message(self, src: int, message: Message, ctx: Any) -> None:
        handler = self._HANDLERS.get(type(message))
        if handler is None:
            raise TypeError(f"not a quorum message: {type(message).__name__}")
        if is_request(message):
            cluster = message.cluster_id  # type: ignore[union-attr]
            if cluster is not None and cluster != self.config.cluster_id:
                self._send(src, self._foreign_cluster_answer(message), ctx)
                return
        elif message.error is Error.INCONSISTENT_CLUSTER_ID:  # type: ignore[union-attr]
            return  # the peer belongs to another cluster: its epoch and leader mean nothing here
        handler(self, src, message, ctx)

    def _foreign_cluster_answer(self, m: Message) -> Message:
        """INCONSISTENT_CLUSTER_ID to a request of another cluster, which changes nothing here."""
        error = Error.INCONSISTENT_CLUSTER_ID
        if isinstance(m, VoteRequest):
            return VoteResponse(error, self.epoch, self.leader_id, False, m.pre_vote)
        if isinstance(m, BeginQuorumEpochRequest):
            return BeginQuorumEpochResponse(error, self.epoch, self.leader_id)
        if isinstance(m, EndQuorumEpochRequest):
            return EndQuorumEpochResponse(error, self.epoch, self.leader_id)
        if isinstance(m, FetchRequest):
            return FetchResponse(error, self.epoch, self.leader_id, None)
        return DescribeQuorumResponse(error, self.epoch, self.leader_id, None)

    def _observe(self, epoch: int, leader: int | None) -> None:
        """Common epoch/leader handling for responses and the leader-sent requests (§1.4 rows 1-4)."""
        if leader is not None and leader not in self.voters:
            leader = None
        if epoch > self.epoch:
            if leader is not None and leader != self.node_id:
                self._to_follower(Trigger.HIGHER_EPOCH_WITH_LEADER, epoch, leader)
            else:
                self._to_unattached(Trigger.HIGHER_EPOCH, epoch)
            return
        if epoch != self.epoch or leader is None or leader == self.node_id:
            return
        if self.leader_id is None:
            self._to_follower(Trigger.LEADER_DISCOVERED, epoch, leader)
        elif leader != self.leader_id:
            self._fatal(f"two leaders in epoch {epoch}: n{self.leader_id} and n{leader}")

    # -- Vote

    def _on_vote_request(self, src: int, m: VoteRequest, ctx: Any) -> None:
        def answer(error: Error, granted: bool) -> None:
            self._send(src, VoteResponse(error, self.epoch, self.leader_id, granted, m.pre_vote), ctx)

        if m.epoch < self.epoch:
            answer(Error.FENCED_LEADER_EPOCH, False)
            return
        bad_epoch = m.last_epoch > m.epoch if m.pre_vote else m.last_epoch >= m.epoch
        if m.candidate_id not in self.voters or m.last_offset < 0 or m.last_epoch < 0 or bad_epoch:
            answer(Error.INVALID_REQUEST, False)
            return
        if not m.pre_vote and m.candidate_id != self.node_id and self._promise_left():
            answer(Error.NONE, False)  # leader leases: promised not to vote yet; the epoch stays as it is
            return
        if m.epoch > self.epoch:
            self._to_unattached(Trigger.HIGHER_EPOCH, m.epoch)
        if m.candidate_id == self.node_id or self.observer:
            answer(Error.NONE, False)  # an observer adopts the epoch but never grants (pre-)votes
            return
        if m.pre_vote:
            answer(Error.NONE, self._may_grant_pre_vote(m))
            return
        granted = self._may_grant_vote(m)
        if granted:
            if self.voted_for != m.candidate_id:
                self._to_voted(Trigger.VOTE_GRANTED, m.candidate_id)  # persisted before the answer
            else:
                self._election_at = self._timeout()
        answer(Error.NONE, granted)

    def _log_is_up_to_date(self, m: VoteRequest) -> bool:
        if B.VOTE_IGNORES_LOG in self.bugs:
            return True
        if self._repair_to:
            # our log lost records we may have acknowledged: judge by the position it had reached
            mine = max((self._log.last_epoch, self._log.end_offset), (self._repair_epoch, self._repair_to))
            return (m.last_epoch, m.last_offset) >= mine
        return (m.last_epoch, m.last_offset) >= (self._log.last_epoch, self._log.end_offset)

    def _may_grant_vote(self, m: VoteRequest) -> bool:
        if self.role not in (Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE):
            return False  # leader, candidate (voted for itself), follower, resigned
        if self.voted_for is not None:
            return self.voted_for == m.candidate_id  # at most one vote per epoch
        if self.leader_id is not None:
            return False
        return self._log_is_up_to_date(m)

    def _may_grant_pre_vote(self, m: VoteRequest) -> bool:
        if self.role in (Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE):
            return self._log_is_up_to_date(m)
        if self.role is Role.FOLLOWER:
            return not self._has_fetched and self._log_is_up_to_date(m)
        return False

    def _on_vote_response(self, src: int, m: VoteResponse, ctx: Any) -> None:
        self._observe(m.epoch, m.leader_id)
        if m.epoch != self.epoch or m.error is not Error.NONE or src not in self.voters:
            return
        if m.pre_vote and self.role is Role.PROSPECTIVE:
            (self._granted if m.vote_granted else self._rejected).add(src)
            if self._is_majority(self._granted):
                self._to_candidate(Trigger.PREVOTE_WON)
            elif self._cannot_win():
                self._prevote_lost()
        elif not m.pre_vote and self.role is Role.CANDIDATE:
            (self._granted if m.vote_granted else self._rejected).add(src)
            if self._is_majority(self._granted):
                self._to_leader()
            elif self._cannot_win():
                self._start_backoff()

    # -- BeginQuorumEpoch / EndQuorumEpoch

    def _on_begin_quorum_epoch(self, src: int, m: BeginQuorumEpochRequest, ctx: Any) -> None:
        if m.epoch >= self.epoch:
            self._observe(m.epoch, m.leader_id)
            if self.role is Role.PROSPECTIVE and self.leader_id == m.leader_id == src:
                # the leader we timed out on is alive after all (only its own heartbeat proves it)
                self._to_follower(Trigger.LEADER_DISCOVERED, m.epoch, m.leader_id)
        error = Error.FENCED_LEADER_EPOCH if m.epoch < self.epoch else Error.NONE
        self._send(src, BeginQuorumEpochResponse(error, self.epoch, self.leader_id), ctx)

    def _on_begin_quorum_epoch_response(self, src: int, m: BeginQuorumEpochResponse, ctx: Any) -> None:
        self._observe(m.epoch, m.leader_id)

    def _on_end_quorum_epoch(self, src: int, m: EndQuorumEpochRequest, ctx: Any) -> None:
        if m.epoch < self.epoch:
            self._send(src, EndQuorumEpochResponse(Error.FENCED_LEADER_EPOCH, self.epoch, self.leader_id), ctx)
            return
        self._observe(m.epoch, m.leader_id)
        if self.role is Role.FOLLOWER and self.leader_id == m.leader_id and m.epoch == self.epoch:
            delay = strict_exponential_backoff(self.config, self.node_id, m.preferred_successors)
            self._fetch_deadline = min(self._fetch_deadline or self._now + delay, self._now + delay)
        self._send(src, EndQuorumEpochResponse(Error.NONE, self.epoch, self.leader_id), ctx)

    def _on_end_quorum_epoch_response(self, src: int, m: EndQuorumEpochResponse, ctx: Any) -> None:
        self._observe(m.epoch, m.leader_id)
        if self.role is Role.RESIGNED and m.epoch == self.epoch and m.error is Error.NONE:
            self._eqe_unacked.discard(src)
            if not self._eqe_unacked:
                self._eqe_at = None

    # -- Fetch (leader side)

    def _fetch_error(self, error: Error) -> FetchResponse:
        hw = self._leader.high_watermark if self._leader is not None else None
        return FetchResponse(error, self.epoch, self.leader_id, hw)

    def _fetch_answer(self, m: FetchRequest) -> FetchResponse:
        assert self._leader is not None
        records = self._log.slice(m.fetch_offset, self.config.fetch_max_records)
        hw = self._leader.high_watermark
        return FetchResponse(Error.NONE, self.epoch, self.node_id, hw, records, lease_token=self._token())

    def _token(self) -> int | None:
        return self._lease_clock() if self._lease else None

    def _on_fetch_request(self, src: int, m: FetchRequest, ctx: Any) -> None:
        if m.epoch < self.epoch:
            error = Error.FENCED_LEADER_EPOCH
        elif m.epoch > self.epoch:
            error = Error.UNKNOWN_LEADER_EPOCH
        elif self.role is not Role.LEADER or self._leader is None:
            error = Error.NOT_LEADER_OR_FOLLOWER
        elif m.fetch_offset < 0 or m.last_fetched_epoch < 0 or m.max_wait_ms < 0:
            error = Error.INVALID_REQUEST
        else:
            error = Error.NONE
        if error is not Error.NONE:
            self._send(src, self._fetch_error(error), ctx)
            return
        leader = self._leader
        replica = m.replica_id
        leader.record_fetch(replica, self._now)
        if self._lease and m.lease_token is not None:
            leader.record_lease(replica, m.lease_token)
        self._parked.pop(replica, None)  # a newer fetch supersedes a parked one (dropped unanswered)
        epoch, end = self._log.end_offset_for_epoch(m.last_fetched_epoch)
        if epoch != m.last_fetched_epoch or end < m.fetch_offset:
            self._send(
                src,
                FetchResponse(
                    Error.NONE, self.epoch, self.node_id, leader.high_watermark, (), epoch, end, self._token()
                ),
                ctx,
            )
            return
        rose = leader.update_replica(replica, m.fetch_offset, self._now)
        if rose:
            self._leader_hw_rose()
        answer = self._fetch_answer(m)
        if answer.records or m.max_wait_ms == 0 or rose:
            self._send(src, answer, ctx)
        else:
            self._parked[replica] = (m, ctx, self._now + m.max_wait_ms * MS)

    def _complete_parked(self) -> None:
        parked, self._parked = self._parked, {}
        for replica, (request, ctx, _) in sorted(parked.items()):
            self._send(replica, self._fetch_answer(request), ctx)

    def _leader_hw_rose(self) -> None:
        self._refresh_hw()
        self._complete_parked()  # followers learn the new high watermark promptly

    # -- Fetch (follower side)

    def _maybe_fetch(self) -> None:
        if self.role is not Role.FOLLOWER or self._fetch_inflight or self.leader_id is None:
            return
        if self._fetch_retry_at is not None and self._now < self._fetch_retry_at:
            return
        self._fetch_retry_at = None
        if self._durable_end() < self._log.end_offset:
            self._request_flush()  # voters flush before their next Fetch; flushed() resumes
            return
        request = FetchRequest(
            self.epoch,
            self.node_id,
            self._log.end_offset,
            self._log.last_epoch,
            self.config.fetch_max_wait_ms,
            self._lease_token,
            self.config.cluster_id,
        )
        self._send(self.leader_id, request)
        self._fetch_inflight = True
        self._fetch_timeout_at = self._now + self.config.request_timeout_ms * MS

    def _on_fetch_response(self, src: int, m: FetchResponse, ctx: Any) -> None:
        searching = self.observer and self.role is Role.UNATTACHED and self._fetch_inflight
        epoch = self.epoch
        self._observe(m.epoch, m.leader_id)
        if searching:
            if self.role is Role.UNATTACHED and self.epoch == epoch:
                # the voter knows no leader either: back off, then draw a voter again
                self._fetch_inflight = False
                self._fetch_timeout_at = None
                self._fetch_retry_at = self._now + self.config.retry_backoff_ms * MS
            return  # else _observe found a leader (or a new epoch) and already fetches anew
        if self.role is not Role.FOLLOWER or m.epoch != self.epoch or src != self.leader_id:
            return
        self._fetch_inflight = False
        self._fetch_timeout_at = None
        if m.error is not Error.NONE:
            self._fetch_retry_at = self._now + self.config.retry_backoff_ms * MS
            return
        self._fetch_deadline = self._now + fetch_timeout(self.config, self._rng)
        self._has_fetched = True
        if self._lease:
            self._promise()
            if m.lease_token is not None:
                self._lease_token = max(
                    m.lease_token, self._lease_token if self._lease_token is not None else m.lease_token
                )
        if m.diverging_epoch is not None and m.diverging_end_offset is not None:
            self._truncate_divergent(m.diverging_epoch, m.diverging_end_offset)
        elif m.records:
            self._append_fetched(m.records, m.epoch)
        if m.high_watermark is not None:
            self._raw_hw = m.high_watermark if self._raw_hw is None else max(self._raw_hw, m.high_watermark)
            self._refresh_hw()
        self._maybe_fetch()

    def _truncate_divergent(self, diverging_epoch: int, diverging_end: int) -> None:
        _, local_end = self._log.end_offset_for_epoch(diverging_epoch)
        target = min(local_end, diverging_end)
        if target >= self._log.end_offset:
            return
        if target < self._hw:
            self._fatal(f"asked to truncate to {target}, below the high watermark {self._hw} (KAFKA-12460)")
        self._truncate(target)

    def _truncate(self, offset: int) -> None:
        self._log.truncate(offset)
        self._flushed = min(self._flushed, offset)
        if self._flush_inflight is not None:
            self._flush_inflight = min(self._flush_inflight, offset)  # that flush can't cover new data
        self._emit(TruncateLog(offset))

    def _append_fetched(self, records: tuple[Record, ...], epoch: int) -> None:
        accepted: list[Record] = []
        expected, last_epoch = self._log.end_offset, self._log.last_epoch
        for record in records:
            if record.offset != expected or record.epoch < last_epoch or record.epoch > epoch:
                break  # stale or malformed chunk: keep the valid prefix, refetch the rest
            accepted.append(record)
            expected, last_epoch = expected + 1, record.epoch
        if not accepted:
            return
        for record in accepted:
            self._log.append(record)
        self._emit(AppendLog(tuple(accepted)))
        self._request_flush()

    # -- DescribeQuorum

    def _on_describe_quorum(self, src: int, m: DescribeQuorumRequest, ctx: Any) -> None:
        leader = self._leader
        if self.role is not Role.LEADER or leader is None:
            self._send(src, DescribeQuorumResponse(Error.NOT_LEADER_OR_FOLLOWER, self.epoch, self.leader_id, None), ctx)
            return
        voters = tuple(
            ReplicaState(
                v,
                self._log.end_offset if v == self.node_id else leader.end_offsets[v],
                self._now if v == self.node_id else leader.last_fetch.get(v),
            )
            for v in leader.voters
        )
        observers = tuple(ReplicaState(o, end, at) for o, (end, at) in sorted(leader.observers.items()))
        answer = DescribeQuorumResponse(Error.NONE, self.epoch, self.node_id, leader.high_watermark, voters, observers)
        self._send(src, answer, ctx)

    def _on_ignored(self, src: int, m: Message, ctx: Any) -> None:
        """Nodes never ask DescribeQuorum of each other; a stray response changes nothing."""

    _HANDLERS: dict[type, Callable[..., None]] = {
        VoteRequest: _on_vote_request,
        VoteResponse: _on_vote_response,
        BeginQuorumEpochRequest: _on_begin_quorum_epoch,
        BeginQuorumEpochResponse: _on_begin_quorum_epoch_response,
        EndQuorumEpochRequest: _on_end_quorum_epoch,
        EndQuorumEpochResponse: _on_end_quorum_epoch_response,
        FetchRequest: _on_fetch_request,
        FetchResponse: _on_fetch_response,
        DescribeQuorumRequest: _on_describe_quorum,
        DescribeQuorumResponse: _on_ignored,
    }

    # ------------------------------------------------------------------ appends, flushes, HW

    def _request_flush(self) -> None:
        if self._lazy or self._flush_inflight is not None:
            return  # lazy: flushed on a timer; else flushed() will ask again for the rest
        leo = self._log.end_offset
        if self._flushed < leo:
            self._flush_inflight = leo
            self._emit(Flush(leo))

    def _append_local(self, record: Record) -> None:
        """Leader append: write, flush, and let parked fetches see the new record."""
        self._log.append(record)
        self._emit(AppendLog((record,)))
        if self._lazy and self._leader is not None and self._leader.update_local(self._log.end_offset):
            self._refresh_hw()
        self._request_flush()
        self._complete_parked()

    def _on_append(self, payload: bytes, request_id: Any) -> None:
        if self.role is not Role.LEADER:
            hint = self.leader_id if self.leader_id != self.node_id else None
            self._emit(Reply(request_id, Error.NOT_LEADER_OR_FOLLOWER, None, hint))
            return
        offset = self._log.end_offset
        self._pending[offset] = request_id
        self._append_local(Record(offset, self.epoch, payload))

    def _on_flushed(self, offset: int) -> None:
        if self._flush_inflight is not None:
            offset = min(offset, self._flush_inflight)
            self._flush_inflight = None
        offset = min(offset, self._log.end_offset)
        if offset > self._flushed:
            self._flushed = offset
        if self._repair_to and self._flushed >= self._repair_to:
            self._repair_to = self._repair_epoch = 0  # the damaged range is back, and durable
            self._persist(self.epoch, self.leader_id, self.voted_for)
        if self.role is Role.LEADER and self._leader is not None and self._leader.update_local(self._durable_end()):
            self._leader_hw_rose()
        self._refresh_hw()
        self._maybe_fetch()
        self._request_flush()

    def _on_resign(self) -> None:
        if self.role is Role.LEADER and self._leader is not None:
            self._to_resigned(Trigger.RESIGN, self._leader.preferred_successors())

    def _on_shutdown(self, timeout_ms: int) -> None:
        if self._shutdown_at is not None:
            return
        self._shutdown_at = self._now + timeout_ms * MS
        self._on_resign()
        if self.role is Role.CANDIDATE and self._backoff_at is not None:
            self._start_backoff()  # a candidate backing off stands no more: it asks again instead

    def _check_shutdown(self) -> None:
        """End the shutdown once the seed's rule allows it: another leader is known, this node is the
        only voter, or it is an observer (it holds nothing others wait for); else once its bound passes."""
        assert self._shutdown_at is not None
        if self._shutdown_end is not None:
            return
        if self.observer or self.voters == {self.node_id} or self.leader_id not in (None, self.node_id):
            self._shutdown_end = "completed"
        elif self._now >= self._shutdown_at:
            self._shutdown_end = "timed-out"

    def _refresh_hw(self) -> None:
        """Raise this node's high watermark to ``min(raw HW, durable end)`` and report it."""
        raw = self._leader.high_watermark if self._leader is not None else self._raw_hw
        if raw is None:
            return
        new = min(raw, self._durable_end())
        if new <= self._hw:
            return
        old, self._hw = self._hw, new
        if not self._repair_to:  # while repairing, the watermark climbs back over ground already reported
            self._emit(Event(hw_event(self.node_id, self._now, self.epoch, new)))
        self._emit(Committed(new, self._log.records(old, new)))
        for offset in sorted(o for o in self._pending if o < new):
            self._emit(Reply(self._pending.pop(offset), Error.NONE, offset, self.node_id))
