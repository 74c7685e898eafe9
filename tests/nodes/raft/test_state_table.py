"""The role transition table itself (state.py), independent of the node."""

import pytest

from nodes.raft.state import (
    PERSISTED,
    PRE_VOTE_TRANSITIONS,
    TRANSITIONS,
    IllegalTransition,
    Role,
    Trigger,
    check_transition,
    next_roles,
)

EXPECTED_ROWS = [
    # (from, trigger, to) for pre-vote off: docs/kraft.md §1.4
    *[(r, Trigger.HIGHER_EPOCH, Role.UNATTACHED) for r in Role],
    *[(r, Trigger.HIGHER_EPOCH_WITH_LEADER, Role.FOLLOWER) for r in Role],
    (Role.UNATTACHED, Trigger.LEADER_DISCOVERED, Role.FOLLOWER),
    (Role.VOTED, Trigger.LEADER_DISCOVERED, Role.FOLLOWER),
    (Role.CANDIDATE, Trigger.LEADER_DISCOVERED, Role.FOLLOWER),
    (Role.UNATTACHED, Trigger.VOTE_GRANTED, Role.VOTED),
    (Role.UNATTACHED, Trigger.ELECTION_TIMEOUT, Role.CANDIDATE),
    (Role.VOTED, Trigger.ELECTION_TIMEOUT, Role.CANDIDATE),
    (Role.RESIGNED, Trigger.ELECTION_TIMEOUT, Role.CANDIDATE),
    (Role.UNATTACHED, Trigger.ONLY_VOTER, Role.CANDIDATE),
    (Role.VOTED, Trigger.ONLY_VOTER, Role.CANDIDATE),
    (Role.RESIGNED, Trigger.ONLY_VOTER, Role.CANDIDATE),
    (Role.FOLLOWER, Trigger.FETCH_TIMEOUT, Role.CANDIDATE),
    (Role.FOLLOWER, Trigger.OBSERVER_FETCH_TIMEOUT, Role.UNATTACHED),
    (Role.CANDIDATE, Trigger.BACKOFF_EXPIRED, Role.CANDIDATE),
    (Role.CANDIDATE, Trigger.ELECTION_WON, Role.LEADER),
    (Role.LEADER, Trigger.CHECK_QUORUM_FAILED, Role.RESIGNED),
    (Role.LEADER, Trigger.RESIGN, Role.RESIGNED),
]


@pytest.mark.parametrize(("role", "trigger", "target"), EXPECTED_ROWS, ids=lambda x: getattr(x, "value", x))
def test_row_allowed(role, trigger, target):
    check_transition(role, trigger, target)
    assert target in next_roles(role, trigger)


@pytest.mark.parametrize(
    ("role", "trigger", "target"),
    [
        (Role.FOLLOWER, Trigger.ELECTION_WON, Role.LEADER),  # only candidates win
        (Role.LEADER, Trigger.LEADER_DISCOVERED, Role.FOLLOWER),  # two leaders in one epoch
        (Role.RESIGNED, Trigger.LEADER_DISCOVERED, Role.FOLLOWER),
        (Role.FOLLOWER, Trigger.VOTE_GRANTED, Role.VOTED),  # followers never vote in their epoch
        (Role.CANDIDATE, Trigger.VOTE_GRANTED, Role.VOTED),  # already voted for itself
        (Role.LEADER, Trigger.ELECTION_TIMEOUT, Role.CANDIDATE),
        (Role.UNATTACHED, Trigger.ELECTION_TIMEOUT, Role.PROSPECTIVE),  # pre-vote is off
    ],
)
def test_illegal_transition_raises(role, trigger, target):
    with pytest.raises(IllegalTransition):
        check_transition(role, trigger, target)


def test_table_has_no_extra_rows():
    expected = {}
    for role, trigger, target in EXPECTED_ROWS:
        expected.setdefault((role, trigger), set()).add(target)
    # Prospective appears in TRANSITIONS only through the "any" rows and VOTE_GRANTED/LEADER_DISCOVERED
    extra = {
        (Role.PROSPECTIVE, Trigger.LEADER_DISCOVERED): {Role.FOLLOWER},
        (Role.PROSPECTIVE, Trigger.VOTE_GRANTED): {Role.VOTED},
    }
    assert {k: set(v) for k, v in TRANSITIONS.items()} == {**expected, **extra}


def test_pre_vote_table_routes_elections_through_prospective():
    for role, trigger in [
        (Role.UNATTACHED, Trigger.ELECTION_TIMEOUT),
        (Role.VOTED, Trigger.ELECTION_TIMEOUT),
        (Role.RESIGNED, Trigger.ELECTION_TIMEOUT),
        (Role.FOLLOWER, Trigger.FETCH_TIMEOUT),
        (Role.CANDIDATE, Trigger.BACKOFF_EXPIRED),
    ]:
        assert PRE_VOTE_TRANSITIONS[role, trigger] == {Role.PROSPECTIVE}
    check_transition(Role.PROSPECTIVE, Trigger.PREVOTE_WON, Role.CANDIDATE, pre_vote=True)
    for back in (Role.UNATTACHED, Role.VOTED, Role.FOLLOWER, Role.RESIGNED):
        check_transition(Role.PROSPECTIVE, Trigger.PREVOTE_LOST, back, pre_vote=True)
    with pytest.raises(IllegalTransition):
        check_transition(Role.PROSPECTIVE, Trigger.PREVOTE_WON, Role.CANDIDATE, pre_vote=False)


def test_persisted_roles():
    assert not PERSISTED[Role.RESIGNED]  # memory only: the file already names us leader
    assert not PERSISTED[Role.PROSPECTIVE]
    assert all(PERSISTED[r] for r in (Role.UNATTACHED, Role.VOTED, Role.CANDIDATE, Role.LEADER, Role.FOLLOWER))
