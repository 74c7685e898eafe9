"""Leader leases in the sans-IO core (``RaftConfig.lease_reads``): reads answered from the leader's state
while its lease lasts, on the monotonic clock; followers' promises; and the ``lease-wall-clock`` bug."""

from __future__ import annotations

import random

import pytest

from nodes.kv import OK, ClientReply, KVNode
from nodes.raft import AppendLog, FetchRequest, FetchResponse, RaftConfig, RaftNode, Role, VoteRequest, VoteResponse
from nodes.raft.codec import decode, encode
from nodes.raft.errors import Error
from nodes.raft.leader import LeaderState
from tests.nodes.raft.cluster import Cluster

MS = 1_000_000
LEASE = RaftConfig(lease_reads=True)  # election timeout 1000 ms, margin 100 ms: a 900 ms lease


def cluster(n: int = 3, *, config: RaftConfig = LEASE, bugs: tuple[str, ...] = (), seed: int = 1) -> Cluster:
    c = Cluster(n, seed=seed, config=config, bugs=bugs, factory=KVNode, clock_source="wall").start()
    assert c.run_until(lambda: c.stable_leader() is not None)
    c.run_for(300)  # a few fetch rounds: every follower has echoed a lease token
    return c


def read(c: Cluster, node: int, rid: str, key: str = "k") -> tuple[list, ClientReply | None]:
    """Submit a read; its effects and, if it was answered in the same step, the reply."""
    effects = c.call(node, "submit", rid, "read", key, None)
    replies = [e for e in effects if isinstance(e, ClientReply)]
    return effects, replies[0] if replies else None


def votes(effects: list) -> list[VoteResponse]:
    return [e.message for e in effects if isinstance(getattr(e, "message", None), VoteResponse)]


def write(c: Cluster, node: int, rid: str, value: int, key: str = "k") -> ClientReply:
    c.call(node, "submit", rid, "write", key, value)
    assert c.run_until(lambda: rid in c.replies, 3_000)
    return c.replies[rid][1]


def test_lease_reads_skip_the_log_and_see_every_acknowledged_write() -> None:
    c = cluster()
    lid = c.stable_leader()
    assert write(c, lid, "w1", 7).type == OK
    effects, reply = read(c, lid, "r1")
    assert reply == ClientReply("r1", OK, 7, None, lid)
    assert not any(isinstance(e, AppendLog) for e in effects)  # no log round trip
    assert not any(b'"f":"read"' in r.payload for r in c.node(lid).log_records() if not r.control)


def test_without_the_option_reads_go_through_the_log() -> None:
    c = cluster(config=RaftConfig())
    lid = c.stable_leader()
    effects, reply = read(c, lid, "r1")
    assert reply is None and any(isinstance(e, AppendLog) for e in effects)
    assert not c.node(lid).lease_holds(c.now, mono=c.now)


def test_followers_never_serve_lease_reads() -> None:
    c = cluster()
    lid = c.stable_leader()
    other = next(i for i in c.ids if i != lid)
    _, reply = read(c, other, "r1")
    assert reply is not None and reply.error == "not-leader"


