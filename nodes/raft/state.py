"""Roles and the role transition table (docs/kraft.md §1.4), plus the start-up rules (docs/kraft.md §1.3).

Everything that decides *which role follows which* lives here, table-driven like h11's
``_state.py``; ``node.py`` decides *when* a trigger happens and checks each switch against
:data:`TRANSITIONS`. Rows that do not change the role (a candidate backing off, a follower
resetting its fetch timer) are behaviour, not transitions, and live in ``node.py``.

``Role.VOTED`` is Kafka's "Unattached with votedKey"; ``Role.PROSPECTIVE`` is the pre-vote state
(KIP-996) and is entered only when ``RaftConfig.pre_vote`` is on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .quorum_state import QuorumState


class Role(enum.Enum):
    UNATTACHED = "unattached"
    VOTED = "voted"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


class Trigger(enum.Enum):
    HIGHER_EPOCH = "higher-epoch"  # a message carries e' > e and no leader we can follow
    HIGHER_EPOCH_WITH_LEADER = "higher-epoch-with-leader"  # e' > e and names leader L
    LEADER_DISCOVERED = "leader-discovered"  # same epoch, names a leader while we know none
    VOTE_GRANTED = "vote-granted"  # we grant our vote in this epoch
    ELECTION_TIMEOUT = "election-timeout"
    FETCH_TIMEOUT = "fetch-timeout"
    BACKOFF_EXPIRED = "backoff-expired"  # a losing candidate's backoff is over
    ELECTION_WON = "election-won"
    CHECK_QUORUM_FAILED = "check-quorum-failed"
    RESIGN = "resign"  # graceful resign()/shutdown
    PREVOTE_WON = "prevote-won"
    PREVOTE_LOST = "prevote-lost"  # majority rejected, or the pre-vote round timed out
    ONLY_VOTER = "only-voter"  # the voter set is this node alone: it stands at once at start-up
    OBSERVER_FETCH_TIMEOUT = "observer-fetch-timeout"  # an observer lost its leader: it never stands


class IllegalTransition(RuntimeError):
    """The core tried a role change the table does not allow (a bug in the core)."""


_ALL = frozenset(Role)
_UNLEADING = frozenset({Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE, Role.CANDIDATE})


def _rows() -> dict[tuple[Role, Trigger], frozenset[Role]]:
    rows: dict[tuple[Role, Trigger], frozenset[Role]] = {}
    for role in _ALL:
        rows[role, Trigger.HIGHER_EPOCH] = frozenset({Role.UNATTACHED})
        rows[role, Trigger.HIGHER_EPOCH_WITH_LEADER] = frozenset({Role.FOLLOWER})
    for role in _UNLEADING:
        rows[role, Trigger.LEADER_DISCOVERED] = frozenset({Role.FOLLOWER})
    rows[Role.UNATTACHED, Trigger.VOTE_GRANTED] = frozenset({Role.VOTED})
    rows[Role.PROSPECTIVE, Trigger.VOTE_GRANTED] = frozenset({Role.VOTED})
    for role in (Role.UNATTACHED, Role.VOTED, Role.RESIGNED):
        rows[role, Trigger.ELECTION_TIMEOUT] = frozenset({Role.CANDIDATE})
        rows[role, Trigger.ONLY_VOTER] = frozenset({Role.CANDIDATE})
    rows[Role.FOLLOWER, Trigger.FETCH_TIMEOUT] = frozenset({Role.CANDIDATE})
    rows[Role.FOLLOWER, Trigger.OBSERVER_FETCH_TIMEOUT] = frozenset({Role.UNATTACHED})
    rows[Role.CANDIDATE, Trigger.BACKOFF_EXPIRED] = frozenset({Role.CANDIDATE})
    rows[Role.CANDIDATE, Trigger.ELECTION_WON] = frozenset({Role.LEADER})
    rows[Role.LEADER, Trigger.CHECK_QUORUM_FAILED] = frozenset({Role.RESIGNED})
    rows[Role.LEADER, Trigger.RESIGN] = frozenset({Role.RESIGNED})
    return rows


TRANSITIONS: dict[tuple[Role, Trigger], frozenset[Role]] = _rows()
"""``(role, trigger) -> allowed next roles`` with pre-vote off."""

PRE_VOTE_TRANSITIONS: dict[tuple[Role, Trigger], frozenset[Role]] = {
    **TRANSITIONS,
    (Role.UNATTACHED, Trigger.ELECTION_TIMEOUT): frozenset({Role.PROSPECTIVE}),
    (Role.VOTED, Trigger.ELECTION_TIMEOUT): frozenset({Role.PROSPECTIVE}),
    (Role.RESIGNED, Trigger.ELECTION_TIMEOUT): frozenset({Role.PROSPECTIVE}),
    (Role.FOLLOWER, Trigger.FETCH_TIMEOUT): frozenset({Role.PROSPECTIVE}),
    (Role.CANDIDATE, Trigger.BACKOFF_EXPIRED): frozenset({Role.PROSPECTIVE}),
    (Role.PROSPECTIVE, Trigger.PREVOTE_WON): frozenset({Role.CANDIDATE}),
    # back to where it came from: the prospective kept its leader and vote in memory
    (Role.PROSPECTIVE, Trigger.PREVOTE_LOST): frozenset({Role.UNATTACHED, Role.VOTED, Role.FOLLOWER, Role.RESIGNED}),
}
"""``(role, trigger) -> allowed next roles`` with pre-vote on (KIP-996)."""

PERSISTED: dict[Role, bool] = {
    Role.UNATTACHED: True,
    Role.VOTED: True,
    Role.CANDIDATE: True,
    Role.LEADER: True,
    Role.FOLLOWER: True,
    Role.RESIGNED: False,  # the file already names this node as leader of the epoch
    Role.PROSPECTIVE: False,  # pre-vote changes nothing durable
}
"""Whether entering a role writes the quorum state first ("persist before change")."""


def next_roles(role: Role, trigger: Trigger, pre_vote: bool = False) -> frozenset[Role]:
    """Roles that ``trigger`` may lead to from ``role``; empty if the trigger does not apply."""
    table = PRE_VOTE_TRANSITIONS if pre_vote else TRANSITIONS
    return table.get((role, trigger), frozenset())


def check_transition(role: Role, trigger: Trigger, target: Role, pre_vote: bool = False) -> None:
    """Raise :class:`IllegalTransition` unless the table allows ``role --trigger--> target``."""
    if target not in next_roles(role, trigger, pre_vote):
        raise IllegalTransition(f"{role.value} --{trigger.value}--> {target.value} is not in the table")


@dataclass(frozen=True, slots=True)
class Startup:
    """Where a (re)starting voter begins (§1.3). ``row`` names the rule that applied."""

    role: Role
    epoch: int
    leader_id: int | None
    voted_for: int | None
    row: str


def startup_state(persisted: QuorumState | None, last_log_epoch: int, node_id: int, voters: frozenset[int]) -> Startup:
    """Apply the §1.3 start-up table. The caller persists the result (Kafka rewrites the file)."""
    state = persisted or QuorumState()
    if state.epoch < last_log_epoch:
        return Startup(Role.UNATTACHED, last_log_epoch, None, None, "log-epoch-ahead")
    if state.leader_id == node_id:
        return Startup(Role.RESIGNED, state.epoch, node_id, state.voted_for, "was-leader")
    if state.leader_id is not None and state.leader_id in voters:
        # a known leader wins over a remembered vote (we may have voted, then seen another win)
        return Startup(Role.FOLLOWER, state.epoch, state.leader_id, state.voted_for, "follower")
    if state.voted_for == node_id:
        return Startup(Role.CANDIDATE, state.epoch, None, node_id, "voted-for-self")
    if state.voted_for is not None:
        return Startup(Role.VOTED, state.epoch, None, state.voted_for, "voted")
    return Startup(Role.UNATTACHED, state.epoch, None, None, "unattached")
