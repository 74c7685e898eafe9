"""Observers (``process.roles=broker``): a node outside the voter set replicates but never votes or leads."""

import random

from nodes.raft import (
    MS,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    Error,
    FetchRequest,
    FetchResponse,
    QuorumState,
    RaftConfig,
    RaftNode,
    Role,
    VoteRequest,
    VoteResponse,
)
from nodes.raft.codec import decode, encode
from nodes.raft.events import state_event

from .cluster import Cluster
from .helpers import FETCH_TIMEOUT, T, boot, fetch, make_leader, sent

VOTERS = (1, 2, 3)
BACKOFF = RaftConfig().retry_backoff_ms * MS
REQUEST_TIMEOUT = RaftConfig().request_timeout_ms * MS


def observer(seed: int = 0, **kw):
    return boot(9, VOTERS, seed=seed, **kw)


def test_a_node_outside_the_voter_set_starts_as_an_observer_and_fetches_a_voter():
    node, effects = observer()
    assert node.observer and node.role is Role.UNATTACHED
    (request,) = sent(effects, FetchRequest)
    assert request.replica_id == 9 and request.epoch == 0
    assert [e.dst for e in effects if hasattr(e, "message")][0] in VOTERS


def test_the_random_voter_comes_from_the_seeded_rng():
    def targets(seed: int) -> list[int]:
        node, effects = observer(seed)
        dsts = [e.dst for e in effects if hasattr(e, "message")]
        now = 0
        for _ in range(12):  # each voter answers it knows no leader; the observer backs off and draws again
            src = dsts[-1]
            node.handle(now, src, FetchResponse(Error.NOT_LEADER_OR_FOLLOWER, 0, None, None))
            now += BACKOFF
            dsts += [e.dst for e in node.tick(now) if hasattr(e, "message")]
        return dsts

    assert targets(1) == targets(1)
    assert set(targets(1)) == set(VOTERS)
    assert targets(1) != targets(2)


def test_it_backs_off_after_an_answer_without_a_leader():
    node, _ = observer()
    assert node.next_deadline() == REQUEST_TIMEOUT
    node.handle(0, 1, FetchResponse(Error.NOT_LEADER_OR_FOLLOWER, 0, None, None))
    assert node.next_deadline() == BACKOFF
    assert sent(node.tick(BACKOFF - 1), FetchRequest) == []
    assert len(sent(node.tick(BACKOFF), FetchRequest)) == 1


def test_a_lost_fetch_is_retried_after_the_request_timeout():
    node, _ = observer()
    assert sent(node.tick(REQUEST_TIMEOUT - 1), FetchRequest) == []
    assert len(sent(node.tick(REQUEST_TIMEOUT), FetchRequest)) == 1


def test_it_never_stands_however_long_it_waits():
    node, _ = observer()
    for step in range(1, 200):
        effects = node.tick(step * T)
        assert sent(effects, VoteRequest) == []
        assert node.role is Role.UNATTACHED


def test_a_voter_answer_naming_the_leader_makes_it_a_follower_of_that_leader():
    node, _ = observer()
    effects = node.handle(0, 2, FetchResponse(Error.FENCED_LEADER_EPOCH, 5, 1, 7))
    assert (node.role, node.epoch, node.leader_id) == (Role.FOLLOWER, 5, 1)
    (request,) = sent(effects, FetchRequest, dst=1)
    assert request.epoch == 5 and request.replica_id == 9


def test_a_follower_observer_that_loses_its_leader_searches_instead_of_standing():
    node, _ = boot(9, VOTERS, persisted=QuorumState(4, 1, None))
    assert node.role is Role.FOLLOWER
    effects = node.tick(2 * FETCH_TIMEOUT)
    assert sent(effects, VoteRequest) == []
    assert node.role is Role.UNATTACHED and node.epoch == 4 and node.leader_id is None
    assert len(sent(effects, FetchRequest)) == 1


def test_it_adopts_a_higher_epoch_but_never_grants_a_vote_or_pre_vote():
    node, _ = observer()
    for pre_vote in (False, True):
        effects = node.handle(0, 2, VoteRequest(3, 2, 0, 0, pre_vote=pre_vote))
        (response,) = sent(effects, VoteResponse)
        assert response.vote_granted is False
        assert node.voted_for is None and node.role is Role.UNATTACHED and node.epoch == 3


