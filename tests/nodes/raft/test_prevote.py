"""Pre-vote (KIP-996) behind RaftConfig.pre_vote: off by default."""

import pytest

from nodes.raft import (
    BeginQuorumEpochRequest,
    Error,
    FetchRequest,
    FetchResponse,
    QuorumState,
    RaftConfig,
    Role,
    VoteRequest,
    VoteResponse,
)

from .cluster import Cluster
from .helpers import FETCH_TIMEOUT, VOTERS, boot, log_of, make_follower, make_leader, persisted, sent, states


def test_off_by_default():
    assert RaftConfig().pre_vote is False
    node, _ = make_follower(2, leader=1, epoch=3)
    node.tick(FETCH_TIMEOUT)
    assert node.role is Role.CANDIDATE and node.epoch == 4


def test_fetch_timeout_enters_prospective_without_bumping_or_persisting():
    node, _ = make_follower(2, leader=1, epoch=3, log=log_of(1, 3), pre_vote=True)
    effects = node.tick(FETCH_TIMEOUT)
    assert node.role is Role.PROSPECTIVE and node.epoch == 3
    assert persisted(effects) == [] and states(effects) == []  # nothing durable changed
    requests = sent(effects, VoteRequest)
    assert len(requests) == 2
    assert all(r.pre_vote and r.epoch == 3 and (r.last_epoch, r.last_offset) == (3, 2) for r in requests)


def test_prevote_majority_becomes_candidate():
    node, _ = make_follower(2, leader=1, epoch=3, pre_vote=True)
    node.tick(FETCH_TIMEOUT)
    effects = node.handle(FETCH_TIMEOUT + 1, 3, VoteResponse(Error.NONE, 3, None, True, pre_vote=True))
    assert node.role is Role.CANDIDATE and node.epoch == 4
    assert persisted(effects) == [QuorumState(4, None, 2, voters=VOTERS)]
    assert all(not r.pre_vote for r in sent(effects, VoteRequest))


def test_prevote_rejected_returns_to_follower_of_known_leader():
    node, _ = make_follower(2, leader=1, epoch=3, pre_vote=True)
    node.tick(FETCH_TIMEOUT)
    node.handle(FETCH_TIMEOUT + 1, 1, VoteResponse(Error.NONE, 3, 1, False, pre_vote=True))
    assert node.role is Role.PROSPECTIVE  # a response naming the old leader proves nothing
    effects = node.handle(FETCH_TIMEOUT + 2, 3, VoteResponse(Error.NONE, 3, 1, False, pre_vote=True))
    assert node.role is Role.FOLLOWER and node.leader_id == 1 and node.epoch == 3
    assert sent(effects, FetchRequest, dst=1)


def test_prospective_returns_to_follower_on_its_leaders_heartbeat():
    node, _ = make_follower(2, leader=1, epoch=3, pre_vote=True)
    node.tick(FETCH_TIMEOUT)
    assert node.role is Role.PROSPECTIVE
    node.handle(FETCH_TIMEOUT + 1, 1, BeginQuorumEpochRequest(3, 1))
    assert node.role is Role.FOLLOWER and node.leader_id == 1


def test_prevote_rejected_by_majority_returns_to_unattached():
    node, _ = boot(2, persisted=QuorumState(3), pre_vote=True)
    node.tick(node.next_deadline())
    assert node.role is Role.PROSPECTIVE
    node.handle(1, 1, VoteResponse(Error.NONE, 3, None, False, pre_vote=True))
    node.handle(2, 3, VoteResponse(Error.NONE, 3, None, False, pre_vote=True))
    assert node.role is Role.UNATTACHED and node.epoch == 3


def test_prevote_timeout_returns_and_tries_again():
    node, _ = boot(2, persisted=QuorumState(3), pre_vote=True)
    node.tick(node.next_deadline())
    node.tick(node.next_deadline())
    assert node.role is Role.UNATTACHED and node.epoch == 3


def grant(node, pre_vote=True, epoch=None, last=(3, 5)):
    request = VoteRequest(node.epoch if epoch is None else epoch, 3, *last, pre_vote=pre_vote)
    return sent(node.handle(10, 3, request), VoteResponse)[0].vote_granted


def test_prevote_grant_rules():
    unattached, _ = boot(2, persisted=QuorumState(3, None, 1), log=log_of(1, 3), pre_vote=True)
    assert grant(unattached)  # votedFor ignored for pre-votes
    assert not grant(unattached, last=(1, 9))  # log must be up to date
    assert unattached.voted_for == 1 and persisted(unattached.handle(11, 3, VoteRequest(3, 3, 3, 5, True))) == []

    follower, _ = make_follower(2, leader=1, epoch=3, pre_vote=True)
    assert grant(follower)  # has not heard from its leader yet
    follower.handle(10, 1, FetchResponse(Error.NONE, 3, 1, None, ()))
    assert not grant(follower)  # the leader is alive

    leader, _ = make_leader(2, epoch=3, pre_vote=True)
    assert not grant(leader)
    candidate, _ = boot(2, persisted=QuorumState(3, None, 2), pre_vote=True)
    assert not grant(candidate)
    resigned, _ = boot(2, persisted=QuorumState(3, 2, 2), pre_vote=True)
    assert not grant(resigned)


def test_prevote_with_higher_epoch_moves_receiver_to_unattached():
    follower, _ = make_follower(2, leader=1, epoch=3, pre_vote=True)
    follower.handle(10, 1, FetchResponse(Error.NONE, 3, 1, None, ()))
    assert grant(follower, epoch=4, last=(3, 0))
    assert follower.role is Role.UNATTACHED and follower.epoch == 4 and follower.voted_for is None


@pytest.mark.parametrize("pre_vote", [False, True])
def test_rejoining_node_deposes_leader_only_without_prevote(pre_vote):
    config = RaftConfig(pre_vote=pre_vote)
    c = Cluster(3, seed=3, config=config).start()
    assert c.run_until(lambda: c.stable_leader() is not None)
    leader = c.stable_leader()
    epoch = c.node(leader).epoch
    victim = next(i for i in c.ids if i != leader)
    c.isolate(victim)
    c.run_for(10_000)
    assert c.node(leader).is_leader  # the majority side keeps going
    if pre_vote:
        assert c.node(victim).epoch == epoch  # stuck pre-voting, epoch not inflated
    else:
        assert c.node(victim).epoch > epoch + 2
    c.heal()
    c.run_for(5_000)
    assert c.run_until(lambda: c.stable_leader() is not None)
    if pre_vote:
        assert c.stable_leader() == leader and c.node(leader).epoch == epoch
    else:
        assert c.node(c.stable_leader()).epoch > epoch
    assert c.violations == []
