"""The durable election state ``(epoch, leader, voted_for)``, the voter set it was written under, and
its JSON encoding.

Pure functions: the driver writes the bytes with temp file + fsync + rename (Kafka's
``quorum-state`` file) before it acts on any later effect. :func:`check_voters` is the start-up check
that the configured voter set is the one the file was written under (Kafka's ``currentVoters``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass


class QuorumStateError(ValueError):
    """The quorum-state bytes are not a valid encoding."""


class VoterSetMismatch(ValueError):
    """The configured voter set differs from the one recorded in the quorum state: refuse to start."""


@dataclass(frozen=True, slots=True)
class QuorumState:
    """What a voter must remember across restarts. Ids are ints; None means "none".

    ``repair_to`` (0: none) is set when recovery found records lost inside the log (a damaged
    record, not a torn tail): the offset the log had reached. Until the node has fetched its log
    back up to it, it neither votes nor stands (its shorter log could elect a leader that lacks
    entries it had acknowledged); it may vote for a candidate whose log is at least as up to date
    as the lost one, whose last record was ``(repair_epoch, repair_to - 1)``.

    ``voters``: the voter set the state was written under, sorted; None when unknown (a file written
    before the set was recorded)."""

    epoch: int = 0
    leader_id: int | None = None
    voted_for: int | None = None
    repair_to: int = 0
    repair_epoch: int = 0
    voters: tuple[int, ...] | None = None


def encode_quorum_state(state: QuorumState) -> bytes:
    """JSON object ``{"epoch", "leader", "voted_for"}`` (ints or null; plus ``"repair_to"`` when
    set, and ``"voters"``, a sorted list of ids, when known), UTF-8, newline-terminated."""
    doc: dict = {"epoch": state.epoch, "leader": state.leader_id, "voted_for": state.voted_for}
    if state.repair_to:
        doc["repair_to"] = state.repair_to
        doc["repair_epoch"] = state.repair_epoch
    if state.voters is not None:
        doc["voters"] = list(state.voters)
    return (json.dumps(doc, sort_keys=True) + "\n").encode()


def _opt_id(doc: dict, key: str) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise QuorumStateError(f"quorum state field {key!r} must be a non-negative int or null, got {value!r}")
    return value


def decode_quorum_state(data: bytes) -> QuorumState:
    """Inverse of :func:`encode_quorum_state`; raises :class:`QuorumStateError` on bad input."""
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise QuorumStateError(f"quorum state is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise QuorumStateError("quorum state must be a JSON object")
    epoch = doc.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        raise QuorumStateError(f"quorum state epoch must be a non-negative int, got {epoch!r}")
    repair_to = doc.get("repair_to", 0)
    if not isinstance(repair_to, int) or isinstance(repair_to, bool) or repair_to < 0:
        raise QuorumStateError(f"quorum state repair_to must be a non-negative int, got {repair_to!r}")
    repair_epoch = doc.get("repair_epoch", 0)
    if not isinstance(repair_epoch, int) or isinstance(repair_epoch, bool) or repair_epoch < 0:
        raise QuorumStateError(f"quorum state repair_epoch must be a non-negative int, got {repair_epoch!r}")
    voters = doc.get("voters")
    if voters is not None:
        if not isinstance(voters, list) or not voters:
            raise QuorumStateError(f"quorum state voters must be a non-empty list of ids, got {voters!r}")
        for v in voters:
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise QuorumStateError(f"quorum state voters must be non-negative ints, got {voters!r}")
        if sorted(set(voters)) != voters:
            raise QuorumStateError(f"quorum state voters must be sorted and distinct, got {voters!r}")
        voters = tuple(voters)
    return QuorumState(epoch, _opt_id(doc, "leader"), _opt_id(doc, "voted_for"), repair_to, repair_epoch, voters)


def check_voters(persisted: QuorumState | None, voters: frozenset[int]) -> None:
    """Raise :class:`VoterSetMismatch` if ``persisted`` records a voter set other than ``voters``
    (the configured ``controller.quorum.voters``); a state with no recorded set passes."""
    if persisted is None or persisted.voters is None or set(persisted.voters) == set(voters):
        return
    raise VoterSetMismatch(
        f"configured voter set {sorted(voters)} differs from the voter set {list(persisted.voters)} "
        "recorded in the quorum state; refusing to start (a static quorum cannot change its voters)"
    )


def with_repair(persisted: QuorumState | None, seen_end: int | None, seen_epoch: int = 0) -> QuorumState | None:
    """``persisted`` with ``(repair_epoch, repair_to)`` raised to ``(seen_epoch, seen_end)`` (the position a
    damaged log had reached, from :class:`~nodes.raft.records.RecoveryInfo`); unchanged when there is nothing
    to repair."""
    if not seen_end:
        return persisted
    state = persisted or QuorumState()
    if (seen_epoch, seen_end) <= (state.repair_epoch, state.repair_to):
        return state
    return QuorumState(state.epoch, state.leader_id, state.voted_for, seen_end, seen_epoch, state.voters)
