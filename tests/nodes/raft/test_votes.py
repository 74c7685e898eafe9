"""Vote granting: log comparison, one vote per epoch, persistence before the reply, validation."""

import pytest

from nodes.raft import Error, PersistQuorumState, QuorumState, Role, Send, VoteRequest, VoteResponse

from .helpers import VOTERS, boot, log_of, persisted, sent, states

# our log: epochs [1, 1, 2] -> last epoch 2, end offset 3; our epoch 4, unattached
OUR_LOG = log_of(1, 1, 2)


def voter(**kw):
    node, _ = boot(persisted=QuorumState(4), log=OUR_LOG, **kw)
    return node


@pytest.mark.parametrize(
    ("last_epoch", "last_offset", "granted"),
    [
        (2, 3, True),  # identical
        (2, 4, True),  # same epoch, longer
        (3, 1, True),  # higher last epoch wins even if shorter
        (2, 2, False),  # same epoch, shorter
        (1, 9, False),  # lower last epoch loses even if longer
        (0, 0, False),  # empty log
    ],
)
def test_grant_compares_last_epoch_then_end_offset(last_epoch, last_offset, granted):
    node = voter()
    (response,) = sent(node.handle(1, 2, VoteRequest(4, 2, last_epoch, last_offset)), VoteResponse)
    assert response.vote_granted is granted
    assert (node.role is Role.VOTED) is granted


def test_one_vote_per_epoch():
    node = voter()
    assert sent(node.handle(1, 2, VoteRequest(4, 2, 2, 3)))[0].vote_granted
    # another candidate in the same epoch, even with a better log: rejected
    assert not sent(node.handle(2, 3, VoteRequest(4, 3, 3, 10)))[0].vote_granted
    # the same candidate asking again (a retry): granted again, nothing new persisted
    effects = node.handle(3, 2, VoteRequest(4, 2, 2, 3))
    assert sent(effects)[0].vote_granted and persisted(effects) == []
    # a new epoch allows a new vote
    assert sent(node.handle(4, 3, VoteRequest(5, 3, 2, 3)))[0].vote_granted
    assert (node.epoch, node.voted_for) == (5, 3)


def test_vote_is_persisted_before_the_response():
    node = voter()
    effects = node.handle(1, 2, VoteRequest(4, 2, 2, 3))
    kinds = [type(e) for e in effects]
    assert kinds.index(PersistQuorumState) < kinds.index(Send)
    assert persisted(effects) == [QuorumState(4, None, 2, voters=VOTERS)]


def test_higher_epoch_request_is_adopted_then_checked():
    node = voter()
    effects = node.handle(1, 2, VoteRequest(7, 2, 1, 1))  # stale log
    assert node.epoch == 7 and node.role is Role.UNATTACHED
    assert persisted(effects) == [QuorumState(7, None, None, voters=VOTERS)]
    (response,) = sent(effects)
    assert response.epoch == 7 and not response.vote_granted


def test_old_epoch_is_fenced():
    node = voter()
    (response,) = sent(node.handle(1, 2, VoteRequest(3, 2, 2, 3)))
    assert response.error is Error.FENCED_LEADER_EPOCH and response.epoch == 4 and not response.vote_granted


@pytest.mark.parametrize(
    "request_",
    [
        VoteRequest(5, 2, 5, 3),  # last epoch must be below the candidate epoch
        VoteRequest(5, 2, -1, 3),
        VoteRequest(5, 2, 2, -1),
        VoteRequest(5, 9, 2, 3),  # not a voter
    ],
)
def test_invalid_requests(request_):
    node = voter()
    (response,) = sent(node.handle(1, request_.candidate_id, request_))
    assert response.error is Error.INVALID_REQUEST and not response.vote_granted
    assert node.epoch == 4  # nothing adopted


def test_vote_ignores_log_bug_grants_stale_candidates():
    node = voter(bugs={"vote-ignores-log"})
    (response,) = sent(node.handle(1, 2, VoteRequest(4, 2, 0, 0)))
    assert response.vote_granted  # the correct node rejects this (see the table above)


def test_forget_vote_bug_does_not_persist_the_vote_and_votes_twice_after_restart():
    node = voter(bugs={"forget-vote"})
    effects = node.handle(1, 2, VoteRequest(4, 2, 2, 3))
    assert sent(effects)[0].vote_granted
    assert persisted(effects) == [QuorumState(4, None, None, voters=VOTERS)]  # voted_for lost
    assert node.voted_for == 2  # in memory it remembers ...
    state = persisted(effects)[-1]
    restarted, _ = boot(persisted=state, log=OUR_LOG, bugs={"forget-vote"})
    # ... but after a restart it grants a second candidate in the same epoch
    second = restarted.handle(2, 3, VoteRequest(4, 3, 2, 3))
    assert sent(second)[0].vote_granted
    # which the epoch checker sees as a double vote
    votes = [(s["epoch"], s["voted_for"]) for s in states(effects) + states(second) if s["voted_for"]]
    assert votes == [(4, "n2"), (4, "n3")]

    correct = voter()
    state = persisted(correct.handle(1, 2, VoteRequest(4, 2, 2, 3)))[-1]
    restarted, _ = boot(persisted=state, log=OUR_LOG)
    assert restarted.role is Role.VOTED and restarted.voted_for == 2
    assert not sent(restarted.handle(2, 3, VoteRequest(4, 3, 2, 3)))[0].vote_granted
