"""One test per applicable row of the §1.4 transition table, driving a single RaftNode by hand."""

import random

import pytest

from nodes.raft import (
    MS,
    AppendLog,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Error,
    Fatal,
    FetchRequest,
    FetchResponse,
    Flush,
    PersistQuorumState,
    QuorumState,
    Reply,
    Role,
    Send,
    VoteRequest,
    VoteResponse,
)
from nodes.raft.effects import Event

from .helpers import (
    FETCH_TIMEOUT,
    VOTERS,
    T,
    boot,
    fetch,
    log_of,
    make_follower,
    make_leader,
    of,
    persisted,
    sent,
    states,
)

E = 2  # the epoch nodes start in


def in_role(role: Role, epoch: int = E, **kw):
    """Node 1 of voters {1,2,3} in ``role`` at ``epoch``."""
    if role is Role.UNATTACHED:
        node, _ = boot(persisted=QuorumState(epoch), **kw)
    elif role is Role.VOTED:
        node, _ = boot(persisted=QuorumState(epoch, None, 3), **kw)
    elif role is Role.CANDIDATE:
        node, _ = boot(persisted=QuorumState(epoch, None, 1), **kw)
    elif role is Role.LEADER:
        node, _ = make_leader(1, epoch=epoch, **kw)
    elif role is Role.FOLLOWER:
        node, _ = boot(persisted=QuorumState(epoch, 2, None), **kw)
    elif role is Role.RESIGNED:
        node, _ = boot(persisted=QuorumState(epoch, 1, 1), **kw)
    else:
        raise AssertionError(role)
    assert node.role is role and node.epoch == epoch
    return node


def assert_persist_before_event(effects):
    kinds = [type(e) for e in effects if isinstance(e, PersistQuorumState | Event)]
    assert kinds.index(PersistQuorumState) < kinds.index(Event)


ROLES = [Role.UNATTACHED, Role.VOTED, Role.CANDIDATE, Role.LEADER, Role.FOLLOWER, Role.RESIGNED]


# -- any state


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.value)
def test_any_higher_epoch_with_leader_becomes_follower(role):
    node = in_role(role)
    effects = node.handle(5, 3, BeginQuorumEpochRequest(E + 1, 3))
    assert (node.role, node.epoch, node.leader_id) == (Role.FOLLOWER, E + 1, 3)
    assert persisted(effects)[0] == QuorumState(E + 1, 3, None, voters=VOTERS)
    assert_persist_before_event(effects)
    assert sent(effects, FetchRequest, dst=3)  # starts fetching at once


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.value)
def test_any_higher_epoch_without_leader_becomes_unattached(role):
    node = in_role(role)
    effects = node.handle(5, 3, VoteResponse(Error.NONE, E + 3, None, False))
    assert (node.role, node.epoch, node.leader_id, node.voted_for) == (Role.UNATTACHED, E + 3, None, None)
    assert persisted(effects) == [QuorumState(E + 3, None, None, voters=VOTERS)]
    assert states(effects)[-1]["role"] == "unattached"


