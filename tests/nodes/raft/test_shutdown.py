"""Graceful shutdown (RaftNode.shutdown, the seed's GracefulShutdown): each role's rule and the bounding timer."""

import pytest

from nodes.raft import (
    MS,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    Error,
    QuorumState,
    RaftConfig,
    Role,
    VoteRequest,
    VoteResponse,
)

from .cluster import Cluster
from .helpers import T, boot, make_follower, make_leader, sent

BOUND_MS = 5_000
BOUND = BOUND_MS * MS


def test_leader_resigns_with_end_quorum_epoch_and_waits_for_a_successor():
    node, _ = make_leader(1, epoch=3)
    effects = node.shutdown(0, BOUND_MS)
    assert node.role is Role.RESIGNED
    assert {m.epoch for m in sent(effects, EndQuorumEpochRequest)} == {3}
    assert node.shutdown_status == "running"
    # no election timeout makes it stand again while shutting down
    assert sent(node.tick(3 * T), VoteRequest) == []
    assert node.role is Role.RESIGNED and node.shutdown_status == "running"
    # a successor's BeginQuorumEpoch ends it
    node.handle(3 * T + 1, 2, BeginQuorumEpochRequest(4, 2))
    assert node.shutdown_status == "completed"
    assert node.next_deadline() is None
    assert node.tick(BOUND * 2) == []  # the node takes no more inputs


def test_a_successor_is_elected_without_waiting_an_election_timeout():
    c = Cluster(3, seed=5).start()
    assert c.run_until(lambda: c.stable_leader() is not None)
    old = c.stable_leader()
    epoch = c.node(old).epoch
    start = c.now
    c.call(old, "shutdown", BOUND_MS)
    assert c.run_until(lambda: c.node(old).shutdown_status != "running", BOUND_MS)
    assert c.node(old).shutdown_status == "completed"
    successor = c.node(old).leader_id
    assert successor not in (None, old) and c.node(successor).is_leader
    assert c.node(successor).epoch == epoch + 1
    assert c.now - start < RaftConfig().election_timeout_ms * MS


def test_follower_stops_at_once():
    node, _ = make_follower(2, leader=1, epoch=2)
    assert node.shutdown(10, BOUND_MS) == []
    assert node.shutdown_status == "completed"
    assert node.next_deadline() is None


def test_only_voter_stops_at_once():
    node, _ = make_leader(1, voters=(1,), epoch=1)
    node.shutdown(0, BOUND_MS)
    assert node.shutdown_status == "completed"


@pytest.mark.parametrize("voted", [None, 3], ids=["unattached", "voted"])
def test_unattached_or_voted_waits_for_the_timer(voted):
    node, _ = boot(1, persisted=QuorumState(2, None, voted))
    assert node.role is (Role.UNATTACHED if voted is None else Role.VOTED)
    node.shutdown(0, BOUND_MS)
    assert node.next_deadline() <= BOUND
    assert sent(node.tick(BOUND - 1), VoteRequest) == []  # its election timeouts passed: it does not stand
    assert node.role is not Role.CANDIDATE and node.shutdown_status == "running"
    assert node.next_deadline() == BOUND
    node.tick(BOUND)
    assert node.shutdown_status == "timed-out"
    assert node.epoch == 2


def test_unattached_finishes_when_an_epoch_bump_brings_a_leader():
    node, _ = boot(1, persisted=QuorumState(2, None, None))
    node.shutdown(0, BOUND_MS)
    # a vote request of a higher epoch moves it on, and it still votes: a successor needs it
    effects = node.handle(1, 2, VoteRequest(3, 2, 0, 0))
    assert [m.vote_granted for m in sent(effects, VoteResponse)] == [True]
    assert node.epoch == 3 and node.shutdown_status == "running"
    node.handle(2, 2, BeginQuorumEpochRequest(3, 2))
    assert node.shutdown_status == "completed"


def test_candidate_keeps_its_election_going_and_resigns_when_it_wins():
    node, _ = boot(1, persisted=QuorumState(4, None, 1))
    assert node.role is Role.CANDIDATE
    node.shutdown(0, BOUND_MS)
    # the election times out: no backoff, no new epoch; it asks again those that have not answered
    effects = node.tick(3 * T)
    assert {(m.epoch, m.candidate_id) for m in sent(effects, VoteRequest)} == {(4, 1)}
    assert node.role is Role.CANDIDATE and node.epoch == 4
    effects = node.handle(3 * T + 1, 2, VoteResponse(Error.NONE, 4, None, True))
    assert node.role is Role.RESIGNED and node.epoch == 4
    assert sent(effects, EndQuorumEpochRequest)
    assert node.shutdown_status == "running"


def test_candidate_finishes_when_another_leader_appears():
    node, _ = boot(1, persisted=QuorumState(4, None, 1))
    node.shutdown(0, BOUND_MS)
    node.handle(1, 2, BeginQuorumEpochRequest(5, 2))
    assert node.role is Role.FOLLOWER and node.shutdown_status == "completed"


def test_candidate_that_cannot_win_waits_for_the_timer():
    node, _ = boot(1, persisted=QuorumState(4, None, 1))
    node.shutdown(0, BOUND_MS)
    node.handle(1, 2, VoteResponse(Error.NONE, 4, None, False))
    node.handle(1, 3, VoteResponse(Error.NONE, 4, None, False))
    assert node.next_deadline() == BOUND
    assert sent(node.tick(BOUND - 1), VoteRequest) == [] and node.epoch == 4
    node.tick(BOUND)
    assert node.shutdown_status == "timed-out"


@pytest.mark.parametrize("role", ["leader", "candidate", "unattached"])
def test_the_timer_bounds_every_case(role):
    if role == "leader":
        node, _ = make_leader(1, epoch=3)
    elif role == "candidate":
        node, _ = boot(1, persisted=QuorumState(4, None, 1))
    else:
        node, _ = boot(1)
    node.shutdown(0, 300)
    now = 0
    while node.shutdown_status == "running":
        now = node.next_deadline()
        assert now is not None and now <= 300 * MS
        node.tick(now)
    assert node.shutdown_status == "timed-out" and now == 300 * MS


def test_shutdown_is_idempotent_and_checks_its_bound():
    node, _ = boot(1)
    with pytest.raises(ValueError):
        node.shutdown(0, -1)
    node.shutdown(0, 100)
    node.shutdown(50 * MS, 10_000)  # a second call keeps the first bound
    assert node.next_deadline() == 100 * MS
    assert node.status()["shutdown"] == "running"


def test_with_pre_vote_no_pre_vote_round_starts_while_shutting_down():
    node, _ = boot(1, pre_vote=True)
    node.shutdown(0, BOUND_MS)
    effects = node.tick(3 * T)
    assert sent(effects, VoteRequest) == [] and node.role is Role.UNATTACHED
    node.tick(BOUND)
    assert node.shutdown_status == "timed-out"


def test_a_resigned_leader_still_votes_for_its_successor():
    node, _ = make_leader(1, epoch=3)
    node.shutdown(0, BOUND_MS)
    effects = node.handle(1, 2, VoteRequest(4, 2, node.last_log_epoch, node.log_end_offset))
    assert [m.vote_granted for m in sent(effects, VoteResponse)] == [True]
    assert node.shutdown_status == "running"