def test_the_lease_ends_a_margin_before_the_election_timeout_after_the_last_majority_fetch() -> None:
    c = cluster()
    lid = c.stable_leader()
    raft = c.node(lid)
    c.isolate(lid)
    cut_at = c.now
    assert raft._leader is not None
    start = raft._leader.lease_start()  # the answer a majority last acknowledged, at most a fetch round ago
    assert start is not None and cut_at - 600 * MS <= start <= cut_at
    end = start + LEASE.lease_ns
    c.run_for((end - c.now) // MS - 5)
    assert raft.lease_holds(c.now, mono=c.now)
    c.run_for(10)
    assert not raft.lease_holds(c.now, mono=c.now)
    assert raft.is_leader  # still leader (check-quorum waits 1.5 fetch timeouts): reads go to the log again
    effects, reply = read(c, lid, "r-late")
    assert reply is None and any(isinstance(e, AppendLog) for e in effects)


def test_a_new_leader_needs_no_lease_until_it_commits_in_its_epoch() -> None:
    node = KVNode(1, [1, 2, 3], LEASE, random.Random(0))
    node.start(0)
    node.handle(0, 2, VoteResponse(Error.NONE, 0, None, True))  # stale: ignored
    assert not node.raft.lease_holds(0)


def test_a_follower_that_heard_from_the_leader_refuses_votes_for_an_election_timeout() -> None:
    c = cluster()
    lid = c.stable_leader()
    follower = next(i for i in c.ids if i != lid)
    raft = c.node(follower)
    epoch = raft.epoch
    vote = VoteRequest(epoch + 1, next(i for i in c.ids if i not in (lid, follower)), 0, 0)
    effects = c.call(follower, "handle", vote.candidate_id, vote, None)
    (answer,) = votes(effects)
    assert not answer.vote_granted and answer.epoch == epoch and raft.epoch == epoch and raft.role is Role.FOLLOWER
    # cut off from the leader, the promise runs out a minimum election timeout after the last answer
    c.isolate(lid)
    c.run_for(LEASE.election_timeout_ms + 50)
    assert raft.epoch >= epoch  # may have stood itself by now; a vote request of a higher epoch is granted
    higher = VoteRequest(raft.epoch + 1, vote.candidate_id, raft.last_log_epoch, raft.log_end_offset)
    effects = c.call(follower, "handle", higher.candidate_id, higher, None)
    (answer,) = votes(effects)
    assert answer.vote_granted and raft.epoch == higher.epoch


def test_a_wall_clock_jump_does_not_make_a_promised_follower_stand() -> None:
    """clock.source=wall: a follower's fetch timeout fires at a +30 s step of its wall clock, but while the leader
    keeps answering its fetches it has promised not to stand: no election, the leader keeps its lease."""
    c = cluster()
    lid = c.stable_leader()
    epoch = c.node(lid).epoch
    for i in c.ids:
        if i != lid:
            c.sim.nodes[i].clock_offset += 30_000 * MS
            c.sim.nodes[i].clock_changed()
    c.run_for(3_000)
    assert c.stable_leader() == lid and all(c.node(i).epoch == epoch for i in c.ids)
    assert c.node(lid).lease_holds(c.sim.nodes[lid].core_now(), mono=c.now)


def test_without_leases_the_same_jump_starts_an_election() -> None:
    c = cluster(config=RaftConfig())
    lid = c.stable_leader()
    epoch = c.node(lid).epoch
    for i in c.ids:
        if i != lid:
            c.sim.nodes[i].clock_offset += 30_000 * MS
            c.sim.nodes[i].clock_changed()
    c.run_for(3_000)
    assert max(c.node(i).epoch for i in c.ids) > epoch


def test_a_restarted_node_keeps_the_promise_it_may_have_made() -> None:
    c = cluster()
    lid = c.stable_leader()
    follower = next(i for i in c.ids if i != lid)
    c.restart(follower)
    raft = c.node(follower)
    candidate = next(i for i in c.ids if i not in (lid, follower))
    vote = VoteRequest(raft.epoch + 1, candidate, raft.last_log_epoch, raft.log_end_offset)
    effects = c.call(follower, "handle", candidate, vote, None)
    (answer,) = votes(effects)
    assert not answer.vote_granted


def stale_read_after_step_back(bugs: tuple[str, ...]) -> ClientReply | None:
    """The old leader's wall clock steps back 5 s, it is cut off from the other nodes (not from clients), they
    elect a leader that commits a write; 2 s after the cut a client reads at the old leader."""
    c = cluster(n=3, bugs=bugs, seed=3)
    old = c.stable_leader()
    assert write(c, old, "w1", 1).type == OK
    c.run_for(200)
    c.sim.nodes[old].clock_offset -= 5_000 * MS
    c.sim.nodes[old].clock_changed()
    c.run_for(50)
    c.isolate(old)
    assert c.run_until(lambda: c.leader() not in (None, old), 5_000)
    new = c.leader()
    assert write(c, new, "w2", 2).type == OK
    assert c.node(old).is_leader  # check-quorum has not fired yet
    _, reply = read(c, old, "r-old")
    return reply


def test_lease_wall_clock_bug_serves_a_stale_read_after_a_step_back() -> None:
    reply = stale_read_after_step_back(("lease-wall-clock",))
    assert reply is not None and reply.type == OK and reply.value == 1  # stale: 2 was acknowledged


def test_the_monotonic_lease_refuses_the_same_read() -> None:
    assert stale_read_after_step_back(()) is None  # not answered from the lease: it goes to the log


def test_lease_start_is_the_majority_th_token() -> None:
    state = LeaderState(3, 1, [1, 2, 3, 4, 5], 0, 0)
    assert state.lease_start() is None
    state.record_lease(2, 100)
    assert state.lease_start() is None  # the leader and one follower are not a majority of five
    state.record_lease(3, 300)
    state.record_lease(4, 200)
    assert state.lease_start() == 200
    state.record_lease(3, 50)  # an older token echoed late never lowers what a voter acknowledged
    assert state.lease_start() == 200
    state.record_lease(9, 10_000)  # not a voter
    assert state.lease_start() == 200


def test_lease_tokens_travel_on_the_wire() -> None:
    request = FetchRequest(3, 2, 10, 3, 500, 123_456_789_012)
    response = FetchResponse(Error.NONE, 3, 1, 9, lease_token=987_654_321_000)
    assert decode(encode(request)) == request and decode(encode(response)) == response
    assert decode(encode(FetchRequest(3, 2, 10, 3))).lease_token is None


def test_drift_margin_is_validated() -> None:
    assert RaftConfig(lease_reads=True).lease_ns == 900 * MS
    # a margin as long as the election timeout leaves no lease (a short timeout with the default margin)
    assert RaftConfig(lease_drift_margin_ms=1000).lease_ns == 0
    assert RaftConfig(election_timeout_ms=50, lease_reads=True).lease_ns == 0
    with pytest.raises(ValueError, match="lease_drift_margin_ms"):
        RaftConfig(lease_drift_margin_ms=-1)


def test_a_single_voter_always_holds_its_lease_once_it_committed() -> None:
    node = RaftNode(1, [1], LEASE, random.Random(0))
    node.start(0)
    node.tick(2_000 * MS)  # the election timeout (and the start-up promise) passed: it elects itself
    node.flushed(2_001 * MS, 1)
    assert node.is_leader and node.lease_holds(2_002 * MS)