def test_higher_epoch_keeps_remaining_election_time_when_unattached_or_candidate():
    node = in_role(Role.UNATTACHED)
    before = node.next_deadline()
    node.handle(T // 2, 3, VoteResponse(Error.NONE, E + 1, None, False))
    assert node.next_deadline() == before
    follower = in_role(Role.FOLLOWER)
    follower.handle(T // 2, 3, VoteResponse(Error.NONE, E + 1, None, False))
    assert follower.next_deadline() >= T // 2 + T  # fresh random timeout


@pytest.mark.parametrize("role", [Role.UNATTACHED, Role.VOTED, Role.CANDIDATE], ids=lambda r: r.value)
def test_same_epoch_leader_discovered_becomes_follower(role):
    node = in_role(role)
    effects = node.handle(5, 2, BeginQuorumEpochResponse(Error.NONE, E, 2))
    assert (node.role, node.epoch, node.leader_id) == (Role.FOLLOWER, E, 2)
    assert persisted(effects)[0].leader_id == 2


@pytest.mark.parametrize("role", [Role.FOLLOWER, Role.LEADER, Role.RESIGNED], ids=lambda r: r.value)
def test_same_epoch_different_leader_is_fatal(role):
    node = in_role(role)
    effects = node.handle(5, 3, BeginQuorumEpochRequest(E, 3))
    assert of(effects, Fatal) and "two leaders" in of(effects, Fatal)[0].reason
    assert node.failed is not None
    assert node.handle(6, 3, BeginQuorumEpochRequest(E, 3)) == []  # stopped


# -- Unattached


def test_unattached_election_timeout_becomes_candidate():
    node = in_role(Role.UNATTACHED)
    deadline = node.next_deadline()
    assert T <= deadline < 2 * T
    assert node.tick(deadline - 1) == []
    effects = node.tick(deadline)
    assert (node.role, node.epoch, node.voted_for) == (Role.CANDIDATE, E + 1, 1)
    assert persisted(effects) == [QuorumState(E + 1, None, 1, voters=VOTERS)]
    assert {m.candidate_id for m in sent(effects, VoteRequest)} == {1}
    assert len(sent(effects, VoteRequest)) == 2


def test_unattached_grants_vote_persists_and_resets_timer():
    node = in_role(Role.UNATTACHED)
    now = T - 1
    effects = node.handle(now, 3, VoteRequest(E, 3, 0, 0))
    assert (node.role, node.voted_for) == (Role.VOTED, 3)
    assert persisted(effects) == [QuorumState(E, None, 3, voters=VOTERS)]
    kinds = [type(e) for e in effects]
    assert kinds.index(PersistQuorumState) < kinds.index(Send)  # persisted before replying
    assert sent(effects, VoteResponse)[0].vote_granted
    assert node.next_deadline() >= now + T


def test_unattached_begin_quorum_epoch_becomes_follower():
    node = in_role(Role.UNATTACHED)
    node.handle(5, 3, BeginQuorumEpochRequest(E, 3))
    assert (node.role, node.leader_id) == (Role.FOLLOWER, 3)


# -- Candidate


def test_candidate_entered_votes_for_itself_and_asks_the_others():
    node, effects = boot(persisted=QuorumState(E, None, 1))
    assert node.role is Role.CANDIDATE
    assert {(e.dst, e.message.epoch) for e in of(effects, Send)} == {(2, E), (3, E)}


def test_single_voter_wins_immediately():
    node, effects = boot(1, [1])  # no election timeout to wait for (Kafka's isOnlyVoter)
    assert node.role is Role.LEADER and node.epoch == 1
    assert [s["role"] for s in states(effects)] == ["unattached", "candidate", "leader"]
    assert of(effects, AppendLog)[0].records[0].control  # LeaderChange record


@pytest.mark.parametrize(
    ("state", "epoch"),
    [(QuorumState(3), 4), (QuorumState(3, 1, 1), 4), (QuorumState(3, None, 1), 3)],
    ids=["unattached", "was-leader", "voted-for-self"],
)
def test_single_voter_leads_at_once_after_a_restart(state, epoch):
    node, effects = boot(1, [1], now=5, persisted=state, pre_vote=True)
    assert node.role is Role.LEADER and node.epoch == epoch
    assert persisted(effects)[-1] == QuorumState(epoch, 1, 1, voters=(1,))


def test_candidate_majority_becomes_leader():
    node = in_role(Role.CANDIDATE)
    effects = node.handle(5, 2, VoteResponse(Error.NONE, E, None, True))
    assert node.role is Role.LEADER
    assert persisted(effects) == [QuorumState(E, 1, 1, voters=VOTERS)]
    (append,) = of(effects, AppendLog)
    assert append.records[0].offset == 0 and append.records[0].control and append.records[0].epoch == E
    assert of(effects, Flush) == [Flush(1)]
    assert {e.dst for e in effects if isinstance(e, Send) and isinstance(e.message, BeginQuorumEpochRequest)} == {2, 3}


def test_candidate_rejected_by_majority_backs_off_then_stands_again():
    node = in_role(Role.CANDIDATE, voters=(1, 2, 3))
    node.handle(5, 2, VoteResponse(Error.NONE, E, None, False))
    node.handle(6, 3, VoteResponse(Error.NONE, E, None, False))
    assert node.role is Role.CANDIDATE and node.epoch == E
    backoff = node.next_deadline()
    assert 6 <= backoff <= 6 + 1000 * MS  # binary exponential, capped by election.backoff.max.ms
    effects = node.tick(backoff)
    assert node.role is Role.CANDIDATE and node.epoch == E + 1
    assert node._retries == 2
    assert persisted(effects) == [QuorumState(E + 1, None, 1, voters=VOTERS)]


class _MaxRandom(random.Random):
    """randrange always picks its largest value."""

    def randrange(self, start, stop=None, step=1):
        return (start if stop is None else stop) - 1


def test_candidate_election_timeout_starts_backoff():
    node = in_role(Role.CANDIDATE)
    node._rng = _MaxRandom()
    deadline = node.next_deadline()
    assert node.tick(deadline) == []
    assert node.role is Role.CANDIDATE and node.epoch == E
    assert node.next_deadline() == deadline + 100 * MS  # retries=1: 100 ms * U{0, 1}
    node.tick(deadline + 100 * MS)
    assert node.epoch == E + 1


def test_candidate_rejects_vote_in_its_epoch():
    node = in_role(Role.CANDIDATE)
    effects = node.handle(5, 3, VoteRequest(E, 3, 9, 100))
    assert not sent(effects, VoteResponse)[0].vote_granted
    assert node.role is Role.CANDIDATE


def test_candidate_learns_leader_from_fetch_response():
    node = in_role(Role.CANDIDATE)
    node.handle(5, 3, FetchResponse(Error.NOT_LEADER_OR_FOLLOWER, E, 3, None))
    assert (node.role, node.leader_id) == (Role.FOLLOWER, 3)


# -- Leader


def test_leader_records_fetch_position():
    node = in_role(Role.LEADER)
    fetch(node, 2, 1, E)
    assert node._leader.end_offsets[2] == 1
    assert node.high_watermark == 1


def test_leader_without_majority_fetches_resigns():
    node = in_role(Role.LEADER)
    deadline = node.next_deadline()
    node.handle(deadline - 1, 2, FetchRequest(E, 2, 1, E, 0))  # one fetcher + self = majority of 3
    assert node.role is Role.LEADER
    quorum_deadline = node._leader.check_quorum_deadline(node.config)
    assert quorum_deadline == deadline - 1 + int(1.5 * FETCH_TIMEOUT)
    effects = node.tick(quorum_deadline)
    assert node.role is Role.RESIGNED and node.epoch == E
    assert persisted(effects) == []  # memory-only transition
    assert sent(effects, EndQuorumEpochRequest)


def test_leader_resends_begin_quorum_epoch():
    node = in_role(Role.LEADER)
    effects = node.tick(FETCH_TIMEOUT // 2)
    assert len(sent(effects, BeginQuorumEpochRequest)) == 2


def test_leader_resign_sends_end_quorum_epoch_with_preferred_successors():
    node = in_role(Role.LEADER)
    fetch(node, 3, 1, E)
    effects = node.resign(10)
    assert node.role is Role.RESIGNED
    assert persisted(effects) == []
    requests = sent(effects, EndQuorumEpochRequest)
    assert len(requests) == 2 and requests[0].preferred_successors == (3, 2)


def test_leader_higher_epoch_vote_steps_down_then_grants():
    node = in_role(Role.LEADER)
    effects = node.handle(5, 2, VoteRequest(E + 1, 2, E, 5))
    assert (node.role, node.epoch, node.voted_for) == (Role.VOTED, E + 1, 2)
    assert sent(effects, VoteResponse)[0].vote_granted
    assert [s["role"] for s in states(effects)] == ["unattached", "voted"]


def test_leader_rejects_vote_in_its_epoch():
    node = in_role(Role.LEADER)
    effects = node.handle(5, 2, VoteRequest(E, 2, E - 1, 5))
    assert not sent(effects, VoteResponse)[0].vote_granted and node.role is Role.LEADER


def test_leader_step_down_fails_pending_appends_and_parked_fetches():
    node = in_role(Role.LEADER)
    node.append(1, b"x", "req-1")  # offset 1, not flushed by the leader: cannot commit yet
    fetch(node, 2, 1, E, now=2)
    parked = node.handle(3, 3, FetchRequest(E, 3, 2, E, 500))
    assert sent(parked) == [] and 3 in node._parked  # nothing new: parked
    effects = node.handle(4, 2, VoteResponse(Error.NONE, E + 1, 2, False))
    (reply,) = of(effects, Reply)
    assert reply.request_id == "req-1" and reply.error is Error.REQUEST_TIMED_OUT and reply.leader_id == 2
    assert any(m.error is Error.NOT_LEADER_OR_FOLLOWER for m in sent(effects, FetchResponse, dst=3))


# -- Follower


def test_follower_fetch_success_resets_timer_appends_flushes_then_fetches():
    node, effects = make_follower(2, leader=1, epoch=E)
    assert sent(effects, FetchRequest, dst=1)[0].fetch_offset == 0
    now = FETCH_TIMEOUT - 1
    effects = node.handle(now, 1, FetchResponse(Error.NONE, E, 1, 2, tuple(log_of(E, E))))
    assert node.next_deadline() <= now + FETCH_TIMEOUT
    # the timer restarts, at a random point of [F/2, F) so followers do not all stand together
    assert now + FETCH_TIMEOUT // 2 <= node._fetch_deadline < now + FETCH_TIMEOUT
    assert of(effects, AppendLog) and of(effects, Flush) == [Flush(2)]
    assert sent(effects, FetchRequest) == []  # must flush before the next Fetch
    assert node.high_watermark == 0  # HW = min(leader HW, flushed end)
    effects = node.flushed(now + 1, 2)
    assert sent(effects, FetchRequest)[0].fetch_offset == 2
    assert node.high_watermark == 2


def test_follower_fetch_timeout_becomes_candidate():
    node, _ = make_follower(2, leader=1, epoch=E)
    effects = node.tick(FETCH_TIMEOUT)
    assert (node.role, node.epoch) == (Role.CANDIDATE, E + 1)
    assert persisted(effects) == [QuorumState(E + 1, None, 2, voters=VOTERS)]


@pytest.mark.parametrize(
    ("preferred", "delay_ms"),
    [((2, 3), 0), ((3, 2), 500), ((3,), 1000)],
    ids=["first", "second", "absent"],
)
def test_follower_end_quorum_epoch_strict_backoff(preferred, delay_ms):
    node, _ = make_follower(2, leader=1, epoch=E)
    effects = node.handle(100, 1, EndQuorumEpochRequest(E, 1, preferred))
    assert sent(effects, EndQuorumEpochResponse)[0].error is Error.NONE
    if delay_ms == 0:
        assert node.role is Role.CANDIDATE  # stands at once
    else:
        assert node.role is Role.FOLLOWER and node.next_deadline() <= 100 + delay_ms * MS
        node.tick(100 + delay_ms * MS)
        assert node.role is Role.CANDIDATE


def test_follower_rejects_vote_in_its_epoch():
    node, _ = make_follower(2, leader=1, epoch=E)
    effects = node.handle(5, 3, VoteRequest(E, 3, E, 100))
    assert not sent(effects, VoteResponse)[0].vote_granted and node.role is Role.FOLLOWER


def test_follower_retries_lost_fetch_after_request_timeout():
    node, _ = make_follower(2, leader=1, epoch=E)
    effects = node.tick(node.config.request_timeout_ms * MS)
    assert sent(effects, FetchRequest, dst=1) and node.role is Role.FOLLOWER


# -- Resigned


def test_resigned_sends_end_quorum_epoch_until_acked():
    node, effects = boot(persisted=QuorumState(E, 1, 1))
    assert node.role is Role.RESIGNED
    assert {e.dst for e in effects if isinstance(e, Send)} == {2, 3}
    node.handle(5, 2, EndQuorumEpochResponse(Error.NONE, E, 1))
    resend = node.tick(node.config.request_timeout_ms * MS)
    assert [e.dst for e in resend if isinstance(e, Send)] == [3]


def test_resigned_election_timeout_becomes_candidate():
    node, _ = boot(persisted=QuorumState(E, 1, 1))
    deadline = node._election_at
    effects = node.tick(deadline)
    assert (node.role, node.epoch) == (Role.CANDIDATE, E + 1)
    assert persisted(effects) == [QuorumState(E + 1, None, 1, voters=VOTERS)]


def test_resigned_rejects_votes_in_its_epoch():
    node, _ = boot(persisted=QuorumState(E, 1, 1))
    effects = node.handle(5, 2, VoteRequest(E, 2, E, 100))
    assert not sent(effects, VoteResponse)[0].vote_granted


# -- request epoch validation


def test_voter_requests_from_old_epoch_are_fenced():
    node = in_role(Role.FOLLOWER)
    for request in (VoteRequest(E - 1, 3, 0, 0), BeginQuorumEpochRequest(E - 1, 3), EndQuorumEpochRequest(E - 1, 3)):
        (response,) = sent(node.handle(5, 3, request))
        assert response.error is Error.FENCED_LEADER_EPOCH and response.epoch == E and response.leader_id == 2


@pytest.mark.parametrize(
    ("role", "epoch", "error"),
    [
        (Role.LEADER, E - 1, Error.FENCED_LEADER_EPOCH),
        (Role.LEADER, E + 1, Error.UNKNOWN_LEADER_EPOCH),
        (Role.FOLLOWER, E, Error.NOT_LEADER_OR_FOLLOWER),
    ],
)
def test_fetch_validation(role, epoch, error):
    node = in_role(role)
    (response,) = sent(node.handle(5, 3, FetchRequest(epoch, 3, 0, 0, 0)))
    assert response.error is error
    assert node.role is role  # fetch requests never move the receiver's epoch