def test_a_restarted_observer_ignores_a_persisted_vote():
    node, effects = boot(9, VOTERS, persisted=QuorumState(4, None, 9))
    assert node.role is Role.UNATTACHED and node.voted_for is None
    assert sent(effects, VoteRequest) == []


def test_the_leader_answers_observers_counts_only_voters_and_lists_observers_apart():
    node, _ = make_leader(1, epoch=1)
    assert fetch(node, 9, 0, 0, now=3).records[0].control
    fetch(node, 9, 1, 1, now=4)
    fetch(node, 8, 1, 1, now=4)
    assert node._leader.high_watermark is None  # two observers are not a majority of the voters
    fetch(node, 2, 1, 1, now=5)
    assert node._leader.high_watermark == 1
    fetch(node, 9, 1, 1, now=6)
    (response,) = sent(node.handle(7, 99, DescribeQuorumRequest()), DescribeQuorumResponse)
    assert [v.replica_id for v in response.voters] == [1, 2, 3]
    assert [(o.replica_id, o.log_end_offset, o.last_fetch_time) for o in response.observers] == [(8, 1, 4), (9, 1, 6)]
    assert decode(encode(response)) == response


def test_an_observer_replicates_and_learns_the_high_watermark():
    leader, _ = make_leader(1, epoch=1)
    fetch(leader, 2, 1, 1)  # voter 2 commits the LeaderChange record
    node, _ = boot(9, VOTERS, persisted=QuorumState(1, 1, None))
    effects = node.handle(0, 1, fetch(leader, 9, 0, 0))
    assert node.log_end_offset == 1
    node.flushed(0, 1)
    assert node.high_watermark == 1
    assert sent(effects, FetchRequest, dst=1) or node._fetch_inflight


def test_append_on_an_observer_is_refused_with_the_leader_hint():
    node = RaftNode(9, VOTERS, rng=random.Random(0))
    node.start(0, QuorumState(2, 1, None))
    (reply,) = [e for e in node.append(0, b"x", "r") if type(e).__name__ == "Reply"]
    assert reply.error is Error.NOT_LEADER_OR_FOLLOWER and reply.leader_id == 1


def test_in_a_cluster_observers_follow_replicate_and_never_vote_or_lead():
    c = Cluster(5, seed=3, voters=3).start()
    c.run_for(3_000)
    leader = c.stable_leader()
    assert leader in VOTERS
    for i in range(6):
        c.call(leader, "append", f"x{i}".encode(), f"a{i}")
    c.run_for(2_000)
    hw = c.node(leader).high_watermark
    for i in (4, 5):
        assert c.node(i).role is Role.FOLLOWER and c.node(i).leader_id == leader
        assert c.node(i).high_watermark == hw >= 7
    c.crash(leader)
    c.run_for(5_000)
    new = c.stable_leader()
    assert new in VOTERS and new != leader
    assert all(c.node(i).leader_id == new for i in (4, 5))
    observed = [e for e in c.events if e["type"] == "state" and e["node"] in ("n4", "n5")]
    assert observed and {e["role"] for e in observed} <= {"unattached", "follower"}
    assert all(e["voted_for"] is None for e in observed)
    assert c.violations == [] and c.fatal == {}


def test_the_simulator_invariant_flags_an_observer_that_votes_or_stands():
    c = Cluster(4, seed=1, voters=3).start()
    check = c.sim.invariants
    check.on_event(c.sim.nodes[3], state_event(3, 0, 1, "candidate", None, 3))  # a voter may stand
    assert check.violations == []
    check.on_event(c.sim.nodes[4], state_event(4, 0, 1, "candidate", None, 4))
    check.on_event(c.sim.nodes[4], state_event(4, 0, 2, "unattached", None, 1))
    assert {v["invariant"] for v in check.violations} == {"ObserverNeverVotesOrLeads"}
    assert [(v["role"], v["voted_for"]) for v in check.violations] == [("candidate", "n4"), ("unattached", "n1")]
    assert "ObserverNeverVotesOrLeads" in check.result()["checked"]
    assert "ObserverNeverVotesOrLeads" not in Cluster(3, seed=1).start().sim.invariants.result()["checked"]


def test_an_observer_shuts_down_at_once_even_with_no_leader_known():
    """Nothing waits for an observer (it holds no vote and no leadership): its graceful shutdown ends at once."""
    node, _ = observer()
    assert node.leader_id is None
    node.shutdown(0, 5_000)
    assert node.shutdown_status == "completed"
